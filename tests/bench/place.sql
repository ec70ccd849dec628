-- Each pgbench client places as its own user, so cooldown locks never collide on a user.
\set x random(0, 999)
\set y random(0, 999)
\set c random(0, 15)
\set user :ubase + :client_id
SELECT * FROM place.place(:board, :x, :y, :c, :user);
