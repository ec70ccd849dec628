-- pgplace.require_synchronous_standby: off unless set. On, with no synchronous standby named
-- (this server has none), a placement is refused (57P03) before it takes the seq or changes
-- anything, place_many's group too; place.await_durable fails (57014: no standby confirmed
-- it), or where synchronous_commit asks nothing of the standbys says so (0A000); any other
-- transaction that wrote is refused at its commit (57P03) and keeps nothing. Off again, the
-- same placement and writes go through.
SELECT place.create_board('strict', 4, 4, 4, '0') AS board \gset
CREATE TABLE strict_own (x int);
SHOW pgplace.require_synchronous_standby;
SELECT user_id AS placer FROM place.create_user('strict placer') \gset
SELECT placed AS placed_before FROM place.place(:board, 0, 0, 1, :placer);
SELECT board_fingerprint('strict') AS before \gset
SET pgplace.require_synchronous_standby = on;
-- (Called as statements of their own: a PL/pgSQL handler that caught the error would
-- leave a transaction that wrote its cooldown claims, refused again at its commit.)
SELECT place.place(:board, 1, 1, 3, :placer);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM place.place_many(:board, ARRAY[:placer, :placer], '{1,2}', '{1,2}', '{3,4}');
\echo :LAST_ERROR_SQLSTATE
SELECT board_fingerprint('strict') = :'before' AS unchanged,
       (SELECT seq FROM place.boards WHERE id = :board) AS seq;
-- (57014 is query_canceled, which a PL/pgSQL handler catches only by name.)
DO $$ BEGIN PERFORM place.await_durable();
EXCEPTION WHEN query_canceled THEN RAISE NOTICE '%: %', SQLSTATE, SQLERRM; END $$;
DO $$ BEGIN PERFORM place.await_durable(xmin) FROM place.placements LIMIT 1;
EXCEPTION WHEN query_canceled THEN RAISE NOTICE '%: %', SQLSTATE, SQLERRM; END $$;
SET synchronous_commit = local;
SELECT expect_error('SELECT place.await_durable()');
RESET synchronous_commit;
-- Writes that take no seq, each refused at its commit: a user and a ban (functions in
-- Rust), a session (a SQL function: the library is loaded already, by the calls above), a
-- row of the caller's own table, a PREPARE TRANSACTION. A transaction that only read
-- commits, reads through pgplace's functions included (they take no transaction id:
-- reading_takes_no_xid), and so does one that took an id but wrote nothing (no WAL of its
-- own: PostgreSQL would not wait for a standby either).
SELECT (SELECT count(*) FROM place.users) AS users_before,
       (SELECT count(*) FROM place.sessions) AS sessions_before \gset
SELECT place.create_user('strict newcomer');
\echo :LAST_ERROR_SQLSTATE
SELECT place.ban_user(:placer);
\echo :LAST_ERROR_SQLSTATE
SELECT place.session_create('strict-session-0123456789', 1);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO strict_own VALUES (1);
\echo :LAST_ERROR_SQLSTATE
BEGIN;
INSERT INTO strict_own VALUES (2);
PREPARE TRANSACTION 'strict';
\echo :LAST_ERROR_SQLSTATE
BEGIN;
SELECT count(*) AS own_rows FROM strict_own;
SELECT place.get_tile(:board, 0, 0) AS tile;
SELECT txid_current_if_assigned() IS NULL AS no_xid;
COMMIT;
BEGIN;
SELECT pg_current_xact_id() IS NOT NULL AS took_an_id;
SELECT count(*) AS own_rows FROM strict_own;
COMMIT;
SELECT (SELECT count(*) FROM place.users) = :users_before AS no_new_user,
       NOT EXISTS (SELECT FROM place.bans WHERE user_id = :placer) AS not_banned,
       (SELECT count(*) FROM place.sessions) = :sessions_before AS no_new_session,
       (SELECT count(*) FROM strict_own) AS own_rows,
       (SELECT count(*) FROM pg_prepared_xacts WHERE gid = 'strict') AS prepared;
RESET pgplace.require_synchronous_standby;
SELECT placed, seq FROM place.place(:board, 1, 1, 3, :placer);
INSERT INTO strict_own VALUES (3);
SELECT count(*) AS own_rows FROM strict_own;
SELECT place.await_durable();
