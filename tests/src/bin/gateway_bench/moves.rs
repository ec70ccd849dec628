//! Scenario `moves`: legacy sessions (no `ack`) behind two gateways, the way a plain
//! round-robin balancer sends them. 100 sessions follow the 1000×1000 board (its whole
//! state is ~670 kB, what a `reset` costs) while SQL places 200 tiles/s (`place_many` of
//! 10 every 50 ms). Two phases with the same sessions: every poll on gateway A, then every
//! poll on the other gateway than the one before (a move per poll: the gateway that held
//! the session hands over where its view stands, `sessions::handover`).
//!
//! Reported per phase: polls/s, events and bytes per poll, the poll's latency, resets; for
//! the moving one, the hand-over's wait as the gateways measured it and the database's
//! commits per move (`pg_stat_database.xact_commit`, less the writer's).

use crate::client::{get_events_body, metric_values, Conn};
use crate::delivery::BATCH;
use crate::process::Gateway;
use crate::report::{rate, Latencies, Table};
use crate::{Result, Setup};
use rand::Rng;
use serde::Deserialize;
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio::sync::watch;
use tokio::time::MissedTickBehavior;

const SESSIONS: usize = 100;
const PERIOD: Duration = Duration::from_millis(50);
const SIDE: i32 = 1000;
const POLL_SECS: u64 = 5;
const NAME: &str = "moves";
/// A backend reports its commits to the statistics when idle for this long at most.
const STATS_FLUSHED_WITHIN: Duration = Duration::from_secs(11);

#[derive(Deserialize)]
struct Answer {
    result: Vec<Event>,
}

#[derive(Deserialize)]
struct Event {
    action: String,
}

#[derive(Default)]
struct Watch {
    polls: usize,
    events: usize,
    bytes: usize,
    resets: usize,
    latency: Latencies,
    error: Option<String>,
}

pub async fn run(setup: &Setup) -> Result<Table> {
    let a = setup.gateway(&format!("{NAME}-a")).await?;
    let b = setup.gateway(&format!("{NAME}-b")).await?;
    let mut sessions = Vec::with_capacity(SESSIONS);
    for _ in 0..SESSIONS {
        sessions.push(subscribe(&a, &b, setup.board).await?);
    }
    let mut table = Table::new();
    let (sessions, stay) = phase(setup, sessions, false).await?;
    let (_, moving) = phase(setup, sessions, true).await?;
    report(&mut table, "every poll on one gateway", stay, None);
    let handovers = handover_waits(&[&a, &b]).await?;
    report(&mut table, "every poll moves", moving, Some(handovers));
    a.stop().await;
    b.stop().await;
    Ok(table)
}

struct Phase {
    watches: Vec<Watch>,
    elapsed: Duration,
    /// Commits other than the writer's.
    commits: i64,
}

/// One session: the two gateways it polls, and its id. Each phase opens its own keep-alive
/// connections, as a client does: a gateway closes one left idle for its header timeout
/// (30 s; longer than a phase and the statistics wait).
type Client = ([SocketAddr; 2], String);

async fn subscribe(a: &Gateway, b: &Gateway, board: i64) -> Result<Client> {
    let mut on_a = Conn::open(a.addr).await?;
    let session = on_a.session(None).await?;
    let body = serde_json::json!({
        "jsonrpc": "2.0", "method": "session.subscribe", "id": 1,
        "params": {"session": session, "view": "board", "params": {"board": board}},
    });
    // The answer holds the whole board: read, not parsed.
    let answer = on_a.post(body.to_string().into()).await?;
    if answer.windows(8).any(|w| w == b"\"error\":") {
        return Err(String::from_utf8_lossy(&answer[..answer.len().min(300)])
            .to_string()
            .into());
    }
    Ok(([a.addr, b.addr], session))
}

async fn phase(setup: &Setup, sessions: Vec<Client>, moving: bool) -> Result<(Vec<Client>, Phase)> {
    let db = pgplace_tests::connect(&setup.db_url).await;
    let commits_before = commits(&db).await?;
    let (stop, stopped) = watch::channel(false);
    let pollers: Vec<_> = sessions
        .into_iter()
        .map(|client| tokio::spawn(poll(client, moving, stopped.clone())))
        .collect();
    let started = Instant::now();
    let writes = write(setup, &db).await?;
    let _ = stop.send(true);
    let elapsed = started.elapsed();
    let mut sessions = Vec::with_capacity(pollers.len());
    let mut watches = Vec::with_capacity(pollers.len());
    for poller in pollers {
        let (client, watch) = poller.await?;
        sessions.push(client);
        watches.push(watch);
    }
    tokio::time::sleep(STATS_FLUSHED_WITHIN).await;
    // The writer's place_many calls and this statistics read are not the sessions' work.
    let commits = commits(&db).await? - commits_before - writes as i64 - 1;
    Ok((
        sessions,
        Phase {
            watches,
            elapsed,
            commits,
        },
    ))
}

async fn commits(db: &tokio_postgres::Client) -> Result<i64> {
    db.batch_execute("SELECT pg_stat_clear_snapshot()").await?;
    let row = db
        .query_one(
            "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()",
            &[],
        )
        .await?;
    Ok(row.get(0))
}

/// Places for the phase; the number of place_many calls.
async fn write(setup: &Setup, db: &tokio_postgres::Client) -> Result<usize> {
    let statement = db
        .prepare("SELECT count(*) FROM place.place_many($1, $2, $3, $4, $5) WHERE placed")
        .await?;
    let mut ticks = tokio::time::interval(PERIOD);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let end = Instant::now() + setup.phase();
    let mut calls = 0;
    while Instant::now() < end {
        ticks.tick().await;
        let (xs, ys, colors): (Vec<i32>, Vec<i32>, Vec<i32>) = {
            let mut rng = rand::rng();
            let xs = (0..BATCH).map(|_| rng.random_range(0..SIDE)).collect();
            let ys = (0..BATCH).map(|_| rng.random_range(0..SIDE)).collect();
            let colors = (0..BATCH).map(|_| rng.random_range(0..16)).collect();
            (xs, ys, colors)
        };
        db.query_one(
            &statement,
            &[&setup.board, &setup.writers, &xs, &ys, &colors],
        )
        .await?;
        calls += 1;
    }
    Ok(calls)
}

async fn poll(client: Client, moving: bool, mut stopped: watch::Receiver<bool>) -> (Client, Watch) {
    let (addrs, session) = client;
    let body = get_events_body(&session, POLL_SECS);
    let mut w = Watch::default();
    let mut conns = Vec::with_capacity(addrs.len());
    for addr in addrs {
        match Conn::open(addr).await {
            Ok(conn) => conns.push(conn),
            Err(error) => {
                w.error = Some(format!("connecting to {addr}: {error}"));
                return ((addrs, session), w);
            }
        }
    }
    let mut on = 0;
    loop {
        let started = Instant::now();
        tokio::select! {
            biased;
            _ = stopped.changed() => break,
            response = conns[on].post(body.clone()) => {
                let answer = response.map_err(|e| e.to_string()).and_then(|bytes| {
                    let parsed: Answer = serde_json::from_slice(&bytes).map_err(|e| e.to_string())?;
                    Ok((bytes.len(), parsed))
                });
                match answer {
                    Ok((bytes, answer)) => {
                        w.latency.push(started.elapsed());
                        w.polls += 1;
                        w.bytes += bytes;
                        w.events += answer.result.len();
                        w.resets += answer.result.iter().filter(|e| e.action == "reset").count();
                    }
                    Err(error) => {
                        w.error = Some(error);
                        break;
                    }
                }
            }
        }
        if moving {
            on = 1 - on;
        }
    }
    ((addrs, session), w)
}

/// The gateways' hand-overs: (count handed, count not handed, mean wait in ms).
async fn handover_waits(gateways: &[&Gateway]) -> Result<(f64, f64, f64)> {
    let (mut handed, mut not_handed, mut seconds) = (0.0, 0.0, 0.0);
    for gateway in gateways {
        let values = metric_values(
            gateway.addr,
            &[
                "pgplace_legacy_handover_seconds_count{outcome=\"handed\"}",
                "pgplace_legacy_handover_seconds_count{outcome=\"not_handed\"}",
                "pgplace_legacy_handover_seconds_sum{outcome=\"handed\"}",
            ],
        )
        .await?;
        handed += values[0];
        not_handed += values[1];
        seconds += values[2];
    }
    Ok((handed, not_handed, seconds * 1000.0 / handed.max(1.0)))
}

fn report(table: &mut Table, what: &str, mut phase: Phase, handovers: Option<(f64, f64, f64)>) {
    let name = format!("{NAME} ({what})");
    let sum = |f: fn(&Watch) -> usize| phase.watches.iter().map(f).sum::<usize>();
    let (polls, events, bytes, resets) = (
        sum(|w| w.polls),
        sum(|w| w.events),
        sum(|w| w.bytes),
        sum(|w| w.resets),
    );
    let mut latency = Latencies::default();
    for w in &mut phase.watches {
        latency.extend(std::mem::take(&mut w.latency));
    }
    let errors: Vec<&String> = phase
        .watches
        .iter()
        .filter_map(|w| w.error.as_ref())
        .collect();
    table.info(
        &name,
        "polls",
        format!("{:.0}/s", rate(polls, phase.elapsed)),
    );
    table.info(
        &name,
        "events / bytes per poll",
        format!(
            "{:.1} / {:.0} ({:.0} bytes per event)",
            events as f64 / polls.max(1) as f64,
            bytes as f64 / polls.max(1) as f64,
            bytes as f64 / events.max(1) as f64
        ),
    );
    table.info(&name, "poll latency", latency.sorted().summary());
    table.info(
        &name,
        "database commits per poll (not the writer's)",
        format!("{:.2}", phase.commits as f64 / polls.max(1) as f64),
    );
    if let Some((handed, not_handed, mean_ms)) = handovers {
        table.info(
            &name,
            "hand-overs (handed / not), mean wait",
            format!("{handed:.0} / {not_handed:.0}, {mean_ms:.2} ms"),
        );
    }
    table.resets_and_errors(&name, resets, &errors);
}
