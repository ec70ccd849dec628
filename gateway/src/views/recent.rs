//! `recent_placements`: a board's newest placements, newest first, as a list view (Qik's
//! "recent streams" over pgplace's own history). Fed entirely by the board's mirror — the
//! mirror keeps the newest [`MAX_RECENT`](crate::mirror::recent::MAX_RECENT) placements, loaded with its snapshot — so it
//! costs the database nothing after the board's load. One instance per (board, limit).

use crate::boards::Boards;
use crate::errors::RpcError;
use crate::mirror::board::Board;
use crate::mirror::feed::{Feed, Wants};
use crate::mirror::recent::{Recent, MAX_RECENT};
use crate::mirror::snapshot::Settings;
use crate::params::read_named;
use crate::params::BoardRef;
use crate::shared_log::LogCursor;
use crate::views::list::instance::ListView;
use crate::views::made::Made;
use pgplace_core::payload::Placement;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

/// `recent_placements`' params.
#[derive(Deserialize, JsonSchema)]
pub struct RecentViewParams {
    pub board: BoardRef,
    /// How many placements (1 to 100; 100 when absent).
    pub limit: Option<i32>,
}

/// A board's newest placements, newest first.
pub async fn build(
    boards: &Boards,
    view_params: &Map<String, Value>,
) -> Result<Made<Arc<ListView>, LogCursor>, RpcError> {
    let p: RecentViewParams = read_named(view_params.clone())?;
    let board = p.board;
    let limit = p.limit.unwrap_or(MAX_RECENT as i32);
    if !(1..=MAX_RECENT as i32).contains(&limit) {
        return Err(RpcError::invalid_params(format!(
            "`limit` must be between 1 and {MAX_RECENT}, not {limit}"
        )));
    }
    let mirrored = boards.get(&board).await?;
    let view = recent_view(&mirrored.board, limit as usize);
    Ok(crate::views::list::instance::made(
        view,
        view_params,
        Some(mirrored.board.id),
    ))
}

/// The board's `recent_placements` view showing `limit` placements.
pub fn recent_view(board: &Board, limit: usize) -> Arc<ListView> {
    let views = board.feeds.get_or_add(RecentViews::default);
    board.with_mirror(|m| {
        views.get(
            board.id,
            limit,
            m.seq,
            m.recent,
            board.log_capacity() as usize,
        )
    })
}

/// A board's `recent_placements` instances, by limit.
#[derive(Default)]
pub struct RecentViews {
    views: Mutex<HashMap<usize, Weak<ListView>>>,
}

impl RecentViews {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<usize, Weak<ListView>>> {
        self.views.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The instance for `limit`, made from `recent` at `seq` if no session holds one.
    fn get(
        &self,
        board: i64,
        limit: usize,
        seq: i64,
        recent: &Recent,
        capacity: usize,
    ) -> Arc<ListView> {
        let mut views = self.lock();
        if let Some(view) = views.get(&limit).and_then(Weak::upgrade) {
            return view;
        }
        let view = Arc::new(ListView::with_key(
            format!("board/{board}/recent/{limit}"),
            "recent_placements",
            limit as i32,
            seq,
            recent.rows(limit),
            capacity,
        ));
        views.insert(limit, Arc::downgrade(&view));
        view
    }

    /// The board moved on to `seq` (`reset`: it was reloaded, its stream does not
    /// continue): every instance takes its new window.
    fn update(&self, seq: i64, recent: &Recent, reset: bool) {
        let mut views = self.lock();
        views.retain(|_, view| view.strong_count() > 0);
        for (limit, view) in views.iter() {
            if let Some(view) = view.upgrade() {
                if reset {
                    view.reset(seq, recent.rows(*limit));
                } else {
                    view.replace(seq, recent.rows(*limit));
                }
            }
        }
    }
}

impl Feed for RecentViews {
    /// The newest placements while a session holds a view of them.
    fn wants(&self) -> Wants {
        Wants {
            recent: self.lock().values().any(|view| view.strong_count() > 0),
            ..Wants::default()
        }
    }

    fn placed(&self, _: i64, last: i64, _: &[(Placement, u8)], recent: Option<&Recent>) {
        if let Some(recent) = recent {
            self.update(last, recent, false);
        }
    }

    fn settings_changed(&self, _: &std::sync::Arc<Settings>, _: i64) {}

    fn frozen(&self, _: i64, _: &[(i32, i32)]) {}

    fn reloaded(&self, _: &std::sync::Arc<Settings>, seq: i64, _: Option<&[u8]>, recent: &Recent) {
        self.update(seq, recent, true);
    }

    fn deleted(&self) {
        for view in self.lock().values().filter_map(Weak::upgrade) {
            view.mark_dropped();
        }
    }
}
