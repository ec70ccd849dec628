//! Questions about the history, answered newest first and paged by a seq cursor (never
//! OFFSET: a page costs the same however deep it is), and the board as rows.

use crate::input::{invalid, required};
use crate::spi::{column, run, Statement};
use crate::storage::Board;
use pgrx::pg_sys;
use pgrx::prelude::*;

/// The most rows one history page returns.
pub const MAX_PAGE: i32 = 10_000;

fn check_page(lim: i32) {
    if !(1..=MAX_PAGE).contains(&lim) {
        invalid(format!(
            "lim = {lim} is not allowed: a page holds 1 to {MAX_PAGE} rows"
        ));
    }
}

/// `before_seq` NULL: from the newest.
fn cursor(before_seq: Option<i64>) -> i64 {
    before_seq.unwrap_or(i64::MAX)
}

static TILE_HISTORY: Statement = Statement {
    sql: "SELECT p.seq, p.color, p.user_id, u.name, p.placed_at \
          FROM place.placements p JOIN place.users u ON u.id = p.user_id \
          WHERE p.board_id = $1 AND p.x = $2 AND p.y = $3 AND p.seq < $4 \
          ORDER BY p.seq DESC LIMIT $5",
    params: &[
        pg_sys::INT8OID,
        pg_sys::INT4OID,
        pg_sys::INT4OID,
        pg_sys::INT8OID,
        pg_sys::INT8OID,
    ],
};

/// Who placed tile (x, y) and when, newest first: `lim` rows with seq < `before_seq`
/// (pass the last seq of a page to get the next one).
#[pg_extern(stable, parallel_safe)]
fn tile_history(
    board_id: Option<i64>,
    x: Option<i32>,
    y: Option<i32>,
    before_seq: default!(Option<i64>, "NULL"),
    lim: default!(Option<i32>, 50),
) -> TableIterator<
    'static,
    (
        name!(seq, i64),
        name!(color, i32),
        name!(user_id, i64),
        name!(user_name, String),
        name!(placed_at, TimestampWithTimeZone),
    ),
> {
    let board_id = required("board_id", board_id);
    let (x, y) = (required("x", x), required("y", y));
    let lim = required("lim", lim);
    check_page(lim);
    let rows = Spi::connect_mut(|client| {
        Board::load(client, board_id, false);
        // Not checked against today's size: a shrunk board keeps the history beyond it.
        if x < 0 || y < 0 {
            crate::input::out_of_range(format!("({x}, {y}) is not a tile: x and y start at 0"));
        }
        let args = [
            board_id.into(),
            x.into(),
            y.into(),
            cursor(before_seq).into(),
            i64::from(lim).into(),
        ];
        run(client, &TILE_HISTORY, &args)
            .map(|row| {
                (
                    column::<i64>(&row, 1),
                    column::<i32>(&row, 2),
                    column::<i64>(&row, 3),
                    column::<String>(&row, 4),
                    column::<TimestampWithTimeZone>(&row, 5),
                )
            })
            .collect::<Vec<_>>()
    });
    TableIterator::new(rows)
}

static USER_HISTORY: Statement = Statement {
    sql: "SELECT seq, x, y, color, placed_at FROM place.placements \
          WHERE board_id = $1 AND user_id = $2 AND seq < $3 ORDER BY seq DESC LIMIT $4",
    params: &[
        pg_sys::INT8OID,
        pg_sys::INT8OID,
        pg_sys::INT8OID,
        pg_sys::INT8OID,
    ],
};

static USER_EXISTS: Statement = Statement {
    sql: "SELECT 1 FROM place.users WHERE id = $1",
    params: &[pg_sys::INT8OID],
};

/// A user's placements on a board, newest first, paged like `tile_history`.
#[pg_extern(stable, parallel_safe)]
fn user_history(
    board_id: Option<i64>,
    user_id: Option<i64>,
    before_seq: default!(Option<i64>, "NULL"),
    lim: default!(Option<i32>, 50),
) -> TableIterator<
    'static,
    (
        name!(seq, i64),
        name!(x, i32),
        name!(y, i32),
        name!(color, i32),
        name!(placed_at, TimestampWithTimeZone),
    ),
> {
    let board_id = required("board_id", board_id);
    let user_id = required("user_id", user_id);
    let lim = required("lim", lim);
    check_page(lim);
    let rows = Spi::connect_mut(|client| {
        Board::load(client, board_id, false);
        if run(client, &USER_EXISTS, &[user_id.into()])
            .next()
            .is_none()
        {
            crate::input::undefined(format!("user_id = {user_id}: there is no such user"));
        }
        let args = [
            board_id.into(),
            user_id.into(),
            cursor(before_seq).into(),
            i64::from(lim).into(),
        ];
        run(client, &USER_HISTORY, &args)
            .map(|row| {
                (
                    column::<i64>(&row, 1),
                    column::<i32>(&row, 2),
                    column::<i32>(&row, 3),
                    column::<i32>(&row, 4),
                    column::<TimestampWithTimeZone>(&row, 5),
                )
            })
            .collect::<Vec<_>>()
    });
    TableIterator::new(rows)
}

/// Every tile of the board as a row (x, y, color), row by row, for analysis in SQL.
#[pg_extern(stable, parallel_safe)]
fn tiles(
    board_id: Option<i64>,
) -> TableIterator<'static, (name!(x, i32), name!(y, i32), name!(color, i32))> {
    let board_id = required("board_id", board_id);
    let (board, bits) = Spi::connect_mut(|client| {
        let board = Board::load(client, board_id, false);
        let (_, bits) = crate::storage::read_packed(client, board_id);
        crate::storage::check_same_size(&board, &bits);
        (board, bits)
    });
    let (width, tile) = (board.width, board.tile);
    let count = board.tiles() as i64;
    TableIterator::new((0..count).map(move |n| {
        let color = tile.get(&bits, n).expect("tiles inside the board");
        (
            (n % i64::from(width)) as i32,
            (n / i64::from(width)) as i32,
            i32::from(color),
        )
    }))
}
