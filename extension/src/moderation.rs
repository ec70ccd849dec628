//! Moderation: bans, and undoing damage. Repairs are written as ordinary placements by the
//! user named `moderation` (created on first use), so the history stays append-only and
//! every client sees them as normal events.

use crate::chunks::lock_tiles;
use crate::input::{invalid, out_of_range, required, undefined};
use crate::item::Item;
use crate::spi::{column, run, Statement};
use crate::storage::{check_same_size, read_packed, Board};
use crate::timetravel::{board_at, seq_at};
use crate::users::MODERATION_USER;
use crate::writing::commit_tiles;
use pgrx::pg_sys;
use pgrx::prelude::*;
use pgrx::spi::SpiClient;

/// The most tiles one restore_region call may cover (a 1000x1000 region).
pub const MAX_REGION_TILES: i64 = 1_000_000;

static USER_EXISTS: Statement = Statement {
    sql: "SELECT 1 FROM place.users WHERE id = $1",
    params: &[pg_sys::INT8OID],
};

fn check_user(client: &mut SpiClient<'_>, user_id: i64) {
    if run(client, &USER_EXISTS, &[user_id.into()])
        .next()
        .is_none()
    {
        undefined(format!("user_id = {user_id}: there is no such user"));
    }
}

static BAN: Statement = Statement {
    sql: "INSERT INTO place.bans (user_id, until, reason) VALUES ($1, $2, $3) \
          ON CONFLICT (user_id) DO UPDATE \
          SET banned_at = now(), until = excluded.until, reason = excluded.reason",
    params: &[pg_sys::INT8OID, pg_sys::TIMESTAMPTZOID, pg_sys::TEXTOID],
};

/// Bans a user until `until` (NULL: until unbanned): their placements are refused
/// (SQLSTATE 42501) on every board. Banning again replaces the ban.
#[pg_extern(volatile, parallel_unsafe)]
fn ban_user(
    user_id: Option<i64>,
    until: default!(Option<TimestampWithTimeZone>, "NULL"),
    reason: default!(Option<&str>, "NULL"),
) {
    let user_id = required("user_id", user_id);
    // SAFETY: a plain clock read.
    let now = unsafe { pg_sys::GetCurrentTimestamp() };
    if let Some(until) = until {
        if pg_sys::TimestampTz::from(until) <= now {
            invalid("until must be in the future (or NULL: until unbanned)".to_string());
        }
    }
    Spi::connect_mut(|client| {
        check_user(client, user_id);
        run(client, &BAN, &[user_id.into(), until.into(), reason.into()]);
    })
}

static UNBAN: Statement = Statement {
    sql: "DELETE FROM place.bans WHERE user_id = $1",
    params: &[pg_sys::INT8OID],
};

/// Lifts a user's ban; returns whether there was one.
#[pg_extern(volatile, parallel_unsafe)]
fn unban_user(user_id: Option<i64>) -> bool {
    let user_id = required("user_id", user_id);
    Spi::connect_mut(|client| {
        check_user(client, user_id);
        !run(client, &UNBAN, &[user_id.into()]).is_empty()
    })
}

static MODERATOR: Statement = Statement {
    // DO UPDATE, not DO NOTHING: it returns the row also when a concurrent call made it.
    sql: "INSERT INTO place.users (name) VALUES ($1) \
          ON CONFLICT (name) DO UPDATE SET name = excluded.name RETURNING id",
    params: &[pg_sys::TEXTOID],
};

fn moderator(client: &mut SpiClient<'_>) -> i64 {
    run(client, &MODERATOR, &[MODERATION_USER.into()])
        .next()
        .map(|row| column::<i64>(&row, 1))
        .expect("the moderation user exists or was just made")
}

/// Places `tiles` (x, y, color) as the moderation user, under the board's seq lock like any
/// placement, whatever the board's state and without a cooldown. Returns how many.
fn repair(client: &mut SpiClient<'_>, board: &Board, tiles: Vec<(i32, i32, i32)>) -> i32 {
    if tiles.is_empty() {
        return 0;
    }
    if let Some((x, y, color)) = tiles.iter().find(|(_, _, color)| *color >= board.colors) {
        invalid(format!(
            "tile ({x}, {y}) would go back to colour {color}, which board {} no longer has \
             (its palette has {} colours): extend the palette first (place.set_palette)",
            board.id, board.colors
        ));
    }
    let user = moderator(client);
    let items: Vec<Item> = tiles
        .into_iter()
        .map(|(x, y, color)| Item { user, x, y, color })
        .collect();
    let accepted: Vec<&Item> = items.iter().collect();
    // SAFETY: a plain clock read.
    let now = unsafe { pg_sys::GetCurrentTimestamp() };
    commit_tiles(client, board, &accepted, now, false);
    items.len() as i32
}

/// Puts the rectangle back as it was at `at`: every tile in it that differs is placed
/// again with its colour then. Returns how many tiles were placed.
#[pg_extern(volatile, parallel_unsafe)]
fn restore_region(
    board_id: Option<i64>,
    x: Option<i32>,
    y: Option<i32>,
    width: Option<i32>,
    height: Option<i32>,
    at: Option<TimestampWithTimeZone>,
) -> i32 {
    let board_id = required("board_id", board_id);
    let (x, y) = (required("x", x), required("y", y));
    let (width, height) = (required("width", width), required("height", height));
    let at = required("at", at);
    Spi::connect_mut(|client| {
        let board = Board::load(client, board_id, false);
        if width < 1 || height < 1 || i64::from(width) * i64::from(height) > MAX_REGION_TILES {
            out_of_range(format!(
                "a {width}x{height} region is not allowed: width and height at least 1, at most {MAX_REGION_TILES} tiles"
            ));
        }
        board.check_coordinate('x', "x", x);
        board.check_coordinate('y', "y", y);
        board.check_coordinate('x', "x + width - 1", x + (width - 1));
        board.check_coordinate('y', "y + height - 1", y + (height - 1));
        let seq = seq_at(client, &board, at);
        let past = board_at(client, &board, seq);
        // The region's chunks first: nothing may change it between the read and the repair.
        let region: Vec<(i32, i32)> = (y..y + height)
            .flat_map(|ty| (x..x + width).map(move |tx| (tx, ty)))
            .collect();
        lock_tiles(client, &board, &region);
        let (_, now) = read_packed(client, board_id);
        check_same_size(&board, &now);
        let tile = board.tile;
        let mut tiles = Vec::new();
        for ty in y..y + height {
            for tx in x..x + width {
                let n = i64::from(tx) + i64::from(board.width) * i64::from(ty);
                // Tiles the board did not reach then (it grew since) stay as they are.
                let Some(then) = past.color(tile, tx, ty) else {
                    continue;
                };
                if then != tile.get(&now, n).expect("inside the board") {
                    tiles.push((tx, ty, i32::from(then)));
                }
            }
        }
        repair(client, &board, tiles)
    })
}

static USERS_TILES_ON_TOP: Statement = Statement {
    // Tiles of today's board ($4 x $5) the user placed since `since` whose newest placement
    // is still theirs, that placement's colour, and the colour each had before the user's
    // placements since then (NULL: none in the history).
    sql: "WITH touched AS ( \
              SELECT DISTINCT x, y FROM place.placements \
              WHERE board_id = $1 AND user_id = $2 AND placed_at >= $3 AND x < $4 AND y < $5), \
          top AS ( \
              SELECT t.x, t.y, \
                     (SELECT p.user_id FROM place.placements p \
                      WHERE p.board_id = $1 AND p.x = t.x AND p.y = t.y ORDER BY p.seq DESC LIMIT 1) AS user_id, \
                     (SELECT p.color FROM place.placements p \
                      WHERE p.board_id = $1 AND p.x = t.x AND p.y = t.y ORDER BY p.seq DESC LIMIT 1) AS top, \
                     (SELECT p.color FROM place.placements p \
                      WHERE p.board_id = $1 AND p.x = t.x AND p.y = t.y \
                        AND NOT (p.user_id = $2 AND p.placed_at >= $3) \
                      ORDER BY p.seq DESC LIMIT 1) AS before \
              FROM touched t) \
          SELECT x, y, before, top FROM top WHERE user_id = $2 ORDER BY y, x",
    params: &[
        pg_sys::INT8OID,
        pg_sys::INT8OID,
        pg_sys::TIMESTAMPTZOID,
        pg_sys::INT4OID,
        pg_sys::INT4OID,
    ],
};

static KEPT_SINCE: Statement = Statement {
    sql: "SELECT taken_at FROM place.keyframes WHERE board_id = $1 AND seq = $2",
    params: &[pg_sys::INT8OID, pg_sys::INT8OID],
};

/// Refuses to revert from a time whose placements were compacted away: what was under
/// the user's tiles then is no longer known.
fn check_history_kept_since(
    client: &mut SpiClient<'_>,
    board: &Board,
    since: TimestampWithTimeZone,
) {
    if board.history_from == 0 {
        return;
    }
    let kept_from = run(
        client,
        &KEPT_SINCE,
        &[board.id.into(), board.history_from.into()],
    )
    .next()
    .and_then(|row| row.get::<TimestampWithTimeZone>(1).ok().flatten());
    if kept_from.is_none_or(|kept| since <= kept) {
        crate::input::fail(
            pgrx::PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            format!(
                "the history of board {} before seq {} was removed by place.compact_history: \
                 revert from a later time",
                board.id, board.history_from
            ),
        );
    }
}

/// Undoes the tiles a user placed since `since` that are still on top: each goes back to
/// the colour it had before. Returns how many tiles were placed.
#[pg_extern(volatile, parallel_unsafe)]
fn revert_user(
    board_id: Option<i64>,
    user_id: Option<i64>,
    since: Option<TimestampWithTimeZone>,
) -> i32 {
    let board_id = required("board_id", board_id);
    let user_id = required("user_id", user_id);
    let since = required("since", since);
    Spi::connect_mut(|client| {
        let board = Board::load(client, board_id, false);
        check_user(client, user_id);
        check_history_kept_since(client, &board, since);
        let args = [
            board_id.into(),
            user_id.into(),
            since.into(),
            board.width.into(),
            board.height.into(),
        ];
        let rows: Vec<(i32, i32, Option<i32>, i32)> = run(client, &USERS_TILES_ON_TOP, &args)
            .map(|row| {
                (
                    column::<i32>(&row, 1),
                    column::<i32>(&row, 2),
                    row.get::<i32>(3).ok().flatten(),
                    column::<i32>(&row, 4),
                )
            })
            .collect();
        // A tile with no earlier placement kept was as the oldest board kept shows it: the
        // empty board, or the keyframe the history was compacted to.
        let oldest = rows
            .iter()
            .any(|(_, _, before, _)| before.is_none())
            .then(|| board_at(client, &board, board.history_from));
        // Their chunks first: nobody may place over them between the read and the repair.
        let candidates: Vec<(i32, i32)> = rows.iter().map(|(x, y, _, _)| (*x, *y)).collect();
        lock_tiles(client, &board, &candidates);
        let (_, now) = read_packed(client, board_id);
        check_same_size(&board, &now);
        let tiles = rows
            .into_iter()
            // Still the user's colour on the board (a resize may have reset the tile).
            .filter(|(x, y, _, top)| {
                let n = i64::from(*x) + i64::from(board.width) * i64::from(*y);
                board.tile.get(&now, n).ok().map(i32::from) == Some(*top)
            })
            .map(|(x, y, before, top)| {
                let color = before.unwrap_or_else(|| {
                    let oldest = oldest.as_ref().expect("read when needed");
                    i32::from(oldest.color(board.tile, x, y).unwrap_or(0))
                });
                (x, y, color, top)
            })
            .filter(|(_, _, color, top)| color != top)
            .map(|(x, y, color, _)| (x, y, color))
            .collect();
        repair(client, &board, tiles)
    })
}
