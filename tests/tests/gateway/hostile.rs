//! Hostile input against a real gateway (issue 12): malformed and oversized JSON-RPC, every
//! method's every param given every awkward value, wrong Content-Types and HTTP methods,
//! HTTP that no client library would send (raw TCP), pipelining, a client that never
//! reads, slowloris headers and bodies, half-closing clients and a flood of sessions.
//!
//! The rule for every case: the right JSON-RPC error or HTTP status — never a panic, a
//! hang (every read has a deadline), a 5xx or a dropped connection. The cases form tables;
//! all of them run and every mismatch is reported at the end, not only the first.
//!
//! Through the whole barrage a control subscriber (a Qik-style session on its own
//! keep-alive connection, polling `session.get_events`) watches a board on which SQL places
//! tiles at a steady rate: it must see every placement exactly once, in seq order.

use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use pgplace_tests::gateway::start_gateway;
use pgplace_tests::raw_http::{
    connect_tcp, exchange, get, http, preview, rpc_request, Conn, Resp, ANSWER_WITHIN,
};
use pgplace_tests::{connect, create_board, create_users_with_tokens, fresh_database};
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::{timeout, Instant};

/// A whole case, whatever it does.
const CASE_WITHIN: Duration = Duration::from_secs(30);
/// The gateway's longest poll here: a matrix case whose timeout is valid waits this long.
const MAX_POLL_SECS: u64 = 2;

/// Every code the README documents, but −32603: an internal error is a bug here.
const DOCUMENTED: &[i64] = &[
    -32700, -32600, -32601, -32602, -32001, -32002, -32003, -32004, -32005, -32006, -32007, -32008,
    -32009, -32010, -32011,
];
const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;
const METHOD_NOT_FOUND: i64 = -32601;
const INVALID_PARAMS: i64 = -32602;
const TOO_MANY: i64 = -32007;
/// The one origin the gateway's CORS policy lists here.
const ALLOWED_ORIGIN: &str = "http://allowed.example";

/// A JSON-RPC call on a new connection: the answer's JSON.
async fn call(addr: SocketAddr, method: &str, params: Value) -> Result<Value, String> {
    let body = json!({"jsonrpc": "2.0", "method": method, "params": params, "id": 1});
    let resp = exchange(addr, &rpc_request(body.to_string().as_bytes()), false).await?;
    if resp.status != 200 {
        return Err(format!("{method}: {}", resp.summary()));
    }
    resp.json()
        .ok_or_else(|| format!("{method}: not JSON: {}", resp.summary()))
}

async fn ok(addr: SocketAddr, method: &str, params: Value) -> Value {
    let answer = call(addr, method, params.clone())
        .await
        .unwrap_or_else(|e| panic!("{method}({params}): {e}"));
    match answer.get("error") {
        Some(error) => panic!("{method}({params}) failed: {error}"),
        None => answer["result"].clone(),
    }
}

// ---------------------------------------------------------------------------------------
// Expectations and cases.

#[derive(Clone, Copy)]
enum Rpc {
    /// No JSON-RPC body required (a plain HTTP route).
    Any,
    /// A JSON-RPC success.
    Result,
    /// A JSON-RPC error with one of these codes.
    Error(&'static [i64]),
}

#[derive(Clone, Copy)]
struct Expect {
    status: &'static [u16],
    rpc: Rpc,
    /// An `Allow` header must name POST (for 405s from /jsonrpc) or GET (other routes).
    allow: Option<&'static str>,
    /// The body must contain this text (a message naming what is accepted, say).
    mentions: Option<&'static str>,
}

const fn status(status: &'static [u16]) -> Expect {
    Expect {
        status,
        rpc: Rpc::Any,
        allow: None,
        mentions: None,
    }
}

const fn rpc_error(status: &'static [u16], codes: &'static [i64]) -> Expect {
    Expect {
        status,
        rpc: Rpc::Error(codes),
        allow: None,
        mentions: None,
    }
}

const RESULT: Expect = Expect {
    status: &[200],
    rpc: Rpc::Result,
    allow: None,
    mentions: None,
};

fn check(resp: &Resp, expect: &Expect) -> Result<(), String> {
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
struct Case {
    name: String,
    run: BoxFuture<'static, Result<String, String>>,
}

fn case(
    name: impl Into<String>,
    run: impl std::future::Future<Output = Result<String, String>> + Send + 'static,
) -> Case {
    Case {
        name: name.into(),
        run: run.boxed(),
    }
}

/// A table row: these bytes on a new connection must be answered as expected.
fn raw(addr: SocketAddr, name: impl Into<String>, request: Vec<u8>, expect: Expect) -> Case {
    let head = request.starts_with(b"HEAD ");
    case(name, async move {
        let resp = exchange(addr, &request, head).await?;
        check(&resp, &expect).map(|()| String::new())
    })
}

/// Runs cases `parallel` at a time, each within `CASE_WITHIN`: (name, outcome) in order.
async fn run_all(cases: Vec<Case>, parallel: usize) -> Vec<(String, Result<String, String>)> {
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

/// Values as JSON text, so that numbers beyond i64/u64 reach the gateway as written.
fn hostile_values() -> Vec<(&'static str, String)> {
    let deep = format!("{}{}", "[".repeat(100), "]".repeat(100));
    vec![
        ("null", "null".into()),
        ("true", "true".into()),
        ("a string", "\"x\"".into()),
        ("\"NaN\"", "\"NaN\"".into()),
        ("\"Infinity\"", "\"Infinity\"".into()),
        ("\"-1\"", "\"-1\"".into()),
        ("1.5", "1.5".into()),
        ("-1", "-1".into()),
        ("0", "0".into()),
        ("1e308", "1e308".into()),
        ("2^63", "9223372036854775808".into()),
        ("-2^63-1", "-9223372036854775809".into()),
        ("[]", "[]".into()),
        ("{}", "{}".into()),
        ("100 kB string", format!("\"{}\"", "a".repeat(100_000))),
        ("100 deep", deep),
    ]
}

/// Params as a positional array or a by-name object, from (name, JSON text) pairs.
fn params_text(params: &[(&str, String)], by_name: bool) -> String {
    if by_name {
        let fields: Vec<String> = params
            .iter()
            .map(|(name, value)| format!("\"{name}\":{value}"))
            .collect();
        format!("{{{}}}", fields.join(","))
    } else {
        let values: Vec<&str> = params.iter().map(|(_, v)| v.as_str()).collect();
        format!("[{}]", values.join(","))
    }
}

/// A JSON-RPC answer with this id that is a success or a documented error (not −32603).
fn documented_answer(resp: &Resp, id: i64) -> Result<(), String> {
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

/// What the matrix calls on: a signed-in session, another one, a token and a board.
#[derive(Clone)]
struct Fixture {
    addr: SocketAddr,
    session: String,
    other_session: String,
    token: String,
    board: i64,
}

/// `__FRESH__` in a param stands for a session created for that case alone (subscriptions
/// pile up otherwise and the session's limit would answer every later case).
const FRESH: &str = "__FRESH__";

/// What a param takes: a value of another JSON type (or null for a required param) must be
/// answered −32602, whatever else is wrong; a value of the right type may get any documented
/// answer (−32001 for a session id no one holds, −32602 for a tile outside the board, …).
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Str,
    /// An integer that fits in i64 (the param's own range may be narrower).
    Int,
    /// A number (a timeout in seconds).
    Num,
    Bool,
    Obj,
    /// A board: an id or a name.
    Board,
}

impl Kind {
    fn takes(self, v: &Value) -> bool {
        match self {
            Kind::Str => v.is_string(),
            Kind::Int => v.is_i64(),
            Kind::Num => v.is_number(),
            Kind::Bool => v.is_boolean(),
            Kind::Obj => v.is_object(),
            Kind::Board => v.is_string() || v.is_i64(),
        }
    }
}

/// A param: name, the value of a call that would succeed (JSON text), kind, required.
#[derive(Clone)]
struct P {
    name: &'static str,
    base: String,
    kind: Kind,
    required: bool,
}

fn p(name: &'static str, base: impl Into<String>, kind: Kind, required: bool) -> P {
    P {
        name,
        base: base.into(),
        kind,
        required,
    }
}

/// Whether `value` (JSON text) must be answered −32602 in place of param `param`.
fn ill_typed(param: &P, value: &str) -> bool {
    let v: Value = serde_json::from_str(value).unwrap_or(Value::Null);
    if v.is_null() {
        param.required
    } else {
        !param.kind.takes(&v)
    }
}

fn matrix_cases(f: &Fixture) -> Vec<Case> {
    use Kind::*;
    let s = json!(f.session).to_string();
    let b = f.board.to_string();
    let methods: Vec<(&str, Vec<P>)> = vec![
        ("session.create", vec![]),
        ("board.list", vec![]),
        (
            "session.authorize",
            vec![
                p("session", &s, Str, true),
                p("token", json!(f.token).to_string(), Str, true),
            ],
        ),
        (
            "session.subscribe",
            vec![
                p("session", FRESH, Str, true),
                p("view", "\"board\"", Str, true),
                p("params", format!("{{\"board\":{b}}}"), Obj, true),
            ],
        ),
        (
            "session.get_events",
            vec![
                p("session", &s, Str, true),
                p("timeout", "0", Num, true),
                p("ack", "\"\"", Str, false),
            ],
        ),
        (
            "session.set_presence",
            vec![
                p("session", &s, Str, true),
                p("board", &b, Board, true),
                p("position", "{\"x\":1,\"y\":1}", Obj, true),
            ],
        ),
        (
            "session.unsubscribe",
            vec![
                p("session", &s, Str, true),
                p("key", format!("\"board/{b}\""), Str, true),
            ],
        ),
        (
            "session.destroy",
            vec![p("session", json!(f.other_session).to_string(), Str, true)],
        ),
        ("board.get", vec![p("board", &b, Board, true)]),
        (
            "board.tile_history",
            vec![
                p("board", &b, Board, true),
                p("x", "1", Int, true),
                p("y", "1", Int, true),
                p("limit", "10", Int, false),
            ],
        ),
        (
            "board.place",
            vec![
                p("session", &s, Str, true),
                p("board", &b, Board, true),
                p("x", "1", Int, true),
                p("y", "1", Int, true),
                p("color", "2", Int, true),
                p("key", "\"hostile-1\"", Str, false),
            ],
        ),
    ];
    // The matrix is the method table's: every method (but rpc.discover, which takes
    // nothing), every param, in the table's order.
    for method in pgplace_gateway::rpc::table::METHODS {
        if method.name == "rpc.discover" {
            continue;
        }
        let (_, listed) = methods
            .iter()
            .find(|(name, _)| *name == method.name)
            .unwrap_or_else(|| panic!("{} is missing from the matrix", method.name));
        let names: Vec<&str> = listed.iter().map(|p| p.name).collect();
        assert_eq!(names, (method.param_names)(), "{}'s params", method.name);
    }
    // (name, body without the envelope, whether only −32602 will do)
    let mut bodies: Vec<(String, String, bool)> = Vec::new();
    let values = hostile_values();
    let text = |params: &[P], by_name: bool| {
        let pairs: Vec<(&str, String)> = params.iter().map(|p| (p.name, p.base.clone())).collect();
        params_text(&pairs, by_name)
    };
    for (method, params) in &methods {
        for by_name in [false, true] {
            let form = if by_name { "by name" } else { "by position" };
            for i in 0..params.len() {
                // Only this param differs from a call that would succeed; session.destroy's
                // base session is never sent (it would be gone for the next case).
                for (label, value) in &values {
                    let mut changed = params.clone();
                    changed[i].base = value.clone();
                    bodies.push((
                        format!("{method} {} = {label} ({form})", params[i].name),
                        format!(
                            "\"method\":\"{method}\",\"params\":{}",
                            text(&changed, by_name)
                        ),
                        ill_typed(&params[i], value),
                    ));
                }
            }
            // One param too many, or an unknown name.
            let mut more = params.clone();
            more.push(p("surplus", "1", Int, false));
            bodies.push((
                format!("{method} with a surplus param ({form})"),
                format!(
                    "\"method\":\"{method}\",\"params\":{}",
                    text(&more, by_name)
                ),
                true,
            ));
        }
        for (label, value) in [("a number", "5"), ("a string", "\"x\""), ("true", "true")] {
            bodies.push((
                format!("{method} with params = {label}"),
                format!("\"method\":\"{method}\",\"params\":{value}"),
                false, // −32600 (the envelope) or −32602
            ));
        }
    }
    // The params inside params: a view's, a region's, a recent list's, a cursor position.
    let nested: Vec<(&str, &str, String, Vec<P>)> = vec![
        (
            "session.subscribe",
            "board view",
            "\"board\"".into(),
            vec![
                p("board", &b, Board, true),
                p("compact", "false", Bool, false),
                p("presence", "false", Bool, false),
                p("since", "0", Int, false),
            ],
        ),
        (
            "session.subscribe",
            "board_region view",
            "\"board_region\"".into(),
            vec![
                p("board", &b, Board, true),
                p("x", "0", Int, true),
                p("y", "0", Int, true),
                p("width", "4", Int, true),
                p("height", "4", Int, true),
                p("compact", "true", Bool, false),
                p("presence", "false", Bool, false),
            ],
        ),
        (
            "session.subscribe",
            "recent_placements view",
            "\"recent_placements\"".into(),
            vec![p("board", &b, Board, true), p("limit", "10", Int, false)],
        ),
        (
            "session.set_presence",
            "position",
            b.clone(),
            vec![p("x", "2", Int, true), p("y", "3", Int, true)],
        ),
    ];
    for (method, label_of, middle, inner) in &nested {
        let first = if *method == "session.subscribe" {
            FRESH.to_string()
        } else {
            s.clone()
        };
        for i in 0..inner.len() {
            for (label, value) in &values {
                let mut changed = inner.clone();
                changed[i].base = value.clone();
                let outer = format!("[{first},{middle},{}]", text(&changed, true));
                bodies.push((
                    format!("{method} {label_of} {{{}: {label}}}", inner[i].name),
                    format!("\"method\":\"{method}\",\"params\":{outer}"),
                    ill_typed(&inner[i], value),
                ));
            }
        }
    }
    bodies
        .into_iter()
        .enumerate()
        .map(|(n, (name, body, strict))| {
            let f = f.clone();
            let id = n as i64 + 1000;
            case(name, async move {
                let mut body = body;
                if body.contains(FRESH) {
                    let fresh = call(f.addr, "session.create", json!([])).await?;
                    let fresh = fresh["result"]
                        .as_str()
                        .ok_or_else(|| format!("session.create: {fresh}"))?
                        .to_string();
                    body = body.replace(FRESH, &json!(fresh).to_string());
                }
                let body = format!("{{\"jsonrpc\":\"2.0\",{body},\"id\":{id}}}");
                let resp = exchange(f.addr, &rpc_request(body.as_bytes()), false).await?;
                documented_answer(&resp, id)?;
                let code = resp.rpc_code();
                if strict && code != Some(INVALID_PARAMS) {
                    return Err(format!(
                        "an ill-typed value must be −32602, got {}",
                        resp.summary()
                    ));
                }
                // The outcome, for the summary: "ok" or the error code.
                Ok(code.map_or("ok".to_string(), |c| c.to_string()))
            })
        })
        .collect()
}

/// Prints how the matrix was answered, per method and outcome (every case with
/// `PGPLACE_HOSTILE_VERBOSE=1`), and leaves the outcomes without their notes.
fn summarize_matrix(
    outcomes: Vec<(String, Result<String, String>)>,
) -> Vec<(String, Result<String, String>)> {
    let verbose = std::env::var("PGPLACE_HOSTILE_VERBOSE").is_ok_and(|v| v == "1");
    let mut by_method: std::collections::BTreeMap<&str, std::collections::BTreeMap<&str, usize>> =
        Default::default();
    for (name, outcome) in &outcomes {
        let method = name.split(' ').next().unwrap_or("");
        let label = match outcome {
            Ok(label) => label.as_str(),
            Err(_) => "FAILED",
        };
        *by_method
            .entry(method)
            .or_default()
            .entry(label)
            .or_default() += 1;
        if verbose {
            println!(
                "matrix {name}: {}",
                outcome.as_ref().map_or("FAILED", |l| l.as_str())
            );
        }
    }
    for (method, labels) in &by_method {
        let labels: Vec<String> = labels.iter().map(|(l, n)| format!("{l} ×{n}")).collect();
        println!("matrix {method}: {}", labels.join(", "));
    }
    outcomes
        .into_iter()
        .map(|(name, outcome)| (name, outcome.map(|_| String::new())))
        .collect()
}

// ---------------------------------------------------------------------------------------
// The table of single requests.

fn table(addr: SocketAddr, board: i64, past: &str, compacted_board: i64) -> Vec<Case> {
    let mut cases = Vec::new();
    // Cases of their own shape, added after the table's.
    let mut special = Vec::new();
    let mut add = |name: &str, request: Vec<u8>, expect: Expect| {
        cases.push(raw(addr, name, request, expect));
    };
    let parse = rpc_error(&[200], &[PARSE_ERROR]);
    let invalid = rpc_error(&[200], &[INVALID_REQUEST]);
    let list = br#"{"jsonrpc":"2.0","method":"board.list","id":1}"#.to_vec();
    let get_board =
        format!(r#"{{"jsonrpc":"2.0","method":"board.get","params":[{board}],"id":1}}"#);

    // The envelope.
    for (name, body) in [
        (
            "truncated JSON",
            br#"{"jsonrpc":"2.0","method":"board.list","id":1"#.to_vec(),
        ),
        ("invalid JSON", b"{nope}".to_vec()),
        ("empty body", b"".to_vec()),
        ("whitespace body", b"  \r\n ".to_vec()),
        (
            "trailing garbage",
            br#"{"jsonrpc":"2.0","method":"board.list","id":1} x"#.to_vec(),
        ),
        (
            "invalid UTF-8 in a string",
            b"{\"jsonrpc\":\"2.0\",\"method\":\"board.\xff\xfe\",\"id\":1}".to_vec(),
        ),
        (
            "a lone surrogate escape",
            br#"{"jsonrpc":"2.0","method":"\ud800","id":1}"#.to_vec(),
        ),
        (
            "a UTF-8 BOM",
            b"\xef\xbb\xbf{\"jsonrpc\":\"2.0\",\"method\":\"board.list\",\"id\":1}".to_vec(),
        ),
        (
            "NaN literal",
            br#"{"jsonrpc":"2.0","method":"board.get","params":[NaN],"id":1}"#.to_vec(),
        ),
        ("100,000 '['", "[".repeat(100_000).into_bytes()),
        (
            "100,000 nested objects",
            "{\"a\":".repeat(100_000).into_bytes(),
        ),
        (
            "100,000 '[' closed",
            format!("{}{}", "[".repeat(100_000), "]".repeat(100_000)).into_bytes(),
        ),
    ] {
        add(&format!("jsonrpc: {name}"), rpc_request(&body), parse);
    }
    for (name, body) in [
        ("a number", "1"),
        ("a string", "\"board.list\""),
        ("null", "null"),
        ("true", "true"),
        ("no method", r#"{"jsonrpc":"2.0","id":1}"#),
        ("method a number", r#"{"jsonrpc":"2.0","method":5,"id":1}"#),
        ("method null", r#"{"jsonrpc":"2.0","method":null,"id":1}"#),
        (
            "method an array",
            r#"{"jsonrpc":"2.0","method":["board.list"],"id":1}"#,
        ),
        (
            "jsonrpc 1.0",
            r#"{"jsonrpc":"1.0","method":"board.list","id":1}"#,
        ),
        (
            "jsonrpc 2 (a number)",
            r#"{"jsonrpc":2.0,"method":"board.list","id":1}"#,
        ),
        (
            "jsonrpc null",
            r#"{"jsonrpc":null,"method":"board.list","id":1}"#,
        ),
        (
            "id an object",
            r#"{"jsonrpc":"2.0","method":"board.list","id":{"a":1}}"#,
        ),
        (
            "id an array",
            r#"{"jsonrpc":"2.0","method":"board.list","id":[1]}"#,
        ),
        (
            "an unknown member",
            r#"{"jsonrpc":"2.0","method":"board.list","id":1,"extra":1}"#,
        ),
        ("an empty batch", "[]"),
    ] {
        add(
            &format!("jsonrpc: {name}"),
            rpc_request(body.as_bytes()),
            invalid,
        );
    }
    add(
        "jsonrpc: params a number",
        rpc_request(br#"{"jsonrpc":"2.0","method":"board.list","params":5,"id":1}"#),
        rpc_error(&[200], &[INVALID_REQUEST, INVALID_PARAMS]),
    );
    for (name, method) in [
        ("unknown method", "no.such"),
        ("empty method", ""),
        ("method with a NUL", "board.list\\u0000"),
        ("rpc. method we do not have", "rpc.describe"),
        ("100 kB method", &"m".repeat(100_000)),
    ] {
        let body = format!(r#"{{"jsonrpc":"2.0","method":"{method}","id":1}}"#);
        add(
            &format!("jsonrpc: {name}"),
            rpc_request(body.as_bytes()),
            rpc_error(&[200], &[METHOD_NOT_FOUND]),
        );
    }
    add(
        "jsonrpc: duplicate keys (method)",
        rpc_request(br#"{"jsonrpc":"2.0","method":"board.list","method":"no.such","id":1,"id":2}"#),
        rpc_error(&[200], &[METHOD_NOT_FOUND, INVALID_REQUEST]),
    );
    let dup_params = format!(
        r#"{{"jsonrpc":"2.0","method":"board.get","params":{{"board":{board},"board":"x"}},"id":1}}"#
    );
    add(
        "jsonrpc: duplicate keys (params)",
        rpc_request(dup_params.as_bytes()),
        Expect {
            status: &[200],
            rpc: Rpc::Any,
            allow: None,
            mentions: Some("\"id\":1"),
        },
    );
    add("jsonrpc: board.list", rpc_request(&list), RESULT);

    // Content-Type.
    for ct in [
        None,
        Some("application/json"),
        Some("application/json; charset=utf-8"),
        Some("Application/JSON;charset=UTF-8"),
        Some("application/vnd.api+json"),
        Some("application/json-rpc"),
        Some("application/jsonrequest"),
        Some("text/plain"),
        Some("text/plain;charset=UTF-8"),
        Some("application/x-www-form-urlencoded"),
    ] {
        let headers: Vec<(&str, &str)> = ct.map(|ct| ("Content-Type", ct)).into_iter().collect();
        add(
            &format!("content-type {ct:?} accepted"),
            http("POST", "/jsonrpc", &headers, get_board.as_bytes()),
            RESULT,
        );
    }
    add(
        "content-type form-urlencoded, body not JSON",
        http(
            "POST",
            "/jsonrpc",
            &[("Content-Type", "application/x-www-form-urlencoded")],
            b"a=b&c=d",
        ),
        parse,
    );
    for ct in [
        "text/html",
        "application/xml",
        "multipart/form-data; boundary=xyz",
        "image/png",
        "application/octet-stream",
    ] {
        add(
            &format!("content-type {ct:?} refused"),
            http(
                "POST",
                "/jsonrpc",
                &[("Content-Type", ct)],
                get_board.as_bytes(),
            ),
            Expect {
                status: &[415],
                rpc: Rpc::Error(&[INVALID_REQUEST]),
                allow: None,
                mentions: Some("application/json"),
            },
        );
    }

    // Other methods on /jsonrpc.
    let not_allowed_post = Expect {
        status: &[405],
        rpc: Rpc::Any,
        allow: Some("POST"),
        mentions: None,
    };
    for method in ["GET", "PUT", "DELETE", "PATCH", "HEAD", "FOO"] {
        let body: &[u8] = if method == "PUT" || method == "PATCH" {
            &list
        } else {
            b""
        };
        add(
            &format!("{method} /jsonrpc"),
            http(method, "/jsonrpc", &[], body),
            not_allowed_post,
        );
    }
    // OPTIONS: a bare one is told what the route takes (204, or 405 with Allow); a CORS
    // preflight is answered by the policy (`--cors-origins`, here `ALLOWED_ORIGIN` only):
    // 204 saying POST for a listed origin, a refusal (403, or 405) for another.
    for (name, origin) in [
        ("OPTIONS /jsonrpc (no Origin)", None),
        (
            "CORS preflight from an unlisted origin",
            Some("http://elsewhere.example"),
        ),
        (
            "CORS preflight from the listed origin",
            Some(ALLOWED_ORIGIN),
        ),
    ] {
        let mut headers = vec![];
        if let Some(origin) = origin {
            headers.push(("Origin", origin));
            headers.push(("Access-Control-Request-Method", "POST"));
            headers.push(("Access-Control-Request-Headers", "content-type"));
        }
        let request = http("OPTIONS", "/jsonrpc", &headers, b"");
        special.push(case(name, async move {
            let resp = exchange(addr, &request, false).await?;
            match (origin, resp.status) {
                (_, 405) => check(&resp, &not_allowed_post),
                (None, _) => check(&resp, &status(&[204])),
                (Some(ALLOWED_ORIGIN), _) => {
                    check(&resp, &status(&[204]))?;
                    let methods = resp.header("access-control-allow-methods");
                    if !methods.is_some_and(|m| m.contains("POST")) {
                        return Err(format!("Access-Control-Allow-Methods: {methods:?}"));
                    }
                    Ok(())
                }
                (Some(_), _) => check(&resp, &status(&[403])),
            }
            .map(|()| String::new())
        }));
    }
    add(
        "OPTIONS *",
        b"OPTIONS * HTTP/1.1\r\nHost: gateway\r\n\r\n".to_vec(),
        status(&[204, 400, 404, 405]),
    );

    // GET routes.
    add("GET /healthz", get("/healthz"), status(&[200]));
    add(
        "HEAD /healthz",
        http("HEAD", "/healthz", &[], b""),
        status(&[200]),
    );
    add("GET /", get("/"), status(&[200]));
    add(
        &format!("GET /boards/{board}/bits"),
        get(&format!("/boards/{board}/bits")),
        status(&[200]),
    );
    add(
        &format!("HEAD /boards/{board}/bits"),
        http("HEAD", &format!("/boards/{board}/bits"), &[], b""),
        status(&[200]),
    );
    add(
        &format!("GET /boards/{board}.png"),
        get(&format!("/boards/{board}.png")),
        status(&[200]),
    );
    for id in [
        "abc",
        "-1",
        "0",
        "99999999999999999999",
        "1.5",
        "",
        "%20",
        "1e3",
        "999999",
    ] {
        add(
            &format!("GET /boards/{id}/bits"),
            get(&format!("/boards/{id}/bits")),
            status(&[400, 404]),
        );
        add(
            &format!("GET /boards/{id}.png"),
            get(&format!("/boards/{id}.png")),
            status(&[400, 404]),
        );
    }
    for query in [
        "at=garbage",
        "at=",
        "at=%ZZ",
        "at=%FF",
        "scale=0",
        "scale=-1",
        "scale=1000000",
        "scale=abc",
        "scale=99999999999999999999",
        "scale=1&scale=2",
        "x=-1",
        "x=100000",
        "width=0",
        "width=-5",
        "height=99999999",
        "bogus=1",
    ] {
        add(
            &format!("GET /boards/{board}.png?{query}"),
            get(&format!("/boards/{board}.png?{query}")),
            status(&[400]),
        );
    }
    // Timestamps Postgres reads: the board as it is now.
    for query in ["at=99999-01-01", "at=infinity", "at=-infinity", "at=epoch"] {
        add(
            &format!("GET /boards/{board}.png?{query}"),
            get(&format!("/boards/{board}.png?{query}")),
            status(&[200, 400, 404]),
        );
    }
    add(
        "GET .png?at= before the compacted history",
        get(&format!("/boards/{compacted_board}.png?at={past}")),
        Expect {
            status: &[404, 410],
            rpc: Rpc::Any,
            allow: None,
            mentions: Some("error"),
        },
    );
    for path in [
        "/nope",
        "/jsonrpc/",
        "/jsonrpc/x",
        "/boards",
        "/boards/",
        &format!("/boards/{board}"),
        &format!("/boards/{board}/bits/more"),
        &format!("/BOARDS/{board}/bits"),
        "/%2e%2e/%2e%2e/etc/passwd",
        "/healthz/",
        "//healthz",
    ] {
        add(&format!("GET {path}"), get(path), status(&[404]));
    }
    add(
        "GET a 16 kB path",
        get(&format!("/{}", "p".repeat(16_000))),
        status(&[404, 414, 431]),
    );
    add(
        "GET a 200 kB path",
        get(&format!("/{}", "p".repeat(200_000))),
        status(&[400, 404, 414, 431]),
    );
    let not_allowed_get = Expect {
        status: &[405],
        rpc: Rpc::Any,
        allow: Some("GET"),
        mentions: None,
    };
    for (method, path) in [
        ("POST", "/healthz".to_string()),
        ("DELETE", "/healthz".to_string()),
        ("POST", format!("/boards/{board}/bits")),
        ("PUT", format!("/boards/{board}/bits")),
        ("POST", format!("/boards/{board}.png")),
        ("POST", "/".to_string()),
    ] {
        add(
            &format!("{method} {path}"),
            http(method, &path, &[], b""),
            not_allowed_get,
        );
    }

    // HTTP framing that no client library sends.
    let bad = status(&[400]);
    add(
        "no Host header (HTTP/1.1)",
        b"GET /healthz HTTP/1.1\r\n\r\n".to_vec(),
        bad,
    );
    let mut no_host = format!(
        "POST /jsonrpc HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        list.len()
    )
    .into_bytes();
    no_host.extend_from_slice(&list);
    add("no Host header (POST /jsonrpc)", no_host, bad);
    // RFC 9112 3.2: 400 for a missing Host, several, or an invalid one.
    add(
        "two Host headers",
        b"GET /healthz HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n".to_vec(),
        bad,
    );
    add(
        "an invalid Host",
        b"GET /healthz HTTP/1.1\r\nHost: a b/c\r\n\r\n".to_vec(),
        bad,
    );
    add(
        "HTTP/1.0 without Host",
        b"GET /healthz HTTP/1.0\r\n\r\n".to_vec(),
        status(&[200]),
    );
    add("a garbage request line", b"GARBAGE\r\n\r\n".to_vec(), bad);
    add(
        "HTTP/2.0 on an HTTP/1 port",
        b"GET /healthz HTTP/2.0\r\nHost: g\r\n\r\n".to_vec(),
        status(&[400, 505]),
    );
    add(
        "HTTP/9.9",
        b"GET /healthz HTTP/9.9\r\nHost: g\r\n\r\n".to_vec(),
        status(&[400, 505]),
    );
    add(
        "a NUL in the path",
        b"GET /heal\0thz HTTP/1.1\r\nHost: g\r\n\r\n".to_vec(),
        bad,
    );
    add(
        "a space in a header name",
        b"GET /healthz HTTP/1.1\r\nHost: g\r\nX Bad: 1\r\n\r\n".to_vec(),
        bad,
    );
    add(
        "a header without a colon",
        b"GET /healthz HTTP/1.1\r\nHost: g\r\nNoColon\r\n\r\n".to_vec(),
        bad,
    );
    add(
        "bare LF line ends",
        b"GET /healthz HTTP/1.1\nHost: g\n\n".to_vec(),
        status(&[200, 400]),
    );
    add(
        "a 100 kB header",
        format!(
            "GET /healthz HTTP/1.1\r\nHost: g\r\nX-Big: {}\r\n\r\n",
            "b".repeat(100_000)
        )
        .into_bytes(),
        status(&[200, 400, 431]),
    );
    add(
        "1,000 headers",
        format!(
            "GET /healthz HTTP/1.1\r\nHost: g\r\n{}\r\n",
            "X-H: 1\r\n".repeat(1000)
        )
        .into_bytes(),
        status(&[200, 400, 431]),
    );
    add(
        "an absolute-form URI",
        b"GET http://gateway/healthz HTTP/1.1\r\nHost: gateway\r\n\r\n".to_vec(),
        status(&[200, 400]),
    );
    let post = |headers: &str, body: &[u8]| {
        let mut bytes = format!(
            "POST /jsonrpc HTTP/1.1\r\nHost: g\r\nContent-Type: application/json\r\n{headers}\r\n"
        )
        .into_bytes();
        bytes.extend_from_slice(body);
        bytes
    };
    add(
        "Content-Length: abc",
        post("Content-Length: abc\r\n", &list),
        bad,
    );
    add(
        "Content-Length: -1",
        post("Content-Length: -1\r\n", &list),
        bad,
    );
    add(
        "Content-Length: 2^64",
        post("Content-Length: 18446744073709551616\r\n", &list),
        status(&[400, 413]),
    );
    add(
        "two different Content-Lengths",
        post(
            &format!("Content-Length: {}\r\nContent-Length: 3\r\n", list.len()),
            &list,
        ),
        bad,
    );
    add(
        "Content-Length and chunked",
        post(
            &format!(
                "Content-Length: {}\r\nTransfer-Encoding: chunked\r\n",
                list.len()
            ),
            format!(
                "{:x}\r\n{}\r\n0\r\n\r\n",
                list.len(),
                String::from_utf8_lossy(&list)
            )
            .as_bytes(),
        ),
        status(&[200, 400]),
    );
    add(
        "chunked body",
        post(
            "Transfer-Encoding: chunked\r\n",
            format!(
                "5\r\n{}\r\n{:x}\r\n{}\r\n0\r\n\r\n",
                &get_board[..5],
                get_board.len() - 5,
                &get_board[5..]
            )
            .as_bytes(),
        ),
        RESULT,
    );
    add(
        "a bad chunk size",
        post("Transfer-Encoding: chunked\r\n", b"zz\r\nabc\r\n0\r\n\r\n"),
        bad,
    );
    add(
        "a chunk size beyond 2^64",
        post(
            "Transfer-Encoding: chunked\r\n",
            b"ffffffffffffffffffff\r\nabc\r\n0\r\n\r\n",
        ),
        status(&[400, 413]),
    );
    add(
        "Transfer-Encoding: gzip",
        post("Transfer-Encoding: gzip\r\n", &list),
        status(&[400, 501]),
    );
    add(
        "Content-Encoding: gzip",
        post(
            &format!(
                "Content-Length: {}\r\nContent-Encoding: gzip\r\n",
                list.len()
            ),
            &list,
        ),
        status(&[200, 400, 415]),
    );
    add(
        "Expect: 100-continue",
        post(
            &format!("Content-Length: {}\r\nExpect: 100-continue\r\n", list.len()),
            &list,
        ),
        RESULT,
    );
    add(
        "Expect: something-else",
        post(
            &format!("Content-Length: {}\r\nExpect: teapot\r\n", list.len()),
            &list,
        ),
        status(&[200, 400, 417]),
    );
    cases.extend(special);
    cases
}

// ---------------------------------------------------------------------------------------
// Cases that need more than one request and one answer.

fn sized_cases(addr: SocketAddr) -> Vec<Case> {
    let mut cases = Vec::new();
    // A 10 MB body, with a Content-Length and chunked: 413 and −32600.
    for chunked in [false, true] {
        let name = if chunked {
            "a 10 MB chunked body"
        } else {
            "a 10 MB body"
        };
        cases.push(case(name, async move {
            let size = 10 << 20;
            let head = if chunked {
                "POST /jsonrpc HTTP/1.1\r\nHost: g\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n".to_string()
            } else {
                format!("POST /jsonrpc HTTP/1.1\r\nHost: g\r\nContent-Type: application/json\r\nContent-Length: {size}\r\n\r\n")
            };
            let mut conn = Conn::open(addr).await?;
            let mut writer = conn.take_writer();
            // Written beside the reading: the gateway may answer (and close) before the end.
            let write = tokio::spawn(async move {
                writer.write_all(head.as_bytes()).await?;
                let piece = vec![b' '; 64 * 1024];
                for _ in 0..size / piece.len() {
                    if chunked {
                        writer.write_all(format!("{:x}\r\n", piece.len()).as_bytes()).await?;
                        writer.write_all(&piece).await?;
                        writer.write_all(b"\r\n").await?;
                    } else {
                        writer.write_all(&piece).await?;
                    }
                }
                if chunked {
                    writer.write_all(b"0\r\n\r\n").await?;
                }
                Ok::<_, std::io::Error>(writer)
            });
            let resp = conn.response(false, ANSWER_WITHIN).await;
            let wrote = write.await.map_err(|e| e.to_string())?;
            let resp = resp.map_err(|e| format!("{e} (the writer: {:?})", wrote.err()))?;
            check(&resp, &rpc_error(&[413], &[INVALID_REQUEST])).map(|()| String::new())
        }));
    }
    // Batches.
    let entry = r#"{"jsonrpc":"2.0","method":"no.such","id":1}"#;
    for (name, n, expect_batch) in [
        ("a batch of 10,000", 10_000, false),
        ("a batch of 101", 101, false),
        ("a batch of 100", 100, true),
    ] {
        cases.push(case(name, async move {
            let body = format!("[{}]", vec![entry; n].join(","));
            let resp = exchange(addr, &rpc_request(body.as_bytes()), false).await?;
            if expect_batch {
                let answers = resp
                    .json()
                    .and_then(|v| v.as_array().cloned())
                    .unwrap_or_default();
                if resp.status != 200 || answers.len() != n {
                    return Err(format!("expected {n} answers, got {}", resp.summary()));
                }
                Ok(String::new())
            } else {
                check(&resp, &rpc_error(&[200], &[INVALID_REQUEST])).map(|()| String::new())
            }
        }));
    }
    cases.push(case("a batch of garbage entries", async move {
        let body = br#"[1, "x", null, {}, {"jsonrpc":"2.0","method":5,"id":7}, [], {"jsonrpc":"2.0","method":"no.such","id":8}]"#;
        let resp = exchange(addr, &rpc_request(body), false).await?;
        let answers = resp.json().and_then(|v| v.as_array().cloned()).unwrap_or_default();
        let codes: Vec<Option<i64>> = answers.iter().map(|a| a["error"]["code"].as_i64()).collect();
        let want = vec![Some(INVALID_REQUEST); 6]
            .into_iter()
            .chain([Some(METHOD_NOT_FOUND)])
            .collect::<Vec<_>>();
        if resp.status != 200 || codes != want {
            return Err(format!("codes {codes:?}, expected {want:?}: {}", resp.summary()));
        }
        Ok(String::new())
    }));
    cases
}

fn connection_cases(addr: SocketAddr, board: i64) -> Vec<Case> {
    let mut cases = Vec::new();
    let get_board =
        format!(r#"{{"jsonrpc":"2.0","method":"board.get","params":[{board}],"id":1}}"#);

    cases.push(case(
        "HTTP/1.0 without keep-alive: answered, then closed",
        async move {
            let mut conn = Conn::open(addr).await?;
            conn.send(b"GET /healthz HTTP/1.0\r\n\r\n").await?;
            let resp = conn.response(false, ANSWER_WITHIN).await?;
            check(&resp, &status(&[200]))?;
            conn.closed_within(Duration::from_secs(3)).await?;
            Ok(String::new())
        },
    ));
    {
        let body = get_board.clone();
        cases.push(case("HTTP/1.0 POST /jsonrpc: answered, then closed", async move {
            let mut conn = Conn::open(addr).await?;
            let request = format!(
                "POST /jsonrpc HTTP/1.0\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            );
            conn.send(request.as_bytes()).await?;
            let resp = conn.response(false, ANSWER_WITHIN).await?;
            check(&resp, &RESULT)?;
            conn.closed_within(Duration::from_secs(3)).await?;
            Ok(String::new())
        }));
    }
    {
        let body = get_board.clone();
        cases.push(case("20 pipelined requests: 20 answers in order", async move {
            let mut all = Vec::new();
            for id in 1..=20 {
                let request = match id % 4 {
                    0 => format!(r#"{{"jsonrpc":"2.0","method":"no.such","id":{id}}}"#),
                    1 => body.replace("\"id\":1", &format!("\"id\":{id}")),
                    // A short poll of an unknown session, an answer that takes a moment.
                    2 => format!(r#"{{"jsonrpc":"2.0","method":"board.list","id":{id}}}"#),
                    _ => format!(r#"{{"jsonrpc":"2.0","method":"session.get_events","params":["00",0.1],"id":{id}}}"#),
                };
                all.extend(rpc_request(request.as_bytes()));
            }
            let mut conn = Conn::open(addr).await?;
            conn.send(&all).await?;
            let mut ids = Vec::new();
            for _ in 1..=20 {
                let resp = conn.response(false, ANSWER_WITHIN).await?;
                if resp.status != 200 {
                    return Err(format!("answer {}: {}", ids.len() + 1, resp.summary()));
                }
                ids.push(resp.json().map_or(Value::Null, |v| v["id"].clone()));
            }
            let want: Vec<Value> = (1..=20).map(|i| json!(i)).collect();
            if ids != want {
                return Err(format!("ids in the order {ids:?}"));
            }
            Ok(String::new())
        }));
    }
    for (name, request) in [
        (
            "half-closing client (POST /jsonrpc) gets its answer",
            rpc_request(get_board.as_bytes()),
        ),
        (
            "half-closing client (GET /healthz) gets its answer",
            get("/healthz"),
        ),
    ] {
        cases.push(case(name, async move {
            let mut conn = Conn::open(addr).await?;
            conn.send(&request).await?;
            conn.take_writer()
                .shutdown()
                .await
                .map_err(|e| format!("shutdown: {e}"))?;
            let resp = conn.response(false, ANSWER_WITHIN).await?;
            check(&resp, &status(&[200])).map(|()| String::new())
        }));
    }
    cases
}

/// Slow clients; the gateway runs with 1 s header and body timeouts.
fn slow_cases(addr: SocketAddr) -> Vec<Case> {
    let mut cases = Vec::new();
    cases.push(case("slowloris: headers one byte every 200 ms → closed", async move {
        let (mut reader, mut writer) = connect_tcp(addr).await?.into_split();
        let started = Instant::now();
        let request = format!(
            "POST /jsonrpc HTTP/1.1\r\nHost: g\r\nContent-Type: application/json\r\nX-Slow: {}\r\n\r\n",
            "s".repeat(100)
        );
        let trickle = async move {
            for byte in request.as_bytes() {
                if writer.write_all(&[*byte]).await.is_err() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            std::future::pending::<()>().await;
        };
        let mut got = Vec::new();
        let read = async {
            let mut chunk = [0u8; 4096];
            loop {
                match reader.read(&mut chunk).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => got.extend_from_slice(&chunk[..n]),
                }
            }
        };
        let closed = tokio::select! {
            _ = trickle => false,
            _ = read => true,
            _ = tokio::time::sleep(Duration::from_secs(6)) => false,
        };
        let after = started.elapsed();
        if !closed {
            return Err(format!("still open after {after:?}"));
        }
        if after < Duration::from_millis(800) {
            return Err(format!("closed after only {after:?} (header timeout 1 s): {:?}", preview(&got)));
        }
        Ok(format!("closed after {after:?}, having sent {:?}", preview(&got)))
    }));
    cases.push(case(
        "an idle connection → closed after the header timeout",
        async move {
            let started = Instant::now();
            let mut conn = Conn::open(addr).await?;
            let sent = conn.closed_within(Duration::from_secs(5)).await?;
            Ok(format!(
                "closed after {:?} ({sent} bytes sent)",
                started.elapsed()
            ))
        },
    ));
    cases.push(case(
        "a kept-alive connection left idle → closed after the header timeout",
        async move {
            let mut conn = Conn::open(addr).await?;
            conn.send(&get("/healthz")).await?;
            check(&conn.response(false, ANSWER_WITHIN).await?, &status(&[200]))?;
            let started = Instant::now();
            conn.closed_within(Duration::from_secs(5)).await?;
            Ok(format!("closed after {:?}", started.elapsed()))
        },
    ));
    for trickle in [true, false] {
        let name = if trickle {
            "slow body: one byte every 200 ms → 408 with a JSON-RPC error"
        } else {
            "a body that never comes → 408 with a JSON-RPC error"
        };
        cases.push(case(name, async move {
            let mut conn = Conn::open(addr).await?;
            let started = Instant::now();
            conn.send(
                b"POST /jsonrpc HTTP/1.1\r\nHost: g\r\nContent-Type: application/json\r\nContent-Length: 200\r\n\r\n",
            )
            .await?;
            let mut writer = conn.take_writer();
            let dribble = tokio::spawn(async move {
                for _ in 0..200 {
                    if !trickle || writer.write_all(b" ").await.is_err() {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                tokio::time::sleep(Duration::from_secs(60)).await;
                drop(writer);
            });
            let resp = conn.response(false, Duration::from_secs(6)).await;
            dribble.abort();
            let after = started.elapsed();
            let resp = resp.map_err(|e| format!("after {after:?}: {e}"))?;
            check(&resp, &rpc_error(&[408], DOCUMENTED))?;
            if after < Duration::from_millis(800) {
                return Err(format!("408 after only {after:?} (body timeout 1 s)"));
            }
            Ok(format!("408 after {after:?}"))
        }));
    }
    cases
}

/// A client that writes thousands of pipelined requests and never reads: the gateway must
/// stop reading from it (its writes block), while an ordinary client is answered at once.
fn never_reading_case(addr: SocketAddr, big_board: i64) -> Case {
    case("a client that never reads its answers", async move {
        let rss_before = rss_kib();
        let mut hog = Conn::open(addr).await?;
        // 2 kB requests for 128 kB answers: the gateway's sending side fills at once.
        let one = http(
            "GET",
            &format!("/boards/{big_board}/bits"),
            &[("X-Pad", &"p".repeat(2000))],
            b"",
        );
        let batch: Vec<u8> = one.iter().copied().cycle().take(one.len() * 100).collect();
        let mut written = 0usize;
        let mut blocked = None;
        for _ in 0..200 {
            // Up to 20,000 requests (≈ 40 MB).
            match timeout(Duration::from_secs(2), hog.writer().write_all(&batch)).await {
                Ok(Ok(())) => written += batch.len(),
                Ok(Err(e)) => {
                    blocked = Some(format!("the gateway closed it: {e}"));
                    break;
                }
                Err(_) => {
                    blocked = Some("writes block".to_string());
                    break;
                }
            }
        }
        let Some(how) = blocked else {
            return Err(format!(
                "the gateway kept reading: {} MB of requests went in without a read",
                written >> 20
            ));
        };
        // Meanwhile an ordinary client.
        let started = Instant::now();
        let resp = exchange(addr, &get("/healthz"), false).await?;
        let waited = started.elapsed();
        check(&resp, &status(&[200]))?;
        if waited > Duration::from_secs(1) {
            return Err(format!(
                "an ordinary client waited {waited:?} beside the hog"
            ));
        }
        let rss_after = rss_kib();
        drop(hog);
        Ok(format!(
            "{how} after {} kB written; ordinary client answered in {waited:?}; test process RSS {rss_before} → {rss_after} kB",
            written >> 10
        ))
    })
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

/// 2,000 session.create (20 batches of 100, 4 connections at a time): each a session id or
/// "too many sessions".
fn flood_case(addr: SocketAddr) -> Case {
    case("session.create flood (2,000)", async move {
        let entry = r#"{"jsonrpc":"2.0","method":"session.create","id":1}"#;
        let body = format!("[{}]", vec![entry; 100].join(","));
        let started = Instant::now();
        let outcomes: Vec<Result<(usize, usize), String>> = futures::stream::iter(0..20)
            .map(|_| {
                let body = body.clone();
                async move {
                    let resp = exchange(addr, &rpc_request(body.as_bytes()), false).await?;
                    let answers = resp.json().and_then(|v| v.as_array().cloned());
                    let Some(answers) = answers.filter(|a| a.len() == 100 && resp.status == 200)
                    else {
                        return Err(resp.summary());
                    };
                    let created = answers.iter().filter(|a| a["result"].is_string()).count();
                    let refused = answers
                        .iter()
                        .filter(|a| a["error"]["code"] == TOO_MANY)
                        .count();
                    if created + refused != 100 {
                        return Err(format!("other answers: {}", resp.summary()));
                    }
                    Ok((created, refused))
                }
            })
            .buffer_unordered(4)
            .collect()
            .await;
        let (mut created, mut refused) = (0, 0);
        for outcome in outcomes {
            let (c, r) = outcome?;
            created += c;
            refused += r;
        }
        Ok(format!(
            "{created} created, {refused} refused in {:?}",
            started.elapsed()
        ))
    })
}

// ---------------------------------------------------------------------------------------
// The control subscriber and the steady writer.

struct ControlReport {
    seqs: Vec<i64>,
    problems: Vec<String>,
    polls: usize,
    slowest: Duration,
}

/// Polls `session` (1.0-style, Qik's form) on one keep-alive connection until it has seen
/// seq `target` (once known) or `give_up` passes after it became known.
async fn control_subscriber(
    addr: SocketAddr,
    session: String,
    key: String,
    target: tokio::sync::watch::Receiver<Option<i64>>,
) -> ControlReport {
    let mut report = ControlReport {
        seqs: Vec::new(),
        problems: Vec::new(),
        polls: 0,
        slowest: Duration::ZERO,
    };
    let mut conn: Option<Conn> = None;
    let mut give_up: Option<Instant> = None;
    loop {
        if let Some(n) = *target.borrow() {
            let deadline = *give_up.get_or_insert_with(|| Instant::now() + Duration::from_secs(15));
            if report.seqs.last().copied().unwrap_or(0) >= n || Instant::now() > deadline {
                break;
            }
        }
        if conn.is_none() {
            match Conn::open(addr).await {
                Ok(c) => conn = Some(c),
                Err(e) => {
                    report.problems.push(format!("control: connect: {e}"));
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            }
        }
        let c = conn.as_mut().expect("connected");
        report.polls += 1;
        let body =
            json!({"method": "session.get_events", "params": [session, 1], "id": report.polls});
        let started = Instant::now();
        let outcome = match c.send(&rpc_request(body.to_string().as_bytes())).await {
            Ok(()) => c.response(false, ANSWER_WITHIN).await,
            Err(e) => Err(e),
        };
        let took = started.elapsed();
        report.slowest = report.slowest.max(took);
        if took > Duration::from_secs(5) {
            report
                .problems
                .push(format!("control: a 1 s poll took {took:?}"));
        }
        let resp = match outcome {
            Ok(resp) => resp,
            Err(e) => {
                report
                    .problems
                    .push(format!("control: poll {}: {e}", report.polls));
                conn = None;
                continue;
            }
        };
        let value = resp.json().unwrap_or(Value::Null);
        let Some(events) = value["result"].as_array().filter(|_| resp.status == 200) else {
            report.problems.push(format!(
                "control: poll {}: {}",
                report.polls,
                resp.summary()
            ));
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        if value["id"] != json!(report.polls) {
            report.problems.push(format!(
                "control: answer id {} for poll {}",
                value["id"], report.polls
            ));
        }
        for event in events {
            match event["action"].as_str() {
                Some("update") if event["key"] == json!(key) => {
                    report.seqs.push(event["obj"]["seq"].as_i64().unwrap_or(-1))
                }
                Some("presence" | "cursors" | "settings") => {}
                _ => report
                    .problems
                    .push(format!("control: unexpected event {event}")),
            }
        }
    }
    report
}

/// Places `per_batch` tiles every 50 ms through SQL, each on a tile not placed before, until
/// `stop`: how many were placed, and anything that went wrong.
async fn steady_writer(
    url: String,
    board: i64,
    user: i64,
    width: i64,
    tiles: i64,
    stop: Arc<AtomicBool>,
) -> (i64, Vec<String>) {
    let sql = connect(&url).await;
    let per_batch = 20i64;
    let mut placed = 0i64;
    let mut problems = Vec::new();
    while !stop.load(Ordering::SeqCst) && placed + per_batch <= tiles {
        let ks: Vec<i64> = (placed..placed + per_batch).collect();
        let users = vec![user; ks.len()];
        let xs: Vec<i32> = ks.iter().map(|k| (k % width) as i32).collect();
        let ys: Vec<i32> = ks.iter().map(|k| (k / width) as i32).collect();
        let colors: Vec<i32> = ks.iter().map(|k| 1 + (k % 15) as i32).collect();
        match sql
            .query_one(
                "SELECT count(*) FILTER (WHERE placed) FROM place.place_many($1, $2, $3, $4, $5)",
                &[&board, &users, &xs, &ys, &colors],
            )
            .await
        {
            Ok(row) => {
                let n: i64 = row.get(0);
                if n != per_batch {
                    problems.push(format!("writer: {n} of {per_batch} placed"));
                }
                placed += n;
            }
            Err(e) => {
                problems.push(format!("writer: {e}"));
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    (placed, problems)
}

// ---------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_clients_get_the_right_error_and_the_control_subscriber_everything() {
    let test_started = Instant::now();
    let url = fresh_database("gw_hostile").await;
    let sql = connect(&url).await;
    let control_board = create_board(&sql, "control", (128, 128), 4, "0").await;
    let board = create_board(&sql, "matrix", (16, 16), 4, "0").await;
    let big_board = create_board(&sql, "big", (512, 512), 4, "0").await;
    let compacted = create_board(&sql, "compacted", (8, 8), 4, "0").await;
    let users = create_users_with_tokens(&sql, "hostile", 2).await;
    let (writer, token) = (users[0].0, users[1].1.clone());

    // A board whose early history is gone: a moment between two placements, then
    // compact_history up to now.
    let place_one = |x: i32| {
        format!("SELECT count(*) FROM place.place_many({compacted}, ARRAY[{writer}]::bigint[], ARRAY[{x}], ARRAY[0], ARRAY[3])")
    };
    sql.batch_execute(&place_one(1)).await.expect("placing");
    tokio::time::sleep(Duration::from_millis(20)).await;
    let past: String = sql
        .query_one(
            "SELECT to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')",
            &[],
        )
        .await
        .expect("now")
        .get(0);
    tokio::time::sleep(Duration::from_millis(20)).await;
    sql.batch_execute(&place_one(2)).await.expect("placing");
    sql.batch_execute(&place_one(3)).await.expect("placing");
    tokio::time::sleep(Duration::from_millis(20)).await;
    let dropped: i64 = sql
        .query_one(
            "SELECT place.compact_history($1, clock_timestamp())",
            &[&compacted],
        )
        .await
        .expect("compact_history")
        .get(0);
    assert!(dropped >= 2, "compact_history dropped {dropped} rows");

    let gw = start_gateway(&url, |config| {
        config.header_timeout_secs = 1;
        config.body_timeout_secs = 1;
        config.max_poll_secs = MAX_POLL_SECS;
        config.max_batch = 100;
        config.cors_origins = ALLOWED_ORIGIN.to_string();
    })
    .await;
    let addr = gw.addr;

    // The control subscriber, then the writer.
    let control_session = ok(addr, "session.create", json!([])).await;
    let control_session = control_session.as_str().expect("a session id").to_string();
    let subscribed = ok(
        addr,
        "session.subscribe",
        json!([control_session, "board", {"board": control_board}]),
    )
    .await;
    assert_eq!(subscribed[1]["seq"], 0, "the control board starts empty");
    let key = subscribed[0].as_str().expect("a key").to_string();
    let (target_tx, target_rx) = tokio::sync::watch::channel(None);
    let control = tokio::spawn(control_subscriber(addr, control_session, key, target_rx));
    let stop = Arc::new(AtomicBool::new(false));
    let writing = tokio::spawn(steady_writer(
        url.clone(),
        control_board,
        writer,
        128,
        128 * 128,
        stop.clone(),
    ));

    // The matrix's sessions: one signed in, one only ever named.
    let session = ok(addr, "session.create", json!([])).await;
    ok(addr, "session.authorize", json!([session, token])).await;
    let other_session = ok(addr, "session.create", json!([])).await;
    let fixture = Fixture {
        addr,
        session: session.as_str().unwrap().to_string(),
        other_session: other_session.as_str().unwrap().to_string(),
        token: token.clone(),
        board,
    };

    let mut results = Vec::new();
    let phases: Vec<(&str, Vec<Case>, usize)> = vec![
        ("table", table(addr, board, &past, compacted), 4),
        ("sizes", sized_cases(addr), 2),
        ("connections", connection_cases(addr, board), 4),
        ("param matrix", matrix_cases(&fixture), 8),
        ("slow clients", slow_cases(addr), 8),
        (
            "never reading",
            vec![never_reading_case(addr, big_board)],
            1,
        ),
        ("flood", vec![flood_case(addr)], 1),
    ];
    for (phase, cases, parallel) in phases {
        let started = Instant::now();
        let n = cases.len();
        let outcomes = run_all(cases, parallel).await;
        let failed = outcomes.iter().filter(|(_, o)| o.is_err()).count();
        println!(
            "phase {phase}: {n} cases, {failed} failed, {:?}",
            started.elapsed()
        );
        if phase == "param matrix" {
            results.extend(summarize_matrix(outcomes));
        } else {
            results.extend(outcomes);
        }
    }

    // The barrage is over: the control subscriber must have every placement, once, in order.
    stop.store(true, Ordering::SeqCst);
    let (placed, mut problems) = writing.await.expect("the writer");
    let _ = target_tx.send(Some(placed));
    let report = control.await.expect("the control subscriber");
    problems.extend(report.problems.iter().cloned());
    let expected: Vec<i64> = (1..=placed).collect();
    let control_outcome = if report.seqs == expected && problems.is_empty() {
        Ok(format!(
            "{placed} placements seen once each in order over {} polls (slowest {:?})",
            report.polls, report.slowest
        ))
    } else {
        let mut seen = report.seqs.clone();
        seen.sort_unstable();
        let distinct = {
            let mut d = seen.clone();
            d.dedup();
            d.len()
        };
        Err(format!(
            "{placed} placed, {} events ({distinct} distinct, in order: {}), problems: {problems:?}",
            report.seqs.len(),
            report.seqs.windows(2).all(|w| w[0] < w[1])
        ))
    };
    results.push(("control subscriber".to_string(), control_outcome));

    // After it all, the gateway is still well.
    let healthy = exchange(addr, &get("/healthz"), false).await;
    results.push((
        "healthz after the barrage".to_string(),
        healthy
            .and_then(|r| check(&r, &status(&[200])))
            .map(|()| String::new()),
    ));

    let failures: Vec<&(String, Result<String, String>)> =
        results.iter().filter(|(_, o)| o.is_err()).collect();
    for (name, outcome) in &results {
        if let Ok(note) = outcome {
            if !note.is_empty() {
                println!("ok   {name}: {note}");
            }
        }
    }
    for (name, outcome) in &failures {
        println!("FAIL {name}: {}", outcome.as_ref().unwrap_err());
    }
    println!(
        "{} cases, {} failed, in {:?}",
        results.len(),
        failures.len(),
        test_started.elapsed()
    );
    assert!(
        failures.is_empty(),
        "{} of {} hostile cases failed (listed above)",
        failures.len(),
        results.len()
    );
}
