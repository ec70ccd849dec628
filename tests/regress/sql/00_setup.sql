-- Helpers for the other files: run a statement and show its SQLSTATE and message
-- instead of failing, so every error is part of the expected output.
CREATE FUNCTION expect_error(statement text) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE statement;
    RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE || ': ' || SQLERRM;
END
$$;

-- Everything a rejected call must leave untouched, in one line.
CREATE FUNCTION board_fingerprint(board text) RETURNS text
LANGUAGE sql AS $$
    SELECT format('seq=%s history=%s bits=%s len=%s',
                  b.seq,
                  (SELECT count(*) FROM place.placements p WHERE p.board_id = b.id),
                  md5(bb.bits), length(bb.bits))
    FROM place.boards b, place.board_bits(b.id) bb
    WHERE b.name = board
$$;

SELECT extname, extversion IS NOT NULL AS has_version FROM pg_extension WHERE extname = 'pgplace';
SELECT nspname FROM pg_namespace WHERE nspname = 'place';
