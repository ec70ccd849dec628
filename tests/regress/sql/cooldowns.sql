-- Since 0.8.5 the history is the cooldown: a user's last placement is the newest of the
-- user's placements, after what the claim row knows (a time set by hand, a last placement
-- that a compaction dropped).
SELECT place.create_board('cooldowns', 8, 8, 4, '1 hour') AS cb \gset
SELECT user_id AS cu FROM place.create_user('cooldowns-player') \gset
SELECT user_id AS cu2 FROM place.create_user('cooldowns-idle') \gset

SELECT placed, seq FROM place.place(:cb, 1, 1, 3, :cu);
-- The view shows the placement's stamp; the claim row knows nothing of its own.
SELECT c.last_placed_at = p.placed_at AS from_history, k.known_seq, k.known_at
FROM place.cooldowns c
JOIN place.placements p ON p.board_id = c.board_id AND p.user_id = c.user_id
JOIN place.cooldown_claims k ON k.board_id = c.board_id AND k.user_id = c.user_id
WHERE c.board_id = :cb;
-- Inside the window: refused, until an hour after the placement.
SELECT placed, next_allowed_at = (SELECT placed_at + interval '1 hour' FROM place.placements
                                  WHERE board_id = :cb AND seq = 1) AS until_an_hour_on
FROM place.place(:cb, 2, 2, 3, :cu);

-- Set back by hand (as the freezing tests do): the older placement no longer counts.
UPDATE place.cooldowns SET last_placed_at = last_placed_at - interval '2 hours'
WHERE board_id = :cb AND user_id = :cu;
SELECT ctid AS claim_ctid FROM place.cooldown_claims WHERE board_id = :cb AND user_id = :cu \gset
SELECT placed, seq FROM place.place(:cb, 2, 2, 4, :cu);
-- The placement after the edit counts, and wrote nothing to the claim row.
SELECT placed FROM place.place(:cb, 3, 3, 4, :cu);
SELECT c.last_placed_at = (SELECT placed_at FROM place.placements WHERE board_id = :cb AND seq = 2) AS newest,
       (SELECT ctid FROM place.cooldown_claims WHERE board_id = :cb AND user_id = :cu) = :'claim_ctid' AS claim_unwritten
FROM place.cooldowns c WHERE c.board_id = :cb AND c.user_id = :cu;

-- Lifted by hand: the row goes, the user places at once, and the placements before the
-- lift do not come back.
DELETE FROM place.cooldowns WHERE board_id = :cb AND user_id = :cu;
SELECT count(*) AS rows_after_lift FROM place.cooldowns WHERE board_id = :cb;
SELECT placed, seq FROM place.place(:cb, 4, 4, 5, :cu);
SELECT known_seq FROM place.cooldown_claims WHERE board_id = :cb AND user_id = :cu;
SELECT placed FROM place.place(:cb, 5, 5, 5, :cu);

-- Set by hand for a user who never placed: refused until then.
INSERT INTO place.cooldowns (board_id, user_id, last_placed_at) VALUES (:cb, :cu2, now());
SELECT placed, next_allowed_at > now() + interval '59 minutes' AS about_an_hour
FROM place.place(:cb, 6, 6, 1, :cu2);
-- Bad edits: a clear error, nothing changed.
SELECT expect_error(format('INSERT INTO place.cooldowns VALUES (%s, %s, now())', :cb, :cu2));
SELECT expect_error(format('UPDATE place.cooldowns SET last_placed_at = NULL WHERE board_id = %s', :cb));
SELECT expect_error(format('INSERT INTO place.cooldowns VALUES (%s, %s, NULL)', :cb, :cu));
SELECT expect_error(format('UPDATE place.cooldowns SET user_id = %s WHERE board_id = %s AND user_id = %s', :cu, :cb, :cu2));
SELECT count(*) AS cooldowns, count(*) FILTER (WHERE last_placed_at IS NULL) AS without_time
FROM place.cooldowns WHERE board_id = :cb;

-- A compaction that drops a user's last placement keeps its time in the claim row: the
-- cooldown still runs from it, also after the cooldown grows.
SELECT pg_sleep(0.01);
SELECT place.compact_history(:cb, clock_timestamp()) AS dropped;
SELECT count(*) AS history_left FROM place.placements WHERE board_id = :cb;
SELECT c.last_placed_at IS NOT NULL AS kept, k.known_seq, k.known_at = c.last_placed_at AS in_claim
FROM place.cooldowns c JOIN place.cooldown_claims k USING (board_id, user_id)
WHERE c.board_id = :cb AND c.user_id = :cu;
SELECT place.set_cooldown(:cb, '2 hours');
SELECT placed FROM place.place(:cb, 6, 6, 1, :cu);
SELECT place.set_cooldown(:cb, '0');
SELECT placed, seq FROM place.place(:cb, 6, 6, 1, :cu);
SELECT c.last_placed_at = p.placed_at AS from_history_again
FROM place.cooldowns c JOIN place.placements p ON p.board_id = c.board_id AND p.seq = 4
WHERE c.board_id = :cb AND c.user_id = :cu;

-- A deleted board takes its claims along.
DELETE FROM place.board_settings WHERE id = :cb;
SELECT count(*) AS claims_left FROM place.cooldown_claims WHERE board_id = :cb;

-- Without a cooldown the history is not read for a placement, yet the claim is taken: a
-- cooldown set afterwards runs from the placements made without one.
SELECT place.create_board('no-cooldown', 8, 8, 1, '0') AS nb \gset
SELECT placed, seq FROM place.place_many(:nb, ARRAY[:cu, :cu, :cu2], ARRAY[1, 2, 3], ARRAY[1, 1, 1], ARRAY[1, 1, 1]);
SELECT count(*) AS claims FROM place.cooldown_claims WHERE board_id = :nb;
SELECT place.set_cooldown(:nb, '1 hour');
SELECT placed, next_allowed_at = (SELECT placed_at FROM place.placements WHERE board_id = :nb AND seq = 2) + interval '1 hour' AS from_second
FROM place.place(:nb, 4, 4, 1, :cu);
SELECT user_id AS cu3 FROM place.create_user('cooldowns-late') \gset
SELECT placed, seq FROM place.place(:nb, 4, 4, 1, :cu3);
