//! The gateway's copy of one board, kept current from the notification stream, and the
//! log of recent events that every session on the board reads from.
//!
//! A session does not hold a queue of its own: it holds a cursor (the last seq it was
//! given) per view, and `get_events` reads the shared log from there. Each event is
//! serialized once, when it enters the log, in both forms (Qik and compact); a response
//! is made of slices of those buffers. A session whose cursor fell out of the log (it
//! stopped polling while more than `session_buffer` tiles arrived) or whose board was
//! reloaded from the database (`epoch` changed) gets a `reset` with a fresh initial state.

use crate::fragments::{ArrayBuilder, Fragments};
use crate::json::json_str;
use crate::mirror::cursors::Cursors;
use crate::mirror::event_log::{event_bytes, Entry, EventLog, EventsOut, TilesBuilder};
use crate::mirror::feed::Feeds;
use crate::mirror::freezing::Freezing;
use crate::mirror::recent::Recent;
use crate::mirror::snapshot::{Past, Settings, Snapshot};
use crate::mirror::state::{settings_json, state_json};
use crate::shared_log::Delivery;
use bytes::Bytes;
use pgplace_core::bits::TileWidth;
use pgplace_core::payload::Placement;
use std::collections::VecDeque;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// Why placements could not be applied in order: the caller must read them from the
/// database (`from` is the first seq missing) or reload the board.
#[derive(Debug, PartialEq)]
pub enum Discontinuity {
    Gap {
        from: i64,
    },
    /// The stream names a tile outside the board as the gateway knows it.
    Inconsistent,
}

/// The position of one view of a session in a board's stream.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cursor {
    pub epoch: u64,
    pub seq: i64,
    /// The last notice (settings change, tiles frozen) given.
    pub notices: u64,
    /// The board's settings come first (the view resumes from a stretch older than this
    /// mirror's log, whose settings changes the log does not hold).
    pub settings_owed: bool,
}

impl Cursor {
    /// A cursor of no mirror: its view gets a `reset`.
    pub const STALE: Cursor = Cursor {
        epoch: u64::MAX,
        seq: 0,
        notices: 0,
        settings_owed: false,
    };
}

pub struct Board {
    pub id: i64,
    pub qik_key: Arc<str>,
    pub compact_key: Arc<str>,
    mirror: Mutex<Mirror>,
    /// Woken (all waiters) whenever the log, the settings or the epoch change.
    pub changed: Notify,
    /// Woken (all waiters) when a presence notice is logged (for regions that asked).
    pub presence_changed: Notify,
    /// Subscriptions to this board's views, over every gateway (read from the database).
    watchers: AtomicU64,
    /// The views made from this board's mirror (regions, newest placements), handed each
    /// of its changes.
    pub feeds: Feeds,
    /// Where the people watching point (`session.set_presence`).
    pub cursors: Cursors,
    log_capacity: u64,
    /// Held while the log is extended back (`session_access::backfill`).
    pub backfilling: tokio::sync::Mutex<()>,
}

/// The mirror as `Board::with_mirror` shows it.
pub struct MirrorRef<'a> {
    pub settings: &'a Arc<Settings>,
    pub seq: i64,
    pub bits: &'a [u8],
    pub recent: &'a Recent,
}

struct Mirror {
    settings: Arc<Settings>,
    /// Counts the notices (settings changes, tiles frozen) ever logged.
    notices: u64,
    tile: TileWidth,
    seq: i64,
    epoch: u64,
    bits: Vec<u8>,
    freezing: Option<Freezing>,
    recent: Recent,
    log: EventLog,
    deleted: bool,
    /// The newest presence notices (`presence`, `cursors`), for the views of the board that
    /// are not the board itself (regions): (notice version, the event under key "").
    presence_log: VecDeque<(u64, Bytes)>,
    /// The number of watchers last told (initial states and `presence` events).
    watching: u64,
    watching_told_at: Option<Instant>,
    /// The initial state at a cursor (settings version included: it is in the state).
    state_cache: Option<(Cursor, Bytes)>,
    bits_cache: Option<(u64, i64, Bytes)>,
}

impl Board {
    pub fn new(snapshot: Snapshot, log_capacity: u64) -> Self {
        let id = snapshot.settings.id;
        let tile = TileWidth::new(snapshot.settings.bits_per_tile.into())
            .expect("the database holds valid tile widths");
        Board {
            id,
            qik_key: format!("board/{id}").into(),
            compact_key: format!("board/{id}/compact").into(),
            mirror: Mutex::new(Mirror {
                settings: Arc::new(snapshot.settings),
                notices: 0,
                tile,
                seq: snapshot.seq,
                epoch: crate::shared_log::new_epoch(),
                bits: snapshot.bits,
                freezing: snapshot.freezing,
                recent: Recent::new(snapshot.recent),
                log: EventLog::new(snapshot.seq, log_capacity),
                deleted: false,
                presence_log: VecDeque::new(),
                watching: 0,
                watching_told_at: None,
                state_cache: None,
                bits_cache: None,
            }),
            changed: Notify::new(),
            presence_changed: Notify::new(),
            watchers: AtomicU64::new(0),
            feeds: Feeds::default(),
            cursors: Cursors::default(),
            log_capacity,
            backfilling: tokio::sync::Mutex::new(()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Mirror> {
        self.mirror.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn seq(&self) -> i64 {
        self.lock().seq
    }

    pub fn settings(&self) -> Arc<Settings> {
        self.lock().settings.clone()
    }

    pub fn is_deleted(&self) -> bool {
        self.lock().deleted
    }

    /// Applies placements that continue the stream (those at or below the current seq are
    /// skipped: they were applied already). Stops at the first discontinuity.
    pub fn apply(&self, placements: &[Placement]) -> Result<usize, Discontinuity> {
        let mut m = self.lock();
        let mut applied = 0;
        let mut entry = TilesBuilder::new(&self.qik_key);
        let mut result = Ok(());
        // Placements with their old colours, for the feeds (only when one wants them).
        let mut placed = Vec::new();
        let wants = self.feeds.wants();
        for p in placements {
            if p.seq <= m.seq + applied as i64 {
                continue;
            }
            if p.seq != m.seq + applied as i64 + 1 {
                result = Err(Discontinuity::Gap {
                    from: m.seq + applied as i64 + 1,
                });
                break;
            }
            let (width, height) = (m.settings.width, m.settings.height);
            if p.x < 0 || p.y < 0 || p.x >= width || p.y >= height {
                result = Err(Discontinuity::Inconsistent);
                break;
            }
            let n = i64::from(p.x) + i64::from(width) * i64::from(p.y);
            let tile = m.tile;
            let old = tile.get(&m.bits, n).expect("tile inside the board");
            if tile.set(&mut m.bits, n, p.color.into()).is_err() {
                result = Err(Discontinuity::Inconsistent);
                break;
            }
            if let Some(freezing) = &mut m.freezing {
                freezing.changed(p.x, p.y, p.color, p.at);
            }
            entry.add(p, old);
            if wants.placements {
                placed.push((*p, old));
            }
            m.recent.push(*p);
            applied += 1;
        }
        if applied > 0 {
            let entry = entry.finish();
            let first = entry.first;
            m.seq = entry.last;
            m.log.push(Entry::Tiles(entry));
            let seq = m.seq;
            let recent = wants.recent.then(|| m.recent.clone());
            drop(m);
            for feed in self.feeds.all() {
                feed.placed(first, seq, &placed, recent.as_ref());
            }
            self.changed.notify_waiters();
        }
        result.map(|()| applied)
    }

    /// Records new settings; sessions get a `settings` event.
    pub fn set_settings(&self, settings: Settings) {
        let mut m = self.lock();
        if *m.settings == settings {
            return;
        }
        m.settings = Arc::new(settings);
        let obj = settings_json(&m.settings, m.seq);
        let (settings, seq) = (m.settings.clone(), m.seq);
        self.notice(m, "settings", &obj, 1, false);
        for feed in self.feeds.all() {
            feed.settings_changed(&settings, seq);
        }
    }

    /// How many subscriptions watch the board over every gateway (told at most every 10 s).
    pub fn set_watchers(&self, watching: u64) {
        self.watchers.store(watching, Ordering::SeqCst);
    }

    /// The cursor of a view that was given every placement up to `seq` (on whichever
    /// gateway): the notices logged at or after it come again (they are states: a board's
    /// settings, tiles frozen), the placements after it once.
    pub fn cursor_at(&self, seq: i64) -> Cursor {
        let m = self.lock();
        let mut notices = m.log.floor_notice;
        for entry in &m.log.entries {
            match entry {
                Entry::Notice {
                    version, seq: at, ..
                } if *at < seq => notices = *version,
                Entry::Notice { .. } => break,
                Entry::Tiles(_) => {}
            }
        }
        Cursor {
            epoch: m.epoch,
            seq,
            notices,
            // Older than the log: settings may have changed in between, unseen here.
            settings_owed: seq < m.log.floor,
        }
    }

    /// Whether `cursor` is of this mirror but older than its log reaches (see `backfill`).
    pub fn is_behind(&self, cursor: &Cursor) -> bool {
        let m = self.lock();
        cursor.epoch == m.epoch && cursor.seq >= 0 && cursor.seq < m.log.floor
    }

    /// The mirror's epoch and the oldest seq its log continues from.
    pub fn log_floor(&self) -> (u64, i64) {
        let m = self.lock();
        (m.epoch, m.log.floor)
    }

    /// Whether a log reaching back to `from` fits (and this board's notices allow it: a
    /// board whose tiles freeze cannot have its `frozen` events made again).
    pub fn may_backfill(&self, from: i64) -> bool {
        let m = self.lock();
        m.freezing.is_none()
            && from >= 0
            && from < m.log.floor
            && m.log.tiles + (m.log.floor - from) as u64 <= m.log.capacity
    }

    /// Extends the log back to `past.seq` with the placements after it (read from the
    /// history), given the board as it was then: a client resuming from there (another gateway's
    /// cursor, a restart, `since`) gets exactly the placements it has not seen. False when
    /// the mirror changed meanwhile (another epoch), the placements do not lead to its
    /// floor, or they do not fit the board: the client then gets a `reset`.
    pub fn backfill(&self, epoch: u64, past: &Past, placements: &[Placement]) -> bool {
        let mut m = self.lock();
        let (from, floor) = (past.seq, m.log.floor);
        let mut bits = past.bits.clone();
        if m.epoch != epoch
            || from >= floor
            || (past.width, past.height) != (m.settings.width, m.settings.height)
            || bits.len() != m.bits.len()
            || m.freezing.is_some()
        {
            return from >= floor && m.epoch == epoch;
        }
        let wanted = (floor - from) as usize;
        if placements.len() != wanted
            || placements
                .iter()
                .zip(from + 1..)
                .any(|(p, seq)| p.seq != seq)
            || m.log.tiles + wanted as u64 > m.log.capacity
        {
            return false;
        }
        let (width, height, tile) = (m.settings.width, m.settings.height, m.tile);
        let mut entry = TilesBuilder::new(&self.qik_key);
        for p in placements {
            if p.x < 0 || p.y < 0 || p.x >= width || p.y >= height {
                return false;
            }
            let n = i64::from(p.x) + i64::from(width) * i64::from(p.y);
            let old = tile.get(&bits, n).expect("tile inside the board");
            if tile.set(&mut bits, n, p.color.into()).is_err() {
                return false;
            }
            entry.add(p, old);
        }
        // The history must lead exactly to the mirror as it stood at its floor.
        if m.log.entries.is_empty() && bits != m.bits {
            return false;
        }
        m.log.push_front(Entry::Tiles(entry.finish()), from);
        true
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

    /// Logs a notice (an event that takes no seq) of `weight` tiles' worth of log space;
    /// waiting sessions answer at once. A `presence` notice goes only to the views that
    /// asked for it (the others wake, find nothing, and wait on).
    fn notice(
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

    /// Waits until the mirror has applied seq `seq` (it may be behind the database).
    pub async fn reached(&self, seq: i64) {
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if self.seq() >= seq {
                return;
            }
            changed.await;
        }
    }

    /// Whether the gateway knows tile (x, y) frozen (the database may know it earlier).
    pub fn is_frozen(&self, x: i32, y: i32) -> bool {
        let m = self.lock();
        let inside = (0..m.settings.width).contains(&x) && (0..m.settings.height).contains(&y);
        inside && m.freezing.as_ref().is_some_and(|f| f.is_frozen(x, y))
    }

    /// Replaces the whole mirror with a fresh snapshot: every session gets a `reset`.
    pub fn reload(&self, snapshot: Snapshot) {
        let mut m = self.lock();
        m.tile = TileWidth::new(snapshot.settings.bits_per_tile.into())
            .expect("the database holds valid tile widths");
        m.settings = Arc::new(snapshot.settings);
        m.notices += 1;
        m.seq = snapshot.seq;
        m.bits = snapshot.bits;
        m.freezing = snapshot.freezing;
        m.recent = Recent::new(snapshot.recent);
        m.epoch = crate::shared_log::new_epoch();
        m.log = EventLog::new(snapshot.seq, m.log.capacity);
        m.state_cache = None;
        m.bits_cache = None;
        let (seq, recent) = (m.seq, m.recent.clone());
        let settings = m.settings.clone();
        let bits = self.feeds.wants().bits.then(|| m.bits.clone());
        drop(m);
        for feed in self.feeds.all() {
            feed.reloaded(&settings, seq, bits.as_deref(), &recent);
        }
        self.changed.notify_waiters();
    }

    /// The board was deleted: sessions get a `deleted` event and lose the subscription.
    pub fn mark_deleted(&self) {
        self.lock().deleted = true;
        for feed in self.feeds.all() {
            feed.deleted();
        }
        self.changed.notify_waiters();
    }

    /// Runs `f` on the mirror as it stands, under its lock: nothing is applied meanwhile,
    /// so a view registered as a feed in `f` at the seq it sees is handed every change after.
    pub fn with_mirror<R>(&self, f: impl FnOnce(MirrorRef<'_>) -> R) -> R {
        let m = self.lock();
        f(MirrorRef {
            settings: &m.settings,
            seq: m.seq,
            bits: &m.bits,
            recent: &m.recent,
        })
    }

    /// How many tiles' worth of events the logs of this board's views hold.
    pub fn log_capacity(&self) -> u64 {
        self.log_capacity
    }

    /// The newest notice version (where a presence reader starts).
    pub fn notices(&self) -> u64 {
        self.lock().notices
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

    /// Whether new settings need a reload: they change the packed layout, or which
    /// tiles are frozen.
    pub fn needs_reload(&self, settings: &Settings) -> bool {
        let m = self.lock();
        m.settings.width != settings.width
            || m.settings.height != settings.height
            || m.settings.bits_per_tile != settings.bits_per_tile
            || m.settings.freeze_after != settings.freeze_after
    }

    /// The initial state (settings, seq, packed bits in base64) and the cursor that
    /// continues exactly after it.
    pub fn initial_state(&self) -> (Cursor, Bytes) {
        let (cursor, settings, bits, frozen, watching) = {
            let m = self.lock();
            let cursor = m.cursor();
            if let Some((at, state)) = &m.state_cache {
                if *at == cursor {
                    return (cursor, state.clone());
                }
            }
            let frozen = m.freezing.as_ref().map(|f| f.bitmap().to_vec());
            (
                cursor,
                m.settings.clone(),
                m.bits.clone(),
                frozen,
                m.watching,
            )
        };
        // Serialized outside the lock: the listener keeps applying meanwhile.
        let state = state_json(&settings, cursor.seq, &bits, frozen.as_deref(), watching);
        let mut m = self.lock();
        if m.cursor() == cursor {
            m.state_cache = Some((cursor, state.clone()));
        }
        (cursor, state)
    }

    /// The packed bits, with the epoch and seq they reflect.
    pub fn packed(&self) -> (u64, i64, Bytes) {
        let mut m = self.lock();
        if let Some((epoch, seq, bits)) = &m.bits_cache {
            if (*epoch, *seq) == (m.epoch, m.seq) {
                return (*epoch, *seq, bits.clone());
            }
        }
        let bits = Bytes::from(m.bits.clone());
        m.bits_cache = Some((m.epoch, m.seq, bits.clone()));
        (m.epoch, m.seq, bits)
    }

    /// Adds the events after `cursor` for one view to `out` and moves the cursor past them.
    /// `presence`: the view asked for `presence` events.
    pub fn collect(
        &self,
        cursor: &mut Cursor,
        compact: bool,
        presence: bool,
        out: &mut ArrayBuilder,
    ) -> Delivery {
        let key = if compact {
            &self.compact_key
        } else {
            &self.qik_key
        };
        let m = self.lock();
        if m.deleted {
            let event = format!("{{\"key\":{},\"action\":\"deleted\"}}", json_str(key));
            out.push(Bytes::from(event).into());
            return Delivery::Ended;
        }
        if cursor.seq > m.seq && cursor.epoch == m.epoch {
            // A cursor another gateway wrote, ahead of this mirror (which has not heard the
            // newest commits yet): what comes next is not here yet.
            return Delivery::Continues;
        }
        if cursor.epoch != m.epoch
            || cursor.seq < m.log.floor
            || cursor.notices < m.log.floor_notice
        {
            let reason = if *cursor == Cursor::STALE {
                "position_elsewhere"
            } else if cursor.epoch != m.epoch {
                "board_reloaded"
            } else {
                "fell_behind"
            };
            drop(m);
            let (fresh, state) = self.initial_state();
            *cursor = fresh;
            out.push(crate::shared_log::reset_event(key, state, reason));
            return Delivery::Continues;
        }
        let mut out = EventsOut::new(key, compact, out);
        if std::mem::take(&mut cursor.settings_owed) {
            out.event(event_bytes(
                key,
                "settings",
                &settings_json(&m.settings, cursor.seq),
            ));
        }
        let start = m.log.entries.partition_point(|e| e.seq_end() < cursor.seq);
        for entry in m.log.entries.range(start..) {
            match entry {
                Entry::Tiles(t) if t.last > cursor.seq => {
                    let skip = (cursor.seq + 1 - t.first).max(0) as usize;
                    out.tiles(t, skip);
                    cursor.seq = t.last;
                }
                Entry::Notice {
                    version,
                    presence: asked_only,
                    qik,
                    compact: c,
                    ..
                } if *version > cursor.notices => {
                    if presence || !asked_only {
                        out.event(if compact { c.clone() } else { qik.clone() });
                    }
                    cursor.notices = *version;
                }
                _ => {}
            }
        }
        cursor.notices = cursor.notices.max(m.notices);
        out.finish();
        Delivery::Continues
    }
}

impl Mirror {
    fn cursor(&self) -> Cursor {
        Cursor {
            settings_owed: false,
            epoch: self.epoch,
            seq: self.seq,
            notices: self.notices,
        }
    }
}

/// Presence notices kept for readers under other keys (see `Board::collect_presence`).
const PRESENCE_KEPT: usize = 16;
/// How an event made with `event_bytes("", …)` begins.
const EMPTY_KEY: &str = "{\"key\":\"\"";

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    /// A 2x2 board of 2-bit tiles, all colour 0, at `seq`.
    fn empty_board(seq: i64) -> Board {
        let snapshot = Snapshot {
            settings: settings(0.0),
            seq,
            bits: vec![0],
            freezing: None,
            recent: Vec::new(),
        };
        Board::new(snapshot, 100)
    }

    fn settings(cooldown: f64) -> Settings {
        Settings {
            id: 3,
            name: "b".into(),
            width: 2,
            height: 2,
            bits_per_tile: 2,
            palette: vec![
                "#000000".into(),
                "#111111".into(),
                "#222222".into(),
                "#333333".into(),
            ],
            cooldown,
            state: "open".into(),
            freeze_after: None,
        }
    }

    fn tile(seq: i64, x: i32, y: i32, color: i32) -> Placement {
        Placement {
            board: 3,
            seq,
            x,
            y,
            color,
            user: 1,
            at: 1_764_437_000_123_456,
        }
    }

    fn collect(board: &Board, cursor: &mut Cursor, compact: bool) -> Value {
        let mut out = ArrayBuilder::new();
        assert_eq!(
            board.collect(cursor, compact, true, &mut out),
            Delivery::Continues
        );
        serde_json::from_slice(&out.finish().to_vec()).unwrap()
    }

    /// The packed bits after the first `n` of `history`.
    fn bits_after(history: &[Placement], n: usize) -> Vec<u8> {
        let board = empty_board(0);
        board.apply(&history[..n]).unwrap();
        board.packed().2.to_vec()
    }

    #[test]
    fn a_log_extended_back_from_the_history_gives_what_a_resuming_view_missed() {
        let history = [
            tile(1, 0, 0, 1),
            tile(2, 1, 0, 2),
            tile(3, 0, 0, 3),
            tile(4, 1, 1, 1),
        ];
        // A gateway that loaded the board at seq 3 (a restart, say), then heard seq 4.
        let board = Board::new(
            Snapshot {
                settings: settings(0.0),
                seq: 3,
                bits: bits_after(&history, 3),
                freezing: None,
                recent: Vec::new(),
            },
            100,
        );
        board.apply(&history[3..]).unwrap();
        // A client that had seq 1 (from another gateway).
        let mut cursor = board.cursor_at(1);
        assert!(board.is_behind(&cursor) && board.may_backfill(1));
        let (epoch, floor) = board.log_floor();
        assert_eq!(floor, 3);
        let past = |seq: i64| Past {
            seq,
            width: 2,
            height: 2,
            bits: bits_after(&history, seq as usize),
        };
        assert!(
            !board.backfill(epoch, &past(1), &history[1..2]),
            "short of the floor"
        );
        assert!(
            !board.backfill(epoch + 1, &past(1), &history[1..3]),
            "another epoch"
        );
        assert!(board.is_behind(&cursor), "refusals change nothing");
        assert!(board.backfill(epoch, &past(1), &history[1..3]));
        assert!(!board.is_behind(&cursor));
        let events = collect(&board, &mut cursor, false);
        // The settings first: they may have changed in the stretch the log did not hold.
        assert_eq!(events[0]["action"], "settings", "{events}");
        let got: Vec<(i64, i64, i64)> = events
            .as_array()
            .unwrap()
            .iter()
            .skip(1)
            .map(|e| {
                (
                    e["obj"]["seq"].as_i64().unwrap(),
                    e["obj"]["color"].as_i64().unwrap(),
                    e["old"]["color"].as_i64().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            got,
            [(2, 2, 0), (3, 3, 1), (4, 1, 0)],
            "seq, colour, old colour"
        );
        // A log too small for the stretch is not extended: that view resets.
        let small = Board::new(
            Snapshot {
                settings: settings(0.0),
                seq: 3,
                bits: bits_after(&history, 3),
                freezing: None,
                recent: Vec::new(),
            },
            1,
        );
        assert!(!small.may_backfill(1));
        let mut cursor = small.cursor_at(1);
        assert_eq!(collect(&small, &mut cursor, false)[0]["action"], "reset");
    }

    #[test]
    fn compact_runs_are_split_by_settings_changes_and_keep_the_order() {
        let board = empty_board(0);
        let (mut compact, _) = board.initial_state();
        let mut qik = compact;
        board.apply(&[tile(1, 0, 0, 1), tile(2, 1, 0, 2)]).unwrap();
        board.set_settings(settings(5.0));
        board.apply(&[tile(3, 0, 0, 3)]).unwrap();
        let events = collect(&board, &mut compact, true);
        assert_eq!(
            events[0],
            json!({"key": "board/3/compact", "action": "tiles", "seq": [1, 2], "tiles": [[0, 0, 1], [1, 0, 2]]})
        );
        assert_eq!(
            (
                events[1]["action"].clone(),
                events[1]["obj"]["cooldown"].clone()
            ),
            (json!("settings"), json!(5.0))
        );
        assert_eq!(
            events[2],
            json!({"key": "board/3/compact", "action": "tiles", "seq": [3, 3], "tiles": [[0, 0, 3]]})
        );
        assert_eq!(
            collect(&board, &mut compact, true),
            json!([]),
            "nothing twice"
        );
        let events = collect(&board, &mut qik, false);
        let olds: Vec<Value> = events
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["old"]["color"].clone())
            .collect();
        assert_eq!(olds, [json!(0), json!(0), Value::Null, json!(1)]);
        assert_eq!(events[0]["obj"]["placed_at"], "2025-11-29T17:23:20.123456Z");
    }

    #[test]
    fn the_stream_must_continue_the_copy() {
        let board = empty_board(10);
        assert_eq!(
            board.apply(&[tile(9, 0, 0, 1), tile(10, 0, 0, 1)]),
            Ok(0),
            "already applied"
        );
        assert_eq!(
            board.apply(&[tile(12, 0, 0, 1)]),
            Err(Discontinuity::Gap { from: 11 })
        );
        assert_eq!(
            board.apply(&[tile(11, 2, 0, 1)]),
            Err(Discontinuity::Inconsistent)
        );
        assert_eq!(board.seq(), 10);
        assert_eq!(board.apply(&[tile(11, 1, 1, 3), tile(12, 0, 1, 2)]), Ok(2));
        assert_eq!(board.packed().2.as_ref(), &[0b0000_1011]);
    }

    /// The 2x2 board of `empty_board` with freeze_after = 1 s, at seq 0, at time 0.
    fn freezing_board(capacity: u64) -> Board {
        let mut settings = settings(0.0);
        settings.freeze_after = Some(1.0);
        let freezing = Freezing::new(1_000_000, 2, 2, 0, &[], 0);
        let snapshot = Snapshot {
            settings,
            seq: 0,
            bits: vec![0],
            freezing: Some(freezing),
            recent: Vec::new(),
        };
        Board::new(snapshot, capacity)
    }

    fn placed_at(seq: i64, x: i32, y: i32, color: i32, at: i64) -> Placement {
        Placement {
            at,
            ..tile(seq, x, y, color)
        }
    }

    #[test]
    fn tiles_that_rest_are_announced_frozen_in_order_and_in_the_initial_state() {
        let board = freezing_board(100);
        let (mut compact, state) = board.initial_state();
        let state: Value = serde_json::from_slice(&state).unwrap();
        assert_eq!(
            (state["freeze_after"].clone(), state["frozen"].clone()),
            (json!(1.0), json!("AA=="))
        );
        let mut qik = compact;
        board
            .apply(&[placed_at(1, 1, 0, 2, 0), placed_at(2, 0, 1, 0, 0)])
            .unwrap();
        board.freeze_due(999_999);
        assert!(!board.is_frozen(1, 0), "not before its second");
        board.freeze_due(1_000_000);
        assert!(
            board.is_frozen(1, 0) && !board.is_frozen(0, 1),
            "colour 0 never freezes"
        );
        board.apply(&[placed_at(3, 0, 0, 1, 1_500_000)]).unwrap();
        let events = collect(&board, &mut compact, true);
        assert_eq!(
            events[1],
            json!({"key": "board/3/compact", "action": "frozen", "obj": {"seq": 2, "tiles": [[1, 0]]}})
        );
        assert_eq!(events[2]["seq"], json!([3, 3]));
        let actions: Vec<Value> = collect(&board, &mut qik, false)
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["action"].clone())
            .collect();
        assert_eq!(
            actions,
            [
                json!("update"),
                json!("update"),
                json!("frozen"),
                json!("update")
            ]
        );
        // A fresh view starts from a state that has the frozen tile: bit 1 of the bitmap.
        let (_, state) = board.initial_state();
        let state: Value = serde_json::from_slice(&state).unwrap();
        assert_eq!(state["frozen"], json!("QA=="));
        // A repair changes the frozen tile: it is not frozen any more.
        board.apply(&[placed_at(4, 1, 0, 3, 2_000_000)]).unwrap();
        assert!(!board.is_frozen(1, 0));
        assert!(!board.is_frozen(5, 5), "outside the board");
    }

    #[test]
    fn a_view_that_missed_a_dropped_notice_gets_a_reset() {
        let board = freezing_board(2);
        let (mut behind, _) = board.initial_state();
        board
            .apply(&[placed_at(1, 0, 0, 1, 0), placed_at(2, 1, 0, 1, 0)])
            .unwrap();
        let (mut current, _) = board.initial_state();
        // Two tiles freeze (weight 2): the log drops the placements, then the notice.
        board.freeze_due(1_000_000);
        board.set_settings(Settings {
            cooldown: 1.0,
            ..(*board.settings()).clone()
        });
        assert_eq!(collect(&board, &mut behind, true)[0]["action"], "reset");
        let events = collect(&board, &mut current, true);
        assert_eq!(
            events[0]["action"], "reset",
            "the frozen notice was dropped: {events}"
        );
        assert_eq!(collect(&board, &mut current, true), json!([]));
    }

    #[test]
    fn sessions_hear_how_many_watch_at_most_every_so_often() {
        let board = Arc::new(empty_board(0));
        let (mut cursor, _) = board.initial_state();
        board.set_watchers(2);
        let t0 = Instant::now();
        let every = Duration::from_secs(2);
        board.tell_watching(t0, every);
        let events = collect(&board, &mut cursor, true);
        assert_eq!(
            events,
            json!([{"key": "board/3/compact", "action": "presence", "obj": {"watching": 2}}])
        );
        let (_, state) = board.initial_state();
        let state: Value = serde_json::from_slice(&state).unwrap();
        assert_eq!(state["watching"], 2);
        board.set_watchers(1);
        board.tell_watching(t0 + Duration::from_secs(1), every);
        assert_eq!(collect(&board, &mut cursor, true), json!([]), "too soon");
        board.tell_watching(t0 + every, every);
        assert_eq!(
            collect(&board, &mut cursor, false)[0]["obj"],
            json!({"watching": 1})
        );
        board.tell_watching(t0 + 2 * every, every);
        assert_eq!(
            collect(&board, &mut cursor, true),
            json!([]),
            "unchanged: nothing"
        );
        // A view that did not ask never gets them.
        let (mut quiet, _) = board.initial_state();
        board.set_watchers(0);
        board.tell_watching(t0 + 3 * every, every);
        let mut out = ArrayBuilder::new();
        board.collect(&mut quiet, true, false, &mut out);
        assert_eq!(out.count(), 0);
        assert_eq!(
            collect(&board, &mut quiet, true),
            json!([]),
            "and its cursor moved past"
        );
    }

    #[test]
    fn a_reload_resets_every_view_with_the_new_state() {
        let board = empty_board(0);
        let (mut cursor, _) = board.initial_state();
        board.reload(Snapshot {
            settings: settings(1.0),
            seq: 7,
            bits: vec![0xff],
            freezing: None,
            recent: Vec::new(),
        });
        let events = collect(&board, &mut cursor, true);
        assert_eq!(events.as_array().unwrap().len(), 1);
        assert_eq!(events[0]["action"], "reset");
        assert_eq!(
            (
                events[0]["obj"]["seq"].clone(),
                events[0]["obj"]["bits"].clone()
            ),
            (json!(7), json!("/w=="))
        );
        assert_eq!(collect(&board, &mut cursor, true), json!([]));
    }
}
