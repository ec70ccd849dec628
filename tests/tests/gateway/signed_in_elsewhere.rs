//! A session signed in through one gateway places through another at once as that user.
//! The placing gateway's copy of the session was made before the sign-in and hears of it
//! by NOTIFY a moment later; a copy without a user asks the database before it refuses.
//! Before, such a placement was refused with "this session has no user" (the CI run of
//! 82270d2, with a client moving between two gateways). And a session switched to another
//! user or destroyed through one gateway never places as its old user through the other.

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

/// The other way round: A's copy already acts for a user, and the session is switched to
/// another user, then destroyed, through B. A placement through A at once acts for the
/// user the database names (`place.session_users`, read in the placement's statement),
/// never for the copy's old one, and a destroyed session places nothing. Before 0.8.11 the
/// copy's user placed until A heard B's note.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_placement_never_acts_for_a_user_the_session_left_through_another_gateway() {
    let url = fresh_database("gw_left_elsewhere").await;
    let sql = connect(&url).await;
    let board = create_board(&sql, "left", (64, 64), 4, "0").await;
    let users = create_users_with_tokens(&sql, "left", 2).await;
    let (a, b) = (
        start_gateway(&url, |_| {}).await,
        start_gateway(&url, |_| {}).await,
    );
    let (on_a, on_b) = (Http::new(a.addr), Http::new(b.addr));
    let placed_by = |seq: i64| {
        let sql = &sql;
        async move {
            sql.query_one(
                "SELECT user_id FROM place.placements WHERE board_id = $1 AND seq = $2",
                &[&board, &seq],
            )
            .await
            .unwrap()
            .get::<_, i64>(0)
        }
    };
    for round in 0..ROUNDS {
        let session = on_a.ok("session.create", json!([])).await;
        on_a.ok("session.authorize", json!([session, users[0].1]))
            .await;
        let first = on_a
            .ok("board.place", json!([session, board, round, 1, 1]))
            .await;
        assert_eq!(placed_by(first["seq"].as_i64().unwrap()).await, users[0].0);
        // Switched to the second user through B, placed through A at once.
        on_b.ok("session.authorize", json!([session, users[1].1]))
            .await;
        let second = on_a
            .ok("board.place", json!([session, board, round, 2, 2]))
            .await;
        assert_eq!(
            placed_by(second["seq"].as_i64().unwrap()).await,
            users[1].0,
            "round {round}: placed for the user the session left"
        );
        // Destroyed through B: nothing is placed through A.
        let before: i64 = sql
            .query_one(
                "SELECT count(*) FROM place.placements WHERE board_id = $1",
                &[&board],
            )
            .await
            .unwrap()
            .get(0);
        on_b.ok("session.destroy", json!([session])).await;
        let refused = on_a
            .call("board.place", json!([session, board, round, 3, 3]))
            .await;
        assert!(
            refused.is_err(),
            "round {round}: a destroyed session placed: {refused:?}"
        );
        let after: i64 = sql
            .query_one(
                "SELECT count(*) FROM place.placements WHERE board_id = $1",
                &[&board],
            )
            .await
            .unwrap()
            .get(0);
        assert_eq!(before, after, "round {round}: a destroyed session placed");
    }
}
