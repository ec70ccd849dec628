-- pgplace 0.5.0 -> 0.6.0 (ALTER EXTENSION pgplace UPDATE): chunks and cooldowns are no
-- longer updated in place. Each chunk keeps a row that writers lock (place.chunks) and its
-- bits as versions (place.chunk_versions: a write inserts the next version and deletes the
-- one it replaces); each user's cooldown likewise (place.cooldown_claims,
-- place.cooldown_versions). place.board_chunks and place.cooldowns become views showing
-- the newest versions, with the same columns as the tables they were.
-- Checked by tests/upgrade/run.sh: an updated database must be exactly a fresh 0.6.0.
\echo Use "ALTER EXTENSION pgplace UPDATE" to load this file. \quit

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

INSERT INTO place.chunks (board_id, chunk_no) SELECT board_id, chunk_no FROM place.board_chunks;
INSERT INTO place.chunk_versions (board_id, chunk_no, version, bits)
SELECT board_id, chunk_no, 1, bits FROM place.board_chunks;
-- Leaving the extension first takes the table off the list of those pg_dump keeps the
-- rows of (DROP TABLE alone leaves its number there).
ALTER EXTENSION pgplace DROP TABLE place.board_chunks;
DROP TABLE place.board_chunks;

-- Each user's last placement per board: the cooldown is measured from it. As with chunks,
-- nothing here is updated in place (every placement would leave a dead version of its
-- user's row while a snapshot is held, and that user's next claim would walk them all):
-- a placement claims (locks) its user's row here, which makes the cooldown atomic ...
CREATE TABLE place.cooldown_claims (
    board_id bigint NOT NULL REFERENCES place.board_settings (id) ON DELETE CASCADE,
    user_id  bigint NOT NULL REFERENCES place.users (id) ON DELETE CASCADE,
    PRIMARY KEY (board_id, user_id)
);
COMMENT ON TABLE place.cooldown_claims IS 'One row per user who placed on a board: a placement locks its user''s row (the times are in place.cooldown_versions)';

-- ... and inserts the time of its placement as the row's next version, deleting the one
-- it replaces; the newest is the first entry of the primary key read backwards.
CREATE TABLE place.cooldown_versions (
    board_id       bigint NOT NULL,
    user_id        bigint NOT NULL,
    version        bigint NOT NULL CHECK (version > 0),
    last_placed_at timestamptz NOT NULL,
    PRIMARY KEY (board_id, user_id, version)
);
COMMENT ON TABLE place.cooldown_versions IS 'When each user last placed on each board, newest version first (read place.cooldowns)';
-- No foreign key to place.cooldown_claims either (a check per placement): only the
-- extension writes versions, of users whose claim it holds locked; a user's versions go
-- with the claim (a board or user deleted, a cooldown deleted by hand) by this trigger.
CREATE FUNCTION place._drop_cooldown_versions() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    DELETE FROM place.cooldown_versions v USING gone g
    WHERE v.board_id = g.board_id AND v.user_id = g.user_id;
    RETURN NULL;
END
$$;
CREATE TRIGGER drop_versions AFTER DELETE ON place.cooldown_claims
REFERENCING OLD TABLE AS gone
FOR EACH STATEMENT EXECUTE FUNCTION place._drop_cooldown_versions();

INSERT INTO place.cooldown_claims (board_id, user_id) SELECT board_id, user_id FROM place.cooldowns;
INSERT INTO place.cooldown_versions (board_id, user_id, version, last_placed_at)
SELECT board_id, user_id, 1, last_placed_at FROM place.cooldowns;
ALTER EXTENSION pgplace DROP TABLE place.cooldowns;
DROP TABLE place.cooldowns;

-- Each board's chunks as they are now (the newest version of each): the table of this
-- name before 0.6.0. One probe of chunk_versions' primary key per chunk.
CREATE VIEW place.board_chunks AS
SELECT c.board_id, c.chunk_no, v.bits
FROM place.chunks c
CROSS JOIN LATERAL (SELECT cv.bits FROM place.chunk_versions cv
                    WHERE cv.board_id = c.board_id AND cv.chunk_no = c.chunk_no
                    ORDER BY cv.version DESC LIMIT 1) v;
COMMENT ON VIEW place.board_chunks IS 'The packed bits of each board in 512-byte chunks (read them whole with place.board_bits)';

-- Restoring a dump of a version before 0.6.0, whose place.board_chunks was a table.
CREATE FUNCTION place._insert_chunk() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO place.chunks (board_id, chunk_no) VALUES (NEW.board_id, NEW.chunk_no);
    INSERT INTO place.chunk_versions (board_id, chunk_no, version, bits)
    VALUES (NEW.board_id, NEW.chunk_no, 1, NEW.bits);
    RETURN NEW;
END
$$;
CREATE TRIGGER insert_chunk INSTEAD OF INSERT ON place.board_chunks
FOR EACH ROW EXECUTE FUNCTION place._insert_chunk();

-- When each user last placed on each board (the cooldown runs from there): the table of
-- this name before 0.6.0, with the same columns. A superuser may still insert, update and
-- delete its rows (a cooldown lifted by hand): the triggers below write the tables.
CREATE VIEW place.cooldowns AS
SELECT c.board_id, c.user_id, v.last_placed_at
FROM place.cooldown_claims c
CROSS JOIN LATERAL (SELECT cv.last_placed_at FROM place.cooldown_versions cv
                    WHERE cv.board_id = c.board_id AND cv.user_id = c.user_id
                    ORDER BY cv.version DESC LIMIT 1) v;
COMMENT ON VIEW place.cooldowns IS 'When each user last placed on each board (the cooldown runs from there)';

CREATE FUNCTION place._write_cooldown() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        DELETE FROM place.cooldown_claims WHERE board_id = OLD.board_id AND user_id = OLD.user_id;
        RETURN OLD;
    END IF;
    IF TG_OP = 'INSERT' THEN
        INSERT INTO place.cooldown_claims (board_id, user_id) VALUES (NEW.board_id, NEW.user_id);
    ELSIF (NEW.board_id, NEW.user_id) IS DISTINCT FROM (OLD.board_id, OLD.user_id) THEN
        RAISE EXCEPTION 'a cooldown''s board_id and user_id cannot change'
            USING ERRCODE = 'feature_not_supported';
    END IF;
    WITH replaced AS (DELETE FROM place.cooldown_versions
                      WHERE board_id = NEW.board_id AND user_id = NEW.user_id
                      RETURNING version)
    INSERT INTO place.cooldown_versions (board_id, user_id, version, last_placed_at)
    SELECT NEW.board_id, NEW.user_id, coalesce(max(version), 0) + 1, NEW.last_placed_at FROM replaced;
    RETURN NEW;
END
$$;
CREATE TRIGGER write_cooldown INSTEAD OF INSERT OR UPDATE OR DELETE ON place.cooldowns
FOR EACH ROW EXECUTE FUNCTION place._write_cooldown();

SELECT pg_catalog.pg_extension_config_dump('place.chunks', '');
SELECT pg_catalog.pg_extension_config_dump('place.chunk_versions', '');
SELECT pg_catalog.pg_extension_config_dump('place.cooldown_claims', '');
SELECT pg_catalog.pg_extension_config_dump('place.cooldown_versions', '');
GRANT SELECT ON place.board_chunks, place.chunks, place.chunk_versions, place.cooldowns,
    place.cooldown_claims, place.cooldown_versions TO PUBLIC;

-- Reading a whole board: each chunk's newest version, probed without the executor.
CREATE FUNCTION place._newest_bits("board_id" bigint) RETURNS bytea
STABLE STRICT PARALLEL RESTRICTED
LANGUAGE c AS 'MODULE_PATHNAME', '_newest_bits_wrapper';
COMMENT ON FUNCTION place._newest_bits(bigint) IS
    'Internal: a board''s packed bits, the newest version of each chunk (used by board_bits).';
