//! A board's settings, its seq lock and seqs, and reading its packed bits whole (the
//! chunks they are kept in: `chunks`).

use crate::input::{fail, out_of_range, undefined};
use crate::snapshots::{refuse_unseen_placements, repeatable_read};
use crate::spi::{column, run, run_by_index, Statement};
use pgplace_core::bits::TileWidth;
use pgrx::datum::{FromDatum, Interval, IntoDatum};
use pgrx::prelude::*;
use pgrx::spi::{SpiClient, SpiHeapTupleData};
use pgrx::{pg_sys, PgSqlErrorCode};

/// The settings of a board that placing and reading need.
pub struct Board {
    pub id: i64,
    pub name: String,
    pub width: i32,
    pub height: i32,
    pub tile: TileWidth,
    pub colors: i32,
    pub cooldown_us: i64,
    pub state: String,
    pub seq: i64,
    pub keyframe_every: Option<i64>,
    /// Whether this database's schema is 0.2.0's or later (place.bans, boards.last_placed_at).
    pub v0_2: bool,
    /// Whether this database's schema is 0.5.0's or later: placements take their seqs
    /// under the board's seq lock from the history ([`bump_seq`]); before, from the board's
    /// row, which they updated.
    pub seqs_from_history: bool,
    /// Whether this database's schema is 0.6.0's or later: chunks and cooldowns are written
    /// as versions ([`crate::chunks`], [`crate::cooldowns`]); before, updated in place.
    pub versions: bool,
    /// Whether this database's schema is 0.8.4's or later: placements write no chunk, the
    /// chunks are folded up to a seq ([`crate::folds`]), and the library announces the
    /// placements (before, the statement trigger that 0.8.4's update drops did).
    pub folds: bool,
    /// Whether this database's schema is 0.8.5's or later: a placement writes no cooldown,
    /// the history is its users' cooldowns ([`crate::cooldowns`]).
    pub cooldowns_from_history: bool,
    pub history_from: i64,
    /// How long a non-zero tile rests unchanged before it freezes (None: never).
    pub freeze_after_us: Option<i64>,
}

// `*`, read by name: the library of a newer version must still serve a database whose
// schema is an older version's until ALTER EXTENSION UPDATE runs (columns a version adds
// are then simply absent), and a kept plan re-expands `*` after the table changes.
macro_rules! select_board {
    () => {
        "SELECT *, cardinality(palette) AS colors, \
         (extract(epoch FROM cooldown) * 1000000)::bigint AS cooldown_us \
         FROM place.boards WHERE id = $1"
    };
}

static LOAD_BOARD: Statement = Statement {
    sql: select_board!(),
    params: &[pg_sys::INT8OID],
};
static LOCK_BOARD: Statement = Statement {
    // Taken after the seq lock. NO KEY UPDATE: conflicts with a placement's seq bump on a
    // schema from before 0.5.0, not with the foreign-key checks (KEY SHARE) placements take.
    sql: concat!(select_board!(), " FOR NO KEY UPDATE"),
    params: &[pg_sys::INT8OID],
};

/// Column `name` of a board row: None when this database's schema has no such column.
fn optional<T: FromDatum + IntoDatum>(row: &SpiHeapTupleData<'_>, name: &str) -> Option<T> {
    row.get_by_name::<T, _>(name).ok().flatten()
}

fn named<T: FromDatum + IntoDatum>(row: &SpiHeapTupleData<'_>, name: &str) -> T {
    optional(row, name).unwrap_or_else(|| panic!("boards.{name} is missing or NULL"))
}

/// An interval without months (the setters refuse months) in microseconds.
fn micros(interval: Interval) -> i64 {
    i64::from(interval.days()) * 86_400_000_000 + interval.micros()
}

impl Board {
    /// The board, or an error naming the unknown id. With `lock`, the board's seq lock and
    /// row stay locked until the transaction ends, so a settings change waits for
    /// placements in flight and they for it.
    pub fn load(client: &mut SpiClient<'_>, id: i64, lock: bool) -> Board {
        if lock {
            lock_seqs(client, id);
        }
        let statement = if lock { &LOCK_BOARD } else { &LOAD_BOARD };
        let mut rows = run(client, statement, &[id.into()]);
        let Some(row) = rows.next() else {
            undefined(format!("board {id} does not exist"));
        };
        let bits = named::<i32>(&row, "bits_per_tile");
        let board = Board {
            id,
            name: named(&row, "name"),
            width: named(&row, "width"),
            height: named(&row, "height"),
            tile: TileWidth::new(bits.into()).expect("boards.bits_per_tile is CHECKed"),
            colors: named(&row, "colors"),
            cooldown_us: named(&row, "cooldown_us"),
            state: named(&row, "state"),
            seq: named(&row, "seq"),
            // Absent before 0.2.0: no keyframes are written, the history is whole.
            keyframe_every: optional::<i32>(&row, "keyframe_every").map(i64::from),
            // These came with keyframe_every (0.2.0).
            v0_2: row.get_by_name::<i32, _>("keyframe_every").is_ok(),
            seqs_from_history: crate::catalog::board_settings_exist(),
            versions: crate::catalog::chunk_versions_exist(),
            folds: crate::catalog::chunk_folds_exist(),
            cooldowns_from_history: crate::catalog::cooldowns_from_history(),
            history_from: optional(&row, "history_from").unwrap_or(0),
            freeze_after_us: optional::<Interval>(&row, "freeze_after").map(micros),
        };
        if lock && board.seqs_from_history {
            refuse_unseen_placements(client, id);
        }
        board
    }

    pub fn tiles(&self) -> u64 {
        self.width as u64 * self.height as u64
    }

    pub fn packed_len(&self) -> usize {
        self.tile.packed_len(self.tiles())
    }

    /// Checks a coordinate; `label` names the argument in the error (`x`, `xs[3]`).
    pub fn check_coordinate(&self, axis: char, label: &str, value: i32) {
        let size = if axis == 'x' { self.width } else { self.height };
        if !(0..size).contains(&value) {
            out_of_range(format!(
                "{label} = {value} is outside board {} (0 <= {axis} <= {})",
                self.id,
                size - 1
            ));
        }
    }

    pub fn check_color(&self, label: &str, value: i32) {
        if !(0..self.colors).contains(&value) {
            out_of_range(format!(
                "{label} = {value} is not in the palette of board {} (0 <= color <= {})",
                self.id,
                self.colors - 1
            ));
        }
    }

    pub fn check_open(&self) {
        check_open(self.id, &self.name, &self.state);
    }
}

/// Refuses placements on a board that is not open.
fn check_open(id: i64, name: &str, state: &str) {
    if state != "open" {
        fail(
            PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            format!(
                "board {id} ('{name}') is {state}: it accepts no placements until it is opened \
                 again (place.set_board_state({id}, 'open'))"
            ),
        );
    }
}

// The board's seq lock is its settings row: only pgplace's functions may lock it (a row lock
// asks for UPDATE on the table, which no role but the owner has), unlike an advisory lock,
// which any login can take on any key. NO KEY UPDATE: placements take turns on it, while
// the foreign-key checks of their rows (KEY SHARE) go on beside it.
static SEQ_LOCK: Statement = Statement {
    sql: "SELECT FROM place.board_settings WHERE id = $1 FOR NO KEY UPDATE",
    params: &[pg_sys::INT8OID],
};

static SEQ_LOCK_SHARED: Statement = Statement {
    sql: "SELECT FROM place.board_settings WHERE id = $1 FOR SHARE",
    params: &[pg_sys::INT8OID],
};

// Before 0.5.0 the board's row was place.boards, a table (updated by every placement).
static SEQ_LOCK_0_4: Statement = Statement {
    sql: "SELECT FROM place.boards WHERE id = $1 FOR NO KEY UPDATE",
    params: &[pg_sys::INT8OID],
};

static SEQ_LOCK_SHARED_0_4: Statement = Statement {
    sql: "SELECT FROM place.boards WHERE id = $1 FOR SHARE",
    params: &[pg_sys::INT8OID],
};

/// Takes the board's seq lock until commit: placements hold it from taking their seqs to
/// their commit, settings changes while they change the board.
pub fn lock_seqs(client: &mut SpiClient<'_>, board_id: i64) {
    let statement = if crate::catalog::board_settings_exist() {
        &SEQ_LOCK
    } else {
        &SEQ_LOCK_0_4
    };
    run(client, statement, &[board_id.into()]);
}

/// Waits until no placement holds the board's seq lock (it is then held shared until the
/// transaction ends, keeping new ones out).
pub fn settle_seqs(client: &mut SpiClient<'_>, board_id: i64) {
    let statement = if crate::catalog::board_settings_exist() {
        &SEQ_LOCK_SHARED
    } else {
        &SEQ_LOCK_SHARED_0_4
    };
    run(client, statement, &[board_id.into()]);
}

// Read after the seq lock is taken, in a statement of its own: a statement's snapshot is
// taken when it starts, so this one sees every placement committed before the lock came.
// The same seq and stamp as the view place.boards shows, with one probe of the history.
macro_rules! head {
    ($($folded:tt)*) => {
        concat!(
            "SELECT coalesce(p.seq, s.history_from) + 1, s.state, s.width, s.height, s.bits_per_tile, \
                    cardinality(s.palette), \
                    greatest(coalesce(p.placed_at, \
                                      (SELECT k.taken_at FROM place.keyframes k \
                                       WHERE k.board_id = s.id AND k.seq = s.history_from AND s.history_from > 0)), \
                             $3), \
                    s.freeze_after, clock_timestamp(), s.history_from, ",
            $($folded)*,
            " FROM place.board_settings s \
             LEFT JOIN LATERAL (SELECT seq, placed_at FROM place.placements \
                                WHERE board_id = s.id ORDER BY seq DESC LIMIT 1) p ON true \
             WHERE s.id = $1 AND $2 > 0"
        )
    };
}

// Since 0.8.4 also the seq the chunks are folded up to (crate::folds), under the same lock.
macro_rules! folded {
    () => {
        concat!("(", crate::fold_sql::newest_fold!("s.id"), ")")
    };
}

const HEAD_PARAMS: [pg_sys::Oid; 3] = [pg_sys::INT8OID, pg_sys::INT8OID, pg_sys::TIMESTAMPTZOID];

static HEAD: Statement = Statement {
    sql: head!("NULL::bigint"),
    params: &HEAD_PARAMS,
};

static HEAD_FOLDED: Statement = Statement {
    sql: head!(folded!()),
    params: &HEAD_PARAMS,
};

/// Under REPEATABLE READ the transaction's snapshot may predate a settings change that
/// committed while the call waited for the seq lock: FOR SHARE then fails with 40001
/// instead of placing by the settings of before. (A placement the snapshot misses makes
/// the history INSERT fail with 40001: [`crate::writing`].)
static HEAD_REPEATABLE: Statement = Statement {
    sql: concat!(head!("NULL::bigint"), " FOR SHARE OF s"),
    params: &HEAD_PARAMS,
};

static HEAD_FOLDED_REPEATABLE: Statement = Statement {
    sql: concat!(head!(folded!()), " FOR SHARE OF s"),
    params: &HEAD_PARAMS,
};

static BUMP_SEQ: Statement = Statement {
    // greatest() skips a NULL (a board from before 0.2.0, or without placements yet).
    sql: "UPDATE place.boards SET seq = seq + $2, last_placed_at = greatest(last_placed_at, $3) \
          WHERE id = $1 \
          RETURNING seq - $2 + 1, state, width, height, bits_per_tile, cardinality(palette), last_placed_at, \
                    freeze_after, clock_timestamp(), history_from",
    params: &[pg_sys::INT8OID, pg_sys::INT8OID, pg_sys::TIMESTAMPTZOID],
};

/// A 0.1.0 schema (before ALTER EXTENSION UPDATE) has no boards.last_placed_at.
static BUMP_SEQ_0_1: Statement = Statement {
    sql: "UPDATE place.boards SET seq = seq + $2 WHERE id = $1 \
          RETURNING seq - $2 + 1, state, width, height, bits_per_tile, cardinality(palette), $3, \
                    NULL::interval, clock_timestamp(), 0::bigint",
    params: &[pg_sys::INT8OID, pg_sys::INT8OID, pg_sys::TIMESTAMPTZOID],
};

/// What taking the seqs tells: the first seq, the time to stamp the placements with, and
/// the board as it is under its lock.
pub struct Bumped {
    pub first_seq: i64,
    /// `now`, or the newest placement's stamp if that is later (its call read the clock
    /// later but took its seq first): stamps never go back as seqs go up.
    pub stamp: pg_sys::TimestampTz,
    /// The clock once the board's seq lock is held.
    pub locked_at: pg_sys::TimestampTz,
    /// freeze_after now (it may have been set while the call waited).
    pub freeze_after_us: Option<i64>,
    /// history_from now (a compaction may have committed while the call waited).
    pub history_from: i64,
    /// Since 0.8.4, the seq the chunks are folded up to (None: they are current).
    pub folded_seq: Option<i64>,
}

/// Takes the board's seq lock (held until commit) and `count` seqs: the newest seq in the
/// history plus one onwards. Holding the lock to commit hands seqs out gap-free in commit
/// order; nothing is written to the board's row, so a snapshot held elsewhere leaves no
/// dead versions behind for later placements to walk. (A schema from before 0.5.0 keeps
/// the seq in the board's row: there the row is updated and its lock is the seq lock.)
/// The board must still be as the call saw it before it waited here.
pub fn bump_seq(
    client: &mut SpiClient<'_>,
    board: &Board,
    count: i64,
    now: pg_sys::TimestampTz,
    require_open: bool,
) -> Bumped {
    crate::require_standby::check_before_placing();
    crate::early_release::seq_lock_taken();
    let statement = if board.seqs_from_history {
        // Seqs from the history came with place.board_settings (0.5.0): its row is the lock,
        // without asking the catalog again as lock_seqs does.
        run(client, &SEQ_LOCK, &[board.id.into()]);
        match (board.folds, repeatable_read()) {
            (false, false) => &HEAD,
            (false, true) => &HEAD_REPEATABLE,
            (true, false) => &HEAD_FOLDED,
            (true, true) => &HEAD_FOLDED_REPEATABLE,
        }
    } else if board.v0_2 {
        &BUMP_SEQ
    } else {
        &BUMP_SEQ_0_1
    };
    let now = TimestampWithTimeZone::try_from(now).expect("a clock reading is a valid time");
    let mut rows = run(
        client,
        statement,
        &[board.id.into(), count.into(), now.into()],
    );
    // Again with the lock held: a placement queued behind a COMMIT that waited for the
    // standbys passed the first check before their names were emptied.
    crate::require_standby::check_before_placing();
    let Some(row) = rows.next() else {
        undefined(format!("board {} does not exist", board.id));
    };
    let get_i32 = |i| column::<i32>(&row, i);
    if require_open {
        check_open(board.id, &board.name, &column::<String>(&row, 2));
    }
    let same = (get_i32(3), get_i32(4), get_i32(5) as u32, get_i32(6))
        == (board.width, board.height, board.tile.bits(), board.colors);
    if !same {
        fail(
            PgSqlErrorCode::ERRCODE_T_R_SERIALIZATION_FAILURE,
            format!(
                "board {} changed its size or palette during the call; try again",
                board.id
            ),
        );
    }
    let time = |i| pg_sys::TimestampTz::from(column::<TimestampWithTimeZone>(&row, i));
    Bumped {
        first_seq: column::<i64>(&row, 1),
        stamp: time(7),
        locked_at: time(9),
        freeze_after_us: row
            .get::<Interval>(8)
            .unwrap_or_else(|e| panic!("boards.freeze_after: {e}"))
            .map(micros),
        history_from: column::<i64>(&row, 10),
        folded_seq: row.get::<i64>(11).ok().flatten(),
    }
}

/// Before 0.6.0 (`place.board_chunks` a table).
static READ_PACKED: Statement = Statement {
    sql: "SELECT b.seq, (SELECT string_agg(c.bits, ''::bytea ORDER BY c.chunk_no) \
                        FROM place.board_chunks c WHERE c.board_id = b.id) \
          FROM place.boards b WHERE b.id = $1",
    params: &[pg_sys::INT8OID],
};

/// Refuses bits read in another statement than `board` when a resize came in between.
pub fn check_same_size(board: &Board, bits: &[u8]) {
    if bits.len() != board.packed_len() {
        changed_size(board.id);
    }
}

/// A resize replaced the board's chunks while the call waited (40001: try again).
pub fn changed_size(board_id: i64) -> ! {
    fail(
        PgSqlErrorCode::ERRCODE_T_R_SERIALIZATION_FAILURE,
        format!("board {board_id} changed its size during the call; try again"),
    )
}

// The whole-board maintenance of one board takes turns on the board's row of
// place.board_maintenance (made when first needed), which only pgplace's functions can lock;
// placements never touch it. Before 0.8.0 there is no such table: an advisory lock, class
// 0x70676c63 ('pglc') and the board id's low 31 bits.
static MAINTENANCE_ROW: Statement = Statement {
    // A board that does not exist gets no row (the load that follows says so).
    sql:
        "INSERT INTO place.board_maintenance (board_id) \
          SELECT s.id FROM place.board_settings s WHERE s.id = $1 ON CONFLICT (board_id) DO NOTHING",
    params: &[pg_sys::INT8OID],
};

static MAINTENANCE_LOCK: Statement = Statement {
    sql: "SELECT FROM place.board_maintenance WHERE board_id = $1 FOR UPDATE",
    params: &[pg_sys::INT8OID],
};

static MAINTENANCE_LOCK_0_7: Statement = Statement {
    sql: "SELECT pg_advisory_xact_lock(1885826147, ($1 & 2147483647)::int)",
    params: &[pg_sys::INT8OID],
};

/// Serializes the whole-board maintenance of one board (resize, compaction, keyframe
/// building) until commit: they lock keyframes and chunks in different orders.
pub fn lock_maintenance(client: &mut SpiClient<'_>, board_id: i64) {
    if crate::catalog::place_relation(c"board_maintenance").is_none() {
        run(client, &MAINTENANCE_LOCK_0_7, &[board_id.into()]);
        return;
    }
    run(client, &MAINTENANCE_ROW, &[board_id.into()]);
    run(client, &MAINTENANCE_LOCK, &[board_id.into()]);
}

static READ_PACKED_VERSIONS: Statement = Statement {
    sql: "SELECT b.seq, place._newest_bits(b.id) FROM place.boards b WHERE b.id = $1",
    params: &[pg_sys::INT8OID],
};

/// Since 0.8.4: the chunks and the history after their fold (crate::folds).
static READ_PACKED_FOLDED: Statement = Statement {
    sql: "SELECT b.seq, place._current_bits(b.id) FROM place.boards b WHERE b.id = $1",
    params: &[pg_sys::INT8OID],
};

/// The whole packed board and the seq it reflects, read in one statement (one snapshot).
pub fn read_packed(client: &mut SpiClient<'_>, board_id: i64) -> (i64, Vec<u8>) {
    let statement = if crate::catalog::chunk_folds_exist() {
        &READ_PACKED_FOLDED
    } else if crate::catalog::chunk_versions_exist() {
        &READ_PACKED_VERSIONS
    } else {
        &READ_PACKED
    };
    let mut rows = run_by_index(client, statement, &[board_id.into()]);
    let Some(row) = rows.next() else {
        undefined(format!("board {board_id} does not exist"));
    };
    let seq = column::<i64>(&row, 1);
    let bits = row.get::<Vec<u8>>(2).ok().flatten().unwrap_or_default();
    (seq, bits)
}
