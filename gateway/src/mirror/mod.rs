//! The gateway's copy of each board, kept exact by the listener.

pub mod board;
pub mod cursors;
mod event_log;
pub mod feed;
pub mod freezing;
pub mod recent;
pub mod snapshot;
pub mod state;
