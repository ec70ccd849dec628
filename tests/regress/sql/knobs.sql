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
