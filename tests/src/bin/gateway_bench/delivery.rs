//! Scenario `delivery`: how long a committed placement takes to reach long-polling
//! sessions. Many sessions follow the board (compact view) and loop on `get_events`, while
//! placements are committed through SQL at a steady rate; the latency of a (session, seq)
//! pair is the time its `get_events` answer arrived minus the time `place_many` returned
//! that seq.

use crate::client::{compact_board, get_events_body, Conn};
use crate::process::Gateway;
use crate::report::{rate, CpuClock, Latencies, Table};
use crate::{Result, Setup};
use rand::Rng;
use serde::Deserialize;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, watch, Semaphore};
use tokio::time::MissedTickBehavior;

pub const SESSIONS: usize = 1000;
/// Placements per SQL batch, each by a different user.
pub const BATCH: usize = 10;
/// One batch per period: 10 placements every 10 ms is 1,000 placements/s.
const PERIOD: Duration = Duration::from_millis(10);
const POLL_SECS: u64 = 30;
/// Subscriptions set up at once: each answers with the whole board (≈ 670 kB of JSON).
const SETUP_CONCURRENCY: usize = 32;
/// Time for the last placements to reach every session after the writer stops.
const DRAIN: Duration = Duration::from_secs(3);
const NAME: &str = "delivery";

/// A `tiles` event as one session received it.
struct Arrival {
    first: i64,
    last: i64,
    at: Instant,
}

/// A get_events answer, read only as far as the benchmark needs: a typed, borrowing
/// parse keeps the load generator's share of the CPU small (a `serde_json::Value` tree
/// per answer cost it about a tenth of its time).
#[derive(Deserialize)]
struct Answer<'a> {
    #[serde(borrow)]
    result: Vec<Event<'a>>,
}

#[derive(Deserialize)]
struct Event<'a> {
    action: &'a str,
    /// `[first, last]` of a `tiles` event.
    seq: Option<(i64, i64)>,
}

/// What one session saw.
#[derive(Default)]
struct Watch {
    arrivals: Vec<Arrival>,
    responses: usize,
    /// Events that were not `tiles` (a `reset` means the session fell behind).
    other_events: usize,
    error: Option<String>,
}

pub async fn run(setup: &Setup) -> Result<Table> {
    let gateway = setup.gateway(NAME).await?;
    let (stop, stopped) = watch::channel(false);
    let watchers = start_watchers(&gateway, setup.board, stopped).await?;
    let cpu = CpuClock::start(&gateway);
    let writes = write(setup).await;
    let cpu = cpu.finish(&gateway);
    tokio::time::sleep(DRAIN).await;
    let _ = stop.send(true);
    let mut watches = Vec::with_capacity(SESSIONS);
    for watcher in watchers {
        watches.push(watcher.await?);
    }
    gateway.stop().await;
    Ok(report(writes?, &watches, setup.phase(), cpu))
}

/// Starts every session; returns once all are subscribed (each then polls on its own).
async fn start_watchers(
    gateway: &Gateway,
    board: i64,
    stopped: watch::Receiver<bool>,
) -> Result<Vec<tokio::task::JoinHandle<Watch>>> {
    let permits = Arc::new(Semaphore::new(SETUP_CONCURRENCY));
    let (ready_tx, mut ready) = mpsc::channel::<Result<()>>(SESSIONS);
    let addr = gateway.addr;
    let watchers: Vec<_> = (0..SESSIONS)
        .map(|_| {
            let (permits, ready_tx, stopped) = (permits.clone(), ready_tx.clone(), stopped.clone());
            tokio::spawn(async move {
                let permit = permits.acquire_owned().await.expect("never closed");
                let subscribed = subscribe(addr, board).await;
                drop(permit);
                match subscribed {
                    Ok((conn, session)) => {
                        let _ = ready_tx.send(Ok(())).await;
                        poll(conn, &session, stopped).await
                    }
                    Err(error) => {
                        let _ = ready_tx.send(Err(error)).await;
                        Watch::default()
                    }
                }
            })
        })
        .collect();
    for _ in 0..SESSIONS {
        ready.recv().await.ok_or("a session task ended")??;
    }
    Ok(watchers)
}

async fn subscribe(addr: std::net::SocketAddr, board: i64) -> Result<(Conn, String)> {
    let mut conn = Conn::open(addr).await?;
    let session = conn.session(None).await?;
    conn.call("session.subscribe", compact_board(&session, board))
        .await?;
    Ok((conn, session))
}

/// Loops on get_events until told to stop, noting when each tile range arrived.
async fn poll(mut conn: Conn, session: &str, mut stopped: watch::Receiver<bool>) -> Watch {
    let body = get_events_body(session, POLL_SECS);
    let mut watch = Watch::default();
    loop {
        tokio::select! {
            biased;
            _ = stopped.changed() => break,
            response = conn.post(body.clone()) => {
                let at = Instant::now();
                let noted = response.and_then(|body| watch.note(&body, at));
                if let Err(error) = noted {
                    watch.error = Some(error.to_string());
                    break;
                }
            }
        }
    }
    watch
}

impl Watch {
    fn note(&mut self, body: &[u8], at: Instant) -> Result<()> {
        let answer: Answer = serde_json::from_slice(body).map_err(|e| {
            format!(
                "get_events answered ({e}): {}",
                String::from_utf8_lossy(&body[..body.len().min(300)])
            )
        })?;
        self.responses += 1;
        for event in answer.result {
            match (event.action, event.seq) {
                ("tiles", Some((first, last))) => self.arrivals.push(Arrival { first, last, at }),
                _ => self.other_events += 1,
            }
        }
        Ok(())
    }
}

/// What the writer committed: when each seq was acknowledged, and how long commits took.
struct Writes {
    acks: HashMap<i64, Instant>,
    commits: Latencies,
}

/// Commits one batch per period for one phase, through one connection.
async fn write(setup: &Setup) -> Result<Writes> {
    let db = pgplace_tests::connect(&setup.db_url).await;
    let statement = db
        .prepare("SELECT seq FROM place.place_many($1, $2, $3, $4, $5) WHERE placed")
        .await?;
    let mut writes = Writes {
        acks: HashMap::new(),
        commits: Latencies::default(),
    };
    let mut ticks = tokio::time::interval(PERIOD);
    // A slow commit delays the next batch rather than causing a burst.
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let end = Instant::now() + setup.phase();
    while Instant::now() < end {
        ticks.tick().await;
        let (xs, ys, colors) = random_tiles();
        let sent = Instant::now();
        let rows = db
            .query(
                &statement,
                &[&setup.board, &setup.writers, &xs, &ys, &colors],
            )
            .await?;
        let ack = Instant::now();
        writes.commits.push(ack - sent);
        for row in rows {
            writes.acks.insert(row.get(0), ack);
        }
    }
    Ok(writes)
}

fn random_tiles() -> (Vec<i32>, Vec<i32>, Vec<i32>) {
    let mut rng = rand::rng();
    let mut pick = |n: i32| {
        (0..BATCH)
            .map(|_| rng.random_range(0..n))
            .collect::<Vec<i32>>()
    };
    (pick(1000), pick(1000), pick(16))
}

/// Latencies over every (session, seq) pair the writer committed.
struct Pairs {
    latencies: Latencies,
    /// Pairs whose answer arrived before `place_many` returned (NOTIFY goes out at commit,
    /// the acknowledgement a moment later): counted as 0 ms.
    early: usize,
    missing: usize,
    duplicates: usize,
}

fn pairs(writes: &Writes, watches: &[Watch]) -> Pairs {
    let mut pairs = Pairs {
        latencies: Latencies::default(),
        early: 0,
        missing: 0,
        duplicates: 0,
    };
    for watch in watches {
        let mut received = 0;
        let mut last_seen = i64::MIN;
        for arrival in &watch.arrivals {
            if arrival.first <= last_seen {
                pairs.duplicates += 1;
            }
            last_seen = last_seen.max(arrival.last);
            for seq in arrival.first..=arrival.last {
                let Some(ack) = writes.acks.get(&seq) else {
                    continue;
                };
                received += 1;
                match arrival.at.checked_duration_since(*ack) {
                    Some(latency) => pairs.latencies.push(latency),
                    None => {
                        pairs.early += 1;
                        pairs.latencies.push_micros(0);
                    }
                }
            }
        }
        pairs.missing += writes.acks.len().saturating_sub(received);
    }
    pairs
}

fn report(writes: Writes, watches: &[Watch], phase: Duration, cpu: String) -> Table {
    let pairs = pairs(&writes, watches);
    let delivered = pairs.latencies.len();
    let latencies = pairs.latencies.sorted();
    let responses: usize = watches.iter().map(|w| w.responses).sum();
    let other: usize = watches.iter().map(|w| w.other_events).sum();
    let errors: Vec<&String> = watches.iter().filter_map(|w| w.error.as_ref()).collect();
    let placed = writes.acks.len();
    let commits = writes.commits.sorted();
    let mut t = Table::new();
    t.info(
        NAME,
        "placements committed (SQL)",
        format!(
            "{placed} in {:.0} s = {:.0}/s, {BATCH} per place_many",
            phase.as_secs_f64(),
            rate(placed, phase)
        ),
    );
    t.info(
        NAME,
        "place_many round trip p50 / p99 / max",
        commits.summary(),
    );
    t.target(
        NAME,
        "commit -> get_events, p50",
        format!("{:.2} ms", latencies.ms(0.5)),
        "<= 10 ms",
        latencies.ms(0.5) <= 10.0,
    );
    t.target(
        NAME,
        "commit -> get_events, p99 (max)",
        format!("{:.2} ms ({:.2} ms)", latencies.ms(0.99), latencies.ms(1.0)),
        "<= 50 ms",
        latencies.ms(0.99) <= 50.0,
    );
    t.info(
        NAME,
        "tile events delivered/s",
        format!(
            "{:.0} ({delivered} (session, seq) pairs, {SESSIONS} sessions)",
            rate(delivered, phase)
        ),
    );
    t.info(
        NAME,
        "get_events answers/s",
        format!(
            "{:.0} ({:.1} tiles each)",
            rate(responses, phase),
            delivered as f64 / responses.max(1) as f64
        ),
    );
    t.info(NAME, "CPU during the phase", cpu);
    t.info(
        NAME,
        "answered before the commit ack",
        format!("{} pairs (counted as 0 ms)", pairs.early),
    );
    let lost = pairs.missing + pairs.duplicates + other + errors.len();
    t.target(
        NAME,
        "missing / duplicated pairs, other events, errors",
        format!(
            "{} / {} / {other} / {}{}",
            pairs.missing,
            pairs.duplicates,
            errors.len(),
            errors
                .first()
                .map(|e| format!(" (first: {e})"))
                .unwrap_or_default()
        ),
        "all 0",
        lost == 0,
    );
    t
}
