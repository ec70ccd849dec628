-- place_random.sql against the PL/pgSQL baseline (naive.sql: board 1, users 1..20000).
\set x random(0, 999)
\set y random(0, 999)
\set c random(0, 15)
\set user random(1, 20000)
SELECT * FROM naive.place(1, :x, :y, :c, :user);
