//! What a view of the board is given: its initial state, and the events after its cursor
//! in the Qik or the compact form.

use super::{Board, Cursor};
use crate::fragments::ArrayBuilder;
use crate::json::json_str;
use crate::mirror::event_log::{event_bytes, Entry, EventsOut};
use crate::mirror::state::{settings_json, state_json};
use crate::shared_log::Delivery;
use bytes::Bytes;

impl Board {
    /// The initial state (settings, seq, packed bits in base64) and the cursor that
    /// continues exactly after it.
    pub fn initial_state(&self) -> (Cursor, Bytes) {
        let (cursor, settings, bits, frozen, watching) = {
            let m = self.lock();
            let cursor = m.cursor();
            if let Some((at, state)) = &m.state_cache {
                if *at == cursor {
                    return (cursor, state.clone());
                }
            }
            let frozen = m.freezing.as_ref().map(|f| f.bitmap().to_vec());
            (
                cursor,
                m.settings.clone(),
                m.bits.clone(),
                frozen,
                m.watching,
            )
        };
        // Serialized outside the lock: the listener keeps applying meanwhile.
        let state = state_json(&settings, cursor.seq, &bits, frozen.as_deref(), watching);
        let mut m = self.lock();
        if m.cursor() == cursor {
            m.state_cache = Some((cursor, state.clone()));
        }
        (cursor, state)
    }

    /// The packed bits, with the epoch and seq they reflect.
    pub fn packed(&self) -> (u64, i64, Bytes) {
        let mut m = self.lock();
        if let Some((epoch, seq, bits)) = &m.bits_cache {
            if (*epoch, *seq) == (m.epoch, m.seq) {
                return (*epoch, *seq, bits.clone());
            }
        }
        let bits = Bytes::from(m.bits.clone());
        m.bits_cache = Some((m.epoch, m.seq, bits.clone()));
        (m.epoch, m.seq, bits)
    }

    /// Adds the events after `cursor` for one view to `out` and moves the cursor past them.
    /// `presence`: the view asked for `presence` events.
    pub fn collect(
        &self,
        cursor: &mut Cursor,
        compact: bool,
        presence: bool,
        out: &mut ArrayBuilder,
    ) -> Delivery {
        let key = if compact {
            &self.compact_key
        } else {
            &self.qik_key
        };
        let m = self.lock();
        if m.deleted {
            let event = format!("{{\"key\":{},\"action\":\"deleted\"}}", json_str(key));
            out.push(Bytes::from(event).into());
            return Delivery::Ended;
        }
        if cursor.seq > m.seq && cursor.epoch == m.epoch {
            // A cursor another gateway wrote, ahead of this mirror (which has not heard the
            // newest commits yet): what comes next is not here yet.
            return Delivery::Continues;
        }
        if cursor.epoch != m.epoch
            || cursor.seq < m.log.floor
            || cursor.notices < m.log.floor_notice
        {
            let reason = if *cursor == Cursor::STALE {
                "position_elsewhere"
            } else if cursor.epoch != m.epoch {
                "board_reloaded"
            } else {
                "fell_behind"
            };
            drop(m);
            let (fresh, state) = self.initial_state();
            *cursor = fresh;
            out.push(crate::shared_log::reset_event(key, state, reason));
            return Delivery::Continues;
        }
        let mut out = EventsOut::new(key, compact, out);
        if std::mem::take(&mut cursor.settings_owed) {
            out.event(event_bytes(
                key,
                "settings",
                &settings_json(&m.settings, cursor.seq),
            ));
        }
        let start = m.log.entries.partition_point(|e| e.seq_end() < cursor.seq);
        for entry in m.log.entries.range(start..) {
            match entry {
                Entry::Tiles(t) if t.last > cursor.seq => {
                    let skip = (cursor.seq + 1 - t.first).max(0) as usize;
                    out.tiles(t, skip);
                    cursor.seq = t.last;
                }
                Entry::Notice {
                    version,
                    presence: asked_only,
                    qik,
                    compact: c,
                    ..
                } if *version > cursor.notices => {
                    if presence || !asked_only {
                        out.event(if compact { c.clone() } else { qik.clone() });
                    }
                    cursor.notices = *version;
                }
                _ => {}
            }
        }
        cursor.notices = cursor.notices.max(m.notices);
        out.finish();
        Delivery::Continues
    }
}
