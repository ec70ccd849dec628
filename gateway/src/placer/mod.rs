//! Group commit: every placement on a board, from any session, goes through one queue.
//! While one group commits (one `place.place_many` call, one transaction), the next group
//! fills; each caller gets its own outcome, and a failed transaction fails all of its
//! callers with the error and applies nothing. With `--commit asynchronous` a group
//! commits before it is durable and is answered once it is (`db::place_many`): the board's
//! seq lock is free for other gateways' groups during its flush. This gateway's next group
//! still starts after that flush: started during it, groups got smaller, which cost more
//! than it saved where the database's CPU is the limit (tests/bench/README.md,
//! Asynchronous commits).
//!
//! With `--placer-url`, one gateway groups each board's placements (`lease.rs`: the
//! board's lease in the database says which), and the others send it theirs
//! (`forward.rs`, in the shape of `wire.rs`): each group commit costs the database about
//! as much whatever its size, so two gateways' half-size groups cost it twice as much as
//! one gateway's. The placements forwarded here are placed here, never sent on.

pub mod forward;
pub mod lease;
pub mod wire;

use crate::db::{self, Outcome, PlaceItem};
use crate::errors::{
    from_db, from_pool, RpcError, INVALID_PARAMS, NOT_AUTHORIZED, RETRY, UNAVAILABLE,
};
use crate::metrics::OutcomeLabel;
use crate::mirror::board::Board;
use deadpool_postgres::Pool;
use forward::Failure;
use lease::{Fleet, Route};
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot, Semaphore};

/// How a board's placements are grouped and committed.
#[derive(Clone)]
pub struct Groups {
    /// Most placements in one group (`--max-group`).
    pub max: usize,
    /// Committed before durable, answered once durable (`--commit asynchronous`).
    pub asynchronous: bool,
    /// This gateway among the placers of a fleet (`--placer-url`), or None: it places
    /// everything it takes itself.
    pub fleet: Option<Arc<Fleet>>,
}

struct Request {
    item: PlaceItem,
    /// Forwarded here by another gateway: placed here whoever holds the lease.
    forwarded: bool,
    reply: oneshot::Sender<Result<Outcome, RpcError>>,
}

/// The sending end of a board's queue.
#[derive(Clone)]
pub struct Placer {
    queue: mpsc::UnboundedSender<Request>,
    /// With `--placer-url`: the board's lease, claimed while placements come.
    lease: Option<Arc<lease::Keeper>>,
}

impl Placer {
    pub fn spawn(board: Arc<Board>, pool: Pool, groups: Groups) -> Self {
        let (queue, requests) = mpsc::unbounded_channel();
        let route = Arc::new(Route::default());
        let lease = groups
            .fleet
            .as_ref()
            .map(|fleet| lease::Keeper::new(board.id, pool.clone(), fleet.clone(), &route));
        tokio::spawn(run(board.id, requests, pool, groups, route));
        Placer { queue, lease }
    }

    /// Places one tile, through the board's placer; resolves when its group has committed
    /// (or failed).
    pub async fn place(&self, item: PlaceItem) -> Result<Outcome, RpcError> {
        self.queued(item, false).await
    }

    /// Places one tile that another gateway forwarded, in this gateway's own groups.
    pub async fn place_here(&self, item: PlaceItem) -> Result<Outcome, RpcError> {
        self.queued(item, true).await
    }

    async fn queued(&self, item: PlaceItem, forwarded: bool) -> Result<Outcome, RpcError> {
        if let Some(lease) = &self.lease {
            lease.placing();
        }
        let (reply, outcome) = oneshot::channel();
        self.queue
            .send(Request {
                item,
                forwarded,
                reply,
            })
            .map_err(|_| RpcError::unavailable())?;
        outcome.await.map_err(|_| RpcError::internal())?
    }
}

/// How many groups one gateway may have on their way to a board's placer at once: a group
/// is sent as soon as the one before it is under way (not answered), so that its
/// placements join the placer's next group instead of waiting a round trip more.
const FORWARDS_IN_FLIGHT: usize = 4;

async fn run(
    board: i64,
    mut requests: mpsc::UnboundedReceiver<Request>,
    pool: Pool,
    groups: Groups,
    route: Arc<Route>,
) {
    let mut group = Vec::with_capacity(groups.max);
    let forwards = Arc::new(Semaphore::new(FORWARDS_IN_FLIGHT));
    while requests.recv_many(&mut group, groups.max).await > 0 {
        // Callers that gave up (their request was dropped) are not placed for.
        group.retain(|r| !r.reply.is_closed());
        let mut here = std::mem::take(&mut group);
        if let (Some(fleet), Some(_)) = (&groups.fleet, route.remote()) {
            let (forwarded, ours): (Vec<_>, Vec<_>) = here.into_iter().partition(|r| r.forwarded);
            here = forwarded;
            if !ours.is_empty() {
                let permit = forwards
                    .clone()
                    .acquire_owned()
                    .await
                    .expect("never closed");
                // The lease may have moved while the permit was awaited (a placer that
                // stopped answering holds them all).
                match route.remote() {
                    Some(remote) => {
                        let sent = Sent {
                            board,
                            fleet: fleet.clone(),
                            remote,
                            route: route.clone(),
                            pool: pool.clone(),
                            asynchronous: groups.asynchronous,
                        };
                        tokio::spawn(async move {
                            sent.forward(ours).await;
                            drop(permit);
                        });
                    }
                    None => here.extend(ours),
                }
            }
        }
        if !here.is_empty() {
            commit(board, &pool, groups.asynchronous, here).await;
        }
        group.clear();
    }
}

/// A group on its way to the board's placer at another gateway.
struct Sent {
    board: i64,
    fleet: Arc<Fleet>,
    remote: lease::Remote,
    route: Arc<Route>,
    pool: Pool,
    asynchronous: bool,
}

impl Sent {
    async fn forward(self, group: Vec<Request>) {
        let board = self.board;
        let (items, replies): (Vec<PlaceItem>, Vec<_>) =
            group.into_iter().map(|r| (r.item, r.reply)).unzip();
        match self.fleet.forwarder.send(&self.remote, board, &items).await {
            Ok(outcomes) => {
                crate::metrics::metrics()
                    .placements_forwarded
                    .inc_by(items.len() as u64);
                for (reply, outcome) in replies.into_iter().zip(outcomes) {
                    let _ = reply.send(outcome);
                }
            }
            // Nothing of it was placed there: placed here instead, and so are the next
            // groups until the lease says otherwise.
            Err(Failure::NotSent(why)) => {
                tracing::warn!("board {board}: {why}; placing here");
                self.route.here();
                let group = items
                    .into_iter()
                    .zip(replies)
                    .map(|(item, reply)| Request {
                        item,
                        forwarded: false,
                        reply,
                    })
                    .collect();
                commit(board, &self.pool, self.asynchronous, group).await;
            }
            Err(Failure::Unanswered(why)) => {
                tracing::warn!("board {board}: {why}");
                self.route.here();
                let error = RpcError::new(
                    UNAVAILABLE,
                    "the gateway that places on this board did not answer: the placement \
                     may or may not have been made; retry with the same key",
                );
                for reply in replies {
                    let _ = reply.send(Err(error.clone()));
                }
            }
        }
    }
}

/// Whether a group failed because of one caller's placement (not the board or the
/// database): then the others deserve a try without it.
fn one_callers_fault(error: &RpcError) -> bool {
    matches!(error.code, INVALID_PARAMS | NOT_AUTHORIZED)
}

/// Commits a group. When it fails through one caller's fault, its halves are committed
/// separately, and so on down: the culprits fail alone, the others are placed, and a bad
/// item costs about log2(group) extra transactions, not one per item.
async fn commit(board: i64, pool: &Pool, asynchronous: bool, group: Vec<Request>) {
    let (items, mut replies): (Vec<PlaceItem>, Vec<_>) =
        group.into_iter().map(|r| (r.item, Some(r.reply))).unzip();
    let mut ranges = Vec::new();
    ranges.push(0..items.len());
    while let Some(range) = ranges.pop() {
        let mut outcome = place(board, pool, asynchronous, &items[range.clone()]).await;
        if matches!(&outcome, Err(error) if error.code == RETRY) {
            // The board changed under the group (a tile froze while it waited, a resize):
            // once more, so that what changed fails its own items, not everyone's.
            outcome = place(board, pool, asynchronous, &items[range.clone()]).await;
        }
        match outcome {
            Err(error) if one_callers_fault(&error) && range.len() > 1 => {
                let middle = range.start + range.len() / 2;
                ranges.push(middle..range.end);
                ranges.push(range.start..middle);
            }
            outcome => answer(outcome, replies[range].iter_mut().filter_map(Option::take)),
        }
    }
}

async fn place(
    board: i64,
    pool: &Pool,
    asynchronous: bool,
    items: &[PlaceItem],
) -> Result<Vec<Outcome>, RpcError> {
    let outcomes = match pool.get().await {
        Ok(client) => db::place_many(&client, board, items, asynchronous)
            .await
            .map_err(|e| from_db(&e)),
        Err(e) => Err(from_pool(e)),
    }?;
    if outcomes.len() == items.len() {
        Ok(outcomes)
    } else {
        tracing::error!(
            "place_many returned {} outcomes for {} placements",
            outcomes.len(),
            items.len()
        );
        Err(RpcError::internal())
    }
}

fn answer(
    outcome: Result<Vec<Outcome>, RpcError>,
    replies: impl Iterator<Item = oneshot::Sender<Result<Outcome, RpcError>>>,
) {
    let metrics = crate::metrics::metrics();
    if let Ok(outcomes) = &outcome {
        metrics.placement_group_size.observe(outcomes.len() as f64);
        let placed = outcomes.iter().filter(|o| o.placed).count() as u64;
        let count = |outcome| metrics.placements.get_or_create(&OutcomeLabel { outcome });
        count("placed").inc_by(placed);
        count("refused").inc_by(outcomes.len() as u64 - placed);
    }
    match outcome {
        Ok(outcomes) => {
            for (reply, outcome) in replies.zip(outcomes) {
                let _ = reply.send(Ok(outcome));
            }
        }
        Err(error) => {
            let mut failed = 0;
            for reply in replies {
                failed += 1;
                let _ = reply.send(Err(error.clone()));
            }
            metrics
                .placements
                .get_or_create(&OutcomeLabel { outcome: "failed" })
                .inc_by(failed);
        }
    }
}
