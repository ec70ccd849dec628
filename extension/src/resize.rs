//! `resize_board`: grow or shrink a board, keeping its top-left part. The history stays as
//! it was; a resize belongs to the seq it happens at (it takes none of its own): from
//! then on `board_at_seq(seq)` is the resized board, and the keyframe stored there is what
//! lets time travel replay each stretch of history at the size it was made at.

use crate::boards::MAX_TILES;
use crate::chunks::{delete_chunks, insert_chunks, lock_all_chunks};
use crate::input::{out_of_range, required};
use crate::spi::{run, Statement};
use crate::storage::{lock_maintenance, read_packed, Board};
use pgplace_core::bits::TileWidth;
use pgrx::pg_sys;
use pgrx::prelude::*;
use pgrx::spi::SpiClient;

static SET_SIZE: Statement = Statement {
    sql: "UPDATE place.boards SET width = $2, height = $3 WHERE id = $1",
    params: &[pg_sys::INT8OID, pg_sys::INT4OID, pg_sys::INT4OID],
};

static KEYFRAME: Statement = Statement {
    // $7: replace a keyframe already at this seq (the resize's own), or keep it (seq 0).
    // A keyframe is stamped with its seq's placed_at (-infinity before the first), which
    // place.board_at's search by time relies on; a replaced one keeps its stamp.
    sql:
        "INSERT INTO place.keyframes (board_id, seq, taken_at, width, height, bits_per_tile, bits) \
          VALUES ($1, $2, coalesce((SELECT placed_at FROM place.placements WHERE board_id = $1 AND seq = $2), \
                                   '-infinity'), $3, $4, $5, $6) \
          ON CONFLICT (board_id, seq) DO UPDATE \
          SET width = excluded.width, height = excluded.height, bits = excluded.bits \
          WHERE $7",
    params: &[
        pg_sys::INT8OID,
        pg_sys::INT8OID,
        pg_sys::INT4OID,
        pg_sys::INT4OID,
        pg_sys::INT4OID,
        pg_sys::BYTEAOID,
        pg_sys::BOOLOID,
    ],
};

struct Frame {
    seq: i64,
    width: i32,
    height: i32,
    bits: Vec<u8>,
}

fn store(client: &mut SpiClient<'_>, board: &Board, frame: Frame, replace: bool) {
    let args = [
        board.id.into(),
        frame.seq.into(),
        frame.width.into(),
        frame.height.into(),
        (board.tile.bits() as i32).into(),
        frame.bits.into(),
        replace.into(),
    ];
    run(client, &KEYFRAME, &args);
}

/// The top-left `width`×`height` of a packed board (new tiles are colour 0).
fn crop(tile: TileWidth, bits: &[u8], old: (i32, i32), new: (i32, i32)) -> Vec<u8> {
    let mut out = vec![0u8; tile.packed_len(new.0 as u64 * new.1 as u64)];
    for y in 0..old.1.min(new.1) {
        for x in 0..old.0.min(new.0) {
            let from = i64::from(x) + i64::from(old.0) * i64::from(y);
            let color = tile.get(bits, from).expect("inside the old board");
            let to = i64::from(x) + i64::from(new.0) * i64::from(y);
            tile.set(&mut out, to, color.into())
                .expect("inside the new board");
        }
    }
    out
}

/// Grows or shrinks a board to `width`×`height`, keeping its top-left part (new tiles are
/// colour 0). Placements in flight finish first; listeners get a settings notification
/// (the gateway sends its sessions a `reset` with the new board).
#[pg_extern(volatile, parallel_unsafe)]
fn resize_board(board_id: Option<i64>, width: Option<i32>, height: Option<i32>) {
    let board_id = required("board_id", board_id);
    let (width, height) = (required("width", width), required("height", height));
    if width < 1 || height < 1 || i64::from(width) * i64::from(height) > MAX_TILES {
        out_of_range(format!(
            "a {width}x{height} board is not allowed: width and height must be at least 1 \
             and width*height at most {MAX_TILES} (4096x4096)"
        ));
    }
    Spi::connect_mut(|client| {
        let before = Board::load(client, board_id, false);
        lock_maintenance(client, board_id);
        // In chunk order, before the board's seq lock: the order placements take their locks in.
        lock_all_chunks(client, &before);
        let board = Board::load(client, board_id, true);
        if (board.width, board.height) == (width, height) {
            return;
        }
        let (seq, bits) = read_packed(client, board_id);
        if board.history_from == 0 && seq > 0 {
            // The board before any placement, at its first size: replays from seq 0 then
            // use that size, not today's.
            let empty = vec![0; board.packed_len()];
            let first = Frame {
                seq: 0,
                width: board.width,
                height: board.height,
                bits: empty,
            };
            store(client, &board, first, false);
        }
        let resized = crop(
            board.tile,
            &bits,
            (board.width, board.height),
            (width, height),
        );
        delete_chunks(client, &board);
        insert_chunks(client, board_id, &resized);
        if board.folds {
            // The new chunks are the board at the resize's seq (read under the seq lock).
            crate::folds::set_folded(client, board_id, seq);
        }
        run(
            client,
            &SET_SIZE,
            &[board_id.into(), width.into(), height.into()],
        );
        store(
            client,
            &board,
            Frame {
                seq,
                width,
                height,
                bits: resized,
            },
            true,
        );
    })
}
