//! What `view` notifications say (a view created, defined anew or dropped), checked against
//! `place.views` before it is acted on: any database login may send one, and a forged
//! `delete` taken at its word would end every session on the view. The listener notes the
//! names (of views this gateway serves or is loading), and one task reads their
//! definitions, many at once, one read at a time; `Lists::settle_view` then compares each
//! with the definition its instances were read with.

use crate::check_queue::{read_until_ok, CheckQueue};
use std::collections::HashSet;
use std::sync::Arc;

/// The view names waiting to be checked.
#[derive(Default)]
pub struct ViewChecks {
    queue: CheckQueue<HashSet<Arc<str>>>,
}

impl ViewChecks {
    pub fn note(&self, name: &str) {
        self.queue.note(|names| {
            names.insert(name.into());
        });
    }

    /// Checks what was noted, for as long as the gateway runs: `settle` gets each name
    /// with its definition (None: the view is gone).
    pub async fn run(&self, pool: deadpool_postgres::Pool, settle: impl Fn(&str, Option<&str>)) {
        loop {
            let (noted, upto) = self.queue.next().await;
            let names: Vec<String> = noted.iter().map(|n| n.to_string()).collect();
            if names.is_empty() {
                self.queue.done(upto);
                continue;
            }
            let definitions = read_until_ok("views", || async {
                let client = pool.get().await.map_err(|e| e.to_string())?;
                crate::db::view_definitions(&client, &names)
                    .await
                    .map_err(|e| e.to_string())
            })
            .await;
            for name in &names {
                settle(name, definitions.get(name).map(String::as_str));
            }
            self.queue.done(upto);
        }
    }
}
