//! The change log under concurrent writers and two tickers (two gateways): what a client of
//! `place.changes_since` may rely on, each asserted.
//! - No writer fails because its table is watched, at any isolation level.
//! - Every snapshot sees the positions as a prefix 1..=newest (no gap, none out of order).
//! - Every committed transaction is in exactly one position, whole; nothing rolled back
//!   (a transaction or a savepoint) is in any.
//! - One writer's transactions, committed one after the other, have non-decreasing positions.
//! - Replaying every change in order (positions, then the order within one) gives exactly
//!   the table as it is: rows written by many transactions at once come out right.

use pgplace_tests::{connect, fresh_database};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

const WRITERS: usize = 6;
const EACH: usize = 40;
/// Rows every read-committed writer updates, so that transactions wait for each other.
const HOT_ROWS: i32 = 3;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn positions_follow_commits_and_replay_to_the_table() {
    let url = fresh_database("watch_concurrency").await;
    let sql = connect(&url).await;
    sql.batch_execute(&format!(
        "CREATE TABLE t (id text PRIMARY KEY, writer int NOT NULL, v int NOT NULL);
         INSERT INTO t SELECT 'hot' || g, -1, 0 FROM generate_series(1, {HOT_ROWS}) g;
         SELECT place.watch('t');"
    ))
    .await
    .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    // Two tickers, as two gateways would be, ticking as fast as they can.
    let tickers: Vec<_> = (0..2)
        .map(|_| {
            let (url, stop) = (url.clone(), stop.clone());
            tokio::spawn(async move {
                let sql = connect(&url).await;
                while !stop.load(Ordering::SeqCst) {
                    sql.query_one("SELECT place.tick()", &[]).await.unwrap();
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
            })
        })
        .collect();
    let reader = {
        let (url, stop) = (url.clone(), stop.clone());
        tokio::spawn(async move {
            let sql = connect(&url).await;
            let mut snapshots = 0;
            while !stop.load(Ordering::SeqCst) {
                // One statement, one snapshot: the positions it sees must be 1..=newest.
                let row = sql
                    .query_one(
                        "SELECT place.change_pos(), count(*), coalesce(min(pos), 1) FROM place.change_ticks",
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
                    // Read-committed writers also update the hot rows (they wait for each
                    // other there); the others only insert, so that none may fail on its
                    // own account. Every fifth transaction rolls back, every third undoes
                    // a savepoint.
                    let hot = if level == "READ COMMITTED" {
                        format!("UPDATE t SET writer = {w}, v = {i} WHERE id = 'hot{}';", i as i32 % HOT_ROWS + 1)
                    } else {
                        String::new()
                    };
                    let undone = if i % 3 == 0 {
                        format!("SAVEPOINT s; INSERT INTO t VALUES ('undone-{w}-{i}', {w}, {i}); ROLLBACK TO SAVEPOINT s;")
                    } else {
                        String::new()
                    };
                    let end = if i % 5 == 4 { "ROLLBACK" } else { "COMMIT" };
                    sql.batch_execute(&format!(
                        "BEGIN ISOLATION LEVEL {level}; {hot} INSERT INTO t VALUES ('{w}-{i}', {w}, {i}); {undone} {end}"
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
    // The tickers go on until every commit has its position.
    tokio::time::sleep(Duration::from_millis(100)).await;
    stop.store(true, Ordering::SeqCst);
    for ticker in tickers {
        ticker.await.unwrap();
    }
    sql.query_one("SELECT place.tick()", &[]).await.unwrap();
    let snapshots = reader.await.unwrap();
    assert!(snapshots > 10, "the reader took {snapshots} snapshots");

    let changes = sql
        .query(
            "SELECT pos, action, key ->> 'id', obj FROM place.changes_since(0, 100000)",
            &[],
        )
        .await
        .unwrap();
    let mut replayed: BTreeMap<String, Value> = BTreeMap::new();
    let mut inserted_at: HashMap<String, i64> = HashMap::new();
    let mut last_pos = 0;
    for row in &changes {
        let (pos, action, id, obj): (i64, String, String, Option<Value>) =
            (row.get(0), row.get(1), row.get(2), row.get(3));
        assert!(pos >= last_pos, "changes come in position order");
        last_pos = pos;
        match action.as_str() {
            "insert" | "update" => {
                replayed.insert(id.clone(), obj.expect("an insert or update has its row"));
            }
            other => panic!("unexpected action {other}"),
        }
        if action == "insert" {
            assert!(
                inserted_at.insert(id.clone(), pos).is_none(),
                "{id} was inserted once, but is in two positions"
            );
        }
    }
    // Every committed insert is there once; nothing rolled back is.
    for w in 0..WRITERS {
        let mut previous = 0;
        for i in 0..EACH {
            let id = format!("{w}-{i}");
            let committed = i % 5 != 4;
            assert_eq!(inserted_at.contains_key(&id), committed, "{id}");
            assert!(!inserted_at.contains_key(&format!("undone-{w}-{i}")));
            if let Some(&pos) = inserted_at.get(&id) {
                assert!(
                    pos >= previous,
                    "writer {w}'s commits went back from position {previous} to {pos}"
                );
                previous = pos;
            }
        }
    }
    // The replay is the table (the hot rows seeded before the watch are only there if
    // updated, which every read-committed writer did).
    let table: BTreeMap<String, Value> = sql
        .query("SELECT id, to_jsonb(t) FROM t", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_eq!(
        replayed, table,
        "replaying the log in order gives the table"
    );
}
