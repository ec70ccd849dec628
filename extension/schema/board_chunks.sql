-- A board's packed bits as they are now, and as chunks: after the functions they call.

-- The stored chunks (place._newest_bits) with the history after their fold applied
-- (place.chunk_folds: none, and the chunks are current). One statement, so one snapshot:
-- the chunks, their fold and the placements after it are read as of the same moment, and
-- a fold that commits meanwhile is seen whole or not at all. STABLE, so it reads with its
-- caller's snapshot: `SELECT b.seq, place._current_bits(b.id) FROM place.boards b` is one.
-- Since 0.8.5 by the history's key, without JIT: the fold's seq is unknown when the query
-- is planned, so the planner takes the placements after it for a third of the history. It
-- then read the whole history (a sequential scan, 400 ms on 7 M placements, where the key
-- finds the few thousand after the fold in 1-4 ms), or JIT-compiled the query (10-40 ms).
CREATE FUNCTION place._current_bits(board_id bigint) RETURNS bytea
LANGUAGE sql STABLE STRICT PARALLEL RESTRICTED
SET jit = off SET enable_seqscan = off SET enable_bitmapscan = off AS $$
    SELECT coalesce(place._apply_tiles(c.bits, s.bits_per_tile, h.ns, h.colors), c.bits)
    FROM place.board_settings s
    CROSS JOIN LATERAL (SELECT place._newest_bits(s.id) AS bits) c
    LEFT JOIN LATERAL (
        SELECT array_agg(p.x::bigint + s.width::bigint * p.y ORDER BY p.seq) AS ns,
               array_agg(p.color ORDER BY p.seq) AS colors
        FROM place.placements p
        WHERE p.board_id = s.id
          AND p.seq > (SELECT f.folded_seq FROM place.chunk_folds f
                       WHERE f.board_id = s.id ORDER BY f.folded_seq DESC LIMIT 1)) h ON true
    WHERE s.id = $1
$$;

-- Each board's chunks as they are now: the table of this name before 0.6.0. Since 0.8.4
-- the stored chunks lag the history (place.chunk_folds), so the board is read whole, as
-- place.board_bits does, and cut into its 512-byte chunks: one read per board asked for.
CREATE VIEW place.board_chunks AS
SELECT s.id AS board_id, c.chunk_no, substring(b.bits FROM c.chunk_no * 512 + 1 FOR 512) AS bits
FROM place.board_settings s
CROSS JOIN LATERAL (SELECT place._current_bits(s.id) AS bits) b
CROSS JOIN LATERAL generate_series(0, (length(b.bits) - 1) / 512) AS c(chunk_no);
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

GRANT SELECT ON place.board_chunks TO PUBLIC;
