-- Bans, restoring a region, reverting a user: repairs are ordinary placements.
SELECT place.create_board('mod', 6, 4, 4, '0') AS b \gset
SELECT user_id AS good FROM place.create_user('mod-good') \gset
SELECT user_id AS griefer FROM place.create_user('mod-griefer') \gset

-- Bans: a banned user's placements are refused, on every board, and change nothing.
SELECT place.ban_user(:griefer, NULL, 'spam');
SELECT board_fingerprint('mod') AS before \gset
SELECT expect_error(format('SELECT * FROM place.place(%s, 0, 0, 1, %s)', :b, :griefer));
SELECT expect_error(format('SELECT * FROM place.place_many(%s, ARRAY[%s, %s]::bigint[], ''{0,1}'', ''{0,0}'', ''{1,1}'')', :b, :good, :griefer));
SELECT board_fingerprint('mod') = :'before' AS unchanged;
SELECT place.unban_user(:griefer) AS lifted, place.unban_user(:griefer) AS lifted_again;
-- A ban that has run out no longer counts.
SELECT place.ban_user(:griefer, now() + interval '1 hour', 'cool off');
SELECT expect_error(format('SELECT * FROM place.place(%s, 0, 0, 1, %s)', :b, :griefer)) LIKE '42501: user % is banned until %(cool off)' AS banned_for_an_hour;
UPDATE place.bans SET until = now() - interval '1 second' WHERE user_id = :griefer;
SELECT placed FROM place.place(:b, 5, 3, 1, :griefer);
SELECT place.unban_user(:griefer);
SELECT expect_error(format('SELECT place.ban_user(%s, now() - interval ''1 minute'')', :griefer));
SELECT expect_error('SELECT place.ban_user(4242)');
SELECT expect_error('SELECT place.unban_user(NULL)');

-- A picture by the good user, then the griefer paints over part of it.
SELECT count(*) FROM place.place_many(:b, array_fill(:good::bigint, ARRAY[6]),
    '{0,1,2,0,1,2}', '{0,0,0,1,1,1}', '{3,4,5,6,7,8}');
SELECT clock_timestamp() AS painted \gset
SELECT count(*) FROM place.place_many(:b, array_fill(:griefer::bigint, ARRAY[4]),
    '{0,1,2,4}', '{0,0,1,2}', '{15,15,15,15}');
-- The good user repaints one of the griefed tiles: that one is no longer the griefer's.
SELECT placed FROM place.place(:b, 1, 0, 9, :good);
SELECT seq FROM place.boards WHERE id = :b \gset
SELECT board_fingerprint('mod') AS before \gset

-- revert_user: the griefer's tiles still on top go back to what they were before.
SELECT place.revert_user(:b, :griefer, :'painted') AS reverted;
SELECT x, y, color, u.name AS user_name FROM place.placements p JOIN place.users u ON u.id = p.user_id
WHERE board_id = :b AND seq > :seq ORDER BY seq;
SELECT place.get_tile(:b, 0, 0) AS "0,0", place.get_tile(:b, 1, 0) AS "1,0",
       place.get_tile(:b, 2, 1) AS "2,1", place.get_tile(:b, 4, 2) AS "4,2";
SELECT place.revert_user(:b, :griefer, :'painted') AS reverted_again;

-- restore_region: a region painted over goes back to how it looked at a time.
SELECT count(*) FROM place.place_many(:b, array_fill(:griefer::bigint, ARRAY[3]), '{0,1,2}', '{1,1,1}', '{1,1,1}');
SELECT seq FROM place.boards WHERE id = :b \gset
SELECT place.restore_region(:b, 0, 0, 3, 2, :'painted') AS restored;
SELECT x, y, color, u.name AS user_name FROM place.placements p JOIN place.users u ON u.id = p.user_id
WHERE board_id = :b AND seq > :seq ORDER BY seq;
SELECT (SELECT string_agg(place.get_tile(:b, x, y)::text, ',' ORDER BY y, x)
        FROM generate_series(0, 2) x, generate_series(0, 1) y) AS region;
SELECT place.restore_region(:b, 0, 0, 3, 2, :'painted') AS restored_again;
-- Repairs work on a paused board too.
SELECT place.set_board_state(:b, 'paused');
SELECT place.restore_region(:b, 0, 0, 6, 4, '2000-01-01') AS wiped;
SELECT place.set_board_state(:b, 'open');
SELECT bits = decode(repeat('00', 12), 'hex') AS empty_again FROM place.board_bits(:b);
-- Seqs stay gap-free and the history replays to the board.
SELECT count(*) = max(seq) AS gap_free FROM place.placements WHERE board_id = :b;

-- Errors.
SELECT board_fingerprint('mod') AS before \gset
SELECT expect_error(format('SELECT place.restore_region(%s, 0, 0, 7, 1, now())', :b));
SELECT expect_error(format('SELECT place.restore_region(%s, 0, 0, 0, 1, now())', :b));
SELECT expect_error(format('SELECT place.restore_region(%s, -1, 0, 1, 1, now())', :b));
SELECT expect_error(format('SELECT place.restore_region(%s, 0, 0, 1, 1, NULL)', :b));
SELECT expect_error('SELECT place.restore_region(4242, 0, 0, 1, 1, now())');
SELECT expect_error(format('SELECT place.revert_user(%s, 4242, now())', :b));
SELECT expect_error(format('SELECT place.revert_user(%s, %s, NULL)', :b, :griefer));
SELECT board_fingerprint('mod') = :'before' AS unchanged;

-- After a shrink, reverting a user touches only tiles of today's board that still show
-- their colour; repairs never write a colour the palette no longer has.
SELECT place.create_board('mod-shrink', 10, 10, 4, '0') AS s \gset
SELECT placed FROM place.place(:s, 4, 1, 7, :good);
SELECT clock_timestamp() AS before_griefing \gset
SELECT placed FROM place.place(:s, 9, 0, 5, :griefer);
SELECT placed FROM place.place(:s, 2, 2, 6, :griefer);
SELECT place.resize_board(:s, 5, 10);
SELECT place.revert_user(:s, :griefer, :'before_griefing') AS reverted;
SELECT place.get_tile(:s, 4, 1) AS good_tile_kept, place.get_tile(:s, 2, 2) AS reverted_tile;
SELECT max(x) < 5 AS nothing_written_outside FROM place.placements WHERE board_id = :s AND seq > 2;
SELECT place.create_board('mod-palette', 2, 2, 4, '0') AS p \gset
SELECT placed FROM place.place(:p, 0, 0, 9, :good);
SELECT clock_timestamp() AS painted_nine \gset
SELECT placed FROM place.place(:p, 0, 0, 0, :good);
SELECT place.set_palette(:p, ARRAY['#000000', '#ffffff']);
SELECT board_fingerprint('mod-palette') AS before \gset
SELECT expect_error(format('SELECT place.restore_region(%s, 0, 0, 2, 2, %L)', :p, :'painted_nine'));
SELECT board_fingerprint('mod-palette') = :'before' AS unchanged;
-- Reverting from a time whose history was compacted away is refused.
SELECT place.create_board('mod-compacted', 3, 3, 4, '0') AS c \gset
SELECT clock_timestamp() AS early \gset
SELECT placed FROM place.place(:c, 1, 1, 5, :griefer);
SELECT place.compact_history(:c, now() + interval '1 minute') AS dropped;
SELECT expect_error(format('SELECT place.revert_user(%s, %s, %L)', :c, :griefer, :'early'));
SELECT place.revert_user(:c, :griefer, now() + interval '1 minute') AS nothing_since;
