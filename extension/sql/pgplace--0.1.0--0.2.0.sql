-- pgplace 0.1.0 -> 0.2.0 (ALTER EXTENSION pgplace UPDATE): history queries, keyframes and
-- time travel, PNG rendering, resizing, palettes and board states, moderation, and writers
-- that run as the extension's owner.
-- Checked by tests/upgrade/run.sh: an updated database must be exactly a fresh 0.2.0.
\echo Use "ALTER EXTENSION pgplace UPDATE" to load this file. \quit

-- Keyframes, history retention, board states, bans (schema.sql).
ALTER TABLE place.boards
    ADD COLUMN keyframe_every int NOT NULL DEFAULT 10000 CHECK (keyframe_every > 0),
    ADD COLUMN history_from bigint NOT NULL DEFAULT 0 CHECK (history_from >= 0),
    ADD COLUMN freeze_after interval CHECK (freeze_after > interval '0'),
    ADD COLUMN last_placed_at timestamptz,
    DROP CONSTRAINT boards_state_check,
    ADD CONSTRAINT boards_state_check CHECK (state IN ('open', 'paused', 'frozen', 'closed'));
-- Snapshots of whole boards, so that the board at any seq is a keyframe plus at most
-- keyframe_every placements replayed (place.board_at, place.board_at_seq).
CREATE TABLE place.keyframes (
    board_id      bigint NOT NULL REFERENCES place.boards (id) ON DELETE CASCADE,
    seq           bigint NOT NULL CHECK (seq >= 0),
    -- When the placement with this seq was made (its placed_at).
    taken_at      timestamptz NOT NULL,
    width         int NOT NULL,
    height        int NOT NULL,
    bits_per_tile int NOT NULL,
    bits          bytea NOT NULL,
    PRIMARY KEY (board_id, seq)
);
-- A placement that reaches a keyframe writes it under its board's lock: lz4 compresses
-- a board several times faster than the default pglz.
ALTER TABLE place.keyframes ALTER COLUMN bits SET COMPRESSION lz4;
CREATE INDEX keyframes_time_idx ON place.keyframes (board_id, taken_at);
COMMENT ON TABLE place.keyframes IS 'The packed board at some seqs (every boards.keyframe_every placements), for place.board_at';

-- Users who may not place (until `until`; NULL: until place.unban_user).
CREATE TABLE place.bans (
    user_id   bigint PRIMARY KEY REFERENCES place.users (id) ON DELETE CASCADE,
    banned_at timestamptz NOT NULL DEFAULT now(),
    until     timestamptz,
    reason    text
);
COMMENT ON TABLE place.bans IS 'Banned users (place.ban_user / unban_user): their placements are refused';

-- Stamps never go back from here on (0.1.0 stamped each placement with its own clock read).
UPDATE place.boards b
SET last_placed_at = (SELECT max(p.placed_at) FROM place.placements p WHERE p.board_id = b.id);

-- A change of freeze_after is news for listeners too (notify.sql).
DROP TRIGGER notify_board_settings ON place.boards;
CREATE TRIGGER notify_board_settings
AFTER UPDATE ON place.boards
FOR EACH ROW
WHEN ((OLD.name, OLD.width, OLD.height, OLD.bits_per_tile, OLD.palette, OLD.cooldown, OLD.state, OLD.freeze_after)
      IS DISTINCT FROM
      (NEW.name, NEW.width, NEW.height, NEW.bits_per_tile, NEW.palette, NEW.cooldown, NEW.state, NEW.freeze_after))
EXECUTE FUNCTION place._notify_board_change();

SELECT pg_catalog.pg_extension_config_dump('place.keyframes', '');
SELECT pg_catalog.pg_extension_config_dump('place.bans', '');
GRANT SELECT ON place.keyframes, place.bans TO PUBLIC;

-- New functions (as the 0.2.0 install script creates them).
CREATE  FUNCTION "tile_history"(
	"board_id" bigint, /* Option < i64 > */
	"x" INT, /* Option < i32 > */
	"y" INT, /* Option < i32 > */
	"before_seq" bigint DEFAULT NULL, /* Option < i64 > */
	"lim" INT DEFAULT 50 /* Option < i32 > */
) RETURNS TABLE (
	"seq" bigint,  /* i64 */
	"color" INT,  /* i32 */
	"user_id" bigint,  /* i64 */
	"user_name" TEXT,  /* String */
	"placed_at" timestamp with time zone  /* TimestampWithTimeZone */
)
STABLE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'tile_history_wrapper';

CREATE  FUNCTION "user_history"(
	"board_id" bigint, /* Option < i64 > */
	"user_id" bigint, /* Option < i64 > */
	"before_seq" bigint DEFAULT NULL, /* Option < i64 > */
	"lim" INT DEFAULT 50 /* Option < i32 > */
) RETURNS TABLE (
	"seq" bigint,  /* i64 */
	"x" INT,  /* i32 */
	"y" INT,  /* i32 */
	"color" INT,  /* i32 */
	"placed_at" timestamp with time zone  /* TimestampWithTimeZone */
)
STABLE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'user_history_wrapper';

CREATE  FUNCTION "tiles"(
	"board_id" bigint /* Option < i64 > */
) RETURNS TABLE (
	"x" INT,  /* i32 */
	"y" INT,  /* i32 */
	"color" INT  /* i32 */
)
STABLE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'tiles_wrapper';

CREATE  FUNCTION "board_at_seq"(
	"board_id" bigint, /* Option < i64 > */
	"seq" bigint /* Option < i64 > */
) RETURNS TABLE (
	"seq" bigint,  /* i64 */
	"width" INT,  /* i32 */
	"height" INT,  /* i32 */
	"bits" bytea  /* Vec < u8 > */
)
STABLE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'board_at_seq_wrapper';

CREATE  FUNCTION "board_at"(
	"board_id" bigint, /* Option < i64 > */
	"at" timestamp with time zone /* Option < TimestampWithTimeZone > */
) RETURNS TABLE (
	"seq" bigint,  /* i64 */
	"width" INT,  /* i32 */
	"height" INT,  /* i32 */
	"bits" bytea  /* Vec < u8 > */
)
STABLE PARALLEL SAFE 
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'board_at_time_wrapper';

CREATE  FUNCTION "set_keyframe_every"(
	"board_id" bigint, /* Option < i64 > */
	"every" INT /* Option < i32 > */
) RETURNS void
VOLATILE PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'set_keyframe_every_wrapper';

CREATE  FUNCTION "build_keyframes"(
	"board_id" bigint /* Option < i64 > */
) RETURNS bigint /* i64 */
VOLATILE PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'build_keyframes_wrapper';

CREATE  FUNCTION "compact_history"(
	"board_id" bigint, /* Option < i64 > */
	"before" timestamp with time zone /* Option < TimestampWithTimeZone > */
) RETURNS bigint /* i64 */
VOLATILE PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'compact_history_wrapper';

CREATE  FUNCTION "render_png"(
	"board_id" bigint, /* Option < i64 > */
	"at" timestamp with time zone DEFAULT NULL, /* Option < TimestampWithTimeZone > */
	"scale" INT DEFAULT 1, /* Option < i32 > */
	"x" INT DEFAULT 0, /* Option < i32 > */
	"y" INT DEFAULT 0, /* Option < i32 > */
	"width" INT DEFAULT NULL, /* Option < i32 > */
	"height" INT DEFAULT NULL /* Option < i32 > */
) RETURNS bytea /* Vec < u8 > */
STABLE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'render_png_wrapper';

CREATE  FUNCTION "resize_board"(
	"board_id" bigint, /* Option < i64 > */
	"width" INT, /* Option < i32 > */
	"height" INT /* Option < i32 > */
) RETURNS void
VOLATILE PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'resize_board_wrapper';

CREATE  FUNCTION "set_palette"(
	"board_id" bigint, /* Option < i64 > */
	"palette" TEXT[] /* :: std :: option :: Option < Vec < Option < String > > > */
) RETURNS void
VOLATILE PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'set_palette_wrapper';

CREATE  FUNCTION "ban_user"(
	"user_id" bigint, /* Option < i64 > */
	"until" timestamp with time zone DEFAULT NULL, /* Option < TimestampWithTimeZone > */
	"reason" TEXT DEFAULT NULL /* Option < & str > */
) RETURNS void
VOLATILE PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'ban_user_wrapper';

CREATE  FUNCTION "unban_user"(
	"user_id" bigint /* Option < i64 > */
) RETURNS bool /* bool */
VOLATILE PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'unban_user_wrapper';

CREATE  FUNCTION "restore_region"(
	"board_id" bigint, /* Option < i64 > */
	"x" INT, /* Option < i32 > */
	"y" INT, /* Option < i32 > */
	"width" INT, /* Option < i32 > */
	"height" INT, /* Option < i32 > */
	"at" timestamp with time zone /* Option < TimestampWithTimeZone > */
) RETURNS INT /* i32 */
VOLATILE PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'restore_region_wrapper';

CREATE  FUNCTION "revert_user"(
	"board_id" bigint, /* Option < i64 > */
	"user_id" bigint, /* Option < i64 > */
	"since" timestamp with time zone /* Option < TimestampWithTimeZone > */
) RETURNS INT /* i32 */
VOLATILE PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'revert_user_wrapper';

CREATE  FUNCTION "set_freeze_after"(
	"board_id" bigint, /* Option < i64 > */
	"freeze_after" interval /* Option < Interval > */
) RETURNS void
VOLATILE PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'set_freeze_after_wrapper';

CREATE  FUNCTION "settled_seq"(
	"board_id" bigint /* Option < i64 > */
) RETURNS TABLE (
	"seq" bigint,  /* i64 */
	"at" timestamp with time zone  /* TimestampWithTimeZone */
)
VOLATILE PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'settled_seq_wrapper';

CREATE  FUNCTION "frozen_tiles"(
	"board_id" bigint, /* Option < i64 > */
	"at" timestamp with time zone DEFAULT now() /* Option < TimestampWithTimeZone > */
) RETURNS TABLE (
	"x" INT,  /* i32 */
	"y" INT,  /* i32 */
	"color" INT,  /* i32 */
	"seq" bigint,  /* i64 */
	"frozen_at" timestamp with time zone  /* TimestampWithTimeZone */
)
STABLE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'frozen_tiles_wrapper';

-- How they run, and what \df+ shows of them (functions.sql).
ALTER FUNCTION place.board_at_seq(bigint, bigint) SET plan_cache_mode = force_generic_plan;
ALTER FUNCTION place.board_at(bigint, timestamptz) SET plan_cache_mode = force_generic_plan;
COMMENT ON FUNCTION place.set_board_state(bigint, text) IS
    'open, paused, frozen or closed (only an open board takes placements); listeners get a settings notification.';
COMMENT ON FUNCTION place.resize_board(bigint, int, int) IS
    'Grows or shrinks a board, keeping its top-left part (new tiles: colour 0); the history stays, the resize belongs to the current seq. Listeners get a settings notification.';
COMMENT ON FUNCTION place.set_palette(bigint, text[]) IS
    'Replaces the palette (#rrggbb strings, at most 2^bits_per_tile); it must still name every colour on the board. Listeners get a settings notification.';
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
COMMENT ON FUNCTION place.compact_history(bigint, timestamptz) IS
    'Drops the placements made before a time, after storing the board then as a keyframe; board_at keeps working from there on. Returns how many were dropped.';
COMMENT ON FUNCTION place.set_freeze_after(bigint, interval) IS
    'Tiles showing a non-zero colour unchanged for this long freeze: placements on them are refused (NULL: never; more than 0, at most 3660 days). Listeners get a settings notification.';
COMMENT ON FUNCTION place.settled_seq(bigint) IS
    'Waits for the placements on the board that have taken their seqs to commit; returns the seq and the time: later placements checked their tiles after it (for announcing frozen tiles).';
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
ALTER FUNCTION place.render_png(bigint, timestamptz, int, int, int, int, int) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION place.frozen_tiles(bigint, timestamptz) SET search_path = pg_catalog, pg_temp;

-- ---------------------------------------------------------------------------------------
-- Who may write (sql/roles.sql creates the roles that use this).
-- The functions that write run as the extension's owner (SECURITY DEFINER): a role needs
-- no privilege on any table to place a tile or turn a knob, and no role can write the
-- tables any other way, so bits, seq and history always change together. Their SQL names
-- every table and helper as place.* and everything else lives in pg_catalog, so the
-- search_path is pinned to pg_catalog (pg_temp last, where it cannot shadow anything):
-- a caller's search_path cannot redirect a statement run with the owner's rights.
-- EXECUTE is taken from PUBLIC at once: a SECURITY DEFINER writer that every role may call
-- would hand every role the owner's write access. The owner (and superusers) still call
-- them; sql/roles.sql grants them to pgplace_player (place, place_many) and
-- pgplace_admin (the knobs). A new function that writes belongs in both lists below.
-- user_for_token is SECURITY DEFINER already (it reads place.user_tokens, which no role
-- but the owner may read) and stays callable by PUBLIC until sql/roles.sql is run.
ALTER FUNCTION place.place(bigint, int, int, int, bigint)
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION place.place_many(bigint, bigint[], int[], int[], int[])
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION place.create_board(text, int, int, int, interval, text[])
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION place.create_user(text)
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
REVOKE EXECUTE ON FUNCTION
    place.place(bigint, int, int, int, bigint),
    place.place_many(bigint, bigint[], int[], int[], int[]),
    place.create_board(text, int, int, int, interval, text[]),
    place.create_user(text),
    place.set_cooldown(bigint, interval),
    place.set_board_state(bigint, text),
    place.set_keyframe_every(bigint, int),
    place.build_keyframes(bigint),
    place.compact_history(bigint, timestamptz),
    place.resize_board(bigint, int, int),
    place.set_palette(bigint, text[]),
    place.ban_user(bigint, timestamptz, text),
    place.unban_user(bigint),
    place.restore_region(bigint, int, int, int, int, timestamptz),
    place.revert_user(bigint, bigint, timestamptz),
    place.set_freeze_after(bigint, interval),
    place.settled_seq(bigint)
FROM PUBLIC;
