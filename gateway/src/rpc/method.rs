//! What a JSON-RPC method is: its entry in the method table, declared in the method's own
//! file with `method!` (its params struct, read by position or by name; its result's
//! schema; its handler; the errors it may answer; an example; the abuse limit it counts
//! against and whether it is a long poll). The table itself is `rpc::table`.

use crate::errors::{RpcError, STANDARD_CODES, TOO_FAST};
use crate::rpc::jsonrpc::Reply;
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
    /// Which abuse limit a call counts against (`limits`).
    pub limit: Limit,
    /// A long poll: it moves the session's positions, so in a batch it is answered last,
    /// and as a notification (no id, no answer) it is not run at all.
    pub long_poll: bool,
}

impl Method {
    /// Every code it may answer besides the standard ones (`rpc.discover`'s list): those
    /// its entry names, and −32011 where its policy brings it.
    pub fn declared_errors(&self) -> Vec<i64> {
        let mut codes = self.errors.to_vec();
        if self.too_fast_by_policy() {
            codes.push(TOO_FAST);
        }
        codes.sort_unstable_by(|a, b| b.cmp(a));
        codes.dedup();
        codes
    }

    /// Whether `code` is one it declares (or a standard one every method may answer). On
    /// every error answered: no list is made.
    pub fn may_answer(&self, code: i64) -> bool {
        STANDARD_CODES.contains(&code)
            || self.errors.contains(&code)
            || (code == TOO_FAST && self.too_fast_by_policy())
    }

    /// −32011 comes with its abuse limit, and with the per-address database budget that
    /// every method but `rpc.*` counts against.
    fn too_fast_by_policy(&self) -> bool {
        self.limit != Limit::None || !self.name.starts_with("rpc.")
    }
}

/// The abuse limit a method's calls count against, before the call runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    None,
    /// Sessions made per address (`--create-rate-per-address`); the session made is
    /// counted for its address.
    SessionsMade,
    /// Placements per session and per address (`--place-rate-per-*`).
    Placements,
    /// Guests made per address (`--guests-per-address-per-hour`).
    GuestsMade,
}

/// One table entry, declared in the method's own file (`rpc::session::*`, `rpc::board::*`):
/// `$handler(app, params)` is an async fn taking the method's params struct `$params`;
/// `$result` is a type whose schema describes the answer.
macro_rules! method {
    (
        $name:literal, $summary:literal,
        $params:ty => $result:ty, $handler:path,
        errors: [$($error:ident),* $(,)?],
        example: $example:expr
        $(, limit: $limit:ident)?
        $(, long_poll: $long_poll:literal)?
        $(,)?
    ) => {{
        fn call<'a>(
            app: &'a $crate::state::App,
            params: Option<&'a serde_json::Value>,
        ) -> $crate::rpc::method::Answer<'a> {
            Box::pin(async move {
                $handler(app, $crate::params::read_params::<$params>(params)?).await
            })
        }
        fn check(params: Option<&serde_json::Value>) -> Result<(), $crate::errors::RpcError> {
            $crate::params::read_params::<$params>(params).map(drop)
        }
        $crate::rpc::method::Method {
            name: $name,
            summary: $summary,
            param_names: $crate::params::param_names::<$params>,
            params: <$params as schemars::JsonSchema>::json_schema,
            result: <$result as schemars::JsonSchema>::json_schema,
            errors: &[$($crate::errors::$error),*],
            check,
            call,
            example: $example,
            limit: {
                #[allow(unused_variables)]
                let limit = $crate::rpc::method::Limit::None;
                $(let limit = $crate::rpc::method::Limit::$limit;)?
                limit
            },
            long_poll: {
                #[allow(unused_variables)]
                let long_poll = false;
                $(let long_poll = $long_poll;)?
                long_poll
            },
        }
    }};
}
pub(crate) use method;
