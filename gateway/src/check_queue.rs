//! Notes to check against the database before acting on them. A notification only wakes
//! the gateway (any database login may send one), so what it names is noted here, and one
//! task reads the rows of everything noted, many at once, one read at a time, retrying a
//! failed read until the database answers. Sessions (`sessions::checks`) and list views
//! (`views::list::view_checks`) are checked so.

use std::fmt::Display;
use std::future::Future;
use std::sync::Mutex;
use std::time::Duration;
use tokio::sync::Notify;

/// How long a failed read waits before it is tried again.
const RETRY_AFTER: Duration = Duration::from_millis(200);

/// What waits to be checked (`P`: the notes, e.g. a set of ids), and the wake-up.
#[derive(Default)]
pub struct CheckQueue<P> {
    pending: Mutex<P>,
    wake: Notify,
}

impl<P: Default> CheckQueue<P> {
    /// Adds to the notes (`add`) and wakes the checking task.
    pub fn note(&self, add: impl FnOnce(&mut P)) {
        add(&mut crate::lock::lock(&self.pending));
        self.wake.notify_one();
    }

    /// Waits until something is noted, then takes every note.
    pub async fn next(&self) -> P {
        self.wake.notified().await;
        std::mem::take(&mut *crate::lock::lock(&self.pending))
    }
}

/// `read` until it succeeds: a failure is logged (`what` is being checked) and tried again
/// after a moment; nothing noted is dropped while the database is away.
pub async fn read_until_ok<T, E: Display, F, Fut>(what: &str, mut read: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    loop {
        match read().await {
            Ok(value) => return value,
            Err(error) => {
                tracing::warn!("checking what was said of {what}: {error}");
                tokio::time::sleep(RETRY_AFTER).await;
            }
        }
    }
}
