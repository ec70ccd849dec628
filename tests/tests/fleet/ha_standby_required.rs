//! `pgplace.require_synchronous_standby` on the HA setup's gateways (`./pgplace.sh ha up`
//! sets it for their role when there are two standbys): while the primary names no
//! synchronous standby, as pg_auto_failover leaves a new primary until a standby has joined
//! it, both gateways (synchronous and `--commit asynchronous` groups) answer placements,
//! and writes that take no seq (a new session), with the retryable −32009, and the board
//! does not change; once a standby is named again, placements are acknowledged as before.
//!
//! The primary's `synchronous_standby_names` is emptied by hand (ALTER SYSTEM, reload) and
//! put back as it was: pg_auto_failover sets it only when a node changes state. Run by
//! `./pgplace.sh test` after the failover tests (the module sorts after them).

use crate::ha_failover::{addresses, env};
use futures::FutureExt;
use pgplace_tests::gateway::Http;
use pgplace_tests::{board_seq, connect, create_board, create_users_with_tokens};
use serde_json::json;
use std::panic::AssertUnwindSafe;
use std::time::{Duration, Instant};
use tokio_postgres::error::SqlState;
use tokio_postgres::Client;

const RETRY: i64 = -32009;

/// Waits until a placement of `probe`'s (a session with the setting on, on a board of its
/// own) is refused, or until it is not: the primary's backends see the standbys' names
/// emptied (or named again) once its checkpointer has read the reloaded setting, which
/// nothing else shows. False after 60 s.
async fn await_refusal(probe: &Client, board: i64, user: i64, refused: bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let placed = probe
            .query(
                "SELECT placed FROM place.place($1, 0, 0, 1, $2)",
                &[&board, &user],
            )
            .await;
        let is_refused = match placed {
            Ok(_) => false,
            Err(error) if error.code() == Some(&SqlState::CANNOT_CONNECT_NOW) => true,
            Err(error) => panic!("the probe's placement: {error}"),
        };
        if is_refused == refused {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The newest session's public id (from a sequence: a refused one leaves none newer).
async fn newest_session(primary: &Client) -> i64 {
    primary
        .query_one(
            "SELECT coalesce(max(public_id), 0) FROM place.sessions",
            &[],
        )
        .await
        .unwrap()
        .get(0)
}

async fn set_standby_names(primary: &Client, names: &str) {
    // (Two statements: ALTER SYSTEM cannot run in a multi-statement query's transaction.)
    primary
        .batch_execute(&format!(
            "ALTER SYSTEM SET synchronous_standby_names = '{}'",
            names.replace('\'', "''")
        ))
        .await
        .unwrap();
    primary
        .batch_execute("SELECT pg_reload_conf()")
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs ./pgplace.sh ha up; ./pgplace.sh test runs it"]
async fn without_a_synchronous_standby_the_gateways_refuse_placements_and_change_nothing() {
    let _alone = pgplace_tests::alone();
    let primary = connect(&env("PGPLACE_TEST_HA_DATABASE")).await;
    let required: Option<String> = primary
        .query_one(
            "SELECT (SELECT s FROM pg_db_role_setting d, unnest(d.setconfig) s \
             WHERE d.setrole = 'pgplace_gateway'::regrole \
             AND s LIKE 'pgplace.require_synchronous_standby=%')",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(
        required.as_deref(),
        Some("pgplace.require_synchronous_standby=on"),
        "ha up sets the setting for the gateways' role"
    );
    let name = format!("standby required {}", rand::random::<u32>());
    let board = create_board(&primary, &name, (8, 8), 4, "0").await;
    let gateways = addresses("PGPLACE_TEST_HA_GATEWAYS");
    let users = create_users_with_tokens(&primary, &name, gateways.len() as i32 + 1).await;
    let probe_board = create_board(&primary, &format!("{name} probe"), (2, 2), 4, "0").await;
    let probe = connect(&env("PGPLACE_TEST_HA_DATABASE")).await;
    probe
        .batch_execute("SET pgplace.require_synchronous_standby = on")
        .await
        .unwrap();
    let probe_user = users[gateways.len()].0;
    let mut sessions = Vec::new();
    for (addr, (_, token)) in gateways.iter().zip(&users) {
        let http = Http::new(*addr);
        let session = http.ok("session.create", json!([])).await;
        http.ok("session.authorize", json!([session, token])).await;
        sessions.push((http, session));
    }
    // The switchover before this test may leave the new primary in wait_primary (no
    // standby named) for a moment.
    let deadline = Instant::now() + Duration::from_secs(60);
    let before = loop {
        let names: String = primary
            .query_one("SHOW synchronous_standby_names", &[])
            .await
            .unwrap()
            .get(0);
        if !names.is_empty() {
            break names;
        }
        assert!(
            Instant::now() < deadline,
            "the HA primary names no synchronous standby within 60 s"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    for (i, (http, session)) in sessions.iter().enumerate() {
        let placed = http
            .ok("board.place", json!([session, board, i, 0, 1]))
            .await;
        assert_eq!(placed["placed"], true, "{placed}");
    }

    set_standby_names(&primary, "").await;
    // Whatever happens meanwhile (a panic included), the names are put back before any
    // assertion: the setup stays as pg_auto_failover made it.
    let without = AssertUnwindSafe(async {
        let probe_refused = await_refusal(&probe, probe_board, probe_user, true).await;
        let seq_before = board_seq(&primary, board).await;
        let newest_session_before = newest_session(&primary).await;
        let mut refusals = Vec::new();
        let mut session_refusals = Vec::new();
        for (i, (http, session)) in sessions.iter().enumerate().filter(|_| probe_refused) {
            for x in 0..3 {
                let answer = http
                    .try_call("board.place", json!([session, board, x, 1 + i, 2]))
                    .await
                    .expect("the gateway answers");
                refusals.push(answer.err().map(|e| e["code"].as_i64().unwrap()));
            }
            // A write that takes no seq (a session row) is refused at its commit.
            let created = http
                .try_call("session.create", json!([]))
                .await
                .expect("the gateway answers");
            session_refusals.push(created.err().map(|e| e["code"].as_i64().unwrap()));
        }
        let seq_during = board_seq(&primary, board).await;
        let sessions_kept = newest_session(&primary).await > newest_session_before;
        (
            probe_refused,
            refusals,
            (session_refusals, sessions_kept),
            seq_before,
            seq_during,
        )
    })
    .catch_unwind()
    .await;
    set_standby_names(&primary, &before).await;
    let (probe_refused, refusals, (session_refusals, sessions_kept), seq_before, seq_during) =
        without.unwrap_or_else(|panic| std::panic::resume_unwind(panic));
    assert!(
        await_refusal(&probe, probe_board, probe_user, false).await,
        "placements are taken again within 60 s of the standbys' names put back"
    );
    assert!(
        probe_refused,
        "a placement with the setting on is refused within 60 s of the names emptied"
    );
    assert!(
        refusals.iter().all(|r| *r == Some(RETRY)),
        "every placement without a synchronous standby is refused with -32009: {refusals:?}"
    );
    assert_eq!(seq_during, seq_before, "nothing was placed meanwhile");
    assert!(
        session_refusals.iter().all(|r| *r == Some(RETRY)),
        "every session created without a synchronous standby is refused with -32009: \
         {session_refusals:?}"
    );
    assert!(!sessions_kept, "a refused session.create left its row");

    for (i, (http, session)) in sessions.iter().enumerate() {
        let placed = http
            .ok("board.place", json!([session, board, i, 3, 4]))
            .await;
        assert_eq!(placed["placed"], true, "{placed}");
    }
}
