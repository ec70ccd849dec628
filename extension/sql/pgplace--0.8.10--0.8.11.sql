-- pgplace 0.8.10 -> 0.8.11: place.await_durable (issue 46).
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
