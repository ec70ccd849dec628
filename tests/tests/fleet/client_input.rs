//! What a client writes never grows the gateway for good: names it makes up are no
//! `/metrics` series, and session ids, board names and view names a megabyte long are
//! refused before the gateway keeps any of them (its misses cache held each such id for 2 s,
//! 50,000 of them: 200 ids of 1 MB took a gateway from 24 MB to 271 MB, where it stayed).

use pgplace_tests::gateway::{start_gateway, Http};
use pgplace_tests::processes::GatewayProcess;
use pgplace_tests::{connect, create_board, fresh_database};
use serde_json::{json, Value};
use std::collections::BTreeSet;

const UNKNOWN_SESSION: i64 = -32001;
const UNKNOWN_VIEW: i64 = -32004;
const UNKNOWN_BOARD: i64 = -32005;
const METHOD_NOT_FOUND: i64 = -32601;

/// Every series of a scrape: its name and labels, without the value.
async fn series(http: &Http) -> BTreeSet<String> {
    let (_, _, body) = http.get("/metrics", &Default::default()).await;
    let text = String::from_utf8(body.to_vec()).unwrap();
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .map(|line| line.rsplit_once(' ').expect("name value").0.to_string())
        .collect()
}

/// A made-up name, distinct for each `n`.
fn made_up(what: &str, n: usize) -> String {
    format!("made-up-{what}-{n}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn made_up_names_are_no_metrics_series() {
    let _alone = pgplace_tests::alone();
    let url = fresh_database("gw_client_input_metrics").await;
    let gw = start_gateway(&url, |_| {}).await;
    let http = Http::new(gw.addr);
    let session = http.ok("session.create", json!([])).await;
    // Each kind of call once, so that the series of what the calls do exist before.
    let subscribe = |view: String| {
        let (http, session) = (http.clone(), session.clone());
        async move {
            http.call("session.subscribe", json!([session, view, {}]))
                .await
                .unwrap_err()["code"]
                .as_i64()
        }
    };
    assert_eq!(subscribe(made_up("view", 0)).await, Some(UNKNOWN_VIEW));
    assert_eq!(
        http.error_code(&made_up("method", 0), json!([])).await,
        METHOD_NOT_FOUND
    );
    let (status, _, _) = http
        .get(&format!("/{}", made_up("path", 0)), &Default::default())
        .await;
    assert_eq!(status, 404);
    // A scrape is counted once answered: the second sees the first.
    series(&http).await;
    let before = series(&http).await;

    for n in 1..=1000 {
        assert_eq!(
            subscribe(made_up("view", n)).await,
            Some(UNKNOWN_VIEW),
            "{n}"
        );
    }
    for n in 1..=100 {
        assert_eq!(
            http.error_code(&made_up("method", n), json!([])).await,
            METHOD_NOT_FOUND
        );
        let (status, _, _) = http
            .get(&format!("/{}", made_up("path", n)), &Default::default())
            .await;
        assert_eq!(status, 404);
    }

    let after = series(&http).await;
    let added: Vec<&String> = after.difference(&before).collect();
    let gone: Vec<&String> = before.difference(&after).collect();
    assert!(
        added.is_empty() && gone.is_empty(),
        "series added: {added:?}; gone: {gone:?}"
    );
}

/// A view is a label once the database returned its rows, and no more once it is dropped:
/// the series are the views a DBA keeps, not every view there ever was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_views_series_goes_with_the_view() {
    let _alone = pgplace_tests::alone();
    let url = fresh_database("gw_client_input_dropped").await;
    let sql = connect(&url).await;
    sql.batch_execute(
        "CREATE TABLE items (id int PRIMARY KEY, score int NOT NULL);
         INSERT INTO items SELECT g, g FROM generate_series(1, 10) g;
         SELECT place.watch('items');
         SELECT place.create_view('input_top', 'items', 'score', max_limit => 5);",
    )
    .await
    .unwrap();
    let gw = start_gateway(&url, |_| {}).await;
    let http = Http::new(gw.addr);
    let label = "pgplace_list_view_reads_total{view=\"input_top\"}";
    let session = http.ok("session.create", json!([])).await;
    http.ok("session.subscribe", json!([session, "input_top", {}]))
        .await;
    assert!(series(&http).await.contains(label));
    sql.execute("SELECT place.drop_view('input_top')", &[])
        .await
        .unwrap();
    for _ in 0..50 {
        if !series(&http).await.contains(label) {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("{label} is still in /metrics 5 s after the view was dropped");
}

/// A call that must fail: its code, and its message (its first 300 bytes, and its length:
/// before the fix a message repeated the megabyte).
async fn refused(http: &Http, address: &str, method: &str, params: Value) -> (i64, String, usize) {
    let error = http.call_as(address, method, params).await.unwrap_err();
    let code = error["code"].as_i64().expect("a code");
    let message = error["message"].as_str().unwrap_or("");
    let start: String = message.chars().take(300).collect();
    (code, start, message.len())
}

/// How much the gateway may grow over the flood below: what it holds for the board and its
/// sessions is in the baseline; 200 ids of 1 MB kept would be 200 MB.
const GROWTH_BOUND: u64 = 64 << 20;
/// Just under the body limit (`--max-body-bytes`, 1 MiB) with the envelope around it.
const LONG: usize = 1_000_000;
const FLOOD: usize = 200;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn megabyte_ids_and_names_are_refused_and_not_kept() {
    let _alone = pgplace_tests::alone();
    let url = fresh_database("gw_client_input_memory").await;
    let sql = connect(&url).await;
    let board = create_board(&sql, "input", (64, 64), 4, "0").await;
    let dir = std::env::temp_dir().join("pgplace-client-input");
    std::fs::create_dir_all(&dir).unwrap();
    let gateway = GatewayProcess::start("gw_client_input", &url, &dir, &[]);
    gateway.wait_healthy().await;
    let http = Http::new(gateway.addr);
    // One address, as the report had it (behind our loopback proxy: limited as that address).
    let address = "198.51.100.42";
    let session = http
        .call_as(address, "session.create", json!([]))
        .await
        .unwrap();
    http.call_as(
        address,
        "session.subscribe",
        json!([session, "board", {"board": board}]),
    )
    .await
    .unwrap();
    // Warmed up: the buffers that read a 1 MB body and answer it are in the baseline.
    let long = |kind: u8, n: usize| {
        format!(
            "{n:08}{}",
            char::from(b'a' + kind).to_string().repeat(LONG - 8)
        )
    };
    for n in 0..5 {
        refused(
            &http,
            address,
            "session.unsubscribe",
            json!([long(0, n), "board/1"]),
        )
        .await;
        refused(&http, address, "board.get", json!([long(1, n + FLOOD)])).await;
    }
    let before = gateway.rss().expect("the gateway's RSS");

    let mut messages = Vec::new();
    for n in 0..FLOOD {
        // Distinct ids of hex digits, a million of them; distinct board and view names.
        let (code, message, length) = refused(
            &http,
            address,
            "session.unsubscribe",
            json!([long(0, n + 100), "board/1"]),
        )
        .await;
        assert_eq!(code, UNKNOWN_SESSION, "{message:.200}");
        messages.push((message, length));
        let (code, message, length) =
            refused(&http, address, "board.get", json!([long(1, n)])).await;
        assert_eq!(code, UNKNOWN_BOARD, "{message:.200}");
        messages.push((message, length));
        let (code, message, length) = refused(
            &http,
            address,
            "session.subscribe",
            json!([session, long(2, n), {}]),
        )
        .await;
        assert_eq!(code, UNKNOWN_VIEW, "{message:.200}");
        messages.push((message, length));
    }
    let after = gateway.rss().expect("the gateway's RSS");
    assert!(
        after < before + GROWTH_BOUND,
        "the gateway grew from {} MB to {} MB over {FLOOD} megabyte ids and names",
        before >> 20,
        after >> 20
    );
    eprintln!("RSS {} MB before, {} MB after", before >> 20, after >> 20);

    // Each refusal names the limit, never the string.
    for (message, length) in &messages {
        assert!(*length < 300, "{length} bytes: {message}");
    }
    assert!(
        messages[0].0.contains("32 lowercase hex digits"),
        "{}",
        messages[0].0
    );
    assert!(
        messages[1].0.contains("1 to 64 characters"),
        "{}",
        messages[1].0
    );
    assert!(
        messages[2].0.contains("1 to 64 characters"),
        "{}",
        messages[2].0
    );
    // The session still works.
    http.call_as(address, "session.get_events", json!([session, 0]))
        .await
        .unwrap();
}
