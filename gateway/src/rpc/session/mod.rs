//! The `session.*` methods, one file each: its params, its answer's schema, what it does,
//! an example and its entry in the method table (`rpc::table`): `create.rs`,
//! `authorize.rs`, `play_as_guest.rs`, `subscribe.rs` (and a list view's own subscribe method), `get_events.rs`,
//! `set_presence.rs`, `unsubscribe.rs`, `destroy.rs`. What several share is here.

use crate::errors::RpcError;
use crate::sessions::session::Session;
use crate::state::App;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub mod authorize;
pub mod create;
pub mod destroy;
pub mod get_events;
pub mod play_as_guest;
pub mod set_presence;
pub mod subscribe;
pub mod unsubscribe;

/// A session, named by its id (from `session.create`; a secret).
#[derive(Deserialize, JsonSchema)]
pub struct SessionParams {
    pub session: String,
}

/// Always `true`.
#[derive(Serialize, JsonSchema)]
#[serde(transparent)]
pub struct Done(bool);

/// Binds `user` to the session (`id`), in its row (on `client`, which it releases) and in
/// this gateway's copy.
async fn sign_in(
    app: &App,
    session: &Session,
    id: &str,
    client: crate::db::Checked,
    user: crate::sessions::session::User,
) -> Result<(), RpcError> {
    let version = crate::sessions::store::set_user(&client, id, Some(user.id), app.gateway_id)
        .await
        .map_err(|e| crate::errors::from_db(&e))?;
    drop(client);
    changed_here(app, session, version)?;
    session.set_user(user);
    Ok(())
}

/// A change of the stored session made here gave it `version` (None: it is gone). When
/// another gateway changed it too, this copy may lack that change: it is read again next
/// time. (A change made to a copy that is forgotten right after is harmless.)
fn changed_here(app: &App, session: &Session, version: Option<i64>) -> Result<(), RpcError> {
    let Some(version) = version else {
        app.sessions.forget(session.public_id);
        return Err(RpcError::unknown_session());
    };
    if !session.advance_version(version) {
        app.sessions.forget(session.public_id);
    }
    Ok(())
}

// The examples: named params that work against a gateway whose database has a board
// named "demo" and a user whose token is "demo-token" (the OpenRPC test makes both). A
// session id stands for one that session.create answered, a key for one that
// session.subscribe answered: the test puts the real ones in their place.

const EXAMPLE_SESSION: &str = "4f0c2d8e9b1a47c6a3e5d7f9b2c4e6a8";
