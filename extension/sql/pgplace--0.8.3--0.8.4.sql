-- pgplace 0.8.3 -> 0.8.4: placements write no chunk, and are announced by the library.
--
-- The chunks hold each board as of a seq (place.chunk_folds, new); readers apply the
-- history after it, and every 10,000 placements one folds it into the chunks. Boards have
-- no row here yet: their chunks are current, and each one's first placement since writes
-- its row. place.board_chunks reads the board whole through place._current_bits (new).
--
-- The statement trigger on place.placements that built their NOTIFY payloads (a transition
-- table, a PL/pgSQL call, seven array_aggs per INSERT) is dropped: the library sends the
-- same payloads, on the same channel, as it writes the placements (extension/src/notify.rs).
-- Listeners see no difference. Every placement and every other object is kept.

DROP TRIGGER notify_placements ON place.placements;
DROP FUNCTION place._notify_placements();
COMMENT ON FUNCTION place._placement_payloads(bigint[], bigint[], int[], int[], int[], bigint[], timestamptz[]) IS
    'Internal: the NOTIFY payloads for rows inserted into place.placements (the library sends them since 0.8.4).';

CREATE TABLE place.chunk_folds (
    board_id   bigint NOT NULL REFERENCES place.board_settings (id) ON DELETE CASCADE,
    folded_seq bigint NOT NULL CHECK (folded_seq >= 0),
    PRIMARY KEY (board_id, folded_seq)
);
COMMENT ON TABLE place.chunk_folds IS 'The seq each board''s chunks are folded up to (newest row; none: the chunks are current)';
SELECT pg_catalog.pg_extension_config_dump('place.chunk_folds', '');
GRANT SELECT ON place.chunk_folds TO PUBLIC;

CREATE FUNCTION place._current_bits(board_id bigint) RETURNS bytea
LANGUAGE sql STABLE STRICT PARALLEL RESTRICTED AS $$
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
COMMENT ON FUNCTION place._newest_bits(bigint) IS
    'Internal: a board''s packed bits as its chunks store them, the newest version of each (place._current_bits adds the history after their fold).';
COMMENT ON FUNCTION place._current_bits(bigint) IS
    'Internal: a board''s packed bits now: its chunks and the history after their fold (used by board_bits).';

CREATE OR REPLACE VIEW place.board_chunks AS
SELECT s.id AS board_id, c.chunk_no, substring(b.bits FROM c.chunk_no * 512 + 1 FOR 512) AS bits
FROM place.board_settings s
CROSS JOIN LATERAL (SELECT place._current_bits(s.id) AS bits) b
CROSS JOIN LATERAL generate_series(0, (length(b.bits) - 1) / 512) AS c(chunk_no);
