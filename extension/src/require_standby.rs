//! `pgplace.require_synchronous_standby`: nothing written without a synchronous standby.
//!
//! PostgreSQL answers a COMMIT at once when `synchronous_standby_names` is empty, and
//! releases the COMMITs waiting for a standby as successes when it is emptied. That is
//! what pg_auto_failover does to a primary it puts in `wait_primary` (no healthy standby;
//! a new primary until a standby has joined it): placements acknowledged then are on one
//! node, and a second failure before a standby has them takes them back. With the setting
//! on (for the gateway's role: `ALTER ROLE pgplace_gateway SET
//! pgplace.require_synchronous_standby = on`), a placing transaction is refused before it
//! takes its board's seq lock while no synchronous standby is named (57P03, which the
//! gateway answers with its retryable −32009), and `place.await_durable` fails (57014)
//! unless a synchronous standby confirmed what it waited for, whether or not one is still
//! named. Off by default: a server without standbys would refuse every write.
//!
//! A placement is checked before the seq lock (nothing to wait for) and again once it is
//! held (a placement queued behind a COMMIT waiting for the standbys passed the first
//! check before their names were emptied). Every transaction that wrote is checked once
//! more just before its commit record, placements and every other write alike
//! (sessions, users, bans, a placer's lease, the change log's tick, a row lock): what
//! PostgreSQL would wait for the standbys for fails there with the same 57P03, so that
//! nothing the role is told was committed is on one node alone.
//!
//! What it does not cover: a COMMIT already past that last check when the names are
//! emptied is still released as a success (PostgreSQL's own wait, which nothing after it
//! can turn into a failure); pg_auto_failover empties them only on a primary in
//! `wait_primary`, which with two standbys and `number-sync-standbys 1` is only a newly
//! promoted one, before it takes writes. Nor a COMMIT PREPARED of a transaction prepared
//! before the names were emptied: its commit record is written and answered inside the
//! statement, whose own transaction has no transaction id. And the commit check lives in
//! the library, so it runs in sessions where the library is loaded: any call of a pgplace
//! function written in Rust loads it (the gateway makes one on every connection it
//! opens), and `session_preload_libraries` loads it from a session's start; the session
//! functions are SQL and load nothing.
//!
//! Reads WalSndCtl's `sync_standbys_status` flags: PostgreSQL 15.13 or later (before, the
//! byte was a bool, and a named standby would read as none).

use pgrx::guc::{GucContext, GucFlags, GucRegistry, GucSetting};
use pgrx::{pg_sys, PgSqlErrorCode};

pub static REQUIRE_SYNCHRONOUS_STANDBY: GucSetting<bool> = GucSetting::<bool>::new(false);

pub fn init() {
    GucRegistry::define_bool_guc(
        c"pgplace.require_synchronous_standby",
        c"Writes are refused while no synchronous standby is named.",
        c"A placing transaction fails (57P03) before it takes its board's seq lock when \
          synchronous_standby_names names no standby, any other transaction that wrote fails \
          the same way at its commit, and place.await_durable fails (57014) unless a \
          synchronous standby confirmed what it waited for.",
        &REQUIRE_SYNCHRONOUS_STANDBY,
        GucContext::Userset,
        GucFlags::default(),
    );
    // SAFETY: called once, from _PG_init, in a backend; the callback lives as long as it.
    // Registered after early_release's, so it runs before it (the newest runs first) and
    // refuses the commit before that one makes it asynchronous.
    unsafe {
        pg_sys::RegisterXactCallback(Some(before_commit), std::ptr::null_mut());
    }
}

/// Refuses the commit (or PREPARE) of a transaction that wrote while the setting is on
/// and no synchronous standby is named: PostgreSQL would answer it at once, on one node.
/// "Wrote" as PostgreSQL decides whether a commit waits for the standbys (whatever the
/// session's `synchronous_commit`: stricter): it has a transaction id and WAL of its own.
/// A read through pgplace's functions takes no id, and passes, even when it pruned a page
/// or set hint bits with `wal_log_hints` on (WAL of its own, but no commit record);
/// `settled_seq` locks a row, which takes an id and writes WAL, and is refused.
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn before_commit(
    event: pg_sys::XactEvent::Type,
    _arg: *mut std::ffi::c_void,
) {
    use pg_sys::XactEvent::*;
    if !matches!(event, XACT_EVENT_PRE_COMMIT | XACT_EVENT_PRE_PREPARE) || !required() {
        return;
    }
    // SAFETY: reads the backend's own top transaction id and the end of its own WAL, in
    // its own commit (RecordTransactionCommit reads the same two).
    let wrote = unsafe {
        pg_sys::GetTopTransactionIdIfAny() != pg_sys::InvalidTransactionId
            && pg_sys::XactLastRecEnd != 0
    };
    if wrote {
        refuse_without_standby("this transaction's writes are not committed until one is");
    }
}

pub fn required() -> bool {
    REQUIRE_SYNCHRONOUS_STANDBY.get()
}

/// Whether synchronous standbys are named, as a COMMIT would see it now.
pub fn synchronous_standbys_named() -> bool {
    // SAFETY: reads of the walsender control struct's flags byte, as SyncRepWaitForLSN
    // reads it without its lock; WalSndCtl exists whenever max_wal_senders > 0 (checked
    // first). Before the checkpointer has set the flags, the setting itself decides, as
    // in SyncRepWaitForLSN.
    unsafe {
        if pg_sys::max_wal_senders <= 0 || pg_sys::WalSndCtl.is_null() {
            return false;
        }
        let status = u32::from(std::ptr::read_volatile(
            &raw const (*pg_sys::WalSndCtl).sync_standbys_status,
        ));
        if status & pg_sys::SYNC_STANDBY_INIT != 0 {
            return status & pg_sys::SYNC_STANDBY_DEFINED != 0;
        }
        let names = pg_sys::SyncRepStandbyNames;
        !names.is_null() && *names != 0
    }
}

/// Refuses a placement when the setting is on and no synchronous standby is named.
pub fn check_before_placing() {
    refuse_without_standby("placements are refused until one is");
}

/// Fails (57P03, retryable), saying what is `refused`, when the setting is on and no
/// synchronous standby is named.
fn refuse_without_standby(refused: &str) {
    if required() && !synchronous_standbys_named() {
        crate::input::fail(
            PgSqlErrorCode::ERRCODE_CANNOT_CONNECT_NOW,
            format!(
                "no synchronous standby is named (synchronous_standby_names is empty), and \
                 pgplace.require_synchronous_standby is on: {refused}; retry"
            ),
        );
    }
}
