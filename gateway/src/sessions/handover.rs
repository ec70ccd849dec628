//! A legacy session moving to another gateway: the one that answered its polls before
//! hands over where its views stand, so the new one goes on from there instead of giving
//! every view a `reset` (for a board view, the whole board).
//!
//! 1. The new holder takes the session (`store::move_to`: the others hear `drop`) and
//!    learns which gateway answered before.
//! 2. That gateway, once the row confirms the move (`checks`), stops answering from its
//!    copy, gives its last answer a moment to be acknowledged (a lost one goes back, as on
//!    one gateway: `legacy`), and leaves its positions in the row for the holder
//!    (`store::hand_over`, which says `handed`). It does the same when its copy is dropped
//!    because another gateway changed the session (a subscribe there): then the positions
//!    wait in the row for whoever moves the session next.
//! 3. The new holder takes them (`store::take_handover`) and answers from there
//!    (`rpc::session_access`). When nothing comes within [`HANDOVER_WAIT`] (the other
//!    gateway is gone), its views start with a `reset`, as before.
//!
//! The positions travel as a poll cursor, the form an acking client carries: a board
//! view's seq means the same on every gateway; positions in a gateway's own logs (list
//! views, regions) do not, and those views start with a `reset`.

use crate::lock::lock;
use crate::sessions::acked::AckPositions;
use crate::sessions::poll_cursor::{self, PollCursor};
use crate::sessions::registry::Sessions;
use crate::sessions::session::Session;
use crate::sessions::store;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;

/// How long a gateway that took a session waits for the previous holder's positions. A
/// hand-over takes milliseconds, but its four round trips queue behind everything else on
/// both gateways' pools: with 300 sessions starting at once on 2 cores, 1 s was sometimes
/// too short (a `reset` for a live holder). Only a holder that died costs the full wait.
pub const HANDOVER_WAIT: Duration = Duration::from_secs(3);

/// The sessions this gateway waits to be handed, each woken by `handed`.
#[derive(Default)]
pub struct Handovers {
    waiting: Mutex<HashMap<i64, Arc<Notify>>>,
}

impl Handovers {
    /// `handed <public_id> <this gateway>` was heard. Only a hint: the row is read.
    pub fn heard(&self, public_id: i64) {
        if let Some(notify) = lock(&self.waiting).get(&public_id) {
            notify.notify_one();
        }
    }

    /// Waits for session `public_id` from now on (before it is taken, so that no `handed`
    /// is missed), until the guard drops.
    pub fn wait_for(&self, public_id: i64) -> Waiter<'_> {
        let notify = lock(&self.waiting)
            .entry(public_id)
            .or_insert_with(|| Arc::new(Notify::new()))
            .clone();
        Waiter {
            handovers: self,
            public_id,
            notify,
        }
    }
}

pub struct Waiter<'a> {
    handovers: &'a Handovers,
    public_id: i64,
    notify: Arc<Notify>,
}

impl Waiter<'_> {
    /// Until `handed` is heard for the session (at once when it was heard meanwhile).
    pub async fn heard(&self) {
        self.notify.notified().await
    }
}

impl Drop for Waiter<'_> {
    fn drop(&mut self) {
        lock(&self.handovers.waiting).remove(&self.public_id);
    }
}

/// This gateway's copy answered the session's legacy polls, and was dropped (another
/// gateway took the session, or changed it; forgotten already, so nothing answers from it
/// any more): its positions are left for the gateway that holds the session now — which
/// may be this one again, its next poll having read the session afresh meanwhile
/// (`Sessions::is_giving` tells it to wait for these positions).
pub async fn give(
    pool: deadpool_postgres::Pool,
    sessions: Arc<Sessions>,
    session: Arc<Session>,
    gateway: u64,
) {
    session.await_earlier_answer().await;
    let positions = session.legacy_positions(gateway);
    let result = match pool.get().await {
        Ok(client) => store::hand_over(&client, &session.id, gateway, &positions)
            .await
            .map_err(|e| e.to_string()),
        Err(error) => Err(error.to_string()),
    };
    sessions.given(session.public_id);
    if let Err(error) = result {
        tracing::warn!(
            "session {}: could not leave its positions ({error}); its legacy views will start over",
            session.public_id
        );
    }
}

impl Session {
    /// Where this copy's legacy views stand, settled, as a cursor (a view owed a `reset`
    /// here is owed one on the next holder too).
    fn legacy_positions(&self, gateway: u64) -> PollCursor {
        let mut state = self.lock();
        // An answer not acknowledged by now goes back: the next holder gives its events.
        let _ = self.settle_earlier_answer(&mut state, None);
        let views: BTreeMap<String, poll_cursor::Entry> = state
            .subscriptions
            .iter()
            .map(|sub| {
                let entry = poll_cursor::Entry(sub.sub_id, sub.local.portable());
                (sub.key.to_string(), entry)
            })
            .collect();
        PollCursor {
            session: self.public_id,
            gateway,
            views,
            version: self.version(),
        }
    }
}

impl Session {
    /// Whether a view of this copy has no position to go on from: its next answer is a
    /// `reset` (a copy read from the database and not handed positions).
    pub fn owes_reset(&self) -> bool {
        self.lock()
            .subscriptions
            .iter()
            .any(|sub| sub.local == sub.view.reset_position())
    }

    /// The previous holder's positions (read into `positions` by `ack_positions`) become
    /// this copy's legacy ones. A view they do not name was made after the previous
    /// holder read the session, and has not been polled since: the client stands where it
    /// began (the state `subscribe` answered with).
    pub fn resume_legacy(&self, positions: &AckPositions, handed: &PollCursor) {
        let mut state = self.lock();
        state.unconfirmed = None;
        for sub in &mut state.subscriptions {
            let named = handed
                .views
                .get(&*sub.key)
                .is_some_and(|entry| entry.0 == sub.sub_id);
            sub.local = match positions.positions.get(&sub.sub_id) {
                Some((_, position)) if named => *position,
                _ => sub.initial,
            };
        }
    }
}
