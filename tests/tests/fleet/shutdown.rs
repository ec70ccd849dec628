//! SIGTERM to a real gateway process under load: it stops accepting, answers every
//! waiting poll, finishes the placements in flight and answers them, closes its database
//! connections and exits in time. Every placement acknowledged to a client is in the
//! history; the history stays gap-free.

use pgplace_tests::gateway::Http;
use pgplace_tests::processes::GatewayProcess;
use pgplace_tests::stream_check::history;
use pgplace_tests::{connect, create_board, create_users_with_tokens, fresh_database};
use serde_json::json;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const WATCHERS: usize = 60;
const PLACERS: usize = 24;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_answers_everyone_and_loses_no_acknowledged_placement() {
    let _alone = pgplace_tests::alone();
    let url = fresh_database("gw_shutdown").await;
    let sql = connect(&url).await;
    let board = create_board(&sql, "shutdown", (64, 64), 4, "0").await;
    let users = create_users_with_tokens(&sql, "shutdown", PLACERS as i32).await;
    let dir = std::env::temp_dir().join("pgplace-shutdown");
    std::fs::create_dir_all(&dir).unwrap();
    let mut gateway = GatewayProcess::start("gw_shutdown", &url, &dir, &[]);
    gateway.wait_healthy().await;
    let http = Http::new(gateway.addr);

    // Watchers wait in long polls, legacy and acking.
    let mut polls = Vec::new();
    for i in 0..WATCHERS {
        let session = http.ok("session.create", json!([])).await;
        http.ok(
            "session.subscribe",
            json!([session, "board", {"board": board}]),
        )
        .await;
        let http = Http::new(gateway.addr);
        let acking = i % 2 == 0;
        polls.push(tokio::spawn(async move {
            // When each poll was sent, and whether it was answered, until the gateway
            // is gone.
            let mut polls = Vec::new();
            let mut ack = json!("");
            loop {
                let params = if acking {
                    json!([session, 60, ack])
                } else {
                    json!([session, 60])
                };
                let sent = Instant::now();
                match http.try_call("session.get_events", params).await {
                    Ok(result) => {
                        let result = result.expect("a poll's answer");
                        if acking {
                            ack = result["cursor"].clone();
                        }
                        polls.push((sent, Instant::now()));
                    }
                    Err(error) => return (polls, sent, error),
                }
            }
        }));
    }

    // Placers place until the gateway goes away, keeping what it acknowledged.
    let running = Arc::new(AtomicBool::new(true));
    let mut placers = Vec::new();
    for (i, (_, token)) in users.iter().enumerate() {
        let http = Http::new(gateway.addr);
        let token = token.clone();
        let running = running.clone();
        placers.push(tokio::spawn(async move {
            let session = http.ok("session.create", json!([])).await;
            http.ok("session.authorize", json!([session, token])).await;
            let mut acknowledged: Vec<(i64, (i32, i32, i32))> = Vec::new();
            let mut n = 0;
            while running.load(Ordering::SeqCst) {
                let (x, y, color) = (
                    (i * 2 + n % 2) as i32,
                    (n / 2 % 64) as i32,
                    (1 + n % 15) as i32,
                );
                n += 1;
                match http
                    .try_call("board.place", json!([session, board, x, y, color]))
                    .await
                {
                    Ok(Ok(placed)) => {
                        let seq = placed["seq"].as_i64().expect("an acknowledged seq");
                        acknowledged.push((seq, (x, y, color)));
                    }
                    // Refused, or no answer (the gateway is going): not acknowledged.
                    Ok(Err(_)) | Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
                }
            }
            acknowledged
        }));
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;

    let sigterm = Instant::now();
    let (status, took) = gateway.terminate();
    running.store(false, Ordering::SeqCst);
    assert!(status.success(), "the gateway exits cleanly: {status}");
    assert!(took < Duration::from_secs(5), "it took {took:?} to stop");

    // Every poll sent before SIGTERM was answered (its connection then closed); only one
    // sent later may find the gateway gone.
    for (i, poll) in polls.into_iter().enumerate() {
        let (answered, failed_at, error) = poll.await.unwrap();
        assert!(
            failed_at >= sigterm,
            "watcher {i}'s poll sent before SIGTERM was cut off: {error}"
        );
        assert!(
            answered.last().is_some_and(|(_, at)| *at >= sigterm),
            "watcher {i} was waiting when SIGTERM came, and that poll was answered"
        );
    }

    let history = history(&sql, board).await;
    let mut acknowledged = 0;
    for placer in placers {
        for (seq, (x, y, color)) in placer.await.unwrap() {
            let row = history
                .get(&seq)
                .expect("an acknowledged placement is in the history");
            assert_eq!((row.0, row.1, row.2), (x, y, color), "seq {seq}");
            acknowledged += 1;
        }
    }
    assert!(
        acknowledged > 0,
        "placements were acknowledged before SIGTERM"
    );
    let seqs: Vec<i64> = history.keys().copied().collect();
    assert_eq!(
        seqs,
        (1..=seqs.len() as i64).collect::<Vec<_>>(),
        "gap-free"
    );

    let left: i64 = sql
        .query_one(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE 'gw_shutdown%'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(left, 0, "the gateway closed its database connections");
    println!(
        "shutdown in {took:?}; {acknowledged} placements acknowledged, {} in the history",
        history.len()
    );
}
