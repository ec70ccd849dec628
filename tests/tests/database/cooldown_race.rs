//! r/Place's cooldown race, with real connections: many attempts by one user inside one
//! cooldown window, all released at once, place exactly one tile.

use pgplace_tests::{board_bits, connect, create_board, create_users, fresh_database};
use std::sync::Arc;
use tokio::sync::Barrier;

const RACERS: usize = 120;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_user_racing_on_many_connections_places_exactly_one_tile() {
    let url = fresh_database("pgplace_test_race").await;
    let admin = connect(&url).await;
    let board = create_board(&admin, "race", (100, 100), 4, "1 hour").await;
    let user = create_users(&admin, "racer", 1).await[0];
    let placed = race(&url, board, user).await;
    assert_eq!(placed, 1, "{RACERS} racing attempts placed {placed} tiles");
    assert_history(&admin, board, 1).await;
}

/// A user who placed before (their cooldown row exists) and whose window has just passed:
/// the racers must wait for each other on that row, not only on a new row's insertion.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_returning_user_racing_places_exactly_one_tile() {
    let url = fresh_database("pgplace_test_race_again").await;
    let admin = connect(&url).await;
    let board = create_board(&admin, "race", (100, 100), 4, "1 hour").await;
    let user = create_users(&admin, "racer", 1).await[0];
    let first: bool = admin
        .query_one(
            "SELECT placed FROM place.place($1, 99, 99, 1, $2)",
            &[&board, &user],
        )
        .await
        .unwrap()
        .get(0);
    assert!(first);
    // The window passes (a superuser moves the last placement back).
    let moved = admin
        .execute(
            "UPDATE place.cooldowns SET last_placed_at = last_placed_at - interval '2 hours' \
             WHERE board_id = $1 AND user_id = $2",
            &[&board, &user],
        )
        .await
        .unwrap();
    assert_eq!(moved, 1);
    let placed = race(&url, board, user).await;
    assert_eq!(placed, 1, "{RACERS} racing attempts placed {placed} tiles");
    assert_history(&admin, board, 2).await;
}

/// RACERS connections, released at once, each asking to place for `user`; how many tiles
/// they placed.
async fn race(url: &str, board: i64, user: i64) -> usize {
    let mut clients = Vec::with_capacity(RACERS);
    for _ in 0..RACERS {
        clients.push(connect(url).await);
    }
    let barrier = Arc::new(Barrier::new(RACERS));
    let mut racers = Vec::new();
    for (i, client) in clients.into_iter().enumerate() {
        let barrier = barrier.clone();
        racers.push(tokio::spawn(async move {
            let (x, y, color) = ((i % 100) as i32, (i / 100) as i32, (i % 16) as i32);
            barrier.wait().await;
            // Half the racers use the batch path, asking twice for good measure.
            let placed: Vec<bool> = if i % 2 == 0 {
                client
                    .query("SELECT placed FROM place.place($1, $2, $3, $4, $5)", &[&board, &x, &y, &color, &user])
                    .await
            } else {
                client
                    .query(
                        "SELECT placed FROM place.place_many($1::bigint, ARRAY[$5::bigint, $5], ARRAY[$2::int, $2], ARRAY[$3::int, $3], ARRAY[$4::int, $4])",
                        &[&board, &x, &y, &color, &user],
                    )
                    .await
            }
            .expect("placing")
            .iter()
            .map(|row| row.get(0))
            .collect();
            placed.into_iter().filter(|p| *p).count()
        }));
    }
    let mut placed = 0;
    for racer in racers {
        placed += racer.await.expect("racer task");
    }
    placed
}

/// The board's history and seq both count `placements`.
async fn assert_history(admin: &tokio_postgres::Client, board: i64, placements: i64) {
    let history: i64 = admin
        .query_one(
            "SELECT count(*) FROM place.placements WHERE board_id = $1",
            &[&board],
        )
        .await
        .unwrap()
        .get(0);
    let (seq, _) = board_bits(admin, board).await;
    assert_eq!((history, seq), (placements, placements));
}
