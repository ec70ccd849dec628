//! Retry-safe placements (0.8.7): a client whose `board.place` answer was lost places
//! again with the same `key`, and gets the first placement's answer. Before, the retry got
//! −32003 (the cooldown the lost placement started) or, on a board without a cooldown,
//! placed the tile a second time. The clients are Python's urllib (`Connection: close`)
//! and curl, the loss a socket closed with the request sent and the answer unread.

use pgplace_tests::curl::post_jsonrpc;
use pgplace_tests::gateway::{start_gateway, Http};
use pgplace_tests::{board_seq, connect, create_board, create_users_with_tokens, fresh_database};
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

fn body(method: &str, params: Value) -> String {
    json!({"jsonrpc": "2.0", "method": method, "params": params, "id": 1}).to_string()
}

/// One call with Python's urllib (`Connection: close`): the whole JSON-RPC reply.
async fn urllib(addr: SocketAddr, body: &str) -> Value {
    let (_, text) = pgplace_tests::urllib::post_jsonrpc(addr, body).await;
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text:?}"))
}

/// One call with curl (one-shot): the whole JSON-RPC reply.
async fn curl(addr: SocketAddr, body: &str) -> Value {
    let text = post_jsonrpc(addr, body).await;
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text:?}"))
}

/// Sends the request and closes the socket without reading: the answer is lost.
async fn send_and_hang_up(addr: SocketAddr, body: &str) {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let request = format!(
        "POST /jsonrpc HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    drop(stream);
}

/// A session signed in as the user with `token`.
async fn session_for(http: &Http, token: &str) -> Value {
    let session = http.ok("session.create", json!([])).await;
    http.ok("session.authorize", json!([session, token])).await;
    session
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retried_placement_is_answered_with_the_first() {
    let url = fresh_database("gw_retry_safe").await;
    let sql = connect(&url).await;
    let slow = create_board(&sql, "retry-cooldown", (16, 16), 4, "1 hour").await;
    let free = create_board(&sql, "retry-free", (16, 16), 4, "0").await;
    let users = create_users_with_tokens(&sql, "retrier", 2).await;
    let gw = start_gateway(&url, |_| {}).await;
    let other = start_gateway(&url, |_| {}).await;
    let http = Http::new(gw.addr);
    let session = session_for(&http, &users[0].1).await;
    let place = |board: i64, x: i32, color: i32, key: &str| {
        body(
            "board.place",
            json!({"session": session, "board": board, "x": x, "y": 1, "color": color, "key": key}),
        )
    };

    // The answer read and lost by the client; the retry, on the other gateway, within the
    // hour's cooldown: the first placement's seq, not −32003.
    let first = urllib(gw.addr, &place(slow, 1, 3, "tab-1")).await;
    let seq = first["result"]["seq"].as_i64().expect("placed");
    let retry = urllib(other.addr, &place(slow, 1, 3, "tab-1")).await;
    assert_eq!(
        retry["result"], first["result"],
        "the retry answers as the first did"
    );
    assert_eq!(
        board_seq(&sql, slow).await,
        seq,
        "the board's seq moved once"
    );
    // Without the key the same retry is a new placement: refused for the cooldown.
    let unkeyed = json!({"session": session, "board": slow, "x": 1, "y": 1, "color": 3});
    assert_eq!(http.error_code("board.place", unkeyed).await, -32003);
    // The key names that placement: another colour under it is refused, nothing placed.
    let other_colour = curl(gw.addr, &place(slow, 1, 4, "tab-1")).await;
    assert_eq!(other_colour["error"]["code"], -32602, "{other_colour}");
    assert_eq!(board_seq(&sql, slow).await, seq);

    // A board without a cooldown: the client hangs up before the answer, then retries
    // with curl. Whether the first request was placed (and the retry answered with it) or
    // dropped with its connection (and the retry placed), the tile is placed once.
    let before = board_seq(&sql, free).await;
    send_and_hang_up(gw.addr, &place(free, 2, 5, "tab-2")).await;
    let retry = curl(gw.addr, &place(free, 2, 5, "tab-2")).await;
    let seq = retry["result"]["seq"].as_i64().expect("placed");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(board_seq(&sql, free).await, before + 1, "placed once");
    assert_eq!(seq, before + 1);
    let again = urllib(other.addr, &place(free, 2, 5, "tab-2")).await;
    assert_eq!(again["result"]["seq"], json!(seq));

    // Retries at once through both gateways, as a client that gave up waiting would:
    // every answer names one placement.
    let before = board_seq(&sql, free).await;
    let calls: Vec<_> = (0..6)
        .map(|i| {
            let addr = [gw.addr, other.addr][i % 2];
            let body = place(free, 3, 6, "tab-3");
            tokio::spawn(async move { curl(addr, &body).await })
        })
        .collect();
    let mut seqs = Vec::new();
    for call in calls {
        let reply = call.await.unwrap();
        seqs.push(reply["result"]["seq"].as_i64().expect("placed"));
    }
    assert!(seqs.iter().all(|s| *s == before + 1), "{seqs:?}");
    assert_eq!(board_seq(&sql, free).await, before + 1);

    // Keys are the user's: another user's "tab-3" places its own tile.
    let theirs = session_for(&http, &users[1].1).await;
    let placed = http
        .ok(
            "board.place",
            json!({"session": theirs, "board": free, "x": 3, "y": 1, "color": 6, "key": "tab-3"}),
        )
        .await;
    assert_eq!(placed["seq"], json!(before + 2));
    // A bad key: a clear error before anything is asked of the database.
    for key in [String::new(), "k".repeat(201)] {
        let params =
            json!({"session": session, "board": free, "x": 4, "y": 1, "color": 1, "key": key});
        assert_eq!(http.error_code("board.place", params).await, -32602);
    }
    assert_eq!(board_seq(&sql, free).await, before + 2);
}
