//! The JSON-RPC protocol over real HTTP: the Qik transcript, errors, batches,
//! notifications, 1.0-style requests, and the plain HTTP routes.

use base64::Engine;
use hyper::header::HeaderMap;
use hyper::StatusCode;
use pgplace_tests::gateway::{start_gateway, Http};
use pgplace_tests::{
    board_bits, connect, create_board, create_users_with_tokens, fresh_database, history_rows,
};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

const UNKNOWN_SESSION: i64 = -32001;
const NOT_AUTHORIZED: i64 = -32002;
const COOLDOWN: i64 = -32003;
const UNKNOWN_VIEW: i64 = -32004;
const UNKNOWN_BOARD: i64 = -32005;
const BOARD_NOT_OPEN: i64 = -32006;
const INVALID_PARAMS: i64 = -32602;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_qik_transcript_end_to_end() {
    let url = fresh_database("gw_qik").await;
    let sql = connect(&url).await;
    let board = create_board(&sql, "qik", (16, 8), 4, "1 hour").await;
    let users = create_users_with_tokens(&sql, "qik", 1).await;
    let (user, token) = users[0].clone();
    let gw = start_gateway(&url, |_| {}).await;
    let http = Http::new(gw.addr);

    let session = http.ok("session.create", json!([])).await;
    let id = session.as_str().expect("a session id string");
    assert!(
        id.len() >= 32,
        "session ids are long enough to be unguessable: {id}"
    );
    let other = http.ok("session.create", json!([])).await;
    assert_ne!(session, other);

    // Watching needs no user; placing does.
    assert_eq!(
        http.error_code("board.place", json!([session, board, 1, 2, 3]))
            .await,
        NOT_AUTHORIZED
    );
    assert_eq!(
        http.error_code("session.authorize", json!([session, "not-a-token"]))
            .await,
        NOT_AUTHORIZED
    );
    let who = http.ok("session.authorize", json!([session, token])).await;
    assert_eq!(
        who,
        json!({"user_id": user, "name": "qik-0", "guest": false})
    );

    let reply = http
        .ok(
            "session.subscribe",
            json!([session, "board", {"board": "qik"}]),
        )
        .await;
    let key = reply[0].as_str().unwrap().to_string();
    let state = &reply[1];
    assert_eq!(
        (
            state["id"].as_i64(),
            state["width"].as_i64(),
            state["height"].as_i64()
        ),
        (Some(board), Some(16), Some(8))
    );
    assert_eq!(
        (state["seq"].as_i64(), state["bits_per_tile"].as_i64()),
        (Some(0), Some(4))
    );
    assert_eq!(state["palette"].as_array().unwrap().len(), 16);
    assert_eq!(state["cooldown"], 3600.0);
    assert_eq!(state["state"], "open");
    let bits = base64::engine::general_purpose::STANDARD.decode(state["bits"].as_str().unwrap());
    assert_eq!(
        bits.unwrap(),
        vec![0u8; 64],
        "16x8 tiles of 4 bits, all colour 0"
    );

    // Nothing happens: get_events waits its timeout and answers [].
    let started = Instant::now();
    assert_eq!(
        http.ok("session.get_events", json!([session, 0.5])).await,
        json!([])
    );
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(450) && waited < Duration::from_secs(3),
        "waited {waited:?}"
    );

    // A waiting get_events returns as soon as a placement commits.
    let poll = {
        let http = http.clone();
        let session = session.clone();
        tokio::spawn(async move {
            let started = Instant::now();
            (
                http.ok("session.get_events", json!([session, 10])).await,
                started.elapsed(),
            )
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    let placed = http
        .ok("board.place", json!([session, board, 3, 2, 5]))
        .await;
    assert_eq!(placed["placed"], true);
    assert_eq!(placed["seq"], 1);
    let (events, waited) = poll.await.unwrap();
    assert!(
        waited < Duration::from_secs(5),
        "the event came after {waited:?}"
    );
    let events = events.as_array().unwrap();
    assert_eq!(events.len(), 1, "{events:?}");
    let event = &events[0];
    assert_eq!(event["key"], key);
    assert_eq!(event["action"], "update");
    assert_eq!(event["old"], json!({"x": 3, "y": 2, "color": 0}));
    assert_eq!(event["obj"]["x"], 3);
    assert_eq!(event["obj"]["y"], 2);
    assert_eq!(event["obj"]["color"], 5);
    assert_eq!(event["obj"]["user"], user);
    assert_eq!(event["obj"]["seq"], 1);
    let placed_at = event["obj"]["placed_at"].as_str().unwrap();
    assert!(
        placed_at.ends_with('Z') && placed_at.contains('T'),
        "{placed_at}"
    );

    // The second placement within the hour is refused, with the time to retry.
    let cooldown = http
        .call("board.place", json!([session, board, 4, 2, 6]))
        .await
        .unwrap_err();
    assert_eq!(cooldown["code"], COOLDOWN);
    assert_eq!(cooldown["data"]["retry_at"], placed["next_allowed_at"]);
    // A placement made in SQL reaches the session too, with the right `old`.
    sql.execute("SELECT place.set_cooldown($1, '0')", &[&board])
        .await
        .unwrap();
    sql.execute("SELECT place.place($1, 3, 2, 7, $2)", &[&board, &user])
        .await
        .unwrap();
    let events = http.ok("session.get_events", json!([session, 5])).await;
    let events = collect_until(&http, &session, events, 2).await;
    assert_eq!(events[0]["action"], "settings");
    assert_eq!(events[0]["obj"]["cooldown"], 0.0);
    assert_eq!(events[1]["old"]["color"], 5);
    assert_eq!(events[1]["obj"]["color"], 7);
    assert_eq!(events[1]["obj"]["seq"], 2);

    // Unsubscribed: nothing more arrives.
    assert_eq!(
        http.ok("session.unsubscribe", json!([session, key])).await,
        true
    );
    assert_eq!(
        http.error_code("session.unsubscribe", json!([session, key]))
            .await,
        UNKNOWN_VIEW
    );
    sql.execute("SELECT place.place($1, 0, 0, 1, $2)", &[&board, &user])
        .await
        .unwrap();
    assert_eq!(
        http.ok("session.get_events", json!([session, 0.3])).await,
        json!([])
    );

    // Destroyed: every call on the session says so.
    assert_eq!(http.ok("session.destroy", json!([session])).await, true);
    for (method, params) in [
        ("session.get_events", json!([session, 0])),
        (
            "session.subscribe",
            json!([session, "board", {"board": board}]),
        ),
        ("session.authorize", json!([session, token])),
        ("session.unsubscribe", json!([session, key])),
        ("session.destroy", json!([session])),
        ("board.place", json!([session, board, 0, 0, 1])),
    ] {
        assert_eq!(
            http.error_code(method, params).await,
            UNKNOWN_SESSION,
            "{method}"
        );
    }
}

/// Reads events until `n` have arrived.
async fn collect_until(http: &Http, session: &Value, first: Value, n: usize) -> Vec<Value> {
    let mut events: Vec<Value> = first.as_array().unwrap().clone();
    while events.len() < n {
        let more = http.ok("session.get_events", json!([session, 5])).await;
        assert_ne!(
            more,
            json!([]),
            "only {} of {n} events arrived: {events:?}",
            events.len()
        );
        events.extend(more.as_array().unwrap().iter().cloned());
    }
    events
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_rpc_errors_batches_notifications_and_v1() {
    let url = fresh_database("gw_rpc").await;
    let sql = connect(&url).await;
    let board = create_board(&sql, "rpc", (10, 10), 2, "0").await;
    let gw = start_gateway(&url, |c| {
        c.max_batch = 5;
        c.max_poll_secs = 1;
    })
    .await;
    let http = Http::new(gw.addr);

    let (status, body) = http.post("{not json").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body.as_ref().unwrap()["error"]["code"], -32700);
    assert_eq!(body.unwrap()["id"], Value::Null);

    for (request, code) in [
        (
            json!({"jsonrpc": "2.0", "method": "no.such", "id": 1}),
            -32601,
        ),
        (json!({"jsonrpc": "2.0", "method": 5, "id": 1}), -32600),
        (
            json!({"jsonrpc": "3.0", "method": "session.create", "id": 1}),
            -32600,
        ),
        (
            json!({"jsonrpc": "2.0", "method": "session.create", "params": "x", "id": 1}),
            -32600,
        ),
        (
            json!({"jsonrpc": "2.0", "method": "session.create", "params": [1], "id": 1}),
            INVALID_PARAMS,
        ),
        (
            json!({"jsonrpc": "2.0", "method": "board.get", "params": [], "id": 1}),
            INVALID_PARAMS,
        ),
        (
            json!({"jsonrpc": "2.0", "method": "board.get", "params": [true], "id": 1}),
            INVALID_PARAMS,
        ),
        (
            json!({"jsonrpc": "2.0", "method": "board.get", "params": {"bored": 1}, "id": 1}),
            INVALID_PARAMS,
        ),
        (
            json!({"jsonrpc": "2.0", "method": "board.get", "params": [999], "id": 1}),
            UNKNOWN_BOARD,
        ),
        (
            json!({"jsonrpc": "2.0", "method": "board.get", "params": ["nope"], "id": 1}),
            UNKNOWN_BOARD,
        ),
    ] {
        let (status, body) = http.post(&request.to_string()).await;
        assert_eq!(status, StatusCode::OK);
        let body = body.unwrap();
        assert_eq!(body["error"]["code"], code, "{request} -> {body}");
        assert!(body["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()));
        assert_eq!(body["jsonrpc"], "2.0");
    }

    // Bad params of each kind, on a real session.
    let session = http.ok("session.create", json!([])).await;
    for params in [
        json!([session, -1]),
        json!([session, "soon"]),
        json!([session]),
        json!({"session": session, "timeout": 1, "extra": 2}),
    ] {
        assert_eq!(
            http.error_code("session.get_events", params.clone()).await,
            INVALID_PARAMS,
            "{params}"
        );
    }
    assert_eq!(
        http.error_code(
            "session.subscribe",
            json!([session, "chat", {"board": board}])
        )
        .await,
        UNKNOWN_VIEW
    );
    assert_eq!(
        http.error_code("session.subscribe", json!([session, "board", {}]))
            .await,
        INVALID_PARAMS
    );
    assert_eq!(
        http.error_code(
            "session.subscribe",
            json!([session, "board", {"board": board, "zoom": 2}])
        )
        .await,
        INVALID_PARAMS
    );
    assert_eq!(
        http.error_code("session.get_events", json!(["no-such-session", 0]))
            .await,
        UNKNOWN_SESSION
    );
    // Named params work like positional ones.
    let reply = http.ok("session.subscribe", json!({"session": session, "view": "board", "params": {"board": board, "compact": true}})).await;
    assert_eq!(reply[0], format!("board/{board}/compact"));

    // Timeouts beyond the cap wait the cap, however large.
    let started = Instant::now();
    assert_eq!(
        http.ok("session.get_events", json!([session, 1e300])).await,
        json!([])
    );
    assert!(started.elapsed() < Duration::from_secs(3));
    // A NUL in a string is the caller's mistake, not an internal error.
    assert_eq!(
        http.error_code("session.authorize", json!([session, "a\u{0}b"]))
            .await,
        INVALID_PARAMS
    );
    assert_eq!(
        http.error_code("board.get", json!(["a\u{0}b"])).await,
        INVALID_PARAMS
    );

    // A batch is answered in order; notifications in it get no answer.
    let batch = json!([
        {"jsonrpc": "2.0", "method": "board.list", "id": "a"},
        {"jsonrpc": "2.0", "method": "session.create"},
        {"jsonrpc": "2.0", "method": "no.such", "id": "b"},
        7,
        {"jsonrpc": "2.0", "method": "board.get", "params": {"board": board}, "id": "c"}
    ]);
    let (status, body) = http.post(&batch.to_string()).await;
    assert_eq!(status, StatusCode::OK);
    let answers = body.unwrap();
    let answers = answers.as_array().unwrap();
    assert_eq!(answers.len(), 4, "{answers:?}");
    assert_eq!(answers[0]["id"], "a");
    assert_eq!(answers[0]["result"][0]["name"], "rpc");
    assert_eq!(
        (
            answers[1]["id"].clone(),
            answers[1]["error"]["code"].clone()
        ),
        (json!("b"), json!(-32601))
    );
    assert_eq!(
        (
            answers[2]["id"].clone(),
            answers[2]["error"]["code"].clone()
        ),
        (Value::Null, json!(-32600))
    );
    assert_eq!(answers[3]["result"]["id"], board);

    // All notifications: no body at all.
    let notifications = json!([{"jsonrpc": "2.0", "method": "session.create"}, {"jsonrpc": "2.0", "method": "board.list"}]);
    assert_eq!(
        http.post(&notifications.to_string()).await,
        (StatusCode::NO_CONTENT, None)
    );
    assert_eq!(
        http.post(r#"{"jsonrpc":"2.0","method":"no.such"}"#).await,
        (StatusCode::NO_CONTENT, None)
    );
    // An empty batch, and one over the limit, are single errors.
    assert_eq!(http.post("[]").await.1.unwrap()["error"]["code"], -32600);
    let six: Vec<Value> = (0..6)
        .map(|i| json!({"jsonrpc": "2.0", "method": "board.list", "id": i}))
        .collect();
    assert_eq!(
        http.post(&json!(six).to_string()).await.1.unwrap()["error"]["code"],
        -32600
    );

    // JSON-RPC 1.0 style (no "jsonrpc"): answered as {result, error, id}.
    let (_, body) = http
        .post(r#"{"method":"session.create","params":[],"id":9}"#)
        .await;
    let body = body.unwrap();
    assert!(body.get("jsonrpc").is_none());
    assert!(body["result"].is_string());
    assert_eq!(
        (body["error"].clone(), body["id"].clone()),
        (Value::Null, json!(9))
    );
    let (_, body) = http
        .post(r#"{"method":"no.such","params":[],"id":"x"}"#)
        .await;
    let body = body.unwrap();
    assert_eq!(
        (
            body["result"].clone(),
            body["error"]["code"].clone(),
            body["id"].clone()
        ),
        (Value::Null, json!(-32601), json!("x"))
    );
    // A 1.0 notification has a null id.
    assert_eq!(
        http.post(r#"{"method":"session.create","params":[],"id":null}"#)
            .await,
        (StatusCode::NO_CONTENT, None)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn placements_are_checked_before_they_join_a_group() {
    let url = fresh_database("gw_place").await;
    let sql = connect(&url).await;
    let board = create_board(&sql, "place", (10, 5), 2, "0").await;
    let (_, token) = create_users_with_tokens(&sql, "p", 1).await.remove(0);
    let gw = start_gateway(&url, |_| {}).await;
    let http = Http::new(gw.addr);
    let session = http.ok("session.create", json!([])).await;
    http.ok("session.authorize", json!([session, token])).await;
    for (x, y, color) in [(10, 0, 1), (0, 5, 1), (-1, 0, 1), (0, 0, 4), (0, 0, -1)] {
        assert_eq!(
            http.error_code("board.place", json!([session, board, x, y, color]))
                .await,
            INVALID_PARAMS
        );
    }
    assert_eq!(
        http.error_code("board.place", json!([session, board, 0, 0, 1.5]))
            .await,
        INVALID_PARAMS
    );
    assert_eq!(
        http.error_code("board.place", json!([session, 424242, 0, 0, 1]))
            .await,
        UNKNOWN_BOARD
    );
    sql.execute("SELECT place.set_board_state($1, 'paused')", &[&board])
        .await
        .unwrap();
    // The gateway learns of the pause from the stream.
    let mut code = 0;
    for _ in 0..50 {
        code = match http
            .call("board.place", json!([session, board, 0, 0, 1]))
            .await
        {
            Ok(_) => 0,
            Err(e) => e["code"].as_i64().unwrap(),
        };
        if code == BOARD_NOT_OPEN {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(code, BOARD_NOT_OPEN);
    let (seq, _) = board_bits(&sql, board).await;
    let history = history_rows(&sql).await;
    assert_eq!(
        seq, history,
        "nothing was placed by the refused calls except at most one before the pause"
    );
    sql.execute("SELECT place.set_board_state($1, 'open')", &[&board])
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let placed = http
        .ok(
            "board.place",
            json!({"session": session, "board": "place", "x": 9, "y": 4, "color": 3}),
        )
        .await;
    assert_eq!(placed["seq"], seq + 1);
    let history = http.ok("board.tile_history", json!([board, 9, 4])).await;
    assert_eq!(history[0]["color"], 3);
    assert_eq!(history[0]["user_name"], "p-0");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bits_are_served_with_an_etag_and_healthz_says_ok() {
    let url = fresh_database("gw_bits").await;
    let sql = connect(&url).await;
    let board = create_board(&sql, "bits", (100, 50), 4, "0").await;
    let (user, _) = create_users_with_tokens(&sql, "b", 1).await.remove(0);
    sql.execute("SELECT place.place($1, 7, 3, 9, $2)", &[&board, &user])
        .await
        .unwrap();
    let gw = start_gateway(&url, |_| {}).await;
    let http = Http::new(gw.addr);

    let (status, headers, body) = http
        .get(&format!("/boards/{board}/bits"), &HeaderMap::new())
        .await;
    assert_eq!(status, StatusCode::OK);
    let (seq, bits) = board_bits(&sql, board).await;
    assert_eq!(body.as_ref(), bits.as_slice());
    assert_eq!(headers["x-pgplace-seq"], seq.to_string().as_str());
    assert_eq!(headers["content-type"], "application/octet-stream");
    assert!(headers["cache-control"]
        .to_str()
        .unwrap()
        .contains("max-age=1"));
    assert!(headers["cache-control"]
        .to_str()
        .unwrap()
        .contains("stale-while-revalidate="));
    let etag = headers["etag"].clone();

    let mut conditional = HeaderMap::new();
    conditional.insert("if-none-match", etag.clone());
    let (status, headers, body) = http
        .get(&format!("/boards/{board}/bits"), &conditional)
        .await;
    assert_eq!((status, body.len()), (StatusCode::NOT_MODIFIED, 0));
    assert_eq!(headers["etag"], etag);
    let mut weak = HeaderMap::new();
    let weak_etag = format!("W/{}", etag.to_str().unwrap());
    weak.insert("if-none-match", weak_etag.parse().unwrap());
    assert_eq!(
        http.get(&format!("/boards/{board}/bits"), &weak).await.0,
        StatusCode::NOT_MODIFIED
    );

    // A new placement changes the ETag (once the gateway has it).
    sql.execute("SELECT place.place($1, 8, 3, 2, $2)", &[&board, &user])
        .await
        .unwrap();
    let mut status = StatusCode::NOT_MODIFIED;
    for _ in 0..50 {
        status = http
            .get(&format!("/boards/{board}/bits"), &conditional)
            .await
            .0;
        if status == StatusCode::OK {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(status, StatusCode::OK);

    assert_eq!(
        http.get("/boards/4242/bits", &HeaderMap::new()).await.0,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        http.get("/boards/abc/bits", &HeaderMap::new()).await.0,
        StatusCode::BAD_REQUEST
    );
    assert_eq!(
        http.get("/nowhere", &HeaderMap::new()).await.0,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        http.get("/jsonrpc", &HeaderMap::new()).await.0,
        StatusCode::METHOD_NOT_ALLOWED
    );
    let (status, _, body) = http.get("/healthz", &HeaderMap::new()).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(serde_json::from_slice::<Value>(&body).unwrap()["ok"], true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_user_fails_alone_and_loses_the_sessions_user() {
    let url = fresh_database("gw_deleted_user").await;
    let sql = connect(&url).await;
    let board = create_board(&sql, "del", (30, 30), 4, "0").await;
    let users = create_users_with_tokens(&sql, "d", 2).await;
    let gw = start_gateway(&url, |_| {}).await;
    let http = Http::new(gw.addr);
    let mut sessions = Vec::new();
    for (_, token) in &users {
        let session = http.ok("session.create", json!([])).await;
        http.ok("session.authorize", json!([session, token])).await;
        sessions.push(session);
    }
    sql.execute("DELETE FROM place.users WHERE id = $1", &[&users[1].0])
        .await
        .unwrap();
    // Both users place at once, many times: their calls share groups.
    let mut calls = tokio::task::JoinSet::new();
    for i in 0..40 {
        let http = http.clone();
        let session = sessions[i % 2].clone();
        calls.spawn(async move {
            let result = http
                .call("board.place", json!([session, board, i % 30, i / 30, 1]))
                .await;
            (i % 2, result)
        });
    }
    let mut placed = 0;
    while let Some(call) = calls.join_next().await {
        match call.unwrap() {
            (0, Ok(result)) => {
                assert_eq!(result["placed"], true);
                placed += 1;
            }
            (1, Err(error)) => assert_eq!(error["code"], NOT_AUTHORIZED),
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(placed, 20, "every placement of the existing user was made");
    let history = history_rows(&sql).await;
    assert_eq!(history, 20);
    // The session no longer claims the deleted user.
    let error = http
        .call("board.place", json!([sessions[1], board, 0, 0, 1]))
        .await
        .unwrap_err();
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("session.authorize"),
        "{error}"
    );
}
