//! `tile_at` and `tiles_at`: the tiles of a board as they were at a time, as rows, so that
//! "what did this corner look like at noon" is one query (`board_at` answers with the whole
//! packed board).

use crate::input::{fail, required};
use crate::render::sqlstate;
use crate::spi::{column, run, Statement};
use crate::storage::Board;
use crate::timetravel::{board_at, seq_at, Past};
use pgplace_core::png::{Region, RenderOptions};
use pgrx::pg_sys;
use pgrx::prelude::*;
use std::collections::HashMap;

/// The board right after the newest placement stamped at or before `at`, and that seq.
fn past(board_id: i64, at: TimestampWithTimeZone) -> (Board, i64, Past) {
    Spi::connect_mut(|client| {
        let board = Board::load(client, board_id, false);
        let seq = seq_at(client, &board, at);
        let past = board_at(client, &board, seq);
        (board, seq, past)
    })
}

/// The rectangle inside the board as it was (the errors are `render_png`'s crop's, without
/// a picture's size limits).
fn region(past: &Past, x: i32, y: i32, width: Option<i32>, height: Option<i32>) -> Region {
    let options = RenderOptions {
        scale: 1,
        x: x.into(),
        y: y.into(),
        width: width.map(i64::from),
        height: height.map(i64::from),
    };
    options
        .crop(past.width as u32, past.height as u32)
        .unwrap_or_else(|e| fail(sqlstate(&e), e.to_string()))
}

// Per tile, its newest placement up to the seq: the tile index's newest entry at or below
// it, one index descent per tile placed in the rectangle.
static LAST_PLACEMENTS: Statement = Statement {
    sql: "SELECT DISTINCT ON (x, y) x, y, seq, color FROM place.placements \
          WHERE board_id = $1 AND seq <= $2 AND x >= $3 AND x < $4 AND y >= $5 AND y < $6 \
          ORDER BY x, y, seq DESC",
    params: &[
        pg_sys::INT8OID,
        pg_sys::INT8OID,
        pg_sys::INT4OID,
        pg_sys::INT4OID,
        pg_sys::INT4OID,
        pg_sys::INT4OID,
    ],
};

/// The colour (palette index) tile (x, y) had at `at`: right after the newest placement
/// stamped at or before it (0 before the first). A tile outside the board as it was then
/// is an error (22023), as a `render_png` crop outside it.
#[pg_extern(stable, parallel_safe)]
fn tile_at(
    board_id: Option<i64>,
    x: Option<i32>,
    y: Option<i32>,
    at: Option<TimestampWithTimeZone>,
) -> i32 {
    let (board_id, x, y) = (
        required("board_id", board_id),
        required("x", x),
        required("y", y),
    );
    let (board, _, past) = past(board_id, required("at", at));
    region(&past, x, y, Some(1), Some(1));
    past.color(board.tile, x, y)
        .map(i32::from)
        .expect("inside the board then")
}

/// Every tile of the rectangle (x, y, width, height; NULL: to the edge) as it was at `at`,
/// row by row: its colour then, and `seq`, the placement that gave it that colour (NULL
/// for a tile never placed on by then, last placed on before the history kept by
/// `compact_history`, or set to 0 by a resize since).
#[pg_extern(stable, parallel_safe)]
fn tiles_at(
    board_id: Option<i64>,
    at: Option<TimestampWithTimeZone>,
    x: default!(Option<i32>, 0),
    y: default!(Option<i32>, 0),
    width: default!(Option<i32>, "NULL"),
    height: default!(Option<i32>, "NULL"),
) -> TableIterator<
    'static,
    (
        name!(x, i32),
        name!(y, i32),
        name!(color, i32),
        name!(seq, Option<i64>),
    ),
> {
    let board_id = required("board_id", board_id);
    let (x, y) = (required("x", x), required("y", y));
    let (board, seq, past) = past(board_id, required("at", at));
    let r = region(&past, x, y, width, height);
    let (x0, y0) = (r.x as i32, r.y as i32);
    let (x1, y1) = (x0 + r.width as i32, y0 + r.height as i32);
    let placed: HashMap<(i32, i32), (i64, i32)> = Spi::connect_mut(|client| {
        let args = [
            board_id.into(),
            seq.into(),
            x0.into(),
            x1.into(),
            y0.into(),
            y1.into(),
        ];
        run(client, &LAST_PLACEMENTS, &args)
            .map(|row| {
                (
                    (column::<i32>(&row, 1), column::<i32>(&row, 2)),
                    (column::<i64>(&row, 3), column::<i32>(&row, 4)),
                )
            })
            .collect()
    });
    let tile = board.tile;
    TableIterator::new((y0..y1).flat_map(move |ty| {
        let (past, placed) = (&past, &placed);
        (x0..x1)
            .map(move |tx| {
                let color = past.color(tile, tx, ty).expect("inside the board then");
                let color = i32::from(color);
                // A tile a resize cut off and brought back is 0 whatever was placed on it.
                let seq = placed
                    .get(&(tx, ty))
                    .filter(|(_, placed)| *placed == color)
                    .map(|(seq, _)| *seq);
                (tx, ty, color, seq)
            })
            .collect::<Vec<_>>()
    }))
}
