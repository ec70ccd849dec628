//! Notifications only wake the gateway (README, Security): a login with no grants at all
//! sends what pgplace would - a tile at the next seq, the board deleted, a watching
//! session gone or taken by another gateway - and nothing a client sees changes: no tile
//! that was never placed, no placement skipped, no `deleted`, no session dropped; a change
//! at a position no commit has costs a list view one read, not a read after every read, and
//! a view said to be dropped or defined anew is not, for its sessions, unless it was.
//! A flood of such session notes delays no poll beyond a read or two.

use pgplace_tests::gateway::{start_gateway, Http};
use pgplace_tests::{connect, create_board, create_users_with_tokens, fresh_database};
use serde_json::{json, Value};
use std::time::Duration;

/// A login named `name` that was granted nothing, connected to `url`'s database. Roles
/// belong to the cluster: an interrupted run's is kept, and each test has its own name,
/// because this file's tests run at once and two CREATE ROLEs of one name race.
async fn stranger(sql: &tokio_postgres::Client, url: &str, name: &str) -> tokio_postgres::Client {
    sql.batch_execute(&format!(
        "DO $$ BEGIN
             IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{name}') THEN
                 EXECUTE 'CREATE ROLE {name} LOGIN';
             END IF;
         END $$;"
    ))
    .await
    .unwrap();
    connect(&url.replace("postgres@", &format!("{name}@"))).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_notifications_change_nothing_a_client_sees() {
    let url = fresh_database("gw_forged").await;
    let sql = connect(&url).await;
    let forger = stranger(&sql, &url, "gw_forged_stranger").await;
    let board = create_board(&sql, "forged", (8, 8), 4, "0").await;
    let users = create_users_with_tokens(&sql, "forged", 1).await;
    let gw = start_gateway(&url, |_| {}).await;
    let http = Http::new(gw.addr);
    let (placer, _) = http
        .signed_in_view(&users[0].1, json!({"board": board}))
        .await;
    let watcher = http.ok("session.create", json!([])).await;
    let state = http
        .ok(
            "session.subscribe",
            json!([watcher, "board", {"board": board}]),
        )
        .await;
    let seq = state[1]["seq"].as_i64().unwrap();
    let notify = |channel: &'static str, payload: String| {
        let forger = &forger;
        async move {
            forger
                .execute("SELECT pg_notify($1, $2)", &[&channel, &payload])
                .await
                .expect("any login may notify")
        }
    };

    // The next seq's tile, as a placement's payload says it.
    notify(
        "pgplace",
        json!({"type": "tiles", "v": 1, "board": board, "first": seq + 1, "last": seq + 1,
               "at": 1_764_437_000_123_456_i64, "tiles": [[1, 1, 15, users[0].0]]})
        .to_string(),
    )
    .await;
    let events = poll(&http, &watcher, 0.5).await;
    assert_eq!(events, json!([]), "a forged tile is not shown");

    // The watcher waits; meanwhile it is said to be gone, then taken by another gateway,
    // and the board is said to be deleted.
    let waiting = {
        let http = http.clone();
        let watcher = watcher.clone();
        tokio::spawn(async move { poll(&http, &watcher, 10.0).await })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    let public_ids: Vec<i64> = sql
        .query("SELECT public_id FROM place.sessions", &[])
        .await
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert_eq!(public_ids.len(), 2, "the placer's and the watcher's");
    for id in &public_ids {
        notify("pgplace_sessions", format!("gone {id}")).await;
        notify("pgplace_sessions", format!("drop {id} 1234abcd")).await;
    }
    notify(
        "pgplace",
        json!({"type": "board", "v": 1, "board": board, "seq": seq, "change": "deleted"})
            .to_string(),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;

    // The real placement at that seq reaches the waiting poll, as it was placed.
    http.ok("board.place", json!([placer, board, 2, 3, 7]))
        .await;
    let events = tokio::time::timeout(Duration::from_secs(15), waiting)
        .await
        .expect("the poll is answered")
        .unwrap();
    let events = events.as_array().unwrap();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["action"], "update", "{events:?}");
    let obj = &events[0]["obj"];
    assert_eq!(
        (&obj["seq"], &obj["x"], &obj["y"], &obj["color"]),
        (&json!(seq + 1), &json!(2), &json!(3), &json!(7)),
        "{events:?}"
    );
    // The board is there, without the forged tile; both sessions go on.
    let state = http.ok("board.get", json!([board])).await;
    assert_eq!(state["seq"], seq + 1);
    http.ok("board.place", json!([placer, board, 4, 4, 1]))
        .await;
    let events = poll(&http, &watcher, 5.0).await;
    assert_eq!(events[0]["obj"]["seq"], seq + 2, "{events}");
    let tile: i32 = sql
        .query_one(
            "SELECT count(*)::int FROM place.placements WHERE board_id = $1 AND x = 1 AND y = 1",
            &[&board],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(tile, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_list_notifications_cost_a_read_and_change_nothing() {
    let url = fresh_database("gw_forged_changes").await;
    let sql = connect(&url).await;
    let forger = stranger(&sql, &url, "gw_forged_list_stranger").await;
    sql.batch_execute(
        "CREATE TABLE items (id int PRIMARY KEY, score int NOT NULL, note text);
         INSERT INTO items VALUES (1, 10, 'a'), (2, 20, 'b');
         SELECT place.watch('items');
         SELECT place.create_view('top_items', 'items', 'score', max_limit => 5);",
    )
    .await
    .unwrap();
    let relid: i64 = sql
        .query_one("SELECT 'items'::regclass::oid::bigint", &[])
        .await
        .unwrap()
        .get(0);
    let gw = start_gateway(&url, |_| {}).await;
    let http = Http::new(gw.addr);
    let session = http.ok("session.create", json!([])).await;
    http.ok("session.subscribe", json!([session, "top_items", {}]))
        .await;
    let before = http.view_reads("top_items").await;
    let payload = json!({"type": "changes", "v": 1, "pos": i64::MAX, "relids": [relid]});
    forger
        .execute("SELECT pg_notify('pgplace', $1)", &[&payload.to_string()])
        .await
        .unwrap();
    // Reads follow each other at most every --list-refresh-ms (10 ms by default): a view
    // that owed a read after every read would make a hundred in this second.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let reads = http.view_reads("top_items").await - before;
    // None at all: positions are read from the log, never taken from a notification (one
    // read may still be the first round of the change feed, which reads what it holds).
    assert!(reads <= 1, "{reads} reads for one forged notification");
    assert_eq!(
        poll(&http, &session, 0.2).await,
        json!([]),
        "nothing changed"
    );
    // The view said to be dropped, then defined anew: it was neither.
    for change in ["delete", "update", "insert"] {
        let payload = json!({"type": "view", "v": 1, "name": "top_items", "change": change});
        forger
            .execute("SELECT pg_notify('pgplace', $1)", &[&payload.to_string()])
            .await
            .unwrap();
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        poll(&http, &session, 0.2).await,
        json!([]),
        "no deleted, no reset"
    );
    // A real change after it is still read and delivered.
    sql.execute("UPDATE items SET score = 30 WHERE id = 1", &[])
        .await
        .unwrap();
    let events = poll(&http, &session, 5.0).await;
    assert_eq!(events[0]["obj"]["score"], 30, "{events}");
    // Defined anew for real (watched without `note`): the session starts over.
    sql.execute("SELECT place.watch('items', ARRAY['score'])", &[])
        .await
        .unwrap();
    let events = poll(&http, &session, 5.0).await;
    assert_eq!(events[0]["action"], "reset", "{events}");
    assert_eq!(
        events[0]["obj"][0],
        json!({"id": 1, "score": 30}),
        "{events}"
    );
    // And a real drop ends it.
    sql.execute("SELECT place.drop_view('top_items')", &[])
        .await
        .unwrap();
    let events = poll(&http, &session, 5.0).await;
    assert_eq!(events[0]["action"], "deleted", "{events}");
}

/// One legacy `get_events` of `session` (waiting up to `seconds`).
async fn poll(http: &Http, session: &Value, seconds: f64) -> Value {
    http.ok("session.get_events", json!([session, seconds]))
        .await
}

/// A flood of forged `gone` and `drop` notes naming live sessions: every poll waits for the
/// notes heard before it to be checked (`SessionChecks::settled`), so a flood must cost
/// polls a read or two, never an answer: the watcher gets each placement once, in order,
/// every poll answered, and both sessions live on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_forged_session_notes_delays_no_poll() {
    let url = fresh_database("gw_forged_flood").await;
    let sql = connect(&url).await;
    let forger = stranger(&sql, &url, "gw_forged_flood_stranger").await;
    let board = create_board(&sql, "flooded", (16, 16), 4, "0").await;
    let users = create_users_with_tokens(&sql, "flooded", 1).await;
    let gw = start_gateway(&url, |_| {}).await;
    let http = Http::new(gw.addr);
    let (placer, _) = http
        .signed_in_view(&users[0].1, json!({"board": board}))
        .await;
    let watcher = http.ok("session.create", json!([])).await;
    http.ok(
        "session.subscribe",
        json!([watcher, "board", {"board": board}]),
    )
    .await;
    let public_ids: Vec<i64> = sql
        .query("SELECT public_id FROM place.sessions", &[])
        .await
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert_eq!(public_ids.len(), 2);

    // Transactions of 500 distinct notes each (NOTIFY folds identical ones), back to back,
    // until the placements are all delivered.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flood = {
        let stop = stop.clone();
        let ids = public_ids.clone();
        tokio::spawn(async move {
            let mut sent = 0_u64;
            let mut round = 0_i64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                forger
                    .execute(
                        "SELECT count(pg_notify('pgplace_sessions', CASE WHEN g % 2 = 0
                             THEN format('drop %s %s', id, to_hex($2::bigint * 1000 + g))
                             ELSE format('gone %s', id) END))
                         FROM unnest($1::bigint[]) AS id, generate_series(1, 250) AS g",
                        &[&ids, &round],
                    )
                    .await
                    .expect("any login may notify");
                sent += 2 * 250;
                round += 1;
            }
            sent
        })
    };

    let mut placed = Vec::new();
    let mut delivered = Vec::new();
    let mut slowest = Duration::ZERO;
    for i in 0..20 {
        let answer = http
            .ok(
                "board.place",
                json!([placer, board, i % 16, i / 16, 1 + i % 15]),
            )
            .await;
        placed.push(answer["seq"].as_i64().unwrap());
        let started = std::time::Instant::now();
        let events = tokio::time::timeout(Duration::from_secs(20), poll(&http, &watcher, 5.0))
            .await
            .expect("a poll is answered during the flood");
        slowest = slowest.max(started.elapsed());
        for event in events.as_array().unwrap() {
            assert_eq!(event["action"], "update", "no reset, no deleted: {event}");
            delivered.push(event["obj"]["seq"].as_i64().unwrap());
        }
    }
    while delivered.len() < placed.len() {
        let events = poll(&http, &watcher, 2.0).await;
        let events = events.as_array().unwrap();
        assert!(
            !events.is_empty(),
            "placed {placed:?}, delivered {delivered:?}"
        );
        delivered.extend(events.iter().map(|e| e["obj"]["seq"].as_i64().unwrap()));
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let sent = flood.await.unwrap();
    println!("{sent} forged session notes; the slowest poll answered in {slowest:?}");
    assert!(sent >= 1000, "the flood ran ({sent} notes)");
    assert_eq!(delivered, placed, "each placement once, in order");
    // Both sessions live on: the placer places, the watcher hears it.
    let answer = http
        .ok("board.place", json!([placer, board, 15, 15, 2]))
        .await;
    let events = poll(&http, &watcher, 5.0).await;
    assert_eq!(events[0]["obj"]["seq"], answer["seq"], "{events}");
}
