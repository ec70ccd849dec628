//! The events of list views and board regions as clients get them, serialized with serde
//! in one place. (A whole board's events are written by `mirror/event_log.rs`, which
//! serializes each tile once for every session in both forms; they have the same shape
//! as [`RegionEvent`]'s.)
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
use std::sync::Arc;

/// A row of a list view: its `id` (the key, as JSON text, to compare) and the whole row.
/// Shared, not copied: the instances of a view at smaller limits hold the same rows as
/// the one read from the database (`ListView::derive`), whatever their size.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub id: Arc<str>,
    pub value: Arc<Value>,
}

impl Row {
    pub fn new(value: Value) -> Self {
        let id = serde_json::to_string(&value["id"]).expect("JSON values serialize");
        Row {
            id: id.into(),
            value: Arc::new(value),
        }
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

/// What a region's client is told (the board's own events, cut to the rectangle).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "action", rename_all = "lowercase")]
pub enum RegionEvent<'a> {
    /// One tile, Qik's form: what it was and what it is.
    Update {
        old: OldTile,
        obj: NewTile,
    },
    /// The tiles inside among placements `seq[0]..=seq[1]`, compact form.
    Tiles {
        seq: [i64; 2],
        tiles: &'a [[i32; 3]],
    },
    /// The board's settings changed (`obj`: settings and seq).
    Settings {
        obj: &'a Value,
    },
    /// Tiles inside froze (`freeze_after`) when the board's seq was `obj.seq`.
    Frozen {
        obj: FrozenTiles<'a>,
    },
    Deleted,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FrozenTiles<'a> {
    pub seq: i64,
    pub tiles: &'a [[i32; 2]],
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OldTile {
    pub x: i32,
    pub y: i32,
    pub color: i32,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NewTile {
    pub x: i32,
    pub y: i32,
    pub color: i32,
    pub user: i64,
    pub seq: i64,
    pub placed_at: String,
}

#[derive(Serialize)]
struct Keyed<'a, E: Serialize> {
    key: &'a str,
    #[serde(flatten)]
    event: &'a E,
}

/// `{"key": key, "action": …, …}`.
pub fn keyed_bytes<E: Serialize>(key: &str, event: &E) -> Bytes {
    serde_json::to_vec(&Keyed { key, event })
        .expect("events are JSON values")
        .into()
}

impl RegionEvent<'_> {
    pub fn to_bytes(&self, key: &str) -> Bytes {
        keyed_bytes(key, self)
    }
}

impl ClientEvent {
    pub fn to_bytes(&self, key: &str) -> Bytes {
        keyed_bytes(key, self)
    }
}
