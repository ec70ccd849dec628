//! `session.set_presence`: where this session points on a board, shown to the views that
//! asked for presence.

use crate::errors::RpcError;
use crate::params::BoardRef;
use crate::rpc::jsonrpc::Reply;
use crate::rpc::method::{method, Method};
use crate::rpc::session::EXAMPLE_SESSION;
use crate::rpc::session_access;
use crate::rpc::tiles::check_inside;
use crate::state::App;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

pub const METHOD: Method = method!(
    "session.set_presence",
    "Shows where this session points on a board to the views that asked for presence.",
    SetPresenceParams => PresenceSet, set_presence,
    errors: [UNKNOWN_SESSION, UNKNOWN_BOARD, TOO_FAST, RETRY, UNAVAILABLE],
    example: example,
);

#[derive(Deserialize, JsonSchema)]
pub struct SetPresenceParams {
    pub session: String,
    pub board: BoardRef,
    pub position: Point,
}

/// A tile's coordinates.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Point {
    pub x: i32,
    pub y: i32,
}

/// The public id others see this session's cursor by.
#[derive(Serialize, JsonSchema)]
pub struct PresenceSet {
    pub id: String,
}

pub async fn set_presence(app: &App, p: SetPresenceParams) -> Result<Reply, RpcError> {
    let session = session_access::session(app, &p.session).await?;
    let (x, y) = (p.position.x, p.position.y);
    let mirrored = app.boards.get(&p.board).await?;
    check_inside(&mirrored.board.settings(), x, y)?;
    let id = session.set_presence(&mirrored.board, x, y)?;
    Reply::serialized(PresenceSet { id })
}

pub fn example() -> (Value, Value) {
    (
        json!({"session": EXAMPLE_SESSION, "board": "demo", "position": {"x": 3, "y": 4}}),
        json!({"id": "c1a2b3"}),
    )
}
