//! Two gateway processes behind nginx (round-robin), a few hundred sessions, placements
//! from SQL and through both gateways, and in turn: a gateway SIGKILLed and started again,
//! the other's LISTEN backend terminated, PostgreSQL restarted, nginx reloaded. Nothing
//! lost, nothing twice (see `pgplace_tests::soak` for what is checked). About 2 minutes.

use pgplace_tests::soak::{run, Fault, SoakConfig};
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
    })
    .await;
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
    assert_eq!(report.recovery.len(), 4);
    assert!(
        report.recovery.iter().all(|(_, r)| r.is_some()),
        "every fault was recovered from"
    );
}
