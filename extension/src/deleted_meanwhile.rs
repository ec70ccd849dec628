//! A row a placement inserts (a cooldown claim, a placement key) names its board and its
//! user by foreign keys. Since the users are read, not locked ([`crate::placing`]), such a
//! key fails when the user was deleted between the read and the insert, or while the
//! insert waited for the DELETE; and when the board was. The caller is told which, with
//! the code a missing user or board has anywhere else (42704), instead of the key's
//! 23503 naming a table the caller never wrote to.

use crate::input::undefined;
use pgrx::pg_sys::panic::CaughtError;
use pgrx::spi::SpiClient;
use pgrx::{PgSqlErrorCode, PgTryBuilder};
use std::panic::AssertUnwindSafe;

/// Runs `insert` (which writes rows for `board_id` and some of `users`); a foreign key
/// violation becomes the board's or the user's absence. The handler only raises, so
/// nothing touches the client after the caught error.
pub fn inserting<R>(
    client: &mut SpiClient<'_>,
    board_id: i64,
    users: &[i64],
    insert: impl FnOnce(&mut SpiClient<'_>) -> R,
) -> R {
    PgTryBuilder::new(AssertUnwindSafe(|| insert(client)))
        .catch_when(PgSqlErrorCode::ERRCODE_FOREIGN_KEY_VIOLATION, |error| {
            refuse(error, board_id, users)
        })
        .execute()
}

fn refuse(error: CaughtError, board_id: i64, users: &[i64]) -> ! {
    let CaughtError::PostgresError(report) = &error else {
        error.rethrow()
    };
    // The constraints' names are the tables' own (`…_user_id_fkey`), never translated.
    if !report.message().contains("_user_id_fkey") {
        undefined(format!("board {board_id} does not exist"))
    }
    match report
        .detail()
        .and_then(key_in_detail)
        .filter(|user| users.contains(user))
    {
        Some(user) => undefined(format!(
            "user {user} was deleted during the call: there is no such user"
        )),
        // "no such user": what the gateway answers as its session's user deleted.
        None => undefined("a user of the call was deleted during it: there is no such user".into()),
    }
}

/// The key a foreign key's error names in its detail: `Key (user_id)=(42) is not
/// present in table "users".` (the words are translated, the key's values are not).
fn key_in_detail(detail: &str) -> Option<i64> {
    let start = detail.find(")=(")? + 3;
    let end = start + detail[start..].find(')')?;
    detail[start..end].parse().ok()
}
