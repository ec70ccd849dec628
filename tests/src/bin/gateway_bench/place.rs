//! Scenario `place`: `board.place` from many keep-alive clients, each its own session and
//! user (cooldown 0, so every call must place), for one phase.

use crate::client::Conn;
use crate::report::{rate, CpuClock, Latencies, Table};
use crate::{Result, Setup};
use rand::Rng;
use serde_json::json;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Barrier;
use tokio::task::JoinHandle;

pub const CLIENTS: usize = 64;
const NAME: &str = "place";
/// A call slower than this counts as an error (the gateway is stuck, not slow).
const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// What one client saw.
#[derive(Default)]
pub struct Tally {
    pub latencies: Latencies,
    /// Error messages (trimmed to their start) and how often each came.
    pub errors: BTreeMap<String, usize>,
}

pub async fn run(setup: &Setup) -> Result<Table> {
    let gateway = setup.gateway(NAME).await?;
    let db = pgplace_tests::connect(&setup.db_url).await;
    let seq_before = board_seq(&db, setup.board).await?;
    let wal_before = Wal::read(&db).await?;
    let placers = Placers::start(setup, gateway.addr, setup.phase()).await?;
    let cpu = CpuClock::start(&gateway);
    let started = Instant::now();
    let tally = placers.join().await?;
    let elapsed = started.elapsed();
    let cpu = cpu.finish(&gateway);
    let seq_after = board_seq(&db, setup.board).await?;
    let wal = Wal::read(&db).await?.since(&wal_before);
    gateway.stop().await;
    Ok(report(tally, elapsed, cpu, seq_after - seq_before, wal))
}

/// The cluster's WAL so far: what a standby receives, flushes and replays, and what the
/// primary inserts and flushes, per placement.
pub struct Wal {
    /// Bytes, from the insert position (exact).
    bytes: f64,
    /// Records and full-page images, from pg_stat_wal (a backend reports its counts at
    /// most once a second: a second's worth may be missing at either end of a phase).
    records: f64,
    full_pages: f64,
}

impl Wal {
    pub async fn read(db: &tokio_postgres::Client) -> Result<Wal> {
        let row = db
            .query_one(
                "SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0')::float8, \
                        wal_records::float8, wal_fpi::float8 FROM pg_stat_wal",
                &[],
            )
            .await?;
        Ok(Wal {
            bytes: row.get(0),
            records: row.get(1),
            full_pages: row.get(2),
        })
    }

    pub fn since(&self, before: &Wal) -> Wal {
        Wal {
            bytes: self.bytes - before.bytes,
            records: self.records - before.records,
            full_pages: self.full_pages - before.full_pages,
        }
    }

    /// "762 B, 6.5 records (0.10 full-page images) a placement".
    pub fn per_placement(&self, placements: i64) -> String {
        let n = placements.max(1) as f64;
        format!(
            "{:.0} B, {:.1} records ({:.2} full-page images) a placement",
            self.bytes / n,
            self.records / n,
            self.full_pages / n
        )
    }
}

/// Every placer's client, logged in and placing (each its own session and user).
pub struct Placers(Vec<JoinHandle<Tally>>);

impl Placers {
    /// Logs every client in at `addr` (a gateway, or a balancer in front of gateways) first,
    /// then lets them all place for `phase` at once: the clock starts when this returns.
    pub async fn start(setup: &Setup, addr: SocketAddr, phase: Duration) -> Result<Placers> {
        let ready = Arc::new(Barrier::new(CLIENTS + 1));
        let mut clients = Vec::new();
        for (_, token) in &setup.placers {
            let mut conn = Conn::open(addr).await?;
            let session = conn.session(Some(token)).await?;
            let (ready, board) = (ready.clone(), setup.board);
            clients.push(tokio::spawn(async move {
                ready.wait().await;
                place_for(conn, session, board, phase).await
            }));
        }
        ready.wait().await;
        Ok(Placers(clients))
    }

    /// Waits for every client's phase to end: what they saw, together.
    pub async fn join(self) -> Result<Tally> {
        let mut tally = Tally::default();
        for client in self.0 {
            let one = client.await?;
            tally.latencies.extend(one.latencies);
            for (error, n) in one.errors {
                *tally.errors.entry(error).or_default() += n;
            }
        }
        Ok(tally)
    }
}

/// `board.place`'s params for a random tile of the 1000x1000 board, in a random colour.
pub fn random_placement(session: &str, board: i64) -> serde_json::Value {
    let mut rng = rand::rng();
    let (x, y, color) = (
        rng.random_range(0..1000),
        rng.random_range(0..1000),
        rng.random_range(0..16),
    );
    json!({"session": session, "board": board, "x": x, "y": y, "color": color})
}

/// One client's loop: place a random tile, wait for the answer, again, until the phase ends.
pub async fn place_for(mut conn: Conn, session: String, board: i64, phase: Duration) -> Tally {
    let mut tally = Tally::default();
    let end = Instant::now() + phase;
    while Instant::now() < end {
        let params = random_placement(&session, board);
        let sent = Instant::now();
        match tokio::time::timeout(CALL_TIMEOUT, conn.call("board.place", params)).await {
            Ok(Ok(_)) => tally.latencies.push(sent.elapsed()),
            Ok(Err(error)) => {
                let closed = conn.is_closed();
                let mut error: String = error.to_string().chars().take(120).collect();
                if closed {
                    error = format!("connection closed by the server: {error}");
                }
                *tally.errors.entry(error).or_default() += 1;
                // Counted once, not once per spin of this loop on a dead connection.
                if closed {
                    break;
                }
            }
            Err(_) => {
                // The connection is in an unknown state after a timeout: stop this client.
                *tally.errors.entry("timed out".into()).or_default() += 1;
                break;
            }
        }
    }
    tally
}

pub async fn board_seq(db: &tokio_postgres::Client, board: i64) -> Result<i64> {
    Ok(db
        .query_one("SELECT seq FROM place.boards WHERE id = $1", &[&board])
        .await?
        .get(0))
}

fn report(tally: Tally, elapsed: Duration, cpu: String, seq_moved: i64, wal: Wal) -> Table {
    let placed = tally.latencies.len();
    let per_second = rate(placed, elapsed);
    let latencies = tally.latencies.sorted();
    let mut table = Table::new();
    table.target(
        NAME,
        &format!("placements/s, {CLIENTS} clients"),
        format!(
            "{per_second:.0} ({placed} in {:.1} s)",
            elapsed.as_secs_f64()
        ),
        ">= 10,000/s",
        per_second >= 10_000.0,
    );
    table.target(
        NAME,
        "latency p50 / p99 / max",
        latencies.summary(),
        "p99 <= 50 ms",
        latencies.ms(0.99) <= 50.0,
    );
    table.info(NAME, "CPU during the phase", cpu);
    table.info(
        NAME,
        "the cluster's WAL during the phase",
        wal.per_placement(seq_moved),
    );
    let errors: usize = tally.errors.values().sum();
    table.target(NAME, "errors", errors.to_string(), "0", errors == 0);
    for (error, n) in tally.errors.iter().take(5) {
        table.info(NAME, &format!("  {n} x"), error.clone());
    }
    // Cooldown 0 and distinct users: every answered call must be one placement.
    table.target(
        NAME,
        "board seq moved by",
        seq_moved.to_string(),
        "= placements",
        seq_moved == placed as i64,
    );
    table
}
