//! A DBA's pg_dump keeps every board, chunk, placement, user and token: restored into a
//! fresh database, the boards read the same and placing goes on from the same seq.

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
    let logged: Vec<String> = restored
        .query(
            "SELECT action || ' ' || (key ->> 'id') FROM place.changes_since(0)",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(
        logged,
        ["insert 1", "insert 2", "update 2"],
        "the log came back whole"
    );
    assert_eq!(
        rows,
        serde_json::json!([{"id": 2, "title": "b", "viewers": 9}, {"id": 1, "title": "a", "viewers": 5}])
    );
    let new_board = create_board(&restored, "new", (2, 2), 1, "0").await;
    assert!(new_board > other);
    std::fs::remove_file(dump).ok();
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
        "change_ticks",
        "changes",
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
