-- sessions.sql
-- The gateway's sessions, kept here so that any gateway behind a load balancer can serve
-- any session (README, "Running several gateways"). A gateway writes a session when it is
-- created, authorized, subscribed, unsubscribed or destroyed, and marks it seen in batches
-- (place.session_seen) - never on every poll. Where each view of a session stands is not
-- here: acking clients carry it in their cursor.
--
-- A session id is a bearer secret: only its SHA-256 is stored. The tables are logged, so
-- sessions survive a crash and a failover to a standby (gateway/README.md, "High
-- availability"): they are written on create, subscribe and the like, never per poll, and
-- a write costs what a placement's commit costs.
--
-- Gateways hear on channel pgplace_sessions what happened to a session elsewhere, and drop
-- their copy once its row confirms it: 'gone <public_id>' (destroyed, expired),
-- 'drop <public_id> <gateway>' (changed, or its legacy polls now answered, by that
-- gateway: hex of its id), 'handed <public_id> <gateway>' (the previous holder left where
-- the session's legacy views stand for that gateway, in `handover`). `version` and
-- `holder` say the same for a gateway that was not listening for a while.

-- Its own sequence (the sessions were UNLOGGED before 0.8.2, and an unlogged table's own
-- sequence starts over after a crash).
CREATE SEQUENCE place.session_public_ids;

CREATE TABLE place.sessions (
    id_hash    bytea PRIMARY KEY,
    -- Names the session where its id may not appear: cursors, notifications.
    public_id  bigint NOT NULL DEFAULT nextval('place.session_public_ids') UNIQUE,
    user_id    bigint REFERENCES place.users (id) ON DELETE SET NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    -- The last time a gateway said the session was in use (at most idle/4 old while it is).
    seen_at    timestamptz NOT NULL DEFAULT now(),
    -- Bumped by every change (user, subscriptions).
    version    bigint NOT NULL DEFAULT 0,
    -- The gateway that answers its legacy polls (they keep no cursor of their own).
    holder     bigint,
    -- Where the session's legacy views stood on `handover_from` (a poll cursor, as the
    -- gateway writes them) when it dropped its copy, left for `handover_to`.
    handover      jsonb,
    handover_from bigint,
    handover_to   bigint
);
COMMENT ON TABLE place.sessions IS 'Gateway sessions (the SHA-256 of each id, its user, when last seen)';
CREATE INDEX ON place.sessions (seen_at);

CREATE TABLE place.session_views (
    id_hash  bytea NOT NULL REFERENCES place.sessions ON DELETE CASCADE,
    key      text NOT NULL,
    -- session.subscribe's view and params, as given.
    view     text NOT NULL,
    params   jsonb NOT NULL,
    -- For the views of a board (they count among its watchers).
    board_id bigint REFERENCES place.board_settings (id) ON DELETE CASCADE,
    -- For a board view: the seq of the state the subscription started from.
    seq      bigint,
    -- Names this subscription (not an earlier one under the same key) in cursors.
    sub_id   bigint NOT NULL,
    PRIMARY KEY (id_hash, key)
);
COMMENT ON TABLE place.session_views IS 'The subscriptions of the gateway sessions';
CREATE INDEX ON place.session_views (board_id);

CREATE FUNCTION place._session_hash(id text) RETURNS bytea
IMMUTABLE STRICT PARALLEL SAFE LANGUAGE sql
SET search_path = pg_catalog, pg_temp
RETURN sha256(convert_to(id, 'UTF8'));

CREATE FUNCTION place.session_create(id text, gateway bigint) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    made bigint;
BEGIN
    IF id IS NULL OR length(id) < 16 THEN
        RAISE EXCEPTION 'a session id must have at least 16 characters'
            USING ERRCODE = '22023';
    END IF;
    INSERT INTO place.sessions (id_hash, holder) VALUES (place._session_hash(id), gateway)
    RETURNING public_id INTO made;
    RETURN made;
END
$$;

CREATE FUNCTION place.session_load(id text)
RETURNS TABLE (public_id bigint, version bigint, user_id bigint, user_name text, views jsonb)
STABLE LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT s.public_id, s.version, u.id, u.name,
           coalesce((SELECT jsonb_agg(jsonb_build_object('key', v.key, 'view', v.view,
                                                         'params', v.params, 'seq', v.seq,
                                                         'sub_id', v.sub_id)
                                      ORDER BY v.key)
                     FROM place.session_views v WHERE v.id_hash = s.id_hash), '[]')
    FROM place.sessions s
    LEFT JOIN place.users u ON u.id = s.user_id
    WHERE s.id_hash = place._session_hash(session_load.id);
END;

-- Tells the other gateways that `gateway` changed or took a session.
CREATE FUNCTION place._session_dropped(public_id bigint, gateway bigint) RETURNS void
LANGUAGE sql SET search_path = pg_catalog, pg_temp
RETURN pg_notify('pgplace_sessions', 'drop ' || public_id || ' ' || to_hex(gateway));

CREATE FUNCTION place.session_set_user(id text, user_id bigint, gateway bigint)
RETURNS bigint
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    WITH changed AS (
        UPDATE place.sessions SET user_id = session_set_user.user_id, version = version + 1
        WHERE id_hash = place._session_hash(session_set_user.id)
        RETURNING public_id, version)
    SELECT version FROM changed, place._session_dropped(public_id, gateway);
END;

CREATE FUNCTION place.session_subscribe(id text, key text, view text, params jsonb,
                                        board_id bigint, seq bigint, sub_id bigint,
                                        gateway bigint)
RETURNS bigint
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    WITH s AS (UPDATE place.sessions SET version = version + 1
               WHERE id_hash = place._session_hash(session_subscribe.id)
               RETURNING id_hash, public_id, version),
    written AS (
        INSERT INTO place.session_views AS v (id_hash, key, view, params, board_id, seq, sub_id)
        SELECT s.id_hash, session_subscribe.key, session_subscribe.view,
               session_subscribe.params, session_subscribe.board_id, session_subscribe.seq,
               session_subscribe.sub_id
        FROM s
        ON CONFLICT ON CONSTRAINT session_views_pkey DO UPDATE
        SET view = excluded.view, params = excluded.params,
            board_id = excluded.board_id, seq = excluded.seq, sub_id = excluded.sub_id
        RETURNING 1)
    SELECT s.version FROM s, place._session_dropped(s.public_id, gateway)
    WHERE EXISTS (SELECT FROM written);
END;

-- The new version, or NULL when the session had no such subscription.
CREATE FUNCTION place.session_unsubscribe(id text, key text, gateway bigint) RETURNS bigint
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    WITH gone AS (
        DELETE FROM place.session_views
        WHERE id_hash = place._session_hash(session_unsubscribe.id)
          AND key = session_unsubscribe.key
        RETURNING id_hash),
    changed AS (
        UPDATE place.sessions SET version = version + 1
        WHERE id_hash IN (SELECT id_hash FROM gone)
        RETURNING public_id, version)
    SELECT version FROM changed, place._session_dropped(public_id, gateway);
END;

-- `gateway` answers the session's legacy polls from now on; returns the version.
CREATE FUNCTION place.session_hold(id text, gateway bigint) RETURNS bigint
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    WITH held AS (
        UPDATE place.sessions SET holder = session_hold.gateway
        WHERE id_hash = place._session_hash(session_hold.id)
        RETURNING public_id, version)
    SELECT version FROM held, place._session_dropped(public_id, gateway);
END;

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

-- Version and holder of sessions (by public id; the missing ones are gone): what a gateway
-- that was not listening checks its copies against.
CREATE FUNCTION place.session_states(public_ids bigint[])
RETURNS TABLE (public_id bigint, version bigint, holder bigint)
STABLE LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT s.public_id, s.version, s.holder FROM place.sessions s
    WHERE s.public_id = ANY (session_states.public_ids);
END;

CREATE FUNCTION place.session_destroy(id text) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    gone bigint;
BEGIN
    DELETE FROM place.sessions WHERE id_hash = place._session_hash(id)
    RETURNING public_id INTO gone;
    IF gone IS NULL THEN
        RETURN false;
    END IF;
    PERFORM pg_notify('pgplace_sessions', 'gone ' || gone);
    RETURN true;
END
$$;

-- Marks sessions in use now (a gateway's batch of the sessions it served).
CREATE FUNCTION place.session_seen(public_ids bigint[]) RETURNS integer
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    WITH seen AS (
        UPDATE place.sessions SET seen_at = now()
        WHERE public_id = ANY (session_seen.public_ids)
        RETURNING 1)
    SELECT count(*)::integer FROM seen;
END;

-- Removes the sessions no gateway has marked seen for `idle`; returns how many.
CREATE FUNCTION place.session_expire(idle interval) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    gone integer;
BEGIN
    IF idle IS NULL OR idle <= interval '0' THEN
        RAISE EXCEPTION 'idle must be more than 0, not %', idle USING ERRCODE = '22023';
    END IF;
    WITH expired AS (
        DELETE FROM place.sessions WHERE seen_at < now() - idle RETURNING public_id)
    SELECT count(pg_notify('pgplace_sessions', 'gone ' || public_id)) INTO gone FROM expired;
    RETURN gone;
END
$$;

-- How many subscriptions watch each board (its board and board_region views), over
-- every gateway: the "watching" count.
CREATE FUNCTION place.session_watchers()
RETURNS TABLE (board_id bigint, watching bigint)
STABLE LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT v.board_id, count(*) FROM place.session_views v
    WHERE v.board_id IS NOT NULL AND v.view IN ('board', 'board_region')
    GROUP BY v.board_id;
END;

COMMENT ON FUNCTION place.session_create(text, bigint) IS
    'Stores a new gateway session (its id is hashed), held by the gateway that made it; returns its public id.';
COMMENT ON FUNCTION place.session_load(text) IS
    'A gateway session: its public id, version, user and subscriptions (no row: unknown or expired).';
COMMENT ON FUNCTION place.session_set_user(text, bigint, bigint) IS
    'Sets (NULL: clears) the user a session acts for and tells the other gateways; returns the new version (NULL: unknown session).';
COMMENT ON FUNCTION place.session_subscribe(text, text, text, jsonb, bigint, bigint, bigint, bigint) IS
    'Adds or replaces a subscription of a session (key, view, params; board and seq for a board''s views; the subscription''s id) and tells the other gateways; returns the new version (NULL: unknown session).';
COMMENT ON FUNCTION place.session_unsubscribe(text, text, bigint) IS
    'Removes a subscription of a session and tells the other gateways; returns the new version (NULL: there was none).';
COMMENT ON FUNCTION place.session_hold(text, bigint) IS
    'Makes a gateway the one that answers a session''s legacy polls and tells the others; returns the version (NULL: unknown session).';
COMMENT ON FUNCTION place.session_move(text, bigint) IS
    'Makes a gateway the one that answers a session''s legacy polls and tells the others; returns the version, the gateway that answered them before and whether a hand-over waits for it (no row: unknown session).';
COMMENT ON FUNCTION place.session_hand_over(text, bigint, jsonb) IS
    'A gateway that dropped its copy of a session leaves where its legacy views stood for the gateway that holds the session now, and tells it; returns that gateway (NULL: none).';
COMMENT ON FUNCTION place.session_take_handover(text, bigint) IS
    'Takes (and clears) what the previous holder left for this gateway; NULL when nothing is there for it.';
COMMENT ON FUNCTION place.session_states(bigint[]) IS
    'The version and holder of sessions, by public id (missing: gone).';
COMMENT ON FUNCTION place.session_users(text[]) IS
    'The users the sessions act for now, in order (place_many''s user_ids, read in the placement''s own statement); 42501 when one has none or is gone.';
COMMENT ON FUNCTION place.session_destroy(text) IS
    'Removes a session and tells the gateways (channel pgplace_sessions). False when unknown.';
COMMENT ON FUNCTION place.session_seen(bigint[]) IS
    'Marks sessions (by public id) as in use now; returns how many exist.';
COMMENT ON FUNCTION place.session_expire(interval) IS
    'Removes the sessions not seen for this long and tells the gateways; returns how many.';
COMMENT ON FUNCTION place.session_watchers() IS
    'Subscriptions to each board''s views (board, board_region) over all gateways.';

-- They run as the extension's owner: extension/schema/functions.sql takes them from PUBLIC.
