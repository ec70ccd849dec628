//! The gateway's guarantee, checked end to end: placements stream in from SQL and RPC
//! placers while sessions subscribe at random moments; afterwards every session's events
//! must be exactly the placements after its initial state, in seq order, each once, and
//! replaying them over its initial bits must give the board's final bits.
//!
//! A scenario may disturb the run (kill the LISTEN backend, restart Postgres): the checks
//! stay the same, because the guarantee must hold through those too.

use crate::gateway::{start_gateway, Http};
use crate::{board_bits, connect, create_board, create_users_with_tokens, fresh_database};
use base64::Engine;
use pgplace_core::bits::TileWidth;
use pgplace_gateway::config::Commit;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::task::JoinSet;

pub const WIDTH: i32 = 40;
pub const HEIGHT: i32 = 30;
const BITS: i32 = 4;

/// What one session saw.
pub struct Recorded {
    pub compact: bool,
    pub initial_seq: i64,
    pub initial_bits: Vec<u8>,
    pub events: Vec<Value>,
}

/// Options of one run.
pub struct Scenario {
    pub database: &'static str,
    pub sessions: usize,
    pub placing: Duration,
    /// A session may be reset: after a crash that lost the answer to a change of its own
    /// that committed (its subscription, say), the gateway tells it to start over. A reset
    /// is then checked like the rest: its state is the history's at its seq, which is not
    /// before anything the session was shown.
    pub may_reset: bool,
    /// The gateway commits groups asynchronously (`--commit asynchronous`).
    pub asynchronous_commit: bool,
    /// The SQL placers set `pgplace.release_before_flush`: their placements are visible
    /// before they are durable, and durable when their COMMIT returns.
    pub release_before_flush: bool,
}

/// A placement its placer was told was made: its seq and the row it must have in the history.
type Acked = (i64, Row);

/// Runs placers and watching sessions, calls `disturb` in the middle, then checks every
/// session, and that every acknowledged placement is in the history as it was made (a
/// crash may take back only what nobody was told). Returns how many placements were made.
pub async fn run<F, Fut>(scenario: Scenario, disturb: F) -> i64
where
    F: FnOnce(String) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let url = fresh_database(scenario.database).await;
    let admin = connect(&url).await;
    let board = create_board(&admin, "stream", (WIDTH, HEIGHT), BITS, "0").await;
    let users = create_users_with_tokens(&admin, "placer", 64).await;
    let asynchronous = scenario.asynchronous_commit;
    let gateway = start_gateway(&url, |config| {
        if asynchronous {
            config.commit = Commit::Asynchronous;
        }
    })
    .await;
    let http = Http::new(gateway.addr);
    let placing = Arc::new(AtomicBool::new(true));

    let mut placers = JoinSet::new();
    for (i, chunk) in users.chunks(16).enumerate() {
        let chunk = chunk.to_vec();
        let placing = placing.clone();
        if i % 2 == 0 {
            let url = if scenario.release_before_flush {
                let joint = if url.contains('?') { '&' } else { '?' };
                format!("{url}{joint}options=-c%20pgplace.release_before_flush%3Don")
            } else {
                url.clone()
            };
            placers.spawn(sql_placer(url, board, chunk, placing, i as u64));
        } else {
            placers.spawn(rpc_placer(http.clone(), board, chunk, placing, i as u64));
        }
    }
    let mut watchers = JoinSet::new();
    // The seq every session must reach; unknown (-1) until the placers have stopped.
    let target = Arc::new(AtomicI64::new(-1));
    for i in 0..scenario.sessions {
        let delay = scenario
            .placing
            .mul_f64(i as f64 / scenario.sessions as f64);
        watchers.spawn(watch(
            http.clone(),
            board,
            i % 3 == 0,
            delay,
            target.clone(),
        ));
    }
    let disturbance = tokio::spawn(disturb(url.clone()));
    tokio::time::sleep(scenario.placing).await;
    placing.store(false, Ordering::SeqCst);
    let mut acked = Vec::new();
    while let Some(result) = placers.join_next().await {
        acked.extend(result.expect("a placer finished"));
    }
    let placed = acked.len() as i64;
    disturbance.await.expect("the disturbance finished");
    // A new connection: the disturbance may have been a restart.
    let admin = connect(&url).await;
    let (final_seq, final_bits) = board_bits(&admin, board).await;
    // (That every acknowledged placement is in the history is checked below.)
    assert!(placed > 0, "placements were made");
    wait_for_seq(&http, board, final_seq).await;
    // Sessions stop once they have seen everything (or after a generous deadline): how long
    // a loaded machine takes to answer their polls is not what is checked.
    target.store(final_seq, Ordering::SeqCst);
    let history = history(&admin, board).await;
    for (seq, row) in &acked {
        assert_eq!(
            history.get(seq),
            Some(row),
            "acknowledged placement seq {seq} is not in the history as it was made"
        );
    }
    let mut checked = 0;
    while let Some(recorded) = watchers.join_next().await {
        let recorded = recorded.expect("a watcher finished");
        check(
            &recorded,
            &history,
            final_seq,
            &final_bits,
            scenario.may_reset,
        );
        checked += 1;
    }
    assert_eq!(checked, scenario.sessions);
    drop(gateway);
    final_seq
}

/// Waits until a fresh subscriber's initial state reaches `seq` (the mirror caught up).
async fn wait_for_seq(http: &Http, board: i64, seq: i64) {
    for _ in 0..300 {
        let state = http.ok("board.get", json!([board])).await;
        if state["seq"].as_i64() == Some(seq) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the gateway's board never reached seq {seq}");
}

/// A placement as the history holds it: (x, y, color, user).
pub type Row = (i32, i32, i32, i64);

/// A board's history by seq.
pub async fn history(client: &tokio_postgres::Client, board: i64) -> BTreeMap<i64, Row> {
    client
        .query(
            "SELECT seq, x, y, color, user_id FROM place.placements WHERE board_id = $1",
            &[&board],
        )
        .await
        .expect("reading the history")
        .iter()
        .map(|r| (r.get(0), (r.get(1), r.get(2), r.get(3), r.get(4))))
        .collect()
}

fn check(
    recorded: &Recorded,
    history: &BTreeMap<i64, Row>,
    final_seq: i64,
    final_bits: &[u8],
    may_reset: bool,
) {
    let tile = TileWidth::new(BITS.into()).unwrap();
    let mut bits = recorded.initial_bits.clone();
    let mut next = recorded.initial_seq + 1;
    let form = if recorded.compact { "compact" } else { "qik" };
    for event in &recorded.events {
        let action = event["action"].as_str().unwrap_or_default();
        let tiles: Vec<(i64, Row, Option<i64>)> = match action {
            "update" => {
                let obj = &event["obj"];
                let row = (
                    obj["x"].as_i64().unwrap() as i32,
                    obj["y"].as_i64().unwrap() as i32,
                    obj["color"].as_i64().unwrap() as i32,
                    obj["user"].as_i64().unwrap(),
                );
                vec![(
                    obj["seq"].as_i64().unwrap(),
                    row,
                    event["old"]["color"].as_i64(),
                )]
            }
            "tiles" => {
                let first = event["seq"][0].as_i64().unwrap();
                let list = event["tiles"].as_array().unwrap();
                assert_eq!(
                    event["seq"][1].as_i64().unwrap() - first + 1,
                    list.len() as i64,
                    "a compact event's seq range matches its tiles: {event}"
                );
                list.iter()
                    .zip(first..)
                    .map(|(t, seq)| {
                        let user = history.get(&seq).map_or(-1, |r| r.3);
                        let row = (
                            t[0].as_i64().unwrap() as i32,
                            t[1].as_i64().unwrap() as i32,
                            t[2].as_i64().unwrap() as i32,
                            user,
                        );
                        (seq, row, None)
                    })
                    .collect()
            }
            "settings" => continue,
            "reset" if may_reset => {
                let state = &event["obj"];
                let seq = state["seq"].as_i64().unwrap();
                assert!(
                    seq >= next - 1,
                    "{form} session was shown seq {} and then reset to seq {seq}: {event}",
                    next - 1
                );
                for (seq, row) in history.range(next..=seq) {
                    assert_eq!(*seq, next, "the history has no seq {next}");
                    let n = i64::from(row.0) + i64::from(WIDTH) * i64::from(row.1);
                    tile.set(&mut bits, n, row.2.into()).unwrap();
                    next += 1;
                }
                assert_eq!(
                    next - 1,
                    seq,
                    "the history ends before the reset's seq {seq}"
                );
                let reset_bits = base64::engine::general_purpose::STANDARD
                    .decode(state["bits"].as_str().unwrap())
                    .unwrap();
                assert!(
                    reset_bits == bits,
                    "{form} session reset to seq {seq}: its bits are not the history's"
                );
                continue;
            }
            other => panic!("{form} session got an unexpected {other:?} event: {event}"),
        };
        for (seq, row, old) in tiles {
            assert_eq!(
                seq, next,
                "{form} session (from seq {}): expected seq {next}, got {seq}",
                recorded.initial_seq
            );
            assert_eq!(
                Some(&row),
                history.get(&seq),
                "{form} event for seq {seq} differs from the history"
            );
            let n = i64::from(row.0) + i64::from(WIDTH) * i64::from(row.1);
            if let Some(old) = old {
                assert_eq!(
                    old,
                    i64::from(tile.get(&bits, n).unwrap()),
                    "`old` of seq {seq}"
                );
            }
            tile.set(&mut bits, n, row.2.into()).unwrap();
            next += 1;
        }
    }
    assert_eq!(
        next - 1,
        final_seq,
        "{form} session (from seq {}) stopped early",
        recorded.initial_seq
    );
    assert!(
        bits == final_bits,
        "{form} session: initial bits + events != the final board"
    );
}

/// How long a session keeps polling for the rest of the stream once the final seq is known.
const CATCH_UP_DEADLINE: Duration = Duration::from_secs(30);

/// Subscribes after `delay`, then polls until it has seen `target` (once that is known) or
/// the deadline after it passes.
async fn watch(
    http: Http,
    board: i64,
    compact: bool,
    delay: Duration,
    target: Arc<AtomicI64>,
) -> Recorded {
    tokio::time::sleep(delay).await;
    let session = http.ok_in_a_moment("session.create", json!([])).await;
    let reply = http
        .ok_in_a_moment(
            "session.subscribe",
            json!([session, "board", {"board": board, "compact": compact}]),
        )
        .await;
    let state = &reply[1];
    let mut recorded = Recorded {
        compact,
        initial_seq: state["seq"].as_i64().unwrap(),
        initial_bits: base64::engine::general_purpose::STANDARD
            .decode(state["bits"].as_str().unwrap())
            .unwrap(),
        events: Vec::new(),
    };
    let mut seen = recorded.initial_seq;
    let mut deadline = None;
    // One more poll after the final seq was seen: anything that comes after it (a
    // duplicate, say) is in what `check` sees.
    let mut last_round = false;
    loop {
        let goal = target.load(Ordering::SeqCst);
        if goal >= 0 {
            let deadline = *deadline.get_or_insert_with(|| Instant::now() + CATCH_UP_DEADLINE);
            if last_round || Instant::now() >= deadline {
                break;
            }
            last_round = seen >= goal;
        }
        let events = http
            .ok_in_a_moment("session.get_events", json!([session, 0.2]))
            .await;
        for event in events.as_array().unwrap() {
            seen = seen.max(last_seq(event));
            recorded.events.push(event.clone());
        }
    }
    recorded
}

/// The newest seq an event carries (0 for one without tiles).
fn last_seq(event: &Value) -> i64 {
    match event["action"].as_str() {
        Some("update") => event["obj"]["seq"].as_i64().unwrap_or(0),
        Some("tiles") => event["seq"][1].as_i64().unwrap_or(0),
        _ => 0,
    }
}

/// Places through SQL until told to stop, reconnecting after errors (a restart, say).
async fn sql_placer(
    url: String,
    board: i64,
    users: Vec<(i64, String)>,
    placing: Arc<AtomicBool>,
    seed: u64,
) -> Vec<Acked> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut acked = Vec::new();
    while placing.load(Ordering::SeqCst) {
        let Ok((client, connection)) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await
        else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        tokio::spawn(connection);
        while placing.load(Ordering::SeqCst) {
            let n = rng.random_range(1..=users.len());
            let ids: Vec<i64> = users[..n].iter().map(|u| u.0).collect();
            let xs: Vec<i32> = (0..n).map(|_| rng.random_range(0..WIDTH)).collect();
            let ys: Vec<i32> = (0..n).map(|_| rng.random_range(0..HEIGHT)).collect();
            let colors: Vec<i32> = (0..n).map(|_| rng.random_range(0..16)).collect();
            match client
                .query(
                    "SELECT ord, seq FROM place.place_many($1, $2, $3, $4, $5) WHERE placed",
                    &[&board, &ids, &xs, &ys, &colors],
                )
                .await
            {
                Ok(rows) => acked.extend(rows.iter().map(|r| {
                    let i = r.get::<_, i32>(0) as usize - 1;
                    (r.get(1), (xs[i], ys[i], colors[i], ids[i]))
                })),
                Err(_) => break,
            }
            tokio::time::sleep(Duration::from_millis(rng.random_range(0..15))).await;
        }
    }
    acked
}

/// Places through `board.place`, one session per user, until told to stop.
async fn rpc_placer(
    http: Http,
    board: i64,
    users: Vec<(i64, String)>,
    placing: Arc<AtomicBool>,
    seed: u64,
) -> Vec<Acked> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut sessions = Vec::new();
    for (user, token) in &users {
        let session = http.ok("session.create", json!([])).await;
        http.ok("session.authorize", json!([session, token])).await;
        sessions.push((session, *user));
    }
    let mut acked = Vec::new();
    while placing.load(Ordering::SeqCst) {
        let (session, user) = &sessions[rng.random_range(0..sessions.len())];
        let (x, y, color) = (
            rng.random_range(0..WIDTH),
            rng.random_range(0..HEIGHT),
            rng.random_range(0..16),
        );
        match http
            .call("board.place", json!([session, board, x, y, color]))
            .await
        {
            Ok(result) => {
                assert_eq!(result["placed"], true);
                let seq = result["seq"].as_i64().expect("a placement's seq");
                acked.push((seq, (x, y, color, *user)));
            }
            // While the database restarts, placing fails with "unavailable" or "retry".
            Err(error) => {
                let code = error["code"].as_i64().unwrap();
                assert!([-32008, -32009].contains(&code), "unexpected error {error}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
    acked
}
