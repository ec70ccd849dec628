//! Scale-out under faults: gateway processes behind nginx (plain round-robin), sessions on
//! board views (acking and legacy, both forms), placements from SQL and through the
//! gateways, and faults in turn: a gateway SIGKILLed and started again, a gateway's LISTEN
//! backend terminated, PostgreSQL restarted (fast), nginx reloaded.
//!
//! Every session checks its stream as it goes: acking sessions must see every seq exactly
//! once, in order, with no `reset`; legacy sessions every seq at most once, in order, each
//! gap covered by a `reset` (whose state is checked against `place.board_at_seq` at the
//! end). Placements acknowledged to a client must be in the history, and none applied
//! twice (every attempt places a (user, x, y) of its own).
//!
//! Used by tests/tests/fleet/scale_out_faults.rs (about 2 minutes, in the suite) and by the
//! `soak` binary (`./pgplace.sh soak`: the long form).

use crate::gateway::FORWARDED_METRIC;
use crate::processes::{GatewayProcess, Nginx};
use crate::{connect, create_board, fresh_database};
use base64::Engine;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Method, Request};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::watch;
use tokio::task::JoinSet;

pub const WIDTH: i32 = 64;
pub const HEIGHT: i32 = 64;
const BITS: i32 = 4;
/// After a fault that silenced a gateway (killed, its LISTEN connection or the database
/// gone) is over, how long until every legacy session that moved meanwhile has polled again
/// (every 300 ms) and waited out its hand-over (the gateway's `HANDOVER_WAIT`, 3 s).
const LEGACY_SESSIONS_MOVED_ON: Duration = Duration::from_secs(7);
/// The longest a client call may take (a long poll waits 5 s): past it, a transport error.
const CALL_BOUND: Duration = Duration::from_secs(30);

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Fault {
    KillGateway,
    KillListen,
    RestartPostgres,
    ReloadNginx,
    /// With one placer per board: the gateway that holds the board's lease, SIGKILLed and
    /// started again.
    KillPlacer,
    /// With one placer per board: the lease holder stopped (SIGSTOP) for longer than its
    /// lease, mid-group or not, then let go on (SIGCONT).
    PausePlacer,
}

impl Fault {
    pub const ALL: [Fault; 4] = [
        Fault::KillGateway,
        Fault::KillListen,
        Fault::RestartPostgres,
        Fault::ReloadNginx,
    ];

    fn describe(self) -> &'static str {
        match self {
            Fault::KillGateway => "gateway A SIGKILLed and started again",
            Fault::KillListen => "gateway B's LISTEN backend terminated",
            Fault::RestartPostgres => "PostgreSQL restarted (fast)",
            Fault::ReloadNginx => "nginx reloaded",
            Fault::KillPlacer => "the board's placer SIGKILLed and started again",
            Fault::PausePlacer => "the board's placer stopped for 5 s",
        }
    }
}

pub struct SoakConfig {
    pub database: String,
    /// How long placements go on (faults happen within).
    pub duration: Duration,
    pub sessions: usize,
    /// Every n-th session is a legacy one (no ack); the others ack.
    pub legacy_every: usize,
    pub sql_rate: f64,
    pub rpc_rate: f64,
    /// When each fault happens, from the start of the placements.
    pub faults: Vec<(Duration, Fault)>,
    /// A shell command that restarts the cluster (PostgreSQL faults).
    pub pg_restart: Option<String>,
    pub out_dir: PathBuf,
    /// This many sessions keep every event, checked against the history at the end.
    pub content_sample: usize,
    /// The gateways run with `--placer-url`: one groups the board's placements, the
    /// other forwards its own to it.
    pub one_placer: bool,
}

/// How a session got seqs it had already had.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Again {
    /// A tile with a seq at or below the last one applied.
    Tile,
    /// A `reset` to a state older than the one the session stood at.
    ResetBack,
}

/// What one session saw.
#[derive(Default)]
struct SessionRecord {
    acking: bool,
    /// The next seq expected.
    next: i64,
    delivered: u64,
    duplicated: u64,
    /// Seqs skipped without a `reset`.
    lost: u64,
    out_of_order: u64,
    resets: u64,
    /// Seqs a `reset` stood for (legacy: their gaps).
    covered: u64,
    /// (seq, bits) of each reset, checked against the history.
    reset_states: Vec<(i64, Vec<u8>)>,
    /// When each reset came.
    reset_times: Vec<Instant>,
    /// When seqs came again, how many, and how (`Again`).
    repeats: Vec<(Instant, u64, Again)>,
    /// Every tile (seq, x, y, color), for the sampled sessions.
    tiles: Option<Vec<(i64, i32, i32, i32)>>,
    errors: BTreeMap<String, u64>,
    gone: bool,
    /// The session's first exchanges (what it sent, the seqs it got, the cursor back): what a
    /// report shows for a session that saw a seq twice.
    trail: Vec<String>,
}

/// How many exchanges of a session its trail keeps.
const TRAIL: usize = 12;

impl SessionRecord {
    fn noting(&self) -> bool {
        self.trail.len() < TRAIL
    }
}

impl SessionRecord {
    fn tile(&mut self, seq: i64, x: i32, y: i32, color: i32) {
        if seq == self.next {
            self.delivered += 1;
            self.next += 1;
            if let Some(tiles) = &mut self.tiles {
                tiles.push((seq, x, y, color));
            }
        } else if seq < self.next {
            self.duplicated += 1;
            self.repeats.push((Instant::now(), 1, Again::Tile));
        } else {
            self.lost += (seq - self.next) as u64;
            self.out_of_order += 1;
            self.delivered += 1;
            self.next = seq + 1;
        }
    }

    fn apply(&mut self, events: &Value) {
        for event in events.as_array().map(Vec::as_slice).unwrap_or_default() {
            match event["action"].as_str().unwrap_or_default() {
                "update" => {
                    let o = &event["obj"];
                    let n = |k: &str| o[k].as_i64().unwrap_or(-1);
                    self.tile(n("seq"), n("x") as i32, n("y") as i32, n("color") as i32);
                }
                "tiles" => {
                    let first = event["seq"][0].as_i64().unwrap_or(-1);
                    for (t, seq) in event["tiles"].as_array().into_iter().flatten().zip(first..) {
                        let n = |i: usize| t[i].as_i64().unwrap_or(-1) as i32;
                        self.tile(seq, n(0), n(1), n(2));
                    }
                }
                "reset" => {
                    let seq = event["obj"]["seq"].as_i64().unwrap_or(-1);
                    self.resets += 1;
                    if seq + 1 < self.next {
                        // A reset that goes back gives seqs again.
                        let again = (self.next - 1 - seq) as u64;
                        self.duplicated += again;
                        self.repeats.push((Instant::now(), again, Again::ResetBack));
                    } else {
                        self.covered += (seq + 1 - self.next) as u64;
                    }
                    let bits = event["obj"]["bits"].as_str().unwrap_or_default();
                    let bits = base64::engine::general_purpose::STANDARD
                        .decode(bits)
                        .unwrap_or_default();
                    self.reset_states.push((seq, bits));
                    self.reset_times.push(Instant::now());
                    self.next = seq + 1;
                }
                _ => {}
            }
        }
    }

    fn error(&mut self, kind: String) {
        *self.errors.entry(kind).or_default() += 1;
    }
}

/// A JSON-RPC client that reports transport failures instead of panicking.
#[derive(Clone)]
struct Rpc {
    addr: SocketAddr,
    client: Client<HttpConnector, Full<Bytes>>,
}

enum Answer {
    Result(Value),
    Error(i64, Value),
    /// No JSON-RPC answer: a connection error or an HTTP error status (nginx's 502).
    Transport(String),
}

impl Rpc {
    fn new(addr: SocketAddr) -> Self {
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(30))
            .build_http();
        Rpc { addr, client }
    }

    async fn call(&self, method: &str, params: Value) -> Answer {
        let body = json!({"jsonrpc": "2.0", "method": method, "params": params, "id": 1});
        let request = Request::builder()
            .method(Method::POST)
            .uri(format!("http://{}/jsonrpc", self.addr))
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(body.to_string())))
            .expect("a valid request");
        let exchange = async {
            let response = self.client.request(request).await?;
            let status = response.status();
            Ok::<_, Box<dyn std::error::Error + Send + Sync>>((
                status,
                response.into_body().collect().await?.to_bytes(),
            ))
        };
        let (status, body) = match tokio::time::timeout(CALL_BOUND, exchange).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(error)) => return Answer::Transport(format!("connection: {error}")),
            Err(_) => return Answer::Transport("no answer within 30 s".into()),
        };
        if !status.is_success() {
            return Answer::Transport(format!("HTTP {}", status.as_u16()));
        }
        let Ok(value) = serde_json::from_slice::<Value>(&body) else {
            return Answer::Transport("not JSON".into());
        };
        match value.get("error") {
            Some(error) => Answer::Error(error["code"].as_i64().unwrap_or(0), error.clone()),
            None => Answer::Result(value["result"].clone()),
        }
    }

    /// Calls until an answer other than "unavailable" or a transport failure (30 s).
    async fn call_through(&self, method: &str, params: Value) -> Result<Value, Value> {
        let started = Instant::now();
        loop {
            match self.call(method, params.clone()).await {
                Answer::Result(value) => return Ok(value),
                Answer::Error(-32009, _) | Answer::Transport(_)
                    if started.elapsed() < Duration::from_secs(30) =>
                {
                    tokio::time::sleep(Duration::from_millis(100)).await
                }
                Answer::Error(_, error) => return Err(error),
                Answer::Transport(error) => return Err(json!(error)),
            }
        }
    }
}

/// Where the run stands, for the sessions: placing, then done at a final seq.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Phase {
    Placing,
    Final(i64),
}

struct SessionPlan {
    board: i64,
    acking: bool,
    compact: bool,
    keep_tiles: bool,
    /// Arrival times of seqs (the probe session only).
    arrivals: Option<Arc<Mutex<HashMap<i64, Instant>>>>,
}

async fn session_life(
    rpc: Rpc,
    plan: SessionPlan,
    mut phase: watch::Receiver<Phase>,
) -> SessionRecord {
    let mut record = SessionRecord {
        acking: plan.acking,
        tiles: plan.keep_tiles.then(Vec::new),
        ..Default::default()
    };
    let session = match rpc.call_through("session.create", json!([])).await {
        Ok(session) => session,
        Err(error) => {
            record.error(format!("session.create: {error}"));
            record.gone = true;
            return record;
        }
    };
    let params = json!([session, "board", {"board": plan.board, "compact": plan.compact}]);
    match rpc.call_through("session.subscribe", params).await {
        Ok(reply) => {
            record.next = reply[1]["seq"].as_i64().unwrap_or(0) + 1;
            let line = format!("session {session}: subscribed at seq {}", record.next - 1);
            record.trail.push(line);
        }
        Err(error) => {
            record.error(format!("session.subscribe: {error}"));
            record.gone = true;
            return record;
        }
    }
    let mut cursor = String::new();
    let mut deadline: Option<Instant> = None;
    loop {
        if let Phase::Final(last) = *phase.borrow_and_update() {
            if record.next > last {
                break;
            }
            let at = *deadline.get_or_insert_with(|| Instant::now() + Duration::from_secs(60));
            if Instant::now() > at {
                break;
            }
        }
        let params = if plan.acking {
            json!([session, 5, cursor])
        } else {
            json!([session, 5])
        };
        match rpc.call("session.get_events", params.clone()).await {
            Answer::Result(answer) => {
                let events = if plan.acking {
                    cursor = answer["cursor"].as_str().unwrap_or_default().to_string();
                    answer["events"].clone()
                } else {
                    answer
                };
                let before = record.next;
                let repeated = record.duplicated;
                record.apply(&events);
                if record.noting() {
                    let seqs: Vec<String> = events
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(|e| match e["action"].as_str() {
                            Some("update") => e["obj"]["seq"].to_string(),
                            Some("tiles") => e["seq"].to_string(),
                            other => format!("{other:?}"),
                        })
                        .collect();
                    let line = format!(
                        "poll with {:?}: {} (next {before} -> {}), cursor {:?}",
                        params.get(2),
                        seqs.join(" "),
                        record.next,
                        &cursor
                    );
                    record.trail.push(line);
                }
                if record.duplicated > repeated && !record.noting() {
                    record.trail.push(format!("... a repeat at seq {before}"));
                }
                if let Some(arrivals) = &plan.arrivals {
                    let now = Instant::now();
                    let mut arrivals = arrivals.lock().unwrap();
                    for seq in before..record.next {
                        arrivals.insert(seq, now);
                    }
                }
                if !plan.acking {
                    // Legacy clients are slower pollers (each move costs a reset).
                    tokio::time::sleep(Duration::from_millis(300)).await;
                }
            }
            Answer::Error(-32001, _) => {
                record.error("get_events: -32001 unknown session".into());
                record.gone = true;
                return record;
            }
            Answer::Error(code, _) => {
                record.error(format!("get_events: {code}"));
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Answer::Transport(error) => {
                record.error(format!(
                    "get_events: {}",
                    error.split(':').next().unwrap_or("")
                ));
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    record
}

/// A placement acknowledged to its client: it must be in the history as it was asked.
#[derive(Debug, Clone, Copy)]
struct Acked {
    seq: i64,
    user: i64,
    x: i32,
    y: i32,
    color: i32,
}

#[derive(Default)]
struct PlacerRecord {
    acked: Vec<Acked>,
    attempts: u64,
    errors: BTreeMap<String, u64>,
}

/// The tile and colour of a user's n-th attempt: (n mod 4096, n mod 15) differ for every
/// n below 61,440 (4096 and 15 are coprime), so no two attempts of a user look alike.
fn attempt_tile(n: u64) -> (i32, i32, i32) {
    let n = n as i64;
    let cell = n % i64::from(WIDTH * HEIGHT);
    ((cell % 64) as i32, (cell / 64) as i32, 1 + (n % 15) as i32)
}

async fn sql_placer(
    url: String,
    board: i64,
    users: Vec<i64>,
    rate: f64,
    placing: Arc<AtomicBool>,
) -> PlacerRecord {
    let mut record = PlacerRecord::default();
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / rate.max(0.1)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut client: Option<tokio_postgres::Client> = None;
    let mut counters = vec![0u64; users.len()];
    let mut next_user = 0;
    while placing.load(Ordering::SeqCst) {
        tick.tick().await;
        if client.as_ref().is_none_or(|c| c.is_closed()) {
            client = match tokio_postgres::connect(&url, tokio_postgres::NoTls).await {
                Ok((c, connection)) => {
                    tokio::spawn(connection);
                    Some(c)
                }
                Err(_) => {
                    *record.errors.entry("connect".into()).or_default() += 1;
                    continue;
                }
            };
        }
        let Some(c) = &client else { continue };
        let i = next_user % users.len();
        next_user += 1;
        let (x, y, color) = attempt_tile(counters[i]);
        counters[i] += 1;
        record.attempts += 1;
        let placed = c
            .query_one(
                "SELECT placed, seq FROM place.place($1, $2, $3, $4, $5)",
                &[&board, &x, &y, &color, &users[i]],
            )
            .await;
        match placed {
            Ok(row) if row.get::<_, bool>(0) => record.acked.push(Acked {
                seq: row.get::<_, Option<i64>>(1).unwrap_or(-1),
                user: users[i],
                x,
                y,
                color,
            }),
            Ok(_) => *record.errors.entry("sql: not placed".into()).or_default() += 1,
            Err(error) => {
                let code = error.code().map_or("connection", |c| c.code()).to_string();
                *record.errors.entry(format!("sql: {code}")).or_default() += 1;
            }
        }
    }
    record
}

async fn rpc_placer(
    rpc: Rpc,
    board: i64,
    user: (i64, String),
    rate: f64,
    placing: Arc<AtomicBool>,
) -> PlacerRecord {
    let mut record = PlacerRecord::default();
    let Ok(session) = rpc.call_through("session.create", json!([])).await else {
        *record.errors.entry("session.create".into()).or_default() += 1;
        return record;
    };
    if rpc
        .call_through("session.authorize", json!([session, user.1]))
        .await
        .is_err()
    {
        *record.errors.entry("session.authorize".into()).or_default() += 1;
        return record;
    }
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / rate.max(0.1)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut n = 0;
    while placing.load(Ordering::SeqCst) {
        tick.tick().await;
        let (x, y, color) = attempt_tile(n);
        n += 1;
        record.attempts += 1;
        match rpc
            .call("board.place", json!([session, board, x, y, color]))
            .await
        {
            Answer::Result(result) => record.acked.push(Acked {
                seq: result["seq"].as_i64().unwrap_or(-1),
                user: user.0,
                x,
                y,
                color,
            }),
            Answer::Error(code, _) => {
                *record.errors.entry(format!("place: {code}")).or_default() += 1
            }
            Answer::Transport(error) => {
                let kind = error.split(':').next().unwrap_or("").to_string();
                *record.errors.entry(format!("place: {kind}")).or_default() += 1
            }
        }
    }
    record
}

/// What a run found. `ok()` says whether the guarantees held.
#[derive(Default, Debug)]
pub struct Report {
    pub sessions: usize,
    pub acking_sessions: usize,
    pub sessions_lost: usize,
    pub delivered: u64,
    pub lost: u64,
    pub duplicated: u64,
    pub out_of_order: u64,
    pub acking_resets: u64,
    pub legacy_resets: u64,
    /// Legacy resets outside the faults that silence a gateway (and the seconds after): a
    /// legacy session moving between two gateways that hear each other is handed over,
    /// not reset.
    pub legacy_resets_outside_faults: u64,
    /// When they came, in seconds after placing began (the faults' times are the config's).
    pub unexpected_legacy_resets_at: Vec<f64>,
    pub legacy_covered: u64,
    /// Where the duplicates came from: (seconds after placing began, legacy, how, seqs),
    /// bunched by second.
    pub repeats: BTreeMap<(u64, bool, Again), u64>,
    /// The first exchanges of (at most three) sessions that saw a seq twice.
    pub repeat_trails: Vec<Vec<String>>,
    pub resets_not_matching_history: u64,
    pub content_mismatches: u64,
    pub placements_acknowledged: u64,
    pub placement_attempts: u64,
    pub acknowledged_not_in_history: u64,
    pub applied_twice: u64,
    pub final_seq: i64,
    /// Placements acknowledged per second of placing (the machine may not reach the rate
    /// asked for: the checking client shares it).
    pub placement_rate: f64,
    pub recovery: Vec<(Fault, Option<Duration>)>,
    pub rss_max: Vec<(String, u64)>,
    pub client_errors: BTreeMap<String, u64>,
    /// Each gateway's resets by reason and legacy hand-overs by outcome, from /metrics at
    /// the end (gateway A's since its restart): why a reset came.
    pub gateway_counts: Vec<String>,
    /// Placements the gateways sent to the board's placer at another (from /metrics at the
    /// end; a restarted gateway's since its restart).
    pub forwarded: u64,
    pub elapsed: Duration,
}

impl Report {
    pub fn ok(&self) -> bool {
        self.lost == 0
            && self.duplicated == 0
            && self.out_of_order == 0
            && self.acking_resets == 0
            && self.legacy_resets_outside_faults == 0
            && self.sessions_lost == 0
            && self.resets_not_matching_history == 0
            && self.content_mismatches == 0
            && self.acknowledged_not_in_history == 0
            && self.applied_twice == 0
    }

    pub fn render(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "sessions                      {} ({} acking, {} legacy)",
            self.sessions,
            self.acking_sessions,
            self.sessions - self.acking_sessions
        );
        let _ = writeln!(out, "final seq                     {}", self.final_seq);
        let _ = writeln!(out, "forwarded to a placer         {}", self.forwarded);
        let _ = writeln!(out, "events delivered              {}", self.delivered);
        let _ = writeln!(out, "lost (must be 0)              {}", self.lost);
        let _ = writeln!(out, "duplicated (must be 0)        {}", self.duplicated);
        for ((second, legacy, how), n) in self.repeats.iter().take(12) {
            let kind = if *legacy { "legacy" } else { "acking" };
            let _ = writeln!(out, "  {n} at {second} s, {kind} sessions, {how:?}");
        }
        for trail in &self.repeat_trails {
            for line in trail {
                let _ = writeln!(out, "    {line}");
            }
        }
        let _ = writeln!(out, "out of order (must be 0)      {}", self.out_of_order);
        let _ = writeln!(out, "resets, acking (must be 0)    {}", self.acking_resets);
        let _ = writeln!(out, "resets, legacy                {} (covering {} seqs: a legacy session moving while a fault silences a gateway starts over)", self.legacy_resets, self.legacy_covered);
        let _ = writeln!(
            out,
            "  of them outside the faults (must be 0) {}{}",
            self.legacy_resets_outside_faults,
            if self.unexpected_legacy_resets_at.is_empty() {
                String::new()
            } else {
                let at: Vec<String> = self
                    .unexpected_legacy_resets_at
                    .iter()
                    .take(12)
                    .map(|s| format!("{s:.1}"))
                    .collect();
                format!(", at {} s", at.join(", "))
            }
        );
        let _ = writeln!(
            out,
            "resets unlike the history     {}",
            self.resets_not_matching_history
        );
        let _ = writeln!(
            out,
            "tiles unlike the history      {}",
            self.content_mismatches
        );
        let _ = writeln!(out, "sessions lost (must be 0)     {}", self.sessions_lost);
        let _ = writeln!(
            out,
            "placements acknowledged       {} of {} attempts",
            self.placements_acknowledged, self.placement_attempts
        );
        let _ = writeln!(
            out,
            "acknowledged, not in history  {}",
            self.acknowledged_not_in_history
        );
        let _ = writeln!(out, "applied twice                 {}", self.applied_twice);
        for (fault, recovery) in &self.recovery {
            let _ = writeln!(
                out,
                "recovery: {:<42} {}",
                fault.describe(),
                recovery.map_or("not measured".to_string(), |d| format!(
                    "{:.2} s",
                    d.as_secs_f64()
                ))
            );
        }
        for (name, rss) in &self.rss_max {
            let _ = writeln!(out, "RSS max {name:<22} {:.1} MB", *rss as f64 / 1e6);
        }
        for (kind, n) in &self.client_errors {
            let _ = writeln!(out, "client error {kind:<32} {n}");
        }
        for line in &self.gateway_counts {
            let _ = writeln!(out, "{line}");
        }
        let _ = writeln!(
            out,
            "elapsed                       {:.0} s",
            self.elapsed.as_secs_f64()
        );
        out
    }
}

pub async fn run(config: SoakConfig) -> Report {
    let started = Instant::now();
    crate::processes::raise_open_files();
    std::fs::create_dir_all(&config.out_dir).expect("the run's directory");
    let url = fresh_database(&config.database).await;
    let admin = connect(&url).await;
    let board = create_board(&admin, "soak", (WIDTH, HEIGHT), BITS, "0").await;
    let sql_users: Vec<i64> = crate::create_users(&admin, "sql-placer", 50).await;
    let probe_user = crate::create_users(&admin, "probe", 1).await[0];
    let rpc_placers = ((config.rpc_rate / 10.0).ceil() as i32).max(1);
    let rpc_users = crate::create_users_with_tokens(&admin, "rpc-placer", rpc_placers).await;
    let (port_a, port_b) = (crate::processes::free_port(), crate::processes::free_port());
    let gateway_env = |port: u16| {
        let mut env = vec![("PGPLACE_SESSION_IDLE".to_string(), "300".to_string())];
        if config.one_placer {
            env.push((
                "PGPLACE_PLACER_URL".to_string(),
                format!("http://127.0.0.1:{port}"),
            ));
        }
        env
    };
    let mut gateway_a =
        GatewayProcess::start_on("gw-a", port_a, &url, &config.out_dir, &gateway_env(port_a));
    let mut gateway_b =
        GatewayProcess::start_on("gw-b", port_b, &url, &config.out_dir, &gateway_env(port_b));
    gateway_a.wait_healthy().await;
    gateway_b.wait_healthy().await;
    let nginx = Nginx::start(
        &[gateway_a.addr, gateway_b.addr],
        &config.out_dir,
        config.sessions + 100,
    );
    nginx.wait_ready().await;
    let rpc = Rpc::new(nginx.addr);

    let (phase_tx, phase_rx) = watch::channel(Phase::Placing);
    let arrivals = Arc::new(Mutex::new(HashMap::new()));
    let mut sessions = JoinSet::new();
    for i in 0..config.sessions {
        let plan = SessionPlan {
            board,
            acking: i % config.legacy_every != 0,
            compact: i % 2 == 1,
            keep_tiles: i < config.content_sample,
            arrivals: (i == 1).then(|| arrivals.clone()),
        };
        sessions.spawn(session_life(rpc.clone(), plan, phase_rx.clone()));
        if i % 100 == 99 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    let placing = Arc::new(AtomicBool::new(true));
    let mut placers = JoinSet::new();
    placers.spawn(sql_placer(
        url.clone(),
        board,
        sql_users,
        config.sql_rate,
        placing.clone(),
    ));
    for user in rpc_users {
        let rate = config.rpc_rate / f64::from(rpc_placers);
        placers.spawn(rpc_placer(rpc.clone(), board, user, rate, placing.clone()));
    }

    // Memory, sampled while it runs.
    let rss_max = Arc::new(Mutex::new([0u64; 2]));
    let pids = Arc::new(Mutex::new([gateway_a.pid(), gateway_b.pid()]));
    let sampling = {
        let (rss_max, pids) = (rss_max.clone(), pids.clone());
        tokio::spawn(async move {
            loop {
                let now = *pids.lock().unwrap();
                let now = now.map(|p| p.and_then(rss_of_pid).unwrap_or(0));
                {
                    let mut max = rss_max.lock().unwrap();
                    for (max, now) in max.iter_mut().zip(now) {
                        *max = (*max).max(now);
                    }
                }
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
        })
    };

    let placing_started = Instant::now();
    let mut recovery = Vec::new();
    // From each fault that silences a gateway until its legacy sessions have moved on: a
    // session moving then may not hear from its previous holder (killed, or unable to hear
    // the move or to write its positions) and starts over with a reset. A reload of nginx
    // silences nobody.
    let mut silenced = Vec::new();
    for (at, fault) in &config.faults {
        tokio::time::sleep(at.saturating_sub(placing_started.elapsed())).await;
        let injected = Instant::now();
        match fault {
            Fault::KillGateway => {
                gateway_a.restart();
                pids.lock().unwrap()[0] = gateway_a.pid();
            }
            Fault::KillListen => {
                let killed: i64 = admin_retrying(&url, |c| async move {
                    c.query_one(
                        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
                         WHERE application_name = 'gw-b (listen)'",
                        &[],
                    )
                    .await
                    .map(|r| r.get(0))
                })
                .await;
                assert_eq!(killed, 1, "gateway B's LISTEN backend was terminated");
            }
            Fault::RestartPostgres => {
                let command = config.pg_restart.as_deref().expect(
                    "PGPLACE_TEST_PG_RESTART (restarts the cluster) is set by ./pgplace.sh test",
                );
                let status = tokio::process::Command::new("sh")
                    .args(["-c", command])
                    .status()
                    .await
                    .expect("the restart command runs");
                assert!(status.success(), "the restart command failed");
            }
            Fault::ReloadNginx => nginx.reload(),
            Fault::KillPlacer | Fault::PausePlacer => {
                let holder: String = admin_retrying(&url, move |c| async move {
                    c.query_one(
                        "SELECT address FROM place.placers WHERE board_id = $1",
                        &[&board],
                    )
                    .await
                    .map(|r| r.get(0))
                })
                .await;
                let (placer, slot) = if holder == format!("http://{}", gateway_a.addr) {
                    (&mut gateway_a, 0)
                } else {
                    assert_eq!(
                        holder,
                        format!("http://{}", gateway_b.addr),
                        "a gateway holds the lease"
                    );
                    (&mut gateway_b, 1)
                };
                if *fault == Fault::KillPlacer {
                    placer.restart();
                    pids.lock().unwrap()[slot] = placer.pid();
                    placer.wait_healthy().await;
                } else {
                    placer.pause(Duration::from_secs(5)).await;
                }
            }
        }
        if *fault == Fault::KillGateway {
            gateway_a.wait_healthy().await;
        }
        // Recovery: a placement made after the fault, seen by the probe session.
        let seq = place_probe(&url, board, probe_user).await;
        let seen = wait_arrival(&arrivals, seq, Duration::from_secs(30)).await;
        if *fault != Fault::ReloadNginx {
            let over = seen.unwrap_or_else(Instant::now);
            silenced.push((injected, over + LEGACY_SESSIONS_MOVED_ON));
        }
        recovery.push((*fault, seen.map(|at| at.duration_since(injected))));
    }
    tokio::time::sleep(config.duration.saturating_sub(placing_started.elapsed())).await;
    placing.store(false, Ordering::SeqCst);
    let mut placer_records = Vec::new();
    while let Some(record) = placers.join_next().await {
        placer_records.push(record.expect("a placer finished"));
    }
    let final_seq: i64 = admin_retrying(&url, move |c| async move {
        c.query_one("SELECT seq FROM place.boards WHERE id = $1", &[&board])
            .await
            .map(|r| r.get(0))
    })
    .await;
    let _ = phase_tx.send(Phase::Final(final_seq));
    let mut records = Vec::new();
    while let Some(record) = sessions.join_next().await {
        records.push(record.expect("a session finished"));
    }
    sampling.abort();

    let admin = connect(&url).await;
    let mut report = check(&admin, board, final_seq, &records, &placer_records).await;
    let mut unexpected: Vec<f64> = records
        .iter()
        .filter(|r| !r.acking)
        .flat_map(|r| &r.reset_times)
        .filter(|at| !silenced.iter().any(|(from, to)| (from..to).contains(at)))
        .map(|at| at.duration_since(placing_started).as_secs_f64())
        .collect();
    unexpected.sort_by(f64::total_cmp);
    report.legacy_resets_outside_faults = unexpected.len() as u64;
    for record in &records {
        for (at, n, how) in &record.repeats {
            let second = at.duration_since(placing_started).as_secs();
            *report
                .repeats
                .entry((second, !record.acking, *how))
                .or_default() += n;
        }
    }
    report.unexpected_legacy_resets_at = unexpected;
    report.recovery = recovery;
    report.placement_rate = report.placements_acknowledged as f64 / config.duration.as_secs_f64();
    let max = *rss_max.lock().unwrap();
    report.rss_max = vec![("gateway A".into(), max[0]), ("gateway B".into(), max[1])];
    for (name, gateway) in [("gateway A", &gateway_a), ("gateway B", &gateway_b)] {
        let counts = gateway_counts(name, gateway.addr).await;
        report.forwarded += counts
            .iter()
            .filter_map(|l| l.strip_prefix(&format!("{name}: {FORWARDED_METRIC} ")))
            .filter_map(|n| n.trim().parse::<f64>().ok())
            .sum::<f64>() as u64;
        report.gateway_counts.extend(counts);
    }
    report.elapsed = started.elapsed();
    drop(nginx);
    drop(gateway_a);
    drop(gateway_b);
    report
}

/// The series of `addr`'s /metrics that say why sessions got resets.
async fn gateway_counts(name: &str, addr: SocketAddr) -> Vec<String> {
    let client: Client<HttpConnector, Full<Bytes>> =
        Client::builder(TokioExecutor::new()).build_http();
    let Ok(uri) = format!("http://{addr}/metrics").parse::<hyper::Uri>() else {
        return Vec::new();
    };
    let body = match client.get(uri).await {
        Ok(response) => match response.into_body().collect().await {
            Ok(body) => body.to_bytes(),
            Err(_) => return vec![format!("{name}: /metrics unreadable")],
        },
        Err(_) => return vec![format!("{name}: /metrics unreachable")],
    };
    String::from_utf8_lossy(&body)
        .lines()
        .filter(|l| {
            l.starts_with("pgplace_resets_total")
                || l.starts_with(FORWARDED_METRIC)
                || l.contains("handover_seconds_count")
                // How long the slowest hand-overs took.
                || (l.contains("handover_seconds_bucket")
                    && ["0.2048", "0.4096", "0.8192", "1.6384", "3.2768"]
                        .iter()
                        .any(|le| l.contains(&format!("le=\"{le}\""))))
        })
        .map(|l| format!("{name}: {l}"))
        .collect()
}

fn rss_of_pid(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    Some(line.split_whitespace().nth(1)?.parse::<u64>().ok()? * 1024)
}

/// Runs `query` on a fresh connection, trying again (a restart) for up to 60 s.
async fn admin_retrying<T, F, Fut>(url: &str, query: F) -> T
where
    F: Fn(Arc<tokio_postgres::Client>) -> Fut,
    Fut: std::future::Future<Output = Result<T, tokio_postgres::Error>>,
{
    let started = Instant::now();
    loop {
        if let Ok((client, connection)) = tokio_postgres::connect(url, tokio_postgres::NoTls).await
        {
            tokio::spawn(connection);
            match query(Arc::new(client)).await {
                Ok(value) => return value,
                Err(error) if started.elapsed() > Duration::from_secs(60) => {
                    panic!("{error:?}")
                }
                Err(_) => {}
            }
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the database did not come back"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A placement of the probe user; its seq.
async fn place_probe(url: &str, board: i64, user: i64) -> i64 {
    admin_retrying(url, move |c| async move {
        c.query_one(
            "SELECT seq FROM place.place($1, 0, 0, 1, $2)",
            &[&board, &user],
        )
        .await
        .map(|r| r.get::<_, Option<i64>>(0).unwrap_or(-1))
    })
    .await
}

async fn wait_arrival(
    arrivals: &Mutex<HashMap<i64, Instant>>,
    seq: i64,
    within: Duration,
) -> Option<Instant> {
    let started = Instant::now();
    while started.elapsed() < within {
        if let Some(at) = arrivals.lock().unwrap().get(&seq) {
            return Some(*at);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    None
}

async fn check(
    admin: &tokio_postgres::Client,
    board: i64,
    final_seq: i64,
    records: &[SessionRecord],
    placers: &[PlacerRecord],
) -> Report {
    let mut report = Report {
        sessions: records.len(),
        final_seq,
        ..Default::default()
    };
    let history = crate::stream_check::history(admin, board).await;
    let mut states: HashMap<i64, Vec<u8>> = HashMap::new();
    for record in records {
        report.acking_sessions += usize::from(record.acking);
        report.sessions_lost += usize::from(record.gone);
        report.delivered += record.delivered;
        report.duplicated += record.duplicated;
        if record.duplicated > 0 && report.repeat_trails.len() < 3 {
            report.repeat_trails.push(record.trail.clone());
        }
        report.out_of_order += record.out_of_order;
        report.lost += record.lost;
        if !record.gone && record.next <= final_seq {
            report.lost += (final_seq + 1 - record.next) as u64;
        }
        if record.acking {
            report.acking_resets += record.resets;
        } else {
            report.legacy_resets += record.resets;
            report.legacy_covered += record.covered;
        }
        for (kind, n) in &record.errors {
            *report.client_errors.entry(kind.clone()).or_default() += n;
        }
        for (seq, bits) in &record.reset_states {
            if !states.contains_key(seq) {
                let row = admin
                    .query_one(
                        "SELECT bits FROM place.board_at_seq($1, $2)",
                        &[&board, seq],
                    )
                    .await
                    .expect("board_at_seq");
                states.insert(*seq, row.get(0));
            }
            if states[seq] != *bits {
                report.resets_not_matching_history += 1;
            }
        }
        for (seq, x, y, color) in record.tiles.iter().flatten() {
            if history.get(seq).map(|h| (h.0, h.1, h.2)) != Some((*x, *y, *color)) {
                report.content_mismatches += 1;
            }
        }
    }
    // Every attempt of a placer names a (user, x, y, color) of its own (the probe, placing
    // the same tile again and again, excepted).
    let probe: Option<i64> = admin
        .query_opt("SELECT id FROM place.users WHERE name = 'probe-0'", &[])
        .await
        .expect("the probe user")
        .map(|r| r.get(0));
    let mut attempts_in_history: HashMap<(i64, i32, i32, i32), u64> = HashMap::new();
    for (x, y, color, user) in history.values() {
        if Some(*user) != probe {
            *attempts_in_history
                .entry((*user, *x, *y, *color))
                .or_default() += 1;
        }
    }
    report.applied_twice = attempts_in_history
        .values()
        .filter(|n| **n > 1)
        .map(|n| n - 1)
        .sum();
    for placer in placers {
        report.placement_attempts += placer.attempts;
        report.placements_acknowledged += placer.acked.len() as u64;
        for acked in &placer.acked {
            if history.get(&acked.seq) != Some(&(acked.x, acked.y, acked.color, acked.user)) {
                report.acknowledged_not_in_history += 1;
            }
        }
        for (kind, n) in &placer.errors {
            *report.client_errors.entry(kind.clone()).or_default() += n;
        }
    }
    report
}
