//! The boards the gateway mirrors, loaded on first use (a subscribe, a placement, a
//! request for the bits) and kept current by the listener from then on.

use crate::db;
use crate::errors::{from_db, RpcError};
use crate::mirror::board::Board;
use crate::params::BoardRef;
use crate::placer::{Groups, Placer};
use crate::unknown::{Name, Unknown};
use deadpool_postgres::Pool;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::{mpsc, OnceCell};

/// A mirrored board and the queue that group-commits its placements.
pub struct Mirrored {
    pub board: Arc<Board>,
    pub placer: Placer,
}

pub struct Boards {
    pool: Pool,
    log_capacity: u64,
    groups: Groups,
    loaded: Mutex<HashMap<i64, Arc<OnceCell<Arc<Mirrored>>>>>,
    /// Boards whose stream must be checked against the database (just loaded ones).
    catch_up: mpsc::UnboundedSender<Arc<Board>>,
    /// Board ids and names the database just said it does not have.
    unknown: Arc<Unknown>,
}

impl Boards {
    pub fn new(
        pool: Pool,
        log_capacity: u64,
        groups: Groups,
        catch_up: mpsc::UnboundedSender<Arc<Board>>,
        unknown: Arc<Unknown>,
    ) -> Self {
        Boards {
            pool,
            log_capacity,
            groups,
            loaded: Mutex::new(HashMap::new()),
            catch_up,
            unknown,
        }
    }

    /// Board `id` was created: no longer unknown, if it was a moment ago.
    pub fn created(&self, id: i64) {
        self.unknown.found(&Name::BoardId(id));
    }

    fn cells(&self) -> std::sync::MutexGuard<'_, HashMap<i64, Arc<OnceCell<Arc<Mirrored>>>>> {
        self.loaded.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The mirror of a board already loaded.
    pub fn loaded(&self, id: i64) -> Option<Arc<Mirrored>> {
        self.cells().get(&id).and_then(|cell| cell.get().cloned())
    }

    /// Every loaded mirror.
    pub fn all(&self) -> Vec<Arc<Mirrored>> {
        self.cells()
            .values()
            .filter_map(|cell| cell.get().cloned())
            .collect()
    }

    /// Forgets a board (it was deleted).
    pub fn forget(&self, id: i64) {
        self.cells().remove(&id);
    }

    /// The mirror of `board`, loading it first if needed.
    pub async fn get(&self, board: &BoardRef) -> Result<Arc<Mirrored>, RpcError> {
        let id = match board {
            BoardRef::Id(id) => *id,
            BoardRef::Name(name) => {
                // No board has a longer name: refused before the cache or a query.
                crate::names::check_board_name(name)?;
                let by_name = self
                    .all()
                    .into_iter()
                    .find(|m| !m.board.is_deleted() && m.board.settings().name == *name);
                if let Some(mirrored) = by_name {
                    return Ok(mirrored);
                }
                let missing = Name::BoardName(name.as_str().into());
                if self.unknown.is_known_missing(&missing) {
                    return Err(RpcError::unknown_board(board));
                }
                let client = db::checkout(&self.pool).await?;
                let found = db::board_id(&client, board)
                    .await
                    .map_err(|e| from_db(&e))?;
                let Some(id) = found else {
                    self.unknown.missing(missing);
                    return Err(RpcError::unknown_board(board));
                };
                id
            }
        };
        if self.loaded(id).is_none() && self.unknown.is_known_missing(&Name::BoardId(id)) {
            return Err(RpcError::unknown_board(board));
        }
        let guard = CellGuard {
            boards: self,
            id,
            cell: self.cells().entry(id).or_default().clone(),
        };
        let mut loaded_here = false;
        let mirrored = guard
            .cell
            .get_or_try_init(|| {
                loaded_here = true;
                self.load(id, board)
            })
            .await?
            .clone();
        if loaded_here {
            // Placements committed while the snapshot was read may have been notified
            // before the board was mirrored (the listener skips boards it does not find):
            // now that it can find this one, it reads them from the history.
            let _ = self.catch_up.send(mirrored.board.clone());
        }
        Ok(mirrored)
    }

    async fn load(&self, id: i64, board: &BoardRef) -> Result<Arc<Mirrored>, RpcError> {
        let client = db::checkout(&self.pool).await?;
        let Some(snapshot) = db::snapshot(&client, id).await.map_err(|e| from_db(&e))? else {
            self.unknown.missing(Name::BoardId(id));
            return Err(RpcError::unknown_board(board));
        };
        drop(client);
        let board = Arc::new(Board::new(snapshot, self.log_capacity));
        let placer = Placer::spawn(board.clone(), self.pool.clone(), self.groups.clone());
        Ok(Arc::new(Mirrored { board, placer }))
    }

    /// One board's log back to `from` (one reader at a time per board: a restart makes many
    /// sessions ask for the same stretch).
    pub async fn backfill(&self, board: &Arc<Board>, from: i64) -> Result<(), RpcError> {
        let _one_at_a_time = board.backfilling.lock().await;
        if !board.may_backfill(from) {
            return Ok(());
        }
        let (epoch, floor) = board.log_floor();
        let client = db::checkout(&self.pool).await?;
        let past = match crate::db::board_at_seq(&client, board.id, from).await {
            Ok(Some(past)) if past.seq == from => past,
            // Not in the history any more (compacted, say): those views reset.
            Ok(_) => return Ok(()),
            // Compacted (55000) or outside the history (22xxx): those views reset. Anything
            // else (a restart) fails the poll, and the client asks again with the same ack.
            Err(error)
                if error.as_db_error().is_some_and(|db| {
                    let code = db.code().code();
                    code == "55000" || code.starts_with("22")
                }) =>
            {
                tracing::info!(
                    "board {}: no board at seq {from} ({error}); those views reset",
                    board.id
                );
                return Ok(());
            }
            Err(error) => return Err(from_db(&error)),
        };
        let placements = crate::db::placements_after(&client, board.id, from, floor - from)
            .await
            .map_err(|e| from_db(&e))?;
        if !board.backfill(epoch, &past, &placements) {
            tracing::info!(
                "board {}: the history from seq {from} does not lead to the mirror; those views reset",
                board.id
            );
        }
        Ok(())
    }
}

/// Removes a board's entry when its load failed or was abandoned (a client that hung up),
/// unless another caller still waits on it: unknown ids must not pile up entries, and a
/// mirror that another caller is loading must stay findable.
struct CellGuard<'a> {
    boards: &'a Boards,
    id: i64,
    cell: Arc<OnceCell<Arc<Mirrored>>>,
}

impl Drop for CellGuard<'_> {
    fn drop(&mut self) {
        if self.cell.initialized() {
            return;
        }
        let mut cells = self.boards.cells();
        // Under the map's lock, two references (the map's and this guard's) mean nobody
        // else holds the cell: they can only get it from the map.
        let unused = cells
            .get(&self.id)
            .is_some_and(|entry| Arc::ptr_eq(entry, &self.cell) && Arc::strong_count(entry) == 2);
        if unused {
            cells.remove(&self.id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::errors::{UNAVAILABLE, UNKNOWN_BOARD};

    /// Boards over a database that is not there: any lookup that reaches it says so.
    fn nowhere(unknown: Arc<Unknown>) -> Boards {
        let pg: tokio_postgres::Config = "host=127.0.0.1 port=1 user=nobody dbname=nowhere"
            .parse()
            .unwrap();
        let (catch_up, _) = mpsc::unbounded_channel();
        let groups = Groups {
            max: 1,
            asynchronous: false,
            fleet: None,
        };
        Boards::new(db::pool(&pg, 1), 16, groups, catch_up, unknown)
    }

    #[tokio::test]
    async fn a_name_no_board_can_have_is_refused_before_the_cache_or_a_query() {
        let unknown = Arc::new(Unknown::default());
        let boards = nowhere(unknown.clone());
        for name in ["b".repeat(65), "b".repeat(1 << 20), String::new()] {
            let error = boards
                .get(&BoardRef::Name(name.clone()))
                .await
                .err()
                .unwrap();
            assert_eq!(error.code, UNKNOWN_BOARD, "{}", error.message);
            assert!(!unknown.is_known_missing(&Name::BoardName(name.into())));
        }
        // One that could be a board's is looked up (and this database is not there).
        let error = boards
            .get(&BoardRef::Name("b".repeat(64)))
            .await
            .err()
            .unwrap();
        assert_eq!(error.code, UNAVAILABLE, "{}", error.message);
    }
}
