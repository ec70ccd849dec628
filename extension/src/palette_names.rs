//! The names of a board's colours (boards.palette_names, 0.8.10): set_palette_names, and
//! what set_palette does to them. (create_board writes the default palettes' names.) On
//! an older schema the library writes none: the column comes with ALTER EXTENSION UPDATE.

use crate::catalog::palette_names_exist;
use crate::input::{invalid, required};
use crate::spi::{run, Statement};
use crate::storage::Board;
use pgplace_core::palette_names::validate_palette_names;
use pgrx::pg_sys;
use pgrx::prelude::*;
use pgrx::spi::SpiClient;

static SET_NAMES: Statement = Statement {
    sql: "UPDATE place.boards SET palette_names = $2 WHERE id = $1",
    params: &[pg_sys::INT8OID, pg_sys::TEXTARRAYOID],
};

static SET_PALETTE: Statement = Statement {
    sql: "UPDATE place.boards SET palette = $2 WHERE id = $1",
    params: &[pg_sys::INT8OID, pg_sys::TEXTARRAYOID],
};

// A name stays with its colour: entry i keeps its name when the new palette has the same
// colour at i (a palette grown by a colour keeps every name), and loses it otherwise.
static SET_PALETTE_KEEPING_NAMES: Statement = Statement {
    sql: "UPDATE place.boards SET palette = $2, palette_names = CASE WHEN palette_names IS NOT NULL THEN \
          ARRAY(SELECT CASE WHEN palette[i] = $2[i] THEN palette_names[i] END \
                FROM pg_catalog.generate_subscripts($2, 1) AS i ORDER BY i) END \
          WHERE id = $1",
    params: &[pg_sys::INT8OID, pg_sys::TEXTARRAYOID],
};

/// Replaces a board's palette (checked by the caller), keeping the names of the colours
/// that stay where they were.
pub fn write_palette(client: &mut SpiClient<'_>, board_id: i64, palette: Vec<String>) {
    let statement = if palette_names_exist() {
        &SET_PALETTE_KEEPING_NAMES
    } else {
        &SET_PALETTE
    };
    run(client, statement, &[board_id.into(), palette.into()]);
}

/// Names a board's colours: one name per palette entry, NULL for a colour without one;
/// NULL names none.
#[pg_extern(volatile, parallel_unsafe)]
fn set_palette_names(board_id: Option<i64>, names: Option<Vec<Option<String>>>) {
    let board_id = required("board_id", board_id);
    Spi::connect_mut(|client| {
        // The board's row first, as set_palette: the names are checked against the palette
        // that holds until this transaction ends.
        let board = Board::load(client, board_id, true);
        if let Some(names) = &names {
            validate_palette_names(board.colors as usize, names)
                .unwrap_or_else(|e| invalid(format!("board {board_id}: {e}")));
        }
        run(client, &SET_NAMES, &[board_id.into(), names.into()]);
    })
}
