//! Presence: how many subscriptions watch the board, and where the watchers' cursors are;
//! told only to the views that asked for it.

use super::Board;
use crate::fragments::{ArrayBuilder, Fragments};
use crate::json::json_str;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

impl Board {
    /// How many subscriptions watch the board over every gateway (told at most every 10 s).
    pub fn set_watchers(&self, watching: u64) {
        self.watchers.store(watching, Ordering::SeqCst);
    }

    /// Tells sessions how many subscriptions watch the board, when that changed and the
    /// last time was at least `every` ago.
    pub fn tell_watching(&self, now: Instant, every: Duration) {
        let live = self.watchers.load(Ordering::SeqCst);
        let mut m = self.lock();
        let recent = m
            .watching_told_at
            .is_some_and(|at| now.duration_since(at) < every);
        if m.watching == live || recent {
            return;
        }
        m.watching = live;
        m.watching_told_at = Some(now);
        let obj = format!("{{\"watching\":{live}}}");
        self.notice(m, "presence", &obj, 1, true);
    }

    /// Tells the views that asked for `presence` where the others' cursors are, when they
    /// moved and the last time was at least `every` ago.
    pub fn tell_cursors(&self, now: Instant, every: Duration) {
        if let Some(obj) = self.cursors.due(now, every) {
            self.notice(self.lock(), "cursors", &obj, 1, true);
        }
    }

    /// The presence events (`presence`, `cursors`) after notice `seen`, under `key` (a
    /// region's). Presence is a state that the next event replaces: a reader that missed
    /// some (more than `PRESENCE_KEPT` came while it did not poll) gets the newest.
    pub fn collect_presence(&self, seen: &mut u64, key: &str, out: &mut ArrayBuilder) {
        let m = self.lock();
        let key = json_str(key);
        for (version, event) in &m.presence_log {
            if *version > *seen {
                // The event begins with the empty key: the reader's goes in its place.
                let mut with_key = Fragments::new();
                with_key.push(format!("{{\"key\":{key}").into_bytes().into());
                with_key.push(event.slice(EMPTY_KEY.len()..));
                out.push(with_key);
            }
        }
        *seen = (*seen).max(m.notices);
    }
}

/// Presence notices kept for readers under other keys (see `Board::collect_presence`).
pub(super) const PRESENCE_KEPT: usize = 16;
/// How an event made with `event_bytes("", …)` begins.
const EMPTY_KEY: &str = "{\"key\":\"\"";
