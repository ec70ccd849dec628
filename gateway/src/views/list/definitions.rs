//! A view created, defined anew or dropped: what `view` notifications say is checked
//! against the database (`view_checks.rs`) before its instances are ended or read again.

use crate::metrics::{list_view_counted, list_view_dropped};
use crate::unknown::Name;
use crate::views::list::instance::ListView;
use crate::views::list::registry::{Cell, Lists};
use pgplace_core::payload::ViewChange;
use std::sync::atomic::Ordering;
use std::sync::Arc;

impl Lists {
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
}
