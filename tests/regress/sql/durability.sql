-- place.await_durable: what committed before it is flushed when it returns, whether it ran
-- in autocommit, in a read-only transaction or with nothing pending; a placement committed
-- asynchronously (as the gateway commits them) keeps its seq and the setting ends with it.
SELECT place.create_board('durable', 4, 4, 4, '0') AS board \gset
SELECT user_id AS placer FROM place.create_user('durable placer') \gset
SELECT p.seq, current_setting('synchronous_commit') AS during
FROM place.place(:board, 1, 1, 3, :placer) p, set_config('synchronous_commit', 'off', true);
SELECT current_setting('synchronous_commit') AS after;
SELECT pg_current_wal_insert_lsn() AS committed_up_to \gset
SELECT place.await_durable();
SELECT pg_current_wal_flush_lsn() >= :'committed_up_to'::pg_lsn AS flushed;
-- Nothing pending: returns at once, in a read-only transaction too.
SELECT place.await_durable();
BEGIN READ ONLY;
SELECT place.await_durable();
SELECT seq FROM place.boards WHERE id = :board;
COMMIT;
-- Takes no arguments and writes nothing.
SELECT provolatile, proisstrict, prosecdef, pronargs FROM pg_proc
WHERE oid = 'place.await_durable()'::regprocedure;
-- place.await_durable(xid), the wait for a row's writer (its xmin, 0.8.13): a placement
-- committed asynchronously is flushed when it returns true; a special, future or unknown
-- xid has nothing to wait for; NULL in, NULL out.
-- (The placement's WAL ends before its commit record, which other sessions' WAL may follow
-- before this one's next statement: the check is that it is flushed.)
SELECT p.seq AS async_seq, pg_current_wal_insert_lsn() AS placed_up_to
FROM place.place(:board, 2, 2, 3, :placer) p, set_config('synchronous_commit', 'off', true) \gset
SELECT seq, place.await_durable(xmin) AS durable,
       pg_current_wal_flush_lsn() >= :'placed_up_to'::pg_lsn AS flushed
FROM place.placements WHERE board_id = :board AND seq = :async_seq;
SELECT place.await_durable('0'::xid) AS invalid, place.await_durable('2'::xid) AS frozen,
       place.await_durable('4000000000'::xid) AS far_away,
       place.await_durable((txid_current() + 1000)::text::xid) AS future,
       place.await_durable(NULL::xid) IS NULL AS strict;
SELECT provolatile, proisstrict, prosecdef, pronargs FROM pg_proc
WHERE oid = 'place.await_durable(xid)'::regprocedure;
