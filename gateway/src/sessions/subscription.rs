//! One view of a session, and its two positions: `local`, where a legacy client (one that
//! never acks) stands on this gateway, moved by every answer; and `initial`, where the
//! subscription began, from which an acking client starts when its cursor does not name
//! the subscription yet. An acking client's position travels in its cursor
//! (`poll_cursor`): the gateway keeps nothing of it between polls.

use crate::fragments::ArrayBuilder;
use crate::shared_log::Delivery;
use crate::views::{Portable, Position, View, Waker};
use std::sync::Arc;

pub struct Subscription {
    pub key: Arc<str>,
    /// Names this subscription in cursors (a re-subscribe under the same key is another).
    pub sub_id: u64,
    pub view: View,
    pub initial: Position,
    pub local: Position,
}

impl Subscription {
    /// A subscription to `view` from `position` on.
    pub fn new(view: View, position: Position) -> Self {
        Subscription {
            key: view.key(),
            sub_id: crate::sessions::ids::random_u64(),
            view,
            initial: position,
            local: position,
        }
    }

    /// The same subscription as made on another gateway (read back from the database):
    /// its id is that one's; an acking client without an entry for it starts at the
    /// board's `seq` it began from (list views and regions: a `reset`); a legacy client
    /// gets a `reset`, as this gateway does not know what it was given.
    pub fn restored(mut self, sub_id: u64, seq: Option<i64>) -> Self {
        self.sub_id = sub_id;
        self.local = self.view.reset_position();
        self.initial = self.view.position_at(seq);
        self
    }

    /// Where an ack's entry puts this subscription on this gateway.
    pub fn resume(&self, position: Portable, here: bool) -> Position {
        self.view.resume(position, here)
    }

    pub fn collect(&mut self, position: &mut Position, out: &mut ArrayBuilder) -> Delivery {
        self.view.collect(position, out)
    }

    pub fn wakers(&self, out: &mut Vec<Waker>) {
        self.view.wakers(out)
    }
}
