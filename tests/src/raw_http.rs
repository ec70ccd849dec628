//! Raw HTTP/1.x over TCP for tests that send what no HTTP client library would: requests
//! are written byte for byte, answers read (pipelined ones in order) with deadlines, so a
//! server that hangs fails the test instead of stalling it. Errors are strings that say
//! what arrived.

use serde_json::Value;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::time::{timeout, timeout_at, Instant};

/// How long an answer may take to arrive by default (`exchange`).
pub const ANSWER_WITHIN: Duration = Duration::from_secs(10);
/// How long one write may block (`Conn::send`) before the peer counts as not reading.
pub const WRITE_WITHIN: Duration = Duration::from_secs(5);

/// An answer: status, headers in order, the body (de-chunked).
#[derive(Debug)]

pub struct Resp {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Resp {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> Option<Value> {
        serde_json::from_slice(&self.body).ok()
    }

    /// The error code of a single JSON-RPC answer.
    pub fn rpc_code(&self) -> Option<i64> {
        self.json()?.get("error")?.get("code")?.as_i64()
    }

    pub fn summary(&self) -> String {
        format!("HTTP {} {}", self.status, preview(&self.body))
    }
}

pub fn preview(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(&bytes[..bytes.len().min(300)]).into_owned();
    if bytes.len() > 300 {
        format!("{text}… ({} bytes)", bytes.len())
    } else {
        text
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// One client connection, and what it has read but not yet consumed (pipelined answers).
/// The writing half may be taken away (`take_writer`) to write beside the reading.
pub struct Conn {
    reader: OwnedReadHalf,
    writer: Option<OwnedWriteHalf>,
    buf: Vec<u8>,
}

pub async fn connect_tcp(addr: SocketAddr) -> Result<TcpStream, String> {
    let stream = timeout(Duration::from_secs(5), TcpStream::connect(addr))
        .await
        .map_err(|_| "connect timed out".to_string())?
        .map_err(|e| format!("connect: {e}"))?;
    let _ = stream.set_nodelay(true);
    Ok(stream)
}

impl Conn {
    pub async fn open(addr: SocketAddr) -> Result<Conn, String> {
        let (reader, writer) = connect_tcp(addr).await?.into_split();
        Ok(Conn {
            reader,
            writer: Some(writer),
            buf: Vec::new(),
        })
    }

    /// The writing half, while it is still here (not taken).
    pub fn writer(&mut self) -> &mut OwnedWriteHalf {
        self.writer.as_mut().expect("the writer is still here")
    }

    pub fn take_writer(&mut self) -> OwnedWriteHalf {
        self.writer.take().expect("the writer is still here")
    }

    pub async fn send(&mut self, bytes: &[u8]) -> Result<(), String> {
        let writer = self.writer.as_mut().expect("the writer is still here");
        timeout(WRITE_WITHIN, writer.write_all(bytes))
            .await
            .map_err(|_| format!("writing {} bytes timed out", bytes.len()))?
            .map_err(|e| format!("write: {e}"))
    }

    /// Reads more; Ok(false) at the end of the stream.
    async fn fill(&mut self, deadline: Instant) -> Result<bool, String> {
        let mut chunk = vec![0u8; 64 * 1024];
        match timeout_at(deadline, self.reader.read(&mut chunk)).await {
            Err(_) => Err(format!(
                "no (complete) answer in time; got {:?}",
                preview(&self.buf)
            )),
            Ok(Err(e)) => Err(format!("read: {e} (after {:?})", preview(&self.buf))),
            Ok(Ok(0)) => Ok(false),
            Ok(Ok(n)) => {
                self.buf.extend_from_slice(&chunk[..n]);
                Ok(true)
            }
        }
    }

    async fn line(&mut self, deadline: Instant) -> Result<Vec<u8>, String> {
        loop {
            if let Some(i) = find(&self.buf, b"\r\n") {
                let line = self.buf[..i].to_vec();
                self.buf.drain(..i + 2);
                return Ok(line);
            }
            if !self.fill(deadline).await? {
                return Err(if self.buf.is_empty() {
                    "connection closed without an answer".to_string()
                } else {
                    format!("connection closed mid-answer: {:?}", preview(&self.buf))
                });
            }
        }
    }

    async fn take(&mut self, n: usize, deadline: Instant) -> Result<Vec<u8>, String> {
        while self.buf.len() < n {
            if !self.fill(deadline).await? {
                return Err(format!(
                    "connection closed after {} of {n} body bytes",
                    self.buf.len()
                ));
            }
        }
        Ok(self.buf.drain(..n).collect())
    }

    /// The next answer (1xx answers skipped); `head`: the request was a HEAD (no body).
    pub async fn response(&mut self, head: bool, within: Duration) -> Result<Resp, String> {
        let deadline = Instant::now() + within;
        loop {
            let status_line = String::from_utf8_lossy(&self.line(deadline).await?).into_owned();
            let status: u16 = status_line
                .split(' ')
                .nth(1)
                .and_then(|s| s.parse().ok())
                .filter(|_| status_line.starts_with("HTTP/1."))
                .ok_or_else(|| format!("not a status line: {status_line:?}"))?;
            let mut headers = Vec::new();
            loop {
                let line = self.line(deadline).await?;
                if line.is_empty() {
                    break;
                }
                let line = String::from_utf8_lossy(&line).into_owned();
                let (k, v) = line
                    .split_once(':')
                    .ok_or_else(|| format!("not a header line: {line:?}"))?;
                headers.push((k.trim().to_string(), v.trim().to_string()));
            }
            if (100..200).contains(&status) {
                continue;
            }
            let mut resp = Resp {
                status,
                headers,
                body: Vec::new(),
            };
            if head || status == 204 || status == 304 {
                return Ok(resp);
            }
            let chunked = resp
                .header("transfer-encoding")
                .is_some_and(|v| v.to_ascii_lowercase().contains("chunked"));
            if chunked {
                loop {
                    let line = String::from_utf8_lossy(&self.line(deadline).await?).into_owned();
                    let size =
                        usize::from_str_radix(line.split(';').next().unwrap_or("").trim(), 16)
                            .map_err(|_| format!("bad chunk size line {line:?}"))?;
                    if size == 0 {
                        while !self.line(deadline).await?.is_empty() {}
                        break;
                    }
                    let chunk = self.take(size + 2, deadline).await?;
                    resp.body.extend_from_slice(&chunk[..size]);
                }
            } else if let Some(length) = resp.header("content-length") {
                let n: usize = length
                    .parse()
                    .map_err(|_| format!("bad Content-Length {length:?}"))?;
                resp.body = self.take(n, deadline).await?;
            } else {
                // Delimited by the end of the connection.
                loop {
                    match self.fill(deadline).await {
                        Ok(true) => {}
                        Ok(false) => break,
                        Err(e) if !self.buf.is_empty() && e.starts_with("read:") => break,
                        Err(e) => return Err(e),
                    }
                }
                resp.body = std::mem::take(&mut self.buf);
            }
            return Ok(resp);
        }
    }

    /// Waits for the server to close the connection: Ok(bytes it sent first) or Err.
    pub async fn closed_within(&mut self, within: Duration) -> Result<usize, String> {
        let deadline = Instant::now() + within;
        loop {
            match self.fill(deadline).await {
                Ok(true) => {}
                Ok(false) => return Ok(self.buf.len()),
                Err(e) if e.starts_with("read:") => return Ok(self.buf.len()),
                Err(_) => return Err(format!("still open after {within:?}")),
            }
        }
    }
}

/// An HTTP/1.1 request with a Host header and, with a body or for POST, a Content-Length.
pub fn http(method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Vec<u8> {
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: gateway\r\n");
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    if !body.is_empty() || method == "POST" {
        head.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    head.push_str("\r\n");
    let mut bytes = head.into_bytes();
    bytes.extend_from_slice(body);
    bytes
}

pub fn rpc_request(body: &[u8]) -> Vec<u8> {
    http(
        "POST",
        "/jsonrpc",
        &[("Content-Type", "application/json")],
        body,
    )
}

pub fn get(path: &str) -> Vec<u8> {
    http("GET", path, &[], b"")
}

/// One request on a new connection, and its answer.
pub async fn exchange(addr: SocketAddr, request: &[u8], head: bool) -> Result<Resp, String> {
    let mut conn = Conn::open(addr).await?;
    conn.send(request).await?;
    conn.response(head, ANSWER_WITHIN).await
}
