-- pgplace tables. Writes go through the place.* functions, which keep bits, seq and
-- history in step; SQL users read the tables directly.

COMMENT ON SCHEMA place IS
    'pgplace, a collaborative board: boards, users and every placement (\dt place.*), and the functions that place, look back and moderate (\df place.*; each has a comment: \df+). Start with place.create_board, place.create_user and place.place.';

CREATE SEQUENCE place.boards_id_seq;
-- A board's settings. Placements never update this row: a row that every placement
-- rewrote would pile up dead versions while any transaction holds an old snapshot
-- (pg_dump, a long report), and every later placement would walk them all. The seq and the
-- newest stamp live in the history instead (view place.boards).
CREATE TABLE place.board_settings (
    id            bigint PRIMARY KEY DEFAULT nextval('place.boards_id_seq'),
    name          text NOT NULL UNIQUE,
    width         int NOT NULL CHECK (width > 0),
    height        int NOT NULL CHECK (height > 0),
    bits_per_tile int NOT NULL CHECK (bits_per_tile IN (1, 2, 4, 8)),
    palette       text[] NOT NULL,
    cooldown      interval NOT NULL CHECK (cooldown >= interval '0'),
    state         text NOT NULL DEFAULT 'open' CHECK (state IN ('open', 'paused', 'frozen', 'closed')),
    created_at    timestamptz NOT NULL DEFAULT now(),
    -- A keyframe (the whole board) is stored every this many placements: place.board_at
    -- replays at most this many from the nearest one.
    keyframe_every int NOT NULL DEFAULT 10000 CHECK (keyframe_every > 0),
    -- History kept: placements with seq > history_from (place.compact_history raises it,
    -- leaving a keyframe at history_from).
    history_from  bigint NOT NULL DEFAULT 0 CHECK (history_from >= 0),
    -- A tile showing a non-zero colour unchanged for this long is frozen (NULL: never);
    -- place.set_freeze_after sets it.
    freeze_after  interval CHECK (freeze_after > interval '0'),
    CHECK (width::bigint * height <= 16777216),
    -- Each colour's name ('red'; NULL: a colour without one; the column NULL: none named),
    -- since 0.8.10: place.set_palette_names; create_board names the default palettes'.
    palette_names text[],
    CONSTRAINT palette_names_fit CHECK (cardinality(palette_names) = cardinality(palette))
);
ALTER SEQUENCE place.boards_id_seq OWNED BY place.board_settings.id;
COMMENT ON TABLE place.board_settings IS 'pgplace boards'' settings (read place.boards, which adds seq and last_placed_at)';

-- What the whole-board maintenance of a board (resize, compaction, keyframes, freeze_after)
-- takes turns on: the board's row here, made when first needed and locked FOR UPDATE,
-- which only pgplace's functions can do (an advisory lock on a guessable key, as before
-- 0.8.0, any login could hold). Placements never lock it. Not dumped: rows are remade.
CREATE TABLE place.board_maintenance (
    board_id bigint PRIMARY KEY REFERENCES place.board_settings (id) ON DELETE CASCADE
);
COMMENT ON TABLE place.board_maintenance IS 'A row per board whose maintenance ran: what maintenance takes turns on';

-- The packed board, cut into fixed-size chunks so that a placement writes one small row,
-- not the whole board (500,000 bytes for 1000x1000x4). Chunk k holds bytes
-- [k*512, (k+1)*512) of the packed board; place.board_bits() glues them back together.
-- A chunk is never updated in place: a row that placements rewrote would pile up dead
-- versions while any transaction holds an old snapshot (pg_dump, a long report), and every
-- later write of the chunk would walk them all. Instead each chunk has one row here, which
-- a writer locks (a lock writes no new version) ...
CREATE TABLE place.chunks (
    board_id bigint NOT NULL REFERENCES place.board_settings (id) ON DELETE CASCADE,
    chunk_no int NOT NULL CHECK (chunk_no >= 0),
    PRIMARY KEY (board_id, chunk_no)
);
COMMENT ON TABLE place.chunks IS 'One row per 512-byte chunk of each board: writers of a chunk lock its row (its bits are in place.chunk_versions)';

-- ... and then inserts the chunk's next version and deletes the one it replaces. The
-- newest version is the first entry of the primary key read backwards, so finding it never
-- walks the versions a held snapshot keeps.
CREATE TABLE place.chunk_versions (
    board_id bigint NOT NULL,
    chunk_no int NOT NULL,
    version  bigint NOT NULL CHECK (version > 0),
    bits     bytea NOT NULL,
    PRIMARY KEY (board_id, chunk_no, version)
);
-- Chunks are small and already dense; compressing or moving them out of line only costs.
ALTER TABLE place.chunk_versions ALTER COLUMN bits SET STORAGE PLAIN;
COMMENT ON TABLE place.chunk_versions IS 'The packed bits of each board''s chunks, newest version first (read them through place.board_chunks or place.board_bits)';
-- No foreign key to place.chunks: its check, a query per inserted version, took about a
-- third of a batch's chunk writes, which run under the chunks' locks. Only the extension
-- writes versions, always of a chunk whose row it holds locked; a chunk's versions go with
-- its row (a board deleted or resized) by this trigger, once per statement, as the
-- extension's owner (as the foreign key's cascade did, whoever deleted the board).
CREATE FUNCTION place._drop_chunk_versions() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    DELETE FROM place.chunk_versions v USING gone g
    WHERE v.board_id = g.board_id AND v.chunk_no = g.chunk_no;
    RETURN NULL;
END
$$;
CREATE TRIGGER drop_versions AFTER DELETE ON place.chunks
REFERENCING OLD TABLE AS gone
FOR EACH STATEMENT EXECUTE FUNCTION place._drop_chunk_versions();

-- Since 0.8.4 placements write no chunk: a chunk version written per placement (a 512-byte
-- row to change 4 bits, under a lock every batch on the board queued for) was a third of
-- a batch's time and half its WAL. The chunks hold the board as of the board's folded
-- seq, the newest row here; readers apply the history after it (place._newest_bits,
-- get_tile), and every 10,000 placements the placement that reaches them folds them in,
-- writing each chunk they touched once. A board without a row has chunks that are current
-- (as every board's were before 0.8.4); its first placement since adds its row. Rows are
-- versions, as chunks are: a fold inserts the next and deletes the one it replaces.
CREATE TABLE place.chunk_folds (
    board_id   bigint NOT NULL REFERENCES place.board_settings (id) ON DELETE CASCADE,
    folded_seq bigint NOT NULL CHECK (folded_seq >= 0),
    PRIMARY KEY (board_id, folded_seq)
);
COMMENT ON TABLE place.chunk_folds IS 'The seq each board''s chunks are folded up to (newest row; none: the chunks are current)';

CREATE SEQUENCE place.users_id_seq;
CREATE TABLE place.users (
    id         bigint PRIMARY KEY DEFAULT nextval('place.users_id_seq'),
    name       text NOT NULL UNIQUE,
    created_at timestamptz NOT NULL DEFAULT now(),
    -- Made by place.create_guest for a visitor of a board that takes guests (the gateway's
    -- --guest-boards): the gateway lets them place on those boards only.
    guest      boolean NOT NULL DEFAULT false
);
ALTER SEQUENCE place.users_id_seq OWNED BY place.users.id;
COMMENT ON TABLE place.users IS 'People who place tiles; their tokens live hashed in place.user_tokens';

-- Kept apart from place.users so that reading users can never reveal a token hash.
CREATE TABLE place.user_tokens (
    user_id    bigint PRIMARY KEY REFERENCES place.users (id) ON DELETE CASCADE,
    token_hash bytea NOT NULL UNIQUE
);
COMMENT ON TABLE place.user_tokens IS 'SHA-256 of each user''s token (the token itself is shown once, by place.create_user)';

-- Users who sign in through the site that embeds the board (a JWT its identity provider
-- signed): the provider's name for them. Kept apart from place.users like the tokens: a
-- subject may be an e-mail address.
CREATE TABLE place.user_identities (
    issuer  text NOT NULL,
    subject text NOT NULL,
    user_id bigint NOT NULL REFERENCES place.users (id) ON DELETE CASCADE,
    PRIMARY KEY (issuer, subject)
);
CREATE INDEX user_identities_user_idx ON place.user_identities (user_id);
COMMENT ON TABLE place.user_identities IS 'The identity provider''s issuer and subject of each user who signs in with a JWT (place.user_for_subject)';

-- No foreign keys (since 0.8.3): their checks, a query per row, were a sixth of a batch's
-- time. Only the extension writes placements, and a placement holds its board's row (the
-- seq lock) and its users' cooldown claim rows (FOR UPDATE, or inserted: their foreign
-- key's check holds the user's row, KEY SHARE) until commit; those keys cascade, so a
-- DELETE of a board or a user waits for it; the triggers below then see its rows, each
-- statement of theirs taking a fresh snapshot (READ COMMITTED: a foreign key's cascade
-- sees them the same way).
CREATE TABLE place.placements (
    board_id  bigint NOT NULL,
    seq       bigint NOT NULL CHECK (seq > 0),
    x         int NOT NULL CHECK (x >= 0),
    y         int NOT NULL CHECK (y >= 0),
    color     int NOT NULL CHECK (color >= 0),
    user_id   bigint NOT NULL,
    placed_at timestamptz NOT NULL,
    PRIMARY KEY (board_id, seq)
);
-- "History of tile (x, y), newest first" and "placements of user U on board B" (the latter
-- also finds a user's last placement for the cooldown).
CREATE INDEX placements_tile_idx ON place.placements (board_id, x, y, seq);
CREATE INDEX placements_user_idx ON place.placements (board_id, user_id, seq);
COMMENT ON TABLE place.placements IS 'Every accepted placement, numbered by its board''s seq (1, 2, 3, ... in commit order)';

-- Under REPEATABLE READ or SERIALIZABLE a statement sees the transaction's snapshot, which
-- misses a placement committed while the DELETE waited for it: refused, where a foreign
-- key's check would have used a second snapshot.
CREATE FUNCTION place._require_read_committed(what text) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF current_setting('transaction_isolation') NOT IN ('read committed', 'read uncommitted') THEN
        RAISE EXCEPTION 'deleting % needs a READ COMMITTED transaction', what
            USING ERRCODE = 'feature_not_supported',
                  DETAIL = format('Under %s a placement committed since the transaction began would be missed.',
                                  upper(current_setting('transaction_isolation'))),
                  HINT = 'Delete in a transaction of its own (READ COMMITTED is the default).';
    END IF;
END
$$;

-- A board's history goes with it (the DELETE may be by a role that cannot delete history).
CREATE FUNCTION place._drop_board_history() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        TRUNCATE place.placements;
    ELSIF EXISTS (SELECT FROM gone) THEN
        PERFORM place._require_read_committed('boards');
        DELETE FROM place.placements p USING gone g WHERE p.board_id = g.id;
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER drop_history AFTER DELETE ON place.board_settings
REFERENCING OLD TABLE AS gone
FOR EACH STATEMENT EXECUTE FUNCTION place._drop_board_history();
CREATE TRIGGER drop_history_truncated AFTER TRUNCATE ON place.board_settings
FOR EACH STATEMENT EXECUTE FUNCTION place._drop_board_history();

-- A user with placements stays (the history names who placed each tile): ban them instead.
-- As the owner, as a foreign key's check was: whoever may delete users need not read history.
CREATE FUNCTION place._keep_users_with_history() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    kept_user bigint;
    kept_board bigint;
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        SELECT p.user_id, p.board_id INTO kept_user, kept_board FROM place.placements p LIMIT 1;
    ELSIF EXISTS (SELECT FROM gone) THEN
        PERFORM place._require_read_committed('users');
        SELECT g.id, p.board_id INTO kept_user, kept_board
        FROM gone g CROSS JOIN place.board_settings b
        CROSS JOIN LATERAL (SELECT p.board_id FROM place.placements p
                            WHERE p.board_id = b.id AND p.user_id = g.id LIMIT 1) p
        LIMIT 1;
    END IF;
    IF kept_user IS NOT NULL THEN
        RAISE EXCEPTION 'user % has placements on board % and cannot be deleted', kept_user, kept_board
            USING ERRCODE = 'foreign_key_violation',
                  DETAIL = 'The history keeps every placement with the user who made it.',
                  HINT = 'Ban the user instead (place.ban_user), or delete their boards first.';
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER keep_history AFTER DELETE ON place.users
REFERENCING OLD TABLE AS gone
FOR EACH STATEMENT EXECUTE FUNCTION place._keep_users_with_history();
CREATE TRIGGER keep_history_truncated AFTER TRUNCATE ON place.users
FOR EACH STATEMENT EXECUTE FUNCTION place._keep_users_with_history();

-- Each user's last placement per board: the cooldown is measured from it, and the history
-- has it (placements_user_idx). A placement claims (locks) its user's row here, which makes
-- the cooldown atomic: a second call for the user waits for the first, then reads the
-- history in a statement of its own and sees what the first committed. The row is never
-- written by a placement (every write would leave a dead version behind while a snapshot
-- is held, for the user's next claim to walk). Since 0.8.5 the time comes from the history
-- alone, but for what the history no longer shows: a time set by hand (place.cooldowns),
-- or the last placement of a user whose placements place.compact_history dropped, is
-- known_at as of known_seq, and the user's placements after known_seq supersede it.
CREATE TABLE place.cooldown_claims (
    board_id  bigint NOT NULL REFERENCES place.board_settings (id) ON DELETE CASCADE,
    user_id   bigint NOT NULL REFERENCES place.users (id) ON DELETE CASCADE,
    known_seq bigint NOT NULL DEFAULT 0 CHECK (known_seq >= 0),
    known_at  timestamptz,
    PRIMARY KEY (board_id, user_id)
);
COMMENT ON TABLE place.cooldown_claims IS 'One row per user who placed on a board: a placement locks its user''s row; the cooldown runs from the user''s newest placement after known_seq, else from known_at (read place.cooldowns)';

-- Idempotency keys (since 0.8.7): a client's name for one placement, so that its retry
-- answers with the placement instead of placing again (extension/src/placement_keys.rs).
-- A row is written by the call that places under the key and holds the placement's seq;
-- a refused placement's key is removed. Kept a day: each call that adds keys removes as
-- many expired ones (made_at_idx).
CREATE TABLE place.placement_keys (
    board_id        bigint NOT NULL REFERENCES place.board_settings (id) ON DELETE CASCADE,
    user_id         bigint NOT NULL REFERENCES place.users (id) ON DELETE CASCADE,
    key             text NOT NULL CHECK (octet_length(key) BETWEEN 1 AND 200),
    x               int NOT NULL,
    y               int NOT NULL,
    color           int NOT NULL,
    made_at         timestamptz NOT NULL,
    -- NULL only inside the call that made the row.
    seq             bigint,
    next_allowed_at timestamptz,
    PRIMARY KEY (board_id, user_id, key)
);
CREATE INDEX placement_keys_made_at_idx ON place.placement_keys (made_at);
COMMENT ON TABLE place.placement_keys IS 'Idempotency keys of placements (place(..., key), place_many(..., keys)): a retry with the key within a day answers with the placement''s seq';

-- Snapshots of whole boards, so that the board at any seq is a keyframe plus at most
-- keyframe_every placements replayed (place.board_at, place.board_at_seq).
CREATE TABLE place.keyframes (
    board_id      bigint NOT NULL REFERENCES place.board_settings (id) ON DELETE CASCADE,
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

-- The boards as SQL users read them: the settings, plus
--   seq             the number of accepted placements = the newest placement's seq
--                   (history_from when compact_history removed them all);
--   last_placed_at  the newest placement's stamp (stamps never go back as seqs go up).
-- Both come from the newest history row, found by the primary key's index.
CREATE VIEW place.boards AS
SELECT s.id, s.name, s.width, s.height, s.bits_per_tile, s.palette, s.cooldown, s.state,
       coalesce((SELECT max(p.seq) FROM place.placements p WHERE p.board_id = s.id),
                s.history_from) AS seq,
       s.created_at, s.keyframe_every, s.history_from, s.freeze_after,
       coalesce((SELECT p.placed_at FROM place.placements p WHERE p.board_id = s.id
                 ORDER BY p.seq DESC LIMIT 1),
                (SELECT k.taken_at FROM place.keyframes k
                 WHERE k.board_id = s.id AND k.seq = s.history_from AND s.history_from > 0))
           AS last_placed_at,
       s.palette_names
FROM place.board_settings s;
COMMENT ON VIEW place.boards IS 'pgplace boards: size, tile width, palette, cooldown, state and seq (the number of accepted placements)';

-- Restoring a dump of an earlier version, whose place.boards was a table: pg_dump writes
-- CREATE EXTENSION pgplace without a version, then COPY place.boards with its columns.
-- Rows written to the view go to place.board_settings; seq and last_placed_at are what the
-- history says, so they are not stored. The view's defaults are the table's.
ALTER VIEW place.boards ALTER COLUMN id SET DEFAULT nextval('place.boards_id_seq');
ALTER VIEW place.boards ALTER COLUMN state SET DEFAULT 'open';
ALTER VIEW place.boards ALTER COLUMN created_at SET DEFAULT now();
ALTER VIEW place.boards ALTER COLUMN keyframe_every SET DEFAULT 10000;
ALTER VIEW place.boards ALTER COLUMN history_from SET DEFAULT 0;
CREATE FUNCTION place._insert_board() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO place.board_settings (id, name, width, height, bits_per_tile, palette, cooldown, state,
                                      created_at, keyframe_every, history_from, freeze_after,
                                      palette_names)
    VALUES (NEW.id, NEW.name, NEW.width, NEW.height, NEW.bits_per_tile, NEW.palette, NEW.cooldown,
            NEW.state, NEW.created_at, NEW.keyframe_every, NEW.history_from, NEW.freeze_after,
            NEW.palette_names);
    RETURN NEW;
END
$$;
CREATE TRIGGER insert_board INSTEAD OF INSERT ON place.boards
FOR EACH ROW EXECUTE FUNCTION place._insert_board();

-- When each user last placed on each board (the cooldown runs from there): the table of
-- this name before 0.6.0, with the same columns. A superuser may still insert, update and
-- delete its rows (a cooldown set or lifted by hand): the trigger below writes the claims.
CREATE VIEW place.cooldowns AS
SELECT c.board_id, c.user_id, coalesce(p.placed_at, c.known_at) AS last_placed_at
FROM place.cooldown_claims c
LEFT JOIN LATERAL (SELECT p.placed_at FROM place.placements p
                   WHERE p.board_id = c.board_id AND p.user_id = c.user_id AND p.seq > c.known_seq
                   ORDER BY p.seq DESC LIMIT 1) p ON true
WHERE coalesce(p.placed_at, c.known_at) IS NOT NULL;
COMMENT ON VIEW place.cooldowns IS 'When each user last placed on each board (the cooldown runs from there)';

-- A time set by hand holds as of the board's newest placement: the user's older ones no
-- longer count, their next one does. The claim row is locked first, so that the newest
-- seq is read after any placement of the user that held it has committed.
CREATE FUNCTION place._write_cooldown() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    head bigint;
BEGIN
    IF TG_OP = 'DELETE' THEN
        DELETE FROM place.cooldown_claims WHERE board_id = OLD.board_id AND user_id = OLD.user_id;
        RETURN OLD;
    END IF;
    IF NEW.last_placed_at IS NULL THEN
        RAISE EXCEPTION 'a cooldown''s last_placed_at cannot be NULL (delete the row to lift the cooldown)'
            USING ERRCODE = 'not_null_violation';
    END IF;
    IF TG_OP = 'UPDATE' THEN
        IF (NEW.board_id, NEW.user_id) IS DISTINCT FROM (OLD.board_id, OLD.user_id) THEN
            RAISE EXCEPTION 'a cooldown''s board_id and user_id cannot change'
                USING ERRCODE = 'feature_not_supported';
        END IF;
        PERFORM FROM place.cooldown_claims WHERE board_id = NEW.board_id AND user_id = NEW.user_id FOR UPDATE;
    END IF;
    SELECT coalesce(max(p.seq), 0) INTO head FROM place.placements p WHERE p.board_id = NEW.board_id;
    IF TG_OP = 'INSERT' THEN
        INSERT INTO place.cooldown_claims (board_id, user_id, known_seq, known_at)
        VALUES (NEW.board_id, NEW.user_id, head, NEW.last_placed_at);
    ELSE
        UPDATE place.cooldown_claims SET known_seq = head, known_at = NEW.last_placed_at
        WHERE board_id = NEW.board_id AND user_id = NEW.user_id;
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER write_cooldown INSTEAD OF INSERT OR UPDATE OR DELETE ON place.cooldowns
FOR EACH ROW EXECUTE FUNCTION place._write_cooldown();

-- Until 0.8.5 the times were versions in a table of this name. A view now, so that a dump
-- of 0.6.0 to 0.8.4 restores: each row it copies here becomes its claim's known_at. (As of
-- seq 0: the user's placements, restored beside it, still count, so a time set by hand in
-- the old database yields to the user's newest placement.)
CREATE VIEW place.cooldown_versions AS
SELECT board_id, user_id, 1::bigint AS version, last_placed_at FROM place.cooldowns;
COMMENT ON VIEW place.cooldown_versions IS 'Before 0.8.5 the cooldown times; kept so that an older dump restores (read place.cooldowns)';

CREATE FUNCTION place._restore_cooldown_version() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO place.cooldown_claims AS c (board_id, user_id, known_at)
    VALUES (NEW.board_id, NEW.user_id, NEW.last_placed_at)
    ON CONFLICT (board_id, user_id) DO UPDATE SET known_at = greatest(c.known_at, excluded.known_at);
    RETURN NEW;
END
$$;
CREATE TRIGGER restore_cooldown_version INSTEAD OF INSERT ON place.cooldown_versions
FOR EACH ROW EXECUTE FUNCTION place._restore_cooldown_version();

-- pg_dump keeps the data of extension tables only when they are marked.
SELECT pg_catalog.pg_extension_config_dump('place.board_settings', '');
SELECT pg_catalog.pg_extension_config_dump('place.boards_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('place.chunks', '');
SELECT pg_catalog.pg_extension_config_dump('place.chunk_versions', '');
SELECT pg_catalog.pg_extension_config_dump('place.chunk_folds', '');
SELECT pg_catalog.pg_extension_config_dump('place.users', '');
SELECT pg_catalog.pg_extension_config_dump('place.users_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('place.user_tokens', '');
SELECT pg_catalog.pg_extension_config_dump('place.user_identities', '');
SELECT pg_catalog.pg_extension_config_dump('place.placements', '');
SELECT pg_catalog.pg_extension_config_dump('place.cooldown_claims', '');
SELECT pg_catalog.pg_extension_config_dump('place.placement_keys', '');
SELECT pg_catalog.pg_extension_config_dump('place.keyframes', '');
SELECT pg_catalog.pg_extension_config_dump('place.bans', '');

GRANT USAGE ON SCHEMA place TO PUBLIC;
-- Boards are public: anyone may read them (board_bits and get_tile read the chunks).
GRANT SELECT ON place.boards, place.board_settings, place.chunks, place.chunk_versions, place.chunk_folds, place.users, place.placements, place.cooldowns, place.cooldown_claims, place.cooldown_versions, place.keyframes, place.bans TO PUBLIC;
