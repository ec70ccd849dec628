-- Each call a random user out of 20,000 (users ubase .. ubase + 19999): many users, each
-- placing now and then, as on a real board.
\set x random(0, 999)
\set y random(0, 999)
\set c random(0, 15)
\set user random(:ubase, :ubase + 19999)
SELECT * FROM place.place(:board, :x, :y, :c, :user);
