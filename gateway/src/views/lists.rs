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
use crate::errors::{from_db, RpcError, RETRY, UNKNOWN_VIEW};
use crate::metrics::{list_view_counted, list_view_dropped, list_view_read};
use crate::params::read_named;
use crate::shared_log::LogCursor;
use crate::unknown::{Name, Unknown};
use crate::views::list::ListView;
use crate::views::made::Made;
use crate::views::view_checks::ViewChecks;
use deadpool_postgres::Pool;
use pgplace_core::payload::{ChangeAction, ChangesPayload, ViewChange};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
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
    /// View names the database just said it does not have.
    unknown: Arc<Unknown>,
    state: Mutex<State>,
    /// Bumped when changes may have gone unseen (LISTEN lost) or a view was redefined:
    /// an instance whose first read began before must read again.
    generation: AtomicU64,
    /// What `view` notifications said, to be checked before it is acted on.
    checks: ViewChecks,
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
    pub fn new(pool: Pool, capacity: usize, refresh_gap: Duration, unknown: Arc<Unknown>) -> Self {
        Lists {
            pool,
            unknown,
            capacity,
            refresh_gap,
            generation: AtomicU64::new(0),
            checks: ViewChecks::default(),
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
        // A name no view can have: no read, no entry for it anywhere.
        crate::names::check_view_name(name)?;
        // An instance dropped from the map while it was being made (the view was dropped
        // or redefined meanwhile) is made again, once.
        for _ in 0..2 {
            let view = self.get_once(name, limit).await?;
            if self.holds(&view) {
                return Ok(view);
            }
        }
        Err(RpcError::new(
            RETRY,
            format!("view {name:?} was changed while subscribing; retry"),
        ))
    }

    async fn get_once(
        self: &Arc<Self>,
        name: &str,
        limit: Option<i32>,
    ) -> Result<Arc<ListView>, RpcError> {
        let source = self.source(name).await?;
        let limit = limit.unwrap_or(source.limit);
        if limit == source.limit {
            return Ok(source);
        }
        if limit < 1 || limit > source.limit {
            return Err(RpcError::invalid_params(format!(
                "limit must be between 1 and {} for view '{name}', not {limit}",
                source.limit
            )));
        }
        // A smaller limit is the source's first rows: one instance per limit (its sessions
        // share its log), none of them read from the database.
        let key: (Arc<str>, i32) = (source.name.clone(), limit);
        let mut state = self.lock();
        let held = state
            .instances
            .get(&key)
            .and_then(|cell| cell.get().cloned());
        if let Some(view) = held.filter(|v| v.is_derived_from(&source)) {
            return Ok(view);
        }
        let view = source.derive(limit, self.capacity);
        state
            .instances
            .insert(key, Arc::new(OnceCell::new_with(Some(view.clone()))));
        Ok(view)
    }

    /// The instance of view `name` at its max_limit: the one read from the database.
    async fn source(self: &Arc<Self>, name: &str) -> Result<Arc<ListView>, RpcError> {
        let generation = self.generation.load(Ordering::SeqCst);
        let limit = self.lock().max_limits.get(name).copied();
        let (cell, loaded) = match limit {
            Some(limit) => {
                let key: (Arc<str>, i32) = (name.into(), limit);
                let cell: Cell = self
                    .lock()
                    .instances
                    .entry(key.clone())
                    .or_default()
                    .clone();
                let init = cell
                    .get_or_try_init(|| async {
                        let (view, _) = self.load(name, Some(limit)).await?;
                        Ok::<_, RpcError>(Arc::new(view))
                    })
                    .await;
                if let Err(error) = init {
                    // Nothing is kept for a read that failed (an unknown view, say).
                    let mut state = self.lock();
                    if state
                        .instances
                        .get(&key)
                        .is_some_and(|c| Arc::ptr_eq(c, &cell) && c.get().is_none())
                    {
                        state.instances.remove(&key);
                    }
                    return Err(error);
                }
                (cell, None)
            }
            None => {
                // The first subscribe of the view: one read at max_limit teaches it.
                let (view, _) = self.load(name, None).await?;
                let view = Arc::new(view);
                let cell: Cell = self
                    .lock()
                    .instances
                    .entry((view.name.clone(), view.limit))
                    .or_default()
                    .clone();
                (cell, Some(view))
            }
        };
        // Another subscribe may have made it meanwhile: theirs stays, this read is dropped.
        let view = cell
            .get_or_init(|| async { loaded.expect("read above when no limit was known") })
            .await
            .clone();
        self.after_first_read(&view, generation);
        Ok(view)
    }

    /// Whether `view` is the instance the map holds (only those are kept current).
    fn holds(&self, view: &Arc<ListView>) -> bool {
        self.lock()
            .instances
            .get(&(view.name.clone(), view.limit))
            .and_then(|cell| cell.get())
            .is_some_and(|held| Arc::ptr_eq(held, view))
    }

    /// A commit of the view's table newer than its first read may have gone by before
    /// the instance was registered: read again if so. If LISTEN was lost or a view was
    /// redefined while it was read (`generation` moved), read again from scratch.
    fn after_first_read(self: &Arc<Self>, view: &Arc<ListView>, generation: u64) {
        if self.generation.load(Ordering::SeqCst) != generation && view.force(true) {
            self.spawn_refresh(view.clone());
            return;
        }
        let newest = self.lock().newest.get(&view.relid).copied().unwrap_or(0);
        if view.touched(newest) {
            self.spawn_refresh(view.clone());
        }
    }

    async fn load(&self, name: &str, limit: Option<i32>) -> Result<(ListView, i32), RpcError> {
        let missing = Name::View(name.into());
        if self.unknown.is_known_missing(&missing) {
            return Err(RpcError::new(
                UNKNOWN_VIEW,
                format!("unknown view {name:?}"),
            ));
        }
        let client = db::checkout(&self.pool).await?;
        let read = db::view_rows(&client, name, limit).await.map_err(|e| {
            match e.as_db_error().map(|d| d.code().code()) {
                Some("42704") => {
                    self.unknown.missing(missing.clone());
                    list_view_dropped(name);
                    RpcError::new(UNKNOWN_VIEW, format!("unknown view {name:?}"))
                }
                _ if view_unavailable(&e) => RpcError::new(
                    UNKNOWN_VIEW,
                    format!(
                        "view {name:?} is not available now (its creator may not read its table)"
                    ),
                ),
                _ => from_db(&e),
            }
        })?;
        // Counted once the database said the view exists: a name a client made up is
        // never a label (`metrics::ViewLabel`).
        list_view_read(name);
        self.lock().max_limits.insert(name.into(), read.max_limit);
        let limit = limit.unwrap_or(read.max_limit);
        let mut view = ListView::new(name, limit, read.relid, read.pos, read.rows, self.capacity);
        view.signed_in = read.signed_in;
        view.set_definition(read.definition);
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
        self.generation.fetch_add(1, Ordering::SeqCst);
        for view in self.all().into_iter().filter(|v| !v.is_derived()) {
            if view.force(false) {
                self.spawn_refresh(view);
            }
        }
    }

    /// A `view` notification: a view was said to be created, defined anew or dropped. A
    /// name that was unknown may be known now; for a view served or being loaded here, the
    /// definition is read before anything is done (`ViewChecks`).
    pub fn heard_of_view(&self, name: &str) {
        self.unknown.found(&Name::View(name.into()));
        let served = self.lock().instances.keys().any(|(n, _)| &**n == name);
        // A view read here once has a series in /metrics: if it was dropped, that goes too.
        if served || list_view_counted(name) {
            self.checks.note(name);
        }
    }

    /// Checks the views `heard_of_view` noted, for as long as the gateway runs.
    pub async fn run_view_checks(self: Arc<Self>) {
        self.checks
            .run(self.pool.clone(), |name, definition| {
                self.settle_view(name, definition)
            })
            .await
    }

    /// What the database says of view `name` now (`definition`: None when it has no such
    /// view), against what its instances were read with: gone, it ends; defined anew, its
    /// sessions start over with a `reset`; the same, nothing is done (a notification that
    /// any login could have sent).
    pub fn settle_view(self: &Arc<Self>, name: &str, definition: Option<&str>) {
        let (held, loading) = {
            let state = self.lock();
            let cells: Vec<&Cell> = state
                .instances
                .iter()
                .filter(|((n, _), _)| &**n == name)
                .map(|(_, cell)| cell)
                .collect();
            let held: Vec<Arc<ListView>> = cells
                .iter()
                .filter_map(|cell| cell.get().cloned())
                .filter(|view| !view.is_derived())
                .collect();
            (held, cells.iter().any(|cell| cell.get().is_none()))
        };
        if definition.is_none() {
            list_view_dropped(name);
        }
        match definition {
            None if !held.is_empty() || loading => self.on_view_change(name, ViewChange::Delete),
            None => {}
            Some(definition) => {
                let changed = held
                    .iter()
                    .any(|view| view.definition().as_deref() != Some(definition));
                // A read in flight may have begun before the change: it reads again.
                if changed || loading {
                    self.on_view_change(name, ViewChange::Update);
                }
            }
        }
    }

    /// A view was created, redefined or dropped.
    pub fn on_view_change(self: &Arc<Self>, name: &str, change: ViewChange) {
        self.unknown.found(&Name::View(name.into()));
        self.generation.fetch_add(1, Ordering::SeqCst);
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
                // Its derived instances are reset with it.
                (ViewChange::Update, Some(view)) if view.is_derived() => {}
                (ViewChange::Update, Some(view)) => redefined.push(view),
                // Being read now: the generation tells it to read again once made.
                (ViewChange::Update, None) => {}
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
        let who = format!("list view {:?}", view.name);
        let client = db::client_when_free(&self.pool, &who).await?;
        match db::view_rows(&client, &view.name, Some(view.limit)).await {
            Ok(read) if read.relid == view.relid => {
                list_view_read(&view.name);
                view.set_definition(read.definition);
                view.replace(read.pos, read.rows)
            }
            // Redefined over another table: its sessions start over with a new subscribe.
            Ok(_) => self.on_view_change(&view.name, ViewChange::Delete),
            Err(error) => match error.as_db_error().map(|d| d.code().code()) {
                // Dropped (this gateway will hear of it too), or max_limit lowered below
                // this instance's limit: either way its sessions must subscribe again.
                // The table went (42P01) or lost a column the view reads (42703) too.
                Some("42704") => {
                    list_view_dropped(&view.name);
                    self.on_view_change(&view.name, ViewChange::Delete)
                }
                Some("22003") | Some("42P01") | Some("42703") => {
                    self.on_view_change(&view.name, ViewChange::Delete)
                }
                // Its creator lost the right to read its table: it shows nothing more.
                _ if view_unavailable(&error) => {
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

/// `place.view_rows` refused to read a view whose creator may no longer read its table
/// (its DETAIL says so: 42501 alone could also be this gateway's role lacking a right).
fn view_unavailable(error: &tokio_postgres::Error) -> bool {
    error.as_db_error().is_some_and(|d| {
        d.code().code() == "42501" && d.detail() == Some("pgplace:view_unavailable")
    })
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

/// A named list view's params.
#[derive(Deserialize, JsonSchema)]
pub struct ListViewParams {
    /// How many rows (at least 1; the view's `max_limit` when absent or larger).
    pub limit: Option<i32>,
}

/// A named list view (`place.create_view`).
pub async fn build(
    lists: &Arc<Lists>,
    name: &str,
    view_params: &Map<String, Value>,
) -> Result<Made<Arc<ListView>, LogCursor>, RpcError> {
    // The view first: a client that names no view of ours hears that, whatever its params.
    let only_limit: Map<String, Value> = view_params
        .iter()
        .filter(|(name, _)| *name == "limit")
        .map(|(name, value)| (name.clone(), value.clone()))
        .collect();
    let limit = read_named::<ListViewParams>(only_limit)?.limit;
    if let Some(limit) = limit {
        if limit < 1 {
            return Err(RpcError::invalid_params(format!(
                "`limit` must be at least 1, not {limit}"
            )));
        }
    }
    let view = lists.get(name, limit).await?;
    read_named::<ListViewParams>(view_params.clone())?;
    Ok(crate::views::list::made(view, view_params, None))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::errors::UNAVAILABLE;

    /// Lists over a database that is not there: any read that reaches it says so.
    fn nowhere(unknown: Arc<Unknown>) -> Arc<Lists> {
        let pg: tokio_postgres::Config = "host=127.0.0.1 port=1 user=nobody dbname=nowhere"
            .parse()
            .unwrap();
        Arc::new(Lists::new(
            db::pool(&pg, 1),
            16,
            Duration::from_millis(10),
            unknown,
        ))
    }

    #[tokio::test]
    async fn a_name_no_view_can_have_is_refused_before_the_cache_or_a_query() {
        let unknown = Arc::new(Unknown::default());
        let lists = nowhere(unknown.clone());
        for name in [
            "v".repeat(65),
            "v".repeat(1 << 20),
            String::new(),
            "a\nb".into(),
        ] {
            let error = lists.get(&name, None).await.err().unwrap();
            assert_eq!(error.code, UNKNOWN_VIEW, "{}", error.message);
            assert!(!unknown.is_known_missing(&Name::View(name.into())));
        }
        // One that could be a view's is looked up (and this database is not there).
        let error = lists.get(&"v".repeat(64), None).await.err().unwrap();
        assert_eq!(error.code, UNAVAILABLE, "{}", error.message);
    }

    #[tokio::test]
    async fn a_dropped_views_series_goes_with_it() {
        let lists = nowhere(Arc::new(Unknown::default()));
        list_view_read("dropped_here");
        list_view_read("kept_here");
        // The database says one is gone, the other is there (as `ViewChecks` would).
        lists.settle_view("dropped_here", None);
        lists.settle_view("kept_here", Some("definition"));
        assert!(!list_view_counted("dropped_here"));
        assert!(list_view_counted("kept_here"));
    }
}
