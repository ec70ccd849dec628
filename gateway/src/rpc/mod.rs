//! JSON-RPC: envelopes, the method table and the methods, and `rpc.discover`.

pub mod board_methods;
pub mod discover;
pub mod jsonrpc;
pub mod session_access;
pub mod session_methods;
pub mod table;
pub mod tiles;
