//! `pgplace.require_synchronous_standby` checks every write's commit in the library, so a
//! backend must have the library loaded for it: the gateway's pooled connections load it
//! when they are made, and their first transaction — a session function, which is SQL
//! and loads nothing — is refused (57P03) like any other on a server that names no
//! synchronous standby (this cluster names none), and writes nothing.

use pgplace_tests::{connect, fresh_database};
use tokio_postgres::error::SqlState;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_connections_first_session_write_is_refused_without_a_standby() {
    let url = fresh_database("gw_standby_required").await;
    let mut config: tokio_postgres::Config = url.parse().unwrap();
    config.options("-c pgplace.require_synchronous_standby=on");
    let pool = pgplace_gateway::db::pool(&config, 1);
    let client = pool.get().await.unwrap();
    let refused = client
        .query_one(
            "SELECT place.session_create('standby-required-0123456789', 1)",
            &[],
        )
        .await
        .expect_err("a session written on one node");
    assert_eq!(
        refused.code(),
        Some(&SqlState::CANNOT_CONNECT_NOW),
        "{refused:?}"
    );
    let sessions: i64 = connect(&url)
        .await
        .query_one("SELECT count(*) FROM place.sessions", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(sessions, 0, "the refused session is not kept");
    // The same connection reads as before: only writes wait for a standby.
    let boards: i64 = client
        .query_one("SELECT count(*) FROM place.boards", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(boards, 0);
}
