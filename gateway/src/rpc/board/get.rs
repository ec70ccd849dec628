//! `board.get`: a board's state (settings, seq, packed tiles).

use crate::errors::RpcError;
use crate::params::BoardRef;
use crate::rpc::jsonrpc::Reply;
use crate::rpc::method::{method, Method};
use crate::state::App;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{json, Value};

pub const METHOD: Method = method!(
    "board.get", "A board's state: settings, seq and packed tiles (base64).",
    BoardParams => BoardState, get,
    errors: [UNKNOWN_BOARD, RETRY, UNAVAILABLE],
    example: example,
);

#[derive(Deserialize, JsonSchema)]
pub struct BoardParams {
    pub board: BoardRef,
}

/// `{settings…, seq, bits, frozen, watching}`.
pub type BoardState = crate::mirror::state::BoardState<'static>;

pub async fn get(app: &App, p: BoardParams) -> Result<Reply, RpcError> {
    let mirrored = Box::pin(app.boards.get(&p.board)).await?;
    Ok(Reply::Raw(mirrored.board.initial_state().1.into()))
}

pub fn example() -> (Value, Value) {
    (
        json!({"board": "demo"}),
        json!({"id": 1, "name": "demo", "width": 2, "height": 1, "bits_per_tile": 4,
               "palette": ["#ffffff", "#000000"], "palette_names": ["white", "black"],
               "cooldown": 300.0, "state": "open",
               "freeze_after": null, "seq": 0, "bits": "AA==", "frozen": null,
               "watching": 0}),
    )
}
