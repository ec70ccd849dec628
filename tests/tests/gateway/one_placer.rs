//! One placer per board (`--placer-url`): the gateway that holds a board's lease groups its
//! placements, and another gateway sends it the ones it takes. Each answer is the one the
//! database gave (seq, cooldown), and the route that takes them from other gateways
//! refuses anyone without the placer's token before it reads a byte of the body.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Request, StatusCode};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use pgplace_tests::gateway::{start_gateway, start_placer, Http, FORWARDED_METRIC};
use pgplace_tests::{
    board_seq, connect, create_board, create_users_with_tokens, fresh_database, placer_leases,
};
use serde_json::json;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

async fn placer(url: &str) -> pgplace_gateway::Running {
    start_placer(url, |_| {}).await
}

/// The address and token of the gateway that holds `board`'s lease, once one does (a
/// gateway claims it as it starts serving the board, beside its first placement).
async fn holder(sql: &tokio_postgres::Client, board: i64) -> (String, String) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(row) = sql
            .query_opt(
                "SELECT address, token FROM place.placers WHERE board_id = $1",
                &[&board],
            )
            .await
            .unwrap()
        {
            return (row.get(0), row.get(1));
        }
        assert!(
            Instant::now() < deadline,
            "no gateway claimed board {board}'s lease"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A fresh database with one board (no cooldown) and one user, a placer gateway on it, and
/// a session of that user signed in there.
struct OnePlayer {
    url: String,
    sql: tokio_postgres::Client,
    board: i64,
    user: (i64, String),
    gateway: pgplace_gateway::Running,
    http: Http,
    session: serde_json::Value,
}

async fn one_player(database: &str, board_name: &str) -> OnePlayer {
    let url = fresh_database(database).await;
    let sql = connect(&url).await;
    let board = create_board(&sql, board_name, (16, 16), 4, "0").await;
    let user = create_users_with_tokens(&sql, board_name, 1)
        .await
        .remove(0);
    let gateway = placer(&url).await;
    let http = Http::new(gateway.addr);
    let session = http.ok("session.create", json!([])).await;
    http.ok("session.authorize", json!([session, user.1])).await;
    OnePlayer {
        url,
        sql,
        board,
        user,
        gateway,
        http,
        session,
    }
}

/// POST /placer/boards/{board} to `addr` with `token` (if any): the status and the body.
async fn post_group(
    addr: SocketAddr,
    board: i64,
    token: Option<&str>,
    body: &str,
) -> (StatusCode, String) {
    let client = Client::builder(TokioExecutor::new()).build_http();
    let mut request = Request::post(format!("http://{addr}/placer/boards/{board}"))
        .header("content-type", "application/json");
    if let Some(token) = token {
        request = request.header("x-pgplace-placer-token", token);
    }
    let response = client
        .request(
            request
                .body(Full::new(Bytes::from(body.to_string())))
                .unwrap(),
        )
        .await
        .expect("an answer");
    let status = response.status();
    // Every refusal says it placed nothing (the sender may then place the group itself);
    // an answer that placed says no such thing.
    let not_placed = response
        .headers()
        .get("x-pgplace-placer")
        .map(|v| v.as_bytes())
        == Some(b"not-placed");
    assert_eq!(not_placed, status != StatusCode::OK, "{status}");
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_without_the_lease_places_through_the_one_that_holds_it() {
    let url = fresh_database("gw_one_placer").await;
    let sql = connect(&url).await;
    let board = create_board(&sql, "grouped", (64, 64), 4, "0").await;
    let slow = create_board(&sql, "slow", (64, 64), 4, "1 hour").await;
    let users = create_users_with_tokens(&sql, "grouped", 8).await;
    let (a, b) = (placer(&url).await, placer(&url).await);
    let (on_a, on_b) = (Http::new(a.addr), Http::new(b.addr));
    // A serves the boards first, so A holds their leases; B learns so at its first claim.
    let session_a = on_a.ok("session.create", json!([])).await;
    on_a.ok("session.authorize", json!([session_a, users[0].1]))
        .await;
    on_a.ok("board.place", json!([session_a, board, 0, 0, 1]))
        .await;
    on_a.ok("board.place", json!([session_a, slow, 0, 0, 1]))
        .await;
    for board in [board, slow] {
        assert_eq!(holder(&sql, board).await.0, format!("http://{}", a.addr));
    }

    let mut sessions = Vec::new();
    for (_, token) in &users {
        let session = on_b.ok("session.create", json!([])).await;
        on_b.ok("session.authorize", json!([session, token])).await;
        sessions.push(session);
    }
    // Until B's first claim has answered, B places itself: wait for a forwarded placement.
    let before = on_b.metric(FORWARDED_METRIC).await.unwrap_or(0.0);
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut round = 1;
    while on_b.metric(FORWARDED_METRIC).await.unwrap_or(0.0) == before {
        assert!(
            Instant::now() < deadline,
            "B never forwarded a placement to A"
        );
        on_b.ok("board.place", json!([sessions[0], board, round, 0, 1]))
            .await;
        round += 1;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // Many at once through B: each answer is its own row of the history.
    let mut placing = tokio::task::JoinSet::new();
    for (i, s) in sessions.iter().cloned().enumerate() {
        let on_b = on_b.clone();
        placing.spawn(async move {
            let (x, y, color) = (i as i32, 10 + round, (i % 15 + 1) as i32);
            let answer = on_b.ok("board.place", json!([s, board, x, y, color])).await;
            (i, x, y, color, answer["seq"].as_i64().expect("a seq"))
        });
    }
    let placed = placing.join_all().await;
    for (i, x, y, color, seq) in placed {
        let row = sql
            .query_one(
                "SELECT x, y, color, user_id FROM place.placements WHERE board_id = $1 AND seq = $2",
                &[&board, &seq],
            )
            .await
            .unwrap();
        assert_eq!(
            (
                row.get::<_, i32>(0),
                row.get::<_, i32>(1),
                row.get::<_, i32>(2),
                row.get::<_, i64>(3)
            ),
            (x, y, color, users[i].0),
            "seq {seq} is placement {i}'s"
        );
    }
    let forwarded = on_b.metric(FORWARDED_METRIC).await.unwrap_or(0.0) - before;
    assert!(
        forwarded >= users.len() as f64,
        "B forwarded its placements ({forwarded})"
    );

    // A refusal comes back as the placer's database gave it: the cooldown, with its time.
    let user = &users[1];
    let session = on_b.ok("session.create", json!([])).await;
    on_b.ok("session.authorize", json!([session, user.1])).await;
    // B claims a board's lease from its first placement there on (which B places itself,
    // before the claim answers): another user's first, then a moment for the answer.
    on_b.ok("board.place", json!([sessions[2], slow, 1, 1, 1]))
        .await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let forwarded_before = on_b.metric(FORWARDED_METRIC).await.unwrap_or(0.0);
    on_b.ok("board.place", json!([session, slow, 5, 5, 2]))
        .await;
    let refused = on_b
        .err("board.place", json!([session, slow, 6, 5, 2]))
        .await;
    assert_eq!(refused["code"], -32003, "{refused}");
    assert!(refused["data"]["retry_at"].is_string(), "{refused}");
    assert_eq!(
        on_b.metric(FORWARDED_METRIC).await.unwrap_or(0.0) - forwarded_before,
        2.0,
        "both went through A"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_placer_route_takes_nothing_without_the_token() {
    let OnePlayer {
        url,
        sql,
        board,
        user,
        gateway: a,
        http: on_a,
        session,
    } = one_player("gw_placer_route", "guarded").await;
    on_a.ok("board.place", json!([session, board, 0, 0, 1]))
        .await;
    let (_, token) = holder(&sql, board).await;
    // Forwarded placements name their sessions by public id: the id is the client's secret.
    let public: i64 = sql
        .query_one(
            "SELECT public_id FROM place.sessions WHERE id_hash = sha256(convert_to($1, 'UTF8'))",
            &[&session.as_str().unwrap()],
        )
        .await
        .unwrap()
        .get(0);
    let group = json!({"items": [{"session": public, "user": user.0, "x": 1, "y": 1,
                                  "color": 2, "key": null}]})
    .to_string();
    let seq = |sql: tokio_postgres::Client| async move { board_seq(&sql, board).await };
    let at_first = seq(connect(&url).await).await;
    for bad in [None, Some("not-the-token"), Some(&token[1..])] {
        let (status, body) = post_group(a.addr, board, bad, &group).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{bad:?}: {body}");
    }
    assert_eq!(
        seq(connect(&url).await).await,
        at_first,
        "nothing was placed"
    );
    // Garbage with the token is refused too, and places nothing.
    let (status, body) = post_group(a.addr, board, Some(&token), "{\"items\": 3}").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(
        seq(connect(&url).await).await,
        at_first,
        "nothing was placed"
    );
    // With it, the group is placed and answered in order.
    let (status, body) = post_group(a.addr, board, Some(&token), &group).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let answer: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(answer["outcomes"][0]["done"]["placed"], true, "{body}");
    assert_eq!(answer["outcomes"][0]["done"]["seq"], at_first + 1, "{body}");

    // A gateway that is no placer has no such route.
    let plain = start_gateway(&url, |_| {}).await;
    let (status, body) = post_group(plain.addr, board, Some(&token), &group).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert_eq!(seq(connect(&url).await).await, at_first + 1);
}

/// A database that cannot take claims (a schema before 0.8.12 has no
/// `place.claim_placer`; here a stand-in counts its calls and fails as a missing function
/// does) leaves every placement to the gateway that takes it, and the gateway asks once:
/// every failed claim would be an error in the server's log, a second per board.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_claim_placer_a_gateway_places_itself_and_asks_once() {
    // The gateway claims nothing before its first placement on the board.
    let OnePlayer {
        sql,
        board,
        gateway: _running,
        http: on_a,
        session,
        ..
    } = one_player("gw_placer_unsupported", "unclaimed").await;
    sql.batch_execute(
        "ALTER EXTENSION pgplace DROP FUNCTION place.claim_placer(bigint, bigint, text, text, integer);
         DROP FUNCTION place.claim_placer(bigint, bigint, text, text, integer);
         CREATE SEQUENCE public.claims;
         CREATE FUNCTION place.claim_placer(board bigint, claimant bigint, claimant_address text,
                                            claimant_token text, lease_ms integer)
         RETURNS TABLE (gateway bigint, address text, token text) LANGUAGE plpgsql AS $$
         BEGIN
             PERFORM nextval('public.claims');
             RAISE EXCEPTION 'function place.claim_placer does not exist' USING ERRCODE = '42883';
         END $$;",
    )
    .await
    .unwrap();
    let mut last = 0;
    for x in 0..4 {
        let answer = on_a
            .ok("board.place", json!([session, board, x, 0, 1]))
            .await;
        let seq = answer["seq"].as_i64().expect("placed, with a seq");
        assert!(seq > last, "{answer}");
        last = seq;
        tokio::time::sleep(Duration::from_millis(1200)).await;
    }
    let claims: i64 = sql
        .query_one(
            "SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM public.claims",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(
        claims, 1,
        "one claim in 4.8 s of placements, not one a second"
    );
}

/// A gateway that shuts down gracefully gives its leases up: the row goes (a lease that
/// merely runs out stays until another gateway claims the board), so the next claim of
/// another gateway takes the board at once instead of 3 s after the last renewal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_shutting_down_gives_its_leases_up() {
    let OnePlayer {
        sql,
        board,
        gateway: a,
        http: on_a,
        session,
        ..
    } = one_player("gw_placer_give_up", "handed").await;
    on_a.ok("board.place", json!([session, board, 0, 0, 1]))
        .await;
    assert_eq!(holder(&sql, board).await.0, format!("http://{}", a.addr));
    a.shutdown_gracefully(Duration::from_secs(5)).await;
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let leases = placer_leases(&sql, board).await;
        if leases == 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the lease is still there 2 s after the shutdown"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
