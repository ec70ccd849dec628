//! The gateway's benchmark: run by hand (`./pgplace.sh bench-gateway`), never by the tests.
//!
//! It builds a scratch database, starts `pgplace-gateway` as a separate process (a fresh
//! one per scenario, so that each scenario's CPU and memory figures are its own), drives it
//! over real HTTP/1.1 from this process, and prints one table at the end.
//!
//! # Layout
//! - this file: flags, the scratch database, running the scenarios, the table.
//! - `gateway_bench/process.rs`: starting, watching (/proc) and stopping the gateway.
//! - `gateway_bench/client.rs`: one keep-alive HTTP/1.1 connection and JSON-RPC over it.
//! - `gateway_bench/report.rs`: percentiles, CPU clocks, the table and the machine.
//! - `gateway_bench/{place,delivery,waiting,bits,lists,regions}.rs`: one file per scenario;
//!   `gateway_bench/held.rs`: `place` while a snapshot is held (only with `--only held`);
//!   `gateway_bench/flood.rs`: a control's placements and poll while one address floods
//!   the gateway with database lookups, with and without its per-address database budget
//!   (only with `--only flood`);
//!   `gateway_bench/moves.rs`: legacy sessions polling one gateway, then moving between
//!   two on every poll (only with `--only moves`);
//!   `gateway_bench/peers.rs` and `fanout.rs`: pgplace beside Redis, nginx and Nchan (only
//!   with `--only peers` / `--only fanout`: they start those servers; `./pgplace.sh
//!   bench-peers` runs both).

// A binary's root looks for modules beside itself (src/bin/): point it at its folder.
#[path = "gateway_bench/bits.rs"]
mod bits;
#[path = "gateway_bench/client.rs"]
mod client;
#[path = "gateway_bench/delivery.rs"]
mod delivery;
#[path = "gateway_bench/fanout.rs"]
mod fanout;
#[path = "gateway_bench/flood.rs"]
mod flood;
#[path = "gateway_bench/held.rs"]
mod held;
#[path = "gateway_bench/lists.rs"]
mod lists;
#[path = "gateway_bench/moves.rs"]
mod moves;
#[path = "gateway_bench/peers.rs"]
mod peers;
#[path = "gateway_bench/place.rs"]
mod place;
#[path = "gateway_bench/process.rs"]
mod process;
#[path = "gateway_bench/regions.rs"]
mod regions;
#[path = "gateway_bench/report.rs"]
mod report;
#[path = "gateway_bench/waiting.rs"]
mod waiting;

use clap::{Parser, ValueEnum};
use pgplace_tests::{
    connect, create_board, create_users, create_users_with_tokens, recreate_database,
};
use process::{Gateway, GatewayLog};
use report::Table;
use std::future::Future;
use std::path::PathBuf;
use std::time::Duration;

/// The scratch database: created at the start, dropped at the end (gateway.sh drops it
/// too, should this process die).
const DATABASE: &str = "pgplace_bench_gateway";

pub type Error = Box<dyn std::error::Error + Send + Sync>;
pub type Result<T> = std::result::Result<T, Error>;

/// Benchmarks a pgplace-gateway binary against a scratch database.
#[derive(Parser, Debug, Clone)]
pub struct Args {
    /// Superuser URL of the cluster, ending in /<an existing database>.
    #[arg(long, env = "PGPLACE_ADMIN_URL")]
    admin_url: String,
    /// The gateway binary to start.
    #[arg(long, env = "GATEWAY_BIN")]
    gateway_bin: PathBuf,
    /// Where the gateway's output goes (one file per scenario).
    #[arg(long, default_value = "target/gateway-bench")]
    log_dir: PathBuf,
    /// Run one scenario only.
    #[arg(long, value_enum, env = "PGPLACE_BENCH_ONLY")]
    only: Option<Scenario>,
    /// Length of each measured phase (place, delivery, bits; each of flood's six), in
    /// seconds.
    #[arg(long, env = "PGPLACE_BENCH_SECONDS", default_value_t = 15)]
    seconds: u64,
    /// Install this (older) version of the extension's schema, for a before/after in one
    /// run; the library serves it as that version did. Its install script must be in the
    /// extension directory (tests/upgrade/ keeps them).
    #[arg(long, env = "PGPLACE_BENCH_SCHEMA")]
    schema: Option<String>,
    /// `held`: the length of each window, in seconds (`--seconds` is how long the
    /// snapshot is held).
    #[arg(long, env = "PGPLACE_HELD_WINDOW", default_value_t = 30)]
    held_window: u64,
    /// `held`: the same windows without holding a snapshot.
    #[arg(long, env = "PGPLACE_HELD_CONTROL")]
    held_control: bool,
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq)]
enum Scenario {
    Place,
    Delivery,
    Waiting,
    Bits,
    Lists,
    Regions,
    Peers,
    Fanout,
    Held,
    Flood,
    Moves,
}

/// What the scenarios share: the scratch database and its fixtures.
pub struct Setup {
    pub args: Args,
    pub db_url: String,
    /// The 1000x1000x4 board, cooldown 0.
    pub board: i64,
    /// A 16x16 board: subscribing 10,000 sessions to it costs little (a subscription
    /// answers with the whole board).
    pub small_board: i64,
    /// (id, token) of the users who place through the gateway.
    pub placers: Vec<(i64, String)>,
    /// Users who place through SQL (one per placement of a batch).
    pub writers: Vec<i64>,
    /// The cluster's postmaster, when it runs on this machine: its CPU is measured too.
    pub postmaster: Option<u32>,
}

impl Setup {
    pub fn phase(&self) -> Duration {
        Duration::from_secs(self.args.seconds)
    }

    /// A fresh gateway process for `scenario`, healthy.
    pub async fn gateway(&self, scenario: &str) -> Result<Gateway> {
        self.gateway_with(scenario, &[]).await
    }

    /// `gateway`, with `extra` flags (`Gateway::start_with`).
    pub async fn gateway_with(&self, scenario: &str, extra: &[&str]) -> Result<Gateway> {
        let log = GatewayLog::new(&self.args.log_dir, scenario)?;
        Gateway::start_with(&self.args.gateway_bin, &self.db_url, log, extra).await
    }
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let admin = connect(&args.admin_url).await;
    let mut table = Table::new();
    let outcome = async {
        let setup = prepare(&admin, args.clone()).await?;
        run_scenarios(&setup, &mut table).await;
        Ok::<_, Error>(())
    }
    .await;
    if let Err(error) = admin
        .batch_execute(&format!("DROP DATABASE IF EXISTS {DATABASE} WITH (FORCE)"))
        .await
    {
        eprintln!("dropping {DATABASE}: {error}");
    }
    report::print_machine();
    table.print();
    if let Err(error) = outcome {
        eprintln!("gateway benchmark failed: {error}");
        std::process::exit(1);
    }
}

async fn prepare(admin: &tokio_postgres::Client, args: Args) -> Result<Setup> {
    println!("preparing database {DATABASE}");
    recreate_database(admin, DATABASE).await;
    let db_url = sibling_url(&args.admin_url, DATABASE);
    let client = connect(&db_url).await;
    let version = args.schema.as_ref().map_or(String::new(), |v| {
        format!(" VERSION '{}'", v.replace('\'', ""))
    });
    client
        .batch_execute(&format!("CREATE EXTENSION pgplace{version}"))
        .await?;
    Ok(Setup {
        board: create_board(&client, "bench", (1000, 1000), 4, "0").await,
        small_board: create_board(&client, "small", (16, 16), 4, "0").await,
        placers: create_users_with_tokens(&client, "placer", place::CLIENTS as i32).await,
        writers: create_users(&client, "writer", delivery::BATCH as i32).await,
        postmaster: postmaster_pid(admin).await,
        args,
        db_url,
    })
}

/// The postmaster's pid, from its data directory's postmaster.pid: None when the cluster
/// is not on this machine or its directory cannot be read.
async fn postmaster_pid(admin: &tokio_postgres::Client) -> Option<u32> {
    let row = admin.query_one("SHOW data_directory", &[]).await.ok()?;
    let dir: String = row.get(0);
    let text = std::fs::read_to_string(PathBuf::from(dir).join("postmaster.pid")).ok()?;
    text.lines().next()?.trim().parse().ok()
}

/// Runs every chosen scenario; one that fails leaves its error in the table, and the
/// others still run.
async fn run_scenarios(setup: &Setup, table: &mut Table) {
    let chosen = |s: Scenario| setup.args.only.is_none_or(|only| only == s);
    if chosen(Scenario::Place) {
        guarded(table, "place", setup.phase(), place::run(setup)).await;
    }
    if chosen(Scenario::Delivery) {
        guarded(table, "delivery", setup.phase(), delivery::run(setup)).await;
    }
    if chosen(Scenario::Waiting) {
        guarded(table, "waiting", Duration::ZERO, waiting::run(setup)).await;
    }
    if chosen(Scenario::Bits) {
        guarded(table, "bits", setup.phase(), bits::run(setup)).await;
    }
    if chosen(Scenario::Lists) {
        guarded(table, "lists", setup.phase() * 2, lists::run(setup)).await;
    }
    if chosen(Scenario::Regions) {
        guarded(table, "regions", setup.phase() * 2, regions::run(setup)).await;
    }
    if setup.args.only == Some(Scenario::Peers) {
        guarded(table, "peers", setup.phase() * 8, peers::run(setup)).await;
    }
    if setup.args.only == Some(Scenario::Held) {
        let windows = setup.args.seconds.div_ceil(setup.args.held_window) + 2;
        let phase = Duration::from_secs(windows * setup.args.held_window);
        guarded(table, "held", phase, held::run(setup)).await;
    }
    if setup.args.only == Some(Scenario::Flood) {
        // Six phases, each with a gateway started and its control signed in.
        let phases = (setup.phase() + Duration::from_secs(10)) * 6;
        guarded(table, "flood", phases, flood::run(setup)).await;
    }
    if setup.args.only == Some(Scenario::Moves) {
        // Two phases, each followed by the statistics' flush.
        guarded(
            table,
            "moves",
            setup.phase() * 2 + Duration::from_secs(30),
            moves::run(setup),
        )
        .await;
    }
    if setup.args.only == Some(Scenario::Fanout) {
        guarded(
            table,
            "fanout",
            setup.phase() * 12 + Duration::from_secs(600),
            fanout::run(setup),
        )
        .await;
    }
}

/// Runs one scenario with an overall deadline (its phase plus time to set up and drain),
/// so that a stuck gateway ends the scenario rather than the benchmark.
async fn guarded(
    table: &mut Table,
    name: &str,
    phase: Duration,
    scenario: impl Future<Output = Result<Table>>,
) {
    println!("scenario {name}: running");
    let deadline = phase * 2 + Duration::from_secs(180);
    match tokio::time::timeout(deadline, scenario).await {
        Ok(Ok(rows)) => {
            rows.print();
            table.extend(rows);
        }
        Ok(Err(error)) => table.failed(name, &error.to_string()),
        Err(_) => table.failed(
            name,
            &format!("did not finish within {} s", deadline.as_secs()),
        ),
    }
}

/// The URL of database `name` on the cluster of `admin_url`.
fn sibling_url(admin_url: &str, name: &str) -> String {
    let base = admin_url
        .rsplit_once('/')
        .map_or(admin_url, |(base, _)| base);
    format!("{base}/{name}")
}
