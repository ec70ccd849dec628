//! `place` and `place_many`: atomic place-with-cooldown.
//!
//! A call takes its locks in one order, each held until commit, so calls never deadlock:
//! 1. each user's cooldown row ([`crate::cooldowns`]): one placement per user per window,
//!    however many attempts race;
//! 2. the touched chunk rows, in chunk order, then rewrites them ([`crate::storage`]):
//!    whoever writes a chunk first also commits first, so the bits always equal the
//!    history replayed in seq order;
//! 3. the board's row, bumping its seq ([`crate::storage::bump_seq`]), then the history
//!    INSERT, whose statement trigger sends the NOTIFY. Seqs are thus handed out gap-free
//!    in commit order, and the board's row is held only for the last two statements and
//!    the commit: calls on one board overlap in everything before.

use crate::cooldowns::{claim, last_placements, restamp_cooldowns};
use crate::freezing::{check_still_open_tiles, frozen_items};
use crate::input::{fail, required, required_elements, undefined};
use crate::spi::{column, run, Statement};
use crate::storage::{bump_seq, write_tiles, Board};
use pgrx::prelude::*;
use pgrx::spi::SpiClient;
use pgrx::{pg_sys, PgSqlErrorCode};

/// The largest batch `place_many` takes in one call.
pub const MAX_BATCH: usize = 100_000;

pub struct Item {
    pub user: i64,
    pub x: i32,
    pub y: i32,
    pub color: i32,
}

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
    let claimed = claim(client, &board, &hopeful, now);
    let refused: Vec<i64> = users
        .iter()
        .copied()
        .filter(|u| !claimed.contains(u))
        .collect();
    let last = last_placements(client, board.id, refused);

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
    let (first_seq, stamp) = if accepted.is_empty() {
        (0, now)
    } else {
        commit_tiles(client, &board, &accepted, now, true)
    };
    if stamp > now {
        // The cooldown runs from the stamp the history shows (rows this call holds).
        let mut placed: Vec<i64> = accepted.iter().map(|item| item.user).collect();
        placed.sort_unstable();
        placed.dedup();
        restamp_cooldowns(client, board.id, placed, stamp);
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

/// Writes accepted placements: tiles, seqs, history (and its NOTIFY), a keyframe when one
/// is due. Returns the first seq and the placements' stamp (`now`, unless a placement
/// that took its seq before was stamped later). `require_open`: refuse unless the board
/// is open (the moderation functions write on paused boards too).
pub fn commit_tiles(
    client: &mut SpiClient<'_>,
    board: &Board,
    accepted: &[&Item],
    now: pg_sys::TimestampTz,
    require_open: bool,
) -> (i64, pg_sys::TimestampTz) {
    // Moderation's repairs may write frozen tiles; players may not, even when a tile froze
    // while the call waited for its locks: that check needs the colours the tiles showed.
    let check_frozen = require_open && board.freeze_after_us.is_some();
    let before = write_tiles(client, board, accepted, check_frozen);
    let bumped = bump_seq(client, board, accepted.len() as i64, now, require_open);
    if require_open && bumped.freeze_after_us.is_some() {
        match before {
            Some(before) => check_still_open_tiles(client, board, accepted, &before, &bumped),
            None => fail(
                PgSqlErrorCode::ERRCODE_T_R_SERIALIZATION_FAILURE,
                format!(
                    "board {} started freezing tiles during the call; try again",
                    board.id
                ),
            ),
        }
    }
    let (first_seq, stamp) = (bumped.first_seq, bumped.stamp);
    append_history(client, board.id, first_seq, accepted, stamp);
    let last_seq = first_seq + accepted.len() as i64 - 1;
    if crate::timetravel::crosses_keyframe(board, first_seq, last_seq) {
        crate::timetravel::write_keyframe(client, board, stamp);
    }
    (first_seq, stamp)
}

/// `pg_sys::TimestampTz::MAX` is PostgreSQL's 'infinity' (a frozen tile: never).
fn timestamp(t: pg_sys::TimestampTz) -> TimestampWithTimeZone {
    if t == pg_sys::TimestampTz::MAX {
        return TimestampWithTimeZone::positive_infinity();
    }
    TimestampWithTimeZone::try_from(t).expect("cooldowns are capped, so times stay in range")
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

/// Refuses the call if a user does not exist (42704) or is banned (42501).
fn check_users(
    client: &mut SpiClient<'_>,
    board: &Board,
    users: &[i64],
    items: &[Item],
    label: &dyn Label,
) {
    // A database still on a schema without bans (before ALTER EXTENSION UPDATE) has none.
    let statement = if board.v0_2 {
        &MISSING_OR_BANNED_USERS
    } else {
        &MISSING_USERS
    };
    if let Some(row) = run(client, statement, &[users.to_vec().into()]).next() {
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
}

static INSERT_PLACEMENTS: Statement = Statement {
    sql: "INSERT INTO place.placements (board_id, seq, x, y, color, user_id, placed_at) \
          SELECT $1, $2 + ord - 1, x, y, c, u, $7 \
          FROM unnest($3::int[], $4::int[], $5::int[], $6::bigint[]) WITH ORDINALITY AS t(x, y, c, u, ord)",
    params: &[
        pg_sys::INT8OID,
        pg_sys::INT8OID,
        pg_sys::INT4ARRAYOID,
        pg_sys::INT4ARRAYOID,
        pg_sys::INT4ARRAYOID,
        pg_sys::INT8ARRAYOID,
        pg_sys::TIMESTAMPTZOID,
    ],
};

/// One INSERT for the whole batch (seqs `first_seq`, `first_seq + 1`, …), so its statement
/// trigger sends one set of payloads.
fn append_history(
    client: &mut SpiClient<'_>,
    board_id: i64,
    first_seq: i64,
    accepted: &[&Item],
    now: pg_sys::TimestampTz,
) {
    let args = [
        board_id.into(),
        first_seq.into(),
        accepted.iter().map(|i| i.x).collect::<Vec<i32>>().into(),
        accepted.iter().map(|i| i.y).collect::<Vec<i32>>().into(),
        accepted
            .iter()
            .map(|i| i.color)
            .collect::<Vec<i32>>()
            .into(),
        accepted.iter().map(|i| i.user).collect::<Vec<i64>>().into(),
        timestamp(now).into(),
    ];
    run(client, &INSERT_PLACEMENTS, &args);
}
