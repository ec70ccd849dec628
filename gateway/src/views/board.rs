//! `board`: a whole board, in Qik's form (an `update` per tile) or compact (`tiles`
//! runs). Its log is the mirror's own (`mirror::board`): this is how a subscriber reads it.

use crate::boards::Boards;
use crate::errors::RpcError;
use crate::fragments::ArrayBuilder;
use crate::mirror::board::{Board, Cursor};
use crate::params::read_named;
use crate::params::BoardRef;
use crate::shared_log::Delivery;
use crate::views::made::Made;
use bytes::Bytes;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value};
use std::sync::Arc;
use std::time::Duration;

/// `board`'s params.
#[derive(Deserialize, JsonSchema)]
pub struct BoardViewParams {
    pub board: BoardRef,
    /// `tiles` events (`[x, y, color]` runs) instead of an `update` per tile.
    #[serde(default)]
    pub compact: bool,
    /// Also `presence` and `cursors` events (who watches, where they point).
    #[serde(default)]
    pub presence: bool,
    /// The last seq the client holds: the placements after it instead of a whole state.
    pub since: Option<i64>,
}

/// How long a `since` ahead of this gateway's copy of the board waits for it.
const SINCE_CATCH_UP: Duration = Duration::from_secs(2);

pub struct BoardView {
    pub board: Arc<Board>,
    pub compact: bool,
    /// Whether the view asked for `presence` events.
    pub presence: bool,
}

impl BoardView {
    pub fn key(&self) -> Arc<str> {
        if self.compact {
            self.board.compact_key.clone()
        } else {
            self.board.qik_key.clone()
        }
    }

    pub fn collect(&self, cursor: &mut Cursor, out: &mut ArrayBuilder) -> Delivery {
        self.board.collect(cursor, self.compact, self.presence, out)
    }
}

/// A whole board: its initial state, or with `since` (the last seq the client holds) the
/// placements after it, read from the history when the gateway's log does not reach back.
pub async fn build(
    boards: &Boards,
    view_params: &Map<String, Value>,
) -> Result<Made<BoardView, Cursor>, RpcError> {
    let BoardViewParams {
        board: board_ref,
        compact,
        presence,
        since,
    } = read_named(view_params.clone())?;
    let mirrored = boards.get(&board_ref).await?;
    let board = mirrored.board.clone();
    let view = |board: &Arc<Board>| BoardView {
        board: board.clone(),
        compact,
        presence,
    };
    let mut params = view_params.clone();
    params.remove("since");
    if let Some(since) = since {
        if since > board.seq() {
            // A seq another gateway gave, ahead of this one's copy for a moment.
            let _ = tokio::time::timeout(SINCE_CATCH_UP, board.reached(since)).await;
        }
        let seq = board.seq();
        if since < 0 || since > seq {
            return Err(RpcError::invalid_params(format!(
                "`since` must be a seq of board {} (0..{seq}), not {since}",
                board.settings().name
            )));
        }
        let cursor = board.cursor_at(since);
        if board.is_behind(&cursor) {
            boards.backfill(&board, since).await?;
        }
        if !board.is_behind(&cursor) {
            return Ok(Made {
                view: view(&board),
                cursor,
                state: Bytes::from(format!("{{\"seq\":{since},\"resumed\":true}}")),
                params,
                board: Some(board.id),
                seq: Some(since),
                signed_in: false,
            });
        }
    }
    let (cursor, state) = board.initial_state();
    Ok(Made {
        view: view(&board),
        cursor,
        state,
        params,
        board: Some(board.id),
        seq: Some(cursor.seq),
        signed_in: false,
    })
}
