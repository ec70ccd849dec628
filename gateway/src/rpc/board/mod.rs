//! The `board.*` methods, one file each: its params, its answer's schema, what it does,
//! an example and its entry in the method table (`rpc::table`): `list.rs`, `get.rs`,
//! `tile_history.rs`, `place.rs`. The examples name a board "demo" and a session id that
//! stands for one (see `rpc::session`).

pub mod get;
pub mod list;
pub mod place;
pub mod tile_history;
