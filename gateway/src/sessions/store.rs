//! Sessions in the database (`place.sessions`, extension/schema/sessions.sql), so that any
//! gateway serves any session. Written on create, authorize, subscribe, unsubscribe and
//! destroy; marked seen in batches; read when a gateway meets a session it does not hold.
//!
//! Gateways tell each other on channel `pgplace_sessions`:
//! - `gone <public_id>`: destroyed or expired (sent by the database functions);
//! - `drop <public_id> <gateway>`: the session changed, or a legacy poll was served, on
//!   that gateway: every other gateway forgets its copy (and answers a poll waiting on it),
//!   so that its copy's cursors never answer a legacy client again;
//! - `handed <public_id> <gateway>`: the gateway that answered the session's legacy polls
//!   before left where its views stand for that gateway (`hand_over`, `take_handover`).
//!
//! What a notification says is only a hint to read the row (anyone may NOTIFY).

use crate::sessions::poll_cursor::PollCursor;
use crate::sessions::session::User;
use deadpool_postgres::ClientWrapper;
use serde::Deserialize;
use serde_json::{Map, Value};

pub const CHANNEL: &str = "pgplace_sessions";

/// A session as stored.
#[derive(Debug)]
pub struct Stored {
    pub public_id: i64,
    pub version: i64,
    pub user: Option<User>,
    pub views: Vec<StoredView>,
}

#[derive(Debug, Deserialize)]
pub struct StoredView {
    pub key: String,
    pub view: String,
    pub params: Map<String, Value>,
    /// A board view's starting seq.
    pub seq: Option<i64>,
    pub sub_id: i64,
}

/// What another gateway said about a session.
#[derive(Debug, PartialEq)]
pub enum Message {
    Gone { public_id: i64 },
    Drop { public_id: i64, gateway: u64 },
    Handed { public_id: i64, gateway: u64 },
}

impl Message {
    pub fn parse(text: &str) -> Option<Message> {
        let mut words = text.split(' ');
        let message = match (words.next()?, words.next()?.parse().ok()?) {
            ("gone", public_id) => Message::Gone { public_id },
            ("drop", public_id) => Message::Drop {
                public_id,
                gateway: u64::from_str_radix(words.next()?, 16).ok()?,
            },
            ("handed", public_id) => Message::Handed {
                public_id,
                gateway: u64::from_str_radix(words.next()?, 16).ok()?,
            },
            _ => return None,
        };
        words.next().is_none().then_some(message)
    }
}

/// A gateway's id as the database stores it (the bits of the u64).
fn gateway_column(gateway: u64) -> i64 {
    gateway as i64
}

/// Stores a new session, held by `gateway`; its public id.
pub async fn create(
    client: &ClientWrapper,
    id: &str,
    gateway: u64,
) -> Result<i64, tokio_postgres::Error> {
    let statement = client
        .prepare_cached("SELECT place.session_create($1, $2)")
        .await?;
    let row = client
        .query_one(&statement, &[&id, &gateway_column(gateway)])
        .await?;
    Ok(row.get(0))
}

pub async fn load(
    client: &ClientWrapper,
    id: &str,
) -> Result<Option<Stored>, tokio_postgres::Error> {
    let statement = client
        .prepare_cached(
            // users.guest by name from the row: a schema before 0.8.9 has no such column.
            "SELECT s.public_id, s.version, s.user_id, s.user_name, s.views, \
                    coalesce((SELECT (to_jsonb(u) ->> 'guest')::boolean FROM place.users u \
                              WHERE u.id = s.user_id), false) \
             FROM place.session_load($1) s",
        )
        .await?;
    let Some(row) = client.query_opt(&statement, &[&id]).await? else {
        return Ok(None);
    };
    let user = match (
        row.get::<_, Option<i64>>(2),
        row.get::<_, Option<String>>(3),
    ) {
        (Some(id), Some(name)) => Some(User {
            id,
            name,
            guest: row.get(5),
        }),
        _ => None,
    };
    let views: Vec<Value> = serde_json::from_value(row.get(4)).unwrap_or_default();
    let views = views
        .into_iter()
        .filter_map(|view| {
            serde_json::from_value(view.clone())
                .inspect_err(|error| {
                    tracing::warn!(
                        "a stored subscription that does not read back ({error}): {view}"
                    )
                })
                .ok()
        })
        .collect();
    Ok(Some(Stored {
        public_id: row.get(0),
        version: row.get(1),
        user,
        views,
    }))
}

/// The functions that change a session return its new version, or NULL (unknown session);
/// the database tells the other gateways (`drop`).
pub async fn set_user(
    client: &ClientWrapper,
    id: &str,
    user: Option<i64>,
    gateway: u64,
) -> Result<Option<i64>, tokio_postgres::Error> {
    let statement = client
        .prepare_cached("SELECT place.session_set_user($1, $2, $3)")
        .await?;
    let row = client
        .query_one(&statement, &[&id, &user, &gateway_column(gateway)])
        .await?;
    Ok(row.get(0))
}

/// A subscription as stored: enough for another gateway to make it again.
pub struct NewView<'a> {
    pub key: &'a str,
    pub view: &'a str,
    pub params: &'a Map<String, Value>,
    pub board: Option<i64>,
    pub seq: Option<i64>,
    pub sub_id: u64,
}

pub async fn subscribe(
    client: &ClientWrapper,
    id: &str,
    view: &NewView<'_>,
    gateway: u64,
) -> Result<Option<i64>, tokio_postgres::Error> {
    let statement = client
        .prepare_cached("SELECT place.session_subscribe($1, $2, $3, $4, $5, $6, $7, $8)")
        .await?;
    let params = Value::Object(view.params.clone());
    // Stored as the bits of the u64 (the column is a bigint).
    let sub_id = view.sub_id as i64;
    let row = client
        .query_one(
            &statement,
            &[
                &id,
                &view.key,
                &view.view,
                &params,
                &view.board,
                &view.seq,
                &sub_id,
                &gateway_column(gateway),
            ],
        )
        .await?;
    Ok(row.get(0))
}

pub async fn unsubscribe(
    client: &ClientWrapper,
    id: &str,
    key: &str,
    gateway: u64,
) -> Result<Option<i64>, tokio_postgres::Error> {
    let statement = client
        .prepare_cached("SELECT place.session_unsubscribe($1, $2, $3)")
        .await?;
    let row = client
        .query_one(&statement, &[&id, &key, &gateway_column(gateway)])
        .await?;
    Ok(row.get(0))
}

/// What `move_to` found.
#[derive(Debug, Clone, Copy)]
pub struct Moved {
    pub version: i64,
    /// The gateway that answered the session's legacy polls before (None: none).
    pub previous: Option<u64>,
    /// A hand-over for this gateway is already there (left for an earlier try).
    pub handed: bool,
}

/// `gateway` answers the session's legacy polls from now on (the others drop their copy).
/// None when the session is unknown.
pub async fn move_to(
    client: &ClientWrapper,
    id: &str,
    gateway: u64,
) -> Result<Option<Moved>, tokio_postgres::Error> {
    let statement = client
        .prepare_cached("SELECT version, previous, handed FROM place.session_move($1, $2)")
        .await?;
    let row = client
        .query_opt(&statement, &[&id, &gateway_column(gateway)])
        .await?;
    Ok(row.map(|row| {
        let previous: Option<i64> = row.get(1);
        Moved {
            version: row.get(0),
            previous: previous.map(|p| p as u64),
            handed: row.get(2),
        }
    }))
}

/// Leaves where the session's legacy views stood on this gateway (`from`) for the gateway
/// that holds the session now; that gateway (None: nobody holds it, or it is gone).
pub async fn hand_over(
    client: &ClientWrapper,
    id: &str,
    from: u64,
    positions: &PollCursor,
) -> Result<Option<u64>, tokio_postgres::Error> {
    let statement = client
        .prepare_cached("SELECT place.session_hand_over($1, $2, $3)")
        .await?;
    let positions = serde_json::to_value(positions).expect("cursors serialize");
    let row = client
        .query_one(&statement, &[&id, &gateway_column(from), &positions])
        .await?;
    Ok(row.get::<_, Option<i64>>(0).map(|g| g as u64))
}

/// What a previous holder left for `gateway` (taken: it is gone from the row). None when
/// nothing is there for it yet, or it does not read as positions.
pub async fn take_handover(
    client: &ClientWrapper,
    id: &str,
    gateway: u64,
) -> Result<Option<PollCursor>, tokio_postgres::Error> {
    let statement = client
        .prepare_cached("SELECT place.session_take_handover($1, $2)")
        .await?;
    let row = client
        .query_one(&statement, &[&id, &gateway_column(gateway)])
        .await?;
    let Some(positions) = row.get::<_, Option<Value>>(0) else {
        return Ok(None);
    };
    Ok(serde_json::from_value(positions.clone())
        .inspect_err(|error| {
            tracing::warn!("a hand-over that does not read as positions ({error}): {positions}")
        })
        .ok())
}

/// Version and holder of sessions by public id (the missing ones are gone).
pub async fn states(
    client: &ClientWrapper,
    public_ids: &[i64],
) -> Result<Vec<(i64, i64, Option<u64>)>, tokio_postgres::Error> {
    let statement = client
        .prepare_cached("SELECT public_id, version, holder FROM place.session_states($1)")
        .await?;
    let rows = client.query(&statement, &[&public_ids]).await?;
    Ok(rows
        .iter()
        .map(|row| {
            let holder: Option<i64> = row.get(2);
            (row.get(0), row.get(1), holder.map(|h| h as u64))
        })
        .collect())
}

pub async fn destroy(client: &ClientWrapper, id: &str) -> Result<bool, tokio_postgres::Error> {
    let statement = client
        .prepare_cached("SELECT place.session_destroy($1)")
        .await?;
    Ok(client.query_one(&statement, &[&id]).await?.get(0))
}

pub async fn seen(client: &ClientWrapper, public_ids: &[i64]) -> Result<(), tokio_postgres::Error> {
    let statement = client
        .prepare_cached("SELECT place.session_seen($1)")
        .await?;
    client.execute(&statement, &[&public_ids]).await?;
    Ok(())
}

pub async fn expire(client: &ClientWrapper, idle_secs: f64) -> Result<i32, tokio_postgres::Error> {
    let statement = client
        .prepare_cached("SELECT place.session_expire(make_interval(secs => $1))")
        .await?;
    Ok(client.query_one(&statement, &[&idle_secs]).await?.get(0))
}

/// Subscriptions watching each board, over every gateway.
pub async fn watchers(client: &ClientWrapper) -> Result<Vec<(i64, i64)>, tokio_postgres::Error> {
    let statement = client
        .prepare_cached("SELECT board_id, watching FROM place.session_watchers()")
        .await?;
    let rows = client.query(&statement, &[]).await?;
    Ok(rows.iter().map(|row| (row.get(0), row.get(1))).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_read_as_sent() {
        assert_eq!(
            Message::parse("gone 12"),
            Some(Message::Gone { public_id: 12 })
        );
        assert_eq!(
            Message::parse("drop 7 ff"),
            Some(Message::Drop {
                public_id: 7,
                gateway: 255
            })
        );
        assert_eq!(
            Message::parse("handed 8 10"),
            Some(Message::Handed {
                public_id: 8,
                gateway: 16
            })
        );
        for bad in [
            "",
            "gone",
            "gone x",
            "drop 7",
            "drop 7 zz",
            "gone 1 2",
            "hello 1",
        ] {
            assert_eq!(Message::parse(bad), None, "{bad}");
        }
    }
}
