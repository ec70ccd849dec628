//! How many watch a board: the initial state's `watching` and `presence` events follow
//! sessions subscribing and going away.

use pgplace_tests::gateway::{start_gateway, Http};
use pgplace_tests::{connect, create_board, fresh_database};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// Polls `read` until it gives `want` (at most 30 s); panics with what it saw last.
async fn eventually<F, Fut>(want: Value, mut read: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Value>,
{
    let started = Instant::now();
    loop {
        let seen = read().await;
        if seen == want {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "wanted {want}, saw {seen}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watching_follows_sessions_coming_and_going() {
    let url = fresh_database("gw_presence").await;
    let sql = connect(&url).await;
    let board = create_board(&sql, "presence", (4, 4), 2, "0").await;
    let gw = start_gateway(&url, |_| {}).await;
    let http = Http::new(gw.addr);
    let watching = || {
        let http = http.clone();
        async move { http.ok("board.get", json!([board])).await["watching"].clone() }
    };

    let first = http.ok("session.create", json!([])).await;
    http.ok(
        "session.subscribe",
        json!([first, "board", {"board": board, "presence": true}]),
    )
    .await;
    let second = http.ok("session.create", json!([])).await;
    http.ok(
        "session.subscribe",
        json!([second, "board", {"board": board, "compact": true}]),
    )
    .await;
    eventually(json!(2), watching).await;

    // The second goes away: the first hears it as an event, on its next poll.
    http.ok("session.destroy", json!([second])).await;
    let mut heard: Vec<Value> = Vec::new();
    let started = Instant::now();
    while !heard
        .iter()
        .any(|e| e["action"] == "presence" && e["obj"]["watching"] == 1)
    {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no presence event with 1 watching: {heard:?}"
        );
        let events = http.ok("session.get_events", json!([first, 0.5])).await;
        heard.extend(events.as_array().unwrap().iter().cloned());
    }
    assert_eq!(
        heard.iter().filter(|e| e["action"] != "presence").count(),
        0,
        "nothing else happened: {heard:?}"
    );
    eventually(json!(1), watching).await;
    // A view that did not ask (a legacy client) never sees a presence event.
    let third = http.ok("session.create", json!([])).await;
    http.ok(
        "session.subscribe",
        json!([third, "board", {"board": board}]),
    )
    .await;
    let events = http.ok("session.get_events", json!([third, 3])).await;
    assert_eq!(
        events,
        json!([]),
        "a presence event reached a view that did not ask"
    );
}
