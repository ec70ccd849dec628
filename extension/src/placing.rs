//! `place` and `place_many`: atomic place-with-cooldown.
//!
//! One call locks its board's row (`SELECT … FOR UPDATE`), so placements on a board take
//! turns until each commits. Under that lock a call reads each user's last placement,
//! decides every item, rewrites the touched chunks, appends the history rows (one INSERT,
//! whose statement trigger sends the NOTIFY) and sets the board's seq. Hence: one tile
//! per user per cooldown window however many attempts race, and seqs handed out
//! gap-free in commit order (a rolled-back call never got to keep any).

use crate::input::{fail, required, required_elements, undefined};
use crate::spi::{run, Statement};
use crate::storage::Board;
use pgplace_core::bits::TileWidth;
use pgrx::prelude::*;
use pgrx::spi::SpiClient;
use pgrx::{pg_sys, PgSqlErrorCode};
use std::collections::HashMap;

/// The largest batch `place_many` takes in one call.
pub const MAX_BATCH: usize = 100_000;

struct Item {
    user: i64,
    x: i32,
    y: i32,
    color: i32,
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
/// `next_allowed_at` says when it does).
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
    let last_placed = users_and_last_placements(client, board_id, &items, label, false);
    let board = Board::load(client, board_id, true);
    if board.state != "open" {
        fail(
            PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            format!(
                "board {} ('{}') is {}: it accepts no placements until it is opened again \
                 (place.set_board_state({}, 'open'))",
                board.id, board.name, board.state, board.id
            ),
        );
    }
    for (i, item) in items.iter().enumerate() {
        board.check_coordinate('x', &label.label("x", i), item.x);
        board.check_coordinate('y', &label.label("y", i), item.y);
        board.check_color(&label.label("color", i), item.color);
    }
    // Read again under the lock: a placement that committed while we waited counts.
    let mut last_placed = if board.cooldown_us > 0 {
        users_and_last_placements(client, board_id, &items, label, true)
    } else {
        last_placed
    };
    // SAFETY: a plain clock read.
    let now = unsafe { pg_sys::GetCurrentTimestamp() };
    let mut accepted = Vec::new();
    let mut outcome = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let last = last_placed.get(&item.user).copied().flatten();
        let allowed_at = last.map_or(now, |t| t.saturating_add(board.cooldown_us));
        let ord = i as i32 + 1;
        if allowed_at <= now {
            let seq = board.seq + accepted.len() as i64 + 1;
            accepted.push((seq, item));
            last_placed.insert(item.user, Some(now));
            outcome.push((ord, true, Some(seq), timestamp(now + board.cooldown_us)));
        } else {
            outcome.push((ord, false, None, timestamp(allowed_at)));
        }
    }
    if !accepted.is_empty() {
        write_tiles(client, &board, &accepted);
        append_history(client, &board, &accepted, now);
    }
    outcome
}

fn timestamp(t: pg_sys::TimestampTz) -> TimestampWithTimeZone {
    TimestampWithTimeZone::try_from(t).expect("cooldowns are capped, so times stay in range")
}

static USERS_AND_LAST_PLACEMENTS: Statement = Statement {
    sql: "SELECT u.id, EXISTS (SELECT 1 FROM place.users WHERE id = u.id), \
                 CASE WHEN $3 THEN (SELECT p.placed_at FROM place.placements p \
                                    WHERE p.board_id = $1 AND p.user_id = u.id \
                                    ORDER BY p.seq DESC LIMIT 1) END \
          FROM unnest($2::bigint[]) AS u(id)",
    params: &[pg_sys::INT8OID, pg_sys::INT8ARRAYOID, pg_sys::BOOLOID],
};

/// Each distinct user's last placement time on the board (with `with_last`), after
/// checking that every user exists.
fn users_and_last_placements(
    client: &mut SpiClient<'_>,
    board_id: i64,
    items: &[Item],
    label: &dyn Label,
    with_last: bool,
) -> HashMap<i64, Option<pg_sys::TimestampTz>> {
    let mut distinct: Vec<i64> = items.iter().map(|item| item.user).collect();
    distinct.sort_unstable();
    distinct.dedup();
    let mut last = HashMap::with_capacity(distinct.len());
    for row in run(
        client,
        &USERS_AND_LAST_PLACEMENTS,
        &[board_id.into(), distinct.into(), with_last.into()],
    ) {
        let user = row
            .get::<i64>(1)
            .ok()
            .flatten()
            .expect("unnest of non-NULL ids");
        if !row.get::<bool>(2).ok().flatten().unwrap_or(false) {
            let i = items.iter().position(|item| item.user == user).unwrap_or(0);
            undefined(format!(
                "{} = {user}: there is no such user",
                label.label("user_id", i)
            ));
        }
        let at = row
            .get::<TimestampWithTimeZone>(3)
            .ok()
            .flatten()
            .map(pg_sys::TimestampTz::from);
        last.insert(user, at);
    }
    last
}

static APPLY_TILES: Statement = Statement {
    sql: "UPDATE place.board_chunks AS c SET bits = place._apply_tiles(c.bits, $2, v.ns, v.colors) \
          FROM (SELECT chunk_no, array_agg(n ORDER BY ord) AS ns, array_agg(color ORDER BY ord) AS colors \
                FROM unnest($3::int[], $4::bigint[], $5::int[]) WITH ORDINALITY AS t(chunk_no, n, color, ord) \
                GROUP BY chunk_no) AS v \
          WHERE c.board_id = $1 AND c.chunk_no = v.chunk_no",
    params: &[
        pg_sys::INT8OID,
        pg_sys::INT4OID,
        pg_sys::INT4ARRAYOID,
        pg_sys::INT8ARRAYOID,
        pg_sys::INT4ARRAYOID,
    ],
};

/// Sets the accepted tiles in their chunks, in seq order (a later tile wins), with one
/// UPDATE that rewrites each touched chunk once.
fn write_tiles(client: &mut SpiClient<'_>, board: &Board, accepted: &[(i64, &Item)]) {
    let mut chunk_nos = Vec::with_capacity(accepted.len());
    let mut ns = Vec::with_capacity(accepted.len());
    for (_, item) in accepted {
        let (chunk_no, n) = board.locate(item.x, item.y);
        chunk_nos.push(chunk_no);
        ns.push(n);
    }
    let colors: Vec<i32> = accepted.iter().map(|(_, item)| item.color).collect();
    let bits = board.tile.bits() as i32;
    run(
        client,
        &APPLY_TILES,
        &[
            board.id.into(),
            bits.into(),
            chunk_nos.into(),
            ns.into(),
            colors.into(),
        ],
    );
}

/// `bits` with tile `ns[i]` set to `colors[i]`, in order: the chunk half of a placement.
#[pg_extern(immutable, parallel_safe, strict, name = "_apply_tiles")]
pub fn apply_tiles(bits: &[u8], bits_per_tile: i32, ns: Vec<i64>, colors: Vec<i32>) -> Vec<u8> {
    let tile = TileWidth::new(bits_per_tile.into())
        .unwrap_or_else(|e| fail(PgSqlErrorCode::ERRCODE_DATA_CORRUPTED, e.to_string()));
    if ns.len() != colors.len() {
        fail(
            PgSqlErrorCode::ERRCODE_ARRAY_ELEMENT_ERROR,
            format!(
                "_apply_tiles takes as many colors ({}) as tiles ({})",
                colors.len(),
                ns.len()
            ),
        );
    }
    let mut out = bits.to_vec();
    for (n, color) in ns.into_iter().zip(colors) {
        tile.set(&mut out, n, color.into()).unwrap_or_else(|e| {
            fail(
                PgSqlErrorCode::ERRCODE_DATA_CORRUPTED,
                format!("a chunk is inconsistent with its board: {e}"),
            )
        });
    }
    out
}

static INSERT_PLACEMENTS: Statement = Statement {
    sql: "WITH bump AS (UPDATE place.boards SET seq = $8 WHERE id = $1) \
          INSERT INTO place.placements (board_id, seq, x, y, color, user_id, placed_at) \
          SELECT $1, s, x, y, c, u, $7 \
          FROM unnest($2::bigint[], $3::int[], $4::int[], $5::int[], $6::bigint[]) AS t(s, x, y, c, u)",
    params: &[
        pg_sys::INT8OID,
        pg_sys::INT8ARRAYOID,
        pg_sys::INT4ARRAYOID,
        pg_sys::INT4ARRAYOID,
        pg_sys::INT4ARRAYOID,
        pg_sys::INT8ARRAYOID,
        pg_sys::TIMESTAMPTZOID,
        pg_sys::INT8OID,
    ],
};

/// One INSERT for the whole batch, so its statement trigger sends one set of payloads;
/// the board's seq moves in the same statement.
fn append_history(
    client: &mut SpiClient<'_>,
    board: &Board,
    accepted: &[(i64, &Item)],
    now: pg_sys::TimestampTz,
) {
    let seqs: Vec<i64> = accepted.iter().map(|(seq, _)| *seq).collect();
    let last_seq = *seqs.last().expect("called with accepted placements");
    let args = [
        board.id.into(),
        seqs.into(),
        accepted
            .iter()
            .map(|(_, i)| i.x)
            .collect::<Vec<i32>>()
            .into(),
        accepted
            .iter()
            .map(|(_, i)| i.y)
            .collect::<Vec<i32>>()
            .into(),
        accepted
            .iter()
            .map(|(_, i)| i.color)
            .collect::<Vec<i32>>()
            .into(),
        accepted
            .iter()
            .map(|(_, i)| i.user)
            .collect::<Vec<i64>>()
            .into(),
        timestamp(now).into(),
        last_seq.into(),
    ];
    run(client, &INSERT_PLACEMENTS, &args);
}
