//! The guarantee across a PostgreSQL restart: the gateway reconnects (pool and LISTEN)
//! and catches up from the history, so no session notices. Its own test binary, because
//! the restart cuts every connection to the cluster.

use pgplace_tests::stream_check::{run, Scenario};
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_guarantee_holds_across_a_postgres_restart() {
    let _alone = pgplace_tests::alone();
    let restart = std::env::var("PGPLACE_TEST_PG_RESTART")
        .expect("PGPLACE_TEST_PG_RESTART (a shell command that restarts the test cluster) is set by ./pgplace.sh test");
    let scenario = Scenario {
        database: "gw_pg_restart",
        sessions: 50,
        placing: Duration::from_secs(6),
    };
    run(scenario, |_| async move {
        tokio::time::sleep(Duration::from_secs(2)).await;
        let status = tokio::process::Command::new("sh")
            .arg("-c")
            .arg(&restart)
            .status()
            .await
            .expect("running the restart command");
        assert!(status.success(), "{restart} failed");
    })
    .await;
}
