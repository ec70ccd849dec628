//! What `view` notifications say (a view created, defined anew or dropped), checked against
//! `place.views` before it is acted on: any database login may send one, and a forged
//! `delete` taken at its word would end every session on the view. The listener notes the
//! names (of views this gateway serves or is loading), and one task reads their
//! definitions, many at once, one read at a time; `Lists::settle_view` then compares each
//! with the definition its instances were read with.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;

/// The view names waiting to be checked.
#[derive(Default)]
pub struct ViewChecks {
    pending: Mutex<HashSet<Arc<str>>>,
    wake: Notify,
}

impl ViewChecks {
    pub fn note(&self, name: &str) {
        lock(&self.pending).insert(name.into());
        self.wake.notify_one();
    }

    /// Checks what was noted, for as long as the gateway runs: `settle` gets each name
    /// with its definition (None: the view is gone).
    pub async fn run(&self, pool: deadpool_postgres::Pool, settle: impl Fn(&str, Option<&str>)) {
        loop {
            self.wake.notified().await;
            let names: Vec<String> = std::mem::take(&mut *lock(&self.pending))
                .iter()
                .map(|n| n.to_string())
                .collect();
            if names.is_empty() {
                continue;
            }
            let definitions = loop {
                let read = async {
                    let client = pool.get().await.map_err(|e| e.to_string())?;
                    crate::db::view_definitions(&client, &names)
                        .await
                        .map_err(|e| e.to_string())
                };
                match read.await {
                    Ok(definitions) => break definitions,
                    Err(error) => {
                        tracing::warn!("checking what was said of views: {error}");
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                }
            };
            for name in &names {
                settle(name, definitions.get(name).map(String::as_str));
            }
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}
