//! What the database just said does not exist: an unknown board id or name, list view or
//! session id. Anonymous clients may ask for any of them as often as their limits allow;
//! remembered for a moment, a name asked for again costs no query until then. A name made
//! meanwhile (a board a DBA creates) is found once the moment has passed: clients have no
//! reason to ask for a board, view or session before it exists.
//!
//! Bounded in bytes, not in entries: clients choose the names. Each entry weighs its name's
//! bytes plus the cache's own bookkeeping, and the whole at most `BUDGET_BYTES`. The names
//! are small besides (`names` refuses a longer one before it gets here: a session id is 32
//! bytes, a board or view name at most 64 characters), so the few entries the cache may hold
//! past its budget until it evicts (its writes are applied in batches) stay small too.

use moka::sync::Cache;
use std::sync::Arc;
use std::time::Duration;

/// How long a miss is believed.
const REMEMBERED_FOR: Duration = Duration::from_secs(2);
/// How many bytes the misses may take: about 29,000 session ids, 26,000 names of 64 ASCII
/// characters. An attacker who asks for more in `REMEMBERED_FOR` pushes out older ones and
/// pays the per-address database budget for them (`limits`).
pub const BUDGET_BYTES: u64 = 8 << 20;
/// What an entry costs besides its name, estimated: moka's entry, its node in the access
/// and write orders and its slot in the hash table, the key's `Arc` header.
const ENTRY_OVERHEAD: u32 = 256;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Name {
    BoardId(i64),
    BoardName(Arc<str>),
    View(Arc<str>),
    Session(Arc<str>),
}

impl Name {
    /// The bytes this entry holds: its name's, and the bookkeeping's.
    fn weight(&self) -> u32 {
        let text = match self {
            Name::BoardId(_) => 0,
            Name::BoardName(name) | Name::View(name) | Name::Session(name) => name.len(),
        };
        u32::try_from(text)
            .unwrap_or(u32::MAX)
            .saturating_add(ENTRY_OVERHEAD)
    }
}

pub struct Unknown(Cache<Name, ()>);

impl Default for Unknown {
    fn default() -> Self {
        Unknown::with_budget(BUDGET_BYTES)
    }
}

impl Unknown {
    /// Misses remembered in at most `bytes` (weighed by `Name::weight`).
    pub fn with_budget(bytes: u64) -> Self {
        Unknown(
            Cache::builder()
                .max_capacity(bytes)
                .weigher(|name: &Name, _: &()| name.weight())
                .time_to_live(REMEMBERED_FOR)
                .build(),
        )
    }

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

    /// The names' bytes held once the cache has done its pending work.
    fn held_bytes(unknown: &Unknown) -> usize {
        unknown.0.run_pending_tasks();
        unknown
            .0
            .iter()
            .map(|(name, _)| name.weight() as usize)
            .sum()
    }

    #[test]
    fn misses_are_bounded_in_bytes_not_in_entries() {
        // A flood of long names: far more bytes than the budget, far fewer entries than
        // any count bound would stop.
        let unknown = Unknown::with_budget(64 << 10);
        for i in 0..1000 {
            let name = format!("{i:04}{}", "x".repeat(1020));
            unknown.missing(Name::Session(name.as_str().into()));
            unknown.missing(Name::BoardName(name.as_str().into()));
        }
        let held = held_bytes(&unknown);
        assert!(held <= 64 << 10, "{held} bytes held");
        // Small names still fit many at once, each found again.
        let unknown = Unknown::with_budget(64 << 10);
        let ids: Vec<Name> = (0..100)
            .map(|i| Name::Session(format!("{i:032x}").into()))
            .collect();
        for id in &ids {
            unknown.missing(id.clone());
        }
        assert!(held_bytes(&unknown) <= 64 << 10);
        assert!(ids.iter().all(|id| unknown.is_known_missing(id)));
    }

    #[test]
    fn the_default_budget_holds_tens_of_thousands_of_ids() {
        let per_id = Name::Session("0".repeat(32).into()).weight() as u64;
        let ids = BUDGET_BYTES / per_id;
        assert!((20_000..=60_000).contains(&ids), "{ids}");
    }
}
