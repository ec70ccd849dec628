//! The one table of JSON-RPC methods: each declared once, with its params struct (read by
//! position or by name), its result's schema, its handler, the errors it may answer and
//! an example. Dispatch, params checking, the metric label and `rpc.discover` all come
//! from here; so do the names a legacy client may use (`--method-prefix`, `--view-method`).

use crate::config::Config;
use crate::errors::RpcError;
use crate::params::NoParams;
use crate::rpc::jsonrpc::Reply;
use crate::rpc::method::method;
pub use crate::rpc::method::{Limit, Method};
use crate::rpc::{board, discover, session};
use crate::state::App;
use serde_json::Value;

pub static METHODS: &[Method] = &[
    session::create::METHOD,
    session::authorize::METHOD,
    session::play_as_guest::METHOD,
    session::subscribe::METHOD,
    session::get_events::METHOD,
    session::set_presence::METHOD,
    session::unsubscribe::METHOD,
    session::destroy::METHOD,
    board::list::METHOD,
    board::get::METHOD,
    board::tile_history::METHOD,
    board::place::METHOD,
    DISCOVER,
];

/// `rpc.discover` describes this table, which it is given (`discover` knows no table).
const DISCOVER: Method = method!(
    "rpc.discover", "This API as an OpenRPC document.",
    NoParams => discover::Document, discover_answer,
    errors: [],
    example: discover::example,
);

async fn discover_answer(app: &App, _: NoParams) -> Result<Reply, RpcError> {
    discover::answer(app, METHODS)
}

/// What a request's method name means here.
pub enum Resolved {
    Method(&'static Method),
    /// A list view's own subscribe method (`--view-method`): `session.subscribe` to it.
    ViewMethod(String),
}

impl Resolved {
    /// The method that answers it (its name is the metric label, its limits apply).
    pub fn method(&self) -> &'static Method {
        match self {
            Resolved::Method(method) => method,
            Resolved::ViewMethod(_) => find("session.subscribe").expect("in the table"),
        }
    }
}

pub fn find(name: &str) -> Option<&'static Method> {
    METHODS.iter().find(|m| m.name == name)
}

/// `name` as this gateway answers it: a method of the table, or under `--method-prefix`,
/// or a view's method.
pub fn resolve(config: &Config, name: &str) -> Option<Resolved> {
    let unprefixed = match config.method_prefix.as_deref() {
        Some(prefix) if !prefix.is_empty() => {
            name.strip_prefix(prefix).filter(|n| !n.starts_with("rpc."))
        }
        _ => None,
    };
    for candidate in [Some(name), unprefixed].into_iter().flatten() {
        if let Some(method) = find(candidate) {
            return Some(Resolved::Method(method));
        }
        if let Some(view) = config.view_method(candidate) {
            return Some(Resolved::ViewMethod(view.to_string()));
        }
    }
    None
}

/// Answers the request `name(params)`.
pub async fn call(app: &App, name: &str, params: Option<&Value>) -> Result<Reply, RpcError> {
    match resolve(&app.config, name) {
        Some(Resolved::Method(method)) => (method.call)(app, params).await,
        Some(Resolved::ViewMethod(view)) => {
            let params =
                crate::params::read_params::<session::subscribe::ViewMethodParams>(params)?;
            Box::pin(session::subscribe::subscribe_view_method(
                app, &view, params,
            ))
            .await
        }
        None => Err(RpcError::method_not_found(name)),
    }
}

/// Reads `params` as the method `name` would, without a database (fuzzing, tests).
pub fn check(name: &str, params: Option<&Value>) -> Result<(), RpcError> {
    let method = find(name).ok_or_else(|| RpcError::method_not_found(name))?;
    (method.check)(params)
}

/// `--view-methods` well formed, and naming no method of the table (under the prefix too).
pub fn check_view_methods(config: &Config) -> Result<(), String> {
    let prefix = config.method_prefix.as_deref().unwrap_or("");
    for (method, _) in config.view_method_list()? {
        let unprefixed = method.strip_prefix(prefix).filter(|_| !prefix.is_empty());
        if find(method).is_some() || unprefixed.is_some_and(|m| find(m).is_some()) {
            return Err(format!(
                "--view-methods: {method:?} is a method of the gateway already"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn config(prefix: Option<&str>, view_methods: &str) -> Config {
        let mut config = Config::for_database("postgresql://nowhere/x");
        config.method_prefix = prefix.map(str::to_string);
        config.view_methods = view_methods.to_string();
        config
    }

    fn resolved(config: &Config, name: &str) -> Option<String> {
        resolve(config, name).map(|r| match r {
            Resolved::Method(m) => m.name.to_string(),
            Resolved::ViewMethod(view) => format!("view {view}"),
        })
    }

    #[test]
    fn each_method_is_declared_once_and_its_example_reads() {
        let mut names = HashSet::new();
        for method in METHODS {
            assert!(names.insert(method.name), "{} twice", method.name);
            let (params, _) = (method.example)();
            (method.check)(Some(&params)).unwrap_or_else(|e| panic!("{}: {e:?}", method.name));
            // The same params by position read the same.
            let by_position: Vec<Value> = (method.param_names)()
                .iter()
                .map(|n| params.get(*n).cloned().unwrap_or(Value::Null))
                .collect();
            (method.check)(Some(&Value::Array(by_position)))
                .unwrap_or_else(|e| panic!("{} by position: {e:?}", method.name));
        }
    }

    #[test]
    fn names_resolve_with_a_prefix_and_a_view_method() {
        let plain = config(None, "");
        assert_eq!(
            resolved(&plain, "session.create").as_deref(),
            Some("session.create")
        );
        assert_eq!(resolved(&plain, "qik.session.create"), None);
        let qik = config(Some("qik."), "stream.subscribe_public_live=public_live");
        assert_eq!(
            resolved(&qik, "qik.session.get_events").as_deref(),
            Some("session.get_events")
        );
        assert_eq!(
            resolved(&qik, "session.get_events").as_deref(),
            Some("session.get_events")
        );
        assert_eq!(
            resolved(&qik, "qik.stream.subscribe_public_live").as_deref(),
            Some("view public_live")
        );
        assert_eq!(
            resolved(&qik, "stream.subscribe_public_live").as_deref(),
            Some("view public_live")
        );
        // The API's own description keeps its name.
        assert_eq!(resolved(&qik, "qik.rpc.discover"), None);
        assert_eq!(resolved(&qik, "qik.nothing"), None);
    }

    #[test]
    fn a_view_method_may_not_shadow_a_method_or_be_malformed() {
        assert!(check_view_methods(&config(Some("qik."), "a.b=top")).is_ok());
        assert!(check_view_methods(&config(None, "session.create=top")).is_err());
        assert!(check_view_methods(&config(Some("qik."), "qik.board.get=top")).is_err());
        assert!(check_view_methods(&config(None, "nameless")).is_err());
        assert!(check_view_methods(&config(None, "a b=top")).is_err());
    }

    /// pgplace's codes by the names handlers use for them.
    fn named_codes() -> Vec<(&'static str, i64)> {
        use crate::errors::*;
        vec![
            ("UNKNOWN_SESSION", UNKNOWN_SESSION),
            ("NOT_AUTHORIZED", NOT_AUTHORIZED),
            ("COOLDOWN", COOLDOWN),
            ("UNKNOWN_VIEW", UNKNOWN_VIEW),
            ("UNKNOWN_BOARD", UNKNOWN_BOARD),
            ("BOARD_NOT_OPEN", BOARD_NOT_OPEN),
            ("TOO_MANY", TOO_MANY),
            ("RETRY", RETRY),
            ("UNAVAILABLE", UNAVAILABLE),
            ("FROZEN_TILE", FROZEN_TILE),
            ("TOO_FAST", TOO_FAST),
        ]
    }

    #[test]
    fn every_code_a_method_file_names_is_declared_in_its_entry() {
        let named = named_codes();
        assert_eq!(
            named.len() + crate::errors::STANDARD_CODES.len() + 3,
            crate::errors::ALL_CODES.len()
        );
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/rpc");
        let mut seen = HashSet::new();
        for room in ["session", "board"] {
            for file in std::fs::read_dir(root.join(room)).unwrap() {
                let path = file.unwrap().path();
                let text = std::fs::read_to_string(&path).unwrap();
                // The method the file declares: `method!(\n    "name", ...`.
                let Some(name) = text
                    .split("method!(")
                    .nth(1)
                    .and_then(|rest| rest.split('"').nth(1))
                else {
                    continue;
                };
                let method = find(name).unwrap_or_else(|| panic!("{name} is in the table"));
                seen.insert(name.to_string());
                for (constant, code) in &named {
                    // Named in the file's code, not only in its `errors: [...]` list.
                    let body = text.split("method!(").next().unwrap().to_string()
                        + text.split("example:").nth(1).unwrap_or("");
                    let used = body.match_indices(constant).any(|(at, _)| {
                        let before = body[..at].chars().last().unwrap_or(' ');
                        let after = body[at + constant.len()..].chars().next().unwrap_or(' ');
                        let in_name = |c: char| c.is_alphanumeric() || c == '_';
                        !in_name(before) && !in_name(after)
                    });
                    assert!(
                        !used || method.may_answer(*code),
                        "{} answers {constant} ({code}) but its entry does not declare it",
                        path.display()
                    );
                }
            }
        }
        let methods: HashSet<String> = METHODS
            .iter()
            .filter(|m| !m.name.starts_with("rpc."))
            .map(|m| m.name.to_string())
            .collect();
        assert_eq!(seen, methods, "every method's file was read");
    }

    #[test]
    fn a_limited_method_declares_the_limit_s_code() {
        for method in METHODS {
            if method.limit != Limit::None {
                assert!(
                    method.may_answer(crate::errors::TOO_FAST),
                    "{}",
                    method.name
                );
            }
        }
        let place = find("board.place").unwrap();
        assert!(place.declared_errors().contains(&crate::errors::TOO_FAST));
        let discover = find("rpc.discover").unwrap();
        assert!(!discover.may_answer(crate::errors::TOO_FAST));
    }
}
