-- pgplace 0.8.1 -> 0.8.2: sessions survive a crash and a failover, and a legacy session
-- moves between gateways without starting over.
--
-- place.sessions and place.session_views become logged tables: a crash no longer empties
-- them, and a standby has them when it is promoted. A session is written on create,
-- subscribe and the like, never per poll (gateway/README.md, "High availability").
-- A gateway that takes over a session's legacy polls (place.session_move) hears from the
-- one that answered them before where its views stand (place.session_hand_over, then
-- place.session_take_handover), instead of answering with a reset of every view.
-- Sessions, their subscriptions and every function of 0.8.1 are kept as they are.

ALTER TABLE place.sessions SET LOGGED;
ALTER TABLE place.session_views SET LOGGED;
ALTER TABLE place.sessions
    ADD COLUMN handover jsonb, ADD COLUMN handover_from bigint, ADD COLUMN handover_to bigint;
COMMENT ON TABLE place.sessions IS 'Gateway sessions (the SHA-256 of each id, its user, when last seen)';

-- `gateway` answers the session's legacy polls from now on: the version, the gateway that
-- answered them before (NULL: none; the same: it held them already), and whether
-- positions wait for it: left for it (an earlier try of this move), or left by the
-- previous holder when it dropped its copy. Any other hand-over is void.
CREATE FUNCTION place.session_move(id text, gateway bigint)
RETURNS TABLE (version bigint, previous bigint, handed boolean)
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    WITH old AS (
        SELECT s.id_hash, s.holder,
               s.handover IS NOT NULL
               AND (s.handover_to = session_move.gateway OR s.handover_from = s.holder) AS kept
        FROM place.sessions s
        WHERE s.id_hash = place._session_hash(session_move.id)
        FOR UPDATE),
    moved AS (
        UPDATE place.sessions s
        SET holder = session_move.gateway,
            handover = CASE WHEN old.kept THEN s.handover END,
            handover_from = CASE WHEN old.kept THEN s.handover_from END,
            handover_to = CASE WHEN old.kept THEN session_move.gateway END
        FROM old WHERE s.id_hash = old.id_hash
        RETURNING s.public_id, s.version, old.holder, old.kept)
    SELECT moved.version, moved.holder, moved.kept
    FROM moved, place._session_dropped(public_id, gateway);
END;

-- A gateway that answered the session's legacy polls drops its copy and leaves where its
-- views stood (a poll cursor) for the gateway that holds the session now: another one
-- that took it over, or itself, when the copy was dropped for a change made elsewhere
-- (then whoever takes the session next gets them). Tells the holder; returns it (NULL:
-- nobody holds the session, or it is unknown).
CREATE FUNCTION place.session_hand_over(id text, from_gateway bigint, positions jsonb)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    handed bigint;
    left_for bigint;
BEGIN
    IF positions IS NULL OR jsonb_typeof(positions) <> 'object' THEN
        RAISE EXCEPTION 'positions must be a JSON object, not %', coalesce(jsonb_typeof(positions), 'NULL')
            USING ERRCODE = '22023';
    END IF;
    UPDATE place.sessions
    SET handover = positions, handover_from = from_gateway, handover_to = holder
    WHERE id_hash = place._session_hash(id) AND holder IS NOT NULL
    RETURNING public_id, holder INTO handed, left_for;
    IF handed IS NOT NULL THEN
        PERFORM pg_notify('pgplace_sessions', 'handed ' || handed || ' ' || to_hex(left_for));
    END IF;
    RETURN left_for;
END
$$;

-- Takes what the previous holder left for `gateway` (NULL: nothing yet, or not for it).
CREATE FUNCTION place.session_take_handover(id text, gateway bigint) RETURNS jsonb
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    WITH left_for AS (
        SELECT s.id_hash, s.handover FROM place.sessions s
        WHERE s.id_hash = place._session_hash(session_take_handover.id)
          AND s.holder = session_take_handover.gateway
          AND s.handover_to = session_take_handover.gateway
        FOR UPDATE),
    taken AS (
        UPDATE place.sessions s SET handover = NULL, handover_from = NULL, handover_to = NULL
        FROM left_for WHERE s.id_hash = left_for.id_hash
        RETURNING left_for.handover)
    SELECT handover FROM taken;
END;

COMMENT ON FUNCTION place.session_move(text, bigint) IS
    'Makes a gateway the one that answers a session''s legacy polls and tells the others; returns the version, the gateway that answered them before and whether a hand-over waits for it (no row: unknown session).';
COMMENT ON FUNCTION place.session_hand_over(text, bigint, jsonb) IS
    'A gateway that dropped its copy of a session leaves where its legacy views stood for the gateway that holds the session now, and tells it; returns that gateway (NULL: none).';
COMMENT ON FUNCTION place.session_take_handover(text, bigint) IS
    'Takes (and clears) what the previous holder left for this gateway; NULL when nothing is there for it.';

REVOKE EXECUTE ON FUNCTION place.session_move(text, bigint) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION place.session_hand_over(text, bigint, jsonb) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION place.session_take_handover(text, bigint) FROM PUBLIC;
