-- pgplace 0.8.12 -> 0.8.13: place.await_durable(xid) (issue 46). A gateway's listener reads
-- each group of placements after it commits and waited with place.await_durable() before
-- showing them, which flushes the WAL to the end of what is inserted: the WAL of the next
-- group, still in flight, so that group's own commit needed a second flush. The listener
-- now waits for the rows' writers only (their xmin), which needs no flush at all when they
-- committed synchronously. Not SECURITY DEFINER, as await_durable(); sql/roles.sql grants
-- every overload of the name.

-- pgplace::durability::await_durable
CREATE  FUNCTION place."await_durable"(
	"writer" xid /* pg_sys :: TransactionId */
) RETURNS bool /* bool */
STRICT VOLATILE PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'await_durable_writer_wrapper';
COMMENT ON FUNCTION place.await_durable(xid) IS
    'Waits until the transaction with this xid (a row''s xmin) is durable, as await_durable() does for everything committed, and returns true: SELECT ... WHERE place.await_durable(xmin) shows only rows a crash or a failover cannot take back. It flushes only what an asynchronous commit among the writers needs: no WAL of transactions still in flight.';
