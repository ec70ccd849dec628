//! The one LISTEN connection of the gateway. A notification only wakes it: any database
//! login may send one on any channel, so what a board's clients get is never what a
//! payload says. A `tiles` notification newer than a mirror makes the listener read the
//! placements after the mirror's seq, up to the seq it names, from `place.placements`; a board said to be deleted
//! is looked up before its clients are told; a session said to be gone or taken by another
//! gateway is compared with its row before its copy is dropped (`SessionChecks`). A forged
//! notification costs one read and changes nothing a client sees. The same reads cover
//! what the stream never says (the time the connection was down, a board loaded after its
//! notifications went by), so every mirror stays exact.
//!
//! For list views, a `view` notification is checked against `place.views` (`ViewChecks`),
//! and a forged position costs a view one read (`ListView::begin_read`); not yet so: a
//! `changes` payload's changed rows decide which views read again.

use crate::boards::Boards;
use crate::db;
use crate::mirror::board::{Board, Discontinuity};
use crate::sessions::checks::SessionChecks;
use crate::sessions::handover::Handovers;
use crate::sessions::registry::Sessions;
use crate::sessions::store::{self, Message};
use crate::views::list::registry::Lists;
use futures_util::StreamExt;
use pgplace_core::payload::{
    BoardChange, BoardPayload, ChangesPayload, Payload, ViewPayload, CHANNEL,
};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use tokio_postgres::{AsyncMessage, Notification};

/// How many placements one catch-up query reads at a time.
const CATCH_UP_PAGE: i64 = 10_000;

pub struct Listener {
    pub config: tokio_postgres::Config,
    /// TLS as the database URL asked for (the pool's too).
    pub tls: db::Tls,
    pub pool: deadpool_postgres::Pool,
    pub boards: Arc<Boards>,
    pub lists: Arc<Lists>,
    /// Whether LISTEN is active (for /healthz).
    pub up: Arc<AtomicBool>,
    pub catch_up: mpsc::UnboundedReceiver<Arc<Board>>,
    /// A board more than this many placements behind is reloaded rather than replayed.
    pub replay_limit: u64,
    /// This gateway's copies of sessions, and its name among the gateways.
    pub sessions: Arc<Sessions>,
    pub gateway_id: u64,
    /// Legacy sessions this gateway waits to be handed (woken by `handed`).
    pub handovers: Arc<Handovers>,
    /// Requests to confirm that every notification committed before them was applied.
    pub sync: mpsc::UnboundedReceiver<oneshot::Sender<()>>,
    /// What `pgplace_sessions` said, to be checked before a copy is dropped.
    pub session_checks: Arc<SessionChecks>,
}

/// How long `reconcile_sessions` waits before it asks again about copies that looked stale.
const RECONCILE_AGAIN_AFTER: Duration = Duration::from_millis(200);

impl Listener {
    pub async fn run(mut self) {
        tokio::spawn(self.session_checks.clone().run(
            self.pool.clone(),
            self.sessions.clone(),
            self.gateway_id,
        ));
        let mut backoff = Duration::from_millis(100);
        let mut first = true;
        loop {
            if !std::mem::take(&mut first) {
                crate::metrics::metrics().listen_reconnects.inc();
            }
            match self.session().await {
                Ok(()) => backoff = Duration::from_millis(100),
                Err(error) => tracing::warn!("LISTEN connection: {}", db::with_causes(&error)),
            }
            self.up.store(false, Ordering::SeqCst);
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_secs(5));
        }
    }

    /// One connection's life: LISTEN, catch every mirror up, then follow the stream.
    async fn session(&mut self) -> Result<(), tokio_postgres::Error> {
        let mut config = self.config.clone();
        // Told apart from the pool's connections (a DBA's pg_stat_activity, the tests).
        let name = format!(
            "{} (listen)",
            config.get_application_name().unwrap_or("pgplace-gateway")
        );
        config.application_name(&name);
        let (client, mut messages) = self.tls.connect(&config).await?;
        let (tx, mut notifications) = mpsc::unbounded_channel();
        let driver = tokio::spawn(async move {
            while let Some(message) = messages.next().await {
                match message {
                    Ok(AsyncMessage::Notification(n)) => {
                        if tx.send(n).is_err() {
                            break;
                        }
                    }
                    Ok(_) => {}
                    Err(error) => {
                        tracing::warn!("LISTEN connection lost: {error}");
                        break;
                    }
                }
            }
        });
        client
            .batch_execute(&format!("LISTEN {CHANNEL}; LISTEN {}", store::CHANNEL))
            .await?;
        // What other gateways said about sessions meanwhile was not heard: the copies that
        // no longer match the database are read from it again when next used.
        self.reconcile_sessions().await?;
        // Placements committed before LISTEN took effect are not notified to us: read them.
        for mirrored in self.boards.all() {
            self.catch_up(&mirrored.board).await?;
        }
        // List views: a view dropped or redefined meanwhile was not heard of, so every one
        // reads again.
        self.lists.all_stale();
        self.up.store(true, Ordering::SeqCst);
        tracing::info!("listening on channel {CHANNEL}");
        loop {
            tokio::select! {
                notification = notifications.recv() => match notification {
                    Some(n) => self.on_notification(&n).await?,
                    None => break,
                },
                Some(board) = self.catch_up.recv() => self.catch_up(&board).await?,
                Some(first) = self.sync.recv() => {
                    let mut waiting = vec![first];
                    while let Ok(more) = self.sync.try_recv() {
                        waiting.push(more);
                    }
                    // The answer comes after every notification the server sent before it,
                    // and the driver queued those before it read the answer.
                    client.simple_query("").await?;
                    while let Ok(n) = notifications.try_recv() {
                        self.on_notification(&n).await?;
                    }
                    // Heard is not yet acted on: a copy of a session changed through
                    // another gateway is dropped once its row is read (`checks`). A poll
                    // answered from the copy meanwhile answered without the change (a
                    // subscription made there: its cursor lost the view's position).
                    let (checks, noted) = (self.session_checks.clone(), self.session_checks.noted());
                    tokio::spawn(async move {
                        checks.settled(noted).await;
                        for done in waiting {
                            let _ = done.send(());
                        }
                    });
                }
            }
        }
        driver.abort();
        Ok(())
    }

    async fn on_notification(&mut self, n: &Notification) -> Result<(), tokio_postgres::Error> {
        if n.channel() == store::CHANNEL {
            let checks = &self.session_checks;
            match Message::parse(n.payload()) {
                Some(Message::Gone { public_id }) => checks.said_gone(&self.sessions, public_id),
                Some(Message::Drop { public_id, gateway }) if gateway != self.gateway_id => {
                    checks.said_taken(&self.sessions, public_id)
                }
                Some(Message::Drop { .. }) => {}
                Some(Message::Handed { public_id, gateway }) if gateway == self.gateway_id => {
                    self.handovers.heard(public_id)
                }
                Some(Message::Handed { .. }) => {}
                None => tracing::warn!("ignoring a session notification: {}", n.payload()),
            }
            return Ok(());
        }
        self.on_payload(n.payload()).await
    }

    async fn on_payload(&mut self, text: &str) -> Result<(), tokio_postgres::Error> {
        let notice = match decode(text) {
            Ok(notice) => notice,
            Err(error) => {
                tracing::warn!(
                    "ignoring a notification that is not a pgplace payload ({error}): {text}"
                );
                return Ok(());
            }
        };
        match notice {
            Notice::Tiles { board, last } => {
                let Some(mirrored) = self.boards.loaded(board) else {
                    return Ok(());
                };
                if last <= mirrored.board.seq() {
                    return Ok(());
                }
                self.read_placements(&mirrored.board, last).await
            }
            // Not pgplace's (the change feed reads the log): whoever sent it, nothing is done.
            Notice::Changes(_) => Ok(()),
            Notice::View(p) => {
                self.lists.heard_of_view(&p.name);
                Ok(())
            }
            Notice::Board(p) => {
                if matches!(p.change, BoardChange::Created) {
                    self.boards.created(p.board);
                }
                let Some(mirrored) = self.boards.loaded(p.board) else {
                    return Ok(());
                };
                match p.change {
                    // Deleted only if the database says so (the catch-up looks it up).
                    BoardChange::Deleted => self.catch_up(&mirrored.board).await,
                    BoardChange::Created | BoardChange::Settings => {
                        self.catch_up_with_settings_at(&mirrored.board, Some(p.seq))
                            .await
                    }
                }
            }
        }
    }

    /// After LISTEN was lost: the copies of sessions another gateway changed meanwhile
    /// (this one did not hear it) are dropped, to be read again when next used.
    async fn reconcile_sessions(&self) -> Result<(), tokio_postgres::Error> {
        let copies = self.sessions.copies();
        if copies.is_empty() {
            return Ok(());
        }
        let client = self.client().await?;
        let read = |ids: Vec<i64>| {
            let client = &client;
            async move {
                Ok::<HashMap<i64, (i64, Option<u64>)>, tokio_postgres::Error>(
                    store::states(client, &ids)
                        .await?
                        .into_iter()
                        .map(|(id, version, holder)| (id, (version, holder)))
                        .collect(),
                )
            }
        };
        let stored = read(copies.iter().map(|c| c.0).collect()).await?;
        let stale = self
            .sessions
            .stale_copies(&copies, &stored, self.gateway_id);
        if stale.is_empty() {
            return Ok(());
        }
        // A change this gateway is making commits before its copy takes the new version:
        // a copy that looks stale is asked again once such a change is done.
        tokio::time::sleep(RECONCILE_AGAIN_AFTER).await;
        let copies: Vec<(i64, i64, bool)> = copies
            .into_iter()
            .filter(|c| stale.contains(&c.0))
            .collect();
        let stored = read(stale).await?;
        let stale = self
            .sessions
            .stale_copies(&copies, &stored, self.gateway_id);
        if !stale.is_empty() {
            tracing::info!(
                "{} sessions changed elsewhere while LISTEN was down",
                stale.len()
            );
        }
        // Dropped as if `drop` had been heard: a copy that answered legacy polls hands its
        // positions to the gateway that holds the session now.
        for public_id in stale {
            self.session_checks.said_taken(&self.sessions, public_id);
        }
        Ok(())
    }

    /// After a `tiles` notification up to seq `last`: the placements after the mirror's seq
    /// up to `last`, read from the history page by page (anything that does not continue
    /// the mirror: the full catch-up, which may reload it). Not past `last`: a settings
    /// change notified after it (a resize, say) comes before the placements after it, as
    /// it did in the database.
    async fn read_placements(
        &mut self,
        board: &Arc<Board>,
        last: i64,
    ) -> Result<(), tokio_postgres::Error> {
        let client = self.client().await?;
        while board.seq() < last {
            let placements =
                db::placements_between(&client, board.id, board.seq(), last, CATCH_UP_PAGE).await?;
            if placements.is_empty() {
                return Ok(());
            }
            if board.apply(&placements).is_err() {
                drop(client);
                return self.catch_up(board).await;
            }
            if (placements.len() as i64) < CATCH_UP_PAGE {
                return Ok(());
            }
        }
        Ok(())
    }

    /// Brings one mirror up to what the database has committed now.
    async fn catch_up(&mut self, board: &Arc<Board>) -> Result<(), tokio_postgres::Error> {
        self.catch_up_with_settings_at(board, None).await
    }

    /// `catch_up`, telling the settings after the placements up to `settings_at` (the seq
    /// at which they changed; None: after all of them), as the stream would have.
    async fn catch_up_with_settings_at(
        &mut self,
        board: &Arc<Board>,
        settings_at: Option<i64>,
    ) -> Result<(), tokio_postgres::Error> {
        let client = self.client().await?;
        let Some((settings, seq)) = db::settings_and_seq(&client, board.id).await? else {
            self.boards.forget(board.id);
            board.mark_deleted();
            return Ok(());
        };
        let behind = seq - board.seq();
        if board.needs_reload(&settings) || behind < 0 || behind as u64 > self.replay_limit {
            return self.reload(board, &client).await;
        }
        if behind > 0 {
            crate::metrics::metrics()
                .catch_up_seqs
                .observe(behind as f64);
        }
        let settings_at = settings_at.unwrap_or(seq);
        let mut settings = Some(settings);
        while board.seq() < seq {
            if board.seq() >= settings_at {
                if let Some(settings) = settings.take() {
                    board.set_settings(settings);
                }
            }
            let page = match settings {
                Some(_) => (settings_at - board.seq()).clamp(1, CATCH_UP_PAGE),
                None => CATCH_UP_PAGE,
            };
            let placements = db::placements_after(&client, board.id, board.seq(), page).await?;
            match board.apply(&placements) {
                Ok(0) | Err(Discontinuity::Gap { .. }) | Err(Discontinuity::Inconsistent) => {
                    // The history does not continue the mirror (it was cut, say): start over.
                    tracing::warn!(
                        "board {}: the history does not continue seq {}; reloading",
                        board.id,
                        board.seq()
                    );
                    return self.reload(board, &client).await;
                }
                Ok(_) => {}
            }
        }
        if let Some(settings) = settings {
            board.set_settings(settings);
        }
        Ok(())
    }

    async fn reload(
        &self,
        board: &Arc<Board>,
        client: &deadpool_postgres::Object,
    ) -> Result<(), tokio_postgres::Error> {
        match db::snapshot(client, board.id).await? {
            Some(snapshot) => board.reload(snapshot),
            None => {
                self.boards.forget(board.id);
                board.mark_deleted();
            }
        }
        Ok(())
    }

    async fn client(&self) -> Result<deadpool_postgres::Object, tokio_postgres::Error> {
        db::client_when_free(&self.pool, &"catch-up").await
    }
}

/// What a notification on channel `pgplace` tells the listener, read without the database
/// (`Listener::on_payload` acts on it).
#[derive(Debug, Clone, PartialEq)]
pub enum Notice {
    /// Board `board` is said to have placements up to seq `last`: worth a read of its
    /// history if the mirror is behind that (the tiles a payload carries are not read).
    Tiles {
        board: i64,
        last: i64,
    },
    Changes(ChangesPayload),
    View(ViewPayload),
    Board(BoardPayload),
}

/// Reads a notification's payload.
pub fn decode(text: &str) -> Result<Notice, serde_json::Error> {
    Ok(match Payload::decode(text)? {
        Payload::Tiles(p) => Notice::Tiles {
            board: p.board,
            last: p.last,
        },
        Payload::Changes(p) => Notice::Changes(p),
        Payload::View(p) => Notice::View(p),
        Payload::Board(p) => Notice::Board(p),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tiles_payload_is_only_a_board_and_a_seq() {
        let inline = r#"{"type":"tiles","v":1,"board":1,"first":101,"last":102,"at":7,"tiles":[[3,4,5,42],[0,0,15,7]]}"#;
        assert_eq!(
            decode(inline).unwrap(),
            Notice::Tiles {
                board: 1,
                last: 102
            }
        );
        let reference = r#"{"type":"tiles","v":1,"board":1,"first":103,"last":9102}"#;
        assert_eq!(
            decode(reference).unwrap(),
            Notice::Tiles {
                board: 1,
                last: 9102
            }
        );
    }
}
