//! Reading an instance's window again: at most one read in flight per instance and at
//! most one per `refresh_gap`, so a burst of commits costs one read, not one per commit.

use crate::db;
use crate::metrics::{list_view_dropped, list_view_read};
use crate::views::list::instance::ListView;
use crate::views::list::registry::{view_unavailable, Lists};
use pgplace_core::payload::ViewChange;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

impl Lists {
    pub(super) fn spawn_refresh(self: &Arc<Self>, view: Arc<ListView>) {
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
}
