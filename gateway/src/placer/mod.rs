//! Group commit: every placement on a board, from any session, goes through one queue.
//! While one group commits (one `place.place_many` call, one transaction), the next group
//! fills; each caller gets its own outcome, and a failed transaction fails all of its
//! callers with the error and applies nothing. With `--commit asynchronous` a group
//! commits before it is durable and is answered once it is (`db::place_many`): the board's
//! seq lock is free for other gateways' groups during its flush. This gateway's next group
//! still starts after that flush: started during it, groups got smaller, which cost more
//! than it saved where the database's CPU is the limit (tests/bench/README.md,
//! Asynchronous commits).

use crate::db::{self, Outcome, PlaceItem};
use crate::errors::{from_db, from_pool, RpcError, INVALID_PARAMS, NOT_AUTHORIZED, RETRY};
use crate::metrics::OutcomeLabel;
use crate::mirror::board::Board;
use deadpool_postgres::Pool;
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot};

/// How a board's placements are grouped and committed.
#[derive(Clone, Copy)]
pub struct Groups {
    /// Most placements in one group (`--max-group`).
    pub max: usize,
    /// Committed before durable, answered once durable (`--commit asynchronous`).
    pub asynchronous: bool,
}

struct Request {
    item: PlaceItem,
    reply: oneshot::Sender<Result<Outcome, RpcError>>,
}

/// The sending end of a board's queue.
#[derive(Clone)]
pub struct Placer {
    queue: mpsc::UnboundedSender<Request>,
}

impl Placer {
    pub fn spawn(board: Arc<Board>, pool: Pool, groups: Groups) -> Self {
        let (queue, requests) = mpsc::unbounded_channel();
        tokio::spawn(run(board.id, requests, pool, groups));
        Placer { queue }
    }

    /// Places one tile; resolves when its group has committed (or failed).
    pub async fn place(&self, item: PlaceItem) -> Result<Outcome, RpcError> {
        let (reply, outcome) = oneshot::channel();
        self.queue
            .send(Request { item, reply })
            .map_err(|_| RpcError::unavailable())?;
        outcome.await.map_err(|_| RpcError::internal())?
    }
}

async fn run(
    board: i64,
    mut requests: mpsc::UnboundedReceiver<Request>,
    pool: Pool,
    groups: Groups,
) {
    let mut group = Vec::with_capacity(groups.max);
    while requests.recv_many(&mut group, groups.max).await > 0 {
        // Callers that gave up (their request was dropped) are not placed for.
        group.retain(|r| !r.reply.is_closed());
        if !group.is_empty() {
            commit(
                board,
                &pool,
                groups.asynchronous,
                std::mem::take(&mut group),
            )
            .await;
        }
        group.clear();
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
