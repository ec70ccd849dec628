-- place.claim_placer / release_placer: a board's lease on grouping its placements. The
-- first claim takes it; its holder renews it; another gateway gets the holder's answer
-- while it lasts and takes it once it has run out or was given up. Bad arguments change
-- nothing; only the player may call them, and the readers may not read the tokens.
SELECT place.create_board('leased', 8, 8, 4, '0') AS board \gset
SELECT * FROM place.claim_placer(:board, 1, 'http://a:8080', 'token-of-gateway-a', 60000);
-- Renewed by its holder (a new address and token are taken too), refused to another.
SELECT * FROM place.claim_placer(:board, 1, 'http://a:8081', 'token-of-gateway-a2', 60000);
SELECT * FROM place.claim_placer(:board, 2, 'http://b:8080', 'token-of-gateway-b', 60000);
-- Run out: the next claim takes it.
UPDATE place.placers SET expires_at = now() - interval '1 second' WHERE board_id = :board;
SELECT * FROM place.claim_placer(:board, 2, 'http://b:8080', 'token-of-gateway-b', 60000);
-- Given up by a gateway that does not hold it: nothing; by its holder: free for the next.
SELECT place.release_placer(:board, 1);
SELECT place.release_placer(:board, 2);
SELECT * FROM place.claim_placer(:board, 1, 'http://a:8080', 'token-of-gateway-a', 60000);
-- Refused, changing nothing.
SELECT * FROM place.claim_placer(:board, 2, 'http://b:8080', 'token-of-gateway-b', 50);
SELECT * FROM place.claim_placer(:board, 2, 'http://b:8080', 'short', 60000);
SELECT * FROM place.claim_placer(:board, 2, '', 'token-of-gateway-b', 60000);
SELECT * FROM place.claim_placer(:board, NULL, 'http://b:8080', 'token-of-gateway-b', 60000);
SELECT * FROM place.claim_placer(-1, 2, 'http://b:8080', 'token-of-gateway-b', 60000);
SELECT board_id = :board AS same_board, gateway, address FROM place.placers;
-- A deleted board takes its lease with it.
SELECT place.delete_board(:board) IS NOT NULL AS deleted;
SELECT count(*) FROM place.placers;
-- SECURITY DEFINER, pinned search_path, not PUBLIC's.
SELECT p.proname, p.prosecdef, p.proconfig, has_function_privilege('public', p.oid, 'EXECUTE') AS public_may
FROM pg_proc p WHERE p.proname IN ('claim_placer', 'release_placer') ORDER BY 1;
