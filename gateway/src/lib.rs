//! pgplace's gateway: long-polling JSON-RPC sessions and board views over LISTEN/NOTIFY.
//!
//! # Layout
//! - `config`: flags and environment.
//! - `app`: starting everything; `http`: routes; `jsonrpc`: envelopes; `params`: method
//!   params; `methods`: the methods; `errors`: error codes.
//! - `board`: one mirrored board and its event log; `boards`: the mirrored boards;
//!   `freezing`: which of a board's tiles are frozen, and when the others freeze.
//! - `listener`: the LISTEN connection that keeps the mirrors exact.
//! - `sessions`: sessions, their cursors, long polls and expiry.
//! - `placer`: group commit of placements through `place.place_many`.
//! - `png_route`: `GET /boards/{id}.png`, a board drawn as a PNG.
//! - `assets`: the embedded web page;
//! - `db`: every SQL statement; `fragments`: responses made of shared buffers.

pub mod app;
pub mod assets;
pub mod board;
pub mod boards;
pub mod config;
pub mod db;
pub mod errors;
pub mod fragments;
pub mod freezing;
pub mod http;
pub mod jsonrpc;
pub mod listener;
pub mod methods;
pub mod params;
pub mod placer;
pub mod png_route;
pub mod sessions;

pub use app::{start, Running};
pub use config::Config;
