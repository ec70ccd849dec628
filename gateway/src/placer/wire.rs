//! What one gateway sends the board's placer (`POST /placer/boards/{id}`, `forward.rs`) and
//! what it answers (`http/forwarded.rs`): a group of placements and an outcome for each, in order.

use crate::db::{Outcome, PlaceItem};
use crate::errors::RpcError;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The header that carries the placer's token (`place.placers.token`).
pub const TOKEN_HEADER: &str = "x-pgplace-placer-token";

/// A gateway's answer that placed nothing of what it was sent carries this header with
/// value [`NOT_PLACED`]: only then may the sender place the group itself. Any other answer
/// but 200 (a proxy's 502 or 504, say) may have come after the group was placed.
pub const PLACED_HEADER: &str = "x-pgplace-placer";
pub const NOT_PLACED: &str = "not-placed";

/// The path a board's forwarded placements are posted to.
pub fn path(board: i64) -> String {
    format!("/placer/boards/{board}")
}

/// The board of a path `path` made, if it is one.
pub fn board_of(path: &str) -> Option<i64> {
    path.strip_prefix("/placer/boards/")?.parse().ok()
}

#[derive(Serialize, Deserialize)]
pub struct Group {
    pub items: Vec<Item>,
}

/// A placement as the placer needs it: its session by public id (the id is a secret this
/// gateway keeps), the user this gateway's copy names (schemas before 0.8.11 only), the tile.
#[derive(Serialize, Deserialize)]
pub struct Item {
    pub session: i64,
    pub user: i64,
    pub x: i32,
    pub y: i32,
    pub color: i32,
    pub key: Option<String>,
}

impl From<&PlaceItem> for Item {
    fn from(item: &PlaceItem) -> Self {
        Item {
            session: item.session_public,
            user: item.user,
            x: item.x,
            y: item.y,
            color: item.color,
            key: item.key.clone(),
        }
    }
}

impl From<Item> for PlaceItem {
    fn from(item: Item) -> Self {
        PlaceItem {
            session_public: item.session,
            session: None,
            user: item.user,
            x: item.x,
            y: item.y,
            color: item.color,
            key: item.key,
        }
    }
}

#[derive(Serialize, Deserialize)]
pub struct Answer {
    pub outcomes: Vec<ItemOutcome>,
}

/// One placement's outcome: placed or refused (`placed`, `seq`, `next_allowed_at` in
/// microseconds since 1970, absent for a frozen tile), or the error its group failed with.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ItemOutcome {
    Done {
        placed: bool,
        seq: Option<i64>,
        next_allowed_at: Option<i64>,
    },
    Failed {
        code: i64,
        message: String,
        data: Option<Value>,
    },
}

impl From<Result<Outcome, RpcError>> for ItemOutcome {
    fn from(outcome: Result<Outcome, RpcError>) -> Self {
        match outcome {
            Ok(o) => ItemOutcome::Done {
                placed: o.placed,
                seq: o.seq,
                next_allowed_at: o.next_allowed_at.map(|t| t.timestamp_micros()),
            },
            Err(e) => ItemOutcome::Failed {
                code: e.code,
                message: e.message,
                data: e.data,
            },
        }
    }
}

impl From<ItemOutcome> for Result<Outcome, RpcError> {
    fn from(outcome: ItemOutcome) -> Self {
        match outcome {
            ItemOutcome::Done {
                placed,
                seq,
                next_allowed_at,
            } => Ok(Outcome {
                placed,
                seq,
                next_allowed_at: next_allowed_at
                    .and_then(chrono::DateTime::<chrono::Utc>::from_timestamp_micros),
            }),
            ItemOutcome::Failed {
                code,
                message,
                data,
            } => Err(RpcError {
                code,
                message,
                data,
            }),
        }
    }
}
