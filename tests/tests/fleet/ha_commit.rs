//! `pgplace.release_before_flush` against a real synchronous standby (`./pgplace.sh ha up`):
//! a placement whose COMMIT waits for the standby no longer holds its board's seq lock
//! while it waits, and its COMMIT still does not return before the standby has it.
//!
//! The standbys are made to stop answering (their WAL receivers SIGSTOPped) so that the
//! wait lasts as long as the test needs. Run by `./pgplace.sh test` before the failover tests
//! (the module sorts first), while every node is up and the standbys are synchronous.

use crate::ha_failover::env;
use pgplace_tests::{connect, create_board, create_users_with_tokens};
use std::time::{Duration, Instant};
use tokio_postgres::config::Host;
use tokio_postgres::Client;

/// A process of the HA cluster (the standby's WAL receiver, the primary's WAL writer),
/// stopped until this is dropped (a failing test included).
pub(crate) struct Stopped(i32);

impl Stopped {
    pub(crate) fn new(pid: i32) -> Self {
        // SAFETY: a signal to a process of the test's own cluster.
        assert_eq!(
            unsafe { libc::kill(pid, libc::SIGSTOP) },
            0,
            "SIGSTOP {pid}"
        );
        Stopped(pid)
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        // SAFETY: as above.
        unsafe { libc::kill(self.0, libc::SIGCONT) };
    }
}

/// Each node of the multi-host URL on its own.
async fn nodes(url: &str) -> Vec<Client> {
    let config: tokio_postgres::Config = url.parse().expect("the HA database URL");
    let user = config.get_user().expect("a user in the URL");
    let database = config.get_dbname().expect("a database in the URL");
    let mut clients = Vec::new();
    for (host, port) in config.get_hosts().iter().zip(config.get_ports()) {
        let Host::Tcp(host) = host else {
            panic!("the HA nodes are TCP hosts: {url}");
        };
        clients.push(connect(&format!("postgresql://{user}@{host}:{port}/{database}")).await);
    }
    clients
}

/// Every standby's WAL receiver process, once the primary reports one synchronous
/// (pg_auto_failover names them `ANY 1 (…)`: a quorum of one).
async fn standby_receivers(primary: &Client, url: &str) -> Vec<i32> {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let sync = primary
            .query_opt(
                "SELECT 1 FROM pg_stat_replication WHERE sync_state IN ('sync', 'quorum') LIMIT 1",
                &[],
            )
            .await
            .unwrap();
        if sync.is_some() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no synchronous standby within 2 minutes"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let mut receivers = Vec::new();
    for node in nodes(url).await {
        let row = node
            .query_one(
                "SELECT pg_is_in_recovery(), (SELECT pid FROM pg_stat_wal_receiver)",
                &[],
            )
            .await
            .unwrap();
        if row.get::<_, bool>(0) {
            receivers.push(
                row.get::<_, Option<i32>>(1)
                    .expect("each standby's WAL receiver runs"),
            );
        }
    }
    assert!(!receivers.is_empty(), "no node of {url} is a standby");
    receivers
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs ./pgplace.sh ha up; ./pgplace.sh test runs it"]
async fn a_commit_waiting_for_the_standby_frees_the_seq_lock_and_returns_after_it() {
    let _alone = pgplace_tests::alone();
    let url = env("PGPLACE_TEST_HA_DATABASE");
    let admin = connect(&url).await;
    // The setup outlives a run: names of this run's own.
    let run = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let name = format!("waiting for the standby {run}");
    let board = create_board(&admin, &name, (8, 8), 4, "0").await;
    let users = create_users_with_tokens(&admin, &name, 2).await;
    let receivers = standby_receivers(&admin, &url).await;

    let waiting = connect(&url).await;
    waiting
        .batch_execute("SET pgplace.release_before_flush = on")
        .await
        .unwrap();
    let waiting_pid: i32 = waiting
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .unwrap()
        .get(0);
    // The second placer does not wait for the standby itself; it fails at once if the seq
    // lock is still held.
    let next = connect(&url).await;
    next.batch_execute("SET synchronous_commit = local; SET lock_timeout = '10s'")
        .await
        .unwrap();

    // Any one standby may confirm the commit: all of them stop answering.
    let stopped: Vec<Stopped> = receivers.into_iter().map(Stopped::new).collect();
    let user = users[0].0;
    let first = tokio::spawn(async move {
        waiting
            .query_one(
                "SELECT seq FROM place.place($1, 1, 1, 3, $2)",
                &[&board, &user],
            )
            .await
            .map(|row| row.get::<_, i64>(0))
    });
    // Its COMMIT is waiting for the standby.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let event: Option<String> = admin
            .query_one(
                "SELECT wait_event FROM pg_stat_activity WHERE pid = $1",
                &[&waiting_pid],
            )
            .await
            .unwrap()
            .get(0);
        if event.as_deref() == Some("SyncRep") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the placement never waited for the standby (last: {event:?})"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let second: i64 = next
        .query_one(
            "SELECT seq FROM place.place($1, 2, 2, 4, $2)",
            &[&board, &users[1].0],
        )
        .await
        .expect("a placement on the same board while the first one's COMMIT waits for the standby")
        .get(0);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !first.is_finished(),
        "the first placement's COMMIT returned before the standby had it"
    );
    drop(stopped);
    let first = tokio::time::timeout(Duration::from_secs(30), first)
        .await
        .expect("the first placement returns once the standby answers")
        .unwrap()
        .expect("the first placement");
    assert_eq!(second, first + 1, "seqs in commit order, no gap");
}
