//! Scenario `flood` (only with `--only flood`): what a flood of database lookups from one
//! client address does to everyone else, with the per-address database budget
//! (`--db-rate-per-address`) and without it.
//!
//! A control runs in every phase: `CONTROL_PLACERS` signed-in sessions place random tiles
//! at `CONTROL_RATE` in all (a steady schedule: a slow answer costs the next tick, not a
//! burst after it), and one session follows the board and polls `get_events`. It measures
//! each `board.place` call, and the time from a placement's answer to its event reaching
//! the poller. Four phases of `--seconds` each, run twice (A B C D A B C D, so that noise
//! shows beside the difference):
//! - A: no flood (the gateway with its default settings);
//! - B: a flood from one address, `FLOODER`, over `FLOOD_CONNECTIONS` keep-alive
//!   connections, each request a lookup that reaches the database (an unknown board's
//!   bits, `get_events` of a random session id, a random tile's history, a past picture);
//! - C: the same flood, the gateway started with the rate budget out of reach
//!   (`BUDGET_OFF`; its share of the pool, `--db-connections-per-address`, still holds);
//! - D: the same flood, the budget on but a request past it refused at once instead of
//!   waiting for it (`REFUSED_AT_ONCE`: how the gateway answered before `--db-wait-ms`).
//!
//! Every phase gets a fresh gateway (its CPU, the remembered misses and the budgets are
//! its own). The bench talks to it over loopback, which the gateway trusts as a proxy: it
//! takes each request's client from `X-Forwarded-For`, so the flooder and every control
//! session are each their own address (198.51.100.0/24, TEST-NET-2), limited as strangers
//! on the internet are.

use crate::client::{compact_board, poll_answers, Conn};
use crate::process::{Gateway, GatewayLog};
use crate::report::{rate, CpuClock, Latencies, Sorted, Table};
use crate::{Result, Setup};
use bytes::Bytes;
use hyper::header::CONTENT_TYPE;
use hyper::Method;
use rand::Rng;
use serde::Deserialize;
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::MissedTickBehavior;

const NAME: &str = "flood";
const CONTROL_PLACERS: usize = 8;
/// Placements per second, all control placers together.
const CONTROL_RATE: u32 = 50;
/// Enough to keep the gateway's request path busy on two cores; every connection sends
/// its next request the moment the last is answered.
const FLOOD_CONNECTIONS: usize = 64;
const FLOODER: &str = "198.51.100.7";
/// Phase C's gateway: a budget no address reaches.
const BUDGET_OFF: &[&str] = &[
    "--db-rate-per-address",
    "1000000000",
    "--db-burst-per-address",
    "1000000000",
];
/// Phase D's gateway: the default budget, refusals at once.
const REFUSED_AT_ONCE: &[&str] = &["--db-wait-ms", "0"];
/// A call slower than this counts as an error (the gateway is stuck, not slow).
const CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// Placements sent this long after a phase's start count in its steady figures too (the
/// first second or two hold every new connection's first calls, and a flood's burst).
const WARM_UP: Duration = Duration::from_secs(2);
/// Time for the last placements' events to reach the poller after the phase.
const DRAIN: Duration = Duration::from_secs(2);
const POLL_SECS: u64 = 30;
/// `at` values a phase's picture requests pick from.
const PAST_TIMES: i32 = 1000;

#[derive(Clone, Copy, PartialEq)]
enum Phase {
    Quiet,
    Budgeted,
    Unbudgeted,
    RefusedAtOnce,
}

/// One round, in order.
const PHASES: [Phase; 4] = [
    Phase::Quiet,
    Phase::Budgeted,
    Phase::Unbudgeted,
    Phase::RefusedAtOnce,
];

impl Phase {
    fn label(self, round: usize) -> String {
        let (letter, what) = match self {
            Phase::Quiet => ("A", "no flood"),
            Phase::Budgeted => ("B", "flood, budget on"),
            Phase::Unbudgeted => ("C", "flood, budget off"),
            Phase::RefusedAtOnce => ("D", "flood, budget on, no wait"),
        };
        format!("{letter}{round} {what}")
    }
}

/// The control's placement addresses: one each, none the flooder's.
fn placer_address(i: usize) -> String {
    format!("198.51.100.{}", 100 + i)
}
const POLLER: &str = "198.51.100.99";

/// One answered placement.
struct Placed {
    seq: i64,
    answered: Instant,
}

/// What the control placers saw.
#[derive(Default)]
struct Control {
    placed: Vec<Placed>,
    latencies: Latencies,
    /// Those sent after `WARM_UP`.
    steady: Latencies,
    errors: BTreeMap<String, usize>,
}

/// The four lookups of the flood.
const KINDS: [&str; 4] = ["bits", "get_events", "tile_history", "png"];

/// How a flood request was answered.
#[derive(Clone, Copy)]
enum Outcome {
    /// 429 or −32011: the budget refused it before any query.
    Refused,
    /// 200, 404, −32001, −32005: answered, by the database or what it said a moment ago.
    Answered,
    /// Anything else (a timeout, a closed connection, 503, another code).
    Other,
}

/// Counts by kind and outcome.
#[derive(Default)]
struct FloodTally {
    counts: [[usize; 3]; 4],
    /// The first few unexpected answers, to explain `Other`.
    others: BTreeMap<String, usize>,
}

impl FloodTally {
    fn count(&mut self, kind: usize, outcome: Outcome) {
        self.counts[kind][outcome as usize] += 1;
    }

    fn total(&self, outcome: Outcome) -> usize {
        self.counts.iter().map(|c| c[outcome as usize]).sum()
    }

    fn add(&mut self, other: FloodTally) {
        for (mine, theirs) in self.counts.iter_mut().zip(other.counts) {
            for (m, t) in mine.iter_mut().zip(theirs) {
                *m += t;
            }
        }
        for (what, n) in other.others {
            *self.others.entry(what).or_default() += n;
        }
    }
}

/// One phase's figures.
struct Measured {
    phase: Phase,
    label: String,
    elapsed: Duration,
    placed: usize,
    place: Sorted,
    place_steady: Sorted,
    events: Sorted,
    missing_events: usize,
    /// Events that reached the poller before their placement's answer reached its placer.
    events_first: usize,
    other_events: usize,
    control_errors: BTreeMap<String, usize>,
    flood: Option<FloodTally>,
    /// Transactions committed per second, from the clock's start to the gateway's exit.
    commits_per_second: f64,
    cpu: String,
}

pub async fn run(setup: &Setup) -> Result<Table> {
    let db = pgplace_tests::connect(&setup.db_url).await;
    // The flood's past pictures are of times since here.
    let since: String = db.query_one("SELECT now()::text", &[]).await?.get(0);
    let mut phases = Vec::new();
    for round in 1..=2 {
        for phase in PHASES {
            let measured = run_phase(setup, &db, phase, round, &since)
                .await
                .map_err(|e| format!("{}: {e}", phase.label(round)))?;
            println!("  {}", progress(&measured));
            phases.push(measured);
        }
    }
    Ok(report(&phases))
}

async fn run_phase(
    setup: &Setup,
    db: &tokio_postgres::Client,
    phase: Phase,
    round: usize,
    since: &str,
) -> Result<Measured> {
    let label = phase.label(round);
    let log = GatewayLog::new(&setup.args.log_dir, &format!("{NAME}-{}", &label[..2]))?;
    let extra = match phase {
        Phase::Unbudgeted => BUDGET_OFF,
        Phase::RefusedAtOnce => REFUSED_AT_ONCE,
        Phase::Quiet | Phase::Budgeted => &[],
    };
    let mut gateway =
        Gateway::start_with(&setup.args.gateway_bin, &setup.db_url, log, extra).await?;
    let addr = gateway.addr;

    // Everyone connects and signs in before the clock starts.
    let (stop, stopped) = watch::channel(false);
    let poller = start_poller(addr, setup.board, stopped).await?;
    let mut placers = Vec::new();
    for (i, (_, token)) in setup.placers.iter().take(CONTROL_PLACERS).enumerate() {
        let mut conn = Conn::open_as(addr, &placer_address(i)).await?;
        let session = conn.session(Some(token)).await?;
        placers.push((conn, session));
    }
    let flooders = if phase == Phase::Quiet {
        Vec::new()
    } else {
        let times = Arc::new(past_times(db, since).await?);
        let mut conns = Vec::new();
        for _ in 0..FLOOD_CONNECTIONS {
            conns.push(Conn::open_as(addr, FLOODER).await?);
        }
        conns.into_iter().map(|c| (c, times.clone())).collect()
    };

    let commits_before = commits(db).await?;
    let cpu = CpuClock::start(&gateway);
    let started = Instant::now();
    let end = started + setup.phase();
    let period = Duration::from_secs(CONTROL_PLACERS as u64) / CONTROL_RATE;
    let placers: Vec<JoinHandle<Control>> = placers
        .into_iter()
        .enumerate()
        .map(|(i, (conn, session))| {
            // Spread over the period, so that the rate is steady, not 8 at a time.
            let first = started + period * i as u32 / CONTROL_PLACERS as u32;
            tokio::spawn(place_steadily(
                conn,
                session,
                setup.board,
                (first, started + WARM_UP),
                period,
                end,
            ))
        })
        .collect();
    let board = setup.board;
    let flooders: Vec<JoinHandle<FloodTally>> = flooders
        .into_iter()
        .map(|(conn, times)| tokio::spawn(flood(conn, addr, board, times, end)))
        .collect();

    let mut control = Control::default();
    for placer in placers {
        let one = placer.await?;
        control.placed.extend(one.placed);
        control.latencies.extend(one.latencies);
        control.steady.extend(one.steady);
        for (error, n) in one.errors {
            *control.errors.entry(error).or_default() += n;
        }
    }
    let mut flood_tally = (phase != Phase::Quiet).then(FloodTally::default);
    for flooder in flooders {
        let one = flooder.await?;
        if let Some(tally) = &mut flood_tally {
            tally.add(one);
        }
    }
    let cpu = cpu.finish(&gateway);
    tokio::time::sleep(DRAIN).await;
    let _ = stop.send(true);
    let seen = poller.await?;
    gateway.check_alive()?;
    gateway.stop().await;
    // Read once the gateway has exited: each of its backends has then reported its
    // transactions (an idle backend may keep its counts for up to 10 s).
    let commits = commits(db).await? - commits_before;
    let commits_per_second = commits as f64 / started.elapsed().as_secs_f64();

    let (events, missing_events, events_first) = event_latencies(&control.placed, &seen);
    if let Some(error) = seen.error {
        *control
            .errors
            .entry(format!("poller: {error}"))
            .or_default() += 1;
    }
    Ok(Measured {
        phase,
        label,
        // Nothing starts after the phase's end: rates are over its length.
        elapsed: setup.phase(),
        placed: control.placed.len(),
        place: control.latencies.sorted(),
        place_steady: control.steady.sorted(),
        events: events.sorted(),
        missing_events,
        events_first,
        other_events: seen.other_events,
        control_errors: control.errors,
        flood: flood_tally,
        commits_per_second,
        cpu,
    })
}

/// A control placer: a random tile every `period` from `first` on, until `end` (those sent
/// from `steady_from` on also in `Control::steady`).
async fn place_steadily(
    mut conn: Conn,
    session: String,
    board: i64,
    (first, steady_from): (Instant, Instant),
    period: Duration,
    end: Instant,
) -> Control {
    let mut control = Control::default();
    let mut ticks = tokio::time::interval_at(first.into(), period);
    // A call slower than the period skips the ticks it missed: the rate achieved shows it.
    ticks.set_missed_tick_behavior(MissedTickBehavior::Skip);
    loop {
        ticks.tick().await;
        if Instant::now() >= end {
            break;
        }
        let params = crate::place::random_placement(&session, board);
        let sent = Instant::now();
        let (error, timed_out) =
            match tokio::time::timeout(CALL_TIMEOUT, conn.call("board.place", params)).await {
                Ok(Ok(result)) => {
                    let answered = Instant::now();
                    match result["seq"].as_i64() {
                        Some(seq) => {
                            control.latencies.push(answered - sent);
                            if sent >= steady_from {
                                control.steady.push(answered - sent);
                            }
                            control.placed.push(Placed { seq, answered });
                            continue;
                        }
                        None => (
                            format!("board.place answered without a seq: {result}"),
                            false,
                        ),
                    }
                }
                Ok(Err(error)) => (error.to_string().chars().take(120).collect(), false),
                Err(_) => ("timed out".to_string(), true),
            };
        *control.errors.entry(error).or_default() += 1;
        // A dead connection, or one in an unknown state after a timeout: this placer stops.
        if timed_out || conn.is_closed() {
            break;
        }
    }
    control
}

/// What the control poller saw: when each tile range arrived.
#[derive(Default)]
struct Seen {
    arrivals: Vec<(i64, i64, Instant)>,
    /// Events other than `tiles` (a `reset`: the poller fell behind).
    other_events: usize,
    error: Option<String>,
}

#[derive(Deserialize)]
struct Answer {
    result: Vec<Event>,
}

#[derive(Deserialize)]
struct Event {
    action: String,
    /// `[first, last]` of a `tiles` event.
    seq: Option<(i64, i64)>,
}

/// The control poller, subscribed (compact) to the board, polling until `stopped`.
async fn start_poller(
    addr: SocketAddr,
    board: i64,
    stopped: watch::Receiver<bool>,
) -> Result<JoinHandle<Seen>> {
    let mut conn = Conn::open_as(addr, POLLER).await?;
    let session = conn.session(None).await?;
    conn.call("session.subscribe", compact_board(&session, board))
        .await?;
    Ok(tokio::spawn(async move {
        let mut seen = Seen::default();
        seen.error = poll_answers(
            &mut conn,
            &session,
            POLL_SECS,
            stopped,
            |answer: Answer, at| {
                for event in answer.result {
                    match (event.action.as_str(), event.seq) {
                        ("tiles", Some((first, last))) => seen.arrivals.push((first, last, at)),
                        _ => seen.other_events += 1,
                    }
                }
            },
        )
        .await;
        seen
    }))
}

/// Per placement, from its answer to its event at the poller (zero when the event came
/// first); how many placements' events never came, and how many came first.
fn event_latencies(placed: &[Placed], seen: &Seen) -> (Latencies, usize, usize) {
    let mut arrived = HashMap::new();
    for &(first, last, at) in &seen.arrivals {
        for seq in first..=last {
            arrived.entry(seq).or_insert(at);
        }
    }
    let mut latencies = Latencies::default();
    let (mut missing, mut first) = (0, 0);
    for p in placed {
        match arrived.get(&p.seq) {
            Some(at) => {
                first += usize::from(*at < p.answered);
                latencies.push(at.saturating_duration_since(p.answered));
            }
            None => missing += 1,
        }
    }
    (latencies, missing, first)
}

/// One flood connection: lookups of a random kind, back to back, until `end`.
async fn flood(
    mut conn: Conn,
    addr: SocketAddr,
    board: i64,
    times: Arc<Vec<String>>,
    end: Instant,
) -> FloodTally {
    let mut tally = FloodTally::default();
    while Instant::now() < end {
        let kind = rand::rng().random_range(0..KINDS.len());
        let asked = tokio::time::timeout(CALL_TIMEOUT, lookup(&mut conn, kind, board, &times));
        let outcome = match asked.await {
            Ok(Ok(Ok(outcome))) => outcome,
            Ok(Ok(Err(unexpected))) => {
                *tally.others.entry(unexpected).or_default() += 1;
                Outcome::Other
            }
            Ok(Err(error)) => {
                let error: String = error.to_string().chars().take(80).collect();
                *tally.others.entry(error).or_default() += 1;
                Outcome::Other
            }
            Err(_) => {
                *tally.others.entry("timed out".into()).or_default() += 1;
                Outcome::Other
            }
        };
        tally.count(kind, outcome);
        if matches!(outcome, Outcome::Other) {
            // The connection may be closed or mid-answer: start a new one.
            match Conn::open_as(addr, FLOODER).await {
                Ok(fresh) => conn = fresh,
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    }
    tally
}

/// One lookup of kind `kind` (an index into KINDS): how it was answered, or the
/// unexpected answer.
async fn lookup(
    conn: &mut Conn,
    kind: usize,
    board: i64,
    times: &[String],
) -> Result<std::result::Result<Outcome, String>> {
    let (path, body) = {
        let mut rng = rand::rng();
        match KINDS[kind] {
            // Ids far above any board's: unknown, and each new to the gateway.
            "bits" => (
                format!("/boards/{}/bits", rng.random_range(1u64 << 40..1 << 52)),
                None,
            ),
            "get_events" => {
                let session = format!("{:032x}", rng.random::<u128>());
                (
                    "/jsonrpc".into(),
                    Some(json!({"jsonrpc": "2.0", "method": "session.get_events",
                            "params": {"session": session, "timeout": 1}, "id": 1})),
                )
            }
            "tile_history" => (
                "/jsonrpc".into(),
                Some(json!({"jsonrpc": "2.0", "method": "board.tile_history",
                        "params": {"board": board, "x": rng.random_range(0..1000),
                                   "y": rng.random_range(0..1000)}, "id": 1})),
            ),
            // A small crop: the database's work (board_at) is the point, not the drawing.
            _ => (
                format!(
                    "/boards/{board}.png?at={}&x={}&y={}&width=64&height=64",
                    times[rng.random_range(0..times.len())],
                    rng.random_range(0..936),
                    rng.random_range(0..936),
                ),
                None,
            ),
        }
    };
    let response = match body {
        None => conn.get_full(&path, None).await?,
        Some(body) => {
            let content_type = [(CONTENT_TYPE, "application/json")];
            let body = Bytes::from(body.to_string());
            conn.send(Method::POST, &path, &content_type, body).await?
        }
    };
    let unexpected = |what: &str| {
        let text = String::from_utf8_lossy(&response.body[..response.body.len().min(60)]);
        Err(format!("{}: {what} {text}", KINDS[kind]))
    };
    Ok(match (response.status, path.as_str()) {
        (200, "/jsonrpc") => {
            let answer: Value = serde_json::from_slice(&response.body)?;
            match answer["error"]["code"].as_i64() {
                None if answer.get("result").is_some() => Ok(Outcome::Answered),
                Some(-32001 | -32005) => Ok(Outcome::Answered),
                Some(-32011) => Ok(Outcome::Refused),
                _ => unexpected("200"),
            }
        }
        (200 | 404, _) => Ok(Outcome::Answered),
        (429, _) => Ok(Outcome::Refused),
        (status, _) => unexpected(&status.to_string()),
    })
}

/// `PAST_TIMES` random moments between `since` and now, as `at` takes them.
async fn past_times(db: &tokio_postgres::Client, since: &str) -> Result<Vec<String>> {
    let rows = db
        .query(
            "SELECT to_char((s + random() * (now() - s)) AT TIME ZONE 'UTC', \
                            'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"') \
             FROM (SELECT $1::text::timestamptz AS s) since, generate_series(1, $2)",
            &[&since, &PAST_TIMES],
        )
        .await?;
    Ok(rows.iter().map(|row| row.get(0)).collect())
}

/// Transactions committed in the benchmark's database so far.
async fn commits(db: &tokio_postgres::Client) -> Result<i64> {
    Ok(db
        .query_one(
            "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()",
            &[],
        )
        .await?
        .get(0))
}

/// The line printed as each phase ends (the table comes at the end).
fn progress(m: &Measured) -> String {
    format!(
        "{}: {:.1} placements/s, place {}, flood {}",
        m.label,
        rate(m.placed, m.elapsed),
        m.place.summary(),
        m.flood
            .as_ref()
            .map_or("none".into(), |f| flood_summary(f, m.elapsed))
    )
}

fn flood_summary(flood: &FloodTally, elapsed: Duration) -> String {
    let per_second = |n: usize| rate(n, elapsed);
    let (refused, answered, other) = (
        flood.total(Outcome::Refused),
        flood.total(Outcome::Answered),
        flood.total(Outcome::Other),
    );
    format!(
        "{:.0}/s sent: 429/-32011 {:.0}/s, 404/-32001/200 {:.0}/s, other {other}",
        per_second(refused + answered + other),
        per_second(refused),
        per_second(answered),
    )
}

fn report(phases: &[Measured]) -> Table {
    let mut table = Table::new();
    for m in phases {
        let l = &m.label;
        table.info(
            NAME,
            &format!("{l}: control placements/s"),
            format!(
                "{:.1} ({} in {:.1} s; schedule {CONTROL_RATE}/s)",
                rate(m.placed, m.elapsed),
                m.placed,
                m.elapsed.as_secs_f64()
            ),
        );
        table.info(
            NAME,
            &format!("{l}: board.place p50 / p99 / max"),
            m.place.summary(),
        );
        table.info(
            NAME,
            &format!("{l}: the same after the first {} s", WARM_UP.as_secs()),
            m.place_steady.summary(),
        );
        table.info(
            NAME,
            &format!("{l}: answer -> event p50 / p99"),
            format!(
                "{:.2} / {:.2} ms ({} of {} arrived, {} before the answer)",
                m.events.ms(0.5),
                m.events.ms(0.99),
                m.placed - m.missing_events,
                m.placed,
                m.events_first
            ),
        );
        if let Some(flood) = &m.flood {
            table.info(
                NAME,
                &format!("{l}: flood"),
                flood_summary(flood, m.elapsed),
            );
            let answered: Vec<String> = KINDS
                .iter()
                .zip(&flood.counts)
                .map(|(kind, c)| {
                    let (refused, answered) =
                        (c[Outcome::Refused as usize], c[Outcome::Answered as usize]);
                    format!("{kind} {answered}/{}", refused + answered)
                })
                .collect();
            table.info(
                NAME,
                &format!("{l}: answered/sent by kind"),
                answered.join(", "),
            );
            for (what, n) in flood.others.iter().take(3) {
                table.info(NAME, &format!("{l}:   other {n} x"), what.clone());
            }
        }
        table.info(
            NAME,
            &format!("{l}: database commits/s"),
            format!("{:.0}", m.commits_per_second),
        );
        table.info(NAME, &format!("{l}: CPU"), m.cpu.clone());
    }
    for (phase, what) in [
        (Phase::Budgeted, "flood with budget / no flood"),
        (Phase::Unbudgeted, "flood without budget / no flood"),
        (
            Phase::RefusedAtOnce,
            "flood with budget, refused at once / no flood",
        ),
    ] {
        table.info(NAME, &format!("control {what}"), ratios(phases, phase));
    }
    let errors: Vec<(&String, &usize)> = phases.iter().flat_map(|m| &m.control_errors).collect();
    let count: usize = errors.iter().map(|(_, n)| **n).sum();
    table.target(NAME, "control errors", count.to_string(), "0", count == 0);
    for (error, n) in errors.iter().take(5) {
        table.info(NAME, &format!("  {n} x"), (*error).clone());
    }
    let missing: usize = phases.iter().map(|m| m.missing_events).sum();
    let other: usize = phases.iter().map(|m| m.other_events).sum();
    table.target(
        NAME,
        "events missing / not tiles (resets)",
        format!("{missing} / {other}"),
        "0 / 0",
        missing == 0 && other == 0,
    );
    table
}

/// Per round, the control's board.place p99 (and p50) in `phase` over the same round's
/// quiet phase.
fn ratios(phases: &[Measured], phase: Phase) -> String {
    let ms = |round: &[Measured], p: Phase, q: f64| {
        round
            .iter()
            .find(|m| m.phase == p)
            .map_or(f64::NAN, |m| m.place.ms(q))
    };
    let steady = |round: &[Measured], p: Phase| {
        round
            .iter()
            .find(|m| m.phase == p)
            .map_or(f64::NAN, |m| m.place_steady.ms(0.99))
    };
    let per_round: Vec<String> = phases
        .chunks(PHASES.len())
        .map(|round| {
            let (with, without) = (ms(round, phase, 0.99), ms(round, Phase::Quiet, 0.99));
            let p50 = ms(round, phase, 0.5) / ms(round, Phase::Quiet, 0.5);
            let (steady_with, steady_without) = (steady(round, phase), steady(round, Phase::Quiet));
            format!(
                "p99 {:.1}x ({with:.1} / {without:.1} ms), p50 {p50:.1}x, after {} s p99 {:.1}x \
                 ({steady_with:.1} / {steady_without:.1} ms)",
                with / without,
                WARM_UP.as_secs(),
                steady_with / steady_without
            )
        })
        .collect();
    per_round.join("; ")
}
