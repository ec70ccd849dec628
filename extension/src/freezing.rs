//! One Million Checkboxes' ending: on a board with `freeze_after` set, a tile that shows a
//! non-zero colour and has not changed for that long is frozen, and placements on it are
//! refused (`placed` false, `next_allowed_at` infinity: never).
//!
//! A tile's last change is its newest placement. Moderation's repairs are placements too,
//! so a repair may write a frozen tile, and that unfreezes it until it has rested again. A
//! tile whose placements were compacted away last changed no later than the keyframe
//! at `history_from`, so it counts from that keyframe's time (never earlier than the truth).
//! The colour is read from the board, not the placement: a shrink and a regrow clear tiles.

use crate::input::{fail, interval_micros, invalid, required};
use crate::item::Item;
use crate::spi::{column, open_cursor, run, run_by_index, Statement};
use crate::storage::{changed_size, check_same_size, read_packed, Board, Bumped};
use pgrx::datum::Interval;
use pgrx::prelude::*;
use pgrx::spi::{SpiClient, SpiCursor};
use pgrx::{pg_sys, PgSqlErrorCode};
use std::collections::{BTreeMap, VecDeque};

/// Ten years: far beyond any event, well inside what clients count in seconds.
const MAX_FREEZE_DAYS: i128 = 3660;

/// `freeze_after` in microseconds: more than zero, at most ten years, without months.
pub fn freeze_after_micros(freeze_after: Interval) -> i64 {
    let range =
        format!("more than '0', at most '{MAX_FREEZE_DAYS} days'; NULL: tiles never freeze");
    interval_micros("freeze_after", freeze_after, 1, MAX_FREEZE_DAYS, &range)
}

/// Refuses to compact a board with freeze_after past `now() - freeze_after`: a tile whose
/// placements are dropped counts from the kept keyframe's time, so a tile frozen now must
/// still be frozen counted from there (every tile last changed before such a `before` is).
pub fn check_compaction(board: &Board, before: TimestampWithTimeZone) {
    let Some(freeze_us) = board.freeze_after_us else {
        return;
    };
    // SAFETY: a plain clock read.
    let now = unsafe { pg_sys::GetCurrentTimestamp() };
    if pg_sys::TimestampTz::from(before) > now.saturating_sub(freeze_us) {
        invalid(format!(
            "board {} freezes tiles after {}: compact_history may only drop placements older than that \
             (before <= now() - freeze_after), or tiles frozen now would thaw",
            board.id,
            Interval::from_micros(freeze_us)
        ));
    }
}

static SET_FREEZE_AFTER: Statement = Statement {
    sql: "UPDATE place.boards SET freeze_after = $2 WHERE id = $1",
    params: &[pg_sys::INT8OID, pg_sys::INTERVALOID],
};

/// Makes tiles freeze once they show a non-zero colour unchanged for `freeze_after`
/// (NULL: never). Applies at once, to tiles changed before too.
#[pg_extern(volatile, parallel_unsafe)]
fn set_freeze_after(board_id: Option<i64>, freeze_after: Option<Interval>) {
    let board_id = required("board_id", board_id);
    if let Some(interval) = freeze_after {
        freeze_after_micros(interval);
    }
    Spi::connect_mut(|client| {
        // After a compaction in progress: it checked the old freeze_after.
        crate::storage::lock_maintenance(client, board_id);
        Board::load(client, board_id, true);
        run(
            client,
            &SET_FREEZE_AFTER,
            &[board_id.into(), freeze_after.into()],
        );
    })
}

static RESTED_ITEMS: Statement = Statement {
    // The newest placement of each item's tile: one backward probe of placements_tile_idx.
    sql: "SELECT i.ord::int FROM unnest($2::int[], $3::int[]) WITH ORDINALITY AS i(x, y, ord) \
          LEFT JOIN LATERAL (SELECT p.placed_at FROM place.placements p \
                             WHERE p.board_id = $1 AND p.x = i.x AND p.y = i.y \
                             ORDER BY p.seq DESC LIMIT 1) newest ON true \
          WHERE coalesce(newest.placed_at, \
                         (SELECT k.taken_at FROM place.keyframes k JOIN place.boards b \
                            ON b.id = k.board_id AND k.seq = b.history_from \
                          WHERE k.board_id = $1 AND b.history_from > 0)) <= $4",
    params: &[
        pg_sys::INT8OID,
        pg_sys::INT4ARRAYOID,
        pg_sys::INT4ARRAYOID,
        pg_sys::TIMESTAMPTZOID,
    ],
};

/// Which items target a frozen tile at `now` (by index), as the committed board shows it.
/// Placements still in flight can only make a tile younger, so a tile found frozen here
/// is frozen: no placement can land on it.
pub fn frozen_items(
    client: &mut SpiClient<'_>,
    board: &Board,
    items: &[Item],
    now: pg_sys::TimestampTz,
) -> Vec<bool> {
    let mut frozen = vec![false; items.len()];
    let Some(freeze_us) = board.freeze_after_us else {
        return frozen;
    };
    let rested_since = TimestampWithTimeZone::try_from(now.saturating_sub(freeze_us))
        .unwrap_or_else(|_| TimestampWithTimeZone::negative_infinity());
    let args = [
        board.id.into(),
        items.iter().map(|i| i.x).collect::<Vec<i32>>().into(),
        items.iter().map(|i| i.y).collect::<Vec<i32>>().into(),
        rested_since.into(),
    ];
    let rested: Vec<usize> = run(client, &RESTED_ITEMS, &args)
        .map(|row| column::<i32>(&row, 1) as usize - 1)
        .collect();
    if rested.is_empty() {
        return frozen;
    }
    if board.folds {
        let tiles: Vec<(i32, i32)> = rested.iter().map(|&i| (items[i].x, items[i].y)).collect();
        let colors = crate::folds::tile_colors(client, board, &tiles);
        for (&i, color) in rested.iter().zip(colors) {
            frozen[i] = color != 0;
        }
        return frozen;
    }
    let located: Vec<(i32, i64)> = rested
        .iter()
        .map(|&i| crate::chunks::locate(board, items[i].x, items[i].y))
        .collect();
    let chunk_nos: Vec<i32> = located.iter().map(|(chunk, _)| *chunk).collect();
    let args = [
        board.id.into(),
        chunk_nos.into(),
        board.width.into(),
        board.height.into(),
    ];
    let chunks: BTreeMap<i32, Vec<u8>> = run_by_index(client, &CHUNKS_AT_SIZE, &args)
        .map(|row| (column::<i32>(&row, 1), column::<Vec<u8>>(&row, 2)))
        .collect();
    for (&i, (chunk_no, n)) in rested.iter().zip(located) {
        // No chunk: a resize came between the board's row and this read.
        let color = chunks
            .get(&chunk_no)
            .and_then(|chunk| board.tile.get(chunk, n).ok())
            .unwrap_or_else(|| changed_size(board.id));
        frozen[i] = color != 0;
    }
    frozen
}

static CHUNKS_AT_SIZE: Statement = Statement {
    // The board's size in the same snapshot as its chunks.
    sql: "SELECT c.chunk_no, c.bits FROM place.board_chunks c JOIN place.boards b ON b.id = c.board_id \
          WHERE c.board_id = $1 AND c.chunk_no = ANY($2) AND b.width = $3 AND b.height = $4",
    params: &[
        pg_sys::INT8OID,
        pg_sys::INT4ARRAYOID,
        pg_sys::INT4OID,
        pg_sys::INT4OID,
    ],
};

static FROZE_SINCE: Statement = Statement {
    // The tiles' last changes, as RESTED_ITEMS reads them; this call holds their chunks,
    // so they are final.
    sql: "SELECT i.x, i.y FROM unnest($2::int[], $3::int[]) AS i(x, y) \
          LEFT JOIN LATERAL (SELECT p.placed_at FROM place.placements p \
                             WHERE p.board_id = $1 AND p.x = i.x AND p.y = i.y \
                             ORDER BY p.seq DESC LIMIT 1) newest ON true \
          WHERE coalesce(newest.placed_at, \
                         (SELECT k.taken_at FROM place.keyframes k \
                          WHERE k.board_id = $1 AND k.seq = $4 AND $4 > 0)) <= $5 \
          LIMIT 1",
    params: &[
        pg_sys::INT8OID,
        pg_sys::INT4ARRAYOID,
        pg_sys::INT4ARRAYOID,
        pg_sys::INT8OID,
        pg_sys::TIMESTAMPTZOID,
    ],
};

/// Under the board's lock, just before the placements take their seqs: refuses the call
/// (40001, nothing is written) if one of its tiles froze after the check made at its
/// start, while it waited for its locks, or if freeze_after was set meanwhile. Only
/// boards with freeze_after pay for it, and only for tiles that showed a colour.
pub fn check_still_open_tiles(
    client: &mut SpiClient<'_>,
    board: &Board,
    accepted: &[&Item],
    colors_before: &[u8],
    bumped: &Bumped,
) {
    let Some(freeze_us) = bumped.freeze_after_us else {
        return;
    };
    // Only a tile that showed a colour can be frozen (one a resize cleared shows 0 though
    // its last placement did not).
    let shown: Vec<&Item> = accepted
        .iter()
        .zip(colors_before)
        .filter(|(_, color)| **color != 0)
        .map(|(item, _)| *item)
        .collect();
    if shown.is_empty() {
        return;
    }
    let rested_since = TimestampWithTimeZone::try_from(bumped.locked_at.saturating_sub(freeze_us))
        .unwrap_or_else(|_| TimestampWithTimeZone::negative_infinity());
    let args = [
        board.id.into(),
        shown.iter().map(|i| i.x).collect::<Vec<i32>>().into(),
        shown.iter().map(|i| i.y).collect::<Vec<i32>>().into(),
        bumped.history_from.into(),
        rested_since.into(),
    ];
    if let Some(row) = run(client, &FROZE_SINCE, &args).next() {
        fail(
            PgSqlErrorCode::ERRCODE_T_R_SERIALIZATION_FAILURE,
            format!(
                "tile ({}, {}) on board {} froze while this call waited for its locks; try again",
                column::<i32>(&row, 1),
                column::<i32>(&row, 2),
                board.id
            ),
        );
    }
}

static SETTLE: Statement = Statement {
    // Called once the seq lock is held shared (no placement holds it now). FOR SHARE waits
    // for placements on a schema from before 0.5.0, which hold the row from their seq to
    // their commit. Both are released when the caller's transaction ends.
    sql: "SELECT seq, clock_timestamp() FROM place.boards WHERE id = $1 FOR SHARE",
    params: &[pg_sys::INT8OID],
};

/// Waits until every placement that has taken its seq on the board has committed or
/// rolled back, then returns the board's seq and the time. Any placement that commits
/// later checked its tiles at a time after `at`: a tile whose moment is at or before `at`
/// is frozen for good once the seqs up to `seq` are known. (The gateway calls this before
/// it announces frozen tiles; only the player role may, as it blocks writers while held.)
#[pg_extern(volatile, parallel_unsafe)]
fn settled_seq(
    board_id: Option<i64>,
) -> TableIterator<'static, (name!(seq, i64), name!(at, TimestampWithTimeZone))> {
    let board_id = required("board_id", board_id);
    let row = Spi::connect_mut(|client| {
        crate::storage::settle_seqs(client, board_id);
        crate::snapshots::refuse_unseen_placements(client, board_id);
        let row = run(client, &SETTLE, &[board_id.into()]).next().map(|row| {
            (
                column::<i64>(&row, 1),
                column::<TimestampWithTimeZone>(&row, 2),
            )
        });
        row.unwrap_or_else(|| crate::input::undefined(format!("board {board_id} does not exist")))
    });
    TableIterator::once(row)
}

static NEWEST_PLACEMENTS: Statement = Statement {
    // Backwards along placements_tile_idx: the first row of each tile is its newest.
    sql: "SELECT DISTINCT ON (x, y) x, y, seq, placed_at FROM place.placements \
          WHERE board_id = $1 ORDER BY x DESC, y DESC, seq DESC",
    params: &[pg_sys::INT8OID],
};

static HISTORY_START: Statement = Statement {
    sql: "SELECT taken_at FROM place.keyframes WHERE board_id = $1 AND seq = $2",
    params: &[pg_sys::INT8OID, pg_sys::INT8OID],
};

/// The tiles of the board as it is now that are frozen at `at` if nothing changes them
/// before: `at` in the future tells what will freeze, 'infinity' when every non-zero
/// tile will. Each row has the seq of the tile's last change (`history_from` for a tile
/// whose placements were compacted away) and the time it freezes.
#[pg_extern(stable, parallel_safe)]
fn frozen_tiles(
    board_id: Option<i64>,
    at: default!(Option<TimestampWithTimeZone>, "now()"),
) -> TableIterator<
    'static,
    (
        name!(x, i32),
        name!(y, i32),
        name!(color, i32),
        name!(seq, i64),
        name!(frozen_at, TimestampWithTimeZone),
    ),
> {
    let board_id = required("board_id", board_id);
    let at = pg_sys::TimestampTz::from(required("at", at));
    let mut rows = Spi::connect_mut(|client| {
        let board = Board::load(client, board_id, false);
        let Some(freeze_us) = board.freeze_after_us else {
            return Vec::new();
        };
        let (bits_seq, bits) = read_packed(client, board_id);
        check_same_size(&board, &bits);
        let history_start = (board.history_from > 0)
            .then(|| {
                run(
                    client,
                    &HISTORY_START,
                    &[board_id.into(), board.history_from.into()],
                )
                .next()
                .map(|row| pg_sys::TimestampTz::from(column::<TimestampWithTimeZone>(&row, 1)))
            })
            .flatten()
            .map(|t| (board.history_from, t));
        let mut newest = NewestPlacements::open(client, board.id);
        let mut rows = Vec::new();
        // In the cursor's order, so that each tile meets its newest placement in one pass.
        for x in (0..board.width).rev() {
            for y in (0..board.height).rev() {
                let last = match newest.take(x, y) {
                    // Changed after the bits were read: not frozen now.
                    Some((seq, _)) if seq > bits_seq => continue,
                    Some(last) => Some(last),
                    None => history_start,
                };
                let n = i64::from(x) + i64::from(board.width) * i64::from(y);
                let color = board.tile.get(&bits, n).expect("tiles inside the board");
                let Some((seq, changed_at)) = last.filter(|_| color != 0) else {
                    continue;
                };
                let frozen_at = changed_at.saturating_add(freeze_us);
                if frozen_at <= at {
                    let frozen_at = TimestampWithTimeZone::try_from(frozen_at)
                        .unwrap_or_else(|_| TimestampWithTimeZone::positive_infinity());
                    rows.push((x, y, i32::from(color), seq, frozen_at));
                }
            }
        }
        rows
    });
    rows.reverse();
    TableIterator::new(rows)
}

/// Each tile's newest placement (seq, placed_at), read through a cursor in descending
/// (x, y) order: a long history is never held in memory at once.
struct NewestPlacements<'conn> {
    cursor: SpiCursor<'conn>,
    batch: VecDeque<(i32, i32, i64, pg_sys::TimestampTz)>,
    done: bool,
}

impl<'conn> NewestPlacements<'conn> {
    fn open(client: &mut SpiClient<'conn>, board_id: i64) -> Self {
        NewestPlacements {
            cursor: open_cursor(client, &NEWEST_PLACEMENTS, &[board_id.into()]),
            batch: VecDeque::new(),
            done: false,
        }
    }

    fn peek(&mut self) -> Option<(i32, i32, i64, pg_sys::TimestampTz)> {
        if self.batch.is_empty() && !self.done {
            let rows = self
                .cursor
                .fetch(10_000)
                .unwrap_or_else(|e| panic!("reading the newest placements: {e}"));
            self.batch.extend(rows.map(|row| {
                let placed_at = column::<TimestampWithTimeZone>(&row, 4);
                (
                    column::<i32>(&row, 1),
                    column::<i32>(&row, 2),
                    column::<i64>(&row, 3),
                    pg_sys::TimestampTz::from(placed_at),
                )
            }));
            self.done = self.batch.is_empty();
        }
        self.batch.front().copied()
    }

    /// The newest placement of tile (x, y); tiles must be asked in descending (x, y) order.
    /// Rows of tiles a shrink cut off the board are passed over.
    fn take(&mut self, x: i32, y: i32) -> Option<(i64, pg_sys::TimestampTz)> {
        while let Some((rx, ry, seq, placed_at)) = self.peek() {
            if (rx, ry) < (x, y) {
                return None;
            }
            self.batch.pop_front();
            if (rx, ry) == (x, y) {
                return Some((seq, placed_at));
            }
        }
        None
    }
}
