//! Scenario `waiting`: the gateway's memory while it holds many long polls at once, each
//! on its own TCP connection, each for its own session.

use crate::client::{compact_board, get_events_body, Conn};
use crate::process::{cpu_of, status_kb, Gateway};
use crate::report::Table;
use crate::{Result, Setup};
use serde_json::json;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, watch, Semaphore};
use tokio::task::JoinSet;

pub const SESSIONS: usize = 10_000;
/// Requests per JSON-RPC batch while creating sessions (the gateway's default --max-batch).
const BATCH: usize = 100;
/// Connections being opened at once: more would overflow the listen backlog, and a
/// dropped SYN costs a one-second retransmission.
const CONNECT_CONCURRENCY: usize = 200;
/// Longer than the whole measurement: no poll should end before it is over.
const POLL_SECS: u64 = 60;
/// The gateway closes a connection that sends no request for 30 s (its header read
/// timeout): the idle connections must be measured, and used, well before.
const IDLE_LIMIT: Duration = Duration::from_secs(20);
const SETTLE_LIMIT: Duration = Duration::from_secs(120);
const NAME: &str = "waiting";

/// A gateway's memory at one moment, in kB.
struct Memory {
    rss: u64,
    hwm: u64,
}

impl Memory {
    fn of(gateway: &Gateway) -> Self {
        Memory {
            rss: gateway.status_kb("VmRSS"),
            hwm: gateway.status_kb("VmHWM"),
        }
    }
}

pub async fn run(setup: &Setup) -> Result<Table> {
    let mut gateway = setup.gateway(NAME).await?;
    let mut memory = vec![("just after start".to_string(), Memory::of(&gateway))];
    let sessions = create_sessions(&gateway, setup.small_board).await?;
    memory.push((
        format!("+ {SESSIONS} subscribed sessions"),
        Memory::of(&gateway),
    ));
    let (early_tx, mut early) = mpsc::unbounded_channel();
    let connected = Arc::new(AtomicUsize::new(0));
    let (go, ready) = watch::channel(false);
    // The small board's bits: a cheap first request for every connection.
    let hello = format!("/boards/{}/bits", setup.small_board);
    let polls = start_polls(
        &gateway,
        &hello,
        sessions,
        connected.clone(),
        ready,
        early_tx,
    );
    // Connections first, polls second: the two steps' memory tells what each costs.
    let settled = async {
        settle(&gateway, &connected, IDLE_LIMIT).await?;
        memory.push((
            format!("+ {SESSIONS} connections (one GET served on each)"),
            Memory::of(&gateway),
        ));
        go.send(true)?;
        settle(&gateway, &connected, SETTLE_LIMIT).await?;
        memory.push((
            "+ a get_events waiting on each".to_string(),
            Memory::of(&gateway),
        ));
        Ok::<_, crate::Error>(())
    }
    .await;
    let fds = gateway.open_fds();
    let our_rss = status_kb("/proc/self/status", "VmRSS");
    gateway.check_alive()?;
    // Dropping the set aborts the polls, which closes their connections.
    drop(polls);
    gateway.stop().await;
    settled?;
    let mut ended_early = Vec::new();
    while let Ok(why) = early.try_recv() {
        ended_early.push(why);
    }
    Ok(report(&memory, fds, our_rss, &ended_early))
}

/// Creates the sessions in batches, each subscribed to the small board; returns their ids.
async fn create_sessions(gateway: &Gateway, board: i64) -> Result<Vec<String>> {
    let mut conn = Conn::open(gateway.addr).await?;
    let mut sessions = Vec::with_capacity(SESSIONS);
    while sessions.len() < SESSIONS {
        let ids = conn
            .batch("session.create", (0..BATCH).map(|_| json!({})))
            .await?;
        let ids: Vec<String> = ids
            .iter()
            .filter_map(|id| id.as_str().map(str::to_string))
            .collect();
        conn.batch(
            "session.subscribe",
            ids.iter().map(|id| compact_board(id, board)),
        )
        .await?;
        sessions.extend(ids);
    }
    Ok(sessions)
}

/// One task per session: open a connection and have one small request served on it, wait
/// for `go`, send get_events, wait. A poll that is answered (or fails) before it is
/// aborted reports why on `early`.
fn start_polls(
    gateway: &Gateway,
    hello: &str,
    sessions: Vec<String>,
    connected: Arc<AtomicUsize>,
    go: watch::Receiver<bool>,
    early: mpsc::UnboundedSender<String>,
) -> JoinSet<()> {
    let permits = Arc::new(Semaphore::new(CONNECT_CONCURRENCY));
    let mut polls = JoinSet::new();
    for session in sessions {
        let (addr, hello, permits, connected, mut go, early) = (
            gateway.addr,
            Arc::<str>::from(hello),
            permits.clone(),
            connected.clone(),
            go.clone(),
            early.clone(),
        );
        polls.spawn(async move {
            let permit = permits.acquire_owned().await.expect("never closed");
            let mut conn = match open_served(addr, &hello).await {
                Ok(conn) => conn,
                Err(error) => {
                    let _ = early.send(format!("connecting: {error}"));
                    return;
                }
            };
            drop(permit);
            connected.fetch_add(1, Ordering::SeqCst);
            if go.wait_for(|go| *go).await.is_err() {
                return;
            }
            let why = match conn.post(get_events_body(&session, POLL_SECS)).await {
                Ok(body) => format!(
                    "answered: {}",
                    String::from_utf8_lossy(&body[..body.len().min(200)])
                ),
                Err(error) => format!("failed: {error}"),
            };
            let _ = early.send(why);
        });
    }
    polls
}

/// A connection on which the gateway has answered GET `hello`. A connection the client
/// sees as open may still wait in the gateway's accept queue (a full queue drops the last
/// ACK of the handshake, and a client that sends nothing never repeats it): an answer
/// proves the gateway holds it.
async fn open_served(addr: std::net::SocketAddr, hello: &str) -> Result<Conn> {
    let mut conn = Conn::open(addr).await?;
    let (status, _) = conn.get(hello, None).await?;
    if status != 200 {
        return Err(format!("GET {hello}: HTTP {status}").into());
    }
    Ok(conn)
}

/// Waits until every connection is open and both processes have gone quiet (their CPU
/// time stops moving): then every request sent has been read and is waiting. Gives up
/// after `limit`.
async fn settle(gateway: &Gateway, connected: &AtomicUsize, limit: Duration) -> Result<()> {
    let started = Instant::now();
    let cpu = || gateway.cpu() + cpu_of("/proc/self/stat");
    let mut last_cpu = cpu();
    loop {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let now = cpu();
        let busy = now.saturating_sub(last_cpu);
        last_cpu = now;
        let (open, fds) = (connected.load(Ordering::SeqCst), gateway.open_fds());
        if busy <= Duration::from_millis(20) && open == SESSIONS && fds >= SESSIONS {
            println!("  settled after {:.1} s", started.elapsed().as_secs_f64());
            return Ok(());
        }
        if started.elapsed() > limit {
            return Err(format!(
                "not settled after {} s: {open} of {SESSIONS} connections open, the gateway \
                 had {fds} fds, both processes used {} ms of CPU in the last 0.5 s",
                limit.as_secs(),
                busy.as_millis()
            )
            .into());
        }
    }
}

fn report(memory: &[(String, Memory)], fds: usize, our_rss: u64, ended_early: &[String]) -> Table {
    let mb = |kb: u64| kb as f64 / 1024.0;
    let mut t = Table::new();
    let mut previous: Option<&Memory> = None;
    for (step, now) in memory {
        let growth = previous.map_or(String::new(), |p| {
            let per = now.rss.saturating_sub(p.rss) as f64 * 1024.0 / SESSIONS as f64;
            format!(", {:.1} kB each", per / 1024.0)
        });
        let result = format!(
            "{:.1} MB (VmHWM {:.1} MB){growth}",
            mb(now.rss),
            mb(now.hwm)
        );
        if previous.is_some() && memory.last().is_some_and(|(last, _)| last == step) {
            t.target(
                NAME,
                &format!("RSS {step}"),
                result,
                "<= 150 MB",
                mb(now.rss) <= 150.0,
            );
        } else {
            t.info(NAME, &format!("RSS {step}"), result);
        }
        previous = Some(now);
    }
    t.info(
        NAME,
        "gateway fds / load generator RSS",
        format!("{fds} / {:.1} MB", mb(our_rss)),
    );
    t.target(
        NAME,
        "polls that ended early",
        format!(
            "{}{}",
            ended_early.len(),
            ended_early
                .first()
                .map(|e| format!(" (first: {e})"))
                .unwrap_or_default()
        ),
        "0",
        ended_early.is_empty(),
    );
    t
}
