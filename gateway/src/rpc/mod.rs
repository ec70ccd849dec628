//! JSON-RPC:
//! - `jsonrpc.rs`: envelopes (2.0 and 1.0-style), batches, responses;
//! - `method.rs`: what a method is (`Method`, `method!`); `table.rs`: the table of them,
//!   dispatch, and the names a legacy client may use;
//! - the methods, one file each: `session/` (`session.*`) and `board/` (`board.*`);
//!   `discover.rs`: `rpc.discover`, the table as an OpenRPC document;
//! - `session_access.rs`: finding a session on any gateway, and what a poll needs first;
//!   `tiles.rs`: what the methods check of a tile.

pub mod board;
pub mod discover;
pub mod jsonrpc;
pub mod method;
pub mod session;
pub mod session_access;
pub mod table;
pub mod tiles;
