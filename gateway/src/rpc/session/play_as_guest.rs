//! `session.play_as_guest`: a visitor plays without an account, on a board that takes
//! guests (`--guest-boards`): a guest user is made (`place.create_guest`, a generated name)
//! and the session signed in as them; the answer's token signs them in again later (the
//! page keeps it in the browser). Bounded per address and hour (`--guests-per-address-per-hour`).

use crate::db;
use crate::errors::{from_db, RpcError, NOT_AUTHORIZED};
use crate::params::BoardRef;
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
    "session.play_as_guest",
    "Signs the session in as a new guest, on a board that takes guests: answers the guest's token.",
    GuestParams => Guest, play_as_guest,
    errors: [UNKNOWN_SESSION, NOT_AUTHORIZED, UNKNOWN_BOARD, RETRY, UNAVAILABLE],
    example: example,
    limit: GuestsMade,
);

#[derive(Deserialize, JsonSchema)]
pub struct GuestParams {
    pub session: String,
    /// The board the visitor wants to play on (it must take guests).
    pub board: BoardRef,
}

/// The guest, and the token that signs them in again (`session.authorize`): shown once.
#[derive(Serialize, JsonSchema)]
pub struct Guest {
    pub user_id: i64,
    pub name: String,
    pub token: String,
}

pub async fn play_as_guest(app: &App, p: GuestParams) -> Result<Reply, RpcError> {
    let session = session_access::session(app, &p.session).await?;
    let mirrored = app.boards.get(&p.board).await?;
    let settings = mirrored.board.settings();
    if !app.config.takes_guests(settings.id, &settings.name) {
        return Err(RpcError::new(
            NOT_AUTHORIZED,
            format!(
                "board {} takes no guests: sign in with a token",
                settings.name
            ),
        ));
    }
    let client = db::checkout(&app.pool).await?;
    let (user_id, name, token) = db::create_guest(&client).await.map_err(|e| from_db(&e))?;
    let user = User {
        id: user_id,
        name: name.clone(),
        guest: true,
    };
    sign_in(app, &session, &p.session, client, user).await?;
    Reply::serialized(Guest {
        user_id,
        name,
        token,
    })
}

pub fn example() -> (Value, Value) {
    (
        json!({"session": EXAMPLE_SESSION, "board": "demo"}),
        json!({"user_id": 7, "name": "guest-3f9a1c",
               "token": "9c1e…(64 hex digits)"}),
    )
}
