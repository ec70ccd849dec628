//! Params, by position (as Qik clients send them) or by name, read into a params struct
//! with serde: a method's, a view's. Positions follow the struct's fields in order (as
//! serde knows them); `null` is an absent param.

use crate::errors::RpcError;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

/// Reads `params` (a JSON-RPC request's) into `P`.
pub fn read_params<P: DeserializeOwned>(params: Option<&Value>) -> Result<P, RpcError> {
    let names = serde_aux::serde_introspection::serde_introspect::<P>();
    let named = match params {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Array(values)) => {
            if values.len() > names.len() {
                return Err(RpcError::invalid_params(format!(
                    "expected at most {} params ({}), got {}",
                    names.len(),
                    names.join(", "),
                    values.len()
                )));
            }
            names
                .iter()
                .zip(values)
                .map(|(name, value)| (name.to_string(), value.clone()))
                .collect()
        }
        Some(Value::Object(map)) => map.clone(),
        Some(_) => {
            return Err(RpcError::invalid_params(
                "params must be an array or an object",
            ))
        }
    };
    read_named(named)
}

/// Reads named params (a view's, inside `session.subscribe`'s) into `P`.
pub fn read_named<P: DeserializeOwned>(mut named: Map<String, Value>) -> Result<P, RpcError> {
    let names = serde_aux::serde_introspection::serde_introspect::<P>();
    if let Some(unknown) = named.keys().find(|k| !names.contains(&k.as_str())) {
        return Err(RpcError::invalid_params(format!(
            "unknown param {unknown:?} (expected: {})",
            if names.is_empty() {
                "none".to_string()
            } else {
                names.join(", ")
            }
        )));
    }
    named.retain(|_, value| !value.is_null());
    serde_path_to_error::deserialize(Value::Object(named)).map_err(|error| {
        let path = error.path().to_string();
        let inner = error.into_inner().to_string();
        match inner.strip_prefix("missing field ") {
            Some(field) if path == "." => {
                RpcError::invalid_params(format!("missing param {field}"))
            }
            _ => RpcError::invalid_params(format!("`{path}`: {inner}")),
        }
    })
}

/// The names of `P`'s params, in position order.
pub fn param_names<P: DeserializeOwned>() -> &'static [&'static str] {
    serde_aux::serde_introspection::serde_introspect::<P>()
}

/// No params.
#[derive(serde::Deserialize, schemars::JsonSchema)]
pub struct NoParams {}

/// A non-negative number of seconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Seconds(pub f64);

impl<'de> serde::Deserialize<'de> for Seconds {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let seconds = f64::deserialize(deserializer)?;
        if seconds >= 0.0 && seconds.is_finite() {
            Ok(Seconds(seconds))
        } else {
            Err(serde::de::Error::custom(format!(
                "must be a non-negative number of seconds, not {seconds}"
            )))
        }
    }
}

impl schemars::JsonSchema for Seconds {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Seconds".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "number",
            "minimum": 0,
            "description": "A number of seconds (a fraction allowed)."
        })
    }
}

/// Which board a client means: its id, or its name.
#[derive(Debug, Clone, PartialEq)]
pub enum BoardRef {
    Id(i64),
    Name(String),
}

impl std::fmt::Display for BoardRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BoardRef::Id(id) => write!(f, "{id}"),
            BoardRef::Name(name) => write!(f, "{name:?}"),
        }
    }
}

impl<'de> serde::Deserialize<'de> for BoardRef {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        match Value::deserialize(deserializer)? {
            Value::Number(n) if n.is_i64() => Ok(BoardRef::Id(n.as_i64().expect("an i64"))),
            Value::String(name) => Ok(BoardRef::Name(name)),
            other => Err(serde::de::Error::custom(format!(
                "must be a board id (integer) or name (string), not {other}"
            ))),
        }
    }
}

impl schemars::JsonSchema for BoardRef {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "BoardRef".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "A board: its id, or its name.",
            "anyOf": [{"type": "integer"}, {"type": "string"}]
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::errors::INVALID_PARAMS;
    use serde::Deserialize;
    use serde_json::json;

    #[derive(Debug, Deserialize, PartialEq)]
    struct Poll {
        session: String,
        timeout: Seconds,
        ack: Option<String>,
    }

    #[test]
    fn positional_and_named_params_read_the_same() {
        let by_position = json!(["s1", 5]);
        let by_name = json!({"timeout": 5, "session": "s1"});
        let with_null = json!({"timeout": 5, "session": "s1", "ack": null});
        for params in [&by_position, &by_name, &with_null] {
            let p: Poll = read_params(Some(params)).unwrap();
            assert_eq!(
                p,
                Poll {
                    session: "s1".into(),
                    timeout: Seconds(5.0),
                    ack: None
                }
            );
        }
        assert_eq!(param_names::<Poll>(), ["session", "timeout", "ack"]);
    }

    #[test]
    fn bad_params_say_which_and_why() {
        for (params, says) in [
            (
                json!(["s1", -1]),
                "`timeout`: must be a non-negative number of seconds",
            ),
            (
                json!(["s1", "soon"]),
                "`timeout`: invalid type: string \"soon\"",
            ),
            (json!(["s1"]), "missing param `timeout`"),
            (json!(["s1", null]), "missing param `timeout`"),
            (
                json!(["s1", 1, "", 2]),
                "expected at most 3 params (session, timeout, ack), got 4",
            ),
            (
                json!({"session": "s1", "timout": 1}),
                "unknown param \"timout\"",
            ),
            (json!("s1"), "params must be an array or an object"),
        ] {
            let error = read_params::<Poll>(Some(&params)).unwrap_err();
            assert_eq!(error.code, INVALID_PARAMS, "{params}: {error:?}");
            assert!(error.message.contains(says), "{params}: {}", error.message);
        }
    }
}
