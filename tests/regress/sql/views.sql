-- List views: definitions checked when created, rows read in order.
CREATE TABLE shows (id int PRIMARY KEY, title text NOT NULL, viewers int NOT NULL,
                    live boolean NOT NULL, started timestamptz NOT NULL, hidden text, meta json);
INSERT INTO shows
SELECT g, 'show ' || g, (g * 37) % 100, g % 3 <> 0, '2026-01-01'::timestamptz + g * interval '1 minute', 'h' || g, '{}'
FROM generate_series(1, 30) g;
CREATE TABLE unwatched_shows (id int PRIMARY KEY);
SELECT place.watch('shows', ARRAY['title', 'viewers', 'live', 'started', 'meta']);

SELECT place.create_view('top_live', 'shows', 'viewers', 'live AND viewers > 10', max_limit => 20);
SELECT place.create_view(name => 'newest', tbl => 'shows', order_by => 'started, title');
SELECT place.create_view('oldest', 'shows', 'started', NULL, false, 5);
SELECT name, tbl, order_by, filter, descending, max_limit FROM place.views();

SELECT pos = place.change_pos() AS current_pos, max_limit,
       jsonb_array_length(rows) AS n, rows -> 0 AS first, rows -> 4 AS fifth
FROM place.view_rows('top_live', 5);
SELECT jsonb_path_query_array(rows, '$[*].id') AS ids FROM place.view_rows('oldest', 5);
SELECT jsonb_path_query_array(rows, '$[*].id') AS ids FROM place.view_rows('newest', 3);
-- Ties are broken by the key, the same way on every read.
UPDATE shows SET viewers = 99 WHERE id IN (4, 5, 7);
SELECT jsonb_path_query_array(rows, '$[*].viewers') AS viewers, jsonb_path_query_array(rows, '$[*].id') AS ids
FROM place.view_rows('top_live', 6);
SELECT rows -> 0 ? 'hidden' AS shows_unwatched_column FROM place.view_rows('top_live', 1);

-- Bad definitions are refused when created, and nothing is created.
SELECT count(*) AS views_before FROM place.views;
SELECT expect_error('SELECT place.create_view(''x'', ''shows'', ''nope'')');
SELECT expect_error('SELECT place.create_view(''x'', ''shows'', ''hidden'')');
SELECT expect_error('SELECT place.create_view(''x'', ''shows'', ''viewers'', ''hidden = ''''h1'''''')');
SELECT expect_error('SELECT place.create_view(''x'', ''shows'', ''viewers'', ''viewers + 1'')');
SELECT expect_error('SELECT place.create_view(''x'', ''shows'', ''viewers'', ''random() > 0.5'')');
SELECT expect_error('SELECT place.create_view(''x'', ''shows'', ''viewers'', ''started > now()'')');
SELECT expect_error('SELECT place.create_view(''x'', ''shows'', ''viewers'', ''id IN (SELECT 1)'')');
SELECT expect_error('SELECT place.create_view(''x'', ''shows'', ''viewers'', ''no_such_function(viewers)'')');
SELECT expect_error('SELECT place.create_view(''x'', ''shows'', ''viewers'', ''true), (1'')');
SELECT expect_error('SELECT place.create_view(''x'', ''shows'', ''viewers'', ''true; DROP TABLE shows'')');
SELECT expect_error('SELECT place.create_view(''x'', ''shows'', ''viewers'', ''true) FROM pg_authid WHERE (true'')');
SELECT expect_error('SELECT place.create_view(''x'', ''shows'', ''viewers'', ''live /*'')');
SELECT expect_error('SELECT place.create_view(''x'', ''shows'', ''viewers'', ''live AND'')');
SELECT expect_error('SELECT place.create_view(''x'', ''shows'', ''meta'')');
SELECT expect_error('SELECT place.create_view(''x'', ''shows'', ''viewers,'')');
SELECT expect_error('SELECT place.create_view(''x'', ''unwatched_shows'', ''id'')');
SELECT expect_error('SELECT place.create_view(''board'', ''shows'', ''viewers'')');
SELECT expect_error('SELECT place.create_view('''', ''shows'', ''viewers'')');
SELECT expect_error('SELECT place.create_view(''x'', ''shows'', ''viewers'', max_limit => 0)');
SELECT expect_error('SELECT place.create_view(''x'', ''shows'', ''viewers'', max_limit => 1001)');
SELECT expect_error('SELECT place.create_view(''top_live'', ''shows'', ''viewers'')');
SELECT expect_error('SELECT place.create_view(''x'', ''shows'', NULL)');
-- A function that only says it is immutable: refused (views run as the extension's owner).
CREATE FUNCTION not_builtin(v int) RETURNS boolean IMMUTABLE LANGUAGE sql AS 'SELECT v > 1';
SELECT expect_error('SELECT place.create_view(''x2'', ''shows'', ''viewers'', ''public.not_builtin(viewers)'')');
SELECT count(*) AS views_after FROM place.views;
SELECT count(*) AS shows_still_there FROM shows;
-- A comment inside a filter is harmless, and so are balanced parentheses.
SELECT place.create_view('parenthesized', 'shows', 'viewers', 'live) OR (viewers > 90');
SELECT jsonb_array_length(rows) AS n FROM place.view_rows('parenthesized', 100);
SELECT place.create_view('commented', 'shows', 'viewers', E'live -- only live shows');
SELECT jsonb_array_length(rows) AS n FROM place.view_rows('commented', 100);

-- Which views a change may touch: those whose filter a version of a changed row matches.
SELECT place.views_touched(ARRAY['top_live', 'oldest', 'nope'], '[{"id": 1, "live": false, "viewers": 50}]');
SELECT place.views_touched(ARRAY['top_live', 'oldest'], '[{"id": 1, "live": false, "viewers": 50}, {"id": 1, "live": true, "viewers": 50}]');
SELECT place.views_touched(ARRAY['top_live'], '[]');
SELECT place.views_touched(ARRAY['nope'], '[{"id": 1}]');
SELECT expect_error('SELECT place.views_touched(ARRAY[''top_live''], ''{"id": 1}'')');
SELECT expect_error('SELECT place.views_touched(NULL, ''[]'')');
-- A filter on a float column is always touched: jsonb keeps 15 digits of a float, so the
-- announced row cannot tell a filter like this one the truth.
CREATE TABLE readings (id int PRIMARY KEY, f float8 NOT NULL);
SELECT place.watch('readings');
SELECT place.create_view('high_readings', 'readings', 'f', 'f > 0.3');
SELECT touch_always FROM place.views WHERE name = 'high_readings';
SELECT touch_always FROM place.views WHERE name = 'top_live';
SELECT place.views_touched(ARRAY['high_readings'], '[{"id": 1, "f": 0.3}]');
SELECT place.drop_view('high_readings'), place.unwatch('readings');

-- Reading: a limit within 1..max_limit, a known view.
SELECT expect_error('SELECT * FROM place.view_rows(''oldest'', 6)');
SELECT expect_error('SELECT * FROM place.view_rows(''oldest'', 0)');
SELECT expect_error('SELECT * FROM place.view_rows(''nope'', 1)');
SELECT expect_error('SELECT * FROM place.view_rows(NULL, 1)');

-- Watching other columns re-checks the views; dropping a column a view needs is refused.
SELECT expect_error('SELECT place.watch(''shows'', ARRAY[''title'', ''live''])');
SELECT columns FROM place.watched() WHERE tbl = 'shows'::regclass;
SELECT place.watch('shows', ARRAY['title', 'viewers', 'live', 'started', 'hidden']);
SELECT rows -> 0 ? 'hidden' AS shows_newly_watched_column FROM place.view_rows('top_live', 1);

-- unwatch needs the views gone first.
SELECT expect_error('SELECT place.unwatch(''shows'')');
SELECT place.drop_view('commented'), place.drop_view('commented');
SELECT place.drop_view(v.name) FROM place.views() v WHERE v.tbl = 'shows'::regclass;
SELECT place.unwatch('shows');
SELECT count(*) AS views_left FROM place.views;
