//! `pgplace.require_synchronous_standby` checks every write's commit in the library, so a
//! backend must have the library loaded for it: the gateway's pooled connections load it
//! when they are made, and their first transaction — a session function, which is SQL
//! and loads nothing — is refused (57P03) like any other on a server that names no
//! synchronous standby (this cluster names none), and writes nothing. And what each HTTP
//! stack a legacy client uses is told of it.

use pgplace_tests::curl::post_jsonrpc_with_status;
use pgplace_tests::gateway::{http10_post_with_status, start_gateway};
use pgplace_tests::processes::Nginx;
use pgplace_tests::{connect, create_board, fresh_database, session_rows, urllib};
use serde_json::{json, Value};
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
    assert_eq!(
        session_rows(&connect(&url).await).await,
        0,
        "the refused session is not kept"
    );
    // The same connection reads as before: only writes wait for a standby.
    let boards: i64 = client
        .query_one("SELECT count(*) FROM place.boards", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(boards, 0);
}

/// The same refusal through the gateway, as each HTTP stack a legacy client uses gets it: a
/// new session asked for while the database names no synchronous standby answers the
/// retryable −32009 in an HTTP 200, and keeps no session: curl one-shot, urllib
/// (`Connection: close`; it raises on a status other than 2xx), a raw HTTP/1.0 socket,
/// and curl and urllib behind nginx's default `proxy_pass` (HTTP/1.0 upstream). A board
/// read answers the same: the gateway shows nothing until a standby confirmed it
/// (`place.await_durable`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_http_stack_is_told_to_retry_a_session_made_without_a_standby() {
    let url = fresh_database("gw_standby_required_stacks").await;
    let board = create_board(&connect(&url).await, "strict stacks", (4, 4), 4, "0").await;
    let strict = format!("{url}?options=-c%20pgplace.require_synchronous_standby%3Don");
    let gw = start_gateway(&strict, |_| {}).await;
    let dir = std::env::temp_dir().join(format!("pgplace-standby-stacks-{}", std::process::id()));
    let nginx = Nginx::start_with(
        &dir,
        "nginx-defaults",
        &format!(
            "    server {{ listen {{addr}}; location / {{ proxy_pass http://{}; }} }}\n",
            gw.addr
        ),
        "",
        16,
    );
    nginx.wait_ready().await;
    let create = r#"{"jsonrpc":"2.0","method":"session.create","params":[],"id":1}"#;
    let answers = [
        ("curl", post_jsonrpc_with_status(gw.addr, create).await),
        ("urllib", urllib::post_jsonrpc(gw.addr, create).await),
        (
            "HTTP/1.0",
            http10_post_with_status(gw.addr, create).await.unwrap(),
        ),
        (
            "curl behind nginx",
            post_jsonrpc_with_status(nginx.addr, create).await,
        ),
        (
            "urllib behind nginx",
            urllib::post_jsonrpc(nginx.addr, create).await,
        ),
    ];
    for (stack, (status, answer)) in answers {
        assert_eq!(status, 200, "{stack}: {answer}");
        let answer: Value =
            serde_json::from_str(&answer).unwrap_or_else(|e| panic!("{stack}: {e}: {answer}"));
        assert_eq!(answer["error"]["code"], -32009, "{stack}: {answer}");
        assert!(answer.get("result").is_none(), "{stack}: {answer}");
    }
    assert_eq!(
        session_rows(&connect(&url).await).await,
        0,
        "no refused session is kept"
    );
    let get = json!({"jsonrpc": "2.0", "method": "board.get", "params": [board], "id": 1});
    let (status, read) = post_jsonrpc_with_status(gw.addr, &get.to_string()).await;
    let read: Value = serde_json::from_str(&read).unwrap();
    assert_eq!(
        (status, &read["error"]["code"]),
        (200, &json!(-32009)),
        "a read of one node: {read}"
    );
}
