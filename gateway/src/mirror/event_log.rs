//! The board's log of recent events, each serialized once in both forms (Qik and
//! compact) when it enters, and the writer that cuts a delivery out of it.

use crate::fragments::{ArrayBuilder, Fragments};
use crate::json::{json_str, timestamp};
use bytes::Bytes;
use pgplace_core::payload::Placement;
use std::collections::VecDeque;
use std::fmt::Write as _;

/// The log of recent events: every tile with seq in (floor, seq] and the notices among
/// them after `floor_notice`, holding at most `capacity` tiles (a notice counts as the
/// tiles it names, a settings change as one).
pub(super) struct EventLog {
    pub(super) entries: VecDeque<Entry>,
    pub(super) tiles: u64,
    pub(super) capacity: u64,
    pub(super) floor: i64,
    /// The newest notice dropped: a cursor that has not seen it must start over.
    pub(super) floor_notice: u64,
}

impl EventLog {
    pub(super) fn new(seq: i64, capacity: u64) -> Self {
        EventLog {
            entries: VecDeque::new(),
            tiles: 0,
            capacity,
            floor: seq,
            floor_notice: 0,
        }
    }

    /// Puts older tiles before the oldest entry (see `Board::backfill`).
    pub(super) fn push_front(&mut self, entry: Entry, floor: i64) {
        self.tiles += entry.weight();
        self.entries.push_front(entry);
        self.floor = floor;
    }

    pub(super) fn push(&mut self, entry: Entry) {
        self.tiles += entry.weight();
        self.entries.push_back(entry);
        while self.tiles > self.capacity {
            let Some(dropped) = self.entries.pop_front() else {
                break;
            };
            self.tiles -= dropped.weight();
            match dropped {
                Entry::Tiles(t) => self.floor = t.last,
                Entry::Notice { version, .. } => self.floor_notice = version,
            }
        }
    }
}

pub(super) enum Entry {
    Tiles(TilesEntry),
    /// An event that takes no seq: settings changed, tiles froze.
    Notice {
        version: u64,
        /// The board's seq when it happened.
        seq: i64,
        weight: u64,
        /// A `presence` event: only for the views that asked.
        presence: bool,
        qik: Bytes,
        compact: Bytes,
    },
}

impl Entry {
    pub(super) fn seq_end(&self) -> i64 {
        match self {
            Entry::Tiles(t) => t.last,
            Entry::Notice { seq, .. } => *seq,
        }
    }

    pub(super) fn weight(&self) -> u64 {
        match self {
            Entry::Tiles(t) => t.count() as u64,
            Entry::Notice { weight, .. } => *weight,
        }
    }
}

/// Consecutive tiles, serialized in both forms. `qik` holds one event per tile and
/// `compact` one `[x,y,color]` per tile, comma-separated; `*_starts` say where each
/// tile's piece begins, so that a reader can start in the middle.
pub(super) struct TilesEntry {
    pub(super) first: i64,
    pub(super) last: i64,
    pub(super) qik: Bytes,
    pub(super) qik_starts: Vec<u32>,
    pub(super) compact: Bytes,
    pub(super) compact_starts: Vec<u32>,
}

impl TilesEntry {
    pub(super) fn count(&self) -> usize {
        self.qik_starts.len()
    }
}

pub(super) struct TilesBuilder<'k> {
    pub(super) key: &'k str,
    pub(super) first: i64,
    pub(super) last: i64,
    pub(super) qik: String,
    pub(super) qik_starts: Vec<u32>,
    pub(super) compact: String,
    pub(super) compact_starts: Vec<u32>,
}

impl<'k> TilesBuilder<'k> {
    pub(super) fn new(key: &'k str) -> Self {
        TilesBuilder {
            key,
            first: 0,
            last: 0,
            qik: String::new(),
            qik_starts: Vec::new(),
            compact: String::new(),
            compact_starts: Vec::new(),
        }
    }

    pub(super) fn add(&mut self, p: &Placement, old: u8) {
        if self.qik_starts.is_empty() {
            self.first = p.seq;
        } else {
            self.qik.push(',');
            self.compact.push(',');
        }
        self.last = p.seq;
        self.qik_starts.push(self.qik.len() as u32);
        self.compact_starts.push(self.compact.len() as u32);
        let _ = write!(
            self.qik,
            "{{\"key\":{},\"action\":\"update\",\"old\":{{\"x\":{},\"y\":{},\"color\":{}}},\"obj\":{{\"x\":{},\"y\":{},\"color\":{},\"user\":{},\"seq\":{},\"placed_at\":\"{}\"}}}}",
            json_str(self.key), p.x, p.y, old, p.x, p.y, p.color, p.user, p.seq, timestamp(p.at)
        );
        let _ = write!(self.compact, "[{},{},{}]", p.x, p.y, p.color);
    }

    pub(super) fn finish(self) -> TilesEntry {
        TilesEntry {
            first: self.first,
            last: self.last,
            qik: Bytes::from(self.qik),
            qik_starts: self.qik_starts,
            compact: Bytes::from(self.compact),
            compact_starts: self.compact_starts,
        }
    }
}

/// Builds the events of one delivery. Compact views get one `tiles` event per run of
/// tiles (settings events split runs, keeping the order).
pub(super) struct EventsOut<'k, 'o> {
    pub(super) key: &'k str,
    pub(super) compact: bool,
    pub(super) events: &'o mut ArrayBuilder,
    pub(super) run: Fragments,
    pub(super) run_first: i64,
    pub(super) run_last: i64,
    pub(super) run_tiles: usize,
}

impl<'k, 'o> EventsOut<'k, 'o> {
    pub(super) fn new(key: &'k str, compact: bool, events: &'o mut ArrayBuilder) -> Self {
        EventsOut {
            key,
            compact,
            events,
            run: Fragments::new(),
            run_first: 0,
            run_last: 0,
            run_tiles: 0,
        }
    }

    pub(super) fn tiles(&mut self, t: &TilesEntry, skip: usize) {
        let (buf, starts) = if self.compact {
            (&t.compact, &t.compact_starts)
        } else {
            (&t.qik, &t.qik_starts)
        };
        let piece = buf.slice(starts[skip] as usize..);
        if self.compact {
            if self.run_tiles == 0 {
                self.run_first = t.first + skip as i64;
            } else {
                self.run.push_static(",");
            }
            self.run.push(piece);
            self.run_last = t.last;
            self.run_tiles += t.count() - skip;
        } else {
            // Qik events are whole elements already; the pieces are comma-joined.
            self.events.push(piece.into());
        }
    }

    pub(super) fn event(&mut self, event: Bytes) {
        self.flush_run();
        self.events.push(event.into());
    }

    pub(super) fn flush_run(&mut self) {
        if self.run_tiles == 0 {
            return;
        }
        let mut event = Fragments::new();
        event.push(
            format!(
                "{{\"key\":{},\"action\":\"tiles\",\"seq\":[{},{}],\"tiles\":[",
                json_str(self.key),
                self.run_first,
                self.run_last
            )
            .into_bytes()
            .into(),
        );
        event.append(std::mem::take(&mut self.run));
        event.push_static("]}");
        self.events.push(event);
        self.run_tiles = 0;
    }

    pub(super) fn finish(mut self) {
        self.flush_run();
    }
}

pub(super) fn event_bytes(key: &str, action: &str, obj: &str) -> Bytes {
    format!(
        "{{\"key\":{},\"action\":\"{action}\",\"obj\":{obj}}}",
        json_str(key)
    )
    .into()
}
