//! What a board's mirror hands on after each of its changes, to the views made from it
//! (its regions, its newest placements). The mirror knows them only by this trait: a view
//! kind the board feeds registers itself (`Feeds::get_or_add`), and the board needs no
//! change for it.

use crate::mirror::recent::Recent;
use crate::mirror::snapshot::Settings;
use pgplace_core::payload::Placement;
use std::any::Any;
use std::sync::{Arc, RwLock};

/// A receiver of a board's changes. Each call comes after the mirror applied the change and
/// let go of its lock, in the order of the changes.
pub trait Feed: Any + Send + Sync {
    /// What the next change must carry for this feed (gathering costs the board, so only
    /// what some view held by a session needs).
    fn wants(&self) -> Wants;

    /// Placements `first..=last` were applied. `placed` (each with the colour it replaced)
    /// holds them when some feed wants placements, else nothing; `recent`, the board's
    /// newest placements, when some feed wants them.
    fn placed(&self, first: i64, last: i64, placed: &[(Placement, u8)], recent: Option<&Recent>);

    /// New settings at `seq` (the layout unchanged: a change of layout is a reload).
    fn settings_changed(&self, settings: &Arc<Settings>, seq: i64);

    /// Tiles froze when the board's seq was `seq` (`freeze_after`).
    fn frozen(&self, seq: i64, tiles: &[(i32, i32)]);

    /// The board was read afresh at `seq`; its stream does not continue. `bits` when some
    /// feed wants them.
    fn reloaded(&self, settings: &Arc<Settings>, seq: i64, bits: Option<&[u8]>, recent: &Recent);

    /// The board was deleted.
    fn deleted(&self);
}

/// What a change must carry.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct Wants {
    /// The placements applied, with their old colours.
    pub placements: bool,
    /// The board's newest placements.
    pub recent: bool,
    /// On a reload, the board's tiles.
    pub bits: bool,
}

impl Wants {
    fn or(self, other: Wants) -> Wants {
        Wants {
            placements: self.placements || other.placements,
            recent: self.recent || other.recent,
            bits: self.bits || other.bits,
        }
    }
}

/// The feeds of one board: at most one of each type, made when first asked for.
#[derive(Default)]
pub struct Feeds(RwLock<Vec<Arc<dyn Feed>>>);

impl Feeds {
    /// The board's feed of type `T`, made by `make` if it has none yet.
    pub fn get_or_add<T: Feed>(&self, make: impl FnOnce() -> T) -> Arc<T> {
        if let Some(feed) = self.find::<T>() {
            return feed;
        }
        let mut feeds = self.0.write().unwrap_or_else(|p| p.into_inner());
        if let Some(feed) = feeds.iter().find_map(|f| downcast::<T>(f)) {
            return feed;
        }
        let feed = Arc::new(make());
        feeds.push(feed.clone());
        feed
    }

    fn find<T: Feed>(&self) -> Option<Arc<T>> {
        self.read().iter().find_map(|f| downcast::<T>(f))
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Vec<Arc<dyn Feed>>> {
        self.0.read().unwrap_or_else(|p| p.into_inner())
    }

    /// What the next change must carry for any of them.
    pub fn wants(&self) -> Wants {
        self.read()
            .iter()
            .fold(Wants::default(), |all, f| all.or(f.wants()))
    }

    /// The feeds as they are now (a change is handed to them outside any lock).
    pub fn all(&self) -> Vec<Arc<dyn Feed>> {
        self.read().clone()
    }
}

fn downcast<T: Feed>(feed: &Arc<dyn Feed>) -> Option<Arc<T>> {
    let any: Arc<dyn Any + Send + Sync> = feed.clone();
    any.downcast::<T>().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[derive(Default)]
    struct Counting(AtomicUsize);

    impl Feed for Counting {
        fn wants(&self) -> Wants {
            Wants {
                recent: true,
                ..Wants::default()
            }
        }
        fn placed(&self, _: i64, _: i64, _: &[(Placement, u8)], _: Option<&Recent>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
        fn settings_changed(&self, _: &Arc<Settings>, _: i64) {}
        fn frozen(&self, _: i64, _: &[(i32, i32)]) {}
        fn reloaded(&self, _: &Arc<Settings>, _: i64, _: Option<&[u8]>, _: &Recent) {}
        fn deleted(&self) {}
    }

    #[derive(Default)]
    struct Quiet;

    impl Feed for Quiet {
        fn wants(&self) -> Wants {
            Wants::default()
        }
        fn placed(&self, _: i64, _: i64, _: &[(Placement, u8)], _: Option<&Recent>) {}
        fn settings_changed(&self, _: &Arc<Settings>, _: i64) {}
        fn frozen(&self, _: i64, _: &[(i32, i32)]) {}
        fn reloaded(&self, _: &Arc<Settings>, _: i64, _: Option<&[u8]>, _: &Recent) {}
        fn deleted(&self) {}
    }

    #[test]
    fn each_type_is_made_once_and_found_again() {
        let feeds = Feeds::default();
        let first = feeds.get_or_add(Counting::default);
        let again = feeds.get_or_add(|| panic!("made twice"));
        assert!(Arc::ptr_eq(&first, &again));
        feeds.get_or_add(Quiet::default);
        assert_eq!(feeds.all().len(), 2);
        for feed in feeds.all() {
            feed.placed(1, 1, &[], None);
        }
        assert_eq!(first.0.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn a_change_carries_what_any_feed_wants() {
        let feeds = Feeds::default();
        assert_eq!(feeds.wants(), Wants::default());
        feeds.get_or_add(Quiet::default);
        assert_eq!(feeds.wants(), Wants::default());
        feeds.get_or_add(Counting::default);
        assert!(feeds.wants().recent && !feeds.wants().placements);
    }
}
