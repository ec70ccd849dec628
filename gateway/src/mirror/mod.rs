//! The gateway's copy of each board, kept exact by the listener:
//! - `board/`: the mirror of one board (applying what the stream says; beside it, a file
//!   each for the log's positions and backfill, notices and freezing, presence, and
//!   delivery to views);
//! - `event_log.rs`: its log of recent events, each serialized once in both forms;
//! - `snapshot.rs`: a board as the database gives it (settings, tiles at a seq);
//! - `state.rs`: a board's state as JSON (`board.get`, a board view's initial state);
//! - `feed.rs`: the `Feed` trait, how the mirror hands each change to the views made from it;
//! - `recent.rs`: the board's newest placements; `freezing.rs`: its frozen tiles;
//!   `cursors.rs`: where its watchers point (presence).

pub mod board;
pub mod cursors;
mod event_log;
pub mod feed;
pub mod freezing;
pub mod recent;
pub mod snapshot;
pub mod state;
