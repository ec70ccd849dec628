//! JSON-RPC: envelopes, params and the methods.

pub mod jsonrpc;
pub mod methods;
pub mod session_access;
