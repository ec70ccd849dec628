//! `board.tile_history`: a tile's newest placements.

use crate::db::{self, HistoryEntry};
use crate::errors::{from_db, RpcError};
use crate::params::BoardRef;
use crate::rpc::jsonrpc::Reply;
use crate::rpc::method::{method, Method};
use crate::rpc::tiles::check_inside;
use crate::state::App;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{json, Value};

pub const METHOD: Method = method!(
    "board.tile_history", "A tile's newest placements, newest first.",
    TileHistoryParams => TileHistory, tile_history,
    errors: [UNKNOWN_BOARD, RETRY, UNAVAILABLE],
    example: example,
);

#[derive(Deserialize, JsonSchema)]
pub struct TileHistoryParams {
    pub board: BoardRef,
    pub x: i32,
    pub y: i32,
    /// How many placements (1 to 100; 10 when absent).
    pub limit: Option<i32>,
}

/// Newest first.
pub type TileHistory = Vec<HistoryEntry>;

/// The most a tile_history call returns.
const MAX_HISTORY: i32 = 100;

pub async fn tile_history(app: &App, p: TileHistoryParams) -> Result<Reply, RpcError> {
    let (x, y) = (p.x, p.y);
    let limit = p.limit.unwrap_or(10);
    if !(1..=MAX_HISTORY).contains(&limit) {
        return Err(RpcError::invalid_params(format!(
            "`limit` must be between 1 and {MAX_HISTORY}, not {limit}"
        )));
    }
    let mirrored = app.boards.get(&p.board).await?;
    check_inside(&mirrored.board.settings(), x, y)?;
    let client = app.lagging_read_client().await?;
    let rows = db::tile_history(&client, mirrored.board.id, x, y, limit.into())
        .await
        .map_err(|e| from_db(&e))?;
    Reply::serialized(rows)
}

pub fn example() -> (Value, Value) {
    (
        json!({"board": "demo", "x": 1, "y": 0, "limit": 5}),
        json!([{"seq": 1, "x": 1, "y": 0, "color": 1, "user": 1, "user_name": "demo",
                "placed_at": "2026-12-03T08:00:00.000000Z"}]),
    )
}
