//! Finding a session on any gateway: this gateway's copy, or the database's (with its
//! subscriptions made again here); and what a poll needs before it may answer from a copy.
//!
//! Legacy polls (no `ack`) read the copy's `local` positions, which hold only while this
//! gateway answered the session's previous legacy poll and no other gateway changed or
//! served the session since. Other gateways say so on channel `pgplace_sessions` (they
//! drop their copy when told); before a held copy answers, the listener confirms that every
//! such word committed before now has been heard ([`sync_listener`]). A copy that is not
//! held takes the session (`session_move`: the others drop theirs), and the gateway that
//! held it before hands over where its views stand (`sessions::handover`); views it could
//! not hand over start with a `reset`.
//!
//! Acking polls carry their positions: any copy answers them, after extending a board's
//! log back to where the cursor stands when it no longer reaches there
//! ([`reach_back`]).

use crate::db;
use crate::errors::{from_db, RpcError, INVALID_PARAMS, RETRY, UNKNOWN_BOARD, UNKNOWN_VIEW};
use crate::sessions::acked::AckPositions;
use crate::sessions::handover::{Waiter, HANDOVER_WAIT};
use crate::sessions::session::Session;
use crate::sessions::store;
use crate::sessions::subscription::Subscription;
use crate::state::App;
use crate::unknown::Name;
use crate::views;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;
use tokio::time::Instant;

/// The session `id`: this gateway's copy, or read from the database. A string that is not
/// a session id is refused before either is looked at (`names`).
pub async fn session(app: &App, id: &str) -> Result<Arc<Session>, RpcError> {
    crate::names::check_session_id(id)?;
    // A copy read while another gateway changed the session is refused: read it again.
    for _ in 0..READS {
        if let Some(session) = app.sessions.get(id) {
            if !session.is_destroyed() {
                return Ok(session);
            }
        }
        if let Some(session) = read(app, id).await? {
            return Ok(session);
        }
    }
    Err(changing())
}

/// How many times a session is read before giving up (it keeps changing elsewhere).
const READS: usize = 3;

fn changing() -> RpcError {
    RpcError::new(
        RETRY,
        "the session is being changed through another gateway; retry",
    )
}

/// Reads the session from the database and makes its subscriptions here; None when it
/// changed meanwhile.
async fn read(app: &App, id: &str) -> Result<Option<Arc<Session>>, RpcError> {
    let mark = app.sessions.mark();
    let missing = Name::Session(id.into());
    if app.unknown.is_known_missing(&missing) {
        return Err(RpcError::unknown_session());
    }
    let client = db::checkout(&app.pool).await?;
    let Some(stored) = store::load(&client, id).await.map_err(|e| from_db(&e))? else {
        app.unknown.missing(missing);
        return Err(RpcError::unknown_session());
    };
    drop(client);
    app.sessions.check_room()?;
    let session = Session::new(
        id.into(),
        stored.public_id,
        stored.version,
        stored.user,
        false,
    );
    for view in &stored.views {
        match Box::pin(views::build(&app.sources(), &view.view, &view.params)).await {
            Ok(built) => {
                let sub = Subscription::new(built.view, built.cursor)
                    .restored(view.sub_id as u64, view.seq);
                session.subscribe(sub, usize::MAX)?;
            }
            // The view is gone for good (a dropped list view, a deleted board, a region
            // outside a shrunk board): the session goes on without it.
            Err(error) if [UNKNOWN_VIEW, UNKNOWN_BOARD, INVALID_PARAMS].contains(&error.code) => {
                tracing::info!(
                    "session {}: subscription {:?} not made again: {}",
                    stored.public_id,
                    view.key,
                    error.message
                )
            }
            // Anything else may pass (the database restarting): no copy without the view.
            Err(error) => return Err(error),
        }
    }
    app.sessions.insert_read(session, Some(&mark))
}

/// Makes sure this gateway has heard every session change committed before now, and
/// returns the copy of the session as it is after them. None when the listener could not
/// confirm that within `wait` (the LISTEN connection is down).
///
/// Every poll passes here: an ack may name a subscription made or re-made through
/// another gateway a moment ago, and a legacy poll must know whether another gateway
/// answered the session since. An ack written at a newer version of the session than
/// this copy's (`seen_version`) has the copy checked against its row even so: the
/// guarantee an acking client has must not rest on a notification alone.
pub async fn current(
    app: &App,
    id: &str,
    wait: Duration,
    seen_version: i64,
) -> Result<Option<Arc<Session>>, RpcError> {
    let session = session(app, id).await?;
    if !sync_listener(app, wait).await {
        return Ok(None);
    }
    if session.version() < seen_version && !session.is_destroyed() {
        // As if `drop` had been heard: checked like one (a forged cursor costs one read).
        let checks = &app.session_checks;
        checks.said_taken(&app.sessions, session.public_id);
        checks.settled(checks.noted()).await;
    }
    if session.is_destroyed() {
        return Ok(Some(self::session(app, id).await?));
    }
    Ok(Some(session))
}

/// The user a placement through `session` acts for: the copy's, or the row's when the copy
/// has none (signed in through another gateway a moment ago, before this gateway heard of
/// it: a refusal is confirmed by the database first) or is handing the session's legacy
/// polls over after such a change (it is forgotten once they are given). Not waited for:
/// the changes this gateway has not heard of yet (a placement would wait for the listener
/// as a poll does, a quarter of the placements a second).
pub async fn user(
    app: &App,
    session: &Session,
) -> Result<Option<crate::sessions::session::User>, RpcError> {
    if let Some(user) = session
        .user()
        .filter(|_| !app.sessions.is_giving(session.public_id))
    {
        return Ok(Some(user));
    }
    let client = db::checkout(&app.pool).await?;
    let stored = store::load(&client, &session.id)
        .await
        .map_err(|e| from_db(&e))?
        .ok_or_else(RpcError::unknown_session)?;
    Ok(stored.user)
}

/// The copy that may answer a legacy poll now (see the module's comment); None when the
/// listener could not confirm within `wait` that this gateway still holds it (the LISTEN
/// connection is down): the poll then answers `[]`, as if nothing came, and the next one
/// finds out.
pub async fn for_legacy_poll(
    app: &App,
    id: &str,
    wait: Duration,
) -> Result<Option<Arc<Session>>, RpcError> {
    // The gateway this poll took the session from, kept across reads: a copy read again
    // finds the session held here already, and still waits for that gateway's positions.
    let mut taken_from = None;
    for _ in 0..READS {
        // Held: no other gateway may have answered since. Not held: the `reset`s this poll
        // gives must not be older than what another gateway gave before (this gateway's
        // mirrors must have heard every commit the other one had).
        let Some(session) = current(app, id, wait, 0).await? else {
            return Ok(None);
        };
        if session.is_held() {
            return Ok(Some(session));
        }
        let (version, from) = take_over(app, &session, taken_from)
            .await?
            .ok_or_else(RpcError::unknown_session)?;
        taken_from = taken_from.or(from);
        if version == session.version() && !session.is_destroyed() {
            session.hold();
            return Ok(Some(session));
        }
        // Changed elsewhere since this copy was read: read it again.
        app.sessions.forget(session.public_id);
    }
    Err(changing())
}

/// Takes the session's legacy polls for this gateway (its version, and the other gateway
/// that held them, if one did; None: unknown); when another gateway answered them before
/// (`taken_from`: this poll moved the session from it already, on a copy that turned out
/// stale), goes on from where that one left its views (`sessions::handover`).
async fn take_over(
    app: &App,
    session: &Arc<Session>,
    taken_from: Option<u64>,
) -> Result<Option<(i64, Option<u64>)>, RpcError> {
    let waiter = app.handovers.wait_for(session.public_id);
    let giving_before = app.sessions.is_giving(session.public_id);
    let client = db::checkout(&app.pool).await?;
    let Some(moved) = store::move_to(&client, &session.id, app.gateway_id)
        .await
        .map_err(|e| from_db(&e))?
    else {
        return Ok(None);
    };
    drop(client);
    let previous = match moved.previous {
        Some(me) if me == app.gateway_id => taken_from.or(Some(me)),
        other => other,
    };
    let from_another = previous.is_some_and(|p| p != app.gateway_id);
    // This gateway held the session, and its copy, dropped for a change made through
    // another gateway, is leaving its positions in the row right now: they are waited for
    // as another gateway's would be (without it the views started over with a `reset`).
    let from_own_dropped_copy = moved.previous == Some(app.gateway_id)
        && (giving_before || app.sessions.is_giving(session.public_id));
    if (from_another || moved.handed || from_own_dropped_copy) && moved.version == session.version()
    {
        let started = Instant::now();
        let handed = receive_handover(app, session, &waiter, moved.handed).await?;
        crate::metrics::metrics().handover(handed, started.elapsed());
    } else if moved.version == session.version() && session.owes_reset() {
        // Nothing to wait for, yet the views have no position: they start over. Expected
        // only for a session whose copy here was forgotten without handing its positions
        // on (expired, or changed through another gateway at the same moment).
        tracing::info!(
            "session {}: taken over from {:?} with nothing handed; its views start over",
            session.public_id,
            moved.previous
        );
    }
    let from = previous.filter(|p| *p != app.gateway_id);
    Ok(Some((moved.version, from)))
}

/// Waits for the previous holder's positions (`already_there`: looks first) and moves the
/// session's legacy views there; false when none came within `HANDOVER_WAIT` (its views
/// then start with a `reset`).
async fn receive_handover(
    app: &App,
    session: &Arc<Session>,
    waiter: &Waiter<'_>,
    already_there: bool,
) -> Result<bool, RpcError> {
    let deadline = Instant::now() + HANDOVER_WAIT;
    let mut look_now = already_there;
    loop {
        let mut last = false;
        if !std::mem::take(&mut look_now) {
            last = tokio::time::timeout_at(deadline, waiter.heard())
                .await
                .is_err();
        }
        let client = db::checkout(&app.pool).await?;
        let handed = store::take_handover(&client, &session.id, app.gateway_id)
            .await
            .map_err(|e| from_db(&e))?;
        drop(client);
        match handed {
            Some(cursor) if cursor.session == session.public_id => {
                let positions = session.ack_positions(Some(&cursor), app.gateway_id);
                reach_back(app, session, &positions).await?;
                session.resume_legacy(&positions, &cursor);
                return Ok(true);
            }
            Some(_) => return Ok(false),
            None if last => return Ok(false),
            // Woken before anything was left (a forged `handed`): wait on.
            None => {}
        }
    }
}

/// Waits until the listener has applied every notification committed before now. False
/// when it could not tell within `wait` (the LISTEN connection is down).
pub async fn sync_listener(app: &App, wait: Duration) -> bool {
    let (done, heard) = oneshot::channel();
    if app.listener_sync.send(done).is_err() {
        return false;
    }
    matches!(tokio::time::timeout(wait, heard).await, Ok(Ok(())))
}

/// Makes the boards' logs reach back to where an acking poll's views stand, reading the
/// placements after there from the history. A board whose log cannot reach back answers
/// those views with a `reset`.
pub async fn reach_back(
    app: &App,
    session: &Session,
    positions: &AckPositions,
) -> Result<(), RpcError> {
    for (board, from) in session.boards_behind(positions) {
        app.boards.backfill(&board, from).await?;
    }
    Ok(())
}
