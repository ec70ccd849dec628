//! A gateway needs no more than `pgplace_player` (README, Security): logged in as a login
//! that is only a member of it (sql/roles.sql run as a DBA runs it), it serves every view
//! kind, signs a session in, places, answers history, the bits and pictures. The other
//! tests' gateways log in as the superuser; this one shows that nothing they do needs it.

use hyper::StatusCode;
use pgplace_tests::gateway::{start_gateway, Http};
use pgplace_tests::{connect, create_board, create_users_with_tokens, fresh_database};
use serde_json::json;
use std::time::{Duration, Instant};

const READER: &str = "gw_as_player_reader";
const PLAYER: &str = "gw_as_player_player";
const ADMIN: &str = "gw_as_player_admin";
const LOGIN: &str = "gw_as_player_login";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_logged_in_as_a_player_does_everything_a_gateway_does() {
    let url = fresh_database("gw_as_player").await;
    let sql = connect(&url).await;
    // What an interrupted run left (roles belong to the cluster), then roles.sql.
    sql.batch_execute(&format!(
        "DO $$ BEGIN
             IF EXISTS (SELECT FROM pg_roles WHERE rolname = '{LOGIN}') THEN
                 EXECUTE 'DROP ROLE {LOGIN}';
             END IF;
         END $$"
    ))
    .await
    .unwrap();
    pgplace_tests::run_roles_sql(&url, READER, PLAYER, ADMIN).await;
    sql.batch_execute(&format!(
        "CREATE ROLE {LOGIN} LOGIN IN ROLE {PLAYER};
         CREATE TABLE items (id int PRIMARY KEY, score int NOT NULL);
         INSERT INTO items VALUES (1, 10), (2, 20);
         SELECT place.watch('items');
         SELECT place.create_view('player_top_items', 'items', 'score', max_limit => 5);"
    ))
    .await
    .unwrap();
    let board = create_board(&sql, "player", (16, 16), 4, "0").await;
    let users = create_users_with_tokens(&sql, "player", 1).await;
    let as_login = url.replace("postgres@", &format!("{LOGIN}@"));
    let gw = start_gateway(&as_login, |_| {}).await;
    let http = Http::new(gw.addr);

    assert_eq!(http.ok("board.list", json!([])).await[0]["id"], board);
    let session = http.ok("session.create", json!([])).await;
    for (view, params) in [
        ("board", json!({"board": board})),
        (
            "board_region",
            json!({"board": board, "x": 0, "y": 0, "width": 4, "height": 4}),
        ),
        ("recent_placements", json!({"board": board, "limit": 5})),
        ("player_top_items", json!({"limit": 2})),
    ] {
        http.ok("session.subscribe", json!([session, view, params]))
            .await;
    }
    http.ok("session.authorize", json!([session, users[0].1]))
        .await;
    let placed = http
        .ok("board.place", json!([session, board, 1, 1, 3]))
        .await;
    assert_eq!(placed["seq"], 1, "{placed}");
    sql.execute("UPDATE items SET score = 30 WHERE id = 1", &[])
        .await
        .unwrap();
    // The placement (board, region, recent) and the list's change all arrive.
    let mut keys = std::collections::BTreeSet::new();
    let started = Instant::now();
    while keys.len() < 4 && started.elapsed() < Duration::from_secs(10) {
        let events = http.ok("session.get_events", json!([session, 1])).await;
        for event in events.as_array().unwrap() {
            keys.insert(event["key"].as_str().unwrap().to_string());
        }
    }
    assert_eq!(keys.len(), 4, "{keys:?}");
    let history = http.ok("board.tile_history", json!([board, 1, 1])).await;
    assert_eq!(history[0]["seq"], 1, "{history}");
    for path in [
        format!("/boards/{board}/bits"),
        format!("/boards/{board}.png"),
        format!("/boards/{board}.png?at=2100-01-01T00:00:00Z"),
    ] {
        let (status, _, _) = http.get(&path, &Default::default()).await;
        assert_eq!(status, StatusCode::OK, "{path}");
    }
    http.ok("session.destroy", json!([session])).await;
    drop(gw);
    sql.batch_execute(&format!("DROP ROLE {LOGIN}"))
        .await
        .unwrap();
}
