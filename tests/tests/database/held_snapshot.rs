//! Placements while another transaction holds an old snapshot (pg_dump, a long report, a
//! REPEATABLE READ reader). Dead row versions cannot be pruned meanwhile, so a row that
//! every placement updated would grow a chain of versions that every later placement walks:
//! the work per placement would grow with the number of placements. Counted in buffers,
//! not timed: the buffers one placement call touches must stay flat over 10,000 placements
//! for place() and place_many alike, and so must reading the whole board (board_bits) but
//! for the history after its chunks' fold (0.8.4), which it reads and a fold empties.

use pgplace_tests::{connect, create_board, create_users, fresh_database};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio_postgres::Client;

/// Few users, each placing ~60 times: a user's cooldown row that kept its dead versions
/// would show it.
const USERS: i32 = 200;
const BATCH: usize = 100;
/// Placement calls between two probes, and how many probes.
const CALLS_PER_ROUND: usize = 1_000;
const ROUNDS: usize = 10;
const PLACERS: usize = 4;
/// Everyone places in the board's top rows (a hot spot, as on real boards): ~10 chunks, so
/// each gets ~1,000 writes and a chunk that kept its dead versions would show it.
const HOT_ROWS: i32 = 10;

/// Shared buffers (hit + read) that one statement touched, its nested statements included:
/// EXPLAIN's counters for a function scan cover everything the function ran.
async fn buffers(client: &Client, sql: &str) -> i64 {
    let row = client
        .query_one(
            &format!("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {sql}"),
            &[],
        )
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    let plan: serde_json::Value = row.get(0);
    let top = &plan[0]["Plan"];
    let count = |key: &str| {
        top[key]
            .as_i64()
            .unwrap_or_else(|| panic!("no {key} in {top}"))
    };
    count("Shared Hit Blocks") + count("Shared Read Blocks")
}

struct Probe {
    placements: i64,
    /// Placements after the chunks' fold, at most, while board_bits was probed.
    unfolded: i64,
    place: i64,
    place_many: i64,
    board_bits: i64,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_snapshot_does_not_make_placements_walk_dead_versions() {
    let url = fresh_database("pgplace_test_held_snapshot").await;
    let client = connect(&url).await;
    let board = create_board(&client, "held", (1000, 1000), 4, "0").await;
    let users = create_users(&client, "held", USERS).await;
    let holder = connect(&url).await;
    holder
        .batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT count(*) FROM place.boards")
        .await
        .expect("holding a snapshot");

    let mut rng = StdRng::seed_from_u64(13);
    let random_batch = |rng: &mut StdRng| {
        let first = rng.random_range(0..users.len() - BATCH);
        let ids: Vec<String> = users[first..first + BATCH]
            .iter()
            .map(i64::to_string)
            .collect();
        let column = |rng: &mut StdRng, below: i32| {
            (0..BATCH)
                .map(|_| rng.random_range(0..below).to_string())
                .collect::<Vec<_>>()
                .join(",")
        };
        let (xs, ys, colors) = (column(rng, 1000), column(rng, HOT_ROWS), column(rng, 16));
        format!(
            "SELECT count(*) FROM place.place_many({board}, '{{{}}}', '{{{xs}}}', '{{{ys}}}', '{{{colors}}}')",
            ids.join(",")
        )
    };
    let mut placers = Vec::new();
    for _ in 0..PLACERS {
        placers.push(connect(&url).await);
    }
    let mut probes = Vec::new();
    for round in 0..=ROUNDS {
        let row = client
            .query_one(
                "SELECT b.seq, b.seq - coalesce((SELECT f.folded_seq FROM place.chunk_folds f \
                                                 WHERE f.board_id = b.id \
                                                 ORDER BY f.folded_seq DESC LIMIT 1), 0) \
                 FROM place.boards b WHERE b.id = $1",
                &[&board],
            )
            .await
            .unwrap();
        let placements: i64 = row.get(0);
        // The probes below place 2 x (1 + BATCH) themselves.
        let unfolded = row.get::<_, i64>(1) + 2 * (1 + BATCH as i64);
        // Each the fewer of two calls: a call that happens to plan its statements again
        // (after autovacuum's ANALYZE) or to write a keyframe is not what is measured.
        let (mut place, mut place_many, mut board_bits) = (i64::MAX, i64::MAX, i64::MAX);
        for _ in 0..2 {
            let user = users[rng.random_range(0..users.len())];
            let (x, y) = (rng.random_range(0..1000), rng.random_range(0..HOT_ROWS));
            let one = format!("SELECT * FROM place.place({board}, {x}, {y}, 3, {user})");
            place = place.min(buffers(&client, &one).await);
            let many = random_batch(&mut rng);
            place_many = place_many.min(buffers(&client, &many).await);
            let whole = format!("SELECT * FROM place.board_bits({board})");
            board_bits = board_bits.min(buffers(&client, &whole).await);
        }
        probes.push(Probe {
            placements,
            unfolded,
            place,
            place_many,
            board_bits,
        });
        if round == ROUNDS {
            break;
        }
        // Every call updated the board's row before 0.5.0: one dead version per call.
        let calls = futures::future::join_all(placers.iter().enumerate().map(|(k, placer)| {
            let seed = (round * PLACERS + k) as u64;
            let users = &users;
            async move {
                let mut rng = StdRng::seed_from_u64(seed);
                for _ in 0..CALLS_PER_ROUND / PLACERS {
                    let user = users[rng.random_range(0..users.len())];
                    let (x, y, c) = (
                        rng.random_range(0..1000),
                        rng.random_range(0..HOT_ROWS),
                        rng.random_range(0..16),
                    );
                    let placed: bool = placer
                        .query_one(
                            "SELECT placed FROM place.place($1, $2, $3, $4, $5)",
                            &[&board, &x, &y, &c, &user],
                        )
                        .await
                        .expect("place")
                        .get(0);
                    assert!(placed, "cooldown 0: every call places");
                }
            }
        }));
        calls.await;
    }

    // Four placers at once, each call its own transaction: the seqs are 1..n, no gap.
    let (newest, rows): (i64, i64) = {
        let row = client
            .query_one(
                "SELECT b.seq, (SELECT count(*) FROM place.placements p WHERE p.board_id = b.id) \
                 FROM place.boards b WHERE b.id = $1",
                &[&board],
            )
            .await
            .unwrap();
        (row.get(0), row.get(1))
    };
    assert_eq!(newest, rows, "the history has a gap or a repeated seq");
    // The snapshot was held throughout: nothing could be pruned.
    let seen: i64 = holder
        .query_one("SELECT count(*) FROM place.placements", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(
        seen, 0,
        "the holder's snapshot must predate every placement"
    );
    for p in &probes {
        println!(
            "after {:>6} placements: place() {:>4} buffers, place_many(100) {:>5} buffers, \
             board_bits {:>5} buffers ({:>5} placements after the fold at most)",
            p.placements, p.place, p.place_many, p.board_bits, p.unfolded
        );
    }
    // The early calls may plan their statements (again after autovacuum's first ANALYZE of
    // the new tables): the fewest buffers of the first three probes are the baseline.
    let early = &probes[..3];
    let first = Probe {
        placements: early[0].placements,
        unfolded: early[0].unfolded,
        place: early.iter().map(|p| p.place).min().unwrap(),
        place_many: early.iter().map(|p| p.place_many).min().unwrap(),
        board_bits: early.iter().map(|p| p.board_bits).min().unwrap(),
    };
    let last = probes.last().unwrap();
    assert!(
        last.placements >= (CALLS_PER_ROUND * ROUNDS) as i64,
        "{} placements",
        last.placements
    );
    // Flat: at most half as many buffers again (and `slack` more) at the end as at first.
    let flat = |what: &str, before: i64, after: i64, slack: i64| {
        assert!(
            after <= before * 3 / 2 + slack,
            "{what} touched {before} buffers after {} placements and {after} after {}: \
             it grows with the history",
            first.placements,
            last.placements
        );
    };
    // One placement writes its history row and no chunk, cooldown or board row.
    flat("place()", first.place, last.place, 20);
    // Each write of a chunk adds a version and deletes the one before; the newest is found
    // first whatever the snapshot keeps: flat too. With chunk rows updated in place (0.5.0's
    // schema, same test) place() went 87 -> 260 buffers and place_many(100) 3,559 -> 6,478;
    // with 0.4.0's, whose every call also updated the board's row, place() 237 -> 1,811.
    flat("place_many(100)", first.place_many, last.place_many, 0);
    // A whole board is one backward probe of the key per chunk: the hot chunks' thousand
    // versions each, which the snapshot keeps, are not walked. Then the history after the
    // chunks' fold, a buffer per placement at most (a fold every 10,000 empties it): each
    // probe within that of the first, the placements since the fold aside.
    for p in &probes {
        flat("board_bits", first.board_bits, p.board_bits, p.unfolded);
    }
    // And it reads what the view of the newest versions shows.
    let same: bool = client
        .query_one(
            "SELECT (SELECT bits FROM place.board_bits($1)) = \
                    (SELECT string_agg(bits, ''::bytea ORDER BY chunk_no) \
                     FROM place.board_chunks WHERE board_id = $1)",
            &[&board],
        )
        .await
        .unwrap()
        .get(0);
    assert!(same, "board_bits differs from place.board_chunks");
    // Every write deleted the version it replaced: one version per chunk; and one claim
    // per user (since 0.8.5 the history is the cooldown: placements write no claim).
    let row = client
        .query_one(
            "SELECT (SELECT count(*) FROM place.chunks WHERE board_id = $1), \
                    (SELECT count(*) FROM place.chunk_versions WHERE board_id = $1), \
                    (SELECT count(*) FROM place.cooldown_claims WHERE board_id = $1)",
            &[&board],
        )
        .await
        .unwrap();
    let counts: [i64; 3] = std::array::from_fn(|i| row.get(i));
    assert_eq!(counts[1], counts[0], "chunk versions left behind by writes");
    assert_eq!(counts[2], i64::from(USERS), "every user placed");
    holder.batch_execute("COMMIT").await.unwrap();
}
