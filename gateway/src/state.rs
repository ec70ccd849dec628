//! What every request handler shares: the settings, the pool, the mirrored boards, the list
//! views and the sessions. Its own module, so that the routes and methods need nothing of
//! how the gateway starts (`app`).

use crate::boards::Boards;
use crate::config::Config;
use crate::lists::Lists;
use crate::sessions::Sessions;
use deadpool_postgres::Pool;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot};

pub struct App {
    pub config: Config,
    pub pool: Pool,
    pub boards: Arc<Boards>,
    pub lists: Arc<Lists>,
    pub sessions: Arc<Sessions>,
    /// Whether the LISTEN connection is up (for /healthz).
    pub listening: Arc<AtomicBool>,
    /// Names this gateway process to the others (random at start).
    pub gateway_id: u64,
    /// Asks the listener to confirm it heard every notification committed before now.
    pub listener_sync: mpsc::UnboundedSender<oneshot::Sender<()>>,
}
