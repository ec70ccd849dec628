-- What an older release's database holds: boards, users, placements, cooldowns.
SELECT place.create_board('up-a', 30, 20, 4, '0') AS a \gset
SELECT place.create_board('up-b', 8, 8, 1, '5 minutes') AS b \gset
SELECT user_id AS u FROM place.create_user('up-u') \gset
SELECT user_id AS v FROM place.create_user('up-v') \gset
SELECT count(*) FROM generate_series(1, 50) g,
    place.place_many(:a, ARRAY[:u, :v]::bigint[], ARRAY[g % 30, (g * 7) % 30], ARRAY[g % 20, (g * 3) % 20], ARRAY[g % 16, (g + 5) % 16]);
SELECT count(*) FROM place.place(:b, 3, 3, 1, :u);
-- Releases that watch tables (0.3.0 on): a watched table with changes in the log, whose
-- triggers the update must carry over.
DO $$
BEGIN
    IF to_regproc('place.watch') IS NOT NULL THEN
        CREATE TABLE upgrade_watched (id int PRIMARY KEY, v text NOT NULL);
        PERFORM place.watch('upgrade_watched');
        INSERT INTO upgrade_watched VALUES (1, 'before the update');
    END IF;
END
$$;
