//! Frozen tiles (boards.freeze_after) as a live gateway tells them: in the initial state,
//! as `frozen` events when their time comes (never before the database holds them
//! frozen), refused placements, repairs that unfreeze, and a fresh gateway's load.

use base64::Engine;
use pgplace_tests::gateway::{start_gateway, Http};
use pgplace_tests::{connect, create_board, create_users_with_tokens, fresh_database};
use serde_json::{json, Value};
use tokio_postgres::Client;

async fn until(http: &Http, session: &Value, wanted: impl Fn(&Value) -> bool) -> Vec<Value> {
    http.events_until(session, 6, wanted).await
}

/// The frozen tiles of a state's bitmap (one bit per tile, MSB first).
fn frozen_in(state: &Value) -> Vec<(i64, i64)> {
    let width = state["width"].as_i64().unwrap();
    let bitmap = base64::engine::general_purpose::STANDARD
        .decode(state["frozen"].as_str().expect("a frozen bitmap"))
        .unwrap();
    (0..width * state["height"].as_i64().unwrap())
        .filter(|n| bitmap[(n / 8) as usize] & (0x80 >> (n % 8)) != 0)
        .map(|n| (n % width, n / width))
        .collect()
}

async fn frozen_in_database(sql: &Client, board: i64) -> Vec<(i32, i32)> {
    sql.query(
        "SELECT x, y FROM place.frozen_tiles($1) ORDER BY y, x",
        &[&board],
    )
    .await
    .unwrap()
    .iter()
    .map(|row| (row.get(0), row.get(1)))
    .collect()
}

async fn history_len(sql: &Client, board: i64) -> i64 {
    sql.query_one(
        "SELECT count(*) FROM place.placements WHERE board_id = $1",
        &[&board],
    )
    .await
    .unwrap()
    .get(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frozen_tiles_reach_sessions_and_refuse_placements() {
    let url = fresh_database("gw_freezing").await;
    let sql = connect(&url).await;
    let board = create_board(&sql, "freezing", (8, 4), 2, "0").await;
    let users = create_users_with_tokens(&sql, "f", 1).await;
    // (1, 1) has shown colour 2 for an hour; (2, 1) is old but colour 0.
    sql.batch_execute(&format!(
        "SELECT count(*) FROM place.place_many({board}, ARRAY[{u}, {u}]::bigint[], '{{1,2}}', '{{1,1}}', '{{2,0}}');
         UPDATE place.placements SET placed_at = placed_at - interval '1 hour' WHERE board_id = {board};",
        u = users[0].0
    ))
    .await
    .unwrap();
    let gw = start_gateway(&url, |_| {}).await;
    let http = Http::new(gw.addr);
    let (session, state) = http
        .signed_in_view(&users[0].1, json!({"board": board, "compact": true}))
        .await;
    assert_eq!(
        (state["freeze_after"].clone(), state["frozen"].clone()),
        (Value::Null, Value::Null)
    );

    // Turning freezing on reloads the board: settings, then a reset with the bitmap.
    sql.execute("SELECT place.set_freeze_after($1, '2 seconds')", &[&board])
        .await
        .unwrap();
    let events = until(&http, &session, |e| e["action"] == "reset").await;
    let state = &events.last().unwrap()["obj"];
    assert_eq!(state["freeze_after"], json!(2.0));
    assert_eq!(frozen_in(state), [(1, 1)]);

    // A frozen tile refuses placements with its own code, and nothing is written.
    let before = history_len(&sql, board).await;
    let error = http
        .call("board.place", json!([session, board, 1, 1, 3]))
        .await
        .unwrap_err();
    assert_eq!(error["code"], -32010, "{error}");
    assert_eq!(error["data"], json!({"x": 1, "y": 1}));
    assert_eq!(history_len(&sql, board).await, before);

    // A new tile freezes two seconds after its placement; the event never comes before
    // the database holds the tile frozen. A region that holds the tile hears it too.
    let region_session = http.ok("session.create", json!([])).await;
    let region = json!({"board": board, "x": 2, "y": 0, "width": 2, "height": 2, "compact": true});
    let region_key = http
        .ok(
            "session.subscribe",
            json!([region_session, "board_region", region]),
        )
        .await[0]
        .clone();
    http.ok("board.place", json!([session, board, 3, 0, 1]))
        .await;
    let events = until(&http, &session, |e| e["action"] == "frozen").await;
    let frozen = events.last().unwrap();
    assert_eq!(frozen["obj"]["tiles"], json!([[3, 0]]), "{events:?}");
    let region_events = until(&http, &region_session, |e| e["action"] == "frozen").await;
    let region_frozen = region_events.last().unwrap();
    assert_eq!(region_frozen["key"], region_key);
    assert_eq!(
        region_frozen["obj"], frozen["obj"],
        "the same tiles, at the same seq"
    );
    // Announced no earlier than the database froze it.
    let late: bool = sql
        .query_one(
            "SELECT clock_timestamp() >= frozen_at FROM place.frozen_tiles($1) WHERE x = 3 AND y = 0",
            &[&board],
        )
        .await
        .unwrap()
        .get(0);
    assert!(late, "announced before the moment");
    assert_eq!(frozen_in_database(&sql, board).await, [(3, 0), (1, 1)]);
    assert_eq!(
        http.error_code("board.place", json!([session, board, 3, 0, 2]))
            .await,
        -32010
    );
    // The database refuses it too, whoever asks.
    let next: String = sql
        .query_one(
            "SELECT next_allowed_at::text FROM place.place($1, 3, 0, 2, $2)",
            &[&board, &users[0].0],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(next, "infinity");

    // A repair writes the frozen tile as an ordinary placement: it is open again.
    sql.execute(
        "SELECT place.restore_region($1, 3, 0, 1, 1, '2000-01-01')",
        &[&board],
    )
    .await
    .unwrap();
    let events = until(&http, &session, |e| e["action"] == "tiles").await;
    assert_eq!(events.last().unwrap()["tiles"], json!([[3, 0, 0]]));
    http.ok("board.place", json!([session, board, 3, 0, 2]))
        .await;

    // A gateway that loads the board now starts from the database's frozen tiles.
    let fresh = start_gateway(&url, |_| {}).await;
    let fresh_http = Http::new(fresh.addr);
    let other = fresh_http.ok("session.create", json!([])).await;
    let reply = fresh_http
        .ok(
            "session.subscribe",
            json!([other, "board", {"board": board}]),
        )
        .await;
    assert_eq!(frozen_in(&reply[1]), [(1, 1)]);

    // Off again: a reset without a bitmap, and the old tile takes placements.
    sql.execute("SELECT place.set_freeze_after($1, NULL)", &[&board])
        .await
        .unwrap();
    let events = until(&http, &session, |e| e["action"] == "reset").await;
    assert_eq!(events.last().unwrap()["obj"]["frozen"], Value::Null);
    http.ok("board.place", json!([session, board, 1, 1, 3]))
        .await;
}
