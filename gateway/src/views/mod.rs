//! The view: what a session subscribes to (`session.subscribe(session, name, params)`),
//! the gateway's unit. Every kind keeps one shared log per instance, serialized once, that
//! each session on it reads by its own position, and answers the same contract, whose
//! arms are all here:
//! - `build`: the instance for `(name, params)`, with its initial state and where a new
//!   subscriber stands (`Built`);
//! - `View::collect`: the events after a position, moving it past them (`Delivery`);
//! - `View::wakers`: what wakes a poll waiting on it;
//! - `View::reset_position`, `View::resume`: a position that starts over, and a position
//!   read back from a client's cursor.
//!
//! A new kind is a file here (its instance and its `build`) and an arm in each of those;
//! a kind made from a board's mirror registers its `mirror::feed::Feed` with the board.
//!
//! | kind | instance | file |
//! |---|---|---|
//! | `board` (Qik or compact form) | a board: its mirror's log | `board` |
//! | `board_region` | (board, rectangle, form), fed by the board | `region` |
//! | `recent_placements` | (board, limit), a list fed by the board | `recent` |
//! | a named list view | (view, limit), read from the database | `lists`, `list` |
//!
//! Beside the kinds: `made.rs` (what building a view gives), `events.rs` (list and region
//! events as clients get them), `list_diff.rs` (the events from one window of a list to
//! the next), `rect.rs` (a region's rectangle, cut from the packed tiles) and
//! `view_checks.rs` (what `view` notifications say, checked against the database).

pub mod board;
pub mod events;
pub mod list;
pub mod list_diff;
pub mod lists;
pub mod made;
pub mod recent;
pub mod rect;
pub mod region;
pub mod view_checks;

use crate::boards::Boards;
use crate::errors::RpcError;
use crate::fragments::ArrayBuilder;
use crate::limits::Limits;
use crate::mirror::board::{Board, Cursor};
use crate::params::read_named;
use crate::shared_log::{Delivery, LogCursor};
use crate::views::board::BoardView;
use crate::views::list::ListView;
use crate::views::lists::Lists;
use crate::views::made::Made;
use crate::views::region::{Region, RegionBudget, RegionView};
use schemars::{Schema, SchemaGenerator};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::sync::Arc;
use tokio::sync::Notify;

/// One subscription's view: what it reads.
pub enum View {
    Board(BoardView),
    /// A named list view or a board's `recent_placements`.
    List(Arc<ListView>),
    Region(RegionView),
}

/// Where one subscriber stands in a view.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Position {
    Board(Cursor),
    Log(LogCursor),
}

/// A position as it travels in a client's cursor (`sessions::poll_cursor`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Portable {
    /// A board view: the board's epoch on the writing gateway, the last seq given, the
    /// last notice given (settings, frozen tiles).
    Board(u64, i64, u64),
    /// A list view or a region: the epoch and next event of its log on the writing gateway.
    Log(u64, u64),
}

impl Position {
    pub fn portable(&self) -> Portable {
        match self {
            Position::Board(c) => Portable::Board(c.epoch, c.seq, c.notices),
            Position::Log(c) => {
                let (epoch, next) = c.parts();
                Portable::Log(epoch, next)
            }
        }
    }
}

/// What wakes a poll waiting on one view.
pub enum Waker {
    Board(Arc<Board>),
    List(Arc<ListView>),
    Region(Arc<Region>),
    Presence(Arc<Board>),
}

impl Waker {
    pub fn notify(&self) -> &Notify {
        match self {
            Waker::Board(board) => &board.changed,
            Waker::List(view) => &view.changed,
            Waker::Region(region) => &region.changed,
            Waker::Presence(board) => &board.presence_changed,
        }
    }
}

impl View {
    /// The key its events carry.
    pub fn key(&self) -> Arc<str> {
        match self {
            View::Board(view) => view.key(),
            View::List(view) => view.key.clone(),
            View::Region(view) => view.region.key.clone(),
        }
    }

    /// A position that the next `collect` answers with a `reset`.
    pub fn reset_position(&self) -> Position {
        match self {
            View::Board(_) => Position::Board(Cursor::STALE),
            View::List(_) | View::Region(_) => Position::Log(LogCursor::STALE),
        }
    }

    /// Where a subscriber stands that was given everything up to the board's `seq` on
    /// some gateway (a board view; the others start over).
    pub fn position_at(&self, seq: Option<i64>) -> Position {
        match (self, seq) {
            (View::Board(view), Some(seq)) => Position::Board(view.board.cursor_at(seq)),
            _ => self.reset_position(),
        }
    }

    /// Where a client's cursor puts its subscriber on this gateway (`here`: this gateway
    /// wrote the cursor, so positions in its logs hold).
    pub fn resume(&self, position: Portable, here: bool) -> Position {
        match (self, position) {
            (View::Board(_), Portable::Board(epoch, seq, notices)) if here => {
                Position::Board(Cursor {
                    epoch,
                    seq,
                    notices,
                    settings_owed: false,
                })
            }
            // A view owed a reset where it was written owes one here too.
            (View::Board(_), Portable::Board(epoch, _, _)) if epoch == Cursor::STALE.epoch => {
                self.reset_position()
            }
            (View::Board(view), Portable::Board(_, seq, _)) => {
                Position::Board(view.board.cursor_at(seq))
            }
            (View::List(_) | View::Region(_), Portable::Log(epoch, next)) if here => {
                Position::Log(LogCursor::from_parts(epoch, next))
            }
            _ => self.reset_position(),
        }
    }

    /// The board this view reads and the seq it must be able to read after, when the
    /// board's log no longer reaches back there (`Boards::backfill`).
    pub fn board_behind(&self, position: &Position) -> Option<(Arc<Board>, i64)> {
        match (self, position) {
            (View::Board(view), Position::Board(cursor)) => view
                .board
                .is_behind(cursor)
                .then(|| (view.board.clone(), cursor.seq)),
            _ => None,
        }
    }

    /// Adds the events after `position` to `out` and moves it past them.
    pub fn collect(&mut self, position: &mut Position, out: &mut ArrayBuilder) -> Delivery {
        match (self, position) {
            (View::Board(view), Position::Board(cursor)) => view.collect(cursor, out),
            (View::List(view), Position::Log(cursor)) => view.collect(cursor, out),
            (View::Region(view), Position::Log(cursor)) => view.collect(cursor, out),
            // Never made: a position always comes from its own subscription's view.
            _ => Delivery::Continues,
        }
    }

    /// What wakes a poll waiting on this view.
    pub fn wakers(&self, out: &mut Vec<Waker>) {
        match self {
            View::Board(view) => out.push(Waker::Board(view.board.clone())),
            View::List(view) => out.push(Waker::List(view.clone())),
            View::Region(view) => {
                out.push(Waker::Region(view.region.clone()));
                if let Some((board, _)) = &view.presence {
                    out.push(Waker::Presence(board.clone()));
                }
            }
        }
    }
}

/// A view made for a subscriber (not yet added to a session), and what to answer and store.
pub type Built = Made<View, Position>;

/// What making a view may use.
pub struct Sources<'a> {
    pub boards: &'a Boards,
    pub lists: &'a Arc<Lists>,
    pub limits: &'a Limits,
    pub region_budget: RegionBudget,
}

/// The view `name` with `params` (as `session.subscribe` names them).
pub async fn build(
    sources: &Sources<'_>,
    name: &str,
    params: &Map<String, Value>,
) -> Result<Built, RpcError> {
    Ok(match name {
        "board" => built(
            Box::pin(board::build(sources.boards, params)).await?,
            View::Board,
            Position::Board,
        ),
        "recent_placements" => built(
            Box::pin(recent::build(sources.boards, params)).await?,
            View::List,
            Position::Log,
        ),
        "board_region" => built(
            Box::pin(region::build(
                sources.boards,
                sources.limits,
                sources.region_budget,
                params,
            ))
            .await?,
            View::Region,
            Position::Log,
        ),
        _ => built(
            Box::pin(lists::build(sources.lists, name, params)).await?,
            View::List,
            Position::Log,
        ),
    })
}

fn built<V, C>(made: Made<V, C>, view: fn(V) -> View, position: fn(C) -> Position) -> Built {
    Made {
        view: view(made.view),
        cursor: position(made.cursor),
        state: made.state,
        params: made.params,
        board: made.board,
        seq: made.seq,
        signed_in: made.signed_in,
    }
}

/// Reads `params` as the view `name` would (without making it): any other name is a list
/// view's.
pub fn check_params(name: &str, params: &Map<String, Value>) -> Result<(), RpcError> {
    let params = params.clone();
    match name {
        "board" => read_named::<board::BoardViewParams>(params).map(drop),
        "board_region" => read_named::<region::RegionViewParams>(params).map(drop),
        "recent_placements" => read_named::<recent::RecentViewParams>(params).map(drop),
        _ => read_named::<lists::ListViewParams>(params).map(drop),
    }
}

/// Each kind's params, as JSON Schemas (for `rpc.discover`).
pub fn params_schemas(generator: &mut SchemaGenerator) -> Vec<(&'static str, Schema)> {
    vec![
        ("board", generator.subschema_for::<board::BoardViewParams>()),
        (
            "board_region",
            generator.subschema_for::<region::RegionViewParams>(),
        ),
        (
            "recent_placements",
            generator.subschema_for::<recent::RecentViewParams>(),
        ),
        (
            "a named list view",
            generator.subschema_for::<lists::ListViewParams>(),
        ),
    ]
}
