//! A board's packed bits read straight from the primary key of `place.chunk_versions`
//! (`place._newest_bits`, what [`crate::storage::read_packed`] calls since 0.6.0).
//!
//! The view `place.board_chunks` finds each chunk's newest version with one backward scan of
//! the key per chunk, as a nested loop of rescans of a `LIMIT 1` subquery and then an
//! ordered `string_agg`. Here the same probes (backward, stopping at the first version the
//! snapshot sees, so no probe walks the versions an old snapshot keeps) run without the
//! executor around them: a 1000x1000x4 board (977 chunks) in 4.0-6.4 ms against the view's
//! 8.2-10.7 ms. What a probe still costs is the btree's: it checks every index entry of its
//! chunk on the leaf page (dead versions too, until vacuum removes them).

use crate::input::fail;
use pgrx::prelude::*;
use pgrx::{pg_sys, PgSqlErrorCode};

/// The bits of chunks 0, 1, 2, ... of board `board_id`, each its newest version visible to
/// the calling statement's snapshot, concatenated; ends at the first chunk without one.
/// Called inside the statement that also reads the board's seq, so both are one snapshot.
#[pg_extern(stable, strict, parallel_restricted)]
pub fn _newest_bits(board_id: i64) -> Vec<u8> {
    // SAFETY: runs inside a statement (an active snapshot, checked), on relations opened
    // and locked here; every pointer comes from Postgres and is used before it is freed.
    unsafe { newest_bits(board_id) }
}

unsafe fn newest_bits(board_id: i64) -> Vec<u8> {
    if !pg_sys::ActiveSnapshotSet() {
        fail(
            PgSqlErrorCode::ERRCODE_INVALID_TRANSACTION_STATE,
            "place._newest_bits must run inside a statement".into(),
        );
    }
    let table = relation(c"chunk_versions");
    let key = relation(c"chunk_versions_pkey");
    // What the executor checks for a SELECT of the table (the view ran as its caller).
    let allowed = pg_sys::pg_class_aclcheck(
        table,
        pg_sys::GetUserId(),
        pg_sys::ACL_SELECT as pg_sys::AclMode,
    );
    if allowed != pg_sys::AclResult::ACLCHECK_OK {
        pg_sys::aclcheck_error(
            allowed,
            pg_sys::ObjectType::OBJECT_TABLE,
            c"chunk_versions".as_ptr(),
        );
    }
    if pg_sys::check_enable_rls(table, pg_sys::InvalidOid, false)
        == pg_sys::CheckEnableRlsResult::RLS_ENABLED as i32
    {
        fail(
            PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
            "row-level security on place.chunk_versions is not supported".into(),
        );
    }
    // Held to the end of the transaction, as the executor holds what a statement read.
    let heap = pg_sys::table_open(table, pg_sys::AccessShareLock as pg_sys::LOCKMODE);
    let index = pg_sys::index_open(key, pg_sys::AccessShareLock as pg_sys::LOCKMODE);
    let scan = pg_sys::index_beginscan(heap, index, pg_sys::GetActiveSnapshot(), 2, 0);
    let slot = pg_sys::table_slot_create(heap, std::ptr::null_mut());
    let mut keys: [pg_sys::ScanKeyData; 2] = std::mem::zeroed();
    pg_sys::ScanKeyInit(
        &mut keys[0],
        1,
        pg_sys::BTEqualStrategyNumber as pg_sys::StrategyNumber,
        pg_sys::Oid::from(pg_sys::F_INT8EQ),
        pg_sys::Datum::from(board_id),
    );
    let mut packed = Vec::new();
    for chunk_no in 0..i32::MAX {
        pg_sys::ScanKeyInit(
            &mut keys[1],
            2,
            pg_sys::BTEqualStrategyNumber as pg_sys::StrategyNumber,
            pg_sys::Oid::from(pg_sys::F_INT4EQ),
            pg_sys::Datum::from(chunk_no),
        );
        pg_sys::index_rescan(scan, keys.as_mut_ptr(), 2, std::ptr::null_mut(), 0);
        // Backward: the newest version first; the first one the snapshot sees is the one.
        if !pg_sys::index_getnext_slot(scan, pg_sys::ScanDirection::BackwardScanDirection, slot) {
            break;
        }
        let mut null = false;
        let bits = pg_sys::slot_getattr(slot, 4, &mut null);
        if null {
            break;
        }
        let bits = pg_sys::pg_detoast_datum_packed(bits.cast_mut_ptr());
        packed.extend_from_slice(pgrx::varlena::varlena_to_byte_slice(bits));
        pg_sys::ExecClearTuple(slot);
    }
    pg_sys::ExecDropSingleTupleTableSlot(slot);
    pg_sys::index_endscan(scan);
    pg_sys::index_close(index, pg_sys::NoLock as pg_sys::LOCKMODE);
    pg_sys::table_close(heap, pg_sys::NoLock as pg_sys::LOCKMODE);
    packed
}

/// The oid of relation `name` in schema `place`.
fn relation(name: &std::ffi::CStr) -> pg_sys::Oid {
    crate::catalog::place_relation(name).unwrap_or_else(|| {
        fail(
            PgSqlErrorCode::ERRCODE_UNDEFINED_TABLE,
            format!("place.{} does not exist", name.to_string_lossy()),
        )
    })
}
