//! HTTP: `routes.rs` (POST /jsonrpc, the board's bits, health, metrics, and the rest),
//! `assets.rs` (the web page, embedded), `png.rs` (a board as a PNG), `forwarded.rs`
//! (placements another gateway sends the board's placer), `responses.rs` (the headers
//! of every answer) and `body.rs` (a request's body, bounded in size and time).

pub mod assets;
pub mod body;
pub mod forwarded;
pub mod png;
pub mod responses;
pub mod routes;
