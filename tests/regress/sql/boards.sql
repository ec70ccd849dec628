-- Creating boards, their defaults, settings, and reading them back.
SELECT place.create_board('rplace', 1000, 1000) > 0 AS created;
SELECT name, width, height, bits_per_tile, palette, cooldown, state, seq
FROM place.boards WHERE name = 'rplace';
SELECT seq, length(bits) AS bytes, bits = decode(repeat('00', 500000), 'hex') AS all_zero
FROM place.board_bits((SELECT id FROM place.boards WHERE name = 'rplace'));
-- 500,000 bytes, cut into small chunk rows.
SELECT count(*) AS chunks, max(length(bits)) AS max_chunk_bytes, sum(length(bits)) AS total
FROM place.board_chunks WHERE board_id = (SELECT id FROM place.boards WHERE name = 'rplace');

-- Defaults for each width; an explicit palette; sizes that do not fill the last byte.
SELECT place.create_board('checkboxes', 1000, 1000, 1, '0') > 0 AS created;
SELECT place.create_board('greys', 3, 3, 2, '10 seconds') > 0 AS created;
SELECT place.create_board('bytes', 7, 1, 8, '1 hour', ARRAY['#FF4500', '#00a368']) > 0 AS created;
SELECT name, bits_per_tile, cardinality(palette) AS colors, palette[1:2] AS first_colors, cooldown,
       (SELECT length(bits) FROM place.board_bits(id)) AS bytes
FROM place.boards ORDER BY id;
SELECT place.create_board('largest', 4096, 4096, 8) > 0 AS created;
SELECT length(bits) FROM place.board_bits((SELECT id FROM place.boards WHERE name = 'largest'));
SELECT place.create_board('one-million-row', 16777216, 1, 1) > 0 AS created;

-- Every bad argument is an error that names it, and creates nothing.
SELECT count(*) AS boards_before FROM place.boards;
SELECT expect_error($$SELECT place.create_board('rplace', 10, 10)$$);
SELECT expect_error($$SELECT place.create_board(NULL, 10, 10)$$);
SELECT expect_error($$SELECT place.create_board('', 10, 10)$$);
SELECT expect_error($$SELECT place.create_board('   ', 10, 10)$$);
SELECT expect_error($$SELECT place.create_board(repeat('x', 65), 10, 10)$$);
SELECT expect_error($$SELECT place.create_board('b', 0, 10)$$);
SELECT expect_error($$SELECT place.create_board('b', 10, -1)$$);
SELECT expect_error($$SELECT place.create_board('b', 4097, 4097)$$);
SELECT expect_error($$SELECT place.create_board('b', 2147483647, 2147483647)$$);
SELECT expect_error($$SELECT place.create_board('b', NULL, 10)$$);
SELECT expect_error($$SELECT place.create_board('b', 10, NULL)$$);
SELECT expect_error($$SELECT place.create_board('b', 10, 10, 3)$$);
SELECT expect_error($$SELECT place.create_board('b', 10, 10, 16)$$);
SELECT expect_error($$SELECT place.create_board('b', 10, 10, NULL)$$);
SELECT expect_error($$SELECT place.create_board('b', 10, 10, 4, '-1 second')$$);
SELECT expect_error($$SELECT place.create_board('b', 10, 10, 4, '1 month')$$);
SELECT expect_error($$SELECT place.create_board('b', 10, 10, 4, '367 days')$$);
SELECT expect_error($$SELECT place.create_board('b', 10, 10, 4, '200000000 days 324095577 hours')$$);
SELECT expect_error($$SELECT place.create_board('b', 10, 10, 4, NULL)$$);
SELECT expect_error($$SELECT place.create_board('b', 10, 10, 1, '0', ARRAY['#000000', '#ffffff', '#ff0000'])$$);
SELECT expect_error($$SELECT place.create_board('b', 10, 10, 4, '0', ARRAY[]::text[])$$);
SELECT expect_error($$SELECT place.create_board('b', 10, 10, 4, '0', ARRAY['#00000g'])$$);
SELECT expect_error($$SELECT place.create_board('b', 10, 10, 4, '0', ARRAY['red'])$$);
SELECT expect_error($$SELECT place.create_board('b', 10, 10, 4, '0', ARRAY['#000000', NULL])$$);
SELECT count(*) AS boards_after FROM place.boards;

-- Settings.
SELECT place.set_cooldown((SELECT id FROM place.boards WHERE name = 'greys'), '30 seconds');
SELECT place.set_board_state((SELECT id FROM place.boards WHERE name = 'greys'), 'paused');
SELECT name, cooldown, state FROM place.boards WHERE name = 'greys';
SELECT place.set_board_state((SELECT id FROM place.boards WHERE name = 'greys'), 'open');
SELECT expect_error($$SELECT place.set_cooldown((SELECT id FROM place.boards WHERE name = 'greys'), '-5 minutes')$$);
SELECT expect_error($$SELECT place.set_cooldown((SELECT id FROM place.boards WHERE name = 'greys'), NULL)$$);
SELECT expect_error($$SELECT place.set_cooldown(NULL, '1 minute')$$);
SELECT expect_error($$SELECT place.set_cooldown(-7, '1 minute')$$);
SELECT expect_error($$SELECT place.set_board_state((SELECT id FROM place.boards WHERE name = 'greys'), 'melted')$$);
SELECT expect_error($$SELECT place.set_board_state((SELECT id FROM place.boards WHERE name = 'greys'), NULL)$$);
SELECT expect_error($$SELECT place.set_board_state(999999, 'open')$$);
SELECT name, cooldown, state FROM place.boards WHERE name = 'greys';

-- Reading.
SELECT place.get_tile((SELECT id FROM place.boards WHERE name = 'greys'), 2, 2) AS tile;
SELECT expect_error($$SELECT place.get_tile((SELECT id FROM place.boards WHERE name = 'greys'), 3, 0)$$);
SELECT expect_error($$SELECT place.get_tile((SELECT id FROM place.boards WHERE name = 'greys'), 0, -1)$$);
SELECT expect_error($$SELECT place.get_tile((SELECT id FROM place.boards WHERE name = 'greys'), NULL, 0)$$);
SELECT expect_error($$SELECT place.get_tile(999999, 0, 0)$$);
SELECT expect_error($$SELECT * FROM place.board_bits(999999)$$);
SELECT expect_error($$SELECT * FROM place.board_bits(NULL)$$);
