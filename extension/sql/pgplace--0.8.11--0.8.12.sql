-- pgplace 0.8.11 -> 0.8.12: one placer per board (issue 46). A gateway started with
-- --placer-url claims a lease on each board it places on; the gateways that do not hold it
-- forward their placements to the one that does, so a board's placements are grouped in
-- one stream of commits however many gateways take them. See extension/schema/placers.sql.
-- And place._changed_since in PL/pgSQL (below: a tick no longer plans it on every call).
CREATE TABLE place.placers (
    board_id bigint PRIMARY KEY REFERENCES place.board_settings (id) ON DELETE CASCADE,
    gateway bigint NOT NULL,
    address text NOT NULL,
    token text NOT NULL,
    expires_at timestamptz NOT NULL
);

-- Takes or renews the lease of board `board` for `lease_ms` milliseconds when it is free,
-- expired or already this gateway's; answers who holds it now (this gateway or another).
CREATE FUNCTION place.claim_placer(board bigint, claimant bigint, claimant_address text,
                                   claimant_token text, lease_ms integer)
RETURNS TABLE (gateway bigint, address text, token text)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF board IS NULL OR claimant IS NULL OR claimant_address IS NULL OR claimant_token IS NULL
       OR lease_ms IS NULL THEN
        RAISE EXCEPTION 'claim_placer takes no NULL argument' USING ERRCODE = '22004';
    END IF;
    IF lease_ms NOT BETWEEN 100 AND 600000 THEN
        RAISE EXCEPTION 'lease_ms must be between 100 and 600000 (it is %)', lease_ms
            USING ERRCODE = '22023';
    END IF;
    IF length(claimant_address) NOT BETWEEN 1 AND 500 OR length(claimant_token) NOT BETWEEN 16 AND 200 THEN
        RAISE EXCEPTION 'the address must be 1 to 500 characters and the token 16 to 200'
            USING ERRCODE = '22023';
    END IF;
    IF NOT EXISTS (SELECT FROM place.board_settings b WHERE b.id = board) THEN
        RAISE EXCEPTION 'board % does not exist', board USING ERRCODE = '42704';
    END IF;
    INSERT INTO place.placers AS p (board_id, gateway, address, token, expires_at)
    VALUES (board, claimant, claimant_address, claimant_token,
            clock_timestamp() + lease_ms * interval '1 millisecond')
    ON CONFLICT (board_id) DO UPDATE
        SET gateway = excluded.gateway, address = excluded.address, token = excluded.token,
            expires_at = excluded.expires_at
        WHERE p.gateway = excluded.gateway OR p.expires_at < clock_timestamp();
    RETURN QUERY SELECT p.gateway, p.address, p.token FROM place.placers p WHERE p.board_id = board;
END
$$;

-- Gives the lease of `board` up, if `claimant` holds it (a gateway that stops): the next
-- claim by another gateway takes it at once instead of after the lease runs out.
CREATE FUNCTION place.release_placer(board bigint, claimant bigint) RETURNS boolean
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    WITH gone AS (DELETE FROM place.placers p
                  WHERE p.board_id = release_placer.board AND p.gateway = release_placer.claimant
                  RETURNING 1)
    SELECT EXISTS (SELECT FROM gone);
END;

-- The users that sessions act for now, by their public ids, in order: what a group's
-- statement reads, as place.session_users does by their secret ids, so that a gateway
-- forwarding placements to the board's placer sends no session's secret. A session
-- without a user (or gone) fails the call with 42501, naming none of the others.
CREATE FUNCTION place.session_users_public(public_ids bigint[]) RETURNS bigint[]
STABLE LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    users bigint[];
BEGIN
    SELECT array_agg(s.user_id ORDER BY i.ord) INTO users
    FROM unnest(public_ids) WITH ORDINALITY AS i(id, ord)
    LEFT JOIN place.sessions s ON s.public_id = i.id;
    IF array_position(users, NULL) IS NOT NULL THEN
        RAISE EXCEPTION 'this session has no user (signed out or destroyed through another gateway)'
            USING ERRCODE = '42501';
    END IF;
    RETURN users;
END
$$;
COMMENT ON FUNCTION place.claim_placer(bigint, bigint, text, text, integer) IS
    'Takes or renews a gateway''s lease on grouping a board''s placements (when free, expired or its own) for lease_ms; answers the gateway that holds it, its address and its token.';
COMMENT ON FUNCTION place.release_placer(bigint, bigint) IS
    'Gives up a gateway''s lease on a board''s placements, if it holds it; answers whether it did.';
COMMENT ON FUNCTION place.session_users_public(bigint[]) IS
    'The users the sessions with these public ids act for now, in order (place_many''s user_ids, read in the placement''s own statement); 42501 when one has none or is gone.';
-- Run as the owner; not every role's (the player's: sql/roles.sql).
REVOKE EXECUTE ON FUNCTION place.claim_placer(bigint, bigint, text, text, integer) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION place.release_placer(bigint, bigint) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION place.session_users_public(bigint[]) FROM PUBLIC;

-- An idle tick planned place._changed_since, a SQL function, on every call: in PL/pgSQL a
-- session plans it once (pgbench, place.tick() with nothing new: 0.173 -> 0.106 ms a call,
-- SELECT 1 0.062).
CREATE OR REPLACE FUNCTION place._changed_since(prev pg_snapshot) RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN EXISTS (SELECT FROM place.changes c
                   WHERE c.xid >= pg_catalog.pg_snapshot_xmax(prev)
                     -- The caller's own transaction's, not yet committed, wait for it.
                     AND pg_catalog.pg_visible_in_snapshot(c.xid, pg_catalog.pg_current_snapshot()))
        -- Of the in-progress list, only the transactions that have committed since are
        -- looked up: one still open may have staged any number of changes, which would be
        -- read (and found invisible) on every tick.
        OR EXISTS (SELECT FROM place.changes c
                   WHERE c.xid = ANY (ARRAY(SELECT x FROM pg_catalog.pg_snapshot_xip(prev) x
                                            WHERE pg_catalog.pg_visible_in_snapshot(x, pg_catalog.pg_current_snapshot()))));
END
$$;
