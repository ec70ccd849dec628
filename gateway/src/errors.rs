//! JSON-RPC error objects: the standard codes and pgplace's own (documented in gateway/README.md).

use serde_json::{json, Value};

/// An error answered to one request: `{"code", "message", "data"?}`.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
    pub data: Option<Value>,
}

// JSON-RPC 2.0's own codes.
pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;
pub const INTERNAL_ERROR: i64 = -32603;

// pgplace's codes, in the server-error range.
pub const UNKNOWN_SESSION: i64 = -32001;
pub const NOT_AUTHORIZED: i64 = -32002;
pub const COOLDOWN: i64 = -32003;
pub const UNKNOWN_VIEW: i64 = -32004;
pub const UNKNOWN_BOARD: i64 = -32005;
pub const BOARD_NOT_OPEN: i64 = -32006;
pub const TOO_MANY: i64 = -32007;
pub const RETRY: i64 = -32008;
pub const UNAVAILABLE: i64 = -32009;
pub const FROZEN_TILE: i64 = -32010;
pub const TOO_FAST: i64 = -32011;

/// Every code above: the page (`assets/js/api.js`) and gateway/README.md must know each (a unit
/// test below checks both).
pub const ALL_CODES: [i64; 16] = [
    PARSE_ERROR,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    INVALID_PARAMS,
    INTERNAL_ERROR,
    UNKNOWN_SESSION,
    NOT_AUTHORIZED,
    COOLDOWN,
    UNKNOWN_VIEW,
    UNKNOWN_BOARD,
    BOARD_NOT_OPEN,
    TOO_MANY,
    RETRY,
    UNAVAILABLE,
    FROZEN_TILE,
    TOO_FAST,
];

/// The codes every method may answer.
pub const STANDARD_CODES: [i64; 2] = [INVALID_PARAMS, INTERNAL_ERROR];

/// What a code means, in a few words: `rpc.discover`'s error objects, and word for word the
/// table in gateway/README.md (a unit test below holds the two together).
pub fn meaning(code: i64) -> &'static str {
    match code {
        PARSE_ERROR => "Parse error: the body is not JSON",
        INVALID_REQUEST => "Invalid request: not a JSON-RPC request (or too large a batch)",
        METHOD_NOT_FOUND => "Method not found",
        INVALID_PARAMS => "Invalid params: the message says which and why",
        INTERNAL_ERROR => "Internal error",
        UNKNOWN_SESSION => "unknown session (expired, destroyed, or never created): create a new one (and resume with `since`)",
        NOT_AUTHORIZED => "not authorized (no user on the session, or a token that is not valid)",
        COOLDOWN => "cooldown: the user placed too recently",
        UNKNOWN_VIEW => "unknown view, or no such subscription key",
        UNKNOWN_BOARD => "unknown board",
        BOARD_NOT_OPEN => "the board is not open (paused, frozen or closed): no placements now",
        TOO_MANY => "too many: sessions (on the gateway, or of one address), subscriptions on one session, distinct regions (of a board, or made by one address)",
        RETRY => "retry: the board, the session or the view changed meanwhile (during the placement, or through another gateway)",
        UNAVAILABLE => "the database is unavailable (retry)",
        FROZEN_TILE => "the tile is frozen (it kept a colour for the board's `freeze_after`)",
        TOO_FAST => "too fast: `session.set_presence` again within 50 ms, or a rate limit (`session.create` per address, `board.place` per session or address, the database budget of an address: gateway settings)",
        _ => "An error",
    }
}

impl RpcError {
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        RpcError {
            code,
            message: message.into(),
            data: None,
        }
    }

    pub fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }

    pub fn parse(detail: impl std::fmt::Display) -> Self {
        Self::new(PARSE_ERROR, format!("Parse error: {detail}"))
    }

    pub fn invalid_request(detail: impl std::fmt::Display) -> Self {
        Self::new(INVALID_REQUEST, format!("Invalid Request: {detail}"))
    }

    pub fn method_not_found(method: &str) -> Self {
        Self::new(METHOD_NOT_FOUND, format!("Method not found: {method}"))
    }

    pub fn invalid_params(detail: impl std::fmt::Display) -> Self {
        Self::new(INVALID_PARAMS, format!("Invalid params: {detail}"))
    }

    pub fn internal() -> Self {
        Self::new(INTERNAL_ERROR, "Internal error (logged by the gateway)")
    }

    pub fn unknown_session() -> Self {
        Self::new(
            UNKNOWN_SESSION,
            "unknown session (it expired, was destroyed, or never existed): call session.create",
        )
    }

    pub fn unknown_board(board: impl std::fmt::Display) -> Self {
        Self::new(UNKNOWN_BOARD, format!("board {board} does not exist"))
    }

    pub fn frozen_tile(board: &str, x: i32, y: i32) -> Self {
        Self::new(
            FROZEN_TILE,
            format!(
                "tile ({x}, {y}) on board {board} is frozen: it kept its colour for the board's \
                 freeze_after and can no longer change"
            ),
        )
        .with_data(json!({"x": x, "y": y}))
    }

    pub fn unavailable() -> Self {
        Self::new(
            UNAVAILABLE,
            "the database is unavailable; retry in a moment",
        )
    }

    pub fn to_json(&self) -> Value {
        match &self.data {
            Some(data) => json!({"code": self.code, "message": self.message, "data": data}),
            None => json!({"code": self.code, "message": self.message}),
        }
    }
}

/// How a database error reaches a client: the SQLSTATEs pgplace raises for a caller's
/// mistakes keep their message; anything else is logged and answered as internal.
pub fn from_db(error: &tokio_postgres::Error) -> RpcError {
    let Some(db) = error.as_db_error() else {
        if error.is_closed() {
            return RpcError::unavailable();
        }
        tracing::warn!("database error: {error}");
        return RpcError::unavailable();
    };
    let message = db.message().to_string();
    match db.code().code() {
        "55000" => RpcError::new(BOARD_NOT_OPEN, message),
        "42704" if message.contains("no such user") => RpcError::new(
            NOT_AUTHORIZED,
            format!("{message} (the session's user was deleted)"),
        ),
        "42704" => RpcError::new(UNKNOWN_BOARD, message),
        // A banned user (place.ban_user); other 42501s are the gateway's own role lacking a
        // privilege (sql/roles.sql not run), which no client can fix.
        "42501" if message.contains("is banned") => RpcError::new(NOT_AUTHORIZED, message),
        // place.session_users: the session was signed out or destroyed through another
        // gateway before this one heard of it.
        "42501" if message.contains("this session has no user") => {
            RpcError::new(NOT_AUTHORIZED, message)
        }
        // Class 22 (data exception): the caller's values (a NUL in a string, a number out
        // of range...).
        code if code.starts_with("22") => RpcError::invalid_params(message),
        "40001" | "40P01" => RpcError::new(RETRY, format!("{message}; retry")),
        "57P01" | "57P02" | "57P03" | "08000" | "08003" | "08006" => RpcError::unavailable(),
        // A statement cancelled (statement_timeout, a DBA), among them the wait for a
        // synchronous standby after an asynchronous commit (place.await_durable): whether
        // the group is durable is unknown, as when a connection is lost at commit.
        "57014" => RpcError::unavailable(),
        // A function this gateway calls is missing: the database was not updated with it.
        "42883" => {
            tracing::error!(
                "{message}: this database's pgplace is older than the gateway; \
                 run ALTER EXTENSION pgplace UPDATE (extension/README.md, Upgrades)"
            );
            RpcError::internal()
        }
        code => {
            tracing::error!("database error {code}: {message}");
            RpcError::internal()
        }
    }
}

/// A pool that cannot hand out a connection means the database is unreachable.
pub fn from_pool(error: deadpool_postgres::PoolError) -> RpcError {
    tracing::warn!("database pool: {error}");
    RpcError::unavailable()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_and_the_readme_know_every_code() {
        let api = include_str!("../assets/js/api.js");
        let start = api
            .find("export const CODES = {")
            .expect("the page lists CODES");
        let end = start + api[start..].find("};").expect("CODES ends");
        let mut page: Vec<i64> = api[start..end]
            .lines()
            .filter_map(|line| line.split(':').nth(1))
            .filter_map(|value| value.trim().trim_end_matches(',').parse().ok())
            .filter(|code| *code != 0)
            .collect();
        page.sort_unstable();
        let mut ours = ALL_CODES.to_vec();
        ours.sort_unstable();
        assert_eq!(page, ours, "assets/js/api.js CODES and errors.rs disagree");
        let readme = include_str!("../README.md");
        for code in ALL_CODES {
            // The README writes a minus sign, as in "−32001".
            let written = format!("\u{2212}{}", -code);
            assert!(
                readme.contains(&written),
                "gateway/README.md does not explain {code}"
            );
        }
        // pgplace's own codes: the README's table says what rpc.discover says.
        for code in ALL_CODES.into_iter().filter(|c| *c > -32100) {
            let row = format!("| \u{2212}{} | {} |", -code, meaning(code));
            assert!(
                readme.contains(&row),
                "gateway/README.md's table must describe {code} as `meaning` does: {row}"
            );
        }
    }
}
