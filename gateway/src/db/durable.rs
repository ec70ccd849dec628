//! Asynchronous commits, and the waits that make what they committed safe to show.
//!
//! With pgplace 0.8.11 (`place.await_durable`) and `--commit asynchronous` the placer
//! commits each group with `synchronous_commit` off, so that a board's seq lock is
//! released before the WAL flush and the synchronous standby's answer and other gateways'
//! groups take it meanwhile; then it waits here before it answers. Such a commit (or a SQL
//! session's with `synchronous_commit` off) is visible before it is durable, so every read
//! of a board's seq or placements waits here too before a client sees it: a crash or
//! failover can then take back only seqs nobody was shown. A schema without the function
//! commits synchronously and reads without waiting.

use deadpool_postgres::ClientWrapper;
use std::sync::OnceLock;

/// Whether the database has `place.await_durable` and this role may call it (a gateway
/// started before ALTER EXTENSION UPDATE commits synchronously until it restarts, which is
/// safe).
static SUPPORTED: OnceLock<bool> = OnceLock::new();

pub async fn supported(client: &ClientWrapper) -> Result<bool, tokio_postgres::Error> {
    super::callable(client, &SUPPORTED, "place.await_durable()").await
}

/// Whether the database has `place.await_durable(xid)` (0.8.13), the wait for the writers
/// of the rows read alone, which flushes no WAL of transactions still in flight.
static WRITERS: OnceLock<bool> = OnceLock::new();

pub async fn writers_supported(client: &ClientWrapper) -> Result<bool, tokio_postgres::Error> {
    super::callable(client, &WRITERS, "place.await_durable(xid)").await
}

/// Returns once every transaction committed before the call is durable (at once when the
/// schema has no `place.await_durable`: its gateways commit synchronously).
pub async fn wait(client: &ClientWrapper) -> Result<(), tokio_postgres::Error> {
    if supported(client).await? {
        let sql = "SELECT place.await_durable()";
        client
            .query_one(&client.prepare_cached(sql).await?, &[])
            .await?;
    }
    Ok(())
}
