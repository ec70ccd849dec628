-- Idempotency keys (0.8.7): a placement named by a key is made once; its retry within a
-- day answers with the first placement (its seq), and places nothing.
SELECT place.create_board('keys', 8, 8, 4, '1 hour') AS kb \gset
SELECT place.create_board('keys-free', 8, 8, 4, '0') AS fb \gset
SELECT user_id AS ku FROM place.create_user('keys-player') \gset
SELECT user_id AS ku2 FROM place.create_user('keys-other') \gset

-- The first placement, then its retry: the same seq, no cooldown refusal, one placement.
SELECT placed, seq FROM place.place(:kb, 1, 1, 3, :ku, key => 'k-1');
SELECT placed, seq FROM place.place(:kb, 1, 1, 3, :ku, key => 'k-1');
SELECT seq, count(*) AS placements FROM place.placements WHERE board_id = :kb GROUP BY seq;
SELECT seq FROM place.boards WHERE id = :kb;
-- Both answers say when the user may place again, the same time.
SELECT count(DISTINCT next_allowed_at) AS one_time
FROM (SELECT next_allowed_at FROM place.place(:kb, 1, 1, 3, :ku, key => 'k-1')
      UNION ALL
      SELECT next_allowed_at FROM place.place(:kb, 1, 1, 3, :ku, key => 'k-1')) a;
-- A new key is a new placement: inside the cooldown, refused, and its key is not kept,
-- so its retry is a new attempt too.
SELECT placed, seq FROM place.place(:kb, 2, 2, 3, :ku, key => 'k-2');
SELECT count(*) AS kept FROM place.placement_keys WHERE board_id = :kb AND key = 'k-2';
-- The same key for another tile or colour: refused, nothing changed.
SELECT expect_error(format('SELECT place.place(%s, 1, 2, 3, %s, key => %L)', :kb, :ku, 'k-1'));
SELECT expect_error(format('SELECT place.place(%s, 1, 1, 4, %s, key => %L)', :kb, :ku, 'k-1'));
SELECT seq FROM place.boards WHERE id = :kb;
-- Keys are per user: another user's 'k-1' is its own.
SELECT placed, seq FROM place.place(:kb, 5, 5, 1, :ku2, key => 'k-1');
-- And per board.
SELECT placed, seq FROM place.place(:fb, 1, 1, 3, :ku, key => 'k-1');
-- Bad keys: a clear error, nothing placed.
SELECT expect_error(format('SELECT place.place(%s, 3, 3, 3, %s, key => %L)', :fb, :ku, ''));
SELECT expect_error(format('SELECT place.place(%s, 3, 3, 3, %s, key => %L)', :fb, :ku, repeat('k', 201)));
SELECT placed FROM place.place(:fb, 3, 3, 3, :ku, key => repeat('k', 200));
-- NULL: no key (every call places on a board without cooldown).
SELECT count(*) FILTER (WHERE placed) AS placed
FROM (SELECT placed FROM place.place(:fb, 4, 4, 1, :ku, key => NULL)
      UNION ALL SELECT placed FROM place.place(:fb, 4, 4, 1, :ku)) a;

-- place_many: keys per item; a retry of a whole batch places nothing again, and a key
-- twice in one batch answers the second as the first.
SELECT seq AS before_batch FROM place.boards WHERE id = :fb \gset
SELECT ord, placed, seq - :before_batch AS seq_after
FROM place.place_many(:fb, ARRAY[:ku, :ku, :ku, :ku2], ARRAY[6, 7, 6, 6], ARRAY[0, 0, 0, 0],
                      ARRAY[1, 2, 1, 1], ARRAY['b-1', 'b-2', 'b-1', 'b-1']);
SELECT ord, placed, seq - :before_batch AS seq_after
FROM place.place_many(:fb, ARRAY[:ku, :ku, :ku, :ku2], ARRAY[6, 7, 6, 6], ARRAY[0, 0, 0, 0],
                      ARRAY[1, 2, 1, 1], ARRAY['b-1', 'b-2', 'b-1', 'b-1']);
SELECT seq - :before_batch AS placed_since FROM place.boards WHERE id = :fb;
-- Keyed and unkeyed items together; NULL keys place every time.
SELECT ord, placed, seq - :before_batch AS seq_after
FROM place.place_many(:fb, ARRAY[:ku, :ku], ARRAY[6, 7], ARRAY[1, 0], ARRAY[1, 2],
                      ARRAY[NULL, 'b-2']);
-- A key repeated in one batch for another tile, a keys array of the wrong length: refused.
SELECT expect_error(format('SELECT place.place_many(%s, ARRAY[%s, %s], ARRAY[1, 2], ARRAY[1, 1], ARRAY[1, 1], ARRAY[%L, %L])', :fb, :ku, :ku, 'c', 'c'));
SELECT expect_error(format('SELECT place.place_many(%s, ARRAY[%s], ARRAY[1], ARRAY[1], ARRAY[1], ARRAY[%L, %L])', :fb, :ku, 'c', 'd'));
SELECT seq - :before_batch AS placed_since FROM place.boards WHERE id = :fb;

-- A key past its day is a new key: the placement is made again.
UPDATE place.placement_keys SET made_at = made_at - interval '25 hours'
WHERE board_id = :fb AND user_id = :ku AND key = 'k-1';
SELECT placed, seq > 1 AS new_seq FROM place.place(:fb, 1, 1, 3, :ku, key => 'k-1');
SELECT count(*) AS rows_for_key, bool_and(made_at > now() - interval '1 minute') AS renewed
FROM place.placement_keys WHERE board_id = :fb AND user_id = :ku AND key = 'k-1';
-- Expired keys go as new ones come: one removed for each key a call adds, and more.
INSERT INTO place.placement_keys (board_id, user_id, key, x, y, color, made_at, seq, next_allowed_at)
SELECT :fb, :ku2, 'old-' || i, 0, 0, 0, now() - interval '2 days', 1, now() FROM generate_series(1, 100) i;
SELECT placed FROM place.place(:fb, 2, 2, 2, :ku2, key => 'fresh');
SELECT count(*) AS old_left FROM place.placement_keys WHERE key LIKE 'old-%';
-- Deleting a board takes its keys along.
SELECT place.create_board('keys-gone', 4, 4, 1, '0') AS gb \gset
SELECT placed FROM place.place(:gb, 0, 0, 1, :ku, key => 'gone');
DELETE FROM place.boards WHERE id = :gb;
SELECT count(*) AS keys_of_deleted_board FROM place.placement_keys WHERE board_id = :gb;
