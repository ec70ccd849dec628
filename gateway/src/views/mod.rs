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
//! The kinds are one table, [`KINDS`] (and [`NAMED_LIST`] for every other name): each
//! with its name, its params' schema and its `build`. A new kind is its file or folder
//! here and one line there (and an arm in `View`'s matches only for a new instance type);
//! a kind made from a board's mirror registers its `mirror::feed::Feed` with the board.
//!
//! | kind | instance | where |
//! |---|---|---|
//! | `board` (Qik or compact form) | a board: its mirror's log | `board.rs` |
//! | `board_region` | (board, rectangle, form), fed by the board | `region/` |
//! | `recent_placements` | (board, limit), a list fed by the board | `recent.rs` |
//! | a named list view | (view, limit), read from the database | `list/` |
//!
//! Beside the kinds: `made.rs` (what building a view gives) and `events.rs` (list and
//! region events as clients get them).

pub mod board;
pub mod events;
pub mod list;
pub mod made;
pub mod recent;
pub mod region;

use crate::boards::Boards;
use crate::errors::RpcError;
use crate::fragments::ArrayBuilder;
use crate::limits::Limits;
use crate::mirror::board::{Board, Cursor};
use crate::params::read_named;

use crate::shared_log::{Delivery, LogCursor};
use crate::views::board::BoardView;
use crate::views::list::instance::ListView;
use crate::views::list::registry::Lists;
use crate::views::made::Made;
use crate::views::region::instance::Region;
use crate::views::region::{RegionBudget, RegionView};
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::future::Future;
use std::pin::Pin;
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

/// A kind of view, as `session.subscribe` names it.
pub struct Kind {
    /// The name a subscriber gives (a named list view: how `rpc.discover` says it).
    pub name: &'static str,
    /// Its params, as a JSON Schema (for `rpc.discover`).
    pub params: fn(&mut SchemaGenerator) -> Schema,
    /// Reads params as `build` would, without making the view.
    pub check: fn(Map<String, Value>) -> Result<(), RpcError>,
    /// The instance for `(name, params)`, with its initial state and where a new
    /// subscriber stands.
    pub build: for<'a> fn(&'a Sources<'a>, &'a str, &'a Map<String, Value>) -> Building<'a>,
}

pub type Building<'a> = Pin<Box<dyn Future<Output = Result<Built, RpcError>> + Send + 'a>>;

/// The kinds named by their own name; any other name is a named list view's
/// ([`NAMED_LIST`]).
pub const KINDS: &[Kind] = &[
    Kind {
        name: "board",
        params: schema::<board::BoardViewParams>,
        check: check::<board::BoardViewParams>,
        build: |sources, _, params| {
            Box::pin(async move {
                let made = board::build(sources.boards, params).await?;
                Ok(built(made, View::Board, Position::Board))
            })
        },
    },
    Kind {
        name: "board_region",
        params: schema::<region::RegionViewParams>,
        check: check::<region::RegionViewParams>,
        build: |sources, _, params| {
            Box::pin(async move {
                let made = region::build(
                    sources.boards,
                    sources.limits,
                    sources.region_budget,
                    params,
                )
                .await?;
                Ok(built(made, View::Region, Position::Log))
            })
        },
    },
    Kind {
        name: "recent_placements",
        params: schema::<recent::RecentViewParams>,
        check: check::<recent::RecentViewParams>,
        build: |sources, _, params| {
            Box::pin(async move {
                let made = recent::build(sources.boards, params).await?;
                Ok(built(made, View::List, Position::Log))
            })
        },
    },
];

/// A named list view (`place.create_view`): any name that is not one of [`KINDS`].
pub const NAMED_LIST: Kind = Kind {
    name: "a named list view",
    params: schema::<list::ListViewParams>,
    check: check::<list::ListViewParams>,
    build: |sources, name, params| {
        Box::pin(async move {
            let made = list::build(sources.lists, name, params).await?;
            Ok(built(made, View::List, Position::Log))
        })
    },
};

/// The kind of the view named `name`.
pub fn kind(name: &str) -> &'static Kind {
    KINDS
        .iter()
        .find(|kind| kind.name == name)
        .unwrap_or(&NAMED_LIST)
}

/// The view `name` with `params` (as `session.subscribe` names them).
pub async fn build(
    sources: &Sources<'_>,
    name: &str,
    params: &Map<String, Value>,
) -> Result<Built, RpcError> {
    (kind(name).build)(sources, name, params).await
}

/// Reads `params` as the view `name` would (without making it): any other name is a list
/// view's.
pub fn check_params(name: &str, params: &Map<String, Value>) -> Result<(), RpcError> {
    (kind(name).check)(params.clone())
}

fn check<P: DeserializeOwned>(params: Map<String, Value>) -> Result<(), RpcError> {
    read_named::<P>(params).map(drop)
}

fn schema<P: JsonSchema>(generator: &mut SchemaGenerator) -> Schema {
    generator.subschema_for::<P>()
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
