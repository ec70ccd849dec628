-- Watching tables: the change log, its positions, and what is (not) announced. A
-- position is made by place.tick() (the gateway calls it every few milliseconds): here
-- after each commit, so that each commit is one position.
CREATE TABLE streams (id serial PRIMARY KEY, title text NOT NULL, viewers int NOT NULL DEFAULT 0,
                      live boolean NOT NULL DEFAULT true, secret text);
CREATE TABLE stream_tags (stream_id int REFERENCES streams ON DELETE CASCADE, tag text,
                          weight int NOT NULL DEFAULT 1, PRIMARY KEY (stream_id, tag));
CREATE TABLE no_key (a int);
CREATE VIEW a_view AS SELECT 1 AS one;

-- Refused, and nothing changes.
SELECT expect_error('SELECT place.watch(''no_key'')');
SELECT expect_error('SELECT place.watch(''a_view'')');
SELECT expect_error('SELECT place.watch(''place.boards'')');
SELECT expect_error('SELECT place.watch(''place.board_settings'')');
SELECT expect_error('SELECT place.watch(NULL)');
SELECT expect_error('SELECT place.watch(''streams'', ARRAY[''title'', ''nope''])');
SELECT expect_error('SELECT place.watch(''streams'', ARRAY[]::text[])');
SELECT expect_error('SELECT place.watch(''streams'', ARRAY[''title'', NULL])');
SELECT expect_error('SELECT place.watch(''missing_table'')');
CREATE TABLE parted (id int PRIMARY KEY) PARTITION BY RANGE (id);
CREATE TABLE parted_1 PARTITION OF parted FOR VALUES FROM (0) TO (100);
SELECT expect_error('SELECT place.watch(''parted'')');
SELECT expect_error('SELECT place.watch(''parted_1'')');
-- The caller must own the table (reading it is not enough): security.sql has more.
CREATE TABLE hidden_from_bob (id int PRIMARY KEY);
CREATE ROLE watch_test_bob;
GRANT SELECT ON hidden_from_bob TO watch_test_bob;
GRANT EXECUTE ON FUNCTION place.watch(regclass, text[], boolean) TO watch_test_bob;
SET SESSION AUTHORIZATION watch_test_bob;
SELECT expect_error('SELECT place.watch(''hidden_from_bob'')');
RESET SESSION AUTHORIZATION;
DROP TABLE hidden_from_bob;
REVOKE ALL ON FUNCTION place.watch(regclass, text[], boolean) FROM watch_test_bob;
DROP ROLE watch_test_bob;
SELECT count(*) AS watches FROM place.watches;

-- The secret column is not watched.
SELECT place.watch('streams', ARRAY['title', 'viewers', 'live']);
SELECT place.watch('stream_tags');
SELECT tbl, key_columns, columns, views FROM place.watched();
-- No commit has taken a position yet.
SELECT place.change_pos() AS p0 \gset
SELECT :p0 AS no_position_yet;
SELECT place.tick() - :p0 AS nothing_to_tick;

INSERT INTO streams (title, viewers, secret) VALUES ('a', 10, 's1'), ('b', 20, 's2');
SELECT place.tick() - :p0 AS ticked;
SELECT pos - :p0 AS pos, tbl, action, key, obj, old FROM place.changes_since(:p0);

-- Only unwatched columns changed: nothing announced, no position taken.
UPDATE streams SET secret = 'changed';
UPDATE streams SET viewers = viewers WHERE id = 1;
SELECT place.tick() - :p0 AS ticked;
SELECT place.change_pos() - :p0 AS newest;

-- A real change: old and new row.
UPDATE streams SET viewers = 11, secret = 'x' WHERE id = 1;
SELECT place.tick() - :p0 AS ticked;
SELECT pos - :p0 AS pos, action, key, obj, old FROM place.changes_since(:p0 + 1);

-- A changed key: the row leaves under its old key and comes under its new one.
UPDATE streams SET id = 7 WHERE id = 2;
SELECT place.tick() - :p0 AS ticked;
SELECT pos - :p0 AS pos, action, key, obj, old FROM place.changes_since(:p0 + 2);

-- Composite keys, and a cascade announced in the same commit as its cause.
INSERT INTO stream_tags VALUES (1, 'music', 3), (1, 'live', 1), (7, 'chess', 2);
SELECT place.tick() - :p0 AS ticked;
DELETE FROM streams WHERE id = 1;
SELECT place.tick() - :p0 AS ticked;
SELECT pos - :p0 AS pos, tbl, action, key, obj, old FROM place.changes_since(:p0 + 3);

-- A transaction is one position, its statements in order; a rolled-back savepoint's
-- statement is gone, and a rolled-back transaction takes no position.
BEGIN;
INSERT INTO streams (id, title) VALUES (20, 'first');
SAVEPOINT s;
INSERT INTO streams (id, title) VALUES (21, 'undone');
ROLLBACK TO SAVEPOINT s;
UPDATE streams SET title = 'second' WHERE id = 20;
COMMIT;
BEGIN;
INSERT INTO streams (id, title) VALUES (22, 'never');
ROLLBACK;
SELECT place.tick() - :p0 AS ticked;
SELECT pos - :p0 AS pos, action, key, obj FROM place.changes_since(:p0 + 5);
SELECT place.change_pos() - :p0 AS newest;
SELECT count(*) = max(pos) - :p0 AS positions_without_gaps FROM place.change_ticks WHERE pos > :p0;

-- What the gateway reads of a position (place.change_feed): the changes themselves, or,
-- for a position too large to be worth it, the tables it changed (the gateway then reads
-- every view of them). The log has the large row whole.
INSERT INTO streams (id, title) VALUES (30, repeat('x', 70000));
SELECT place.tick() - :p0 AS ticked;
SELECT length(obj ->> 'title') AS title_length FROM place.changes_since(:p0 + 6);
SELECT payload::jsonb - 'at' - 'pos' - 'relids' AS reference,
       jsonb_array_length(payload::jsonb -> 'relids') AS tables
FROM place.change_feed(:p0 + 6, 1);
SELECT (payload::jsonb #> '{staged,0}') - 'relid' AS inline, (payload::jsonb ->> 'pos')::bigint - :p0 AS pos
FROM place.change_feed(:p0 + 5, 1);
SELECT count(*) AS two_positions FROM place.change_feed(:p0 + 5);
SELECT expect_error('SELECT * FROM place.change_feed(0, 0)');
SELECT expect_error('SELECT * FROM place.change_feed(NULL)');

-- One statement over many rows: staged in chunks of 1,000, announced as one position.
INSERT INTO streams (id, title) SELECT g, 'bulk' FROM generate_series(1000, 3499) g;
SELECT place.tick() - :p0 AS ticked;
SELECT count(*) AS staged_rows, count(DISTINCT pos) AS positions FROM place.changes_since(:p0 + 7);
SELECT count(*) AS chunks FROM place._ticked_changes(:p0 + 7, 1);
DELETE FROM streams WHERE id >= 1000;
SELECT place.tick() - :p0 AS ticked;

-- kick: a row announced again as an update of itself.
SELECT place.kick('streams', '{"id": 20}');
SELECT place.tick() - :p0 AS ticked;
SELECT pos - :p0 AS pos, action, key, obj, old FROM place.changes_since(:p0 + 9);
SELECT place.kick('stream_tags', '{"stream_id": 7, "tag": "chess"}');
SELECT place.tick() - :p0 AS ticked;
SELECT action, key, obj FROM place.changes_since(:p0 + 10);
SELECT place.change_pos() AS before \gset
SELECT expect_error('SELECT place.kick(''streams'', ''{"id": 999}'')');
SELECT expect_error('SELECT place.kick(''streams'', ''{"title": "a"}'')');
SELECT expect_error('SELECT place.kick(''streams'', ''[20]'')');
SELECT expect_error('SELECT place.kick(''stream_tags'', ''{"stream_id": 7}'')');
SELECT expect_error('SELECT place.kick(''no_key'', ''{"a": 1}'')');
SELECT expect_error('SELECT place.kick(''streams'', NULL)');
SELECT place.tick() = :before AS nothing_announced;

-- TRUNCATE is announced as such.
CREATE TABLE scratch (k int PRIMARY KEY, v text);
SELECT place.watch('scratch');
INSERT INTO scratch VALUES (1, 'one');
SELECT place.tick() - :before AS ticked;
TRUNCATE scratch;
SELECT place.tick() - :before AS ticked;
SELECT action, key, obj FROM place.changes_since(:before);

-- Two transactions that change one row, in one position (no tick between them): in the
-- order they committed.
INSERT INTO scratch VALUES (1, 'again');
UPDATE scratch SET v = 'first' WHERE k = 1;
UPDATE scratch SET v = 'second' WHERE k = 1;
DELETE FROM scratch WHERE k = 1;
SELECT place.tick() - :before AS ticked;
SELECT pos - :before AS pos, action, obj, old FROM place.changes_since(:before + 2);

-- A writer cannot silence or alter what is logged of its writes: the settings that said
-- which statements a commit had announced (0.7.0) mean nothing now.
SET pgplace.change_n = '1000000';
SET pgplace.change_flushed = '1000000';
INSERT INTO scratch VALUES (5, 'set');
RESET pgplace.change_n;
RESET pgplace.change_flushed;
SELECT place.tick() - :before AS ticked;
SELECT action, key, obj FROM place.changes_since(:before + 3);

-- A deferred constraint that fails at commit fails like on any table (nothing of the feed
-- runs at commit, so nothing can deadlock there); nothing is logged.
CREATE TABLE deferred_keys (k int PRIMARY KEY, u int UNIQUE DEFERRABLE INITIALLY DEFERRED);
SELECT place.watch('deferred_keys');
INSERT INTO deferred_keys VALUES (1, 1);
BEGIN;
INSERT INTO deferred_keys VALUES (2, 1);
\set VERBOSITY terse
COMMIT;
\set VERBOSITY default
SELECT place.tick() - :before AS ticked;
SELECT action, key FROM place.changes_since(:before + 4);
SELECT place.unwatch('deferred_keys');

-- A prepared transaction joins the position of the tick after its COMMIT PREPARED.
BEGIN;
INSERT INTO scratch VALUES (6, 'prepared');
PREPARE TRANSACTION 'pgplace_watched';
SELECT place.tick() - :before AS not_yet;
COMMIT PREPARED 'pgplace_watched';
SELECT place.tick() - :before AS ticked;
SELECT action, key FROM place.changes_since(:before + 5);

-- Ticks follow each other in time: not from a snapshot of the past.
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT expect_error('SELECT place.tick()');
ROLLBACK;

-- A watched column cannot be dropped or renamed from under the watch (it would be logged
-- without it); an unwatched one can.
SELECT expect_error('ALTER TABLE streams DROP COLUMN title');
SELECT expect_error('ALTER TABLE streams RENAME COLUMN viewers TO audience');
SELECT expect_error('ALTER TABLE stream_tags RENAME COLUMN tag TO label');
ALTER TABLE streams ADD COLUMN extra int;
ALTER TABLE streams DROP COLUMN extra;
SELECT columns FROM place.watched() WHERE tbl = 'streams'::regclass;

-- Retention: pruned positions are refused by changes_since; the newest stay readable.
SELECT expect_error('SELECT place.set_change_retention(''0'')');
SELECT expect_error('SELECT place.set_change_retention(''-1 day'')');
SELECT expect_error('SELECT place.set_change_retention(NULL)');
SELECT place.set_change_retention('2 hours');
SELECT retention FROM place.change_settings;
SELECT place._prune_changes(clock_timestamp()) > 0 AS pruned;
SELECT count(*) AS left_in_log FROM place.change_ticks;
SELECT place.change_pos() - kept_after AS kept_positions FROM place.change_settings;
SELECT regexp_replace(expect_error(format('SELECT * FROM place.changes_since(%s)', :p0)), '(after|those after) \d+', '\1 N', 'g') AS too_old;
SELECT expect_error('SELECT * FROM place.changes_since(0, 0)');
INSERT INTO scratch VALUES (2, 'two');
SELECT place.tick() > 0 AS ticked;
SELECT action, key FROM place.changes_since((SELECT kept_after FROM place.change_settings));

-- unwatch: no more announcements.
SELECT place.unwatch('scratch');
SELECT place.unwatch('scratch');
SELECT place.change_pos() AS before \gset
INSERT INTO scratch VALUES (3, 'three');
SELECT place.tick() = :before AS nothing_announced;
SELECT count(*) AS triggers_left FROM pg_trigger WHERE tgrelid = 'scratch'::regclass;

-- A row's values are written the same way whatever the writer's session says, and a
-- change that only jsonb equality would miss (numeric scale) is announced.
CREATE TABLE measures (id int PRIMARY KEY, n numeric, d interval);
SELECT place.watch('measures');
SET IntervalStyle = sql_standard;
INSERT INTO measures VALUES (1, 1.0, interval '-1 day +2 hours');
RESET IntervalStyle;
SELECT place.tick() > 0 AS ticked;
UPDATE measures SET n = 1.000;
SELECT place.tick() > 0 AS ticked;
SELECT action, obj, old FROM place.changes_since(place.change_pos() - 2);
SELECT place.unwatch('measures');
