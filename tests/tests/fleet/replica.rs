//! `--replica-url`: reads that need no freshness guarantee (tile history, pictures of the
//! past) come from a real streaming standby (`pg_basebackup -R`), while views stay exact
//! from the primary; a standby that is down sends those reads to the primary.

use pgplace_core::png::decode;
use pgplace_tests::gateway::{start_gateway, Http};
use pgplace_tests::processes::free_port;
use pgplace_tests::{admin_url, connect, create_board, create_users, fresh_database};
use serde_json::json;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

fn pg_bin(tool: &str) -> String {
    let dir = std::env::var("PGPLACE_TEST_PG_BIN")
        .unwrap_or_else(|_| "/usr/lib/postgresql/15/bin".to_string());
    format!("{dir}/{tool}")
}

/// Runs a PostgreSQL tool as the postgres user (the tests run as root).
fn as_postgres(args: &[&str]) {
    let status = Command::new("runuser")
        .args(["-u", "postgres", "--"])
        .args(args)
        .status()
        .expect("runuser runs");
    assert!(status.success(), "{args:?} failed");
}

/// A standby of the test cluster on its own port, removed when dropped.
struct Standby {
    dir: PathBuf,
    port: u16,
}

impl Standby {
    fn start() -> Self {
        let primary: tokio_postgres::Config = admin_url().parse().unwrap();
        let primary_port = primary
            .get_ports()
            .first()
            .copied()
            .unwrap_or(5432)
            .to_string();
        let port = free_port();
        let dir = std::env::temp_dir().join(format!("pgplace-standby-{port}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let chown = Command::new("chown")
            .args(["postgres:postgres"])
            .arg(&dir)
            .status()
            .unwrap();
        assert!(chown.success());
        let data = dir.join("data");
        let data_s = data.to_str().unwrap();
        as_postgres(&[
            &pg_bin("pg_basebackup"),
            "-h",
            "127.0.0.1",
            "-p",
            &primary_port,
            "-U",
            "postgres",
            "-D",
            data_s,
            "-R",
            "-X",
            "stream",
            "-c",
            "fast",
        ]);
        let conf = format!(
            "\n# the test's standby\nport = {port}\nunix_socket_directories = '{}'\nhot_standby = on\n",
            dir.display()
        );
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(data.join("postgresql.conf"))
            .unwrap();
        std::io::Write::write_all(&mut file, conf.as_bytes()).unwrap();
        let log = dir.join("standby.log");
        as_postgres(&[
            &pg_bin("pg_ctl"),
            "-D",
            data_s,
            "-l",
            log.to_str().unwrap(),
            "-w",
            "start",
        ]);
        Standby { dir, port }
    }

    fn url(&self, database: &str) -> String {
        format!("postgresql://postgres@127.0.0.1:{}/{database}", self.port)
    }

    fn stop(&self) {
        let data = self.dir.join("data");
        as_postgres(&[
            &pg_bin("pg_ctl"),
            "-D",
            data.to_str().unwrap(),
            "-m",
            "immediate",
            "-w",
            "stop",
        ]);
    }
}

impl Drop for Standby {
    fn drop(&mut self) {
        let data = self.dir.join("data");
        let _ = Command::new("runuser")
            .args(["-u", "postgres", "--", &pg_bin("pg_ctl"), "-D"])
            .arg(&data)
            .args(["-m", "immediate", "stop"])
            .output();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Seqs of `board.tile_history` (newest first).
async fn history_seqs(http: &Http, board: i64, x: i32, y: i32) -> Vec<i64> {
    http.ok("board.tile_history", json!([board, x, y, 10]))
        .await
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["seq"].as_i64().unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lagging_reads_come_from_the_replica_and_views_stay_exact() {
    let _alone = pgplace_tests::alone();
    let url = fresh_database("gw_replica").await;
    let sql = connect(&url).await;
    let board = create_board(&sql, "replicated", (4, 4), 4, "0").await;
    let user = create_users(&sql, "replicant", 1).await[0];
    sql.execute("SELECT place.place($1, 1, 1, 3, $2)", &[&board, &user])
        .await
        .unwrap();
    let standby = Standby::start();
    let replica = connect(&standby.url("gw_replica")).await;
    // Caught up with the first placement, then held still.
    let started = Instant::now();
    loop {
        let seq: Option<i64> = replica
            .query_opt("SELECT seq FROM place.boards WHERE id = $1", &[&board])
            .await
            .unwrap()
            .map(|r| r.get(0));
        if seq == Some(1) {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the standby caught up"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    replica
        .execute("SELECT pg_wal_replay_pause()", &[])
        .await
        .unwrap();

    let replica_url = standby.url("gw_replica");
    let gw = start_gateway(&url, |c| c.replica_url = Some(replica_url)).await;
    let http = Http::new(gw.addr);
    let session = http.ok("session.create", json!([])).await;
    http.ok(
        "session.subscribe",
        json!([session, "board", {"board": board}]),
    )
    .await;
    sql.execute("SELECT place.place($1, 1, 1, 9, $2)", &[&board, &user])
        .await
        .unwrap();
    // The view is exact at once (the primary's stream) ...
    let events = http.ok("session.get_events", json!([session, 5])).await;
    assert_eq!(events[0]["obj"]["seq"], 2, "{events}");
    // ... while the history and the picture come from the standby, which has not replayed
    // seq 2.
    assert_eq!(history_seqs(&http, board, 1, 1).await, [1]);
    let now = "2999-01-01T00:00:00Z";
    let (status, _, png) = http
        .get(
            &format!("/boards/{board}.png?at={now}"),
            &Default::default(),
        )
        .await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&png));
    let picture = decode(&png).expect("a PNG");
    assert_eq!(picture.indices[1 + 4], 3, "the tile as the standby has it");

    // Replay resumes: the standby catches up.
    replica
        .execute("SELECT pg_wal_replay_resume()", &[])
        .await
        .unwrap();
    let started = Instant::now();
    while history_seqs(&http, board, 1, 1).await != [2, 1] {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the standby caught up"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // A standby that is down: the primary answers.
    drop(replica);
    standby.stop();
    sql.execute("SELECT place.place($1, 1, 1, 5, $2)", &[&board, &user])
        .await
        .unwrap();
    assert_eq!(history_seqs(&http, board, 1, 1).await, [3, 2, 1]);
}
