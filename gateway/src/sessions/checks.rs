//! What the `pgplace_sessions` channel says, checked before it is acted on. Any database
//! login may NOTIFY that channel, and public session ids are sequential: a `gone 17` or
//! `drop 17 <gateway>` taken at its word would end the copies of sessions that live on. So
//! the listener only notes the ids that it names (of sessions this gateway has copies of;
//! a copy of another being read at that moment is refused and read again, `registry`),
//! and one task reads their rows, many at once, one read at a time: a copy is dropped when
//! its row is gone, or, for `drop`, when the row says that another gateway holds the
//! session or changed it since this copy. A poll waits for the checks of what was heard
//! before it (`settled`): it must not answer from a copy a change elsewhere made stale. A
//! copy that answered the session's legacy polls leaves its positions for the gateway that
//! answers them next (`handover`).

use crate::check_queue::{read_until_ok, CheckQueue};
use crate::sessions::handover;
use crate::sessions::registry::Sessions;
use crate::sessions::store;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// The ids waiting to be checked, by what the channel said of them.
#[derive(Default)]
pub struct SessionChecks {
    queue: CheckQueue<Pending>,
}

#[derive(Default)]
struct Pending {
    gone: HashSet<i64>,
    taken: HashSet<i64>,
}

impl SessionChecks {
    /// `gone <public_id>`: the session was said to be destroyed or expired.
    pub fn said_gone(&self, sessions: &Sessions, public_id: i64) {
        if sessions.heard_change(public_id) {
            self.queue.note(|p| {
                p.gone.insert(public_id);
            });
        }
    }

    /// `drop <public_id> <gateway>` from another gateway: it was said to have taken it.
    pub fn said_taken(&self, sessions: &Sessions, public_id: i64) {
        if sessions.heard_change(public_id) {
            self.queue.note(|p| {
                p.taken.insert(public_id);
            });
        }
    }

    /// Checks what was noted, for as long as the gateway runs.
    pub async fn run(
        self: Arc<Self>,
        pool: deadpool_postgres::Pool,
        sessions: Arc<Sessions>,
        gateway: u64,
    ) {
        loop {
            let (pending, upto) = self.queue.next().await;
            let ids: Vec<i64> = pending.gone.union(&pending.taken).copied().collect();
            if ids.is_empty() {
                self.queue.done(upto);
                continue;
            }
            let stored = read_until_ok("sessions", || read(&pool, &ids)).await;
            for copy in act(&sessions, &stored, &ids, &pending.taken, gateway) {
                tokio::spawn(handover::give(
                    pool.clone(),
                    sessions.clone(),
                    copy,
                    gateway,
                ));
            }
            self.queue.done(upto);
        }
    }

    /// How many notes were made so far (for `settled`).
    pub fn noted(&self) -> u64 {
        self.queue.noted()
    }

    /// Until every note up to `upto` was checked and acted on: a copy that a change through
    /// another gateway made stale, heard before, is dropped by then (or is being handed
    /// over, for a held copy: `handover`).
    pub async fn settled(&self, upto: u64) {
        self.queue.settled(upto).await
    }
}

async fn read(
    pool: &deadpool_postgres::Pool,
    ids: &[i64],
) -> Result<HashMap<i64, (i64, Option<u64>)>, String> {
    let client = pool.get().await.map_err(|e| e.to_string())?;
    Ok(store::states(&client, ids)
        .await
        .map_err(|e| e.to_string())?
        .into_iter()
        .map(|(id, version, holder)| (id, (version, holder)))
        .collect())
}

/// Drops the copies of `ids` that their `stored` rows say are stale. Each is gone from
/// this gateway before this returns: a poll that waited for the check (`settled`) reads
/// the session afresh rather than answering from the stale copy. Returns the dropped
/// copies that answered the session's legacy polls: whoever answers them next goes on
/// from where their views stand (`handover::give`).
fn act(
    sessions: &Sessions,
    stored: &HashMap<i64, (i64, Option<u64>)>,
    ids: &[i64],
    taken: &HashSet<i64>,
    gateway: u64,
) -> Vec<Arc<crate::sessions::session::Session>> {
    let mut to_give = Vec::new();
    for &id in ids {
        let Some(copy) = sessions.copy(id) else {
            continue;
        };
        if !to_drop(stored, id, taken.contains(&id), copy.version(), gateway) {
            continue;
        }
        if stored.contains_key(&id) && copy.is_held() {
            sessions.giving(id);
            to_give.push(copy);
        }
        sessions.forget(id);
    }
    to_give
}

/// Whether this gateway's copy of session `id` (at `version`) is to be dropped, given its
/// stored row: gone; or, when it was said to be taken, held by another gateway (or none)
/// or changed since the copy.
fn to_drop(
    stored: &HashMap<i64, (i64, Option<u64>)>,
    id: i64,
    said_taken: bool,
    version: i64,
    gateway: u64,
) -> bool {
    match stored.get(&id) {
        None => true,
        Some((stored_version, holder)) => {
            said_taken && (*holder != Some(gateway) || *stored_version > version)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sessions::ids::new_session_id;
    use crate::sessions::session::Session;
    use std::time::Duration;

    #[test]
    fn a_stale_copy_is_gone_when_its_check_is_done_not_once_it_is_handed_on() {
        let me = 7;
        let sessions = Sessions::new(10, Duration::from_secs(60));
        let copy = |public_id, held| {
            sessions
                .insert(Session::new(
                    new_session_id().into(),
                    public_id,
                    5,
                    None,
                    held,
                ))
                .unwrap()
        };
        let (held, not_held, current) = (copy(1, true), copy(2, false), copy(3, true));
        let stored = HashMap::from([(1, (6, Some(me))), (2, (6, Some(9))), (3, (5, Some(me)))]);
        let to_give = act(
            &sessions,
            &stored,
            &[1, 2, 3],
            &HashSet::from([1, 2, 3]),
            me,
        );
        // A poll that waited for this check reads the session afresh: no stale copy is left
        // to answer it, not even one whose positions are still to be handed on.
        for (id, stale) in [(1, &held), (2, &not_held)] {
            assert!(sessions.copy(id).is_none(), "copy {id} forgotten");
            assert!(stale.is_destroyed(), "copy {id} answers nothing more");
        }
        assert!(sessions.copy(3).is_some() && !current.is_destroyed());
        // Only the copy that answered legacy polls has positions to hand on.
        assert_eq!(to_give.len(), 1);
        assert!(Arc::ptr_eq(&to_give[0], &held));
        assert!(sessions.is_giving(1) && !sessions.is_giving(2));
    }

    #[test]
    fn a_copy_is_dropped_only_for_what_its_row_says() {
        let me = 7;
        let stored = HashMap::from([(1, (5, Some(me))), (2, (5, Some(9))), (3, (6, Some(me)))]);
        // Gone: only when the row is.
        assert!(!to_drop(&stored, 1, false, 5, me), "a forged gone");
        assert!(to_drop(&stored, 4, false, 5, me), "really gone");
        // Taken: when another gateway holds it, or it changed since the copy.
        assert!(!to_drop(&stored, 1, true, 5, me), "a forged drop");
        assert!(to_drop(&stored, 2, true, 5, me), "held elsewhere");
        assert!(to_drop(&stored, 3, true, 5, me), "changed since");
        assert!(to_drop(&stored, 4, true, 5, me), "gone");
    }
}
