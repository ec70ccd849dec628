-- The reference cost: one durable INSERT and one NOTIFY, committed together.
\set x random(0, 999)
\set y random(0, 999)
\set c random(0, 15)
BEGIN;
INSERT INTO bench_baseline (x, y, c) VALUES (:x, :y, :c);
SELECT pg_notify('bench', 'x');
END;
