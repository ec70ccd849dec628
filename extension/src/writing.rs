//! The write path of placements, shared by `place`/`place_many` ([`crate::placing`]) and
//! the moderation functions ([`crate::moderation`]): tiles, seq, history, keyframes.
//!
//! A call takes its locks in one order, each held until commit, so calls never deadlock:
//! 0. before 0.8.5, its users' rows, KEY SHARE ([`crate::placing`]; the moderation user's
//!    row is locked by the upsert that finds it): the history has no foreign keys, and this
//!    is what makes a DELETE of a user wait for the placement and then see it; placements
//!    never wait for each other here. Since 0.8.5 only a call with idempotency keys locks
//!    them (its key rows would otherwise lock them after step 1); the others read them, and
//!    step 1 does the rest;
//! 1. each user's cooldown claim row ([`crate::cooldowns`]): one placement per user per
//!    window, however many attempts race (since 0.8.5 the history is the cooldown; from
//!    0.6.0 to 0.8.4 the claimed users' next cooldown versions are written before step 3,
//!    so the seq lock is not held for them). Since 0.8.5 it is also what a DELETE or an
//!    erasure of the user waits for: the row is locked (FOR UPDATE) or inserted (its
//!    foreign key's check locks the user, KEY SHARE), and its foreign key cascades;
//! 2. before 0.8.4, the touched chunks' rows, in chunk order, then writes their next
//!    versions ([`crate::chunks`]): whoever writes a chunk first also commits first, so the
//!    bits always equal the history replayed in seq order. Since 0.8.4 placements write no
//!    chunk ([`crate::folds`]): the chunks are the board as of a seq, the history after it
//!    the rest, and a placement that folds them does so last, under the seq lock, taking
//!    the board's fold row only if no other fold holds it;
//! 3. the board's seq lock, reading the newest seq ([`crate::storage::bump_seq`]), then the
//!    history INSERT and its NOTIFY ([`crate::notify`]). Seqs are thus handed out
//!    gap-free in commit order, and the seq lock is held only for the last two statements
//!    and the commit: calls on one board overlap in everything before. Settings changes
//!    take the seq lock before the board's row ([`crate::storage::Board::load`]).

use crate::chunks::write_tiles;
use crate::folds::tile_colors;
use crate::freezing::check_still_open_tiles;
use crate::input::fail;
use crate::item::Item;
use crate::snapshots::repeatable_read;
use crate::spi::{run, Statement};
use crate::stamps::timestamp;
use crate::storage::{bump_seq, Board};
use pgrx::spi::SpiClient;
use pgrx::{pg_sys, PgSqlErrorCode};

/// Writes accepted placements: tiles, seqs, history (and its NOTIFY), a keyframe when one
/// is due. Returns the first seq and the placements' stamp (`now`, unless a placement
/// that took its seq before was stamped later). `require_open`: refuse unless the board
/// is open (the moderation functions write on paused boards too).
pub fn commit_tiles(
    client: &mut SpiClient<'_>,
    board: &Board,
    accepted: &[&Item],
    now: pg_sys::TimestampTz,
    require_open: bool,
) -> (i64, pg_sys::TimestampTz) {
    // Moderation's repairs may write frozen tiles; players may not, even when a tile froze
    // while the call waited for its locks: that check needs the colours the tiles showed.
    let check_frozen = require_open && board.freeze_after_us.is_some();
    // Since 0.8.4 the tiles are in the history alone until a fold (crate::folds).
    let before = if board.folds {
        None
    } else {
        write_tiles(client, board, accepted, check_frozen)
    };
    let bumped = bump_seq(client, board, accepted.len() as i64, now, require_open);
    if require_open && bumped.freeze_after_us.is_some() {
        // Under the seq lock nothing else places: the colours read now are final.
        let before = if board.folds {
            let tiles: Vec<(i32, i32)> = accepted.iter().map(|item| (item.x, item.y)).collect();
            Some(tile_colors(client, board, &tiles))
        } else {
            before
        };
        match before {
            Some(before) => check_still_open_tiles(client, board, accepted, &before, &bumped),
            None => fail(
                PgSqlErrorCode::ERRCODE_T_R_SERIALIZATION_FAILURE,
                format!(
                    "board {} started freezing tiles during the call; try again",
                    board.id
                ),
            ),
        }
    }
    let (first_seq, stamp) = (bumped.first_seq, bumped.stamp);
    append_history(client, board, first_seq, accepted, stamp);
    let last_seq = first_seq + accepted.len() as i64 - 1;
    let keyframe_due = crate::timetravel::crosses_keyframe(board, first_seq, last_seq);
    if board.folds {
        let seqs = (first_seq, last_seq);
        crate::folds::after_placements(client, board, bumped.folded_seq, seqs, keyframe_due);
    }
    if keyframe_due {
        crate::timetravel::write_keyframe(client, board, stamp);
    }
    (first_seq, stamp)
}

macro_rules! insert_placements {
    () => {
        "INSERT INTO place.placements (board_id, seq, x, y, color, user_id, placed_at) \
         SELECT $1, $2 + ord - 1, x, y, c, u, $7 \
         FROM unnest($3::int[], $4::int[], $5::int[], $6::bigint[]) WITH ORDINALITY AS t(x, y, c, u, ord)"
    };
}

static INSERT_PLACEMENTS: Statement = Statement {
    sql: insert_placements!(),
    params: &PLACEMENT_PARAMS,
};

/// Under REPEATABLE READ the newest seq was read from the transaction's snapshot, which
/// misses a placement committed after it: its seq is then taken already, and ON CONFLICT
/// meeting a row the snapshot cannot see fails with 40001 (could not serialize access).
static INSERT_PLACEMENTS_REPEATABLE: Statement = Statement {
    sql: concat!(
        insert_placements!(),
        " ON CONFLICT (board_id, seq) DO NOTHING"
    ),
    params: &PLACEMENT_PARAMS,
};

const PLACEMENT_PARAMS: [pg_sys::Oid; 7] = [
    pg_sys::INT8OID,
    pg_sys::INT8OID,
    pg_sys::INT4ARRAYOID,
    pg_sys::INT4ARRAYOID,
    pg_sys::INT4ARRAYOID,
    pg_sys::INT8ARRAYOID,
    pg_sys::TIMESTAMPTZOID,
];

/// One INSERT for the whole batch (seqs `first_seq`, `first_seq + 1`, …), announced as
/// one set of payloads (by this library since 0.8.4, by the schema's trigger before).
fn append_history(
    client: &mut SpiClient<'_>,
    board: &Board,
    first_seq: i64,
    accepted: &[&Item],
    now: pg_sys::TimestampTz,
) {
    let board_id = board.id;
    let args = [
        board_id.into(),
        first_seq.into(),
        accepted.iter().map(|i| i.x).collect::<Vec<i32>>().into(),
        accepted.iter().map(|i| i.y).collect::<Vec<i32>>().into(),
        accepted
            .iter()
            .map(|i| i.color)
            .collect::<Vec<i32>>()
            .into(),
        accepted.iter().map(|i| i.user).collect::<Vec<i64>>().into(),
        timestamp(now).into(),
    ];
    if !repeatable_read() {
        run(client, &INSERT_PLACEMENTS, &args);
    } else if run(client, &INSERT_PLACEMENTS_REPEATABLE, &args).len() != accepted.len() {
        // Not reached: a conflict with a visible row would mean two holders of the seq lock.
        fail(
            PgSqlErrorCode::ERRCODE_T_R_SERIALIZATION_FAILURE,
            format!("board {}: seq {first_seq} is taken; try again", board_id),
        );
    }
    if board.folds {
        crate::notify::announce_placements(board_id, first_seq, accepted, now);
    }
}
