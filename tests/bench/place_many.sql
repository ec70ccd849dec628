-- Client k owns users ubase + 100k .. ubase + 100k + 99: one placement per user per batch.
\set first :ubase + 100 * :client_id
SELECT count(*) FROM place.place_many(:board,
    ARRAY(SELECT (:first + g)::bigint FROM generate_series(0, 99) g),
    ARRAY(SELECT (random() * 999)::int FROM generate_series(1, 100)),
    ARRAY(SELECT (random() * 999)::int FROM generate_series(1, 100)),
    ARRAY(SELECT (random() * 15)::int FROM generate_series(1, 100)));
