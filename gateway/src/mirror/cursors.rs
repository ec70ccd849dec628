//! Shared cursors: where the people watching a board point, as they tell it with
//! `session.set_presence`. Ephemeral — never written to a table, gone with the session —
//! and bounded: clients are told at most once every [`TELL_CURSORS_EVERY`], and a told set
//! holds the [`MAX_CURSORS_TOLD`] most recently moved cursors (plus how many there are), so
//! a board with 10,000 watchers costs one event of at most 100 cursors a second, not
//! 10,000 events per move.

use serde::Serialize;
use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The most cursors one `cursors` event names.
pub const MAX_CURSORS_TOLD: usize = 100;
/// The least time between two `cursors` events of one board.
pub const TELL_CURSORS_EVERY: Duration = Duration::from_secs(1);
/// The least time between two `set_presence` calls of one session.
pub const MIN_PRESENCE_INTERVAL: Duration = Duration::from_millis(50);

/// How a cursor is named to clients.
pub fn public_id(id: u64) -> String {
    format!("{id:x}")
}

#[derive(Default)]
pub struct Cursors {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    by_id: HashMap<u64, Entry>,
    /// Whether the set changed since it was last told.
    changed: bool,
    told_at: Option<Instant>,
}

struct Entry {
    x: i32,
    y: i32,
    name: Option<String>,
    moved: Instant,
}

#[derive(Serialize)]
struct Told<'a> {
    id: String,
    x: i32,
    y: i32,
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'a str>,
}

#[derive(Serialize)]
struct Event<'a> {
    cursors: Vec<Told<'a>>,
    /// How many cursors there are (the event may name fewer).
    total: usize,
}

impl Cursors {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Cursor `id` is now at (x, y).
    pub fn set(&self, id: u64, x: i32, y: i32, name: Option<String>, now: Instant) {
        let mut inner = self.lock();
        inner.by_id.insert(
            id,
            Entry {
                x,
                y,
                name,
                moved: now,
            },
        );
        inner.changed = true;
    }

    pub fn remove(&self, id: u64) {
        let mut inner = self.lock();
        if inner.by_id.remove(&id).is_some() {
            inner.changed = true;
        }
    }

    /// The `cursors` event's object, when the set changed and was last told at least
    /// `every` ago.
    pub fn due(&self, now: Instant, every: Duration) -> Option<String> {
        let mut inner = self.lock();
        let recent = inner
            .told_at
            .is_some_and(|at| now.duration_since(at) < every);
        if !inner.changed || recent {
            return None;
        }
        inner.changed = false;
        inner.told_at = Some(now);
        let mut entries: Vec<(&u64, &Entry)> = inner.by_id.iter().collect();
        entries.sort_by_key(|(id, e)| (std::cmp::Reverse(e.moved), **id));
        let event = Event {
            total: entries.len(),
            cursors: entries
                .into_iter()
                .take(MAX_CURSORS_TOLD)
                .map(|(id, e)| Told {
                    id: public_id(*id),
                    x: e.x,
                    y: e.y,
                    name: e.name.as_deref(),
                })
                .collect(),
        };
        Some(serde_json::to_string(&event).expect("cursors serialize"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    #[test]
    fn told_when_changed_at_most_every_interval_and_bounded() {
        let cursors = Cursors::default();
        let t0 = Instant::now();
        assert_eq!(cursors.due(t0, TELL_CURSORS_EVERY), None, "nothing yet");
        for id in 0..150u64 {
            cursors.set(id, id as i32, 0, None, t0 + Duration::from_millis(id));
        }
        let told: Value =
            serde_json::from_str(&cursors.due(t0, TELL_CURSORS_EVERY).unwrap()).unwrap();
        assert_eq!(told["total"], 150);
        let named = told["cursors"].as_array().unwrap();
        assert_eq!(named.len(), MAX_CURSORS_TOLD);
        assert_eq!(named[0]["x"], 149, "the most recently moved first");
        cursors.set(3, 7, 7, Some("ann".into()), t0 + Duration::from_millis(500));
        assert_eq!(
            cursors.due(t0 + Duration::from_millis(500), TELL_CURSORS_EVERY),
            None,
            "throttled"
        );
        let told: Value = serde_json::from_str(
            &cursors
                .due(t0 + Duration::from_secs(1), TELL_CURSORS_EVERY)
                .unwrap(),
        )
        .unwrap();
        assert_eq!(
            told["cursors"][0],
            serde_json::json!({"id": "3", "x": 7, "y": 7, "name": "ann"})
        );
        assert_eq!(
            cursors.due(t0 + Duration::from_secs(5), TELL_CURSORS_EVERY),
            None,
            "unchanged"
        );
        cursors.remove(3);
        let told: Value = serde_json::from_str(
            &cursors
                .due(t0 + Duration::from_secs(5), TELL_CURSORS_EVERY)
                .unwrap(),
        )
        .unwrap();
        assert_eq!(told["total"], 149);
    }
}
