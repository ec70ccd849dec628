//! Notices: events that take no seq (settings, presence, frozen tiles), and freezing the
//! tiles whose time has come.

use super::presence::PRESENCE_KEPT;
use super::{Board, Mirror};
use crate::mirror::event_log::{event_bytes, Entry};
use std::fmt::Write as _;

impl Board {
    /// Logs a notice (an event that takes no seq) of `weight` tiles' worth of log space;
    /// waiting sessions answer at once. A `presence` notice goes only to the views that
    /// asked for it (the others wake, find nothing, and wait on).
    pub(super) fn notice(
        &self,
        mut m: std::sync::MutexGuard<'_, Mirror>,
        action: &str,
        obj: &str,
        weight: u64,
        presence: bool,
    ) {
        m.notices += 1;
        m.state_cache = None;
        if presence {
            let version = m.notices;
            m.presence_log
                .push_back((version, event_bytes("", action, obj)));
            if m.presence_log.len() > PRESENCE_KEPT {
                m.presence_log.pop_front();
            }
        }
        let entry = Entry::Notice {
            version: m.notices,
            seq: m.seq,
            weight,
            presence,
            qik: event_bytes(&self.qik_key, action, obj),
            compact: event_bytes(&self.compact_key, action, obj),
        };
        m.log.push(entry);
        drop(m);
        self.changed.notify_waiters();
        if presence {
            self.presence_changed.notify_waiters();
        }
    }

    /// Marks the tiles whose time has come at `now_us` frozen; sessions get a `frozen`
    /// event listing them.
    pub fn freeze_due(&self, now_us: i64) {
        let mut m = self.lock();
        let Some(freezing) = &mut m.freezing else {
            return;
        };
        let due = freezing.due(now_us);
        if due.is_empty() {
            return;
        }
        let mut obj = format!("{{\"seq\":{},\"tiles\":[", m.seq);
        for (i, (x, y)) in due.iter().enumerate() {
            let sep = if i == 0 { "" } else { "," };
            let _ = write!(obj, "{sep}[{x},{y}]");
        }
        obj.push_str("]}");
        let seq = m.seq;
        self.notice(m, "frozen", &obj, due.len() as u64, false);
        for feed in self.feeds.all() {
            feed.frozen(seq, &due);
        }
    }

    /// Whether a tile of this board freezes by `now_us` (cheap: no tile is touched).
    pub fn freeze_is_due(&self, now_us: i64) -> bool {
        self.lock()
            .freezing
            .as_ref()
            .is_some_and(|f| f.is_due(now_us))
    }

    /// Whether the gateway knows tile (x, y) frozen (the database may know it earlier).
    pub fn is_frozen(&self, x: i32, y: i32) -> bool {
        let m = self.lock();
        let inside = (0..m.settings.width).contains(&x) && (0..m.settings.height).contains(&y);
        inside && m.freezing.as_ref().is_some_and(|f| f.is_frozen(x, y))
    }

    /// The newest notice version (where a presence reader starts).
    pub fn notices(&self) -> u64 {
        self.lock().notices
    }
}
