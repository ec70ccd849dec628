//! A board as the database gives it: its settings, and its tiles at a seq.

use crate::mirror::freezing::Freezing;
use pgplace_core::payload::Placement;
use serde::Serialize;

/// A board's settings as clients see them.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Settings {
    pub id: i64,
    pub name: String,
    pub width: i32,
    pub height: i32,
    pub bits_per_tile: i32,
    pub palette: Vec<String>,
    /// Each colour's name, None for a colour without one (pages show its code); the whole
    /// None when the board names none (or its schema predates 0.8.10).
    pub palette_names: Option<Vec<Option<String>>>,
    /// Seconds between two placements of one user.
    pub cooldown: f64,
    pub state: String,
    /// Seconds a non-zero tile rests unchanged before it freezes (None: never).
    pub freeze_after: Option<f64>,
}

/// A board as read from the database in one snapshot.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub settings: Settings,
    pub seq: i64,
    pub bits: Vec<u8>,
    /// Present when the board has freeze_after.
    pub freezing: Option<Freezing>,
    /// The newest placements up to `seq` (at most `recent::MAX_RECENT`), oldest first.
    pub recent: Vec<Placement>,
}

/// A board as it was at `seq`, read from its history (see `Board::backfill`).
pub struct Past {
    pub seq: i64,
    pub width: i32,
    pub height: i32,
    pub bits: Vec<u8>,
}
