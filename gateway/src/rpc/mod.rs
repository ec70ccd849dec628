//! JSON-RPC: envelopes, the method table, the methods (one file each, under `session/`
//! and `board/`), and `rpc.discover`.

pub mod board;
pub mod discover;
pub mod jsonrpc;
pub mod method;
pub mod session;
pub mod session_access;
pub mod table;
pub mod tiles;
