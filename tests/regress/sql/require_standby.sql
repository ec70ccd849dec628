-- pgplace.require_synchronous_standby: off unless set. On, with no synchronous standby named
-- (this server has none), a placement is refused (57P03) before it takes the seq or changes
-- anything, place_many's group too; place.await_durable fails (57014: no standby confirmed
-- it), or where synchronous_commit asks nothing of the standbys says so (0A000). Off again,
-- the same placement goes through.
SELECT place.create_board('strict', 4, 4, 4, '0') AS board \gset
SHOW pgplace.require_synchronous_standby;
SELECT user_id AS placer FROM place.create_user('strict placer') \gset
SELECT placed AS placed_before FROM place.place(:board, 0, 0, 1, :placer);
SELECT board_fingerprint('strict') AS before \gset
SET pgplace.require_synchronous_standby = on;
SELECT expect_error(format('SELECT place.place(%s, 1, 1, 3, %s)', :board, :placer));
SELECT expect_error(format(
    'SELECT * FROM place.place_many(%s, ARRAY[%s, %s], ''{1,2}'', ''{1,2}'', ''{3,4}'')',
    :board, :placer, :placer));
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
RESET pgplace.require_synchronous_standby;
SELECT placed, seq FROM place.place(:board, 1, 1, 3, :placer);
SELECT place.await_durable();
