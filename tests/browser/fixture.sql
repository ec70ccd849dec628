-- The browser tests' boards and users, in a fresh database with the extension.
-- Prints one JSON line: {"boards": {name: id}, "users": {name: {"id", "token"}}}.
\set ON_ERROR_STOP on
\set QUIET on

-- Paints every tile whose (x + y) % 3 <> 0 with a colour that depends on (x, y), as one
-- place_many by one user (the boards start with no cooldown, so one user may repeat).
CREATE FUNCTION pg_temp.paint(b bigint, u bigint) RETURNS bigint LANGUAGE sql AS $$
  SELECT count(*) FROM (
    SELECT array_agg(u ORDER BY x, y) AS us, array_agg(x ORDER BY x, y) AS xs,
           array_agg(y ORDER BY x, y) AS ys, array_agg(c ORDER BY x, y) AS cs
    FROM (
      SELECT x, y, (x * 7 + y * 3 + (x * y) % 5) % cardinality(palette) AS c
      FROM place.boards, generate_series(0, width - 1) x, generate_series(0, height - 1) y
      WHERE id = b AND (x + y) % 3 <> 0
    ) tiles
  ) arrays, place.place_many(b, us, xs, ys, cs)
$$;

SELECT user_id AS painter FROM place.create_user('painter') \gset
SELECT place.create_board('art', 64, 48, 4, '0 seconds') AS art \gset
SELECT place.create_board('mono', 40, 24, 1, '0 seconds') AS mono \gset
SELECT place.create_board('duo', 30, 20, 2, '0 seconds') AS duo \gset
SELECT place.create_board('wide', 20, 10, 8, '0 seconds') AS wide \gset
-- frost: tiles freeze after resting 2 s (One Million Checkboxes' ending). Painted like the
-- others, so by the time the tests look, every tile painted a non-zero colour is frozen.
SELECT place.create_board('frost', 16, 16, 4, '0 seconds') AS frost \gset
-- large: a million tiles, which the page follows by region when zoomed in (left blank).
SELECT place.create_board('large', 1024, 1024, 4, '0 seconds') AS large \gset
-- art: rings around (20, 24) and a band of stripes, every colour of the palette.
SELECT count(*) FROM (
  SELECT array_agg(:painter::bigint) AS us, array_agg(x) AS xs, array_agg(y) AS ys, array_agg(c) AS cs
  FROM (
    SELECT x, y, CASE WHEN x > 44 THEN (y / 3 + x / 4) % 16
                      ELSE ((x - 20) * (x - 20) + (y - 24) * (y - 24)) / 30 % 16 END AS c
    FROM generate_series(0, 63) x, generate_series(0, 47) y
  ) tiles
) arrays, place.place_many(:art, us, xs, ys, cs) \gset
SELECT pg_temp.paint(:mono, :painter),
       pg_temp.paint(:duo, :painter), pg_temp.paint(:wide, :painter),
       pg_temp.paint(:frost, :painter) \gset
SELECT place.set_freeze_after(:frost, '2 seconds') \gset
-- A cooldown the tests can see counting down.
SELECT place.set_cooldown(:art, '30 seconds') \gset

SELECT user_id AS alice, token AS alice_token FROM place.create_user('alice') \gset
SELECT user_id AS bob, token AS bob_token FROM place.create_user('bob') \gset

\pset tuples_only on
\pset format unaligned
SELECT json_build_object(
  'boards', json_build_object('art', :art, 'mono', :mono, 'duo', :duo, 'wide', :wide, 'frost', :frost, 'large', :large),
  'users', json_build_object(
    'painter', json_build_object('id', :painter),
    'alice', json_build_object('id', :alice, 'token', :'alice_token'),
    'bob', json_build_object('id', :bob, 'token', :'bob_token')));
