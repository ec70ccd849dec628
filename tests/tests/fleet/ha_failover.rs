//! The primary changes under load (`./pgplace.sh ha up`: pg_auto_failover, a primary and two
//! standbys of which one must confirm each commit, two gateways on the multi-host connection
//! string), killed or in
//! a planned switchover: every acknowledged placement is in the new primary's history with
//! its seq, tile and colour, the history has no gap, clients see no error but a retryable
//! −32009 (every session survives: place.sessions is logged, so on the standby), every
//! watching session's stream goes on exactly (half of them legacy clients on HTTP/1.0, a
//! connection per poll), and both gateways are ready again.
//!
//! The last test does the same through two gateways with one placer per board
//! (`--placer-url`): one holds the board's lease and commits every group, the other sends
//! it its placements, and the lease lives in the database that fails over.
//!
//! Run by `./pgplace.sh test` against the setup it starts (`cargo test --test fleet --
//! --ignored --test-threads=1 ha_failover::`: the tests share the setup), which it names in
//! PGPLACE_TEST_HA_GATEWAYS (addresses, comma-separated), PGPLACE_TEST_HA_PLACER_GATEWAYS
//! (the same, started with `--placer-url`), PGPLACE_TEST_HA_DATABASE (the
//! multi-host URL), PGPLACE_TEST_HA_KILL (the command that makes the primary vanish) and
//! PGPLACE_TEST_HA_SWITCHOVER (the command that hands the primary's role to a standby,
//! reviving a killed node first).

use pgplace_tests::gateway::{http10_call, Http, FORWARDED_METRIC};
use pgplace_tests::{connect, create_board, create_users_with_tokens, placer_leases};
use rand::Rng;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::task::JoinSet;

const SIZE: (i32, i32) = (40, 30);
const RETRY: i64 = -32009;
const PLACERS_PER_GATEWAY: usize = 4;
const WATCHERS_PER_GATEWAY: usize = 2;
/// Placing before the primary changes, and after the command that changes it has returned.
const BEFORE: Duration = Duration::from_secs(5);
/// (A kill takes 10–14 s to the first acknowledgement with two standbys: the monitor waits
/// for both to report their WAL position and for the demote timeout, and the gateways place
/// nothing until a standby has joined the new primary.)
const AFTER: Duration = Duration::from_secs(20);

pub(crate) fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} is not set: run by ./pgplace.sh test"))
}

/// One acknowledged placement and when its request was sent and answered.
struct Ack {
    seq: i64,
    tile: (i32, i32, i32),
    sent: Instant,
    answered: Instant,
}

/// A new session of `user` (its token), on gateway `http`; retried through the failover.
async fn signed_in(http: &Http, token: &str) -> Value {
    loop {
        if let Ok(Ok(session)) = http.try_call("session.create", json!([])).await {
            if let Ok(Ok(_)) = http
                .try_call("session.authorize", json!([session, token]))
                .await
            {
                return session;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// What one placer got: its acknowledgements, its errors by code, and when the first error
/// came.
struct Placed {
    acks: Vec<Ack>,
    errors: BTreeMap<i64, u64>,
    first_error: Option<Instant>,
}

async fn placer(http: Http, board: i64, token: String, placing: Arc<AtomicBool>) -> Placed {
    let session = signed_in(&http, &token).await;
    let (mut acks, mut errors, mut first_error) = (Vec::new(), BTreeMap::new(), None);
    while placing.load(Ordering::SeqCst) {
        let tile = {
            let mut rng = rand::rng();
            (
                rng.random_range(0..SIZE.0),
                rng.random_range(0..SIZE.1),
                rng.random_range(0..16),
            )
        };
        let sent = Instant::now();
        match http
            .try_call(
                "board.place",
                json!([session, board, tile.0, tile.1, tile.2]),
            )
            .await
        {
            Ok(Ok(result)) => {
                assert_eq!(result["placed"], true, "{result}");
                acks.push(Ack {
                    seq: result["seq"].as_i64().unwrap(),
                    tile,
                    sent,
                    answered: Instant::now(),
                });
            }
            Ok(Err(error)) => {
                let code = error["code"].as_i64().unwrap();
                *errors.entry(code).or_default() += 1;
                first_error.get_or_insert_with(Instant::now);
                assert_eq!(
                    code, RETRY,
                    "only a retryable error while the primary changes; the session survives it: {error}"
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            // The gateway itself stays up: an answer always comes.
            Err(transport) => panic!("the gateway did not answer: {transport}"),
        }
    }
    Placed {
        acks,
        errors,
        first_error,
    }
}

/// What one watching session saw: runs of consecutive seqs, each starting after the seq of
/// an initial state (a subscription, or a reset) and the seqs it then got.
struct Watched {
    runs: Vec<(i64, Vec<i64>)>,
}

/// How a watching session's client speaks HTTP: the suite's keep-alive client, or HTTP/1.0
/// (a connection per poll, closed by the gateway), as the plainest legacy client does.
enum Client {
    KeepAlive(Http),
    Http10(SocketAddr),
}

impl Client {
    async fn try_call(&self, method: &str, params: Value) -> Result<Result<Value, Value>, String> {
        match self {
            Client::KeepAlive(http) => http.try_call(method, params).await,
            Client::Http10(addr) => http10_call(*addr, method, params).await,
        }
    }
}

async fn subscribe(http: &Client, board: i64) -> (Value, i64) {
    loop {
        if let Ok(Ok(session)) = http.try_call("session.create", json!([])).await {
            if let Ok(Ok(reply)) = http
                .try_call(
                    "session.subscribe",
                    json!([session, "board", {"board": board}]),
                )
                .await
            {
                return (session, reply[1]["seq"].as_i64().unwrap());
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn watcher(http: Client, board: i64, target: Arc<AtomicI64>) -> Watched {
    let (session, seq) = subscribe(&http, board).await;
    let mut watched = Watched {
        runs: vec![(seq, Vec::new())],
    };
    let mut deadline = None;
    loop {
        let seen = watched
            .runs
            .last()
            .map(|(from, seqs)| *seqs.last().unwrap_or(from))
            .unwrap();
        let goal = target.load(Ordering::SeqCst);
        if goal >= 0 {
            let deadline =
                *deadline.get_or_insert_with(|| Instant::now() + Duration::from_secs(30));
            if seen >= goal || Instant::now() > deadline {
                break;
            }
        }
        match http
            .try_call("session.get_events", json!([session, 0.5]))
            .await
        {
            Ok(Ok(events)) => {
                for event in events.as_array().unwrap() {
                    match event["action"].as_str() {
                        Some("update") => watched
                            .runs
                            .last_mut()
                            .unwrap()
                            .1
                            .push(event["obj"]["seq"].as_i64().unwrap()),
                        Some("reset") => watched
                            .runs
                            .push((event["obj"]["seq"].as_i64().unwrap(), Vec::new())),
                        _ => {}
                    }
                }
            }
            Ok(Err(error)) if error["code"] == RETRY => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Ok(Err(error)) => panic!("get_events: {error}"),
            Err(transport) => panic!("the gateway did not answer: {transport}"),
        }
    }
    watched
}

/// The gateways named in environment variable `name` (comma-separated addresses).
pub(crate) fn addresses(name: &str) -> Vec<SocketAddr> {
    env(name)
        .split(',')
        .map(|a| a.parse().expect("a gateway address"))
        .collect()
}

/// The placements the gateways sent to another gateway's placer, so far.
async fn forwarded(gateways: &[SocketAddr]) -> f64 {
    let mut sum = 0.0;
    for addr in gateways {
        sum += Http::new(*addr)
            .metric(FORWARDED_METRIC)
            .await
            .unwrap_or(0.0);
    }
    sum
}

/// Runs `command` (PGPLACE_TEST_HA_KILL or _SWITCHOVER) under load through the gateways
/// named in `gateways` (an environment variable) and checks what clients and the new
/// primary show; `what` names it in the figures printed. Returns the board.
async fn primary_changes_under_load(gateways: &str, command: &str, what: &str) -> i64 {
    let gateways = addresses(gateways);
    let database = env("PGPLACE_TEST_HA_DATABASE");
    let command = env(command);
    let sql = connect(&database).await;
    let name = format!("{what}-{}", rand::rng().random::<u32>());
    let board = create_board(&sql, &name, SIZE, 4, "0").await;
    let users =
        create_users_with_tokens(&sql, &name, (gateways.len() * PLACERS_PER_GATEWAY) as i32).await;
    drop(sql);

    let placing = Arc::new(AtomicBool::new(true));
    let target = Arc::new(AtomicI64::new(-1));
    let mut placers = JoinSet::new();
    let mut watchers = JoinSet::new();
    for (i, addr) in gateways.iter().enumerate() {
        for w in 0..WATCHERS_PER_GATEWAY {
            // Half of them legacy clients on HTTP/1.0: no answer again, none lost.
            let client = match w % 2 {
                0 => Client::KeepAlive(Http::new(*addr)),
                _ => Client::Http10(*addr),
            };
            watchers.spawn(watcher(client, board, target.clone()));
        }
        for p in 0..PLACERS_PER_GATEWAY {
            let token = users[i * PLACERS_PER_GATEWAY + p].1.clone();
            placers.spawn(placer(Http::new(*addr), board, token, placing.clone()));
        }
    }
    tokio::time::sleep(BEFORE).await;
    let started = Instant::now();
    let status = tokio::process::Command::new("setsid")
        .args(["sh", "-c", &command])
        .status()
        .await
        .expect("the command runs");
    assert!(status.success(), "{command} failed");
    let returned = started.elapsed();
    tokio::time::sleep(AFTER).await;
    placing.store(false, Ordering::SeqCst);

    let (mut acks, mut errors, mut first_error) =
        (Vec::new(), BTreeMap::<i64, u64>::new(), None::<Instant>);
    while let Some(done) = placers.join_next().await {
        let placed = done.unwrap();
        acks.extend(placed.acks);
        for (code, n) in placed.errors {
            *errors.entry(code).or_default() += n;
        }
        first_error = match (first_error, placed.first_error) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }
    // The outage: from the command to the first acknowledgement of a placement sent after
    // the first error (the placements in flight when it began may still be answered).
    let back = first_error.and_then(|first| {
        acks.iter()
            .filter(|a| a.sent > first)
            .map(|a| a.answered)
            .min()
    });
    let recovered = back.map(|back| back - started);
    let unavailable = back.zip(first_error).map(|(back, first)| back - first);
    println!(
        "{what}: {} placements acknowledged, errors {errors:?}, the command took {returned:?}, \
         first acknowledged placement after the first error: {recovered:?} (from the first \
         error: {unavailable:?})",
        acks.len()
    );
    assert!(
        acks.iter()
            .any(|a| a.sent > started + returned + Duration::from_secs(1)),
        "placements go on after the primary changed"
    );

    let sql = connect(&database).await;
    let rows = sql
        .query(
            "SELECT seq, x, y, color FROM place.placements WHERE board_id = $1 ORDER BY seq",
            &[&board],
        )
        .await
        .unwrap();
    let history: BTreeMap<i64, (i32, i32, i32)> = rows
        .iter()
        .map(|r| (r.get(0), (r.get(1), r.get(2), r.get(3))))
        .collect();
    let final_seq = history.keys().last().copied().unwrap_or(0);
    assert!(
        history.keys().copied().eq(1..=final_seq),
        "the history has no gap"
    );
    for ack in &acks {
        assert_eq!(
            history.get(&ack.seq),
            Some(&ack.tile),
            "acknowledged placement seq {} is in the new primary's history as placed",
            ack.seq
        );
    }

    target.store(final_seq, Ordering::SeqCst);
    let mut resets = 0;
    while let Some(done) = watchers.join_next().await {
        let watched = done.unwrap();
        resets += watched.runs.len() - 1;
        let mut newest = 0;
        for (from, seqs) in &watched.runs {
            assert!(
                *from >= newest,
                "a new state is never older than what was shown: {from} after {newest}"
            );
            let expected: Vec<i64> = (from + 1..=from + seqs.len() as i64).collect();
            assert_eq!(
                seqs, &expected,
                "each seq once and in order after the state at {from}"
            );
            newest = seqs.last().copied().unwrap_or(*from);
        }
        assert_eq!(
            newest, final_seq,
            "every watching session reaches the last placement"
        );
    }
    println!("{what}: the watching sessions got {resets} resets");
    for addr in &gateways {
        let http = Http::new(*addr);
        let ready = async {
            loop {
                if let Ok((hyper::StatusCode::OK, _, _)) = http
                    .try_get("/readyz", &hyper::header::HeaderMap::new())
                    .await
                {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        };
        tokio::time::timeout(Duration::from_secs(30), ready)
            .await
            .unwrap_or_else(|_| panic!("gateway {addr} is ready again"));
    }
    board
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs ./pgplace.sh ha up; ./pgplace.sh test runs it"]
async fn a_planned_switchover_shows_clients_only_retryable_errors() {
    let _alone = pgplace_tests::alone();
    primary_changes_under_load(
        "PGPLACE_TEST_HA_GATEWAYS",
        "PGPLACE_TEST_HA_SWITCHOVER",
        "switchover",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs ./pgplace.sh ha up; ./pgplace.sh test runs it"]
async fn nothing_acknowledged_is_lost_when_the_primary_dies() {
    let _alone = pgplace_tests::alone();
    primary_changes_under_load(
        "PGPLACE_TEST_HA_GATEWAYS",
        "PGPLACE_TEST_HA_KILL",
        "failover",
    )
    .await;
}

/// Sorts after the kill: the switchover revives the killed node first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs ./pgplace.sh ha up; ./pgplace.sh test runs it"]
async fn with_one_placer_per_board_a_switchover_shows_clients_only_retryable_errors() {
    let _alone = pgplace_tests::alone();
    let gateways = addresses("PGPLACE_TEST_HA_PLACER_GATEWAYS");
    let before = forwarded(&gateways).await;
    let board = primary_changes_under_load(
        "PGPLACE_TEST_HA_PLACER_GATEWAYS",
        "PGPLACE_TEST_HA_SWITCHOVER",
        "switchover with one placer",
    )
    .await;
    // The path this test is for was walked: a gateway sent its placements to the other,
    // which held the lease in the database that failed over.
    let sent = forwarded(&gateways).await - before;
    assert!(sent > 0.0, "no placement went through the board's placer");
    let sql = connect(&env("PGPLACE_TEST_HA_DATABASE")).await;
    let leases = placer_leases(&sql, board).await;
    assert_eq!(leases, 1, "the board's lease is in the new primary");
    println!("switchover with one placer: {sent} placements sent to the placer");
}
