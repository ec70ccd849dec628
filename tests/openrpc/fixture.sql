-- The OpenRPC test's database: the board and user the documented examples name, and the
-- list view the view method subscribes to. Prints the user's token.
\set ON_ERROR_STOP on
\set QUIET on
SELECT place.create_board('demo', 8, 8, 4, '0 seconds') AS demo \gset
CREATE TABLE streams (id int PRIMARY KEY, title text NOT NULL, viewers int NOT NULL, live boolean NOT NULL);
INSERT INTO streams VALUES (1, 'a', 10, true), (2, 'b', 20, true);
SELECT place.watch('streams', ARRAY['title', 'viewers', 'live']) \gset
SELECT place.create_view('public_live', 'streams', 'viewers', 'live', max_limit => 10) \gset
\pset tuples_only on
\pset format unaligned
SELECT token FROM place.create_user('demo');
