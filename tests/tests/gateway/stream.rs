//! The guarantee (exact to the seq) under concurrent placers and subscribers, also while
//! the gateway's LISTEN connection is killed.

use pgplace_tests::connect;
use pgplace_tests::gateway::kill_listen_backend;
use pgplace_tests::stream_check::{run, Scenario};
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_session_gets_exactly_the_placements_after_its_snapshot() {
    let scenario = Scenario {
        database: "gw_stream",
        sessions: 60,
        placing: Duration::from_secs(4),
        may_reset: false,
        asynchronous_commit: false,
        release_before_flush: false,
    };
    let placed = run(scenario, |_| async {}).await;
    assert!(placed > 100, "only {placed} placements were made");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_guarantee_holds_when_the_listen_connection_is_killed() {
    let scenario = Scenario {
        database: "gw_stream_kill",
        sessions: 50,
        placing: Duration::from_secs(5),
        may_reset: false,
        // The listener reads again after its connection is killed: with groups committed
        // before they are durable.
        asynchronous_commit: true,
        release_before_flush: true,
    };
    run(scenario, |url| async move {
        let admin = connect(&url).await;
        for _ in 0..2 {
            tokio::time::sleep(Duration::from_millis(1500)).await;
            let killed = kill_listen_backend(&admin).await;
            assert_eq!(killed, 1, "one LISTEN backend was terminated");
        }
    })
    .await;
}
