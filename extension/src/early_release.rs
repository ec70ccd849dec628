//! `pgplace.release_before_flush`: a placing transaction frees its board's seq lock before
//! its commit's WAL flush (and the synchronous standbys' answer), and its COMMIT still
//! returns only once it is durable.
//!
//! A board hands out seqs under one lock held to commit, so single placements from SQL
//! (`place()`) commit one after another, each holding the lock across its own flush: no
//! two can share one. With the setting on, a transaction that took a seq lock commits
//! asynchronously (its commit record inserted, not yet flushed), PostgreSQL releases its
//! locks, and only then does the backend flush to that record and wait for the standbys
//! as `synchronous_commit` asked, before the client hears COMMIT. The next placement
//! takes the lock during that flush, and waiting committers share flushes.
//!
//! What it costs: the placement (and its NOTIFY, to a listener another commit woke) is
//! visible to other transactions before it is durable, as any commit is before a
//! synchronous standby confirms it. A crash in that window takes back a seq that a reader
//! may have seen (never one a caller was told of: its COMMIT had not returned). pgplace's
//! gateway waits for durability before it shows anything it read (`place.await_durable`),
//! but a psql `SELECT` on the history does not: hence off by default. WAL order keeps the
//! history gap-free through a crash: the next seq's commit record comes after this one's,
//! so it is never durable without it.

use pgrx::guc::{GucContext, GucFlags, GucRegistry, GucSetting};
use pgrx::pg_sys;
use std::cell::Cell;

pub static RELEASE_BEFORE_FLUSH: GucSetting<bool> = GucSetting::<bool>::new(false);

/// Where the current transaction is on that path.
#[derive(Clone, Copy, PartialEq)]
enum State {
    Idle,
    /// A seq lock was taken with the setting on: commit asynchronously.
    Wanted,
    /// Committing asynchronously; the `synchronous_commit` to restore and to wait by.
    Committing(i32),
}

thread_local! {
    static STATE: Cell<State> = const { Cell::new(State::Idle) };
}

pub fn init() {
    GucRegistry::define_bool_guc(
        c"pgplace.release_before_flush",
        c"Placing transactions free the board's seq lock before their commit's WAL flush.",
        c"COMMIT still returns once the commit is durable (flushed, and confirmed by the \
          synchronous standbys synchronous_commit asks for); other transactions may see the \
          placement before then, and a crash in that window takes it back.",
        &RELEASE_BEFORE_FLUSH,
        GucContext::Userset,
        GucFlags::default(),
    );
    // SAFETY: called once, from _PG_init, in a backend; the callbacks live as long as it.
    unsafe {
        pg_sys::RegisterXactCallback(Some(on_transaction_end), std::ptr::null_mut());
        pg_sys::RegisterResourceReleaseCallback(Some(after_locks), std::ptr::null_mut());
    }
}

/// Called by a transaction as it takes a board's seq lock for placements. (A placement
/// undone by ROLLBACK TO keeps it wanted: the commit is then asynchronous and flushed
/// after, which costs nothing and loses nothing.)
pub fn seq_lock_taken() {
    if RELEASE_BEFORE_FLUSH.get() && STATE.get() == State::Idle {
        STATE.set(State::Wanted);
    }
}

#[pgrx::pg_guard]
unsafe extern "C-unwind" fn on_transaction_end(
    event: pg_sys::XactEvent::Type,
    _arg: *mut std::ffi::c_void,
) {
    use pg_sys::XactEvent::*;
    // SAFETY: reads and writes a backend global between statements of its own commit.
    unsafe {
        match (event, STATE.get()) {
            (XACT_EVENT_PRE_COMMIT, State::Wanted) => {
                let level = pg_sys::synchronous_commit;
                // Already asynchronous (the gateway's --commit asynchronous, a session's
                // choice): nothing to wait for after.
                if level > pg_sys::SyncCommitLevel::SYNCHRONOUS_COMMIT_OFF as i32 {
                    // The variable only, not the setting: RecordTransactionCommit reads it,
                    // and after_locks puts it back before anything else can.
                    pg_sys::synchronous_commit =
                        pg_sys::SyncCommitLevel::SYNCHRONOUS_COMMIT_OFF as i32;
                    STATE.set(State::Committing(level));
                } else {
                    STATE.set(State::Idle);
                }
            }
            // A prepared transaction commits later, elsewhere, as usual.
            (XACT_EVENT_PRE_PREPARE, _) => STATE.set(State::Idle),
            (XACT_EVENT_ABORT | XACT_EVENT_PARALLEL_ABORT, state) => {
                if let State::Committing(level) = state {
                    pg_sys::synchronous_commit = level;
                }
                STATE.set(State::Idle);
            }
            _ => {}
        }
    }
}

/// After the transaction's locks are released (the seq lock with them): the commit made
/// durable as the restored `synchronous_commit` asks, before the client is answered.
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn after_locks(
    phase: pg_sys::ResourceReleasePhase::Type,
    is_commit: bool,
    is_top_level: bool,
    _arg: *mut std::ffi::c_void,
) {
    if phase != pg_sys::ResourceReleasePhase::RESOURCE_RELEASE_AFTER_LOCKS || !is_top_level {
        return;
    }
    let State::Committing(level) = STATE.get() else {
        return;
    };
    STATE.set(State::Idle);
    // SAFETY: as RecordTransactionCommit's own flush and wait, from the committing backend
    // (interrupts are held from just before RecordTransactionCommit to the end of
    // CommitTransaction). XactLastCommitEnd is this transaction's commit record's end.
    // CritSectionCount by hand is START_CRIT_SECTION as PostgreSQL 15 defines it.
    unsafe {
        pg_sys::synchronous_commit = level;
        if !is_commit {
            return;
        }
        let end = pg_sys::XactLastCommitEnd;
        // A failed flush of a commit is a PANIC, as in RecordTransactionCommit: the commit
        // is in the WAL and other transactions have seen it.
        pg_sys::CritSectionCount += 1;
        pg_sys::XLogFlush(end);
        pg_sys::CritSectionCount -= 1;
        // As a synchronous commit waits (SyncRepWaitMode was never changed): a cancelled
        // wait is the same warning.
        pg_sys::SyncRepWaitForLSN(end, true);
    }
}
