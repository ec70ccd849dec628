//! pgplace's gateway: long-polling JSON-RPC sessions over pgplace's boards and views.
//!
//! The rooms, from the ground up: each uses only those on its line and the lines before
//! it (gateway/README.md, Layout; `tests/tests/database/layout.rs` fails when an import or a room's
//! map of its files says otherwise):
//! - base: `config`, `errors`, `names` (what a client's session id, board name or view
//!   name may be, checked before any lookup), `metrics`, `limits`, `params` (params into
//!   serde structs), `json`, `fragments` (answers made of shared buffers), `shared_log`
//!   (events serialized once, read by many by cursor), `unknown`, `cors`, `check_queue`
//!   (what a notification names, checked against the database), `lock`, `jwt` (sign-in
//!   from the site that embeds a board);
//! - `mirror`: a board's copy and its log, fed by the listener; it hands each change to the
//!   views made from it through `mirror::feed::Feed`;
//! - `db`: the gateway's SQL, read into the mirror's shapes (the sessions' own is in
//!   `sessions::store`), and `db::tls`: connections made from a database URL, TLS as its
//!   `sslmode`/`sslrootcert` ask;
//! - `placer` (group commit through `place.place_many`), `boards` (the boards served);
//! - `views`: the view, the unit every subscription reads: the contract and its arms in
//!   `views/mod.rs`, a file per kind (board, region, recent placements, named list views);
//! - `sessions`: this gateway's copies of sessions, their long polls, acks and legacy
//!   delivery, their rows in the database;
//! - `state`: `App`, what every handler shares;
//! - `rpc`: the method table; the methods, one file each under `rpc::session` and
//!   `rpc::board`; `rpc.discover`;
//! - `http`: the routes, the page, PNGs;
//! - `listener` (the LISTEN connection: notifications only wake it), `change_feed` (the
//!   change log of watched tables), `app` (starting everything).

pub mod app;
pub mod boards;
pub mod change_feed;
pub mod check_queue;
pub mod config;
pub mod cors;
pub mod db;
pub mod errors;
pub mod fragments;
pub mod http;
pub mod json;
pub mod jwt;
pub mod limits;
pub mod listener;
pub mod lock;
pub mod metrics;
pub mod mirror;
pub mod names;
pub mod params;
pub mod placer;
pub mod rpc;
pub mod sessions;
pub mod shared_log;
pub mod state;
pub mod unknown;
pub mod views;

pub use app::{start, Running};
pub use config::Config;
