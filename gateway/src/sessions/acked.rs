//! Where an acking poll's views stand: read from its `ack` (a cursor any gateway wrote),
//! moved by the answer, and written back as the answer's `cursor`.

use crate::mirror::board::Board;
use crate::sessions::poll_cursor::{self, PollCursor};
use crate::sessions::session::Session;
use crate::views::Position;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// Where an acking poll's views stand, by subscription: what its answer's cursor says.
pub struct AckPositions {
    gateway: u64,
    session: i64,
    pub(super) positions: HashMap<u64, (Arc<str>, Position)>,
}

impl AckPositions {
    /// The cursor that continues exactly after what was answered: only for the
    /// subscriptions the session has now (one re-subscribed during the poll is a new one).
    pub fn cursor(&self, session: &Session) -> PollCursor {
        let version = session.version();
        let state = session.lock();
        PollCursor {
            session: self.session,
            gateway: self.gateway,
            version,
            views: state
                .subscriptions
                .iter()
                .filter_map(|sub| {
                    let (_, position) = self.positions.get(&sub.sub_id)?;
                    let entry = poll_cursor::Entry(sub.sub_id, position.portable());
                    Some((sub.key.to_string(), entry))
                })
                .collect::<BTreeMap<_, _>>(),
        }
    }
}

impl Session {
    /// Where an acking poll starts: per subscription, the ack's entry for it when there
    /// is one, else where the subscription began.
    pub fn ack_positions(&self, ack: Option<&PollCursor>, gateway: u64) -> AckPositions {
        let state = self.lock();
        let here = ack.is_some_and(|a| a.gateway == gateway);
        let positions = state
            .subscriptions
            .iter()
            .map(|sub| {
                let entry = ack
                    .and_then(|a| a.views.get(&*sub.key))
                    .filter(|e| e.0 == sub.sub_id);
                let position = match entry {
                    Some(e) => sub.resume(e.1, here),
                    None => sub.initial,
                };
                (sub.sub_id, (sub.key.clone(), position))
            })
            .collect();
        AckPositions {
            gateway,
            session: self.public_id,
            positions,
        }
    }

    /// The boards whose logs must reach further back for these positions.
    pub fn boards_behind(&self, positions: &AckPositions) -> Vec<(Arc<Board>, i64)> {
        let state = self.lock();
        state
            .subscriptions
            .iter()
            .filter_map(|sub| {
                let (_, position) = positions.positions.get(&sub.sub_id)?;
                sub.view.board_behind(position)
            })
            .collect()
    }
}
