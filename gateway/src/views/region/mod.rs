//! `board_region`: one rectangle of a board, for a client that shows only part of it (a
//! phone on one corner of a 4096×4096 board). Its initial state is the packed rectangle
//! and the board's seq; its events are the board's, cut to the rectangle. One instance per
//! (board, rectangle, form), shared by every session on it. The kind's entry (params,
//! budget, `build`) is here; beside it:
//! - `instance.rs`: one region, its copy of the rectangle's bits and its log;
//! - `index.rs`: a board's regions, found by the grid cells they overlap: a placement
//!   outside costs a region nothing but one look-up;
//! - `rect.rs`: a rectangle, cut from the board's packed tiles.
//! - `tests.rs`: filling a region in bands, the grid, the budget.

pub mod index;
pub mod instance;
pub mod rect;
#[cfg(test)]
mod tests;

use crate::boards::Boards;
use crate::errors::RpcError;
use crate::fragments::ArrayBuilder;
use crate::limits::Limits;
use crate::mirror::board::Board;
use crate::params::read_named;
use crate::params::BoardRef;
use crate::shared_log::Delivery;
use crate::shared_log::LogCursor;
use crate::views::made::Made;
use crate::views::region::index::Regions;
use crate::views::region::instance::Region;
use crate::views::region::rect::Rect;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value};
use std::sync::Arc;

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
    let regions = board.feeds.get_or_add(|| Regions::new(board.seq()));
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
