-- History queries, keyframes, the board at a seq or a time, compaction.
SELECT place.create_board('hist', 20, 10, 4, '0') AS b \gset
SELECT user_id AS u FROM place.create_user('hist-u') \gset
SELECT user_id AS v FROM place.create_user('hist-v') \gset
SELECT place.set_keyframe_every(:b, 7);

-- The board replayed from the history alone, bit by bit: what board_at must equal.
CREATE FUNCTION replay(b bigint, upto bigint) RETURNS bytea LANGUAGE plpgsql AS $$
DECLARE
    bits bytea := (SELECT decode(repeat('00', 100), 'hex'));
    r record;
BEGIN
    FOR r IN SELECT x, y, color FROM place.placements WHERE board_id = b AND seq <= upto ORDER BY seq LOOP
        bits := place.bitfield_set(bits, 4, r.x + 20 * r.y, r.color);
    END LOOP;
    RETURN bits;
END
$$;

-- Three rounds of placements, in separate transactions, with a time taken between them.
SELECT count(*) FROM generate_series(1, 4) g,
    place.place_many(:b, ARRAY[:u, :v, :u, :v]::bigint[], ARRAY[g, g + 1, g + 2, 0], ARRAY[g % 10, 0, 1, 2], ARRAY[g, g + 1, g + 2, 15]);
SELECT clock_timestamp() AS t1 \gset
SELECT count(*) FROM generate_series(5, 9) g,
    place.place_many(:b, ARRAY[:u, :v, :u]::bigint[], ARRAY[g, 19, 3], ARRAY[9, g, 3], ARRAY[g, 3, g]);
SELECT clock_timestamp() AS t2 \gset
SELECT count(*) FROM place.place(:b, 0, 0, 9, :u);

SELECT seq FROM place.boards WHERE id = :b;
-- A keyframe at the end of each call that reached a multiple of 7.
SELECT seq, width, height, bits_per_tile FROM place.keyframes WHERE board_id = :b ORDER BY seq;
-- Every seq, from the empty board to the newest, equals the replayed history.
SELECT count(*) FILTER (WHERE (SELECT bits FROM place.board_at_seq(:b, s)) = replay(:b, s)) AS equal,
       count(*) AS seqs
FROM generate_series(0, 32) s;
SELECT (SELECT bits FROM place.board_at_seq(:b, 32)) = (SELECT bits FROM place.board_bits(:b)) AS newest_is_current;
-- By time: before everything, between the rounds, after everything.
SELECT seq, bits = replay(:b, 0) AS empty FROM place.board_at(:b, '2000-01-01');
SELECT seq, bits = replay(:b, 16) AS as_replayed FROM place.board_at(:b, :'t1');
SELECT seq, bits = replay(:b, 31) AS as_replayed FROM place.board_at(:b, :'t2');
SELECT seq FROM place.board_at(:b, now() + interval '1 day');

-- History pages: newest first, cursor by seq.
SELECT seq, color, user_name FROM place.tile_history(:b, 0, 0);
SELECT seq, color FROM place.tile_history(:b, 0, 2, NULL, 2);
SELECT seq, color FROM place.tile_history(:b, 0, 2, 16, 2);
SELECT seq, x, y, color FROM place.user_history(:b, :v, NULL, 3);
SELECT seq, x, y, color FROM place.user_history(:b, :v, 22, 3);
-- The board as rows.
SELECT count(*), sum(color), count(*) FILTER (WHERE color <> 0) AS painted FROM place.tiles(:b);
SELECT x, y, color FROM place.tiles(:b) WHERE color <> 0 ORDER BY y, x LIMIT 5;
SELECT (SELECT count(*) FROM place.tiles(:b) t WHERE t.color <> place.get_tile(:b, t.x, t.y)) AS disagreeing;

-- Keyframes for history made before (or with another interval).
SELECT place.set_keyframe_every(:b, 5);
SELECT place.build_keyframes(:b);
SELECT place.build_keyframes(:b) AS again;
SELECT array_agg(seq ORDER BY seq) FROM place.keyframes WHERE board_id = :b;
SELECT count(*) FILTER (WHERE k.bits = replay(:b, k.seq)) AS keyframes_equal_history, count(*)
FROM place.keyframes k WHERE k.board_id = :b;

-- Errors, each changing nothing.
SELECT board_fingerprint('hist') AS before \gset
SELECT expect_error('SELECT * FROM place.board_at_seq(' || :b || ', 33)');
SELECT expect_error('SELECT * FROM place.board_at_seq(' || :b || ', -1)');
SELECT expect_error('SELECT * FROM place.board_at_seq(4242, 1)');
SELECT expect_error('SELECT * FROM place.board_at_seq(' || :b || ', NULL)');
SELECT expect_error('SELECT * FROM place.board_at(' || :b || ', NULL)');
SELECT expect_error('SELECT * FROM place.tile_history(' || :b || ', -1, 0)');
-- Beyond today's size is allowed: a shrunk board keeps its history.
SELECT count(*) FROM place.tile_history(:b, 20, 0);
SELECT expect_error('SELECT * FROM place.tile_history(' || :b || ', 0, 0, NULL, 0)');
SELECT expect_error('SELECT * FROM place.tile_history(' || :b || ', 0, 0, NULL, 10001)');
SELECT expect_error('SELECT * FROM place.user_history(' || :b || ', 4242)');
SELECT expect_error('SELECT * FROM place.tiles(4242)');
SELECT expect_error('SELECT place.set_keyframe_every(' || :b || ', 0)');
SELECT expect_error('SELECT place.set_keyframe_every(' || :b || ', 1000001)');
SELECT expect_error('SELECT place.compact_history(' || :b || ', NULL)');
SELECT board_fingerprint('hist') = :'before' AS unchanged;

-- Compaction: placements up to the last one stamped before t1 go, a keyframe stays.
CREATE TEMP TABLE before_compaction AS
    SELECT s, (SELECT bits FROM place.board_at_seq(:b, s)) AS bits FROM generate_series(16, 32) s;
SELECT place.compact_history(:b, :'t1') AS dropped;
SELECT history_from FROM place.boards WHERE id = :b;
SELECT min(seq), count(*) FROM place.placements WHERE board_id = :b;
-- The kept range reads as it did before.
SELECT count(*) FILTER (WHERE (SELECT bits FROM place.board_at_seq(:b, s)) = c.bits) AS same, count(*)
FROM before_compaction c;
SELECT (SELECT bits FROM place.board_at_seq(:b, 32)) = (SELECT bits FROM place.board_bits(:b)) AS newest_is_current;
SELECT seq FROM place.board_at(:b, :'t2');
SELECT expect_error('SELECT * FROM place.board_at_seq(' || :b || ', 15)');
SELECT expect_error('SELECT * FROM place.board_at(' || :b || ', ''2000-01-01'')');
SELECT place.compact_history(:b, :'t1') AS dropped_again;
-- Placing goes on after compaction; seqs continue.
SELECT placed, seq FROM place.place(:b, 5, 5, 5, :v);
SELECT (SELECT bits FROM place.board_at_seq(:b, 33)) = (SELECT bits FROM place.board_bits(:b)) AS newest_is_current;
-- Compacting the whole history: the seq and the newest stamp then come from history_from
-- and its keyframe, and placing continues after them.
SELECT seq AS seq_before, last_placed_at AS stamp_before FROM place.boards WHERE id = :b \gset
SELECT place.compact_history(:b, clock_timestamp()) AS dropped_all;
SELECT seq = :seq_before AS seq_kept, history_from = :seq_before AS all_compacted,
       last_placed_at = :'stamp_before' AS stamp_kept, (SELECT count(*) FROM place.placements WHERE board_id = :b) AS rows
FROM place.boards WHERE id = :b;
SELECT placed, seq = :seq_before + 1 AS next_seq FROM place.place(:b, 6, 6, 6, :v);
SELECT p.placed_at >= :'stamp_before' AS stamp_not_back FROM place.placements p WHERE p.board_id = :b;
