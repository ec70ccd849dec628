//! The mirror's unit tests: applying, backfill, compact runs, freezing, presence, reload.

use super::*;
use crate::fragments::ArrayBuilder;
use crate::mirror::freezing::Freezing;
use crate::mirror::snapshot::{Past, Settings, Snapshot};
use crate::shared_log::Delivery;
use pgplace_core::payload::Placement;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A 2x2 board of 2-bit tiles, all colour 0, at `seq`.
fn empty_board(seq: i64) -> Board {
    let snapshot = Snapshot {
        settings: settings(0.0),
        seq,
        bits: vec![0],
        freezing: None,
        recent: Vec::new(),
    };
    Board::new(snapshot, 100)
}

fn settings(cooldown: f64) -> Settings {
    Settings {
        id: 3,
        name: "b".into(),
        width: 2,
        height: 2,
        bits_per_tile: 2,
        palette: vec![
            "#000000".into(),
            "#111111".into(),
            "#222222".into(),
            "#333333".into(),
        ],
        palette_names: None,
        cooldown,
        state: "open".into(),
        freeze_after: None,
    }
}

fn tile(seq: i64, x: i32, y: i32, color: i32) -> Placement {
    Placement {
        board: 3,
        seq,
        x,
        y,
        color,
        user: 1,
        at: 1_764_437_000_123_456,
    }
}

fn collect(board: &Board, cursor: &mut Cursor, compact: bool) -> Value {
    let mut out = ArrayBuilder::new();
    assert_eq!(
        board.collect(cursor, compact, true, &mut out),
        Delivery::Continues
    );
    serde_json::from_slice(&out.finish().to_vec()).unwrap()
}

/// The packed bits after the first `n` of `history`.
fn bits_after(history: &[Placement], n: usize) -> Vec<u8> {
    let board = empty_board(0);
    board.apply(&history[..n]).unwrap();
    board.packed().2.to_vec()
}

#[test]
fn a_log_extended_back_from_the_history_gives_what_a_resuming_view_missed() {
    let history = [
        tile(1, 0, 0, 1),
        tile(2, 1, 0, 2),
        tile(3, 0, 0, 3),
        tile(4, 1, 1, 1),
    ];
    // A gateway that loaded the board at seq 3 (a restart, say), then heard seq 4.
    let board = Board::new(
        Snapshot {
            settings: settings(0.0),
            seq: 3,
            bits: bits_after(&history, 3),
            freezing: None,
            recent: Vec::new(),
        },
        100,
    );
    board.apply(&history[3..]).unwrap();
    // A client that had seq 1 (from another gateway).
    let mut cursor = board.cursor_at(1);
    assert!(board.is_behind(&cursor) && board.may_backfill(1));
    let (epoch, floor) = board.log_floor();
    assert_eq!(floor, 3);
    let past = |seq: i64| Past {
        seq,
        width: 2,
        height: 2,
        bits: bits_after(&history, seq as usize),
    };
    assert!(
        !board.backfill(epoch, &past(1), &history[1..2]),
        "short of the floor"
    );
    assert!(
        !board.backfill(epoch + 1, &past(1), &history[1..3]),
        "another epoch"
    );
    assert!(board.is_behind(&cursor), "refusals change nothing");
    assert!(board.backfill(epoch, &past(1), &history[1..3]));
    assert!(!board.is_behind(&cursor));
    let events = collect(&board, &mut cursor, false);
    // The settings first: they may have changed in the stretch the log did not hold.
    assert_eq!(events[0]["action"], "settings", "{events}");
    let got: Vec<(i64, i64, i64)> = events
        .as_array()
        .unwrap()
        .iter()
        .skip(1)
        .map(|e| {
            (
                e["obj"]["seq"].as_i64().unwrap(),
                e["obj"]["color"].as_i64().unwrap(),
                e["old"]["color"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [(2, 2, 0), (3, 3, 1), (4, 1, 0)],
        "seq, colour, old colour"
    );
    // A log too small for the stretch is not extended: that view resets.
    let small = Board::new(
        Snapshot {
            settings: settings(0.0),
            seq: 3,
            bits: bits_after(&history, 3),
            freezing: None,
            recent: Vec::new(),
        },
        1,
    );
    assert!(!small.may_backfill(1));
    let mut cursor = small.cursor_at(1);
    assert_eq!(collect(&small, &mut cursor, false)[0]["action"], "reset");
}

#[test]
fn compact_runs_are_split_by_settings_changes_and_keep_the_order() {
    let board = empty_board(0);
    let (mut compact, _) = board.initial_state();
    let mut qik = compact;
    board.apply(&[tile(1, 0, 0, 1), tile(2, 1, 0, 2)]).unwrap();
    board.set_settings(settings(5.0));
    board.apply(&[tile(3, 0, 0, 3)]).unwrap();
    let events = collect(&board, &mut compact, true);
    assert_eq!(
        events[0],
        json!({"key": "board/3/compact", "action": "tiles", "seq": [1, 2], "tiles": [[0, 0, 1], [1, 0, 2]]})
    );
    assert_eq!(
        (
            events[1]["action"].clone(),
            events[1]["obj"]["cooldown"].clone()
        ),
        (json!("settings"), json!(5.0))
    );
    assert_eq!(
        events[2],
        json!({"key": "board/3/compact", "action": "tiles", "seq": [3, 3], "tiles": [[0, 0, 3]]})
    );
    assert_eq!(
        collect(&board, &mut compact, true),
        json!([]),
        "nothing twice"
    );
    let events = collect(&board, &mut qik, false);
    let olds: Vec<Value> = events
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["old"]["color"].clone())
        .collect();
    assert_eq!(olds, [json!(0), json!(0), Value::Null, json!(1)]);
    assert_eq!(events[0]["obj"]["placed_at"], "2025-11-29T17:23:20.123456Z");
}

#[test]
fn the_stream_must_continue_the_copy() {
    let board = empty_board(10);
    assert_eq!(
        board.apply(&[tile(9, 0, 0, 1), tile(10, 0, 0, 1)]),
        Ok(0),
        "already applied"
    );
    assert_eq!(
        board.apply(&[tile(12, 0, 0, 1)]),
        Err(Discontinuity::Gap { from: 11 })
    );
    assert_eq!(
        board.apply(&[tile(11, 2, 0, 1)]),
        Err(Discontinuity::Inconsistent)
    );
    assert_eq!(board.seq(), 10);
    assert_eq!(board.apply(&[tile(11, 1, 1, 3), tile(12, 0, 1, 2)]), Ok(2));
    assert_eq!(board.packed().2.as_ref(), &[0b0000_1011]);
}

/// The 2x2 board of `empty_board` with freeze_after = 1 s, at seq 0, at time 0.
fn freezing_board(capacity: u64) -> Board {
    let mut settings = settings(0.0);
    settings.freeze_after = Some(1.0);
    let freezing = Freezing::new(1_000_000, 2, 2, 0, &[], 0);
    let snapshot = Snapshot {
        settings,
        seq: 0,
        bits: vec![0],
        freezing: Some(freezing),
        recent: Vec::new(),
    };
    Board::new(snapshot, capacity)
}

fn placed_at(seq: i64, x: i32, y: i32, color: i32, at: i64) -> Placement {
    Placement {
        at,
        ..tile(seq, x, y, color)
    }
}

#[test]
fn tiles_that_rest_are_announced_frozen_in_order_and_in_the_initial_state() {
    let board = freezing_board(100);
    let (mut compact, state) = board.initial_state();
    let state: Value = serde_json::from_slice(&state).unwrap();
    assert_eq!(
        (state["freeze_after"].clone(), state["frozen"].clone()),
        (json!(1.0), json!("AA=="))
    );
    let mut qik = compact;
    board
        .apply(&[placed_at(1, 1, 0, 2, 0), placed_at(2, 0, 1, 0, 0)])
        .unwrap();
    board.freeze_due(999_999);
    assert!(!board.is_frozen(1, 0), "not before its second");
    board.freeze_due(1_000_000);
    assert!(
        board.is_frozen(1, 0) && !board.is_frozen(0, 1),
        "colour 0 never freezes"
    );
    board.apply(&[placed_at(3, 0, 0, 1, 1_500_000)]).unwrap();
    let events = collect(&board, &mut compact, true);
    assert_eq!(
        events[1],
        json!({"key": "board/3/compact", "action": "frozen", "obj": {"seq": 2, "tiles": [[1, 0]]}})
    );
    assert_eq!(events[2]["seq"], json!([3, 3]));
    let actions: Vec<Value> = collect(&board, &mut qik, false)
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["action"].clone())
        .collect();
    assert_eq!(
        actions,
        [
            json!("update"),
            json!("update"),
            json!("frozen"),
            json!("update")
        ]
    );
    // A fresh view starts from a state that has the frozen tile: bit 1 of the bitmap.
    let (_, state) = board.initial_state();
    let state: Value = serde_json::from_slice(&state).unwrap();
    assert_eq!(state["frozen"], json!("QA=="));
    // A repair changes the frozen tile: it is not frozen any more.
    board.apply(&[placed_at(4, 1, 0, 3, 2_000_000)]).unwrap();
    assert!(!board.is_frozen(1, 0));
    assert!(!board.is_frozen(5, 5), "outside the board");
}

#[test]
fn a_view_that_missed_a_dropped_notice_gets_a_reset() {
    let board = freezing_board(2);
    let (mut behind, _) = board.initial_state();
    board
        .apply(&[placed_at(1, 0, 0, 1, 0), placed_at(2, 1, 0, 1, 0)])
        .unwrap();
    let (mut current, _) = board.initial_state();
    // Two tiles freeze (weight 2): the log drops the placements, then the notice.
    board.freeze_due(1_000_000);
    board.set_settings(Settings {
        cooldown: 1.0,
        ..(*board.settings()).clone()
    });
    assert_eq!(collect(&board, &mut behind, true)[0]["action"], "reset");
    let events = collect(&board, &mut current, true);
    assert_eq!(
        events[0]["action"], "reset",
        "the frozen notice was dropped: {events}"
    );
    assert_eq!(collect(&board, &mut current, true), json!([]));
}

#[test]
fn sessions_hear_how_many_watch_at_most_every_so_often() {
    let board = Arc::new(empty_board(0));
    let (mut cursor, _) = board.initial_state();
    board.set_watchers(2);
    let t0 = Instant::now();
    let every = Duration::from_secs(2);
    board.tell_watching(t0, every);
    let events = collect(&board, &mut cursor, true);
    assert_eq!(
        events,
        json!([{"key": "board/3/compact", "action": "presence", "obj": {"watching": 2}}])
    );
    let (_, state) = board.initial_state();
    let state: Value = serde_json::from_slice(&state).unwrap();
    assert_eq!(state["watching"], 2);
    board.set_watchers(1);
    board.tell_watching(t0 + Duration::from_secs(1), every);
    assert_eq!(collect(&board, &mut cursor, true), json!([]), "too soon");
    board.tell_watching(t0 + every, every);
    assert_eq!(
        collect(&board, &mut cursor, false)[0]["obj"],
        json!({"watching": 1})
    );
    board.tell_watching(t0 + 2 * every, every);
    assert_eq!(
        collect(&board, &mut cursor, true),
        json!([]),
        "unchanged: nothing"
    );
    // A view that did not ask never gets them.
    let (mut quiet, _) = board.initial_state();
    board.set_watchers(0);
    board.tell_watching(t0 + 3 * every, every);
    let mut out = ArrayBuilder::new();
    board.collect(&mut quiet, true, false, &mut out);
    assert_eq!(out.count(), 0);
    assert_eq!(
        collect(&board, &mut quiet, true),
        json!([]),
        "and its cursor moved past"
    );
}

#[test]
fn a_reload_resets_every_view_with_the_new_state() {
    let board = empty_board(0);
    let (mut cursor, _) = board.initial_state();
    board.reload(Snapshot {
        settings: settings(1.0),
        seq: 7,
        bits: vec![0xff],
        freezing: None,
        recent: Vec::new(),
    });
    let events = collect(&board, &mut cursor, true);
    assert_eq!(events.as_array().unwrap().len(), 1);
    assert_eq!(events[0]["action"], "reset");
    assert_eq!(
        (
            events[0]["obj"]["seq"].clone(),
            events[0]["obj"]["bits"].clone()
        ),
        (json!(7), json!("/w=="))
    );
    assert_eq!(collect(&board, &mut cursor, true), json!([]));
}
