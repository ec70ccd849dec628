//! Helpers for the client-level tests, which run against the local cluster that
//! `./pgplace.sh test` starts (its admin URL comes in `PGPLACE_TEST_ADMIN_URL`).
//!
//! # Layout
//! - this file: fresh databases, connections, listeners; `gateway`: an in-process
//!   gateway and a JSON-RPC client for it; `stream_check`: a board session's events checked
//!   against the history; `list_check`: a list view client that applies events;
//!   `raw_http`: HTTP/1.x written byte for byte over TCP, answers read with deadlines;
//!   `curl`, `urllib`: a JSON-RPC request made by curl or Python's urllib, one process
//!   per request.
//! - `layout`: the layouts the crates' `lib.rs` describe, read from the code; `alone`: a
//!   test that must not run beside another.
//!
//! The tests, three binaries by layer, a file a feature:
//! - `tests/database/` (no gateway): `cooldown_race.rs` (≥ 100 connections racing as one
//!   user), `randomized.rs` (many users, `place` and `place_many` mixed, invariants at the
//!   end), `notifications.rs` (what a LISTENer receives, and when), `dump_restore.rs`
//!   (pg_dump keeps every board, placement, token, watch and view), `watch_concurrency.rs`
//!   (the change log under writers at every isolation level and two tickers),
//!   `held_snapshot.rs` (placements while a snapshot is held), `sql_fuzz.rs` (every function
//!   with random arguments, as the superuser and as each role), `layout.rs` (files only).
//! - `tests/gateway/` (gateways in this process, side by side): `protocol.rs` (the Qik
//!   transcript, JSON-RPC envelopes and errors, `/bits`), `stream.rs` (board sessions exact
//!   while LISTEN is killed), `cancel.rs` (requests dropped mid-way leave no connection in a
//!   transaction), `hostile.rs` (malformed, oversized, slow and never-reading clients),
//!   `knobs.rs`, `freezing.rs`, `presence.rs`, `png.rs` (settings, frozen tiles, watchers
//!   and pictures reaching clients), `lists.rs` and `lists_random.rs` (list views),
//!   `regions.rs`, `as_player.rs` (a gateway logged in as a member of `pgplace_player`
//!   only), `forged_notifications.rs` (what a login with no grants notifies changes nothing),
//!   `limits.rs` and `gone_clients.rs` (abuse limits, legacy answers that never arrived),
//!   `legacy_names.rs` (a legacy client's own method names, a Qik-style exchange),
//!   `http_stacks.rs` (a legacy session polled by curl, Python, Java, HTTP/1.0 and nginx),
//!   `retry_safe_placement.rs` (a lost `board.place` answer retried with its key).
//! - `tests/fleet/` (one test at a time): `scale_out.rs` (several gateways on one database:
//!   acks, moves, `since`), `scale_out_faults.rs` (with `soak`, `processes`: gateway
//!   processes behind nginx through kills, LISTEN loss, a PostgreSQL restart and an nginx
//!   reload; the `soak` binary is its long form), `pg_restart.rs`, `replica.rs` (reads from
//!   a standby), `shutdown.rs` (a graceful stop under load), `metrics.rs`,
//!   `client_input.rs` and `memory.rs` (what this process's /metrics and memory show),
//!   `ha_failover.rs` (the primary killed under load on pg_auto_failover, `tests/ha/ha.sh`;
//!   run by `./pgplace.sh test` with `--ignored` against the setup it starts).

pub mod curl;
pub mod gateway;
pub mod layout;
pub mod list_check;
pub mod processes;
pub mod raw_http;
pub mod soak;
pub mod stream_check;
pub mod urllib;

/// Held by a test for its whole run so that no other test of the process runs beside it
/// (the fleet binary's: one restarts the cluster, one reads what every gateway of the
/// process counts or how much memory the process holds). A test that failed while holding
/// it leaves it usable.
pub fn alone() -> std::sync::MutexGuard<'static, ()> {
    static ALONE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    ALONE
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

use futures::StreamExt;
use tokio::sync::mpsc;
use tokio_postgres::{AsyncMessage, Client, NoTls, Notification};

pub fn admin_url() -> String {
    std::env::var("PGPLACE_TEST_ADMIN_URL")
        .unwrap_or_else(|_| "postgresql://postgres@127.0.0.1:54329/postgres".to_string())
}

/// Runs sql/roles.sql in the database at `url` (as a DBA does: psql, as the superuser),
/// naming its three groups `reader`, `player` and `admin` (roles belong to the whole
/// cluster: each test names its own). `PSQL` names the psql to use.
pub async fn run_roles_sql(url: &str, reader: &str, player: &str, admin: &str) {
    let psql = std::env::var("PSQL").unwrap_or_else(|_| "/usr/lib/postgresql/15/bin/psql".into());
    let roles_sql = concat!(env!("CARGO_MANIFEST_DIR"), "/../sql/roles.sql");
    let output = tokio::process::Command::new(&psql)
        .args(["-X", "-q", "-v", "ON_ERROR_STOP=1"])
        .args(["-v", &format!("pgplace_reader={reader}")])
        .args(["-v", &format!("pgplace_player={player}")])
        .args(["-v", &format!("pgplace_admin={admin}")])
        .args(["-d", url, "-f", roles_sql])
        .env("PGOPTIONS", "-c client_min_messages=warning")
        .output()
        .await
        .unwrap_or_else(|e| panic!("running {psql} (set PSQL to another psql): {e}"));
    assert!(
        output.status.success(),
        "psql -f sql/roles.sql failed: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The URL of database `name` on the test cluster.
pub fn url_of(name: &str) -> String {
    let admin = admin_url();
    let base = admin
        .rsplit_once('/')
        .map_or(admin.as_str(), |(base, _)| base);
    format!("{base}/{name}")
}

pub async fn connect(url: &str) -> Client {
    let (client, connection) = tokio_postgres::connect(url, NoTls)
        .await
        .unwrap_or_else(|e| panic!("connecting to {url}: {e}"));
    tokio::spawn(async move {
        let _ = connection.await;
    });
    client
}

/// A new, empty database `name` with the extension, replacing any left by an earlier run.
pub async fn fresh_database(name: &str) -> String {
    let admin = connect(&admin_url()).await;
    recreate_database(&admin, name).await;
    let url = url_of(name);
    connect(&url)
        .await
        .batch_execute("CREATE EXTENSION pgplace")
        .await
        .expect("CREATE EXTENSION pgplace");
    url
}

/// Drops database `name` if it exists and creates it empty.
pub async fn recreate_database(admin: &Client, name: &str) {
    // Two statements: DROP/CREATE DATABASE cannot share an (implicit) transaction.
    admin
        .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        .await
        .expect("dropping the test database");
    admin
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .await
        .expect("creating the test database");
}

/// A connection LISTENing on `pgplace`, and the notifications it receives.
pub async fn listen(url: &str) -> (Client, mpsc::UnboundedReceiver<Notification>) {
    let (client, mut connection) = tokio_postgres::connect(url, NoTls)
        .await
        .expect("connecting");
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut messages = futures::stream::poll_fn(move |cx| connection.poll_message(cx));
        while let Some(Ok(message)) = messages.next().await {
            if let AsyncMessage::Notification(n) = message {
                if tx.send(n).is_err() {
                    break;
                }
            }
        }
    });
    client
        .batch_execute("LISTEN pgplace")
        .await
        .expect("LISTEN");
    (client, rx)
}

/// How many placer leases (`place.placers` rows) board `board` has: one while a gateway
/// groups its placements, none once it gave the lease up.
pub async fn placer_leases(client: &Client, board: i64) -> i64 {
    client
        .query_one(
            "SELECT count(*) FROM place.placers WHERE board_id = $1",
            &[&board],
        )
        .await
        .unwrap()
        .get(0)
}

/// Board `board`'s seq, as `place.boards` reads it.
pub async fn board_seq(client: &Client, board: i64) -> i64 {
    client
        .query_one("SELECT seq FROM place.boards WHERE id = $1", &[&board])
        .await
        .unwrap()
        .get(0)
}

/// Creates a board and returns its id.
pub async fn create_board(
    client: &Client,
    name: &str,
    size: (i32, i32),
    bits: i32,
    cooldown: &str,
) -> i64 {
    client
        .query_one(
            "SELECT place.create_board($1, $2, $3, $4, $5::text::interval)",
            &[&name, &size.0, &size.1, &bits, &cooldown],
        )
        .await
        .expect("create_board")
        .get(0)
}

/// Creates users `prefix-0`, `prefix-1`, … and returns their ids.
pub async fn create_users(client: &Client, prefix: &str, count: i32) -> Vec<i64> {
    client
        .query(
            "SELECT (place.create_user($1 || '-' || g)).user_id FROM generate_series(0, $2 - 1) g",
            &[&prefix, &count],
        )
        .await
        .expect("create_user")
        .iter()
        .map(|row| row.get(0))
        .collect()
}

/// The packed board and its seq.
pub async fn board_bits(client: &Client, board: i64) -> (i64, Vec<u8>) {
    let row = client
        .query_one("SELECT seq, bits FROM place.board_bits($1)", &[&board])
        .await
        .expect("board_bits");
    (row.get(0), row.get(1))
}

/// Creates users `prefix-0`, `prefix-1`, … and returns (id, token) of each.
pub async fn create_users_with_tokens(
    client: &Client,
    prefix: &str,
    count: i32,
) -> Vec<(i64, String)> {
    client
        .query(
            "SELECT (u).user_id, (u).token FROM (SELECT place.create_user($1 || '-' || g) AS u \
             FROM generate_series(0, $2 - 1) g) s",
            &[&prefix, &count],
        )
        .await
        .expect("create_user")
        .iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect()
}

/// How many history rows the database holds (every board).
pub async fn history_rows(client: &Client) -> i64 {
    client
        .query_one("SELECT count(*) FROM place.placements", &[])
        .await
        .expect("counting placements")
        .get(0)
}

/// How many sessions the database holds.
pub async fn session_rows(client: &Client) -> i64 {
    client
        .query_one("SELECT count(*) FROM place.sessions", &[])
        .await
        .expect("counting sessions")
        .get(0)
}

/// How many of a board's placements are stamped earlier than the one before them (by
/// seq): stamps never go back, so this is 0.
pub async fn stamps_going_back(client: &Client, board: i64) -> i64 {
    client
        .query_one(
            "SELECT count(*) FROM (SELECT placed_at < lag(placed_at) OVER (ORDER BY seq) AS back \
             FROM place.placements WHERE board_id = $1) s WHERE back",
            &[&board],
        )
        .await
        .expect("reading the stamps")
        .get(0)
}
