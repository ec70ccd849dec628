//! Which list views a commit may have changed. When its notification carries the rows,
//! one query (`place.views_touched`) tells which views' filters the rows match before or
//! after the change — a row that matches neither was never in the view and is not now;
//! otherwise every view of the table. A touched instance reads again (`refresh.rs`).

use crate::db;
use crate::views::list::instance::ListView;
use crate::views::list::registry::Lists;
use pgplace_core::payload::{ChangeAction, ChangesPayload};
use serde_json::{Map, Value};
use std::sync::atomic::Ordering;
use std::sync::Arc;

impl Lists {
    /// A commit at change log position `pos` changed watched tables.
    pub fn on_changes(self: &Arc<Self>, payload: &ChangesPayload) {
        let pos = payload.pos;
        let tables = payload.tables();
        let affected: Vec<Arc<ListView>> = {
            let mut state = self.lock();
            for table in &tables {
                let newest = state.newest.entry(*table).or_insert(pos);
                *newest = (*newest).max(pos);
            }
            state
                .instances
                .values()
                .filter_map(|cell| cell.get())
                .filter(|view| tables.contains(&view.relid) && !view.is_derived())
                .cloned()
                .collect()
        };
        if affected.is_empty() {
            return;
        }
        for table in tables {
            let views: Vec<Arc<ListView>> = affected
                .iter()
                .filter(|v| v.relid == table)
                .cloned()
                .collect();
            match changed_rows(payload, table) {
                Some(rows) => {
                    let lists = self.clone();
                    tokio::spawn(async move { lists.touch_matching(pos, views, rows).await });
                }
                None => self.touch(pos, views),
            }
        }
    }

    pub(super) fn touch(self: &Arc<Self>, pos: i64, views: Vec<Arc<ListView>>) {
        for view in views {
            if view.touched(pos) {
                self.spawn_refresh(view);
            }
        }
    }

    /// Touches the views whose filter one of `rows` matches (all of them if the database
    /// cannot say).
    async fn touch_matching(self: Arc<Self>, pos: i64, views: Vec<Arc<ListView>>, rows: Value) {
        let mut names: Vec<String> = views.iter().map(|v| v.name.to_string()).collect();
        names.sort();
        names.dedup();
        let hits = match self.pool.get().await {
            Ok(client) => db::views_touched(&client, &names, &rows).await.ok(),
            Err(_) => None,
        };
        let views = match hits {
            Some(hits) => views
                .into_iter()
                .filter(|v| hits.iter().any(|h| **h == *v.name))
                .collect(),
            None => views,
        };
        self.touch(pos, views);
    }

    /// Changes may have gone by unseen (LISTEN was down, a position was skipped): every
    /// instance reads again.
    pub fn all_stale(self: &Arc<Self>) {
        self.generation.fetch_add(1, Ordering::SeqCst);
        for view in self.all().into_iter().filter(|v| !v.is_derived()) {
            if view.force(false) {
                self.spawn_refresh(view);
            }
        }
    }
}

/// The rows of `table` that a commit changed, each version (after and before) with its
/// key, as a JSON array; None when the payload does not carry them (a reference) or the
/// table was truncated (every view of it changed).
pub fn changed_rows(payload: &ChangesPayload, table: u32) -> Option<Value> {
    let mut rows = Vec::new();
    for change in payload.changes_of(table)? {
        if change.action == ChangeAction::Truncate {
            return None;
        }
        for version in [&change.obj, &change.old] {
            if let (Value::Object(columns), Value::Object(key)) = (version, &change.key) {
                let mut row: Map<String, Value> = columns.clone();
                row.extend(key.clone());
                rows.push(Value::Object(row));
            }
        }
    }
    Some(Value::Array(rows))
}
