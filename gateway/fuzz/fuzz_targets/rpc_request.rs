//! A request body as `POST /jsonrpc` gets it, taken as far as it goes without a database:
//! the envelope (`jsonrpc::parse`), each request's params as its method reads them
//! (`methods::param_names`, `params::Params`, a view's params, `set_presence`'s position,
//! `get_events`' timeout and `ack` cursor), and the answer framed around it
//! (`jsonrpc::response`, `error_response`, `batch_response`).
//!
//! Never a panic; every answer is valid JSON that says what it was given (id, result or
//! error); a cursor that decodes reads back the same once encoded again.

#![no_main]

use libfuzzer_sys::fuzz_target;
use pgplace_gateway::db::BoardRef;
use pgplace_gateway::errors::{RpcError, INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND};
use pgplace_gateway::fragments::Fragments;
use pgplace_gateway::params::{FromParam, Params, Seconds};
use pgplace_gateway::rpc::jsonrpc::{self, Body, Parsed, Reply, Version};
use pgplace_gateway::rpc::methods::{param_names, poll_timeout, POSITION_PARAMS};
use pgplace_gateway::sessions::poll_cursor::PollCursor;
use pgplace_gateway::views::param_names as view_param_names;
use serde_json::{Map, Value};
use std::time::Duration;

/// `--max-batch`'s default.
const MAX_BATCH: usize = 100;
/// `--max-poll-secs`' default.
const MAX_POLL: Duration = Duration::from_secs(90);

fuzz_target!(|body: &[u8]| {
    let parsed = match jsonrpc::parse(body, MAX_BATCH) {
        Ok(Body::Single(parsed)) => vec![parsed],
        Ok(Body::Batch(parsed)) => {
            if parsed.len() > 1 {
                // The same batch over a smaller limit is one error, not a batch.
                let Err(answer) = jsonrpc::parse(body, parsed.len() - 1) else {
                    panic!("a batch of {} passed a limit below it", parsed.len());
                };
                assert_eq!(json(&answer)["error"]["code"], INVALID_REQUEST);
            }
            parsed
        }
        Err(answer) => {
            let answer = json(&answer);
            assert!(answer["error"]["code"].is_i64(), "{answer}");
            assert_eq!(answer["id"], Value::Null);
            return;
        }
    };
    let count = parsed.len();
    let answers: Vec<Fragments> = parsed.into_iter().map(answer).collect();
    let batch = jsonrpc::batch_response(answers).expect("answers to answer");
    assert_eq!(json(&batch).as_array().map(Vec::len), Some(count));
});

/// The answer to one request: its params echoed when its method would accept them (as far
/// as a method reads them without the database), else the error it would get.
fn answer(parsed: Parsed) -> Fragments {
    match parsed {
        Err((version, id, error)) => {
            assert_eq!(error.code, INVALID_REQUEST, "{error:?}");
            let answer = jsonrpc::error_response(version, &id, &error);
            check(&answer, version, &id, Err(&error));
            answer
        }
        Ok(request) => {
            let id = request.id.clone().unwrap_or(Value::Null);
            let params = request.params.as_ref();
            let outcome = decode(&request.method, params);
            if let Err(error) = &outcome {
                assert!(
                    [INVALID_PARAMS, METHOD_NOT_FOUND].contains(&error.code),
                    "{error:?}"
                );
            }
            let echo = params.cloned().unwrap_or(Value::Null);
            let answer = jsonrpc::response(
                request.version,
                &id,
                outcome.clone().map(|()| Reply::Value(echo.clone())),
            );
            check(
                &answer,
                request.version,
                &id,
                outcome.as_ref().map(|()| &echo),
            );
            answer
        }
    }
}

/// A method's params read as the method reads them before it needs the database.
fn decode(method: &str, params: Option<&Value>) -> Result<(), RpcError> {
    let names = param_names(method).ok_or_else(|| RpcError::method_not_found(method))?;
    let p = Params::new(params, names)?;
    read_every_way(&p, names);
    match method {
        "session.subscribe" => {
            let view: String = p.required("view")?;
            let view_params: Map<String, Value> = p.optional("params")?.unwrap_or_default();
            let names = view_param_names(&view);
            read_every_way(&Params::new_from_map(&view_params, names)?, names);
        }
        "session.get_events" => {
            let timeout = poll_timeout(p.required::<Seconds>("timeout")?, MAX_POLL);
            assert!(timeout <= MAX_POLL);
            match p.optional::<String>("ack")?.as_deref() {
                None | Some("") => {}
                Some(ack) => {
                    let cursor = PollCursor::decode(ack).map_err(RpcError::invalid_params)?;
                    assert_eq!(PollCursor::decode(&cursor.encode()), Ok(cursor));
                }
            }
        }
        "session.set_presence" => {
            let position: Map<String, Value> = p.required("position")?;
            let pp = Params::new_from_map(&position, POSITION_PARAMS)?;
            read_every_way(&pp, POSITION_PARAMS);
            let (_x, _y): (i32, i32) = (pp.required("x")?, pp.required("y")?);
        }
        _ => {}
    }
    Ok(())
}

/// Every declared param read as each type a method may ask for: a value or an
/// invalid-params error, never a panic.
fn read_every_way(p: &Params<'_>, names: &[&str]) {
    for name in names {
        read::<String>(p, name);
        read::<i32>(p, name);
        read::<i64>(p, name);
        read::<bool>(p, name);
        read::<Seconds>(p, name);
        read::<BoardRef>(p, name);
        read::<Map<String, Value>>(p, name);
    }
}

fn read<T: FromParam>(p: &Params<'_>, name: &str) {
    if let Err(error) = p.required::<T>(name) {
        assert_eq!(error.code, INVALID_PARAMS, "{error:?}");
    }
}

fn json(answer: &Fragments) -> Value {
    let bytes = answer.to_vec();
    match serde_json::from_slice(&bytes) {
        Ok(value) => value,
        Err(e) => panic!("not JSON ({e}): {}", String::from_utf8_lossy(&bytes)),
    }
}

/// The answer is valid JSON in the request's version, with its id and its result or error.
fn check(answer: &Fragments, version: Version, id: &Value, outcome: Result<&Value, &RpcError>) {
    let answer = json(answer);
    let object = answer.as_object().expect("an answer is an object");
    match version {
        Version::V2 => {
            assert_eq!(object.get("jsonrpc"), Some(&Value::from("2.0")));
            assert_eq!(object.len(), 3, "{answer}");
        }
        Version::V1 => {
            assert!(object.contains_key("result") && object.contains_key("error"));
            assert_eq!(object.len(), 3, "{answer}");
        }
    }
    assert!(same(&answer["id"], id), "{answer} should have id {id}");
    match outcome {
        Ok(result) => {
            assert!(same(&answer["result"], result), "{answer}: {result}");
            assert!(version == Version::V2 || answer["error"].is_null());
        }
        Err(error) => {
            assert!(version == Version::V2 || answer["result"].is_null());
            assert_eq!(answer["error"]["code"], error.code);
            assert_eq!(answer["error"]["message"], error.message.as_str());
        }
    }
}

/// Equal JSON, numbers that are not integers within the last bits of an f64 (serde_json
/// reads a float it wrote back to the nearest value, not always the very same one).
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) if x.is_f64() || y.is_f64() => {
            let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
            x == y || (x - y).abs() <= 4.0 * f64::EPSILON * x.abs().max(y.abs())
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}
