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
-- pgplace.release_before_flush: off unless set; with it on, a placement's transaction
-- commits asynchronously, frees the seq lock, then flushes before COMMIT returns, and
-- synchronous_commit is what it was after a commit and a rollback alike (a commit that
-- fails after the switch: tests/isolation/specs/seq_release_before_flush.spec).
SHOW pgplace.release_before_flush;
SET pgplace.release_before_flush = on;
BEGIN;
SELECT seq AS early_seq FROM place.place(:board, 3, 3, 5, :placer) \gset
SELECT pg_current_wal_insert_lsn() AS before_commit \gset
COMMIT;
SELECT pg_current_wal_flush_lsn() > :'before_commit'::pg_lsn AS flushed,
       current_setting('synchronous_commit') AS synchronous_commit;
SELECT seq = :early_seq AS kept, color FROM place.placements
WHERE board_id = :board AND x = 3 AND y = 3;
BEGIN;
SELECT placed FROM place.place(:board, 3, 3, 6, :placer);
ROLLBACK;
SELECT current_setting('synchronous_commit') AS after_rollback,
       (SELECT color FROM place.placements WHERE board_id = :board AND x = 3 AND y = 3
        ORDER BY seq DESC LIMIT 1) AS color;
-- Another level is kept as it was (a prepared transaction cannot place: it notifies).
SET synchronous_commit = remote_apply;
SELECT placed FROM place.place(:board, 3, 3, 7, :placer);
SELECT current_setting('synchronous_commit') AS still_remote_apply;
-- A session that commits asynchronously anyway keeps doing so.
SET synchronous_commit = off;
SELECT placed FROM place.place(:board, 3, 3, 8, :placer);
SELECT current_setting('synchronous_commit') AS still_off;
RESET synchronous_commit;
RESET pgplace.release_before_flush;
