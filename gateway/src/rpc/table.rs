//! The one table of JSON-RPC methods: each declared once, with its params struct (read by
//! position or by name), its result's schema, its handler, the errors it may answer and
//! an example. Dispatch, params checking, the metric label and `rpc.discover` all come
//! from here; so do the names a legacy client may use (`--method-prefix`, `--view-method`).

use crate::config::Config;
use crate::errors::RpcError;
use crate::params;
use crate::rpc::jsonrpc::Reply;
use crate::rpc::{board_methods, discover, session_methods};
use crate::state::App;
use schemars::{Schema, SchemaGenerator};
use serde_json::Value;
use std::future::Future;
use std::pin::Pin;

pub type Answer<'a> = Pin<Box<dyn Future<Output = Result<Reply, RpcError>> + Send + 'a>>;

pub struct Method {
    pub name: &'static str,
    pub summary: &'static str,
    /// Its params struct's fields, in position order.
    pub param_names: fn() -> &'static [&'static str],
    /// Its params struct's schema (an object: one property per param).
    pub params: fn(&mut SchemaGenerator) -> Schema,
    pub result: fn(&mut SchemaGenerator) -> Schema,
    /// The codes it may answer besides the standard ones every method may.
    pub errors: &'static [i64],
    /// Reads the params as the handler will (nothing else: no database).
    pub check: fn(Option<&Value>) -> Result<(), RpcError>,
    pub call: for<'a> fn(&'a App, Option<&'a Value>) -> Answer<'a>,
    /// Named params that work against a running gateway (see `example_params`), and what
    /// they answer.
    pub example: fn() -> (Value, Value),
}

/// One table entry: `$handler(app, params)` is an async fn taking the method's params
/// struct `$params`; `$result` is a type whose schema describes the answer.
macro_rules! method {
    (
        $name:literal, $summary:literal,
        $params:ty => $result:ty, $handler:path,
        errors: [$($error:ident),* $(,)?],
        example: $example:expr $(,)?
    ) => {{
        fn call<'a>(app: &'a App, params: Option<&'a Value>) -> Answer<'a> {
            Box::pin(async move {
                $handler(app, crate::params::read_params::<$params>(params)?).await
            })
        }
        fn check(params: Option<&Value>) -> Result<(), RpcError> {
            crate::params::read_params::<$params>(params).map(drop)
        }
        Method {
            name: $name,
            summary: $summary,
            param_names: crate::params::param_names::<$params>,
            params: <$params as schemars::JsonSchema>::json_schema,
            result: <$result as schemars::JsonSchema>::json_schema,
            errors: &[$(crate::errors::$error),*],
            check,
            call,
            example: $example,
        }
    }};
}

pub static METHODS: &[Method] = &[
    method!(
        "session.create", "A new session (any gateway serves it from then on).",
        params::NoParams => session_methods::SessionId, session_methods::create,
        errors: [TOO_MANY, RETRY, UNAVAILABLE],
        example: session_methods::create_example,
    ),
    method!(
        "session.authorize", "Binds the session to the user whose token this is.",
        session_methods::AuthorizeParams => session_methods::Authorized,
        session_methods::authorize,
        errors: [UNKNOWN_SESSION, NOT_AUTHORIZED, RETRY, UNAVAILABLE],
        example: session_methods::authorize_example,
    ),
    method!(
        "session.subscribe",
        "Subscribes to a view: answers [key, initial state]; its events come by get_events.",
        session_methods::SubscribeParams => session_methods::Subscribed,
        session_methods::subscribe,
        errors: [UNKNOWN_SESSION, UNKNOWN_VIEW, UNKNOWN_BOARD, NOT_AUTHORIZED, TOO_MANY, RETRY,
                 UNAVAILABLE],
        example: session_methods::subscribe_example,
    ),
    method!(
        "session.get_events",
        "The events of every subscription, at once or when some come (a long poll).",
        session_methods::GetEventsParams => session_methods::Events,
        session_methods::get_events,
        errors: [UNKNOWN_SESSION, RETRY, UNAVAILABLE],
        example: session_methods::get_events_example,
    ),
    method!(
        "session.set_presence",
        "Shows where this session points on a board to the views that asked for presence.",
        session_methods::SetPresenceParams => session_methods::PresenceSet,
        session_methods::set_presence,
        errors: [UNKNOWN_SESSION, UNKNOWN_BOARD, TOO_FAST, RETRY, UNAVAILABLE],
        example: session_methods::set_presence_example,
    ),
    method!(
        "session.unsubscribe", "Ends one subscription of the session.",
        session_methods::UnsubscribeParams => session_methods::Done, session_methods::unsubscribe,
        errors: [UNKNOWN_SESSION, UNKNOWN_VIEW, RETRY, UNAVAILABLE],
        example: session_methods::unsubscribe_example,
    ),
    method!(
        "session.destroy", "Ends the session on every gateway.",
        session_methods::SessionParams => session_methods::Done, session_methods::destroy,
        errors: [UNKNOWN_SESSION, RETRY, UNAVAILABLE],
        example: session_methods::destroy_example,
    ),
    method!(
        "board.list", "Every board: its settings and newest seq.",
        params::NoParams => board_methods::Boards, board_methods::list,
        errors: [RETRY, UNAVAILABLE],
        example: board_methods::list_example,
    ),
    method!(
        "board.get", "A board's state: settings, seq and packed tiles (base64).",
        board_methods::BoardParams => board_methods::BoardState, board_methods::get,
        errors: [UNKNOWN_BOARD, RETRY, UNAVAILABLE],
        example: board_methods::get_example,
    ),
    method!(
        "board.tile_history", "A tile's newest placements, newest first.",
        board_methods::TileHistoryParams => board_methods::TileHistory,
        board_methods::tile_history,
        errors: [UNKNOWN_BOARD, RETRY, UNAVAILABLE],
        example: board_methods::tile_history_example,
    ),
    method!(
        "board.place",
        "Places a tile as the session's user (once per cooldown): answers its seq.",
        board_methods::PlaceParams => board_methods::Placed, board_methods::place,
        errors: [UNKNOWN_SESSION, NOT_AUTHORIZED, COOLDOWN, UNKNOWN_BOARD, BOARD_NOT_OPEN,
                 FROZEN_TILE, TOO_MANY, RETRY, UNAVAILABLE],
        example: board_methods::place_example,
    ),
    method!(
        "rpc.discover", "This API as an OpenRPC document.",
        params::NoParams => discover::Document, discover::answer,
        errors: [],
        example: discover::example,
    ),
];

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
            let params = crate::params::read_params::<session_methods::ViewMethodParams>(params)?;
            Box::pin(session_methods::subscribe_view_method(app, &view, params)).await
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
}
