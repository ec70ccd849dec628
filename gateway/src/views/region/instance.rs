//! One region instance: its own copy of the rectangle's bits and its own log, shared by
//! every session on it.
//!
//! A new region is registered first, with its tiles still to copy, so that it is fed every
//! placement from then on; its tiles are then copied from the board a band of rows at a time
//! (`fill_band`), each band under the board's lock and no more: a 4096x4096 rectangle does
//! not stop the board's placements while it is copied.

use crate::fragments::ArrayBuilder;
use crate::json::timestamp;
use crate::mirror::snapshot::Settings;
use crate::shared_log::Delivery;
use crate::shared_log::{reset_event, LogCursor, SharedLog};
use crate::views::events::{FrozenTiles, NewTile, OldTile, RegionEvent};
use crate::views::region::rect::{copy_rows, cut, packed_len, Packed, Rect};
use base64::Engine;
use bytes::Bytes;
use pgplace_core::bits::TileWidth;
use pgplace_core::payload::Placement;
use serde::Serialize;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::Notify;

pub struct Region {
    pub key: Arc<str>,
    /// The rectangle asked for (the board may have shrunk below it since).
    pub(super) rect: Rect,
    compact: bool,
    state: Mutex<State>,
    /// The board's seq up to which every region has been handed its placements (shared
    /// by the board's regions): a region with no tile since is exact up to it too.
    fed: Arc<AtomicI64>,
    /// Woken (all waiters) when the log grows, restarts, or the board is deleted.
    pub changed: Notify,
}

pub(super) struct State {
    settings: Arc<Settings>,
    /// `rect` cut to the board.
    clipped: Rect,
    tile: TileWidth,
    pub(super) seq: i64,
    /// The rectangle packed like a board `clipped.width` wide.
    pub(super) bits: Vec<u8>,
    /// Rows of `clipped` copied from the board so far (all of them once the region is
    /// served: `region_view` fills it before it hands it out).
    filled_rows: i32,
    log: SharedLog,
    deleted: bool,
    state_json: Option<Bytes>,
}

#[derive(Serialize)]
struct RegionState<'a> {
    #[serde(flatten)]
    settings: &'a Settings,
    seq: i64,
    region: Rect,
    bits: String,
}

#[derive(Serialize)]
struct SettingsAt<'a> {
    #[serde(flatten)]
    settings: &'a Settings,
    seq: i64,
}

/// At most this many tiles are copied from the board under one hold of its lock.
const FILL_TILES: i64 = 65_536;

impl Region {
    pub fn key_for(board: i64, rect: Rect, compact: bool) -> String {
        let form = if compact { "/compact" } else { "" };
        format!(
            "board/{board}/region/{},{},{},{}{form}",
            rect.x, rect.y, rect.width, rect.height
        )
    }

    /// A region of the board at `seq`, its tiles still to copy (`fill_band`).
    pub(super) fn new(
        settings: Arc<Settings>,
        rect: Rect,
        compact: bool,
        seq: i64,
        capacity: usize,
        fed: Arc<AtomicI64>,
    ) -> Self {
        let tile = TileWidth::new(settings.bits_per_tile.into())
            .expect("the database holds valid tile widths");
        let clipped = rect.clip(settings.width, settings.height);
        Region {
            key: Self::key_for(settings.id, rect, compact).into(),
            rect,
            compact,
            state: Mutex::new(State {
                bits: vec![0u8; packed_len(clipped, tile)],
                filled_rows: 0,
                settings,
                clipped,
                tile,
                seq,
                log: SharedLog::new(capacity),
                deleted: false,
                state_json: None,
            }),
            fed,
            changed: Notify::new(),
        }
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Copies the next band of rows from the board's `bits` (a board `board_width` wide),
    /// under the board's lock; false once every row is copied.
    ///
    /// Exact whatever came between the bands: a band holds the board as it is now, and
    /// every placement the region has not been handed yet will be handed to it later, in
    /// order (it was registered before any placement after its seq was applied to the
    /// board), setting its tile again; a tile with no such placement is as the board has it.
    pub fn fill_band(&self, bits: &[u8], board_width: i32) -> bool {
        let mut s = self.lock();
        let (clipped, tile) = (s.clipped, s.tile);
        if s.filled_rows >= clipped.height {
            return false;
        }
        let band = (FILL_TILES / clipped.width.max(1) as i64).clamp(1, i32::MAX as i64) as i32;
        let rows = s.filled_rows..(s.filled_rows.saturating_add(band)).min(clipped.height);
        s.filled_rows = rows.end;
        let board = Packed {
            bits,
            width: board_width,
            tile,
        };
        copy_rows(board, clipped, rows, &mut s.bits);
        s.state_json = None;
        s.filled_rows < clipped.height
    }

    /// Applies the placements `first..=last` of the board (those inside, with their old
    /// colours); placements at or below the region's seq are in it already.
    pub(super) fn apply(&self, first: i64, last: i64, inside: &[(Placement, u8)]) {
        let mut s = self.lock();
        if last <= s.seq {
            return;
        }
        let from = s.seq;
        s.seq = last;
        let mut tiles = Vec::new();
        for (p, old) in inside.iter().filter(|(p, _)| p.seq > from) {
            let c = s.clipped;
            if !c.contains(p.x, p.y) {
                continue;
            }
            let m = (p.x - c.x) as i64 + c.width as i64 * (p.y - c.y) as i64;
            let tile = s.tile;
            tile.set(&mut s.bits, m, p.color.into())
                .expect("a tile inside the rectangle");
            if self.compact {
                tiles.push([p.x, p.y, p.color]);
            } else {
                let event = RegionEvent::Update {
                    old: OldTile {
                        x: p.x,
                        y: p.y,
                        color: (*old).into(),
                    },
                    obj: NewTile {
                        x: p.x,
                        y: p.y,
                        color: p.color,
                        user: p.user,
                        seq: p.seq,
                        placed_at: timestamp(p.at),
                    },
                };
                s.log.push(event.to_bytes(&self.key));
            }
        }
        if !tiles.is_empty() {
            let seq = [first.max(from + 1), last];
            let event = RegionEvent::Tiles { seq, tiles: &tiles };
            s.log.push(event.to_bytes(&self.key));
        }
        s.state_json = None;
        drop(s);
        self.changed.notify_waiters();
    }

    /// The board was read afresh (`bits` at `seq`): sessions get a `reset`.
    pub(super) fn reload(&self, settings: Arc<Settings>, seq: i64, bits: &[u8]) {
        let mut s = self.lock();
        s.tile = TileWidth::new(settings.bits_per_tile.into())
            .expect("the database holds valid tile widths");
        s.clipped = self.rect.clip(settings.width, settings.height);
        let board = Packed {
            bits,
            width: settings.width,
            tile: s.tile,
        };
        s.bits = cut(board, s.clipped);
        s.filled_rows = s.clipped.height;
        s.settings = settings;
        s.seq = seq;
        s.log.restart();
        s.state_json = None;
        drop(s);
        self.changed.notify_waiters();
    }

    /// Tiles froze when the board's seq was `seq`: those inside are told.
    pub(super) fn frozen(&self, seq: i64, tiles: &[(i32, i32)]) {
        let mut s = self.lock();
        let c = s.clipped;
        let inside: Vec<[i32; 2]> = tiles
            .iter()
            .filter(|(x, y)| c.contains(*x, *y))
            .map(|(x, y)| [*x, *y])
            .collect();
        if inside.is_empty() {
            return;
        }
        let obj = FrozenTiles {
            seq,
            tiles: &inside,
        };
        s.log.push(RegionEvent::Frozen { obj }.to_bytes(&self.key));
        drop(s);
        self.changed.notify_waiters();
    }

    pub(super) fn set_settings(&self, settings: Arc<Settings>, seq: i64) {
        let mut s = self.lock();
        let obj = serde_json::to_value(SettingsAt {
            settings: &settings,
            seq,
        })
        .expect("settings serialize");
        s.log
            .push(RegionEvent::Settings { obj: &obj }.to_bytes(&self.key));
        s.settings = settings;
        s.state_json = None;
        drop(s);
        self.changed.notify_waiters();
    }

    pub(super) fn mark_deleted(&self) {
        self.lock().deleted = true;
        self.changed.notify_waiters();
    }

    /// The settings, seq, rectangle and its packed bits (base64), and the cursor that
    /// continues exactly after them.
    pub fn initial_state(&self) -> (LogCursor, Bytes) {
        let mut s = self.lock();
        s.catch_up(self.fed.load(Ordering::SeqCst));
        (s.log.end(), s.state_json())
    }

    /// Adds the events after `cursor` to `out` and moves the cursor past them.
    pub fn collect(&self, cursor: &mut LogCursor, out: &mut ArrayBuilder) -> Delivery {
        let mut s = self.lock();
        if s.deleted {
            out.push(RegionEvent::Deleted.to_bytes(&self.key).into());
            return Delivery::Ended;
        }
        if !s.log.read(cursor, out) {
            s.catch_up(self.fed.load(Ordering::SeqCst));
            out.push(reset_event(
                &self.key,
                s.state_json(),
                "region_position_lost",
            ));
            *cursor = s.log.end();
        }
        Delivery::Continues
    }
}

impl State {
    /// Every placement up to `fed` was handed to the region: none since its seq was inside.
    fn catch_up(&mut self, fed: i64) {
        if fed > self.seq {
            self.seq = fed;
            self.state_json = None;
        }
    }

    fn state_json(&mut self) -> Bytes {
        if let Some(json) = &self.state_json {
            return json.clone();
        }
        let json: Bytes = serde_json::to_vec(&RegionState {
            settings: &self.settings,
            seq: self.seq,
            region: self.clipped,
            bits: base64::engine::general_purpose::STANDARD.encode(&self.bits),
        })
        .expect("states serialize")
        .into();
        self.state_json = Some(json.clone());
        json
    }
}
