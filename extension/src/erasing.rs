//! Removing a board, and erasing a person: `delete_board` and `erase_user`.
//!
//! A board goes with its history (the triggers of `place.board_settings` delete it and tell
//! the gateways, whose subscribers get `deleted`). A user's history stays: `erase_user`
//! gives their placements to the anonymous user named `erased` and deletes the user, their
//! token, sessions, bans and placement keys, so the seqs, the tiles and `board_at` are
//! what they were, and nothing names the person.

use crate::input::{fail, invalid, required, undefined};
use crate::spi::{column, run, Statement};
use crate::users::{ERASED_USER, MODERATION_USER};
use pgrx::prelude::*;
use pgrx::{pg_sys, PgSqlErrorCode};

// Waits for the placements in flight on the board (each holds its row, the seq lock, until
// it commits) and keeps new ones out.
static LOCK_BOARD: Statement = Statement {
    sql: "SELECT id FROM place.board_settings WHERE id = $1 FOR UPDATE",
    params: &[pg_sys::INT8OID],
};

static LAST_SEQ: Statement = Statement {
    sql: "SELECT seq FROM place.boards WHERE id = $1",
    params: &[pg_sys::INT8OID],
};

// Its triggers delete the history and tell the gateways.
static DELETE_BOARD: Statement = Statement {
    sql: "DELETE FROM place.board_settings WHERE id = $1",
    params: &[pg_sys::INT8OID],
};

/// Deletes a board with its history, keyframes and subscriptions; its subscribers get a
/// `deleted` event. Waits for the placements in flight on it. Returns its last seq.
#[pg_extern(volatile, parallel_unsafe)]
fn delete_board(board_id: Option<i64>) -> i64 {
    let board_id = required("board_id", board_id);
    Spi::connect_mut(|client| {
        if run(client, &LOCK_BOARD, &[board_id.into()]).is_empty() {
            undefined(format!("board {board_id} does not exist"));
        }
        let seq = run(client, &LAST_SEQ, &[board_id.into()])
            .next()
            .map_or(0, |row| column::<i64>(&row, 1));
        run(client, &DELETE_BOARD, &[board_id.into()]);
        seq
    })
}

// Waits for the user's placements in flight that hold KEY SHARE on the row until they
// commit (before 0.8.5 every placement; since, a call with idempotency keys, and a user's
// first on a board, whose new cooldown claim's foreign key check takes it) and keeps new
// ones out until this commits.
static LOCK_USER: Statement = Statement {
    sql: "SELECT name FROM place.users WHERE id = $1 FOR UPDATE",
    params: &[pg_sys::INT8OID],
};

// Since 0.8.5 the other placements in flight hold their users' cooldown claim rows (FOR
// UPDATE), not the users' rows (crate::placing, count_users): waits for them too, and
// keeps the next ones on those rows waiting until this commits; they then find no row
// and no user. (No index leads with user_id: a scan, as the cascade of the DELETE below
// does anyway.)
static LOCK_CLAIMS: Statement = Statement {
    sql: "SELECT FROM place.cooldown_claims WHERE user_id = $1 FOR UPDATE",
    params: &[pg_sys::INT8OID],
};

static ERASED: Statement = Statement {
    // DO UPDATE, not DO NOTHING: it returns the row also when a concurrent call made it.
    sql: "INSERT INTO place.users (name) VALUES ($1) \
          ON CONFLICT (name) DO UPDATE SET name = excluded.name \
          RETURNING id, EXISTS (SELECT FROM place.user_tokens t WHERE t.user_id = id)",
    params: &[pg_sys::TEXTOID],
};

// A statement after the lock: in READ COMMITTED its snapshot sees every placement the
// lock waited for. One index range per board (placements_user_idx).
static GIVE_PLACEMENTS: Statement = Statement {
    sql: "WITH given AS (UPDATE place.placements p SET user_id = $2 \
                         FROM place.board_settings b \
                         WHERE p.board_id = b.id AND p.user_id = $1 RETURNING 1) \
          SELECT count(*) FROM given",
    params: &[pg_sys::INT8OID, pg_sys::INT8OID],
};

// The sessions go with their subscriptions; the token, bans, cooldown claims and
// placement keys by their foreign keys' cascade.
static DELETE_USER: Statement = Statement {
    sql: "WITH sessions AS (DELETE FROM place.sessions WHERE user_id = $1) \
          DELETE FROM place.users WHERE id = $1",
    params: &[pg_sys::INT8OID],
};

/// Erases a person (a right-to-erasure request): their name, token and sessions go, their
/// placements stay, made by the user `erased`. Waits for their placements in flight.
/// Returns how many placements now belong to `erased`.
#[pg_extern(volatile, parallel_unsafe)]
fn erase_user(user_id: Option<i64>) -> i64 {
    let user_id = required("user_id", user_id);
    Spi::connect_mut(|client| {
        require_read_committed();
        let name = run(client, &LOCK_USER, &[user_id.into()])
            .next()
            .map(|row| column::<String>(&row, 1))
            .unwrap_or_else(|| undefined(format!("user_id = {user_id}: there is no such user")));
        if name == ERASED_USER || name == MODERATION_USER {
            invalid(format!(
                "user {user_id} is pgplace's own user '{name}' and cannot be erased"
            ));
        }
        if crate::catalog::cooldowns_from_history() {
            run(client, &LOCK_CLAIMS, &[user_id.into()]);
        }
        let (erased, signs_in) = run(client, &ERASED, &[ERASED_USER.into()])
            .next()
            .map(|row| (column::<i64>(&row, 1), column::<bool>(&row, 2)))
            .expect("the erased user exists or was just made");
        if signs_in {
            // Made by create_user before the name was reserved (0.8.9): a person.
            fail(
                PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                format!(
                    "user {erased} named '{ERASED_USER}' has a token: it is a person, who \
                     would be given the placements; rename them first \
                     (UPDATE place.users SET name = ... WHERE id = {erased})"
                ),
            );
        }
        let given = run(client, &GIVE_PLACEMENTS, &[user_id.into(), erased.into()])
            .next()
            .map_or(0, |row| column::<i64>(&row, 1));
        run(client, &DELETE_USER, &[user_id.into()]);
        given
    })
}

/// Under REPEATABLE READ or SERIALIZABLE the statements after the lock would read the
/// transaction's snapshot, which misses a placement committed while the lock waited.
fn require_read_committed() {
    // SAFETY: reads a GUC's value, set for every transaction.
    let level = unsafe { pg_sys::XactIsoLevel };
    if level >= pg_sys::XACT_REPEATABLE_READ as i32 {
        fail(
            PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
            "erase_user needs a READ COMMITTED transaction (call it in a transaction of its own): \
             under REPEATABLE READ or SERIALIZABLE a placement committed since the transaction \
             began would be missed"
                .to_string(),
        );
    }
}
