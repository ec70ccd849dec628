//! `pgplace.require_synchronous_standby`: no placement without a synchronous standby.
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
//! named. Off by default: a server without standbys would refuse every placement.
//!
//! The check runs before the seq lock (nothing to wait for) and again once it is held (a
//! placement queued behind a COMMIT waiting for the standbys passed the first one before
//! their names were emptied). What it does not cover: a COMMIT already past the second
//! check when the names are emptied is still released as a success (PostgreSQL's own
//! wait, which nothing after it can turn into a failure); pg_auto_failover empties them
//! only on a primary in `wait_primary`, which with two standbys and `number-sync-standbys
//! 1` is only a newly promoted one, before it takes writes. Writes that take no seq
//! (sessions, users, bans) are not checked.
//!
//! Reads WalSndCtl's `sync_standbys_status` flags: PostgreSQL 15.13 or later (before, the
//! byte was a bool, and a named standby would read as none).

use pgrx::guc::{GucContext, GucFlags, GucRegistry, GucSetting};
use pgrx::{pg_sys, PgSqlErrorCode};

pub static REQUIRE_SYNCHRONOUS_STANDBY: GucSetting<bool> = GucSetting::<bool>::new(false);

pub fn init() {
    GucRegistry::define_bool_guc(
        c"pgplace.require_synchronous_standby",
        c"Placements are refused while no synchronous standby is named.",
        c"A placing transaction fails (57P03) before it takes its board's seq lock when \
          synchronous_standby_names names no standby, and place.await_durable fails (57014) \
          unless a synchronous standby confirmed what it waited for.",
        &REQUIRE_SYNCHRONOUS_STANDBY,
        GucContext::Userset,
        GucFlags::default(),
    );
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
    if required() && !synchronous_standbys_named() {
        crate::input::fail(
            PgSqlErrorCode::ERRCODE_CANNOT_CONNECT_NOW,
            "no synchronous standby is named (synchronous_standby_names is empty), and \
             pgplace.require_synchronous_standby is on: placements are refused until one is; retry"
                .into(),
        );
    }
}
