-- The gateway's sessions: stored hashed, subscriptions kept with them, destroyed and
-- expired sessions removed (the gateways hear of it: tests/tests/gateway_scale_out.rs).
SELECT place.create_board('sessions-board', 4, 4, 4, '0'::interval) AS board \gset
SELECT user_id AS session_user, token AS user_token FROM place.create_user('session-user') \gset
SELECT place.session_create('session-aaaaaaaaaaaaaaaa', 1) AS aaa \gset
SELECT place.session_create('session-bbbbbbbbbbbbbbbb', 1) AS bbb \gset
SELECT :bbb = :aaa + 1 AS public_ids_differ;
-- The id itself is not stored.
SELECT count(*) AS rows_naming_the_id FROM place.sessions
WHERE position(convert_to('session-aaaa', 'UTF8') IN id_hash) > 0;

-- Refused: short ids, an id taken, NULL; nothing changes.
SELECT expect_error('SELECT place.session_create(''short'', 1)');
SELECT expect_error('SELECT place.session_create(NULL, 1)');
SELECT expect_error('SELECT place.session_create(''session-aaaaaaaaaaaaaaaa'', 1)');
SELECT count(*) AS sessions FROM place.sessions;

-- Subscribing writes the view; again under the same key replaces it.
SELECT place.session_subscribe('session-aaaaaaaaaaaaaaaa', 'board/' || :board, 'board',
                               jsonb_build_object('board', :board), :board, 0, 1, 2);
SELECT place.session_subscribe('session-aaaaaaaaaaaaaaaa', 'board/' || :board, 'board',
                               jsonb_build_object('board', :board, 'presence', true), :board, 3, 2, 2);
SELECT place.session_subscribe('session-aaaaaaaaaaaaaaaa', 'top', 'top', '{"limit": 5}', NULL, NULL, 1, 2);
SELECT place.session_subscribe('session-bbbbbbbbbbbbbbbb', 'board/' || :board || '/compact', 'board',
                               jsonb_build_object('board', :board, 'compact', true), :board, 0, 1, 2);
-- An unknown session: NULL, nothing written.
SELECT place.session_subscribe('session-cccccccccccccccc', 'x', 'board', '{}', NULL, NULL, 1, 2);
SELECT watching FROM place.session_watchers() WHERE board_id = :board;

-- Authorizing, then loading (as another gateway would).
SELECT place.session_set_user('session-aaaaaaaaaaaaaaaa',
                              place.user_for_token(:'user_token'), 2);
SELECT public_id = :aaa AS same_session, user_name, jsonb_pretty(views) AS views
FROM place.session_load('session-aaaaaaaaaaaaaaaa');
SELECT count(*) AS unknown_rows FROM place.session_load('session-cccccccccccccccc');
-- The users sessions act for, in order, as a group of placements reads them; a session
-- without a user or unknown fails the whole call.
SELECT place.session_users(ARRAY['session-aaaaaaaaaaaaaaaa', 'session-aaaaaaaaaaaaaaaa'])
       = ARRAY[:session_user, :session_user]::bigint[] AS both_the_user;
SELECT expect_error('SELECT place.session_users(ARRAY[''session-aaaaaaaaaaaaaaaa'', ''session-bbbbbbbbbbbbbbbb''])');
SELECT expect_error('SELECT place.session_users(ARRAY[''session-cccccccccccccccc''])');
-- The same by public ids (0.8.12: a gateway forwarding placements to a board's placer
-- sends no session's secret).
SELECT place.session_users_public(ARRAY[:aaa, :aaa]::bigint[])
       = ARRAY[:session_user, :session_user]::bigint[] AS both_the_user_by_public_id;
SELECT expect_error(format('SELECT place.session_users_public(ARRAY[%s, %s]::bigint[])', :aaa, :bbb));
SELECT expect_error('SELECT place.session_users_public(ARRAY[999999]::bigint[])');
-- Every change bumped the version; the holder is the gateway that made it until another
-- takes the session's legacy polls.
SELECT * FROM place.session_states(ARRAY[:aaa, :bbb, 999999]::bigint[]) ORDER BY public_id;
SELECT place.session_hold('session-aaaaaaaaaaaaaaaa', 7);
SELECT place.session_hold('session-cccccccccccccccc', 7);
SELECT public_id = :aaa AS same, version, holder
FROM place.session_states(ARRAY[:aaa]::bigint[]);

-- Moving a session's legacy polls says which gateway answered them before; a gateway
-- that drops its copy leaves its positions for the holder, to be taken once.
SELECT * FROM place.session_move('session-aaaaaaaaaaaaaaaa', 8);
SELECT * FROM place.session_move('session-aaaaaaaaaaaaaaaa', 8);
SELECT count(*) AS unknown_rows FROM place.session_move('session-cccccccccccccccc', 8);
SELECT place.session_take_handover('session-aaaaaaaaaaaaaaaa', 8) AS nothing_left_yet;
SELECT place.session_hand_over('session-aaaaaaaaaaaaaaaa', 7, '{"s": 1, "g": 7, "v": {}}') AS left_for;
SELECT place.session_hand_over('session-cccccccccccccccc', 7, '{"s": 1}') AS unknown;
SELECT expect_error('SELECT place.session_hand_over(''session-aaaaaaaaaaaaaaaa'', 7, ''[]'')');
SELECT expect_error('SELECT place.session_hand_over(''session-aaaaaaaaaaaaaaaa'', 7, NULL)');
SELECT place.session_take_handover('session-aaaaaaaaaaaaaaaa', 9) AS not_for_another;
SELECT place.session_take_handover('session-aaaaaaaaaaaaaaaa', 8) AS taken;
SELECT place.session_take_handover('session-aaaaaaaaaaaaaaaa', 8) AS taken_once;
-- Left for a gateway, they stay for it when it moves the session again (a retry), and
-- are void when another gateway moves it first.
SELECT place.session_hand_over('session-aaaaaaaaaaaaaaaa', 7, '{"s": 1, "g": 7, "v": {}}') AS left_for;
SELECT * FROM place.session_move('session-aaaaaaaaaaaaaaaa', 8);
SELECT * FROM place.session_move('session-aaaaaaaaaaaaaaaa', 9);
SELECT place.session_take_handover('session-aaaaaaaaaaaaaaaa', 9) AS void;
-- Left by the holder itself (its copy was dropped for a change made elsewhere): whoever
-- moves the session next gets them.
SELECT place.session_hand_over('session-aaaaaaaaaaaaaaaa', 9, '{"s": 1, "g": 9, "v": {}}') AS left_for;
SELECT * FROM place.session_move('session-aaaaaaaaaaaaaaaa', 7);
SELECT place.session_take_handover('session-aaaaaaaaaaaaaaaa', 7) AS parked;
-- Sessions are logged: a crash or a failover keeps them.
SELECT relname, relpersistence FROM pg_class
WHERE oid IN ('place.sessions'::regclass, 'place.session_views'::regclass) ORDER BY relname;

SELECT place.session_unsubscribe('session-aaaaaaaaaaaaaaaa', 'top', 2);
SELECT place.session_unsubscribe('session-aaaaaaaaaaaaaaaa', 'top', 2);

-- Seen marks; expiry removes what was not seen for the idle time, and tells.
UPDATE place.sessions SET seen_at = now() - interval '1 hour';
SELECT place.session_seen(ARRAY[:bbb, 999999]::bigint[]);
SELECT place.session_expire('10 minutes');
SELECT count(*) AS left_sessions, count(*) FILTER (WHERE public_id = :bbb) AS the_seen_one
FROM place.sessions;
SELECT count(*) AS views_of_expired FROM place.session_views v
WHERE NOT EXISTS (SELECT FROM place.sessions s WHERE s.id_hash = v.id_hash);
SELECT expect_error('SELECT place.session_expire(''0'')');
SELECT expect_error('SELECT place.session_expire(NULL)');

SELECT place.session_destroy('session-bbbbbbbbbbbbbbbb');
SELECT place.session_destroy('session-bbbbbbbbbbbbbbbb');

-- A deleted board takes its subscriptions along.
SELECT place.session_create('session-dddddddddddddddd', 1) IS NOT NULL AS created;
SELECT place.session_subscribe('session-dddddddddddddddd', 'board/' || :board, 'board',
                               jsonb_build_object('board', :board), :board, 0, 1, 2);
DELETE FROM place.boards WHERE id = :board;
SELECT jsonb_array_length(views) AS views FROM place.session_load('session-dddddddddddddddd');
SELECT place.session_destroy('session-dddddddddddddddd');
