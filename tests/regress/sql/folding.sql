-- The chunks folded up to a seq (0.8.4): placements write no chunk, every 10,000 placements
-- one folds the history into the chunks, and every reader shows chunks + the history after
-- their fold. Each check compares with the history replayed (board_at_seq), never with
-- the chunks alone.
SELECT place.create_board('fold', 100, 100, 4, '0') AS fold \gset
SELECT user_id AS folder FROM place.create_user('folder') \gset
-- A new board has no fold row: its chunks are current (empty).
SELECT count(*) AS fold_rows FROM place.chunk_folds WHERE board_id = :fold;
-- 25 batches of 1,000 placements over the 10 chunks, many tiles placed again.
SELECT sum(n) AS placed FROM generate_series(1, 25) k,
    LATERAL (SELECT count(*) AS n FROM place.place_many(:fold,
        array_fill(:folder::bigint, ARRAY[1000]),
        ARRAY(SELECT (g * 37 + k * 11) % 100 FROM generate_series(1, 1000) g),
        ARRAY(SELECT (g * 53 + k * 7) % 100 FROM generate_series(1, 1000) g),
        ARRAY(SELECT (g + k) % 16 FROM generate_series(1, 1000) g)) WHERE placed) b;
-- Folded at 10,000 and 20,000 (the placements that reached them): one row, the newest.
SELECT folded_seq, count(*) OVER () AS rows FROM place.chunk_folds WHERE board_id = :fold;
-- The chunks lag the board by 5,000 placements, and no reader shows it.
SELECT (SELECT bits FROM place.board_bits(:fold)) <> place._newest_bits(:fold) AS chunks_lag;
SELECT (SELECT bits FROM place.board_bits(:fold)) = (SELECT bits FROM place.board_at_seq(:fold, 25000)) AS bits_are_the_history;
SELECT (SELECT string_agg(bits, ''::bytea ORDER BY chunk_no) FROM place.board_chunks WHERE board_id = :fold)
       = (SELECT bits FROM place.board_bits(:fold)) AS chunks_view_is_the_board;
SELECT count(*) AS chunks, min(length(bits)), max(length(bits)) FROM place.board_chunks WHERE board_id = :fold;
SELECT count(*) FILTER (WHERE place.get_tile(:fold, x, y)
                             <> place.bitfield_get((SELECT bits FROM place.board_bits(:fold)), 4, x + 100 * y)) AS tiles_differing
FROM generate_series(0, 99) x, generate_series(0, 99) y;
SELECT count(*) AS tile_rows, count(*) FILTER (WHERE color <> 0) > 0 AS some_colored FROM place.tiles(:fold);
-- The keyframe at 20,000 is the history replayed too.
SELECT (SELECT bits FROM place.keyframes WHERE board_id = :fold AND seq = 20000)
       = (SELECT bits FROM place.board_at_seq(:fold, 20000)) AS keyframe_is_the_history;

-- A compaction folds first: the history it drops is in the chunks.
SELECT place.compact_history(:fold, now()) AS dropped;
SELECT folded_seq FROM place.chunk_folds WHERE board_id = :fold;
SELECT (SELECT bits FROM place.board_bits(:fold)) = place._newest_bits(:fold) AS chunks_current;
SELECT md5((SELECT bits FROM place.board_bits(:fold))) = md5((SELECT bits FROM place.keyframes WHERE board_id = :fold AND seq = 25000)) AS kept_as_keyframe;

-- Placements after it, then a resize: the new chunks are the board at the resize's seq.
SELECT count(*) AS placed FROM place.place_many(:fold, array_fill(:folder::bigint, ARRAY[3]), '{99,5,0}', '{99,6,0}', '{7,8,9}') WHERE placed;
SELECT place.get_tile(:fold, 99, 99) AS corner, place.get_tile(:fold, 5, 6) AS inside;
SELECT place.resize_board(:fold, 50, 50);
SELECT folded_seq FROM place.chunk_folds WHERE board_id = :fold;
SELECT place.get_tile(:fold, 5, 6) AS kept, place.get_tile(:fold, 0, 0) AS corner_kept,
       length((SELECT bits FROM place.board_bits(:fold))) AS bytes;
SELECT count(*) AS placed FROM place.place(:fold, 49, 49, 3, :folder) WHERE placed;
SELECT place.get_tile(:fold, 49, 49) AS placed_after_resize;
SELECT (SELECT bits FROM place.board_bits(:fold)) = (SELECT bits FROM place.board_at_seq(:fold, 25004)) AS bits_are_the_history;

-- Moderation reads the board now: restoring a region to before the last placement.
SELECT place.restore_region(:fold, 49, 49, 1, 1, (SELECT placed_at FROM place.placements WHERE board_id = :fold AND seq = 25003)) AS restored;
SELECT place.get_tile(:fold, 49, 49)
       = place.bitfield_get((SELECT bits FROM place.board_at_seq(:fold, 25003)), 4, 49 + 50 * 49) AS restored_as_then;

-- A board deleted takes its fold rows.
WITH d AS (DELETE FROM place.board_settings WHERE id = :fold RETURNING 1) SELECT count(*) AS deleted FROM d;
SELECT count(*) AS fold_rows_left FROM place.chunk_folds WHERE board_id = :fold;

-- A placement that writes a keyframe folds first, so that the keyframe reads the chunks
-- alone: with keyframes every 3,000, ten batches of 1,000 fold at 9,000 (the newest
-- keyframe), not at 10,000; each keyframe is the history replayed from an empty board.
SELECT place.create_board('fold-keyframes', 100, 100, 4, '0') AS fk \gset
SELECT place.set_keyframe_every(:fk, 3000);
SELECT sum(n) AS placed FROM generate_series(1, 10) k,
    LATERAL (SELECT count(*) AS n FROM place.place_many(:fk,
        array_fill(:folder::bigint, ARRAY[1000]),
        ARRAY(SELECT (g * 37 + k * 11) % 100 FROM generate_series(1, 1000) g),
        ARRAY(SELECT (g * 53 + k * 7) % 100 FROM generate_series(1, 1000) g),
        ARRAY(SELECT (g + k) % 16 FROM generate_series(1, 1000) g)) WHERE placed) b;
SELECT folded_seq FROM place.chunk_folds WHERE board_id = :fk;
SELECT k.seq, k.bits = (SELECT place._apply_tiles(decode(repeat('00', 5000), 'hex'), 4,
                                                  array_agg(p.x::bigint + 100 * p.y ORDER BY p.seq),
                                                  array_agg(p.color ORDER BY p.seq))
                        FROM place.placements p WHERE p.board_id = :fk AND p.seq <= k.seq) AS is_the_history
FROM place.keyframes k WHERE k.board_id = :fk ORDER BY k.seq;
SELECT (SELECT bits FROM place.board_bits(:fk)) = (SELECT bits FROM place.board_at_seq(:fk, 10000)) AS bits_are_the_history;
