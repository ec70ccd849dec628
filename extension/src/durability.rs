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
use std::cell::Cell;

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
        wait_until(upto, upto);
    }
}

thread_local! {
    /// The writer `await_durable(xid)` last found durable, and the start of the statement
    /// it was in: the rows a statement reads mostly share their writer (a gateway's group
    /// is one transaction), and a later statement asks again (an xid is reused after
    /// 2^32 transactions).
    static LAST_DURABLE: Cell<(pg_sys::TimestampTz, pg_sys::TransactionId)> =
        const { Cell::new((0, pg_sys::InvalidTransactionId)) };
}

/// Waits until the transaction that wrote a row (its `xmin`) is durable, as
/// `await_durable()` does for everything committed, and answers true:
/// `SELECT … FROM t WHERE … AND place.await_durable(xmin)` shows only durable rows.
/// Where `await_durable()` flushes the WAL of every transaction in flight, this flushes
/// only as far as an asynchronous commit among the rows' writers needs (the commit log
/// keeps each one's commit record, as hint bits use it), and nothing when they committed
/// synchronously: their commits were flushed before anyone could see them.
#[pg_extern(name = "await_durable", strict, volatile, parallel_unsafe)]
fn await_durable_writer(writer: pg_sys::TransactionId) -> bool {
    // SAFETY: as await_durable(); the commit log is read under XactTruncationLock.
    unsafe {
        let statement = pg_sys::GetCurrentStatementStartTimestamp();
        if pg_sys::RecoveryInProgress() || LAST_DURABLE.get() == (statement, writer) {
            return true;
        }
        let commit = asynchronous_commit_end(writer);
        // A synchronous commit was flushed before it became visible (so it ends before
        // the flush pointer) but waited for the standbys only if its synchronous_commit
        // asked to: a session's `local` is visible before they have it.
        let on_standbys = commit.max(pg_sys::GetFlushRecPtr(std::ptr::null_mut()));
        wait_until(commit, on_standbys);
        LAST_DURABLE.set((statement, writer));
    }
    true
}

/// XactTruncationLock (PostgreSQL 15's storage/lwlocknames.h, which pgrx does not bind):
/// the commit log is not truncated under a lookup while it is held, as in pg_xact_status.
const XACT_TRUNCATION_LOCK: usize = 44;

/// Where transaction `xid`'s commit record ends if it committed asynchronously and may not
/// be flushed yet (an upper bound: the commit log keeps one position per 32 transactions);
/// 0 when it committed synchronously, is not one of the commit log's (special, future, or
/// truncated away: the truncation's WAL record, flushed before the files go, comes after
/// the commits it forgets), or its page was written out (which flushes the WAL up to that
/// position first).
unsafe fn asynchronous_commit_end(xid: pg_sys::TransactionId) -> pg_sys::XLogRecPtr {
    if !pg_sys::TransactionIdIsNormal(xid) {
        return 0;
    }
    let next = pg_sys::ReadNextFullTransactionId();
    let next = pg_sys::TransactionId::from_inner(next.value as u32);
    if !pg_sys::TransactionIdPrecedes(xid, next) {
        return 0;
    }
    let lock = &raw mut (*pg_sys::MainLWLockArray.add(XACT_TRUNCATION_LOCK)).lock;
    pg_sys::LWLockAcquire(lock, pg_sys::LWLockMode::LW_SHARED);
    let end = if pg_sys::TransactionIdPrecedes(xid, (*pg_sys::ShmemVariableCache).oldestClogXid) {
        0
    } else {
        pg_sys::TransactionIdGetCommitLSN(xid)
    };
    pg_sys::LWLockRelease(lock);
    end
}

/// Flushes this server's WAL to `flushed` (0: nothing to flush), then waits for the
/// synchronous standbys that this backend's `synchronous_commit` asks for to confirm `upto`.
unsafe fn wait_until(flushed: pg_sys::XLogRecPtr, upto: pg_sys::XLogRecPtr) {
    unsafe {
        if flushed != 0 {
            pg_sys::XLogFlush(flushed);
        }
        let strict = crate::require_standby::required();
        let Some(mode) = standby_wait_mode() else {
            // A setup error, not the caller's input (22xxx is what a client got wrong):
            // the gateway logs it and answers an internal error.
            if strict {
                crate::input::fail(
                    PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
                    "pgplace.require_synchronous_standby is on, but nothing asks the \
                     standbys here (synchronous_commit local or off, or max_wal_senders 0): \
                     set synchronous_commit to on, remote_write or remote_apply"
                        .into(),
                );
            }
            return;
        };
        pg_sys::SyncRepWaitForLSN(upto, false);
        let confirmed = std::ptr::read_volatile(&raw const (*pg_sys::WalSndCtl).lsn[mode]);
        // Released without the standbys' answer: by a cancel while they are still named
        // (also before the checkpointer has first set WalSndCtl's flags, when the setting
        // itself names them and SyncRepWaitForLSN waits on its word); or by their names
        // being emptied, or none named at all, which pgplace.require_synchronous_standby
        // does not take for an answer.
        let still_required = crate::require_standby::synchronous_standbys_named();
        if still_required && confirmed < upto {
            crate::input::fail(
                PgSqlErrorCode::ERRCODE_QUERY_CANCELED,
                "the wait for the synchronous standby was cancelled: what was committed may \
                 not be durable yet"
                    .into(),
            );
        }
        if strict && confirmed < upto {
            crate::input::fail(
                PgSqlErrorCode::ERRCODE_QUERY_CANCELED,
                "no synchronous standby confirmed what was committed (none is named, and \
                 pgplace.require_synchronous_standby is on): it may not be durable yet"
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
