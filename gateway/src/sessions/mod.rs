//! Sessions: their copies on this gateway, their rows in the database, their long polls.

pub mod checks;
pub mod legacy;
pub mod poll_cursor;
pub mod session;
pub mod store;
pub mod subscription;
pub mod upkeep;
