//! `session.create`: a new session, stored in the database.

use crate::db;
use crate::errors::{from_db, RpcError};
use crate::params::NoParams;
use crate::rpc::jsonrpc::Reply;
use crate::rpc::method::{method, Method};
use crate::rpc::session::EXAMPLE_SESSION;
use crate::sessions::ids::new_session_id;
use crate::sessions::session::Session;
use crate::sessions::store;
use crate::state::App;
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{json, Value};

pub const METHOD: Method = method!(
    "session.create", "A new session (any gateway serves it from then on).",
    NoParams => SessionId, create,
    errors: [TOO_MANY, RETRY, UNAVAILABLE],
    example: example,
    limit: SessionsMade,
);

/// The session's id: a secret (32 hex digits) that names it to every gateway.
#[derive(Serialize, JsonSchema)]
#[serde(transparent)]
pub struct SessionId(String);

/// A new session, stored in the database (any gateway can serve it from then on).
pub async fn create(app: &App, _: NoParams) -> Result<Reply, RpcError> {
    app.sessions.check_room()?;
    let id = new_session_id();
    let client = db::checkout(&app.pool).await?;
    let public_id = store::create(&client, &id, app.gateway_id)
        .await
        .map_err(|e| from_db(&e))?;
    // Nobody else has it: this copy's positions hold for legacy polls.
    let session = app
        .sessions
        .insert(Session::new(id.into(), public_id, 0, None, true))?;
    Reply::serialized(SessionId(session.id.to_string()))
}

pub fn example() -> (Value, Value) {
    (json!({}), json!(EXAMPLE_SESSION))
}
