//! GET /metrics (Prometheus text) counts what the gateway did, on the main address or
//! (`--metrics-listen`) on its own; /healthz says the process lives, /readyz that it can
//! serve.

use hyper::header::HeaderMap;
use hyper::StatusCode;
use pgplace_tests::gateway::{start_gateway, Http};
use pgplace_tests::raw_http;
use pgplace_tests::{connect, create_board, create_users_with_tokens, fresh_database};
use serde_json::json;
use std::collections::HashMap;
use std::time::Duration;

/// The samples of a scrape: `name{labels}` → value.
async fn scrape(http: &Http) -> HashMap<String, f64> {
    let (status, headers, body) = http.get("/metrics", &HeaderMap::new()).await;
    assert_eq!(status, StatusCode::OK);
    assert!(headers["content-type"]
        .to_str()
        .unwrap()
        .starts_with("application/openmetrics-text"));
    let text = String::from_utf8(body.to_vec()).unwrap();
    assert!(text.ends_with("# EOF\n"), "a complete exposition");
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| {
            let (name, value) = l.rsplit_once(' ').expect("name value");
            (name.to_string(), value.parse().expect("a number"))
        })
        .collect()
}

/// The status of a JSON POST to `path` on a new connection.
async fn post(addr: std::net::SocketAddr, path: &str) -> u16 {
    let request = raw_http::http(
        "POST",
        path,
        &[("Content-Type", "application/json")],
        br#"{"jsonrpc":"2.0","method":"board.list","id":1}"#,
    );
    raw_http::exchange(addr, &request, false)
        .await
        .expect("an answer")
        .status
}

fn sample(samples: &HashMap<String, f64>, name: &str) -> f64 {
    *samples
        .get(name)
        .unwrap_or_else(|| panic!("no sample {name} in {samples:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_sessions_polls_placements_and_refusals() {
    let _alone = pgplace_tests::alone();
    let url = fresh_database("gw_metrics").await;
    let sql = connect(&url).await;
    let board = create_board(&sql, "metrics", (16, 16), 4, "0").await;
    let users = create_users_with_tokens(&sql, "metrics", 1).await;
    let gw = start_gateway(&url, |_| {}).await;
    let http = Http::new(gw.addr);
    let before = scrape(&http).await;

    let (session, _) = http
        .signed_in_view(&users[0].1, json!({"board": board}))
        .await;
    for i in 0..5 {
        http.ok("board.place", json!([session, board, i, 0, 3]))
            .await;
    }
    let events = http.ok("session.get_events", json!([session, 1])).await;
    assert_eq!(events.as_array().unwrap().len(), 5);
    let refused = http.raw_post("text/html", "{}").await;
    assert_eq!(refused, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    // One poll waits while the metrics are read.
    let waiting = {
        let http = http.clone();
        let session = session.clone();
        tokio::spawn(async move { http.ok("session.get_events", json!([session, 3])).await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;

    let after = scrape(&http).await;
    let grew = |name: &str| sample(&after, name) - before.get(name).copied().unwrap_or(0.0);
    assert!(sample(&after, "pgplace_sessions") >= 1.0);
    assert!(sample(&after, "pgplace_waiting_polls") >= 1.0);
    assert!(grew("pgplace_events_delivered_total") >= 5.0);
    assert!(grew("pgplace_placements_total{outcome=\"placed\"}") >= 5.0);
    assert!(grew("pgplace_rpc_duration_seconds_count{method=\"board.place\"}") >= 5.0);
    assert!(grew("pgplace_rejected_requests_total{limit=\"content_type\"}") >= 1.0);
    assert!(grew("pgplace_http_requests_total{route=\"/jsonrpc\",status=\"415\"}") >= 1.0);
    assert!(sample(&after, "pgplace_db_pool_connections{state=\"max\"}") >= 1.0);
    waiting.await.unwrap();

    let (status, headers, _) = http.get("/healthz", &HeaderMap::new()).await;
    assert_eq!(status, StatusCode::OK);
    let made = headers["x-request-id"].to_str().unwrap();
    assert!(
        made.len() == 16 && made.bytes().all(|b| b.is_ascii_hexdigit()),
        "{made}"
    );
    // A proxy's request id is kept (and logged with the request); a strange one is not.
    for (sent, kept) in [("edge-42.a", true), ("has space", false), ("", false)] {
        let mut asked = HeaderMap::new();
        asked.insert("x-request-id", sent.parse().unwrap());
        let (_, headers, _) = http.get("/healthz", &asked).await;
        assert_eq!(headers["x-request-id"] == sent, kept, "{sent:?}");
    }
    let (status, _, body) = http.get("/readyz", &HeaderMap::new()).await;
    assert_eq!(status, StatusCode::OK, "{body:?}");

    // Shutting down: not ready any more (a balancer stops sending), still alive.
    gw.app
        .closing
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let (status, _, _) = http.get("/readyz", &HeaderMap::new()).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    let (status, _, _) = http.get("/healthz", &HeaderMap::new()).await;
    assert_eq!(status, StatusCode::OK);
}

/// `--metrics-listen`: /metrics moves to its own address (what a scraper on a private
/// network reads), the main address answers it with 404 like any unknown route, the
/// metrics address serves nothing else, and it closes with the gateway.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_on_their_own_address_only() {
    let _alone = pgplace_tests::alone();
    let url = fresh_database("gw_metrics_listen").await;
    let sql = connect(&url).await;
    let board = create_board(&sql, "metrics_listen", (8, 8), 4, "0").await;
    let gw = start_gateway(&url, |config| {
        config.metrics_listen = Some("127.0.0.1:0".parse().unwrap());
    })
    .await;
    let metrics_addr = gw.metrics_addr.expect("a metrics address");
    assert_ne!(metrics_addr, gw.addr);
    let main = Http::new(gw.addr);
    let private = Http::new(metrics_addr);

    // The main address: everything but /metrics.
    let session = main.ok("session.create", json!([])).await;
    main.ok(
        "session.subscribe",
        json!([session, "board", {"board": board}]),
    )
    .await;
    for path in ["/metrics", "/metrics?x=1"] {
        let (status, headers, body) = main.get(path, &HeaderMap::new()).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{path}");
        let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert!(
            !body["routes"].to_string().contains("/metrics"),
            "the 404 does not offer /metrics: {body}"
        );
        assert!(headers.contains_key("x-content-type-options"));
    }
    assert_eq!(post(gw.addr, "/metrics").await, 404, "POST /metrics");
    let (status, _, _) = main.get("/healthz", &HeaderMap::new()).await;
    assert_eq!(status, StatusCode::OK);

    // The metrics address: the usual exposition, counting what the main address did.
    let samples = scrape(&private).await;
    assert!(sample(&samples, "pgplace_sessions") >= 1.0);
    assert!(sample(&samples, "pgplace_db_pool_connections{state=\"max\"}") >= 1.0);
    assert!(
        sample(
            &samples,
            "pgplace_http_requests_total{route=\"/metrics\",status=\"404\"}"
        ) >= 3.0
    );
    assert!(
        sample(
            &samples,
            "pgplace_rpc_duration_seconds_count{method=\"session.subscribe\"}"
        ) >= 1.0
    );
    let (status, headers, _) = private.get("/metrics", &HeaderMap::new()).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers["cache-control"], "no-store");
    // ... and nothing else.
    for path in ["/healthz", "/readyz", "/", "/boards/1/bits"] {
        let (status, _, _) = private.get(path, &HeaderMap::new()).await;
        assert_eq!(
            status,
            StatusCode::NOT_FOUND,
            "{path} on the metrics address"
        );
    }
    assert_eq!(
        post(metrics_addr, "/jsonrpc").await,
        404,
        "POST /jsonrpc there"
    );
    assert_eq!(
        post(metrics_addr, "/metrics").await,
        405,
        "POST /metrics there"
    );

    // It stops with the gateway, a kept-alive scraper's connection too.
    gw.shutdown_gracefully(Duration::from_secs(4)).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        tokio::net::TcpStream::connect(metrics_addr).await.is_err(),
        "the metrics address still accepts connections after shutdown"
    );
    assert!(private
        .try_get("/metrics", &HeaderMap::new())
        .await
        .is_err());
}
