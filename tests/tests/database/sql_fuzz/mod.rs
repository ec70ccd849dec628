//! SQL fuzz: every function of schema `place`, read from `pg_proc` (a new function is
//! covered without touching this file), called thousands of times with random arguments —
//! extremes, NULLs in each position, empty and huge arrays, odd intervals, timestamps and
//! text, real and missing boards and users — each call its own transaction.
//!
//! What must hold (README, "Guarantees"):
//! - only documented SQLSTATEs come back: the Validation table, the errors the function
//!   tables name for a function, and the 22xxx data exceptions PostgreSQL raises when an
//!   argument is cast (those are told apart: a literal that may not cast is tried alone
//!   first). Never `XX000` (an internal error: a Rust panic), never `P0001` (a bare RAISE),
//!   never a lost connection (a crashed backend), never a call longer than the statement
//!   timeout. Internal helpers (`_name`) have no documented errors: for them only the
//!   "never" rules apply (and `XX001`, which they raise for input inconsistent with a
//!   board, is allowed). What needs the extension's SQL mended is listed in `KNOWN`;
//! - a refused placement (`placed = false`: cooldown, frozen tile) or a failed one leaves
//!   the user's cooldown row as it was; a user who only ever got errors can place at once;
//! - afterwards, on every board: packed length = ceil(width*height*bits_per_tile/8), seq =
//!   history rows + history_from with gap-free seqs, `board_bits` = `board_at_seq(seq)` =
//!   the history replayed (boards never resized or compacted) = `tiles`.
//!
//! Then the hostile phases (README, "Security"; `hostile_phases`): sql/roles.sql runs in the
//! same database, and a login in each of its groups and a login with no grant at all each
//! call every function with random arguments, connected as themselves. Their calls may
//! fail only as the superuser's may (42501 is in the Validation table), a function a login
//! may not EXECUTE never runs, and afterwards no role holds anything it did not hold
//! before (roles, memberships, owners and ACLs in the database, triggers, watches: see
//! `HOLDINGS`), the stranger and the reader changed no row, and every board still checks.
//! The roles (cluster-wide, named `sql_fuzz_*`) are dropped at the end, and at the start
//! of the next run if one was cut short.
//!
//! Failures are collected (deduplicated by function, SQLSTATE and message shape, with the
//! first SQL that showed each) and reported together at the end.
//!
//! `PGPLACE_FUZZ_SEED` replays a run (the seed is printed); `PGPLACE_FUZZ_CALLS` sets the
//! number of the superuser's calls (default 15,000: 40-65 s on 2 cores with the one valid
//! batch of 100,000 placements), `PGPLACE_FUZZ_ROLE_CALLS` those of each hostile login
//! (default 1,500: a fifth more time in all). Given the seed, the calls are the same:
//! arguments never depend on results. `PSQL` names the psql that runs sql/roles.sql.
//!
//! Here the test and its phases; beside it `generator.rs` (the arguments and the calls),
//! `verdicts.rs` (which SQLSTATEs a call may end with) and `holdings.rs` (what every role
//! holds, before and after).

mod generator;
mod holdings;
mod verdicts;

use generator::*;
use holdings::*;
use pgplace_core::bits::TileWidth;
use pgplace_tests::{board_bits, create_board, create_users, fresh_database};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::time::{Duration, Instant};
use tokio_postgres::{Client, SimpleQueryMessage};
use verdicts::*;

const DATABASE: &str = "pgplace_test_sql_fuzz";
const DEFAULT_CALLS: usize = 15_000;
/// Calls per login in the hostile phases (`PGPLACE_FUZZ_ROLE_CALLS`).
const DEFAULT_ROLE_CALLS: usize = 1_500;
/// A call that takes longer than this is a failure (the fuzz stays bounded).
const STATEMENT_TIMEOUT: &str = "20s";

/// A function of schema `place` and its input arguments.
#[derive(Debug, Clone)]
struct Function {
    oid: u32,
    name: String,
    strict: bool,
    arg_names: Vec<String>,
    arg_types: Vec<String>,
    defaults: usize,
}

impl Function {
    fn internal(&self) -> bool {
        self.name.starts_with('_')
    }
}

async fn functions(client: &Client) -> (Vec<Function>, Vec<String>) {
    let rows = client
        .query(
            "SELECT p.proname::text,
                    CASE WHEN p.proargmodes IS NULL
                         THEN ARRAY(SELECT coalesce(p.proargnames[i], '')
                                    FROM generate_series(1, p.pronargs) i ORDER BY i)
                         ELSE ARRAY(SELECT coalesce(n, '')
                                    FROM unnest(p.proargnames, p.proargmodes::text[])
                                         WITH ORDINALITY u(n, m, o)
                                    WHERE m IN ('i', 'b', 'v') ORDER BY o) END,
                    ARRAY(SELECT format_type(t, NULL)
                          FROM unnest(p.proargtypes) WITH ORDINALITY u(t, o) ORDER BY o),
                    p.pronargdefaults::int,
                    p.prorettype IN ('trigger'::regtype, 'event_trigger'::regtype) OR p.prokind <> 'f',
                    p.oid,
                    p.proisstrict
             FROM pg_proc p
             WHERE p.pronamespace = 'place'::regnamespace
             ORDER BY p.proname, p.oid",
            &[],
        )
        .await
        .expect("reading pg_proc");
    let mut callable = Vec::new();
    let mut skipped = Vec::new();
    for row in rows {
        let name: String = row.get(0);
        if row.get::<_, bool>(4) {
            skipped.push(name); // trigger functions and procedures cannot be called so
            continue;
        }
        callable.push(Function {
            oid: row.get(5),
            strict: row.get(6),
            name,
            arg_names: row.get(1),
            arg_types: row.get(2),
            defaults: row.get::<_, i32>(3) as usize,
        });
    }
    (callable, skipped)
}

#[derive(Default)]
struct Report {
    calls: usize,
    per_function: BTreeMap<String, usize>,
    codes: BTreeMap<String, usize>,
    cast_refused: BTreeMap<String, usize>,
    failures: BTreeMap<(String, String, String), (usize, String, String)>,
    slowest: (Duration, String),
    frozen_refusals: usize,
    accepted: usize,
    known: BTreeMap<(String, String), usize>,
}

impl Report {
    /// Whether `code` may come back from `function` (`verdict`), counting the known ones.
    fn allowed(&mut self, function: &str, code: &str) -> bool {
        match verdict(function, code) {
            Ok(why) => {
                if why == "known" {
                    *self
                        .known
                        .entry((function.to_string(), code.to_string()))
                        .or_default() += 1;
                }
                true
            }
            Err(()) => false,
        }
    }
    /// The failures, one line each with the first SQL that showed it.
    fn lines(&self) -> Vec<String> {
        self.failures
            .iter()
            .map(|((function, code, _), (count, sql, message))| {
                format!("- {function}: {code} ×{count}: {message}\n    {sql}")
            })
            .collect()
    }
    fn fail(&mut self, function: &str, code: &str, message: &str, sql: &str) {
        let shape: String = message
            .chars()
            .map(|c| if c.is_ascii_digit() { '#' } else { c })
            .collect::<String>()
            .split("##")
            .collect::<Vec<_>>()
            .join("#");
        let shape: String = shape.chars().take(160).collect();
        let entry = self
            .failures
            .entry((function.to_string(), code.to_string(), shape))
            .or_insert_with(|| (0, short(sql, 600), short(message, 400)));
        entry.0 += 1;
    }
}

fn short(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        format!("{}…", s.chars().take(max).collect::<String>())
    }
}

/// The outcome of one statement.
enum Outcome {
    Rows(Vec<Vec<Option<String>>>),
    Error(String, String),
    Lost(String),
}

async fn run(client: &Client, sql: &str) -> Outcome {
    match client.simple_query(sql).await {
        Ok(messages) => Outcome::Rows(
            messages
                .into_iter()
                .filter_map(|m| match m {
                    SimpleQueryMessage::Row(row) => Some(
                        (0..row.len())
                            .map(|i| row.get(i).map(str::to_string))
                            .collect(),
                    ),
                    _ => None,
                })
                .collect(),
        ),
        Err(e) => match e.as_db_error() {
            Some(db) => Outcome::Error(db.code().code().to_string(), db.message().to_string()),
            None => Outcome::Lost(e.to_string()),
        },
    }
}

async fn session(url: &str) -> Client {
    session_as(url, None).await
}

/// A connection to `url`, as `login` when given (trust authentication lets it in).
async fn session_as(url: &str, login: Option<&str>) -> Client {
    let mut config: tokio_postgres::Config = url.parse().expect("a connection URL");
    if let Some(login) = login {
        config.user(login);
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        match config.connect(tokio_postgres::NoTls).await {
            Ok((client, connection)) => {
                tokio::spawn(async move {
                    let _ = connection.await;
                });
                client
                    .batch_execute(&format!("SET statement_timeout = '{STATEMENT_TIMEOUT}'"))
                    .await
                    .expect("setting statement_timeout");
                return client;
            }
            Err(e) if Instant::now() < deadline => {
                eprintln!("reconnecting: {e}");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            Err(e) => panic!("the server did not come back: {e}"),
        }
    }
}

/// The fixture: small boards with every tile width, cooldowns 0 and > 0, freezing; users;
/// a watched table with a view; tables that cannot be watched; fz_mine, which the hostile
/// phases give to the admin's login.
struct Fixture {
    boards: Vec<i64>,
    board_names: Vec<String>,
    users: Vec<i64>,
    /// The user that only ever gets refusals (errors): never in `users`.
    refused: i64,
    token: String,
}

async fn fixture(client: &Client) -> Fixture {
    let specs: [(&str, (i32, i32), i32, &str); 6] = [
        ("fz-one-free", (7, 5), 1, "0"),
        ("fz-two-cool", (9, 3), 2, "1 hour"),
        ("fz-four-free", (10, 10), 4, "0"),
        ("fz-four-cool", (12, 7), 4, "5 minutes"),
        ("fz-eight-free", (6, 6), 8, "0"),
        ("fz-eight-cool", (13, 11), 8, "1 second"),
    ];
    let mut boards = Vec::new();
    for (name, size, bits, cooldown) in specs {
        boards.push(create_board(client, name, size, bits, cooldown).await);
    }
    // Freezing: one board whose tiles freeze quickly (some will freeze during the run),
    // one slowly; one board paused.
    client
        .batch_execute(&format!(
            "SELECT place.set_freeze_after({}, '2 seconds');
             SELECT place.set_freeze_after({}, '1 day');
             SELECT place.set_keyframe_every({}, 5);
             SELECT place.set_board_state({}, 'paused');",
            boards[2], boards[3], boards[4], boards[5]
        ))
        .await
        .expect("board settings");
    let users = create_users(client, "fz-user", 24).await;
    let refused: i64 = client
        .query_one("SELECT user_id FROM place.create_user('fz-refused')", &[])
        .await
        .expect("create_user")
        .get(0);
    let token: String = client
        .query_one("SELECT token FROM place.create_user('fz-token')", &[])
        .await
        .expect("create_user")
        .get(0);
    client
        .batch_execute(
            "CREATE TABLE fz_items (id serial PRIMARY KEY, title text, n int, secret text);
             INSERT INTO fz_items (title, n) SELECT 't' || g, g FROM generate_series(1, 20) g;
             CREATE TABLE fz_other (a int, b text, PRIMARY KEY (a, b));
             CREATE TABLE fz_mine (id serial PRIMARY KEY, title text, n int);
             INSERT INTO fz_mine (title, n) SELECT 'm' || g, g FROM generate_series(1, 10) g;
             CREATE TABLE fz_nopk (a int);
             CREATE TABLE fz_parent (id int PRIMARY KEY) PARTITION BY RANGE (id);
             CREATE TABLE fz_child PARTITION OF fz_parent FOR VALUES FROM (0) TO (100);
             CREATE VIEW fz_view AS SELECT 1 AS id;
             CREATE SEQUENCE fz_seq;
             SELECT place.watch('fz_items', ARRAY['title', 'n']);
             SELECT place.watch('fz_other');
             SELECT place.create_view('fz_top', 'fz_items', 'n', 'n > 3');
             SELECT place.create_view('fz_other_top', 'fz_other', 'a');",
        )
        .await
        .expect("watched tables");
    // Some history to start from.
    for (i, &board) in boards.iter().enumerate().take(5) {
        for (k, &user) in users.iter().enumerate() {
            let _ = client
                .query(
                    "SELECT * FROM place.place($1, $2, $3, $4, $5)",
                    &[
                        &board,
                        &(k as i32 % 6),
                        &(k as i32 / 6 % 3),
                        &((i + k) as i32 % 2),
                        &user,
                    ],
                )
                .await
                .expect("first placements");
        }
    }
    Fixture {
        board_names: specs.iter().map(|s| s.0.to_string()).collect(),
        boards,
        users,
        refused,
        token,
    }
}

/// The user's cooldown row on the board (its last_placed_at as text), if any.
async fn cooldown_row(client: &Client, board: i64, user: i64) -> Option<Option<String>> {
    match run(
        client,
        &format!(
            "SELECT last_placed_at::text FROM place.cooldowns WHERE board_id = {board} AND user_id = {user}"
        ),
    )
    .await
    {
        Outcome::Rows(rows) => Some(rows.into_iter().next().and_then(|r| r[0].clone())),
        _ => None,
    }
}

/// Casts that may fail are tried alone: their errors are PostgreSQL's, not the function's.
/// The SQLSTATE of the first that fails, if one does. `cache` belongs to one role (a
/// regclass the superuser can name, a role without USAGE on its schema cannot).
async fn cast_refused(
    client: &Client,
    call: &Call,
    types: &[String],
    cache: &mut HashMap<String, Result<(), String>>,
) -> Option<String> {
    for (a, ty) in call.args[..call.keep].iter().zip(types) {
        if !a.risky {
            continue;
        }
        let cast = format!("SELECT ({})::{ty}", a.sql);
        let result = match cache.get(&cast) {
            Some(r) => r.clone(),
            None => {
                let r = match run(client, &cast).await {
                    Outcome::Error(code, _) => Err(code),
                    _ => Ok(()),
                };
                cache.insert(cast.clone(), r.clone());
                r
            }
        };
        if let Err(code) = result {
            return Some(code);
        }
    }
    None
}

fn env_number(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .map(|s| s.parse().unwrap_or_else(|_| panic!("{name} is a number")))
        .unwrap_or(default)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_function_with_random_arguments() {
    let seed: u64 = std::env::var("PGPLACE_FUZZ_SEED")
        .ok()
        .map(|s| s.parse().expect("PGPLACE_FUZZ_SEED is a number"))
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
                % 1_000_000_000
        });
    let calls = env_number("PGPLACE_FUZZ_CALLS", DEFAULT_CALLS);
    let role_calls = env_number("PGPLACE_FUZZ_ROLE_CALLS", DEFAULT_ROLE_CALLS);
    println!("sql_fuzz: seed {seed} (replay with PGPLACE_FUZZ_SEED={seed}), {calls} calls, {role_calls} per hostile login");
    let started = Instant::now();

    let url = fresh_database(DATABASE).await;
    let mut first = superuser_phase(&url, seed, calls).await;
    let hostile = Instant::now();
    let more = hostile_phases(&url, seed, role_calls, &mut first).await;
    let mut lines = first.failures;
    lines.extend(more);
    println!(
        "sql_fuzz: hostile phases {:.1} s; the whole fuzz {:.1} s",
        hostile.elapsed().as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
    assert!(
        lines.is_empty(),
        "sql_fuzz (seed {seed}, replay with PGPLACE_FUZZ_SEED={seed}) found {} problem(s):\n{}",
        lines.len(),
        lines.join("\n")
    );
}

/// What the superuser's phase leaves to the hostile ones.
struct FirstPhase {
    fx: Fixture,
    functions: Vec<Function>,
    /// Boards resized or compacted: their bits are no longer their history replayed.
    reshaped: HashSet<i64>,
    failures: Vec<String>,
}

/// Every function called `calls` times as the superuser, then the invariants on every
/// board and the refused user.
async fn superuser_phase(url: &str, seed: u64, calls: usize) -> FirstPhase {
    let started = Instant::now();
    let mut client = session(url).await;
    regressions(&client).await;
    let fx = fixture(&client).await;
    huge_batch(&client).await;
    let (all, skipped) = functions(&client).await;
    println!(
        "sql_fuzz: {} functions to call, {} skipped (triggers): {}",
        all.len(),
        skipped.len(),
        skipped.join(", ")
    );
    let unknown_types: HashSet<&str> = all
        .iter()
        .flat_map(|f| f.arg_types.iter().map(String::as_str))
        .filter(|t| {
            ![
                "bigint",
                "integer",
                "text",
                "interval",
                "timestamp with time zone",
                "bytea",
                "bigint[]",
                "integer[]",
                "text[]",
                "jsonb",
                "regclass",
                "regrole",
                "oid",
                "boolean",
                "xid",
                "xid8",
                "pg_snapshot",
                "timestamp with time zone[]",
            ]
            .contains(t)
        })
        .collect();
    assert!(
        unknown_types.is_empty(),
        "argument types this fuzz does not generate yet (add them to Generator::arg): {unknown_types:?}"
    );

    let mut g = Generator::new(seed, &fx);
    let weights = weights(&all);
    let mut report = Report::default();
    let mut cast_cache: HashMap<String, Result<(), String>> = HashMap::new();
    let mut reshaped: HashSet<i64> = HashSet::new();
    let mut refused_calls = 0;

    for _ in 0..calls {
        // A change of a watched table now and then, so the change log has something.
        if g.chance(0.02) {
            let id = g.rng.random_range(1..=25);
            let _ = run(
                &client,
                &format!("UPDATE fz_items SET n = n + 1 WHERE id = {id}; INSERT INTO fz_other VALUES ({id}, 'x') ON CONFLICT DO NOTHING"),
            )
            .await;
        }
        // The refused user, on its own schedule.
        if g.chance(0.03) {
            let (label, sql) = refused_call(&mut g, fx.refused);
            refused_calls += 1;
            match run(&client, &sql).await {
                Outcome::Error(code, message) => {
                    *report.codes.entry(code.clone()).or_default() += 1;
                    if !DOCUMENTED.contains(&code.as_str()) {
                        report.fail(&label, &code, &message, &sql);
                    }
                }
                Outcome::Rows(_) => report.fail(
                    &label,
                    "none",
                    "a call that cannot be valid did not fail",
                    &sql,
                ),
                Outcome::Lost(e) => {
                    report.fail(&label, "connection lost", &e, &sql);
                    client = session(url).await;
                }
            }
        }

        let call = next_call(&mut g, &all, &weights);
        let f = &all[call.function];
        let (args, keep, sql) = (&call.args, call.keep, &call.sql);
        if let Some(code) = cast_refused(&client, &call, &f.arg_types, &mut cast_cache).await {
            *report.cast_refused.entry(code).or_default() += 1;
            continue;
        }

        // A placement that is refused or fails must leave its user's cooldown as it was.
        let watched = if f.name == "place" && keep == 5 {
            match (args[0].int, args[4].int) {
                (Some(b), Some(u)) if b > 0 && u > 0 => {
                    Some((b, u, cooldown_row(&client, b, u).await))
                }
                _ => None,
            }
        } else {
            None
        };

        report.calls += 1;
        *report.per_function.entry(f.name.clone()).or_default() += 1;
        let t = Instant::now();
        let outcome = run(&client, sql).await;
        let took = t.elapsed();
        if took > report.slowest.0 {
            report.slowest = (took, short(sql, 200));
        }
        let mut placed = None;
        match outcome {
            Outcome::Rows(rows) => {
                *report.codes.entry("ok".into()).or_default() += 1;
                if f.name == "place" || f.name == "place_many" {
                    let placed_column = if f.name == "place" { 0 } else { 1 };
                    report.accepted += rows
                        .iter()
                        .filter(|r| r[placed_column].as_deref() == Some("t"))
                        .count();
                }
                if f.name == "place" {
                    if let Some(row) = rows.first() {
                        let is_placed = row[0].as_deref() == Some("t");
                        placed = Some(is_placed);
                        if is_placed != row[1].is_some() {
                            report.fail(&f.name, "result", "placed and seq disagree", sql);
                        }
                        if !is_placed && row[2].is_none() {
                            report.fail(
                                &f.name,
                                "result",
                                "a refusal without next_allowed_at",
                                sql,
                            );
                        }
                        if !is_placed && row[2].as_deref() == Some("infinity") {
                            report.frozen_refusals += 1;
                        }
                    }
                }
                if f.name == "resize_board" || f.name == "compact_history" {
                    if let Some(b) = args[0].int {
                        reshaped.insert(b);
                    }
                }
            }
            Outcome::Error(code, message) => {
                *report.codes.entry(code.clone()).or_default() += 1;
                if !report.allowed(&f.name, &code) {
                    report.fail(&f.name, &code, &message, sql);
                }
            }
            Outcome::Lost(e) => {
                report.fail(&f.name, "connection lost", &e, sql);
                client = session(url).await;
            }
        }
        if let Some((b, u, Some(before))) = watched {
            if placed != Some(true) {
                let after = cooldown_row(&client, b, u).await;
                if after != Some(before.clone()) {
                    report.fail(
                        &f.name,
                        "cooldown",
                        &format!("a placement that did not place changed the cooldown row: {before:?} -> {after:?}"),
                        sql,
                    );
                }
            }
        }
    }
    let fuzz_time = started.elapsed();

    // Invariants on every board (the fixture's and those the fuzz created).
    let checker = session(url).await;
    let (mut problems, boards) = check_boards(&checker, &reshaped).await;
    problems.extend(check_refused_user(&checker, &fx).await);

    println!("sql_fuzz: seed {seed}; {} calls in {:.1} s ({refused_calls} refused-user calls), {boards} boards checked, total {:.1} s",
        report.calls, fuzz_time.as_secs_f64(), started.elapsed().as_secs_f64());
    println!("sql_fuzz: outcomes: {:?}", report.codes);
    println!(
        "sql_fuzz: {} placements accepted by place/place_many; place refused on a frozen tile {} times",
        report.accepted, report.frozen_refusals
    );
    println!(
        "sql_fuzz: casts PostgreSQL refused before a call: {:?}",
        report.cast_refused
    );
    println!("sql_fuzz: calls per function: {:?}", report.per_function);
    println!(
        "sql_fuzz: slowest call {:.2} s: {}",
        report.slowest.0.as_secs_f64(),
        report.slowest.1
    );
    let never_called: Vec<&str> = all
        .iter()
        .map(|f| f.name.as_str())
        .filter(|n| !report.per_function.contains_key(*n))
        .collect();
    if !never_called.is_empty() {
        println!("sql_fuzz: never called this run: {never_called:?}");
    }
    for (function, code, why) in KNOWN {
        match report.known.get(&(function.to_string(), code.to_string())) {
            Some(n) => println!("sql_fuzz: known, to mend in SQL: {function} {code} ×{n}: {why}"),
            None => println!("sql_fuzz: known {function} {code} did not show up this run ({why})"),
        }
    }
    let mut failures = report.lines();
    failures.extend(problems.iter().map(|p| format!("- invariant: {p}")));
    FirstPhase {
        fx,
        functions: all,
        reshaped,
        failures,
    }
}

/// The invariants (`check_board`) on every board; the problems and how many boards.
async fn check_boards(client: &Client, reshaped: &HashSet<i64>) -> (Vec<String>, usize) {
    let boards: Vec<i64> = client
        .query("SELECT id FROM place.boards ORDER BY id", &[])
        .await
        .expect("boards")
        .iter()
        .map(|r| r.get(0))
        .collect();
    let mut problems = Vec::new();
    for &board in &boards {
        problems.extend(check_board(client, board, reshaped.contains(&board)).await);
    }
    (problems, boards.len())
}

/// Packed length, seq = history, bits = time travel = replay = tiles, on one board.
async fn check_board(client: &Client, board: i64, reshaped: bool) -> Vec<String> {
    let mut problems = Vec::new();
    let row = client
        .query_one(
            "SELECT width, height, bits_per_tile, seq, history_from FROM place.boards WHERE id = $1",
            &[&board],
        )
        .await
        .expect("board row");
    let (width, height, bits, seq, history_from): (i32, i32, i32, i64, i64) =
        (row.get(0), row.get(1), row.get(2), row.get(3), row.get(4));
    let tile = TileWidth::new(bits.into()).expect("a stored tile width");
    let tiles = width as u64 * height as u64;
    let (bits_seq, packed) = board_bits(client, board).await;
    let expected_len = (tiles * bits as u64).div_ceil(8) as usize;
    if packed.len() != expected_len {
        problems.push(format!(
            "board {board}: packed length {} but ceil({width}*{height}*{bits}/8) = {expected_len}",
            packed.len()
        ));
    }
    if bits_seq != seq {
        problems.push(format!(
            "board {board}: board_bits says seq {bits_seq}, boards.seq {seq}"
        ));
    }
    let row = client
        .query_one(
            "SELECT count(*), coalesce(min(seq), 0), coalesce(max(seq), 0) FROM place.placements WHERE board_id = $1",
            &[&board],
        )
        .await
        .expect("history");
    let (count, min, max): (i64, i64, i64) = (row.get(0), row.get(1), row.get(2));
    if count + history_from != seq || (count > 0 && (min != history_from + 1 || max != seq)) {
        problems.push(format!(
            "board {board}: seq {seq}, history_from {history_from}, but {count} history rows with seqs {min}..{max}"
        ));
    }
    let backwards = pgplace_tests::stamps_going_back(client, board).await;
    if backwards > 0 {
        problems.push(format!(
            "board {board}: {backwards} placements stamped earlier than the one before"
        ));
    }
    match client
        .query_one(
            "SELECT seq, width, height, bits FROM place.board_at_seq($1, $2)",
            &[&board, &seq],
        )
        .await
    {
        Ok(row) => {
            let (s, w, h, b): (i64, i32, i32, Vec<u8>) =
                (row.get(0), row.get(1), row.get(2), row.get(3));
            if (s, w, h) != (seq, width, height) || b != packed {
                problems.push(format!(
                    "board {board}: board_at_seq({seq}) is seq {s}, {w}x{h}, {} bytes{}; the board is {width}x{height}, {} bytes",
                    b.len(),
                    if b == packed { "" } else { " that differ from board_bits" },
                    packed.len()
                ));
            }
        }
        Err(e) => problems.push(format!("board {board}: board_at_seq({seq}) failed: {e}")),
    }
    if !reshaped && history_from == 0 {
        let history = client
            .query(
                "SELECT x, y, color FROM place.placements WHERE board_id = $1 ORDER BY seq",
                &[&board],
            )
            .await
            .expect("history");
        let mut replay = vec![0u8; tile.packed_len(tiles)];
        for row in &history {
            let (x, y, color): (i32, i32, i32) = (row.get(0), row.get(1), row.get(2));
            if x < 0 || y < 0 || x >= width || y >= height {
                problems.push(format!(
                    "board {board}: a placement at ({x}, {y}) outside {width}x{height}"
                ));
                continue;
            }
            if let Err(e) = tile.set(
                &mut replay,
                i64::from(x) + i64::from(width) * i64::from(y),
                color.into(),
            ) {
                problems.push(format!("board {board}: replaying ({x}, {y}, {color}): {e}"));
            }
        }
        if replay != packed {
            problems.push(format!(
                "board {board}: its bits are not its history replayed"
            ));
        }
    }
    if tiles <= 100_000 {
        let rows = client
            .query("SELECT x, y, color FROM place.tiles($1)", &[&board])
            .await
            .expect("tiles");
        let differ = rows.len() as u64 != tiles
            || rows.iter().any(|r| {
                let (x, y, color): (i32, i32, i32) = (r.get(0), r.get(1), r.get(2));
                tile.get(&packed, i64::from(x) + i64::from(width) * i64::from(y))
                    .map(i32::from)
                    != Ok(color)
            });
        if differ {
            problems.push(format!("board {board}: tiles() disagrees with board_bits"));
        }
    }
    problems
}

/// The user who only ever got errors spent no cooldown: no row, no placement, and on each
/// fixture board (made open, unfrozen, with a cooldown) it places at once — and then not.
async fn check_refused_user(client: &Client, fx: &Fixture) -> Vec<String> {
    let mut problems = Vec::new();
    let r = fx.refused;
    let rows: i64 = client
        .query_one(
            "SELECT (SELECT count(*) FROM place.cooldowns WHERE user_id = $1) \
                  + (SELECT count(*) FROM place.placements WHERE user_id = $1)",
            &[&r],
        )
        .await
        .expect("refused user's rows")
        .get(0);
    if rows != 0 {
        problems.push(format!(
            "user {r} only got errors but has {rows} cooldown or history rows"
        ));
    }
    for &board in &fx.boards {
        client
            .batch_execute(&format!(
                "SELECT place.set_board_state({board}, 'open');
                 SELECT place.set_freeze_after({board}, NULL);
                 SELECT place.set_cooldown({board}, '1 hour');"
            ))
            .await
            .expect("opening a fixture board");
        for (attempt, expected) in [(1, true), (2, false)] {
            let placed: bool = client
                .query_one(
                    "SELECT placed FROM place.place($1, 0, 0, 0, $2)",
                    &[&board, &r],
                )
                .await
                .expect("the refused user's placement")
                .get(0);
            if placed != expected {
                problems.push(format!(
                    "board {board}: the refused user's placement #{attempt} placed = {placed}, expected {expected}"
                ));
            }
        }
    }
    problems
}

/// One valid batch of 100,000 placements (the limit), on a board of its own.
async fn huge_batch(client: &Client) {
    let board = create_board(client, "fz-huge", (16, 16), 1, "0").await;
    let user = create_users(client, "fz-huge", 1).await[0];
    let t = Instant::now();
    let placed: i64 = client
        .query_one(
            "SELECT count(*) FILTER (WHERE placed) FROM place.place_many($1, \
               array_fill($2::bigint, ARRAY[100000]), \
               (SELECT array_agg(g % 16) FROM generate_series(0, 99999) g), \
               (SELECT array_agg(g / 16 % 16) FROM generate_series(0, 99999) g), \
               (SELECT array_agg(g / 7 % 2) FROM generate_series(0, 99999) g))",
            &[&board, &user],
        )
        .await
        .expect("a batch of 100,000 placements")
        .get(0);
    assert_eq!(
        placed, 100_000,
        "a valid batch at the limit places every item"
    );
    println!(
        "sql_fuzz: a batch of 100,000 placements took {:.1} s",
        t.elapsed().as_secs_f64()
    );
}

/// Targeted cases kept from what the fuzz found, and the frozen-tile refusal that must
/// spend no cooldown.
async fn regressions(client: &Client) {
    // Found by this fuzz (fixed in the extension's Rust): a NULL array element given to a
    // helper was an internal error (XX000, pgrx's conversion), now 22004.
    for sql in [
        "SELECT place._apply_tiles('\\x00', 4, '{NULL}', '{1}')",
        "SELECT place._apply_tiles('\\x00', 4, '{0}', '{NULL}')",
        "SELECT place._placement_payloads('{1}', '{1}', '{0}', '{NULL}', '{0}', '{1}', ARRAY[now()])",
        "SELECT place._placement_payloads('{1}', '{1}', '{0}', '{0}', '{0}', '{1}', ARRAY[NULL::timestamptz])",
    ] {
        match run(client, sql).await {
            Outcome::Error(code, _) => assert_eq!(code, "22004", "{sql}"),
            _ => panic!("{sql} did not fail"),
        }
    }

    let board = create_board(client, "fz-regress-frozen", (4, 4), 4, "1 hour").await;
    let users = create_users(client, "fz-regress", 2).await;
    client
        .batch_execute(&format!(
            "SELECT place.set_freeze_after({board}, '1 second')"
        ))
        .await
        .unwrap();
    let placed: bool = client
        .query_one(
            "SELECT placed FROM place.place($1, 0, 0, 3, $2)",
            &[&board, &users[0]],
        )
        .await
        .unwrap()
        .get(0);
    assert!(placed);
    tokio::time::sleep(Duration::from_millis(1_300)).await;
    let row = client
        .query_one(
            "SELECT placed, seq, next_allowed_at = 'infinity' FROM place.place($1, 0, 0, 5, $2)",
            &[&board, &users[1]],
        )
        .await
        .unwrap();
    assert_eq!(
        (
            row.get::<_, bool>(0),
            row.get::<_, Option<i64>>(1),
            row.get::<_, bool>(2)
        ),
        (false, None, true),
        "a frozen tile refuses, with next_allowed_at = infinity"
    );
    let placed: bool = client
        .query_one(
            "SELECT placed FROM place.place($1, 1, 1, 5, $2)",
            &[&board, &users[1]],
        )
        .await
        .unwrap()
        .get(0);
    assert!(placed, "the refusal on a frozen tile spent no cooldown");
}

// ---- The hostile phases -------------------------------------------------------------

/// sql/roles.sql's three groups, under names of this test's own (roles belong to the
/// whole cluster, which other tests share).
const READER: &str = "sql_fuzz_reader";
const PLAYER: &str = "sql_fuzz_player";
const ADMIN: &str = "sql_fuzz_admin";
/// The admin's login. It owns table fz_mine of the fixture, so that its watch, create_view
/// and the readers of its views get past the ownership checks (README: an admin watches
/// the tables it owns) — where an admin's own code could come to run as the owner.
const DBA: &str = "sql_fuzz_dba";

/// A login the hostile phases connect as.
struct Login {
    name: &'static str,
    /// The group it is a member of; None: a login with no grant at all.
    group: Option<&'static str>,
    /// Whether its functions may change rows of schema place (README, "Security": the
    /// reader and any other login "cannot write anything").
    writes: bool,
}

const LOGINS: &[Login] = &[
    Login {
        name: "sql_fuzz_stranger",
        group: None,
        writes: false,
    },
    Login {
        name: "sql_fuzz_analyst",
        group: Some(READER),
        writes: false,
    },
    Login {
        name: "sql_fuzz_gateway",
        group: Some(PLAYER),
        writes: true,
    },
    Login {
        name: DBA,
        group: Some(ADMIN),
        writes: true,
    },
];

/// The hostile phases (README, "Security"): sql/roles.sql run in the fuzz's database, then
/// each login above calls every function `calls` times with random arguments, connected as
/// itself (pgplace's checks ask about session_user: SET ROLE on the superuser's connection
/// would leave that the superuser). A call may fail as the superuser's may (42501 is in
/// the Validation table); one the login may not EXECUTE must fail. Afterwards nothing a
/// role could gain changed (`HOLDINGS`), the stranger and the reader changed no row of
/// schema place, every board still checks, and the roles are dropped.
async fn hostile_phases(url: &str, seed: u64, calls: usize, first: &mut FirstPhase) -> Vec<String> {
    let FirstPhase {
        fx,
        functions,
        reshaped,
        ..
    } = first;
    let admin = session(url).await;
    create_roles(&admin, url).await;
    let mut lines = Vec::new();
    let before = holdings(&admin).await;
    let weights = weights(functions);
    for (k, login) in LOGINS.iter().enumerate() {
        let rows_before = if login.writes {
            None
        } else {
            Some(place_rows(&admin).await)
        };
        // Each login its own stream of calls, all given by the seed.
        let mut g = Generator::new(seed.wrapping_add(1 + k as u64), fx);
        let phase = role_phase(url, login, &mut g, calls, functions, &weights, reshaped).await;
        lines.extend(phase);
        if let Some(rows_before) = rows_before {
            let rows_after = place_rows(&admin).await;
            for (table, was) in &rows_before {
                let now = rows_after.get(table).map_or("gone", String::as_str);
                if now != was {
                    lines.push(format!("- {} wrote {table}: {was} -> {now}", login.name));
                }
            }
        }
    }
    let after = holdings(&admin).await;
    lines.extend(gained(&admin, &before, &after).await);
    let (problems, boards) = check_boards(&admin, reshaped).await;
    println!("sql_fuzz: after the hostile phases, {boards} boards checked");
    lines.extend(
        problems
            .iter()
            .map(|p| format!("- invariant after the hostile phases: {p}")),
    );
    drop_roles(&admin).await;
    lines
}

/// The groups (sql/roles.sql, as a DBA runs it) and the logins; the admin's table given to
/// its login, which watches it and shows it in a view. What an interrupted run left behind
/// is dropped first.
async fn create_roles(admin: &Client, url: &str) {
    drop_roles(admin).await;
    pgplace_tests::run_roles_sql(url, READER, PLAYER, ADMIN).await;
    for login in LOGINS {
        let member = login
            .group
            .map_or(String::new(), |g| format!(" IN ROLE {g}"));
        admin
            .batch_execute(&format!("CREATE ROLE {} LOGIN{member}", login.name))
            .await
            .expect("creating a login");
    }
    // The DBA's table, watched by the DBA with a view that the random calls name (the
    // superuser's phase may have watched it, and made views of that name).
    admin
        .batch_execute(&format!(
            "SELECT place.drop_view(name) FROM place.views
             WHERE tbl = 'fz_mine'::regclass OR name = 'fz_view_1';
             SELECT place.unwatch('fz_mine');
             ALTER TABLE fz_mine OWNER TO {DBA};"
        ))
        .await
        .expect("giving the admin's login its table");
    session_as(url, Some(DBA))
        .await
        .batch_execute(
            "SELECT place.watch('fz_mine', ARRAY['title', 'n']);
             SELECT place.create_view('fz_view_1', 'fz_mine', 'n', 'n > 3');",
        )
        .await
        .expect("the DBA watching its table");
}

/// Drops this test's roles (cluster-wide) with what they own or were granted in the fuzz's
/// database, the only one where they hold anything.
async fn drop_roles(admin: &Client) {
    let names: Vec<&str> = LOGINS
        .iter()
        .map(|l| l.name)
        .chain([READER, PLAYER, ADMIN])
        .collect();
    let existing: Vec<String> = admin
        .query(
            "SELECT quote_ident(rolname) FROM pg_roles WHERE rolname = ANY($1) ORDER BY 1",
            &[&names],
        )
        .await
        .expect("reading pg_roles")
        .iter()
        .map(|r| r.get(0))
        .collect();
    if existing.is_empty() {
        return;
    }
    let list = existing.join(", ");
    admin
        .batch_execute(&format!("DROP OWNED BY {list} CASCADE; DROP ROLE {list}"))
        .await
        .unwrap_or_else(|e| panic!("dropping the roles {list}: {e}"));
}

/// One login's calls; its failures.
async fn role_phase(
    url: &str,
    login: &Login,
    g: &mut Generator,
    calls: usize,
    all: &[Function],
    weights: &[u32],
    reshaped: &mut HashSet<i64>,
) -> Vec<String> {
    let started = Instant::now();
    let mut client = session_as(url, Some(login.name)).await;
    let who = client
        .query_one(
            "SELECT session_user::text, current_setting('is_superuser')",
            &[],
        )
        .await
        .expect("who am I");
    assert_eq!(
        (who.get::<_, String>(0), who.get::<_, String>(1)),
        (login.name.to_string(), "off".to_string()),
        "connected as the login, not a superuser"
    );
    let oids: Vec<u32> = all.iter().map(|f| f.oid).collect();
    let granted: HashSet<u32> = client
        .query(
            "SELECT p.oid FROM pg_catalog.pg_proc p \
             WHERE p.oid = ANY($1) AND pg_catalog.has_function_privilege(p.oid, 'EXECUTE')",
            &[&oids],
        )
        .await
        .expect("the functions the login may call")
        .iter()
        .map(|r| r.get(0))
        .collect();
    let mut report = Report::default();
    let mut cast_cache = HashMap::new();
    // 42501 from a function the login may call: its own checks (an admin watching a table
    // it does not own, a reader's argument reading place.user_tokens). Counted, not failed.
    let mut denied_granted: BTreeMap<&str, (usize, String)> = BTreeMap::new();
    let mut succeeded: BTreeMap<&str, usize> = BTreeMap::new();
    let mut folded_calls = 0;
    for _ in 0..calls {
        let call = next_call(g, all, weights);
        let f = &all[call.function];
        if let Some(code) = cast_refused(&client, &call, &f.arg_types, &mut cast_cache).await {
            *report.cast_refused.entry(code).or_default() += 1;
            continue;
        }
        report.calls += 1;
        *report.per_function.entry(f.name.clone()).or_default() += 1;
        let label = format!("{} as {}", f.name, login.name);
        let t = Instant::now();
        let outcome = run(&client, &call.sql).await;
        if t.elapsed() > report.slowest.0 {
            report.slowest = (t.elapsed(), short(&call.sql, 200));
        }
        match outcome {
            Outcome::Rows(rows) => {
                *report.codes.entry("ok".into()).or_default() += 1;
                // A STRICT function given a NULL constant is folded to NULL by the planner:
                // never called, so PostgreSQL never asks for EXECUTE. Anything else that
                // succeeds without it ran what the login may not run.
                let folded = f.strict && rows.iter().flatten().all(Option::is_none);
                if granted.contains(&f.oid) {
                    *succeeded.entry(f.name.as_str()).or_default() += 1;
                } else if folded {
                    folded_calls += 1;
                } else {
                    report.fail(
                        &label,
                        "none",
                        "succeeded, but the login may not EXECUTE it",
                        &call.sql,
                    );
                }
                if f.name == "resize_board" || f.name == "compact_history" {
                    if let Some(b) = call.args[0].int {
                        reshaped.insert(b);
                    }
                }
            }
            Outcome::Error(code, message) => {
                *report.codes.entry(code.clone()).or_default() += 1;
                if code == "42501" && granted.contains(&f.oid) {
                    denied_granted
                        .entry(f.name.as_str())
                        .or_insert_with(|| (0, short(&message, 120)))
                        .0 += 1;
                }
                if !report.allowed(&f.name, &code) {
                    report.fail(&label, &code, &message, &call.sql);
                }
            }
            Outcome::Lost(e) => {
                report.fail(&label, "connection lost", &e, &call.sql);
                client = session_as(url, Some(login.name)).await;
            }
        }
    }
    let member = login.group.unwrap_or("no group");
    println!(
        "sql_fuzz: as {} ({member}, may call {} of {} functions): {} calls in {:.1} s, outcomes {:?}",
        login.name,
        granted.len(),
        all.len(),
        report.calls,
        started.elapsed().as_secs_f64(),
        report.codes
    );
    println!("sql_fuzz:   succeeded: {succeeded:?}; {folded_calls} calls of functions it may not call were folded to NULL (STRICT, a NULL argument)");
    for (function, (n, message)) in &denied_granted {
        println!(
            "sql_fuzz:   42501 from {function}, which it may call, ×{n}; the first: {message}"
        );
    }
    println!(
        "sql_fuzz:   casts refused before a call {:?}; slowest call {:.2} s: {}",
        report.cast_refused,
        report.slowest.0.as_secs_f64(),
        report.slowest.1
    );
    for ((function, code), n) in &report.known {
        println!("sql_fuzz:   known, to mend in SQL: {function} {code} ×{n}");
    }
    report.lines()
}

/// Every table and sequence of schema place as a count and an order-free hash of its rows.
async fn place_rows(client: &Client) -> BTreeMap<String, String> {
    let relations = client
        .query(
            "SELECT c.oid::regclass::text, c.relkind::text FROM pg_class c
             WHERE c.relnamespace = 'place'::regnamespace AND c.relkind IN ('r', 'S') ORDER BY 1",
            &[],
        )
        .await
        .expect("place's tables");
    let mut rows = BTreeMap::new();
    for r in relations {
        let (name, kind): (String, String) = (r.get(0), r.get(1));
        let sql = if kind == "S" {
            format!("SELECT format('last value %s, called %s', last_value, is_called) FROM {name}")
        } else {
            format!("SELECT format('%s rows, hash %s', count(*), coalesce(sum(hashtext(t::text)::bigint), 0)) FROM {name} t")
        };
        let value: String = client
            .query_one(&sql, &[])
            .await
            .unwrap_or_else(|e| panic!("reading {name}: {e}"))
            .get(0);
        rows.insert(name, value);
    }
    rows
}
