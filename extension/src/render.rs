//! `render_png`: the board (now, or as it was) as a PNG with the board's palette.

use crate::input::{fail, required};
use crate::spi::{column, run, Statement};
use crate::storage::{read_packed, Board};
use crate::timetravel::{board_at, seq_at, Past};
use pgplace_core::png::{render, RenderError, RenderOptions};
use pgrx::prelude::*;
use pgrx::{pg_sys, PgSqlErrorCode};

static PALETTE: Statement = Statement {
    sql: "SELECT palette FROM place.boards WHERE id = $1",
    params: &[pg_sys::INT8OID],
};

pub fn sqlstate(error: &RenderError) -> PgSqlErrorCode {
    match error.sqlstate() {
        "22023" => PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
        "54000" => PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
        _ => PgSqlErrorCode::ERRCODE_INTERNAL_ERROR,
    }
}

/// A PNG of the board (at `at`, NULL: now), each tile `scale`×`scale` pixels, cropped to
/// the rectangle (x, y, width, height) of tiles (width/height NULL: to the edge).
#[pg_extern(stable, parallel_safe)]
fn render_png(
    board_id: Option<i64>,
    at: default!(Option<TimestampWithTimeZone>, "NULL"),
    scale: default!(Option<i32>, 1),
    x: default!(Option<i32>, 0),
    y: default!(Option<i32>, 0),
    width: default!(Option<i32>, "NULL"),
    height: default!(Option<i32>, "NULL"),
) -> Vec<u8> {
    let board_id = required("board_id", board_id);
    let options = RenderOptions {
        scale: required("scale", scale).into(),
        x: required("x", x).into(),
        y: required("y", y).into(),
        width: width.map(i64::from),
        height: height.map(i64::from),
    };
    let (board, past, palette) = Spi::connect_mut(|client| {
        let board = Board::load(client, board_id, false);
        let past = match at {
            None => {
                let bits = read_packed(client, board_id).1;
                crate::storage::check_same_size(&board, &bits);
                Past {
                    width: board.width,
                    height: board.height,
                    bits,
                }
            }
            Some(at) => {
                let seq = seq_at(client, &board, at);
                board_at(client, &board, seq)
            }
        };
        let palette = run(client, &PALETTE, &[board_id.into()])
            .next()
            .map(|row| column::<Vec<String>>(&row, 1))
            .unwrap_or_default();
        (board, past, palette)
    });
    // The board's size then (it may have been resized since).
    render(
        &past.bits,
        past.width as u32,
        past.height as u32,
        board.tile,
        &palette,
        &options,
    )
    .unwrap_or_else(|e| fail(sqlstate(&e), e.to_string()))
}
