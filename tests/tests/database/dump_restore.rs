//! A DBA's pg_dump keeps every board, chunk, placement, user and token: restored into a
//! fresh database, the boards read the same and placing goes on from the same seq. The
//! change log's positions are kept, not their changes (their transaction ids belong to
//! the cluster that made them), and new changes get the next positions.

use pgplace_tests::{
    admin_url, board_bits, connect, create_board, create_users, fresh_database, history_rows,
    recreate_database, url_of,
};
use std::process::Command;

fn pg_bin(tool: &str) -> String {
    let dir = std::env::var("PG_BIN").unwrap_or_else(|_| "/usr/lib/postgresql/15/bin".to_string());
    format!("{dir}/{tool}")
}

fn run(tool: &str, args: &[&str]) {
    let out = Command::new(pg_bin(tool))
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{tool}: {e}"));
    assert!(
        out.status.success(),
        "{tool} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test]
async fn pg_dump_and_restore_keep_the_boards_and_their_history() {
    let source = fresh_database("pgplace_test_dump_src").await;
    let client = connect(&source).await;
    let board = create_board(&client, "kept", (300, 200), 4, "0").await;
    let other = create_board(&client, "other", (16, 16), 1, "5 minutes").await;
    let users = create_users(&client, "kept", 3).await;
    let token: String = client
        .query_one("SELECT token FROM place.create_user('with-token')", &[])
        .await
        .unwrap()
        .get(0);
    client
        .query(
            "SELECT * FROM place.place_many($1, ARRAY[$2, $3, $4, $2]::bigint[], '{1,299,5,1}', '{1,199,6,1}', '{3,4,5,6}')",
            &[&board, &users[0], &users[1], &users[2]],
        )
        .await
        .unwrap();
    client
        .query(
            "SELECT * FROM place.place($1, 3, 3, 1, $2)",
            &[&other, &users[0]],
        )
        .await
        .unwrap();
    // Keyframes, compacted history and bans are part of what must survive.
    client
        .batch_execute(&format!(
            "SELECT place.set_keyframe_every({board}, 2); \
             SELECT place.place_many({board}, ARRAY[{a}, {b}, {c}]::bigint[], '{{7,8,9}}', '{{7,8,9}}', '{{1,2,3}}'); \
             SELECT place.compact_history({board}, (SELECT placed_at FROM place.placements WHERE board_id = {board} AND seq = 2)); \
             SELECT place.ban_user({c}, NULL, 'dump test');",
            a = users[0],
            b = users[1],
            c = users[2]
        ))
        .await
        .unwrap();
    // A watched table with a list view, and its change log.
    client
        .batch_execute(
            "CREATE TABLE streams (id int PRIMARY KEY, title text NOT NULL, viewers int NOT NULL); \
             SELECT place.watch('streams', ARRAY['title', 'viewers']); \
             SELECT place.create_view('top', 'streams', 'viewers', 'viewers > 0'); \
             INSERT INTO streams VALUES (1, 'a', 5), (2, 'b', 0);",
        )
        .await
        .unwrap();
    // A statement of its own: a tick sees only what committed before it.
    client.execute("SELECT place.tick()", &[]).await.unwrap();
    let before = (
        board_bits(&client, board).await,
        board_bits(&client, other).await,
    );
    let tables_before = table_fingerprints(&client).await;

    let dump = std::env::temp_dir().join("pgplace_test_dump.custom");
    let dump = dump.to_str().unwrap();
    run("pg_dump", &["-Fc", "-f", dump, "-d", &source]);
    let admin = connect(&admin_url()).await;
    recreate_database(&admin, "pgplace_test_dump_dst").await;
    let target = url_of("pgplace_test_dump_dst");
    run("pg_restore", &["--exit-on-error", "-d", &target, dump]);

    let restored = connect(&target).await;
    let after = (
        board_bits(&restored, board).await,
        board_bits(&restored, other).await,
    );
    assert_eq!(after, before);
    assert_eq!(table_fingerprints(&restored).await, tables_before);
    assert_eq!(
        restored_log(&restored).await,
        (vec![1], 0),
        "positions are restored, changes are not"
    );
    let history = history_rows(&restored).await;
    // 4 + 3 on `board` with its first 4 compacted away, 1 on `other`.
    assert_eq!(history, 4);
    // Time travel works on the restored copy (from the keyframe kept by the compaction).
    let at_5: Vec<u8> = restored
        .query_one("SELECT bits FROM place.board_at_seq($1, 5)", &[&board])
        .await
        .unwrap()
        .get(0);
    let at_5_before: Vec<u8> = client
        .query_one("SELECT bits FROM place.board_at_seq($1, 5)", &[&board])
        .await
        .unwrap()
        .get(0);
    assert_eq!(at_5, at_5_before);
    let token_user: Option<i64> = restored
        .query_one("SELECT place.user_for_token($1)", &[&token])
        .await
        .unwrap()
        .get(0);
    assert!(token_user.is_some(), "tokens survive the dump");
    // The cooldown survives too: users[0] placed on `other` a moment ago.
    let placed: bool = restored
        .query_one(
            "SELECT placed FROM place.place($1, 4, 4, 1, $2)",
            &[&other, &users[0]],
        )
        .await
        .unwrap()
        .get(0);
    assert!(!placed);
    // Placing goes on from the restored seq, and new ids do not collide.
    let seq: Option<i64> = restored
        .query_one(
            "SELECT seq FROM place.place($1, 7, 7, 7, $2)",
            &[&board, &users[1]],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(seq, Some(8));
    // The watch and the view came back: a change is logged at the next position, and
    // the view reads it.
    restored
        .batch_execute("UPDATE streams SET viewers = 9 WHERE id = 2")
        .await
        .unwrap();
    restored.execute("SELECT place.tick()", &[]).await.unwrap();
    let (pos, rows): (i64, serde_json::Value) = restored
        .query_one("SELECT pos, rows FROM place.view_rows('top')", &[])
        .await
        .map(|r| (r.get(0), r.get(1)))
        .unwrap();
    assert_eq!(pos, 2, "one position before the dump, one after");
    assert_eq!(logged_after(&restored, 1).await, ["update 2"]);
    // The restored position is kept without its changes: its readers read afresh.
    let refused = restored
        .query("SELECT * FROM place.changes_since(0)", &[])
        .await
        .unwrap_err();
    assert_eq!(
        refused.code(),
        Some(&tokio_postgres::error::SqlState::OBJECT_NOT_IN_PREREQUISITE_STATE),
        "{refused:?}"
    );
    assert_eq!(
        rows,
        serde_json::json!([{"id": 2, "title": "b", "viewers": 9}, {"id": 1, "title": "a", "viewers": 5}])
    );
    let new_board = create_board(&restored, "new", (2, 2), 1, "0").await;
    assert!(new_board > other);
    std::fs::remove_file(dump).ok();
}

/// Another cluster's transaction ids may be behind the dumped log's: a dump whose ids are
/// far ahead of this cluster's (shifted by a billion) restores, and the next change is
/// still given the next position, with no restored change in it or after it.
#[tokio::test]
async fn a_log_from_a_cluster_ahead_does_not_hide_new_changes() {
    let source = fresh_database("pgplace_test_dump_ahead_src").await;
    let client = connect(&source).await;
    client
        .batch_execute(
            "CREATE TABLE streams (id int PRIMARY KEY, viewers int NOT NULL); \
             SELECT place.watch('streams'); \
             INSERT INTO streams VALUES (1, 5), (2, 0);",
        )
        .await
        .unwrap();
    client.execute("SELECT place.tick()", &[]).await.unwrap();
    // Staged and committed, but not yet given a position when the dump is taken.
    client
        .batch_execute("UPDATE streams SET viewers = 6 WHERE id = 1")
        .await
        .unwrap();
    let out = Command::new(pg_bin("pg_dump"))
        .args(["-Fp", "-d", &source])
        .output()
        .expect("pg_dump");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dump = shift_log_xids(&String::from_utf8(out.stdout).unwrap(), 1_000_000_000);
    let admin = connect(&admin_url()).await;
    recreate_database(&admin, "pgplace_test_dump_ahead_dst").await;
    let target = url_of("pgplace_test_dump_ahead_dst");
    let mut psql = Command::new(pg_bin("psql"))
        .args(["-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", &target])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("psql");
    std::io::Write::write_all(psql.stdin.as_mut().unwrap(), dump.as_bytes()).unwrap();
    drop(psql.stdin.take());
    assert!(psql.wait().unwrap().success(), "the shifted dump restores");

    let restored = connect(&target).await;
    assert_eq!(restored_log(&restored).await, (vec![1], 0));
    restored
        .batch_execute("UPDATE streams SET viewers = 9 WHERE id = 2")
        .await
        .unwrap();
    let made: i64 = restored
        .query_one("SELECT place.tick()", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(
        made, 2,
        "the change after the restore has the next position"
    );
    assert_eq!(logged_after(&restored, 1).await, ["update 2"]);
}

/// The dump's text with every transaction id of the change log (place.changes' xid,
/// place.change_ticks' snapshots) moved `by` ahead, as another cluster's would be.
fn shift_log_xids(dump: &str, by: u64) -> String {
    let shift = |n: &str| (n.parse::<u64>().unwrap() + by).to_string();
    let mut out = String::new();
    let mut copying: Option<&str> = None;
    for line in dump.lines() {
        let line_out = match copying {
            _ if line == "\\." => {
                copying = None;
                line.to_string()
            }
            Some("changes") => {
                let (xid, rest) = line.split_once('\t').unwrap();
                format!("{}\t{rest}", shift(xid))
            }
            Some("ticks") => {
                let cols: Vec<&str> = line.split('\t').collect();
                let snap = |s: &str| {
                    s.split(':')
                        .map(|part| {
                            part.split(',')
                                .filter(|x| !x.is_empty())
                                .map(shift)
                                .collect::<Vec<_>>()
                                .join(",")
                        })
                        .collect::<Vec<_>>()
                        .join(":")
                };
                format!(
                    "{}\t{}\t{}\t{}",
                    cols[0],
                    snap(cols[1]),
                    snap(cols[2]),
                    cols[3]
                )
            }
            _ => {
                if line.starts_with("COPY place.changes ") {
                    copying = Some("changes");
                } else if line.starts_with("COPY place.change_ticks ") {
                    copying = Some("ticks");
                } else if line.starts_with("COPY ") {
                    copying = Some("other");
                }
                line.to_string()
            }
        };
        out.push_str(&line_out);
        out.push('\n');
    }
    assert!(out.contains("\t1000000"), "the dump has a log to shift");
    out
}

/// The restored database's log: its positions, and how many changes it holds.
async fn restored_log(client: &tokio_postgres::Client) -> (Vec<i64>, i64) {
    let row = client
        .query_one(
            "SELECT (SELECT coalesce(array_agg(pos ORDER BY pos), '{}') FROM place.change_ticks), \
                    (SELECT count(*) FROM place.changes)",
            &[],
        )
        .await
        .unwrap();
    (row.get(0), row.get(1))
}

/// The changes logged after position `after`, as "action key".
async fn logged_after(client: &tokio_postgres::Client, after: i64) -> Vec<String> {
    client
        .query(
            "SELECT action || ' ' || (key ->> 'id') FROM place.changes_since($1)",
            &[&after],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect()
}

/// An md5 of every row of every pgplace table, by table.
async fn table_fingerprints(client: &tokio_postgres::Client) -> Vec<(String, String)> {
    let tables = [
        "boards",
        "board_chunks",
        "users",
        "user_tokens",
        "placements",
        "cooldowns",
        "keyframes",
        "bans",
        "watches",
        "views",
        "change_settings",
    ];
    let mut out = Vec::new();
    for table in tables {
        let sql = format!(
            "SELECT coalesce(md5(string_agg(t::text, '|' ORDER BY t::text)), 'empty') FROM place.{table} t"
        );
        let md5: String = client.query_one(&sql, &[]).await.unwrap().get(0);
        out.push((table.to_string(), md5));
    }
    out
}
