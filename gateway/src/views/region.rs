//! `board_region`: one rectangle of a board, for a client that shows only part of it (a
//! phone on one corner of a 4096×4096 board). Its initial state is the packed rectangle
//! and the board's seq; its events are the board's, cut to the rectangle. One instance per
//! (board, rectangle, form), shared by every session on it, with its own copy of the
//! rectangle's bits and its own log: a placement outside costs a region nothing but one
//! look-up in the board's grid of regions ([`Regions`]), and sessions read only the
//! rectangle's events.
//!
//! A new region is registered first, with its tiles still to copy, so that it is fed every
//! placement from then on; its tiles are then copied from the board a band of rows at a time
//! (`fill_band`), each band under the board's lock and no more: a 4096x4096 rectangle does
//! not stop the board's placements while it is copied.

use crate::boards::Boards;
use crate::errors::{RpcError, TOO_MANY};
use crate::fragments::ArrayBuilder;
use crate::json::timestamp;
use crate::limits::Limits;
use crate::mirror::board::Board;
use crate::mirror::feed::{Feed, Wants};
use crate::mirror::recent::Recent;
use crate::mirror::snapshot::Settings;
use crate::params::read_named;
use crate::params::BoardRef;
use crate::shared_log::Delivery;
use crate::shared_log::{reset_event, LogCursor, SharedLog};
use crate::views::events::{FrozenTiles, NewTile, OldTile, RegionEvent};
use crate::views::made::Made;
use crate::views::rect::{copy_rows, cut, packed_len, Packed, Rect};
use base64::Engine;
use bytes::Bytes;
use pgplace_core::bits::TileWidth;
use pgplace_core::payload::Placement;
use schemars::JsonSchema;
use serde::Deserialize;
use serde::Serialize;
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use tokio::sync::Notify;

pub struct Region {
    pub key: Arc<str>,
    /// The rectangle asked for (the board may have shrunk below it since).
    rect: Rect,
    compact: bool,
    state: Mutex<State>,
    /// The board's seq up to which every region has been handed its placements (shared
    /// by the board's regions): a region with no tile since is exact up to it too.
    fed: Arc<AtomicI64>,
    /// Woken (all waiters) when the log grows, restarts, or the board is deleted.
    pub changed: Notify,
}

struct State {
    settings: Arc<Settings>,
    /// `rect` cut to the board.
    clipped: Rect,
    tile: TileWidth,
    seq: i64,
    /// The rectangle packed like a board `clipped.width` wide.
    bits: Vec<u8>,
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
    fn new(
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

    fn lock(&self) -> MutexGuard<'_, State> {
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
    fn apply(&self, first: i64, last: i64, inside: &[(Placement, u8)]) {
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
    fn reload(&self, settings: Arc<Settings>, seq: i64, bits: &[u8]) {
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
    fn frozen(&self, seq: i64, tiles: &[(i32, i32)]) {
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

    fn set_settings(&self, settings: Arc<Settings>, seq: i64) {
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

    fn mark_deleted(&self) {
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

/// Grid cells are this many tiles a side: a placement looks only at the regions that
/// overlap its cell.
const CELL: i32 = 64;

/// How much one board's regions may hold together: each distinct rectangle is a copy of
/// its tiles, its JSON state and its log, and anonymous clients choose the rectangles.
#[derive(Clone, Copy, Debug)]
pub struct RegionBudget {
    /// Distinct rectangles (each with its log).
    pub regions: usize,
    /// Their tiles together.
    pub tiles: i64,
}

impl RegionBudget {
    /// What one board's regions may hold together, as configured.
    pub fn of(config: &crate::config::Config) -> Self {
        RegionBudget {
            regions: config.max_regions_per_board as usize,
            tiles: config.max_region_tiles_per_board.min(i64::MAX as u64) as i64,
        }
    }
}

/// `board_region`'s params: a rectangle inside the board.
#[derive(Deserialize, JsonSchema)]
pub struct RegionViewParams {
    pub board: BoardRef,
    pub x: i32,
    pub y: i32,
    pub width: i32,
    pub height: i32,
    /// `tiles` events instead of an `update` per tile.
    #[serde(default)]
    pub compact: bool,
    /// Also the board's `presence` and `cursors` events.
    #[serde(default)]
    pub presence: bool,
}

/// A subscriber's `board_region`: the region, and when it asked for `presence`, its
/// board and the last presence notice given.
pub struct RegionView {
    pub region: Arc<Region>,
    pub presence: Option<(Arc<Board>, u64)>,
}

impl RegionView {
    pub fn collect(&mut self, cursor: &mut LogCursor, out: &mut ArrayBuilder) -> Delivery {
        let delivery = self.region.collect(cursor, out);
        if let (Delivery::Continues, Some((board, seen))) = (&delivery, &mut self.presence) {
            board.collect_presence(seen, &self.region.key, out);
        }
        delivery
    }
}

/// A rectangle of a board.
pub async fn build(
    boards: &Boards,
    limits: &Limits,
    budget: RegionBudget,
    view_params: &Map<String, Value>,
) -> Result<Made<RegionView, LogCursor>, RpcError> {
    let p: RegionViewParams = read_named(view_params.clone())?;
    let (board, compact, presence) = (p.board, p.compact, p.presence);
    let rect = Rect {
        x: p.x,
        y: p.y,
        width: p.width,
        height: p.height,
    };
    let mirrored = boards.get(&board).await?;
    let board = &mirrored.board;
    let client = crate::limits::requester();
    let (region, made) = region_view(board, rect, compact, budget, || {
        limits.check_new_region(client)
    })?;
    if made {
        limits.made_region(client, region.clone());
    }
    let (cursor, state) = region.initial_state();
    Ok(Made {
        view: RegionView {
            region,
            presence: presence.then(|| (board.clone(), board.notices())),
        },
        cursor,
        state,
        params: view_params.clone(),
        board: Some(board.id),
        seq: None,
        signed_in: false,
    })
}

/// The board's `board_region` view of `rect` (which must lie inside the board), and
/// whether it was made now (within `budget`, if `admit` allows).
pub fn region_view(
    board: &Board,
    rect: Rect,
    compact: bool,
    budget: RegionBudget,
    admit: impl FnOnce() -> Result<(), RpcError>,
) -> Result<(Arc<Region>, bool), RpcError> {
    let regions = board.feeds.get_or_add(|| Regions {
        fed: Arc::new(AtomicI64::new(board.seq())),
        ..Regions::default()
    });
    let region = board.with_mirror(|m| {
        let (width, height) = (m.settings.width, m.settings.height);
        if rect.x < 0
            || rect.y < 0
            || rect.width < 1
            || rect.height < 1
            || rect.x as i64 + rect.width as i64 > width as i64
            || rect.y as i64 + rect.height as i64 > height as i64
        {
            return Err(RpcError::invalid_params(format!(
                "the region {}x{} at ({}, {}) is not inside board {}, which is {width}x{height} \
                 (x + width <= {width}, y + height <= {height}, width and height >= 1)",
                rect.width, rect.height, rect.x, rect.y, m.settings.name
            )));
        }
        regions.get(
            m.settings,
            rect,
            compact,
            m.seq,
            board.log_capacity() as usize,
            budget,
            admit,
        )
    });
    let (region, made) = region?;
    // Its tiles a band at a time, placements going on between the bands (a session
    // that finds the region still being filled by another helps, and waits for it).
    while board.with_mirror(|m| region.fill_band(m.bits, m.settings.width)) {}
    Ok((region, made))
}

/// A board's regions, found by the grid cells they overlap.
#[derive(Default)]
pub struct Regions {
    inner: Mutex<Index>,
    fed: Arc<AtomicI64>,
}

#[derive(Default)]
struct Index {
    by_key: HashMap<Arc<str>, Weak<Region>>,
    cells: HashMap<(i32, i32), Vec<Weak<Region>>>,
}

impl Regions {
    fn lock(&self) -> MutexGuard<'_, Index> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn is_empty(&self) -> bool {
        self.lock().by_key.is_empty()
    }

    /// The region for `rect` (form `compact`), and whether it was made now: registered at
    /// the board's `seq`, its tiles still to copy (`Region::fill_band`), if no session holds
    /// one, when the board's `budget` has room for it and `admit` (the client's own limit)
    /// allows it. Called under the board's lock, so that every placement after `seq` is
    /// applied to the board after the region is registered, and so handed to it.
    #[allow(clippy::too_many_arguments)]
    pub fn get(
        &self,
        settings: &Arc<Settings>,
        rect: Rect,
        compact: bool,
        seq: i64,
        capacity: usize,
        budget: RegionBudget,
        admit: impl FnOnce() -> Result<(), RpcError>,
    ) -> Result<(Arc<Region>, bool), RpcError> {
        let key = Region::key_for(settings.id, rect, compact);
        let mut index = self.lock();
        // Rectangles no session holds any more are forgotten here (the cells are pruned as
        // placements pass).
        index.by_key.retain(|_, r| r.strong_count() > 0);
        if let Some(region) = index.by_key.get(key.as_str()).and_then(Weak::upgrade) {
            return Ok((region, false));
        }
        let live: Vec<Arc<Region>> = index.by_key.values().filter_map(Weak::upgrade).collect();
        let held: i64 = live.iter().map(|r| r.rect.tiles()).sum();
        if live.len() >= budget.regions || held + rect.tiles() > budget.tiles {
            crate::metrics::metrics().rejected("regions_per_board");
            return Err(RpcError::new(
                TOO_MANY,
                format!(
                    "board {} serves its most distinct regions at once ({} of at most {}, \
                     {held} of at most {} tiles together): subscribe to one of them, or to \
                     the whole board",
                    settings.name,
                    live.len(),
                    budget.regions,
                    budget.tiles
                ),
            ));
        }
        admit()?;
        let region = Arc::new(Region::new(
            settings.clone(),
            rect,
            compact,
            seq,
            capacity,
            self.fed.clone(),
        ));
        index
            .by_key
            .insert(region.key.clone(), Arc::downgrade(&region));
        for cx in rect.x / CELL..=(rect.x + rect.width - 1) / CELL {
            for cy in rect.y / CELL..=(rect.y + rect.height - 1) / CELL {
                index
                    .cells
                    .entry((cx, cy))
                    .or_default()
                    .push(Arc::downgrade(&region));
            }
        }
        Ok((region, true))
    }

    fn live(&self) -> Vec<Arc<Region>> {
        let mut index = self.lock();
        index.by_key.retain(|_, r| r.strong_count() > 0);
        index.by_key.values().filter_map(Weak::upgrade).collect()
    }

    /// Hands each region the placements `first..=last` that fall inside it.
    fn apply(&self, first: i64, last: i64, placed: &[(Placement, u8)]) {
        let mut batches: HashMap<*const Region, (Arc<Region>, Vec<(Placement, u8)>)> =
            HashMap::new();
        {
            let mut index = self.lock();
            index.cells.retain(|_, regions| {
                regions.retain(|r| r.strong_count() > 0);
                !regions.is_empty()
            });
            for (p, old) in placed {
                let Some(regions) = index.cells.get(&(p.x / CELL, p.y / CELL)) else {
                    continue;
                };
                for region in regions.iter().filter_map(Weak::upgrade) {
                    if region.rect.contains(p.x, p.y) {
                        batches
                            .entry(Arc::as_ptr(&region))
                            .or_insert_with(|| (region.clone(), Vec::new()))
                            .1
                            .push((*p, *old));
                    }
                }
            }
        }
        for (region, inside) in batches.into_values() {
            region.apply(first, last, &inside);
        }
        // The regions without a tile in the batch are exact up to `last` as they are.
        self.fed.fetch_max(last, Ordering::SeqCst);
    }
}

impl Feed for Regions {
    fn wants(&self) -> Wants {
        let some = !self.is_empty();
        Wants {
            placements: some,
            bits: some,
            ..Wants::default()
        }
    }

    fn placed(&self, first: i64, last: i64, placed: &[(Placement, u8)], _: Option<&Recent>) {
        self.apply(first, last, placed);
    }

    fn settings_changed(&self, settings: &Arc<Settings>, seq: i64) {
        for region in self.live() {
            region.set_settings(settings.clone(), seq);
        }
    }

    fn frozen(&self, seq: i64, tiles: &[(i32, i32)]) {
        for region in self.live() {
            region.frozen(seq, tiles);
        }
    }

    fn reloaded(&self, settings: &Arc<Settings>, seq: i64, bits: Option<&[u8]>, _: &Recent) {
        self.fed.store(seq, Ordering::SeqCst);
        if let Some(bits) = bits {
            for region in self.live() {
                region.reload(settings.clone(), seq, bits);
            }
        }
    }

    fn deleted(&self) {
        for region in self.live() {
            region.mark_deleted();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(width: i32, height: i32, bits_per_tile: i32) -> Arc<Settings> {
        Arc::new(Settings {
            id: 1,
            name: "b".into(),
            width,
            height,
            bits_per_tile,
            palette: Vec::new(),
            cooldown: 0.0,
            state: "open".into(),
            freeze_after: None,
        })
    }

    #[test]
    fn a_region_filled_in_bands_between_placements_ends_as_the_board() {
        // A 1-bit board at an odd column: copied tile by tile, in several bands.
        let (width, height) = (600, 400);
        let settings = settings(width, height, 1);
        let tile = TileWidth::new(1).unwrap();
        let mut board = vec![0u8; (width * height / 8) as usize];
        let mut state = 7u64;
        let mut random = move |below: i64| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 33) as i64 % below
        };
        for n in 0..(width * height) as i64 {
            tile.set(&mut board, n, random(2)).unwrap();
        }
        let regions = Regions::default();
        let rect = Rect {
            x: 3,
            y: 5,
            width: 590,
            height: 390,
        };
        let budget = RegionBudget {
            regions: 4,
            tiles: 1 << 30,
        };
        let (region, made) = regions
            .get(&settings, rect, false, 0, 10_000, budget, || Ok(()))
            .unwrap();
        assert!(made);
        let (mut seq, mut bands) = (0, 0);
        // Placed on the board, not yet handed to the regions (the board's lock is let go
        // before they are: a band may come between).
        let mut in_flight: Vec<(Placement, u8)> = Vec::new();
        loop {
            for _ in 0..40 {
                seq += 1;
                let (x, y) = (random(width as i64) as i32, random(height as i64) as i32);
                let n = x as i64 + width as i64 * y as i64;
                let old = tile.get(&board, n).unwrap();
                let color = 1 - old as i32;
                tile.set(&mut board, n, color.into()).unwrap();
                let p = Placement {
                    board: 1,
                    seq,
                    x,
                    y,
                    color,
                    user: 1,
                    at: 0,
                };
                in_flight.push((p, old));
            }
            let handed: Vec<_> = in_flight.drain(..in_flight.len() / 2).collect();
            regions.apply(handed[0].0.seq, handed.last().unwrap().0.seq, &handed);
            bands += 1;
            if !region.fill_band(&board, width) {
                break;
            }
        }
        regions.apply(in_flight[0].0.seq, seq, &in_flight);
        assert!(bands >= 4, "{bands} bands");
        let s = region.lock();
        assert_eq!(s.seq, seq);
        assert!(
            s.bits
                == cut(
                    Packed {
                        bits: &board,
                        width,
                        tile
                    },
                    rect
                ),
            "the board's tiles"
        );
    }

    #[test]
    fn a_board_serves_distinct_regions_within_its_budget_and_shares_the_rest() {
        let regions = Regions::default();
        let settings = settings(100, 100, 4);
        let budget = RegionBudget {
            regions: 2,
            tiles: 150,
        };
        let rect = |x: i32, w: i32| Rect {
            x,
            y: 0,
            width: w,
            height: 10,
        };
        let get = |r: Rect| regions.get(&settings, r, false, 0, 10, budget, || Ok(()));
        let (a, made) = get(rect(0, 10)).unwrap();
        assert!(made);
        let (again, made) = get(rect(0, 10)).unwrap();
        assert!(!made && Arc::ptr_eq(&a, &again), "one copy per rectangle");
        let too_big = get(rect(20, 6)).err().expect("refused");
        assert_eq!(too_big.code, TOO_MANY, "100 + 60 tiles > 150");
        let (_b, _) = get(rect(20, 4)).unwrap();
        assert_eq!(
            get(rect(40, 1)).err().expect("refused").code,
            TOO_MANY,
            "two at most"
        );
        // A client's own limit is asked only for a new rectangle.
        let refused = regions.get(&settings, rect(0, 10), false, 0, 10, budget, || {
            Err(RpcError::new(TOO_MANY, "no"))
        });
        assert!(refused.is_ok(), "an existing rectangle is shared");
        drop((a, again, refused));
        // Rectangles nobody holds give their room back.
        let (_, made) = get(rect(60, 10)).unwrap();
        assert!(made);
    }
}
