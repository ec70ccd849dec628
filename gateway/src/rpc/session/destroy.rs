//! `session.destroy`: ends the session on every gateway.

use crate::db;
use crate::errors::{from_db, RpcError};
use crate::rpc::jsonrpc::Reply;
use crate::rpc::method::{method, Method};
use crate::rpc::session::{Done, SessionParams, EXAMPLE_SESSION};
use crate::sessions::store;
use crate::state::App;
use serde_json::{json, Value};

pub const METHOD: Method = method!(
    "session.destroy", "Ends the session on every gateway.",
    SessionParams => Done, destroy,
    errors: [UNKNOWN_SESSION, RETRY, UNAVAILABLE],
    example: example,
);

pub async fn destroy(app: &App, p: SessionParams) -> Result<Reply, RpcError> {
    crate::names::check_session_id(&p.session)?;
    let client = db::checkout(&app.pool).await?;
    let existed = store::destroy(&client, &p.session)
        .await
        .map_err(|e| from_db(&e))?;
    if let Some(session) = app.sessions.get(&p.session) {
        app.sessions.forget(session.public_id);
    }
    if !existed {
        return Err(RpcError::unknown_session());
    }
    Reply::serialized(Done(true))
}

pub fn example() -> (Value, Value) {
    (json!({"session": EXAMPLE_SESSION}), json!(true))
}
