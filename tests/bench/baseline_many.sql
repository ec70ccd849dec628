-- The batch ceiling: 100 rows in one INSERT and one NOTIFY, committed together.
BEGIN;
INSERT INTO bench_baseline (x, y, c)
SELECT (random() * 999)::int, (random() * 999)::int, (random() * 15)::int FROM generate_series(1, 100);
SELECT pg_notify('bench', 'x');
END;
