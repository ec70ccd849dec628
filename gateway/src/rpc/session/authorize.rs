//! `session.authorize`: binds the session to the user whose token this is: a pgplace token
//! (`place.create_user`), or a JWT of the site that embeds the board (`jwt`).

use crate::db;
use crate::errors::{from_db, RpcError, NOT_AUTHORIZED};
use crate::jwt;
use crate::rpc::jsonrpc::Reply;
use crate::rpc::method::{method, Method};
use crate::rpc::session::{sign_in, EXAMPLE_SESSION};
use crate::rpc::session_access;
use crate::sessions::session::User;
use crate::state::App;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

pub const METHOD: Method = method!(
    "session.authorize",
    "Binds the session to the user whose token this is (a pgplace token, or the embedding site's JWT).",
    AuthorizeParams => Authorized, authorize,
    errors: [UNKNOWN_SESSION, NOT_AUTHORIZED, RETRY, UNAVAILABLE],
    example: example,
);

#[derive(Deserialize, JsonSchema)]
pub struct AuthorizeParams {
    pub session: String,
    /// A user's token (`place.create_user`), or a JWT the embedding site's identity
    /// provider signed (`--jwt-issuer`: its `sub` is the user, made on first sign-in).
    pub token: String,
}

#[derive(Serialize, JsonSchema)]
pub struct Authorized {
    pub user_id: i64,
    pub name: String,
    /// A guest (`session.play_as_guest`): places only on the boards that take guests.
    pub guest: bool,
}

pub async fn authorize(app: &App, p: AuthorizeParams) -> Result<Reply, RpcError> {
    let session = session_access::session(app, &p.session).await?;
    // Checked before a connection is taken: a bad JWT costs no round trip.
    let signed = match (&app.site_sign_in, jwt::looks_like_jwt(&p.token)) {
        (Some(sign_in), true) => Some(sign_in.check(&p.token)?),
        (None, true) => {
            return Err(RpcError::new(
                NOT_AUTHORIZED,
                "the token is not valid (this gateway takes no sign-in JWTs: see --jwt-issuer)",
            ))
        }
        (_, false) => None,
    };
    let client = db::checkout(&app.pool).await?;
    let (user_id, name, guest) = match signed {
        Some(signed) => db::user_for_subject(
            &client,
            &signed.issuer,
            &signed.subject,
            signed.name.as_deref(),
        )
        .await
        .map(|(id, name)| (id, name, false))
        .map_err(|e| from_db(&e))?,
        None => db::user_for_token(&client, &p.token)
            .await
            .map_err(|e| from_db(&e))?
            .ok_or_else(|| RpcError::new(NOT_AUTHORIZED, "the token is not valid"))?,
    };
    let user = User {
        id: user_id,
        name: name.clone(),
        guest,
    };
    sign_in(app, &session, &p.session, client, user).await?;
    Reply::serialized(Authorized {
        user_id,
        name,
        guest,
    })
}

pub fn example() -> (Value, Value) {
    (
        json!({"session": EXAMPLE_SESSION, "token": "demo-token"}),
        json!({"user_id": 1, "name": "demo", "guest": false}),
    )
}
