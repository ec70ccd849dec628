//! The sessions room as a poll sees it: long polls, acks, the registry and expiry.

use crate::errors::{RpcError, TOO_FAST, TOO_MANY};
use crate::fragments::Fragments;
use crate::mirror::board::Board;
use crate::mirror::snapshot::{Settings, Snapshot};
use crate::sessions::ids::new_session_id;
use crate::sessions::poll_cursor::PollCursor;
use crate::sessions::registry::Sessions;
use crate::sessions::session::Session;
use crate::sessions::subscription::Subscription;
use crate::views::board::BoardView;
use crate::views::Position;
use crate::views::View;
use pgplace_core::payload::Placement;
use serde_json::Value;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// A session as `session.create` makes it (public ids count up).
fn create(sessions: &Sessions) -> Result<Arc<Session>, RpcError> {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    sessions.check_room()?;
    let public_id = NEXT.fetch_add(1, Ordering::SeqCst) as i64;
    sessions.insert(Session::new(
        new_session_id().into(),
        public_id,
        0,
        None,
        true,
    ))
}

fn board(log_capacity: u64) -> Arc<Board> {
    let settings = Settings {
        freeze_after: None,
        id: 1,
        name: "t".into(),
        width: 4,
        height: 2,
        bits_per_tile: 4,
        palette: (0..16).map(|i| format!("#0000{i:02x}")).collect(),
        palette_names: None,
        cooldown: 0.0,
        state: "open".into(),
    };
    Arc::new(Board::new(
        Snapshot {
            settings,
            seq: 0,
            bits: vec![0; 4],
            freezing: None,
            recent: Vec::new(),
        },
        log_capacity,
    ))
}

fn place(board: &Board, seq: i64, x: i32, color: i32) {
    let p = Placement {
        board: 1,
        seq,
        x,
        y: 0,
        color,
        user: 7,
        at: 0,
    };
    board.apply(&[p]).expect("in order");
}

fn subscribe(session: &Session, board: &Arc<Board>, compact: bool) {
    let (cursor, _) = board.initial_state();
    let view = View::Board(BoardView {
        board: board.clone(),
        compact,
        presence: false,
    });
    session
        .subscribe(Subscription::new(view, Position::Board(cursor)), 4)
        .unwrap();
}

fn json(f: Fragments) -> Vec<Value> {
    serde_json::from_slice::<Vec<Value>>(&f.to_vec()).expect("a JSON array")
}

#[tokio::test(start_paused = true)]
async fn get_events_waits_its_timeout_then_answers_empty() {
    let sessions = Sessions::new(10, Duration::from_secs(120));
    let session = create(&sessions).unwrap();
    subscribe(&session, &board(100), false);
    let started = Instant::now();
    assert!(json(session.get_events(Duration::from_secs(30), None).await).is_empty());
    assert_eq!(started.elapsed(), Duration::from_secs(30));
}

#[tokio::test(start_paused = true)]
async fn a_placement_ends_the_wait_at_once() {
    let sessions = Sessions::new(10, Duration::from_secs(120));
    let session = create(&sessions).unwrap();
    let b = board(100);
    subscribe(&session, &b, true);
    let waiter = {
        let session = session.clone();
        tokio::spawn(async move {
            let started = Instant::now();
            (
                json(session.get_events(Duration::from_secs(60), None).await),
                started.elapsed(),
            )
        })
    };
    tokio::time::sleep(Duration::from_secs(5)).await;
    place(&b, 1, 2, 9);
    place(&b, 2, 3, 8);
    let (events, waited) = waiter.await.unwrap();
    assert_eq!(waited, Duration::from_secs(5));
    // Both may arrive together or the first alone; the rest comes on the next call.
    let mut tiles: Vec<Value> = events
        .iter()
        .flat_map(|e| e["tiles"].as_array().unwrap().clone())
        .collect();
    if tiles.len() < 2 {
        let more = json(session.get_events(Duration::ZERO, None).await);
        tiles.extend(
            more.iter()
                .flat_map(|e| e["tiles"].as_array().unwrap().clone()),
        );
    }
    assert_eq!(
        serde_json::json!(tiles),
        serde_json::json!([[2, 0, 9], [3, 0, 8]])
    );
}

#[tokio::test(start_paused = true)]
async fn a_second_get_events_answers_the_first_with_nothing() {
    let sessions = Sessions::new(10, Duration::from_secs(120));
    let session = create(&sessions).unwrap();
    let b = board(100);
    subscribe(&session, &b, false);
    let first = {
        let session = session.clone();
        tokio::spawn(async move { json(session.get_events(Duration::from_secs(60), None).await) })
    };
    tokio::time::sleep(Duration::from_secs(1)).await;
    let second = {
        let session = session.clone();
        tokio::spawn(async move { json(session.get_events(Duration::from_secs(60), None).await) })
    };
    tokio::time::sleep(Duration::from_millis(1)).await;
    assert!(
        first.is_finished(),
        "the first call was answered when the second came"
    );
    assert!(first.await.unwrap().is_empty());
    place(&b, 1, 0, 1);
    let events = second.await.unwrap();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["obj"]["seq"], 1);
}

#[tokio::test(start_paused = true)]
async fn idle_sessions_expire_but_waiting_ones_do_not() {
    let sessions = Arc::new(Sessions::new(10, Duration::from_secs(120)));
    let idle = create(&sessions).unwrap();
    let polling = create(&sessions).unwrap();
    let waiter = {
        let polling = polling.clone();
        tokio::spawn(async move { polling.get_events(Duration::from_secs(90), None).await })
    };
    tokio::spawn(sessions.clone().run_expiry());
    tokio::time::sleep(Duration::from_secs(119)).await;
    assert!(sessions.get(&idle.id).is_some(), "not yet idle for 120 s");
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert!(sessions.get(&idle.id).is_none(), "idle for more than 120 s");
    // The poller waited 90 s and ended at 90 s: it is idle from then on.
    assert!(sessions.get(&polling.id).is_some());
    waiter.await.unwrap();
    tokio::time::sleep(Duration::from_secs(125)).await;
    assert!(sessions.get(&polling.id).is_none());
    assert!(sessions.is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_cursor_leaves_with_its_session_when_it_is_destroyed_or_expires() {
    let sessions = Arc::new(Sessions::new(10, Duration::from_secs(120)));
    let b = board(100);
    let total = |b: &Board| -> Option<Value> {
        b.cursors
            .due(std::time::Instant::now(), Duration::ZERO)
            .map(|obj| serde_json::from_str::<Value>(&obj).unwrap()["total"].clone())
    };
    let idle = create(&sessions).unwrap();
    let leaving = create(&sessions).unwrap();
    idle.set_presence(&b, 1, 0).unwrap();
    leaving.set_presence(&b, 2, 1).unwrap();
    assert_eq!(total(&b), Some(serde_json::json!(2)));
    assert_eq!(
        leaving.set_presence(&b, 3, 1).err().map(|e| e.code),
        Some(TOO_FAST),
        "again within 50 ms"
    );
    sessions.forget(leaving.public_id);
    assert_eq!(total(&b), Some(serde_json::json!(1)));
    assert_eq!(total(&b), None, "unchanged since: nothing to tell");
    tokio::spawn(sessions.clone().run_expiry());
    tokio::time::sleep(Duration::from_secs(130)).await;
    assert!(sessions.get(&idle.id).is_none(), "expired");
    assert_eq!(total(&b), Some(serde_json::json!(0)));
}

#[tokio::test(start_paused = true)]
async fn the_number_of_sessions_is_bounded() {
    let sessions = Sessions::new(2, Duration::from_secs(120));
    create(&sessions).unwrap();
    let second = create(&sessions).unwrap();
    assert_eq!(create(&sessions).err().map(|e| e.code), Some(TOO_MANY));
    sessions.forget(second.public_id);
    create(&sessions).unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_session_that_fell_behind_its_buffer_gets_a_reset() {
    let sessions = Sessions::new(10, Duration::from_secs(120));
    let slow = create(&sessions).unwrap();
    let keeping_up = create(&sessions).unwrap();
    let b = board(3);
    subscribe(&slow, &b, false);
    subscribe(&keeping_up, &b, false);
    place(&b, 1, 0, 1);
    place(&b, 2, 1, 2);
    assert_eq!(
        json(keeping_up.get_events(Duration::ZERO, None).await).len(),
        2
    );
    place(&b, 3, 2, 3);
    place(&b, 4, 3, 4);
    place(&b, 5, 0, 5);
    // Five tiles arrived; the log keeps three: the slow session lost seq 1 and 2.
    let events = json(slow.get_events(Duration::ZERO, None).await);
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["action"], "reset");
    assert_eq!(events[0]["obj"]["seq"], 5);
    let events = json(keeping_up.get_events(Duration::ZERO, None).await);
    let seqs: Vec<i64> = events
        .iter()
        .map(|e| e["obj"]["seq"].as_i64().unwrap())
        .collect();
    assert_eq!(seqs, [3, 4, 5]);
    // After the reset the slow session continues exactly.
    place(&b, 6, 1, 6);
    let events = json(slow.get_events(Duration::ZERO, None).await);
    assert_eq!(events.len(), 1);
    assert_eq!(
        (
            events[0]["obj"]["seq"].as_i64(),
            events[0]["old"]["color"].as_i64()
        ),
        (Some(6), Some(2))
    );
}

fn seqs(events: &[Value]) -> Vec<i64> {
    events
        .iter()
        .map(|e| e["obj"]["seq"].as_i64().expect("a tile event"))
        .collect()
}

/// An acking poll: its events and its cursor.
async fn acked_poll(
    session: &Session,
    ack: Option<&PollCursor>,
    gateway: u64,
) -> (Vec<Value>, PollCursor) {
    let mut positions = session.ack_positions(ack, gateway);
    let events = json(
        session
            .get_events(Duration::ZERO, Some(&mut positions))
            .await,
    );
    (events, positions.cursor(session))
}

#[tokio::test(start_paused = true)]
async fn an_acking_poll_answers_from_its_ack_so_a_lost_answer_comes_again() {
    let sessions = Sessions::new(10, Duration::from_secs(120));
    let session = create(&sessions).unwrap();
    let b = board(100);
    subscribe(&session, &b, false);
    place(&b, 1, 0, 1);
    place(&b, 2, 1, 2);
    let (events, first) = acked_poll(&session, None, 9).await;
    assert_eq!(seqs(&events), [1, 2]);
    place(&b, 3, 2, 3);
    // The answer was lost: the client acks what it had before (nothing yet).
    let (events, again) = acked_poll(&session, None, 9).await;
    assert_eq!(seqs(&events), [1, 2, 3]);
    // It got that one: acking it gives nothing more, nothing twice.
    assert!(acked_poll(&session, Some(&again), 9).await.0.is_empty());
    // Acking the first answer gives what came after it, once.
    let (events, _) = acked_poll(&session, Some(&first), 9).await;
    assert_eq!(seqs(&events), [3]);
    // Acking polls leave the legacy position alone.
    assert_eq!(
        seqs(&json(session.get_events(Duration::ZERO, None).await)),
        [1, 2, 3]
    );
}

#[tokio::test(start_paused = true)]
async fn a_cursor_from_another_gateway_resumes_by_seq() {
    let sessions = Sessions::new(10, Duration::from_secs(120));
    let session = create(&sessions).unwrap();
    let b = board(100);
    subscribe(&session, &b, true);
    place(&b, 1, 0, 1);
    let (_, cursor) = acked_poll(&session, None, 9).await;
    place(&b, 2, 1, 2);
    place(&b, 3, 2, 3);
    // The same board's mirror on another gateway has another epoch and notice count:
    // only the seq carries over.
    let mut elsewhere = cursor.clone();
    elsewhere.gateway = 8;
    for entry in elsewhere.views.values_mut() {
        if let crate::views::Portable::Board(epoch, _, notices) = &mut entry.1 {
            *epoch = 77;
            *notices = 1234;
        }
    }
    let (events, _) = acked_poll(&session, Some(&elsewhere), 9).await;
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["seq"], serde_json::json!([2, 3]));
    // Written here, the same cursor with a foreign epoch is another mirror's: reset.
    let (events, _) = acked_poll(
        &session,
        Some(&PollCursor {
            gateway: 9,
            ..elsewhere
        }),
        9,
    )
    .await;
    assert_eq!(events[0]["action"], "reset");
}

#[tokio::test(start_paused = true)]
async fn a_resubscribed_view_starts_where_it_was_subscribed_again() {
    let sessions = Sessions::new(10, Duration::from_secs(120));
    let session = create(&sessions).unwrap();
    let b = board(100);
    subscribe(&session, &b, false);
    let (_, before) = acked_poll(&session, None, 9).await;
    place(&b, 1, 0, 1);
    place(&b, 2, 1, 2);
    // Subscribed again: its initial state holds seq 1 and 2 already.
    subscribe(&session, &b, false);
    place(&b, 3, 2, 3);
    let (events, _) = acked_poll(&session, Some(&before), 9).await;
    assert_eq!(seqs(&events), [3]);
}

#[tokio::test(start_paused = true)]
async fn a_cursor_names_the_subscription_made_again_during_the_poll() {
    let sessions = Sessions::new(10, Duration::from_secs(120));
    let session = create(&sessions).unwrap();
    let b = board(100);
    subscribe(&session, &b, false);
    let mut positions = session.ack_positions(None, 9);
    let old_id = session.lock().subscriptions[0].sub_id;
    place(&b, 1, 0, 1);
    // The poll collects under the old subscription ...
    json(
        session
            .get_events(Duration::ZERO, Some(&mut positions))
            .await,
    );
    // ... which the client then replaces (same key) before the cursor is written.
    subscribe(&session, &b, false);
    let new_id = session.lock().subscriptions[0].sub_id;
    assert_ne!(old_id, new_id);
    let cursor = positions.cursor(&session);
    let entries: Vec<u64> = cursor.views.values().map(|e| e.0).collect();
    assert!(entries.iter().all(|id| *id != old_id), "{entries:?}");
}

#[test]
fn a_copy_read_before_the_session_was_forgotten_is_refused() {
    let sessions = Sessions::new(10, Duration::from_secs(120));
    let mark = sessions.mark();
    // Another gateway changed session 77 while this one was reading it.
    sessions.forget(77);
    let stale = Session::new(new_session_id().into(), 77, 3, None, false);
    assert!(sessions.insert_read(stale, Some(&mark)).unwrap().is_none());
    assert!(sessions.is_empty());
    let fresh = Session::new(new_session_id().into(), 77, 4, None, false);
    assert!(sessions
        .insert_read(fresh, Some(&sessions.mark()))
        .unwrap()
        .is_some());
}

#[test]
fn a_change_heard_while_the_session_is_being_read_refuses_that_copy() {
    let sessions = Sessions::new(10, Duration::from_secs(120));
    let mark = sessions.mark();
    // Heard before the copy read from before the change is kept: nothing to check yet.
    assert!(!sessions.heard_change(77));
    let stale = Session::new(new_session_id().into(), 77, 3, None, false);
    assert!(sessions.insert_read(stale, Some(&mark)).unwrap().is_none());
    // With a copy here, the check against the row judges it; nothing is refused or ended.
    let copy = Session::new(new_session_id().into(), 77, 4, None, false);
    let copy = sessions
        .insert_read(copy, Some(&sessions.mark()))
        .unwrap()
        .expect("read after the change");
    assert!(sessions.heard_change(77));
    assert!(!copy.is_destroyed());
    assert_eq!(sessions.len(), 1);
}

#[test]
fn a_flood_of_changes_heard_is_remembered_in_bounded_memory() {
    use crate::sessions::registry::FORGOTTEN_MAX;
    let sessions = Sessions::new(10, Duration::from_secs(120));
    let mark = sessions.mark();
    // Anyone may NOTIFY `drop <id>` for every id there is.
    let flood = 1000..1000 + 5 * FORGOTTEN_MAX as i64;
    for id in flood.clone() {
        assert!(!sessions.heard_change(id));
    }
    assert!(sessions.forgettings_kept() <= FORGOTTEN_MAX);
    // A copy read before the flood is still refused, though its id is no longer kept.
    let first = Session::new(new_session_id().into(), flood.start, 1, None, false);
    assert!(sessions.insert_read(first, Some(&mark)).unwrap().is_none());
    // One read after it is not.
    let later = Session::new(new_session_id().into(), flood.start, 1, None, false);
    assert!(sessions
        .insert_read(later, Some(&sessions.mark()))
        .unwrap()
        .is_some());
    // No read in flight: nothing is remembered, however much is heard.
    drop(mark);
    assert_eq!(sessions.forgettings_kept(), 0);
    for id in flood {
        sessions.heard_change(id);
    }
    assert_eq!(sessions.forgettings_kept(), 0);
}

#[test]
fn a_change_made_here_must_be_the_next_version() {
    let session = Session::new(new_session_id().into(), 5, 3, None, false);
    assert!(session.advance_version(4));
    assert!(!session.advance_version(6), "5 was made elsewhere");
    assert_eq!(session.version(), 4);
}
