//! The list views' guarantee under load: random inserts, updates (across the filter and the
//! order) and deletes from several connections on two watched tables (one with a composite
//! key and a cascading foreign key), some transactions rolled back, while sessions
//! subscribe at random moments to six views with different filters and limits, and the
//! LISTEN backend is killed twice (the second time just before the last changes). When the writers stop and events drain, every session's
//! list equals a fresh read of its view, and every event applied on the way was consistent
//! with what the session held.

use pgplace_tests::gateway::{kill_listen_backend, start_gateway, Http};
use pgplace_tests::list_check::ListModel;
use pgplace_tests::{connect, fresh_database};
use rand::Rng;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;

const VIEWS: [(&str, &[i32]); 6] = [
    ("random_live_top", &[10, 3]),
    ("cat1_first", &[5]),
    ("all_viewers", &[20, 7]),
    ("heavy_tags", &[8]),
    ("tags_by_name", &[15, 4]),
    ("quiet_live", &[3]),
];
const SESSIONS: usize = 24;
const WRITE_FOR: Duration = Duration::from_secs(6);

async fn setup(sql: &tokio_postgres::Client) {
    sql.batch_execute(
        "CREATE TABLE streams (id int PRIMARY KEY, title text NOT NULL, viewers int NOT NULL,
                               live boolean NOT NULL, cat int NOT NULL, secret text);
         CREATE TABLE tags (stream_id int REFERENCES streams ON DELETE CASCADE, tag text,
                            weight int NOT NULL, PRIMARY KEY (stream_id, tag));
         INSERT INTO streams SELECT g, 's' || g, g % 17, g % 2 = 0, g % 3, 'x' FROM generate_series(1, 40) g;
         INSERT INTO tags SELECT g, t, (g * 7) % 11 FROM generate_series(1, 40) g, unnest('{a,b}'::text[]) t;
         SELECT place.watch('streams', ARRAY['title', 'viewers', 'live', 'cat']);
         SELECT place.watch('tags');
         SELECT place.create_view('random_live_top', 'streams', 'viewers', 'live', max_limit => 10);
         SELECT place.create_view('cat1_first', 'streams', 'id', 'cat = 1', false, 5);
         SELECT place.create_view('all_viewers', 'streams', 'viewers, title', NULL, false, 20);
         SELECT place.create_view('heavy_tags', 'tags', 'weight', 'weight > 5', max_limit => 8);
         SELECT place.create_view('tags_by_name', 'tags', 'tag, stream_id', NULL, false, 15);
         SELECT place.create_view('quiet_live', 'streams', 'viewers', 'viewers < 10 AND live', max_limit => 3);",
    )
    .await
    .expect("tables, watches and views");
}

/// One random change (or a transaction of a few), sometimes rolled back.
async fn write_once(sql: &tokio_postgres::Client, rng: &mut impl Rng) {
    let mut statements = Vec::new();
    for _ in 0..rng.random_range(1..=3) {
        let id = rng.random_range(1..=60);
        let statement = match rng.random_range(0..9) {
            0 => format!(
                "INSERT INTO streams VALUES ({id}, 'n{id}', {}, {}, {}, 'x') ON CONFLICT DO NOTHING",
                rng.random_range(0..30),
                rng.random_bool(0.5),
                rng.random_range(0..3)
            ),
            1 => format!("UPDATE streams SET viewers = {} WHERE id = {id}", rng.random_range(0..30)),
            2 => format!("UPDATE streams SET live = NOT live WHERE id = {id}"),
            3 => format!("UPDATE streams SET cat = {} WHERE id = {id}", rng.random_range(0..3)),
            4 => format!("DELETE FROM streams WHERE id = {id}"),
            5 => format!(
                "INSERT INTO tags SELECT {id}, '{}', {} WHERE EXISTS (SELECT FROM streams WHERE id = {id}) ON CONFLICT DO NOTHING",
                ["a", "b", "c", "d"][rng.random_range(0..4)],
                rng.random_range(0..11)
            ),
            6 => format!("UPDATE tags SET weight = {} WHERE stream_id = {id}", rng.random_range(0..11)),
            7 => format!("DELETE FROM tags WHERE stream_id = {id} AND tag = 'a'"),
            _ => format!("UPDATE streams SET secret = 'y{id}' WHERE id = {id}"),
        };
        statements.push(statement);
    }
    let end = if rng.random_bool(0.15) {
        "ROLLBACK"
    } else {
        "COMMIT"
    };
    let batch = format!("BEGIN; {}; {end}", statements.join("; "));
    // Two writers may deadlock on the same rows: the loser's transaction is rolled back.
    if sql.batch_execute(&batch).await.is_err() {
        let _ = sql.batch_execute("ROLLBACK").await;
    }
}

struct Subscribed {
    view: &'static str,
    limit: i32,
    model: ListModel,
}

/// Subscribes `session` to `view` at `limit`, keeping the initial rows under its key.
async fn subscribe(
    http: &Http,
    session: &Value,
    view: &'static str,
    limit: i32,
    subs: &mut HashMap<String, Subscribed>,
) {
    let reply = http
        .ok(
            "session.subscribe",
            json!([session, view, {"limit": limit}]),
        )
        .await;
    let key = reply[0].as_str().unwrap().to_string();
    let model = ListModel::new(&reply[1]);
    subs.insert(key, Subscribed { view, limit, model });
}

/// Polls one session until `done` carries the final windows and the session's lists equal
/// them; subscribes to views at random moments before that.
async fn session_life(
    http: Http,
    seed: u64,
    mut done: watch::Receiver<Option<Arc<HashMap<(String, i32), Vec<Value>>>>>,
) -> usize {
    let mut rng = <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(seed);
    let session = http.ok("session.create", json!([])).await;
    let mut subs: HashMap<String, Subscribed> = HashMap::new();
    let mut applied = 0;
    let started = Instant::now();
    let wants = rng.random_range(1..=3);
    loop {
        if subs.len() < wants && started.elapsed() < WRITE_FOR && rng.random_bool(0.3) {
            let (view, limits) = VIEWS[rng.random_range(0..VIEWS.len())];
            let limit = limits[rng.random_range(0..limits.len())];
            subscribe(&http, &session, view, limit, &mut subs).await;
        }
        let events = http.ok("session.get_events", json!([session, 1])).await;
        for event in events.as_array().unwrap() {
            let key = event["key"].as_str().unwrap();
            subs.get_mut(key)
                .unwrap_or_else(|| panic!("an event for a key not subscribed: {event}"))
                .model
                .apply(event);
            applied += 1;
        }
        let finals = done.borrow_and_update().clone();
        if let Some(finals) = finals {
            if subs.is_empty() {
                // Subscribe now, so that every session checks at least one view.
                let (view, limits) = VIEWS[seed as usize % VIEWS.len()];
                subscribe(&http, &session, view, limits[0], &mut subs).await;
                continue;
            }
            let all_equal = subs
                .values()
                .all(|s| s.model.rows == finals[&(s.view.to_string(), s.limit)]);
            if all_equal {
                return applied;
            }
            assert!(
                started.elapsed() < WRITE_FOR + Duration::from_secs(30),
                "session {seed} never reached the views: {:?}",
                subs.iter()
                    .map(|(k, s)| (k, &s.model.rows, &finals[&(s.view.to_string(), s.limit)]))
                    .collect::<Vec<_>>()
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_session_ends_equal_to_its_view() {
    let url = fresh_database("gw_lists_random").await;
    let sql = connect(&url).await;
    setup(&sql).await;
    let gw = start_gateway(&url, |_| {}).await;
    let http = Http::new(gw.addr);
    let (done_tx, done_rx) = watch::channel(None);
    let sessions: Vec<_> = (0..SESSIONS as u64)
        .map(|seed| tokio::spawn(session_life(http.clone(), seed, done_rx.clone())))
        .collect();
    let writers: Vec<_> = (0..4u64)
        .map(|w| {
            let url = url.clone();
            tokio::spawn(async move {
                let sql = connect(&url).await;
                let mut rng = <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(100 + w);
                let started = Instant::now();
                let mut writes = 0;
                while started.elapsed() < WRITE_FOR {
                    write_once(&sql, &mut rng).await;
                    writes += 1;
                }
                writes
            })
        })
        .collect();
    tokio::time::sleep(WRITE_FOR / 2).await;
    let admin = connect(&url).await;
    assert_eq!(
        kill_listen_backend(&admin).await,
        1,
        "the LISTEN backend was killed"
    );
    let mut writes = 0;
    for writer in writers {
        writes += writer.await.unwrap();
    }
    // The last changes land while the gateway has no LISTEN connection: only its catch-up
    // after reconnecting can bring them to the sessions.
    assert_eq!(kill_listen_backend(&admin).await, 1);
    sql.batch_execute(
        "UPDATE streams SET viewers = (viewers + 7) % 30; \
         UPDATE streams SET live = NOT live WHERE id % 4 = 0; \
         UPDATE tags SET weight = (weight + 3) % 11; \
         DELETE FROM streams WHERE id % 5 = 0;",
    )
    .await
    .unwrap();
    let mut finals = HashMap::new();
    for (view, limits) in VIEWS {
        for &limit in limits {
            let rows: Value = sql
                .query_one("SELECT rows FROM place.view_rows($1, $2)", &[&view, &limit])
                .await
                .unwrap()
                .get(0);
            finals.insert((view.to_string(), limit), rows.as_array().unwrap().clone());
        }
    }
    done_tx.send(Some(Arc::new(finals))).unwrap();
    let mut applied = 0;
    for session in sessions {
        applied += session
            .await
            .expect("every session's lists equal its views");
    }
    let commits: i64 = sql
        .query_one("SELECT place.change_pos()", &[])
        .await
        .unwrap()
        .get(0);
    eprintln!("{writes} write transactions, {commits} commits announced, {applied} events applied");
    assert!(
        commits > 100,
        "the writers changed the tables ({commits} commits)"
    );
    assert!(
        applied > 100,
        "sessions followed the changes ({applied} events)"
    );
}
