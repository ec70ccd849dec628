//! The NOTIFY payloads pgplace sends on channel [`CHANNEL`], one JSON object each:
//!
//! ```json
//! {"type":"tiles","v":1,"board":1,"first":101,"last":102,"at":1764437000123456,"tiles":[[3,4,5,42],[0,0,15,7]]}
//! {"type":"tiles","v":1,"board":1,"first":103,"last":9102}
//! {"type":"board","v":1,"board":1,"seq":9102,"change":"settings"}
//! {"type":"changes","v":1,"pos":17,"at":1764437000123456,"staged":[{"relid":16390,"table":"streams","rows":[["update",{"id":1},{"viewers":11},{"viewers":10}]]}]}
//! {"type":"changes","v":1,"pos":18,"at":1764437000123999,"relids":[16390]}
//! {"type":"view","v":1,"name":"top_live","change":"delete"}
//! ```
//!
//! A `tiles` payload covers the placements `first..=last` of one board, consecutive in seq.
//! With `tiles` present it carries all of them, in seq order, as `[x, y, color, user_id]`,
//! all placed at `at` (microseconds since the Unix epoch); without `tiles` (a statement that
//! placed more than [`MAX_INLINE_TILES`] tiles) only the range. The gateway reads neither
//! (any login may send a payload): a `tiles` payload newer than its copy of the board makes
//! it read the placements from `place.placements`; the tiles are for other listeners. A `board` payload says the board's settings changed (or the board
//! was created or deleted) when its seq was `seq`. Every payload is shorter than the
//! 8,000 bytes that NOTIFY accepts.
//!
//! A `changes` payload is not a notification: it is what `place.change_feed` reads of one
//! position of the change log (the transactions of watched tables that committed between
//! two ticks). It carries the changes when they fit, as the log staged them (`staged`: per
//! statement and table, rows of `[action, key, obj, old]`); otherwise only the tables' oids
//! (`relids`), and the changes are read with `place.changes_since`. A `view` payload says a
//! list view was created (`insert`), defined anew (`update`) or dropped (`delete`). Both
//! are written by SQL (`extension/schema/watch.sql`, `views.sql`); this crate only reads them.

use serde::{Deserialize, Serialize};

/// The one channel every pgplace notification is sent on.
pub const CHANNEL: &str = "pgplace";

/// The payload format's version, sent as `"v"`.
pub const VERSION: u32 = 1;

/// NOTIFY rejects (and aborts the writer's transaction for) payloads of 8,000 bytes or more.
pub const MAX_PAYLOAD_BYTES: usize = 7999;

/// Beyond this many tiles in one statement, payloads refer to the history instead of
/// carrying the tiles, so a bulk load never floods the notification queue.
pub const MAX_INLINE_TILES: usize = 4096;

/// Microseconds between the Unix epoch and PostgreSQL's (2000-01-01).
pub const PG_EPOCH_OFFSET_US: i64 = 946_684_800_000_000;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Payload {
    Tiles(TilesPayload),
    Board(BoardPayload),
    Changes(ChangesPayload),
    View(ViewPayload),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChangesPayload {
    pub v: u32,
    pub pos: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub staged: Option<Vec<Staged>>,
    /// The changes as 0.8.0's `change_feed` wrote them, an object each: read, so that a
    /// gateway of this version follows a database not yet updated. Never written.
    #[serde(default, skip_serializing)]
    pub changes: Option<Vec<NamedChange>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relids: Option<Vec<u32>>,
}

impl ChangesPayload {
    /// The tables the commit changed (each once).
    pub fn tables(&self) -> Vec<u32> {
        let mut tables: Vec<u32> = match (&self.staged, &self.changes, &self.relids) {
            (None, None, Some(relids)) => relids.clone(),
            (staged, changes, _) => staged
                .iter()
                .flatten()
                .map(|s| s.relid)
                .chain(changes.iter().flatten().map(|c| c.relid))
                .collect(),
        };
        tables.sort_unstable();
        tables.dedup();
        tables
    }

    /// The changes of `table`, in the order they were made; None when the payload names
    /// the tables only.
    pub fn changes_of(&self, table: u32) -> Option<impl Iterator<Item = &Change>> {
        if self.staged.is_none() && self.changes.is_none() {
            return None;
        }
        let staged = self.staged.iter().flatten();
        let named = self.changes.iter().flatten();
        Some(
            staged
                .filter(move |s| s.relid == table)
                .flat_map(|s| &s.rows)
                .chain(named.filter(move |c| c.relid == table).map(|c| &c.change)),
        )
    }
}

/// Some of one statement's changes to one table, as pgplace staged them in its log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Staged {
    pub relid: u32,
    pub table: String,
    pub rows: Vec<Change>,
}

/// One change as 0.8.0 wrote it: `{"table":…,"relid":…,"action":…,"key":…,"obj":…,"old":…}`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct NamedChange {
    pub table: String,
    pub relid: u32,
    #[serde(flatten)]
    pub change: Change,
}

/// One row's change: its key, and the watched columns after (`obj`) and before (`old`),
/// written as the array `[action, key, obj, old]` (one change is four values, not an
/// object that repeats their names).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Change {
    pub action: ChangeAction,
    pub key: serde_json::Value,
    #[serde(default)]
    pub obj: serde_json::Value,
    #[serde(default)]
    pub old: serde_json::Value,
}

impl Serialize for Change {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        (&self.action, &self.key, &self.obj, &self.old).serialize(serializer)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeAction {
    Insert,
    Update,
    Delete,
    Truncate,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ViewPayload {
    pub v: u32,
    pub name: String,
    pub change: ViewChange,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ViewChange {
    Insert,
    Update,
    Delete,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TilesPayload {
    pub v: u32,
    pub board: i64,
    pub first: i64,
    pub last: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tiles: Option<Vec<Tile>>,
}

/// `[x, y, color, user_id]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tile(pub i32, pub i32, pub i32, pub i64);

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BoardPayload {
    pub v: u32,
    pub board: i64,
    pub seq: i64,
    pub change: BoardChange,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BoardChange {
    Created,
    Settings,
    Deleted,
}

/// One history row, as the notification trigger sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placement {
    pub board: i64,
    pub seq: i64,
    pub x: i32,
    pub y: i32,
    pub color: i32,
    pub user: i64,
    /// Microseconds since the Unix epoch.
    pub at: i64,
}

impl Payload {
    pub fn decode(text: &str) -> Result<Payload, serde_json::Error> {
        serde_json::from_str(text)
    }

    pub fn encode(&self) -> String {
        serde_json::to_string(self).expect("payloads hold only numbers and fixed strings")
    }
}

impl BoardPayload {
    pub fn new(board: i64, seq: i64, change: BoardChange) -> Self {
        BoardPayload {
            v: VERSION,
            board,
            seq,
            change,
        }
    }
}

/// The payloads announcing `rows`, which must be sorted by (board, seq).
pub fn encode_placements(rows: &[Placement]) -> Vec<String> {
    let inline = rows.len() <= MAX_INLINE_TILES;
    let mut payloads = Vec::new();
    let mut start = 0;
    while start < rows.len() {
        let end = run_end(rows, start, inline);
        if inline {
            encode_run_inline(&rows[start..end], &mut payloads);
        } else {
            let tiles = TilesPayload {
                v: VERSION,
                board: rows[start].board,
                first: rows[start].seq,
                last: rows[end - 1].seq,
                at: None,
                tiles: None,
            };
            payloads.push(Payload::Tiles(tiles).encode());
        }
        start = end;
    }
    payloads
}

/// The end of the run starting at `start`: same board, consecutive seqs and, when the
/// tiles travel inline, the same placement time.
fn run_end(rows: &[Placement], start: usize, same_time: bool) -> usize {
    let first = rows[start];
    let mut end = start + 1;
    while end < rows.len() {
        let row = rows[end];
        let consecutive = row.board == first.board && row.seq == rows[end - 1].seq + 1;
        if !consecutive || (same_time && row.at != first.at) {
            break;
        }
        end += 1;
    }
    end
}

fn encode_run_inline(run: &[Placement], payloads: &mut Vec<String>) {
    let payload_for = |rows: &[Placement]| TilesPayload {
        v: VERSION,
        board: rows[0].board,
        first: rows[0].seq,
        last: rows[rows.len() - 1].seq,
        at: Some(rows[0].at),
        tiles: Some(
            rows.iter()
                .map(|r| Tile(r.x, r.y, r.color, r.user))
                .collect(),
        ),
    };
    // The longest header this run can need: `last` written with the most digits.
    let header_bound = Payload::Tiles(TilesPayload {
        last: i64::MIN,
        tiles: Some(Vec::new()),
        ..payload_for(&run[..1])
    })
    .encode()
    .len();
    let mut chunk_start = 0;
    let mut size = header_bound;
    for (i, row) in run.iter().enumerate() {
        let tile = Tile(row.x, row.y, row.color, row.user);
        let tile_len = serde_json::to_string(&tile).expect("numbers only").len() + 1;
        if i > chunk_start && size + tile_len > MAX_PAYLOAD_BYTES {
            payloads.push(Payload::Tiles(payload_for(&run[chunk_start..i])).encode());
            chunk_start = i;
            size = header_bound;
        }
        size += tile_len;
    }
    payloads.push(Payload::Tiles(payload_for(&run[chunk_start..])).encode());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_payloads_decode_in_both_forms() {
        // As place.change_feed writes them (tests/regress/expected/watching.out): three
        // staged rows of two tables, the first table's in two of them.
        let inline = r#"{"type":"changes","v":1,"pos":17,"at":1764437000123456,"staged":[{"relid":16390,"table":"streams","rows":[["update",{"id":1},{"viewers":11},{"viewers":10}]]},{"relid":16399,"table":"s2","rows":[["delete",{"id":2},null,{"viewers":3}]]},{"relid":16390,"table":"streams","rows":[["insert",{"id":3},{"viewers":0},null]]}]}"#;
        let Payload::Changes(p) = Payload::decode(inline).unwrap() else {
            panic!("a changes payload")
        };
        assert_eq!(p.pos, 17);
        assert_eq!(p.tables(), [16390, 16399]);
        let streams: Vec<&Change> = p.changes_of(16390).unwrap().collect();
        assert_eq!(streams.len(), 2);
        assert_eq!(streams[0].action, ChangeAction::Update);
        assert_eq!(streams[0].old, serde_json::json!({"viewers": 10}));
        assert_eq!(streams[1].key, serde_json::json!({"id": 3}));
        let s2: Vec<&Change> = p.changes_of(16399).unwrap().collect();
        assert_eq!(s2[0].obj, serde_json::Value::Null);
        assert_eq!(p.changes_of(1).unwrap().count(), 0);
        assert_eq!(
            Payload::decode(&Payload::Changes(p.clone()).encode()).unwrap(),
            Payload::Changes(p)
        );
        // As 0.8.0's change_feed wrote them, for a database not yet updated.
        let named = r#"{"v": 1, "at": 1764437000123456, "pos": 17, "type": "changes", "changes": [{"key": {"id": 1}, "obj": {"viewers": 11}, "old": {"viewers": 10}, "relid": 16390, "table": "streams", "action": "update"}, {"key": {"id": 2}, "obj": null, "old": {"viewers": 3}, "relid": 16399, "table": "s2", "action": "delete"}]}"#;
        let Payload::Changes(p) = Payload::decode(named).unwrap() else {
            panic!("a changes payload")
        };
        assert_eq!(p.tables(), [16390, 16399]);
        let streams: Vec<&Change> = p.changes_of(16390).unwrap().collect();
        assert_eq!(streams.len(), 1);
        assert_eq!(
            (streams[0].action, &streams[0].old),
            (ChangeAction::Update, &serde_json::json!({"viewers": 10}))
        );
        assert_eq!(
            p.changes_of(16399).unwrap().next().unwrap().obj,
            serde_json::Value::Null
        );
        let reference =
            r#"{"v": 1, "at": 1, "pos": 18, "type": "changes", "relids": [16390, 16390]}"#;
        let Payload::Changes(p) = Payload::decode(reference).unwrap() else {
            panic!("a changes payload")
        };
        assert_eq!((p.pos, p.tables()), (18, vec![16390]));
        assert!(p.changes_of(16390).is_none());
        let view = r#"{"v": 1, "name": "top", "type": "view", "change": "delete"}"#;
        assert_eq!(
            Payload::decode(view).unwrap(),
            Payload::View(ViewPayload {
                v: 1,
                name: "top".into(),
                change: ViewChange::Delete
            })
        );
    }

    fn row(seq: i64, at: i64) -> Placement {
        Placement {
            board: 1,
            seq,
            x: 999,
            y: 4095,
            color: 255,
            user: i64::MAX,
            at,
        }
    }

    fn decode_tiles(text: &str) -> TilesPayload {
        match Payload::decode(text).unwrap() {
            Payload::Tiles(t) => t,
            other => panic!("expected tiles, got {other:?}"),
        }
    }

    #[test]
    fn a_small_batch_is_one_payload_with_every_tile() {
        let rows: Vec<Placement> = (1..=100).map(|s| row(s, 5)).collect();
        let payloads = encode_placements(&rows);
        assert_eq!(payloads.len(), 1);
        let p = decode_tiles(&payloads[0]);
        assert_eq!((p.first, p.last, p.at), (1, 100, Some(5)));
        assert_eq!(p.tiles.unwrap().len(), 100);
    }

    #[test]
    fn big_batches_split_below_the_notify_limit_and_cover_every_seq_once() {
        let rows: Vec<Placement> = (10..10 + MAX_INLINE_TILES as i64)
            .map(|s| row(s, 5))
            .collect();
        let payloads = encode_placements(&rows);
        assert!(payloads.len() > 1);
        let mut next = 10;
        for text in &payloads {
            assert!(text.len() <= MAX_PAYLOAD_BYTES, "{} bytes", text.len());
            let p = decode_tiles(text);
            assert_eq!(p.first, next);
            let tiles = p.tiles.unwrap();
            assert_eq!(tiles.len() as i64, p.last - p.first + 1);
            assert!(tiles.iter().all(|t| *t == Tile(999, 4095, 255, i64::MAX)));
            next = p.last + 1;
        }
        assert_eq!(next, 10 + MAX_INLINE_TILES as i64);
    }

    #[test]
    fn runs_split_at_gaps_other_boards_and_other_times() {
        let mut rows = vec![row(1, 5), row(2, 5), row(3, 6), row(5, 6)];
        rows.push(Placement {
            board: 2,
            ..row(6, 6)
        });
        let ranges: Vec<(i64, i64, i64)> = encode_placements(&rows)
            .iter()
            .map(|t| decode_tiles(t))
            .map(|p| (p.board, p.first, p.last))
            .collect();
        assert_eq!(ranges, vec![(1, 1, 2), (1, 3, 3), (1, 5, 5), (2, 6, 6)]);
    }

    #[test]
    fn huge_statements_refer_to_the_history() {
        let rows: Vec<Placement> = (1..=MAX_INLINE_TILES as i64 + 1)
            .map(|s| row(s, s))
            .collect();
        let payloads = encode_placements(&rows);
        assert_eq!(payloads.len(), 1);
        let p = decode_tiles(&payloads[0]);
        assert_eq!(
            (p.first, p.last, p.at, p.tiles),
            (1, MAX_INLINE_TILES as i64 + 1, None, None)
        );
    }

    #[test]
    fn board_payloads_round_trip() {
        let p = Payload::Board(BoardPayload::new(3, 77, BoardChange::Settings));
        assert_eq!(
            p.encode(),
            r#"{"type":"board","v":1,"board":3,"seq":77,"change":"settings"}"#
        );
        assert_eq!(Payload::decode(&p.encode()).unwrap(), p);
    }

    #[test]
    fn malformed_payloads_are_errors_not_panics() {
        for bad in [
            "",
            "{}",
            r#"{"type":"tiles"}"#,
            r#"{"type":"nope","v":1}"#,
            "[1,2]",
        ] {
            assert!(Payload::decode(bad).is_err(), "{bad}");
        }
    }
}
