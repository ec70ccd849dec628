//! A log of serialized events that many sessions read by cursor: each event is serialized
//! once, whatever the number of readers. Bounded: a reader that falls behind by more than
//! the capacity, or whose log was restarted (the source was reloaded), must start over
//! from a fresh initial state.

use crate::fragments::{ArrayBuilder, Fragments};
use bytes::Bytes;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};

/// A number no other log (or mirror) of this process has used: a cursor written for one
/// never reads another, even one made later under the same key.
pub fn new_epoch() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// `{"key": key, "action": "reset", "obj": state}`: what a reader that must start over gets
/// (the state, already serialized, is shared, not copied), counted by `reason` in
/// `pgplace_resets_total`.
pub fn reset_event(key: &str, state: Bytes, reason: &'static str) -> Fragments {
    crate::metrics::metrics().reset(reason);
    let mut event = Fragments::new();
    event.push(
        format!(
            "{{\"key\":{},\"action\":\"reset\",\"obj\":",
            crate::json::json_str(key)
        )
        .into_bytes()
        .into(),
    );
    event.push(state);
    event.push_static("}");
    event
}

/// How a view goes on after `collect`.
#[derive(Debug, PartialEq)]
pub enum Delivery {
    Continues,
    /// The board was deleted; the subscription ends with the `deleted` event.
    Ended,
}

/// Where a reader stands in a [`SharedLog`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LogCursor {
    epoch: u64,
    /// The number of the next event to give.
    next: u64,
}

impl LogCursor {
    /// A cursor that no log accepts: its reader starts over.
    pub const STALE: LogCursor = LogCursor {
        epoch: u64::MAX,
        next: 0,
    };

    /// (epoch, next), for a client's cursor.
    pub fn parts(&self) -> (u64, u64) {
        (self.epoch, self.next)
    }

    pub fn from_parts(epoch: u64, next: u64) -> Self {
        LogCursor { epoch, next }
    }
}

pub struct SharedLog {
    /// Bumped by [`SharedLog::restart`].
    epoch: u64,
    /// The number of `events[0]`.
    first: u64,
    events: VecDeque<Bytes>,
    capacity: usize,
}

impl SharedLog {
    pub fn new(capacity: usize) -> Self {
        SharedLog {
            epoch: new_epoch(),
            first: 0,
            events: VecDeque::new(),
            capacity: capacity.max(1),
        }
    }

    pub fn push(&mut self, event: Bytes) {
        self.events.push_back(event);
        while self.events.len() > self.capacity {
            self.events.pop_front();
            self.first += 1;
        }
    }

    /// Forgets every event: every reader starts over.
    pub fn restart(&mut self) {
        self.epoch = new_epoch();
        self.first += self.events.len() as u64;
        self.events.clear();
    }

    /// The cursor just after the newest event.
    pub fn end(&self) -> LogCursor {
        LogCursor {
            epoch: self.epoch,
            next: self.first + self.events.len() as u64,
        }
    }

    /// Adds the events after `cursor` to `out` and moves it past them; false (nothing
    /// added) when the reader must start over.
    pub fn read(&self, cursor: &mut LogCursor, out: &mut ArrayBuilder) -> bool {
        let end = self.end();
        if cursor.epoch != self.epoch || cursor.next < self.first || cursor.next > end.next {
            return false;
        }
        let skip = (cursor.next - self.first) as usize;
        for event in self.events.range(skip..) {
            out.push(event.clone().into());
        }
        *cursor = end;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_of_one_log_is_not_read_by_another_made_later() {
        let mut first = SharedLog::new(10);
        first.push(Bytes::from_static(b"1"));
        first.push(Bytes::from_static(b"2"));
        let mut cursor = first.end();
        // A new log under the same key (the old one was dropped) starts at 0 again.
        let mut second = SharedLog::new(10);
        for _ in 0..3 {
            second.push(Bytes::from_static(b"x"));
        }
        let mut out = ArrayBuilder::new();
        assert!(!second.read(&mut cursor, &mut out), "starts over instead");
        assert_eq!(out.count(), 0);
    }
}
