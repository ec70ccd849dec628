//! The changes of watched tables, as the gateway follows them: every `--change-tick-ms` it
//! calls `place.tick()`, which gives the transactions committed since the last position
//! the next one (or does nothing), and reads each position it has not seen from pgplace's
//! log (`place.change_feed`) with its own role. No notification is involved: nothing
//! another login sends can add, skip or reorder what list views are told. Positions are
//! durable and gap-free, so a lost connection or a PostgreSQL restart only delays the feed:
//! it goes on from the last position it read.

use crate::db;
use crate::views::list::registry::Lists;
use deadpool_postgres::Pool;
use pgplace_core::payload::Payload;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::MissedTickBehavior;

/// How many positions one read of the log returns at most.
const PAGE: i32 = 100;
/// How long the feed waits after a failed round before the next one.
const AFTER_FAILURE: Duration = Duration::from_millis(500);

/// Follows the log for as long as the gateway runs.
pub async fn run(pool: Pool, lists: Arc<Lists>, every: Duration) {
    let mut heard: Option<i64> = None;
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut failing = false;
    loop {
        ticks.tick().await;
        match follow(&pool, &lists, &mut heard).await {
            Ok(()) => failing = false,
            Err(error) => {
                if !std::mem::replace(&mut failing, true) {
                    tracing::warn!("change feed: {error}");
                }
                tokio::time::sleep(AFTER_FAILURE).await;
            }
        }
    }
}

/// One round: tick, then tell the list views of every position after `heard`.
async fn follow(pool: &Pool, lists: &Arc<Lists>, heard: &mut Option<i64>) -> Result<(), String> {
    let client = pool.get().await.map_err(|e| e.to_string())?;
    let newest = db::tick(&client).await.map_err(|e| {
        let said = e.as_db_error().map_or(e.to_string(), |d| d.message().to_string());
        if e.code() == Some(&tokio_postgres::error::SqlState::UNDEFINED_FUNCTION) {
            // A schema from before 0.8.0: list views stay as first read until the update.
            format!("{said} (the database's pgplace is older than this gateway: run ALTER EXTENSION pgplace UPDATE)")
        } else {
            said
        }
    })?;
    let mut at = match *heard {
        // Instances read before the feed knew where the log stood read again.
        None => {
            start_over(lists, heard, newest);
            return Ok(());
        }
        // The log is behind what was read (a database restored from a dump).
        Some(at) if newest < at => {
            start_over(lists, heard, newest);
            return Ok(());
        }
        Some(at) => at,
    };
    while at < newest {
        let page = match db::change_feed(&client, at, PAGE).await {
            Ok(page) => page,
            // Pruned past `at` (the gateway was away longer than the log's retention).
            Err(e)
                if e.code()
                    == Some(&tokio_postgres::error::SqlState::OBJECT_NOT_IN_PREREQUISITE_STATE) =>
            {
                start_over(lists, heard, newest);
                return Ok(());
            }
            Err(e) => {
                return Err(e
                    .as_db_error()
                    .map_or(e.to_string(), |d| d.message().to_string()))
            }
        };
        let Some(&(last, _)) = page.last() else {
            start_over(lists, heard, newest);
            return Ok(());
        };
        for (pos, text) in &page {
            match Payload::decode(text) {
                Ok(Payload::Changes(changes)) => lists.on_changes(&changes),
                _ => {
                    tracing::error!("change feed: position {pos} reads as {text:?}");
                    lists.all_stale();
                }
            }
        }
        at = last;
        *heard = Some(at);
    }
    Ok(())
}

/// What changed before `newest` is unknown: every list view reads again.
fn start_over(lists: &Arc<Lists>, heard: &mut Option<i64>, newest: i64) {
    *heard = Some(newest);
    lists.all_stale();
}
