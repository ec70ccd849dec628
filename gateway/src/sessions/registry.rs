//! The sessions this gateway holds a copy of: found by id and public id, bounded, expired
//! when idle, forgotten when another gateway changed them.

use crate::errors::{RpcError, TOO_MANY};
use crate::sessions::session::Session;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::time::Instant;

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
    /// When each session was last forgotten (a mark of `forgotten`) while a session was
    /// being read: a copy read from the database before that is stale (see
    /// [`Sessions::mark`]). Emptied whenever no read is in flight.
    forgotten_at: HashMap<i64, u64>,
    /// Counts forgettings.
    forgotten: u64,
    /// How many reads of a session from the database are in flight (their `Mark`s).
    reading: usize,
    /// Every copy read before this mark is stale: `forgotten_at` overflowed (a flood of
    /// notifications naming sessions this gateway has no copy of) and was cleared.
    forgotten_before: u64,
    /// Sessions whose dropped copy is leaving its positions in the row (`handover::give`).
    giving: std::collections::HashSet<i64>,
}

/// How many forgettings are remembered one by one while reads are in flight; past that
/// (anyone may NOTIFY), every read in flight is refused once instead.
pub(super) const FORGOTTEN_MAX: usize = 1024;

/// Where the forgettings stood when a session was read from the database; while it lives,
/// forgettings are remembered for it.
pub struct Mark<'a> {
    at: u64,
    sessions: &'a Sessions,
}

impl Drop for Mark<'_> {
    fn drop(&mut self) {
        let mut maps = self.sessions.lock();
        maps.reading -= 1;
        if maps.reading == 0 {
            // Every mark to come is past what is remembered.
            maps.forgotten_at.clear();
        }
    }
}

impl Maps {
    /// A copy of `public_id` read before now is stale (see `Sessions::mark`).
    fn remember_forgetting(&mut self, public_id: i64) {
        self.forgotten += 1;
        if self.reading == 0 {
            return;
        }
        let count = self.forgotten;
        self.forgotten_at.insert(public_id, count);
        if self.forgotten_at.len() > FORGOTTEN_MAX {
            self.forgotten_at.clear();
            self.forgotten_before = count;
        }
    }
}

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
    pub fn mark(&self) -> Mark<'_> {
        let mut maps = self.lock();
        maps.reading += 1;
        Mark {
            at: maps.forgotten,
            sessions: self,
        }
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
        mark: Option<&Mark>,
    ) -> Result<Option<Arc<Session>>, RpcError> {
        let mut maps = self.lock();
        if let Some(mark) = mark {
            let forgotten_since = maps
                .forgotten_at
                .get(&session.public_id)
                .is_some_and(|at| *at > mark.at);
            if forgotten_since || maps.forgotten_before > mark.at {
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
    /// A dropped copy of session `public_id` starts leaving its positions in the row
    /// (`handover::give`), until `given`.
    pub fn giving(&self, public_id: i64) {
        self.lock().giving.insert(public_id);
    }

    pub fn given(&self, public_id: i64) {
        self.lock().giving.remove(&public_id);
    }

    /// Whether this gateway's dropped copy of the session is leaving its positions now.
    pub fn is_giving(&self, public_id: i64) -> bool {
        self.lock().giving.contains(&public_id)
    }

    pub fn forget(&self, public_id: i64) {
        let session = {
            let mut maps = self.lock();
            maps.remember_forgetting(public_id);
            let Some(session) = maps.by_public.remove(&public_id) else {
                return;
            };
            maps.by_id.remove(&session.id);
            session
        };
        session.end();
    }

    /// Another gateway was said to have changed session `public_id` (not yet checked):
    /// true when this gateway has a copy, to be checked against the row (`checks`). With
    /// no copy, one may be being read right now, from before the change: it is refused
    /// (`insert_read`) and read again. One lock for both, so a copy inserted meanwhile is
    /// either seen here or refused.
    pub fn heard_change(&self, public_id: i64) -> bool {
        let mut maps = self.lock();
        if maps.by_public.contains_key(&public_id) {
            return true;
        }
        maps.remember_forgetting(public_id);
        false
    }

    /// How many forgettings are remembered one by one (bounded by `FORGOTTEN_MAX`).
    #[cfg(test)]
    pub fn forgettings_kept(&self) -> usize {
        self.lock().forgotten_at.len()
    }

    /// This gateway's copy of session `public_id`.
    pub fn copy(&self, public_id: i64) -> Option<Arc<Session>> {
        self.lock().by_public.get(&public_id).cloned()
    }

    /// Every copy: (public id, version, held here).
    pub fn copies(&self) -> Vec<(i64, i64, bool)> {
        self.lock()
            .by_public
            .values()
            .map(|s| (s.public_id, s.version(), s.is_held()))
            .collect()
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
