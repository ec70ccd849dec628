//! `place` and `place_many`: atomic place-with-cooldown. The checks (users, bans, bounds,
//! frozen tiles, cooldowns) and the outcomes are here; the writing, and the order in which
//! a call takes its locks, are in [`crate::writing`]; retries by idempotency key in
//! [`crate::placement_keys`].
//!
//! Since 0.8.9 the SQL functions say why an item was not placed (`place_with_reason`,
//! `place_many_with_reason`); since 0.8.7 they take a key. A schema not yet updated still
//! calls the library's earlier entry points (0.8.7's `place_keyed` and `place_many_keyed`,
//! 0.8.6's `place` and `place_many`), which are kept, without SQL of their own, for it.

use crate::cooldowns::{claim, record, restamp};
use crate::freezing::frozen_items;
use crate::input::{fail, required, required_elements, undefined};
use crate::item::Item;
use crate::placement_keys::{self, Keyed};
use crate::spi::{column, run, Statement};
use crate::stamps::timestamp;
use crate::storage::Board;
use crate::writing::commit_tiles;
use pgrx::prelude::*;
use pgrx::spi::SpiClient;
use pgrx::{pg_sys, PgSqlErrorCode};

/// The largest batch `place_many` takes in one call.
pub const MAX_BATCH: usize = 100_000;

/// The outcome of one item, as returned to SQL.
/// (ord, placed, seq, next_allowed_at, reason).
type Outcome = (
    i32,
    bool,
    Option<i64>,
    TimestampWithTimeZone,
    Option<&'static str>,
);

/// Why an item was not placed: its user's cooldown, or a frozen tile. The gateway answers
/// them with −32003 and −32010.
const COOLDOWN: &str = "cooldown";
const FROZEN: &str = "frozen";

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

/// Places one tile, unless the user's cooldown has not passed (`placed` is false, `reason`
/// is `cooldown` and `next_allowed_at` says when it does) or the tile is frozen (`reason`
/// is `frozen`, `next_allowed_at` 'infinity'). A `key` names the placement: its retry
/// within a day answers with the first placement instead of placing again.
#[pg_extern(volatile, parallel_unsafe, name = "place")]
fn place_with_reason(
    board_id: Option<i64>,
    x: Option<i32>,
    y: Option<i32>,
    color: Option<i32>,
    user_id: Option<i64>,
    key: default!(Option<String>, "NULL"),
) -> TableIterator<
    'static,
    (
        name!(placed, bool),
        name!(seq, Option<i64>),
        name!(next_allowed_at, TimestampWithTimeZone),
        name!(reason, Option<&'static str>),
    ),
> {
    let board_id = required("board_id", board_id);
    let item = Item {
        x: required("x", x),
        y: required("y", y),
        color: required("color", color),
        user: required("user_id", user_id),
    };
    let keys = match key {
        Some(key) => vec![Some(key)],
        None => Vec::new(),
    };
    let outcome = Spi::connect_mut(|client| apply(client, board_id, vec![item], &keys, &Single));
    TableIterator::new(
        outcome
            .into_iter()
            .map(|(_, placed, seq, next, reason)| (placed, seq, next, reason)),
    )
}

/// 0.8.8's `place` (no `reason`), for a schema not yet updated.
#[pg_extern(volatile, parallel_unsafe, sql = false)]
fn place_keyed(
    board_id: Option<i64>,
    x: Option<i32>,
    y: Option<i32>,
    color: Option<i32>,
    user_id: Option<i64>,
    key: Option<String>,
) -> TableIterator<
    'static,
    (
        name!(placed, bool),
        name!(seq, Option<i64>),
        name!(next_allowed_at, TimestampWithTimeZone),
    ),
> {
    TableIterator::new(
        place_with_reason(board_id, x, y, color, user_id, key)
            .map(|(placed, seq, next, _)| (placed, seq, next)),
    )
}

/// 0.8.6's `place`, for a schema not yet updated.
#[pg_extern(volatile, parallel_unsafe, sql = false)]
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
    place_keyed(board_id, x, y, color, user_id, None)
}

/// Places many tiles in one transaction, in array order, with the rules of `place`
/// (a user twice in one batch is refused the second time unless the cooldown is zero).
/// `keys` (NULL, or one per placement, NULL for none) name the placements as `place`'s
/// key does; a key twice in one call answers the second as the first.
#[pg_extern(volatile, parallel_unsafe, name = "place_many")]
// pgrx reads the result's column names from this signature's tokens: an alias would hide them.
#[allow(clippy::type_complexity)]
fn place_many_with_reason(
    board_id: Option<i64>,
    user_ids: Option<Vec<Option<i64>>>,
    xs: Option<Vec<Option<i32>>>,
    ys: Option<Vec<Option<i32>>>,
    colors: Option<Vec<Option<i32>>>,
    keys: default!(Option<Vec<Option<String>>>, "NULL"),
) -> TableIterator<
    'static,
    (
        name!(ord, i32),
        name!(placed, bool),
        name!(seq, Option<i64>),
        name!(next_allowed_at, TimestampWithTimeZone),
        name!(reason, Option<&'static str>),
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
    let keys = keys.unwrap_or_default();
    if !keys.is_empty() && keys.len() != lens[0] {
        fail(
            PgSqlErrorCode::ERRCODE_ARRAY_ELEMENT_ERROR,
            format!(
                "keys must be NULL or have one element per placement ({} elements, not {})",
                lens[0],
                keys.len()
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
    let outcome = Spi::connect_mut(|client| apply(client, board_id, items, &keys, &Batch));
    TableIterator::new(outcome)
}

/// 0.8.8's `place_many` (no `reason`), for a schema not yet updated.
#[pg_extern(volatile, parallel_unsafe, sql = false)]
fn place_many_keyed(
    board_id: Option<i64>,
    user_ids: Option<Vec<Option<i64>>>,
    xs: Option<Vec<Option<i32>>>,
    ys: Option<Vec<Option<i32>>>,
    colors: Option<Vec<Option<i32>>>,
    keys: Option<Vec<Option<String>>>,
) -> TableIterator<
    'static,
    (
        name!(ord, i32),
        name!(placed, bool),
        name!(seq, Option<i64>),
        name!(next_allowed_at, TimestampWithTimeZone),
    ),
> {
    TableIterator::new(
        place_many_with_reason(board_id, user_ids, xs, ys, colors, keys)
            .map(|(ord, placed, seq, next, _)| (ord, placed, seq, next)),
    )
}

/// 0.8.6's `place_many`, for a schema not yet updated.
#[pg_extern(volatile, parallel_unsafe, sql = false)]
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
    place_many_keyed(board_id, user_ids, xs, ys, colors, None)
}

fn apply(
    client: &mut SpiClient<'_>,
    board_id: i64,
    items: Vec<Item>,
    keys: &[Option<String>],
    label: &dyn Label,
) -> Vec<Outcome> {
    let board = Board::load(client, board_id, false);
    board.check_open();
    for (i, item) in items.iter().enumerate() {
        board.check_coordinate('x', &label.label("x", i), item.x);
        board.check_coordinate('y', &label.label("y", i), item.y);
        board.check_color(&label.label("color", i), item.color);
    }
    placement_keys::check_keys(keys, |i| label.label("key", i));
    let mut users: Vec<i64> = items.iter().map(|item| item.user).collect();
    users.sort_unstable();
    users.dedup();
    check_users(
        client,
        &board,
        &users,
        &items,
        keys.iter().any(Option::is_some),
        label,
    );
    // SAFETY: a plain clock read.
    let now = unsafe { pg_sys::GetCurrentTimestamp() };
    // Retries answered by their keys place nothing and claim no cooldown.
    let keyed = placement_keys::claim(client, &board, &items, keys, now, |i| label.label("key", i));
    let fresh = |i: usize| matches!(keyed[i], Keyed::New);
    // Before the claim: an item on a frozen tile must not spend its user's cooldown.
    let frozen = frozen_items(client, &board, &items, now);
    let mut hopeful: Vec<i64> = items
        .iter()
        .enumerate()
        .filter(|(i, _)| fresh(*i) && !frozen[*i])
        .map(|(_, item)| item.user)
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
    for (i, (item, frozen)) in items.iter().zip(frozen).enumerate() {
        if !fresh(i) {
            decided.push(Decision::ByKey);
        } else if frozen {
            decided.push(Decision::Refused(pg_sys::TimestampTz::MAX));
        } else if claimed.contains(&item.user) && (used.insert(item.user) || board.cooldown_us == 0)
        {
            decided.push(Decision::Placed(accepted.len() as i64));
            accepted.push(item);
        } else {
            let since = last.get(&item.user).copied().unwrap_or(now);
            decided.push(Decision::Refused(since.saturating_add(board.cooldown_us)));
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
    let next_allowed_at = stamp + board.cooldown_us;
    if !keys.is_empty() {
        let placed: Vec<Option<i64>> = decided
            .iter()
            .map(|d| match d {
                Decision::Placed(k) => Some(first_seq + k),
                _ => None,
            })
            .collect();
        placement_keys::settle(
            client,
            &board,
            &items,
            keys,
            &keyed,
            &placed,
            next_allowed_at,
        );
    }
    let mut outcomes: Vec<Outcome> = Vec::with_capacity(items.len());
    for (i, decision) in decided.into_iter().enumerate() {
        let ord = i as i32 + 1;
        outcomes.push(match (decision, &keyed[i]) {
            (Decision::Placed(k), _) => (
                ord,
                true,
                Some(first_seq + k),
                timestamp(next_allowed_at),
                None,
            ),
            (Decision::Refused(allowed_at), _) => {
                let reason = if allowed_at == pg_sys::TimestampTz::MAX {
                    FROZEN
                } else {
                    COOLDOWN
                };
                (ord, false, None, timestamp(allowed_at), Some(reason))
            }
            (Decision::ByKey, Keyed::Earlier(earlier)) => (
                ord,
                true,
                Some(earlier.seq),
                timestamp(earlier.next_allowed_at),
                None,
            ),
            (Decision::ByKey, Keyed::SameAs(j)) => {
                let (_, placed, seq, next, reason) = outcomes[*j];
                (ord, placed, seq, next, reason)
            }
            (Decision::ByKey, Keyed::New) => unreachable!("a new item is decided"),
        });
    }
    outcomes
}

/// What becomes of one item.
enum Decision {
    /// The k-th placement of the call.
    Placed(i64),
    /// Not placed; its user may place again at this time.
    Refused(pg_sys::TimestampTz),
    /// Answered by its key (`Keyed`).
    ByKey,
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

// How many of the call's users exist (`$1`, sorted), their rows either locked as a foreign
// key's check would lock them (KEY SHARE, in id order, until commit) or only read. The lock
// conflicts only with deleting a user or changing its id, never with another placement.
// Which one, and why:
// - Before 0.8.5: locked. place.placements has no foreign keys (their per-row checks were a
//   sixth of a batch), so this lock is what makes a DELETE of one of these users wait for
//   the call and then see its placements (place._keep_users_with_history).
// - Since 0.8.5 (cooldowns from the history): read. Every user who places has its cooldown
//   claim row locked until commit (FOR UPDATE: crate::cooldowns) or inserted, whose foreign
//   key's check locks the user as this would; that key cascades, so a DELETE of the user
//   waits for the claim's holder and its trigger then sees the placements. The users' lock
//   would be a WAL record per placement (a sixth of a placement's records) for nothing.
// - A call with idempotency keys: locked, on any schema. A reused expired key's row, or a
//   retried one locked by its ON CONFLICT, is held before the claim, and its foreign key
//   may lock the user after it (crate::placement_keys settles the row): an erase_user or
//   DELETE that took the user first would deadlock with the call instead of waiting for
//   it. Locked first, the user costs such a call nothing more (a new key's check takes the
//   same lock).
macro_rules! count_users {
    (locked) => {
        "SELECT (SELECT count(*) FROM (SELECT FROM place.users WHERE id = ANY($1) \
                                       ORDER BY id FOR KEY SHARE) l)::int, "
    };
    (read) => {
        "SELECT (SELECT count(*) FROM place.users WHERE id = ANY($1))::int, "
    };
}

macro_rules! any_banned {
    () => {
        "EXISTS (SELECT FROM place.bans b WHERE b.user_id = ANY($1) \
                 AND (b.until IS NULL OR b.until > now()))"
    };
}

static READ_USERS: Statement = Statement {
    sql: concat!(count_users!(read), any_banned!()),
    params: &[pg_sys::INT8ARRAYOID],
};

/// Before 0.8.5, and in a call with idempotency keys.
static LOCK_USERS: Statement = Statement {
    sql: concat!(count_users!(locked), any_banned!()),
    params: &[pg_sys::INT8ARRAYOID],
};

/// Before 0.2.0 there were no bans.
static LOCK_USERS_0_1: Statement = Statement {
    sql: concat!(count_users!(locked), "false"),
    params: &[pg_sys::INT8ARRAYOID],
};

/// Checks the call's users (sorted, distinct), locking them until commit before 0.8.5 or
/// in a `keyed` call (see count_users); refuses the call if one does not exist (42704) or
/// is banned (42501).
fn check_users(
    client: &mut SpiClient<'_>,
    board: &Board,
    users: &[i64],
    items: &[Item],
    keyed: bool,
    label: &dyn Label,
) {
    let (lock, which) = if board.cooldowns_from_history && !keyed {
        (&READ_USERS, &MISSING_OR_BANNED_USERS)
    } else if board.v0_2 {
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
    // A user missing from the count was made since it ran (a lock would not have waited
    // for it): start again.
    fail(
        PgSqlErrorCode::ERRCODE_T_R_SERIALIZATION_FAILURE,
        "a user was created during the call; try again".to_string(),
    );
}
