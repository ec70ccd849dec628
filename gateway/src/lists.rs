//! The list view instances the gateway serves: one per (view, limit) that sessions
//! subscribed to, whatever the number of sessions. Each is read from the database when
//! first asked for, and again after commits that may have changed it (the listener calls
//! [`Lists::on_changes`]) — at most one read in flight per instance and at most one per
//! `refresh_gap`, so a burst of commits costs one read, not one per commit. Which views a
//! commit may have changed: when its notification carries the rows, one query
//! (`place.views_touched`) tells which views' filters the rows match before or after the
//! change — a row that matches neither was never in the view and is not now; otherwise
//! every view of the table. Database work grows with the number of distinct instances and
//! of changes, never with sessions.

use crate::db;
use crate::errors::{from_db, from_pool, RpcError, UNKNOWN_VIEW};
use crate::list_view::ListView;
use deadpool_postgres::Pool;
use pgplace_core::payload::{ChangeAction, ChangesPayload, ViewChange};
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::OnceCell;
use tokio::time::Instant;

type Cell = Arc<OnceCell<Arc<ListView>>>;

pub struct Lists {
    pool: Pool,
    /// Events an instance keeps for sessions that fall behind (more: they get `reset`).
    capacity: usize,
    /// The least time between two reads of one instance.
    refresh_gap: Duration,
    state: Mutex<State>,
}

struct State {
    instances: HashMap<(Arc<str>, i32), Cell>,
    /// Each view's max_limit, learned from reads (a subscribe without a limit gets it).
    max_limits: HashMap<Arc<str>, i32>,
    /// The newest change log position seen for each table: an instance whose first read
    /// is older learns at once that it must read again.
    newest: HashMap<u32, i64>,
}

impl Lists {
    pub fn new(pool: Pool, capacity: usize, refresh_gap: Duration) -> Self {
        Lists {
            pool,
            capacity,
            refresh_gap,
            state: Mutex::new(State {
                instances: HashMap::new(),
                max_limits: HashMap::new(),
                newest: HashMap::new(),
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn all(&self) -> Vec<Arc<ListView>> {
        self.lock()
            .instances
            .values()
            .filter_map(|cell| cell.get().cloned())
            .collect()
    }

    /// The instance of view `name` at `limit` (None: the view's max_limit), read from the
    /// database if no session holds it yet.
    pub async fn get(
        self: &Arc<Self>,
        name: &str,
        limit: Option<i32>,
    ) -> Result<Arc<ListView>, RpcError> {
        let limit = match limit {
            Some(limit) => Some(limit),
            None => self.lock().max_limits.get(name).copied(),
        };
        let Some(limit) = limit else {
            // The first subscribe without a limit: one read at max_limit teaches it.
            let (view, _) = self.load(name, None).await?;
            return self.register(view);
        };
        let cell: Cell = self
            .lock()
            .instances
            .entry((name.into(), limit))
            .or_default()
            .clone();
        let view = cell
            .get_or_try_init(|| async {
                let (view, _) = self.load(name, Some(limit)).await?;
                Ok::<_, RpcError>(Arc::new(view))
            })
            .await?
            .clone();
        self.after_first_read(&view);
        Ok(view)
    }

    fn register(self: &Arc<Self>, view: ListView) -> Result<Arc<ListView>, RpcError> {
        let view = Arc::new(view);
        let cell: Cell = self
            .lock()
            .instances
            .entry((view.name.clone(), view.limit))
            .or_default()
            .clone();
        // Another subscribe may have made it meanwhile: theirs stays, this read is dropped.
        let _ = cell.set(view.clone());
        let view = cell.get().cloned().unwrap_or(view);
        self.after_first_read(&view);
        Ok(view)
    }

    /// A commit of the view's table newer than its first read may have gone by before
    /// the instance was registered: read again if so.
    fn after_first_read(self: &Arc<Self>, view: &Arc<ListView>) {
        let newest = self.lock().newest.get(&view.relid).copied().unwrap_or(0);
        if view.touched(newest) {
            self.spawn_refresh(view.clone());
        }
    }

    async fn load(&self, name: &str, limit: Option<i32>) -> Result<(ListView, i32), RpcError> {
        let client = self.pool.get().await.map_err(from_pool)?;
        let read = db::view_rows(&client, name, limit).await.map_err(|e| {
            match e.as_db_error().map(|d| d.code().code()) {
                Some("42704") => RpcError::new(UNKNOWN_VIEW, format!("unknown view {name:?}")),
                _ => from_db(&e),
            }
        })?;
        self.lock().max_limits.insert(name.into(), read.max_limit);
        let limit = limit.unwrap_or(read.max_limit);
        let view = ListView::new(name, limit, read.relid, read.pos, read.rows, self.capacity);
        Ok((view, read.max_limit))
    }

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
                .filter(|view| tables.contains(&view.relid))
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

    fn touch(self: &Arc<Self>, pos: i64, views: Vec<Arc<ListView>>) {
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
        for view in self.all() {
            if view.force(false) {
                self.spawn_refresh(view);
            }
        }
    }

    /// A view was created, redefined or dropped.
    pub fn on_view_change(self: &Arc<Self>, name: &str, change: ViewChange) {
        let mut state = self.lock();
        state.max_limits.remove(name);
        let affected: Vec<(Arc<str>, i32)> = state
            .instances
            .keys()
            .filter(|(n, _)| &**n == name)
            .cloned()
            .collect();
        let mut redefined = Vec::new();
        for key in affected {
            let view = state
                .instances
                .get(&key)
                .and_then(|cell| cell.get().cloned());
            match (change, view) {
                (ViewChange::Update, Some(view)) => redefined.push(view),
                // Dropped, or created anew after a drop this gateway did not hear of.
                (_, view) => {
                    state.instances.remove(&key);
                    if let Some(view) = view {
                        view.mark_dropped();
                    }
                }
            }
        }
        drop(state);
        for view in redefined {
            if view.force(true) {
                self.spawn_refresh(view);
            }
        }
    }

    fn spawn_refresh(self: &Arc<Self>, view: Arc<ListView>) {
        let lists = self.clone();
        tokio::spawn(async move { lists.refresh(view).await });
    }

    /// Reads the instance's window until no newer change is owed.
    async fn refresh(self: Arc<Self>, view: Arc<ListView>) {
        loop {
            let started = Instant::now();
            view.begin_read();
            match self.read(&view).await {
                Ok(()) => {
                    if !view.refresh_owed() {
                        return;
                    }
                }
                Err(error) => {
                    tracing::warn!("list view {:?}: {error}; reading again soon", view.name);
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    if !view.refresh_failed() {
                        return;
                    }
                }
            }
            tokio::time::sleep_until(started + self.refresh_gap).await;
        }
    }

    async fn read(self: &Arc<Self>, view: &Arc<ListView>) -> Result<(), tokio_postgres::Error> {
        let client = loop {
            match self.pool.get().await {
                Ok(client) => break client,
                Err(deadpool_postgres::PoolError::Backend(error)) => return Err(error),
                Err(error) => {
                    tracing::warn!("list view {:?} waits for a connection: {error}", view.name);
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        };
        match db::view_rows(&client, &view.name, Some(view.limit)).await {
            Ok(read) if read.relid == view.relid => view.replace(read.pos, read.rows),
            // Redefined over another table: its sessions start over with a new subscribe.
            Ok(_) => self.on_view_change(&view.name, ViewChange::Delete),
            Err(error) => match error.as_db_error().map(|d| d.code().code()) {
                // Dropped (this gateway will hear of it too), or max_limit lowered below
                // this instance's limit: either way its sessions must subscribe again.
                Some("42704") | Some("22003") => {
                    self.on_view_change(&view.name, ViewChange::Delete)
                }
                _ => return Err(error),
            },
        }
        Ok(())
    }

    /// Logs a `ping` on every instance quiet for `quiet`, checking every second.
    pub async fn run_pings(self: Arc<Self>, quiet: Duration) {
        let mut tick = tokio::time::interval(Duration::from_secs(1).min(quiet));
        loop {
            tick.tick().await;
            let now = Instant::now();
            for view in self.all() {
                view.ping_if_quiet(now, quiet);
            }
            // Instances no session holds any more are forgotten.
            self.lock()
                .instances
                .retain(|_, cell| cell.get().is_none_or(|view| Arc::strong_count(view) > 1));
        }
    }
}

/// The rows of `table` that a commit changed, each version (after and before) with its
/// key, as a JSON array; None when the payload does not carry them (a reference) or the
/// table was truncated (every view of it changed).
fn changed_rows(payload: &ChangesPayload, table: u32) -> Option<Value> {
    let changes = payload.changes.as_ref()?;
    let mut rows = Vec::new();
    for change in changes.iter().filter(|c| c.relid == table) {
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
