//! Where a view stands in a board's log, and extending the log back from the history
//! (backfill) for a view that resumes from further back than it reaches.

use super::{Board, Cursor, Mirror};
use crate::mirror::event_log::{Entry, TilesBuilder};
use crate::mirror::snapshot::Past;
use pgplace_core::payload::Placement;

impl Board {
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
}

impl Mirror {
    pub(super) fn cursor(&self) -> Cursor {
        Cursor {
            settings_owed: false,
            epoch: self.epoch,
            seq: self.seq,
            notices: self.notices,
        }
    }
}
