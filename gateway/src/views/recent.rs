//! `recent_placements`: a board's newest placements, newest first, as a list view (Qik's
//! "recent streams" over pgplace's own history). Fed entirely by the board's mirror — the
//! mirror keeps the newest [`MAX_RECENT`] placements, loaded with its snapshot — so it
//! costs the database nothing after the board's load. One instance per (board, limit).

use crate::mirror::board::timestamp;
use crate::views::list::ListView;
use pgplace_core::payload::Placement;
use serde_json::{json, Value};
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, Weak};

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

/// A board's `recent_placements` instances, by limit.
#[derive(Default)]
pub struct RecentViews {
    views: Mutex<HashMap<usize, Weak<ListView>>>,
}

impl RecentViews {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<usize, Weak<ListView>>> {
        self.views.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The instance for `limit`, made from `recent` at `seq` if no session holds one.
    pub fn get(
        &self,
        board: i64,
        limit: usize,
        seq: i64,
        recent: &Recent,
        capacity: usize,
    ) -> Arc<ListView> {
        let mut views = self.lock();
        if let Some(view) = views.get(&limit).and_then(Weak::upgrade) {
            return view;
        }
        let view = Arc::new(ListView::with_key(
            format!("board/{board}/recent/{limit}"),
            "recent_placements",
            limit as i32,
            seq,
            recent.rows(limit),
            capacity,
        ));
        views.insert(limit, Arc::downgrade(&view));
        view
    }

    /// The board moved on to `seq` (`reset`: it was reloaded, its stream does not
    /// continue): every instance takes its new window.
    pub fn update(&self, seq: i64, recent: &Recent, reset: bool) {
        let mut views = self.lock();
        views.retain(|_, view| view.strong_count() > 0);
        for (limit, view) in views.iter() {
            if let Some(view) = view.upgrade() {
                if reset {
                    view.reset(seq, recent.rows(*limit));
                } else {
                    view.replace(seq, recent.rows(*limit));
                }
            }
        }
    }

    /// Whether no session holds a view of this board's recent placements (the mirror then
    /// need not hand them over).
    pub fn is_empty(&self) -> bool {
        self.lock().values().all(|view| view.strong_count() == 0)
    }

    pub fn mark_dropped(&self) {
        for view in self.lock().values().filter_map(Weak::upgrade) {
            view.mark_dropped();
        }
    }
}
