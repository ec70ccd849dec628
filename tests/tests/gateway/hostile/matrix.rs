//! The parameter matrix: every param of every method in the method table, given every
//! awkward value (`hostile_values`), by position and by name.

use super::*;

/// Values as JSON text, so that numbers beyond i64/u64 reach the gateway as written.
pub(super) fn hostile_values() -> Vec<(&'static str, String)> {
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
pub(super) fn params_text(params: &[(&str, String)], by_name: bool) -> String {
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

/// What the matrix calls on: a signed-in session, another one, a token and a board.
#[derive(Clone)]
pub(super) struct Fixture {
    pub(super) addr: SocketAddr,
    pub(super) session: String,
    pub(super) other_session: String,
    pub(super) token: String,
    pub(super) board: i64,
}

/// `__FRESH__` in a param stands for a session created for that case alone (subscriptions
/// pile up otherwise and the session's limit would answer every later case).
pub(super) const FRESH: &str = "__FRESH__";

/// What a param takes: a value of another JSON type (or null for a required param) must be
/// answered −32602, whatever else is wrong; a value of the right type may get any documented
/// answer (−32001 for a session id no one holds, −32602 for a tile outside the board, …).
#[derive(Clone, Copy, PartialEq)]
pub(super) enum Kind {
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
    pub(super) fn takes(self, v: &Value) -> bool {
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
pub(super) struct P {
    pub(super) name: &'static str,
    pub(super) base: String,
    pub(super) kind: Kind,
    pub(super) required: bool,
}

pub(super) fn p(name: &'static str, base: impl Into<String>, kind: Kind, required: bool) -> P {
    P {
        name,
        base: base.into(),
        kind,
        required,
    }
}

/// Whether `value` (JSON text) must be answered −32602 in place of param `param`.
pub(super) fn ill_typed(param: &P, value: &str) -> bool {
    let v: Value = serde_json::from_str(value).unwrap_or(Value::Null);
    if v.is_null() {
        param.required
    } else {
        !param.kind.takes(&v)
    }
}

pub(super) fn matrix_cases(f: &Fixture) -> Vec<Case> {
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
            // This gateway takes no guests: a well-formed call is refused (−32002).
            "session.play_as_guest",
            vec![p("session", FRESH, Str, true), p("board", &b, Board, true)],
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
pub(super) fn summarize_matrix(
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
