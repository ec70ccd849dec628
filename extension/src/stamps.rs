//! A moment of the write path (`pg_sys::TimestampTz`) as SQL gets it. Below the rooms that
//! stamp placements and answer with times (writing, cooldowns, placing, placement keys), so
//! that none of them needs another for it.

use pgrx::pg_sys;
use pgrx::prelude::*;

/// `pg_sys::TimestampTz::MAX` is PostgreSQL's 'infinity' (a frozen tile: never).
pub fn timestamp(t: pg_sys::TimestampTz) -> TimestampWithTimeZone {
    if t == pg_sys::TimestampTz::MAX {
        return TimestampWithTimeZone::positive_infinity();
    }
    TimestampWithTimeZone::try_from(t).expect("cooldowns are capped, so times stay in range")
}
