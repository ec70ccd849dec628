-- Who pgplace acts for, and what its capture trigger turns into JSON: the second hostile
-- battery (issue 42's audit of 0.8.7). There, a table owner became a superuser through the
-- capture trigger (a column of its own type with a cast to json, added after the watch by
-- ALTER TYPE ... CASCADE on a typed table, or through a partitioned parent), and a
-- pgplace_admin's code, run by PostgreSQL on someone else's behalf (an index expression
-- during a DBA's ANALYZE, a SECURITY DEFINER function a DBA called), was authorized as the
-- session's login. Every hook calls hostile_callers.escalate, which logs who ran it and,
-- run by a superuser, makes its planter a superuser and runs a shell command (a file in
-- /tmp, which no rollback takes back). At the end: no role changed, no file, no hook ran as
-- anyone but its planter, and every refusal has its SQLSTATE.
\set VERBOSITY terse
\getenv abs_srcdir PG_ABS_SRCDIR
\set roles_sql :abs_srcdir '/../../sql/roles.sql'
SELECT current_database() AS main_db, current_database() || '_callers_db' AS callers_db,
       'regress_callers_' || current_database() || '_' AS prefix \gset
\set pgplace_reader :prefix 'readers'
\set pgplace_player :prefix 'players'
\set pgplace_admin :prefix 'admins'
\set owner :prefix 'owner'
\set admin :prefix 'admin'
\set admin2 :prefix 'admin2'
-- A file of this run's own: one an earlier run left must not fail this one.
SELECT '/tmp/pgplace_' || current_database() || '_callers_escalated_' || md5(random()::text) AS file \gset
SET client_min_messages = warning;
DROP DATABASE IF EXISTS :"callers_db" WITH (FORCE);
DROP ROLE IF EXISTS :"admin", :"admin2", :"owner", :"pgplace_player", :"pgplace_admin", :"pgplace_reader";
RESET client_min_messages;
CREATE DATABASE :"callers_db";
\c :"callers_db"
\set ECHO none
CREATE EXTENSION pgplace;
\i :roles_sql
\set ECHO all
-- A table owner in no pgplace role; an admin who is a member of it (it may watch the
-- owner's tables); an admin with a schema of its own and nothing else.
CREATE ROLE :"owner" LOGIN;
CREATE ROLE :"admin" LOGIN IN ROLE :"pgplace_admin", :"owner";
CREATE ROLE :"admin2" LOGIN IN ROLE :"pgplace_admin";
CREATE SCHEMA o AUTHORIZATION :"owner";
CREATE SCHEMA a2 AUTHORIZATION :"admin2";
-- The DBA's table, which no one else may read.
CREATE TABLE secret (id int PRIMARY KEY, pw text);
INSERT INTO secret VALUES (1, 'hunter2');

CREATE SCHEMA hostile_callers;
GRANT USAGE ON SCHEMA hostile_callers TO PUBLIC;
CREATE TABLE hostile_callers.log (hook text, ran_as name, session_as name, was_superuser boolean);
GRANT INSERT ON hostile_callers.log TO PUBLIC;
-- Who planted which hook (psql's variables do not reach into function bodies).
CREATE TABLE hostile_callers.planters (label text PRIMARY KEY, rolname name NOT NULL);
INSERT INTO hostile_callers.planters VALUES ('owner', :'owner'), ('admin2', :'admin2');
GRANT SELECT ON hostile_callers.planters TO PUBLIC;
-- The shell command first: no rollback takes it back, whatever fails after it.
CREATE FUNCTION hostile_callers.escalate(hook text, planter text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO hostile_callers.log
    VALUES (hook, current_user, session_user, (SELECT rolsuper FROM pg_roles WHERE rolname = current_user));
    IF (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN
        EXECUTE format('COPY (SELECT 1) TO PROGRAM %L', 'touch ' || current_setting('hostile_callers.file'));
        EXECUTE format('ALTER ROLE %I SUPERUSER',
                       (SELECT p.rolname FROM hostile_callers.planters p WHERE p.label = planter));
    END IF;
END
$$;
GRANT EXECUTE ON FUNCTION hostile_callers.escalate(text, text) TO PUBLIC;
ALTER DATABASE :"callers_db" SET hostile_callers.file = :'file';
SET hostile_callers.file = :'file';
-- Runs a statement: 'ok', or the SQLSTATE it failed with.
CREATE FUNCTION hostile_callers.try(statement text) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE statement;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE;
END
$$;
GRANT EXECUTE ON FUNCTION hostile_callers.try(text) TO PUBLIC;
-- The same, noting what was tried and how it ended (from hooks in immutable functions).
CREATE TABLE hostile_callers.tried (what text, outcome text);
GRANT INSERT ON hostile_callers.tried TO PUBLIC;
CREATE FUNCTION hostile_callers.note(what text, statement text) RETURNS void
LANGUAGE sql AS $$ INSERT INTO hostile_callers.tried VALUES (what, hostile_callers.try(statement)) $$;
GRANT EXECUTE ON FUNCTION hostile_callers.note(text, text) TO PUBLIC;

-- 1. A column of a type with a cast to json, after the watch.
SET SESSION AUTHORIZATION :"owner";
CREATE TYPE o.evil AS ENUM ('x');
CREATE FUNCTION o.evil_json(o.evil) RETURNS json LANGUAGE plpgsql AS $$
BEGIN
    PERFORM hostile_callers.escalate('cast to json', 'owner');
    RETURN '"x"';
END $$;
CREATE CAST (o.evil AS json) WITH FUNCTION o.evil_json(o.evil);
CREATE TYPE o.rowt AS (id int, v text);
CREATE TABLE o.typed OF o.rowt (PRIMARY KEY (id));
SET SESSION AUTHORIZATION :"admin";
SELECT place.watch('o.typed');
-- A typed table's type altered with CASCADE: the guard refuses (it was not asked before).
SET SESSION AUTHORIZATION :"owner";
SELECT hostile_callers.try('ALTER TYPE o.rowt ADD ATTRIBUTE z o.evil CASCADE') AS alter_type;
-- With the guard out of the way (as any way past it would), the capture trigger refuses
-- every write, as the owner and as the DBA, before a row is turned into JSON.
RESET SESSION AUTHORIZATION;
ALTER EVENT TRIGGER pgplace_guard_watched_tables DISABLE;
SET SESSION AUTHORIZATION :"owner";
SELECT hostile_callers.try('ALTER TYPE o.rowt ADD ATTRIBUTE z o.evil CASCADE') AS alter_type_unguarded;
SELECT hostile_callers.try($$INSERT INTO o.typed VALUES (1, 'v', 'x')$$) AS owner_insert;
RESET SESSION AUTHORIZATION;
ALTER EVENT TRIGGER pgplace_guard_watched_tables ENABLE ALWAYS;
SELECT hostile_callers.try($$INSERT INTO o.typed VALUES (2, 'v', 'x')$$) AS dba_insert;
SELECT hostile_callers.try($$UPDATE o.typed SET v = 'w'$$) AS dba_update;
SELECT count(*) AS staged FROM place.changes WHERE tbl = 'o.typed'::regclass;
SET SESSION AUTHORIZATION :"admin";
SELECT place.unwatch('o.typed');
-- A watched table attached as a partition, then a column added to the parent: refused at
-- the attach (a partition is not watchable).
SET SESSION AUTHORIZATION :"admin2";
CREATE TABLE a2.w (id int PRIMARY KEY, v text);
SELECT place.watch('a2.w');
CREATE TABLE a2.parted (id int, v text) PARTITION BY RANGE (id);
SELECT hostile_callers.try('ALTER TABLE a2.parted ATTACH PARTITION a2.w FOR VALUES FROM (0) TO (1000)') AS attach;
SELECT relispartition FROM pg_class WHERE oid = 'a2.w'::regclass;

-- 2. Code PostgreSQL runs on a DBA's behalf is authorized as the role it runs as, never as
-- the DBA's login.
-- An expression index whose function, run by someone else (current_user differs from
-- session_user), watches the DBA's table, makes a view over it, and makes a view whose
-- filter holds a literal of a composite type whose domain CHECK escalates.
CREATE FUNCTION a2.chk(i int) RETURNS boolean LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    PERFORM hostile_callers.escalate('domain check in a filter', 'admin2');
    RETURN true;
END $$;
CREATE DOMAIN a2.dom AS int CHECK (a2.chk(VALUE));
CREATE TYPE a2.comp AS (x a2.dom);
CREATE TABLE a2.x (id int PRIMARY KEY, v int);
SELECT place.watch('a2.x');
CREATE FUNCTION a2.hook(i int) RETURNS int LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF current_user <> session_user THEN
        PERFORM hostile_callers.note('watch', $q$SELECT place.watch('public.secret')$q$);
        PERFORM hostile_callers.note('create_view', $q$SELECT place.create_view('leak', 'public.secret', 'id')$q$);
        PERFORM hostile_callers.note('filter', $q$SELECT place.create_view('z', 'a2.x', 'id', $f$('(1)'::a2.comp) IS NOT NULL$f$)$q$);
        PERFORM hostile_callers.note('kick', $q$SELECT place.kick('a2.x', '{"id": 1}')$q$);
    END IF;
    RETURN i;
END $$;
CREATE TABLE a2.z (id int PRIMARY KEY);
INSERT INTO a2.z SELECT generate_series(1, 5);
CREATE INDEX ON a2.z (a2.hook(id));
RESET SESSION AUTHORIZATION;
ANALYZE a2.z;
-- The same from a SECURITY DEFINER function of the admin's that the DBA calls: it runs as
-- the admin, and is authorized as the admin.
SET SESSION AUTHORIZATION :"admin2";
CREATE FUNCTION a2.sneak() RETURNS void LANGUAGE plpgsql SECURITY DEFINER AS $$
BEGIN
    PERFORM hostile_callers.note('definer watch', $q$SELECT place.watch('public.secret')$q$);
    PERFORM hostile_callers.note('definer create_view', $q$SELECT place.create_view('leak2', 'public.secret', 'id')$q$);
END $$;
RESET SESSION AUTHORIZATION;
SELECT a2.sneak();
SELECT DISTINCT what, outcome FROM hostile_callers.tried ORDER BY what, outcome;
-- The DBA's table is not watched, and no view shows it.
SELECT count(*) AS secret_watched FROM place.watches WHERE tbl = 'public.secret'::regclass;
SELECT count(*) AS views_of_secret FROM place.views WHERE tbl = 'public.secret'::regclass;
-- A view's creator is the role that called create_view.
SET SESSION AUTHORIZATION :"admin2";
SELECT place.create_view('mine', 'a2.x', 'id');
RESET SESSION AUTHORIZATION;
SELECT name, created_by = :'admin2'::regrole AS made_by_admin2 FROM place.views WHERE name = 'mine';
-- Another admin may not drop it; its creator may.
SET SESSION AUTHORIZATION :"admin";
SELECT hostile_callers.try($$SELECT place.drop_view('mine')$$) AS other_admin_drop;
SET SESSION AUTHORIZATION :"admin2";
SELECT place.drop_view('mine') AS creator_drop, place.drop_view('mine') AS again;
RESET SESSION AUTHORIZATION;
-- A role outside pgplace_admin may not call the entry points at all, even on its own table.
SET SESSION AUTHORIZATION :"owner";
CREATE TABLE o.plain (id int PRIMARY KEY);
SELECT hostile_callers.try($$SELECT place.watch('o.plain')$$) AS owner_watch;
SELECT hostile_callers.try($$SELECT place.create_view('v', 'o.plain', 'id')$$) AS owner_create_view;
RESET SESSION AUTHORIZATION;

-- A capture trigger renamed by the table's owner goes with unwatch all the same.
SET SESSION AUTHORIZATION :"admin2";
CREATE TABLE a2.renamed (id int PRIMARY KEY);
SELECT place.watch('a2.renamed');
ALTER TRIGGER pgplace_watch_insert ON a2.renamed RENAME TO kept_logging;
SELECT place.unwatch('a2.renamed');
SELECT count(*) AS capture_triggers_left FROM pg_trigger
WHERE tgrelid = 'a2.renamed'::regclass AND tgfoid = 'place._capture_changes()'::regprocedure;
RESET SESSION AUTHORIZATION;

-- 3. A table dropped by DROP TYPE ... CASCADE leaves no watch and no view.
SET SESSION AUTHORIZATION :"admin2";
CREATE TYPE a2.rt AS (id int, v int);
CREATE TABLE a2.typed2 OF a2.rt (PRIMARY KEY (id));
SELECT place.watch('a2.typed2');
SELECT place.create_view('typed2_view', 'a2.typed2', 'id');
SELECT 'a2.typed2'::regclass::oid AS typed2 \gset
DROP TYPE a2.rt CASCADE;
RESET SESSION AUTHORIZATION;
SELECT count(*) AS typed2_watches FROM place.watches WHERE tbl::oid = :typed2;
SELECT count(*) AS typed2_views FROM place.views WHERE tbl::oid = :typed2;

-- Afterwards: no role of this test is a superuser, no file was written, and every hook
-- that ran, ran as its planter.
SELECT rolname FROM pg_roles WHERE rolsuper AND rolname LIKE 'regress_callers_%';
SELECT pg_stat_file(:'file', true) IS NULL AS no_file;
SELECT DISTINCT hook, ran_as = (CASE WHEN hook = 'cast to json' THEN :'owner' ELSE :'admin2' END) AS ran_as_planter,
       was_superuser
FROM hostile_callers.log ORDER BY hook;

\c :"main_db"
SET client_min_messages = warning;
DROP DATABASE :"callers_db" WITH (FORCE);
DROP ROLE :"admin", :"admin2", :"owner";
\set ECHO none
SELECT format('DROP ROLE %I', r) FROM unnest(ARRAY[:'pgplace_player', :'pgplace_admin', :'pgplace_reader']) r \gexec
\set ECHO all
RESET client_min_messages;
