//! Scenario `regions`: what a client that shows one corner of a large board costs the
//! gateway. A 4096×4096 board takes 1,000 placements/s (SQL, 10 per `place_many`, random
//! tiles); first 1,000 sessions each follow a 100×100 region (compact), then 100 sessions
//! follow the whole board (compact), each with a fresh gateway. Reported: the gateway's
//! CPU over the phase, tiles delivered, and CPU per delivered tile and per placement.

use crate::client::{poll_answers, Conn};
use crate::delivery::BATCH;
use crate::process::Gateway;
use crate::report::{rate, CpuClock, Table};
use crate::{Result, Setup};
use rand::Rng;
use serde::Deserialize;
use std::time::{Duration, Instant};
use tokio::sync::watch;
use tokio::time::MissedTickBehavior;

const SIDE: i32 = 4096;
const REGION: i32 = 100;
const PERIOD: Duration = Duration::from_millis(10);
const POLL_SECS: u64 = 30;
const NAME: &str = "regions";

#[derive(Deserialize)]
struct Answer {
    result: Vec<Event>,
}

#[derive(Deserialize)]
struct Event {
    action: String,
    tiles: Option<Vec<(i32, i32, i32)>>,
}

#[derive(Default)]
struct Watch {
    tiles: usize,
    resets: usize,
    error: Option<String>,
}

pub async fn run(setup: &Setup) -> Result<Table> {
    let db = pgplace_tests::connect(&setup.db_url).await;
    let board = pgplace_tests::create_board(&db, "regions", (SIDE, SIDE), 4, "0").await;
    let mut table = Table::new();
    table.extend(phase(setup, board, "1,000 regions of 100x100", 1000, true).await?);
    table.extend(phase(setup, board, "100 whole-board sessions", 100, false).await?);
    Ok(table)
}

async fn phase(
    setup: &Setup,
    board: i64,
    what: &str,
    sessions: usize,
    regions: bool,
) -> Result<Table> {
    let name = format!("{NAME} ({what})");
    let gateway = setup.gateway(&format!("{NAME}-{sessions}")).await?;
    let (stop, stopped) = watch::channel(false);
    let mut watchers = Vec::with_capacity(sessions);
    for _ in 0..sessions {
        let (conn, session) = subscribe(&gateway, board, regions).await?;
        watchers.push(tokio::spawn(poll(conn, session, stopped.clone())));
    }
    let cpu_before = gateway.cpu();
    let cpu = CpuClock::start(&gateway);
    let placed = write(setup, board).await?;
    let cpu = cpu.finish(&gateway);
    let used = gateway.cpu().saturating_sub(cpu_before);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let _ = stop.send(true);
    let mut watches = Vec::new();
    for w in watchers {
        watches.push(w.await?);
    }
    gateway.stop().await;
    let tiles: usize = watches.iter().map(|w| w.tiles).sum();
    let resets: usize = watches.iter().map(|w| w.resets).sum();
    let errors: Vec<&String> = watches.iter().filter_map(|w| w.error.as_ref()).collect();
    let per = |n: usize| used.as_secs_f64() * 1e6 / n.max(1) as f64;
    let mut t = Table::new();
    t.info(
        &name,
        "placements committed",
        format!("{:.0}/s", rate(placed, setup.phase())),
    );
    t.info(
        &name,
        "tiles delivered to sessions",
        format!("{:.0}/s", rate(tiles, setup.phase())),
    );
    t.info(&name, "CPU during the phase", cpu);
    t.info(
        &name,
        "gateway CPU per delivered tile / per placement",
        format!("{:.1} µs / {:.1} µs", per(tiles), per(placed)),
    );
    t.resets_and_errors(&name, resets, &errors);
    Ok(t)
}

async fn subscribe(gateway: &Gateway, board: i64, region: bool) -> Result<(Conn, String)> {
    let mut conn = Conn::open(gateway.addr).await?;
    let session = conn.session(None).await?;
    let (view, params) = if region {
        let mut rng = rand::rng();
        let params = serde_json::json!({
            "board": board, "x": rng.random_range(0..=SIDE - REGION), "y": rng.random_range(0..=SIDE - REGION),
            "width": REGION, "height": REGION, "compact": true,
        });
        ("board_region", params)
    } else {
        (
            "board",
            serde_json::json!({"board": board, "compact": true}),
        )
    };
    // The answer holds the whole state: read, not parsed.
    let body = serde_json::json!({
        "jsonrpc": "2.0", "method": "session.subscribe", "id": 1,
        "params": {"session": session, "view": view, "params": params},
    });
    let answer = conn.post(body.to_string().into()).await?;
    if answer.windows(8).any(|w| w == b"\"error\":") {
        return Err(String::from_utf8_lossy(&answer[..answer.len().min(300)])
            .to_string()
            .into());
    }
    Ok((conn, session))
}

async fn write(setup: &Setup, board: i64) -> Result<usize> {
    let db = pgplace_tests::connect(&setup.db_url).await;
    let statement = db
        .prepare("SELECT count(*) FROM place.place_many($1, $2, $3, $4, $5) WHERE placed")
        .await?;
    let mut ticks = tokio::time::interval(PERIOD);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let end = Instant::now() + setup.phase();
    let mut placed = 0;
    while Instant::now() < end {
        ticks.tick().await;
        let (xs, ys, colors): (Vec<i32>, Vec<i32>, Vec<i32>) = {
            let mut rng = rand::rng();
            let xs = (0..BATCH).map(|_| rng.random_range(0..SIDE)).collect();
            let ys = (0..BATCH).map(|_| rng.random_range(0..SIDE)).collect();
            let colors = (0..BATCH).map(|_| rng.random_range(0..16)).collect();
            (xs, ys, colors)
        };
        let count: i64 = db
            .query_one(&statement, &[&board, &setup.writers, &xs, &ys, &colors])
            .await?
            .get(0);
        placed += count as usize;
    }
    Ok(placed)
}

async fn poll(mut conn: Conn, session: String, stopped: watch::Receiver<bool>) -> Watch {
    let mut w = Watch::default();
    w.error = poll_answers(
        &mut conn,
        &session,
        POLL_SECS,
        stopped,
        |answer: Answer, _| {
            for event in answer.result {
                match event.action.as_str() {
                    "tiles" => w.tiles += event.tiles.map_or(0, |t| t.len()),
                    "reset" => w.resets += 1,
                    _ => {}
                }
            }
        },
    )
    .await;
    w
}
