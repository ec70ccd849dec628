-- Tiles that freeze (One Million Checkboxes' ending): boards.freeze_after.
-- Times are made old by moving placed_at back, so nothing here waits or races the clock.
SELECT place.create_board('freezing', 4, 3, 2, '5 minutes') AS b \gset
SELECT user_id AS u FROM place.create_user('freezing-u') \gset
SELECT user_id AS v FROM place.create_user('freezing-v') \gset
SELECT user_id AS w FROM place.create_user('freezing-w') \gset
SELECT user_id AS z FROM place.create_user('freezing-z') \gset
SELECT freeze_after FROM place.boards WHERE id = :b;

-- Off by default: old tiles take placements.
SELECT placed FROM place.place(:b, 0, 0, 1, :u);
UPDATE place.placements SET placed_at = placed_at - interval '2 hours' WHERE board_id = :b;
UPDATE place.cooldowns SET last_placed_at = last_placed_at - interval '2 hours' WHERE board_id = :b;
SELECT count(*) AS frozen_when_off FROM place.frozen_tiles(:b);

-- On: (0, 0) has shown colour 1 for two hours.
SELECT place.set_freeze_after(:b, '1 hour');
SELECT freeze_after FROM place.boards WHERE id = :b;
SELECT f.x, f.y, f.color, f.seq, f.frozen_at = p.placed_at + interval '1 hour' AS an_hour_after_its_placement
FROM place.frozen_tiles(:b) f JOIN place.placements p ON p.board_id = :b AND p.seq = f.seq;
SELECT board_fingerprint('freezing') AS before \gset
SELECT placed, seq, next_allowed_at FROM place.place(:b, 0, 0, 2, :u);
SELECT board_fingerprint('freezing') = :'before' AS unchanged;
-- The refusal spent no cooldown: the same user places elsewhere at once.
SELECT placed, seq FROM place.place(:b, 1, 0, 3, :u);

-- A young tile and an old tile showing colour 0 are not frozen.
SELECT count(*) FROM place.place_many(:b, ARRAY[:v, :w]::bigint[], '{2,3}', '{0,0}', '{2,0}');
UPDATE place.placements SET placed_at = placed_at - interval '2 hours' WHERE board_id = :b AND x = 3;
UPDATE place.cooldowns SET last_placed_at = last_placed_at - interval '2 hours' WHERE board_id = :b;
SELECT x, y, color FROM place.frozen_tiles(:b) ORDER BY x, y;
-- A batch: frozen items fail alone, in array order with the cooldown rules.
SELECT ord, placed, seq, next_allowed_at = 'infinity' AS frozen, reason
FROM place.place_many(:b, ARRAY[:u, :v, :w, :w]::bigint[], '{0,2,3,0}', '{0,0,0,0}', '{3,3,3,3}');
SELECT x, y, color FROM place.tiles(:b) WHERE y = 0;

-- Every non-zero tile and when it freezes (if nothing changes it): an hour after its placement.
SELECT f.x, f.y, f.color, f.frozen_at = p.placed_at + interval '1 hour' AS an_hour_after_its_placement
FROM place.frozen_tiles(:b, 'infinity') f JOIN place.placements p ON p.board_id = :b AND p.seq = f.seq;
SELECT count(*) AS frozen_in_half_an_hour FROM place.frozen_tiles(:b, now() + interval '30 minutes');
SELECT count(*) AS frozen_in_two_hours FROM place.frozen_tiles(:b, now() + interval '2 hours');

-- A moderator's repair writes a frozen tile; the tile then takes placements again.
SELECT place.restore_region(:b, 0, 0, 1, 1, '2000-01-01');
SELECT x, y, color FROM place.tiles(:b) WHERE x = 0 AND y = 0;
SELECT count(*) AS frozen_at_origin FROM place.frozen_tiles(:b) WHERE x = 0 AND y = 0;
SELECT placed FROM place.place(:b, 0, 0, 2, :z);
SELECT count(*) AS frozen_at_origin_in_two_hours FROM place.frozen_tiles(:b, now() + interval '2 hours') WHERE x = 0 AND y = 0;

-- Compacted history: a tile with no placement left counts from the kept keyframe's time.
SELECT place.create_board('freezing-compacted', 2, 1, 2, '0') AS c \gset
SELECT count(*) FROM place.place_many(:c, ARRAY[:u, :u]::bigint[], '{0,1}', '{0,0}', '{1,2}');
UPDATE place.placements SET placed_at = placed_at - interval '3 hours' WHERE board_id = :c AND seq = 1;
UPDATE place.placements SET placed_at = placed_at - interval '2 hours' WHERE board_id = :c AND seq = 2;
SELECT place.compact_history(:c, now() - interval '150 minutes') AS dropped;
SELECT place.set_freeze_after(:c, '1 hour');
SELECT x, y, seq, frozen_at = (SELECT taken_at FROM place.keyframes WHERE board_id = :c AND seq = 1) + interval '1 hour' AS from_the_keyframe
FROM place.frozen_tiles(:c) WHERE x = 0;
SELECT placed, next_allowed_at FROM place.place(:c, 0, 0, 3, :u);
-- With freeze_after, compaction keeps at least freeze_after of history: a tile frozen now
-- must stay frozen when it counts from the kept keyframe.
SELECT x, y FROM place.frozen_tiles(:c) ORDER BY x;
SELECT expect_error(format('SELECT place.compact_history(%s, now() - interval ''30 minutes'')', :c));
SELECT place.compact_history(:c, now() - interval '61 minutes') AS dropped;
SELECT x, y, seq FROM place.frozen_tiles(:c) ORDER BY x;

-- A shrink and a regrow clear tiles: an old placement no longer freezes a cleared tile.
SELECT place.create_board('freezing-resized', 3, 1, 2, '0') AS r \gset
SELECT count(*) FROM place.place_many(:r, ARRAY[:u, :u]::bigint[], '{0,2}', '{0,0}', '{1,1}');
UPDATE place.placements SET placed_at = placed_at - interval '2 hours' WHERE board_id = :r;
SELECT place.resize_board(:r, 2, 1);
SELECT place.resize_board(:r, 3, 1);
SELECT place.set_freeze_after(:r, '1 hour');
SELECT x, y, color FROM place.frozen_tiles(:r);
SELECT placed FROM place.place(:r, 2, 0, 2, :u);

-- Bad settings are refused and change nothing; NULL turns freezing off again.
SELECT board_fingerprint('freezing') AS before \gset
SELECT expect_error(format('SELECT place.set_freeze_after(%s, ''0'')', :b));
SELECT expect_error(format('SELECT place.set_freeze_after(%s, ''-1 hour'')', :b));
SELECT expect_error(format('SELECT place.set_freeze_after(%s, ''1 month'')', :b));
SELECT expect_error(format('SELECT place.set_freeze_after(%s, ''3661 days'')', :b));
SELECT expect_error('SELECT place.set_freeze_after(NULL, ''1 hour'')');
SELECT expect_error('SELECT place.set_freeze_after(4242, ''1 hour'')');
SELECT expect_error(format('SELECT * FROM place.frozen_tiles(%s, NULL)', :b));
SELECT expect_error('SELECT * FROM place.frozen_tiles(4242)');
SELECT expect_error('SELECT * FROM place.settled_seq(4242)');
SELECT seq = (SELECT seq FROM place.boards WHERE id = :b) AS settled_is_current, at <= clock_timestamp() AS at_is_past
FROM place.settled_seq(:b);
SELECT board_fingerprint('freezing') = :'before' AS unchanged;
SELECT freeze_after FROM place.boards WHERE id = :b;
UPDATE place.placements SET placed_at = placed_at - interval '2 hours' WHERE board_id = :b;
SELECT x, y, color FROM place.frozen_tiles(:b);
SELECT place.set_freeze_after(:b, NULL);
SELECT count(*) AS frozen_when_off FROM place.frozen_tiles(:b, 'infinity');
SELECT place.set_cooldown(:b, '0');
SELECT placed FROM place.place(:b, 0, 0, 1, :w);
