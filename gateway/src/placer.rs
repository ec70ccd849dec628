//! Group commit: every placement on a board, from any session, goes through one queue.
//! While one group commits (one `place.place_many` call, one transaction), the next group
//! fills; each caller gets its own outcome, and a failed transaction fails all of its
//! callers with the error and applies nothing.
//!
//! A group commits asynchronously (`db::durable`): the board's seq lock is released
//! before the WAL flush, so the next group, of this gateway or another, commits while this
//! one waits for durability on a connection of its own; its callers are answered after.

use crate::db::{self, Outcome, PlaceItem};
use crate::errors::{from_db, from_pool, RpcError, INVALID_PARAMS, NOT_AUTHORIZED, RETRY};
use crate::metrics::OutcomeLabel;
use crate::mirror::board::Board;
use deadpool_postgres::Pool;
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot, Semaphore};

/// Groups that may wait for durability at once (each holds a pooled connection while it
/// waits): enough that a group commits during every flush, few enough to leave the pool
/// to everyone else.
const WAITING_GROUPS: usize = 4;

type Reply = oneshot::Sender<Result<Outcome, RpcError>>;

struct Request {
    item: PlaceItem,
    reply: Reply,
}

/// The sending end of a board's queue.
#[derive(Clone)]
pub struct Placer {
    queue: mpsc::UnboundedSender<Request>,
}

impl Placer {
    pub fn spawn(board: Arc<Board>, pool: Pool, max_group: usize) -> Self {
        let (queue, requests) = mpsc::unbounded_channel();
        tokio::spawn(run(board.id, requests, pool, max_group));
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
    max_group: usize,
) {
    let waiting = Arc::new(Semaphore::new(WAITING_GROUPS));
    let mut group = Vec::with_capacity(max_group);
    while requests.recv_many(&mut group, max_group).await > 0 {
        // Callers that gave up (their request was dropped) are not placed for.
        group.retain(|r| !r.reply.is_closed());
        if !group.is_empty() {
            let Ok(permit) = waiting.clone().acquire_owned().await else {
                return; // never closed
            };
            let committed = commit(board, &pool, std::mem::take(&mut group)).await;
            let pool = pool.clone();
            tokio::spawn(async move {
                committed.answer_when_durable(&pool).await;
                drop(permit);
            });
        }
        group.clear();
    }
}

/// A group's outcomes, by the ranges of callers committed together, not yet told.
struct Committed {
    ranges: Vec<(Result<Vec<Outcome>, RpcError>, Vec<Reply>)>,
    /// Some range was committed before it was durable.
    asynchronous: bool,
}

impl Committed {
    /// Answers every caller once what was committed is durable. If that cannot be known
    /// (the connection lost), the callers whose placements were made get the error: their
    /// placements may be lost, and a retry with the same key tells.
    async fn answer_when_durable(self, pool: &Pool) {
        let unknown = match self.asynchronous {
            false => None,
            true => match pool.get().await {
                Ok(client) => db::durable::wait(&client).await.err().map(|e| from_db(&e)),
                Err(e) => Some(from_pool(e)),
            },
        };
        for (outcome, replies) in self.ranges {
            let outcome = match (&unknown, outcome) {
                (Some(error), Ok(outcomes)) if outcomes.iter().any(|o| o.placed) => {
                    Err(error.clone())
                }
                (_, outcome) => outcome,
            };
            answer(outcome, replies.into_iter());
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
async fn commit(board: i64, pool: &Pool, group: Vec<Request>) -> Committed {
    let (items, mut replies): (Vec<PlaceItem>, Vec<_>) =
        group.into_iter().map(|r| (r.item, Some(r.reply))).unzip();
    let mut committed = Committed {
        ranges: Vec::new(),
        asynchronous: false,
    };
    let mut ranges = Vec::new();
    ranges.push(0..items.len());
    while let Some(range) = ranges.pop() {
        let mut outcome = place(board, pool, &items[range.clone()], &mut committed).await;
        if matches!(&outcome, Err(error) if error.code == RETRY) {
            // The board changed under the group (a tile froze while it waited, a resize):
            // once more, so that what changed fails its own items, not everyone's.
            outcome = place(board, pool, &items[range.clone()], &mut committed).await;
        }
        match outcome {
            Err(error) if one_callers_fault(&error) && range.len() > 1 => {
                let middle = range.start + range.len() / 2;
                ranges.push(middle..range.end);
                ranges.push(range.start..middle);
            }
            outcome => {
                let told = replies[range].iter_mut().filter_map(Option::take).collect();
                committed.ranges.push((outcome, told));
            }
        }
    }
    committed
}

async fn place(
    board: i64,
    pool: &Pool,
    items: &[PlaceItem],
    committed: &mut Committed,
) -> Result<Vec<Outcome>, RpcError> {
    let client = pool.get().await.map_err(from_pool)?;
    let asynchronous = db::durable::supported(&client)
        .await
        .map_err(|e| from_db(&e))?;
    // Set before the call: a connection lost during it may have committed.
    committed.asynchronous |= asynchronous;
    let outcomes = db::place_many(&client, board, items, asynchronous)
        .await
        .map_err(|e| from_db(&e))?;
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

fn answer(outcome: Result<Vec<Outcome>, RpcError>, replies: impl Iterator<Item = Reply>) {
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
