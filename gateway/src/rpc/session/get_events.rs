//! `session.get_events`: the long poll, for acking clients (`ack`: resumable from a
//! cursor, on any gateway) and legacy ones (the bare list of events).

use crate::errors::RpcError;
use crate::fragments::Fragments;
use crate::params::Seconds;
use crate::rpc::jsonrpc::Reply;
use crate::rpc::method::{method, Method};
use crate::rpc::session::EXAMPLE_SESSION;
use crate::rpc::session_access;
use crate::sessions::poll_cursor::PollCursor;
use crate::state::App;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{json, Value};
use std::time::Duration;

pub const METHOD: Method = method!(
    "session.get_events",
    "The events of every subscription, at once or when some come (a long poll).",
    GetEventsParams => Events, get_events,
    errors: [UNKNOWN_SESSION, RETRY, UNAVAILABLE],
    example: example,
    long_poll: true,
);

#[derive(Deserialize, JsonSchema)]
pub struct GetEventsParams {
    pub session: String,
    /// How long to wait for events (at most `--max-poll-secs`).
    pub timeout: Seconds,
    /// Resumable polls: `""` at first, then the previous answer's `cursor`. Without it,
    /// the answer is the bare list of events (legacy clients).
    pub ack: Option<String>,
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
    let seen_version = ack.as_ref().map_or(0, |a| a.version);
    let Some(session) =
        Box::pin(session_access::current(app, &id, hear_within, seen_version)).await?
    else {
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

pub fn example() -> (Value, Value) {
    (
        json!({"session": EXAMPLE_SESSION, "timeout": 0, "ack": ""}),
        json!({"events": [], "cursor": "eyJzIjoxLCJnIjoxLCJ2Ijp7fX0"}),
    )
}
