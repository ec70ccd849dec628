//! Several gateways, one database: any gateway serves any session; acking polls resume
//! exactly from their cursor (another gateway, a lost answer, a restart); legacy polls that
//! move get one `reset` per view, never a gap or a duplicate; `since` resumes a board.

use pgplace_gateway::Running;
use pgplace_tests::gateway::{start_gateway, Http};
use pgplace_tests::{connect, create_board, create_users, fresh_database};
use serde_json::{json, Value};
use std::time::{Duration, Instant};
use tokio_postgres::Client;

async fn place(sql: &Client, board: i64, user: i64, n: i32) {
    for i in 0..n {
        sql.execute(
            "SELECT place.place($1, $2, 0, $3, $4)",
            &[&board, &(i % 8), &(1 + i % 3), &user],
        )
        .await
        .expect("place");
    }
}

/// The seqs of the tile events (Qik form) in `events`.
fn seqs(events: &Value) -> Vec<i64> {
    events
        .as_array()
        .expect("a list of events")
        .iter()
        .filter(|e| e["action"] == "update")
        .map(|e| e["obj"]["seq"].as_i64().unwrap())
        .collect()
}

/// An acking poll: (events, cursor).
async fn acked(http: &Http, session: &Value, ack: &str, timeout: f64) -> (Value, String) {
    let answer = http
        .ok("session.get_events", json!([session, timeout, ack]))
        .await;
    let cursor = answer["cursor"].as_str().expect("a cursor").to_string();
    (answer["events"].clone(), cursor)
}

/// Acking polls through `http` until `got` holds `n` seqs, each acking the answer before.
async fn acked_until(
    http: &Http,
    session: &Value,
    cursor: &mut String,
    got: &mut Vec<i64>,
    n: usize,
) {
    while got.len() < n {
        let (events, next) = acked(http, session, cursor, 5.0).await;
        got.extend(seqs(&events));
        *cursor = next;
    }
}

/// Two gateways on one database.
async fn two_gateways(url: &str) -> (Running, Running) {
    (
        start_gateway(url, |_| {}).await,
        start_gateway(url, |_| {}).await,
    )
}

async fn setup(name: &str) -> (String, Client, i64, i64) {
    let url = fresh_database(name).await;
    let sql = connect(&url).await;
    let board = create_board(&sql, "scale", (8, 2), 4, "0").await;
    let user = create_users(&sql, "scaler", 1).await[0];
    (url, sql, board, user)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acking_polls_alternating_gateways_see_every_seq_once() {
    let _alone = pgplace_tests::alone();
    let (url, sql, board, user) = setup("gw_scale_ack").await;
    let (a, b) = two_gateways(&url).await;
    let gateways = [Http::new(a.addr), Http::new(b.addr)];
    let session = gateways[0].ok("session.create", json!([])).await;
    let reply = gateways[1]
        .ok(
            "session.subscribe",
            json!([session, "board", {"board": board}]),
        )
        .await;
    assert_eq!(reply[1]["seq"], 0);
    let (mut got, mut cursor) = (Vec::new(), String::new());
    for round in 0..12 {
        place(&sql, board, user, 3).await;
        let http = &gateways[round % 2];
        // Until this round's three arrived (an answer may hold some of them).
        acked_until(http, &session, &mut cursor, &mut got, 3 * (round + 1)).await;
    }
    assert_eq!(got, (1..=36).collect::<Vec<i64>>());
    // Nothing more, on either gateway.
    for http in &gateways {
        let (events, _) = acked(http, &session, &cursor, 0.0).await;
        assert_eq!(events, json!([]));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_answer_comes_again_and_nothing_twice_after_the_ack() {
    let _alone = pgplace_tests::alone();
    let (url, sql, board, user) = setup("gw_scale_lost").await;
    let (a, b) = two_gateways(&url).await;
    let (a_http, b_http) = (Http::new(a.addr), Http::new(b.addr));
    let session = a_http.ok("session.create", json!([])).await;
    a_http
        .ok(
            "session.subscribe",
            json!([session, "board", {"board": board}]),
        )
        .await;
    place(&sql, board, user, 2).await;
    let (first, first_cursor) = acked(&a_http, &session, "", 5.0).await;
    let first_seqs = seqs(&first);
    assert!(!first_seqs.is_empty());
    place(&sql, board, user, 2).await;
    // The client never received `first`: it acks what it had (nothing), on either gateway.
    for http in [&a_http, &b_http] {
        let mut again = Vec::new();
        let mut cursor = String::new();
        acked_until(http, &session, &mut cursor, &mut again, 4).await;
        assert_eq!(again, [1, 2, 3, 4]);
    }
    // It did receive `first`: the rest only.
    let mut rest = Vec::new();
    let mut cursor = first_cursor;
    acked_until(
        &b_http,
        &session,
        &mut cursor,
        &mut rest,
        4 - first_seqs.len(),
    )
    .await;
    let all: Vec<i64> = first_seqs.iter().chain(&rest).copied().collect();
    assert_eq!(all, [1, 2, 3, 4]);
}

/// The CI of 5acebe4 saw a gateway answer an ack from its copy of the session made before
/// a subscribe through the other gateway: the answer's cursor lost the view, and the next
/// answer gave the view's events again from where it began. Here the other gateway never
/// hears of the subscribe at all (the database's `drop` is silenced), so only the ack's
/// own word that the session changed can save it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ack_from_a_newer_session_than_a_gateways_copy_is_answered_from_the_row() {
    let _alone = pgplace_tests::alone();
    let (url, sql, board, user) = setup("gw_scale_stale_copy").await;
    let (a, b) = two_gateways(&url).await;
    let (a_http, b_http) = (Http::new(a.addr), Http::new(b.addr));
    // B makes the session, so it has a copy of it with no view.
    let session = b_http.ok("session.create", json!([])).await;
    sql.batch_execute(
        "CREATE OR REPLACE FUNCTION place._session_dropped(public_id bigint, gateway bigint) \
         RETURNS void LANGUAGE plpgsql AS $$ BEGIN END $$",
    )
    .await
    .expect("silence drop");
    a_http
        .ok(
            "session.subscribe",
            json!([session, "board", {"board": board}]),
        )
        .await;
    place(&sql, board, user, 3).await;
    let mut got = Vec::new();
    let mut cursor = String::new();
    acked_until(&a_http, &session, &mut cursor, &mut got, 3).await;
    place(&sql, board, user, 3).await;
    // B must not answer from its copy without the view: it would leave the view out of
    // its cursor, and A would give 1, 2, 3 again.
    let (events, next) = acked(&b_http, &session, &cursor, 2.0).await;
    got.extend(seqs(&events));
    cursor = next;
    acked_until(&a_http, &session, &mut cursor, &mut got, 6).await;
    assert_eq!(got, (1..=6).collect::<Vec<i64>>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_acks_are_refused_and_change_nothing() {
    let _alone = pgplace_tests::alone();
    let (url, sql, board, user) = setup("gw_scale_bad_ack").await;
    let gw = start_gateway(&url, |_| {}).await;
    let http = Http::new(gw.addr);
    let mine = http.ok("session.create", json!([])).await;
    let other = http.ok("session.create", json!([])).await;
    for session in [&mine, &other] {
        http.ok(
            "session.subscribe",
            json!([session, "board", {"board": board}]),
        )
        .await;
    }
    let (_, other_cursor) = acked(&http, &other, "", 0.0).await;
    place(&sql, board, user, 1).await;
    for bad in [
        json!("not a cursor"),
        json!("e30"),
        json!(other_cursor),
        json!(17),
    ] {
        assert_eq!(
            http.error_code("session.get_events", json!([mine, 0, bad]))
                .await,
            -32602,
            "{bad}"
        );
    }
    let (events, _) = acked(&http, &mine, "", 5.0).await;
    assert_eq!(seqs(&events), [1]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_legacy_client_moving_between_gateways_goes_on_exactly_without_a_reset() {
    let _alone = pgplace_tests::alone();
    let (url, sql, board, user) = setup("gw_scale_legacy").await;
    let (a, b) = two_gateways(&url).await;
    let gateways = [Http::new(a.addr), Http::new(b.addr)];
    let session = gateways[0].ok("session.create", json!([])).await;
    let reply = gateways[0]
        .ok(
            "session.subscribe",
            json!([session, "board", {"board": board}]),
        )
        .await;
    // The client's view of the board: the seq it stands at.
    let mut at = reply[1]["seq"].as_i64().unwrap();
    // Twice on A, then B, A, B, then every poll on the other: the gateway that held the
    // session hands over where its view stands, so each move goes on from there.
    let route = [0, 0, 1, 0, 1, 1, 0, 1, 0, 1, 0, 1];
    let mut polls = 0;
    for (round, gw) in route.into_iter().enumerate() {
        place(&sql, board, user, 2).await;
        let target = 2 * (round as i64 + 1);
        while at < target {
            let events = gateways[(gw + polls) % 2]
                .ok("session.get_events", json!([session, 5]))
                .await;
            if round >= 6 {
                polls += 1;
            }
            for event in events.as_array().unwrap() {
                assert_ne!(event["action"], "reset", "no reset on a move: {events}");
                if event["action"] == "update" {
                    let seq = event["obj"]["seq"].as_i64().unwrap();
                    assert_eq!(seq, at + 1, "exactly the next seq: {events}");
                    at = seq;
                }
            }
        }
    }
    assert_eq!(at, 2 * route.len() as i64);
    // Both gateways counted their hand-overs as handed, none as given up.
    let mut handed = 0.0;
    for gateway in &gateways {
        let series =
            |outcome| format!("pgplace_legacy_handover_seconds_count{{outcome=\"{outcome}\"}}");
        assert_eq!(gateway.metric(&series("not_handed")).await, None);
        handed += gateway.metric(&series("handed")).await.unwrap_or(0.0);
    }
    assert!(handed >= 3.0, "every move was handed over ({handed})");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poll_on_another_gateway_answers_the_waiting_one_and_destroy_reaches_every_gateway() {
    let _alone = pgplace_tests::alone();
    let (url, _sql, board, _user) = setup("gw_scale_newer").await;
    let (a, b) = two_gateways(&url).await;
    let (a_http, b_http) = (Http::new(a.addr), Http::new(b.addr));
    let session = a_http.ok("session.create", json!([])).await;
    a_http
        .ok(
            "session.subscribe",
            json!([session, "board", {"board": board}]),
        )
        .await;
    let waiting = {
        let (http, session) = (a_http.clone(), session.clone());
        tokio::spawn(async move {
            let started = Instant::now();
            let events = http.ok("session.get_events", json!([session, 30])).await;
            (events, started.elapsed())
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let newer = {
        let (http, session) = (b_http.clone(), session.clone());
        tokio::spawn(async move { http.ok("session.get_events", json!([session, 30])).await })
    };
    let (events, waited) = waiting.await.unwrap();
    assert_eq!(events, json!([]));
    assert!(
        waited < Duration::from_secs(10),
        "answered when B took over: {waited:?}"
    );
    // Destroyed through A: B's waiting poll ends, and both gateways forget it.
    tokio::time::sleep(Duration::from_millis(300)).await;
    a_http.ok("session.destroy", json!([session])).await;
    let events = tokio::time::timeout(Duration::from_secs(10), newer)
        .await
        .expect("the waiting poll ended")
        .unwrap();
    assert!(events
        .as_array()
        .unwrap()
        .iter()
        .all(|e| e["action"] == "reset"));
    for http in [&a_http, &b_http] {
        assert_eq!(
            http.error_code("session.get_events", json!([session, 0]))
                .await,
            -32001
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_gateway_answers_acks_from_the_history_and_since_resumes_a_board() {
    let _alone = pgplace_tests::alone();
    let (url, sql, board, user) = setup("gw_scale_restart").await;
    let first = start_gateway(&url, |_| {}).await;
    let http = Http::new(first.addr);
    let session = http.ok("session.create", json!([])).await;
    http.ok(
        "session.subscribe",
        json!([session, "board", {"board": board}]),
    )
    .await;
    place(&sql, board, user, 3).await;
    let mut got = Vec::new();
    let mut cursor = String::new();
    acked_until(&http, &session, &mut cursor, &mut got, 3).await;
    drop(first);
    place(&sql, board, user, 4).await;
    // A new gateway loads the board at seq 7; the client stands at 3.
    let second = start_gateway(&url, |_| {}).await;
    let http = Http::new(second.addr);
    http.ok("board.get", json!([board])).await;
    place(&sql, board, user, 1).await;
    while got.len() < 8 {
        let (events, next) = acked(&http, &session, &cursor, 5.0).await;
        // Tiles, and first the board's settings (the new gateway's log did not reach back
        // to where the client stood): no reset.
        assert!(
            events
                .as_array()
                .unwrap()
                .iter()
                .all(|e| e["action"] == "update" || e["action"] == "settings"),
            "no reset: {events}"
        );
        got.extend(seqs(&events));
        cursor = next;
    }
    assert_eq!(got, (1..=8).collect::<Vec<i64>>());

    // A reloaded page: a new session resumes from the seq it holds.
    let page = http.ok("session.create", json!([])).await;
    let reply = http
        .ok(
            "session.subscribe",
            json!([page, "board", {"board": board, "since": 2}]),
        )
        .await;
    assert_eq!(reply[1], json!({"seq": 2, "resumed": true}));
    let (events, _) = acked(&http, &page, "", 5.0).await;
    assert_eq!(seqs(&events), (3..=8).collect::<Vec<i64>>());
    for bad in [json!(-1), json!(9), json!("2")] {
        assert_eq!(
            http.error_code(
                "session.subscribe",
                json!([page, "board", {"board": board, "since": bad}])
            )
            .await,
            -32602,
            "{bad}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watching_counts_subscriptions_on_every_gateway() {
    let _alone = pgplace_tests::alone();
    let (url, _sql, board, _user) = setup("gw_scale_watching").await;
    let (a, b) = two_gateways(&url).await;
    let gateways = [Http::new(a.addr), Http::new(b.addr)];
    for http in &gateways {
        let session = http.ok("session.create", json!([])).await;
        http.ok(
            "session.subscribe",
            json!([session, "board", {"board": board}]),
        )
        .await;
    }
    for http in &gateways {
        let started = Instant::now();
        loop {
            let watching = http.ok("board.get", json!([board])).await["watching"].clone();
            if watching == 2 {
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "{}: watching {watching}",
                http.addr
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}
