//! Knobs turned in SQL reach a live gateway session as events, and moderation shows up
//! as ordinary placements.

use hyper::header::HeaderMap;
use hyper::StatusCode;
use pgplace_tests::gateway::{start_gateway, Http};
use pgplace_tests::{connect, create_board, create_users_with_tokens, fresh_database};
use serde_json::{json, Value};

async fn until(http: &Http, session: &Value, wanted: impl Fn(&Value) -> bool) -> Vec<Value> {
    http.events_until(session, 20, wanted).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn knobs_and_moderation_reach_a_live_session() {
    let url = fresh_database("gw_knobs").await;
    let sql = connect(&url).await;
    let board = create_board(&sql, "knobs", (8, 4), 2, "0").await;
    let users = create_users_with_tokens(&sql, "k", 2).await;
    let gw = start_gateway(&url, |_| {}).await;
    let http = Http::new(gw.addr);
    let (session, _) = http
        .signed_in_view(&users[0].1, json!({"board": board}))
        .await;

    // A palette change is a settings event with the new palette.
    sql.execute(
        "SELECT place.set_palette($1, ARRAY['#000000', '#ff0000', '#00ff00', '#0000ff'])",
        &[&board],
    )
    .await
    .unwrap();
    let events = until(&http, &session, |e| e["action"] == "settings").await;
    let palette = &events.last().unwrap()["obj"]["palette"];
    assert_eq!(
        palette,
        &json!(["#000000", "#ff0000", "#00ff00", "#0000ff"])
    );
    // Every colour changed, so none keeps its default name; names given are the next event.
    assert_eq!(
        events.last().unwrap()["obj"]["palette_names"],
        json!([null, null, null, null])
    );
    sql.execute(
        "SELECT place.set_palette_names($1, ARRAY['black', 'red', NULL, 'blue'])",
        &[&board],
    )
    .await
    .unwrap();
    let events = until(&http, &session, |e| e["action"] == "settings").await;
    assert_eq!(
        events.last().unwrap()["obj"]["palette_names"],
        json!(["black", "red", null, "blue"])
    );

    // Frozen: the session hears it, and placing is refused with the board's state.
    sql.execute("SELECT place.set_board_state($1, 'frozen')", &[&board])
        .await
        .unwrap();
    let events = until(&http, &session, |e| e["action"] == "settings").await;
    assert_eq!(events.last().unwrap()["obj"]["state"], "frozen");
    let error = http
        .call("board.place", json!([session, board, 1, 1, 1]))
        .await
        .unwrap_err();
    assert_eq!(error["code"], -32006);
    assert!(
        error["message"].as_str().unwrap().contains("frozen"),
        "{error}"
    );
    sql.execute("SELECT place.set_board_state($1, 'open')", &[&board])
        .await
        .unwrap();
    until(&http, &session, |e| e["obj"]["state"] == "open").await;

    // A griefer paints; revert_user puts the tile back as an ordinary, numbered event.
    let griefer = users[1].0;
    let before: String = sql
        .query_one("SELECT clock_timestamp()::text", &[])
        .await
        .unwrap()
        .get(0);
    sql.execute("SELECT place.place($1, 2, 2, 3, $2)", &[&board, &griefer])
        .await
        .unwrap();
    until(&http, &session, |e| e["obj"]["color"] == 3).await;
    sql.execute(
        "SELECT place.revert_user($1, $2, $3::text::timestamptz)",
        &[&board, &griefer, &before],
    )
    .await
    .unwrap();
    let events = until(&http, &session, |e| e["action"] == "update").await;
    let repair = events.last().unwrap();
    assert_eq!(repair["old"], json!({"x": 2, "y": 2, "color": 3}));
    assert_eq!(repair["obj"]["color"], 0);
    assert_eq!(repair["obj"]["seq"], 2);
    let moderator: i64 = sql
        .query_one("SELECT id FROM place.users WHERE name = 'moderation'", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(repair["obj"]["user"], moderator);

    // A banned user's session is refused as not authorized.
    sql.execute("SELECT place.ban_user($1, NULL, 'test')", &[&users[0].0])
        .await
        .unwrap();
    let error = http
        .call("board.place", json!([session, board, 1, 1, 1]))
        .await
        .unwrap_err();
    assert_eq!(error["code"], -32002);
    assert!(
        error["message"].as_str().unwrap().contains("banned"),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resize_resets_sessions_to_the_new_board_and_the_stream_goes_on() {
    let url = fresh_database("gw_resize").await;
    let sql = connect(&url).await;
    let board = create_board(&sql, "resize", (8, 4), 4, "0").await;
    let users = create_users_with_tokens(&sql, "r", 1).await;
    let gw = start_gateway(&url, |_| {}).await;
    let http = Http::new(gw.addr);
    let (session, state) = http
        .signed_in_view(&users[0].1, json!({"board": board, "compact": true}))
        .await;
    assert_eq!(state["width"], 8);
    let before_any: String = sql
        .query_one("SELECT clock_timestamp()::text", &[])
        .await
        .unwrap()
        .get(0);
    http.ok("board.place", json!([session, board, 7, 3, 5]))
        .await;
    sql.execute("SELECT place.resize_board($1, 12, 6)", &[&board])
        .await
        .unwrap();
    let events = until(&http, &session, |e| e["action"] == "reset").await;
    let state = &events.last().unwrap()["obj"];
    assert_eq!(
        (state["width"].clone(), state["height"].clone()),
        (json!(12), json!(6))
    );
    assert_eq!(state["seq"], 1);
    // The reset's bits are the resized board (the tile at (7, 3) kept).
    let (_, bits) = pgplace_tests::board_bits(&sql, board).await;
    use base64::Engine;
    let sent = base64::engine::general_purpose::STANDARD
        .decode(state["bits"].as_str().unwrap())
        .unwrap();
    assert_eq!(sent, bits);
    // Placing goes on at the new size, and arrives as usual.
    let placed = http
        .ok("board.place", json!([session, board, 11, 5, 2]))
        .await;
    assert_eq!(placed["seq"], 2);
    let events = until(&http, &session, |e| e["action"] == "tiles").await;
    assert_eq!(events.last().unwrap()["tiles"], json!([[11, 5, 2]]));
    // Pictures: now at the new size, and before the resize at the size the board had then.
    let png = |query: String| {
        let http = http.clone();
        async move {
            let (status, _, body) = http
                .get(&format!("/boards/{board}.png{query}"), &HeaderMap::new())
                .await;
            assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
            pgplace_core::png::decode(&body).unwrap()
        }
    };
    let now = png(String::new()).await;
    assert_eq!((now.width, now.height), (12, 6));
    let at = before_any.replace(' ', "%20").replace('+', "%2B");
    let then = png(format!("?at={at}")).await;
    assert_eq!((then.width, then.height), (8, 4));
    assert!(
        then.indices.iter().all(|&c| c == 0),
        "the board was empty then"
    );
}
