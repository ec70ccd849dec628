//! Sessions: who is polling, as whom, and where each of their views stands.
//!
//! A session is small on purpose (a user, and per subscription a key and positions): the
//! events themselves live once, in the logs of the views (a board's, a list view's).
//!
//! This gateway's copy of a session: the session itself lives in the database
//! (`store`), so any gateway can serve it. Its subscriptions: `subscription`.

use crate::errors::{RpcError, TOO_FAST, TOO_MANY, UNKNOWN_VIEW};
use crate::fragments::{ArrayBuilder, Fragments};
use crate::mirror::board::Board;
use crate::mirror::cursors::MIN_PRESENCE_INTERVAL;
use crate::sessions::legacy::ConnectionDeliveries;
use crate::sessions::poll_cursor::{self, PollCursor};
use crate::sessions::subscription::Subscription;
use crate::shared_log::Delivery;
use crate::views::{Position, Waker};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::Notify;
use tokio::time::Instant;

#[derive(Debug, Clone, PartialEq)]
pub struct User {
    pub id: i64,
    pub name: String,
}

/// How long a legacy poll waits for the acknowledgement of the session's earlier answer
/// on another connection (`Session::await_earlier_answer`).
const EARLIER_ANSWER_ACKNOWLEDGED_WITHIN: Duration = Duration::from_millis(300);

/// Room reserved for this many views' wakers (more only costs a reallocation).
const MAX_WATCHED: usize = 4;

/// Where an acking poll's views stand, by subscription: what its answer's cursor says.
pub struct AckPositions {
    gateway: u64,
    session: i64,
    positions: HashMap<u64, (Arc<str>, Position)>,
}

impl AckPositions {
    /// The cursor that continues exactly after what was answered: only for the
    /// subscriptions the session has now (one re-subscribed during the poll is a new one).
    pub fn cursor(&self, session: &Session) -> PollCursor {
        let state = session.lock();
        PollCursor {
            session: self.session,
            gateway: self.gateway,
            views: state
                .subscriptions
                .iter()
                .filter_map(|sub| {
                    let (_, position) = self.positions.get(&sub.sub_id)?;
                    let entry = poll_cursor::Entry(sub.sub_id, position.portable());
                    Some((sub.key.to_string(), entry))
                })
                .collect::<BTreeMap<_, _>>(),
        }
    }
}

pub struct Session {
    pub id: Arc<str>,
    /// Names the session in cursors and between gateways (its id is a secret).
    pub public_id: i64,
    state: Mutex<State>,
    /// Wakes this session's waiting `get_events` (a newer one came, or it was destroyed).
    wake: Notify,
    polls: AtomicU64,
    /// Names this session's cursor to others (not its id, which is a secret).
    cursor_id: u64,
    /// This gateway answered the session's last legacy poll, and no other gateway has
    /// changed or served the session since (it would have said so): `local` positions hold.
    held: AtomicBool,
    /// The version of the stored session this copy reflects (`place.sessions.version`).
    version: AtomicI64,
    /// The gateway is shutting down: polls answer with what they have, without waiting.
    draining: AtomicBool,
}

struct State {
    user: Option<User>,
    subscriptions: Vec<Subscription>,
    last_seen: Instant,
    waiting: usize,
    /// Destroyed, expired, or dropped for a newer copy: waiting polls end, the next
    /// request reads the session from the database again.
    destroyed: bool,
    /// The boards this session shows its cursor on (removed with the session).
    cursors: Vec<CursorGuard>,
    last_presence: Option<Instant>,
    /// The last legacy answer while it is not known to have reached the client: its token
    /// and the `local` positions from before it, by subscription (see `delivery`).
    unconfirmed: Option<Unconfirmed>,
}

/// Legacy answers not yet known to have reached the client (see `delivery`).
struct Unconfirmed {
    /// Their tokens: one, or several answered together on one connection (a batch).
    tokens: Vec<u64>,
    /// The `local` positions before the first of them, by subscription.
    before: Vec<(u64, Position)>,
    /// The connection they went out on.
    connection: Option<Arc<ConnectionDeliveries>>,
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
    fn drain(&self) {
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
    fn end(&self) {
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

    fn lock(&self) -> MutexGuard<'_, State> {
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

    /// Where an acking poll starts: per subscription, the ack's entry for it when there
    /// is one, else where the subscription began.
    pub fn ack_positions(&self, ack: Option<&PollCursor>, gateway: u64) -> AckPositions {
        let state = self.lock();
        let here = ack.is_some_and(|a| a.gateway == gateway);
        let positions = state
            .subscriptions
            .iter()
            .map(|sub| {
                let entry = ack
                    .and_then(|a| a.views.get(&*sub.key))
                    .filter(|e| e.0 == sub.sub_id);
                let position = match entry {
                    Some(e) => sub.resume(e.1, here),
                    None => sub.initial,
                };
                (sub.sub_id, (sub.key.clone(), position))
            })
            .collect();
        AckPositions {
            gateway,
            session: self.public_id,
            positions,
        }
    }

    /// The boards whose logs must reach further back for these positions.
    pub fn boards_behind(&self, positions: &AckPositions) -> Vec<(Arc<Board>, i64)> {
        let state = self.lock();
        state
            .subscriptions
            .iter()
            .filter_map(|sub| {
                let (_, position) = positions.positions.get(&sub.sub_id)?;
                sub.view.board_behind(position)
            })
            .collect()
    }

    /// The events queued for this session (every view), moving its positions past them:
    /// the `local` ones, or an acking poll's. A legacy answer with events also returns the
    /// token that settles it (`answer_received`, `answer_lost`).
    fn take_events(&self, mut acked: Option<&mut AckPositions>) -> (Fragments, usize, Option<u64>) {
        let mut state = self.lock();
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

    /// Before a legacy poll on another connection than the session's earlier, unsettled
    /// answer: a moment for that answer's last acknowledgement to come (a client's TCP
    /// stack may hold it back up to 200 ms, and the client may have read the answer and
    /// polled again meanwhile). A connection gone silent does not acknowledge within it.
    async fn await_earlier_answer(&self) {
        let current = crate::sessions::legacy::current_connection();
        let deadline = Instant::now() + EARLIER_ANSWER_ACKNOWLEDGED_WITHIN;
        loop {
            let waiting = {
                let state = self.lock();
                state
                    .unconfirmed
                    .as_ref()
                    .is_some_and(|u| match (&u.connection, &current) {
                        (Some(a), Some(b)) if Arc::ptr_eq(a, b) => false,
                        (Some(a), _) => a.acknowledged_now() == Some(false),
                        (None, _) => false,
                    })
            };
            if !waiting || Instant::now() >= deadline {
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Before a legacy poll takes events: what becomes of the earlier answer still
    /// unsettled. Given on the same connection (earlier in the same batch), it stays
    /// pending with this one (returned). Given on another connection, its client's TCP
    /// stack says: everything acknowledged, it arrived (settled, None); else the client
    /// came back without it (a connection gone silent, a client that gave up waiting), so
    /// the views go back to before it and this answer carries its events again (returned:
    /// its positions are this answer's before).
    fn settle_earlier_answer(
        &self,
        state: &mut State,
        connection: Option<&Arc<ConnectionDeliveries>>,
    ) -> Option<Unconfirmed> {
        let earlier = state.unconfirmed.take()?;
        let same_connection = matches!(
            (&earlier.connection, connection),
            (Some(a), Some(b)) if Arc::ptr_eq(a, b)
        );
        if same_connection {
            return Some(earlier);
        }
        let arrived = earlier
            .connection
            .as_ref()
            .is_none_or(|c| c.acknowledged_now() == Some(true));
        if arrived {
            return None;
        }
        for sub in &mut state.subscriptions {
            if let Some((_, position)) = earlier.before.iter().find(|(id, _)| *id == sub.sub_id) {
                sub.local = *position;
            }
        }
        Some(Unconfirmed {
            tokens: Vec::new(),
            before: earlier.before,
            connection: None,
        })
    }

    /// The legacy answer `token` reached its client: its positions stand (once every
    /// answer given with it has).
    pub fn answer_received(&self, token: u64) {
        let mut state = self.lock();
        if let Some(unconfirmed) = &mut state.unconfirmed {
            unconfirmed.tokens.retain(|t| *t != token);
            if unconfirmed.tokens.is_empty() {
                state.unconfirmed = None;
            }
        }
    }

    /// The legacy answer `token` did not reach its client: unless a later poll came
    /// meanwhile, the views go back to where they stood before it, so its events come again.
    pub fn answer_lost(&self, token: u64) {
        let mut state = self.lock();
        let Some(unconfirmed) = state.unconfirmed.take_if(|u| u.tokens.contains(&token)) else {
            return;
        };
        for sub in &mut state.subscriptions {
            if let Some((_, position)) = unconfirmed.before.iter().find(|(id, _)| *id == sub.sub_id)
            {
                sub.local = *position;
            }
        }
        drop(state);
        self.wake.notify_waiters();
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

/// The sessions this gateway holds a copy of, by id and by public id.
pub struct Sessions {
    map: Mutex<Maps>,
    max: usize,
    idle: Duration,
    /// Shutting down: every session's polls answer at once (`drain`).
    draining: AtomicBool,
}

#[derive(Default)]
struct Maps {
    by_id: HashMap<Arc<str>, Arc<Session>>,
    by_public: HashMap<i64, Arc<Session>>,
    /// When each session was last forgotten (a mark of `forgotten`), for a while: a copy
    /// read from the database before that is stale (see [`Sessions::mark`]).
    forgotten_at: HashMap<i64, (u64, std::time::Instant)>,
    /// Counts forgettings.
    forgotten: u64,
}

/// How long a forgetting is remembered (longer than any read of a session takes).
const FORGOTTEN_KEPT: Duration = Duration::from_secs(60);

/// Where the forgettings stood when a session was read from the database.
#[derive(Debug, Clone, Copy)]
pub struct Mark(u64);

impl Sessions {
    pub fn new(max: usize, idle: Duration) -> Self {
        Sessions {
            map: Mutex::new(Maps::default()),
            max,
            idle,
            draining: AtomicBool::new(false),
        }
    }

    /// The gateway is shutting down: every waiting poll answers now with what it has, and
    /// later ones answer at once, so that no client waits on a gateway about to go.
    pub fn drain(&self) {
        self.draining.store(true, Ordering::SeqCst);
        for session in self.lock().by_id.values() {
            session.drain();
        }
    }

    fn lock(&self) -> MutexGuard<'_, Maps> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Refuses a new session when this gateway holds its maximum.
    pub fn check_room(&self) -> Result<(), RpcError> {
        if self.lock().by_id.len() >= self.max {
            return Err(RpcError::new(
                TOO_MANY,
                format!(
                    "the gateway holds its maximum of {} sessions; retry later",
                    self.max
                ),
            ));
        }
        Ok(())
    }

    /// Taken before reading a session from the database: `insert_read` then refuses the
    /// copy if the session was forgotten meanwhile (another gateway changed it while it was
    /// being read).
    pub fn mark(&self) -> Mark {
        Mark(self.lock().forgotten)
    }

    /// Keeps a copy of a session made here (`session.create`).
    pub fn insert(&self, session: Session) -> Result<Arc<Session>, RpcError> {
        self.insert_read(session, None)
            .map(|s| s.expect("not read from the database: never stale"))
    }

    /// Keeps a copy read from the database after `mark`; None when it is stale already.
    /// When another request put a copy there first, that one.
    pub fn insert_read(
        &self,
        session: Session,
        mark: Option<Mark>,
    ) -> Result<Option<Arc<Session>>, RpcError> {
        let mut maps = self.lock();
        if let (Some(Mark(mark)), Some((at, _))) = (mark, maps.forgotten_at.get(&session.public_id))
        {
            if *at > mark {
                return Ok(None);
            }
        }
        if let Some(existing) = maps.by_id.get(&session.id) {
            return Ok(Some(existing.clone()));
        }
        if maps.by_id.len() >= self.max {
            drop(maps);
            return Err(self.check_room().expect_err("full"));
        }
        let session = Arc::new(session);
        // Another session under the same public id can only be a copy from before a crash
        // of the database (it lost its sessions): it is gone.
        if let Some(old) = maps.by_public.insert(session.public_id, session.clone()) {
            maps.by_id.remove(&old.id);
            old.end();
        }
        maps.by_id.insert(session.id.clone(), session.clone());
        if self.draining.load(Ordering::SeqCst) {
            session.drain();
        }
        Ok(Some(session))
    }

    pub fn get(&self, id: &str) -> Option<Arc<Session>> {
        self.lock().by_id.get(id).cloned()
    }

    /// Forgets this gateway's copy of a session (destroyed, expired, or served by
    /// another gateway); a poll waiting on it answers `[]`.
    pub fn forget(&self, public_id: i64) {
        let session = {
            let mut maps = self.lock();
            maps.forgotten += 1;
            let now = std::time::Instant::now();
            let count = maps.forgotten;
            maps.forgotten_at.insert(public_id, (count, now));
            if maps.forgotten_at.len() > 1024 {
                maps.forgotten_at
                    .retain(|_, (_, at)| now.duration_since(*at) < FORGOTTEN_KEPT);
            }
            let Some(session) = maps.by_public.remove(&public_id) else {
                return;
            };
            maps.by_id.remove(&session.id);
            session
        };
        session.end();
    }

    /// The version of this gateway's copy of session `public_id` (None: no copy).
    pub fn copy_version(&self, public_id: i64) -> Option<i64> {
        self.lock().by_public.get(&public_id).map(|s| s.version())
    }

    /// Every copy: (public id, version, held here).
    pub fn copies(&self) -> Vec<(i64, i64, bool)> {
        self.lock()
            .by_public
            .values()
            .map(|s| (s.public_id, s.version.load(Ordering::SeqCst), s.is_held()))
            .collect()
    }

    /// Forgets the copies that no longer match the stored sessions: gone, changed since, or
    /// held here but answered by another gateway (`stored`: public id -> version, holder).
    /// For a gateway that was not listening for a while: it did not hear the others.
    pub fn reconcile(
        &self,
        copies: &[(i64, i64, bool)],
        stored: &HashMap<i64, (i64, Option<u64>)>,
        gateway: u64,
    ) -> usize {
        let mut forgotten = 0;
        for public_id in self.stale_copies(copies, stored, gateway) {
            self.forget(public_id);
            forgotten += 1;
        }
        forgotten
    }

    /// The copies among `copies` that do not match `stored`, judged by what each copy is
    /// now: one this gateway changed meanwhile (its version went up) is not stale for it.
    pub fn stale_copies(
        &self,
        copies: &[(i64, i64, bool)],
        stored: &HashMap<i64, (i64, Option<u64>)>,
        gateway: u64,
    ) -> Vec<i64> {
        copies
            .iter()
            .filter_map(|(public_id, _, _)| {
                let session = self.lock().by_public.get(public_id).cloned()?;
                let current = match stored.get(public_id) {
                    Some((stored_version, holder)) => {
                        *stored_version <= session.version()
                            && (!session.is_held() || *holder == Some(gateway))
                    }
                    None => false,
                };
                (!current).then_some(*public_id)
            })
            .collect()
    }

    /// How many `get_events` calls wait now, over every session.
    pub fn waiting_polls(&self) -> usize {
        let sessions: Vec<Arc<Session>> = self.lock().by_id.values().cloned().collect();
        sessions.iter().map(|s| s.lock().waiting).sum()
    }

    pub fn len(&self) -> usize {
        self.lock().by_id.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The public ids of the sessions in use here: waiting, or seen within `within`.
    pub fn in_use(&self, within: Duration) -> Vec<i64> {
        let now = Instant::now();
        self.lock()
            .by_public
            .values()
            .filter(|s| {
                let state = s.lock();
                state.waiting > 0 || now.duration_since(state.last_seen) <= within
            })
            .map(|s| s.public_id)
            .collect()
    }

    /// Forgets the copies idle here for longer than the idle time; returns how many. (The
    /// session itself expires in the database when no gateway has seen it for that long.)
    pub fn expire(&self) -> usize {
        let now = Instant::now();
        let mut expired = Vec::new();
        {
            let mut maps = self.lock();
            let before = maps.by_id.len();
            maps.by_id.retain(|_, session| {
                let state = session.lock();
                let keep = state.waiting > 0 || now.duration_since(state.last_seen) <= self.idle;
                if !keep {
                    expired.push(session.clone());
                }
                keep
            });
            for session in &expired {
                maps.by_public.remove(&session.public_id);
            }
            debug_assert_eq!(before - maps.by_id.len(), expired.len());
        }
        // A get_events that found the session just before may be about to wait.
        for session in &expired {
            session.end();
        }
        expired.len()
    }

    /// Expires idle copies every few seconds, forever.
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

pub fn random_u64() -> u64 {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes).expect("the operating system's random source works");
    u64::from_le_bytes(bytes)
}

/// 128 random bits from the operating system, in hex: unguessable.
pub fn new_session_id() -> String {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).expect("the operating system's random source works");
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mirror::snapshot::{Settings, Snapshot};
    use crate::views::board::BoardView;
    use crate::views::View;
    use pgplace_core::payload::Placement;
    use serde_json::Value;

    /// A session as `session.create` makes it (public ids count up).
    fn create(sessions: &Sessions) -> Result<Arc<Session>, RpcError> {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        sessions.check_room()?;
        let public_id = NEXT.fetch_add(1, Ordering::SeqCst) as i64;
        sessions.insert(Session::new(
            new_session_id().into(),
            public_id,
            0,
            None,
            true,
        ))
    }

    fn board(log_capacity: u64) -> Arc<Board> {
        let settings = Settings {
            freeze_after: None,
            id: 1,
            name: "t".into(),
            width: 4,
            height: 2,
            bits_per_tile: 4,
            palette: (0..16).map(|i| format!("#0000{i:02x}")).collect(),
            cooldown: 0.0,
            state: "open".into(),
        };
        Arc::new(Board::new(
            Snapshot {
                settings,
                seq: 0,
                bits: vec![0; 4],
                freezing: None,
                recent: Vec::new(),
            },
            log_capacity,
        ))
    }

    fn place(board: &Board, seq: i64, x: i32, color: i32) {
        let p = Placement {
            board: 1,
            seq,
            x,
            y: 0,
            color,
            user: 7,
            at: 0,
        };
        board.apply(&[p]).expect("in order");
    }

    fn subscribe(session: &Session, board: &Arc<Board>, compact: bool) {
        let (cursor, _) = board.initial_state();
        let view = View::Board(BoardView {
            board: board.clone(),
            compact,
            presence: false,
        });
        session
            .subscribe(Subscription::new(view, Position::Board(cursor)), 4)
            .unwrap();
    }

    fn json(f: Fragments) -> Vec<Value> {
        serde_json::from_slice::<Vec<Value>>(&f.to_vec()).expect("a JSON array")
    }

    #[tokio::test(start_paused = true)]
    async fn get_events_waits_its_timeout_then_answers_empty() {
        let sessions = Sessions::new(10, Duration::from_secs(120));
        let session = create(&sessions).unwrap();
        subscribe(&session, &board(100), false);
        let started = Instant::now();
        assert!(json(session.get_events(Duration::from_secs(30), None).await).is_empty());
        assert_eq!(started.elapsed(), Duration::from_secs(30));
    }

    #[tokio::test(start_paused = true)]
    async fn a_placement_ends_the_wait_at_once() {
        let sessions = Sessions::new(10, Duration::from_secs(120));
        let session = create(&sessions).unwrap();
        let b = board(100);
        subscribe(&session, &b, true);
        let waiter = {
            let session = session.clone();
            tokio::spawn(async move {
                let started = Instant::now();
                (
                    json(session.get_events(Duration::from_secs(60), None).await),
                    started.elapsed(),
                )
            })
        };
        tokio::time::sleep(Duration::from_secs(5)).await;
        place(&b, 1, 2, 9);
        place(&b, 2, 3, 8);
        let (events, waited) = waiter.await.unwrap();
        assert_eq!(waited, Duration::from_secs(5));
        // Both may arrive together or the first alone; the rest comes on the next call.
        let mut tiles: Vec<Value> = events
            .iter()
            .flat_map(|e| e["tiles"].as_array().unwrap().clone())
            .collect();
        if tiles.len() < 2 {
            let more = json(session.get_events(Duration::ZERO, None).await);
            tiles.extend(
                more.iter()
                    .flat_map(|e| e["tiles"].as_array().unwrap().clone()),
            );
        }
        assert_eq!(
            serde_json::json!(tiles),
            serde_json::json!([[2, 0, 9], [3, 0, 8]])
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_second_get_events_answers_the_first_with_nothing() {
        let sessions = Sessions::new(10, Duration::from_secs(120));
        let session = create(&sessions).unwrap();
        let b = board(100);
        subscribe(&session, &b, false);
        let first = {
            let session = session.clone();
            tokio::spawn(
                async move { json(session.get_events(Duration::from_secs(60), None).await) },
            )
        };
        tokio::time::sleep(Duration::from_secs(1)).await;
        let second = {
            let session = session.clone();
            tokio::spawn(
                async move { json(session.get_events(Duration::from_secs(60), None).await) },
            )
        };
        tokio::time::sleep(Duration::from_millis(1)).await;
        assert!(
            first.is_finished(),
            "the first call was answered when the second came"
        );
        assert!(first.await.unwrap().is_empty());
        place(&b, 1, 0, 1);
        let events = second.await.unwrap();
        assert_eq!(events.len(), 1);
        assert_eq!(events[0]["obj"]["seq"], 1);
    }

    #[tokio::test(start_paused = true)]
    async fn idle_sessions_expire_but_waiting_ones_do_not() {
        let sessions = Arc::new(Sessions::new(10, Duration::from_secs(120)));
        let idle = create(&sessions).unwrap();
        let polling = create(&sessions).unwrap();
        let waiter = {
            let polling = polling.clone();
            tokio::spawn(async move { polling.get_events(Duration::from_secs(90), None).await })
        };
        tokio::spawn(sessions.clone().run_expiry());
        tokio::time::sleep(Duration::from_secs(119)).await;
        assert!(sessions.get(&idle.id).is_some(), "not yet idle for 120 s");
        tokio::time::sleep(Duration::from_secs(10)).await;
        assert!(sessions.get(&idle.id).is_none(), "idle for more than 120 s");
        // The poller waited 90 s and ended at 90 s: it is idle from then on.
        assert!(sessions.get(&polling.id).is_some());
        waiter.await.unwrap();
        tokio::time::sleep(Duration::from_secs(125)).await;
        assert!(sessions.get(&polling.id).is_none());
        assert!(sessions.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn a_cursor_leaves_with_its_session_when_it_is_destroyed_or_expires() {
        let sessions = Arc::new(Sessions::new(10, Duration::from_secs(120)));
        let b = board(100);
        let total = |b: &Board| -> Option<Value> {
            b.cursors
                .due(std::time::Instant::now(), Duration::ZERO)
                .map(|obj| serde_json::from_str::<Value>(&obj).unwrap()["total"].clone())
        };
        let idle = create(&sessions).unwrap();
        let leaving = create(&sessions).unwrap();
        idle.set_presence(&b, 1, 0).unwrap();
        leaving.set_presence(&b, 2, 1).unwrap();
        assert_eq!(total(&b), Some(serde_json::json!(2)));
        assert_eq!(
            leaving.set_presence(&b, 3, 1).err().map(|e| e.code),
            Some(TOO_FAST),
            "again within 50 ms"
        );
        sessions.forget(leaving.public_id);
        assert_eq!(total(&b), Some(serde_json::json!(1)));
        assert_eq!(total(&b), None, "unchanged since: nothing to tell");
        tokio::spawn(sessions.clone().run_expiry());
        tokio::time::sleep(Duration::from_secs(130)).await;
        assert!(sessions.get(&idle.id).is_none(), "expired");
        assert_eq!(total(&b), Some(serde_json::json!(0)));
    }

    #[tokio::test(start_paused = true)]
    async fn the_number_of_sessions_is_bounded() {
        let sessions = Sessions::new(2, Duration::from_secs(120));
        create(&sessions).unwrap();
        let second = create(&sessions).unwrap();
        assert_eq!(create(&sessions).err().map(|e| e.code), Some(TOO_MANY));
        sessions.forget(second.public_id);
        create(&sessions).unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_session_that_fell_behind_its_buffer_gets_a_reset() {
        let sessions = Sessions::new(10, Duration::from_secs(120));
        let slow = create(&sessions).unwrap();
        let keeping_up = create(&sessions).unwrap();
        let b = board(3);
        subscribe(&slow, &b, false);
        subscribe(&keeping_up, &b, false);
        place(&b, 1, 0, 1);
        place(&b, 2, 1, 2);
        assert_eq!(
            json(keeping_up.get_events(Duration::ZERO, None).await).len(),
            2
        );
        place(&b, 3, 2, 3);
        place(&b, 4, 3, 4);
        place(&b, 5, 0, 5);
        // Five tiles arrived; the log keeps three: the slow session lost seq 1 and 2.
        let events = json(slow.get_events(Duration::ZERO, None).await);
        assert_eq!(events.len(), 1, "{events:?}");
        assert_eq!(events[0]["action"], "reset");
        assert_eq!(events[0]["obj"]["seq"], 5);
        let events = json(keeping_up.get_events(Duration::ZERO, None).await);
        let seqs: Vec<i64> = events
            .iter()
            .map(|e| e["obj"]["seq"].as_i64().unwrap())
            .collect();
        assert_eq!(seqs, [3, 4, 5]);
        // After the reset the slow session continues exactly.
        place(&b, 6, 1, 6);
        let events = json(slow.get_events(Duration::ZERO, None).await);
        assert_eq!(events.len(), 1);
        assert_eq!(
            (
                events[0]["obj"]["seq"].as_i64(),
                events[0]["old"]["color"].as_i64()
            ),
            (Some(6), Some(2))
        );
    }

    fn seqs(events: &[Value]) -> Vec<i64> {
        events
            .iter()
            .map(|e| e["obj"]["seq"].as_i64().expect("a tile event"))
            .collect()
    }

    /// An acking poll: its events and its cursor.
    async fn acked_poll(
        session: &Session,
        ack: Option<&PollCursor>,
        gateway: u64,
    ) -> (Vec<Value>, PollCursor) {
        let mut positions = session.ack_positions(ack, gateway);
        let events = json(
            session
                .get_events(Duration::ZERO, Some(&mut positions))
                .await,
        );
        (events, positions.cursor(session))
    }

    #[tokio::test(start_paused = true)]
    async fn an_acking_poll_answers_from_its_ack_so_a_lost_answer_comes_again() {
        let sessions = Sessions::new(10, Duration::from_secs(120));
        let session = create(&sessions).unwrap();
        let b = board(100);
        subscribe(&session, &b, false);
        place(&b, 1, 0, 1);
        place(&b, 2, 1, 2);
        let (events, first) = acked_poll(&session, None, 9).await;
        assert_eq!(seqs(&events), [1, 2]);
        place(&b, 3, 2, 3);
        // The answer was lost: the client acks what it had before (nothing yet).
        let (events, again) = acked_poll(&session, None, 9).await;
        assert_eq!(seqs(&events), [1, 2, 3]);
        // It got that one: acking it gives nothing more, nothing twice.
        assert!(acked_poll(&session, Some(&again), 9).await.0.is_empty());
        // Acking the first answer gives what came after it, once.
        let (events, _) = acked_poll(&session, Some(&first), 9).await;
        assert_eq!(seqs(&events), [3]);
        // Acking polls leave the legacy position alone.
        assert_eq!(
            seqs(&json(session.get_events(Duration::ZERO, None).await)),
            [1, 2, 3]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_cursor_from_another_gateway_resumes_by_seq() {
        let sessions = Sessions::new(10, Duration::from_secs(120));
        let session = create(&sessions).unwrap();
        let b = board(100);
        subscribe(&session, &b, true);
        place(&b, 1, 0, 1);
        let (_, cursor) = acked_poll(&session, None, 9).await;
        place(&b, 2, 1, 2);
        place(&b, 3, 2, 3);
        // The same board's mirror on another gateway has another epoch and notice count:
        // only the seq carries over.
        let mut elsewhere = cursor.clone();
        elsewhere.gateway = 8;
        for entry in elsewhere.views.values_mut() {
            if let crate::views::Portable::Board(epoch, _, notices) = &mut entry.1 {
                *epoch = 77;
                *notices = 1234;
            }
        }
        let (events, _) = acked_poll(&session, Some(&elsewhere), 9).await;
        assert_eq!(events.len(), 1, "{events:?}");
        assert_eq!(events[0]["seq"], serde_json::json!([2, 3]));
        // Written here, the same cursor with a foreign epoch is another mirror's: reset.
        let (events, _) = acked_poll(
            &session,
            Some(&PollCursor {
                gateway: 9,
                ..elsewhere
            }),
            9,
        )
        .await;
        assert_eq!(events[0]["action"], "reset");
    }

    #[tokio::test(start_paused = true)]
    async fn a_resubscribed_view_starts_where_it_was_subscribed_again() {
        let sessions = Sessions::new(10, Duration::from_secs(120));
        let session = create(&sessions).unwrap();
        let b = board(100);
        subscribe(&session, &b, false);
        let (_, before) = acked_poll(&session, None, 9).await;
        place(&b, 1, 0, 1);
        place(&b, 2, 1, 2);
        // Subscribed again: its initial state holds seq 1 and 2 already.
        subscribe(&session, &b, false);
        place(&b, 3, 2, 3);
        let (events, _) = acked_poll(&session, Some(&before), 9).await;
        assert_eq!(seqs(&events), [3]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_cursor_names_the_subscription_made_again_during_the_poll() {
        let sessions = Sessions::new(10, Duration::from_secs(120));
        let session = create(&sessions).unwrap();
        let b = board(100);
        subscribe(&session, &b, false);
        let mut positions = session.ack_positions(None, 9);
        let old_id = session.lock().subscriptions[0].sub_id;
        place(&b, 1, 0, 1);
        // The poll collects under the old subscription ...
        json(
            session
                .get_events(Duration::ZERO, Some(&mut positions))
                .await,
        );
        // ... which the client then replaces (same key) before the cursor is written.
        subscribe(&session, &b, false);
        let new_id = session.lock().subscriptions[0].sub_id;
        assert_ne!(old_id, new_id);
        let cursor = positions.cursor(&session);
        let entries: Vec<u64> = cursor.views.values().map(|e| e.0).collect();
        assert!(entries.iter().all(|id| *id != old_id), "{entries:?}");
    }

    #[test]
    fn a_copy_read_before_the_session_was_forgotten_is_refused() {
        let sessions = Sessions::new(10, Duration::from_secs(120));
        let mark = sessions.mark();
        // Another gateway changed session 77 while this one was reading it.
        sessions.forget(77);
        let stale = Session::new(new_session_id().into(), 77, 3, None, false);
        assert!(sessions.insert_read(stale, Some(mark)).unwrap().is_none());
        assert!(sessions.is_empty());
        let fresh = Session::new(new_session_id().into(), 77, 4, None, false);
        assert!(sessions
            .insert_read(fresh, Some(sessions.mark()))
            .unwrap()
            .is_some());
    }

    #[test]
    fn a_change_made_here_must_be_the_next_version() {
        let session = Session::new(new_session_id().into(), 5, 3, None, false);
        assert!(session.advance_version(4));
        assert!(!session.advance_version(6), "5 was made elsewhere");
        assert_eq!(session.version(), 4);
    }
}
