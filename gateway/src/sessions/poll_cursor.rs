//! The `cursor` of a resumable `get_events` answer: where each view of the session stood
//! after it. The client sends it back as `ack`; whichever gateway gets it answers from
//! there, so an answer lost on the wire, a move to another gateway or a restart loses and
//! repeats nothing.
//!
//! Opaque to clients: base64url of a small JSON object naming the session (its public id,
//! so a cursor of another session is refused), the gateway that wrote it (positions in a
//! gateway's own logs are only meaningful there), the session's version it was written
//! at (a gateway whose copy is older checks its copy first: answered from a copy that
//! lacks a view the client has, the cursor would lose that view's position) and per
//! subscription key its id and position. A board view's position is its seq, which means
//! the same on every gateway.

use crate::views::Portable;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One subscription's entry: which subscription (a re-subscribe under the same key makes a
/// new one) and where it stands.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Entry(pub u64, pub Portable);

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PollCursor {
    /// The session's public id.
    #[serde(rename = "s")]
    pub session: i64,
    /// The gateway process that wrote the cursor.
    #[serde(rename = "g")]
    pub gateway: u64,
    #[serde(rename = "v")]
    pub views: BTreeMap<String, Entry>,
    /// The session's version in the copy that wrote it (0 in cursors written before it was
    /// kept, and left out then).
    #[serde(rename = "n", default, skip_serializing_if = "is_zero")]
    pub version: i64,
}

fn is_zero(version: &i64) -> bool {
    *version == 0
}

/// Longest cursor accepted (16 views with long keys fit many times over).
const MAX_CURSOR_CHARS: usize = 16 * 1024;

impl PollCursor {
    pub fn encode(&self) -> String {
        URL_SAFE_NO_PAD.encode(serde_json::to_vec(self).expect("cursors serialize"))
    }

    /// Reads an `ack`; the error says what is wrong with it.
    pub fn decode(text: &str) -> Result<PollCursor, String> {
        if text.len() > MAX_CURSOR_CHARS {
            return Err(format!(
                "`ack` is not a cursor of this gateway (longer than {MAX_CURSOR_CHARS} characters)"
            ));
        }
        let bytes = URL_SAFE_NO_PAD
            .decode(text)
            .map_err(|_| "`ack` is not a cursor of this gateway (not base64url)".to_string())?;
        serde_json::from_slice(&bytes)
            .map_err(|_| "`ack` is not a cursor of this gateway (malformed)".to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_reads_back_as_written() {
        let mut views = BTreeMap::new();
        views.insert("board/1".into(), Entry(7, Portable::Board(2, 1234, 5)));
        views.insert("top \"x\"".into(), Entry(u64::MAX, Portable::Log(0, 99)));
        let cursor = PollCursor {
            session: 42,
            gateway: 0xdead_beef_0000_0001,
            views,
            version: 9,
        };
        let text = cursor.encode();
        assert!(text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'));
        assert_eq!(PollCursor::decode(&text), Ok(cursor));
    }

    #[test]
    fn malformed_cursors_are_refused() {
        for text in [
            "not a cursor!",
            "e30",        // {}
            "W10",        // []
            "eyJzIjoxfQ", // {"s":1}
        ] {
            assert!(PollCursor::decode(text).is_err(), "{text}");
        }
        assert!(PollCursor::decode(&"A".repeat(MAX_CURSOR_CHARS + 1)).is_err());
    }
}
