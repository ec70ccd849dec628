-- What a newcomer reaches for: the schema's description, the board as it was tile by tile
-- (tile_at, tiles_at), why a placement was refused (reason), deleting a board, erasing a
-- person (erase_user). Concurrent erases and placements: tests/isolation/specs/erase_during_placement.spec.
SELECT obj_description('place'::regnamespace, 'pg_namespace') LIKE 'pgplace, a collaborative board%' AS schema_described;

SELECT place.create_board('past', 6, 4, 4, '0') AS pb \gset
SELECT user_id AS pu, token AS ptoken FROM place.create_user('past-u') \gset
SELECT user_id AS pv FROM place.create_user('past-v') \gset
-- Two rounds with a time between; tile (0, 0) is placed on in both.
SELECT count(*) FROM place.place_many(:pb, ARRAY[:pu, :pv]::bigint[], '{0,1}', '{0,0}', '{3,4}');
SELECT clock_timestamp() AS pt1 \gset
SELECT count(*) FROM place.place_many(:pb, ARRAY[:pu, :pv]::bigint[], '{0,5}', '{0,3}', '{7,9}');

-- Every tile at a time is board_at's tile then; seq names the placement that gave it.
SELECT count(*) AS tiles,
       count(*) FILTER (WHERE t.color = place.bitfield_get(a.bits, 4, t.x + 6 * t.y)) AS as_board_at,
       count(*) FILTER (WHERE t.seq IS NOT NULL) AS placed_on
FROM place.tiles_at(:pb, :'pt1') t, place.board_at(:pb, :'pt1') a;
SELECT x, y, color, seq FROM place.tiles_at(:pb, :'pt1') WHERE seq IS NOT NULL;
SELECT x, y, color, seq FROM place.tiles_at(:pb, now()) WHERE seq IS NOT NULL;
-- The seq is the newest placement on the tile up to then, as the history says.
SELECT count(*) AS as_history FROM place.tiles_at(:pb, now()) t
WHERE t.seq = (SELECT max(p.seq) FROM place.placements p WHERE p.board_id = :pb AND p.x = t.x AND p.y = t.y);
-- Now, it is the board.
SELECT count(*) FILTER (WHERE color = place.get_tile(:pb, x, y)) AS as_now FROM place.tiles_at(:pb, now());
-- A rectangle, row by row; before the first placement, all 0.
SELECT x, y, color, seq FROM place.tiles_at(:pb, now(), 4, 2);
SELECT x, y, color, seq FROM place.tiles_at(:pb, '2000-01-01', 0, 0, 2, 1);
SELECT place.tile_at(:pb, 0, 0, :'pt1') AS then, place.tile_at(:pb, 0, 0, now()) AS now,
       place.tile_at(:pb, 0, 0, '2000-01-01') AS before_all;
-- Outside the board, a bad rectangle, NULLs, an unknown board: render_png's crop errors.
SELECT expect_error(format('SELECT place.tile_at(%s, 6, 0, now())', :pb));
SELECT expect_error(format('SELECT place.tile_at(%s, 0, -1, now())', :pb));
SELECT expect_error(format('SELECT * FROM place.tiles_at(%s, now(), 4, 0, 3)', :pb));
SELECT expect_error(format('SELECT * FROM place.tiles_at(%s, now(), 0, 0, NULL, 0)', :pb));
SELECT expect_error(format('SELECT * FROM place.tiles_at(%s, NULL)', :pb));
SELECT expect_error('SELECT place.tile_at(4242, 0, 0, now())');
-- A tile a resize cut off comes back as 0, and no placement gave it that.
SELECT place.resize_board(:pb, 4, 4);
SELECT place.resize_board(:pb, 6, 4);
SELECT x, y, color, seq FROM place.tiles_at(:pb, now(), 5, 3);

-- Why a placement was refused: the cooldown, or a frozen tile (freezing.sql).
SELECT place.create_board('why', 4, 4, 4, '1 hour') AS wb \gset
SELECT placed, seq IS NOT NULL AS has_seq, reason FROM place.place(:wb, 0, 0, 1, :pv);
SELECT placed, seq, reason, next_allowed_at > now() AS later FROM place.place(:wb, 1, 0, 1, :pv);
SELECT ord, placed, reason FROM place.place_many(:wb, ARRAY[:pu, :pu]::bigint[], '{2,3}', '{0,0}', '{1,1}');

-- Deleting a board: its history and keyframes go, no other board's.
SELECT place.delete_board(:wb) AS last_seq;
SELECT (SELECT count(*) FROM place.boards WHERE id = :wb) AS board,
       (SELECT count(*) FROM place.placements WHERE board_id = :wb) AS history,
       (SELECT count(*) FROM place.placements WHERE board_id = :pb) AS other_history;
SELECT regexp_replace(expect_error(format('SELECT place.delete_board(%s)', :wb)), ' \d+', ' N', 'g') AS twice;
SELECT expect_error('SELECT place.delete_board(NULL)');

-- pgplace's own users: nobody signs up as them.
SELECT expect_error($$SELECT * FROM place.create_user('erased')$$);
SELECT expect_error($$SELECT * FROM place.create_user('moderation')$$);
-- A person named 'erased' from before the name was reserved is not given anyone's placements.
BEGIN;
INSERT INTO place.users (name) VALUES ('erased') RETURNING id AS early \gset
INSERT INTO place.user_tokens (user_id, token_hash) VALUES (:early, sha256('early'));
SELECT regexp_replace(expect_error(format('SELECT place.erase_user(%s)', :pu)), ' \d+', ' N', 'g') AS refused;
ROLLBACK;

-- Erasing a person: name, token, sessions and bans go; the placements stay, by 'erased'.
SELECT place.session_create('a session of past-u', 1) IS NOT NULL AS session_made;
SELECT place.session_set_user('a session of past-u', :pu, 1) IS NOT NULL AS signed_in;
SELECT place.ban_user(:pu, NULL, 'for the test');
SELECT board_fingerprint('past') AS before_erase \gset
SELECT string_agg(md5(a.bits), ',' ORDER BY s) AS past_before FROM generate_series(0, 4) s, place.board_at_seq(:pb, s) a \gset
SELECT place.erase_user(:pu) AS given;
SELECT board_fingerprint('past') = :'before_erase' AS board_unchanged;
SELECT (SELECT count(*) FROM place.users WHERE id = :pu) AS user_left,
       (SELECT count(*) FROM place.user_tokens WHERE user_id = :pu) AS tokens,
       (SELECT count(*) FROM place.bans WHERE user_id = :pu) AS bans,
       (SELECT count(*) FROM place.session_load('a session of past-u')) AS sessions,
       place.user_for_token(:'ptoken') AS token_user;
SELECT u.name, count(*) AS placements FROM place.placements p JOIN place.users u ON u.id = p.user_id
WHERE p.board_id = :pb GROUP BY u.name ORDER BY u.name;
SELECT seq, color, user_name FROM place.tile_history(:pb, 0, 0);
SELECT string_agg(md5(a.bits), ',' ORDER BY s) = :'past_before' AS board_at_unchanged
FROM generate_series(0, 4) s, place.board_at_seq(:pb, s) a;
-- pgplace's own users, a stranger, NULL, and REPEATABLE READ are refused.
SELECT regexp_replace(expect_error($$SELECT place.erase_user((SELECT id FROM place.users WHERE name = 'erased'))$$), ' \d+', ' N', 'g') AS own;
SELECT regexp_replace(expect_error(format('SELECT place.erase_user(%s)', :pu)), ' \d+', ' N', 'g') AS gone;
SELECT expect_error('SELECT place.erase_user(NULL)');
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT expect_error(format('SELECT place.erase_user(%s)', :pv));
ROLLBACK;
-- The next placement continues the seq.
SELECT placed, seq, reason FROM place.place(:pb, 2, 2, 2, :pv);

-- Sign-in from an embedding site: a JWT's issuer and subject name a user, made on first
-- sight with the name offered (free, else with the id after it; never pgplace's own).
SELECT user_name FROM place.user_for_subject('https://id.example', 'sub-1', 'Ada');
SELECT user_name FROM place.user_for_subject('https://id.example', 'sub-1', 'Someone else');
SELECT regexp_replace(user_name, '\d+', 'N') AS user_name FROM place.user_for_subject('https://id.example', 'sub-2', 'Ada');
SELECT regexp_replace(user_name, '\d+', 'N') AS user_name FROM place.user_for_subject('https://other.example', 'sub-1', 'erased');
SELECT regexp_replace(user_name, '\d+', 'N') AS user_name FROM place.user_for_subject('https://id.example', 'sub-3', E'  \t ');
SELECT length(user_name) <= 64 AS fits FROM place.user_for_subject('https://id.example', 'sub-4', repeat('x', 500));
SELECT count(*) AS identities, count(DISTINCT user_id) AS users FROM place.user_identities;
-- The same person is the same user; a signed-in user places like any other.
SELECT (SELECT user_id FROM place.user_for_subject('https://id.example', 'sub-1')) =
       (SELECT user_id FROM place.user_for_subject('https://id.example', 'sub-1', 'Ada')) AS same_user;
SELECT placed, reason FROM place.place(:pb, 3, 3, 1, (SELECT user_id FROM place.user_for_subject('https://id.example', 'sub-1')));
SELECT expect_error($$SELECT * FROM place.user_for_subject('', 'x')$$);
SELECT expect_error($$SELECT * FROM place.user_for_subject('https://id.example', NULL)$$);
SELECT expect_error(format('SELECT * FROM place.user_for_subject(%L, %L)', 'https://id.example', repeat('s', 256)));
-- Erased, the identity goes too: signing in again makes a new user.
SELECT place.erase_user((SELECT user_id FROM place.user_for_subject('https://id.example', 'sub-1'))) AS given;
SELECT count(*) AS identities_of_sub1 FROM place.user_identities WHERE subject = 'sub-1' AND issuer = 'https://id.example';

-- Guests: a generated name, a token that signs in, marked guest; never the same name twice.
SELECT user_id AS g1, user_name AS g1_name, token AS g1_token FROM place.create_guest() \gset
SELECT user_id AS g2, user_name AS g2_name FROM place.create_guest() \gset
SELECT :'g1_name' ~ '^guest-[0-9a-f]{6}$' AS generated, :'g1_name' <> :'g2_name' AS distinct_names,
       place.user_for_token(:'g1_token') = :g1 AS signs_in,
       (SELECT guest FROM place.users WHERE id = :g1) AS guest,
       (SELECT guest FROM place.users WHERE id = :pv) AS others_are_not;
-- A guest places, is banned and erased like any user.
SELECT placed FROM place.place(:pb, 4, 3, 2, :g1);
SELECT place.ban_user(:g1, NULL, 'vandal');
SELECT regexp_replace(expect_error(format('SELECT * FROM place.place(%s, 4, 2, 2, %s)', :pb, :g1)), ' \d+', ' N', 'g') AS banned;
SELECT place.erase_user(:g2) AS given;
