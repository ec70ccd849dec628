-- place and place_many: results, cooldowns, seq, history, bits.
SELECT place.create_board('small', 4, 3, 4, '1 hour') AS small \gset
SELECT place.create_board('free', 4, 3, 2, '0') AS free \gset
SELECT user_id AS u1 FROM place.create_user('p1') \gset
SELECT user_id AS u2 FROM place.create_user('p2') \gset
SELECT user_id AS u3 FROM place.create_user('p3') \gset
SELECT user_id AS u4 FROM place.create_user('p4') \gset

-- A placement, then the same user again inside the cooldown: a result, not an error.
SELECT placed, seq, next_allowed_at - now() > interval '59 minutes' AS waits_an_hour
FROM place.place(:small, 1, 2, 7, :u1);
SELECT placed, seq, next_allowed_at = (SELECT placed_at + interval '1 hour' FROM place.placements
                                       WHERE board_id = :small AND seq = 1) AS until_first_plus_cooldown
FROM place.place(:small, 3, 0, 1, :u1);
SELECT place.get_tile(:small, 1, 2) AS tile_1_2, place.get_tile(:small, 3, 0) AS tile_3_0;
SELECT board_id = :small AS on_small, seq, x, y, color, user_id = :u1 AS by_u1 FROM place.placements WHERE board_id = :small;
-- Tile (1, 2) is number 1 + 4*2 = 9: the low nibble of byte 4.
SELECT seq, encode(bits, 'hex') FROM place.board_bits(:small);

-- A batch: in array order, a user's second item is refused while the cooldown runs.
SELECT ord, placed, seq FROM place.place_many(:small, ARRAY[:u2, :u2, :u3, :u1], '{0,1,2,3}', '{0,0,0,0}', '{15,14,13,12}');
SELECT seq, encode(bits, 'hex') FROM place.board_bits(:small);
SELECT seq FROM place.boards WHERE id = :small;
-- With no cooldown the same user places every item; a later item on the same tile wins.
SELECT ord, placed, seq FROM place.place_many(:free, ARRAY[:u1, :u1, :u1], '{0,0,3}', '{0,0,2}', '{1,3,2}');
SELECT seq, encode(bits, 'hex') FROM place.board_bits(:free);
SELECT count(*) AS empty_batch FROM place.place_many(:free, '{}', '{}', '{}', '{}');

-- A changed cooldown applies at once, measured from the last placement.
SELECT place.set_cooldown(:small, '0');
SELECT placed, seq FROM place.place(:small, 0, 1, 2, :u1);
SELECT place.set_cooldown(:small, '1 hour');

-- A paused board refuses placements with an error that says what to do.
SELECT place.set_board_state(:free, 'paused');
SELECT expect_error(format('SELECT * FROM place.place(%s, 0, 0, 1, %s)', :free, :u1));
SELECT place.set_board_state(:free, 'open');
SELECT placed FROM place.place(:free, 0, 0, 1, :u1);

-- Every bad argument: an error naming the value and the range, and nothing changes
-- (no bits, no seq, no history row, no cooldown consumed).
SELECT board_fingerprint('small') AS before \gset
SELECT expect_error(format('SELECT * FROM place.place(%s, 4, 0, 1, %s)', :small, :u4));
SELECT expect_error(format('SELECT * FROM place.place(%s, -1, 0, 1, %s)', :small, :u4));
SELECT expect_error(format('SELECT * FROM place.place(%s, 0, 3, 1, %s)', :small, :u4));
SELECT expect_error(format('SELECT * FROM place.place(%s, 0, -2147483648, 1, %s)', :small, :u4));
SELECT expect_error(format('SELECT * FROM place.place(%s, 0, 0, 16, %s)', :small, :u4));
SELECT expect_error(format('SELECT * FROM place.place(%s, 0, 0, -1, %s)', :small, :u4));
SELECT expect_error(format('SELECT * FROM place.place(%s, 0, 0, 1, %s)', :small, 999999));
SELECT expect_error(format('SELECT * FROM place.place(%s, 0, 0, 1, %s)', 999999, :u4));
SELECT expect_error(format('SELECT * FROM place.place(NULL, 0, 0, 1, %s)', :u4));
SELECT expect_error(format('SELECT * FROM place.place(%s, NULL, 0, 1, %s)', :small, :u4));
SELECT expect_error(format('SELECT * FROM place.place(%s, 0, NULL, 1, %s)', :small, :u4));
SELECT expect_error(format('SELECT * FROM place.place(%s, 0, 0, NULL, %s)', :small, :u4));
SELECT expect_error(format('SELECT * FROM place.place(%s, 0, 0, 1, NULL)', :small));
-- A bad item anywhere in a batch rejects the whole batch.
SELECT expect_error(format('SELECT * FROM place.place_many(%s, ARRAY[%s, %s], ''{0,4}'', ''{0,0}'', ''{1,1}'')', :small, :u4, :u2));
SELECT expect_error(format('SELECT * FROM place.place_many(%s, ARRAY[%s, %s], ''{0,0}'', ''{0,0}'', ''{1,16}'')', :small, :u4, :u2));
SELECT expect_error(format('SELECT * FROM place.place_many(%s, ARRAY[%s, 999999], ''{0,0}'', ''{0,0}'', ''{1,1}'')', :small, :u4));
SELECT expect_error(format('SELECT * FROM place.place_many(%s, ARRAY[%s, NULL], ''{0,0}'', ''{0,0}'', ''{1,1}'')', :small, :u4));
SELECT expect_error(format('SELECT * FROM place.place_many(%s, ARRAY[%s], ''{0,0}'', ''{0}'', ''{1}'')', :small, :u4));
SELECT expect_error(format('SELECT * FROM place.place_many(%s, ARRAY[%s], ''{0}'', ''{0}'', NULL)', :small, :u4));
SELECT expect_error(format('SELECT * FROM place.place_many(%s, ARRAY[%s], ''{0}'', ''{NULL}'', ''{1}'')', :small, :u4));
SELECT expect_error(format('SELECT * FROM place.place_many(%s, array_fill(%s::bigint, ARRAY[100001]), array_fill(0, ARRAY[100001]), array_fill(0, ARRAY[100001]), array_fill(0, ARRAY[100001]))', :small, :u4));
SELECT board_fingerprint('small') = :'before' AS nothing_changed;
-- The rejected calls consumed no cooldown: u4 places now.
SELECT placed, seq FROM place.place(:small, 0, 0, 1, :u4);

-- The invariants after all of the above: seq = history rows = newest seq, gap-free.
SELECT b.name, b.seq, count(p.seq) AS history, coalesce(max(p.seq), 0) AS newest,
       count(DISTINCT p.seq) = coalesce(max(p.seq), 0) AS gap_free
FROM place.boards b LEFT JOIN place.placements p ON p.board_id = b.id
WHERE b.name IN ('small', 'free') GROUP BY b.name, b.seq ORDER BY b.name;
-- Replaying the history on an empty board reproduces board_bits byte for byte.
WITH RECURSIVE replay(seq, bits) AS (
    SELECT 0::bigint, decode(repeat('00', 6), 'hex')
    UNION ALL
    SELECT p.seq, place.bitfield_set(r.bits, 4, (p.x + 4 * p.y)::bigint, p.color)
    FROM replay r JOIN place.placements p ON p.board_id = :small AND p.seq = r.seq + 1
)
SELECT (SELECT bits FROM replay ORDER BY seq DESC LIMIT 1) = (SELECT bits FROM place.board_bits(:small)) AS replay_matches;

-- The internal helpers the triggers and placing use refuse inconsistent input cleanly.
SELECT expect_error($$SELECT place._placement_payloads('{1}', '{}', '{}', '{}', '{}', '{}', '{}')$$);
SELECT expect_error($$SELECT place._apply_tiles('\x00', 4, '{0,1}', '{1}')$$);
SELECT expect_error($$SELECT place._apply_tiles('\x00', 4, '{2}', '{1}')$$);
SELECT expect_error($$SELECT place._board_payload(1, 0, 'exploded')$$);
