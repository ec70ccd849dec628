//! The CORS policy: which other origins' pages may call the gateway. By default none (the
//! gateway's own page needs no CORS); `--cors-origins` names them, or `*` for any.

use crate::fragments::Fragments;
use hyper::header::{self, HeaderMap, HeaderValue};
use hyper::{Response, StatusCode};

pub struct Cors {
    origins: Vec<String>,
}

impl Cors {
    pub fn new(origins: Vec<String>) -> Self {
        Cors { origins }
    }

    /// The request's Origin when the policy allows it.
    fn allowed<'a>(&self, headers: &'a HeaderMap) -> Option<&'a HeaderValue> {
        let origin = headers.get(header::ORIGIN)?;
        let text = origin.to_str().ok()?;
        self.origins
            .iter()
            .any(|o| o == "*" || o.eq_ignore_ascii_case(text))
            .then_some(origin)
    }

    /// Adds the headers that let an allowed origin's page read `response`.
    pub fn decorate(&self, request: &HeaderMap, response: &mut Response<Fragments>) {
        if self.origins.is_empty() {
            return;
        }
        let headers = response.headers_mut();
        // The answer differs by Origin: caches must keep them apart.
        headers.append(header::VARY, HeaderValue::from_static("origin"));
        if let Some(origin) = self.allowed(request) {
            headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin.clone());
        }
    }

    /// The answer to a preflight (`OPTIONS`) for /jsonrpc: 204 with what may be sent for
    /// an allowed origin, else 403.
    pub fn preflight(&self, request: &HeaderMap) -> Response<Fragments> {
        let mut response = Response::new(Fragments::new());
        if self.allowed(request).is_none() {
            *response.status_mut() = StatusCode::FORBIDDEN;
            return response;
        }
        *response.status_mut() = StatusCode::NO_CONTENT;
        let headers = response.headers_mut();
        headers.insert(
            header::ACCESS_CONTROL_ALLOW_METHODS,
            HeaderValue::from_static("POST"),
        );
        headers.insert(
            header::ACCESS_CONTROL_ALLOW_HEADERS,
            HeaderValue::from_static("content-type"),
        );
        headers.insert(
            header::ACCESS_CONTROL_MAX_AGE,
            HeaderValue::from_static("600"),
        );
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(origin: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::ORIGIN, HeaderValue::from_str(origin).unwrap());
        headers
    }

    #[test]
    fn only_listed_origins_may_read_answers() {
        let cors = Cors::new(vec!["https://example.org".into()]);
        let mut response = Response::new(Fragments::new());
        cors.decorate(&request("https://example.org"), &mut response);
        assert_eq!(
            response.headers()[header::ACCESS_CONTROL_ALLOW_ORIGIN],
            "https://example.org"
        );
        let mut response = Response::new(Fragments::new());
        cors.decorate(&request("https://evil.example"), &mut response);
        assert!(!response
            .headers()
            .contains_key(header::ACCESS_CONTROL_ALLOW_ORIGIN));
        assert_eq!(
            cors.preflight(&request("https://evil.example")).status(),
            403
        );
        assert_eq!(
            cors.preflight(&request("https://example.org")).status(),
            204
        );
        // No policy: no CORS headers at all, and no preflight allowed.
        let none = Cors::new(Vec::new());
        let mut response = Response::new(Fragments::new());
        none.decorate(&request("https://example.org"), &mut response);
        assert!(response.headers().is_empty());
        assert_eq!(
            none.preflight(&request("https://example.org")).status(),
            403
        );
    }
}
