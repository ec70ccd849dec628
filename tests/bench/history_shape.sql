-- The history's shape alone: 100 rows into a copy of place.placements with its three
-- indexes (the seq key, the tile's and the user's history) and as many rows as the board's
-- history has, random tiles and a batch of 100 of the 20,000 users, one pg_notify: what a
-- design that keeps every placement findable by tile and by user pays before any rule.
\set first :ubase + 100 * random(0, 199)
BEGIN;
INSERT INTO bench_history (board_id, seq, x, y, color, user_id, placed_at)
SELECT 1, nextval('bench_history_seq'), (random() * 999)::int, (random() * 999)::int,
       (random() * 15)::int, :first + g, now()
FROM generate_series(0, 99) g;
SELECT pg_notify('bench', 'x');
END;
