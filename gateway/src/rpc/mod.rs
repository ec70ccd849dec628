//! JSON-RPC: envelopes, params and the methods.

pub mod jsonrpc;
pub mod methods;
pub mod params;
pub mod session_access;
