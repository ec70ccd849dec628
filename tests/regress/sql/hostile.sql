-- The hostile-owner battery (issue 42). pgplace's SECURITY DEFINER functions run as the
-- extension's owner, a superuser, and read tables that other roles own; PostgreSQL runs a
-- table's owner's code while it plans a read of the table (partial-index predicates, index
-- expressions and statistics expressions are constant-folded), and a view's query names its
-- table by text. Here a table owner plants every hook PostgreSQL gives it - on the planner,
-- on a write, and a view swapped in for the table - and a pgplace_admin plants its own in
-- pg_temp; then every entry point of pgplace that touches the table is driven by a DBA (the
-- superuser), the admin, a pgplace_player (the gateway) and a login with no grants. Each
-- hook calls hostile_a.escalate, which logs who ran it and, when that is a superuser, makes
-- the role that planted it a superuser and runs a shell command (it touches a file in /tmp,
-- which no rollback takes back). At the end: no role, membership or ownership changed, no
-- file, no hook that ran as anyone but the role that planted it.
--
-- sql/roles.sql takes schema place from PUBLIC: this file works in a database of its own,
-- dropped at the end (as roles.sql does). Each step runs in a new connection: a backend
-- keeps an index's predicate and expressions once it has folded them, so only a new one is
-- sure to run them again. Errors show as SQLSTATEs (messages name roles and oids).
\set VERBOSITY terse
\getenv abs_srcdir PG_ABS_SRCDIR
\set roles_sql :abs_srcdir '/../../sql/roles.sql'
-- (Not regress_<database>_..., which roles.sql counts as its own.)
SELECT current_database() AS main_db, current_database() || '_hostile_db' AS hostile_db,
       'regress_hostile_' || current_database() || '_' AS prefix \gset
\set pgplace_reader :prefix 'readers'
\set pgplace_player :prefix 'players'
\set pgplace_admin :prefix 'admins'
\set owner :prefix 'owner'
\set admin :prefix 'admin'
\set player :prefix 'player'
\set nobody :prefix 'nobody'
-- What a run that was cut short left behind.
SET client_min_messages = warning;
DROP DATABASE IF EXISTS :"hostile_db" WITH (FORCE);
DROP ROLE IF EXISTS :"owner", :"admin", :"player", :"nobody", :"pgplace_player", :"pgplace_admin", :"pgplace_reader";
RESET client_min_messages;
CREATE DATABASE :"hostile_db";
\c :"hostile_db"
-- PGPLACE_HOSTILE_VERSION=0.8.5 (in pg_regress's environment) runs the battery against that
-- version's install script, if the extension directory has it.
\set ECHO none
\getenv hostile_version PGPLACE_HOSTILE_VERSION
\if :{?hostile_version}
CREATE EXTENSION pgplace VERSION :'hostile_version';
\else
CREATE EXTENSION pgplace;
\endif
\i :roles_sql
\set ECHO all
-- A table owner in no pgplace role; a pgplace_admin with no right on any table or schema;
-- the gateway's role; a login with no grants.
CREATE ROLE :"owner" LOGIN;
CREATE ROLE :"admin" LOGIN IN ROLE :"pgplace_admin";
CREATE ROLE :"player" LOGIN IN ROLE :"pgplace_player";
CREATE ROLE :"nobody" LOGIN;

-- The test's own things (the superuser's): who is who, the log every hook writes, and a
-- helper that runs a statement and says 'ok', 'refused' (one of the SQLSTATEs given) or
-- the error.
CREATE SCHEMA hostile;
GRANT USAGE ON SCHEMA hostile TO PUBLIC;
CREATE TABLE hostile.names (label text PRIMARY KEY, rolname name NOT NULL UNIQUE);
INSERT INTO hostile.names VALUES ('owner', :'owner'), ('admin', :'admin'), ('player', :'player'),
    ('nobody', :'nobody'), ('extension_owner', (SELECT extowner::regrole::name FROM pg_extension WHERE extname = 'pgplace'));
GRANT SELECT ON hostile.names TO PUBLIC;
CREATE FUNCTION hostile.label(r name) RETURNS text
LANGUAGE sql STABLE AS $$ SELECT coalesce((SELECT n.label FROM hostile.names n WHERE n.rolname = r), 'other') $$;
CREATE TABLE hostile.log (step text, hook text, planter text, ran_as name, was_superuser boolean);
GRANT INSERT ON hostile.log TO PUBLIC;
CREATE FUNCTION hostile.try(statement text, VARIADIC refusals text[] DEFAULT '{}') RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    msg text;
    n record;
BEGIN
    EXECUTE statement;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    IF SQLSTATE = ANY (refusals) THEN
        RETURN 'refused';
    END IF;
    msg := SQLERRM;
    FOR n IN SELECT * FROM hostile.names ORDER BY length(rolname) DESC LOOP
        msg := replace(msg, n.rolname, n.label);
    END LOOP;
    RETURN 'error ' || SQLSTATE || ': ' || msg;
END
$$;
-- The shell commands of a run (cut short) before this one.
SELECT format('rm -f /tmp/pgplace-hostile-%s-*', current_database()) AS rm_files \gset
COPY (SELECT 1) TO PROGRAM :'rm_files';
CREATE SCHEMA hostile_a AUTHORIZATION :"owner";
CREATE SCHEMA hostile_b AUTHORIZATION :"owner";
-- Functions shadowing pg_catalog's in public need CREATE there.
GRANT CREATE ON SCHEMA public TO :"owner";

-- The owner plants.
SET SESSION AUTHORIZATION :"owner";
GRANT USAGE ON SCHEMA hostile_a TO PUBLIC;
-- The payload. Volatile: an IMMUTABLE plpgsql function may not run DDL, so every hook
-- below is an immutable (or volatile) wrapper that PERFORMs this.
CREATE FUNCTION hostile_a.escalate(hook text, planter text DEFAULT 'owner') RETURNS int
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    step text := coalesce(nullif(pg_catalog.current_setting('hostile.step', true), ''), 'none');
    su boolean := (SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.rolname = current_user);
BEGIN
    BEGIN
        INSERT INTO hostile.log (step, hook, planter, ran_as, was_superuser)
        VALUES (step, hook, planter, current_user, su);
    EXCEPTION WHEN OTHERS THEN
        NULL; -- a context that may not write: the rest still says what happened
    END;
    IF su THEN
        RAISE WARNING 'hostile hook % ran as a superuser in step %', hook, step;
        BEGIN
            EXECUTE pg_catalog.format('COPY (SELECT 1) TO PROGRAM %L',
                pg_catalog.format('touch /tmp/pgplace-hostile-%s-%s-%s', pg_catalog.current_database(), step, hook));
            EXECUTE pg_catalog.format('ALTER ROLE %I SUPERUSER',
                (SELECT n.rolname FROM hostile.names n WHERE n.label = planter));
        EXCEPTION WHEN OTHERS THEN
            RAISE WARNING 'hostile hook %: %', hook, SQLERRM;
        END;
    END IF;
    RETURN 1;
END
$$;
CREATE FUNCTION hostile_a.wrap(hook text, n int) RETURNS int
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    PERFORM hostile_a.escalate(hook);
    RETURN n;
END
$$;
CREATE FUNCTION hostile_a.fire() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM hostile_a.escalate(TG_ARGV[0]);
    RETURN NEW;
END
$$;
-- Functions and an operator in public, called by name from filters.
CREATE FUNCTION public.k(n int) RETURNS int
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    PERFORM hostile_a.escalate('public_function');
    RETURN n;
END
$$;
CREATE FUNCTION public.plus(a int, b int) RETURNS int
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    PERFORM hostile_a.escalate('public_operator');
    RETURN a + b;
END
$$;
CREATE OPERATOR public.+ (LEFTARG = int, RIGHTARG = int, FUNCTION = public.plus);
-- Types that run code: a cast into an enum, a domain whose CHECK calls a function.
CREATE TYPE hostile_a.mood AS ENUM ('ok');
CREATE FUNCTION hostile_a.to_mood(n int) RETURNS hostile_a.mood
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    PERFORM hostile_a.escalate('cast');
    RETURN 'ok';
END
$$;
CREATE CAST (int AS hostile_a.mood) WITH FUNCTION hostile_a.to_mood(int);
CREATE DOMAIN hostile_a.posint AS int CHECK (hostile_a.wrap('domain_check', 1) > 0 AND VALUE > 0);
-- The table, with a hook at every place PostgreSQL runs its owner's code.
CREATE TABLE hostile_a.items (
    id int PRIMARY KEY,
    title text NOT NULL,
    score int NOT NULL CHECK (score > hostile_a.wrap('check_constraint', -1000)),
    secret text NOT NULL DEFAULT 'hidden',
    noted int DEFAULT hostile_a.escalate('column_default'),
    derived int GENERATED ALWAYS AS (score + hostile_a.wrap('generated_column', 0)) STORED
) WITH (autovacuum_enabled = false);
CREATE INDEX items_partial ON hostile_a.items (score) WHERE hostile_a.wrap('index_predicate', 1) > 0;
CREATE INDEX items_expression ON hostile_a.items ((score + hostile_a.wrap('index_expression', 0)));
CREATE STATISTICS hostile_a.items_statistics ON (score * hostile_a.wrap('statistics', 1)) FROM hostile_a.items;
CREATE TABLE hostile_a.rule_sink (n int);
CREATE RULE items_rule AS ON UPDATE TO hostile_a.items
    DO ALSO INSERT INTO hostile_a.rule_sink VALUES (hostile_a.escalate('rule'));
CREATE TRIGGER items_row BEFORE INSERT OR UPDATE ON hostile_a.items
    FOR EACH ROW EXECUTE FUNCTION hostile_a.fire('trigger_row');
CREATE TRIGGER items_statement AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON hostile_a.items
    FOR EACH STATEMENT EXECUTE FUNCTION hostile_a.fire('trigger_statement');
CREATE CONSTRAINT TRIGGER items_deferred AFTER INSERT OR UPDATE ON hostile_a.items
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION hostile_a.fire('trigger_deferred');
ALTER TABLE hostile_a.items ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
CREATE POLICY items_policy ON hostile_a.items
    USING (hostile_a.wrap('policy_using', 1) > 0) WITH CHECK (hostile_a.wrap('policy_check', 1) > 0);
-- Anyone may read it (so the admin may make views of it).
GRANT SELECT ON hostile_a.items TO PUBLIC;
INSERT INTO hostile_a.items (id, title, score) VALUES (1, 'first', 10), (2, 'second', 20), (3, 'third', 30);
ANALYZE hostile_a.items;
-- A table to drop while watched, and tables with columns of those types.
CREATE TABLE hostile_a.dropme (id int PRIMARY KEY, v int);
CREATE TABLE hostile_a.typed (id int PRIMARY KEY, m hostile_a.mood);
CREATE TABLE hostile_a.domained (id int PRIMARY KEY, p hostile_a.posint);
RESET SESSION AUTHORIZATION;

-- What must not change: the roles' powers, their memberships, who owns what.
CREATE VIEW hostile.role_powers AS
SELECT n.label AS role, r.rolsuper, r.rolcreaterole, r.rolcreatedb, r.rolbypassrls, r.rolreplication
FROM pg_roles r JOIN hostile.names n ON n.rolname = r.rolname;
CREATE VIEW hostile.role_members AS
SELECT hostile.label(u.rolname) AS member, g.rolname AS member_of, m.admin_option
FROM pg_auth_members m JOIN pg_roles g ON g.oid = m.roleid JOIN pg_roles u ON u.oid = m.member
WHERE u.rolname IN (SELECT n.rolname FROM hostile.names n WHERE n.label <> 'extension_owner');
CREATE VIEW hostile.owners AS
SELECT 'relation ' || c.oid::regclass::text AS object, hostile.label(pg_get_userbyid(c.relowner)) AS owner
FROM pg_class c WHERE c.relnamespace IN ('place'::regnamespace, 'hostile_a'::regnamespace, 'hostile_b'::regnamespace)
UNION ALL
SELECT 'function ' || p.oid::regprocedure::text, hostile.label(pg_get_userbyid(p.proowner))
FROM pg_proc p WHERE p.pronamespace IN ('place'::regnamespace, 'hostile_a'::regnamespace, 'public'::regnamespace)
UNION ALL
SELECT 'schema ' || s.nspname, hostile.label(pg_get_userbyid(s.nspowner))
FROM pg_namespace s WHERE s.nspname IN ('place', 'hostile_a', 'hostile_b', 'public')
UNION ALL
SELECT 'database', hostile.label(pg_get_userbyid(d.datdba)) FROM pg_database d WHERE d.datname = current_database()
UNION ALL
SELECT 'extension pgplace', hostile.label(pg_get_userbyid(e.extowner)) FROM pg_extension e WHERE e.extname = 'pgplace';
CREATE TABLE hostile.powers_before AS SELECT * FROM hostile.role_powers;
CREATE TABLE hostile.members_before AS SELECT * FROM hostile.role_members;
CREATE TABLE hostile.owners_before AS SELECT * FROM hostile.owners;
SELECT * FROM hostile.powers_before WHERE role <> 'extension_owner' ORDER BY role;
SELECT member, substr(member_of, length(:'prefix') + 1) AS member_of, admin_option FROM hostile.members_before ORDER BY 1, 2;

-- The hooks are armed: the owner's own reads and writes run each of them, as the owner.
\c :"hostile_db"
SET hostile.step = 'armed';
SET SESSION AUTHORIZATION :"owner";
SELECT id, title, score, derived FROM hostile_a.items WHERE score > 15 ORDER BY id;
UPDATE hostile_a.items SET title = title WHERE id = 1;
INSERT INTO hostile_a.items (id, title, score) VALUES (4, 'fourth', 40);
DELETE FROM hostile_a.items WHERE id = 4;
RESET SESSION AUTHORIZATION;
SELECT hook, string_agg(DISTINCT hostile.label(ran_as) || CASE WHEN was_superuser THEN ' (superuser)' ELSE '' END, ', ') AS ran_as
FROM hostile.log WHERE step = 'armed' GROUP BY hook ORDER BY hook;

-- A DBA (the superuser) watches the owner's table; the admin may not (not its table), nor
-- may the owner (no pgplace role).
\c :"hostile_db"
SET hostile.step = 'watch';
SELECT hostile.try($$SELECT place.watch('hostile_a.items', ARRAY['title', 'score'], all_rows => true)$$) AS dba_watches;
SET SESSION AUTHORIZATION :"admin";
SELECT hostile.try($$SELECT place.watch('hostile_a.items', ARRAY['title'], all_rows => true)$$, '42501') AS admin_watches;
SET SESSION AUTHORIZATION :"owner";
SELECT hostile.try($$SELECT place.watch('hostile_a.items', ARRAY['title'], all_rows => true)$$, '42501') AS owner_watches;
RESET SESSION AUTHORIZATION;
-- Columns of a type that runs code (a cast, a domain's CHECK) cannot be watched or added.
SELECT hostile.try($$SELECT place.watch('hostile_a.typed', all_rows => true)$$, '0A000') AS watch_enum_with_cast,
       hostile.try($$SELECT place.watch('hostile_a.domained', all_rows => true)$$, '0A000') AS watch_domain;
SET SESSION AUTHORIZATION :"owner";
SELECT hostile.try($$ALTER TABLE hostile_a.items ADD COLUMN p hostile_a.posint$$, '0A000') AS add_domain_column;
RESET SESSION AUTHORIZATION;

-- The DBA makes views of it.
\c :"hostile_db"
SET hostile.step = 'create_view';
SELECT hostile.try($$SELECT place.create_view('hostile_top', 'hostile_a.items', 'score')$$) AS top,
       hostile.try($$SELECT place.create_view('hostile_filtered', 'hostile_a.items', 'score', 'score > 15')$$) AS filtered;

-- The admin's filters: functions of its own (pg_temp) and the owner's (public, an operator,
-- a cast, a domain's CHECK), and a whole-row reference (every column, watched or not).
-- Each is refused, and none of them runs.
\c :"hostile_db"
SET hostile.step = 'admin_filters';
SET SESSION AUTHORIZATION :"admin";
CREATE FUNCTION pg_temp.k(n int) RETURNS int
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    PERFORM hostile_a.escalate('pg_temp_function', 'admin');
    RETURN n;
END
$$;
CREATE FUNCTION pg_temp.plus(a int, b int) RETURNS int
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    PERFORM hostile_a.escalate('pg_temp_operator', 'admin');
    RETURN a + b;
END
$$;
CREATE OPERATOR pg_temp.+ (LEFTARG = int, RIGHTARG = int, FUNCTION = pg_temp.plus);
-- A literal of a composite type runs its columns' input and a domain's CHECK while the
-- filter is only parsed: that must run as the admin itself, never as the extension's owner.
CREATE DOMAIN pg_temp.checked AS int CHECK (pg_temp.k(VALUE) > 0);
CREATE TYPE pg_temp.pair AS (n pg_temp.checked);
SELECT f.filter, hostile.try(format('SELECT place.create_view(%L, %L, %L, %L)', 'hostile_bad', 'hostile_a.items', 'score', f.filter),
                             VARIADIC f.refusals) AS result
FROM (VALUES (1, 'pg_temp.k(1) > 0', '{42501,22023}'::text[]),
             (2, 'public.k(1) > 0', '{42501,22023}'),
             (3, 'pg_temp.k(score) > 0', '{42501,22023}'),
             (4, '1 OPERATOR(public.+) 1 > 0', '{42501,22023}'),
             (5, 'score OPERATOR(public.+) 1 > 0', '{42501,22023}'),
             (6, '1 OPERATOR(pg_temp.+) 1 > 0', '{42501,22023}'),
             (7, 'hostile_a.wrap(''filter_function'', 1) > 0', '{42501,22023}'),
             (8, '(1::hostile_a.mood) IS NOT NULL', '{42501,22023}'),
             (9, 'score::hostile_a.posint > 0', '{42501,22023}'),
             (10, '(5::hostile_a.posint) > 0', '{42501,22023}'),
             (11, 't::text LIKE ''%hidden%''', '{42501,22023,42703}'),
             (12, 'score > 0) OR (public.k(1) > 0', '{42501,22023}'),
             (13, '(''(5)''::pg_temp.pair) IS NOT NULL', '{42501,22023}')) AS f(ord, filter, refusals)
ORDER BY f.ord;
RESET SESSION AUTHORIZATION;
SELECT name FROM place.views ORDER BY name;

-- The gateway reads the views (as pgplace_player, and as a superuser it might log in as).
\c :"hostile_db"
SET hostile.step = 'view_rows_player';
SET SESSION AUTHORIZATION :"player";
SELECT jsonb_path_query_array(rows, '$[*].id') AS ids, jsonb_path_query_array(rows, '$[*].title') AS titles
FROM place.view_rows('hostile_top');
RESET SESSION AUTHORIZATION;
\c :"hostile_db"
SET hostile.step = 'view_rows_superuser';
SELECT jsonb_path_query_array(rows, '$[*].id') AS ids FROM place.view_rows('hostile_filtered');
\c :"hostile_db"
SET hostile.step = 'views_touched';
SET SESSION AUTHORIZATION :"player";
SELECT place.views_touched(ARRAY['hostile_top', 'hostile_filtered'], '[{"id": 1, "title": "first", "score": 10}]');
RESET SESSION AUTHORIZATION;

-- The admin kicks a row; the DBA watches the table again (which checks its views again).
\c :"hostile_db"
SET hostile.step = 'kick';
SET SESSION AUTHORIZATION :"admin";
SELECT hostile.try($$SELECT place.kick('hostile_a.items', '{"id": 1}')$$) AS kick;
RESET SESSION AUTHORIZATION;
\c :"hostile_db"
SET hostile.step = 'rewatch';
SELECT hostile.try($$SELECT place.watch('hostile_a.items', ARRAY['title', 'score'], all_rows => true)$$) AS rewatch;

-- The owner writes (the capture trigger runs beside the owner's hooks); the gateway ticks
-- and reads the log.
\c :"hostile_db"
SET hostile.step = 'writes';
SET SESSION AUTHORIZATION :"owner";
INSERT INTO hostile_a.items (id, title, score) VALUES (4, 'fourth', 40);
UPDATE hostile_a.items SET score = 41 WHERE id = 4;
DELETE FROM hostile_a.items WHERE id = 4;
SET SESSION AUTHORIZATION :"player";
SELECT place.tick() > 0 AS ticked;
SELECT pos, tbl, action, key, obj FROM place.changes_since(0) ORDER BY pos;
SELECT count(*) > 0 AS fed FROM place.change_feed(0);
RESET SESSION AUTHORIZATION;

-- The owner renames the table and puts a view over pg_authid in its place (it may create
-- one; a security_invoker view reads as whoever reads it). The views still show the table.
\c :"hostile_db"
SET hostile.step = 'swap_rename';
SET SESSION AUTHORIZATION :"owner";
ALTER TABLE hostile_a.items RENAME TO items_orig;
CREATE VIEW hostile_a.items WITH (security_invoker = true) AS
SELECT a.oid::int AS id, a.rolname || ':' || coalesce(a.rolpassword, '') AS title, 0 AS score, 'x' AS secret
FROM pg_catalog.pg_authid a;
SET SESSION AUTHORIZATION :"player";
SELECT jsonb_path_query_array(rows, '$[*].id') AS ids,
       EXISTS (SELECT FROM jsonb_array_elements(rows) r JOIN pg_roles a ON r ->> 'title' LIKE a.rolname || ':%') AS shows_pg_authid
FROM place.view_rows('hostile_top');
SELECT place.views_touched(ARRAY['hostile_top', 'hostile_filtered'], '[{"id": 2, "title": "second", "score": 20}]');
SET SESSION AUTHORIZATION :"admin";
SELECT hostile.try($$SELECT place.kick('hostile_a.items_orig', '{"id": 2}')$$) AS kick;
RESET SESSION AUTHORIZATION;
SELECT jsonb_path_query_array(rows, '$[*].id') AS ids,
       EXISTS (SELECT FROM jsonb_array_elements(rows) r JOIN pg_roles a ON r ->> 'title' LIKE a.rolname || ':%') AS shows_pg_authid
FROM place.view_rows('hostile_top');
SET SESSION AUTHORIZATION :"owner";
DROP VIEW hostile_a.items;
ALTER TABLE hostile_a.items_orig RENAME TO items;
RESET SESSION AUTHORIZATION;

-- The same with SET SCHEMA, and a plain view that calls the owner's function.
\c :"hostile_db"
SET hostile.step = 'swap_schema';
SET SESSION AUTHORIZATION :"owner";
ALTER TABLE hostile_a.items SET SCHEMA hostile_b;
CREATE VIEW hostile_a.items AS
SELECT i.id, i.title, i.score, i.secret FROM hostile_b.items i WHERE hostile_a.escalate('swapped_view') > 0;
SET SESSION AUTHORIZATION :"player";
SELECT jsonb_path_query_array(rows, '$[*].id') AS ids FROM place.view_rows('hostile_top');
RESET SESSION AUTHORIZATION;
SELECT jsonb_path_query_array(rows, '$[*].id') AS ids FROM place.view_rows('hostile_filtered');
SET SESSION AUTHORIZATION :"owner";
DROP VIEW hostile_a.items;
ALTER TABLE hostile_b.items SET SCHEMA hostile_a;
RESET SESSION AUTHORIZATION;

-- The admin's temporary table, with its hooks in pg_temp: watch refuses it (a temporary
-- table's name resolves in whichever session reads it, and its hooks are anyone's).
\c :"hostile_db"
SET hostile.step = 'temp_table';
SET SESSION AUTHORIZATION :"admin";
CREATE FUNCTION pg_temp.tw(hook text, n int) RETURNS int
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    PERFORM hostile_a.escalate(hook, 'admin');
    RETURN n;
END
$$;
CREATE TEMP TABLE tmp_items (id int PRIMARY KEY, score int NOT NULL);
CREATE INDEX ON tmp_items (score) WHERE pg_temp.tw('temp_index_predicate', 1) > 0;
CREATE INDEX ON tmp_items ((score + pg_temp.tw('temp_index_expression', 0)));
SELECT hostile.try($$SELECT place.watch('pg_temp.tmp_items')$$, '0A000', '42501', '22023', '42809') AS watch_temp_table;
SELECT hostile.try($$SELECT place.create_view('hostile_temp', 'pg_temp.tmp_items', 'score')$$, '55000', '0A000', '42501') AS temp_view;
SET SESSION AUTHORIZATION :"player";
SELECT hostile.try($$SELECT place.view_rows('hostile_temp')$$, '42704') AS player_reads_temp_view;
RESET SESSION AUTHORIZATION;

-- The owner drops a watched table: its watch and its views go with it.
\c :"hostile_db"
SET hostile.step = 'dropped';
SELECT hostile.try($$SELECT place.watch('hostile_a.dropme')$$) AS watch,
       hostile.try($$SELECT place.create_view('hostile_dropme', 'hostile_a.dropme', 'v')$$) AS view;
SELECT 'hostile_a.dropme'::regclass::oid AS dropme \gset
SET SESSION AUTHORIZATION :"owner";
DROP TABLE hostile_a.dropme;
RESET SESSION AUTHORIZATION;
SELECT (SELECT count(*) FROM place.watches WHERE tbl::oid = :dropme) AS watches_left,
       (SELECT count(*) FROM place.views WHERE tbl::oid = :dropme) AS views_left;
SELECT hostile.try($$SELECT place.view_rows('hostile_dropme')$$, '42704') AS read_dropped_view;

-- Who may call what: the player may not watch, make views or kick; the login with no
-- grants may call nothing.
\c :"hostile_db"
SET hostile.step = 'strangers';
SET SESSION AUTHORIZATION :"player";
SELECT hostile.try($$SELECT place.watch('hostile_a.items')$$, '42501') AS watch,
       hostile.try($$SELECT place.create_view('hostile_p', 'hostile_a.items', 'score')$$, '42501') AS create_view,
       hostile.try($$SELECT place.kick('hostile_a.items', '{"id": 1}')$$, '42501') AS kick;
SET SESSION AUTHORIZATION :"nobody";
SELECT f.fn, hostile.try(f.statement, '42501') AS result
FROM (VALUES (1, 'watch', $$SELECT place.watch('hostile_a.items')$$),
             (2, 'unwatch', $$SELECT place.unwatch('hostile_a.items')$$),
             (3, 'create_view', $$SELECT place.create_view('hostile_n', 'hostile_a.items', 'score')$$),
             (4, 'kick', $$SELECT place.kick('hostile_a.items', '{"id": 1}')$$),
             (5, 'view_rows', $$SELECT place.view_rows('hostile_top')$$),
             (6, 'views_touched', $$SELECT place.views_touched('{hostile_top}', '[]')$$),
             (7, 'tick', $$SELECT place.tick()$$),
             (8, 'change_feed', $$SELECT place.change_feed(0)$$),
             (9, 'changes_since', $$SELECT place.changes_since(0)$$)) AS f(ord, fn, statement)
ORDER BY f.ord;
RESET SESSION AUTHORIZATION;

-- Unwatching: not by the admin or the owner; by the DBA once the views are gone.
\c :"hostile_db"
SET hostile.step = 'unwatch';
SET SESSION AUTHORIZATION :"admin";
SELECT hostile.try($$SELECT place.unwatch('hostile_a.items')$$, '42501', '2BP01') AS admin_unwatches;
RESET SESSION AUTHORIZATION;
SELECT place.drop_view('hostile_top'), place.drop_view('hostile_filtered');
SELECT hostile.try($$SELECT place.unwatch('hostile_a.items')$$) AS dba_unwatches;

-- Nothing changed. Roles, memberships and ownerships as they were; no shell command ran;
-- no hook ran as a superuser, or as anyone but the role that planted it; no watch or view
-- of a table that is gone.
\c :"hostile_db"
SELECT * FROM hostile.role_powers EXCEPT SELECT * FROM hostile.powers_before ORDER BY 1;
(SELECT * FROM hostile.role_members EXCEPT ALL SELECT * FROM hostile.members_before)
UNION ALL
(SELECT * FROM hostile.members_before EXCEPT ALL SELECT * FROM hostile.role_members);
SELECT b.object, b.owner AS owner_before, o.owner AS owner_now
FROM hostile.owners_before b JOIN hostile.owners o ON o.object = b.object
WHERE o.owner IS DISTINCT FROM b.owner ORDER BY 1;
SELECT substr(f, length('pgplace-hostile-' || current_database() || '-') + 1) AS shell_command_ran
FROM pg_ls_dir('/tmp') AS f WHERE starts_with(f, 'pgplace-hostile-' || current_database() || '-') ORDER BY 1;
SELECT DISTINCT step, hook, hostile.label(ran_as) AS ran_as, was_superuser FROM hostile.log WHERE was_superuser ORDER BY 1, 2, 3;
SELECT DISTINCT step, hook, planter, hostile.label(ran_as) AS ran_as FROM hostile.log
WHERE hostile.label(ran_as) <> planter ORDER BY 1, 2, 3, 4;
SELECT (SELECT count(*) FROM place.watches w WHERE NOT EXISTS (SELECT FROM pg_class c WHERE c.oid = w.tbl)) AS watches_of_gone_tables,
       (SELECT count(*) FROM place.views v WHERE NOT EXISTS (SELECT FROM pg_class c WHERE c.oid = v.tbl)) AS views_of_gone_tables;
COPY (SELECT 1) TO PROGRAM :'rm_files';

-- Clean up: the database, then the roles.
\c :"main_db"
DROP DATABASE :"hostile_db" WITH (FORCE);
DROP ROLE :"owner", :"admin", :"player", :"nobody", :"pgplace_player", :"pgplace_admin", :"pgplace_reader";
SELECT count(*) AS roles_left FROM pg_roles WHERE rolname LIKE :'prefix' || '%';
