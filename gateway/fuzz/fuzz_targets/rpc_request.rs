//! A request body as `POST /jsonrpc` gets it, taken as far as it goes without a database:
//! the envelope (`jsonrpc::parse`), each request's params as its method reads them (the
//! method table's params structs, every method's read of the same params, a view's params,
//! `get_events`' timeout and `ack` cursor), and the answer framed around it
//! (`jsonrpc::response`, `error_response`, `batch_response`).
//!
//! Never a panic; every answer is valid JSON that says what it was given (id, result or
//! error); a cursor that decodes reads back the same once encoded again.

#![no_main]

use libfuzzer_sys::fuzz_target;
use pgplace_gateway::errors::{RpcError, INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND};
use pgplace_gateway::fragments::Fragments;
use pgplace_gateway::params::read_params;
use pgplace_gateway::rpc::jsonrpc::{self, Body, Parsed, Reply, Version};
use pgplace_gateway::rpc::session::get_events::{poll_timeout, GetEventsParams};
use pgplace_gateway::rpc::session::subscribe::SubscribeParams;
use pgplace_gateway::rpc::table::{self, METHODS};
use pgplace_gateway::sessions::poll_cursor::PollCursor;
use pgplace_gateway::views;
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
    // Whatever the method, the same params read by every method's struct: a value or an
    // invalid-params error, never a panic.
    for other in METHODS {
        if let Err(error) = (other.check)(params) {
            assert_eq!(error.code, INVALID_PARAMS, "{}: {error:?}", other.name);
        }
    }
    table::check(method, params)?;
    match method {
        "session.subscribe" => {
            let p: SubscribeParams = read_params(params)?;
            let view_params: Map<String, Value> = p.params.unwrap_or_default();
            views::check_params(&p.view, &view_params)?;
        }
        "session.get_events" => {
            let p: GetEventsParams = read_params(params)?;
            let timeout = poll_timeout(p.timeout, MAX_POLL);
            assert!(timeout <= MAX_POLL);
            match p.ack.as_deref() {
                None | Some("") => {}
                Some(ack) => {
                    let cursor = PollCursor::decode(ack).map_err(RpcError::invalid_params)?;
                    assert_eq!(PollCursor::decode(&cursor.encode()), Ok(cursor));
                }
            }
        }
        _ => {}
    }
    Ok(())
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
