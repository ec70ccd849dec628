//! Abuse limits over real HTTP: sessions per address and their creation rate, an IPv6
//! client per /64, placements per session and per address, connections per address and in
//! all, the database work of each address (and misses remembered), the client address taken
//! from a trusted proxy's X-Forwarded-For only, CORS, and the security headers of every
//! answer. Each refusal changes nothing.

use hyper::header::{HeaderMap, HeaderValue};
use hyper::StatusCode;
use pgplace_tests::gateway::{start_gateway, Http};
use pgplace_tests::{
    connect, create_board, create_users_with_tokens, fresh_database, history_rows,
};
use serde_json::json;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const TOO_MANY: i64 = -32007;
const TOO_FAST: i64 = -32011;
const NOT_AUTHORIZED: i64 = -32002;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_per_address_and_their_creation_rate() {
    let url = fresh_database("gw_limit_sessions").await;
    let gw = start_gateway(&url, |c| {
        c.max_sessions_per_address = 3;
        c.session_create_rate = 2;
        c.session_create_burst = 5;
    })
    .await;
    let http = Http::new(gw.addr);
    let a = "198.51.100.1";
    let mut sessions = Vec::new();
    for _ in 0..3 {
        sessions.push(http.call_as(a, "session.create", json!([])).await.unwrap());
    }
    let refused = http
        .call_as(a, "session.create", json!([]))
        .await
        .unwrap_err();
    assert_eq!(refused["code"], TOO_MANY, "{refused}");
    // Another address is another count; a client cannot pick its address by sending the
    // header itself (the trusted proxy's hop, the last, counts).
    http.call_as("198.51.100.2", "session.create", json!([]))
        .await
        .unwrap();
    let spoofed = http
        .call_as(&format!("198.51.100.9, {a}"), "session.create", json!([]))
        .await
        .unwrap_err();
    assert_eq!(spoofed["code"], TOO_MANY, "{spoofed}");
    // A destroyed session frees its place.
    http.call_as(a, "session.destroy", json!([sessions[0]]))
        .await
        .unwrap();
    http.call_as(a, "session.create", json!([])).await.unwrap();

    // The rate: a burst of 5, then 2 a second; the refusal says when to come back.
    let b = "198.51.100.3";
    let mut created = 0;
    let mut refusal = None;
    for _ in 0..8 {
        match http.call_as(b, "session.create", json!([])).await {
            Ok(_) => created += 1,
            Err(error) => {
                refusal = Some(error);
                break;
            }
        }
    }
    // At most the burst plus what the rate refilled meanwhile; the 3-session cap of the
    // address comes first here.
    assert_eq!(created, 3);
    assert_eq!(refusal.unwrap()["code"], TOO_MANY);
    let c = "198.51.100.4";
    let gw2 = start_gateway(&url, |c| {
        c.session_create_rate = 1;
        c.session_create_burst = 2;
    })
    .await;
    let http2 = Http::new(gw2.addr);
    http2.call_as(c, "session.create", json!([])).await.unwrap();
    http2.call_as(c, "session.create", json!([])).await.unwrap();
    let fast = http2
        .call_as(c, "session.create", json!([]))
        .await
        .unwrap_err();
    assert_eq!(fast["code"], TOO_FAST, "{fast}");
    let wait = fast["data"]["retry_after_ms"]
        .as_u64()
        .expect("retry_after_ms");
    assert!(wait > 0 && wait <= 1000, "{wait}");
    tokio::time::sleep(Duration::from_millis(wait + 20)).await;
    http2.call_as(c, "session.create", json!([])).await.unwrap();
    // Loopback itself (no client named) is a trusted proxy: not limited.
    for _ in 0..10 {
        http2.ok("session.create", json!([])).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ipv6_client_is_limited_per_64() {
    let url = fresh_database("gw_limit_ipv6").await;
    let gw = start_gateway(&url, |c| c.max_sessions_per_address = 2).await;
    let http = Http::new(gw.addr);
    // One host picks a new address of its /64 for each call: still one budget.
    http.call_as("2001:db8:1:2::1", "session.create", json!([]))
        .await
        .unwrap();
    http.call_as("2001:db8:1:2::2", "session.create", json!([]))
        .await
        .unwrap();
    let refused = http
        .call_as("2001:db8:1:2:aaaa::3", "session.create", json!([]))
        .await
        .unwrap_err();
    assert_eq!(refused["code"], TOO_MANY, "{refused}");
    assert!(
        refused["message"]
            .as_str()
            .unwrap()
            .contains("2001:db8:1:2::/64"),
        "{refused}"
    );
    // The next /64 is another client.
    http.call_as("2001:db8:1:3::1", "session.create", json!([]))
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn placements_per_session_and_per_address_change_nothing_when_refused() {
    let url = fresh_database("gw_limit_place").await;
    let sql = connect(&url).await;
    let board = create_board(&sql, "limits", (16, 16), 4, "0").await;
    let users = create_users_with_tokens(&sql, "limits", 3).await;
    let gw = start_gateway(&url, |c| {
        c.place_rate_per_session = 3;
        c.place_rate_per_address = 4;
    })
    .await;
    let http = Http::new(gw.addr);
    let a = "203.0.113.5";
    let signed_in = |token: String| {
        let http = http.clone();
        async move {
            let s = http.call_as(a, "session.create", json!([])).await.unwrap();
            http.call_as(a, "session.authorize", json!([s, token]))
                .await
                .unwrap();
            s
        }
    };
    let first = signed_in(users[0].1.clone()).await;
    for x in 0..3 {
        http.call_as(a, "board.place", json!([first, board, x, 0, 1]))
            .await
            .unwrap();
    }
    let before = history_rows(&sql).await;
    let refused = http
        .call_as(a, "board.place", json!([first, board, 5, 5, 1]))
        .await
        .unwrap_err();
    assert_eq!(refused["code"], TOO_FAST, "{refused}");
    assert!(refused["data"]["retry_after_ms"].as_u64().unwrap() > 0);
    assert_eq!(history_rows(&sql).await, before, "a refusal places nothing");
    // Another session from the same address: its own budget, but the address's (4 a
    // second, bursts of 8) is shared.
    let second = signed_in(users[1].1.clone()).await;
    let mut placed = 0;
    for x in 0..6 {
        match http
            .call_as(a, "board.place", json!([second, board, x, 1, 1]))
            .await
        {
            Ok(_) => placed += 1,
            Err(error) => assert_eq!(error["code"], TOO_FAST, "{error}"),
        }
    }
    assert!(placed <= 5, "the address's burst is spent: {placed}");
    // An anonymous session watches but may not place.
    let anonymous = http
        .call_as("203.0.113.6", "session.create", json!([]))
        .await
        .unwrap();
    let error = http
        .call_as(
            "203.0.113.6",
            "board.place",
            json!([anonymous, board, 9, 9, 1]),
        )
        .await
        .unwrap_err();
    assert_eq!(error["code"], NOT_AUTHORIZED);
    // A session never places as another user: placements carry its own user.
    let third = signed_in(users[2].1.clone()).await;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    http.call_as(a, "board.place", json!([third, board, 15, 15, 2]))
        .await
        .unwrap();
    let user: i64 = sql
        .query_one(
            "SELECT user_id FROM place.placements WHERE board_id = $1 AND x = 15 AND y = 15",
            &[&board],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(user, users[2].0);
}

/// A connection that sends GET /healthz: the first bytes of the answer.
async fn health_on_new_connection(addr: std::net::SocketAddr) -> (tokio::net::TcpStream, Vec<u8>) {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    // A refused connection may be closed before the request is written.
    let _ = stream
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")
        .await;
    let mut buf = vec![0; 512];
    let n = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buf))
        .await
        .expect("answered at once")
        .unwrap_or(0);
    buf.truncate(n);
    (stream, buf)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_per_address() {
    let url = fresh_database("gw_limit_conn").await;
    let gw = start_gateway(&url, |c| {
        // Loopback counts as a client here, not as a trusted proxy.
        c.trusted_proxies = String::new();
        c.max_connections_per_address = 3;
    })
    .await;
    // The readiness check's connection may still be open: at most 3 in all are served.
    let mut open = Vec::new();
    let refused = loop {
        let (stream, answer) = health_on_new_connection(gw.addr).await;
        if answer.starts_with(b"HTTP/1.1 200") {
            open.push(stream);
            assert!(
                open.len() <= 3,
                "a 4th connection from one address was served"
            );
        } else {
            break answer;
        }
    };
    assert!(open.len() >= 2, "{} served", open.len());
    assert!(
        refused.starts_with(b"HTTP/1.1 429"),
        "{}",
        String::from_utf8_lossy(&refused)
    );
    assert!(
        String::from_utf8_lossy(&refused).contains("x-content-type-options: nosniff"),
        "{}",
        String::from_utf8_lossy(&refused)
    );
    // A closed connection frees its place.
    open.clear();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (_stream, answer) = health_on_new_connection(gw.addr).await;
    assert!(answer.starts_with(b"HTTP/1.1 200"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_in_all() {
    let url = fresh_database("gw_limit_conn_total").await;
    // Loopback is a trusted proxy (the default): no maximum of its own, only the gateway's.
    let gw = start_gateway(&url, |c| c.max_connections = 3).await;
    let mut open = Vec::new();
    let refused = loop {
        let (stream, answer) = health_on_new_connection(gw.addr).await;
        if answer.starts_with(b"HTTP/1.1 200") {
            open.push(stream);
            assert!(open.len() <= 3, "a 4th connection was served");
        } else {
            break String::from_utf8_lossy(&answer).into_owned();
        }
    };
    assert!(open.len() >= 2, "{} served", open.len());
    assert!(refused.starts_with("HTTP/1.1 503"), "{refused}");
    assert!(refused.contains("maximum of 3 connections"), "{refused}");
    open.clear();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (_stream, answer) = health_on_new_connection(gw.addr).await;
    assert!(answer.starts_with(b"HTTP/1.1 200"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cors_answers_listed_origins_only() {
    let url = fresh_database("gw_limit_cors").await;
    let gw = start_gateway(&url, |c| c.cors_origins = "https://example.org".into()).await;
    let http = Http::new(gw.addr);
    let mut origin = HeaderMap::new();
    origin.insert("origin", HeaderValue::from_static("https://example.org"));
    let (status, headers, _) = http.get("/healthz", &origin).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        headers["access-control-allow-origin"],
        "https://example.org"
    );
    let mut other = HeaderMap::new();
    other.insert("origin", HeaderValue::from_static("https://evil.example"));
    let (_, headers, _) = http.get("/healthz", &other).await;
    assert!(!headers.contains_key("access-control-allow-origin"));
    // The preflight of a JSON POST.
    let preflight = |origin: &'static str| async move {
        let (_, answer) = {
            let mut stream = tokio::net::TcpStream::connect(gw.addr).await.unwrap();
            let request = format!(
                "OPTIONS /jsonrpc HTTP/1.1\r\nHost: t\r\nOrigin: {origin}\r\n\
                 Access-Control-Request-Method: POST\r\nConnection: close\r\n\r\n"
            );
            stream.write_all(request.as_bytes()).await.unwrap();
            let mut answer = Vec::new();
            stream.read_to_end(&mut answer).await.unwrap();
            ((), String::from_utf8(answer).unwrap())
        };
        answer
    };
    let allowed = preflight("https://example.org").await;
    assert!(allowed.starts_with("HTTP/1.1 204"), "{allowed}");
    assert!(allowed
        .to_ascii_lowercase()
        .contains("access-control-allow-methods: post"));
    let forbidden = preflight("https://evil.example").await;
    assert!(forbidden.starts_with("HTTP/1.1 403"), "{forbidden}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_answer_carries_the_security_headers() {
    let url = fresh_database("gw_security_headers").await;
    let gw = start_gateway(&url, |_| {}).await;
    let http = Http::new(gw.addr);
    // The page, a script, a JSON answer, an error, a route of its own (the picture).
    for path in [
        "/",
        "/js/app.js",
        "/healthz",
        "/no/such/route",
        "/boards/x.png",
    ] {
        let (_, headers, _) = http.get(path, &HeaderMap::new()).await;
        assert_eq!(
            headers["content-security-policy"], "default-src 'self'; frame-ancestors 'none'",
            "{path}"
        );
        assert_eq!(headers["x-content-type-options"], "nosniff", "{path}");
        assert_eq!(headers["referrer-policy"], "same-origin", "{path}");
    }
}

/// Database work is budgeted per client address: a flood of lookups that each reach the
/// database (distinct unknown board ids, random session ids) is refused once its address
/// has spent its budget (429 with Retry-After, or -32011), while another address goes on;
/// and a miss is remembered for a moment, so asking for the same unknown id again costs no
/// query and is answered 404 even from the spent address.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn database_work_is_budgeted_per_address_and_misses_are_remembered() {
    let url = fresh_database("gw_limit_database").await;
    let sql = connect(&url).await;
    let board = create_board(&sql, "budget", (8, 8), 4, "0").await;
    let gw = start_gateway(&url, |c| {
        c.db_rate_per_address = 1;
        c.db_burst_per_address = 5;
        c.db_wait_ms = 0;
    })
    .await;
    let http = Http::new(gw.addr);
    let as_client = |address: &str| {
        let mut headers = HeaderMap::new();
        headers.insert("x-forwarded-for", HeaderValue::from_str(address).unwrap());
        headers
    };
    let flooder = as_client("192.0.2.66");
    let mut statuses = Vec::new();
    let started = std::time::Instant::now();
    for n in 0..12 {
        let (status, headers, _) = http
            .get(&format!("/boards/{}/bits", 900_000 + n), &flooder)
            .await;
        if status == StatusCode::TOO_MANY_REQUESTS {
            assert!(headers.contains_key("retry-after"), "{headers:?}");
        }
        statuses.push(status.as_u16());
    }
    // Five at once, then one a second: a slow machine may earn a few more meanwhile.
    let earned = started.elapsed().as_secs() as usize + 1;
    let answered = statuses.iter().filter(|s| **s == 404).count();
    assert!(
        statuses.iter().all(|s| *s == 404 || *s == 429) && statuses[..5] == [404; 5],
        "{statuses:?}"
    );
    assert!(
        answered <= 5 + earned && answered < statuses.len(),
        "{statuses:?} in {:?}",
        started.elapsed()
    );
    // The same unknown id again: remembered, no query, so not refused.
    let (status, _, _) = http.get("/boards/900000/bits", &flooder).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    // Random session ids from the spent address are refused before any query ...
    let refused = http
        .call_as(
            "192.0.2.66",
            "session.get_events",
            json!(["0123456789abcdef0123456789abcdef", 0]),
        )
        .await
        .unwrap_err();
    assert_eq!(refused["code"], TOO_FAST, "{refused}");
    assert!(
        refused["data"]["retry_after_ms"].as_u64().unwrap() > 0,
        "{refused}"
    );
    // ... while another address is answered as usual, and so is a board the gateway
    // mirrors already (no database work), from the spent address too.
    let other = http
        .call_as(
            "192.0.2.67",
            "session.get_events",
            json!(["0123456789abcdef0123456789abcdef", 0]),
        )
        .await
        .unwrap_err();
    assert_eq!(other["code"], -32001, "{other}");
    let (status, _, _) = http
        .get(&format!("/boards/{board}/bits"), &as_client("192.0.2.67"))
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, _, _) = http.get(&format!("/boards/{board}/bits"), &flooder).await;
    assert_eq!(status, StatusCode::OK);
}

/// Past its database budget, a request waits for it (up to `--db-wait-ms`) instead of
/// being refused at once, and a refusal comes no sooner than that wait: a flood on
/// keep-alive connections is paced by its own answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_past_its_database_budget_waits_for_it_then_is_refused() {
    let url = fresh_database("gw_limit_database_wait").await;
    let client = |address: &str| {
        let mut headers = HeaderMap::new();
        headers.insert("x-forwarded-for", HeaderValue::from_str(address).unwrap());
        headers
    };
    let timed_get = |http: Http, path: String, headers: HeaderMap| async move {
        let started = std::time::Instant::now();
        let (status, headers, _) = http.get(&path, &headers).await;
        (status, headers, started.elapsed())
    };
    // Five a second, one at once, waits of up to a second: the next call is served late.
    let patient = start_gateway(&url, |c| {
        c.db_rate_per_address = 5;
        c.db_burst_per_address = 1;
        c.db_wait_ms = 1000;
    })
    .await;
    let http = Http::new(patient.addr);
    let a = client("192.0.2.70");
    let (status, _, _) = timed_get(http.clone(), "/boards/910001/bits".into(), a.clone()).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _, took) = timed_get(http.clone(), "/boards/910002/bits".into(), a.clone()).await;
    assert_eq!(
        status,
        StatusCode::NOT_FOUND,
        "served after a wait, not refused"
    );
    assert!(
        took >= Duration::from_millis(100),
        "it waited for the budget: {took:?}"
    );
    // One a second, waits of up to 300 ms: the budget is further off than that, so the
    // call is refused - after the 300 ms, not at once.
    let strict = start_gateway(&url, |c| {
        c.db_rate_per_address = 1;
        c.db_burst_per_address = 1;
        c.db_wait_ms = 300;
    })
    .await;
    let http = Http::new(strict.addr);
    let b = client("192.0.2.71");
    let (status, _, _) = timed_get(http.clone(), "/boards/910003/bits".into(), b.clone()).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, headers, took) =
        timed_get(http.clone(), "/boards/910004/bits".into(), b.clone()).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    assert!(headers.contains_key("retry-after"), "{headers:?}");
    assert!(
        took >= Duration::from_millis(290) && took < Duration::from_millis(950),
        "refused at the end of the wait: {took:?}"
    );
    // Another address is not held up meanwhile.
    let (status, _, took) = timed_get(
        http.clone(),
        "/boards/910005/bits".into(),
        client("192.0.2.72"),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(took < Duration::from_millis(290), "{took:?}");
}
