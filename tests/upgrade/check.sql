-- After the update: the data is there, placing continues the seq, time travel works.
SELECT 'boards', count(*) FROM place.boards;
SELECT 'placements', count(*) FROM place.placements;
SELECT 'users', count(*) FROM place.users;
SELECT 'token', place.user_for_token('no such token') IS NULL;
SELECT 'placed', placed, seq FROM place.place((SELECT id FROM place.boards WHERE name = 'up-a'), 1, 1, 7,
                                       (SELECT id FROM place.users WHERE name = 'up-u'));
SELECT 'cooldown kept', placed FROM place.place((SELECT id FROM place.boards WHERE name = 'up-b'), 4, 4, 1,
                                       (SELECT id FROM place.users WHERE name = 'up-u'));
SELECT 'interval', place.set_keyframe_every(id, 20) IS NULL FROM place.boards WHERE name = 'up-a';
SELECT 'keyframes built', place.build_keyframes(id) FROM place.boards WHERE name = 'up-a';
SELECT 'board_at newest', (SELECT bits FROM place.board_at_seq(b.id, b.seq)) = (SELECT bits FROM place.board_bits(b.id))
FROM place.boards b WHERE name = 'up-a';
SELECT 'board_at 50', seq FROM place.board_at_seq((SELECT id FROM place.boards WHERE name = 'up-a'), 50);
-- Watching goes on: a table watched before the update (or now, for releases without
-- watching) logs its next change at the next position.
DO $$
BEGIN
    IF to_regclass('upgrade_watched') IS NULL THEN
        CREATE TABLE upgrade_watched (id int PRIMARY KEY, v text NOT NULL);
        PERFORM place.watch('upgrade_watched');
    END IF;
END
$$;
SELECT place.tick() AS before \gset
INSERT INTO upgrade_watched VALUES (2, 'after the update');
SELECT 'new positions', place.tick() - :before;
SELECT 'logged', action, key FROM place.changes_since(:before);
