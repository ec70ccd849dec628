//! The list view instances the gateway serves: one per (view, limit) that sessions
//! subscribed to, whatever the number of sessions. Each is read from the database when
//! first asked for (here), and again after commits that may have changed it
//! (`changes.rs`, `refresh.rs`); database work grows with the number of distinct
//! instances and of changes, never with sessions.

use crate::db;
use crate::errors::{from_db, RpcError, RETRY, UNKNOWN_VIEW};
use crate::metrics::{list_view_dropped, list_view_read};
use crate::unknown::{Name, Unknown};
use crate::views::list::instance::ListView;
use crate::views::list::view_checks::ViewChecks;
use deadpool_postgres::Pool;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::OnceCell;
use tokio::time::Instant;

pub(super) type Cell = Arc<OnceCell<Arc<ListView>>>;

pub struct Lists {
    pub(super) pool: Pool,
    /// Events an instance keeps for sessions that fall behind (more: they get `reset`).
    pub(super) capacity: usize,
    /// The least time between two reads of one instance.
    pub(super) refresh_gap: Duration,
    /// View names the database just said it does not have.
    pub(super) unknown: Arc<Unknown>,
    pub(super) state: Mutex<State>,
    /// Bumped when changes may have gone unseen (LISTEN lost) or a view was redefined:
    /// an instance whose first read began before must read again.
    pub(super) generation: AtomicU64,
    /// What `view` notifications said, to be checked before it is acted on.
    pub(super) checks: ViewChecks,
}

pub(super) struct State {
    pub(super) instances: HashMap<(Arc<str>, i32), Cell>,
    /// Each view's max_limit, learned from reads (a subscribe without a limit gets it).
    pub(super) max_limits: HashMap<Arc<str>, i32>,
    /// The newest change log position seen for each table: an instance whose first read
    /// is older learns at once that it must read again.
    pub(super) newest: HashMap<u32, i64>,
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

    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn all(&self) -> Vec<Arc<ListView>> {
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
pub(super) fn view_unavailable(error: &tokio_postgres::Error) -> bool {
    error.as_db_error().is_some_and(|d| {
        d.code().code() == "42501" && d.detail() == Some("pgplace:view_unavailable")
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::errors::UNAVAILABLE;
    use crate::metrics::list_view_counted;

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
