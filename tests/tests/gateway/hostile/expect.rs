//! What a case expects (an HTTP status, a JSON-RPC error of the documented codes), a case
//! itself, and running a table of them.

use super::*;

#[derive(Clone, Copy)]
pub(super) enum Rpc {
    /// No JSON-RPC body required (a plain HTTP route).
    Any,
    /// A JSON-RPC success.
    Result,
    /// A JSON-RPC error with one of these codes.
    Error(&'static [i64]),
}

#[derive(Clone, Copy)]
pub(super) struct Expect {
    pub(super) status: &'static [u16],
    pub(super) rpc: Rpc,
    /// An `Allow` header must name POST (for 405s from /jsonrpc) or GET (other routes).
    pub(super) allow: Option<&'static str>,
    /// The body must contain this text (a message naming what is accepted, say).
    pub(super) mentions: Option<&'static str>,
}

pub(super) const fn status(status: &'static [u16]) -> Expect {
    Expect {
        status,
        rpc: Rpc::Any,
        allow: None,
        mentions: None,
    }
}

pub(super) const fn rpc_error(status: &'static [u16], codes: &'static [i64]) -> Expect {
    Expect {
        status,
        rpc: Rpc::Error(codes),
        allow: None,
        mentions: None,
    }
}

pub(super) const RESULT: Expect = Expect {
    status: &[200],
    rpc: Rpc::Result,
    allow: None,
    mentions: None,
};

pub(super) fn check(resp: &Resp, expect: &Expect) -> Result<(), String> {
    let mut wrong = Vec::new();
    if !expect.status.contains(&resp.status) {
        wrong.push(format!(
            "HTTP {} (expected {:?})",
            resp.status, expect.status
        ));
    }
    match expect.rpc {
        Rpc::Any => {}
        Rpc::Result => {
            if resp.json().and_then(|v| v.get("result").cloned()).is_none() {
                wrong.push("no JSON-RPC result".to_string());
            }
        }
        Rpc::Error(codes) => match resp.rpc_code() {
            Some(code) if codes.contains(&code) => {}
            other => wrong.push(format!(
                "JSON-RPC error code {other:?} (expected one of {codes:?})"
            )),
        },
    }
    if let Some(method) = expect.allow {
        if !resp.header("allow").is_some_and(|a| a.contains(method)) {
            wrong.push(format!(
                "Allow: {:?} (expected {method} in it)",
                resp.header("allow")
            ));
        }
    }
    if let Some(text) = expect.mentions {
        if !String::from_utf8_lossy(&resp.body).contains(text) {
            wrong.push(format!("the body does not mention {text:?}"));
        }
    }
    if wrong.is_empty() {
        Ok(())
    } else {
        Err(format!("{} — got {}", wrong.join("; "), resp.summary()))
    }
}

/// A case: a name and what it does (Ok: passed, with an optional note; Err: what went wrong).
pub(super) struct Case {
    pub(super) name: String,
    pub(super) run: BoxFuture<'static, Result<String, String>>,
}

pub(super) fn case(
    name: impl Into<String>,
    run: impl std::future::Future<Output = Result<String, String>> + Send + 'static,
) -> Case {
    Case {
        name: name.into(),
        run: run.boxed(),
    }
}

/// A table row: these bytes on a new connection must be answered as expected.
pub(super) fn raw(
    addr: SocketAddr,
    name: impl Into<String>,
    request: Vec<u8>,
    expect: Expect,
) -> Case {
    let head = request.starts_with(b"HEAD ");
    case(name, async move {
        let resp = exchange(addr, &request, head).await?;
        check(&resp, &expect).map(|()| String::new())
    })
}

/// Runs cases `parallel` at a time, each within `CASE_WITHIN`: (name, outcome) in order.
pub(super) async fn run_all(
    cases: Vec<Case>,
    parallel: usize,
) -> Vec<(String, Result<String, String>)> {
    futures::stream::iter(cases)
        .map(|c| async move {
            let outcome = match timeout(CASE_WITHIN, tokio::spawn(c.run)).await {
                Err(_) => Err(format!("hung for {CASE_WITHIN:?}")),
                Ok(Err(panic)) => Err(format!("the case panicked: {panic}")),
                Ok(Ok(outcome)) => outcome,
            };
            (c.name, outcome)
        })
        .buffered(parallel)
        .collect()
        .await
}

// ---------------------------------------------------------------------------------------
// The param matrix: every method, every param (by position and by name), every value.

/// A JSON-RPC answer with this id that is a success or a documented error (not −32603).
pub(super) fn documented_answer(resp: &Resp, id: i64) -> Result<(), String> {
    if resp.status != 200 {
        return Err(format!("expected HTTP 200, got {}", resp.summary()));
    }
    let value = resp
        .json()
        .ok_or_else(|| format!("not JSON: {}", resp.summary()))?;
    if value["id"] != json!(id) {
        return Err(format!(
            "id {} instead of {id}: {}",
            value["id"],
            resp.summary()
        ));
    }
    match value.get("error").filter(|e| !e.is_null()) {
        Some(error) => match error["code"].as_i64() {
            Some(code) if DOCUMENTED.contains(&code) => Ok(()),
            _ => Err(format!("undocumented error: {}", resp.summary())),
        },
        None if value.get("result").is_some() => Ok(()),
        None => Err(format!("neither result nor error: {}", resp.summary())),
    }
}
