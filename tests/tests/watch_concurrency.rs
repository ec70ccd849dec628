//! The change log under concurrent writers: transactions at every isolation level write a
//! watched table at once and none fails because it is watched; every snapshot a reader
//! takes sees the positions as a prefix (a commit is never visible before one with a
//! smaller position); a listener hears every position once, in order.

use pgplace_core::payload::Payload;
use pgplace_tests::{connect, fresh_database, listen};
use std::time::Duration;

const WRITERS: usize = 8;
const EACH: usize = 40;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn positions_follow_commits_at_every_isolation_level() {
    let url = fresh_database("watch_concurrency").await;
    let sql = connect(&url).await;
    sql.batch_execute(
        "CREATE TABLE t (id serial PRIMARY KEY, writer int NOT NULL, v int NOT NULL);
         SELECT place.watch('t');",
    )
    .await
    .unwrap();
    let (_listener, mut notifications) = listen(&url).await;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let (url, stop) = (url.clone(), stop.clone());
        tokio::spawn(async move {
            let sql = connect(&url).await;
            let mut snapshots = 0;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                // One statement, one snapshot: the positions it sees must be 1..=newest.
                let row = sql
                    .query_one(
                        "SELECT place.change_pos(), count(*), coalesce(min(pos), 1) FROM place.change_commits",
                        &[],
                    )
                    .await
                    .unwrap();
                let (newest, count, first): (i64, i64, i64) = (row.get(0), row.get(1), row.get(2));
                assert_eq!(
                    (first, count),
                    (1, newest),
                    "a snapshot saw a position before a smaller one"
                );
                snapshots += 1;
            }
            snapshots
        })
    };
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let url = url.clone();
            tokio::spawn(async move {
                let sql = connect(&url).await;
                let level = ["READ COMMITTED", "REPEATABLE READ", "SERIALIZABLE"][w % 3];
                for i in 0..EACH {
                    sql.batch_execute(&format!(
                        "BEGIN ISOLATION LEVEL {level}; INSERT INTO t (writer, v) VALUES ({w}, {i}); COMMIT"
                    ))
                    .await
                    .unwrap_or_else(|e| panic!("a {level} writer failed: {e}"));
                }
            })
        })
        .collect();
    for writer in writers {
        writer.await.expect("no writer fails");
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let snapshots = reader.await.unwrap();
    assert!(snapshots > 10, "the reader took {snapshots} snapshots");
    let total = (WRITERS * EACH) as i64;
    let newest: i64 = sql
        .query_one("SELECT place.change_pos()", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(newest, total, "one position per transaction, none skipped");
    let mut heard = Vec::new();
    while heard.len() < total as usize {
        let n = tokio::time::timeout(Duration::from_secs(10), notifications.recv())
            .await
            .expect("every commit is announced")
            .expect("the listener is up");
        if let Ok(Payload::Changes(p)) = Payload::decode(n.payload()) {
            heard.push(p.pos);
        }
    }
    let want: Vec<i64> = (1..=total).collect();
    assert_eq!(heard, want, "announced once each, in position order");
}
