-- Watching tables: the change log, its positions, and what is (not) announced.
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

INSERT INTO streams (title, viewers, secret) VALUES ('a', 10, 's1'), ('b', 20, 's2');
SELECT pos - :p0 AS pos, tbl, action, key, obj, old FROM place.changes_since(:p0);

-- Only unwatched columns changed: nothing announced, no position taken.
UPDATE streams SET secret = 'changed';
UPDATE streams SET viewers = viewers WHERE id = 1;
SELECT place.change_pos() - :p0 AS newest;

-- A real change: old and new row.
UPDATE streams SET viewers = 11, secret = 'x' WHERE id = 1;
SELECT pos - :p0 AS pos, action, key, obj, old FROM place.changes_since(:p0 + 1);

-- A changed key: the row leaves under its old key and comes under its new one.
UPDATE streams SET id = 7 WHERE id = 2;
SELECT pos - :p0 AS pos, action, key, obj, old FROM place.changes_since(:p0 + 2);

-- Composite keys, and a cascade announced in the same commit as its cause.
INSERT INTO stream_tags VALUES (1, 'music', 3), (1, 'live', 1), (7, 'chess', 2);
DELETE FROM streams WHERE id = 1;
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
SELECT pos - :p0 AS pos, action, key, obj FROM place.changes_since(:p0 + 5);
SELECT place.change_pos() - :p0 AS newest;
SELECT count(*) AS commits_without_gaps FROM place.change_commits c
WHERE c.pos > :p0 AND c.pos = (SELECT count(*) FROM place.change_commits d WHERE d.pos > :p0 AND d.pos <= c.pos) + :p0;

-- A row too large for one NOTIFY payload: the log has it whole, the payload refers to it.
INSERT INTO streams (id, title) VALUES (30, repeat('x', 10000));
SELECT length(obj ->> 'title') AS title_length FROM place.changes_since(:p0 + 6);
CREATE FUNCTION payload_of(p bigint) RETURNS text LANGUAGE sql AS $$
    SELECT place._change_payload(c.pos, c.committed_at, place._change_payload_body(c.xid, c.first_n, c.last_n))
    FROM place.change_commits c WHERE c.pos = p
$$;
SELECT octet_length(payload_of(:p0 + 7)) < 8000 AS fits,
       payload_of(:p0 + 7)::jsonb - 'at' - 'pos' - 'relids' AS reference,
       jsonb_array_length(payload_of(:p0 + 7)::jsonb -> 'relids') AS tables;
SELECT (payload_of(:p0 + 6)::jsonb #> '{changes,0}') - 'relid' AS inline,
       (payload_of(:p0 + 6)::jsonb ->> 'pos')::bigint - :p0 AS pos;

-- One statement over many rows: staged in chunks of 1,000, announced as one commit.
INSERT INTO streams (id, title) SELECT g, 'bulk' FROM generate_series(1000, 3499) g;
SELECT count(*) AS staged_rows, count(DISTINCT pos) AS commits FROM place.changes_since(:p0 + 7);
SELECT count(*) AS chunks FROM place.changes c JOIN place.change_commits cc ON cc.xid = c.xid WHERE cc.pos = :p0 + 8;
DELETE FROM streams WHERE id >= 1000;

-- kick: a row announced again as an update of itself.
SELECT place.kick('streams', '{"id": 20}');
SELECT pos - :p0 AS pos, action, key, obj, old FROM place.changes_since(:p0 + 9);
SELECT place.kick('stream_tags', '{"stream_id": 7, "tag": "chess"}');
SELECT action, key, obj FROM place.changes_since(:p0 + 10);
SELECT place.change_pos() AS before \gset
SELECT expect_error('SELECT place.kick(''streams'', ''{"id": 999}'')');
SELECT expect_error('SELECT place.kick(''streams'', ''{"title": "a"}'')');
SELECT expect_error('SELECT place.kick(''streams'', ''[20]'')');
SELECT expect_error('SELECT place.kick(''stream_tags'', ''{"stream_id": 7}'')');
SELECT expect_error('SELECT place.kick(''no_key'', ''{"a": 1}'')');
SELECT expect_error('SELECT place.kick(''streams'', NULL)');
SELECT place.change_pos() = :before AS nothing_announced;

-- TRUNCATE is announced as such.
CREATE TABLE scratch (k int PRIMARY KEY, v text);
SELECT place.watch('scratch');
INSERT INTO scratch VALUES (1, 'one');
TRUNCATE scratch;
SELECT action, key, obj FROM place.changes_since(:before + 1);

-- Retention: pruned positions are refused by changes_since; the newest stay readable.
SELECT expect_error('SELECT place.set_change_retention(''0'')');
SELECT expect_error('SELECT place.set_change_retention(''-1 day'')');
SELECT expect_error('SELECT place.set_change_retention(NULL)');
SELECT place.set_change_retention('2 hours');
SELECT retention FROM place.change_settings;
SELECT place._prune_changes(clock_timestamp()) > 0 AS pruned;
SELECT count(*) AS left_in_log FROM place.change_commits;
SELECT kept_after = place.change_pos() AS kept_after_is_newest FROM place.change_settings;
SELECT regexp_replace(expect_error(format('SELECT * FROM place.changes_since(%s)', :p0)), '(after|those after) \d+', '\1 N', 'g') AS too_old;
SELECT expect_error('SELECT * FROM place.changes_since(0, 0)');
INSERT INTO scratch VALUES (2, 'two');
SELECT action, key FROM place.changes_since((SELECT kept_after FROM place.change_settings));

-- unwatch: no more announcements.
SELECT place.unwatch('scratch');
SELECT place.unwatch('scratch');
SELECT place.change_pos() AS before \gset
INSERT INTO scratch VALUES (3, 'three');
SELECT place.change_pos() = :before AS nothing_announced;
SELECT count(*) AS triggers_left FROM pg_trigger WHERE tgrelid = 'scratch'::regclass;

-- A row's values are written the same way whatever the writer's session says, and a
-- change that only jsonb equality would miss (numeric scale) is announced.
CREATE TABLE measures (id int PRIMARY KEY, n numeric, d interval);
SELECT place.watch('measures');
SET IntervalStyle = sql_standard;
INSERT INTO measures VALUES (1, 1.0, interval '-1 day +2 hours');
RESET IntervalStyle;
UPDATE measures SET n = 1.000;
SELECT action, obj, old FROM place.changes_since(place.change_pos() - 2);
SELECT place.unwatch('measures');
