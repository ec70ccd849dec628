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

/// The cursors a session hears next (polling up to 10 s for a `cursors` event).
async fn next_cursors(http: &Http, session: &Value) -> Value {
    let started = Instant::now();
    loop {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "no cursors event"
        );
        let events = http.ok("session.get_events", json!([session, 2])).await;
        if let Some(e) = events
            .as_array()
            .unwrap()
            .iter()
            .rev()
            .find(|e| e["action"] == "cursors")
        {
            return e["obj"].clone();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cursors_are_shared_with_the_views_that_ask_and_leave_with_their_session() {
    let url = fresh_database("gw_cursors").await;
    let sql = connect(&url).await;
    let board = create_board(&sql, "cursors", (8, 8), 2, "0").await;
    let token: String = sql
        .query_one("SELECT token FROM place.create_user('ann')", &[])
        .await
        .unwrap()
        .get(0);
    let gw = start_gateway(&url, |_| {}).await;
    let http = Http::new(gw.addr);
    let (ann, _) = http
        .signed_in_view(&token, json!({"board": board, "presence": true}))
        .await;
    let watcher = http.ok("session.create", json!([])).await;
    http.ok(
        "session.subscribe",
        json!([watcher, "board", {"board": board, "presence": true}]),
    )
    .await;
    let legacy = http.ok("session.create", json!([])).await;
    http.ok(
        "session.subscribe",
        json!([legacy, "board", {"board": board}]),
    )
    .await;

    let own = http
        .ok(
            "session.set_presence",
            json!([ann, board, {"x": 3, "y": 4}]),
        )
        .await["id"]
        .clone();
    // Too soon after the last one: refused with the wait.
    let error = http
        .call(
            "session.set_presence",
            json!([ann, board, {"x": 3, "y": 5}]),
        )
        .await
        .unwrap_err();
    assert_eq!(error["code"], -32011);
    assert!(error["data"]["retry_after_ms"].as_u64().unwrap() <= 50);
    let told = next_cursors(&http, &watcher).await;
    assert_eq!(told["total"], 1);
    assert_eq!(told["cursors"][0]["x"], 3);
    assert_eq!(told["cursors"][0]["y"], 4);
    assert_eq!(told["cursors"][0]["name"], "ann");
    let id = told["cursors"][0]["id"].clone();
    assert_eq!(
        id, own,
        "set_presence names the cursor as the others see it"
    );
    assert!(
        id.as_str()
            .is_some_and(|id| !ann.as_str().unwrap().contains(id)),
        "not the session id"
    );

    for (params, code) in [
        (json!([ann, board, {"x": 8, "y": 0}]), -32602),
        (json!([ann, board, {"x": 1}]), -32602),
        (json!([ann, board, {"x": 1, "y": 1, "z": 1}]), -32602),
        (json!([ann, 4242, {"x": 1, "y": 1}]), -32005),
        (json!(["nope", board, {"x": 1, "y": 1}]), -32001),
    ] {
        tokio::time::sleep(Duration::from_millis(60)).await;
        assert_eq!(
            http.error_code("session.set_presence", params.clone())
                .await,
            code,
            "{params}"
        );
    }

    // A region that asked for presence hears the cursors under its own key; one that did
    // not, hears nothing.
    let region_watcher = http.ok("session.create", json!([])).await;
    let region = json!({"board": board, "x": 0, "y": 0, "width": 4, "height": 4, "presence": true});
    let key = http
        .ok(
            "session.subscribe",
            json!([region_watcher, "board_region", region]),
        )
        .await[0]
        .clone();
    let plain_region = http.ok("session.create", json!([])).await;
    http.ok(
        "session.subscribe",
        json!([plain_region, "board_region", {"board": board, "x": 0, "y": 0, "width": 4, "height": 4}]),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(60)).await;
    http.ok(
        "session.set_presence",
        json!([ann, board, {"x": 1, "y": 2}]),
    )
    .await;
    let started = Instant::now();
    loop {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "no cursors for the region"
        );
        let events = http
            .ok("session.get_events", json!([region_watcher, 2]))
            .await;
        if let Some(e) = events
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["action"] == "cursors")
        {
            assert_eq!(e["key"], key);
            assert_eq!(
                (
                    e["obj"]["cursors"][0]["x"].as_i64(),
                    e["obj"]["cursors"][0]["y"].as_i64()
                ),
                (Some(1), Some(2))
            );
            break;
        }
    }
    let events = http
        .ok("session.get_events", json!([plain_region, 1]))
        .await;
    assert_eq!(
        events,
        json!([]),
        "a region that did not ask hears no cursors"
    );

    // Ann leaves: the others hear that nobody points any more.
    http.ok("session.destroy", json!([ann])).await;
    let mut told = next_cursors(&http, &watcher).await;
    // (The watcher may first hear of ann's last move.)
    if told["total"] != 0 {
        told = next_cursors(&http, &watcher).await;
    }
    assert_eq!(told, json!({"cursors": [], "total": 0}));
    let events = http.ok("session.get_events", json!([legacy, 1])).await;
    assert_eq!(
        events,
        json!([]),
        "a view that did not ask hears no cursors"
    );
}
