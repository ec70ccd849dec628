//! A legacy client (no `ack`) whose answer never reached it loses nothing: it sent
//! `get_events` and went away before reading (at once, or after the answer arrived unread,
//! or while the poll waited), and the events come with its session's next poll. A client
//! that half-closes after its request still gets its answer, and those events do not
//! come twice.

use pgplace_tests::gateway::{start_gateway, Http};
use pgplace_tests::{connect, create_board, create_users, fresh_database};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const SESSIONS: usize = 40;
const ROUNDS: usize = 6;
const PER_ROUND: i32 = 10;

/// How a client treats one poll.
#[derive(Clone, Copy, Debug)]
enum Client {
    /// Sends the request and closes at once.
    GoneAtOnce,
    /// Sends the request, lets the answer arrive, closes without reading it.
    GoneUnread,
    /// Sends the request, closes its sending side, reads the answer.
    HalfClosed,
    /// An ordinary client.
    Reads,
}

fn poll_request(session: &Value, timeout: f64) -> Vec<u8> {
    let body = json!({"jsonrpc": "2.0", "method": "session.get_events",
        "params": [session, timeout], "id": 1})
    .to_string();
    format!(
        "POST /jsonrpc HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n\
         Connection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// One poll by a client of kind `how`: the events it read (none when it went away).
async fn poll(addr: SocketAddr, session: &Value, how: Client, timeout: f64) -> Vec<Value> {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(&poll_request(session, timeout))
        .await
        .unwrap();
    match how {
        Client::GoneAtOnce => return Vec::new(),
        Client::GoneUnread => {
            tokio::time::sleep(Duration::from_millis(100)).await;
            return Vec::new();
        }
        Client::HalfClosed => stream.shutdown().await.unwrap(),
        Client::Reads => {}
    }
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(20), stream.read_to_end(&mut answer))
        .await
        .expect("the answer comes")
        .unwrap();
    let text = String::from_utf8(answer).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").expect("an HTTP answer");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let reply: Value = serde_json::from_str(body).unwrap();
    reply["result"].as_array().expect("events").clone()
}

/// `count` new sessions, each subscribed to `board`.
async fn watching(http: &Http, board: i64, count: usize) -> Vec<Value> {
    let mut sessions = Vec::new();
    for _ in 0..count {
        let session = http.ok("session.create", json!([])).await;
        http.ok(
            "session.subscribe",
            json!([session, "board", {"board": board}]),
        )
        .await;
        sessions.push(session);
    }
    sessions
}

fn seqs(events: &[Value]) -> Vec<i64> {
    events
        .iter()
        .filter_map(|e| e["obj"]["seq"].as_i64())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_that_never_reached_their_client_come_again() {
    let url = fresh_database("gw_gone").await;
    let sql = connect(&url).await;
    let board = create_board(&sql, "gone", (64, 64), 4, "0").await;
    let user = create_users(&sql, "gone", 1).await[0];
    let gw = start_gateway(&url, |_| {}).await;
    let http = Http::new(gw.addr);

    let sessions = watching(&http, board, SESSIONS).await;
    let mut next = 0;
    let mut place = async |count: i32| {
        let xs: Vec<i32> = (next..next + count).map(|i| i % 64).collect();
        let ys: Vec<i32> = (next..next + count).map(|i| i / 64 % 64).collect();
        let colors: Vec<i32> = (next..next + count).map(|i| 1 + i % 15).collect();
        next += count;
        sql.execute(
            "SELECT place.place_many($1, array_fill($2::bigint, ARRAY[$3::int]), $4, $5, $6)",
            &[&board, &user, &count, &xs, &ys, &colors],
        )
        .await
        .unwrap();
    };

    let mut read: BTreeMap<usize, Vec<i64>> = BTreeMap::new();
    let kinds = [
        Client::GoneAtOnce,
        Client::GoneUnread,
        Client::HalfClosed,
        Client::Reads,
    ];
    let mut gone = 0;
    for round in 0..ROUNDS {
        place(PER_ROUND).await;
        // The answer is ready when each request arrives.
        let polls = sessions.iter().enumerate().map(|(i, session)| {
            let how = kinds[(i + round) % kinds.len()];
            async move { (i, how, poll(gw.addr, session, how, 5.0).await) }
        });
        for (i, how, events) in futures::future::join_all(polls).await {
            if matches!(how, Client::GoneAtOnce | Client::GoneUnread) {
                gone += 1;
            }
            read.entry(i).or_default().extend(seqs(&events));
        }
    }
    // Polls that wait, whose clients go away before the events come.
    let waiting = sessions
        .iter()
        .map(|session| poll(gw.addr, session, Client::GoneAtOnce, 10.0));
    futures::future::join_all(waiting).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    place(PER_ROUND).await;
    tokio::time::sleep(Duration::from_millis(500)).await;

    let placed = next as i64;
    for (i, session) in sessions.iter().enumerate() {
        let got = read.entry(i).or_default();
        while got.last().copied().unwrap_or(0) < placed {
            let events = poll(gw.addr, session, Client::Reads, 5.0).await;
            assert!(!events.is_empty(), "session {i} stopped at {got:?}");
            got.extend(seqs(&events));
        }
        assert_eq!(
            *got,
            (1..=placed).collect::<Vec<_>>(),
            "session {i}: every placement exactly once, in order"
        );
    }
    assert!(
        gone >= SESSIONS * ROUNDS / 2 - 1,
        "{gone} polls went unread"
    );
}

/// A client whose connection goes silent with an answer half sent (it stops reading; a
/// network that drops the flow looks the same to the gateway: no reset, no FIN) and that
/// polls again on a new connection gets that answer's events again, then each once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_stuck_on_a_silent_connection_comes_again_on_the_next() {
    let url = fresh_database("gw_silent").await;
    let sql = connect(&url).await;
    let board = create_board(&sql, "silent", (64, 64), 4, "0").await;
    let user = create_users(&sql, "silent", 1).await[0];
    let gw = start_gateway(&url, |_| {}).await;
    let http = Http::new(gw.addr);
    let session = http.ok("session.create", json!([])).await;
    http.ok(
        "session.subscribe",
        json!([session, "board", {"board": board}]),
    )
    .await;
    // Enough events that the answer cannot all fit in the socket buffers of a client with
    // a tiny receive window.
    let placed = 4_000;
    for batch in 0..4 {
        let xs: Vec<i32> = (0..1000).map(|i| i % 64).collect();
        let ys: Vec<i32> = (0..1000).map(|i| (i / 64) % 64).collect();
        let colors: Vec<i32> = (0..1000).map(|i| 1 + (i + batch) % 15).collect();
        sql.execute(
            "SELECT place.place_many($1, array_fill($2::bigint, ARRAY[1000]), $3, $4, $5)",
            &[&board, &user, &xs, &ys, &colors],
        )
        .await
        .unwrap();
    }
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut silent = socket.connect(gw.addr).await.unwrap();
    silent
        .write_all(&poll_request(&session, 5.0))
        .await
        .unwrap();
    // It reads nothing, and does not close: the gateway cannot tell it from a dead link.
    tokio::time::sleep(Duration::from_millis(500)).await;

    let mut got = Vec::new();
    while got.last().copied().unwrap_or(0) < placed {
        let events = poll(gw.addr, &session, Client::Reads, 5.0).await;
        assert!(!events.is_empty(), "stopped at {}", got.len());
        got.extend(seqs(&events));
    }
    assert_eq!(
        got,
        (1..=placed).collect::<Vec<_>>(),
        "every seq once, from the first"
    );
    drop(silent);
}

/// A legacy client that pipelines another request behind its waiting poll, then hangs up
/// without reading: the request behind the poll was sent before the poll's answer existed,
/// so it proves nothing about that answer, whose events come with the session's next poll.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_pipelined_behind_a_waiting_poll_does_not_count_as_reading_it() {
    const CLIENTS: usize = 20;
    let url = fresh_database("gw_pipelined").await;
    let sql = connect(&url).await;
    let board = create_board(&sql, "pipelined", (16, 16), 4, "0").await;
    let user = create_users(&sql, "pipelined", 1).await[0];
    let gw = start_gateway(&url, |_| {}).await;
    let http = Http::new(gw.addr);
    let sessions = watching(&http, board, CLIENTS).await;
    // Each client: a waiting poll, and right behind it on the same connection another request.
    let list = json!({"jsonrpc": "2.0", "method": "board.list", "id": 2}).to_string();
    let behind = format!(
        "POST /jsonrpc HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{list}",
        list.len()
    );
    let mut clients = Vec::new();
    for session in &sessions {
        let waiting = String::from_utf8(poll_request(session, 10.0))
            .unwrap()
            .replace("Connection: close\r\n", "");
        let mut stream = TcpStream::connect(gw.addr).await.unwrap();
        stream
            .write_all(format!("{waiting}{behind}").as_bytes())
            .await
            .unwrap();
        clients.push(stream);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    sql.execute("SELECT place.place($1, 3, 4, 5, $2)", &[&board, &user])
        .await
        .unwrap();
    // Both answers arrive; the clients read neither and hang up (unread data: a reset).
    tokio::time::sleep(Duration::from_millis(700)).await;
    drop(clients);
    tokio::time::sleep(Duration::from_millis(300)).await;

    for (i, session) in sessions.iter().enumerate() {
        let events = poll(gw.addr, session, Client::Reads, 2.0).await;
        assert_eq!(
            seqs(&events),
            vec![1],
            "session {i}: the placement its unread answer carried comes again"
        );
    }
}
