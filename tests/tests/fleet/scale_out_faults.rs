//! Two gateway processes behind nginx (round-robin), a few hundred sessions, placements
//! from SQL and through both gateways, and in turn: a gateway SIGKILLed and started again,
//! the other's LISTEN backend terminated, PostgreSQL restarted, nginx reloaded. Nothing
//! lost, nothing twice (see `pgplace_tests::soak` for what is checked). About 2 minutes.
//! Then the same with one placer per board (`--placer-url`), its placer killed and paused
//! mid-load: the lease moves, and still nothing is lost or twice. About 1 minute.

use pgplace_tests::soak::{run, Fault, Report, SoakConfig};
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_is_lost_or_repeated_through_faults_behind_a_balancer() {
    let _alone = pgplace_tests::alone();
    let pg_restart = std::env::var("PGPLACE_TEST_PG_RESTART")
        .expect("PGPLACE_TEST_PG_RESTART (a shell command that restarts the test cluster) is set by ./pgplace.sh test");
    let faults = Fault::ALL
        .iter()
        .enumerate()
        .map(|(i, fault)| (Duration::from_secs(12 + 18 * i as u64), *fault))
        .collect();
    let report = run(SoakConfig {
        database: "soak_faults".into(),
        duration: Duration::from_secs(90),
        sessions: 300,
        legacy_every: 3,
        sql_rate: 60.0,
        rpc_rate: 60.0,
        faults,
        pg_restart: Some(pg_restart),
        out_dir: std::env::temp_dir().join("pgplace-soak-faults"),
        content_sample: 40,
        one_placer: false,
    })
    .await;
    held_through(&report, 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_is_lost_or_repeated_when_the_boards_placer_is_killed_or_paused() {
    let _alone = pgplace_tests::alone();
    let report = run(SoakConfig {
        database: "soak_placer".into(),
        duration: Duration::from_secs(50),
        sessions: 200,
        legacy_every: 3,
        sql_rate: 40.0,
        rpc_rate: 80.0,
        faults: vec![
            (Duration::from_secs(12), Fault::KillPlacer),
            (Duration::from_secs(30), Fault::PausePlacer),
        ],
        pg_restart: None,
        out_dir: std::env::temp_dir().join("pgplace-soak-placer"),
        content_sample: 40,
        one_placer: true,
    })
    .await;
    held_through(&report, 2);
    assert!(
        report.forwarded > 0,
        "one gateway forwarded its placements to the other:\n{}",
        report.render()
    );
}

/// The guarantees held, placements were made, and each of the `faults` was recovered from.
fn held_through(report: &Report, faults: usize) {
    println!("{}", report.render());
    assert!(
        report.ok(),
        "the guarantees did not hold:\n{}",
        report.render()
    );
    assert!(
        report.placements_acknowledged > 1000,
        "placements were made"
    );
    assert_eq!(report.recovery.len(), faults);
    assert!(
        report.recovery.iter().all(|(_, r)| r.is_some()),
        "every fault was recovered from"
    );
}
