//! Scenario `lists`: list views at scale. 50 views over one watched table (one per
//! category, ordered by score, 10 rows each) and 1,000 watched commits/s (10 writers, each
//! committing one changed row every 10 ms, through SQL); first 100 sessions, then 1,000 on
//! the same 50 views, each with a fresh gateway. Each change stamps its row with the
//! commit's number, so the latency of an event is the time its `get_events` answer arrived
//! minus the time that commit returned. Also counted: the transactions the gateway ran in the database during
//! the phase (`pg_stat_database`, less the writer's), which must not grow with sessions.

use crate::client::{poll_answers, Conn};
use crate::report::{rate, CpuClock, Latencies, Table};
use crate::{Result, Setup};
use rand::Rng;
use serde::Deserialize;
use std::collections::HashMap;
use std::time::{Duration, Instant};
use tokio::sync::watch;
use tokio::time::MissedTickBehavior;

const VIEWS: usize = 50;
const ROWS: i32 = 10_000;
const ROWS_PER_COMMIT: usize = 1;
/// Writers, each committing every PERIOD: 1,000 commits/s.
const WRITERS: usize = 10;
const PERIOD: Duration = Duration::from_millis(10);
const LIMIT: i32 = 10;
const POLL_SECS: u64 = 30;
const DRAIN: Duration = Duration::from_secs(2);
const NAME: &str = "lists";

#[derive(Deserialize)]
struct Answer {
    result: Vec<Event>,
}

#[derive(Deserialize)]
struct Event {
    action: String,
    obj: Option<Obj>,
}

#[derive(Deserialize)]
struct Obj {
    stamp: Option<i64>,
}

#[derive(Default)]
struct Watch {
    /// (commit number, arrival) of each update event.
    arrivals: Vec<(i64, Instant)>,
    events: usize,
    resets: usize,
    error: Option<String>,
}

pub async fn run(setup: &Setup) -> Result<Table> {
    let db = pgplace_tests::connect(&setup.db_url).await;
    db.batch_execute(&format!(
        "CREATE TABLE items (id int PRIMARY KEY, cat int NOT NULL, score int NOT NULL, stamp bigint NOT NULL DEFAULT 0);
         INSERT INTO items SELECT g, g % {VIEWS}, (g * 7919) % 1000000, 0 FROM generate_series(1, {ROWS}) g;
         -- What a DBA adds for views filtered by cat and ordered by score.
         CREATE INDEX ON items (cat, score, id);
         SELECT place.watch('items', ARRAY['cat', 'score', 'stamp']);
         SELECT place.create_view('cat_' || c, 'items', 'score', 'cat = ' || c, max_limit => {LIMIT})
         FROM generate_series(0, {VIEWS} - 1) c;"
    ))
    .await?;
    let mut table = Table::new();
    for sessions in [100, 1000] {
        table.extend(phase(setup, sessions).await?);
    }
    Ok(table)
}

async fn phase(setup: &Setup, sessions: usize) -> Result<Table> {
    let name = format!("{NAME} ({sessions} sessions)");
    let gateway = setup.gateway(&format!("{NAME}-{sessions}")).await?;
    let (stop, stopped) = watch::channel(false);
    let mut watchers = Vec::with_capacity(sessions);
    for i in 0..sessions {
        let mut conn = Conn::open(gateway.addr).await?;
        let session = conn.session(None).await?;
        let view = format!("cat_{}", i % VIEWS);
        conn.call(
            "session.subscribe",
            serde_json::json!({"session": session, "view": view, "params": {"limit": LIMIT}}),
        )
        .await?;
        watchers.push(tokio::spawn(poll(conn, session, stopped.clone())));
    }
    let db = pgplace_tests::connect(&setup.db_url).await;
    let mut writers = Vec::with_capacity(WRITERS);
    for _ in 0..WRITERS {
        writers.push(pgplace_tests::connect(&setup.db_url).await);
    }
    // Statistics reach pg_stat_database within a second of a transaction.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let xacts_before = transactions(&db).await?;
    let cpu = CpuClock::start(&gateway);
    let mut acks = HashMap::new();
    let runs: Vec<_> = writers
        .iter()
        .enumerate()
        .map(|(w, db)| write(db, w as i64, setup.phase()))
        .collect();
    for run in futures::future::join_all(runs).await {
        acks.extend(run?);
    }
    let cpu = cpu.finish(&gateway);
    tokio::time::sleep(DRAIN).await;
    let xacts = transactions(&db).await? - xacts_before;
    let _ = stop.send(true);
    let mut watches = Vec::new();
    for w in watchers {
        watches.push(w.await?);
    }
    gateway.stop().await;
    let mut latencies = Latencies::default();
    for w in &watches {
        for (stamp, at) in &w.arrivals {
            if let Some(ack) = acks.get(stamp) {
                match at.checked_duration_since(*ack) {
                    Some(d) => latencies.push(d),
                    None => latencies.push_micros(0),
                }
            }
        }
    }
    let delivered = latencies.len();
    let latencies = latencies.sorted();
    let events: usize = watches.iter().map(|w| w.events).sum();
    let resets: usize = watches.iter().map(|w| w.resets).sum();
    let errors: Vec<&String> = watches.iter().filter_map(|w| w.error.as_ref()).collect();
    // The writer's own commits, the statistics reads and this count's margin aside, the
    // rest are the gateway's reads of views.
    let gateway_xacts = xacts.saturating_sub(acks.len() as i64 + 2);
    let phase = setup.phase() + DRAIN;
    let mut t = Table::new();
    t.info(
        &name,
        "watched commits",
        format!(
            "{:.0}/s of {ROWS_PER_COMMIT} row, from {WRITERS} writers",
            rate(acks.len(), setup.phase())
        ),
    );
    t.target(
        &name,
        "commit -> update event, p50 / p99 (max)",
        format!(
            "{:.1} / {:.1} ms ({:.1} ms)",
            latencies.ms(0.5),
            latencies.ms(0.99),
            latencies.ms(1.0)
        ),
        "p99 <= 50 ms",
        latencies.ms(0.99) <= 50.0,
    );
    t.info(
        &name,
        "list events delivered/s",
        format!("{:.0} ({delivered} stamped)", rate(events, setup.phase())),
    );
    t.info(
        &name,
        "gateway's database transactions/s",
        format!("{:.0} ({VIEWS} views)", rate(gateway_xacts as usize, phase)),
    );
    t.info(&name, "CPU during the phase", cpu);
    t.resets_and_errors(&name, resets, &errors);
    Ok(t)
}

async fn transactions(db: &tokio_postgres::Client) -> Result<i64> {
    Ok(db
        .query_one(
            "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()",
            &[],
        )
        .await?
        .get(0))
}

/// Writer `writer`'s commits of random rows, one every period; returns when each commit
/// number (unique among the writers) returned.
async fn write(
    db: &tokio_postgres::Client,
    writer: i64,
    phase: Duration,
) -> Result<HashMap<i64, Instant>> {
    let statement = db
        .prepare("UPDATE items SET score = s.score, stamp = $3 FROM unnest($1::int[], $2::int[]) AS s(id, score) WHERE items.id = s.id")
        .await?;
    let mut acks = HashMap::new();
    let mut ticks = tokio::time::interval(PERIOD);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let end = Instant::now() + phase;
    let mut stamp: i64 = writer;
    while Instant::now() < end {
        ticks.tick().await;
        stamp += WRITERS as i64;
        let (ids, scores): (Vec<i32>, Vec<i32>) = {
            let mut rng = rand::rng();
            (0..ROWS_PER_COMMIT)
                .map(|_| (rng.random_range(1..=ROWS), rng.random_range(0..1_000_000)))
                .unzip()
        };
        db.execute(&statement, &[&ids, &scores, &stamp]).await?;
        acks.insert(stamp, Instant::now());
    }
    Ok(acks)
}

async fn poll(mut conn: Conn, session: String, stopped: watch::Receiver<bool>) -> Watch {
    let mut w = Watch::default();
    w.error = poll_answers(
        &mut conn,
        &session,
        POLL_SECS,
        stopped,
        |answer: Answer, at| {
            for event in answer.result {
                w.events += 1;
                match (event.action.as_str(), event.obj.and_then(|o| o.stamp)) {
                    // An update is caused by its row's own change (stamped with that commit);
                    // an insert may be a row moving up into the window when another left, with
                    // an old stamp.
                    ("update", Some(stamp)) if stamp > 0 => w.arrivals.push((stamp, at)),
                    ("reset", _) => w.resets += 1,
                    _ => {}
                }
            }
        },
    )
    .await;
    w
}
