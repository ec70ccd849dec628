//! What a session id, board name or view name from a client may be, checked before anything
//! looks it up. A string that cannot name anything the database has is refused at once,
//! with the error an unknown one gets: it costs no query and no room in any cache
//! (`unknown`), however long it is (a body may hold a megabyte of one, `--max-body-bytes`).
//! Each limit is the database's own, so nothing that exists is refused.

use crate::errors::{RpcError, UNKNOWN_BOARD, UNKNOWN_SESSION, UNKNOWN_VIEW};

/// A session id is 128 bits in lowercase hex (`sessions::ids::new_session_id`), and only
/// the gateway makes them: the database keeps their SHA-256 alone.
pub const SESSION_ID_DIGITS: usize = 32;

/// `place.create_board` takes names of 1 to 64 characters (`MAX_NAME_CHARS`,
/// extension/src/boards.rs). The column itself has no CHECK: a board a superuser inserted
/// by hand under a longer name is still reached by its id.
pub const MAX_BOARD_NAME: usize = 64;

/// `place.views.name`: 1 to 64 characters, no control characters (extension/schema/views.sql).
pub const MAX_VIEW_NAME: usize = 64;

/// Whether `text` is written as `new_session_id` writes ids: exactly 32 lowercase hex digits.
pub fn is_session_id(text: &str) -> bool {
    text.len() == SESSION_ID_DIGITS && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// −32001 for a string that is not a session id. The message does not repeat it: it is a
/// secret when it is one, and may be a megabyte when it is not.
pub fn check_session_id(id: &str) -> Result<(), RpcError> {
    if is_session_id(id) {
        return Ok(());
    }
    Err(RpcError::new(
        UNKNOWN_SESSION,
        format!(
            "unknown session: a session id is {SESSION_ID_DIGITS} lowercase hex digits, as \
             session.create answers it, not these {} bytes; call session.create",
            id.len()
        ),
    ))
}

/// −32005 for a board name longer than any board's (or empty).
pub fn check_board_name(name: &str) -> Result<(), RpcError> {
    let chars = count_chars(name, MAX_BOARD_NAME);
    if (1..=MAX_BOARD_NAME).contains(&chars) {
        return Ok(());
    }
    Err(RpcError::new(
        UNKNOWN_BOARD,
        format!(
            "unknown board: board names have 1 to {MAX_BOARD_NAME} characters, not {}",
            shown(chars, MAX_BOARD_NAME)
        ),
    ))
}

/// −32004 for a view name no view can have: empty, longer than 64 characters, or with a
/// control character.
pub fn check_view_name(name: &str) -> Result<(), RpcError> {
    let chars = count_chars(name, MAX_VIEW_NAME);
    if (1..=MAX_VIEW_NAME).contains(&chars) && !name.chars().any(char::is_control) {
        return Ok(());
    }
    Err(RpcError::new(
        UNKNOWN_VIEW,
        format!(
            "unknown view: view names have 1 to {MAX_VIEW_NAME} characters and no control \
             characters ({} given)",
            shown(chars, MAX_VIEW_NAME)
        ),
    ))
}

/// The characters of `text`, counted up to one past `max` (a megabyte is not walked).
fn count_chars(text: &str, max: usize) -> usize {
    text.chars().take(max + 1).count()
}

fn shown(chars: usize, max: usize) -> String {
    if chars > max {
        format!("more than {max}")
    } else {
        chars.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sessions::ids::new_session_id;

    #[test]
    fn session_ids_are_what_session_create_makes() {
        for _ in 0..100 {
            let id = new_session_id();
            assert!(check_session_id(&id).is_ok(), "{id}");
        }
        let made = new_session_id();
        let long = "a".repeat(1 << 20);
        for not_one in [
            "",
            &made[1..],
            &format!("{made}0"),
            &made.to_uppercase(),
            "0123456789abcdef0123456789abcdeg",
            " 123456789abcdef0123456789abcdef",
            // 32 bytes, 16 characters.
            "éééééééééééééééé",
            &long,
        ] {
            let refused = check_session_id(not_one).unwrap_err();
            assert_eq!(refused.code, UNKNOWN_SESSION, "{not_one:.40}");
            assert!(
                refused.message.contains("32 lowercase hex digits"),
                "{}",
                refused.message
            );
            // Never the string itself: a secret, or a megabyte.
            assert!(refused.message.len() < 200, "{}", refused.message);
        }
    }

    #[test]
    fn board_names_are_capped_at_the_databases_limit() {
        for ok in ["demo", &"b".repeat(64), &"é".repeat(64), " "] {
            assert!(check_board_name(ok).is_ok(), "{ok}");
        }
        for (refused, says) in [
            ("", "not 0"),
            (&*"b".repeat(65), "not more than 64"),
            (&*"é".repeat(65), "not more than 64"),
            (&*"b".repeat(1 << 20), "not more than 64"),
        ] {
            let error = check_board_name(refused).unwrap_err();
            assert_eq!(error.code, UNKNOWN_BOARD);
            assert!(
                error.message.contains("1 to 64 characters"),
                "{}",
                error.message
            );
            assert!(error.message.contains(says), "{}", error.message);
            assert!(error.message.len() < 200, "{}", error.message);
        }
    }

    #[test]
    fn view_names_are_capped_at_the_databases_limit() {
        for ok in ["top_live", &"v".repeat(64), &"é".repeat(64)] {
            assert!(check_view_name(ok).is_ok(), "{ok}");
        }
        for refused in [
            "",
            &*"v".repeat(65),
            &*"v".repeat(1 << 20),
            "top\nlive",
            "top\u{7f}",
        ] {
            let error = check_view_name(refused).unwrap_err();
            assert_eq!(error.code, UNKNOWN_VIEW, "{refused:.40}");
            assert!(
                error.message.contains("1 to 64 characters"),
                "{}",
                error.message
            );
            assert!(error.message.len() < 200, "{}", error.message);
        }
    }
}
