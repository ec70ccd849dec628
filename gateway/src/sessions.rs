//! Sessions: who is polling, as whom, and where each of their views stands.
//!
//! A session is small on purpose (a user, and per subscription a key and a cursor): the
//! events themselves live once, in the boards' logs.

use crate::board::{Board, Cursor, Delivery};
use crate::errors::{RpcError, TOO_MANY, UNKNOWN_VIEW};
use crate::fragments::{ArrayBuilder, Fragments};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::Notify;
use tokio::time::Instant;

#[derive(Debug, Clone, PartialEq)]
pub struct User {
    pub id: i64,
    pub name: String,
}

pub struct Subscription {
    pub key: Arc<str>,
    pub board: Arc<Board>,
    pub compact: bool,
    pub cursor: Cursor,
}

pub struct Session {
    pub id: Arc<str>,
    state: Mutex<State>,
    /// Wakes this session's waiting `get_events` (a newer one came, or it was destroyed).
    wake: Notify,
    polls: AtomicU64,
}

struct State {
    user: Option<User>,
    subscriptions: Vec<Subscription>,
    last_seen: Instant,
    waiting: usize,
    destroyed: bool,
}

impl Session {
    fn new(id: Arc<str>) -> Self {
        Session {
            id,
            state: Mutex::new(State {
                user: None,
                subscriptions: Vec::new(),
                last_seen: Instant::now(),
                waiting: 0,
                destroyed: false,
            }),
            wake: Notify::new(),
            polls: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn user(&self) -> Option<User> {
        self.lock().user.clone()
    }

    pub fn set_user(&self, user: User) {
        self.lock().user = Some(user);
    }

    /// Adds (or renews, with a fresh cursor) the subscription `key`.
    pub fn subscribe(&self, sub: Subscription, max: usize) -> Result<(), RpcError> {
        let mut state = self.lock();
        if let Some(old) = state.subscriptions.iter_mut().find(|s| s.key == sub.key) {
            *old = sub;
        } else if state.subscriptions.len() >= max {
            return Err(RpcError::new(
                TOO_MANY,
                format!("a session may hold at most {max} subscriptions"),
            ));
        } else {
            state.subscriptions.push(sub);
        }
        drop(state);
        // A waiting get_events must start watching the new view.
        self.wake.notify_waiters();
        Ok(())
    }

    pub fn unsubscribe(&self, key: &str) -> Result<(), RpcError> {
        let mut state = self.lock();
        let before = state.subscriptions.len();
        state.subscriptions.retain(|s| &*s.key != key);
        if state.subscriptions.len() == before {
            return Err(RpcError::new(
                UNKNOWN_VIEW,
                format!("this session has no subscription {key:?}"),
            ));
        }
        Ok(())
    }

    /// The events queued for this session (every view), moving its cursors past them.
    fn take_events(&self) -> (Fragments, usize) {
        let mut state = self.lock();
        let mut out = ArrayBuilder::new();
        state.subscriptions.retain_mut(|sub| {
            sub.board.collect(&mut sub.cursor, sub.compact, &mut out) == Delivery::Continues
        });
        let count = out.count();
        (out.finish(), count)
    }

    fn boards(&self) -> Vec<Arc<Board>> {
        self.lock()
            .subscriptions
            .iter()
            .map(|s| s.board.clone())
            .collect()
    }

    /// Answers with the queued events at once, or waits up to `timeout` for some. A newer
    /// call on the same session (or its destruction) ends this one with `[]`, leaving the
    /// events to the newer call.
    pub async fn get_events(&self, timeout: Duration) -> Fragments {
        let poll = self.polls.fetch_add(1, Ordering::SeqCst) + 1;
        self.wake.notify_waiters();
        let _waiting = Waiting::start(self);
        let deadline = Instant::now() + timeout;
        loop {
            let boards = self.boards();
            let mut wakers: Vec<_> = boards
                .iter()
                .map(|b| Box::pin(b.changed.notified()))
                .collect();
            wakers.push(Box::pin(self.wake.notified()));
            // Registered before looking, so that nothing arriving after the look is missed.
            for waker in &mut wakers {
                waker.as_mut().enable();
            }
            if self.polls.load(Ordering::SeqCst) != poll || self.lock().destroyed {
                return ArrayBuilder::new().finish();
            }
            let (events, count) = self.take_events();
            if count > 0 {
                return events;
            }
            tokio::select! {
                _ = futures_util::future::select_all(wakers) => {}
                _ = tokio::time::sleep_until(deadline) => return events,
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

pub struct Sessions {
    map: Mutex<HashMap<Arc<str>, Arc<Session>>>,
    max: usize,
    idle: Duration,
}

impl Sessions {
    pub fn new(max: usize, idle: Duration) -> Self {
        Sessions {
            map: Mutex::new(HashMap::new()),
            max,
            idle,
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<Arc<str>, Arc<Session>>> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn create(&self) -> Result<Arc<Session>, RpcError> {
        let mut map = self.lock();
        if map.len() >= self.max {
            return Err(RpcError::new(
                TOO_MANY,
                format!(
                    "the gateway holds its maximum of {} sessions; retry later",
                    self.max
                ),
            ));
        }
        let id: Arc<str> = new_session_id().into();
        let session = Arc::new(Session::new(id.clone()));
        map.insert(id, session.clone());
        Ok(session)
    }

    pub fn get(&self, id: &str) -> Result<Arc<Session>, RpcError> {
        self.lock()
            .get(id)
            .cloned()
            .ok_or_else(RpcError::unknown_session)
    }

    pub fn destroy(&self, id: &str) -> Result<(), RpcError> {
        let session = self
            .lock()
            .remove(id)
            .ok_or_else(RpcError::unknown_session)?;
        session.lock().destroyed = true;
        session.wake.notify_waiters();
        Ok(())
    }

    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Removes the sessions idle for longer than the idle time; returns how many.
    pub fn expire(&self) -> usize {
        let now = Instant::now();
        let mut map = self.lock();
        let before = map.len();
        map.retain(|_, session| {
            let state = session.lock();
            state.waiting > 0 || now.duration_since(state.last_seen) <= self.idle
        });
        before - map.len()
    }

    /// Expires idle sessions every few seconds, forever.
    pub async fn run_expiry(self: Arc<Self>) {
        let period = (self.idle / 4).clamp(Duration::from_millis(100), Duration::from_secs(5));
        loop {
            tokio::time::sleep(period).await;
            let expired = self.expire();
            if expired > 0 {
                tracing::debug!("expired {expired} idle sessions");
            }
        }
    }
}

/// 128 random bits from the operating system, in hex: unguessable.
fn new_session_id() -> String {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).expect("the operating system's random source works");
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
