-- pgplace 0.8.4 -> 0.8.5: a placement writes no cooldown; the history is its cooldown.
-- And place._current_bits reads by the key, without JIT (at the end).
--
-- A user's last placement on a board is the newest of the user's placements, which
-- placements_user_idx finds; the claim row (place.cooldown_claims) is still what a
-- placement locks, and now also holds what the history does not show: a time set by hand,
-- or a last placement compacted away (known_at, as of the board's seq known_seq). The
-- versions in place.cooldown_versions, an insert and a delete per placement, are dropped:
-- each user's newest one becomes its claim's known_at as of the board's newest seq, so
-- every cooldown runs from the same time as before the update. place.cooldown_versions
-- becomes a view, which takes the rows of an older dump's COPY.

ALTER TABLE place.cooldown_claims
    ADD COLUMN known_seq bigint NOT NULL DEFAULT 0 CHECK (known_seq >= 0),
    ADD COLUMN known_at timestamptz;
COMMENT ON TABLE place.cooldown_claims IS 'One row per user who placed on a board: a placement locks its user''s row; the cooldown runs from the user''s newest placement after known_seq, else from known_at (read place.cooldowns)';

WITH heads AS (
    SELECT s.id, coalesce((SELECT max(p.seq) FROM place.placements p WHERE p.board_id = s.id), 0) AS head
    FROM place.board_settings s
), newest AS (
    SELECT DISTINCT ON (board_id, user_id) board_id, user_id, last_placed_at
    FROM place.cooldown_versions
    ORDER BY board_id, user_id, version DESC
)
UPDATE place.cooldown_claims c SET known_seq = h.head, known_at = n.last_placed_at
FROM newest n JOIN heads h ON h.id = n.board_id
WHERE c.board_id = n.board_id AND c.user_id = n.user_id;

DROP VIEW place.cooldowns;
DROP FUNCTION place._write_cooldown();
DROP TRIGGER drop_versions ON place.cooldown_claims;
DROP FUNCTION place._drop_cooldown_versions();
ALTER EXTENSION pgplace DROP TABLE place.cooldown_versions;
DROP TABLE place.cooldown_versions;

CREATE VIEW place.cooldowns AS
SELECT c.board_id, c.user_id, coalesce(p.placed_at, c.known_at) AS last_placed_at
FROM place.cooldown_claims c
LEFT JOIN LATERAL (SELECT p.placed_at FROM place.placements p
                   WHERE p.board_id = c.board_id AND p.user_id = c.user_id AND p.seq > c.known_seq
                   ORDER BY p.seq DESC LIMIT 1) p ON true
WHERE coalesce(p.placed_at, c.known_at) IS NOT NULL;
COMMENT ON VIEW place.cooldowns IS 'When each user last placed on each board (the cooldown runs from there)';
GRANT SELECT ON place.cooldowns TO PUBLIC;

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
GRANT SELECT ON place.cooldown_versions TO PUBLIC;

-- Reading a board whole (board_bits, keyframes) by the history's key and without JIT: the
-- placements after the fold looked like a third of the history to the planner, which then
-- read the whole history (400 ms on 7 M placements, where the key takes 1-4 ms) or
-- JIT-compiled the query (10-40 ms).
ALTER FUNCTION place._current_bits(bigint) SET jit = off;
ALTER FUNCTION place._current_bits(bigint) SET enable_seqscan = off;
ALTER FUNCTION place._current_bits(bigint) SET enable_bitmapscan = off;
