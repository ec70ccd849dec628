//! `place.await_durable(xid)` and `place.await_durable()` flush an asynchronous commit that
//! nothing else would flush: the primary's WAL writer is stopped (SIGSTOP), so a row
//! committed with `synchronous_commit = off` stays visible and not durable until the wait
//! flushes it. On the HA setup (`./pgplace.sh ha up`) because it is a cluster of its own
//! where nothing else commits meanwhile (on the shared test cluster any other test's
//! commit would flush the WAL first); run by `./pgplace.sh test` before the failover tests.

use crate::ha_commit::Stopped;
use crate::ha_failover::env;
use pgplace_tests::connect;
use tokio_postgres::Client;

/// How often a round is tried again when it proves nothing (`round`).
const ROUNDS: usize = 20;

/// One round: a row committed asynchronously while the WAL writer is stopped, then `wait`
/// (SQL naming `$1`, the row's writer) run by `reader`. Some(whether the WAL was flushed
/// past the commit after the wait), or None when the round proves nothing: something
/// flushed the commit record before the wait did, or the WAL ends at a page's start
/// (`pg_current_wal_insert_lsn()` is then past the page header, where no flush reaches
/// until a record is there).
async fn round(
    admin: &Client,
    writer: &Client,
    reader: &Client,
    wait: &str,
    walwriter: i32,
) -> Option<bool> {
    let _stopped = Stopped::new(walwriter);
    writer.batch_execute("BEGIN").await.unwrap();
    let xid: String = writer
        .query_one(
            "INSERT INTO ha_durable_probe VALUES (1) RETURNING xmin::text",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    // Before the commit record: a flush short of it has not flushed the commit.
    let before_commit: String = writer
        .query_one("SELECT pg_current_wal_insert_lsn()::text", &[])
        .await
        .unwrap()
        .get(0);
    writer.batch_execute("COMMIT").await.unwrap();
    // Past the commit record.
    let inserted: String = writer
        .query_one("SELECT pg_current_wal_insert_lsn()::text", &[])
        .await
        .unwrap()
        .get(0);
    let proves: bool = admin
        .query_one(
            "SELECT pg_current_wal_flush_lsn() < $1::text::pg_lsn \
                    AND ($2::text::pg_lsn - '0/0') % 8192 > 40",
            &[&before_commit, &inserted],
        )
        .await
        .unwrap()
        .get(0);
    if !proves {
        return None;
    }
    reader.query_one(wait, &[&xid]).await.unwrap();
    // XLogFlush writes out everything inserted when it runs, so past `inserted`.
    Some(
        admin
            .query_one(
                "SELECT pg_current_wal_flush_lsn() >= $1::text::pg_lsn",
                &[&inserted],
            )
            .await
            .unwrap()
            .get(0),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs ./pgplace.sh ha up; ./pgplace.sh test runs it"]
async fn the_wait_for_durability_flushes_an_asynchronous_commit() {
    let _alone = pgplace_tests::alone();
    let url = env("PGPLACE_TEST_HA_DATABASE");
    let admin = connect(&url).await;
    admin
        .batch_execute("CREATE TABLE IF NOT EXISTS ha_durable_probe (n int)")
        .await
        .unwrap();
    let walwriter: i32 = admin
        .query_one(
            "SELECT pid FROM pg_stat_activity WHERE backend_type = 'walwriter'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    let writer = connect(&url).await;
    writer
        .batch_execute("SET synchronous_commit = off")
        .await
        .unwrap();
    // `local`: the wait asks nothing of the standby, which gets only flushed WAL (without
    // the flush it would wait for ever instead of failing).
    let reader = connect(&url).await;
    reader
        .batch_execute("SET synchronous_commit = local; SET statement_timeout = '20s'")
        .await
        .unwrap();
    for wait in [
        "SELECT place.await_durable($1::text::xid)",
        "SELECT place.await_durable() WHERE $1::text IS NOT NULL",
    ] {
        let mut outcome = None;
        for _ in 0..ROUNDS {
            outcome = round(&admin, &writer, &reader, wait, walwriter).await;
            if outcome.is_some() {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        let flushed = outcome.unwrap_or_else(|| {
            panic!("none of {ROUNDS} rounds could prove anything about `{wait}` (see `round`)")
        });
        assert!(
            flushed,
            "`{wait}` returned before the asynchronous commit it waits for was flushed"
        );
    }
}
