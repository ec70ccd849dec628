-- One gateway group: g consecutive users of 20,000 from a random one (no two streams ever
-- share a user for long), random tiles.
\set base :ubase + random(0, 20000 - :g)
\set last :g - 1
SELECT count(*) FROM place.place_many(:board,
    ARRAY(SELECT (:base::bigint + i) FROM generate_series(0, :last::int) i),
    ARRAY(SELECT (random() * 999)::int FROM generate_series(1, :g::int)),
    ARRAY(SELECT (random() * 999)::int FROM generate_series(1, :g::int)),
    ARRAY(SELECT (random() * 15)::int FROM generate_series(1, :g::int)));
