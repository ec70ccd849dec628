//! Frozen tiles of a board with `freeze_after` (One Million Checkboxes' ending), as the
//! gateway tells clients: a bitmap of the frozen tiles, and for every other tile showing
//! a non-zero colour the second at which it freezes unless it changes before.
//!
//! The database decides (it refuses placements on frozen tiles, also those that waited for
//! their locks across the moment); the gateway only tells. It announces a tile from the
//! whole second after its moment, once `place.settled_seq` has said that every placement
//! checked before then is in the mirror (see `crate::app`): a client never sees a tile
//! frozen and then changed by a player.

/// One row of `place.frozen_tiles(board, 'infinity')`: every non-zero tile and when it
/// freezes (microseconds since the Unix epoch).
use std::collections::BTreeMap;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FrozenRow {
    pub x: i32,
    pub y: i32,
    /// The seq of the tile's last change.
    pub seq: i64,
    pub frozen_at_us: i64,
}

#[derive(Debug, Clone)]
pub struct Freezing {
    /// Microseconds a non-zero tile rests unchanged before it freezes.
    pub after_us: i64,
    width: i32,
    /// One bit per tile, tile n at bit n from the most significant bit of byte 0 (the
    /// packed layout with one bit per tile).
    frozen: Vec<u8>,
    /// Per tile: the Unix second from which it is frozen if it does not change; 0 when it
    /// will not freeze (colour 0) or is frozen already.
    deadlines: Vec<u32>,
    /// Tiles by deadline, so that a tick touches only the tiles due (not every tile). An
    /// entry is stale when its tile changed since (its deadline moved).
    by_deadline: BTreeMap<u32, Vec<u32>>,
    /// Entries in `by_deadline`, stale ones included: rebuilt when they outgrow the board.
    entries: usize,
}

/// The Unix second from which a tile frozen at `micros` is announced.
fn announce_at(micros: i64) -> u32 {
    let seconds = micros.div_euclid(1_000_000) + i64::from(micros.rem_euclid(1_000_000) != 0);
    seconds.clamp(1, i64::from(u32::MAX - 1)) as u32
}

impl Freezing {
    /// The state of a board of `width` x `height` tiles at `seq` from the rows read after
    /// it; rows of tiles that changed after `seq` are left to the stream, which brings
    /// those changes.
    pub fn new(
        after_us: i64,
        width: i32,
        height: i32,
        seq: i64,
        rows: &[FrozenRow],
        now_us: i64,
    ) -> Self {
        let tiles = width as usize * height as usize;
        let mut freezing = Freezing {
            after_us,
            width,
            frozen: vec![0; tiles.div_ceil(8)],
            deadlines: vec![0; tiles],
            by_deadline: BTreeMap::new(),
            entries: 0,
        };
        let now = now_us.div_euclid(1_000_000);
        for row in rows.iter().filter(|r| r.seq <= seq) {
            if !(0..width).contains(&row.x) || !(0..height).contains(&row.y) {
                continue;
            }
            let n = freezing.tile(row.x, row.y);
            let deadline = announce_at(row.frozen_at_us);
            if i64::from(deadline) <= now {
                freezing.set_frozen(n, true);
            } else {
                freezing.schedule(n, deadline);
            }
        }
        freezing
    }

    fn schedule(&mut self, n: usize, deadline: u32) {
        self.deadlines[n] = deadline;
        self.by_deadline.entry(deadline).or_default().push(n as u32);
        self.entries += 1;
        if self.entries > 2 * self.deadlines.len().max(1024) {
            self.rebuild();
        }
    }

    /// Drops the stale entries: one per tile still to freeze.
    fn rebuild(&mut self) {
        self.by_deadline.clear();
        for (n, &deadline) in self.deadlines.iter().enumerate() {
            if deadline != 0 {
                self.by_deadline.entry(deadline).or_default().push(n as u32);
            }
        }
        self.entries = self.by_deadline.values().map(Vec::len).sum();
    }

    fn tile(&self, x: i32, y: i32) -> usize {
        x as usize + self.width as usize * y as usize
    }

    fn set_frozen(&mut self, n: usize, frozen: bool) {
        let bit = 0x80 >> (n % 8);
        if frozen {
            self.frozen[n / 8] |= bit;
        } else {
            self.frozen[n / 8] &= !bit;
        }
    }

    pub fn is_frozen(&self, x: i32, y: i32) -> bool {
        let n = self.tile(x, y);
        self.frozen[n / 8] & (0x80 >> (n % 8)) != 0
    }

    /// Tile (x, y) changed to `color` at `at_us`: it is not frozen, and freezes
    /// `after_us` later if its colour is not 0.
    pub fn changed(&mut self, x: i32, y: i32, color: i32, at_us: i64) {
        let n = self.tile(x, y);
        self.set_frozen(n, false);
        self.deadlines[n] = 0;
        if color != 0 {
            self.schedule(n, announce_at(at_us.saturating_add(self.after_us)));
        }
    }

    /// Whether a tile freezes by `now_us`.
    pub fn is_due(&self, now_us: i64) -> bool {
        let now = now_us.div_euclid(1_000_000);
        self.by_deadline
            .first_key_value()
            .is_some_and(|(&first, _)| i64::from(first) <= now)
    }

    /// The tiles that freeze by `now_us` (in tile order), now marked frozen.
    pub fn due(&mut self, now_us: i64) -> Vec<(i32, i32)> {
        let now = now_us
            .div_euclid(1_000_000)
            .clamp(0, i64::from(u32::MAX - 1)) as u32;
        if self
            .by_deadline
            .first_key_value()
            .is_none_or(|(&first, _)| first > now)
        {
            return Vec::new();
        }
        let later = self.by_deadline.split_off(&(now + 1));
        let ready = std::mem::replace(&mut self.by_deadline, later);
        let mut due = Vec::new();
        for (deadline, tiles) in ready {
            self.entries -= tiles.len();
            for n in tiles {
                let n = n as usize;
                if self.deadlines[n] == deadline {
                    self.deadlines[n] = 0;
                    self.set_frozen(n, true);
                    due.push(n);
                }
            }
        }
        due.sort_unstable();
        let width = self.width as usize;
        due.into_iter()
            .map(|n| ((n % width) as i32, (n / width) as i32))
            .collect()
    }

    /// The packed bitmap of frozen tiles.
    pub fn bitmap(&self) -> &[u8] {
        &self.frozen
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: i64 = 1_000_000;

    fn row(x: i32, y: i32, seq: i64, frozen_at_us: i64) -> FrozenRow {
        FrozenRow {
            x,
            y,
            seq,
            frozen_at_us,
        }
    }

    #[test]
    fn tiles_are_announced_from_their_moment_rounded_up_never_before() {
        let now = 1_000 * SECOND;
        let rows = [
            row(0, 0, 1, now - SECOND),     // frozen already
            row(1, 0, 2, now + SECOND / 2), // moment 1000.5 s: announced at 1001 s
            row(2, 0, 3, now + 5 * SECOND),
            row(3, 0, 9, now - SECOND), // changed after the snapshot: the stream's business
        ];
        let mut f = Freezing::new(10 * SECOND, 4, 2, 5, &rows, now);
        assert!(f.is_frozen(0, 0));
        assert!(!f.is_frozen(1, 0) && !f.is_frozen(3, 0));
        assert_eq!(f.bitmap(), &[0b1000_0000]);
        assert!(!f.is_due(now + SECOND / 2));
        assert_eq!(f.due(now + SECOND / 2), [], "1000.5 s is before 1001 s");
        assert!(f.is_due(now + SECOND));
        assert_eq!(f.due(now + SECOND), [(1, 0)]);
        assert_eq!(f.due(now + SECOND), [], "nothing twice");
        // A change before the deadline restarts the tile's clock; colour 0 never freezes.
        f.changed(2, 0, 1, now + 2 * SECOND);
        f.changed(0, 0, 0, now + 2 * SECOND);
        assert!(!f.is_frozen(0, 0));
        assert_eq!(f.due(now + 6 * SECOND), []);
        assert_eq!(f.due(now + 12 * SECOND), [(2, 0)]);
        assert_eq!(f.bitmap(), &[0b0110_0000]);
    }

    #[test]
    fn a_busy_tile_keeps_its_entries_bounded_and_freezes_once() {
        let mut f = Freezing::new(SECOND, 2, 1, 0, &[], 0);
        for i in 0..10_000i64 {
            f.changed(0, 0, 1 + (i % 3) as i32, i * SECOND / 100);
        }
        assert!(f.entries <= 2 * 1024 + 1, "{} entries", f.entries);
        assert_eq!(f.due(100 * SECOND), [], "its last change was at 99.99 s");
        assert_eq!(f.due(101 * SECOND), [(0, 0)]);
        assert_eq!(f.due(200 * SECOND), [], "once");
    }

    #[test]
    fn a_tile_frozen_and_changed_by_a_repair_freezes_again_later() {
        let mut f = Freezing::new(SECOND, 2, 1, 0, &[], 0);
        f.changed(1, 0, 3, 0);
        assert_eq!(f.due(SECOND), [(1, 0)]);
        f.changed(1, 0, 2, 5 * SECOND);
        assert!(!f.is_frozen(1, 0));
        assert_eq!(f.due(6 * SECOND), [(1, 0)]);
        assert!(f.is_frozen(1, 0));
    }
}
