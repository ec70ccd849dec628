-- Security: no role gets more than it was given through pgplace (README, "Security").
-- Roles belong to the whole cluster: their names carry this database's name.
SELECT 'regress_' || current_database() || '_' AS prefix \gset
\set me :prefix 'me'
\set other :prefix 'other'
SET client_min_messages = warning;
DROP SCHEMA IF EXISTS sec CASCADE;
DROP ROLE IF EXISTS :"me", :"other";
RESET client_min_messages;
-- A table owner who may watch (as a pgplace_admin may), and another login.
CREATE ROLE :"me" LOGIN;
CREATE ROLE :"other" LOGIN;
CREATE SCHEMA sec AUTHORIZATION :"me";
GRANT USAGE ON SCHEMA sec TO :"other";
GRANT EXECUTE ON FUNCTION place.watch(regclass, text[], boolean), place.unwatch(regclass),
    place.kick(regclass, jsonb), place.create_view(text, regclass, text, text, boolean, int, boolean),
    place.drop_view(text) TO :"me", :"other";
GRANT EXECUTE ON FUNCTION place.view_rows(text, int) TO :"other";

-- The extension alone (no sql/roles.sql in this database): no SECURITY DEFINER function of
-- pgplace is callable by PUBLIC.
SELECT p.oid::regprocedure AS callable_by_public
FROM pg_proc p
WHERE p.pronamespace = 'place'::regnamespace AND p.prosecdef
  AND has_function_privilege('public', p.oid, 'EXECUTE');
-- ... and none of its definer trigger functions can be attached to a table of one's own
-- (CREATE TRIGGER asks for EXECUTE): a trigger like this one would delete board bits.
SET SESSION AUTHORIZATION :"me";
CREATE TABLE sec.gone_rows (board_id bigint, chunk_no int);
SELECT expect_error('CREATE TRIGGER t AFTER DELETE ON sec.gone_rows REFERENCING OLD TABLE AS gone
                     FOR EACH STATEMENT EXECUTE FUNCTION place._drop_chunk_versions()');
SELECT expect_error('CREATE TRIGGER t AFTER INSERT ON sec.gone_rows REFERENCING NEW TABLE AS pgplace_new
                     FOR EACH STATEMENT EXECUTE FUNCTION place._capture_changes(''{board_id}'', '''')');
SELECT expect_error('SELECT place.user_for_token(''x'')');
SELECT expect_error('SELECT place.views_touched(''{a}'', ''[]'')');
RESET SESSION AUTHORIZATION;

-- The escalation that was: a user's cast to json, run by the capture trigger as the
-- extension's owner. Every way to put a user-made type into a watched table is refused.
SET SESSION AUTHORIZATION :"me";
CREATE TABLE sec.t (id int PRIMARY KEY, v int NOT NULL DEFAULT 0);
INSERT INTO sec.t VALUES (1, 0);
SELECT place.watch('sec.t');
CREATE TYPE sec.e AS ENUM ('a');
CREATE DOMAIN sec.d AS int CHECK (VALUE > 0);
CREATE TYPE sec.pair AS (a int, b int);
CREATE FUNCTION sec.f(sec.e) RETURNS json LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format('ALTER ROLE %I SUPERUSER', session_user);
    RETURN '0';
END
$$;
CREATE CAST (sec.e AS json) WITH FUNCTION sec.f(sec.e);
SELECT expect_error('ALTER TABLE sec.t ADD COLUMN z sec.e DEFAULT ''a''');
SELECT expect_error('ALTER TABLE sec.t ADD COLUMN z sec.d');
SELECT expect_error('ALTER TABLE sec.t ADD COLUMN z sec.pair');
SELECT expect_error('ALTER TABLE sec.t ADD COLUMN z sec.e[]');
SELECT expect_error('ALTER TABLE sec.t ALTER COLUMN v TYPE sec.d USING v + 1');
-- Built-in types may still be added.
ALTER TABLE sec.t ADD COLUMN note text;
UPDATE sec.t SET v = v + 1;
-- A table that has such a column cannot be watched.
CREATE TABLE sec.with_enum (id int PRIMARY KEY, z sec.e DEFAULT 'a');
INSERT INTO sec.with_enum VALUES (1);
SELECT expect_error('SELECT place.watch(''sec.with_enum'')');
-- A filter may not cast to a user's type (a domain's CHECK is the user's code).
CREATE FUNCTION sec.g(int) RETURNS boolean LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    EXECUTE format('ALTER ROLE %I SUPERUSER', session_user);
    RETURN true;
END
$$;
CREATE DOMAIN sec.evil AS int CHECK (sec.g(VALUE));
SELECT expect_error('SELECT place.create_view(''sec_evil'', ''sec.t'', ''v'', ''v::sec.evil > 0'')');
SELECT expect_error('SELECT place.create_view(''sec_evil'', ''sec.t'', ''v'', ''sec.g(v)'')');
RESET SESSION AUTHORIZATION;
SELECT rolname, rolsuper FROM pg_roles WHERE rolname IN (:'me', :'other') ORDER BY rolname;
SELECT count(*) AS evil_views FROM place.views WHERE name = 'sec_evil';

-- Watching needs the table's ownership, not only the right to read it.
GRANT SELECT ON sec.with_enum, sec.t TO :"other";
SET SESSION AUTHORIZATION :"me";
CREATE TABLE sec.readable (id int PRIMARY KEY, v int);
GRANT SELECT ON sec.readable TO :"other";
RESET SESSION AUTHORIZATION;
SET SESSION AUTHORIZATION :"other";
SELECT expect_error('SELECT place.watch(''sec.readable'')');
SELECT expect_error('SELECT place.unwatch(''sec.t'')');
RESET SESSION AUTHORIZATION;
SELECT tbl FROM place.watches WHERE tbl::text LIKE 'sec.%' ORDER BY 1;

-- Row-level security: refused unless the DBA says every row may be shown, and kept so.
SET SESSION AUTHORIZATION :"me";
CREATE TABLE sec.tenants (id int PRIMARY KEY, tenant text NOT NULL);
ALTER TABLE sec.tenants ENABLE ROW LEVEL SECURITY;
SELECT expect_error('SELECT place.watch(''sec.tenants'')');
SELECT place.watch('sec.tenants', all_rows => true);
SELECT expect_error('ALTER TABLE sec.t ENABLE ROW LEVEL SECURITY');
SELECT relrowsecurity FROM pg_class WHERE oid = 'sec.t'::regclass;
-- A view is read only while its creator may read the table.
SELECT place.create_view('sec_top', 'sec.t', 'v');
-- A view may be for signed-in sessions only (the gateway refuses anonymous subscribers).
SELECT place.create_view('sec_members', 'sec.t', 'v', signed_in => true);
SELECT expect_error('SELECT place.create_view(''sec_null'', ''sec.t'', ''v'', signed_in => NULL)');
RESET SESSION AUTHORIZATION;
SET SESSION AUTHORIZATION :"other";
SELECT rows, signed_in FROM place.view_rows('sec_top');
SELECT signed_in FROM place.view_rows('sec_members');
RESET SESSION AUTHORIZATION;
SELECT tbl, all_rows FROM place.watched() WHERE tbl::text LIKE 'sec.%' ORDER BY 1;
SELECT name, created_by = :'me'::regrole AS created_by_me, signed_in FROM place.views() WHERE name LIKE 'sec%' ORDER BY name;
ALTER TABLE sec.t OWNER TO :"other";
SELECT expect_error('SELECT * FROM place.view_rows(''sec_top'')');
SELECT expect_error('SELECT place.views_touched(''{sec_top}'', ''[]'')');

-- Clean up: the roles belong to the cluster.
SELECT place.drop_view('sec_top'), place.drop_view('sec_members');
SELECT place.unwatch('sec.t'), place.unwatch('sec.tenants');
DROP SCHEMA sec CASCADE;
REVOKE ALL ON FUNCTION place.watch(regclass, text[], boolean), place.unwatch(regclass),
    place.kick(regclass, jsonb), place.create_view(text, regclass, text, text, boolean, int, boolean),
    place.drop_view(text), place.view_rows(text, int) FROM :"me", :"other";
DROP ROLE :"me", :"other";
