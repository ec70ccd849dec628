//! Notes to check against the database before acting on them. A notification only wakes
//! the gateway (any database login may send one), so what it names is noted here, and one
//! task reads the rows of everything noted, many at once, one read at a time, retrying a
//! failed read until the database answers. Sessions (`sessions::checks`) and list views
//! (`views::list::view_checks`) are checked so.
//!
//! Notes are counted, and the checking task says up to which note it has acted
//! ([`CheckQueue::done`]): [`CheckQueue::settled`] waits for that, so that what follows a
//! notification (a poll after another gateway changed its session) can wait for the
//! change to be acted on, not only heard.

use std::fmt::Display;
use std::future::Future;
use std::sync::Mutex;
use std::time::Duration;
use tokio::sync::{watch, Notify};

/// How long a failed read waits before it is tried again.
const RETRY_AFTER: Duration = Duration::from_millis(200);

/// What waits to be checked (`P`: the notes, e.g. a set of ids), and the wake-up.
pub struct CheckQueue<P> {
    /// The notes not taken yet, and how many notes were ever made.
    pending: Mutex<(P, u64)>,
    wake: Notify,
    /// How many notes were acted on (all those up to this count).
    checked: watch::Sender<u64>,
}

impl<P: Default> Default for CheckQueue<P> {
    fn default() -> Self {
        CheckQueue {
            pending: Mutex::new((P::default(), 0)),
            wake: Notify::new(),
            checked: watch::Sender::new(0),
        }
    }
}

impl<P: Default> CheckQueue<P> {
    /// Adds to the notes (`add`) and wakes the checking task.
    pub fn note(&self, add: impl FnOnce(&mut P)) {
        let mut pending = crate::lock::lock(&self.pending);
        add(&mut pending.0);
        pending.1 += 1;
        drop(pending);
        self.wake.notify_one();
    }

    /// Waits until something is noted, then takes every note, with the count they reach
    /// (for `done`).
    pub async fn next(&self) -> (P, u64) {
        self.wake.notified().await;
        let mut pending = crate::lock::lock(&self.pending);
        (std::mem::take(&mut pending.0), pending.1)
    }

    /// The notes up to `upto` (as `next` gave it) were acted on.
    pub fn done(&self, upto: u64) {
        self.checked.send_if_modified(|checked| {
            let newer = upto > *checked;
            *checked = (*checked).max(upto);
            newer
        });
    }

    /// How many notes were made so far.
    pub fn noted(&self) -> u64 {
        crate::lock::lock(&self.pending).1
    }

    /// Until the notes up to `upto` (a `noted` count) have been acted on.
    pub async fn settled(&self, upto: u64) {
        let mut checked = self.checked.subscribe();
        // The sender lives as long as the queue, which the caller borrows.
        let _ = checked.wait_for(|checked| *checked >= upto).await;
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[tokio::test]
    async fn settled_waits_for_the_notes_made_before_it_to_be_acted_on() {
        let queue = CheckQueue::<HashSet<i64>>::default();
        // Nothing noted: settled at once.
        tokio::time::timeout(Duration::from_secs(1), queue.settled(queue.noted()))
            .await
            .expect("nothing to wait for");
        queue.note(|ids| {
            ids.insert(7);
        });
        let upto = queue.noted();
        assert_eq!(upto, 1);
        let (ids, taken) = queue.next().await;
        assert_eq!((ids, taken), (HashSet::from([7]), 1));
        // Taken is not acted on.
        let waiting = tokio::time::timeout(Duration::from_millis(50), queue.settled(upto)).await;
        assert!(waiting.is_err(), "settled before the note was acted on");
        // A later note does not hold back what came before it.
        queue.note(|ids| {
            ids.insert(8);
        });
        queue.done(taken);
        tokio::time::timeout(Duration::from_secs(1), queue.settled(upto))
            .await
            .expect("settled once acted on");
        let later =
            tokio::time::timeout(Duration::from_millis(50), queue.settled(queue.noted())).await;
        assert!(later.is_err(), "the second note is not acted on yet");
    }
}
