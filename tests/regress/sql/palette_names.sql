-- Palettes carry their colours' names: the default palettes come named, set_palette_names
-- names any palette, set_palette keeps a name only where its colour stays.
SELECT place.create_board('named 4', 4, 4, 4, '0') AS b4 \gset
SELECT place.create_board('named 1', 4, 4, 1, '0') AS b1 \gset
SELECT place.create_board('named 2', 4, 4, 2, '0') AS b2 \gset
SELECT place.create_board('named 8', 4, 4, 8, '0') AS b8 \gset
SELECT place.create_board('own palette', 4, 4, 2, '0', ARRAY['#101010', '#202020']) AS own \gset
SELECT c.colour, c.name FROM place.boards b,
       unnest(b.palette, b.palette_names) AS c(colour, name) WHERE b.id = :b4;
SELECT palette_names FROM place.boards WHERE id IN (:b1, :b2) ORDER BY id;
-- 8 bits: r/Place's sixteen named, the cube and greys after them not.
SELECT cardinality(palette_names) AS names, palette_names[16] AS sixteenth,
       palette_names[17] IS NULL AS seventeenth_unnamed,
       (SELECT count(*) FROM unnest(palette_names) n WHERE n IS NOT NULL) AS named
FROM place.boards WHERE id = :b8;
SELECT palette_names IS NULL AS own_palette_unnamed FROM place.boards WHERE id = :own;

-- Names for a palette of one's own; NULL for a colour without one.
SELECT place.set_palette_names(:own, ARRAY['soot', NULL]);
SELECT palette_names FROM place.boards WHERE id = :own;

-- Refused, naming the entry, and nothing changes.
SELECT expect_error(format('SELECT place.set_palette_names(%s, ARRAY[''one''])', :own));
SELECT expect_error(format('SELECT place.set_palette_names(%s, ARRAY[''a'', ''b'', ''c''])', :own));
SELECT expect_error(format('SELECT place.set_palette_names(%s, ARRAY[''soot'', ''  ''])', :own));
SELECT expect_error(format('SELECT place.set_palette_names(%s, ARRAY[''soot'', repeat(''x'', 41)])', :own));
SELECT expect_error(format('SELECT place.set_palette_names(%s, ARRAY[''soot'', E''ash\nsmoke''])', :own));
SELECT expect_error('SELECT place.set_palette_names(4242, ARRAY[''soot''])');
SELECT expect_error('SELECT place.set_palette_names(NULL, ARRAY[''soot''])');
SELECT palette_names FROM place.boards WHERE id = :own;
-- 40 characters (not bytes) are allowed.
SELECT place.set_palette_names(:own, ARRAY[repeat('é', 40), 'ash']);
SELECT char_length(palette_names[1]) AS chars, palette_names[2] FROM place.boards WHERE id = :own;
-- Nor may a table's own check be bypassed: a count that is not the palette's.
SELECT expect_error(format('UPDATE place.board_settings SET palette_names = ''{a}'' WHERE id = %s', :own));

-- set_palette: a colour that stays at its index keeps its name (a palette grown by a
-- colour keeps them all), a changed one loses it.
SELECT place.set_palette(:own, ARRAY['#101010', '#202020', '#303030']);
SELECT palette_names FROM place.boards WHERE id = :own;
SELECT place.set_palette(:own, ARRAY['#101010', '#999999', '#303030']);
SELECT palette_names FROM place.boards WHERE id = :own;
-- Shrunk: the names shrink with it.
SELECT place.set_palette(:own, ARRAY['#101010']);
SELECT palette_names FROM place.boards WHERE id = :own;

-- NULL names none.
SELECT place.set_palette_names(:own, NULL);
SELECT palette_names IS NULL AS unnamed FROM place.boards WHERE id = :own;
-- A palette without names stays without.
SELECT place.set_palette(:own, ARRAY['#101010', '#202020']);
SELECT palette_names IS NULL AS still_unnamed FROM place.boards WHERE id = :own;
