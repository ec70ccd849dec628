-- How the functions run, and what \df+ place.* shows of them.

-- The hot paths run a handful of kept SPI plans with parameters; left to choose, the plan
-- cache re-plans them on every call (a custom plan looks cheaper for an array parameter),
-- which was a seventh of place()'s CPU. Their generic plans are the right ones.
ALTER FUNCTION place.place(bigint, int, int, int, bigint, text) SET plan_cache_mode = force_generic_plan;
ALTER FUNCTION place.place_many(bigint, bigint[], int[], int[], int[], text[]) SET plan_cache_mode = force_generic_plan;
ALTER FUNCTION place.board_bits(bigint) SET plan_cache_mode = force_generic_plan;
ALTER FUNCTION place.get_tile(bigint, int, int) SET plan_cache_mode = force_generic_plan;
ALTER FUNCTION place.user_for_token(text) SET plan_cache_mode = force_generic_plan;
ALTER FUNCTION place.board_at_seq(bigint, bigint) SET plan_cache_mode = force_generic_plan;
ALTER FUNCTION place.board_at(bigint, timestamptz) SET plan_cache_mode = force_generic_plan;

COMMENT ON FUNCTION place.create_board(text, int, int, int, interval, text[]) IS
    'A new empty board: name, width, height, bits_per_tile (1, 2, 4, 8), cooldown, palette (#rrggbb strings; NULL = default). Returns its id.';
COMMENT ON FUNCTION place.create_user(text) IS
    'A new user and their token (256 random bits, shown only this once; stored as SHA-256).';
COMMENT ON FUNCTION place.user_for_token(text) IS
    'The user a token belongs to, or NULL.';
COMMENT ON FUNCTION place.create_guest() IS
    'A guest (users.guest): a user with a generated name (guest-...) and a token, shown this once. For the gateway, which bounds how many an address makes and where they place.';
COMMENT ON FUNCTION place.user_for_subject(text, text, text) IS
    'The user a site''s identity provider calls subject (a JWT''s iss and sub, checked by the caller), made on first sight with the offered name (free, or with the user''s id after it).';
COMMENT ON FUNCTION place.place(bigint, int, int, int, bigint, text) IS
    'Places one tile (board, x, y, color, user). Not placed: placed = false, reason ''cooldown'' (next_allowed_at says when) or ''frozen'' (the tile is frozen; next_allowed_at is infinity). key (optional, 1 to 200 bytes): a retry with the same key within a day answers with the first placement instead of placing again.';
COMMENT ON FUNCTION place.place_many(bigint, bigint[], int[], int[], int[], text[]) IS
    'Places many tiles in array order in one transaction, with the rules of place(); one row per item, with place()''s reason. keys (optional: NULL, or one per item, NULL for none) as place()''s key.';
COMMENT ON FUNCTION place.board_bits(bigint) IS
    'The packed board (tile n = x + width*y at bits [n*k, (n+1)*k) from the MSB of byte 0) and the seq it reflects.';
COMMENT ON FUNCTION place.get_tile(bigint, int, int) IS
    'The colour (palette index) of tile (x, y).';
COMMENT ON FUNCTION place.bitfield_get(bytea, int, bigint) IS
    'Tile n of a packed bytea (Redis BITFIELD GET u<k> #n); n outside the bytea is an error.';
COMMENT ON FUNCTION place.bitfield_set(bytea, int, bigint, int) IS
    'A copy of a packed bytea with tile n set (Redis BITFIELD SET u<k> #n); never changes its length.';
COMMENT ON FUNCTION place.set_cooldown(bigint, interval) IS
    'Changes a board''s cooldown at once (0 to 366 days); listeners get a settings notification.';
COMMENT ON FUNCTION place.set_board_state(bigint, text) IS
    'open, paused, frozen or closed (only an open board takes placements); listeners get a settings notification.';
COMMENT ON FUNCTION place.resize_board(bigint, int, int) IS
    'Grows or shrinks a board, keeping its top-left part (new tiles: colour 0); the history stays, the resize belongs to the current seq. Listeners get a settings notification.';
COMMENT ON FUNCTION place.set_palette(bigint, text[]) IS
    'Replaces the palette (#rrggbb strings, at most 2^bits_per_tile); it must still name every colour on the board. A colour that stays at its index keeps its name (set_palette_names). Listeners get a settings notification.';
COMMENT ON FUNCTION place.set_palette_names(bigint, text[]) IS
    'Names the palette''s colours: one name per colour (1 to 40 characters; NULL for a colour without one), or NULL to name none. Pages show them beside the swatches. set_palette keeps the name of a colour that stays at its index. Listeners get a settings notification.';
COMMENT ON FUNCTION place._placement_payloads(bigint[], bigint[], int[], int[], int[], bigint[], timestamptz[]) IS
    'Internal: the NOTIFY payloads for rows inserted into place.placements (the library sends them since 0.8.4).';
COMMENT ON FUNCTION place._apply_tiles(bytea, int, bigint[], int[]) IS
    'Internal: a chunk with tiles set in order (used by place and place_many).';
COMMENT ON FUNCTION place._newest_bits(bigint) IS
    'Internal: a board''s packed bits as its chunks store them, the newest version of each (place._current_bits adds the history after their fold).';
COMMENT ON FUNCTION place._current_bits(bigint) IS
    'Internal: a board''s packed bits now: its chunks and the history after their fold (used by board_bits).';
COMMENT ON FUNCTION place._board_payload(bigint, bigint, text) IS
    'Internal: the NOTIFY payload for a board created, changed or deleted.';
COMMENT ON FUNCTION place._notify_board_change() IS 'Internal: row trigger announcing board changes.';
COMMENT ON FUNCTION place.tile_history(bigint, int, int, bigint, int) IS
    'Who placed tile (x, y) and when, newest first: lim rows (1 to 10,000) with seq < before_seq (NULL: the newest); pass a page''s last seq for the next.';
COMMENT ON FUNCTION place.user_history(bigint, bigint, bigint, int) IS
    'A user''s placements on a board, newest first, paged by seq like tile_history.';
COMMENT ON FUNCTION place.tiles(bigint) IS
    'Every tile of the board as a row (x, y, color), for analysis in plain SQL.';
COMMENT ON FUNCTION place.board_at_seq(bigint, bigint) IS
    'The packed board right after placement seq (0: empty), from the nearest keyframe plus the history after it.';
COMMENT ON FUNCTION place.board_at(bigint, timestamptz) IS
    'The packed board as it was at a time, and its seq: right after the newest placement stamped at or before it.';
COMMENT ON FUNCTION place.tile_at(bigint, int, int, timestamptz) IS
    'The colour (palette index) tile (x, y) had at a time: right after the newest placement stamped at or before it.';
COMMENT ON FUNCTION place.tiles_at(bigint, timestamptz, int, int, int, int) IS
    'The tiles of the rectangle (x, y, width, height; NULL: to the edge) as they were at a time, row by row: colour, and the seq of the placement that gave it (NULL: none in the history).';
COMMENT ON FUNCTION place.set_keyframe_every(bigint, int) IS
    'Store a keyframe (the whole board) every N placements from now on (1 to 1,000,000; default 10,000).';
COMMENT ON FUNCTION place.build_keyframes(bigint) IS
    'Writes the keyframes missing from the history already made (after an upgrade or an interval change); returns how many.';
COMMENT ON FUNCTION place.render_png(bigint, timestamptz, int, int, int, int, int) IS
    'The board (at a time; NULL: now) as a PNG with its palette: each tile scale x scale pixels, cropped to x, y, width, height (NULL: to the edge).';
COMMENT ON FUNCTION place.ban_user(bigint, timestamptz, text) IS
    'Bans a user until a time (NULL: until unbanned), with a reason: their placements are refused with SQLSTATE 42501.';
COMMENT ON FUNCTION place.unban_user(bigint) IS
    'Lifts a user''s ban; returns whether there was one.';
COMMENT ON FUNCTION place.restore_region(bigint, int, int, int, int, timestamptz) IS
    'Puts the rectangle (x, y, width, height) back as it was at a time, as ordinary placements by the user "moderation"; returns how many tiles.';
COMMENT ON FUNCTION place.revert_user(bigint, bigint, timestamptz) IS
    'Undoes a user''s tiles placed since a time that are still on top, as ordinary placements by the user "moderation"; returns how many tiles.';
COMMENT ON FUNCTION place.delete_board(bigint) IS
    'Deletes a board with its history (waiting for placements in flight); its subscribers get a deleted event. Returns its last seq.';
COMMENT ON FUNCTION place.erase_user(bigint) IS
    'Erases a person: their name, token, sessions, bans and placement keys go; their placements stay, made by the user "erased" (seqs, tiles and board_at unchanged). Returns how many placements.';
COMMENT ON FUNCTION place.compact_history(bigint, timestamptz) IS
    'Drops the placements made before a time, after storing the board then as a keyframe; board_at keeps working from there on. Returns how many were dropped.';
COMMENT ON FUNCTION place.set_freeze_after(bigint, interval) IS
    'Tiles showing a non-zero colour unchanged for this long freeze: placements on them are refused (NULL: never; more than 0, at most 3660 days). Listeners get a settings notification.';
COMMENT ON FUNCTION place.settled_seq(bigint) IS
    'Waits for the placements on the board that have taken their seqs to commit; returns the seq and the time: later placements checked their tiles after it (for announcing frozen tiles).';
COMMENT ON FUNCTION place.await_durable() IS
    'Waits until every transaction committed before the call is durable (flushed, and confirmed by the synchronous standbys synchronous_commit asks for). A gateway with --commit asynchronous answers after this, and every gateway calls it after the reads it shows; a reader in SQL that must not show a placement a crash could take back calls it after reading.';
COMMENT ON FUNCTION place.await_durable(xid) IS
    'Waits until the transaction with this xid (a row''s xmin) is durable, as await_durable() does for everything committed, and returns true: SELECT ... WHERE place.await_durable(xmin) shows only rows a crash or a failover cannot take back. It flushes only what an asynchronous commit among the writers needs: no WAL of transactions still in flight.';
COMMENT ON FUNCTION place.claim_placer(bigint, bigint, text, text, integer) IS
    'Takes or renews a gateway''s lease on grouping a board''s placements (when free, expired or its own) for lease_ms; answers the gateway that holds it, its address and its token.';
COMMENT ON FUNCTION place.release_placer(bigint, bigint) IS
    'Gives up a gateway''s lease on a board''s placements, if it holds it; answers whether it did.';
COMMENT ON FUNCTION place.session_users_public(bigint[]) IS
    'The users the sessions with these public ids act for now, in order (place_many''s user_ids, read in the placement''s own statement); 42501 when one has none or is gone.';
COMMENT ON FUNCTION place.frozen_tiles(bigint, timestamptz) IS
    'The tiles of the board as it is now that are frozen at a time (default now; later: what will freeze if untouched), with the seq of their last change and when they freeze.';

-- The readers run under the same search_path as the writers. The SPI plans a backend
-- keeps are shared by both (loading a board's row, say) and are tied to the search_path
-- they were made under: a connection that calls both kinds, as the gateway's do, would
-- otherwise re-plan them at every switch.
ALTER FUNCTION place.board_bits(bigint) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION place.get_tile(bigint, int, int) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION place.tile_history(bigint, int, int, bigint, int) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION place.user_history(bigint, bigint, bigint, int) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION place.tiles(bigint) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION place.board_at(bigint, timestamptz) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION place.board_at_seq(bigint, bigint) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION place.tile_at(bigint, int, int, timestamptz) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION place.tiles_at(bigint, timestamptz, int, int, int, int) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION place.render_png(bigint, timestamptz, int, int, int, int, int) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION place.frozen_tiles(bigint, timestamptz) SET search_path = pg_catalog, pg_temp;

COMMENT ON FUNCTION place.watch(regclass, text[], boolean) IS
    'Logs every committed INSERT, UPDATE and DELETE of a table you own (its primary key, and the given columns of the new and old row; all when NULL) in place.changes, at positions in commit order (place.tick). A table with row-level security only with all_rows => true.';
COMMENT ON FUNCTION place.unwatch(regclass) IS
    'Stops announcing a table''s changes (its views must be dropped first). False when it was not watched.';
COMMENT ON FUNCTION place.watched() IS
    'The watched tables, their key and watched columns, and the views over them.';
COMMENT ON FUNCTION place.kick(regclass, jsonb) IS
    'Announces one row of a watched table again, as an update of itself (pk: its key columns as a JSON object).';
COMMENT ON FUNCTION place.changes_since(bigint, int) IS
    'The logged changes after a change log position (at most lim positions): whole transactions, positions in commit order, the changes of one row in the order they were made.';
COMMENT ON FUNCTION place.change_pos() IS
    'The newest change log position this snapshot sees (0 before any): it sees every transaction of the positions up to it.';
COMMENT ON FUNCTION place.tick() IS
    'Gives the transactions that changed watched tables and committed since the last position the next one, if there are any; returns the newest position. The gateway calls it every few milliseconds.';
COMMENT ON FUNCTION place.change_feed(bigint, int) IS
    'For the gateway: each position after after_pos (at most lim) with its changes as JSON, or the oids of its tables when they are large.';
COMMENT ON FUNCTION place.set_change_retention(interval) IS
    'How long the change log keeps changes (default 1 day).';
COMMENT ON FUNCTION place.create_view(text, regclass, text, text, boolean, int, boolean) IS
    'A named list view for the gateway: rows of a watched table matching filter, ordered by order_by (watched columns, comma-separated), at most max_limit; signed_in: only sessions bound to a user may subscribe.';
COMMENT ON FUNCTION place.drop_view(text) IS
    'Drops a list view; its subscribers get a deleted event. False when there was none.';
COMMENT ON FUNCTION place.views() IS
    'The list views.';
COMMENT ON FUNCTION place.views_touched(text[], jsonb) IS
    'Which of the views (of one table) a change of the given rows may touch: those whose filter one of them matches.';
COMMENT ON FUNCTION place.view_rows(text, int) IS
    'The first lim rows (NULL: max_limit) of a list view as a JSON array, the change log position they reflect, the view''s table, and whether only signed-in sessions may subscribe.';


-- ---------------------------------------------------------------------------------------
-- Who may write (sql/roles.sql creates the roles that use this).
-- The functions that write run as the extension's owner (SECURITY DEFINER): a role needs
-- no privilege on any table to place a tile or turn a knob, and no role can write the
-- tables any other way, so bits, seq and history always change together. Their SQL names
-- every table and helper as place.* and everything else lives in pg_catalog, so the
-- search_path is pinned to pg_catalog (pg_temp last, where it cannot shadow anything):
-- a caller's search_path cannot redirect a statement run with the owner's rights.
-- EXECUTE is taken from PUBLIC at once (the end of this file); sql/roles.sql grants them to
-- pgplace_player (place, place_many, settled_seq) and pgplace_admin (the knobs). A new
-- function that writes belongs in the list below and in sql/roles.sql. user_for_token is
-- SECURITY DEFINER already (it reads place.user_tokens, which no role but the owner may read).
ALTER FUNCTION place.place(bigint, int, int, int, bigint, text)
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION place.place_many(bigint, bigint[], int[], int[], int[], text[])
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION place.create_board(text, int, int, int, interval, text[])
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION place.create_user(text)
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION place.user_for_subject(text, text, text)
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION place.create_guest()
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION place.set_cooldown(bigint, interval)
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION place.set_board_state(bigint, text)
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION place.set_keyframe_every(bigint, int)
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION place.build_keyframes(bigint)
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION place.compact_history(bigint, timestamptz)
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION place.resize_board(bigint, int, int)
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION place.set_palette(bigint, text[])
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION place.set_palette_names(bigint, text[])
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION place.ban_user(bigint, timestamptz, text)
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION place.unban_user(bigint)
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION place.restore_region(bigint, int, int, int, int, timestamptz)
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION place.revert_user(bigint, bigint, timestamptz)
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION place.set_freeze_after(bigint, interval)
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION place.settled_seq(bigint)
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION place.delete_board(bigint)
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION place.erase_user(bigint)
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
-- Watching: the admin's functions, the gateway's reader of views (it reads the watched
-- tables, which the gateway's role need not read), and the triggers that write the change
-- log for whichever role wrote the watched table. Filters are always read with standard
-- strings (as they were checked), and a row's intervals are written the same way whatever
-- the writer's session says (the gateway tests filters on them).
-- watch, unwatch, kick, create_view and drop_view run as their caller (extension/src/callers.rs) and
-- call their bodies as the owner; the search path is pinned for the statement that does.
ALTER FUNCTION place.watch(regclass, text[], boolean) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION place.unwatch(regclass) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION place.kick(regclass, jsonb) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION place.create_view(text, regclass, text, text, boolean, int, boolean)
    SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION place._watch(regrole, regclass, text[], boolean)
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET standard_conforming_strings = on;
ALTER FUNCTION place._unwatch(regrole, regclass)
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION place._kick(regrole, regclass, jsonb)
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET pgplace.log_writer = on;
ALTER FUNCTION place.set_change_retention(interval)
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION place._create_view(regrole, text, regclass, text, text, boolean, int, boolean)
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET standard_conforming_strings = on;
ALTER FUNCTION place.drop_view(text) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION place._drop_view(regrole, text)
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION place.view_rows(text, int)
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET standard_conforming_strings = on;
ALTER FUNCTION place.views_touched(text[], jsonb)
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET standard_conforming_strings = on;
-- The capture trigger runs no SQL: it writes place.changes itself (extension/src/capture.rs)
-- and sets IntervalStyle itself while it writes rows as JSON, so it has no SET clause (one
-- would cost every watched statement a fifth of its speed). SECURITY DEFINER all the same:
-- so that EXECUTE is taken from PUBLIC below, and no role can attach it to a table of its
-- own to write the log.
ALTER FUNCTION place._capture_changes() SECURITY DEFINER;
-- The ticker writes the positions, which no role may write any other way. It and the
-- readers of the log read a range of its newest transaction ids, which only the index
-- finds without reading the whole log; the statistics of a log that grows and is pruned
-- cannot tell the planner that (a generic plan took a sequential scan of 570,000 rows for
-- each tick), so they plan without sequential scans - and without JIT, which the cost
-- that marks a sequential scan as disabled would otherwise call for (160 ms a tick).
ALTER FUNCTION place.tick()
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET enable_seqscan = off SET jit = off
    SET pgplace.log_writer = on;
ALTER FUNCTION place.change_feed(bigint, int) SET enable_seqscan = off SET jit = off;
ALTER FUNCTION place.changes_since(bigint, int) SET enable_seqscan = off SET jit = off;
-- The guard of watched tables runs for whoever altered one, and reads place.watches; the
-- event trigger that forgets dropped tables, for whoever dropped one.
ALTER FUNCTION place._guard_watched_tables()
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION place._forget_dropped_tables()
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
-- The functions that change identity (owner_reads.rs, filters.rs) are not SECURITY DEFINER:
-- they run as their caller, which must be the extension's owner (they check). Nobody else
-- may EXECUTE them either: one runs any query as a table's owner.
REVOKE EXECUTE ON FUNCTION place._read_as_owner(oid, text, text, jsonb) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION place._check_filter(text, oid, text[], text, oid) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION place._lock_table(oid) FROM PUBLIC;
-- The entry points that run as their caller are not SECURITY DEFINER, so the loop below
-- leaves them: they are pgplace_admin's (sql/roles.sql), not every role's.
REVOKE EXECUTE ON FUNCTION place.watch(regclass, text[], boolean) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION place.unwatch(regclass) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION place.kick(regclass, jsonb) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION place.create_view(text, regclass, text, text, boolean, int, boolean) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION place.drop_view(text) FROM PUBLIC;

-- Every SECURITY DEFINER function of the extension (these above, the session functions,
-- the triggers that keep versions) is taken from PUBLIC here, by the extension itself: one
-- that every role may call would hand every role the owner's rights, and a trigger function
-- that every role may EXECUTE could be attached to a role's own table (CREATE TRIGGER asks
-- for EXECUTE; firing does not) to run as the owner over rows that role chose. A database
-- where sql/roles.sql never ran is safe too; the owner and superusers still call them, and
-- sql/roles.sql grants them to its roles.
DO $$
DECLARE
    f regprocedure;
BEGIN
    FOR f IN SELECT p.oid FROM pg_catalog.pg_proc p
             WHERE p.pronamespace = 'place'::regnamespace AND p.prosecdef
             ORDER BY p.oid
    LOOP
        EXECUTE pg_catalog.format('REVOKE EXECUTE ON FUNCTION %s FROM PUBLIC', f);
    END LOOP;
END
$$;
