-- Deleting boards and users (0.8.3: place.placements has no foreign keys; triggers keep
-- what they kept). Concurrent deletes and placements: tests/isolation/specs/delete_during_placement.spec.
SELECT place.create_board('del_a', 4, 4, 4, '0') AS del_a \gset
SELECT place.create_board('del_b', 4, 4, 4, '0') AS del_b \gset
SELECT user_id AS placer FROM place.create_user('del_placer') \gset
SELECT user_id AS idle FROM place.create_user('del_idle') \gset
SELECT count(*) AS placed FROM place.place_many(:del_a, ARRAY[:placer], '{1}', '{1}', '{2}') WHERE placed;
SELECT count(*) AS placed FROM place.place_many(:del_b, ARRAY[:placer], '{2}', '{2}', '{3}') WHERE placed;

-- A user with placements stays, with a clear error and its code (as the foreign key's).
SELECT regexp_replace(expect_error(format('DELETE FROM place.users WHERE id = %s', :placer)), ' \d+', ' N', 'g') AS refused;
SELECT count(*) AS still_there FROM place.users WHERE id = :placer;
SELECT count(*) AS history FROM place.placements WHERE user_id = :placer;
-- In a statement with others too, and by TRUNCATE.
SELECT regexp_replace(expect_error(format('DELETE FROM place.users WHERE id IN (%s, %s)', :idle, :placer)), ' \d+', ' N', 'g') AS refused;
SELECT count(*) AS both_there FROM place.users WHERE id IN (:idle, :placer);
SELECT regexp_replace(expect_error('TRUNCATE place.users CASCADE'), ' \d+', ' N', 'g') AS refused;

-- Under REPEATABLE READ or SERIALIZABLE a DELETE is refused (its snapshot would miss a
-- placement committed while it waited), even of a user who never placed.
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT expect_error(format('DELETE FROM place.users WHERE id = %s', :idle)) AS refused;
ROLLBACK;
BEGIN ISOLATION LEVEL SERIALIZABLE;
SELECT expect_error(format('DELETE FROM place.boards WHERE id = %s', :del_b)) AS refused;
ROLLBACK;
-- A DELETE that deletes nothing is not refused.
BEGIN ISOLATION LEVEL REPEATABLE READ;
DELETE FROM place.users WHERE id = -1;
DELETE FROM place.boards WHERE id = -1;
COMMIT;

-- A user who never placed goes.
DELETE FROM place.users WHERE id = :idle;
SELECT count(*) AS gone FROM place.users WHERE id = :idle;

-- A board's history goes with it, and no other board's.
DELETE FROM place.boards WHERE id = :del_a;
SELECT (SELECT count(*) FROM place.placements WHERE board_id = :del_a) AS history_of_deleted,
       (SELECT count(*) FROM place.placements WHERE board_id = :del_b) AS history_of_other;
-- TRUNCATE of the boards takes every history (rolled back: later files keep theirs). Its
-- notices name each table it cascades to, in an order no release keeps.
BEGIN;
SET LOCAL client_min_messages = warning;
TRUNCATE place.board_settings CASCADE;
SELECT count(*) AS history_after_truncate FROM place.placements;
ROLLBACK;
SELECT count(*) > 0 AS history_back FROM place.placements;

-- Once the user's boards are gone, so can the user be.
DELETE FROM place.boards WHERE id = :del_b;
DELETE FROM place.users WHERE id = :placer;
SELECT count(*) AS gone FROM place.users WHERE id = :placer;
