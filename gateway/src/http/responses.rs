//! What responses share: the security headers every answer carries, the plain-HTTP form
//! of an error, and conditional responses for the routes that serve cacheable bytes
//! (`/bits` in `http`, pictures in `png_route`).

use crate::errors::{RpcError, TOO_FAST, UNKNOWN_BOARD};
use crate::fragments::Fragments;
use hyper::body::Incoming;
use hyper::header::HeaderValue;
use hyper::{header, Request, Response, StatusCode};

/// The headers `http::handle` puts on every answer (and `app` on the connection refusal
/// it writes by hand), whatever the route: one list, so that a new route cannot forget them.
pub const SECURITY_HEADERS: [(&str, &str); 3] = [
    // The page is files of its own origin only (`assets`): no inline script or style, no
    // data: or blob: URLs (it draws with putImageData and drawImage of its own canvas, and
    // styles elements through the CSSOM, which CSP does not restrict), and it fetches only
    // /jsonrpc. Were it injected into, nothing could load or send from elsewhere; and no
    // other site may frame it to trick a click onto a tile. `assets` tests the page keeps
    // within this.
    (
        "content-security-policy",
        "default-src 'self'; frame-ancestors 'none'",
    ),
    // A JSON error that echoes the path, or a PNG, is never read as HTML or a script.
    ("x-content-type-options", "nosniff"),
    // Nothing goes to other origins (the page links nowhere else), as with no-referrer;
    // but no-referrer also turns the Origin of a same-origin POST that is not a fetch (a
    // form) into `null`, and an Origin check against cross-site POSTs to /jsonrpc (it
    // reads text/plain and form bodies, which need no CORS preflight) could then not tell
    // the page from another site.
    ("referrer-policy", "same-origin"),
];

/// The plain-HTTP answer (`/bits`, pictures) to what a JSON-RPC call would have answered
/// with `error`: 404 for an unknown board, 429 with `Retry-After` for a spent budget, 503
/// for the rest (the database or its pool).
pub fn for_rpc_error(error: &RpcError) -> Response<Fragments> {
    let status = match error.code {
        UNKNOWN_BOARD => StatusCode::NOT_FOUND,
        TOO_FAST => StatusCode::TOO_MANY_REQUESTS,
        _ => StatusCode::SERVICE_UNAVAILABLE,
    };
    let body = serde_json::json!({"error": error.message, "data": error.data});
    let mut response = Response::new(Fragments::from(
        serde_json::to_vec(&body).expect("JSON values serialize"),
    ));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    let retry_after_ms = error
        .data
        .as_ref()
        .and_then(|d| d["retry_after_ms"].as_u64());
    if let Some(ms) = retry_after_ms {
        headers.insert(
            header::RETRY_AFTER,
            HeaderValue::from(ms.div_ceil(1000).max(1)),
        );
    }
    response
}

/// Puts `SECURITY_HEADERS` on `response`, replacing any a route set.
pub fn secure(response: &mut Response<Fragments>) {
    let headers = response.headers_mut();
    for (name, value) in SECURITY_HEADERS {
        headers.insert(name, HeaderValue::from_static(value));
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_answer_gets_the_security_headers_once() {
        // A bad name or value would panic on the first request, not at start.
        let mut response = Response::new(Fragments::new());
        response
            .headers_mut()
            .insert("referrer-policy", HeaderValue::from_static("unsafe-url"));
        secure(&mut response);
        secure(&mut response);
        let headers = response.headers();
        assert_eq!(
            headers["content-security-policy"],
            "default-src 'self'; frame-ancestors 'none'"
        );
        assert_eq!(headers["x-content-type-options"], "nosniff");
        assert_eq!(
            headers
                .get_all("referrer-policy")
                .iter()
                .collect::<Vec<_>>(),
            ["same-origin"]
        );
    }
}
