//! Cooldowns: each user's last placement on each board, one row per (board, user). A call
//! claims a user's row with a conditional upsert, which holds the row until commit: a
//! second call for the same user waits for the first and then sees its placement, so one
//! cooldown window places one tile however many attempts race.

use crate::spi::{column, run, Statement};
use crate::storage::Board;
use pgrx::pg_sys;
use pgrx::prelude::*;
use pgrx::spi::SpiClient;
use std::collections::{HashMap, HashSet};

static CLAIM: Statement = Statement {
    // Users in id order, so two calls claiming overlapping users never wait in a circle.
    sql: "INSERT INTO place.cooldowns AS c (board_id, user_id, last_placed_at) \
          SELECT $1, u, $3 FROM unnest($2::bigint[]) AS u ORDER BY u \
          ON CONFLICT (board_id, user_id) DO UPDATE \
          SET last_placed_at = greatest(c.last_placed_at, excluded.last_placed_at) \
          WHERE $5 OR c.last_placed_at <= $4 \
          RETURNING user_id",
    params: &[
        pg_sys::INT8OID,
        pg_sys::INT8ARRAYOID,
        pg_sys::TIMESTAMPTZOID,
        pg_sys::TIMESTAMPTZOID,
        pg_sys::BOOLOID,
    ],
};

/// The users (sorted, distinct) whose cooldown on `board` has passed at `now`; their
/// last placement becomes `now`. Without a cooldown every user is claimed.
pub fn claim(
    client: &mut SpiClient<'_>,
    board: &Board,
    users: &[i64],
    now: pg_sys::TimestampTz,
) -> HashSet<i64> {
    let at = |t| TimestampWithTimeZone::try_from(t).expect("times stay in range");
    let args = [
        board.id.into(),
        users.to_vec().into(),
        at(now).into(),
        at(now - board.cooldown_us).into(),
        (board.cooldown_us == 0).into(),
    ];
    run(client, &CLAIM, &args)
        .map(|row| column::<i64>(&row, 1))
        .collect()
}

static RESTAMP: Statement = Statement {
    sql: "UPDATE place.cooldowns SET last_placed_at = greatest(last_placed_at, $3) \
          WHERE board_id = $1 AND user_id = ANY($2)",
    params: &[
        pg_sys::INT8OID,
        pg_sys::INT8ARRAYOID,
        pg_sys::TIMESTAMPTZOID,
    ],
};

/// Moves the last placement of `users` (whose rows this call claimed) to `stamp`, the
/// time their placements were stamped with when it is later than the claim's.
pub fn restamp_cooldowns(
    client: &mut SpiClient<'_>,
    board_id: i64,
    users: Vec<i64>,
    stamp: pg_sys::TimestampTz,
) {
    let stamp = TimestampWithTimeZone::try_from(stamp).expect("stamps are valid times");
    run(
        client,
        &RESTAMP,
        &[board_id.into(), users.into(), stamp.into()],
    );
}

static LAST_PLACEMENTS: Statement = Statement {
    sql: "SELECT user_id, last_placed_at FROM place.cooldowns WHERE board_id = $1 AND user_id = ANY($2)",
    params: &[pg_sys::INT8OID, pg_sys::INT8ARRAYOID],
};

/// When each of `users` last placed on the board (read after `claim` waited for them).
pub fn last_placements(
    client: &mut SpiClient<'_>,
    board_id: i64,
    users: Vec<i64>,
) -> HashMap<i64, pg_sys::TimestampTz> {
    if users.is_empty() {
        return HashMap::new();
    }
    run(client, &LAST_PLACEMENTS, &[board_id.into(), users.into()])
        .map(|row| {
            let user = column::<i64>(&row, 1);
            let at = column::<TimestampWithTimeZone>(&row, 2);
            (user, pg_sys::TimestampTz::from(at))
        })
        .collect()
}
