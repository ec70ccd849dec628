//! Waiting until what was read is durable.
//!
//! A gateway with `--commit asynchronous` commits its groups of placements before they are
//! durable, so that a board's seq lock is not held across the WAL flush and the synchronous
//! standby's answer; it waits for durability itself before it answers a caller. An
//! asynchronous commit is visible to other transactions before it is durable, so every
//! reader that shows a client what it read waits here first: otherwise a crash or a
//! failover could take back a seq a client has seen and give it to another placement.

use pgrx::prelude::*;
use pgrx::PgSqlErrorCode;

/// Waits until every transaction that committed before the call is durable: its commit
/// record flushed to this server's WAL and, when `synchronous_commit` asks for synchronous
/// standbys (on, remote_write, remote_apply) and some are named, confirmed by them
/// (flushed; written for remote_write). Returns at once when nothing is pending. On a
/// standby there is nothing to wait for: it replays only WAL the primary has flushed.
/// A wait for the standbys that is cancelled (pg_cancel_backend, statement_timeout) is an
/// error here (57014), not the warning a cancelled COMMIT gives: the caller must not take
/// the data for durable.
#[pg_extern(volatile, parallel_unsafe)]
fn await_durable() {
    // SAFETY: plain calls into the WAL and syncrep APIs from a backend, outside recovery;
    // WalSndCtl is set up at startup whenever max_wal_senders > 0 (checked first).
    unsafe {
        if pg_sys::RecoveryInProgress() {
            return;
        }
        // Every commit this transaction's snapshot or an earlier statement saw has its
        // commit record inserted before it became visible, so it ends at or before the end
        // of what is inserted now. (Not GetXLogInsertRecPtr: at a page boundary that is
        // past the next page's header, which no flush reaches until a record is there.)
        let upto = pg_sys::GetXLogInsertEndRecPtr();
        pg_sys::XLogFlush(upto);
        let Some(mode) = standby_wait_mode() else {
            return;
        };
        pg_sys::SyncRepWaitForLSN(upto, false);
        let control = pg_sys::WalSndCtl;
        let status = std::ptr::read_volatile(&raw const (*control).sync_standbys_status);
        let confirmed = std::ptr::read_volatile(&raw const (*control).lsn[mode]);
        let still_required = u32::from(status) & pg_sys::SYNC_STANDBY_DEFINED != 0;
        if still_required && confirmed < upto {
            crate::input::fail(
                PgSqlErrorCode::ERRCODE_QUERY_CANCELED,
                "the wait for the synchronous standby was cancelled: what was committed may \
                 not be durable yet"
                    .into(),
            );
        }
    }
}

/// The confirmation this backend's `synchronous_commit` asks of synchronous standbys
/// (an index into WalSndCtl's lsn), or None when it asks for none. A wait that is not a
/// commit's asks at most for the flush, as SyncRepWaitForLSN does.
unsafe fn standby_wait_mode() -> Option<usize> {
    use pg_sys::SyncCommitLevel::*;
    if pg_sys::max_wal_senders <= 0 || pg_sys::WalSndCtl.is_null() {
        return None;
    }
    match pg_sys::synchronous_commit as pg_sys::SyncCommitLevel::Type {
        SYNCHRONOUS_COMMIT_REMOTE_WRITE => Some(pg_sys::SYNC_REP_WAIT_WRITE as usize),
        SYNCHRONOUS_COMMIT_REMOTE_FLUSH | SYNCHRONOUS_COMMIT_REMOTE_APPLY => {
            Some(pg_sys::SYNC_REP_WAIT_FLUSH as usize)
        }
        _ => None,
    }
}
