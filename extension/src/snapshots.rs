//! REPEATABLE READ and SERIALIZABLE callers of the functions that wait for placements
//! (settings changes, `settled_seq`). Before 0.5.0 every placement updated its board's row,
//! so locking that row after a placement the caller's snapshot did not see failed with
//! 40001 by itself. Placements no longer touch the row: the functions ask here instead.

use crate::input::fail;
use crate::spi::{run, Statement};
use pgrx::datum::{FromDatum, IntoDatum};
use pgrx::spi::SpiClient;
use pgrx::{pg_sys, PgSqlErrorCode};
use std::ffi::CString;

/// Whether the transaction reads from one snapshot (REPEATABLE READ or SERIALIZABLE).
pub fn repeatable_read() -> bool {
    // SAFETY: a plain read of a backend-local global.
    unsafe { pg_sys::XactIsoLevel >= pg_sys::XACT_REPEATABLE_READ as i32 }
}

/// Of two forms of a statement, the one for this transaction's isolation: a write that
/// READ COMMITTED's fresh snapshot keeps free of conflicts, and its form with ON CONFLICT,
/// which turns a conflict with a row the snapshot misses into 40001 (crate::chunks).
pub fn for_isolation(
    committed: &'static Statement,
    repeatable: &'static Statement,
) -> &'static Statement {
    if repeatable_read() {
        repeatable
    } else {
        committed
    }
}

static NEWEST_SEQ: Statement = Statement {
    sql: "SELECT max(seq) FROM place.placements WHERE board_id = $1",
    params: &[pg_sys::INT8OID],
};

/// Under REPEATABLE READ or SERIALIZABLE, fails with 40001 when the board's history has
/// changed since the transaction's snapshot (a placement committed, or a compaction).
/// Call it holding the board's seq lock, so nothing changes after the check.
pub fn refuse_unseen_placements(client: &mut SpiClient<'_>, board_id: i64) {
    if !repeatable_read() {
        return;
    }
    let seen = run(client, &NEWEST_SEQ, &[board_id.into()])
        .next()
        .and_then(|row| row.get::<i64>(1).ok().flatten());
    // SAFETY: SPI is connected (we hold a client); the statement is read-only.
    let latest = unsafe { newest_seq_now(board_id) };
    if seen != latest {
        fail(
            PgSqlErrorCode::ERRCODE_T_R_SERIALIZATION_FAILURE,
            format!(
                "could not serialize access: board {board_id} got placements after this \
                 transaction's snapshot; try again"
            ),
        );
    }
}

/// The board's newest seq as the latest snapshot sees it (not the transaction's): the
/// same statement, run with SPI_execute_snapshot.
unsafe fn newest_seq_now(board_id: i64) -> Option<i64> {
    let sql = CString::new(NEWEST_SEQ.sql).expect("no NUL in the statement");
    let mut types = NEWEST_SEQ.params.to_vec();
    let plan = pg_sys::SPI_prepare(sql.as_ptr(), types.len() as i32, types.as_mut_ptr());
    assert!(!plan.is_null(), "preparing {sql:?} failed");
    let mut values = [board_id.into_datum().expect("an i64 is a datum")];
    let status = pg_sys::SPI_execute_snapshot(
        plan,
        values.as_mut_ptr(),
        std::ptr::null(),
        pg_sys::GetLatestSnapshot(),
        std::ptr::null_mut(),
        true,
        false,
        1,
    );
    assert_eq!(status, pg_sys::SPI_OK_SELECT as i32, "running {sql:?}");
    let table = pg_sys::SPI_tuptable;
    assert!(
        !table.is_null() && (*table).numvals == 1,
        "{sql:?} returned no row"
    );
    let mut is_null = false;
    let datum = pg_sys::SPI_getbinval(*(*table).vals, (*table).tupdesc, 1, &mut is_null);
    let newest = i64::from_datum(datum, is_null);
    pg_sys::SPI_freeplan(plan);
    newest
}
