//! `session.unsubscribe`: ends one subscription of the session.

use crate::db;
use crate::errors::{from_db, RpcError};
use crate::rpc::jsonrpc::Reply;
use crate::rpc::method::{method, Method};
use crate::rpc::session::{Done, EXAMPLE_SESSION};
use crate::rpc::session_access;
use crate::sessions::store;
use crate::state::App;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{json, Value};

pub const METHOD: Method = method!(
    "session.unsubscribe", "Ends one subscription of the session.",
    UnsubscribeParams => Done, unsubscribe,
    errors: [UNKNOWN_SESSION, UNKNOWN_VIEW, RETRY, UNAVAILABLE],
    example: example,
);

#[derive(Deserialize, JsonSchema)]
pub struct UnsubscribeParams {
    pub session: String,
    /// The subscription's key (as `session.subscribe` answered it).
    pub key: String,
}

pub async fn unsubscribe(app: &App, p: UnsubscribeParams) -> Result<Reply, RpcError> {
    let session = session_access::session(app, &p.session).await?;
    session.require_subscription(&p.key)?;
    let client = db::checkout(&app.pool).await?;
    let version = store::unsubscribe(&client, &p.session, &p.key, app.gateway_id)
        .await
        .map_err(|e| from_db(&e))?;
    drop(client);
    session.unsubscribe(&p.key)?;
    // Changed elsewhere too, or gone meanwhile: read it again next time.
    if !version.is_some_and(|v| session.advance_version(v)) {
        app.sessions.forget(session.public_id);
    }
    Reply::serialized(Done(true))
}

pub fn example() -> (Value, Value) {
    (
        json!({"session": EXAMPLE_SESSION, "key": "board/1/recent/2"}),
        json!(true),
    )
}
