//! The board as it was: keyframes (the whole packed board every `keyframe_every`
//! placements, written by the placement that reaches the seq) plus the history replayed
//! from the nearest one — the collaborative editor's snapshot-plus-log.
//!
//! Placements are stamped with their transaction's start (`placed_at`), so stamps follow
//! seqs only nearly: the board "at" a time is the board right after the newest placement
//! stamped at or before it.

use crate::input::{fail, out_of_range, required};
use crate::spi::{column, run, run_by_index, Statement};
use crate::storage::Board;
use pgplace_core::bits::TileWidth;
use pgrx::prelude::*;
use pgrx::spi::SpiClient;
use pgrx::{pg_sys, PgSqlErrorCode};

/// Whether placements `first..=last` reach a multiple of the board's keyframe interval.
pub fn crosses_keyframe(board: &Board, first: i64, last: i64) -> bool {
    board
        .keyframe_every
        .is_some_and(|every| (first - 1) / every != last / every)
}

static WRITE_KEYFRAME: Statement = Statement {
    sql:
        "INSERT INTO place.keyframes (board_id, seq, taken_at, width, height, bits_per_tile, bits) \
          SELECT b.id, b.seq, $2, b.width, b.height, b.bits_per_tile, \
                 (SELECT string_agg(c.bits, ''::bytea ORDER BY c.chunk_no) \
                  FROM place.board_chunks c WHERE c.board_id = b.id) \
          FROM place.boards b WHERE b.id = $1 \
          ON CONFLICT DO NOTHING",
    params: &[pg_sys::INT8OID, pg_sys::TIMESTAMPTZOID],
};

/// Since 0.6.0: the bits read by `place._newest_bits`, as `read_packed` does. Through the
/// view, a keyframe of a 1000x1000x4 board took 13-41 ms, 0.7 ms of every place_many(100)
/// call once spread over the calls between keyframes; this way 4 ms.
static WRITE_KEYFRAME_VERSIONS: Statement = Statement {
    sql:
        "INSERT INTO place.keyframes (board_id, seq, taken_at, width, height, bits_per_tile, bits) \
          SELECT b.id, b.seq, $2, b.width, b.height, b.bits_per_tile, place._newest_bits(b.id) \
          FROM place.boards b WHERE b.id = $1 \
          ON CONFLICT DO NOTHING",
    params: &[pg_sys::INT8OID, pg_sys::TIMESTAMPTZOID],
};

/// Since 0.8.4: the chunks and the history after their fold (crate::folds).
static WRITE_KEYFRAME_FOLDED: Statement = Statement {
    sql:
        "INSERT INTO place.keyframes (board_id, seq, taken_at, width, height, bits_per_tile, bits) \
          SELECT b.id, b.seq, $2, b.width, b.height, b.bits_per_tile, place._current_bits(b.id) \
          FROM place.boards b WHERE b.id = $1 \
          ON CONFLICT DO NOTHING",
    params: &[pg_sys::INT8OID, pg_sys::TIMESTAMPTZOID],
};

/// Stores the board as this transaction leaves it. Called by a placement holding the
/// board's seq lock, after its own writes: no other placement can be in the bits it reads.
pub fn write_keyframe(client: &mut SpiClient<'_>, board: &Board, at: pg_sys::TimestampTz) {
    let at = TimestampWithTimeZone::try_from(at).expect("a clock reading is a valid time");
    let statement = if board.folds {
        &WRITE_KEYFRAME_FOLDED
    } else if board.versions {
        &WRITE_KEYFRAME_VERSIONS
    } else {
        &WRITE_KEYFRAME
    };
    run_by_index(client, statement, &[board.id.into(), at.into()]);
}

static KEYFRAME_AT_OR_BEFORE: Statement = Statement {
    sql: "SELECT seq, width, height, bits_per_tile, bits FROM place.keyframes \
          WHERE board_id = $1 AND seq <= $2 ORDER BY seq DESC LIMIT 1",
    params: &[pg_sys::INT8OID, pg_sys::INT8OID],
};

static REPLAY: Statement = Statement {
    sql: "SELECT count(*), coalesce(array_agg(x ORDER BY seq), '{}'), \
                 coalesce(array_agg(y ORDER BY seq), '{}'), coalesce(array_agg(color ORDER BY seq), '{}') \
          FROM place.placements WHERE board_id = $1 AND seq > $2 AND seq <= $3",
    params: &[pg_sys::INT8OID, pg_sys::INT8OID, pg_sys::INT8OID],
};

/// A board as it was: its size then and its packed tiles.
pub struct Past {
    pub width: i32,
    pub height: i32,
    pub bits: Vec<u8>,
}

impl Past {
    /// The colour of tile (x, y) then; None where the board did not reach (it was resized).
    pub fn color(&self, tile: TileWidth, x: i32, y: i32) -> Option<u8> {
        if x >= self.width || y >= self.height {
            return None;
        }
        tile.get(
            &self.bits,
            i64::from(x) + i64::from(self.width) * i64::from(y),
        )
        .ok()
    }
}

/// The board right after placement `seq` (0: before the first) and any resize at that seq.
pub fn board_at(client: &mut SpiClient<'_>, board: &Board, seq: i64) -> Past {
    if seq < 0 || seq > board.seq {
        out_of_range(format!(
            "seq = {seq} is outside the history of board {} (0 to {})",
            board.id, board.seq
        ));
    }
    if seq < board.history_from {
        compacted(board);
    }
    let base = run(
        client,
        &KEYFRAME_AT_OR_BEFORE,
        &[board.id.into(), seq.into()],
    )
    .next()
    .map(|row| {
        let tile = TileWidth::new(column::<i32>(&row, 4).into()).expect("a valid tile width");
        (
            column::<i64>(&row, 1),
            column::<i32>(&row, 2),
            column::<i32>(&row, 3),
            tile,
            column::<Vec<u8>>(&row, 5),
        )
    });
    let (from, width, height, tile, mut bits) = match base {
        Some(base) => base,
        // Without a keyframe, the history starts at seq 1 from an empty board (of today's
        // size: a resize first stores the board before it as a keyframe).
        None if board.history_from == 0 => (
            0,
            board.width,
            board.height,
            board.tile,
            vec![0; board.packed_len()],
        ),
        None => compacted(board),
    };
    let row = run(client, &REPLAY, &[board.id.into(), from.into(), seq.into()])
        .next()
        .expect("an aggregate returns a row");
    if column::<i64>(&row, 1) != seq - from {
        fail(
            PgSqlErrorCode::ERRCODE_T_R_SERIALIZATION_FAILURE,
            format!(
                "the history of board {} was compacted during the call; try again",
                board.id
            ),
        );
    }
    let (xs, ys, colors) = (
        column::<Vec<i32>>(&row, 2),
        column::<Vec<i32>>(&row, 3),
        column::<Vec<i32>>(&row, 4),
    );
    for ((x, y), color) in xs.iter().zip(&ys).zip(&colors) {
        let n = i64::from(*x) + i64::from(width) * i64::from(*y);
        tile.set(&mut bits, n, (*color).into()).unwrap_or_else(|e| {
            fail(
                PgSqlErrorCode::ERRCODE_DATA_CORRUPTED,
                format!("replaying board {}: {e}", board.id),
            )
        });
    }
    Past {
        width,
        height,
        bits,
    }
}

/// The keyframe interval of a board in a database of this version.
fn every(board: &Board) -> i64 {
    board
        .keyframe_every
        .expect("boards.keyframe_every exists where this function does")
}

fn compacted(board: &Board) -> ! {
    fail(
        PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        format!(
            "the history of board {} before seq {} was removed by place.compact_history; it is known from seq {} on",
            board.id, board.history_from, board.history_from
        ),
    )
}

static KEYFRAME_BEFORE_TIME: Statement = Statement {
    sql: "SELECT seq FROM place.keyframes WHERE board_id = $1 AND taken_at <= $2 \
          ORDER BY taken_at DESC, seq DESC LIMIT 1",
    params: &[pg_sys::INT8OID, pg_sys::TIMESTAMPTZOID],
};

static KEYFRAME_AFTER_TIME: Statement = Statement {
    sql: "SELECT seq FROM place.keyframes WHERE board_id = $1 AND taken_at > $2 \
          ORDER BY taken_at, seq LIMIT 1",
    params: &[pg_sys::INT8OID, pg_sys::TIMESTAMPTZOID],
};

static NEWEST_BY_TIME: Statement = Statement {
    sql: "SELECT max(seq) FROM place.placements \
          WHERE board_id = $1 AND seq > $2 AND seq <= $3 AND placed_at <= $4",
    params: &[
        pg_sys::INT8OID,
        pg_sys::INT8OID,
        pg_sys::INT8OID,
        pg_sys::TIMESTAMPTZOID,
    ],
};

/// The seq of the newest placement stamped at or before `at` (0 if none). Keyframes bound
/// the search: the one before `at` from below, the one after it from above (stamps never
/// go back as seqs go up; plus an interval for histories stamped before 0.2.0, whose
/// stamps may be slightly out of seq order), so at most about two intervals are scanned.
pub fn seq_at(client: &mut SpiClient<'_>, board: &Board, at: TimestampWithTimeZone) -> i64 {
    let first_after = |client: &mut SpiClient<'_>, statement| {
        run(client, statement, &[board.id.into(), at.into()])
            .next()
            .map(|row| column::<i64>(&row, 1))
    };
    let below = first_after(client, &KEYFRAME_BEFORE_TIME);
    if below.is_none() && board.history_from > 0 {
        compacted(board);
    }
    let low = below.unwrap_or(0).max(board.history_from);
    let high = first_after(client, &KEYFRAME_AFTER_TIME)
        .map_or(board.seq, |seq| (seq + every(board)).min(board.seq));
    run(
        client,
        &NEWEST_BY_TIME,
        &[board.id.into(), low.into(), high.into(), at.into()],
    )
    .next()
    .and_then(|row| row.get::<i64>(1).ok().flatten())
    .unwrap_or(low)
}

/// The packed board right after placement `seq` (0: the empty board) and its size then,
/// from the nearest keyframe and the history after it.
#[pg_extern(stable, parallel_safe)]
fn board_at_seq(
    board_id: Option<i64>,
    seq: Option<i64>,
) -> TableIterator<
    'static,
    (
        name!(seq, i64),
        name!(width, i32),
        name!(height, i32),
        name!(bits, Vec<u8>),
    ),
> {
    let board_id = required("board_id", board_id);
    let seq = required("seq", seq);
    let past = Spi::connect_mut(|client| {
        let board = Board::load(client, board_id, false);
        board_at(client, &board, seq)
    });
    TableIterator::once((seq, past.width, past.height, past.bits))
}

/// The packed board as it was at `at`, its size then and its seq: right after the newest
/// placement stamped at or before `at` (seq 0, the empty board, before the first).
#[pg_extern(stable, parallel_safe, name = "board_at")]
fn board_at_time(
    board_id: Option<i64>,
    at: Option<TimestampWithTimeZone>,
) -> TableIterator<
    'static,
    (
        name!(seq, i64),
        name!(width, i32),
        name!(height, i32),
        name!(bits, Vec<u8>),
    ),
> {
    let board_id = required("board_id", board_id);
    let at = required("at", at);
    let (seq, past) = Spi::connect_mut(|client| {
        let board = Board::load(client, board_id, false);
        let seq = seq_at(client, &board, at);
        (seq, board_at(client, &board, seq))
    });
    TableIterator::once((seq, past.width, past.height, past.bits))
}

static SET_KEYFRAME_EVERY: Statement = Statement {
    sql: "UPDATE place.boards SET keyframe_every = $2 WHERE id = $1",
    params: &[pg_sys::INT8OID, pg_sys::INT4OID],
};

/// The largest keyframe interval (a board_at replays up to this many placements).
pub const MAX_KEYFRAME_EVERY: i32 = 1_000_000;

/// Stores a keyframe every `every` placements from now on (place.build_keyframes fills in
/// the history already made).
#[pg_extern(volatile, parallel_unsafe)]
fn set_keyframe_every(board_id: Option<i64>, every: Option<i32>) {
    let board_id = required("board_id", board_id);
    let every = required("every", every);
    if !(1..=MAX_KEYFRAME_EVERY).contains(&every) {
        out_of_range(format!(
            "every = {every} is not allowed: a keyframe every 1 to {MAX_KEYFRAME_EVERY} placements"
        ));
    }
    Spi::connect_mut(|client| {
        Board::load(client, board_id, true);
        run(
            client,
            &SET_KEYFRAME_EVERY,
            &[board_id.into(), every.into()],
        );
    })
}

static INSERT_KEYFRAME: Statement = Statement {
    sql:
        "INSERT INTO place.keyframes (board_id, seq, taken_at, width, height, bits_per_tile, bits) \
          SELECT $1, $2, p.placed_at, $3, $4, $5, $6 FROM place.placements p \
          WHERE p.board_id = $1 AND p.seq = $2 \
          ON CONFLICT DO NOTHING",
    params: &[
        pg_sys::INT8OID,
        pg_sys::INT8OID,
        pg_sys::INT4OID,
        pg_sys::INT4OID,
        pg_sys::INT4OID,
        pg_sys::BYTEAOID,
    ],
};

fn store_keyframe(client: &mut SpiClient<'_>, board: &Board, seq: i64, past: Past) -> usize {
    let bits_per_tile = board.tile.bits() as i32;
    let args = [
        board.id.into(),
        seq.into(),
        past.width.into(),
        past.height.into(),
        bits_per_tile.into(),
        past.bits.into(),
    ];
    run(client, &INSERT_KEYFRAME, &args).len()
}

/// Writes the keyframes missing from the history already made (after an upgrade from a
/// version without keyframes, or a change of the interval); returns how many.
#[pg_extern(volatile, parallel_unsafe)]
fn build_keyframes(board_id: Option<i64>) -> i64 {
    let board_id = required("board_id", board_id);
    let board = Spi::connect_mut(|client| {
        crate::storage::lock_maintenance(client, board_id);
        Board::load(client, board_id, false)
    });
    let every = every(&board);
    let mut written = 0;
    let mut seq = (board.history_from / every + 1) * every;
    while seq <= board.seq {
        // One SPI connection per keyframe: what it read is freed before the next (each
        // replays from the keyframe stored just before).
        written += Spi::connect_mut(|client| {
            let past = board_at(client, &board, seq);
            store_keyframe(client, &board, seq, past) as i64
        });
        seq += every;
    }
    written
}

static DROP_HISTORY: Statement = Statement {
    sql: "WITH gone AS (DELETE FROM place.placements WHERE board_id = $1 AND seq <= $2 RETURNING 1), \
               old_keyframes AS (DELETE FROM place.keyframes WHERE board_id = $1 AND seq < $2) \
          SELECT count(*) FROM gone",
    params: &[pg_sys::INT8OID, pg_sys::INT8OID],
};

static RAISE_HISTORY_FROM: Statement = Statement {
    sql: "UPDATE place.boards SET history_from = greatest(history_from, $2) WHERE id = $1",
    params: &[pg_sys::INT8OID, pg_sys::INT8OID],
};

/// Drops the placements stamped before `before` (up to the newest one stamped then),
/// after storing the board at that point as a keyframe; returns how many were dropped.
/// place.board_at keeps working from there on and says so for earlier times.
#[pg_extern(volatile, parallel_unsafe)]
fn compact_history(board_id: Option<i64>, before: Option<TimestampWithTimeZone>) -> i64 {
    let board_id = required("board_id", board_id);
    let before = required("before", before);
    Spi::connect_mut(|client| {
        crate::storage::lock_maintenance(client, board_id);
        let board = Board::load(client, board_id, false);
        crate::freezing::check_compaction(&board, before);
        let seq = seq_at(client, &board, before);
        if seq <= board.history_from {
            return 0;
        }
        let past = board_at(client, &board, seq);
        store_keyframe(client, &board, seq, past);
        // The chunks must hold what is dropped (crate::folds): the fold reaches the newest
        // placement, at or after seq.
        if board.folds {
            crate::folds::fold(client, &board, crate::folds::Turn::Wait);
        }
        crate::cooldowns::keep_compacted(client, &board, seq);
        let dropped = run(client, &DROP_HISTORY, &[board_id.into(), seq.into()])
            .next()
            .map_or(0, |row| column::<i64>(&row, 1));
        run(client, &RAISE_HISTORY_FROM, &[board_id.into(), seq.into()]);
        dropped
    })
}
