//! Boards: creation, settings, and reading the packed board and single tiles.

use crate::chunks::{insert_empty_chunks, read_chunks};
use crate::input::{cooldown_micros, fail, invalid, out_of_range, required};
use crate::spi::{run, Statement};
use crate::storage::{changed_size, read_packed, Board};
use pgplace_core::bits::TileWidth;
use pgplace_core::palette::{default_palette, validate_palette};
use pgplace_core::palette_names::default_palette_names;
use pgrx::datum::Interval;
use pgrx::prelude::*;
use pgrx::{pg_sys, PgSqlErrorCode};

/// r/Place's 1000x1000 fits many times over; 4096x4096 at 8 bits is a 16 MiB board.
pub const MAX_TILES: i64 = 16_777_216;
pub const MAX_NAME_CHARS: usize = 64;

/// Checks a name given to a board or a user.
pub fn check_name(what: &str, name: &str) {
    let chars = name.chars().count();
    if name.trim().is_empty() || chars > MAX_NAME_CHARS {
        invalid(format!(
            "{what} name '{name}' must have 1 to {MAX_NAME_CHARS} characters, not all blank (it has {chars})"
        ));
    }
}

static BOARD_NAMED: Statement = Statement {
    sql: "SELECT id FROM place.boards WHERE name = $1",
    params: &[pg_sys::TEXTOID],
};

static INSERT_BOARD: Statement = Statement {
    sql: "INSERT INTO place.boards (name, width, height, bits_per_tile, palette, cooldown) \
          VALUES ($1, $2, $3, $4, $5, $6) RETURNING id",
    params: &[
        pg_sys::TEXTOID,
        pg_sys::INT4OID,
        pg_sys::INT4OID,
        pg_sys::INT4OID,
        pg_sys::TEXTARRAYOID,
        pg_sys::INTERVALOID,
    ],
};

/// The same with the colours' names (schemas from 0.8.10: `palette_names`).
static INSERT_NAMED_BOARD: Statement = Statement {
    sql: "INSERT INTO place.boards (name, width, height, bits_per_tile, palette, cooldown, palette_names) \
          VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id",
    params: &[
        pg_sys::TEXTOID,
        pg_sys::INT4OID,
        pg_sys::INT4OID,
        pg_sys::INT4OID,
        pg_sys::TEXTARRAYOID,
        pg_sys::INTERVALOID,
        pg_sys::TEXTARRAYOID,
    ],
};

/// Creates an empty board (every tile is colour 0) and returns its id.
#[pg_extern(volatile, parallel_unsafe)]
fn create_board(
    name: Option<&str>,
    width: Option<i32>,
    height: Option<i32>,
    bits_per_tile: default!(Option<i32>, 4),
    cooldown: default!(Option<Interval>, "'5 minutes'"),
    palette: default!(Option<Vec<Option<String>>>, "NULL"),
) -> i64 {
    let name = required("name", name);
    check_name("board", name);
    let (width, height) = (required("width", width), required("height", height));
    let tiles = i64::from(width) * i64::from(height);
    if width < 1 || height < 1 || tiles > MAX_TILES {
        out_of_range(format!(
            "a {width}x{height} board is not allowed: width and height must be at least 1 \
             and width*height at most {MAX_TILES} (4096x4096)"
        ));
    }
    let bits = required("bits_per_tile", bits_per_tile);
    let tile = TileWidth::new(bits.into()).unwrap_or_else(|e| invalid(e.to_string()));
    let cooldown = required("cooldown", cooldown);
    cooldown_micros(cooldown);
    // The default palettes come with their colours' names; a palette of one's own is named
    // with set_palette_names.
    let (palette, names) = match palette {
        None => (default_palette(tile), Some(default_palette_names(tile))),
        Some(entries) => (
            validate_palette(tile, &entries).unwrap_or_else(|e| invalid(e.to_string())),
            None,
        ),
    };
    Spi::connect_mut(|client| {
        if let Some(existing) = run(client, &BOARD_NAMED, &[name.into()]).next() {
            let id = existing.get::<i64>(1).ok().flatten().unwrap_or_default();
            fail(
                PgSqlErrorCode::ERRCODE_UNIQUE_VIOLATION,
                format!("a board named '{name}' already exists (id {id})"),
            );
        }
        let mut args = vec![
            name.into(),
            width.into(),
            height.into(),
            bits.into(),
            palette.into(),
            cooldown.into(),
        ];
        let statement = if crate::catalog::palette_names_exist() {
            args.push(names.into());
            &INSERT_NAMED_BOARD
        } else {
            &INSERT_BOARD
        };
        let id = run(client, statement, &args)
            .next()
            .and_then(|row| row.get::<i64>(1).ok().flatten())
            .expect("INSERT ... RETURNING id returns the id");
        insert_empty_chunks(client, id, tile.packed_len(tiles as u64));
        id
    })
}

static SET_COOLDOWN: Statement = Statement {
    sql: "UPDATE place.boards SET cooldown = $2 WHERE id = $1",
    params: &[pg_sys::INT8OID, pg_sys::INTERVALOID],
};

/// Changes a board's cooldown at once: every user's next placement is measured from
/// their last one with the new cooldown.
#[pg_extern(volatile, parallel_unsafe)]
fn set_cooldown(board_id: Option<i64>, cooldown: Option<Interval>) {
    let board_id = required("board_id", board_id);
    let cooldown = required("cooldown", cooldown);
    cooldown_micros(cooldown);
    Spi::connect_mut(|client| {
        Board::load(client, board_id, true);
        run(client, &SET_COOLDOWN, &[board_id.into(), cooldown.into()]);
    })
}

/// The states `set_board_state` accepts.
/// `open` takes placements; the others refuse them (55000) and tell clients why: `paused`
/// (a break), `frozen` (the picture is final: One Million Checkboxes' ending), `closed`
/// (the event is over). An admin may set any state at any time.
pub const STATES: [&str; 4] = ["open", "paused", "frozen", "closed"];

static SET_STATE: Statement = Statement {
    sql: "UPDATE place.boards SET state = $2 WHERE id = $1",
    params: &[pg_sys::INT8OID, pg_sys::TEXTOID],
};

/// Opens, pauses, freezes or closes a board; only an open board takes placements.
#[pg_extern(volatile, parallel_unsafe)]
fn set_board_state(board_id: Option<i64>, state: Option<&str>) {
    let board_id = required("board_id", board_id);
    let state = required("state", state);
    if !STATES.contains(&state) {
        invalid(format!(
            "state = '{state}' is not one of: {}",
            STATES.join(", ")
        ));
    }
    Spi::connect_mut(|client| {
        Board::load(client, board_id, true);
        run(client, &SET_STATE, &[board_id.into(), state.into()]);
    })
}

/// Replaces a board's palette ('#rrggbb' strings, at most 2^bits_per_tile): colours may
/// change and be added; the palette must still name every colour on the board. A colour
/// that stays at its index keeps its name.
#[pg_extern(volatile, parallel_unsafe)]
fn set_palette(board_id: Option<i64>, palette: Option<Vec<Option<String>>>) {
    let board_id = required("board_id", board_id);
    let entries = required("palette", palette);
    Spi::connect_mut(|client| {
        // The board's row first: placements in flight finish before, later ones see it.
        let board = Board::load(client, board_id, true);
        let palette =
            validate_palette(board.tile, &entries).unwrap_or_else(|e| invalid(e.to_string()));
        let (_, bits) = read_packed(client, board_id);
        let highest = (0..board.tiles() as i64)
            .map(|n| board.tile.get(&bits, n).expect("tiles inside the board"))
            .max()
            .unwrap_or(0);
        if usize::from(highest) >= palette.len() {
            invalid(format!(
                "colour {highest} is on board {board_id}: its palette must keep at least {} colours (this one has {})",
                usize::from(highest) + 1,
                palette.len()
            ));
        }
        crate::palette_names::write_palette(client, board_id, palette);
    })
}

/// The packed board and the seq it reflects, read consistently (one snapshot).
#[pg_extern(stable, parallel_safe)]
fn board_bits(
    board_id: Option<i64>,
) -> TableIterator<'static, (name!(seq, i64), name!(bits, Vec<u8>))> {
    let board_id = required("board_id", board_id);
    let (seq, bits) = Spi::connect_mut(|client| read_packed(client, board_id));
    TableIterator::once((seq, bits))
}

/// The colour (palette index) of tile (x, y).
#[pg_extern(stable, parallel_safe)]
fn get_tile(board_id: Option<i64>, x: Option<i32>, y: Option<i32>) -> i32 {
    let board_id = required("board_id", board_id);
    let (x, y) = (required("x", x), required("y", y));
    Spi::connect_mut(|client| {
        let board = Board::load(client, board_id, false);
        board.check_coordinate('x', "x", x);
        board.check_coordinate('y', "y", y);
        if board.folds {
            return i32::from(crate::folds::tile_colors(client, &board, &[(x, y)])[0]);
        }
        let (chunk_no, n) = crate::chunks::locate(&board, x, y);
        let chunk = read_chunks(client, board_id, vec![chunk_no])
            .remove(&chunk_no)
            // Read after the board: a resize in between replaced the chunks.
            .unwrap_or_else(|| changed_size(board_id));
        i32::from(
            board
                .tile
                .get(&chunk, n)
                .expect("tiles inside the board are inside its chunks"),
        )
    })
}
