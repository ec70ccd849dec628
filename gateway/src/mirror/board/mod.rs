//! The gateway's copy of one board, kept current from the notification stream, and the
//! log of recent events that every session on the board reads from.
//!
//! A session does not hold a queue of its own: it holds a cursor (the last seq it was
//! given) per view, and `get_events` reads the shared log from there. Each event is
//! serialized once, when it enters the log, in both forms (Qik and compact); a response
//! is made of slices of those buffers. A session whose cursor fell out of the log (it
//! stopped polling while more than `session_buffer` tiles arrived) or whose board was
//! reloaded from the database (`epoch` changed) gets a `reset` with a fresh initial state.

//!
//! This file holds the mirror and applying what the stream says; beside it, one job a file:
//! - `positions.rs`: where a view stands in the log, and extending the log back (backfill);
//! - `notices.rs`: events that take no seq (settings, frozen tiles) and freezing;
//! - `presence.rs`: how many watch, and where their cursors are;
//! - `delivery.rs`: a view's initial state and its events after a cursor;
//! - `tests.rs`: the mirror's unit tests.

mod delivery;
mod notices;
mod positions;
mod presence;
#[cfg(test)]
mod tests;

use crate::mirror::cursors::Cursors;
use crate::mirror::event_log::{Entry, EventLog, TilesBuilder};
use crate::mirror::feed::Feeds;
use crate::mirror::freezing::Freezing;
use crate::mirror::recent::Recent;
use crate::mirror::snapshot::{Settings, Snapshot};
use crate::mirror::state::settings_json;
use bytes::Bytes;
use pgplace_core::bits::TileWidth;
use pgplace_core::payload::Placement;
use std::collections::VecDeque;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Instant;
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

    /// Whether new settings need a reload: they change the packed layout, or which
    /// tiles are frozen.
    pub fn needs_reload(&self, settings: &Settings) -> bool {
        let m = self.lock();
        m.settings.width != settings.width
            || m.settings.height != settings.height
            || m.settings.bits_per_tile != settings.bits_per_tile
            || m.settings.freeze_after != settings.freeze_after
    }
}
