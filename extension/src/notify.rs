//! Change notifications on channel `pgplace`: placements are announced by the library as
//! it writes them ([`announce_placements`]), board changes by the triggers of
//! `../schema/notify.sql`, which call the payload builders here; the format itself is
//! `pgplace_core::payload`.

use crate::input::{fail, required_elements};
use crate::item::Item;
use pgplace_core::payload::{
    encode_placements, BoardChange, BoardPayload, Payload, Placement, CHANNEL, PG_EPOCH_OFFSET_US,
};
use pgrx::prelude::*;
use pgrx::{pg_sys, PgSqlErrorCode};

/// Announces placements `first_seq`, `first_seq + 1`, … (one per accepted item, all stamped
/// `stamp`) as one set of payloads, sent when the transaction commits. Since 0.8.4 the
/// library does this itself where a statement trigger on `place.placements` did before: the
/// trigger's transition table, PL/pgSQL call and seven array_aggs cost a place() call a
/// third of its history INSERT, and only the library writes placements.
pub fn announce_placements(
    board_id: i64,
    first_seq: i64,
    accepted: &[&Item],
    stamp: pg_sys::TimestampTz,
) {
    let at = stamp + PG_EPOCH_OFFSET_US;
    let rows: Vec<Placement> = accepted
        .iter()
        .zip(first_seq..)
        .map(|(item, seq)| Placement {
            board: board_id,
            seq,
            x: item.x,
            y: item.y,
            color: item.color,
            user: item.user,
            at,
        })
        .collect();
    for payload in encode_placements(&rows) {
        notify(&payload);
    }
}

/// NOTIFY pgplace, payload: pg_notify itself, so its checks (length, a standby) are kept.
fn notify(payload: &str) {
    // SAFETY: pg_notify takes two text arguments, both given and non-NULL.
    unsafe {
        pgrx::direct_function_call_as_datum(
            pg_sys::pg_notify,
            &[CHANNEL.into_datum(), payload.into_datum()],
        );
    }
}

/// The payloads announcing the rows one statement inserted into `place.placements`,
/// given column by column in any order: what the statement trigger of schemas before 0.8.4
/// sends.
#[pg_extern(immutable, parallel_safe, strict, name = "_placement_payloads")]
pub fn placement_payloads(
    board_ids: Vec<Option<i64>>,
    seqs: Vec<Option<i64>>,
    xs: Vec<Option<i32>>,
    ys: Vec<Option<i32>>,
    colors: Vec<Option<i32>>,
    user_ids: Vec<Option<i64>>,
    placed_at: Vec<Option<TimestampWithTimeZone>>,
) -> Vec<String> {
    // Elements as Options: a NULL element is a bad argument (22004), where pgrx's
    // conversion to Vec<i64> would fail with an internal error (XX000).
    let board_ids = required_elements("board_ids", Some(board_ids));
    let seqs = required_elements("seqs", Some(seqs));
    let xs = required_elements("xs", Some(xs));
    let ys = required_elements("ys", Some(ys));
    let colors = required_elements("colors", Some(colors));
    let user_ids = required_elements("user_ids", Some(user_ids));
    let placed_at = required_elements("placed_at", Some(placed_at));
    let lens = [
        seqs.len(),
        xs.len(),
        ys.len(),
        colors.len(),
        user_ids.len(),
        placed_at.len(),
    ];
    if lens.iter().any(|len| *len != board_ids.len()) {
        fail(
            PgSqlErrorCode::ERRCODE_ARRAY_ELEMENT_ERROR,
            "_placement_payloads takes seven arrays of the same length".to_string(),
        );
    }
    let mut rows: Vec<Placement> = (0..board_ids.len())
        .map(|i| Placement {
            board: board_ids[i],
            seq: seqs[i],
            x: xs[i],
            y: ys[i],
            color: colors[i],
            user: user_ids[i],
            at: i64::from(placed_at[i]) + PG_EPOCH_OFFSET_US,
        })
        .collect();
    rows.sort_unstable_by_key(|row| (row.board, row.seq));
    encode_placements(&rows)
}

/// The payload saying board `board_id` was created, changed its settings, or was deleted.
#[pg_extern(immutable, parallel_safe, strict, name = "_board_payload")]
pub fn board_payload(board_id: i64, seq: i64, change: &str) -> String {
    let change = match change {
        "created" => BoardChange::Created,
        "deleted" => BoardChange::Deleted,
        "settings" => BoardChange::Settings,
        other => crate::input::invalid(format!(
            "change = '{other}' is not one of: created, settings, deleted"
        )),
    };
    Payload::Board(BoardPayload::new(board_id, seq, change)).encode()
}
