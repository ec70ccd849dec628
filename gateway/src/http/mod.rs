//! HTTP: the routes, the page, PNGs, and the headers of every answer.

pub mod assets;
pub mod png;
pub mod responses;
pub mod routes;
