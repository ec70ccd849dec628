//! JSON-RPC envelopes: requests (2.0, and 1.0-style without `"jsonrpc"`), batches,
//! notifications, and responses framed around results that may be pre-serialized.

use crate::errors::RpcError;
use crate::fragments::{ArrayBuilder, Fragments};
use bytes::Bytes;
use serde_json::Value;

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Version {
    /// No `"jsonrpc"` member: answered as `{"result", "error", "id"}`.
    V1,
    V2,
}

#[derive(Debug)]
pub struct Request {
    pub version: Version,
    /// None for a notification (no answer is sent).
    pub id: Option<Value>,
    pub method: String,
    pub params: Option<Value>,
}

/// A request as found in the body: valid, or the error to answer in its place.
pub type Parsed = Result<Request, (Version, Value, RpcError)>;

pub enum Body {
    Single(Parsed),
    Batch(Vec<Parsed>),
}

/// Reads a request body. An unreadable body or an empty batch is one error response.
pub fn parse(body: &[u8], max_batch: usize) -> Result<Body, Fragments> {
    let value: Value = match serde_json::from_slice(body) {
        Ok(value) => value,
        Err(e) => {
            return Err(error_response(
                Version::V2,
                &Value::Null,
                &RpcError::parse(e),
            ))
        }
    };
    match value {
        Value::Array(items) if items.is_empty() => Err(error_response(
            Version::V2,
            &Value::Null,
            &RpcError::invalid_request("an empty batch"),
        )),
        Value::Array(items) if items.len() > max_batch => Err({
            crate::metrics::metrics().rejected("batch_size");
            error_response(
                Version::V2,
                &Value::Null,
                &RpcError::invalid_request(format!(
                    "a batch of {} requests is larger than the limit of {max_batch}",
                    items.len()
                )),
            )
        }),
        Value::Array(items) => Ok(Body::Batch(items.into_iter().map(request).collect())),
        single => Ok(Body::Single(request(single))),
    }
}

fn request(value: Value) -> Parsed {
    let Value::Object(mut map) = value else {
        return Err((
            Version::V2,
            Value::Null,
            RpcError::invalid_request("a request must be an object"),
        ));
    };
    let version = match map.remove("jsonrpc") {
        None => Version::V1,
        Some(Value::String(v)) if v == "2.0" => Version::V2,
        Some(other) => {
            return Err((
                Version::V2,
                valid_id(map.get("id")),
                RpcError::invalid_request(format!("\"jsonrpc\" must be \"2.0\", not {other}")),
            ))
        }
    };
    let id = map.remove("id");
    let fail = |id: &Option<Value>, message: &str| {
        Err((
            version,
            valid_id(id.as_ref()),
            RpcError::invalid_request(message),
        ))
    };
    if let Some(id) = &id {
        if !(id.is_string() || id.is_number() || id.is_null()) {
            return fail(&None, "\"id\" must be a string, a number or null");
        }
    }
    let method = match map.remove("method") {
        Some(Value::String(method)) => method,
        _ => return fail(&id, "\"method\" must be a string"),
    };
    let params = map.remove("params");
    if let Some(p) = &params {
        if !(p.is_array() || p.is_object() || (version == Version::V1 && p.is_null())) {
            return fail(&id, "\"params\" must be an array or an object");
        }
    }
    if version == Version::V2 {
        if let Some(extra) = map.keys().next() {
            return fail(&id, &format!("unknown member {extra:?}"));
        }
    }
    // JSON-RPC 1.0 marks a notification with a null id.
    let id = match (version, id) {
        (Version::V1, Some(Value::Null)) => None,
        (_, id) => id,
    };
    Ok(Request {
        version,
        id,
        method,
        params,
    })
}

fn valid_id(id: Option<&Value>) -> Value {
    match id {
        Some(id) if id.is_string() || id.is_number() => id.clone(),
        _ => Value::Null,
    }
}

/// A result: a JSON value, or a JSON text already serialized (events, initial states).
pub enum Reply {
    Value(Value),
    Raw(Fragments),
}

impl Reply {
    /// A method's answer, from the type its result schema is made from.
    pub fn serialized(answer: impl serde::Serialize) -> Result<Reply, RpcError> {
        Ok(Reply::Value(
            serde_json::to_value(answer).expect("answers serialize"),
        ))
    }
}

pub fn response(version: Version, id: &Value, outcome: Result<Reply, RpcError>) -> Fragments {
    let result = match outcome {
        Ok(result) => result,
        Err(error) => return error_response(version, id, &error),
    };
    let mut out = Fragments::new();
    out.push_static(match version {
        Version::V2 => "{\"jsonrpc\":\"2.0\",\"result\":",
        Version::V1 => "{\"result\":",
    });
    match result {
        Reply::Value(value) => out.push(json_bytes(&value)),
        Reply::Raw(raw) => out.append(raw),
    }
    out.push_static(match version {
        Version::V2 => ",\"id\":",
        Version::V1 => ",\"error\":null,\"id\":",
    });
    out.push(json_bytes(id));
    out.push_static("}");
    out
}

pub fn error_response(version: Version, id: &Value, error: &RpcError) -> Fragments {
    let mut out = Fragments::new();
    out.push_static(match version {
        Version::V2 => "{\"jsonrpc\":\"2.0\",\"error\":",
        Version::V1 => "{\"result\":null,\"error\":",
    });
    out.push(json_bytes(&error.to_json()));
    out.push_static(",\"id\":");
    out.push(json_bytes(id));
    out.push_static("}");
    out
}

/// The answers of a batch: an array, or nothing when every request was a notification.
pub fn batch_response(answers: Vec<Fragments>) -> Option<Fragments> {
    if answers.is_empty() {
        return None;
    }
    let mut array = ArrayBuilder::new();
    for answer in answers {
        array.push(answer);
    }
    Some(array.finish())
}

fn json_bytes(value: &Value) -> Bytes {
    serde_json::to_vec(value)
        .expect("JSON values serialize")
        .into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn text(f: Fragments) -> Value {
        serde_json::from_slice(&f.to_vec()).unwrap()
    }

    #[test]
    fn versions_frame_results_their_own_way() {
        let v2 = response(Version::V2, &json!(7), Ok(Reply::Value(json!([1]))));
        assert_eq!(text(v2), json!({"jsonrpc": "2.0", "result": [1], "id": 7}));
        let v1 = response(Version::V1, &json!("a"), Ok(Reply::Value(json!(true))));
        assert_eq!(text(v1), json!({"result": true, "error": null, "id": "a"}));
        let e1 = error_response(Version::V1, &json!(1), &RpcError::method_not_found("x"));
        assert_eq!(text(e1)["result"], Value::Null);
    }

    #[test]
    fn malformed_requests_are_invalid_requests_with_null_id_when_unreadable() {
        for (body, id) in [
            (json!(1), Value::Null),
            (json!({"jsonrpc": "2.0", "method": 1, "id": 3}), json!(3)),
            (json!({"jsonrpc": "1.5", "method": "m", "id": 3}), json!(3)),
            (
                json!({"jsonrpc": "2.0", "method": "m", "id": {"a": 1}}),
                Value::Null,
            ),
            (
                json!({"jsonrpc": "2.0", "method": "m", "params": 3, "id": 4}),
                json!(4),
            ),
        ] {
            let Ok(Body::Single(Err((_, got, error)))) = parse(body.to_string().as_bytes(), 10)
            else {
                panic!("{body} should be an invalid request");
            };
            assert_eq!(
                (got, error.code),
                (id, crate::errors::INVALID_REQUEST),
                "{body}"
            );
        }
    }

    #[test]
    fn v1_null_id_is_a_notification_and_v2_missing_id_too() {
        let Ok(Body::Single(Ok(r))) = parse(br#"{"method":"m","params":[],"id":null}"#, 10) else {
            panic!()
        };
        assert_eq!((r.version, r.id), (Version::V1, None));
        let Ok(Body::Single(Ok(r))) = parse(br#"{"jsonrpc":"2.0","method":"m"}"#, 10) else {
            panic!()
        };
        assert_eq!((r.version, r.id), (Version::V2, None));
        let Ok(Body::Single(Ok(r))) = parse(br#"{"jsonrpc":"2.0","method":"m","id":null}"#, 10)
        else {
            panic!()
        };
        assert_eq!(r.id, Some(Value::Null));
    }
}
