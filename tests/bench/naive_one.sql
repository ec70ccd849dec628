-- place.sql against the PL/pgSQL baseline: each client places as its own user.
\set x random(0, 999)
\set y random(0, 999)
\set c random(0, 15)
\set user 1 + :client_id
SELECT * FROM naive.place(1, :x, :y, :c, :user);
