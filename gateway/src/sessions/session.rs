//! Sessions: who is polling, as whom, and where each of their views stands.
//!
//! A session is small on purpose (a user, and per subscription a key and positions): the
//! events themselves live once, in the logs of the views (a board's, a list view's).
//!
//! This gateway's copy of a session: the session itself lives in the database
//! (`store`), so any gateway can serve it. Its subscriptions: `subscription`.

use crate::errors::{RpcError, TOO_FAST, TOO_MANY, UNKNOWN_VIEW};
use crate::mirror::board::Board;
use crate::mirror::cursors::MIN_PRESENCE_INTERVAL;
use crate::sessions::ids::random_u64;
use crate::sessions::legacy::{
    Answers, ConnectionDeliveries, Earlier, Unconfirmed, EARLIER_ANSWER_ACKNOWLEDGED_WITHIN,
};
use crate::sessions::subscription::Subscription;
use crate::views::Position;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::Notify;
use tokio::time::Instant;

#[derive(Debug, Clone, PartialEq)]
pub struct User {
    pub id: i64,
    pub name: String,
    /// A guest (`place.users.guest`): places only on the boards that take guests.
    pub guest: bool,
}

pub struct Session {
    pub id: Arc<str>,
    /// Names the session in cursors and between gateways (its id is a secret).
    pub public_id: i64,
    pub(super) state: Mutex<State>,
    /// Wakes this session's waiting `get_events` (a newer one came, or it was destroyed).
    pub(super) wake: Notify,
    pub(super) polls: AtomicU64,
    /// Names this session's cursor to others (not its id, which is a secret).
    cursor_id: u64,
    /// This gateway answered the session's last legacy poll, and no other gateway has
    /// changed or served the session since (it would have said so): `local` positions hold.
    held: AtomicBool,
    /// The version of the stored session this copy reflects (`place.sessions.version`).
    version: AtomicI64,
    /// The gateway is shutting down: polls answer with what they have, without waiting.
    pub(super) draining: AtomicBool,
}

pub(super) struct State {
    pub(super) user: Option<User>,
    pub(super) subscriptions: Vec<Subscription>,
    pub(super) last_seen: Instant,
    pub(super) waiting: usize,
    /// Destroyed, expired, or dropped for a newer copy: waiting polls end, the next
    /// request reads the session from the database again.
    pub(super) destroyed: bool,
    /// The boards this session shows its cursor on (removed with the session).
    cursors: Vec<CursorGuard>,
    pub(super) last_presence: Option<Instant>,
    /// The last legacy answer while it is not known to have reached the client: its token
    /// and the `local` positions from before it, by subscription (see `delivery`).
    pub(super) unconfirmed: Option<Unconfirmed>,
}

/// A session's cursor on a board, for as long as the session lives.
struct CursorGuard {
    board: Arc<Board>,
    id: u64,
}

impl Drop for CursorGuard {
    fn drop(&mut self) {
        self.board.cursors.remove(self.id);
    }
}

impl Session {
    pub fn new(id: Arc<str>, public_id: i64, version: i64, user: Option<User>, held: bool) -> Self {
        Session {
            id,
            public_id,
            state: Mutex::new(State {
                user,
                subscriptions: Vec::new(),
                last_seen: Instant::now(),
                waiting: 0,
                destroyed: false,
                cursors: Vec::new(),
                last_presence: None,
                unconfirmed: None,
            }),
            wake: Notify::new(),
            polls: AtomicU64::new(0),
            cursor_id: random_u64(),
            held: AtomicBool::new(held),
            version: AtomicI64::new(version),
            draining: AtomicBool::new(false),
        }
    }

    /// From now on, polls answer with what they have at once (a waiting one too).
    pub(super) fn drain(&self) {
        self.draining.store(true, Ordering::SeqCst);
        self.wake.notify_waiters();
    }

    /// The version of the stored session this copy reflects.
    pub fn version(&self) -> i64 {
        self.version.load(Ordering::SeqCst)
    }

    /// A change made here gave the stored session `version`: true when it is the very
    /// next one (no other gateway changed the session since this copy was read); false
    /// otherwise, and then the copy must be read again.
    pub fn advance_version(&self, version: i64) -> bool {
        let expected = self.version.load(Ordering::SeqCst) + 1;
        version == expected
            && self
                .version
                .compare_exchange(expected - 1, version, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
    }

    /// Whether this copy answered the last legacy poll (see `held`).
    pub fn is_held(&self) -> bool {
        self.held.load(Ordering::SeqCst)
    }

    /// This gateway now answers the session's legacy polls.
    pub fn hold(&self) {
        self.held.store(true, Ordering::SeqCst);
    }

    pub fn is_destroyed(&self) -> bool {
        self.lock().destroyed
    }

    /// Ends this copy: waiting polls answer `[]`, cursors shown leave.
    pub(super) fn end(&self) {
        let mut state = self.lock();
        state.destroyed = true;
        state.cursors.clear();
        drop(state);
        self.wake.notify_waiters();
    }

    /// Shows this session's cursor at (x, y) on `board` to the views that asked for
    /// `presence`; at most one call per [`MIN_PRESENCE_INTERVAL`].
    /// Returns the cursor's public id (the one others see).
    pub fn set_presence(&self, board: &Arc<Board>, x: i32, y: i32) -> Result<String, RpcError> {
        let now = Instant::now();
        let mut state = self.lock();
        if let Some(last) = state.last_presence {
            let next = last + MIN_PRESENCE_INTERVAL;
            if now < next {
                let wait = (next - now).as_millis() as u64;
                return Err(RpcError::new(
                    TOO_FAST,
                    format!(
                        "presence may be set at most every {} ms; retry in {wait} ms",
                        MIN_PRESENCE_INTERVAL.as_millis()
                    ),
                )
                .with_data(serde_json::json!({ "retry_after_ms": wait })));
            }
        }
        state.last_presence = Some(now);
        let name = state.user.as_ref().map(|u| u.name.clone());
        if !state.cursors.iter().any(|g| g.board.id == board.id) {
            state.cursors.push(CursorGuard {
                board: board.clone(),
                id: self.cursor_id,
            });
        }
        board
            .cursors
            .set(self.cursor_id, x, y, name, std::time::Instant::now());
        Ok(crate::mirror::cursors::public_id(self.cursor_id))
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn user(&self) -> Option<User> {
        self.lock().user.clone()
    }

    pub fn set_user(&self, user: User) {
        self.lock().user = Some(user);
    }

    pub fn clear_user(&self) {
        self.lock().user = None;
    }

    /// Whether one more subscription under `key` fits.
    pub fn check_room(&self, key: &str, max: usize) -> Result<(), RpcError> {
        let state = self.lock();
        if state.subscriptions.len() >= max && !state.subscriptions.iter().any(|s| &*s.key == key) {
            return Err(RpcError::new(
                TOO_MANY,
                format!("a session may hold at most {max} subscriptions"),
            ));
        }
        Ok(())
    }

    /// Adds (or renews, with a fresh cursor) the subscription `key`.
    pub fn subscribe(&self, sub: Subscription, max: usize) -> Result<(), RpcError> {
        self.check_room(&sub.key, max)?;
        let mut state = self.lock();
        if let Some(old) = state.subscriptions.iter_mut().find(|s| s.key == sub.key) {
            *old = sub;
        } else {
            state.subscriptions.push(sub);
        }
        drop(state);
        // A waiting get_events must start watching the new view.
        self.wake.notify_waiters();
        Ok(())
    }

    /// Refuses a key the session has no subscription under.
    pub fn require_subscription(&self, key: &str) -> Result<(), RpcError> {
        if self.lock().subscriptions.iter().any(|s| &*s.key == key) {
            return Ok(());
        }
        Err(RpcError::new(
            UNKNOWN_VIEW,
            format!("this session has no subscription {key:?}"),
        ))
    }

    pub fn unsubscribe(&self, key: &str) -> Result<(), RpcError> {
        self.require_subscription(key)?;
        self.lock().subscriptions.retain(|s| &*s.key != key);
        Ok(())
    }

    /// Before a legacy poll on another connection than the session's earlier, unsettled
    /// answer: a moment for that answer's last acknowledgement to come (`legacy`).
    pub(super) async fn await_earlier_answer(&self) {
        let current = crate::sessions::legacy::current_connection();
        let deadline = Instant::now() + EARLIER_ANSWER_ACKNOWLEDGED_WITHIN;
        loop {
            let waiting = self
                .lock()
                .unconfirmed
                .as_ref()
                .is_some_and(|u| u.awaited_by(current.as_ref()));
            if !waiting || Instant::now() >= deadline {
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Before a legacy poll takes events: the earlier answer still unsettled, if it is
    /// still pending with this one (`Earlier`); when it was lost, the views go back to
    /// before it first, so this answer carries its events again.
    pub(super) fn settle_earlier_answer(
        &self,
        state: &mut State,
        connection: Option<&Arc<ConnectionDeliveries>>,
    ) -> Option<Unconfirmed> {
        match state.unconfirmed.take()?.settle(connection) {
            Earlier::Pending(earlier) => Some(earlier),
            Earlier::Arrived => None,
            Earlier::Lost(earlier) => {
                go_back(state, &earlier.before);
                Some(earlier)
            }
        }
    }
}

/// The views' `local` positions as they were before a lost answer.
fn go_back(state: &mut State, before: &[(u64, Position)]) {
    for sub in &mut state.subscriptions {
        if let Some((_, position)) = before.iter().find(|(id, _)| *id == sub.sub_id) {
            sub.local = *position;
        }
    }
}

impl Answers for Session {
    fn answer_received(&self, token: u64) {
        let mut state = self.lock();
        if state
            .unconfirmed
            .as_mut()
            .is_some_and(|u| u.received(token))
        {
            state.unconfirmed = None;
        }
    }

    /// Unless a later poll came meanwhile, the views go back to where they stood before
    /// the answer, so its events come again.
    fn answer_lost(&self, token: u64) {
        let mut state = self.lock();
        let Some(unconfirmed) = state.unconfirmed.take_if(|u| u.tokens.contains(&token)) else {
            return;
        };
        go_back(&mut state, &unconfirmed.before);
        drop(state);
        self.wake.notify_waiters();
    }
}
