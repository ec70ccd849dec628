//! What every request handler shares: the settings, the pool, the mirrored boards, the list
//! views and the sessions. Its own module, so that the routes and methods need nothing of
//! how the gateway starts (`app`).

use crate::boards::Boards;
use crate::config::Config;
use crate::cors::Cors;
use crate::errors::RpcError;
use crate::limits::Limits;
use crate::sessions::checks::SessionChecks;
use crate::sessions::handover::Handovers;
use crate::sessions::registry::Sessions;
use crate::unknown::Unknown;
use crate::views::list::registry::Lists;
use deadpool_postgres::Pool;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot};

pub struct App {
    pub config: Config,
    pub pool: Pool,
    /// The replica's pool (`--replica-url`), for reads that may lag.
    pub replica: Option<Pool>,
    pub boards: Arc<Boards>,
    pub lists: Arc<Lists>,
    pub sessions: Arc<Sessions>,
    /// Legacy sessions waiting to be handed over by the gateway that held them.
    pub handovers: Arc<Handovers>,
    /// What other gateways said of sessions, checked against their rows.
    pub session_checks: Arc<SessionChecks>,
    /// Whether the LISTEN connection is up (for /readyz).
    pub listening: Arc<AtomicBool>,
    /// Names this gateway process to the others (random at start).
    pub gateway_id: u64,
    /// This gateway as a board's placer to the others (`--placer-url`).
    pub fleet: Option<Arc<crate::placer::lease::Fleet>>,
    /// Asks the listener to confirm it heard every notification committed before now.
    pub listener_sync: mpsc::UnboundedSender<oneshot::Sender<()>>,
    /// Shutting down: every answer closes its connection (`Connection: close`).
    pub closing: AtomicBool,
    /// Per-address and per-session limits.
    pub limits: Arc<Limits>,
    /// What the database just said does not exist (boards, views, sessions).
    pub unknown: Arc<Unknown>,
    /// When /readyz last asked the database, and its answer: asked at most once a second,
    /// so that hammering the route cannot take the pool's connections.
    pub database_checked: std::sync::Mutex<Option<(std::time::Instant, bool)>>,
    pub cors: Cors,
    /// Sign-in from the embedding site (`--jwt-issuer`), when configured.
    pub site_sign_in: Option<crate::jwt::SiteSignIn>,
    /// The `rpc.discover` document, made on first call.
    pub discovered: std::sync::OnceLock<bytes::Bytes>,
}

impl App {
    /// What making a view may use.
    pub fn sources(&self) -> crate::views::Sources<'_> {
        crate::views::Sources {
            boards: &self.boards,
            lists: &self.lists,
            limits: &self.limits,
            region_budget: crate::views::region::RegionBudget::of(&self.config),
        }
    }

    /// Whether any other origin may call (then answers carry CORS headers).
    pub fn cors_enabled(&self) -> bool {
        !self.config.cors_origins.trim().is_empty()
    }

    /// A connection for a read that may lag the primary: the replica's when there is one
    /// and it answers, else the primary's. Charged to the requester's database budget
    /// (`db::checkout`).
    pub async fn lagging_read_client(&self) -> Result<crate::db::Checked, RpcError> {
        let permit = crate::limits::charge_database().await?;
        if let Some(replica) = &self.replica {
            match replica.get().await {
                Ok(client) => return Ok(crate::db::Checked::new(client, permit)),
                Err(error) => tracing::warn!("replica unavailable, reading the primary: {error}"),
            }
        }
        let client = self.pool.get().await.map_err(crate::errors::from_pool)?;
        Ok(crate::db::Checked::new(client, permit))
    }
}
