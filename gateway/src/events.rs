//! The events of list views as clients get them, serialized with serde in one place.
//! (A board's events are written by `board.rs`, which serializes each tile once for every
//! session in both forms.)
//!
//! ```json
//! {"key":"view/top/10","action":"insert","position":0,"obj":{"id":7,"title":"b","viewers":30}}
//! {"key":"view/top/10","action":"update","position":0,"from":2,"obj":{…},"old":{…}}
//! {"key":"view/top/10","action":"delete","position":9,"obj":{…}}
//! {"key":"view/top/10","action":"ping"}
//! {"key":"view/top/10","action":"reset","obj":[…rows…]}
//! {"key":"view/top/10","action":"deleted"}
//! ```

use bytes::Bytes;
use serde::Serialize;
use serde_json::Value;

/// A row of a list view: its `id` (the key, as JSON text, to compare) and the whole row.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub id: String,
    pub value: Value,
}

impl Row {
    pub fn new(value: Value) -> Self {
        let id = serde_json::to_string(&value["id"]).expect("JSON values serialize");
        Row { id, value }
    }
}

/// What a list client is told. Positions count from 0 in the list as it is just before
/// the event (events apply in order): `insert` puts `obj` at `position`; `update`
/// replaces the row (at `from` when it moved, else at `position`) with `obj` at
/// `position`; `delete` removes the row at `position` (`obj` is its last state).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "action", rename_all = "lowercase")]
pub enum ClientEvent {
    Insert {
        position: usize,
        obj: Value,
    },
    Update {
        position: usize,
        #[serde(skip_serializing_if = "Option::is_none")]
        from: Option<usize>,
        obj: Value,
        old: Value,
    },
    Delete {
        position: usize,
        obj: Value,
    },
    Ping,
    Deleted,
}

#[derive(Serialize)]
struct Keyed<'a> {
    key: &'a str,
    #[serde(flatten)]
    event: &'a ClientEvent,
}

impl ClientEvent {
    pub fn to_bytes(&self, key: &str) -> Bytes {
        serde_json::to_vec(&Keyed { key, event: self })
            .expect("events are JSON values")
            .into()
    }

    /// `{"key":…,"action":"reset","obj":` — the window follows, then `}`.
    pub fn reset_prefix(key: &str) -> Bytes {
        let key = serde_json::to_string(key).expect("strings serialize");
        format!("{{\"key\":{key},\"action\":\"reset\",\"obj\":").into()
    }
}
