//! The JSON-RPC methods (names, params and results are documented in the README).

use crate::board::{timestamp, Settings};
use crate::boards::Mirrored;
use crate::db::{self, BoardRef, PlaceItem};
use crate::errors::{from_db, from_pool, RpcError, BOARD_NOT_OPEN, COOLDOWN, NOT_AUTHORIZED};
use crate::fragments::Fragments;
use crate::jsonrpc::Reply;
use crate::list_view::ListView;
use crate::params::{Params, Seconds};
use crate::recent::MAX_RECENT;
use crate::region::Rect;
use crate::sessions::{Session, Subscription, User};
use crate::state::App;
use bytes::Bytes;
use serde_json::{json, Map, Value};
use std::sync::Arc;
use std::time::Duration;

pub async fn call(app: &App, method: &str, params: Option<&Value>) -> Result<Reply, RpcError> {
    // Each method's future is boxed: a waiting get_events then holds only its own state,
    // not that of the largest method (10,000 waiting polls are 10,000 of them).
    match method {
        "session.create" => {
            Params::new(params, &[])?;
            let session = app.sessions.create()?;
            Ok(Reply::Value(json!(&*session.id)))
        }
        "session.authorize" => {
            Box::pin(authorize(app, Params::new(params, &["session", "token"])?)).await
        }
        "session.subscribe" => {
            let p = Params::new(params, &["session", "view", "params"])?;
            Box::pin(subscribe(app, p)).await
        }
        "session.get_events" => {
            Box::pin(get_events(
                app,
                Params::new(params, &["session", "timeout"])?,
            ))
            .await
        }
        "session.set_presence" => {
            let p = Params::new(params, &["session", "board", "position"])?;
            Box::pin(set_presence(app, p)).await
        }
        "session.unsubscribe" => {
            let p = Params::new(params, &["session", "key"])?;
            let session = app.sessions.get(&p.required::<String>("session")?)?;
            session.unsubscribe(&p.required::<String>("key")?)?;
            Ok(Reply::Value(json!(true)))
        }
        "session.destroy" => {
            let p = Params::new(params, &["session"])?;
            app.sessions.destroy(&p.required::<String>("session")?)?;
            Ok(Reply::Value(json!(true)))
        }
        "board.list" => {
            Params::new(params, &[])?;
            Box::pin(list(app)).await
        }
        "board.get" => {
            let p = Params::new(params, &["board"])?;
            let board = p.required::<BoardRef>("board")?;
            let mirrored = Box::pin(app.boards.get(&board)).await?;
            Ok(Reply::Raw(mirrored.board.initial_state().1.into()))
        }
        "board.tile_history" => {
            let p = Params::new(params, &["board", "x", "y", "limit"])?;
            Box::pin(tile_history(app, p)).await
        }
        "board.place" => {
            let p = Params::new(params, &["session", "board", "x", "y", "color"])?;
            Box::pin(place(app, p)).await
        }
        _ => Err(RpcError::method_not_found(method)),
    }
}

async fn list(app: &App) -> Result<Reply, RpcError> {
    let client = app.pool.get().await.map_err(from_pool)?;
    let boards = db::list_boards(&client).await.map_err(|e| from_db(&e))?;
    let list: Vec<Value> = boards
        .into_iter()
        .map(|(settings, seq)| {
            let mut value = json!(settings);
            value["seq"] = json!(seq);
            value
        })
        .collect();
    Ok(Reply::Value(Value::Array(list)))
}

async fn authorize(app: &App, p: Params<'_>) -> Result<Reply, RpcError> {
    let session = app.sessions.get(&p.required::<String>("session")?)?;
    let token = p.required::<String>("token")?;
    let client = app.pool.get().await.map_err(from_pool)?;
    let (id, name) = db::user_for_token(&client, &token)
        .await
        .map_err(|e| from_db(&e))?
        .ok_or_else(|| RpcError::new(NOT_AUTHORIZED, "the token is not valid"))?;
    session.set_user(User {
        id,
        name: name.clone(),
    });
    Ok(Reply::Value(json!({"user_id": id, "name": name})))
}

async fn subscribe(app: &App, p: Params<'_>) -> Result<Reply, RpcError> {
    let session = app.sessions.get(&p.required::<String>("session")?)?;
    let view = p.required::<String>("view")?;
    let view_params: Map<String, Value> = p.optional("params")?.unwrap_or_default();
    match view.as_str() {
        "board" => {}
        "recent_placements" => {
            return Box::pin(subscribe_recent(app, &session, &view_params)).await;
        }
        "board_region" => {
            return Box::pin(subscribe_region(app, &session, &view_params)).await;
        }
        _ => return Box::pin(subscribe_list(app, &session, &view, &view_params)).await,
    }
    let vp = Params::new_from_map(&view_params, &["board", "compact", "presence"])?;
    let board: BoardRef = vp.required("board")?;
    let compact = vp.optional::<bool>("compact")?.unwrap_or(false);
    let presence = vp.optional::<bool>("presence")?.unwrap_or(false);
    let mirrored = app.boards.get(&board).await?;
    let board = mirrored.board.clone();
    let key = if compact {
        board.compact_key.clone()
    } else {
        board.qik_key.clone()
    };
    let (cursor, state) = board.initial_state();
    session.subscribe(
        Subscription::new(key.clone(), board, compact, cursor).with_presence(presence),
        app.config.max_subscriptions,
    )?;
    Ok(keyed_reply(&key, state))
}

/// A rectangle of a board: `[key, initial_state]`.
async fn subscribe_region(
    app: &App,
    session: &Session,
    view_params: &Map<String, Value>,
) -> Result<Reply, RpcError> {
    let vp = Params::new_from_map(
        view_params,
        &["board", "x", "y", "width", "height", "compact", "presence"],
    )?;
    let board: BoardRef = vp.required("board")?;
    let rect = Rect {
        x: vp.required("x")?,
        y: vp.required("y")?,
        width: vp.required("width")?,
        height: vp.required("height")?,
    };
    let compact = vp.optional::<bool>("compact")?.unwrap_or(false);
    let presence = vp.optional::<bool>("presence")?.unwrap_or(false);
    let mirrored = app.boards.get(&board).await?;
    let region = mirrored
        .board
        .region_view(rect, compact)
        .map_err(RpcError::invalid_params)?;
    let (cursor, state) = region.initial_state();
    let key = region.key.clone();
    session.subscribe(
        Subscription::region(&mirrored.board, region, cursor, presence),
        app.config.max_subscriptions,
    )?;
    Ok(keyed_reply(&key, state))
}

/// A board's newest placements, newest first: `[key, rows]`.
async fn subscribe_recent(
    app: &App,
    session: &Session,
    view_params: &Map<String, Value>,
) -> Result<Reply, RpcError> {
    let vp = Params::new_from_map(view_params, &["board", "limit"])?;
    let board: BoardRef = vp.required("board")?;
    let limit = vp.optional::<i32>("limit")?.unwrap_or(MAX_RECENT as i32);
    if !(1..=MAX_RECENT as i32).contains(&limit) {
        return Err(RpcError::invalid_params(format!(
            "`limit` must be between 1 and {MAX_RECENT}, not {limit}"
        )));
    }
    let mirrored = app.boards.get(&board).await?;
    let view = mirrored.board.recent_view(limit as usize);
    list_reply(app, session, view)
}

/// A named list view (`place.create_view`): `[key, rows]`.
async fn subscribe_list(
    app: &App,
    session: &Session,
    name: &str,
    view_params: &Map<String, Value>,
) -> Result<Reply, RpcError> {
    // The view first: a client that names no view of ours hears that, whatever its params.
    let only_limit: Map<String, Value> = view_params
        .iter()
        .filter(|(name, _)| *name == "limit")
        .map(|(name, value)| (name.clone(), value.clone()))
        .collect();
    let limit = Params::new_from_map(&only_limit, &["limit"])?.optional::<i32>("limit")?;
    if let Some(limit) = limit {
        if limit < 1 {
            return Err(RpcError::invalid_params(format!(
                "`limit` must be at least 1, not {limit}"
            )));
        }
    }
    let view = app.lists.get(name, limit).await?;
    Params::new_from_map(view_params, &["limit"])?;
    list_reply(app, session, view)
}

/// Subscribes the session to a list instance: `[key, rows]`.
fn list_reply(app: &App, session: &Session, view: Arc<ListView>) -> Result<Reply, RpcError> {
    let (cursor, rows) = view.initial_state();
    let key = view.key.clone();
    session.subscribe(
        Subscription::list(view, cursor),
        app.config.max_subscriptions,
    )?;
    Ok(keyed_reply(&key, rows))
}

/// `[key, state]`, the state as it was serialized.
fn keyed_reply(key: &str, state: Bytes) -> Reply {
    let mut out = Fragments::new();
    out.push(
        format!("[{},", serde_json::to_string(key).expect("keys serialize"))
            .into_bytes()
            .into(),
    );
    out.push(state);
    out.push_static("]");
    Reply::Raw(out)
}

async fn get_events(app: &App, p: Params<'_>) -> Result<Reply, RpcError> {
    let session = app.sessions.get(&p.required::<String>("session")?)?;
    let Seconds(timeout) = p.required("timeout")?;
    // Capped before converting: a Duration cannot hold 1e300 seconds.
    let timeout = Duration::from_secs_f64(timeout.min(app.config.max_poll().as_secs_f64()));
    Ok(Reply::Raw(session.get_events(timeout).await))
}

async fn set_presence(app: &App, p: Params<'_>) -> Result<Reply, RpcError> {
    let session = app.sessions.get(&p.required::<String>("session")?)?;
    let board: BoardRef = p.required("board")?;
    let position: Map<String, Value> = p.required("position")?;
    let pp = Params::new_from_map(&position, &["x", "y"])?;
    let (x, y): (i32, i32) = (pp.required("x")?, pp.required("y")?);
    let mirrored = app.boards.get(&board).await?;
    check_inside(&mirrored.board.settings(), x, y)?;
    let id = session.set_presence(&mirrored.board, x, y)?;
    Ok(Reply::Value(json!({ "id": id })))
}

/// The most a tile_history call returns.
const MAX_HISTORY: i32 = 100;

async fn tile_history(app: &App, p: Params<'_>) -> Result<Reply, RpcError> {
    let board: BoardRef = p.required("board")?;
    let (x, y): (i32, i32) = (p.required("x")?, p.required("y")?);
    let limit = p.optional::<i32>("limit")?.unwrap_or(10);
    if !(1..=MAX_HISTORY).contains(&limit) {
        return Err(RpcError::invalid_params(format!(
            "`limit` must be between 1 and {MAX_HISTORY}, not {limit}"
        )));
    }
    let mirrored = app.boards.get(&board).await?;
    check_inside(&mirrored.board.settings(), x, y)?;
    let client = app.pool.get().await.map_err(from_pool)?;
    let rows = db::tile_history(&client, mirrored.board.id, x, y, limit.into())
        .await
        .map_err(|e| from_db(&e))?;
    Ok(Reply::Value(Value::Array(rows)))
}

fn check_inside(settings: &Settings, x: i32, y: i32) -> Result<(), RpcError> {
    if x < 0 || x >= settings.width || y < 0 || y >= settings.height {
        return Err(RpcError::invalid_params(format!(
            "({x}, {y}) is outside board {}, which is {}x{} (x in 0..{}, y in 0..{})",
            settings.name,
            settings.width,
            settings.height,
            settings.width - 1,
            settings.height - 1
        )));
    }
    Ok(())
}

async fn place(app: &App, p: Params<'_>) -> Result<Reply, RpcError> {
    let session = app.sessions.get(&p.required::<String>("session")?)?;
    let board: BoardRef = p.required("board")?;
    let (x, y, color): (i32, i32, i32) = (p.required("x")?, p.required("y")?, p.required("color")?);
    let user = session.user().ok_or_else(|| {
        RpcError::new(
            NOT_AUTHORIZED,
            "this session has no user: call session.authorize with a token first",
        )
    })?;
    let mirrored: Arc<Mirrored> = app.boards.get(&board).await?;
    let settings = mirrored.board.settings();
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
    // Known frozen here, frozen in the database: no need to ask it.
    if mirrored.board.is_frozen(x, y) {
        return Err(RpcError::frozen_tile(&settings.name, x, y));
    }
    let outcome = mirrored
        .placer
        .place(PlaceItem {
            user: user.id,
            x,
            y,
            color,
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
    Ok(Reply::Value(json!({
        "placed": true,
        "seq": outcome.seq,
        "next_allowed_at": next_allowed_at,
    })))
}
