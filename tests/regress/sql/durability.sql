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
