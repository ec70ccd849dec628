//! Scenario `fanout`: long-poll fan-out, pgplace beside Nchan (the nginx pub/sub module,
//! Debian's `libnginx-mod-nchan`, one worker), in the same run.
//!
//! N clients wait on one stream while R messages a second are published (one batch per
//! 10 ms; below 100/s, one message every 1/R s), for one phase:
//! - pgplace: sessions on a small board's compact view, polling `get_events` with `ack`;
//!   placements committed through SQL (`place_many`);
//! - Nchan, default mode (one message per long-poll answer) and
//!   `nchan_longpoll_multipart_response raw` (every buffered message per answer: the fair
//!   match for `get_events`); messages POSTed to its publisher location, each client
//!   continuing from its last answer's `Last-Modified` and `Etag`.
//!
//! Latency is from the publisher's acknowledgement (`place_many` returned) or, for Nchan,
//! from the POST being sent (Nchan answers its publisher only after the fan-out; its
//! messages go out on a pool of connections to keep the rate), to the answer's arrival.
//! The rate each publisher reached is reported. pgplace's clients poll until they have the
//! last published seq (at most DRAIN_LIMIT), Nchan's for DRAIN after the last publish.
//! Lost: a message a client never got, including the
//! ones Nchan skips for a client that fell more than its buffer behind (it answers 200
//! with what it still has, no signal). Memory per waiting client: the server's RSS with
//! every client waiting minus before they came, over N. CPU per 1,000 deliveries: the
//! server's CPU during the phase over (client, message) pairs delivered.

use crate::client::{compact_board, Conn};
use crate::process::{cpu_of, status_kb};
use crate::report::Table;
use crate::{Result, Setup};
use bytes::Bytes;
use hdrhistogram::Histogram;
use hyper::header::{self, HeaderName};
use hyper::Method;
use pgplace_tests::processes::Nginx;
use serde::Deserialize;
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{watch, Semaphore};
use tokio::time::MissedTickBehavior;

const NAME: &str = "fanout";
/// (waiting clients, messages per second), unless PGPLACE_FANOUT_CELLS names others
/// (`10000x5,1000x1000`).
const CELLS: [(usize, u32); 5] = [
    (1_000, 100),
    (1_000, 1_000),
    (10_000, 5),
    (10_000, 100),
    (10_000, 1_000),
];
const PERIOD: Duration = Duration::from_millis(10);

/// How `rate` messages a second are sent: one batch per PERIOD, or for a rate below one
/// per PERIOD, one message every 1/rate s.
fn schedule(rate: u32) -> (Duration, usize) {
    let per_period = rate as u128 * PERIOD.as_millis() / 1000;
    if per_period >= 1 {
        (PERIOD, per_period as usize)
    } else {
        (Duration::from_secs(1) / rate.max(1), 1)
    }
}
const SETUP_CONCURRENCY: usize = 64;
/// Nchan's clients listen this long after the last publish (they cannot know what they missed).
const DRAIN: Duration = Duration::from_secs(3);
/// pgplace's clients poll on until each has the last published seq, or for this long: a
/// message delivered late counts in the latencies, only one never delivered as lost.
const DRAIN_LIMIT: Duration = Duration::from_secs(60);
/// Nchan keeps this many messages per channel (its default is 10: far less than the
/// gateway's 20,000; given room, its losses are its design, not a small setting).
const NCHAN_BUFFER: usize = 1_000;
/// Publishes to Nchan in flight at most (each waits for its fan-out).
const PUBLISH_CONNECTIONS: usize = 64;

#[derive(Clone, Copy, PartialEq, Debug)]
enum System {
    Pgplace,
    NchanDefault,
    NchanRaw,
}

impl System {
    fn key(self) -> &'static str {
        match self {
            System::Pgplace => "pgplace",
            System::NchanDefault => "nchan-default",
            System::NchanRaw => "nchan-raw",
        }
    }

    fn name(self) -> &'static str {
        match self {
            System::Pgplace => "pgplace get_events (ack)",
            System::NchanDefault => "Nchan, one message per answer",
            System::NchanRaw => "Nchan, multipart raw",
        }
    }
}

/// What the clients received: (first seq, last seq, arrival) per answer.
#[derive(Default)]
struct Received {
    ranges: Vec<(i64, i64, Instant)>,
    /// Answers that carried at least one message.
    answers: usize,
    errors: usize,
}

/// One measured (system, N, R).
struct Measured {
    system: System,
    clients: usize,
    rate: u32,
    /// Messages published per second, as reached.
    published_rate: f64,
    p50_ms: f64,
    p99_ms: f64,
    delivered: u64,
    lost: u64,
    duplicated: u64,
    out_of_order: u64,
    rss_per_client: f64,
    cpu_per_1000: f64,
    /// The server's CPU per answer that carried messages, in µs.
    cpu_per_answer_us: f64,
    /// CPU over the publishing phase, in % of one core: the server's, this process's.
    server_pct: f64,
    load_pct: f64,
    errors: usize,
}

/// CPU used while messages were published.
struct PhaseCpu {
    server: Duration,
    load_generator: Duration,
    wall: Duration,
}

impl PhaseCpu {
    /// Runs `publish`, measuring the server's CPU and this process's over it.
    async fn over<T>(
        server: &Server,
        publish: impl std::future::Future<Output = T>,
    ) -> (T, PhaseCpu) {
        let (server_before, ours_before, started) =
            (server.cpu(), cpu_of("/proc/self/stat"), Instant::now());
        let out = publish.await;
        let cpu = PhaseCpu {
            server: server.cpu().saturating_sub(server_before),
            load_generator: cpu_of("/proc/self/stat").saturating_sub(ours_before),
            wall: started.elapsed(),
        };
        (out, cpu)
    }
}

/// The systems to measure: PGPLACE_FANOUT_SYSTEMS (`pgplace,nchan-default,nchan-raw`),
/// or all three.
fn systems() -> Vec<System> {
    let all = [System::Pgplace, System::NchanDefault, System::NchanRaw];
    match std::env::var("PGPLACE_FANOUT_SYSTEMS") {
        Ok(listed) => all
            .into_iter()
            .filter(|s| listed.split(',').any(|l| l.trim() == s.key()))
            .collect(),
        Err(_) => all.to_vec(),
    }
}

/// The cells to measure: PGPLACE_FANOUT_CELLS, or all of CELLS.
fn cells() -> Result<Vec<(usize, u32)>> {
    let Ok(listed) = std::env::var("PGPLACE_FANOUT_CELLS") else {
        return Ok(CELLS.to_vec());
    };
    listed
        .split(',')
        .map(|cell| {
            let parsed = cell
                .trim()
                .split_once('x')
                .and_then(|(n, r)| Some((n.parse().ok()?, r.parse().ok()?)));
            parsed.ok_or_else(|| {
                format!("PGPLACE_FANOUT_CELLS: {cell:?} is not CLIENTSxRATE (10000x5)").into()
            })
        })
        .collect()
}

pub async fn run(setup: &Setup) -> Result<Table> {
    let dir = setup.args.log_dir.join("fanout");
    std::fs::create_dir_all(&dir)?;
    let mut measured = Vec::new();
    for (clients, rate) in cells()? {
        for system in systems() {
            println!("fanout: {} x {rate}/s, {}", clients, system.name());
            let m = match system {
                System::Pgplace => pgplace(setup, clients, rate).await?,
                _ => nchan(setup, system, clients, rate, &dir).await?,
            };
            measured.push(m);
        }
    }
    Ok(report(&measured))
}

/// The server's CPU and memory, by pid.
struct Server {
    pids: Vec<u32>,
}

impl Server {
    fn rss(&self) -> u64 {
        self.pids
            .iter()
            .map(|p| status_kb(&format!("/proc/{p}/status"), "VmRSS") * 1024)
            .sum()
    }

    fn cpu(&self) -> Duration {
        self.pids
            .iter()
            .map(|p| cpu_of(&format!("/proc/{p}/stat")))
            .sum()
    }
}

#[derive(Deserialize)]
struct Answer<'a> {
    #[serde(borrow)]
    result: AckedEvents<'a>,
}

#[derive(Deserialize)]
struct AckedEvents<'a> {
    #[serde(borrow)]
    events: Vec<Event<'a>>,
    cursor: String,
}

#[derive(Deserialize)]
struct Event<'a> {
    action: &'a str,
    seq: Option<(i64, i64)>,
}

async fn pgplace(setup: &Setup, clients: usize, rate: u32) -> Result<Measured> {
    let gateway = setup.gateway(&format!("{NAME}-{clients}-{rate}")).await?;
    let server = Server {
        pids: vec![gateway.pid],
    };
    let rss_before = server.rss();
    let (stop, stopped) = watch::channel(false);
    // The last published seq, once the publisher is done: a client that has it stops.
    let (last_tx, last_published) = watch::channel(None::<i64>);
    let permits = Arc::new(Semaphore::new(SETUP_CONCURRENCY));
    let ready = Arc::new(tokio::sync::Barrier::new(clients + 1));
    let mut tasks = Vec::with_capacity(clients);
    for _ in 0..clients {
        let (permits, ready, mut stopped) = (permits.clone(), ready.clone(), stopped.clone());
        let mut last_published = last_published.clone();
        let (addr, board) = (gateway.addr, setup.small_board);
        tasks.push(tokio::spawn(async move {
            let mut received = Received::default();
            let opened = async {
                let _permit = permits.acquire().await.expect("never closed");
                let mut conn = Conn::open(addr).await?;
                let session = conn.session(None).await?;
                conn.call("session.subscribe", compact_board(&session, board))
                    .await?;
                Ok::<_, crate::Error>((conn, session))
            }
            .await;
            ready.wait().await;
            let Ok((mut conn, session)) = opened else {
                received.errors += 1;
                return received;
            };
            let mut cursor = String::new();
            let mut highest = i64::MIN;
            let caught_up = |highest: i64, last: &watch::Receiver<Option<i64>>| {
                last.borrow().is_some_and(|last| highest >= last)
            };
            'polls: loop {
                let body: Bytes = json!({"jsonrpc": "2.0", "method": "session.get_events",
                    "params": [session, 30, cursor], "id": 1})
                .to_string()
                .into();
                let post = conn.post(body);
                tokio::pin!(post);
                let answer = loop {
                    tokio::select! {
                        biased;
                        _ = stopped.changed() => break 'polls,
                        // Waiting with everything already received: done.
                        Ok(()) = last_published.changed() => {
                            if caught_up(highest, &last_published) {
                                break 'polls;
                            }
                        }
                        answer = &mut post => break answer,
                    }
                };
                let at = Instant::now();
                let Ok(answer) = answer else {
                    received.errors += 1;
                    break;
                };
                let Ok(parsed) = serde_json::from_slice::<Answer>(&answer) else {
                    received.errors += 1;
                    break;
                };
                let before = received.ranges.len();
                for event in &parsed.result.events {
                    if let ("tiles", Some((first, last))) = (event.action, event.seq) {
                        received.ranges.push((first, last, at));
                        highest = highest.max(last);
                    }
                }
                received.answers += usize::from(received.ranges.len() > before);
                cursor = parsed.result.cursor;
                if caught_up(highest, &last_published) {
                    break;
                }
            }
            received
        }));
    }
    ready.wait().await;
    // Every client subscribed: most are waiting (the others are about to).
    tokio::time::sleep(Duration::from_millis(500)).await;
    let rss_waiting = server.rss();
    let (acks, cpu) = PhaseCpu::over(&server, publish_sql(setup, rate)).await;
    let acks = acks?;
    let _ = last_tx.send(acks.last().map(|a| a.0));
    let limit = tokio::spawn(async move {
        tokio::time::sleep(DRAIN_LIMIT).await;
        let _ = stop.send(true);
    });
    let mut all = Vec::with_capacity(clients);
    for task in tasks {
        all.push(task.await?);
    }
    limit.abort();
    gateway.stop().await;
    Ok(measure(
        System::Pgplace,
        clients,
        rate,
        &acks,
        &all,
        rss_before,
        rss_waiting,
        cpu,
    ))
}

/// Commits `rate` placements a second (see `schedule`) for one phase; each seq's
/// acknowledgement time.
async fn publish_sql(setup: &Setup, rate: u32) -> Result<Vec<(i64, Instant)>> {
    let (db_url, board, phase) = (setup.db_url.clone(), setup.small_board, setup.phase());
    let writers = setup.writers.clone();
    on_own_thread(async move { publish_sql_on(db_url, board, writers, rate, phase).await }).await
}

/// Runs `work` on a thread and runtime of its own: the clients' tasks keep this process
/// busy, and a publisher sharing their runtime would fall behind its rate.
async fn on_own_thread<T: Send + 'static>(
    work: impl std::future::Future<Output = Result<T>> + Send + 'static,
) -> Result<T> {
    let (done, result) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build();
        let _ = done.send(match runtime {
            Ok(runtime) => runtime.block_on(work),
            Err(error) => Err(error.into()),
        });
    });
    result
        .await
        .map_err(|_| "the publisher's thread panicked")?
}

async fn publish_sql_on(
    db_url: String,
    board: i64,
    writers: Vec<i64>,
    rate: u32,
    phase: Duration,
) -> Result<Vec<(i64, Instant)>> {
    let db = pgplace_tests::connect(&db_url).await;
    let statement = db
        .prepare("SELECT seq FROM place.place_many($1, $2, $3, $4, $5) WHERE placed")
        .await?;
    let (period, batch) = schedule(rate);
    let users: Vec<i64> = writers.iter().copied().cycle().take(batch).collect();
    let mut acks = Vec::new();
    let mut ticks = tokio::time::interval(period);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let end = Instant::now() + phase;
    let mut n = 0i32;
    while Instant::now() < end {
        ticks.tick().await;
        let xs: Vec<i32> = (0..batch as i32).map(|i| (n + i) % 16).collect();
        let ys: Vec<i32> = (0..batch as i32).map(|i| (n / 16 + i) % 16).collect();
        let cs: Vec<i32> = (0..batch as i32).map(|i| (n + i) % 16).collect();
        n = n.wrapping_add(batch as i32);
        let rows = db
            .query(&statement, &[&board, &users, &xs, &ys, &cs])
            .await?;
        let at = Instant::now();
        acks.extend(rows.iter().map(|r| (r.get::<_, i64>(0), at)));
    }
    Ok(acks)
}

async fn nchan(
    setup: &Setup,
    system: System,
    clients: usize,
    rate: u32,
    dir: &std::path::Path,
) -> Result<Measured> {
    let multipart = if system == System::NchanRaw {
        "raw"
    } else {
        "off"
    };
    let http = format!(
        "    server {{
        listen {{addr}};
        location = /pub {{
            nchan_publisher;
            nchan_channel_id board;
            nchan_message_buffer_length {NCHAN_BUFFER};
            nchan_message_timeout 10m;
        }}
        location = /sub {{
            nchan_subscriber longpoll;
            nchan_channel_id board;
            nchan_subscriber_first_message newest;
            nchan_longpoll_multipart_response {multipart};
        }}
    }}
"
    );
    let nginx = Nginx::start_with(
        dir,
        &format!("nchan-{multipart}-{clients}-{rate}"),
        &http,
        "load_module /usr/lib/nginx/modules/ngx_nchan_module.so;",
        clients + 64,
    );
    nginx.wait_ready().await;
    let server = Server {
        pids: nginx.worker_pids(),
    };
    let rss_before = server.rss();
    // The first message opens the channel (subscribers to a channel never published to
    // wait for it too, but its buffer settings come with the first publish).
    let mut publisher = Conn::open(nginx.addr).await?;
    post_message(&mut publisher, 0).await?;
    let (stop, stopped) = watch::channel(false);
    let permits = Arc::new(Semaphore::new(SETUP_CONCURRENCY));
    let ready = Arc::new(tokio::sync::Barrier::new(clients + 1));
    let mut tasks = Vec::with_capacity(clients);
    for _ in 0..clients {
        let (permits, ready, mut stopped, addr) =
            (permits.clone(), ready.clone(), stopped.clone(), nginx.addr);
        tasks.push(tokio::spawn(async move {
            let mut received = Received::default();
            let opened = {
                let _permit = permits.acquire().await.expect("never closed");
                Conn::open(addr).await
            };
            ready.wait().await;
            let Ok(mut conn) = opened else {
                received.errors += 1;
                return received;
            };
            let (mut since, mut tag): (Option<String>, Option<String>) = (None, None);
            loop {
                let mut headers: Vec<(HeaderName, &str)> = Vec::new();
                if let Some(since) = &since {
                    headers.push((header::IF_MODIFIED_SINCE, since));
                }
                if let Some(tag) = &tag {
                    headers.push((header::IF_NONE_MATCH, tag));
                }
                tokio::select! {
                    biased;
                    _ = stopped.changed() => break,
                    answer = conn.send(Method::GET, "/sub", &headers, Bytes::new()) => {
                        let at = Instant::now();
                        let Ok(answer) = answer else { received.errors += 1; break };
                        if answer.status != 200 {
                            received.errors += 1;
                            tokio::time::sleep(Duration::from_millis(10)).await;
                            continue;
                        }
                        let text = String::from_utf8_lossy(&answer.body);
                        let seqs: Vec<i64> = text
                            .split('\n')
                            .filter_map(|line| line.trim().parse().ok())
                            .collect();
                        received.answers += usize::from(!seqs.is_empty());
                        // A range per run of consecutive messages.
                        let mut i = 0;
                        while i < seqs.len() {
                            let mut j = i;
                            while j + 1 < seqs.len() && seqs[j + 1] == seqs[j] + 1 {
                                j += 1;
                            }
                            received.ranges.push((seqs[i], seqs[j], at));
                            i = j + 1;
                        }
                        since = answer.last_modified;
                        tag = answer.etag;
                    }
                }
            }
            received
        }));
    }
    ready.wait().await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let rss_waiting = server.rss();
    drop(publisher);
    let (acks, cpu) = PhaseCpu::over(
        &server,
        on_own_thread(publish_nchan(nginx.addr, rate, setup.phase())),
    )
    .await;
    let acks = acks?;
    tokio::time::sleep(DRAIN).await;
    let _ = stop.send(true);
    let mut all = Vec::with_capacity(clients);
    for task in tasks {
        all.push(task.await?);
    }
    drop(nginx);
    Ok(measure(
        system,
        clients,
        rate,
        &acks,
        &all,
        rss_before,
        rss_waiting,
        cpu,
    ))
}

async fn post_message(publisher: &mut Conn, seq: i64) -> Result<()> {
    let content = [(header::CONTENT_TYPE, "text/plain")];
    let answer = publisher
        .send(Method::POST, "/pub", &content, Bytes::from(seq.to_string()))
        .await?;
    if !(200..300).contains(&answer.status) {
        return Err(format!("Nchan's publisher answered HTTP {}", answer.status).into());
    }
    Ok(())
}

/// Publishes `rate` messages a second (see `schedule`) for one phase; seqs 1, 2, ….
/// Each message is POSTed on a connection of its own from a pool: Nchan answers a publish
/// only after its fan-out, so one connection alone could not keep the rate.
async fn publish_nchan(
    addr: std::net::SocketAddr,
    rate: u32,
    phase: Duration,
) -> Result<Vec<(i64, Instant)>> {
    let (period, batch) = schedule(rate);
    let idle: Arc<tokio::sync::Mutex<Vec<Conn>>> = Arc::default();
    let acks: Arc<std::sync::Mutex<Vec<(i64, Instant)>>> = Arc::default();
    let mut posts = tokio::task::JoinSet::new();
    // At most this many publishes in flight (connections to the server).
    let in_flight = Arc::new(Semaphore::new(PUBLISH_CONNECTIONS));
    let mut ticks = tokio::time::interval(period);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let end = Instant::now() + phase;
    let mut seq = 0;
    while Instant::now() < end {
        ticks.tick().await;
        for _ in 0..batch {
            seq += 1;
            let (idle, acks) = (idle.clone(), acks.clone());
            let permit = in_flight
                .clone()
                .acquire_owned()
                .await
                .expect("never closed");
            posts.spawn(async move {
                let _permit = permit;
                let conn = idle.lock().await.pop();
                let mut conn = match conn {
                    Some(conn) => conn,
                    None => Conn::open(addr).await?,
                };
                // The message counts from when it was sent.
                let sent = Instant::now();
                post_message(&mut conn, seq).await?;
                acks.lock().expect("not poisoned").push((seq, sent));
                idle.lock().await.push(conn);
                Ok::<_, crate::Error>(())
            });
        }
        while let Some(done) = posts.try_join_next() {
            done??;
        }
    }
    while let Some(done) = posts.join_next().await {
        done??;
    }
    let mut acks = std::mem::take(&mut *acks.lock().expect("not poisoned"));
    acks.sort_by_key(|a| a.0);
    Ok(acks)
}

#[allow(clippy::too_many_arguments)]
fn measure(
    system: System,
    clients: usize,
    rate: u32,
    acks: &[(i64, Instant)],
    received: &[Received],
    rss_before: u64,
    rss_waiting: u64,
    cpu: PhaseCpu,
) -> Measured {
    let ack_of: std::collections::HashMap<i64, Instant> = acks.iter().copied().collect();
    let (first, last) = (
        acks.first().map_or(0, |a| a.0),
        acks.last().map_or(-1, |a| a.0),
    );
    let mut histogram = Histogram::<u64>::new_with_bounds(1, 600_000_000, 3).expect("bounds");
    let (mut delivered, mut lost, mut duplicated, mut out_of_order, mut errors) = (0, 0, 0, 0, 0);
    let answers: usize = received.iter().map(|r| r.answers).sum();
    // Which messages each client got, as a bit set (Nchan's concurrent publishes may land
    // out of seq order: order is counted, not taken for loss).
    let span = (last - first + 1).max(0) as usize;
    let mut seen = vec![0u64; span.div_ceil(64)];
    for client in received {
        errors += client.errors;
        seen.iter_mut().for_each(|w| *w = 0);
        let mut distinct = 0u64;
        let mut highest = i64::MIN;
        for &(from, to, at) in &client.ranges {
            for seq in from..=to {
                if seq < first || seq > last {
                    continue;
                }
                let n = (seq - first) as usize;
                if seen[n / 64] & (1 << (n % 64)) != 0 {
                    duplicated += 1;
                    continue;
                }
                seen[n / 64] |= 1 << (n % 64);
                distinct += 1;
                if seq < highest {
                    out_of_order += 1;
                }
                highest = highest.max(seq);
                delivered += 1;
                let latency = at
                    .checked_duration_since(ack_of[&seq])
                    .unwrap_or_default()
                    .as_micros() as u64;
                histogram.saturating_record(latency.max(1));
            }
        }
        lost += span as u64 - distinct;
    }
    let published = acks.len() as f64;
    let span = match (acks.first(), acks.last()) {
        (Some(a), Some(b)) if b.1 > a.1 => b.1.duration_since(a.1).as_secs_f64(),
        _ => 1.0,
    };
    Measured {
        system,
        clients,
        rate,
        published_rate: published / span,
        p50_ms: histogram.value_at_quantile(0.5) as f64 / 1000.0,
        p99_ms: histogram.value_at_quantile(0.99) as f64 / 1000.0,
        delivered,
        lost,
        duplicated,
        out_of_order,
        rss_per_client: rss_waiting.saturating_sub(rss_before) as f64 / clients as f64,
        cpu_per_1000: if delivered > 0 {
            cpu.server.as_secs_f64() * 1000.0 / delivered as f64 * 1000.0
        } else {
            0.0
        },
        cpu_per_answer_us: cpu.server.as_secs_f64() * 1e6 / answers.max(1) as f64,
        server_pct: 100.0 * cpu.server.as_secs_f64() / cpu.wall.as_secs_f64().max(1e-9),
        load_pct: 100.0 * cpu.load_generator.as_secs_f64() / cpu.wall.as_secs_f64().max(1e-9),
        errors,
    }
}

fn report(measured: &[Measured]) -> Table {
    let mut table = Table::new();
    for m in measured {
        let expected = m.delivered + m.lost;
        table.info(
            NAME,
            &format!("{} x {}/s: {}", m.clients, m.rate, m.system.name()),
            format!(
                "published {:.0}/s, p50 {:.1} / p99 {:.1} ms, delivered {} ({:.1}%), lost {}, duplicated {}, out of seq order {}, \
                 {:.1} kB RSS per waiting client, {:.2} ms server CPU per 1,000 deliveries ({:.1} µs per answer), \
                 CPU server {:.0}% / load generator {:.0}% (100% = one core), {} client errors",
                m.published_rate,
                m.p50_ms,
                m.p99_ms,
                m.delivered,
                100.0 * m.delivered as f64 / expected.max(1) as f64,
                m.lost,
                m.duplicated,
                m.out_of_order,
                m.rss_per_client / 1000.0,
                m.cpu_per_1000,
                m.cpu_per_answer_us,
                m.server_pct,
                m.load_pct,
                m.errors
            ),
        );
    }
    // The targets: pgplace's p99 and memory per waiting client under Nchan's (raw) in
    // every cell.
    for ours in measured.iter().filter(|m| m.system == System::Pgplace) {
        let Some(theirs) = measured.iter().find(|m| {
            m.system == System::NchanRaw && (m.clients, m.rate) == (ours.clients, ours.rate)
        }) else {
            continue;
        };
        table.target(
            NAME,
            &format!(
                "{} x {}/s: p99, pgplace / Nchan raw",
                ours.clients, ours.rate
            ),
            format!("{:.1} / {:.1} ms", ours.p99_ms, theirs.p99_ms),
            "pgplace lower",
            ours.p99_ms < theirs.p99_ms,
        );
        table.target(
            NAME,
            &format!(
                "{} x {}/s: RSS per waiting client, pgplace / Nchan raw",
                ours.clients, ours.rate
            ),
            format!(
                "{:.1} / {:.1} kB",
                ours.rss_per_client / 1000.0,
                theirs.rss_per_client / 1000.0
            ),
            "pgplace lower",
            ours.rss_per_client < theirs.rss_per_client,
        );
    }
    table
}
