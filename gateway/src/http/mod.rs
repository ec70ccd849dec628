//! HTTP: `routes.rs` (POST /jsonrpc, the board's bits, health, metrics, and the rest),
//! `assets.rs` (the web page, embedded), `png.rs` (a board as a PNG) and `responses.rs`
//! (the headers of every answer).

pub mod assets;
pub mod png;
pub mod responses;
pub mod routes;
