-- pgplace 0.8.10 -> 0.8.11: place.await_durable (issue 46) and place.session_users.
-- A gateway with --commit asynchronous commits its groups of placements before they are
-- durable, so that a board's seq lock is not held across the WAL flush and the synchronous
-- standby's answer, and waits with place.await_durable before it answers; every gateway's
-- readers (the listener, board loads, history and time travel) wait the same way before
-- they show what they read. Not SECURITY DEFINER: it only waits for WAL already written;
-- sql/roles.sql grants it to every pgplace role.

-- pgplace::durability::await_durable
CREATE  FUNCTION place."await_durable"() RETURNS void
STRICT VOLATILE PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'await_durable_wrapper';
COMMENT ON FUNCTION place.await_durable() IS
    'Waits until every transaction committed before the call is durable (flushed, and confirmed by the synchronous standbys synchronous_commit asks for). A gateway with --commit asynchronous answers after this, and every gateway calls it after the reads it shows; a reader in SQL that must not show a placement a crash could take back calls it after reading.';

-- The users that sessions act for now, in order: a gateway's group of placements reads
-- them in its own statement (place_many's user_ids), so a session signed out, switched to
-- another user or destroyed through another gateway a moment ago never places as the old
-- user through a copy that has not heard of it yet. A session without a user (or gone)
-- fails the call with 42501, naming none of the others.
CREATE FUNCTION place.session_users(ids text[]) RETURNS bigint[]
STABLE LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    users bigint[];
BEGIN
    SELECT array_agg(s.user_id ORDER BY i.ord) INTO users
    FROM unnest(ids) WITH ORDINALITY AS i(id, ord)
    LEFT JOIN place.sessions s ON s.id_hash = place._session_hash(i.id);
    IF array_position(users, NULL) IS NOT NULL THEN
        RAISE EXCEPTION 'this session has no user (signed out or destroyed through another gateway)'
            USING ERRCODE = '42501';
    END IF;
    RETURN users;
END
$$;
COMMENT ON FUNCTION place.session_users(text[]) IS
    'The users the sessions act for now, in order (place_many''s user_ids, read in the placement''s own statement); 42501 when one has none or is gone.';
-- Run as the owner; not every role's (the player's: sql/roles.sql).
REVOKE EXECUTE ON FUNCTION place.session_users(text[]) FROM PUBLIC;
