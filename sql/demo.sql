-- The demo board (r/Place 2017: 1000x1000, 16 colours, 5-minute cooldown) and a demo
-- user. Safe to run again; prints the demo user's token only when it creates the user.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM place.boards WHERE name = 'demo') THEN
        PERFORM place.create_board('demo', 1000, 1000, 4, '5 minutes');
    END IF;
END
$$;
SELECT token FROM place.create_user('demo')
WHERE NOT EXISTS (SELECT 1 FROM place.users WHERE name = 'demo');
