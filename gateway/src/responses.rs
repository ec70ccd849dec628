//! Conditional responses shared by the routes that serve cacheable bytes (`/bits` in
//! `http`, pictures in `png_route`).

use hyper::body::Incoming;
use hyper::{header, Request};

/// Whether the request's If-None-Match names `etag`, compared weakly (RFC 9110): proxies
/// that compress send back W/"…".
pub fn not_modified(req: &Request<Incoming>, etag: &str) -> bool {
    req.headers()
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(',')
                .map(|t| t.trim())
                .any(|t| t == "*" || t.strip_prefix("W/").unwrap_or(t) == etag)
        })
}
