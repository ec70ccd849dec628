-- Time travel and history at scale (by hand: ./pgplace.sh bench-history): a 1000x1000x4
-- board with 1,000,000 placements (keyframes every 10,000, as by default), then the
-- latency of board_at_seq / board_at at random points, the history queries, and
-- render_png. Prints p50 / p99 per measurement.
\set ON_ERROR_STOP on
\set QUIET on
\pset footer off
SET client_min_messages = warning;
SELECT place.create_board('bench-history', 1000, 1000, 4, '0') AS b \gset
SELECT array_agg(user_id) AS users FROM (SELECT (place.create_user('bh-' || g)).user_id FROM generate_series(1, 1000) g) s \gset
\echo 'filling: 1,000,000 placements in batches of 10,000 (a call stores at most one keyframe, at its end)'
SELECT clock_timestamp() AS t0 \gset
SELECT sum(n) FROM (
    SELECT (SELECT count(*) FROM place.place_many(:b,
        (SELECT array_agg((:'users'::bigint[])[1 + (i % 1000)]) FROM generate_series(1, 10000) i),
        (SELECT array_agg((i * 7919 + r * 104729) % 1000) FROM generate_series(1, 10000) i),
        (SELECT array_agg((i * 31 + r * 17) % 1000) FROM generate_series(1, 10000) i),
        (SELECT array_agg((i + r) % 16) FROM generate_series(1, 10000) i))) AS n
    FROM generate_series(1, 100) r) s \gset
SELECT round(extract(epoch FROM clock_timestamp() - :'t0')::numeric, 1) AS fill_seconds,
       (SELECT seq FROM place.boards WHERE id = :b) AS seq,
       (SELECT count(*) FROM place.keyframes WHERE board_id = :b) AS keyframes,
       pg_size_pretty((SELECT sum(pg_column_size(bits)) FROM place.keyframes WHERE board_id = :b)) AS keyframe_bytes;

-- ms of each of `n` runs of a statement built from a random number in [0, 1).
CREATE FUNCTION pg_temp.timed(sql text, n int) RETURNS TABLE (p50 numeric, p99 numeric, runs int)
LANGUAGE plpgsql AS $$
DECLARE
    ms float8[] := '{}';
    started timestamptz;
BEGIN
    FOR i IN 1..n LOOP
        started := clock_timestamp();
        EXECUTE replace(sql, '$r', random()::text);
        ms := ms || extract(epoch FROM clock_timestamp() - started) * 1000;
    END LOOP;
    RETURN QUERY SELECT round(percentile_cont(0.5) WITHIN GROUP (ORDER BY m)::numeric, 2),
                        round(percentile_cont(0.99) WITHIN GROUP (ORDER BY m)::numeric, 2), n
                 FROM unnest(ms) m;
END
$$;

SELECT min(placed_at) AS first_at, max(placed_at) AS last_at FROM place.placements WHERE board_id = :b \gset
\echo
SELECT 'board_at_seq, random seq' AS measurement, * FROM pg_temp.timed(
    format('SELECT length(bits) FROM place.board_at_seq(%s, (1000000 * $r)::bigint)', :b), 200)
UNION ALL
SELECT 'board_at, random time', * FROM pg_temp.timed(
    format('SELECT seq FROM place.board_at(%s, %L::timestamptz + (%L::timestamptz - %L::timestamptz) * $r)',
           :b, :'first_at', :'last_at', :'first_at'), 200)
UNION ALL
SELECT 'board_bits (now), baseline', * FROM pg_temp.timed(format('SELECT length(bits) FROM place.board_bits(%s)', :b), 200)
UNION ALL
SELECT 'tile_history, random tile, 50 rows', * FROM pg_temp.timed(
    format('SELECT count(*) FROM place.tile_history(%s, (999 * $r)::int, (999 * $r)::int)', :b), 500)
UNION ALL
SELECT 'user_history, random user, 50 rows', * FROM pg_temp.timed(
    format('SELECT count(*) FROM place.user_history(%s, (%L::bigint[])[1 + (999 * $r)::int])', :b, :'users'), 500)
UNION ALL
SELECT 'user_history, page 20 (seq cursor)', * FROM pg_temp.timed(
    format('SELECT count(*) FROM place.user_history(%s, (%L::bigint[])[1 + (999 * $r)::int], 1000000 - 20000)', :b, :'users'), 500)
UNION ALL
SELECT 'render_png 1000x1000, scale 1', * FROM pg_temp.timed(format('SELECT length(place.render_png(%s))', :b), 50)
UNION ALL
SELECT 'render_png 1000x1000 at a random time', * FROM pg_temp.timed(
    format('SELECT length(place.render_png(%s, %L::timestamptz + (%L::timestamptz - %L::timestamptz) * $r))',
           :b, :'first_at', :'last_at', :'first_at'), 50);

-- Frozen tiles (freeze_after) on the same history: listing them, and what checking each
-- item's tile costs a batch (the same batches with freeze_after off, then on).
\set batch 'SELECT count(*) FROM place.place_many(%s, (%L::bigint[])[1:1000], ARRAY(SELECT (random() * 999)::int FROM generate_series(1, 1000)), ARRAY(SELECT (random() * 999)::int FROM generate_series(1, 1000)), array_fill(1, ARRAY[1000]))'
SELECT 'place_many 1,000 items, freeze_after off', * FROM pg_temp.timed(format(:'batch', :b, :'users'), 50);
SELECT place.set_freeze_after(:b, '1 hour');
SELECT 'place_many 1,000 items, freeze_after on', * FROM pg_temp.timed(format(:'batch', :b, :'users'), 50)
UNION ALL
SELECT 'frozen_tiles(board, infinity): every non-zero tile', * FROM pg_temp.timed(
    format('SELECT count(*) FROM place.frozen_tiles(%s, ''infinity'')', :b), 10);
