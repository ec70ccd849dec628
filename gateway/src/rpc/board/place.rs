//! `board.place`: a tile placed as the session's user, through the board's group commit
//! (`placer`); retry-safe with a `key`.

use crate::boards::Mirrored;
use crate::db::PlaceItem;
use crate::errors::{RpcError, BOARD_NOT_OPEN, COOLDOWN, NOT_AUTHORIZED};
use crate::json::timestamp;
use crate::params::BoardRef;
use crate::rpc::jsonrpc::Reply;
use crate::rpc::method::{method, Method};
use crate::rpc::session_access;
use crate::rpc::tiles::check_inside;
use crate::state::App;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::sync::Arc;

pub const METHOD: Method = method!(
    "board.place",
    "Places a tile as the session's user (once per cooldown): answers its seq.",
    PlaceParams => Placed, place,
    errors: [UNKNOWN_SESSION, NOT_AUTHORIZED, COOLDOWN, UNKNOWN_BOARD, BOARD_NOT_OPEN,
             FROZEN_TILE, TOO_MANY, RETRY, UNAVAILABLE],
    example: example,
    limit: Placements,
);

#[derive(Deserialize, JsonSchema)]
pub struct PlaceParams {
    pub session: String,
    pub board: BoardRef,
    pub x: i32,
    pub y: i32,
    /// An index into the board's palette.
    pub color: i32,
    /// Names this placement (1 to 200 bytes, unique per user and board): a retry with the
    /// same key within a day answers with the first placement's seq instead of placing
    /// again (or being refused for the cooldown that placement started).
    pub key: Option<String>,
}

/// The placement's seq, and when the user may place again.
#[derive(Serialize, JsonSchema)]
pub struct Placed {
    /// Always `true` (a cooldown is an error, −32003).
    pub placed: bool,
    pub seq: i64,
    pub next_allowed_at: String,
}

/// The longest placement key (as `place.place`'s).
const MAX_KEY_BYTES: usize = 200;

pub async fn place(app: &App, p: PlaceParams) -> Result<Reply, RpcError> {
    let session = session_access::session(app, &p.session).await?;
    let (x, y, color) = (p.x, p.y, p.color);
    let user = session_access::user(app, &session).await?.ok_or_else(|| {
        RpcError::new(
            NOT_AUTHORIZED,
            "this session has no user: call session.authorize with a token first",
        )
    })?;
    let mirrored: Arc<Mirrored> = app.boards.get(&p.board).await?;
    let settings = mirrored.board.settings();
    if user.guest && !app.config.takes_guests(settings.id, &settings.name) {
        return Err(RpcError::new(
            NOT_AUTHORIZED,
            format!(
                "board {} takes no guests: sign in with a token to place here",
                settings.name
            ),
        ));
    }
    // Checked here so that one caller's mistake cannot fail the group it would join.
    if settings.state != "open" {
        return Err(RpcError::new(
            BOARD_NOT_OPEN,
            format!(
                "board {} is {}: no placements now",
                settings.name, settings.state
            ),
        ));
    }
    check_inside(&settings, x, y)?;
    if color < 0 || color as usize >= settings.palette.len() {
        return Err(RpcError::invalid_params(format!(
            "color {color} is not in the palette of board {} (0..{})",
            settings.name,
            settings.palette.len() - 1
        )));
    }
    if let Some(key) = &p.key {
        if key.is_empty() || key.len() > MAX_KEY_BYTES {
            return Err(RpcError::invalid_params(format!(
                "`key` must be 1 to {MAX_KEY_BYTES} bytes long (it is {})",
                key.len()
            )));
        }
    }
    // Known frozen here, frozen in the database: no need to ask it.
    if mirrored.board.is_frozen(x, y) {
        return Err(RpcError::frozen_tile(&settings.name, x, y));
    }
    let outcome = mirrored
        .placer
        .place(PlaceItem {
            session_public: session.public_id,
            session: Some(session.id.clone()),
            user: user.id,
            x,
            y,
            color,
            key: p.key,
        })
        .await
        .inspect_err(|error| {
            // The user is gone: the session must not keep sending doomed placements.
            if error.code == NOT_AUTHORIZED {
                session.clear_user();
            }
        })?;
    let Some(next_allowed_at) = outcome.next_allowed_at else {
        return Err(RpcError::frozen_tile(&settings.name, x, y));
    };
    let next_allowed_at = timestamp(next_allowed_at.timestamp_micros());
    if !outcome.placed {
        return Err(RpcError::new(
            COOLDOWN,
            format!("cooldown: you can place again at {next_allowed_at}"),
        )
        .with_data(json!({"retry_at": next_allowed_at})));
    }
    let Some(seq) = outcome.seq else {
        // place_many gives a seq to every placement it made.
        return Err(RpcError::internal());
    };
    Reply::serialized(Placed {
        placed: true,
        seq,
        next_allowed_at,
    })
}

pub fn example() -> (Value, Value) {
    (
        json!({"session": "4f0c2d8e9b1a47c6a3e5d7f9b2c4e6a8", "board": "demo",
               "x": 1, "y": 0, "color": 1, "key": "tab-3f9a-17"}),
        json!({"placed": true, "seq": 1, "next_allowed_at": "2026-12-03T08:05:00.000000Z"}),
    )
}
