-- place_many_random.sql against the PL/pgSQL baseline.
\set first 1 + 100 * random(0, 199)
SELECT count(*) FROM naive.place_many(1,
    ARRAY(SELECT (:first + g)::bigint FROM generate_series(0, 99) g),
    ARRAY(SELECT (random() * 999)::int FROM generate_series(1, 100)),
    ARRAY(SELECT (random() * 999)::int FROM generate_series(1, 100)),
    ARRAY(SELECT (random() * 15)::int FROM generate_series(1, 100)));
