//! `place` and `place_many`: atomic place-with-cooldown. The checks (users, bans, bounds,
//! frozen tiles, cooldowns) and the outcomes are here; the writing, and the order in which
//! a call takes its locks, are in [`crate::writing`].

use crate::cooldowns::{claim, record, restamp};
use crate::freezing::frozen_items;
use crate::input::{fail, required, required_elements, undefined};
use crate::item::Item;
use crate::spi::{column, run, Statement};
use crate::storage::Board;
use crate::writing::{commit_tiles, timestamp};
use pgrx::prelude::*;
use pgrx::spi::SpiClient;
use pgrx::{pg_sys, PgSqlErrorCode};

/// The largest batch `place_many` takes in one call.
pub const MAX_BATCH: usize = 100_000;

/// The outcome of one item, as returned to SQL.
type Outcome = (i32, bool, Option<i64>, TimestampWithTimeZone);

/// How an argument is named in errors: `x` for `place`, `xs[3]` for `place_many`.
trait Label {
    fn label(&self, field: &str, index: usize) -> String;
}

struct Single;
impl Label for Single {
    fn label(&self, field: &str, _: usize) -> String {
        field.to_string()
    }
}

struct Batch;
impl Label for Batch {
    fn label(&self, field: &str, index: usize) -> String {
        format!("{field}s[{}]", index + 1)
    }
}

/// Places one tile, unless the user's cooldown has not passed (`placed` is false and
/// `next_allowed_at` says when it does) or the tile is frozen (`next_allowed_at` is
/// 'infinity').
#[pg_extern(volatile, parallel_unsafe)]
fn place(
    board_id: Option<i64>,
    x: Option<i32>,
    y: Option<i32>,
    color: Option<i32>,
    user_id: Option<i64>,
) -> TableIterator<
    'static,
    (
        name!(placed, bool),
        name!(seq, Option<i64>),
        name!(next_allowed_at, TimestampWithTimeZone),
    ),
> {
    let board_id = required("board_id", board_id);
    let item = Item {
        x: required("x", x),
        y: required("y", y),
        color: required("color", color),
        user: required("user_id", user_id),
    };
    let outcome = Spi::connect_mut(|client| apply(client, board_id, vec![item], &Single));
    TableIterator::new(
        outcome
            .into_iter()
            .map(|(_, placed, seq, next)| (placed, seq, next)),
    )
}

/// Places many tiles in one transaction, in array order, with the rules of `place`
/// (a user twice in one batch is refused the second time unless the cooldown is zero).
#[pg_extern(volatile, parallel_unsafe)]
fn place_many(
    board_id: Option<i64>,
    user_ids: Option<Vec<Option<i64>>>,
    xs: Option<Vec<Option<i32>>>,
    ys: Option<Vec<Option<i32>>>,
    colors: Option<Vec<Option<i32>>>,
) -> TableIterator<
    'static,
    (
        name!(ord, i32),
        name!(placed, bool),
        name!(seq, Option<i64>),
        name!(next_allowed_at, TimestampWithTimeZone),
    ),
> {
    let board_id = required("board_id", board_id);
    let users = required_elements("user_ids", user_ids);
    let xs = required_elements("xs", xs);
    let ys = required_elements("ys", ys);
    let colors = required_elements("colors", colors);
    let lens = [users.len(), xs.len(), ys.len(), colors.len()];
    if lens.iter().any(|len| *len != lens[0]) {
        fail(
            PgSqlErrorCode::ERRCODE_ARRAY_ELEMENT_ERROR,
            format!(
                "user_ids, xs, ys and colors must have the same length (they have {}, {}, {} and {} elements)",
                lens[0], lens[1], lens[2], lens[3]
            ),
        );
    }
    if lens[0] > MAX_BATCH {
        fail(
            PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
            format!(
                "a batch of {} placements is too large (at most {MAX_BATCH})",
                lens[0]
            ),
        );
    }
    let items = (0..lens[0])
        .map(|i| Item {
            user: users[i],
            x: xs[i],
            y: ys[i],
            color: colors[i],
        })
        .collect();
    let outcome = Spi::connect_mut(|client| apply(client, board_id, items, &Batch));
    TableIterator::new(outcome)
}

fn apply(
    client: &mut SpiClient<'_>,
    board_id: i64,
    items: Vec<Item>,
    label: &dyn Label,
) -> Vec<Outcome> {
    let board = Board::load(client, board_id, false);
    board.check_open();
    for (i, item) in items.iter().enumerate() {
        board.check_coordinate('x', &label.label("x", i), item.x);
        board.check_coordinate('y', &label.label("y", i), item.y);
        board.check_color(&label.label("color", i), item.color);
    }
    let mut users: Vec<i64> = items.iter().map(|item| item.user).collect();
    users.sort_unstable();
    users.dedup();
    check_users(client, &board, &users, &items, label);
    // SAFETY: a plain clock read.
    let now = unsafe { pg_sys::GetCurrentTimestamp() };
    // Before the claim: an item on a frozen tile must not spend its user's cooldown.
    let frozen = frozen_items(client, &board, &items, now);
    let mut hopeful: Vec<i64> = items
        .iter()
        .zip(&frozen)
        .filter(|(_, frozen)| !**frozen)
        .map(|(item, _)| item.user)
        .collect();
    hopeful.sort_unstable();
    hopeful.dedup();
    let claims = claim(client, &board, &hopeful, now);
    let (claimed, last) = (&claims.claimed, &claims.last_of_refused);

    // Decide in array order: a claimed user's first item places; a second one places
    // only without a cooldown.
    let mut used = std::collections::HashSet::new();
    let mut accepted: Vec<&Item> = Vec::new();
    let mut decided = Vec::with_capacity(items.len());
    for (item, frozen) in items.iter().zip(frozen) {
        if frozen {
            decided.push(Err(pg_sys::TimestampTz::MAX));
        } else if claimed.contains(&item.user) && (used.insert(item.user) || board.cooldown_us == 0)
        {
            decided.push(Ok(accepted.len() as i64));
            accepted.push(item);
        } else {
            let since = last.get(&item.user).copied().unwrap_or(now);
            decided.push(Err(since.saturating_add(board.cooldown_us)));
        }
    }
    record(client, &board, &claims, now);
    let (first_seq, stamp) = if accepted.is_empty() {
        (0, now)
    } else {
        commit_tiles(client, &board, &accepted, now, true)
    };
    if stamp > now {
        restamp(client, &board, &claims, stamp);
    }
    decided
        .into_iter()
        .enumerate()
        .map(|(i, decision)| match decision {
            Ok(k) => (
                i as i32 + 1,
                true,
                Some(first_seq + k),
                timestamp(stamp + board.cooldown_us),
            ),
            Err(allowed_at) => (i as i32 + 1, false, None, timestamp(allowed_at)),
        })
        .collect()
}

static MISSING_USERS: Statement = Statement {
    sql: "SELECT u, NULL::text FROM unnest($1::bigint[]) AS u \
          WHERE NOT EXISTS (SELECT 1 FROM place.users WHERE id = u)",
    params: &[pg_sys::INT8ARRAYOID],
};

static MISSING_OR_BANNED_USERS: Statement = Statement {
    sql: "SELECT u, CASE WHEN NOT EXISTS (SELECT 1 FROM place.users WHERE id = u) THEN NULL \
                    ELSE format('user %s is banned%s%s', u, \
                                ' until ' || b.until, ' (' || b.reason || ')') END \
          FROM unnest($1::bigint[]) AS u LEFT JOIN place.bans b \
               ON b.user_id = u AND (b.until IS NULL OR b.until > now()) \
          WHERE b.user_id IS NOT NULL OR NOT EXISTS (SELECT 1 FROM place.users WHERE id = u) \
          ORDER BY u LIMIT 1",
    params: &[pg_sys::INT8ARRAYOID],
};

// Locks the users as a foreign key's check would (KEY SHARE, in id order), until commit:
// place.placements has no foreign keys (their per-row checks were a sixth of a batch), so
// this lock is what makes a DELETE of one of these users wait for the call and then see
// its placements (place._keep_users_with_history). It conflicts only with deleting a user
// or changing its id, never with another placement.
macro_rules! lock_users {
    ($banned:literal) => {
        concat!(
            "SELECT (SELECT count(*) FROM (SELECT FROM place.users WHERE id = ANY($1) \
                                           ORDER BY id FOR KEY SHARE) l)::int, ",
            $banned
        )
    };
}

static LOCK_USERS: Statement = Statement {
    sql: lock_users!(
        "EXISTS (SELECT FROM place.bans b WHERE b.user_id = ANY($1) \
                 AND (b.until IS NULL OR b.until > now()))"
    ),
    params: &[pg_sys::INT8ARRAYOID],
};

/// Before 0.2.0 there were no bans.
static LOCK_USERS_0_1: Statement = Statement {
    sql: lock_users!("false"),
    params: &[pg_sys::INT8ARRAYOID],
};

/// Locks the call's users (sorted, distinct) until commit; refuses the call if one does
/// not exist (42704) or is banned (42501).
fn check_users(
    client: &mut SpiClient<'_>,
    board: &Board,
    users: &[i64],
    items: &[Item],
    label: &dyn Label,
) {
    let (lock, which) = if board.v0_2 {
        (&LOCK_USERS, &MISSING_OR_BANNED_USERS)
    } else {
        (&LOCK_USERS_0_1, &MISSING_USERS)
    };
    let (found, banned) = run(client, lock, &[users.to_vec().into()])
        .next()
        .map(|row| (column::<i32>(&row, 1), column::<bool>(&row, 2)))
        .expect("one row");
    if found as usize == users.len() && !banned {
        return;
    }
    // Which user, and why: the first in id order that is missing or banned.
    if let Some(row) = run(client, which, &[users.to_vec().into()]).next() {
        let user = column::<i64>(&row, 1);
        let i = items.iter().position(|item| item.user == user).unwrap_or(0);
        match row.get::<String>(2).ok().flatten() {
            Some(banned) => fail(PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE, banned),
            None => undefined(format!(
                "{} = {user}: there is no such user",
                label.label("user_id", i)
            )),
        }
    }
    // A user missing at the lock was made since: it is not locked, so start again.
    fail(
        PgSqlErrorCode::ERRCODE_T_R_SERIALIZATION_FAILURE,
        "a user was created during the call; try again".to_string(),
    );
}
