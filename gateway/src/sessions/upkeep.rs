//! Keeping the database's sessions in step with the gateways: every gateway marks the
//! sessions it served as seen (one statement per period, not one per poll), removes those
//! no gateway has seen for the idle time (`session_expire` tells every gateway), and reads
//! how many subscriptions watch each board over all gateways (the `watching` count).

use crate::boards::Boards;
use crate::sessions::registry::Sessions;
use crate::sessions::store;
use deadpool_postgres::Pool;
use std::sync::Arc;
use std::time::Duration;

/// How often the watching counts are read (they are told at most every 10 s).
const WATCHERS_EVERY: Duration = Duration::from_secs(2);

pub async fn run(pool: Pool, sessions: Arc<Sessions>, boards: Arc<Boards>, idle: Duration) {
    // Seen well within the idle time: a session in use is marked at least 3 times per idle.
    let seen_every = (idle / 4).clamp(Duration::from_millis(100), Duration::from_secs(30));
    let mut last_seen_mark = tokio::time::Instant::now();
    // After a round that failed (the database was away), sessions are not expired for an
    // idle time: the other gateways may not have marked theirs yet.
    let mut failed_at: Option<tokio::time::Instant> = None;
    let mut tick = tokio::time::interval(WATCHERS_EVERY.min(seen_every));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let client = match pool.get().await {
            Ok(client) => client,
            Err(error) => {
                tracing::warn!("session upkeep waits for a database connection: {error}");
                failed_at = Some(tokio::time::Instant::now());
                continue;
            }
        };
        if last_seen_mark.elapsed() >= seen_every {
            let in_use = sessions.in_use(last_seen_mark.elapsed() + seen_every);
            last_seen_mark = tokio::time::Instant::now();
            let may_expire = failed_at.is_none_or(|at| at.elapsed() > idle);
            // Marks come every seen_every (plus a round's delay): a session in use on any
            // gateway is never older than idle + 2 of them.
            let expire_after = idle + seen_every * 2;
            let marked = async {
                if !in_use.is_empty() {
                    store::seen(&client, &in_use).await?;
                }
                if may_expire {
                    store::expire(&client, expire_after.as_secs_f64()).await
                } else {
                    Ok(0)
                }
            };
            match marked.await {
                Ok(0) => {}
                Ok(expired) => tracing::debug!("{expired} sessions expired"),
                Err(error) => {
                    tracing::warn!("session upkeep: {error}");
                    failed_at = Some(tokio::time::Instant::now());
                }
            }
        }
        match store::watchers(&client).await {
            Ok(counts) => {
                let counts: std::collections::HashMap<i64, i64> = counts.into_iter().collect();
                for mirrored in boards.all() {
                    let watching = counts.get(&mirrored.board.id).copied().unwrap_or(0);
                    mirrored.board.set_watchers(watching.max(0) as u64);
                }
            }
            Err(error) => tracing::warn!("session upkeep: watching counts: {error}"),
        }
    }
}
