//! Every query the gateway sends (prepared once per pooled connection). Each is one statement in autocommit: the gateway never
//! opens a transaction, so a request dropped at any point cannot leave a pooled
//! connection inside one. Every read of a board's seq or placements waits until what it
//! read is durable before it returns (`durable`: a placement may have been committed
//! asynchronously). How connections are made, TLS included, from a database URL: `tls`
//! (`Target::parse`). A board's placer lease: `placers`.

pub mod durable;
pub mod placers;
pub mod tls;

use crate::mirror::freezing::{Freezing, FrozenRow};
use crate::mirror::snapshot::{Past, Settings, Snapshot};
use crate::params::BoardRef;
use deadpool_postgres::{
    ClientWrapper, Hook, HookError, Manager, ManagerConfig, Pool, RecyclingMethod, Runtime,
};
use pgplace_core::payload::Placement;
use std::sync::OnceLock;
use std::time::Duration;
pub use tls::{with_causes, Target, Tls};
use tokio_postgres::{NoTls, Row};

/// The primary's pool: up to 10 s for a connection (a restart), 5 s to make one (and 5 s
/// more for its first query, `load_library`). A bare
/// `&tokio_postgres::Config` connects without TLS; a `Target` as its URL said.
pub fn pool(target: impl Into<Target>, size: u32) -> Pool {
    pool_waiting(
        target.into(),
        size,
        Duration::from_secs(10),
        Duration::from_secs(5),
    )
}

/// The replica's pool: a short wait for a connection (2 s, 2 s to make one, 2 s for its
/// first query), so that a replica that is down sends its reads to the primary quickly.
pub fn replica_pool(target: impl Into<Target>, size: u32) -> Pool {
    pool_waiting(
        target.into(),
        size,
        Duration::from_secs(2),
        Duration::from_secs(2),
    )
}

/// A pooled connection for the request being answered, charged first to its client's
/// database budget (`limits::charge_database`: waits while it is spent, -32011 past
/// `--db-wait-ms`). Every request path takes its connections here; the listener, the
/// batcher and upkeep take theirs directly.
pub async fn checkout(pool: &Pool) -> Result<Checked, crate::errors::RpcError> {
    let permit = crate::limits::charge_database().await?;
    let client = pool.get().await.map_err(crate::errors::from_pool)?;
    Ok(Checked::new(client, permit))
}

/// A pooled connection for the gateway's own work (catching up, reading a list view),
/// waiting while the pool has none to give (all in use, or the database away: logged as
/// `who` waiting); a connection the database refused is an error at once.
pub async fn client_when_free(
    pool: &Pool,
    who: &(dyn std::fmt::Display + Sync),
) -> Result<deadpool_postgres::Object, tokio_postgres::Error> {
    loop {
        match pool.get().await {
            Ok(client) => return Ok(client),
            Err(deadpool_postgres::PoolError::Backend(error)) => return Err(error),
            Err(error) => {
                tracing::warn!("{who} waits for a database connection: {error}");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
}

/// A pooled connection taken for a request, with its address's permit
/// (`--db-connections-per-address`) until it goes back.
pub struct Checked {
    client: deadpool_postgres::Object,
    _permit: Option<crate::limits::DatabasePermit>,
}

impl Checked {
    pub fn new(
        client: deadpool_postgres::Object,
        permit: Option<crate::limits::DatabasePermit>,
    ) -> Self {
        Checked {
            client,
            _permit: permit,
        }
    }
}

impl std::ops::Deref for Checked {
    type Target = deadpool_postgres::Object;

    fn deref(&self) -> &Self::Target {
        &self.client
    }
}

fn pool_waiting(target: Target, size: u32, wait: Duration, create: Duration) -> Pool {
    let recycling = ManagerConfig {
        recycling_method: RecyclingMethod::Fast,
    };
    let manager = match target.tls {
        Tls::Off => Manager::from_config(target.config, NoTls, recycling),
        Tls::On(tls) => Manager::from_config(target.config, tls, recycling),
    };
    Pool::builder(manager)
        .max_size(size as usize)
        .runtime(Runtime::Tokio1)
        .wait_timeout(Some(wait))
        .create_timeout(Some(create))
        .post_create(Hook::async_fn(move |client, _| {
            Box::pin(load_library(client, create))
        }))
        .build()
        .expect("a pool with a runtime and timeouts builds")
}

/// Loads pgplace's library into a new connection's backend with a call of one of its
/// functions (the cheapest, pure), so that `pgplace.require_synchronous_standby` checks
/// its first transaction's commit too: the session functions are SQL and load nothing.
/// An error is logged and the connection kept (what it was opened for says more; its
/// SQL-only writes then go unchecked until a call of the library's loads it). No answer
/// within `timeout` (deadpool's create timeout does not cover hooks) drops the connection.
async fn load_library(client: &mut ClientWrapper, timeout: Duration) -> Result<(), HookError> {
    let call = client.simple_query("SELECT place.bitfield_get('\\x00', 1, 0)");
    match tokio::time::timeout(timeout, call).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(error)) => {
            tracing::warn!("pgplace's library not loaded on a new connection: {error}");
            Ok(())
        }
        Err(_) => Err(HookError::message(format!(
            "a new connection did not answer its first query within {timeout:?}"
        ))),
    }
}

/// The settings a release added, read by name so that an older schema (null) still works:
/// freeze_after came with 0.2.0, palette_names with 0.8.10.
const BY_NAME: &str =
    "extract(epoch FROM (to_jsonb(b) ->> 'freeze_after')::interval)::float8 AS freeze_after, \
     to_jsonb(b) -> 'palette_names' AS palette_names";

const SETTINGS: &str = "b.id, b.name, b.width, b.height, b.bits_per_tile, b.palette, \
     extract(epoch FROM b.cooldown)::float8 AS cooldown, b.state, b.seq";

fn settings(row: &Row) -> Settings {
    Settings {
        id: row.get("id"),
        name: row.get("name"),
        width: row.get("width"),
        height: row.get("height"),
        bits_per_tile: row.get("bits_per_tile"),
        palette: row.get("palette"),
        palette_names: row
            .get::<_, Option<serde_json::Value>>("palette_names")
            .and_then(|names| serde_json::from_value(names).ok()),
        cooldown: row.get("cooldown"),
        state: row.get("state"),
        freeze_after: row.get("freeze_after"),
    }
}

pub async fn board_id(
    client: &ClientWrapper,
    board: &BoardRef,
) -> Result<Option<i64>, tokio_postgres::Error> {
    let row = match board {
        BoardRef::Id(id) => {
            client
                .query_opt(
                    &client
                        .prepare_cached("SELECT id FROM place.boards WHERE id = $1")
                        .await?,
                    &[id],
                )
                .await?
        }
        BoardRef::Name(name) => {
            client
                .query_opt(
                    &client
                        .prepare_cached("SELECT id FROM place.boards WHERE name = $1")
                        .await?,
                    &[name],
                )
                .await?
        }
    };
    Ok(row.map(|r| r.get(0)))
}

/// The board's settings, seq and bits in one snapshot (one statement); then, on a board
/// with freeze_after, its frozen tiles (read after, so they cover every seq up to the
/// snapshot's).
pub async fn snapshot(
    client: &ClientWrapper,
    id: i64,
) -> Result<Option<Snapshot>, tokio_postgres::Error> {
    let sql = format!(
        "SELECT b.id, b.name, b.width, b.height, b.bits_per_tile, b.palette, \
         extract(epoch FROM b.cooldown)::float8 AS cooldown, b.state, {BY_NAME}, s.seq, s.bits \
         FROM place.boards b CROSS JOIN LATERAL place.board_bits(b.id) s WHERE b.id = $1"
    );
    let Some(row) = client
        .query_opt(&client.prepare_cached(&sql).await?, &[&id])
        .await?
    else {
        return Ok(None);
    };
    let settings = settings(&row);
    let seq: i64 = row.get("seq");
    let freezing = match settings.freeze_after {
        None => None,
        Some(after) => {
            let rows = frozen_tiles(client, id).await?;
            let after_us = (after * 1e6).round() as i64;
            let (width, height) = (settings.width, settings.height);
            Some(Freezing::new(
                after_us,
                width,
                height,
                seq,
                &rows,
                now_micros(),
            ))
        }
    };
    // The history up to seq never changes (but for compaction, which only shortens it).
    // Read last: its wait for durability covers the reads above.
    let recent =
        placements_up_to(client, id, seq, crate::mirror::recent::MAX_RECENT as i64).await?;
    Ok(Some(Snapshot {
        settings,
        seq,
        bits: row.get("bits"),
        freezing,
        recent,
    }))
}

/// The board's seq once every placement that has taken its seq has committed, and the
/// database's time then (microseconds since the Unix epoch): placements committed later
/// checked their tiles after it (`place.settled_seq`).
pub async fn settled_seq(
    client: &ClientWrapper,
    id: i64,
) -> Result<(i64, i64), tokio_postgres::Error> {
    let sql = "SELECT seq, (extract(epoch FROM at) * 1000000)::int8 FROM place.settled_seq($1)";
    let row = client
        .query_one(&client.prepare_cached(sql).await?, &[&id])
        .await?;
    durable::wait(client).await?;
    Ok((row.get(0), row.get(1)))
}

/// Every non-zero tile of the board and when it freezes (or froze).
async fn frozen_tiles(
    client: &ClientWrapper,
    id: i64,
) -> Result<Vec<FrozenRow>, tokio_postgres::Error> {
    let sql = "SELECT x, y, seq, (extract(epoch FROM frozen_at) * 1000000)::int8 \
               FROM place.frozen_tiles($1, 'infinity')";
    let rows = client
        .query(&client.prepare_cached(sql).await?, &[&id])
        .await?;
    Ok(rows
        .iter()
        .map(|row| FrozenRow {
            x: row.get(0),
            y: row.get(1),
            seq: row.get(2),
            frozen_at_us: row.get(3),
        })
        .collect())
}

/// Microseconds since the Unix epoch, by this machine's clock.
pub fn now_micros() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as i64)
}

/// The board's settings and seq (None once it is deleted).
pub async fn settings_and_seq(
    client: &ClientWrapper,
    id: i64,
) -> Result<Option<(Settings, i64)>, tokio_postgres::Error> {
    let sql = format!("SELECT {SETTINGS}, {BY_NAME} FROM place.boards b WHERE b.id = $1");
    let row = client
        .query_opt(&client.prepare_cached(&sql).await?, &[&id])
        .await?;
    durable::wait(client).await?;
    Ok(row.map(|row| (settings(&row), row.get("seq"))))
}

/// Every board's settings and seq, by id.
pub async fn list_boards(
    client: &ClientWrapper,
) -> Result<Vec<(Settings, i64)>, tokio_postgres::Error> {
    let sql = format!("SELECT {SETTINGS}, {BY_NAME} FROM place.boards b ORDER BY b.id");
    let rows = client
        .query(&client.prepare_cached(&sql).await?, &[])
        .await?;
    durable::wait(client).await?;
    Ok(rows
        .iter()
        .map(|row| (settings(row), row.get("seq")))
        .collect())
}

/// Placements with seq > `after`, in seq order, at most `limit`.
pub async fn placements_after(
    client: &ClientWrapper,
    board: i64,
    after: i64,
    limit: i64,
) -> Result<Vec<Placement>, tokio_postgres::Error> {
    placements_between(client, board, after, i64::MAX, limit).await
}

/// Board `board`'s placements after seq `after` up to seq `last`, in seq order (at most
/// `limit`).
pub async fn placements_between(
    client: &ClientWrapper,
    board: i64,
    after: i64,
    last: i64,
    limit: i64,
) -> Result<Vec<Placement>, tokio_postgres::Error> {
    // The listener's read after each notification: where the schema has the wait, it is
    // in the same statement, an InitPlan run once after the statement's snapshot is
    // taken and before the rows are read (one statement per notification, not two).
    // The bounds are sub-SELECTs so that the plan is the same whatever they are: given
    // their values, the planner costs a short range below its generic plan, so the
    // prepared statement was planned again on every read (100 µs of the database's CPU
    // per notification and gateway, tests/bench/README.md); now it keeps one plan.
    // Since 0.8.13 it waits for the rows' writers alone: the wait for everything flushed the
    // WAL of the group in flight too, which then needed a flush of its own (≈ 7 µs of the
    // database's CPU per placement with two gateways, tests/bench/README.md).
    let sql = if durable::writers_supported(client).await? {
        "SELECT seq, x, y, color, user_id, placed_at FROM place.placements \
         WHERE board_id = $1 AND seq > (SELECT $2::bigint) AND seq <= (SELECT $3::bigint) \
         AND place.await_durable(xmin) ORDER BY seq LIMIT (SELECT $4::bigint)"
    } else if durable::supported(client).await? {
        "SELECT seq, x, y, color, user_id, placed_at FROM place.placements \
         WHERE board_id = $1 AND seq > (SELECT $2::bigint) AND seq <= (SELECT $3::bigint) \
         AND (SELECT true FROM place.await_durable()) ORDER BY seq LIMIT (SELECT $4::bigint)"
    } else {
        "SELECT seq, x, y, color, user_id, placed_at FROM place.placements \
         WHERE board_id = $1 AND seq > (SELECT $2::bigint) AND seq <= (SELECT $3::bigint) \
         ORDER BY seq LIMIT (SELECT $4::bigint)"
    };
    let rows = client
        .query(
            &client.prepare_cached(sql).await?,
            &[&board, &after, &last, &limit],
        )
        .await?;
    Ok(rows.iter().map(|row| placement(board, row)).collect())
}

/// A row of (seq, x, y, color, user_id, placed_at).
fn placement(board: i64, row: &Row) -> Placement {
    Placement {
        board,
        seq: row.get(0),
        x: row.get(1),
        y: row.get(2),
        color: row.get(3),
        user: row.get(4),
        at: row
            .get::<_, chrono::DateTime<chrono::Utc>>(5)
            .timestamp_micros(),
    }
}

/// The newest `limit` placements with seq <= `seq`, oldest first.
pub async fn placements_up_to(
    client: &ClientWrapper,
    board: i64,
    seq: i64,
    limit: i64,
) -> Result<Vec<Placement>, tokio_postgres::Error> {
    let sql = "SELECT seq, x, y, color, user_id, placed_at FROM place.placements \
               WHERE board_id = $1 AND seq <= $2 ORDER BY seq DESC LIMIT $3";
    let rows = client
        .query(&client.prepare_cached(sql).await?, &[&board, &seq, &limit])
        .await?;
    durable::wait(client).await?;
    Ok(rows.iter().rev().map(|row| placement(board, row)).collect())
}

/// The newest placements of tile (x, y), newest first.
/// One placement of a tile, as `board.tile_history` answers it.
#[derive(serde::Serialize, schemars::JsonSchema)]
pub struct HistoryEntry {
    pub seq: i64,
    pub x: i32,
    pub y: i32,
    pub color: i32,
    /// The user's id.
    pub user: i64,
    pub user_name: String,
    /// RFC 3339, UTC, microseconds.
    pub placed_at: String,
}

pub async fn tile_history(
    client: &ClientWrapper,
    board: i64,
    x: i32,
    y: i32,
    limit: i64,
) -> Result<Vec<HistoryEntry>, tokio_postgres::Error> {
    let sql = "SELECT p.seq, p.color, p.user_id, u.name, p.placed_at FROM place.placements p \
               JOIN place.users u ON u.id = p.user_id \
               WHERE p.board_id = $1 AND p.x = $2 AND p.y = $3 ORDER BY p.seq DESC LIMIT $4";
    let rows = client
        .query(
            &client.prepare_cached(sql).await?,
            &[&board, &x, &y, &limit],
        )
        .await?;
    durable::wait(client).await?;
    Ok(rows
        .iter()
        .map(|row| {
            let at: chrono::DateTime<chrono::Utc> = row.get(4);
            HistoryEntry {
                seq: row.get(0),
                x,
                y,
                color: row.get(1),
                user: row.get(2),
                user_name: row.get(3),
                placed_at: crate::json::timestamp(at.timestamp_micros()),
            }
        })
        .collect())
}

/// The user whose token this is, as (id, name).
/// The user a token belongs to: (id, name, guest).
pub async fn user_for_token(
    client: &ClientWrapper,
    token: &str,
) -> Result<Option<(i64, String, bool)>, tokio_postgres::Error> {
    // users.guest by name from the row: a schema before 0.8.9 has no such column.
    let sql = "SELECT u.id, u.name, coalesce((to_jsonb(u) ->> 'guest')::boolean, false) \
               FROM place.users u WHERE u.id = place.user_for_token($1)";
    let row = client
        .query_opt(&client.prepare_cached(sql).await?, &[&token])
        .await?;
    Ok(row.map(|row| (row.get(0), row.get(1), row.get(2))))
}

/// A new guest: (id, name, token).
pub async fn create_guest(
    client: &ClientWrapper,
) -> Result<(i64, String, String), tokio_postgres::Error> {
    let sql = "SELECT user_id, user_name, token FROM place.create_guest()";
    let row = client
        .query_one(&client.prepare_cached(sql).await?, &[])
        .await?;
    Ok((row.get(0), row.get(1), row.get(2)))
}

/// The user a site's identity provider calls `subject` (made on first sight with `name`).
pub async fn user_for_subject(
    client: &ClientWrapper,
    issuer: &str,
    subject: &str,
    name: Option<&str>,
) -> Result<(i64, String), tokio_postgres::Error> {
    let sql = "SELECT user_id, user_name FROM place.user_for_subject($1, $2, $3)";
    let row = client
        .query_one(
            &client.prepare_cached(sql).await?,
            &[&issuer, &subject, &name],
        )
        .await?;
    Ok((row.get(0), row.get(1)))
}

/// One placement's outcome from `place.place_many`.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub placed: bool,
    pub seq: Option<i64>,
    /// None when the tile is frozen (the database says 'infinity': never).
    pub next_allowed_at: Option<chrono::DateTime<chrono::Utc>>,
}

pub struct PlaceItem {
    /// The session it is placed through, by its public id (`place.session_users_public`
    /// reads its user in the placement's statement, 0.8.12) and by its secret id where
    /// this gateway has it (`place.session_users`, 0.8.11; a placement forwarded by
    /// another gateway comes without it).
    pub session_public: i64,
    pub session: Option<std::sync::Arc<str>>,
    /// The user the gateway's copy of the session names (the schemas before 0.8.11).
    pub user: i64,
    pub x: i32,
    pub y: i32,
    pub color: i32,
    /// The client's idempotency key (`place.place_many`'s `keys`).
    pub key: Option<String>,
}

/// place_many's call with `$args`, as [committed durably, committed without waiting for
/// the WAL flush or a standby (then `durable::wait`)]: set_config joins the statement (one
/// statement: the gateway opens no transactions).
macro_rules! place_many_sql {
    ($args:literal) => {
        [
            place_many_sql!($args, ""),
            place_many_sql!($args, ", set_config('synchronous_commit', 'off', true)"),
        ]
    };
    ($args:literal, $commit:literal) => {
        // chrono has no infinity.
        concat!(
            "SELECT ord, placed, seq, \
             CASE WHEN next_allowed_at <> 'infinity' THEN next_allowed_at END \
             FROM place.place_many(",
            $args,
            ")",
            $commit,
            " ORDER BY ord"
        )
    };
}
const PLACE_MANY: [&str; 2] = place_many_sql!("$1, $2, $3, $4, $5");
const PLACE_MANY_KEYED: [&str; 2] = place_many_sql!("$1, $2, $3, $4, $5, $6");
/// The same with each placement's user read from its session in the statement
/// (`place.session_users`, 0.8.11), by the sessions' public ids since 0.8.12
/// (`place.session_users_public`).
const PLACE_MANY_BY_SESSION: [&str; 2] = place_many_sql!("$1, place.session_users($2), $3, $4, $5");
const PLACE_MANY_BY_SESSION_KEYED: [&str; 2] =
    place_many_sql!("$1, place.session_users($2), $3, $4, $5, $6");
const PLACE_MANY_BY_PUBLIC: [&str; 2] =
    place_many_sql!("$1, place.session_users_public($2), $3, $4, $5");
const PLACE_MANY_BY_PUBLIC_KEYED: [&str; 2] =
    place_many_sql!("$1, place.session_users_public($2), $3, $4, $5, $6");

/// Whether the database has `place.session_users` (`..._public`) and this role may call it.
static SESSION_USERS: OnceLock<bool> = OnceLock::new();
static SESSION_USERS_PUBLIC: OnceLock<bool> = OnceLock::new();

/// How a group's statement names each placement's user.
#[derive(Clone, Copy)]
enum UsersBy {
    /// The sessions' public ids (0.8.12).
    PublicId,
    /// The sessions' secret ids (0.8.11).
    Id,
    /// The users the gateway's copies name (before 0.8.11).
    Copy,
}

/// Whether function `signature` exists and this role may call it; asked once per process
/// and remembered in `known`.
async fn callable(
    client: &ClientWrapper,
    known: &OnceLock<bool>,
    signature: &str,
) -> Result<bool, tokio_postgres::Error> {
    if let Some(known) = known.get() {
        return Ok(*known);
    }
    let sql = "SELECT coalesce(has_function_privilege(to_regprocedure($1), 'EXECUTE'), false)";
    let row = client.query_one(sql, &[&signature]).await?;
    Ok(*known.get_or_init(|| row.get(0)))
}

/// Places a group in one transaction; outcomes in the order of `items`, once the group is
/// durable. `asynchronous`, where the schema allows (`durable`): the transaction commits
/// before it is durable and this waits for durability in a statement of its own, so the
/// board's seq lock is free during the WAL flush and the synchronous standby's answer, for
/// other gateways' groups. An error after the commit (the wait's connection lost) leaves
/// the group's fate unknown, as a connection lost during a synchronous commit does.
pub async fn place_many(
    client: &ClientWrapper,
    board: i64,
    items: &[PlaceItem],
    asynchronous: bool,
) -> Result<Vec<Outcome>, tokio_postgres::Error> {
    let asynchronous = asynchronous && durable::supported(client).await?;
    let by = if callable(
        client,
        &SESSION_USERS_PUBLIC,
        "place.session_users_public(bigint[])",
    )
    .await?
    {
        UsersBy::PublicId
    } else if callable(client, &SESSION_USERS, "place.session_users(text[])").await? {
        UsersBy::Id
    } else {
        UsersBy::Copy
    };
    let users: Vec<i64> = items.iter().map(|i| i.user).collect();
    let publics: Vec<i64> = items.iter().map(|i| i.session_public).collect();
    // Only placements made here reach a schema before 0.8.12 (forwarding needs its lease).
    let sessions: Vec<&str> = items
        .iter()
        .map(|i| i.session.as_deref().unwrap_or_default())
        .collect();
    let xs: Vec<i32> = items.iter().map(|i| i.x).collect();
    let ys: Vec<i32> = items.iter().map(|i| i.y).collect();
    let colors: Vec<i32> = items.iter().map(|i| i.color).collect();
    // Without keys the call is 0.8.6's, which a schema not yet updated (ALTER EXTENSION
    // pgplace UPDATE) also has.
    let keys: Option<Vec<Option<&str>>> = items
        .iter()
        .any(|i| i.key.is_some())
        .then(|| items.iter().map(|i| i.key.as_deref()).collect());
    let mut params: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = match by {
        UsersBy::PublicId => vec![&board, &publics, &xs, &ys, &colors],
        UsersBy::Id => vec![&board, &sessions, &xs, &ys, &colors],
        UsersBy::Copy => vec![&board, &users, &xs, &ys, &colors],
    };
    let statements = match (&keys, by) {
        (Some(_), UsersBy::PublicId) => PLACE_MANY_BY_PUBLIC_KEYED,
        (Some(_), UsersBy::Id) => PLACE_MANY_BY_SESSION_KEYED,
        (Some(_), UsersBy::Copy) => PLACE_MANY_KEYED,
        (None, UsersBy::PublicId) => PLACE_MANY_BY_PUBLIC,
        (None, UsersBy::Id) => PLACE_MANY_BY_SESSION,
        (None, UsersBy::Copy) => PLACE_MANY,
    };
    if let Some(keys) = &keys {
        params.push(keys);
    }
    let sql = statements[usize::from(asynchronous)];
    let rows = client
        .query(&client.prepare_cached(sql).await?, &params)
        .await?;
    if asynchronous {
        durable::wait(client).await?;
    }
    Ok(rows
        .iter()
        .map(|row| Outcome {
            placed: row.get(1),
            seq: row.get(2),
            next_allowed_at: row.get(3),
        })
        .collect())
}

/// The board as it was at `at` (text that Postgres reads as a timestamptz, in the
/// session's time zone when it names none), from `place.board_at`: its seq, its size then
/// (it may have been resized since) and its bits.
pub async fn board_at(
    client: &ClientWrapper,
    board: i64,
    at: &str,
) -> Result<Option<Past>, tokio_postgres::Error> {
    let sql = "SELECT seq, width, height, bits FROM place.board_at($1, $2::text::timestamptz)";
    let row = client
        .query_opt(&client.prepare_cached(sql).await?, &[&board, &at])
        .await?;
    durable::wait(client).await?;
    Ok(row.as_ref().map(past))
}

/// A row of `place.board_at` or `place.board_at_seq`: (seq, width, height, bits).
fn past(row: &Row) -> Past {
    Past {
        seq: row.get(0),
        width: row.get(1),
        height: row.get(2),
        bits: row.get(3),
    }
}

/// The board as it was at seq `seq` (`place.board_at_seq`).
pub async fn board_at_seq(
    client: &ClientWrapper,
    board: i64,
    seq: i64,
) -> Result<Option<Past>, tokio_postgres::Error> {
    let sql = "SELECT seq, width, height, bits FROM place.board_at_seq($1, $2)";
    let row = client
        .query_opt(&client.prepare_cached(sql).await?, &[&board, &seq])
        .await?;
    durable::wait(client).await?;
    Ok(row.as_ref().map(past))
}

/// One read of a list view (`place.view_rows`).
pub struct ViewRead {
    pub pos: i64,
    pub max_limit: i32,
    pub relid: u32,
    pub rows: Vec<serde_json::Value>,
    /// Only sessions bound to a user may subscribe.
    pub signed_in: bool,
    /// The view's definition as these rows were read with it (`DEFINITION`).
    pub definition: Option<String>,
}

/// A view's definition as one text, to tell whether it changed: its whole row of
/// `place.views` (what `create_view` set, and the query the watch made of it).
const DEFINITION: &str = "v::text";

/// The definitions of the views among `names` that exist, by name.
pub async fn view_definitions(
    client: &ClientWrapper,
    names: &[String],
) -> Result<std::collections::HashMap<String, String>, tokio_postgres::Error> {
    let sql = format!("SELECT v.name, {DEFINITION} FROM place.views v WHERE v.name = ANY($1)");
    let rows = client
        .query(&client.prepare_cached(&sql).await?, &[&names])
        .await?;
    Ok(rows.iter().map(|row| (row.get(0), row.get(1))).collect())
}

pub async fn view_rows(
    client: &ClientWrapper,
    name: &str,
    limit: Option<i32>,
) -> Result<ViewRead, tokio_postgres::Error> {
    // One statement, so one snapshot: the definition is the one the rows were read with.
    let sql = format!(
        "SELECT r.pos, r.max_limit, r.relid, r.rows, r.signed_in, \
                (SELECT {DEFINITION} FROM place.views v WHERE v.name = $1) AS definition \
         FROM place.view_rows($1, $2) r"
    );
    let statement = client.prepare_cached(&sql).await?;
    let row = client.query_one(&statement, &[&name, &limit]).await?;
    let rows = match row.get::<_, serde_json::Value>("rows") {
        serde_json::Value::Array(rows) => rows,
        _ => Vec::new(),
    };
    Ok(ViewRead {
        pos: row.get("pos"),
        max_limit: row.get("max_limit"),
        relid: row.get("relid"),
        rows,
        signed_in: row.get("signed_in"),
        definition: row.get("definition"),
    })
}

/// The names among `views` (all over one table) whose filter one of `rows` matches.
pub async fn views_touched(
    client: &ClientWrapper,
    views: &[String],
    rows: &serde_json::Value,
) -> Result<Vec<String>, tokio_postgres::Error> {
    let statement = client
        .prepare_cached("SELECT place.views_touched($1, $2)")
        .await?;
    Ok(client.query_one(&statement, &[&views, rows]).await?.get(0))
}

/// Gives the changes committed since the last position the next one; the newest position.
pub async fn tick(client: &ClientWrapper) -> Result<i64, tokio_postgres::Error> {
    let statement = client.prepare_cached("SELECT place.tick()").await?;
    Ok(client.query_one(&statement, &[]).await?.get(0))
}

/// The positions after `after` (at most `limit`), each with its summary (`place.change_feed`).
pub async fn change_feed(
    client: &ClientWrapper,
    after: i64,
    limit: i32,
) -> Result<Vec<(i64, String)>, tokio_postgres::Error> {
    let statement = client
        .prepare_cached("SELECT pos, payload FROM place.change_feed($1, $2)")
        .await?;
    Ok(client
        .query(&statement, &[&after, &limit])
        .await?
        .iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect())
}
