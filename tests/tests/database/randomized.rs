//! Many users on many connections, `place` and `place_many` mixed at random, while a
//! reader watches: at the end seq, history, results and bits must all agree.

use pgplace_core::bits::TileWidth;
use pgplace_tests::{board_bits, connect, create_board, create_users, fresh_database};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use tokio_postgres::IsolationLevel;

const WIDTH: i32 = 50;
const HEIGHT: i32 = 40;
const WORKERS: u64 = 8;
const CALLS_PER_WORKER: usize = 60;

/// Random calls on one board; returns the seqs its accepted placements got.
async fn worker(url: String, board: i64, users: Arc<Vec<i64>>, seed: u64) -> Vec<i64> {
    let client = connect(&url).await;
    let mut rng = StdRng::seed_from_u64(seed);
    let mut seqs = Vec::new();
    for _ in 0..CALLS_PER_WORKER {
        let n = if rng.random_bool(0.5) {
            1
        } else {
            rng.random_range(1..=25)
        };
        let pick_users: Vec<i64> = (0..n)
            .map(|_| users[rng.random_range(0..users.len())])
            .collect();
        let xs: Vec<i32> = (0..n).map(|_| rng.random_range(0..WIDTH)).collect();
        let ys: Vec<i32> = (0..n).map(|_| rng.random_range(0..HEIGHT)).collect();
        let colors: Vec<i32> = (0..n).map(|_| rng.random_range(0..16)).collect();
        let rows = if n == 1 {
            client
                .query(
                    "SELECT placed, seq FROM place.place($1, $2, $3, $4, $5)",
                    &[&board, &xs[0], &ys[0], &colors[0], &pick_users[0]],
                )
                .await
        } else {
            client
                .query(
                    "SELECT placed, seq FROM place.place_many($1, $2, $3, $4, $5) ORDER BY ord",
                    &[&board, &pick_users, &xs, &ys, &colors],
                )
                .await
        }
        .expect("placing");
        for row in rows {
            let (placed, seq): (bool, Option<i64>) = (row.get(0), row.get(1));
            assert_eq!(
                placed,
                seq.is_some(),
                "placed rows have a seq, refused ones none"
            );
            seqs.extend(seq);
        }
    }
    seqs
}

/// Until told to stop: every snapshot shows a gap-free prefix of the history.
async fn reader(url: String, board: i64, stop: Arc<AtomicBool>) -> usize {
    let mut client = connect(&url).await;
    let mut checks = 0;
    while !stop.load(Ordering::Relaxed) {
        let tx = client
            .build_transaction()
            .isolation_level(IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .await
            .unwrap();
        let row = tx
            .query_one(
                "SELECT b.seq, count(p.seq), coalesce(max(p.seq), 0), (SELECT seq FROM place.board_bits($1)) \
                 FROM place.boards b LEFT JOIN place.placements p ON p.board_id = b.id \
                 WHERE b.id = $1 GROUP BY b.seq",
                &[&board],
            )
            .await
            .unwrap();
        let (seq, count, newest, bits_seq): (i64, i64, i64, i64) =
            (row.get(0), row.get(1), row.get(2), row.get(3));
        assert_eq!(
            (count, newest, bits_seq),
            (seq, seq, seq),
            "a reader saw a gap or a torn board"
        );
        tx.commit().await.unwrap();
        checks += 1;
    }
    checks
}

async fn run_board(url: &str, cooldown: &str, name: &str) -> (i64, Vec<i64>) {
    let admin = connect(url).await;
    let board = create_board(&admin, name, (WIDTH, HEIGHT), 4, cooldown).await;
    let users = Arc::new(create_users(&admin, name, 30).await);
    let stop = Arc::new(AtomicBool::new(false));
    let watcher = tokio::spawn(reader(url.to_string(), board, stop.clone()));
    let workers: Vec<_> = (0..WORKERS)
        .map(|seed| tokio::spawn(worker(url.to_string(), board, users.clone(), seed)))
        .collect();
    let mut seqs = Vec::new();
    for w in workers {
        seqs.extend(w.await.expect("worker"));
    }
    stop.store(true, Ordering::Relaxed);
    assert!(
        watcher.await.expect("reader") > 0,
        "the reader checked at least once"
    );
    seqs.sort_unstable();
    (board, seqs)
}

async fn check_invariants(url: &str, board: i64, seqs: &[i64]) {
    let client = connect(url).await;
    let (seq, bits) = board_bits(&client, board).await;
    // Every accepted placement got its own seq, and together they are exactly 1..=seq.
    assert_eq!(seqs, (1..=seq).collect::<Vec<i64>>().as_slice());
    let history = client
        .query(
            "SELECT seq, x, y, color FROM place.placements WHERE board_id = $1 ORDER BY seq",
            &[&board],
        )
        .await
        .unwrap();
    assert_eq!(history.len() as i64, seq);
    // Replaying the history on an empty board gives the stored bits, byte for byte.
    let tile = TileWidth::new(4).unwrap();
    let mut replay = vec![0u8; tile.packed_len((WIDTH * HEIGHT) as u64)];
    for (i, row) in history.iter().enumerate() {
        assert_eq!(row.get::<_, i64>(0), i as i64 + 1);
        let (x, y, color): (i32, i32, i32) = (row.get(1), row.get(2), row.get(3));
        tile.set(&mut replay, i64::from(x + WIDTH * y), color.into())
            .unwrap();
    }
    assert_eq!(replay, bits);
    // Stamps never go back as seqs go up (calls read the clock before they wait for locks;
    // the stamp is settled when the seq is taken), so board_at finds each moment by seq.
    let backwards = pgplace_tests::stamps_going_back(&client, board).await;
    assert_eq!(
        backwards, 0,
        "placements stamped earlier than the one before them"
    );
    // Each placement's own moment gives back its seq (the last of a batch sharing a stamp).
    let missed: i64 = client
        .query_one(
            "SELECT count(*) FROM (SELECT DISTINCT ON (placed_at) placed_at, seq FROM place.placements \
                                   WHERE board_id = $1 ORDER BY placed_at, seq DESC) newest \
             WHERE (SELECT seq FROM place.board_at($1, newest.placed_at)) <> newest.seq",
            &[&board],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(
        missed, 0,
        "board_at(placed_at) did not land on the placement"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn without_cooldown_seq_history_and_bits_agree() {
    let url = fresh_database("pgplace_test_random_free").await;
    let (board, seqs) = run_board(&url, "0", "free").await;
    assert!(
        seqs.len() > WORKERS as usize * CALLS_PER_WORKER,
        "with no cooldown most items place"
    );
    check_invariants(&url, board, &seqs).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn with_a_cooldown_no_user_ever_places_inside_it() {
    let url = fresh_database("pgplace_test_random_cooldown").await;
    let (board, seqs) = run_board(&url, "150 milliseconds", "cool").await;
    check_invariants(&url, board, &seqs).await;
    let client = connect(&url).await;
    let rows = client
        .query(
            "SELECT user_id, (extract(epoch FROM placed_at) * 1000000)::bigint FROM place.placements \
             WHERE board_id = $1 ORDER BY seq",
            &[&board],
        )
        .await
        .unwrap();
    let mut last: HashMap<i64, i64> = HashMap::new();
    for row in rows {
        let (user, at): (i64, i64) = (row.get(0), row.get(1));
        if let Some(previous) = last.insert(user, at) {
            assert!(
                at - previous >= 150_000,
                "user {user} placed {} µs after their last",
                at - previous
            );
        }
    }
    assert!(last.len() > 1);
}
