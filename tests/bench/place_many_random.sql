-- A batch of 100 consecutive users starting at a random one of 20,000.
\set first :ubase + 100 * random(0, 199)
SELECT count(*) FROM place.place_many(:board,
    ARRAY(SELECT (:first + g)::bigint FROM generate_series(0, 99) g),
    ARRAY(SELECT (random() * 999)::int FROM generate_series(1, 100)),
    ARRAY(SELECT (random() * 999)::int FROM generate_series(1, 100)),
    ARRAY(SELECT (random() * 15)::int FROM generate_series(1, 100)));
