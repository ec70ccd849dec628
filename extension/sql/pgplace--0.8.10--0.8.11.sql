-- pgplace 0.8.10 -> 0.8.11: place.await_durable (issue 46).
-- The gateway commits its groups of placements asynchronously, so that a board's seq lock
-- is no longer held across the WAL flush and the synchronous standby's answer, and waits
-- with place.await_durable before it answers; its readers (the listener, board loads,
-- history and time travel) wait the same way before they show what they read. Not
-- SECURITY DEFINER and open to every role: it only waits for WAL that is already written.

-- pgplace::durability::await_durable
CREATE  FUNCTION place."await_durable"() RETURNS void
STRICT VOLATILE PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'await_durable_wrapper';
COMMENT ON FUNCTION place.await_durable() IS
    'Waits until every transaction committed before the call is durable (flushed, and confirmed by the synchronous standbys synchronous_commit asks for). The gateway commits placements asynchronously and answers after this; a reader in SQL that must not show a placement a crash could take back calls it after reading.';
