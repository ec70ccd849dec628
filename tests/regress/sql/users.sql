-- Users and tokens: the token is shown once and stored only as a hash.
CREATE TEMP TABLE alice AS SELECT * FROM place.create_user('alice');
SELECT user_id > 0 AS has_id, token ~ '^[0-9a-f]{64}$' AS token_is_256_random_bits FROM alice;
SELECT place.user_for_token((SELECT token FROM alice)) = (SELECT user_id FROM alice) AS token_finds_alice;
SELECT place.user_for_token('not a token') IS NULL AS unknown_token_is_null;
SELECT place.user_for_token(NULL) IS NULL AS null_token_is_null;
-- Tokens differ between users, and nothing stored equals the token.
CREATE TEMP TABLE bob AS SELECT * FROM place.create_user('bob');
SELECT (SELECT token FROM alice) <> (SELECT token FROM bob) AS tokens_differ;
SELECT count(*) AS stored_plain_tokens FROM place.user_tokens
WHERE token_hash = convert_to((SELECT token FROM alice), 'UTF8');
SELECT column_name FROM information_schema.columns
WHERE table_schema = 'place' AND table_name = 'users' ORDER BY ordinal_position;

-- A role that is not the owner reads users but not the token hashes.
SELECT token AS alice_token FROM alice \gset
CREATE ROLE pgplace_regress_reader;
SET ROLE pgplace_regress_reader;
SELECT name FROM place.users ORDER BY id;
SELECT expect_error($$SELECT * FROM place.user_tokens$$);
-- Nor may it resolve tokens: user_for_token (SECURITY DEFINER) is the gateway's alone.
SELECT expect_error(format('SELECT place.user_for_token(%L)', :'alice_token'));
-- Boards are public: any role reads them whole or tile by tile.
SELECT seq, length(bits) FROM place.board_bits((SELECT id FROM place.boards WHERE name = 'small'));
SELECT place.get_tile((SELECT id FROM place.boards WHERE name = 'small'), 1, 2) AS tile;
RESET ROLE;
DROP ROLE pgplace_regress_reader;

SELECT expect_error($$SELECT * FROM place.create_user('alice')$$);
SELECT expect_error($$SELECT * FROM place.create_user(NULL)$$);
SELECT expect_error($$SELECT * FROM place.create_user('')$$);
SELECT expect_error($$SELECT * FROM place.create_user(repeat('é', 65))$$);
SELECT count(*) AS users FROM place.users;
