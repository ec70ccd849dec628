//! The long form of the fault test (`./pgplace.sh soak`): gateway processes behind nginx,
//! many sessions, steady placements, a fault every few minutes in turn; prints what was
//! delivered, lost, duplicated, reset, the recovery after each fault, memory and client
//! errors. Exits 1 when a guarantee did not hold.

use clap::Parser;
use pgplace_tests::soak::{run, Fault, SoakConfig};
use std::time::Duration;

#[derive(Parser)]
struct Args {
    /// Minutes of placements.
    #[arg(long, default_value_t = 30.0)]
    minutes: f64,
    /// Sessions watching the board.
    #[arg(long, default_value_t = 5000)]
    sessions: usize,
    /// Every n-th session is a legacy one (no acks; behind round-robin every move costs it
    /// a reset, so they are the expensive ones).
    #[arg(long, default_value_t = 10)]
    legacy_every: usize,
    /// Placements per second, half over SQL and half through the gateways.
    #[arg(long, default_value_t = 500.0)]
    rate: f64,
    /// Minutes between two faults (they come in turn).
    #[arg(long, default_value_t = 5.0)]
    fault_every: f64,
    /// Shell command that restarts the cluster (./pgplace.sh soak sets it).
    #[arg(long, env = "PGPLACE_TEST_PG_RESTART")]
    pg_restart: String,
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let duration = Duration::from_secs_f64(args.minutes * 60.0);
    let every = Duration::from_secs_f64(args.fault_every * 60.0);
    let faults = (1..)
        .map(|i| every * i)
        .take_while(|at| *at < duration)
        .zip(Fault::ALL.iter().cycle())
        .map(|(at, fault)| (at, *fault))
        .collect();
    let report = run(SoakConfig {
        database: "soak_long".into(),
        duration,
        sessions: args.sessions,
        legacy_every: args.legacy_every.max(1),
        sql_rate: args.rate / 2.0,
        rpc_rate: args.rate / 2.0,
        faults,
        pg_restart: Some(args.pg_restart),
        out_dir: std::env::temp_dir().join("pgplace-soak-long"),
        content_sample: 50,
        one_placer: false,
    })
    .await;
    println!("{}", report.render());
    if !report.ok() {
        eprintln!("a guarantee did not hold");
        std::process::exit(1);
    }
}
