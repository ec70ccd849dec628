//! Sessions: their copies on this gateway, their rows in the database, their long polls:
//! - `session.rs`: a session (who polls, as whom, where each view stands);
//!   `subscription.rs`: one view of it and its positions; `ids.rs`: the random ids;
//! - `long_poll.rs`: `get_events`, taken at once or waited for; `acked.rs` and
//!   `poll_cursor.rs`: an acking poll's positions and the cursor it carries;
//! - `legacy.rs`: whether a legacy answer reached its client; `handover.rs`: a legacy
//!   session moving to another gateway;
//! - `registry.rs`: this gateway's copies; `store.rs`: their rows; `checks.rs`: what the
//!   sessions channel says, checked against the rows; `upkeep.rs`: marks and expiry;
//! - `tests.rs`: the room as a poll sees it.

pub mod acked;
pub mod checks;
pub mod handover;
pub mod ids;
pub mod legacy;
pub mod long_poll;
pub mod poll_cursor;
pub mod registry;
pub mod session;
pub mod store;
pub mod subscription;
pub mod upkeep;

#[cfg(test)]
mod tests;
