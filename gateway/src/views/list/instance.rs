//! One list view instance: a named view (`place.create_view`) read at one limit, its
//! current window of rows, and the log of events that took earlier windows to it.
//!
//! Only the instance at the view's `max_limit` (its source) is read from the database;
//! one at a smaller limit is derived from it (`derive`): its windows are the first rows of
//! the source's, replaced with them in the same step, so however many limits clients ask
//! for, a view costs one read per change.
//!
//! Every session on the instance reads the same log by cursor, as sessions on a board do:
//! an event is serialized once, whatever the number of readers. A window is only ever
//! replaced by one read from the database in one snapshot (`place.view_rows`), and the
//! events are the difference between the two windows ([`crate::views::list::diff`]), so what a
//! client holds is always a window the database really showed - never a half-applied one.

use crate::fragments::ArrayBuilder;
use crate::shared_log::Delivery;
use crate::shared_log::{reset_event, LogCursor, SharedLog};
use crate::views::events::{ClientEvent, Row};
use crate::views::list::diff::diff;
use crate::views::made::Made;
use bytes::Bytes;
use serde_json::{Map, Value};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use tokio::sync::Notify;
use tokio::time::Instant;

/// Where a session stands in an instance's log.
pub type ListCursor = LogCursor;

pub struct ListView {
    pub name: Arc<str>,
    pub limit: i32,
    /// The watched table the view reads (its oid).
    pub relid: u32,
    /// Only sessions bound to a user may subscribe (`place.create_view(..., signed_in)`).
    pub signed_in: bool,
    pub key: Arc<str>,
    state: Mutex<State>,
    /// Woken (all waiters) when the log grows, the window is replaced or the view ends.
    pub changed: Notify,
    /// The instance this one is derived from (kept alive while this one is).
    source: Option<Arc<ListView>>,
}

struct State {
    /// The change log position the window reflects.
    pos: i64,
    rows: Vec<Row>,
    /// The window as clients get it (initial state, `reset`), made when first asked.
    rows_json: Option<Bytes>,
    /// Restarted when the window is replaced without events (the view was redefined).
    log: SharedLog,
    dropped: bool,
    last_event: Instant,
    /// The newest position said (by a notification) to have changed the view's table since
    /// the running read began, or since the last one when none runs. Only what came after a
    /// read began can be missing from it: a notification comes after its commit. So a
    /// position no commit has (a forged notification's) is owed one read at most, not a
    /// read after every read for as long as the window stays below it.
    wanted: i64,
    /// A read is owed whatever the positions say (LISTEN was down, a gap, a redefinition).
    forced: bool,
    /// The window is replaced with a `reset` at the next read (the view was redefined).
    reset_next: bool,
    refreshing: bool,
    /// The view's definition as the window was read with it (`db::view_rows`).
    definition: Option<String>,
    /// The instances derived from this one (smaller limits of the same view).
    derived: Vec<Weak<ListView>>,
}

impl ListView {
    pub fn new(
        name: &str,
        limit: i32,
        relid: u32,
        pos: i64,
        rows: Vec<Value>,
        capacity: usize,
    ) -> Self {
        let mut view = Self::with_key(
            format!("view/{name}/{limit}"),
            name,
            limit,
            pos,
            rows,
            capacity,
        );
        view.relid = relid;
        view
    }

    /// An instance under a key of its own, fed by the caller rather than by reads of a
    /// named view (`recent_placements`).
    pub fn with_key(
        key: String,
        name: &str,
        limit: i32,
        pos: i64,
        rows: Vec<Value>,
        capacity: usize,
    ) -> Self {
        Self::of_rows(
            key,
            name,
            limit,
            pos,
            rows.into_iter().map(Row::new).collect(),
            capacity,
        )
    }

    fn of_rows(
        key: String,
        name: &str,
        limit: i32,
        pos: i64,
        rows: Vec<Row>,
        capacity: usize,
    ) -> Self {
        ListView {
            name: name.into(),
            limit,
            relid: 0,
            signed_in: false,
            key: key.into(),
            source: None,
            state: Mutex::new(State {
                pos,
                rows,
                rows_json: None,
                log: SharedLog::new(capacity),
                dropped: false,
                last_event: Instant::now(),
                wanted: pos,
                forced: false,
                reset_next: false,
                refreshing: false,
                definition: None,
                derived: Vec::new(),
            }),
            changed: Notify::new(),
        }
    }

    /// The instance at `limit` (below this one's) of the same view: its window is the first
    /// `limit` rows of this one's, now and at every later replacement (made under this
    /// one's lock, so that none falls between).
    pub fn derive(self: &Arc<Self>, limit: i32, capacity: usize) -> Arc<ListView> {
        let mut s = self.lock();
        let rows = s.rows.iter().take(limit.max(0) as usize).cloned().collect();
        let mut view = Self::of_rows(
            format!("view/{}/{limit}", self.name),
            &self.name,
            limit,
            s.pos,
            rows,
            capacity,
        );
        view.relid = self.relid;
        view.signed_in = self.signed_in;
        view.source = Some(self.clone());
        let view = Arc::new(view);
        s.derived.retain(|d| d.strong_count() > 0);
        s.derived.push(Arc::downgrade(&view));
        view
    }

    /// Whether this instance is derived from another (and never read on its own).
    pub fn is_derived(&self) -> bool {
        self.source.is_some()
    }

    /// Whether this instance is derived from `source` (and still follows it).
    pub fn is_derived_from(&self, source: &Arc<ListView>) -> bool {
        self.source.as_ref().is_some_and(|s| Arc::ptr_eq(s, source)) && !self.is_dropped()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn pos(&self) -> i64 {
        self.lock().pos
    }

    pub fn definition(&self) -> Option<String> {
        self.lock().definition.clone()
    }

    pub fn set_definition(&self, definition: Option<String>) {
        self.lock().definition = definition;
    }

    /// The window (a JSON array of rows) and the cursor that continues exactly after it.
    pub fn initial_state(&self) -> (ListCursor, Bytes) {
        let mut s = self.lock();
        (s.log.end(), s.rows_json())
    }

    /// Replaces the window with one read at change log position `pos`, logging the events
    /// between the two (a `reset` when the position went back).
    pub fn replace(&self, pos: i64, rows: Vec<Value>) {
        self.replace_rows(pos, rows.into_iter().map(Row::new).collect(), false);
    }

    /// Replaces the window with a `reset` rather than events (the source was reloaded).
    pub fn reset(&self, pos: i64, rows: Vec<Value>) {
        self.replace_rows(pos, rows.into_iter().map(Row::new).collect(), true);
    }

    /// `replace` (or, with `reset`, `reset`), and the same for the instances derived from
    /// this one with their first rows, under this one's lock.
    fn replace_rows(&self, pos: i64, rows: Vec<Row>, reset: bool) {
        let mut s = self.lock();
        if s.dropped {
            return;
        }
        // Reads of one instance are made one after the other, so an older position can
        // only mean that the database went back (a restore): start the clients over.
        if pos < s.pos || reset {
            s.reset_next = true;
        }
        s.pos = pos;
        let reset = std::mem::take(&mut s.reset_next);
        if reset {
            s.log.restart();
        } else {
            let events = diff(&s.rows, &rows);
            if events.is_empty() {
                return;
            }
            for event in &events {
                let bytes = event.to_bytes(&self.key);
                s.push(bytes);
            }
        }
        s.derived.retain(|d| d.strong_count() > 0);
        for derived in s.derived.iter().filter_map(Weak::upgrade) {
            let first = rows
                .iter()
                .take(derived.limit.max(0) as usize)
                .cloned()
                .collect();
            derived.replace_rows(pos, first, reset);
        }
        s.rows = rows;
        s.rows_json = None;
        drop(s);
        self.changed.notify_waiters();
    }

    /// Logs a `ping` when nothing was logged for `quiet` (Qik's "all is well").
    pub fn ping_if_quiet(&self, now: Instant, quiet: std::time::Duration) {
        let mut s = self.lock();
        if s.dropped || now.duration_since(s.last_event) < quiet {
            return;
        }
        let ping = ClientEvent::Ping.to_bytes(&self.key);
        s.push(ping);
        drop(s);
        self.changed.notify_waiters();
    }

    /// The view was dropped: sessions get `deleted` and lose the subscription (those of
    /// the instances derived from this one too).
    pub fn mark_dropped(&self) {
        let derived: Vec<Arc<ListView>> = {
            let mut s = self.lock();
            s.dropped = true;
            s.derived.iter().filter_map(Weak::upgrade).collect()
        };
        for view in derived {
            view.mark_dropped();
        }
        self.changed.notify_waiters();
    }

    pub fn is_dropped(&self) -> bool {
        self.lock().dropped
    }

    /// Records that the view's table changed at `pos`. True when the caller must start a
    /// read (none is running and the window is older than `pos`).
    pub fn touched(&self, pos: i64) -> bool {
        let mut s = self.lock();
        s.wanted = s.wanted.max(pos);
        s.start_refresh()
    }

    /// Owes a read whatever the positions say; `reset`: the view was redefined, so the
    /// next window replaces the old one with a `reset` rather than events. True when the
    /// caller must start the read.
    pub fn force(&self, reset: bool) -> bool {
        let mut s = self.lock();
        s.forced = true;
        s.reset_next |= reset;
        s.start_refresh()
    }

    /// Called by the running read just before it queries: a force owed until now is paid
    /// by this read.
    pub fn begin_read(&self) {
        let mut s = self.lock();
        s.forced = false;
        s.wanted = i64::MIN;
    }

    /// Called by the running read after each window: whether another read is owed. When
    /// not, the read is over (the next `touched` or `force` starts one).
    pub fn refresh_owed(&self) -> bool {
        let mut s = self.lock();
        let owed = !s.dropped && (s.forced || s.wanted > s.pos);
        if !owed {
            s.refreshing = false;
        }
        owed
    }

    /// After a failed read: the read is owed still. True when the running read must try
    /// again; false when the view is gone (the read is over).
    pub fn refresh_failed(&self) -> bool {
        let mut s = self.lock();
        s.forced = true;
        if s.dropped {
            s.refreshing = false;
        }
        !s.dropped
    }

    /// Adds the events after `cursor` to `out` and moves the cursor past them.
    pub fn collect(&self, cursor: &mut ListCursor, out: &mut ArrayBuilder) -> Delivery {
        let mut s = self.lock();
        if s.dropped {
            out.push(ClientEvent::Deleted.to_bytes(&self.key).into());
            return Delivery::Ended;
        }
        if !s.log.read(cursor, out) {
            out.push(reset_event(&self.key, s.rows_json(), "list_position_lost"));
            *cursor = s.log.end();
        }
        Delivery::Continues
    }
}

impl State {
    fn push(&mut self, event: Bytes) {
        self.log.push(event);
        self.last_event = Instant::now();
    }

    fn rows_json(&mut self) -> Bytes {
        if let Some(json) = &self.rows_json {
            return json.clone();
        }
        let values: Vec<&Value> = self.rows.iter().map(|r| r.value.as_ref()).collect();
        let json = Bytes::from(serde_json::to_vec(&values).expect("rows are JSON values"));
        self.rows_json = Some(json.clone());
        json
    }

    fn start_refresh(&mut self) -> bool {
        let owed = !self.dropped && (self.forced || self.wanted > self.pos);
        if owed && !self.refreshing {
            self.refreshing = true;
            return true;
        }
        false
    }
}

/// A subscriber of `view`, at its newest window.
pub fn made(
    view: Arc<ListView>,
    view_params: &Map<String, Value>,
    board: Option<i64>,
) -> Made<Arc<ListView>, LogCursor> {
    let (cursor, rows) = view.initial_state();
    Made {
        signed_in: view.signed_in,
        view,
        cursor,
        state: rows,
        params: view_params.clone(),
        board,
        seq: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn events(view: &ListView, cursor: &mut ListCursor) -> Vec<Value> {
        let mut out = ArrayBuilder::new();
        view.collect(cursor, &mut out);
        serde_json::from_slice(&out.finish().to_vec()).unwrap()
    }

    fn rows(ids: &[i64]) -> Vec<Value> {
        ids.iter()
            .map(|id| json!({"id": id, "v": id * 10}))
            .collect()
    }

    #[tokio::test(start_paused = true)]
    async fn sessions_read_the_events_between_windows_then_a_reset_when_left_behind() {
        let view = ListView::new("v", 3, 1, 5, rows(&[1, 2, 3]), 2);
        let (mut keeping_up, state) = view.initial_state();
        let mut slow = keeping_up;
        assert_eq!(serde_json::from_slice::<Value>(&state).unwrap()[2]["id"], 3);
        view.replace(6, rows(&[1, 3, 4]));
        let got = events(&view, &mut keeping_up);
        assert_eq!(got.len(), 2, "{got:?}");
        assert_eq!(
            (got[0]["action"].as_str(), got[0]["position"].as_i64()),
            (Some("delete"), Some(1))
        );
        assert_eq!(
            (got[1]["action"].as_str(), got[1]["position"].as_i64()),
            (Some("insert"), Some(2))
        );
        assert_eq!(got[1]["key"], "view/v/3");
        view.replace(7, rows(&[4, 1, 3]));
        // The log holds two events: the slow session lost some and starts over.
        let got = events(&view, &mut slow);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0]["action"], "reset");
        assert_eq!(got[0]["obj"], json!(rows(&[4, 1, 3])));
        assert!(events(&view, &mut slow).is_empty());
    }

    /// A notification at a position no commit has (any login may send one) is owed one read,
    /// not a read after every read: the read that began after it would have seen its commit.
    #[tokio::test(start_paused = true)]
    async fn a_position_no_read_reaches_is_owed_one_read() {
        let view = ListView::new("v", 3, 1, 5, rows(&[1, 2, 3]), 2);
        assert!(view.touched(i64::MAX), "a read starts");
        view.begin_read();
        view.replace(6, rows(&[1, 2, 3]));
        assert!(!view.refresh_owed(), "the read covered it");
        // A change heard while a read runs is owed the next one, unless the read reached it.
        assert!(view.touched(7));
        view.begin_read();
        assert!(!view.touched(8), "a read runs");
        view.replace(7, rows(&[1, 2, 3]));
        assert!(view.refresh_owed(), "position 8 came after the read began");
        view.begin_read();
        view.replace(8, rows(&[1, 2, 3]));
        assert!(!view.refresh_owed());
        assert!(!view.touched(8), "a position the window has");
    }

    #[tokio::test(start_paused = true)]
    async fn a_smaller_limit_follows_the_first_rows_of_its_source() {
        let source = Arc::new(ListView::new("v", 4, 1, 5, rows(&[1, 2, 3, 4]), 10));
        let top2 = source.derive(2, 10);
        assert!(top2.is_derived_from(&source) && !source.is_derived());
        let (mut cursor, state) = top2.initial_state();
        assert_eq!(
            serde_json::from_slice::<Value>(&state).unwrap(),
            json!(rows(&[1, 2]))
        );
        // A change below the first two rows is no event at limit 2.
        source.replace(6, rows(&[1, 2, 4, 3]));
        assert!(events(&top2, &mut cursor).is_empty());
        source.replace(7, rows(&[3, 1, 2, 4]));
        let got = events(&top2, &mut cursor);
        assert_eq!(got[0]["key"], "view/v/2");
        assert_eq!(
            got.iter()
                .map(|e| e["action"].as_str().unwrap())
                .collect::<Vec<_>>(),
            ["delete", "insert"],
            "{got:?}"
        );
        assert_eq!(top2.pos(), 7);
        // A reset of the source resets it too; a drop ends it.
        source.reset(8, rows(&[9]));
        let got = events(&top2, &mut cursor);
        assert_eq!((got.len(), got[0]["action"].as_str()), (1, Some("reset")));
        assert_eq!(got[0]["obj"], json!(rows(&[9])));
        source.mark_dropped();
        let mut out = ArrayBuilder::new();
        assert_eq!(top2.collect(&mut cursor, &mut out), Delivery::Ended);
        assert!(!top2.is_derived_from(&source));
    }

    #[tokio::test(start_paused = true)]
    async fn a_database_that_went_back_resets_the_sessions() {
        let view = ListView::new("v", 3, 1, 9, rows(&[1, 2]), 10);
        let (mut cursor, _) = view.initial_state();
        view.replace(4, rows(&[2]));
        let got = events(&view, &mut cursor);
        assert_eq!((got.len(), got[0]["action"].as_str()), (1, Some("reset")));
        assert_eq!(got[0]["obj"], json!(rows(&[2])));
        assert_eq!(view.pos(), 4);
    }

    #[tokio::test(start_paused = true)]
    async fn a_redefined_view_resets_and_a_dropped_one_ends() {
        let view = ListView::new("v", 3, 1, 5, rows(&[1]), 10);
        let (mut cursor, _) = view.initial_state();
        assert!(view.force(true), "a read starts");
        assert!(!view.force(true), "one read at a time");
        view.begin_read();
        view.replace(5, rows(&[2]));
        assert!(!view.refresh_owed());
        let got = events(&view, &mut cursor);
        assert_eq!((got.len(), got[0]["action"].as_str()), (1, Some("reset")));
        view.mark_dropped();
        let mut out = ArrayBuilder::new();
        assert_eq!(view.collect(&mut cursor, &mut out), Delivery::Ended);
        assert!(String::from_utf8(out.finish().to_vec())
            .unwrap()
            .contains("\"deleted\""));
    }

    #[tokio::test(start_paused = true)]
    async fn reads_are_owed_only_for_newer_positions_and_pings_fill_quiet_time() {
        let view = ListView::new("v", 3, 1, 5, rows(&[1]), 10);
        assert!(!view.touched(5), "the window has position 5 already");
        assert!(view.touched(6));
        view.begin_read();
        assert!(!view.touched(7), "a read is running");
        view.replace(6, rows(&[1]));
        assert!(view.refresh_owed(), "7 came after the read began");
        view.begin_read();
        view.replace(7, rows(&[1]));
        assert!(!view.refresh_owed());
        let (mut cursor, _) = view.initial_state();
        view.ping_if_quiet(Instant::now(), std::time::Duration::from_secs(30));
        assert!(
            events(&view, &mut cursor).is_empty(),
            "not quiet long enough"
        );
        tokio::time::advance(std::time::Duration::from_secs(31)).await;
        view.ping_if_quiet(Instant::now(), std::time::Duration::from_secs(30));
        assert_eq!(
            events(&view, &mut cursor),
            [json!({"key": "view/v/3", "action": "ping"})]
        );
    }
}
