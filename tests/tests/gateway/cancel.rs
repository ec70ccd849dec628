//! Requests dropped at any await point (a client that hangs up) leave no pooled
//! connection inside a transaction, and the gateway keeps working.

use pgplace_tests::gateway::{start_gateway, Http};
use pgplace_tests::{
    connect, create_board, create_users_with_tokens, fresh_database, history_rows,
};
use rand::{Rng, SeedableRng};
use serde_json::json;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_requests_leave_no_connection_in_a_transaction() {
    let url = fresh_database("gw_cancel").await;
    let sql = connect(&url).await;
    let mut boards = Vec::new();
    for i in 0..20 {
        boards.push(create_board(&sql, &format!("c{i}"), (50, 50), 4, "0").await);
    }
    let users = create_users_with_tokens(&sql, "c", 8).await;
    let gateway = start_gateway(&url, |c| c.db_pool = 4).await;
    let app = gateway.app.clone();
    let http = Http::new(gateway.addr);
    let mut sessions = Vec::new();
    for (_, token) in &users {
        let session = http.ok("session.create", json!([])).await;
        http.ok("session.authorize", json!([session, token])).await;
        sessions.push(session);
    }
    let mut rng = rand::rngs::StdRng::seed_from_u64(5);
    for round in 0..400 {
        let session = &sessions[round % sessions.len()];
        let board = boards[rng.random_range(0..boards.len())];
        let (method, params) = match round % 5 {
            0 => (
                "board.place",
                json!([
                    session,
                    board,
                    rng.random_range(0..50),
                    rng.random_range(0..50),
                    3
                ]),
            ),
            1 => (
                "session.authorize",
                json!([session, users[round % users.len()].1]),
            ),
            2 => (
                "session.subscribe",
                json!([session, "board", {"board": board}]),
            ),
            3 => ("board.list", json!([])),
            _ => ("board.tile_history", json!([board, 1, 1])),
        };
        let call = pgplace_gateway::rpc::table::call(&app, method, Some(&params));
        let budget = Duration::from_micros(rng.random_range(0..4000));
        let _ = tokio::time::timeout(budget, call).await;
    }
    // Let queries that were sent before their request was dropped finish.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let in_transaction: i64 = sql
        .query_one(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'pgplace-gateway' \
             AND datname = current_database() AND state LIKE 'idle in transaction%'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(in_transaction, 0);
    // Every pooled connection still works: more calls than the pool has connections.
    for board in &boards[..8] {
        let placed = http
            .ok("board.place", json!([sessions[0], board, 0, 0, 1]))
            .await;
        assert_eq!(placed["placed"], true);
    }
    let seq_sum: i64 = sql
        .query_one("SELECT sum(seq)::bigint FROM place.boards", &[])
        .await
        .unwrap()
        .get(0);
    let history = history_rows(&sql).await;
    assert_eq!(
        seq_sum, history,
        "seqs and history agree after the dropped calls"
    );
}
