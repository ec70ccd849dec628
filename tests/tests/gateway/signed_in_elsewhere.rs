//! A session signed in through one gateway places through another at once as that user.
//! The placing gateway's copy of the session was made before the sign-in and hears of it
//! by NOTIFY a moment later; a copy without a user asks the database before it refuses.
//! Before, such a placement was refused with "this session has no user" (the CI run of
//! 82270d2, with a client moving between two gateways).

use pgplace_tests::gateway::{start_gateway, Http};
use pgplace_tests::{connect, create_board, create_users_with_tokens, fresh_database};
use serde_json::json;

const ROUNDS: i32 = 50;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_placement_acts_as_the_sign_in_made_through_another_gateway() {
    let url = fresh_database("gw_signed_in_elsewhere").await;
    let sql = connect(&url).await;
    let board = create_board(&sql, "elsewhere", (64, 64), 4, "0").await;
    let users = create_users_with_tokens(&sql, "elsewhere", 1).await;
    let (a, b) = (
        start_gateway(&url, |_| {}).await,
        start_gateway(&url, |_| {}).await,
    );
    let (on_a, on_b) = (Http::new(a.addr), Http::new(b.addr));
    for round in 0..ROUNDS {
        // Made on A (A keeps a copy without a user), signed in on B, placed on A at once.
        let session = on_a.ok("session.create", json!([])).await;
        on_b.ok("session.authorize", json!([session, users[0].1]))
            .await;
        let placed = on_a
            .ok("board.place", json!([session, board, round, 0, 1]))
            .await;
        let placed_by: i64 = sql
            .query_one(
                "SELECT user_id FROM place.placements WHERE board_id = $1 AND seq = $2",
                &[&board, &placed["seq"].as_i64().unwrap()],
            )
            .await
            .unwrap()
            .get(0);
        assert_eq!(placed_by, users[0].0, "round {round}: {placed}");
    }
}
