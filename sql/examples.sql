-- Questions people ask about a board, answered in SQL. Run with psql against a database
-- with pgplace (`./pgplace.sh psql -f sql/examples.sql` on the demo); :board names the
-- board (default: 'demo'), e.g. `psql -v board=mine -f sql/examples.sql`.
\if :{?board}
\else
\set board demo
\endif
SELECT id AS board FROM place.boards WHERE name = :'board' \gset

-- Who placed tile (10, 20), and when? Newest first; for the next page pass the last seq
-- shown as before_seq: SELECT * FROM place.tile_history(:board, 10, 20, <seq>, 10);
SELECT seq, color, user_name, placed_at FROM place.tile_history(:board, 10, 20, NULL, 10);

-- The most active users in the last hour.
SELECT u.name, count(*) AS placements, max(p.placed_at) AS last
FROM place.placements p JOIN place.users u ON u.id = p.user_id
WHERE p.board_id = :board AND p.placed_at > now() - interval '1 hour'
GROUP BY u.name ORDER BY placements DESC, u.name LIMIT 10;

-- The most contested tiles: placed on most often, by how many different people.
SELECT x, y, count(*) AS placements, count(DISTINCT user_id) AS people
FROM place.placements WHERE board_id = :board
GROUP BY x, y ORDER BY placements DESC, people DESC, x, y LIMIT 10;

-- The colours on the board now.
SELECT t.color, b.palette_names[t.color + 1] AS colour, b.palette[t.color + 1] AS rgb,
       count(*) AS tiles
FROM place.tiles(:board) t, place.boards b WHERE b.id = :board
GROUP BY t.color, colour, rgb ORDER BY tiles DESC;

-- How the board looked ten minutes ago (to the minute): its seq then, how many placements
-- came since, and whether it looks the same now.
SELECT past.seq AS seq_then, current.seq - past.seq AS placements_since,
       past.bits = current.bits AS unchanged
FROM place.boards b,
     place.board_at(b.id, date_trunc('minute', now() - interval '10 minutes')) past,
     place.board_bits(b.id) current
WHERE b.id = :board;

-- What a user did: their last placements on the board.
SELECT seq, x, y, color, placed_at
FROM place.user_history(:board, coalesce((SELECT user_id FROM place.placements WHERE board_id = :board
                                          ORDER BY seq DESC LIMIT 1),
                                         (SELECT id FROM place.users ORDER BY id LIMIT 1)), NULL, 5);

-- The board as a picture, 2 pixels per tile (a PNG is bytea; from a shell, on the demo:
--   ./pgplace.sh psql -At -c "SELECT encode(place.render_png((SELECT id FROM place.boards WHERE name = 'demo'), scale => 2), 'base64')" | base64 -d > board.png
-- and as it was an hour ago: place.render_png(:board, now() - interval '1 hour')).
SELECT length(place.render_png(:board, scale => 2)) AS png_bytes;

-- Frozen tiles (on a board with place.set_freeze_after): how many are frozen now, and which
-- will freeze within the next hour unless someone changes them.
SELECT count(*) AS frozen_now FROM place.frozen_tiles(:board);
SELECT x, y, color, frozen_at
FROM place.frozen_tiles(:board, now() + interval '1 hour')
WHERE frozen_at > now() ORDER BY frozen_at LIMIT 10;

-- Watching a table of your own (as a pgplace_admin): a live "top streams" list that the
-- gateway serves as view "top_live" (session.subscribe(session, "top_live", {"limit": 10})).
-- Run in a transaction that is rolled back, so that this file leaves nothing behind.
BEGIN;
CREATE TABLE example_streams (id serial PRIMARY KEY, title text NOT NULL, viewers int NOT NULL,
                              live boolean NOT NULL DEFAULT true, stream_key text);
SELECT place.watch('example_streams', ARRAY['title', 'viewers', 'live']);  -- never the key
SELECT place.create_view('example_top_live', 'example_streams', 'viewers', 'live AND viewers > 0', max_limit => 50);
INSERT INTO example_streams (title, viewers, stream_key) VALUES ('chess', 40, 's1'), ('music', 70, 's2');
-- The view's rows, as the gateway reads them, and what was announced (the change log).
SELECT rows FROM place.view_rows('example_top_live', 10);
SELECT tbl, key_columns, columns, views FROM place.watched();
ROLLBACK;
-- After a commit, each change is in the log with its position, in commit order:
SELECT pos, committed_at, tbl, action, key, obj, old FROM place.changes_since(0, 10) LIMIT 10;
