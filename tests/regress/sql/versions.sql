-- Chunks are kept as versions (place.chunk_versions) without a foreign key to their rows:
-- a trigger deletes a row's versions with it. Each case below would leave versions behind
-- (or fail) without that trigger. (Cooldowns were versions too until 0.8.5: cooldowns.sql.)
SELECT place.create_board('versions', 40, 40, 4, '0') AS vb \gset
SELECT user_id AS vu FROM place.create_user('versions-player') \gset
SELECT user_id AS vu2 FROM place.create_user('versions-idle') \gset
SELECT placed FROM place.place(:vb, 1, 1, 3, :vu);
SELECT placed FROM place.place(:vb, 39, 39, 5, :vu);
-- One version per chunk is left: each write replaced the one before.
SELECT count(*) AS chunk_versions, count(DISTINCT chunk_no) AS chunks
FROM place.chunk_versions WHERE board_id = :vb;

-- A resize replaces the board's chunks: the old ones' versions go, the tiles stay.
SELECT place.resize_board(:vb, 80, 80);
SELECT (SELECT count(*) FROM place.chunks WHERE board_id = :vb) AS chunks,
       (SELECT count(*) FROM place.chunk_versions WHERE board_id = :vb) AS chunk_versions;
SELECT place.get_tile(:vb, 39, 39) AS kept_tile;

-- A deleted user's cooldowns go with the user (one set by hand: this user never placed).
INSERT INTO place.cooldowns (board_id, user_id, last_placed_at) VALUES (:vb, :vu2, now());
SELECT count(*) AS claims FROM place.cooldown_claims WHERE board_id = :vb;
DELETE FROM place.users WHERE id = :vu2;
SELECT count(*) AS claims_after FROM place.cooldown_claims WHERE board_id = :vb;

-- board_bits reads each chunk's newest version straight from the key (place._newest_bits):
-- the bytes the view shows, after the resize above too.
SELECT length(bits) AS packed_len,
       bits = (SELECT string_agg(bits, ''::bytea ORDER BY chunk_no)
               FROM place.board_chunks WHERE board_id = :vb) AS same_as_view
FROM place.board_bits(:vb);
-- It checks SELECT on place.chunk_versions, as a query of the table would.
CREATE ROLE pgplace_regress_no_chunks;
REVOKE SELECT ON place.chunk_versions FROM PUBLIC;
SET ROLE pgplace_regress_no_chunks;
SELECT expect_error(format('SELECT place._newest_bits(%s)', :vb));
RESET ROLE;
GRANT SELECT ON place.chunk_versions TO PUBLIC;
DROP ROLE pgplace_regress_no_chunks;

-- A deleted board takes all of it along.
DELETE FROM place.board_settings WHERE id = :vb;
SELECT (SELECT count(*) FROM place.chunks WHERE board_id = :vb) AS chunks,
       (SELECT count(*) FROM place.chunk_versions WHERE board_id = :vb) AS chunk_versions,
       (SELECT count(*) FROM place.cooldown_claims WHERE board_id = :vb) AS claims;
