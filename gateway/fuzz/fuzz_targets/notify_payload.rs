//! What the LISTEN connection hears, read as the listener reads it (without a database):
//! payloads on channel `pgplace` (`listener::decode`, then for `changes` payloads, which
//! the change feed reads from the log in the same form, `ChangesPayload::tables` and
//! `lists::changed_rows`) and messages on `pgplace_sessions` (`session_store::Message::parse`).
//!
//! The input is read twice: as text, each line one notification in the order heard (and
//! the whole text as one too), on both channels; and as the choices that build well-formed
//! payloads and messages (`arbitrary`), which must read back as they were written.
//! Never a panic.

#![no_main]

use arbitrary::{Arbitrary, Unstructured};
use libfuzzer_sys::fuzz_target;
use pgplace_core::payload::{
    BoardChange, BoardPayload, Change, ChangeAction, ChangesPayload, Payload, Staged, Tile,
    TilesPayload, ViewChange, ViewPayload,
};
use pgplace_gateway::listener::{decode, Notice};
use pgplace_gateway::sessions::store::Message;
use pgplace_gateway::views::list::changes::changed_rows;
use serde_json::{Map, Value};

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        for line in text.split('\n') {
            hear(line);
        }
        if text.contains('\n') {
            hear(text);
        }
    }
    let mut u = Unstructured::new(data);
    if let Ok(generated) = Generated::arbitrary(&mut u) {
        round_trip(generated);
    }
});

/// One notification's text, on either channel.
fn hear(text: &str) {
    if let Some(message) = Message::parse(text) {
        assert_eq!(Message::parse(&sent(&message)), Some(message), "{text:?}");
    }
    let Ok(notice) = decode(text) else { return };
    match notice {
        Notice::Changes(payload) => {
            let tables = payload.tables();
            assert!(tables.windows(2).all(|w| w[0] < w[1]), "{tables:?}");
            for table in tables {
                let Some(rows) = changed_rows(&payload, table) else {
                    continue;
                };
                let changes = payload.changes_of(table).expect("rows come from changes");
                let most = 2 * changes.count();
                let rows = rows.as_array().expect("rows are an array");
                assert!(rows.len() <= most && rows.iter().all(Value::is_object));
            }
        }
        _ => {}
    }
}

/// A message as the database sends it (`extension/schema/sessions.sql`).
fn sent(message: &Message) -> String {
    match message {
        Message::Gone { public_id } => format!("gone {public_id}"),
        Message::Drop { public_id, gateway } => format!("drop {public_id} {gateway:x}"),
        Message::Handed { public_id, gateway } => format!("handed {public_id} {gateway:x}"),
    }
}

#[derive(Debug, Arbitrary)]
enum Generated {
    Payload(GenPayload),
    Message(GenMessage),
}

#[derive(Debug, Arbitrary)]
enum GenMessage {
    Gone(i64),
    Drop(i64, u64),
    Handed(i64, u64),
}

#[derive(Debug, Arbitrary)]
enum GenPayload {
    /// Tiles from `first`, `last` the last of them when `exact` and it fits.
    Tiles {
        v: u32,
        board: i64,
        first: i64,
        last: i64,
        exact: bool,
        at: Option<i64>,
        tiles: Option<Vec<(i32, i32, i32, i64)>>,
    },
    Board {
        v: u32,
        board: i64,
        seq: i64,
        change: u8,
    },
    Changes {
        v: u32,
        pos: i64,
        at: Option<i64>,
        staged: Option<Vec<GenStaged>>,
        relids: Option<Vec<u32>>,
    },
    View {
        v: u32,
        name: String,
        change: u8,
    },
}

#[derive(Debug, Arbitrary)]
struct GenStaged {
    table: String,
    relid: u32,
    rows: Vec<GenChange>,
}

#[derive(Debug, Arbitrary)]
struct GenChange {
    action: u8,
    key: GenValue,
    obj: GenValue,
    old: GenValue,
}

/// JSON without floats (which need not read back bit for bit).
#[derive(Debug, Arbitrary)]
enum GenValue {
    Null,
    Bool(bool),
    Int(i64),
    Str(String),
    Array(Vec<GenLeaf>),
    Object(Vec<(String, GenLeaf)>),
}

#[derive(Debug, Arbitrary)]
enum GenLeaf {
    Null,
    Bool(bool),
    Int(i64),
    UInt(u64),
    Str(String),
}

impl GenValue {
    fn json(self) -> Value {
        match self {
            GenValue::Null => Value::Null,
            GenValue::Bool(b) => b.into(),
            GenValue::Int(i) => i.into(),
            GenValue::Str(s) => s.into(),
            GenValue::Array(items) => items.into_iter().map(GenLeaf::json).collect(),
            GenValue::Object(fields) => Value::Object(
                fields
                    .into_iter()
                    .map(|(k, v)| (k, v.json()))
                    .collect::<Map<_, _>>(),
            ),
        }
    }
}

impl GenLeaf {
    fn json(self) -> Value {
        match self {
            GenLeaf::Null => Value::Null,
            GenLeaf::Bool(b) => b.into(),
            GenLeaf::Int(i) => i.into(),
            GenLeaf::UInt(u) => u.into(),
            GenLeaf::Str(s) => s.into(),
        }
    }
}

fn round_trip(generated: Generated) {
    match generated {
        Generated::Message(m) => {
            let message = match m {
                GenMessage::Gone(public_id) => Message::Gone { public_id },
                GenMessage::Drop(public_id, gateway) => Message::Drop { public_id, gateway },
                GenMessage::Handed(public_id, gateway) => Message::Handed { public_id, gateway },
            };
            let text = sent(&message);
            assert_eq!(Message::parse(&text), Some(message), "{text:?}");
        }
        Generated::Payload(p) => {
            let payload = payload(p);
            let text = payload.encode();
            assert_eq!(
                Payload::decode(&text).as_ref().ok(),
                Some(&payload),
                "{text}"
            );
            let notice = decode(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(notice, expected(payload), "{text}");
            hear(&text);
        }
    }
}

fn payload(p: GenPayload) -> Payload {
    match p {
        GenPayload::Tiles {
            v,
            board,
            first,
            last,
            exact,
            at,
            tiles,
        } => {
            let tiles: Option<Vec<Tile>> =
                tiles.map(|t| t.into_iter().map(|(x, y, c, u)| Tile(x, y, c, u)).collect());
            let count = tiles.as_ref().map_or(1, Vec::len) as i64;
            let last = match first.checked_add(count - 1) {
                Some(end) if exact => end,
                _ => last,
            };
            Payload::Tiles(TilesPayload {
                v,
                board,
                first,
                last,
                at,
                tiles,
            })
        }
        GenPayload::Board {
            v,
            board,
            seq,
            change,
        } => Payload::Board(BoardPayload {
            v,
            board,
            seq,
            change: [
                BoardChange::Created,
                BoardChange::Settings,
                BoardChange::Deleted,
            ][change as usize % 3],
        }),
        GenPayload::Changes {
            v,
            pos,
            at,
            staged,
            relids,
        } => Payload::Changes(ChangesPayload {
            v,
            pos,
            at,
            staged: staged.map(|staged| {
                staged
                    .into_iter()
                    .map(|s| Staged {
                        table: s.table,
                        relid: s.relid,
                        rows: s
                            .rows
                            .into_iter()
                            .map(|c| Change {
                                action: [
                                    ChangeAction::Insert,
                                    ChangeAction::Update,
                                    ChangeAction::Delete,
                                    ChangeAction::Truncate,
                                ][c.action as usize % 4],
                                key: c.key.json(),
                                obj: c.obj.json(),
                                old: c.old.json(),
                            })
                            .collect(),
                    })
                    .collect()
            }),
            changes: None,
            relids,
        }),
        GenPayload::View { v, name, change } => Payload::View(ViewPayload {
            v,
            name,
            change: [ViewChange::Insert, ViewChange::Update, ViewChange::Delete]
                [change as usize % 3],
        }),
    }
}

/// What the listener should make of a payload: for tiles only the board and the seq it
/// names (what a mirror reads from the history when it is behind that).
fn expected(payload: Payload) -> Notice {
    match payload {
        Payload::Tiles(p) => Notice::Tiles {
            board: p.board,
            last: p.last,
        },
        Payload::Changes(p) => Notice::Changes(p),
        Payload::View(p) => Notice::View(p),
        Payload::Board(p) => Notice::Board(p),
    }
}
