//! Sessions: their copies on this gateway, their rows in the database, their long polls.

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
