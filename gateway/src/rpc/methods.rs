//! The JSON-RPC methods (names, params and results are documented in the README).

use crate::boards::Mirrored;
use crate::db::{self, BoardRef, PlaceItem};
use crate::errors::{from_db, RpcError, BOARD_NOT_OPEN, COOLDOWN, NOT_AUTHORIZED};
use crate::fragments::Fragments;
use crate::json::timestamp;
use crate::mirror::snapshot::Settings;
use crate::params::{Params, Seconds};
use crate::rpc::jsonrpc::Reply;
use crate::rpc::session_access;
use crate::sessions::ids::new_session_id;
use crate::sessions::poll_cursor::PollCursor;
use crate::sessions::session::{Session, User};
use crate::sessions::store;
use crate::sessions::subscription::Subscription;
use crate::state::App;
use crate::views;
use bytes::Bytes;
use serde_json::{json, Map, Value};
use std::sync::Arc;
use std::time::Duration;

pub async fn call(app: &App, method: &str, params: Option<&Value>) -> Result<Reply, RpcError> {
    let names = param_names(method).ok_or_else(|| RpcError::method_not_found(method))?;
    let p = Params::new(params, names)?;
    // Each method's future is boxed: a waiting get_events then holds only its own state,
    // not that of the largest method (10,000 waiting polls are 10,000 of them).
    match method {
        "session.create" => Box::pin(create(app)).await,
        "session.authorize" => Box::pin(authorize(app, p)).await,
        "session.subscribe" => Box::pin(subscribe(app, p)).await,
        "session.get_events" => Box::pin(get_events(app, p)).await,
        "session.set_presence" => Box::pin(set_presence(app, p)).await,
        "session.unsubscribe" => Box::pin(unsubscribe(app, p)).await,
        "session.destroy" => Box::pin(destroy(app, p)).await,
        "board.list" => Box::pin(list(app)).await,
        "board.get" => {
            let board = p.required::<BoardRef>("board")?;
            let mirrored = Box::pin(app.boards.get(&board)).await?;
            Ok(Reply::Raw(mirrored.board.initial_state().1.into()))
        }
        "board.tile_history" => Box::pin(tile_history(app, p)).await,
        "board.place" => Box::pin(place(app, p)).await,
        _ => Err(RpcError::method_not_found(method)),
    }
}

/// Each method's params in order (positional params are read by it); None: no such method.
/// The one list `call` reads them by, and the fuzz target too (`gateway/fuzz`).
pub fn param_names(method: &str) -> Option<&'static [&'static str]> {
    Some(match method {
        "session.create" | "board.list" => &[],
        "session.authorize" => &["session", "token"],
        "session.subscribe" => &["session", "view", "params"],
        "session.get_events" => &["session", "timeout", "ack"],
        "session.set_presence" => &["session", "board", "position"],
        "session.unsubscribe" => &["session", "key"],
        "session.destroy" => &["session"],
        "board.get" => &["board"],
        "board.tile_history" => &["board", "x", "y", "limit"],
        "board.place" => &["session", "board", "x", "y", "color"],
        _ => return None,
    })
}

/// `session.set_presence`'s position.
pub const POSITION_PARAMS: &[&str] = &["x", "y"];

async fn list(app: &App) -> Result<Reply, RpcError> {
    let client = db::checkout(&app.pool).await?;
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

/// A change of the stored session made here gave it `version` (None: it is gone). When
/// another gateway changed it too, this copy may lack that change: it is read again next
/// time. (A change made to a copy that is forgotten right after is harmless.)
fn changed_here(app: &App, session: &Session, version: Option<i64>) -> Result<(), RpcError> {
    let Some(version) = version else {
        app.sessions.forget(session.public_id);
        return Err(RpcError::unknown_session());
    };
    if !session.advance_version(version) {
        app.sessions.forget(session.public_id);
    }
    Ok(())
}

/// A new session, stored in the database (any gateway can serve it from then on).
async fn create(app: &App) -> Result<Reply, RpcError> {
    app.sessions.check_room()?;
    let id = new_session_id();
    let client = db::checkout(&app.pool).await?;
    let public_id = store::create(&client, &id, app.gateway_id)
        .await
        .map_err(|e| from_db(&e))?;
    // Nobody else has it: this copy's positions hold for legacy polls.
    let session = app
        .sessions
        .insert(Session::new(id.into(), public_id, 0, None, true))?;
    Ok(Reply::Value(json!(&*session.id)))
}

async fn destroy(app: &App, p: Params<'_>) -> Result<Reply, RpcError> {
    let id = p.required::<String>("session")?;
    let client = db::checkout(&app.pool).await?;
    let existed = store::destroy(&client, &id)
        .await
        .map_err(|e| from_db(&e))?;
    if let Some(session) = app.sessions.get(&id) {
        app.sessions.forget(session.public_id);
    }
    if !existed {
        return Err(RpcError::unknown_session());
    }
    Ok(Reply::Value(json!(true)))
}

async fn unsubscribe(app: &App, p: Params<'_>) -> Result<Reply, RpcError> {
    let id = p.required::<String>("session")?;
    let key = p.required::<String>("key")?;
    let session = session_access::session(app, &id).await?;
    session.require_subscription(&key)?;
    let client = db::checkout(&app.pool).await?;
    let version = store::unsubscribe(&client, &id, &key, app.gateway_id)
        .await
        .map_err(|e| from_db(&e))?;
    drop(client);
    session.unsubscribe(&key)?;
    // Changed elsewhere too, or gone meanwhile: read it again next time.
    if !version.is_some_and(|v| session.advance_version(v)) {
        app.sessions.forget(session.public_id);
    }
    Ok(Reply::Value(json!(true)))
}

async fn authorize(app: &App, p: Params<'_>) -> Result<Reply, RpcError> {
    let id = p.required::<String>("session")?;
    let session = session_access::session(app, &id).await?;
    let token = p.required::<String>("token")?;
    let client = db::checkout(&app.pool).await?;
    let (user_id, name) = db::user_for_token(&client, &token)
        .await
        .map_err(|e| from_db(&e))?
        .ok_or_else(|| RpcError::new(NOT_AUTHORIZED, "the token is not valid"))?;
    let version = store::set_user(&client, &id, Some(user_id), app.gateway_id)
        .await
        .map_err(|e| from_db(&e))?;
    drop(client);
    changed_here(app, &session, version)?;
    session.set_user(User {
        id: user_id,
        name: name.clone(),
    });
    Ok(Reply::Value(json!({"user_id": user_id, "name": name})))
}

async fn subscribe(app: &App, p: Params<'_>) -> Result<Reply, RpcError> {
    let id = p.required::<String>("session")?;
    let session = session_access::session(app, &id).await?;
    let view = p.required::<String>("view")?;
    let view_params: Map<String, Value> = p.optional("params")?.unwrap_or_default();
    let built = Box::pin(views::build(&app.sources(), &view, &view_params)).await?;
    if built.signed_in && session.user().is_none() {
        return Err(RpcError::new(
            NOT_AUTHORIZED,
            format!("view {view:?} is for signed-in sessions: session.authorize first"),
        ));
    }
    let sub = Subscription::new(built.view, built.position);
    let key = sub.key.clone();
    session.check_room(&key, app.config.max_subscriptions)?;
    // Stored first: a subscription that another gateway could not make again is none.
    let client = db::checkout(&app.pool).await?;
    let stored = store::NewView {
        key: &key,
        view: &view,
        params: &built.params,
        board: built.board,
        seq: built.seq,
        sub_id: sub.sub_id,
    };
    let version = store::subscribe(&client, &id, &stored, app.gateway_id)
        .await
        .map_err(|e| from_db(&e))?;
    drop(client);
    session.subscribe(sub, app.config.max_subscriptions)?;
    changed_here(app, &session, version)?;
    Ok(keyed_reply(&key, built.state))
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

const HEAR_AT_LEAST: Duration = Duration::from_secs(1);

/// How long a poll asking for `requested` seconds waits: at most `max`.
pub fn poll_timeout(Seconds(requested): Seconds, max: Duration) -> Duration {
    // Capped before converting: a Duration cannot hold 1e300 seconds.
    Duration::from_secs_f64(requested.min(max.as_secs_f64()))
}

/// Without `ack`: the bare list of events (legacy clients). With `ack` (`""` at first,
/// then the last answer's `cursor`): `{"events": [...], "cursor": "..."}`, answered from
/// where the ack says, whichever gateway answered before.
///
/// What may read the database before the wait is boxed: a waiting poll's future then holds
/// only what the wait needs (2,552 bytes with them inline, measured by -Zprint-type-sizes).
async fn get_events(app: &App, p: Params<'_>) -> Result<Reply, RpcError> {
    let id = p.required::<String>("session")?;
    let timeout = poll_timeout(p.required("timeout")?, app.config.max_poll());
    let ack = p.optional::<String>("ack")?;
    // How long a poll may wait for this gateway to hear the others (LISTEN down): at least
    // a moment even for a poll that does not wait for events.
    let hear_within = timeout.max(HEAR_AT_LEAST);
    let Some(ack) = ack else {
        let started = tokio::time::Instant::now();
        let Some(session) =
            Box::pin(session_access::for_legacy_poll(app, &id, hear_within)).await?
        else {
            return Ok(Reply::Value(json!([])));
        };
        let left = timeout.saturating_sub(started.elapsed());
        return Ok(Reply::Raw(session.legacy_poll(left).await));
    };
    let ack_text = ack;
    let ack = match ack_text.as_str() {
        "" => None,
        text => Some(PollCursor::decode(text).map_err(RpcError::invalid_params)?),
    };
    let started = tokio::time::Instant::now();
    let Some(session) = Box::pin(session_access::current(app, &id, hear_within)).await? else {
        // This gateway could not hear the others in time: nothing now, same cursor.
        return Ok(Reply::Value(json!({"events": [], "cursor": ack_text})));
    };
    if ack.as_ref().is_some_and(|a| a.session != session.public_id) {
        return Err(RpcError::invalid_params(
            "`ack` is a cursor of another session",
        ));
    }
    let timeout = timeout.saturating_sub(started.elapsed());
    let mut positions = session.ack_positions(ack.as_ref(), app.gateway_id);
    Box::pin(session_access::reach_back(app, &session, &positions)).await?;
    let events = session.get_events(timeout, Some(&mut positions)).await;
    let cursor = positions.cursor(&session).encode();
    let mut out = Fragments::new();
    out.push_static("{\"events\":");
    out.append(events);
    out.push(format!(",\"cursor\":\"{cursor}\"}}").into_bytes().into());
    Ok(Reply::Raw(out))
}

async fn set_presence(app: &App, p: Params<'_>) -> Result<Reply, RpcError> {
    let session = session_access::session(app, &p.required::<String>("session")?).await?;
    let board: BoardRef = p.required("board")?;
    let position: Map<String, Value> = p.required("position")?;
    let pp = Params::new_from_map(&position, POSITION_PARAMS)?;
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
    let client = app.lagging_read_client().await?;
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
    let session = session_access::session(app, &p.required::<String>("session")?).await?;
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
