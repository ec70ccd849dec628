-- Roles and safety: sql/roles.sql's three roles may do what they should and nothing more.
-- roles.sql takes every right on schema place away from PUBLIC, which the other files rely
-- on, so this file works in a database of its own, dropped at the end. Roles belong to the
-- whole cluster: their names carry this database's name, so two runs never share one.
\getenv abs_srcdir PG_ABS_SRCDIR
\set roles_sql :abs_srcdir '/../../sql/roles.sql'
SELECT current_database() AS main_db, current_database() || '_roles_db' AS roles_db,
       'regress_' || current_database() || '_' AS prefix \gset
\set pgplace_reader :prefix 'reader'
\set pgplace_player :prefix 'player'
\set pgplace_admin :prefix 'admin'
-- Login roles as a DBA would make them: a gateway, an analyst, a DBA, and a stranger.
\set gateway :prefix 'gateway'
\set analyst :prefix 'analyst'
\set dba :prefix 'dba'
\set stranger :prefix 'stranger'
-- What a run that was cut short left behind.
SET client_min_messages = warning;
DROP DATABASE IF EXISTS :"roles_db";
DROP ROLE IF EXISTS :"gateway", :"analyst", :"dba", :"stranger", :"pgplace_player", :"pgplace_reader", :"pgplace_admin";
RESET client_min_messages;
CREATE DATABASE :"roles_db";
\c :"roles_db"
CREATE EXTENSION pgplace;
CREATE FUNCTION expect_error(statement text) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE statement;
    RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE || ': ' || SQLERRM;
END
$$;
SELECT place.create_board('small', 4, 3, 4, '0') AS small \gset
SELECT user_id AS u1, token AS u1_token FROM place.create_user('u1') \gset

-- The extension alone: the functions that write run as the owner with a fixed search_path,
-- and only the owner may call them until roles are granted.
SELECT p.proname, p.prosecdef AS security_definer, s.search_path,
       has_function_privilege('public', p.oid, 'EXECUTE') AS public_may_call
FROM pg_proc p
LEFT JOIN LATERAL (SELECT substr(c, 13) AS search_path FROM unnest(p.proconfig) AS c
                   WHERE c LIKE 'search\_path=%') AS s ON true
WHERE p.pronamespace = 'place'::regnamespace AND (p.prosecdef OR s.search_path IS NOT NULL)
ORDER BY p.proname;
CREATE ROLE :"stranger" LOGIN;
SET ROLE :"stranger";
SELECT expect_error(format('SELECT place.place(%s, 0, 0, 1, %s)', :small, :u1));
SELECT expect_error(format('SELECT place.place_many(%s, ARRAY[%s], ''{0}'', ''{0}'', ''{1}'')', :small, :u1));
SELECT expect_error(format('SELECT place.set_cooldown(%s, ''1 hour'')', :small));
SELECT expect_error($$SELECT place.create_board('mine', 2, 2)$$);
SELECT expect_error($$SELECT place.create_user('me')$$);
SELECT expect_error(format('SELECT place.set_board_state(%s, ''paused'')', :small));
SELECT expect_error(format('INSERT INTO place.placements VALUES (%s, 1, 0, 0, 1, %s, now())', :small, :u1));
RESET ROLE;
SELECT seq, (SELECT count(*) FROM place.placements) AS history FROM place.boards WHERE id = :small;

-- Running sql/roles.sql (as a superuser) creates the group roles.
\set ECHO none
\i :roles_sql
\set ECHO all
SELECT substr(r.rolname, length(:'prefix') + 1) AS role, r.rolcanlogin, r.rolinherit,
       ARRAY(SELECT substr(g.rolname, length(:'prefix') + 1) FROM pg_auth_members m
             JOIN pg_roles g ON g.oid = m.roleid WHERE m.member = r.oid ORDER BY 1) AS member_of
FROM pg_roles r WHERE r.rolname IN (:'pgplace_reader', :'pgplace_player', :'pgplace_admin')
ORDER BY r.rolname;
CREATE ROLE :"gateway" LOGIN IN ROLE :"pgplace_player";
CREATE ROLE :"analyst" LOGIN IN ROLE :"pgplace_reader";
CREATE ROLE :"dba" LOGIN IN ROLE :"pgplace_admin";

-- Everything each login role may do in schema place; the stranger is in no pgplace role.
-- No one may write a table, read place.user_tokens or call an internal (_) function.
CREATE TEMP TABLE who (ord int, label text, rolname text);
INSERT INTO who VALUES (1, 'gateway', :'gateway'), (2, 'analyst', :'analyst'), (3, 'dba', :'dba'),
                       (4, 'stranger', :'stranger');
SELECT w.label, has_schema_privilege(w.rolname, 'place', 'USAGE') AS schema_usage,
       has_schema_privilege(w.rolname, 'place', 'CREATE') AS schema_create
FROM who w ORDER BY w.ord;
SELECT c.relname, string_agg(w.label || ':' || p.privs, ' ' ORDER BY w.ord) AS privileges
FROM pg_class c CROSS JOIN who w
CROSS JOIN LATERAL (SELECT coalesce(string_agg(priv, ',' ORDER BY priv), '-') AS privs
                    FROM unnest(CASE WHEN c.relkind = 'S' THEN ARRAY['SELECT', 'USAGE', 'UPDATE']
                                     ELSE ARRAY['SELECT', 'INSERT', 'UPDATE', 'DELETE', 'TRUNCATE',
                                                'REFERENCES', 'TRIGGER'] END) AS priv
                    WHERE CASE WHEN c.relkind = 'S' THEN has_sequence_privilege(w.rolname, c.oid, priv)
                               ELSE has_table_privilege(w.rolname, c.oid, priv) END) AS p
WHERE c.relnamespace = 'place'::regnamespace AND c.relkind IN ('r', 'p', 'v', 'm', 'f', 'S')
GROUP BY c.relname ORDER BY c.relname;
SELECT p.proname, string_agg(w.label, ',' ORDER BY w.ord) FILTER
           (WHERE has_function_privilege(w.rolname, p.oid, 'EXECUTE')) AS may_call
FROM pg_proc p CROSS JOIN who w
WHERE p.pronamespace = 'place'::regnamespace
GROUP BY p.oid, p.proname ORDER BY p.proname, p.oid;
-- A function outside the internal ones that no role may call has been left out of
-- sql/roles.sql's lists.
SELECT p.oid::regprocedure AS in_no_list FROM pg_proc p
WHERE p.pronamespace = 'place'::regnamespace AND p.proname NOT LIKE '\_%'
  AND NOT has_function_privilege(:'pgplace_reader', p.oid, 'EXECUTE')
  AND NOT has_function_privilege(:'pgplace_player', p.oid, 'EXECUTE')
  AND NOT has_function_privilege(:'pgplace_admin', p.oid, 'EXECUTE');

-- The gateway (a player) places, through the functions only; its placements are announced
-- (the trigger calls an internal function no player may call: it runs as the owner).
SET ROLE :"gateway";
SELECT place.user_for_token(:'u1_token') = :u1 AS resolves_tokens;
SELECT placed, seq FROM place.place(:small, 1, 2, 7, :u1);
SELECT ord, placed, seq FROM place.place_many(:small, ARRAY[:u1, :u1], '{0,3}', '{0,2}', '{5,6}');
SELECT seq, encode(bits, 'hex') AS bits FROM place.board_bits(:small);
SELECT place.get_tile(:small, 1, 2) AS tile_1_2;
SELECT seq, x, y, color, user_id = :u1 AS by_u1 FROM place.placements WHERE board_id = :small ORDER BY seq;
SELECT name, seq FROM place.boards WHERE id = :small;
SELECT name FROM place.users ORDER BY id;
SELECT expect_error('SELECT * FROM place.user_tokens');
SELECT expect_error(format('INSERT INTO place.placements VALUES (%s, 4, 0, 0, 1, %s, now())', :small, :u1));
SELECT expect_error(format('UPDATE place.placements SET color = 0 WHERE board_id = %s', :small));
SELECT expect_error(format('DELETE FROM place.placements WHERE board_id = %s', :small));
SELECT expect_error('TRUNCATE place.placements');
SELECT expect_error(format('UPDATE place.boards SET seq = 0 WHERE id = %s', :small));
SELECT expect_error(format('UPDATE place.board_settings SET state = ''paused'' WHERE id = %s', :small));
SELECT expect_error(format('UPDATE place.chunk_versions SET bits = ''\x00'' WHERE board_id = %s', :small));
SELECT expect_error(format('DELETE FROM place.cooldowns WHERE board_id = %s', :small));
SELECT expect_error($$INSERT INTO place.users (name) VALUES ('sneaky')$$);
SELECT expect_error(format('DELETE FROM place.user_tokens WHERE user_id = %s', :u1));
SELECT expect_error($$SELECT nextval('place.users_id_seq')$$);
SELECT expect_error(format('SELECT place.set_cooldown(%s, ''1 hour'')', :small));
SELECT expect_error(format('SELECT place.set_board_state(%s, ''paused'')', :small));
SELECT expect_error($$SELECT place.create_board('mine', 2, 2)$$);
SELECT expect_error($$SELECT place.create_user('me')$$);
SELECT expect_error($$SELECT place._placement_payloads('{1}', '{1}', '{0}', '{0}', '{0}', '{1}', ARRAY[now()])$$);
SELECT expect_error($$SELECT place._board_payload(1, 1, 'deleted')$$);
-- It makes the change log's positions (the change feed) and reads them.
SELECT place.tick() >= 0 AS ticks, count(*) >= 0 AS reads_the_feed FROM place.change_feed(place.change_pos());
SELECT expect_error($$SELECT * FROM place.change_settings FOR UPDATE$$);
SELECT expect_error($$INSERT INTO place.change_ticks VALUES (1000000, '3:3:', '3:3:', now())$$);
SELECT expect_error(format('SELECT place.compact_history(%s, now())', :small));
SELECT expect_error(format('SELECT place.build_keyframes(%s)', :small));
-- The writing functions do not depend on the caller's search_path.
SET search_path = pg_temp;
SELECT placed, seq FROM place.place(:small, 2, 2, 9, :u1);
RESET search_path;
RESET ROLE;

-- The analyst (a reader) reads boards and history, and changes nothing.
SET ROLE :"analyst";
SELECT count(*) AS placements, max(seq) AS last_seq FROM place.placements WHERE board_id = :small;
SELECT seq, encode(bits, 'hex') AS bits FROM place.board_bits(:small);
SELECT place.get_tile(:small, 2, 2) AS tile_2_2;
SELECT place.bitfield_get(bits, 4, 9) AS tile_9, encode(place.bitfield_set(bits, 4, 0, 1), 'hex') AS set_0
FROM place.board_bits(:small);
SELECT count(*) AS cooldowns FROM place.cooldowns;
SELECT count(*) AS chunks FROM place.board_chunks WHERE board_id = :small;
SELECT seq, color, user_name FROM place.tile_history(:small, 1, 2);
SELECT count(*) AS user_placements FROM place.user_history(:small, :u1);
SELECT x, y, color FROM place.tiles(:small) WHERE color <> 0 ORDER BY y, x;
SELECT seq, encode(bits, 'hex') AS bits FROM place.board_at_seq(:small, 2);
SELECT seq FROM place.board_at(:small, now());
SELECT count(*) AS keyframes FROM place.keyframes;
SELECT substr(place.render_png(:small), 1, 8) = '\x89504e470d0a1a0a'::bytea AS renders_png;
SELECT expect_error('SELECT * FROM place.user_tokens');
SELECT expect_error(format('SELECT place.user_for_token(%L)', :'u1_token'));
SELECT expect_error(format('SELECT place.place(%s, 0, 0, 1, %s)', :small, :u1));
SELECT expect_error(format('SELECT place.place_many(%s, ARRAY[%s], ''{0}'', ''{0}'', ''{1}'')', :small, :u1));
SELECT expect_error(format('SELECT place.set_cooldown(%s, ''1 hour'')', :small));
SELECT expect_error($$SELECT place.create_board('mine', 2, 2)$$);
SELECT expect_error(format('INSERT INTO place.placements VALUES (%s, 5, 0, 0, 1, %s, now())', :small, :u1));
SELECT expect_error(format('UPDATE place.boards SET state = ''paused'' WHERE id = %s', :small));
SELECT expect_error(format('DELETE FROM place.boards WHERE id = %s', :small));
SELECT expect_error(format('DELETE FROM place.board_settings WHERE id = %s', :small));
SELECT expect_error(format('SELECT place.compact_history(%s, now())', :small));
SELECT expect_error(format('SELECT place.set_keyframe_every(%s, 2)', :small));
-- It reads the change log, and may neither make its positions nor lock what they take turns on.
SELECT count(*) >= 0 AS reads_changes FROM place.changes_since(place.change_pos());
SELECT count(*) >= 0 AS reads_the_feed FROM place.change_feed(place.change_pos());
SELECT expect_error('SELECT place.tick()');
SELECT expect_error($$SELECT * FROM place.change_settings FOR UPDATE$$);
SELECT expect_error(format('SELECT FROM place.board_settings WHERE id = %s FOR NO KEY UPDATE', :small));
SELECT expect_error('SELECT FROM place.board_maintenance FOR UPDATE');
RESET ROLE;

-- The DBA (an admin) turns the knobs and reads, but neither places nor writes tables.
SET ROLE :"dba";
SELECT place.create_board('big', 10, 10, 2, '1 minute') AS big \gset
SELECT :big > :small AS created;
SELECT user_id > :u1 AS created, length(token) AS token_length FROM place.create_user('u2');
SELECT place.set_cooldown(:small, '30 seconds');
SELECT place.set_board_state(:small, 'paused');
SELECT name, cooldown, state FROM place.boards ORDER BY id;
SELECT place.set_board_state(:small, 'open');
SELECT place.set_keyframe_every(:small, 2);
SELECT place.build_keyframes(:small) AS keyframes_built;
SELECT place.compact_history(:small, now() - interval '1 day') AS dropped;
SELECT count(*) AS placements FROM place.placements;
SELECT expect_error(format('SELECT place.place(%s, 0, 0, 1, %s)', :small, :u1));
SELECT expect_error(format('SELECT place.user_for_token(%L)', :'u1_token'));
SELECT expect_error('SELECT * FROM place.user_tokens');
SELECT expect_error($$INSERT INTO place.boards (name, width, height, bits_per_tile, palette, cooldown)
                      VALUES ('direct', 1, 1, 1, '{#000000,#ffffff}', '0')$$);
SELECT expect_error(format('UPDATE place.boards SET cooldown = ''0'' WHERE id = %s', :small));
SELECT expect_error(format('DELETE FROM place.placements WHERE board_id = %s', :small));
SELECT expect_error($$DELETE FROM place.users WHERE name = 'u2'$$);
RESET ROLE;

-- The stranger, in no pgplace role, now cannot even read.
SET ROLE :"stranger";
SELECT expect_error(format('SELECT place.place(%s, 0, 0, 1, %s)', :small, :u1));
SELECT expect_error('SELECT * FROM place.boards');
SELECT expect_error('SELECT * FROM place.placements');
SELECT expect_error(format('SELECT * FROM place.board_bits(%s)', :small));
SELECT expect_error(format('SELECT place.user_for_token(%L)', :'u1_token'));
SELECT expect_error($$SELECT place.create_board('mine', 2, 2)$$);
RESET ROLE;

-- Running it again changes nothing, and takes back what was granted to the groups by hand.
SELECT md5(string_agg(format('%s %s', oid::regprocedure, proacl), ';' ORDER BY oid)) AS functions_acl,
       (SELECT md5(string_agg(format('%s %s', oid::regclass, relacl), ';' ORDER BY oid))
        FROM pg_class WHERE relnamespace = 'place'::regnamespace) AS tables_acl,
       (SELECT md5(nspacl::text) FROM pg_namespace WHERE nspname = 'place') AS schema_acl,
       (SELECT count(*) FROM pg_auth_members m JOIN pg_roles r ON r.oid = m.roleid
        WHERE r.rolname LIKE :'prefix' || '%') AS memberships
FROM pg_proc WHERE pronamespace = 'place'::regnamespace \gset first_
GRANT INSERT ON place.placements TO :"pgplace_reader";
GRANT EXECUTE ON FUNCTION place._board_payload(bigint, bigint, text) TO :"pgplace_player";
\set ECHO none
\i :roles_sql
\set ECHO all
SELECT md5(string_agg(format('%s %s', oid::regprocedure, proacl), ';' ORDER BY oid)) = :'first_functions_acl' AS same_functions_acl,
       (SELECT md5(string_agg(format('%s %s', oid::regclass, relacl), ';' ORDER BY oid))
        FROM pg_class WHERE relnamespace = 'place'::regnamespace) = :'first_tables_acl' AS same_tables_acl,
       (SELECT md5(nspacl::text) FROM pg_namespace WHERE nspname = 'place') = :'first_schema_acl' AS same_schema_acl,
       (SELECT count(*) FROM pg_auth_members m JOIN pg_roles r ON r.oid = m.roleid
        WHERE r.rolname LIKE :'prefix' || '%') = :first_memberships AS same_memberships
FROM pg_proc WHERE pronamespace = 'place'::regnamespace;
SET ROLE :"gateway";
SELECT placed, seq FROM place.place(:big, 3, 0, 2, :u1);
RESET ROLE;

-- Clean up: the database, then the roles.
\c :"main_db"
DROP DATABASE :"roles_db";
DROP ROLE :"gateway", :"analyst", :"dba", :"stranger", :"pgplace_player", :"pgplace_reader", :"pgplace_admin";
SELECT count(*) AS roles_left FROM pg_roles WHERE rolname LIKE :'prefix' || '%';
