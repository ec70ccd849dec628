-- sql/roles.sql: who may do what with pgplace.
--
-- Three group roles (NOLOGIN; people and services log in as their own roles, members of one):
--   pgplace_reader  reads boards and history: SELECT on every place.* table except
--                   place.user_tokens, place.user_identities, the gateway's sessions (place.sessions,
--                   place.session_views) and its placers' tokens (place.placers), and the read functions (board_bits,
--                   get_tile, bitfield_get/set, tile_history, user_history, tiles,
--                   board_at, board_at_seq, tile_at, tiles_at, render_png, frozen_tiles,
--                   watched, views, await_durable,
--                   changes_since, change_pos, change_feed, view_rows, views_touched,
--                   and the helpers _current_bits, _newest_bits, _apply_tiles,
--                   _ticked_changes and _check_log_read).
--   pgplace_player  what pgplace_reader may, plus placing: place, place_many,
--                   user_for_token, user_for_subject, create_guest and settled_seq (it holds off writers while it
--                   runs), the gateway's session_* functions, tick (which
--                   gives committed changes their positions), claim_placer and
--                   release_placer (a board's placer lease) and session_users_public. Meant for the
--                   gateway (or another trusted client): place() takes the user id
--                   as an argument, so a player role can place for any user; the
--                   gateway checks tokens before it calls place_many.
--   pgplace_admin   what pgplace_reader may, plus the knobs: create_board, create_user,
--                   set_cooldown, set_board_state, set_keyframe_every, build_keyframes,
--                   compact_history, resize_board, set_palette, set_palette_names,
--                   set_freeze_after,
--                   ban_user, unban_user, restore_region, revert_user, watch, unwatch,
--                   kick, set_change_retention, create_view, drop_view (watching only
--                   the tables the login owns), delete_board, erase_user.
-- No role may INSERT, UPDATE or DELETE any table: the functions that write are SECURITY
-- DEFINER (extension/schema/functions.sql) and do it with the owner's rights, keeping bits,
-- seq and history in step. PUBLIC (every other role) loses all access to schema place.
--
-- Roles belong to the whole cluster; the grants belong to one database. Run this as a
-- superuser in each database that has done CREATE EXTENSION pgplace, and again after every
-- ALTER EXTENSION pgplace UPDATE (the readers an update adds start out callable by PUBLIC -
-- its SECURITY DEFINER functions never are; a re-run takes that back and grants the ones
-- named in the lists below):
--
--   psql -v ON_ERROR_STOP=1 -d mydb -f sql/roles.sql
--   CREATE ROLE gateway LOGIN PASSWORD '...' IN ROLE pgplace_player;
--   CREATE ROLE alice LOGIN PASSWORD '...' IN ROLE pgplace_admin;    -- a DBA
--   CREATE ROLE analyst LOGIN PASSWORD '...' IN ROLE pgplace_reader; -- history questions
--   GRANT pgplace_reader TO bob;                                     -- an existing role
--
-- It runs in one transaction and is idempotent: it creates the roles that are missing,
-- then makes the privileges on schema place exactly what is written here (what the three
-- roles held before is revoked first, so a grant made by hand to them does not survive a
-- re-run; grant extra rights to the login roles instead). A function in none of the lists
-- stays callable by its owner and superusers only.
--
-- Other role names: psql -v pgplace_player=... -v pgplace_reader=... -v pgplace_admin=...
-- To keep boards world-readable after all: GRANT USAGE ON SCHEMA place TO PUBLIC and
-- GRANT SELECT on the tables you want to PUBLIC (never place.user_tokens).
-- pg_dump keeps these grants; a fresh cluster needs the roles before pg_restore (run
-- this file there, or pg_dumpall --roles-only).

\if :{?pgplace_reader}
\else
\set pgplace_reader pgplace_reader
\endif
\if :{?pgplace_player}
\else
\set pgplace_player pgplace_player
\endif
\if :{?pgplace_admin}
\else
\set pgplace_admin pgplace_admin
\endif

BEGIN;

DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_extension WHERE extname = 'pgplace') THEN
        RAISE EXCEPTION 'pgplace is not installed in database %', pg_catalog.current_database()
            USING HINT = 'Run CREATE EXTENSION pgplace in this database first, then this file.';
    END IF;
END
$$;

-- Which function goes to which role, by name (every overload in schema place). Names the
-- extension does not have yet are skipped, so this file works before and after they come.
-- The player's and the admin's functions write (or read place.user_tokens), so they must be
-- SECURITY DEFINER: these roles hold no privilege on the tables themselves.
CREATE TEMP TABLE pgplace_role_functions (grantee text, fn name, definer bool) ON COMMIT DROP;
INSERT INTO pgplace_role_functions
SELECT :'pgplace_reader', unnest(ARRAY[
    'board_bits', 'get_tile', 'bitfield_get', 'bitfield_set',
    'tile_history', 'user_history', 'tiles', 'board_at', 'board_at_seq', 'tile_at', 'tiles_at', 'render_png',
    'frozen_tiles', 'watched', 'views', 'await_durable', 'changes_since', 'change_pos', 'change_feed', 'view_rows', 'views_touched',
    -- board_bits reads the board through _current_bits, which reads the chunks through
    -- _newest_bits and applies the history after their fold with _apply_tiles (as its
    -- caller: the checks are SELECT on the tables), changes_since and change_feed the log
    -- through the last two.
    '_current_bits', '_newest_bits', '_apply_tiles', '_ticked_changes', '_check_log_read']), false
UNION ALL
SELECT :'pgplace_player', unnest(ARRAY[
    'place', 'place_many', 'user_for_token', 'user_for_subject', 'create_guest', 'settled_seq', 'session_create', 'session_load',
    'session_set_user', 'session_subscribe', 'session_unsubscribe', 'session_destroy',
    'session_hold', 'session_move', 'session_hand_over', 'session_take_handover', 'session_states', 'session_users',
    'session_seen', 'session_expire', 'session_watchers', 'tick', 'claim_placer', 'release_placer', 'session_users_public']), true
UNION ALL
SELECT :'pgplace_admin', unnest(ARRAY[
    'create_board', 'create_user', 'set_cooldown', 'set_board_state', 'set_keyframe_every',
    'build_keyframes', 'compact_history', 'resize_board', 'set_palette', 'set_palette_names', 'ban_user',
    'unban_user', 'restore_region', 'revert_user', 'set_freeze_after', 'set_change_retention',
    'delete_board', 'erase_user']), true
UNION ALL
-- These run as their caller, whom they authorize, and call their SECURITY DEFINER bodies
-- (extension/src/callers.rs).
SELECT :'pgplace_admin', unnest(ARRAY['watch', 'unwatch', 'kick', 'create_view', 'drop_view']), false;
-- Tables pgplace_reader may not read (the rest of schema place it may).
CREATE TEMP TABLE pgplace_secret_tables (relname name) ON COMMIT DROP;
INSERT INTO pgplace_secret_tables VALUES ('user_tokens'), ('user_identities'), ('sessions'), ('session_views'), ('placers');

-- The roles, when missing.
SELECT format('CREATE ROLE %I NOLOGIN', r.rolname)
FROM (VALUES (1, :'pgplace_reader'), (2, :'pgplace_player'), (3, :'pgplace_admin')) AS r(ord, rolname)
WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = r.rolname)
ORDER BY r.ord
\gexec
-- Players and admins read what readers read.
SELECT format('GRANT %I TO %I', :'pgplace_reader', m.rolname)
FROM (VALUES (1, :'pgplace_player'), (2, :'pgplace_admin')) AS m(ord, rolname)
WHERE NOT pg_catalog.pg_has_role(m.rolname, :'pgplace_reader', 'MEMBER')
ORDER BY m.ord
\gexec

-- Start from nothing: PUBLIC and the three roles lose every right on schema place.
SELECT format('REVOKE ALL ON SCHEMA place FROM PUBLIC, %1$I, %2$I, %3$I;
               REVOKE ALL ON ALL TABLES IN SCHEMA place FROM PUBLIC, %1$I, %2$I, %3$I;
               REVOKE ALL ON ALL SEQUENCES IN SCHEMA place FROM PUBLIC, %1$I, %2$I, %3$I;
               REVOKE ALL ON ALL ROUTINES IN SCHEMA place FROM PUBLIC, %1$I, %2$I, %3$I',
              :'pgplace_reader', :'pgplace_player', :'pgplace_admin')
\gexec

SELECT format('GRANT USAGE ON SCHEMA place TO %I, %I, %I',
              :'pgplace_reader', :'pgplace_player', :'pgplace_admin')
\gexec
SELECT format('GRANT SELECT ON place.%I TO %I', c.relname, :'pgplace_reader')
FROM pg_catalog.pg_class c
WHERE c.relnamespace = 'place'::regnamespace
  AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
  AND c.relname NOT IN (SELECT relname FROM pgplace_secret_tables)
ORDER BY c.relname
\gexec
SELECT format('GRANT EXECUTE ON FUNCTION place.%I(%s) TO %I',
              p.proname, pg_catalog.pg_get_function_identity_arguments(p.oid), f.grantee)
FROM pgplace_role_functions f
JOIN pg_catalog.pg_proc p ON p.proname = f.fn AND p.pronamespace = 'place'::regnamespace
ORDER BY f.grantee, p.oid
\gexec

-- A writing function that is not SECURITY DEFINER would fail for these roles: say so now
-- rather than at its first call.
DO $$
DECLARE
    missing text;
BEGIN
    SELECT string_agg(p.oid::regprocedure::text, ', ' ORDER BY p.oid) INTO missing
    FROM pgplace_role_functions f
    JOIN pg_catalog.pg_proc p ON p.proname = f.fn AND p.pronamespace = 'place'::regnamespace
    WHERE f.definer AND NOT p.prosecdef;
    IF missing IS NOT NULL THEN
        RAISE WARNING 'pgplace functions that should be SECURITY DEFINER but are not (the roles cannot use them): %', missing
            USING HINT = 'Update the extension (ALTER EXTENSION pgplace UPDATE), then run this file again.';
    END IF;
END
$$;

COMMIT;
