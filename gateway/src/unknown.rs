//! What the database just said does not exist: an unknown board id or name, list view or
//! session id. Anonymous clients may ask for any of them as often as their limits allow;
//! remembered for a moment, a name asked for again costs no query until then. A name made
//! meanwhile (a board a DBA creates) is found once the moment has passed: clients have no
//! reason to ask for a board, view or session before it exists.

use moka::sync::Cache;
use std::sync::Arc;
use std::time::Duration;

/// How long a miss is believed.
const REMEMBERED_FOR: Duration = Duration::from_secs(2);
/// How many misses are kept at most (each a few dozen bytes): an attacker who asks for
/// more names than this in `REMEMBERED_FOR` pushes out older ones and pays the per-address
/// database budget for them (`limits`).
const AT_MOST: u64 = 50_000;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Name {
    BoardId(i64),
    BoardName(Arc<str>),
    View(Arc<str>),
    Session(Arc<str>),
}

pub struct Unknown(Cache<Name, ()>);

impl Default for Unknown {
    fn default() -> Self {
        Unknown(
            Cache::builder()
                .max_capacity(AT_MOST)
                .time_to_live(REMEMBERED_FOR)
                .build(),
        )
    }
}

impl Unknown {
    /// Whether the database said a moment ago that `name` does not exist.
    pub fn is_known_missing(&self, name: &Name) -> bool {
        self.0.contains_key(name)
    }

    /// The database says `name` does not exist.
    pub fn missing(&self, name: Name) {
        self.0.insert(name, ());
    }

    /// `name` exists now (a board created, say): ask the database again.
    pub fn found(&self, name: &Name) {
        self.0.invalidate(name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_miss_is_remembered_until_found() {
        let unknown = Unknown::default();
        let board = Name::BoardId(7);
        assert!(!unknown.is_known_missing(&board));
        unknown.missing(board.clone());
        assert!(unknown.is_known_missing(&board));
        assert!(!unknown.is_known_missing(&Name::BoardId(8)));
        assert!(!unknown.is_known_missing(&Name::View("7".into())));
        unknown.found(&board);
        assert!(!unknown.is_known_missing(&board));
    }
}
