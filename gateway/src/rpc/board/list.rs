//! `board.list`: every board, its settings and newest seq.

use crate::db;
use crate::errors::{from_db, RpcError};
use crate::mirror::snapshot::Settings;
use crate::params::NoParams;
use crate::rpc::jsonrpc::Reply;
use crate::rpc::method::{method, Method};
use crate::state::App;
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{json, Value};

pub const METHOD: Method = method!(
    "board.list", "Every board: its settings and newest seq.",
    NoParams => Boards, list,
    errors: [RETRY, UNAVAILABLE],
    example: example,
);

/// A board's settings and its newest seq.
#[derive(Serialize, JsonSchema)]
pub struct Listed {
    #[serde(flatten)]
    pub settings: Settings,
    pub seq: i64,
    /// Whether a visitor may play as a guest (`session.play_as_guest`).
    pub guests: bool,
}

/// Every board, by id.
pub type Boards = Vec<Listed>;

pub async fn list(app: &App, _: NoParams) -> Result<Reply, RpcError> {
    let client = db::checkout(&app.pool).await?;
    let boards = db::list_boards(&client).await.map_err(|e| from_db(&e))?;
    let listed: Boards = boards
        .into_iter()
        .map(|(settings, seq)| Listed {
            guests: app.config.takes_guests(settings.id, &settings.name),
            settings,
            seq,
        })
        .collect();
    Reply::serialized(listed)
}

pub fn example() -> (Value, Value) {
    (
        json!({}),
        json!([{"id": 1, "name": "demo", "width": 1000, "height": 1000, "bits_per_tile": 4,
                "palette": ["#ffffff", "#000000"], "palette_names": ["white", "black"],
                "cooldown": 300.0, "state": "open",
                "freeze_after": null, "seq": 0, "guests": false}]),
    )
}
