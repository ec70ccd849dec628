//! A board's regions, found by the grid cells they overlap, and fed each placement the
//! board applies (`mirror::feed::Feed`).

use crate::errors::{RpcError, TOO_MANY};
use crate::mirror::feed::{Feed, Wants};
use crate::mirror::recent::Recent;
use crate::mirror::snapshot::Settings;
use crate::views::region::instance::Region;
use crate::views::region::rect::Rect;
use crate::views::region::RegionBudget;
use pgplace_core::payload::Placement;
use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

/// Grid cells are this many tiles a side: a placement looks only at the regions that
/// overlap its cell.
const CELL: i32 = 64;

/// One region's share of a batch of placements (each with its colour).
type RegionBatch = (Arc<Region>, Vec<(Placement, u8)>);

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
    /// A board's regions, none yet, the board fed up to `seq`.
    pub fn new(seq: i64) -> Self {
        Regions {
            fed: Arc::new(AtomicI64::new(seq)),
            ..Regions::default()
        }
    }

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
    pub(super) fn apply(&self, first: i64, last: i64, placed: &[(Placement, u8)]) {
        let mut batches: HashMap<*const Region, RegionBatch> = HashMap::new();
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
