//! Whose placer a board's placements go through: this gateway claims the board's lease
//! (`place.claim_placer`) every second while placements on it come through here, gives it
//! up after a minute without one, and routes its placements by the answer: to its own
//! group commit when it holds the lease, else to the holder's address. A lease that cannot
//! be read (the database away, a schema before 0.8.12) routes here: every gateway may
//! place, and the database orders what commits.

use super::forward::Forwarder;
use crate::db;
use deadpool_postgres::Pool;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

/// How long a claim holds the lease: a placer that stops renewing (killed, paused, cut
/// off from the database) is replaced this long after its last renewal.
pub const LEASE: Duration = Duration::from_secs(3);
/// How often a gateway renews its lease, or asks again who holds it.
pub const RENEW: Duration = Duration::from_secs(1);

/// This gateway as a placer to the others (`--placer-url`).
pub struct Fleet {
    pub gateway: u64,
    /// Where the other gateways reach this one.
    pub url: String,
    /// What this gateway accepts forwarded placements by (random, per process).
    pub token: String,
    pub forwarder: Forwarder,
    /// The database cannot take claims (no `place.claim_placer`: a schema before 0.8.12, or
    /// a role without it): every board places here until the gateway restarts, rather than
    /// failing a claim a second per board, each one an error in the server's log.
    unsupported: AtomicBool,
    /// Shutting down: no more claims; the leases held were given up.
    closing: AtomicBool,
    /// The boards whose lease this gateway claims now (it may hold it or not), with how
    /// many keepers claim it (one, and the next for a moment as one hands over).
    claimed: Mutex<HashMap<i64, usize>>,
}

impl Fleet {
    /// `url` as `Config::placer_url` checked it; `token` unguessable (a session id's kind).
    pub fn new(gateway: u64, url: String, token: String) -> Self {
        Fleet {
            gateway,
            url,
            token,
            forwarder: Forwarder::default(),
            unsupported: AtomicBool::new(false),
            closing: AtomicBool::new(false),
            claimed: Mutex::default(),
        }
    }

    /// Whether this gateway still claims leases (see `unsupported`, `closing`).
    pub fn claims(&self) -> bool {
        !self.unsupported.load(Ordering::Relaxed) && !self.closing.load(Ordering::Acquire)
    }

    fn claimed(&self) -> std::sync::MutexGuard<'_, HashMap<i64, usize>> {
        self.claimed.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn closing(&self) -> bool {
        self.closing.load(Ordering::Acquire)
    }

    /// Stops claiming and gives up every lease held (a graceful shutdown), so that
    /// another gateway's next claim (within a second) takes each board, not one after the
    /// lease runs out. (A claim on its way now is given up by its keeper when it returns.) Forwards
    /// still on their way are placed here or by their senders: the lease only ever decides
    /// where placements are grouped.
    pub async fn give_up(&self, pool: &Pool) {
        self.closing.store(true, Ordering::Release);
        let boards: Vec<i64> = self.claimed().keys().copied().collect();
        if boards.is_empty() {
            return;
        }
        match pool.get().await {
            Ok(client) => {
                for board in boards {
                    if let Err(e) = db::placers::release(&client, board, self.gateway).await {
                        tracing::warn!(
                            "board {board}'s placer lease not given up: {}",
                            db::with_causes(&e)
                        );
                    }
                }
            }
            Err(e) => tracing::warn!("placer leases not given up: {e}"),
        }
    }
}

/// Whether a failed claim will fail the same way until the schema or the role's grants
/// change, which a running gateway does not look for again.
fn never_succeeds(error: &tokio_postgres::Error) -> bool {
    use tokio_postgres::error::SqlState;
    matches!(
        error.code(),
        Some(&SqlState::UNDEFINED_FUNCTION) | Some(&SqlState::INSUFFICIENT_PRIVILEGE)
    )
}

/// The placer of another gateway.
#[derive(Clone)]
pub struct Remote {
    pub address: Arc<str>,
    pub token: Arc<str>,
}

/// Where a board's placements go now: `None` here.
#[derive(Default)]
pub struct Route(Mutex<Option<Remote>>);

impl Route {
    pub fn remote(&self) -> Option<Remote> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Until the next claim says otherwise, placements go here (the holder did not answer).
    pub fn here(&self) {
        self.set(None);
    }

    fn set(&self, remote: Option<Remote>) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = remote;
    }
}

/// How long a board may go without a placement through this gateway before it gives the
/// board's lease up and stops claiming it (a board merely viewed here claims nothing).
pub const IDLE: Duration = Duration::from_secs(60);

/// Claims a board's lease while placements come through this gateway.
pub struct Keeper {
    board: i64,
    pool: Pool,
    fleet: Arc<Fleet>,
    route: Weak<Route>,
    started: Instant,
    /// Milliseconds after `started` of the last placement.
    last_placement: AtomicU64,
    /// A task claims the lease now.
    claiming: AtomicBool,
}

impl Keeper {
    pub fn new(board: i64, pool: Pool, fleet: Arc<Fleet>, route: &Arc<Route>) -> Arc<Self> {
        Arc::new(Keeper {
            board,
            pool,
            fleet,
            route: Arc::downgrade(route),
            started: Instant::now(),
            last_placement: AtomicU64::new(0),
            claiming: AtomicBool::new(false),
        })
    }

    /// A placement is on its way: the lease is claimed from now on, if it was not.
    pub fn placing(self: &Arc<Self>) {
        let now = self.started.elapsed().as_millis() as u64;
        self.last_placement.store(now, Ordering::Relaxed);
        if self.fleet.claims() && !self.claiming.swap(true, Ordering::AcqRel) {
            tokio::spawn(self.clone().keep());
        }
    }

    fn idle(&self) -> bool {
        let last = Duration::from_millis(self.last_placement.load(Ordering::Relaxed));
        self.started.elapsed().saturating_sub(last) > IDLE
    }

    /// Claims the lease every [`RENEW`] until the board has been idle here for [`IDLE`]
    /// (or its placer ended), then gives it up.
    async fn keep(self: Arc<Self>) {
        let (board, fleet) = (self.board, &self.fleet);
        let mut failing = false;
        let lease_ms = LEASE.as_millis() as i32;
        *fleet.claimed().entry(board).or_default() += 1;
        while let Some(live) = self.route.upgrade() {
            if !fleet.claims() {
                break;
            }
            let claimed = match self.pool.get().await {
                Ok(client) => db::placers::claim(
                    &client,
                    board,
                    fleet.gateway,
                    &fleet.url,
                    &fleet.token,
                    lease_ms,
                )
                .await
                .map_err(|e| {
                    if never_succeeds(&e) {
                        fleet.unsupported.store(true, Ordering::Relaxed);
                        format!(
                            "{} (--placer-url needs pgplace 0.8.12 and a role with the player's rights: \
                             ALTER EXTENSION pgplace UPDATE or GRANT, then restart the gateway); \
                             every board places here until then",
                            db::with_causes(&e)
                        )
                    } else {
                        db::with_causes(&e)
                    }
                }),
                Err(e) => Err(e.to_string()),
            };
            match claimed {
                Ok(Some(holder)) if holder.gateway != fleet.gateway => {
                    live.set(Some(Remote {
                        address: Arc::from(holder.address),
                        token: Arc::from(holder.token),
                    }));
                    failing = false;
                }
                Ok(_) => {
                    live.here();
                    failing = false;
                }
                Err(error) => {
                    live.here();
                    if !std::mem::replace(&mut failing, true) {
                        tracing::warn!("board {board}'s placer lease: {error}; placing here");
                    }
                    if !fleet.claims() {
                        break;
                    }
                }
            }
            drop(live);
            if fleet.closing() {
                break;
            }
            tokio::time::sleep(RENEW).await;
            if self.idle() {
                self.claiming.store(false, Ordering::Release);
                // A placement that came meanwhile saw a claimer and started none: go on.
                if self.idle() || self.claiming.swap(true, Ordering::AcqRel) {
                    break;
                }
            }
        }
        if let Some(route) = self.route.upgrade() {
            route.here();
        }
        {
            let mut claimed = fleet.claimed();
            if let Some(keepers) = claimed.get_mut(&board) {
                *keepers -= 1;
                if *keepers == 0 {
                    claimed.remove(&board);
                }
            }
        }
        // Unless a new claimer took over: the next claim by another gateway takes it at once.
        let handed_on = self.claiming.load(Ordering::Acquire) && !fleet.closing();
        if !handed_on && !fleet.unsupported.load(Ordering::Relaxed) {
            if let Ok(client) = self.pool.get().await {
                let _ = db::placers::release(&client, board, fleet.gateway).await;
            }
        }
    }
}
