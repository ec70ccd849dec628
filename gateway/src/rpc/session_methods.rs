//! The `session.*` methods: their params, their answers and what they do.

use crate::db;
use crate::db::BoardRef;
use crate::errors::{from_db, RpcError, NOT_AUTHORIZED};
use crate::fragments::Fragments;
use crate::params::NoParams;
use crate::params::Seconds;
use crate::rpc::jsonrpc::Reply;
use crate::rpc::session_access;
use crate::rpc::tiles::check_inside;
use crate::sessions::ids::new_session_id;
use crate::sessions::poll_cursor::PollCursor;
use crate::sessions::session::{Session, User};
use crate::sessions::store;
use crate::sessions::subscription::Subscription;
use crate::state::App;
use crate::views;
use bytes::Bytes;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use std::time::Duration;

/// A session, named by its id (from `session.create`; a secret).
#[derive(Deserialize, JsonSchema)]
pub struct SessionParams {
    pub session: String,
}

#[derive(Deserialize, JsonSchema)]
pub struct AuthorizeParams {
    pub session: String,
    /// A user's token (`place.create_user`, `place.new_token`).
    pub token: String,
}

#[derive(Deserialize, JsonSchema)]
pub struct SubscribeParams {
    pub session: String,
    /// `board`, `board_region`, `recent_placements`, or a list view's name.
    pub view: String,
    /// The view's params (`ViewParams`: each kind's).
    #[schemars(schema_with = "view_params_schema")]
    pub params: Option<Map<String, Value>>,
}

#[derive(Deserialize, JsonSchema)]
pub struct GetEventsParams {
    pub session: String,
    /// How long to wait for events (at most `--max-poll-secs`).
    pub timeout: Seconds,
    /// Resumable polls: `""` at first, then the previous answer's `cursor`. Without it,
    /// the answer is the bare list of events (legacy clients).
    pub ack: Option<String>,
}

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

#[derive(Deserialize, JsonSchema)]
pub struct UnsubscribeParams {
    pub session: String,
    /// The subscription's key (as `session.subscribe` answered it).
    pub key: String,
}

/// A list view's own subscribe method (`--view-method`): `session.subscribe(session, view,
/// {"limit": limit})`.
#[derive(Deserialize, JsonSchema)]
pub struct ViewMethodParams {
    pub session: String,
    pub limit: Option<i32>,
}

/// The session's id: a secret (32 hex digits) that names it to every gateway.
#[derive(Serialize, JsonSchema)]
#[serde(transparent)]
pub struct SessionId(String);

#[derive(Serialize, JsonSchema)]
pub struct Authorized {
    pub user_id: i64,
    pub name: String,
}

fn view_params_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let kinds: Vec<Value> = views::params_schemas(generator)
        .into_iter()
        .map(|(_, schema)| schema.to_value())
        .collect();
    schemars::json_schema!({
        "anyOf": [{"anyOf": kinds}, {"type": "null"}]
    })
}

/// `[key, initial state]`: the key every event of the subscription carries, and the view's
/// state now (a board's settings and tiles, a list's rows, ...; with `since`,
/// `{"seq": since, "resumed": true}`).
pub struct Subscribed;

impl JsonSchema for Subscribed {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Subscribed".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "[key, initial state]",
            "type": "array",
            "items": [{"type": "string"}, {}],
            "minItems": 2,
            "maxItems": 2
        })
    }
}

/// The events of every subscription, oldest first; with `ack`, with the cursor to send
/// as the next poll's `ack`.
pub struct Events;

impl JsonSchema for Events {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Events".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let event = json!({
            "type": "object",
            "description": "One event of one subscription: its key, what happened, and \
                            the action's own fields (obj, old, position, seq, tiles, ...).",
            "required": ["key", "action"],
            "properties": {
                "key": {"type": "string"},
                "action": {"type": "string", "enum": [
                    "update", "tiles", "settings", "frozen", "presence", "cursors",
                    "reset", "deleted", "insert", "delete", "move"
                ]}
            }
        });
        schemars::json_schema!({
            "anyOf": [
                {"type": "array", "items": event},
                {
                    "type": "object",
                    "required": ["events", "cursor"],
                    "properties": {
                        "events": {"type": "array", "items": event},
                        "cursor": {"type": "string"}
                    }
                }
            ]
        })
    }
}

/// The public id others see this session's cursor by.
#[derive(Serialize, JsonSchema)]
pub struct PresenceSet {
    pub id: String,
}

/// Always `true`.
#[derive(Serialize, JsonSchema)]
#[serde(transparent)]
pub struct Done(bool);

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
pub async fn create(app: &App, _: NoParams) -> Result<Reply, RpcError> {
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
    Reply::serialized(SessionId(session.id.to_string()))
}

pub async fn destroy(app: &App, p: SessionParams) -> Result<Reply, RpcError> {
    crate::names::check_session_id(&p.session)?;
    let client = db::checkout(&app.pool).await?;
    let existed = store::destroy(&client, &p.session)
        .await
        .map_err(|e| from_db(&e))?;
    if let Some(session) = app.sessions.get(&p.session) {
        app.sessions.forget(session.public_id);
    }
    if !existed {
        return Err(RpcError::unknown_session());
    }
    Reply::serialized(Done(true))
}

pub async fn unsubscribe(app: &App, p: UnsubscribeParams) -> Result<Reply, RpcError> {
    let session = session_access::session(app, &p.session).await?;
    session.require_subscription(&p.key)?;
    let client = db::checkout(&app.pool).await?;
    let version = store::unsubscribe(&client, &p.session, &p.key, app.gateway_id)
        .await
        .map_err(|e| from_db(&e))?;
    drop(client);
    session.unsubscribe(&p.key)?;
    // Changed elsewhere too, or gone meanwhile: read it again next time.
    if !version.is_some_and(|v| session.advance_version(v)) {
        app.sessions.forget(session.public_id);
    }
    Reply::serialized(Done(true))
}

pub async fn authorize(app: &App, p: AuthorizeParams) -> Result<Reply, RpcError> {
    let session = session_access::session(app, &p.session).await?;
    let client = db::checkout(&app.pool).await?;
    let (user_id, name) = db::user_for_token(&client, &p.token)
        .await
        .map_err(|e| from_db(&e))?
        .ok_or_else(|| RpcError::new(NOT_AUTHORIZED, "the token is not valid"))?;
    let version = store::set_user(&client, &p.session, Some(user_id), app.gateway_id)
        .await
        .map_err(|e| from_db(&e))?;
    drop(client);
    changed_here(app, &session, version)?;
    session.set_user(User {
        id: user_id,
        name: name.clone(),
    });
    Reply::serialized(Authorized { user_id, name })
}

pub async fn subscribe(app: &App, p: SubscribeParams) -> Result<Reply, RpcError> {
    let session = session_access::session(app, &p.session).await?;
    let (view, view_params) = (p.view, p.params.unwrap_or_default());
    let built = Box::pin(views::build(&app.sources(), &view, &view_params)).await?;
    if built.signed_in && session.user().is_none() {
        return Err(RpcError::new(
            NOT_AUTHORIZED,
            format!("view {view:?} is for signed-in sessions: session.authorize first"),
        ));
    }
    let sub = Subscription::new(built.view, built.cursor);
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
    let version = store::subscribe(&client, &p.session, &stored, app.gateway_id)
        .await
        .map_err(|e| from_db(&e))?;
    drop(client);
    session.subscribe(sub, app.config.max_subscriptions)?;
    changed_here(app, &session, version)?;
    Ok(keyed_reply(&key, built.state))
}

/// A list view's own subscribe method: exactly `session.subscribe(session, view,
/// {"limit": limit})`.
pub async fn subscribe_view_method(
    app: &App,
    view: &str,
    p: ViewMethodParams,
) -> Result<Reply, RpcError> {
    let mut params = Map::new();
    if let Some(limit) = p.limit {
        params.insert("limit".into(), limit.into());
    }
    subscribe(
        app,
        SubscribeParams {
            session: p.session,
            view: view.to_string(),
            params: Some(params),
        },
    )
    .await
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
pub async fn get_events(app: &App, p: GetEventsParams) -> Result<Reply, RpcError> {
    let id = p.session;
    let timeout = poll_timeout(p.timeout, app.config.max_poll());
    // How long a poll may wait for this gateway to hear the others (LISTEN down): at least
    // a moment even for a poll that does not wait for events.
    let hear_within = timeout.max(HEAR_AT_LEAST);
    let Some(ack_text) = p.ack else {
        let started = tokio::time::Instant::now();
        let Some(session) =
            Box::pin(session_access::for_legacy_poll(app, &id, hear_within)).await?
        else {
            return Ok(Reply::Value(json!([])));
        };
        let left = timeout.saturating_sub(started.elapsed());
        return Ok(Reply::Raw(session.legacy_poll(left).await));
    };
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

pub async fn set_presence(app: &App, p: SetPresenceParams) -> Result<Reply, RpcError> {
    let session = session_access::session(app, &p.session).await?;
    let (x, y) = (p.position.x, p.position.y);
    let mirrored = app.boards.get(&p.board).await?;
    check_inside(&mirrored.board.settings(), x, y)?;
    let id = session.set_presence(&mirrored.board, x, y)?;
    Reply::serialized(PresenceSet { id })
}

// The examples: named params that work against a gateway whose database has a board
// named "demo" and a user whose token is "demo-token" (the OpenRPC test makes both). A
// session id stands for one that session.create answered, a key for one that
// session.subscribe answered: the test puts the real ones in their place.

const EXAMPLE_SESSION: &str = "4f0c2d8e9b1a47c6a3e5d7f9b2c4e6a8";

pub fn create_example() -> (Value, Value) {
    (json!({}), json!(EXAMPLE_SESSION))
}

pub fn authorize_example() -> (Value, Value) {
    (
        json!({"session": EXAMPLE_SESSION, "token": "demo-token"}),
        json!({"user_id": 1, "name": "demo"}),
    )
}

pub fn subscribe_example() -> (Value, Value) {
    (
        json!({"session": EXAMPLE_SESSION, "view": "recent_placements",
               "params": {"board": "demo", "limit": 2}}),
        json!(["board/1/recent/2", []]),
    )
}

pub fn get_events_example() -> (Value, Value) {
    (
        json!({"session": EXAMPLE_SESSION, "timeout": 0, "ack": ""}),
        json!({"events": [], "cursor": "eyJzIjoxLCJnIjoxLCJ2Ijp7fX0"}),
    )
}

pub fn set_presence_example() -> (Value, Value) {
    (
        json!({"session": EXAMPLE_SESSION, "board": "demo", "position": {"x": 3, "y": 4}}),
        json!({"id": "c1a2b3"}),
    )
}

pub fn unsubscribe_example() -> (Value, Value) {
    (
        json!({"session": EXAMPLE_SESSION, "key": "board/1/recent/2"}),
        json!(true),
    )
}

pub fn destroy_example() -> (Value, Value) {
    (json!({"session": EXAMPLE_SESSION}), json!(true))
}
