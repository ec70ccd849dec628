//! Sessions: who is polling, as whom, and where each of their views stands.
//!
//! A session is small on purpose (a user, and per subscription a key and a cursor): the
//! events themselves live once, in the logs of the views (a board's, a list view's).

use crate::board::{Board, Cursor, Delivery, Watcher};
use crate::cursors::MIN_PRESENCE_INTERVAL;
use crate::errors::{RpcError, TOO_FAST, TOO_MANY, UNKNOWN_VIEW};
use crate::fragments::{ArrayBuilder, Fragments};
use crate::list_view::{ListCursor, ListView};
use crate::region::Region;
use crate::shared_log::LogCursor;
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

/// Room reserved for this many views' wakers (more only costs a reallocation).
const MAX_WATCHED: usize = 4;

pub struct Subscription {
    pub key: Arc<str>,
    source: Source,
}

/// What a subscription reads, and where it stands there.
enum Source {
    Board {
        board: Arc<Board>,
        compact: bool,
        /// Whether the view asked for `presence` events.
        presence: bool,
        cursor: Cursor,
        _watcher: Watcher,
    },
    List {
        view: Arc<ListView>,
        cursor: ListCursor,
    },
    Region {
        region: Arc<Region>,
        cursor: LogCursor,
        /// When the view asked for `presence`: its board, and the last notice given.
        presence: Option<(Arc<Board>, u64)>,
        _watcher: Watcher,
    },
}

/// What wakes a waiting `get_events` for one subscription.
enum Waker {
    Board(Arc<Board>),
    List(Arc<ListView>),
    Region(Arc<Region>),
    Presence(Arc<Board>),
}

impl Waker {
    fn notify(&self) -> &Notify {
        match self {
            Waker::Board(board) => &board.changed,
            Waker::List(view) => &view.changed,
            Waker::Region(region) => &region.changed,
            Waker::Presence(board) => &board.presence_changed,
        }
    }
}

impl Subscription {
    pub fn new(key: Arc<str>, board: Arc<Board>, compact: bool, cursor: Cursor) -> Self {
        let _watcher = Watcher::new(&board);
        Subscription {
            key,
            source: Source::Board {
                board,
                compact,
                presence: false,
                cursor,
                _watcher,
            },
        }
    }

    pub fn list(view: Arc<ListView>, cursor: ListCursor) -> Self {
        Subscription {
            key: view.key.clone(),
            source: Source::List { view, cursor },
        }
    }

    /// A `board_region` subscription (it counts among the board's watchers); `presence`:
    /// it also gets the board's `presence` and `cursors` events.
    pub fn region(
        board: &Arc<Board>,
        region: Arc<Region>,
        cursor: LogCursor,
        presence: bool,
    ) -> Self {
        Subscription {
            key: region.key.clone(),
            source: Source::Region {
                region,
                cursor,
                presence: presence.then(|| (board.clone(), board.notices())),
                _watcher: Watcher::new(board),
            },
        }
    }

    pub fn with_presence(mut self, asked: bool) -> Self {
        if let Source::Board { presence, .. } = &mut self.source {
            *presence = asked;
        }
        self
    }

    fn collect(&mut self, out: &mut ArrayBuilder) -> Delivery {
        match &mut self.source {
            Source::Board {
                board,
                compact,
                presence,
                cursor,
                ..
            } => board.collect(cursor, *compact, *presence, out),
            Source::List { view, cursor } => view.collect(cursor, out),
            Source::Region {
                region,
                cursor,
                presence,
                ..
            } => {
                let delivery = region.collect(cursor, out);
                if let (Delivery::Continues, Some((board, seen))) = (&delivery, presence) {
                    board.collect_presence(seen, &region.key, out);
                }
                delivery
            }
        }
    }

    fn wakers(&self, out: &mut Vec<Waker>) {
        match &self.source {
            Source::Board { board, .. } => out.push(Waker::Board(board.clone())),
            Source::List { view, .. } => out.push(Waker::List(view.clone())),
            Source::Region {
                region, presence, ..
            } => {
                out.push(Waker::Region(region.clone()));
                if let Some((board, _)) = presence {
                    out.push(Waker::Presence(board.clone()));
                }
            }
        }
    }
}

pub struct Session {
    pub id: Arc<str>,
    state: Mutex<State>,
    /// Wakes this session's waiting `get_events` (a newer one came, or it was destroyed).
    wake: Notify,
    polls: AtomicU64,
    /// Names this session's cursor to others (not its id, which is a secret).
    cursor_id: u64,
}

struct State {
    user: Option<User>,
    subscriptions: Vec<Subscription>,
    last_seen: Instant,
    waiting: usize,
    destroyed: bool,
    /// The boards this session shows its cursor on (removed with the session).
    cursors: Vec<CursorGuard>,
    last_presence: Option<Instant>,
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
    fn new(id: Arc<str>) -> Self {
        Session {
            id,
            state: Mutex::new(State {
                user: None,
                subscriptions: Vec::new(),
                last_seen: Instant::now(),
                waiting: 0,
                destroyed: false,
                cursors: Vec::new(),
                last_presence: None,
            }),
            wake: Notify::new(),
            polls: AtomicU64::new(0),
            cursor_id: random_u64(),
        }
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
        Ok(crate::cursors::public_id(self.cursor_id))
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
        state
            .subscriptions
            .retain_mut(|sub| sub.collect(&mut out) == Delivery::Continues);
        let count = out.count();
        (out.finish(), count)
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
    /// events to the newer call.
    pub async fn get_events(&self, timeout: Duration) -> Fragments {
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
        let mut state = session.lock();
        state.destroyed = true;
        state.cursors.clear();
        drop(state);
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
            let mut state = session.lock();
            let keep = state.waiting > 0 || now.duration_since(state.last_seen) <= self.idle;
            if !keep {
                // A get_events that found the session just before may be about to wait.
                state.destroyed = true;
                state.cursors.clear();
                drop(state);
                session.wake.notify_waiters();
            }
            keep
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

fn random_u64() -> u64 {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes).expect("the operating system's random source works");
    u64::from_le_bytes(bytes)
}

/// 128 random bits from the operating system, in hex: unguessable.
fn new_session_id() -> String {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).expect("the operating system's random source works");
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::board::{Settings, Snapshot};
    use pgplace_core::payload::Placement;
    use serde_json::Value;

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
        let key = if compact {
            board.compact_key.clone()
        } else {
            board.qik_key.clone()
        };
        session
            .subscribe(Subscription::new(key, board.clone(), compact, cursor), 4)
            .unwrap();
    }

    fn json(f: Fragments) -> Vec<Value> {
        serde_json::from_slice::<Vec<Value>>(&f.to_vec()).expect("a JSON array")
    }

    #[tokio::test(start_paused = true)]
    async fn get_events_waits_its_timeout_then_answers_empty() {
        let sessions = Sessions::new(10, Duration::from_secs(120));
        let session = sessions.create().unwrap();
        subscribe(&session, &board(100), false);
        let started = Instant::now();
        assert!(json(session.get_events(Duration::from_secs(30)).await).is_empty());
        assert_eq!(started.elapsed(), Duration::from_secs(30));
    }

    #[tokio::test(start_paused = true)]
    async fn a_placement_ends_the_wait_at_once() {
        let sessions = Sessions::new(10, Duration::from_secs(120));
        let session = sessions.create().unwrap();
        let b = board(100);
        subscribe(&session, &b, true);
        let waiter = {
            let session = session.clone();
            tokio::spawn(async move {
                let started = Instant::now();
                (
                    json(session.get_events(Duration::from_secs(60)).await),
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
            let more = json(session.get_events(Duration::ZERO).await);
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
        let session = sessions.create().unwrap();
        let b = board(100);
        subscribe(&session, &b, false);
        let first = {
            let session = session.clone();
            tokio::spawn(async move { json(session.get_events(Duration::from_secs(60)).await) })
        };
        tokio::time::sleep(Duration::from_secs(1)).await;
        let second = {
            let session = session.clone();
            tokio::spawn(async move { json(session.get_events(Duration::from_secs(60)).await) })
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
        let idle = sessions.create().unwrap();
        let polling = sessions.create().unwrap();
        let waiter = {
            let polling = polling.clone();
            tokio::spawn(async move { polling.get_events(Duration::from_secs(90)).await })
        };
        tokio::spawn(sessions.clone().run_expiry());
        tokio::time::sleep(Duration::from_secs(119)).await;
        assert!(sessions.get(&idle.id).is_ok(), "not yet idle for 120 s");
        tokio::time::sleep(Duration::from_secs(10)).await;
        assert!(sessions.get(&idle.id).is_err(), "idle for more than 120 s");
        // The poller waited 90 s and ended at 90 s: it is idle from then on.
        assert!(sessions.get(&polling.id).is_ok());
        waiter.await.unwrap();
        tokio::time::sleep(Duration::from_secs(125)).await;
        assert!(sessions.get(&polling.id).is_err());
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
        let idle = sessions.create().unwrap();
        let leaving = sessions.create().unwrap();
        idle.set_presence(&b, 1, 0).unwrap();
        leaving.set_presence(&b, 2, 1).unwrap();
        assert_eq!(total(&b), Some(serde_json::json!(2)));
        assert_eq!(
            leaving.set_presence(&b, 3, 1).err().map(|e| e.code),
            Some(TOO_FAST),
            "again within 50 ms"
        );
        sessions.destroy(&leaving.id).unwrap();
        assert_eq!(total(&b), Some(serde_json::json!(1)));
        assert_eq!(total(&b), None, "unchanged since: nothing to tell");
        tokio::spawn(sessions.clone().run_expiry());
        tokio::time::sleep(Duration::from_secs(130)).await;
        assert!(sessions.get(&idle.id).is_err(), "expired");
        assert_eq!(total(&b), Some(serde_json::json!(0)));
    }

    #[tokio::test(start_paused = true)]
    async fn the_number_of_sessions_is_bounded() {
        let sessions = Sessions::new(2, Duration::from_secs(120));
        sessions.create().unwrap();
        let second = sessions.create().unwrap();
        assert_eq!(sessions.create().err().map(|e| e.code), Some(TOO_MANY));
        sessions.destroy(&second.id).unwrap();
        sessions.create().unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_session_that_fell_behind_its_buffer_gets_a_reset() {
        let sessions = Sessions::new(10, Duration::from_secs(120));
        let slow = sessions.create().unwrap();
        let keeping_up = sessions.create().unwrap();
        let b = board(3);
        subscribe(&slow, &b, false);
        subscribe(&keeping_up, &b, false);
        place(&b, 1, 0, 1);
        place(&b, 2, 1, 2);
        assert_eq!(json(keeping_up.get_events(Duration::ZERO).await).len(), 2);
        place(&b, 3, 2, 3);
        place(&b, 4, 3, 4);
        place(&b, 5, 0, 5);
        // Five tiles arrived; the log keeps three: the slow session lost seq 1 and 2.
        let events = json(slow.get_events(Duration::ZERO).await);
        assert_eq!(events.len(), 1, "{events:?}");
        assert_eq!(events[0]["action"], "reset");
        assert_eq!(events[0]["obj"]["seq"], 5);
        let events = json(keeping_up.get_events(Duration::ZERO).await);
        let seqs: Vec<i64> = events
            .iter()
            .map(|e| e["obj"]["seq"].as_i64().unwrap())
            .collect();
        assert_eq!(seqs, [3, 4, 5]);
        // After the reset the slow session continues exactly.
        place(&b, 6, 1, 6);
        let events = json(slow.get_events(Duration::ZERO).await);
        assert_eq!(events.len(), 1);
        assert_eq!(
            (
                events[0]["obj"]["seq"].as_i64(),
                events[0]["old"]["color"].as_i64()
            ),
            (Some(6), Some(2))
        );
    }
}
