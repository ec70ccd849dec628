//! A board's newest placements, kept by its mirror (loaded with its snapshot) for the
//! `recent_placements` views.

use crate::json::timestamp;
use pgplace_core::payload::Placement;
use serde_json::{json, Value};
use std::collections::VecDeque;

/// The most placements a `recent_placements` view shows (and a mirror keeps).
pub const MAX_RECENT: usize = 100;

/// The newest placements of one board, oldest first.
#[derive(Debug, Clone, Default)]
pub struct Recent(VecDeque<Placement>);

impl Recent {
    pub fn new(placements: Vec<Placement>) -> Self {
        let mut recent = Recent::default();
        for p in placements {
            recent.push(p);
        }
        recent
    }

    pub fn push(&mut self, placement: Placement) {
        self.0.push_back(placement);
        if self.0.len() > MAX_RECENT {
            self.0.pop_front();
        }
    }

    /// The newest `limit`, newest first, as list rows (`id` is the seq).
    pub fn rows(&self, limit: usize) -> Vec<Value> {
        self.0
            .iter()
            .rev()
            .take(limit)
            .map(|p| {
                json!({
                    "id": p.seq, "seq": p.seq, "x": p.x, "y": p.y, "color": p.color,
                    "user": p.user, "placed_at": timestamp(p.at),
                })
            })
            .collect()
    }
}
