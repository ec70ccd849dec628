//! A gateway started in the test process against a test database, and a small JSON-RPC
//! client that speaks to it over real HTTP.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::header::HeaderMap;
use hyper::{Method, Request, StatusCode};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use pgplace_gateway::{Config, Running};
use serde_json::{json, Value};
use std::net::SocketAddr;

/// The metric of the placements a gateway sent to its board's placer (`--placer-url`).
pub const FORWARDED_METRIC: &str = "pgplace_placements_forwarded_total";

/// One POST of `body` to `/jsonrpc` over HTTP/1.0, as the plainest HTTP stack sends it: a
/// connection of its own, no keep-alive, the answer ending when the server closes. The
/// answer's body, or why none came.
pub async fn http10_post(addr: SocketAddr, body: &str) -> Result<String, String> {
    Ok(http10_post_with_status(addr, body).await?.1)
}

/// `http10_post`, with the answer's HTTP status.
pub async fn http10_post_with_status(
    addr: SocketAddr,
    body: &str,
) -> Result<(u16, String), String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| format!("connecting to {addr}: {e}"))?;
    let request = format!(
        "POST /jsonrpc HTTP/1.0\r\nHost: test\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream
        .write_all(request.as_bytes())
        .await
        .map_err(|e| format!("sending: {e}"))?;
    let mut answer = Vec::new();
    tokio::time::timeout(
        std::time::Duration::from_secs(40),
        stream.read_to_end(&mut answer),
    )
    .await
    .map_err(|_| "no answer within 40 s".to_string())?
    .map_err(|e| format!("reading the answer: {e}"))?;
    let text = String::from_utf8(answer).map_err(|e| e.to_string())?;
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("not an HTTP answer: {text:?}"))?;
    let status = head
        .strip_prefix("HTTP/1.")
        .and_then(|rest| rest.get(2..5))
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| format!("not an HTTP status line: {head:?}"))?;
    Ok((status, body.to_string()))
}

/// A JSON-RPC 2.0 call over `http10_post`: as `Http::try_call`.
pub async fn http10_call(
    addr: SocketAddr,
    method: &str,
    params: Value,
) -> Result<Result<Value, Value>, String> {
    let text = http10_post(addr, &rpc_request(method, params)).await?;
    let value: Value = serde_json::from_str(&text).map_err(|e| format!("{e}: {text:?}"))?;
    Ok(rpc_outcome(&value))
}

/// A JSON-RPC 2.0 request's body (id 1).
fn rpc_request(method: &str, params: Value) -> String {
    json!({"jsonrpc": "2.0", "method": method, "params": params, "id": 1}).to_string()
}

/// A JSON-RPC answer's result, or its error.
fn rpc_outcome(answer: &Value) -> Result<Value, Value> {
    match answer.get("error") {
        Some(error) => Err(error.clone()),
        None => Ok(answer["result"].clone()),
    }
}

/// Starts a gateway on a free loopback port for database `url`, with `tune` applied to
/// the defaults.
pub async fn start_gateway(url: &str, tune: impl FnOnce(&mut Config)) -> Running {
    let mut config = Config::for_database(url);
    tune(&mut config);
    let running = pgplace_gateway::start(config)
        .await
        .expect("the gateway starts");
    wait_healthy(running.addr).await;
    running
}

/// A gateway on a port of its own that other gateways reach at `http://` that port, as a
/// board's placer (`--placer-url`), tuned further by `tune`.
pub async fn start_placer(url: &str, tune: impl FnOnce(&mut Config)) -> Running {
    let port = crate::processes::free_port();
    start_gateway(url, |c| {
        c.listen = SocketAddr::from(([127, 0, 0, 1], port));
        c.placer_url = Some(format!("http://127.0.0.1:{port}"));
        tune(c);
    })
    .await
}

/// Waits (up to 20 s) until /readyz says ok.
pub async fn wait_healthy(addr: SocketAddr) {
    let http = Http::new(addr);
    for _ in 0..200 {
        if let Ok((StatusCode::OK, _, _)) = http.try_get("/readyz", &HeaderMap::new()).await {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("the gateway at {addr} did not become healthy");
}

/// A keep-alive HTTP/1.1 client for one gateway.
#[derive(Clone)]
pub struct Http {
    pub addr: SocketAddr,
    client: Client<HttpConnector, Full<Bytes>>,
}

impl Http {
    /// How many times the gateway read list view `name` from the database
    /// (`pgplace_list_view_reads_total`).
    pub async fn view_reads(&self, name: &str) -> u64 {
        let series = format!("pgplace_list_view_reads_total{{view=\"{name}\"}}");
        self.metric(&series).await.map_or(0, |n| n as u64)
    }

    /// The value of one series of /metrics (its name and labels as scraped); None when
    /// the gateway has not reported it.
    pub async fn metric(&self, series: &str) -> Option<f64> {
        let (_, _, body) = self.get("/metrics", &Default::default()).await;
        let text = String::from_utf8(body.to_vec()).unwrap();
        let prefix = format!("{series} ");
        text.lines()
            .find_map(|line| line.strip_prefix(prefix.as_str()))
            .map(|n| n.trim().parse::<f64>().unwrap())
    }

    pub fn new(addr: SocketAddr) -> Self {
        Http {
            addr,
            client: Client::builder(TokioExecutor::new()).build_http(),
        }
    }

    /// POSTs `body` to /jsonrpc: the status and the body (None when empty).
    pub async fn post(&self, body: &str) -> (StatusCode, Option<Value>) {
        self.try_post(body).await.expect("the gateway answers")
    }

    /// Like `post`; an Err when no answer came (the connection failed).
    pub async fn try_post(&self, body: &str) -> Result<(StatusCode, Option<Value>), String> {
        let req = Request::builder()
            .method(Method::POST)
            .uri(format!("http://{}/jsonrpc", self.addr))
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(body.to_string())))
            .expect("a valid request");
        let response = self
            .client
            .request(req)
            .await
            .map_err(|e| format!("{e:?}"))?;
        let status = response.status();
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(|e| format!("{e:?}"))?
            .to_bytes();
        let value =
            if body.is_empty() {
                None
            } else {
                Some(serde_json::from_slice(&body).unwrap_or_else(|e| {
                    panic!("not JSON ({e}): {}", String::from_utf8_lossy(&body))
                }))
            };
        Ok((status, value))
    }

    /// A JSON-RPC 2.0 call sent with `X-Forwarded-For: forwarded_for` (the gateway trusts
    /// loopback proxies by default: the call counts against that address).
    pub async fn call_as(
        &self,
        forwarded_for: &str,
        method: &str,
        params: Value,
    ) -> Result<Value, Value> {
        let body = json!({"jsonrpc": "2.0", "method": method, "params": params, "id": 1});
        let req = Request::builder()
            .method(Method::POST)
            .uri(format!("http://{}/jsonrpc", self.addr))
            .header("content-type", "application/json")
            .header("x-forwarded-for", forwarded_for)
            .body(Full::new(Bytes::from(body.to_string())))
            .expect("a valid request");
        let response = self.client.request(req).await.expect("the gateway answers");
        assert_eq!(response.status(), StatusCode::OK);
        let body = response
            .into_body()
            .collect()
            .await
            .expect("a body")
            .to_bytes();
        let value: Value = serde_json::from_slice(&body).expect("JSON");
        match value.get("error") {
            Some(error) => Err(error.clone()),
            None => Ok(value["result"].clone()),
        }
    }

    /// POSTs `body` to /jsonrpc as `content_type`: the status.
    pub async fn raw_post(&self, content_type: &str, body: &str) -> StatusCode {
        let req = Request::builder()
            .method(Method::POST)
            .uri(format!("http://{}/jsonrpc", self.addr))
            .header("content-type", content_type)
            .body(Full::new(Bytes::from(body.to_string())))
            .expect("a valid request");
        let response = self.client.request(req).await.expect("the gateway answers");
        let status = response.status();
        let _ = response.into_body().collect().await;
        status
    }

    /// A JSON-RPC 2.0 call: Ok(result) or Err(error object).
    pub async fn call(&self, method: &str, params: Value) -> Result<Value, Value> {
        self.try_call(method, params)
            .await
            .expect("the gateway answers")
    }

    /// Like `call`; an outer Err when no answer came (the connection failed).
    pub async fn try_call(
        &self,
        method: &str,
        params: Value,
    ) -> Result<Result<Value, Value>, String> {
        let (status, value) = self.try_post(&rpc_request(method, params)).await?;
        assert_eq!(status, StatusCode::OK, "{method}: HTTP {status}");
        let value = value.expect("a response body");
        assert_eq!(value["jsonrpc"], "2.0");
        assert_eq!(value["id"], 1);
        Ok(rpc_outcome(&value))
    }

    /// Like `call`, panicking on an error.
    pub async fn ok(&self, method: &str, params: Value) -> Value {
        self.call(method, params.clone())
            .await
            .unwrap_or_else(|e| panic!("{method}({params}) failed: {e}"))
    }

    /// Like `ok`, trying again while the gateway says the database is unavailable
    /// (-32009: a restart), for up to two minutes: a crash recovery on a slow disk takes
    /// its time, and a client that retries is all the gateway asks for.
    pub async fn ok_in_a_moment(&self, method: &str, params: Value) -> Value {
        let started = std::time::Instant::now();
        loop {
            match self.call(method, params.clone()).await {
                Ok(result) => return result,
                Err(error) if error["code"] == -32009 && started.elapsed().as_secs() < 120 => {
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await
                }
                Err(error) => panic!("{method}({params}) failed: {error}"),
            }
        }
    }

    /// The error code of a call that must fail.
    pub async fn error_code(&self, method: &str, params: Value) -> i64 {
        self.err(method, params).await["code"]
            .as_i64()
            .expect("an error code")
    }

    /// The error object of a call that must fail.
    pub async fn err(&self, method: &str, params: Value) -> Value {
        match self.call(method, params.clone()).await {
            Ok(result) => panic!("{method}({params}) should fail, returned {result}"),
            Err(error) => error,
        }
    }

    /// A new session signed in with `token` and subscribed to the board view with
    /// `params`: the session id and the view's initial state.
    pub async fn signed_in_view(&self, token: &str, params: Value) -> (Value, Value) {
        let session = self.ok("session.create", json!([])).await;
        self.ok("session.authorize", json!([session, token])).await;
        let reply = self
            .ok("session.subscribe", json!([session, "board", params]))
            .await;
        (session, reply[1].clone())
    }

    /// A session's events until one matches `wanted` (at most `polls` polls of 5 s).
    pub async fn events_until(
        &self,
        session: &Value,
        polls: usize,
        wanted: impl Fn(&Value) -> bool,
    ) -> Vec<Value> {
        let mut seen = Vec::new();
        for _ in 0..polls {
            let events = self.ok("session.get_events", json!([session, 5])).await;
            for event in events.as_array().unwrap() {
                seen.push(event.clone());
                if wanted(event) {
                    return seen;
                }
            }
        }
        panic!("the awaited event never came; saw {seen:?}");
    }

    /// GET `path`: status, headers, body.
    pub async fn try_get(
        &self,
        path: &str,
        headers: &HeaderMap,
    ) -> Result<(StatusCode, HeaderMap, Bytes), hyper_util::client::legacy::Error> {
        let mut req = Request::builder()
            .uri(format!("http://{}{path}", self.addr))
            .body(Full::new(Bytes::new()))
            .expect("a valid request");
        req.headers_mut().extend(headers.clone());
        let response = self.client.request(req).await?;
        let (parts, body) = response.into_parts();
        let body = body
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        Ok((parts.status, parts.headers, body))
    }

    pub async fn get(&self, path: &str, headers: &HeaderMap) -> (StatusCode, HeaderMap, Bytes) {
        self.try_get(path, headers)
            .await
            .expect("the gateway answers")
    }
}

/// Terminates the gateway's LISTEN connection; returns how many backends were killed.
pub async fn kill_listen_backend(admin: &tokio_postgres::Client) -> i64 {
    // The listener may be between connections: wait for it to be back first.
    for _ in 0..100 {
        let killed: i64 = admin
            .query_one(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
                 WHERE application_name = 'pgplace-gateway (listen)' \
                 AND datname = current_database()",
                &[],
            )
            .await
            .expect("pg_terminate_backend")
            .get(0);
        if killed > 0 {
            return killed;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    0
}
