//! A list view client as the README describes it: the rows from `session.subscribe`, then
//! every event applied in order. Checks each event against what the client holds (a
//! delete names the row at its position, an update's `old` is the row it replaces).

use serde_json::Value;

#[derive(Debug, Default, Clone)]
pub struct ListModel {
    pub rows: Vec<Value>,
    pub ended: bool,
    pub resets: usize,
    pub pings: usize,
}

impl ListModel {
    pub fn new(initial: &Value) -> Self {
        ListModel {
            rows: initial.as_array().expect("a list of rows").clone(),
            ..ListModel::default()
        }
    }

    /// Applies one event of this view (the caller filters by key).
    pub fn apply(&mut self, event: &Value) {
        let position = || event["position"].as_u64().expect("a position") as usize;
        match event["action"].as_str().expect("an action") {
            "insert" => {
                assert!(
                    position() <= self.rows.len(),
                    "insert beyond the list: {event}"
                );
                self.rows.insert(position(), event["obj"].clone());
            }
            "update" => {
                let at = event["from"].as_u64().map_or_else(position, |f| f as usize);
                assert_eq!(
                    self.rows.get(at),
                    Some(&event["old"]),
                    "update of a row not held: {event}"
                );
                self.rows.remove(at);
                self.rows.insert(position(), event["obj"].clone());
            }
            "delete" => {
                assert_eq!(
                    self.rows.get(position()),
                    Some(&event["obj"]),
                    "delete of a row not held: {event}"
                );
                self.rows.remove(position());
            }
            "reset" => {
                self.rows = event["obj"]
                    .as_array()
                    .expect("a reset carries the rows")
                    .clone();
                self.resets += 1;
            }
            "ping" => self.pings += 1,
            "deleted" => self.ended = true,
            other => panic!("unknown list action {other}: {event}"),
        }
    }
}
