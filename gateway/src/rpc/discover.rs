//! `rpc.discover`: this gateway's API as an OpenRPC 1.2 document, made from the method
//! table (every method, its params and result schemas, its errors and an example), with
//! the names this gateway also answers (`--method-prefix`, `--view-method`).

use crate::config::Config;
use crate::errors::{meaning, RpcError, STANDARD_CODES};
use crate::rpc::jsonrpc::Reply;
use crate::rpc::method::Method;
use crate::rpc::session::subscribe::{Subscribed, ViewMethodParams};
use crate::state::App;
use schemars::generate::SchemaSettings;
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde_json::{json, Value};

/// An OpenRPC document.
pub struct Document;

impl JsonSchema for Document {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "OpenRpcDocument".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        schemars::json_schema!({
            "description": "An OpenRPC 1.2 document (https://spec.open-rpc.org).",
            "type": "object",
            "required": ["openrpc", "info", "methods"]
        })
    }
}

/// The document of `methods` (the gateway's table), made once.
pub fn answer(app: &App, methods: &[Method]) -> Result<Reply, RpcError> {
    let document = app.discovered.get_or_init(|| {
        document(&app.config, methods)
            .to_string()
            .into_bytes()
            .into()
    });
    Ok(Reply::Raw(document.clone().into()))
}

pub fn example() -> (Value, Value) {
    (
        json!({}),
        json!({"openrpc": "1.2.6", "info": {"title": "pgplace gateway", "version": env!("CARGO_PKG_VERSION")},
               "methods": []}),
    )
}

/// The document of `methods` for a gateway configured so.
pub fn document(config: &Config, methods: &[Method]) -> Value {
    let mut generator = SchemaSettings::draft07()
        .with(|s| {
            s.definitions_path = "/components/schemas".into();
            s.meta_schema = None;
        })
        .into_generator();
    let prefix = config.method_prefix.clone().unwrap_or_default();
    let table = methods;
    let mut methods = Vec::new();
    for method in table {
        methods.push(describe(
            method,
            method.name,
            method.summary,
            &mut generator,
        ));
        if !prefix.is_empty() && !method.name.starts_with("rpc.") {
            let alias = format!("{prefix}{}", method.name);
            let summary = format!("{} (as {})", method.summary, method.name);
            methods.push(describe(method, &alias, &summary, &mut generator));
        }
    }
    let subscribe = table
        .iter()
        .find(|m| m.name == "session.subscribe")
        .expect("in the table");
    for (name, view) in config.view_methods() {
        let mut names = vec![name.to_string()];
        if !prefix.is_empty() {
            names.push(format!("{prefix}{name}"));
        }
        for name in names {
            methods.push(json!({
                "name": name,
                "summary": format!(
                    "session.subscribe(session, {view:?}, {{\"limit\": limit}}), answered as that"
                ),
                "paramStructure": "either",
                "params": params(
                    <ViewMethodParams as JsonSchema>::json_schema(&mut generator),
                    crate::params::param_names::<ViewMethodParams>(),
                ),
                "result": {
                    "name": "result",
                    "schema": <Subscribed as JsonSchema>::json_schema(&mut generator)
                },
                "errors": errors(subscribe.errors),
            }));
        }
    }
    let schemas = generator.take_definitions(true);
    let mut document = json!({
        "openrpc": "1.2.6",
        "info": {
            "title": "pgplace gateway",
            "description": "Long-polling JSON-RPC sessions over pgplace's boards and views. \
                            Params may come by position or by name.",
            "version": env!("CARGO_PKG_VERSION"),
        },
        "methods": methods,
        "components": {"schemas": schemas},
    });
    drop_number_formats(&mut document);
    document
}

/// schemars writes Rust's integer widths as `"format": "int64"` and the like, which JSON
/// Schema does not define (validators refuse them): the ranges they imply are not promised.
fn drop_number_formats(value: &mut Value) {
    match value {
        Value::Object(map) => {
            let numeric = map.get("format").and_then(Value::as_str).is_some_and(|f| {
                matches!(
                    f,
                    "int8"
                        | "int16"
                        | "int32"
                        | "int64"
                        | "uint"
                        | "uint8"
                        | "uint16"
                        | "uint32"
                        | "uint64"
                        | "float"
                        | "double"
                )
            });
            if numeric {
                map.remove("format");
            }
            map.values_mut().for_each(drop_number_formats);
        }
        Value::Array(items) => items.iter_mut().for_each(drop_number_formats),
        _ => {}
    }
}

fn describe(method: &Method, name: &str, summary: &str, generator: &mut SchemaGenerator) -> Value {
    let (example_params, example_result) = (method.example)();
    let names = (method.param_names)();
    let example_params: Vec<Value> = names
        .iter()
        .filter_map(|n| {
            let value = example_params.get(*n)?;
            Some(json!({"name": n, "value": value}))
        })
        .collect();
    json!({
        "name": name,
        "summary": summary,
        "paramStructure": "either",
        "params": params((method.params)(generator), names),
        "result": {"name": "result", "schema": (method.result)(generator)},
        "errors": errors(&method.declared_errors()),
        "examples": [{
            "name": format!("{} example", method.name),
            "params": example_params,
            "result": {"name": "result", "value": example_result},
        }],
    })
}

/// A params struct's schema as OpenRPC content descriptors, in position order.
fn params(schema: Schema, names: &[&str]) -> Vec<Value> {
    let schema = schema.to_value();
    let required: Vec<&str> = schema["required"]
        .as_array()
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    names
        .iter()
        .map(|name| {
            let mut param = schema["properties"][*name].clone();
            let description = param.as_object_mut().and_then(|p| p.remove("description"));
            let mut descriptor = json!({
                "name": name,
                "required": required.contains(name),
                "schema": param,
            });
            if let Some(description) = description {
                descriptor["description"] = description;
            }
            descriptor
        })
        .collect()
}

/// The errors a method may answer: its own and the standard ones.
fn errors(own: &[i64]) -> Vec<Value> {
    STANDARD_CODES
        .iter()
        .chain(own)
        .map(|code| json!({"code": code, "message": meaning(*code)}))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rpc::table::METHODS;

    #[test]
    fn every_method_and_every_name_a_client_may_use_is_described() {
        let mut config = Config::for_database("postgresql://nowhere/x");
        config.method_prefix = Some("qik.".into());
        config.view_methods = "stream.subscribe_public_live=public_live".into();
        let document = document(&config, METHODS);
        assert_eq!(document["openrpc"], "1.2.6");
        let described: Vec<&str> = document["methods"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["name"].as_str().unwrap())
            .collect();
        for method in METHODS {
            assert!(described.contains(&method.name), "{}", method.name);
            let params: Vec<&str> = document["methods"]
                .as_array()
                .unwrap()
                .iter()
                .find(|m| m["name"] == method.name)
                .unwrap()["params"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| p["name"].as_str().unwrap())
                .collect();
            assert_eq!(params, (method.param_names)(), "{}", method.name);
        }
        for name in [
            "qik.session.create",
            "qik.session.get_events",
            "stream.subscribe_public_live",
            "qik.stream.subscribe_public_live",
        ] {
            assert!(described.contains(&name), "{name} in {described:?}");
        }
        assert!(!described.contains(&"qik.rpc.discover"));
        // Every reference points into the document's own components.
        let text = document.to_string();
        let schemas = document["components"]["schemas"].as_object().unwrap();
        for reference in text.split("\"$ref\":\"").skip(1) {
            let target = reference.split('"').next().unwrap();
            let name = target
                .strip_prefix("#/components/schemas/")
                .unwrap_or_else(|| panic!("{target} is not a component"));
            assert!(schemas.contains_key(name), "{name} is not in components");
        }
    }
}
