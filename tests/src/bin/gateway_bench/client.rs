//! One HTTP/1.1 keep-alive connection to the gateway, and JSON-RPC 2.0 over it.
//!
//! hyper's connection-level client rather than a pooled one: each simulated client must
//! own exactly one TCP connection (a long poll occupies its connection, and scenario
//! `waiting` counts connections), which a pool would hide.

use crate::Result;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::{self, SendRequest};
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request};
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};
use std::net::SocketAddr;
use tokio::net::TcpStream;
use tokio::task::JoinHandle;

pub struct Conn {
    addr: SocketAddr,
    sender: SendRequest<Full<Bytes>>,
    /// Drives the connection; aborted on drop so that the socket closes even while a
    /// request (a long poll) is outstanding.
    driver: JoinHandle<()>,
    /// Sent as `X-Forwarded-For` with every request: the gateway trusts loopback as a
    /// proxy, so this is the client address its per-address limits see (`flood`).
    forwarded_for: Option<HeaderValue>,
}

/// A response: status, ETag, Last-Modified, body.
pub struct Response {
    pub status: u16,
    pub etag: Option<String>,
    pub last_modified: Option<String>,
    pub body: Bytes,
}

impl Conn {
    pub async fn open(addr: SocketAddr) -> Result<Conn> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        let (sender, connection) = http1::handshake(TokioIo::new(stream)).await?;
        let driver = tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok(Conn {
            addr,
            sender,
            driver,
            forwarded_for: None,
        })
    }

    /// A connection whose requests come, as the gateway sees them, from `client`.
    pub async fn open_as(addr: SocketAddr, client: &str) -> Result<Conn> {
        let mut conn = Conn::open(addr).await?;
        conn.forwarded_for = Some(HeaderValue::from_str(client)?);
        Ok(conn)
    }

    pub async fn send(
        &mut self,
        method: Method,
        path: &str,
        headers: &[(header::HeaderName, &str)],
        body: Bytes,
    ) -> Result<Response> {
        let mut request = Request::builder()
            .method(method)
            .uri(path)
            .header(header::HOST, self.addr.to_string())
            .body(Full::new(body))?;
        for (name, value) in headers {
            request
                .headers_mut()
                .insert(name.clone(), HeaderValue::from_str(value)?);
        }
        if let Some(client) = &self.forwarded_for {
            request
                .headers_mut()
                .insert("x-forwarded-for", client.clone());
        }
        self.sender.ready().await?;
        let response = self.sender.send_request(request).await?;
        let status = response.status().as_u16();
        let text = |name: header::HeaderName| {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        };
        let (etag, last_modified) = (text(header::ETAG), text(header::LAST_MODIFIED));
        let body = response.into_body().collect().await?.to_bytes();
        Ok(Response {
            status,
            etag,
            last_modified,
            body,
        })
    }

    /// Whether the server has closed this connection (no request can go on it).
    pub fn is_closed(&self) -> bool {
        self.sender.is_closed()
    }

    /// GET `path`: status and body.
    pub async fn get(&mut self, path: &str, if_none_match: Option<&str>) -> Result<(u16, Bytes)> {
        let response = self.get_full(path, if_none_match).await?;
        Ok((response.status, response.body))
    }

    pub async fn get_full(&mut self, path: &str, if_none_match: Option<&str>) -> Result<Response> {
        let headers: Vec<_> = if_none_match
            .map(|tag| (header::IF_NONE_MATCH, tag))
            .into_iter()
            .collect();
        self.send(Method::GET, path, &headers, Bytes::new()).await
    }

    /// POSTs a JSON-RPC body; the raw response body (HTTP 200 required).
    pub async fn post(&mut self, body: Bytes) -> Result<Bytes> {
        let content_type = [(header::CONTENT_TYPE, "application/json")];
        let response = self
            .send(Method::POST, "/jsonrpc", &content_type, body)
            .await?;
        if response.status != 200 {
            return Err(format!(
                "HTTP {} from /jsonrpc: {}",
                response.status,
                String::from_utf8_lossy(&response.body)
            )
            .into());
        }
        Ok(response.body)
    }

    /// One call: its result, or its error as an Err.
    pub async fn call(&mut self, method: &str, params: Value) -> Result<Value> {
        let body = request(method, params).to_string();
        let response: Value = serde_json::from_slice(&self.post(body.into()).await?)?;
        result_of(method, response)
    }

    /// Several calls in one JSON-RPC batch: their results in order (any error fails all).
    pub async fn batch(
        &mut self,
        method: &str,
        params: impl IntoIterator<Item = Value>,
    ) -> Result<Vec<Value>> {
        let requests: Vec<Value> = params
            .into_iter()
            .enumerate()
            .map(|(i, p)| {
                let mut r = request(method, p);
                r["id"] = json!(i);
                r
            })
            .collect();
        let body = Value::Array(requests).to_string();
        let Value::Array(mut responses) = serde_json::from_slice(&self.post(body.into()).await?)?
        else {
            return Err(format!("{method}: a batch was not answered with an array").into());
        };
        // Answers of a batch may come in any order: put them back in request order.
        responses.sort_by_key(|r| r["id"].as_u64());
        responses
            .into_iter()
            .map(|r| result_of(method, r))
            .collect()
    }

    /// A new session, authorized as `token` when given.
    pub async fn session(&mut self, token: Option<&str>) -> Result<String> {
        let id = self.call("session.create", json!({})).await?;
        let id = id
            .as_str()
            .ok_or("session.create did not return a string")?
            .to_string();
        if let Some(token) = token {
            self.call("session.authorize", json!({"session": id, "token": token}))
                .await?;
        }
        Ok(id)
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.driver.abort();
    }
}

fn request(method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "method": method, "params": params, "id": 1})
}

fn result_of(method: &str, mut response: Value) -> Result<Value> {
    match response.get("error") {
        Some(error) => Err(format!("{method}: {error}").into()),
        None => Ok(response["result"].take()),
    }
}

/// The values of `series` (each a name with its labels, as /metrics writes it) on the
/// gateway at `addr`; 0 for a series it does not show.
pub async fn metric_values(addr: SocketAddr, series: &[&str]) -> Result<Vec<f64>> {
    let mut conn = Conn::open(addr).await?;
    let (_, body) = conn.get("/metrics", None).await?;
    let text = String::from_utf8_lossy(&body);
    let value = |series: &str| {
        text.lines()
            .find_map(|line| line.strip_prefix(series)?.trim().parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    Ok(series.iter().map(|s| value(s)).collect())
}

/// The params of a compact board subscription.
pub fn compact_board(session: &str, board: i64) -> Value {
    json!({"session": session, "view": "board", "params": {"board": board, "compact": true}})
}

/// The body of `session.get_events(session, timeout)`, built once per session.
pub fn get_events_body(session: &str, timeout_secs: u64) -> Bytes {
    request(
        "session.get_events",
        json!({"session": session, "timeout": timeout_secs}),
    )
    .to_string()
    .into()
}

/// Loops on `session.get_events` (POLL_SECS) until `stopped` changes, handing each answer,
/// parsed as `A`, and the time it arrived to `each`; the first error ends the loop and is
/// returned.
pub async fn poll_answers<A: serde::de::DeserializeOwned>(
    conn: &mut Conn,
    session: &str,
    poll_secs: u64,
    mut stopped: tokio::sync::watch::Receiver<bool>,
    mut each: impl FnMut(A, std::time::Instant),
) -> Option<String> {
    let body = get_events_body(session, poll_secs);
    loop {
        tokio::select! {
            biased;
            _ = stopped.changed() => return None,
            response = conn.post(body.clone()) => {
                let at = std::time::Instant::now();
                let parsed = response
                    .map_err(|e| e.to_string())
                    .and_then(|b| serde_json::from_slice::<A>(&b).map_err(|e| e.to_string()));
                match parsed {
                    Ok(answer) => each(answer, at),
                    Err(error) => return Some(error),
                }
            }
        }
    }
}
