//! Since 0.8.4 placements write no chunk: the chunks hold a board as of its folded seq
//! (`place.chunk_folds`), and the board now is the chunks with the history after that seq
//! applied in seq order (`place._current_bits`, [`tile_colors`]). Every [`FOLD_AFTER`]
//! placements, the placement that reaches them folds the history since into the chunks,
//! writing each chunk it touched once ([`fold`]); a compaction folds before it drops
//! history, a resize writes the chunks whole and folds them to its seq.
//!
//! Folds take turns on the board's newest row of `place.chunk_folds`, which each fold
//! replaces: a placement folds only if it gets that row at once (`SKIP LOCKED`), so it
//! never waits while it holds the seq lock, and a fold it skips waits for the next
//! placement (the readers apply whatever history is after the fold, however long). A
//! compaction waits for the row. A resize holds the seq lock, which a folding placement
//! holds too, and writes the chunks whole.
//!
//! A board without a row in `place.chunk_folds` has chunks that are current, as every
//! board's were before 0.8.4 (an updated database, a restored dump of an older version):
//! the first placement since writes its row.

use crate::chunks::locate;
use crate::fold_sql::newest_fold;
use crate::snapshots::repeatable_read;
use crate::spi::{column, run, run_by_index, Statement};
use crate::storage::{changed_size, Board};
use pgrx::pg_sys;
use pgrx::spi::SpiClient;
use std::collections::BTreeMap;

/// How many placements a board's history may run ahead of its chunks before a placement
/// folds them: a fold of a 1000x1000x4 board rewrites about all of its 977 chunks, once
/// per this many placements instead of once per placement; a whole-board read applies
/// at most about this many placements to the chunks.
pub const FOLD_AFTER: i64 = 10_000;

static FOLDED_SEQ: Statement = Statement {
    sql: newest_fold!("$1"),
    params: &[pg_sys::INT8OID],
};

/// The seq the board's chunks are folded up to, as this statement's snapshot sees it; None:
/// the chunks are current.
fn folded_seq(client: &mut SpiClient<'_>, board_id: i64) -> Option<i64> {
    run_by_index(client, &FOLDED_SEQ, &[board_id.into()])
        .next()
        .map(|row| column::<i64>(&row, 1))
}

static SET_FOLDED: Statement = Statement {
    // The rows before go (versions, as chunks'); the newest one is what readers take.
    sql:
        "WITH replaced AS (DELETE FROM place.chunk_folds WHERE board_id = $1 AND folded_seq < $2) \
          INSERT INTO place.chunk_folds (board_id, folded_seq) VALUES ($1, $2) \
          ON CONFLICT DO NOTHING",
    params: &[pg_sys::INT8OID, pg_sys::INT8OID],
};

/// Records that the board's chunks hold it as of `seq`.
pub fn set_folded(client: &mut SpiClient<'_>, board_id: i64, seq: i64) {
    run_by_index(client, &SET_FOLDED, &[board_id.into(), seq.into()]);
}

static LOCK_FOLD_IF_FREE: Statement = Statement {
    sql: concat!(newest_fold!("$1"), " FOR UPDATE SKIP LOCKED"),
    params: &[pg_sys::INT8OID],
};

static LOCK_FOLD: Statement = Statement {
    sql: concat!(newest_fold!("$1"), " FOR UPDATE"),
    params: &[pg_sys::INT8OID],
};

/// How a fold takes its turn on the board's fold row.
#[derive(Clone, Copy, PartialEq)]
pub enum Turn {
    /// Only if no other fold holds it (a placement).
    IfFree,
    /// Waiting for one that does (a compaction).
    Wait,
}

/// Locks the board's newest fold row until commit; its seq, or None: no row (the chunks
/// are current), or (`IfFree`) another fold holds it.
fn lock_fold(client: &mut SpiClient<'_>, board_id: i64, turn: Turn) -> Option<i64> {
    if turn == Turn::IfFree {
        return run(client, &LOCK_FOLD_IF_FREE, &[board_id.into()])
            .next()
            .map(|row| column::<i64>(&row, 1));
    }
    // A fold that held the row replaced it: the lock then finds it gone, and the next
    // newest row is the one that fold left.
    loop {
        let newest = folded_seq(client, board_id)?;
        let locked = run(client, &LOCK_FOLD, &[board_id.into()])
            .next()
            .map(|row| column::<i64>(&row, 1));
        if locked == Some(newest) {
            return locked;
        }
    }
}

/// Called by a placement holding the seq lock after its history INSERT, with the folded
/// seq it read under that lock: writes the board's first fold row (None: the chunks were
/// current until this placement), or folds when the history is [`FOLD_AFTER`] ahead, or
/// when the placement is about to write a keyframe (`keyframe_due`), and no other fold is
/// running. A keyframe then reads the chunks alone: a 1000x1000x4 board's took 17 ms with
/// up to 10,000 placements to apply, 4 ms after a fold; and with the default interval
/// (10,000, as FOLD_AFTER) every fold falls on a keyframe from the first one on. Not under
/// REPEATABLE READ: its snapshot may predate a fold that a compaction committed, and the
/// placement would fail over work it need not do.
pub fn after_placements(
    client: &mut SpiClient<'_>,
    board: &Board,
    folded: Option<i64>,
    (first_seq, last_seq): (i64, i64),
    keyframe_due: bool,
) {
    match folded {
        None => set_folded(client, board.id, first_seq - 1),
        Some(seq)
            if (last_seq - seq >= FOLD_AFTER || keyframe_due && last_seq > seq)
                && !repeatable_read() =>
        {
            fold(client, board, Turn::IfFree);
        }
        Some(_) => {}
    }
}

static HISTORY_AFTER: Statement = Statement {
    sql: "SELECT seq, x, y, color FROM place.placements WHERE board_id = $1 AND seq > $2 ORDER BY seq",
    params: &[pg_sys::INT8OID, pg_sys::INT8OID],
};

/// Folds the history after the chunks' fold into them, up to the newest placement this
/// transaction sees, holding the board's fold row (`turn`): nothing else writes the chunks
/// meanwhile; placements go on (they write none). Nothing to do when the chunks are
/// current (no fold row) or, with `IfFree`, another fold holds the row.
pub fn fold(client: &mut SpiClient<'_>, board: &Board, turn: Turn) {
    let Some(from) = lock_fold(client, board.id, turn) else {
        return;
    };
    let mut to = from;
    // Each touched chunk's tiles, in seq order.
    let mut touched: BTreeMap<i32, Vec<(i64, u8)>> = BTreeMap::new();
    for row in run_by_index(client, &HISTORY_AFTER, &[board.id.into(), from.into()]) {
        to = column::<i64>(&row, 1);
        let (x, y, color) = (
            column::<i32>(&row, 2),
            column::<i32>(&row, 3),
            column::<i32>(&row, 4),
        );
        let (chunk_no, n) = locate(board, x, y);
        touched.entry(chunk_no).or_default().push((n, color as u8));
    }
    if to == from {
        return;
    }
    crate::chunks::rewrite(client, board, touched);
    set_folded(client, board.id, to);
}

static TILE_COLORS: Statement = Statement {
    // Each tile's newest placement after the fold (none: the chunk shows it), and its
    // chunk, in one snapshot with the board's size: no row when a resize came between.
    sql: concat!(
        "SELECT i.ord::int, p.color, c.bits \
          FROM unnest($2::int[], $3::int[], $4::int[]) WITH ORDINALITY AS i(x, y, chunk_no, ord) \
          JOIN place.board_settings s ON s.id = $1 AND s.width = $5 AND s.height = $6 \
          LEFT JOIN LATERAL (SELECT p.color FROM place.placements p \
                             WHERE p.board_id = $1 AND p.x = i.x AND p.y = i.y \
                               AND p.seq > (",
        newest_fold!("$1"),
        ") ORDER BY p.seq DESC LIMIT 1) p ON true \
          CROSS JOIN LATERAL (SELECT v.bits FROM place.chunk_versions v \
                              WHERE v.board_id = $1 AND v.chunk_no = i.chunk_no \
                              ORDER BY v.version DESC LIMIT 1) c"
    ),
    params: &[
        pg_sys::INT8OID,
        pg_sys::INT4ARRAYOID,
        pg_sys::INT4ARRAYOID,
        pg_sys::INT4ARRAYOID,
        pg_sys::INT4OID,
        pg_sys::INT4OID,
    ],
};

/// The colour each tile shows now (in one snapshot); 40001 when a resize came between the
/// board's load and this read.
pub fn tile_colors(client: &mut SpiClient<'_>, board: &Board, tiles: &[(i32, i32)]) -> Vec<u8> {
    let located: Vec<(i32, i64)> = tiles.iter().map(|(x, y)| locate(board, *x, *y)).collect();
    let args = [
        board.id.into(),
        tiles.iter().map(|t| t.0).collect::<Vec<i32>>().into(),
        tiles.iter().map(|t| t.1).collect::<Vec<i32>>().into(),
        located.iter().map(|l| l.0).collect::<Vec<i32>>().into(),
        board.width.into(),
        board.height.into(),
    ];
    let mut colors = vec![None; tiles.len()];
    for row in run_by_index(client, &TILE_COLORS, &args) {
        let i = column::<i32>(&row, 1) as usize - 1;
        colors[i] = match row.get::<i32>(2).ok().flatten() {
            Some(placed) => Some(placed as u8),
            None => board
                .tile
                .get(&column::<Vec<u8>>(&row, 3), located[i].1)
                .ok(),
        };
    }
    colors
        .into_iter()
        .map(|color| color.unwrap_or_else(|| changed_size(board.id)))
        .collect()
}
