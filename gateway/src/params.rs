//! Method parameters, by position (as Qik clients send them) or by name.

use crate::db::BoardRef;
use crate::errors::RpcError;
use serde_json::{Map, Value};

pub struct Params<'a> {
    names: &'static [&'static str],
    by_position: &'a [Value],
    by_name: Option<&'a Map<String, Value>>,
}

impl<'a> Params<'a> {
    /// Checks the params' shape against the method's parameter names.
    pub fn new(
        params: Option<&'a Value>,
        names: &'static [&'static str],
    ) -> Result<Self, RpcError> {
        let mut out = Params {
            names,
            by_position: &[],
            by_name: None,
        };
        match params {
            None | Some(Value::Null) => {}
            Some(Value::Array(values)) => {
                if values.len() > names.len() {
                    return Err(RpcError::invalid_params(format!(
                        "expected at most {} params ({}), got {}",
                        names.len(),
                        names.join(", "),
                        values.len()
                    )));
                }
                out.by_position = values;
            }
            Some(Value::Object(map)) => return Self::new_from_map(map, names),
            Some(_) => {
                return Err(RpcError::invalid_params(
                    "params must be an array or an object",
                ))
            }
        }
        Ok(out)
    }

    /// Named params inside another param (a view's params, say).
    pub fn new_from_map(
        map: &'a Map<String, Value>,
        names: &'static [&'static str],
    ) -> Result<Self, RpcError> {
        if let Some(unknown) = map.keys().find(|k| !names.contains(&k.as_str())) {
            return Err(RpcError::invalid_params(format!(
                "unknown param {unknown:?} (expected: {})",
                if names.is_empty() {
                    "none".to_string()
                } else {
                    names.join(", ")
                }
            )));
        }
        Ok(Params {
            names,
            by_position: &[],
            by_name: Some(map),
        })
    }

    fn raw(&self, name: &str) -> Option<&'a Value> {
        let value = match self.by_name {
            Some(map) => map.get(name),
            None => {
                let i = self
                    .names
                    .iter()
                    .position(|n| *n == name)
                    .expect("a declared param");
                self.by_position.get(i)
            }
        };
        value.filter(|v| !v.is_null())
    }

    pub fn optional<T: FromParam>(&self, name: &str) -> Result<Option<T>, RpcError> {
        self.raw(name).map(|v| T::from_param(name, v)).transpose()
    }

    pub fn required<T: FromParam>(&self, name: &str) -> Result<T, RpcError> {
        self.optional(name)?
            .ok_or_else(|| RpcError::invalid_params(format!("missing param `{name}`")))
    }
}

pub trait FromParam: Sized {
    fn from_param(name: &str, value: &Value) -> Result<Self, RpcError>;
}

fn wrong(name: &str, expected: &str, value: &Value) -> RpcError {
    RpcError::invalid_params(format!("`{name}` must be {expected}, not {value}"))
}

impl FromParam for String {
    fn from_param(name: &str, value: &Value) -> Result<Self, RpcError> {
        value
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| wrong(name, "a string", value))
    }
}

impl FromParam for i32 {
    fn from_param(name: &str, value: &Value) -> Result<Self, RpcError> {
        value
            .as_i64()
            .and_then(|v| i32::try_from(v).ok())
            .ok_or_else(|| wrong(name, "an integer (32-bit)", value))
    }
}

impl FromParam for i64 {
    fn from_param(name: &str, value: &Value) -> Result<Self, RpcError> {
        value
            .as_i64()
            .ok_or_else(|| wrong(name, "an integer (64-bit)", value))
    }
}

impl FromParam for bool {
    fn from_param(name: &str, value: &Value) -> Result<Self, RpcError> {
        value
            .as_bool()
            .ok_or_else(|| wrong(name, "true or false", value))
    }
}

/// A non-negative number of seconds.
pub struct Seconds(pub f64);

impl FromParam for Seconds {
    fn from_param(name: &str, value: &Value) -> Result<Self, RpcError> {
        match value.as_f64() {
            Some(s) if s >= 0.0 && s.is_finite() => Ok(Seconds(s)),
            _ => Err(wrong(name, "a non-negative number of seconds", value)),
        }
    }
}

impl FromParam for BoardRef {
    fn from_param(name: &str, value: &Value) -> Result<Self, RpcError> {
        match value {
            Value::Number(n) => n.as_i64().map(BoardRef::Id),
            Value::String(s) => Some(BoardRef::Name(s.clone())),
            _ => None,
        }
        .ok_or_else(|| wrong(name, "a board id (integer) or name (string)", value))
    }
}

impl FromParam for Map<String, Value> {
    fn from_param(name: &str, value: &Value) -> Result<Self, RpcError> {
        value
            .as_object()
            .cloned()
            .ok_or_else(|| wrong(name, "an object", value))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const NAMES: &[&str] = &["session", "timeout"];

    #[test]
    fn positional_and_named_params_read_the_same() {
        let by_position = json!(["s1", 5]);
        let by_name = json!({"timeout": 5, "session": "s1"});
        for params in [&by_position, &by_name] {
            let p = Params::new(Some(params), NAMES).unwrap();
            assert_eq!(p.required::<String>("session").unwrap(), "s1");
            assert_eq!(p.required::<Seconds>("timeout").unwrap().0, 5.0);
        }
    }

    #[test]
    fn bad_params_are_invalid_params() {
        let code = |params: Value, name: &str| {
            let p = Params::new(Some(&params), NAMES)?;
            p.required::<Seconds>(name).map(|_| ())
        };
        for (params, name) in [
            (json!(["s1", -1]), "timeout"),
            (json!(["s1", "soon"]), "timeout"),
            (json!(["s1"]), "timeout"),
            (json!(["s1", 1, 2]), "timeout"),
            (json!({"session": "s1", "timout": 1}), "timeout"),
            (json!("s1"), "timeout"),
        ] {
            let error = code(params.clone(), name).unwrap_err();
            assert_eq!(
                error.code,
                crate::errors::INVALID_PARAMS,
                "{params}: {error:?}"
            );
        }
    }
}
