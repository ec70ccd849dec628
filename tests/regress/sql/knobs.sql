-- Live knobs: palettes and board states.
SELECT place.create_board('knobs', 4, 2, 2, '0') AS b \gset
SELECT user_id AS u FROM place.create_user('knobs-u') \gset
SELECT palette FROM place.boards WHERE id = :b;
SELECT count(*) FROM place.place_many(:b, ARRAY[:u, :u]::bigint[], '{0,1}', '{0,0}', '{2,1}');

-- A new palette: colours may change; every colour on the board must stay named.
SELECT place.set_palette(:b, ARRAY['#000000', '#ff0000', '#00ff00', '#0000ff']);
SELECT palette FROM place.boards WHERE id = :b;
SELECT place.set_palette(:b, ARRAY['#000000', '#ff0000', '#00ff00']);
SELECT palette FROM place.boards WHERE id = :b;
SELECT board_fingerprint('knobs') AS before \gset
SELECT expect_error(format('SELECT place.set_palette(%s, ARRAY[''#000000'', ''#ff0000''])', :b));
SELECT expect_error(format('SELECT place.set_palette(%s, ARRAY[''#000000'', ''#ff0000'', ''#00ff00'', ''#0000ff'', ''#ffffff''])', :b));
SELECT expect_error(format('SELECT place.set_palette(%s, ARRAY[''red''])', :b));
SELECT expect_error(format('SELECT place.set_palette(%s, ARRAY[]::text[])', :b));
SELECT expect_error(format('SELECT place.set_palette(%s, NULL)', :b));
SELECT expect_error('SELECT place.set_palette(4242, ARRAY[''#000000''])');
SELECT board_fingerprint('knobs') = :'before' AS unchanged;
SELECT palette FROM place.boards WHERE id = :b;
-- A colour beyond the shorter palette is refused now.
SELECT expect_error(format('SELECT * FROM place.place(%s, 3, 1, 3, %s)', :b, :u));

-- States: only an open board takes placements; each other state says what it is.
SELECT place.set_board_state(:b, 'frozen');
SELECT expect_error(format('SELECT * FROM place.place(%s, 3, 1, 1, %s)', :b, :u));
SELECT place.set_board_state(:b, 'closed');
SELECT expect_error(format('SELECT * FROM place.place(%s, 3, 1, 1, %s)', :b, :u));
SELECT expect_error(format('SELECT place.set_board_state(%s, ''archived'')', :b));
SELECT place.set_board_state(:b, 'open');
SELECT placed FROM place.place(:b, 3, 1, 1, :u);

-- Resizing keeps the top-left part; the history stays and time travel follows the sizes.
SELECT place.create_board('resized', 4, 3, 4, '0') AS r \gset
SELECT count(*) FROM place.place_many(:r, array_fill(:u::bigint, ARRAY[4]), '{0,3,1,2}', '{0,0,2,1}', '{1,2,3,4}');
SELECT encode(bits, 'hex') AS before_resize FROM place.board_bits(:r);
SELECT place.resize_board(:r, 2, 2);
SELECT width, height, seq FROM place.boards WHERE id = :r;
SELECT encode(bits, 'hex') AS shrunk FROM place.board_bits(:r);
SELECT place.resize_board(:r, 5, 3);
SELECT encode(bits, 'hex') AS grown FROM place.board_bits(:r);
SELECT placed, seq FROM place.place(:r, 4, 2, 9, :u);
-- Every seq reads back at the size the board had then (seq 4: after both resizes).
SELECT seq, width, height, encode(bits, 'hex') FROM generate_series(0, 5) s, place.board_at_seq(:r, s);
SELECT seq, width, height, keyframe FROM (
    SELECT seq, width, height, encode(bits, 'hex') AS keyframe FROM place.keyframes WHERE board_id = :r) k
ORDER BY seq;
SELECT (SELECT bits FROM place.board_at_seq(:r, 5)) = (SELECT bits FROM place.board_bits(:r)) AS newest_is_current;
SELECT place.resize_board(:r, 5, 3) AS same_size_is_a_no_op;
SELECT board_fingerprint('resized') AS before \gset
SELECT expect_error(format('SELECT place.resize_board(%s, 0, 3)', :r));
SELECT expect_error(format('SELECT place.resize_board(%s, 5000, 5000)', :r));
SELECT expect_error(format('SELECT place.resize_board(%s, NULL, 3)', :r));
SELECT expect_error('SELECT place.resize_board(4242, 3, 3)');
SELECT board_fingerprint('resized') = :'before' AS unchanged;
-- Time travel across the resizes: by time, each placement's moment gives its seq.
SELECT s, (SELECT seq FROM place.board_at(:r, (SELECT placed_at FROM place.placements WHERE board_id = :r AND seq = s))) AS at_its_time
FROM generate_series(4, 5) s;
SELECT seq, width FROM place.board_at(:r, '2000-01-01');
SELECT seq, taken_at = '-infinity' AS before_everything FROM place.keyframes WHERE board_id = :r ORDER BY seq;
