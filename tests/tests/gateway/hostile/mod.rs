//! Hostile input against a real gateway (issue 12): malformed and oversized JSON-RPC, every
//! method's every param given every awkward value, wrong Content-Types and HTTP methods,
//! HTTP that no client library would send (raw TCP), pipelining, a client that never
//! reads, slowloris headers and bodies, half-closing clients and a flood of sessions.
//!
//! The rule for every case: the right JSON-RPC error or HTTP status — never a panic, a
//! hang (every read has a deadline), a 5xx or a dropped connection. The cases form tables;
//! all of them run and every mismatch is reported at the end, not only the first.
//!
//! Through the whole barrage a control subscriber (a Qik-style session on its own
//! keep-alive connection, polling `session.get_events`) watches a board on which SQL places
//! tiles at a steady rate: it must see every placement exactly once, in seq order.
//!
//! Here the test, the control subscriber and the steady writer; beside it `expect.rs` (what
//! a case expects, running a table of cases), `matrix.rs` (every param of every method
//! given every awkward value) and `cases.rs` (the other case tables).

mod cases;
mod expect;
mod matrix;

use cases::*;
use expect::*;
use matrix::*;

use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use pgplace_tests::gateway::start_gateway;
use pgplace_tests::raw_http::{
    connect_tcp, exchange, get, http, preview, rpc_request, Conn, Resp, ANSWER_WITHIN,
};
use pgplace_tests::{connect, create_board, create_users_with_tokens, fresh_database};
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::{timeout, Instant};

/// A whole case, whatever it does.
const CASE_WITHIN: Duration = Duration::from_secs(30);
/// The gateway's longest poll here: a matrix case whose timeout is valid waits this long.
const MAX_POLL_SECS: u64 = 2;

/// Every code the README documents, but −32603: an internal error is a bug here.
const DOCUMENTED: &[i64] = &[
    -32700, -32600, -32601, -32602, -32001, -32002, -32003, -32004, -32005, -32006, -32007, -32008,
    -32009, -32010, -32011,
];
const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;
const METHOD_NOT_FOUND: i64 = -32601;
const INVALID_PARAMS: i64 = -32602;
const TOO_MANY: i64 = -32007;
/// The one origin the gateway's CORS policy lists here.
const ALLOWED_ORIGIN: &str = "http://allowed.example";

/// A JSON-RPC call on a new connection: the answer's JSON.
async fn call(addr: SocketAddr, method: &str, params: Value) -> Result<Value, String> {
    let body = json!({"jsonrpc": "2.0", "method": method, "params": params, "id": 1});
    let resp = exchange(addr, &rpc_request(body.to_string().as_bytes()), false).await?;
    if resp.status != 200 {
        return Err(format!("{method}: {}", resp.summary()));
    }
    resp.json()
        .ok_or_else(|| format!("{method}: not JSON: {}", resp.summary()))
}

async fn ok(addr: SocketAddr, method: &str, params: Value) -> Value {
    let answer = call(addr, method, params.clone())
        .await
        .unwrap_or_else(|e| panic!("{method}({params}): {e}"));
    match answer.get("error") {
        Some(error) => panic!("{method}({params}) failed: {error}"),
        None => answer["result"].clone(),
    }
}

// ---------------------------------------------------------------------------------------
// Expectations and cases.

struct ControlReport {
    seqs: Vec<i64>,
    problems: Vec<String>,
    polls: usize,
    slowest: Duration,
}

/// Polls `session` (1.0-style, Qik's form) on one keep-alive connection until it has seen
/// seq `target` (once known) or `give_up` passes after it became known.
async fn control_subscriber(
    addr: SocketAddr,
    session: String,
    key: String,
    target: tokio::sync::watch::Receiver<Option<i64>>,
) -> ControlReport {
    let mut report = ControlReport {
        seqs: Vec::new(),
        problems: Vec::new(),
        polls: 0,
        slowest: Duration::ZERO,
    };
    let mut conn: Option<Conn> = None;
    let mut give_up: Option<Instant> = None;
    loop {
        if let Some(n) = *target.borrow() {
            let deadline = *give_up.get_or_insert_with(|| Instant::now() + Duration::from_secs(15));
            if report.seqs.last().copied().unwrap_or(0) >= n || Instant::now() > deadline {
                break;
            }
        }
        if conn.is_none() {
            match Conn::open(addr).await {
                Ok(c) => conn = Some(c),
                Err(e) => {
                    report.problems.push(format!("control: connect: {e}"));
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            }
        }
        let c = conn.as_mut().expect("connected");
        report.polls += 1;
        let body =
            json!({"method": "session.get_events", "params": [session, 1], "id": report.polls});
        let started = Instant::now();
        let outcome = match c.send(&rpc_request(body.to_string().as_bytes())).await {
            Ok(()) => c.response(false, ANSWER_WITHIN).await,
            Err(e) => Err(e),
        };
        let took = started.elapsed();
        report.slowest = report.slowest.max(took);
        if took > Duration::from_secs(5) {
            report
                .problems
                .push(format!("control: a 1 s poll took {took:?}"));
        }
        let resp = match outcome {
            Ok(resp) => resp,
            Err(e) => {
                report
                    .problems
                    .push(format!("control: poll {}: {e}", report.polls));
                conn = None;
                continue;
            }
        };
        let value = resp.json().unwrap_or(Value::Null);
        let Some(events) = value["result"].as_array().filter(|_| resp.status == 200) else {
            report.problems.push(format!(
                "control: poll {}: {}",
                report.polls,
                resp.summary()
            ));
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        if value["id"] != json!(report.polls) {
            report.problems.push(format!(
                "control: answer id {} for poll {}",
                value["id"], report.polls
            ));
        }
        for event in events {
            match event["action"].as_str() {
                Some("update") if event["key"] == json!(key) => {
                    report.seqs.push(event["obj"]["seq"].as_i64().unwrap_or(-1))
                }
                Some("presence" | "cursors" | "settings") => {}
                _ => report
                    .problems
                    .push(format!("control: unexpected event {event}")),
            }
        }
    }
    report
}

/// Places `per_batch` tiles every 50 ms through SQL, each on a tile not placed before, until
/// `stop`: how many were placed, and anything that went wrong.
async fn steady_writer(
    url: String,
    board: i64,
    user: i64,
    width: i64,
    tiles: i64,
    stop: Arc<AtomicBool>,
) -> (i64, Vec<String>) {
    let sql = connect(&url).await;
    let per_batch = 20i64;
    let mut placed = 0i64;
    let mut problems = Vec::new();
    while !stop.load(Ordering::SeqCst) && placed + per_batch <= tiles {
        let ks: Vec<i64> = (placed..placed + per_batch).collect();
        let users = vec![user; ks.len()];
        let xs: Vec<i32> = ks.iter().map(|k| (k % width) as i32).collect();
        let ys: Vec<i32> = ks.iter().map(|k| (k / width) as i32).collect();
        let colors: Vec<i32> = ks.iter().map(|k| 1 + (k % 15) as i32).collect();
        match sql
            .query_one(
                "SELECT count(*) FILTER (WHERE placed) FROM place.place_many($1, $2, $3, $4, $5)",
                &[&board, &users, &xs, &ys, &colors],
            )
            .await
        {
            Ok(row) => {
                let n: i64 = row.get(0);
                if n != per_batch {
                    problems.push(format!("writer: {n} of {per_batch} placed"));
                }
                placed += n;
            }
            Err(e) => {
                problems.push(format!("writer: {e}"));
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    (placed, problems)
}

// ---------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_clients_get_the_right_error_and_the_control_subscriber_everything() {
    let test_started = Instant::now();
    let url = fresh_database("gw_hostile").await;
    let sql = connect(&url).await;
    let control_board = create_board(&sql, "control", (128, 128), 4, "0").await;
    let board = create_board(&sql, "matrix", (16, 16), 4, "0").await;
    let big_board = create_board(&sql, "big", (512, 512), 4, "0").await;
    let compacted = create_board(&sql, "compacted", (8, 8), 4, "0").await;
    let users = create_users_with_tokens(&sql, "hostile", 2).await;
    let (writer, token) = (users[0].0, users[1].1.clone());

    // A board whose early history is gone: a moment between two placements, then
    // compact_history up to now.
    let place_one = |x: i32| {
        format!("SELECT count(*) FROM place.place_many({compacted}, ARRAY[{writer}]::bigint[], ARRAY[{x}], ARRAY[0], ARRAY[3])")
    };
    sql.batch_execute(&place_one(1)).await.expect("placing");
    tokio::time::sleep(Duration::from_millis(20)).await;
    let past: String = sql
        .query_one(
            "SELECT to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')",
            &[],
        )
        .await
        .expect("now")
        .get(0);
    tokio::time::sleep(Duration::from_millis(20)).await;
    sql.batch_execute(&place_one(2)).await.expect("placing");
    sql.batch_execute(&place_one(3)).await.expect("placing");
    tokio::time::sleep(Duration::from_millis(20)).await;
    let dropped: i64 = sql
        .query_one(
            "SELECT place.compact_history($1, clock_timestamp())",
            &[&compacted],
        )
        .await
        .expect("compact_history")
        .get(0);
    assert!(dropped >= 2, "compact_history dropped {dropped} rows");

    let gw = start_gateway(&url, |config| {
        config.header_timeout_secs = 1;
        config.body_timeout_secs = 1;
        config.max_poll_secs = MAX_POLL_SECS;
        config.max_batch = 100;
        config.cors_origins = ALLOWED_ORIGIN.to_string();
    })
    .await;
    let addr = gw.addr;

    // The control subscriber, then the writer.
    let control_session = ok(addr, "session.create", json!([])).await;
    let control_session = control_session.as_str().expect("a session id").to_string();
    let subscribed = ok(
        addr,
        "session.subscribe",
        json!([control_session, "board", {"board": control_board}]),
    )
    .await;
    assert_eq!(subscribed[1]["seq"], 0, "the control board starts empty");
    let key = subscribed[0].as_str().expect("a key").to_string();
    let (target_tx, target_rx) = tokio::sync::watch::channel(None);
    let control = tokio::spawn(control_subscriber(addr, control_session, key, target_rx));
    let stop = Arc::new(AtomicBool::new(false));
    let writing = tokio::spawn(steady_writer(
        url.clone(),
        control_board,
        writer,
        128,
        128 * 128,
        stop.clone(),
    ));

    // The matrix's sessions: one signed in, one only ever named.
    let session = ok(addr, "session.create", json!([])).await;
    ok(addr, "session.authorize", json!([session, token])).await;
    let other_session = ok(addr, "session.create", json!([])).await;
    let fixture = Fixture {
        addr,
        session: session.as_str().unwrap().to_string(),
        other_session: other_session.as_str().unwrap().to_string(),
        token: token.clone(),
        board,
    };

    let mut results = Vec::new();
    let phases: Vec<(&str, Vec<Case>, usize)> = vec![
        ("table", table(addr, board, &past, compacted), 4),
        ("sizes", sized_cases(addr), 2),
        ("connections", connection_cases(addr, board), 4),
        ("param matrix", matrix_cases(&fixture), 8),
        ("slow clients", slow_cases(addr), 8),
        (
            "never reading",
            vec![never_reading_case(addr, big_board)],
            1,
        ),
        ("flood", vec![flood_case(addr)], 1),
    ];
    for (phase, cases, parallel) in phases {
        let started = Instant::now();
        let n = cases.len();
        let outcomes = run_all(cases, parallel).await;
        let failed = outcomes.iter().filter(|(_, o)| o.is_err()).count();
        println!(
            "phase {phase}: {n} cases, {failed} failed, {:?}",
            started.elapsed()
        );
        if phase == "param matrix" {
            results.extend(summarize_matrix(outcomes));
        } else {
            results.extend(outcomes);
        }
    }

    // The barrage is over: the control subscriber must have every placement, once, in order.
    stop.store(true, Ordering::SeqCst);
    let (placed, mut problems) = writing.await.expect("the writer");
    let _ = target_tx.send(Some(placed));
    let report = control.await.expect("the control subscriber");
    problems.extend(report.problems.iter().cloned());
    let expected: Vec<i64> = (1..=placed).collect();
    let control_outcome = if report.seqs == expected && problems.is_empty() {
        Ok(format!(
            "{placed} placements seen once each in order over {} polls (slowest {:?})",
            report.polls, report.slowest
        ))
    } else {
        let mut seen = report.seqs.clone();
        seen.sort_unstable();
        let distinct = {
            let mut d = seen.clone();
            d.dedup();
            d.len()
        };
        Err(format!(
            "{placed} placed, {} events ({distinct} distinct, in order: {}), problems: {problems:?}",
            report.seqs.len(),
            report.seqs.windows(2).all(|w| w[0] < w[1])
        ))
    };
    results.push(("control subscriber".to_string(), control_outcome));

    // After it all, the gateway is still well.
    let healthy = exchange(addr, &get("/healthz"), false).await;
    results.push((
        "healthz after the barrage".to_string(),
        healthy
            .and_then(|r| check(&r, &status(&[200])))
            .map(|()| String::new()),
    ));

    // Every error answered through it all was one its method declares in rpc.discover (the
    // gateway counts the others; the process's counter, so another test's finds count too).
    let metrics = exchange(addr, &get("/metrics"), false).await;
    results.push((
        "only declared errors".to_string(),
        metrics.and_then(|r| {
            let text = String::from_utf8_lossy(&r.body).to_string();
            let undeclared: Vec<&str> = text
                .lines()
                .filter(|l| l.starts_with("pgplace_undeclared_errors_total{"))
                .collect();
            if undeclared.is_empty() {
                Ok(String::new())
            } else {
                Err(format!("errors rpc.discover does not list: {undeclared:?}"))
            }
        }),
    ));

    let failures: Vec<&(String, Result<String, String>)> =
        results.iter().filter(|(_, o)| o.is_err()).collect();
    for (name, outcome) in &results {
        if let Ok(note) = outcome {
            if !note.is_empty() {
                println!("ok   {name}: {note}");
            }
        }
    }
    for (name, outcome) in &failures {
        println!("FAIL {name}: {}", outcome.as_ref().unwrap_err());
    }
    println!(
        "{} cases, {} failed, in {:?}",
        results.len(),
        failures.len(),
        test_started.elapsed()
    );
    assert!(
        failures.is_empty(),
        "{} of {} hostile cases failed (listed above)",
        failures.len(),
        results.len()
    );
}
