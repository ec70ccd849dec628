//! A session's long poll: the events of every view it holds, taken at once or waited
//! for, for an acking client (positions from its `ack`) or a legacy one (the session's
//! `local` positions, settled by `legacy`).

use crate::fragments::{ArrayBuilder, Fragments};
use crate::sessions::acked::AckPositions;
use crate::sessions::ids::random_u64;
use crate::sessions::legacy::Unconfirmed;
use crate::sessions::session::Session;
use crate::shared_log::Delivery;
use crate::views::{Position, Waker};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// Room reserved for this many views' wakers (more only costs a reallocation).
const MAX_WATCHED: usize = 4;

impl Session {
    /// The events queued for this session (every view), moving its positions past them:
    /// the `local` ones, or an acking poll's. A legacy answer with events also returns the
    /// token that settles it (`answer_received`, `answer_lost`).
    pub(super) fn take_events(
        &self,
        mut acked: Option<&mut AckPositions>,
    ) -> (Fragments, usize, Option<u64>) {
        let mut state = self.lock();
        // Ended meanwhile (its positions may be handed to another gateway): nothing more
        // is taken from this copy.
        if state.destroyed {
            return (ArrayBuilder::new().finish(), 0, None);
        }
        let connection = acked
            .is_none()
            .then(crate::sessions::legacy::current_connection)
            .flatten();
        let earlier = match acked {
            None => self.settle_earlier_answer(&mut state, connection.as_ref()),
            Some(_) => None,
        };
        let before: Vec<(u64, Position)> = match (&acked, &earlier) {
            (None, Some(earlier)) => earlier.before.clone(),
            (None, None) => state
                .subscriptions
                .iter()
                .map(|s| (s.sub_id, s.local))
                .collect(),
            (Some(_), _) => Vec::new(),
        };
        let mut out = ArrayBuilder::new();
        state.subscriptions.retain_mut(|sub| {
            let delivery = match acked.as_deref_mut() {
                None => {
                    let mut local = sub.local;
                    let delivery = sub.collect(&mut local, &mut out);
                    sub.local = local;
                    delivery
                }
                Some(acked) => {
                    let initial = sub.initial;
                    let (_, position) = acked
                        .positions
                        .entry(sub.sub_id)
                        .or_insert_with(|| (sub.key.clone(), initial));
                    sub.collect(position, &mut out)
                }
            };
            if delivery == Delivery::Ended {
                if let Some(acked) = acked.as_deref_mut() {
                    acked.positions.remove(&sub.sub_id);
                }
            }
            delivery == Delivery::Continues
        });
        let count = out.count();
        let token = if acked.is_none() && count > 0 {
            let token = random_u64();
            let mut tokens = earlier.map(|e| e.tokens).unwrap_or_default();
            tokens.push(token);
            state.unconfirmed = Some(Unconfirmed {
                tokens,
                before,
                connection,
            });
            Some(token)
        } else {
            // Nothing new: an earlier answer still unsettled stays so.
            if let Some(earlier) = earlier {
                state.unconfirmed = Some(earlier);
            }
            None
        };
        (out.finish(), count, token)
    }

    fn wakers(&self) -> Vec<Waker> {
        let mut out = Vec::with_capacity(MAX_WATCHED);
        for sub in &self.lock().subscriptions {
            sub.wakers(&mut out);
        }
        out
    }

    /// Answers with the queued events at once, or waits up to `timeout` for some. A newer
    /// call on the same session (or its destruction) ends this one with `[]`, leaving the
    /// events to the newer call. `acked`: an acking poll's positions (moved past what the
    /// answer holds); None: the session's `local` ones.
    pub async fn get_events(
        &self,
        timeout: Duration,
        acked: Option<&mut AckPositions>,
    ) -> Fragments {
        self.poll(timeout, acked).await.0
    }

    /// A legacy client's poll: like `get_events` without positions, and its answer is
    /// registered with the connection it goes out on, which settles it (`delivery`).
    pub async fn legacy_poll(self: &Arc<Self>, timeout: Duration) -> Fragments {
        let (events, token) = self.poll(timeout, None).await;
        if let Some(token) = token {
            crate::sessions::legacy::register(self, token);
        }
        events
    }

    async fn poll(
        &self,
        timeout: Duration,
        mut acked: Option<&mut AckPositions>,
    ) -> (Fragments, Option<u64>) {
        if acked.is_none() {
            self.await_earlier_answer().await;
        }
        let poll = self.polls.fetch_add(1, Ordering::SeqCst) + 1;
        self.wake.notify_waiters();
        let _waiting = Waiting::start(self);
        let deadline = Instant::now() + timeout;
        loop {
            // The session's own waker first: a subscribe that lands after it is created
            // wakes it, so the new view is watched on the next turn.
            let sources: Vec<Waker>;
            let mut wakers = Vec::with_capacity(1 + MAX_WATCHED);
            wakers.push(Box::pin(self.wake.notified()));
            sources = self.wakers();
            wakers.extend(sources.iter().map(|w| Box::pin(w.notify().notified())));
            // Registered before looking, so that nothing arriving after the look is missed.
            for waker in &mut wakers {
                waker.as_mut().enable();
            }
            if self.polls.load(Ordering::SeqCst) != poll || self.lock().destroyed {
                return (ArrayBuilder::new().finish(), None);
            }
            let (events, count, token) = self.take_events(acked.as_deref_mut());
            if count > 0 || self.draining.load(Ordering::SeqCst) {
                crate::metrics::metrics()
                    .events_delivered
                    .inc_by(count as u64);
                return (events, token);
            }
            tokio::select! {
                _ = futures_util::future::select_all(wakers) => {}
                _ = tokio::time::sleep_until(deadline) => return (events, None),
            }
        }
    }
}

/// Marks a session as waiting while a `get_events` is in progress: it does not expire
/// then, and its idle time restarts when the call ends, however it ends.
struct Waiting<'a>(&'a Session);

impl<'a> Waiting<'a> {
    fn start(session: &'a Session) -> Self {
        let mut state = session.lock();
        state.waiting += 1;
        state.last_seen = Instant::now();
        Waiting(session)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        let mut state = self.0.lock();
        state.waiting -= 1;
        state.last_seen = Instant::now();
    }
}
