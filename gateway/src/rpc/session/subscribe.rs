//! `session.subscribe`: a view's initial state, its events from then on by `get_events`;
//! and a list view's own subscribe method (`--view-methods`), which is the same.

use crate::db;
use crate::errors::{from_db, RpcError, NOT_AUTHORIZED};
use crate::fragments::Fragments;
use crate::rpc::jsonrpc::Reply;
use crate::rpc::method::{method, Method};
use crate::rpc::session::{changed_here, EXAMPLE_SESSION};
use crate::rpc::session_access;
use crate::sessions::store;
use crate::sessions::subscription::Subscription;
use crate::state::App;
use crate::views;
use bytes::Bytes;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{json, Map, Value};

pub const METHOD: Method = method!(
    "session.subscribe",
    "Subscribes to a view: answers [key, initial state]; its events come by get_events.",
    SubscribeParams => Subscribed, subscribe,
    errors: [UNKNOWN_SESSION, UNKNOWN_VIEW, UNKNOWN_BOARD, NOT_AUTHORIZED, TOO_MANY, RETRY,
             UNAVAILABLE],
    example: example,
);

#[derive(Deserialize, JsonSchema)]
pub struct SubscribeParams {
    pub session: String,
    /// `board`, `board_region`, `recent_placements`, or a list view's name.
    pub view: String,
    /// The view's params (`ViewParams`: each kind's).
    #[schemars(schema_with = "view_params_schema")]
    pub params: Option<Map<String, Value>>,
}

/// A list view's own subscribe method (`--view-method`): `session.subscribe(session, view,
/// {"limit": limit})`.
#[derive(Deserialize, JsonSchema)]
pub struct ViewMethodParams {
    pub session: String,
    pub limit: Option<i32>,
}

fn view_params_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let kinds: Vec<Value> = views::KINDS
        .iter()
        .chain([&views::NAMED_LIST])
        .map(|kind| (kind.params)(generator).to_value())
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

pub fn example() -> (Value, Value) {
    (
        json!({"session": EXAMPLE_SESSION, "view": "recent_placements",
               "params": {"board": "demo", "limit": 2}}),
        json!(["board/1/recent/2", []]),
    )
}
