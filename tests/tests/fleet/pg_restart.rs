//! The guarantee across a PostgreSQL restart: the gateway reconnects (pool and LISTEN)
//! and catches up from the history, so no session notices. Its own test binary, because
//! the restart cuts every connection to the cluster.
//!
//! And across a crash (an immediate shutdown under load: WAL not yet written is lost, the
//! start recovers): the gateway commits its groups before they are durable and waits for
//! durability before it answers a caller or shows a placement to a session, so nothing a
//! client was told about is taken back. `stream_check` checks every session's stream
//! against the history after the crash (a session may be reset, to a state that is the
//! history's and not before anything it was shown), and every acknowledged placement is in it.

use pgplace_tests::stream_check::{run, Scenario};
use std::time::Duration;

/// Runs the stream check on `database`, restarting the cluster two seconds in with
/// `restart-cluster <mode>`.
async fn across_a_restart(database: &'static str, mode: &'static str) {
    let _alone = pgplace_tests::alone();
    let restart = std::env::var("PGPLACE_TEST_PG_RESTART")
        .expect("PGPLACE_TEST_PG_RESTART (a shell command that restarts the test cluster) is set by ./pgplace.sh test");
    let scenario = Scenario {
        database,
        sessions: 50,
        placing: Duration::from_secs(6),
        // A crash can lose the answer to a session's own change that committed (its
        // subscription); the gateway then resets it (checked against the history).
        may_reset: mode == "immediate",
        // The crash meets groups committed before they were durable.
        asynchronous_commit: mode == "immediate",
        // And SQL placements that free the seq lock before their flush: none whose COMMIT
        // returned may be missing after the crash.
        release_before_flush: mode == "immediate",
    };
    run(scenario, move |_| async move {
        tokio::time::sleep(Duration::from_secs(2)).await;
        let command = format!("{restart} {mode}");
        let status = tokio::process::Command::new("sh")
            .arg("-c")
            .arg(&command)
            .status()
            .await
            .expect("running the restart command");
        assert!(status.success(), "{command} failed");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_guarantee_holds_across_a_postgres_restart() {
    across_a_restart("gw_pg_restart", "fast").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn nothing_shown_or_acknowledged_is_lost_in_a_postgres_crash() {
    across_a_restart("gw_pg_crash", "immediate").await;
}
