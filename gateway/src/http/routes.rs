//! HTTP routes: POST /jsonrpc, GET /boards/{id}/bits, GET /healthz, /readyz, /metrics (the
//! picture, /boards/{id}.png, is `png_route`; placements from other gateways,
//! POST /placer/boards/{id}, are `forwarded`).

use crate::errors::RpcError;
use crate::fragments::Fragments;
use crate::http::assets;
use crate::http::body::{self, BodyError};
use crate::http::forwarded;
use crate::http::png;
use crate::http::responses::{self, not_modified};
use crate::metrics::{metrics, MethodLabel, RouteLabel};
use crate::params::BoardRef;
use crate::placer::wire;
use crate::rpc::jsonrpc::Reply;
use crate::rpc::jsonrpc::{self, Body};
use crate::rpc::table::{self, Limit};
use crate::state::App;
use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use serde_json::{json, Value};
use std::collections::hash_map::RandomState;
use std::convert::Infallible;
use std::future::Future;
use std::hash::BuildHasher;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::Duration;
use tracing::Instrument;

/// Answers one request that came from `peer`. Everything logged while it is answered
/// carries its request id: the client's `X-Request-Id` (a proxy's, say) when it is a
/// short token, else a new one; the answer says which.
///
/// Not an async fn: an async fn keeps its arguments in its state twice for as long as it
/// runs (the request is 248 bytes), and a connection keeps this future through the whole
/// of a long poll. The request is taken apart before anything waits, and what the route
/// does is a future of its own, boxed: only the route that runs pays for its state.
pub fn handle(
    app: Arc<App>,
    req: Request<Incoming>,
    peer: IpAddr,
) -> impl Future<Output = Result<Response<Fragments>, Infallible>> {
    let id = request_id(req.headers());
    let span = tracing::info_span!("request", id = %id, peer = %peer);
    let path = req.uri().path().to_string();
    let request_headers = app.cors_enabled().then(|| req.headers().clone());
    let answer = span.in_scope(|| route(&app, req, &path, peer));
    async move {
        let mut response = answer.await;
        responses::secure(&mut response);
        if let Some(headers) = &request_headers {
            app.cors.decorate(headers, &mut response);
        }
        metrics()
            .http_requests
            .get_or_create(&RouteLabel {
                route: route_label(&path),
                status: response.status().as_u16(),
            })
            .inc();
        if app.closing.load(Ordering::SeqCst) {
            response
                .headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        if let Ok(value) = HeaderValue::from_str(&id) {
            response.headers_mut().insert("x-request-id", value);
        }
        Ok(response)
    }
    .instrument(span)
}

fn request_id(headers: &hyper::HeaderMap) -> String {
    headers
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .filter(|v| {
            !v.is_empty()
                && v.len() <= 64
                && v.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_.:".contains(&b))
        })
        .map(str::to_string)
        .unwrap_or_else(new_request_id)
}

/// A request id of this gateway's own: a counter put through SipHash under a key drawn
/// once from the OS (std's `RandomState`), so that ids neither repeat in practice nor tell
/// a client how many requests came between two of its own (`/metrics` may be hidden:
/// `--metrics-listen`), without the system call per request that drawing each id from the
/// OS cost (2% of the gateway's CPU under `board.place` load, `perf`).
fn new_request_id() -> String {
    static KEYED_COUNTER: LazyLock<(RandomState, AtomicU64)> =
        LazyLock::new(|| (RandomState::new(), AtomicU64::new(0)));
    let (key, counter) = &*KEYED_COUNTER;
    format!(
        "{:016x}",
        key.hash_one(counter.fetch_add(1, Ordering::Relaxed))
    )
}

/// What a route answers with.
type Answer = Pin<Box<dyn Future<Output = Response<Fragments>> + Send>>;

fn now(response: Response<Fragments>) -> Answer {
    Box::pin(std::future::ready(response))
}

fn later<F: Future<Output = Response<Fragments>> + Send + 'static>(answer: F) -> Answer {
    Box::pin(answer)
}

/// A route that may reach the database: what it causes there is charged to the client's
/// address (`limits::charge_database`).
fn metered<F: Future<Output = Response<Fragments>> + Send + 'static>(
    limits: &Arc<crate::limits::Limits>,
    client: Option<IpAddr>,
    answer: F,
) -> Answer {
    later(crate::limits::answered_for(limits, client, answer))
}

fn route(app: &Arc<App>, req: Request<Incoming>, path: &str, peer: IpAddr) -> Answer {
    if let Err(problem) = check_host(&req) {
        return now(json_status(
            StatusCode::BAD_REQUEST,
            json!({"error": problem}),
        ));
    }
    let client = app.limits.client_address(peer, req.headers());
    let limits = app.limits.clone();
    let app = app.clone();
    match (req.method(), path) {
        (&Method::POST, "/jsonrpc") => metered(&limits, client, rpc(app, req, client)),
        (&Method::OPTIONS, "/jsonrpc") if req.headers().contains_key(header::ORIGIN) => {
            now(app.cors.preflight(req.headers()))
        }
        (&Method::OPTIONS, "/jsonrpc") => now(options("POST, OPTIONS")),
        (_, "/jsonrpc") => now(method_not_allowed("POST")),
        (&Method::GET | &Method::HEAD, "/healthz") => {
            now(json_status(StatusCode::OK, json!({"ok": true})))
        }
        (&Method::GET | &Method::HEAD, "/readyz") => later(async move { readyz(&app).await }),
        // Served on its own address instead (--metrics-listen): anonymous clients here
        // do not read it.
        (_, "/metrics") if app.config.metrics_listen.is_some() => now(no_route(&app, path)),
        (&Method::GET | &Method::HEAD, "/metrics") => now(metrics_text(&app)),
        (_, "/healthz" | "/readyz" | "/metrics") => now(method_not_allowed("GET, HEAD")),
        (&Method::GET | &Method::HEAD, path) if bits_path(path).is_some() => {
            let id = bits_path(path).expect("checked").to_string();
            metered(&limits, client, async move { bits(&app, &req, &id).await })
        }
        (_, path) if bits_path(path).is_some() => now(method_not_allowed("GET, HEAD")),
        (_, path) if png::png_path(path).is_some() => {
            metered(&limits, client, async move { png::serve(&app, &req).await })
        }
        // From another gateway (token-checked), not a client: not charged to an address.
        (&Method::POST, path) if wire::board_of(path).is_some() => {
            let board = wire::board_of(path).expect("checked");
            later(forwarded::accept(app, req, board))
        }
        (_, path) if wire::board_of(path).is_some() => now(method_not_allowed("POST")),
        (&Method::GET | &Method::HEAD, path) if assets::find(path).is_some() => {
            now(asset(path, req.method()))
        }
        (_, path) if assets::find(path).is_some() => now(method_not_allowed("GET, HEAD")),
        (_, path) => now(no_route(&app, path)),
    }
}

/// 404, with the routes there are (/metrics only where it is served).
fn no_route(app: &App, path: &str) -> Response<Fragments> {
    let mut routes = vec![
        "POST /jsonrpc",
        "GET /boards/{id}/bits",
        "GET /boards/{id}.png",
        "GET /healthz",
        "GET /readyz",
    ];
    if app.config.metrics_listen.is_none() {
        routes.push("GET /metrics");
    }
    json_status(
        StatusCode::NOT_FOUND,
        json!({"error": format!("no route for {path}"), "routes": routes}),
    )
}

/// What the metrics address (`--metrics-listen`) answers: GET /metrics as the main
/// address would, and 404 for everything else (nothing else is served there).
pub fn metrics_listener(app: &App, req: &Request<Incoming>) -> Response<Fragments> {
    let path = req.uri().path();
    let mut response = match (req.method(), path) {
        (&Method::GET | &Method::HEAD, "/metrics") => metrics_text(app),
        (_, "/metrics") => method_not_allowed("GET, HEAD"),
        (_, path) => json_status(
            StatusCode::NOT_FOUND,
            json!({"error": format!("no route for {path}"), "routes": ["GET /metrics"]}),
        ),
    };
    responses::secure(&mut response);
    metrics()
        .http_requests
        .get_or_create(&RouteLabel {
            route: route_label(path),
            status: response.status().as_u16(),
        })
        .inc();
    response
}

/// RFC 9112, 3.2: an HTTP/1.1 request has exactly one Host, a valid authority (else 400);
/// an HTTP/1.0 request may have none.
fn check_host(req: &Request<Incoming>) -> Result<(), &'static str> {
    let mut hosts = req.headers().get_all(header::HOST).iter();
    match (hosts.next(), hosts.next()) {
        (None, _) if req.version() == hyper::Version::HTTP_11 => {
            Err("an HTTP/1.1 request must have a Host header")
        }
        (None, _) => Ok(()),
        (Some(_), Some(_)) => Err("a request must have one Host header, not several"),
        (Some(host), None) => host
            .to_str()
            .ok()
            .filter(|h| h.is_empty() || h.parse::<hyper::http::uri::Authority>().is_ok())
            .map(|_| ())
            .ok_or("the Host header is not a valid host[:port]"),
    }
}

/// The answer to an OPTIONS request that is not a CORS preflight: what the route allows.
fn options(allow: &'static str) -> Response<Fragments> {
    let mut response = Response::new(Fragments::new());
    *response.status_mut() = StatusCode::NO_CONTENT;
    response
        .headers_mut()
        .insert(header::ALLOW, HeaderValue::from_static(allow));
    response
}

/// `/boards/{id}/bits` → the id text.
fn bits_path(path: &str) -> Option<&str> {
    path.strip_prefix("/boards/")?.strip_suffix("/bits")
}

fn asset(path: &str, method: &Method) -> Response<Fragments> {
    let (content_type, body) = assets::find(path).expect("checked by the route");
    let mut response = Response::new(if method == Method::HEAD {
        Fragments::new()
    } else {
        Fragments::from(bytes::Bytes::from_static(body))
    });
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

pub fn json_status(status: StatusCode, body: Value) -> Response<Fragments> {
    let mut response = Response::new(Fragments::from(serde_json::to_vec(&body).expect("JSON")));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

fn method_not_allowed(allow: &'static str) -> Response<Fragments> {
    let mut response = json_status(
        StatusCode::METHOD_NOT_ALLOWED,
        json!({"error": format!("method not allowed here; use {allow}")}),
    );
    response
        .headers_mut()
        .insert(header::ALLOW, HeaderValue::from_static(allow));
    response
}

fn json_response(body: Fragments) -> Response<Fragments> {
    let mut response = Response::new(body);
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// The request body types /jsonrpc reads as JSON: JSON's own, and the ones legacy clients
/// and tools send it under (`curl -d` sends a form type; browsers avoid a CORS preflight
/// with text/plain).
const JSON_BODY_TYPES: [&str; 5] = [
    "application/json",
    "application/json-rpc",
    "application/jsonrequest",
    "text/plain",
    "application/x-www-form-urlencoded",
];

/// Whether a request's Content-Type (none counts as JSON) names a body /jsonrpc can read.
fn is_json_body_type(content_type: Option<&HeaderValue>) -> bool {
    let Some(value) = content_type else {
        return true;
    };
    let Ok(text) = value.to_str() else {
        return false;
    };
    let essence = text
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    JSON_BODY_TYPES.contains(&essence.as_str())
        || (essence.starts_with("application/") && essence.ends_with("+json"))
}

/// Not an async fn: one keeps its arguments in its state twice for as long as it runs,
/// and this one runs through a long poll; the request is taken apart first.
fn rpc(
    app: Arc<App>,
    req: Request<Incoming>,
    client: Option<IpAddr>,
) -> impl Future<Output = Response<Fragments>> {
    let json_body = is_json_body_type(req.headers().get(header::CONTENT_TYPE));
    let incoming = req.into_body();
    async move {
        let app = &*app;
        if !json_body {
            let error = RpcError::invalid_request(format!(
                "the request body must be JSON: Content-Type {} (or one of {})",
                "application/json",
                JSON_BODY_TYPES[1..].join(", ")
            ));
            let mut response = json_response(jsonrpc::error_response(
                jsonrpc::Version::V2,
                &Value::Null,
                &error,
            ));
            *response.status_mut() = StatusCode::UNSUPPORTED_MEDIA_TYPE;
            metrics().rejected("content_type");
            return response;
        }
        let within = Duration::from_secs(app.config.body_timeout_secs);
        let failure = match body::read(incoming, app.config.max_body_bytes, within).await {
            Ok(body) => Ok(body),
            Err(BodyError::TooLarge(limit)) => {
                metrics().rejected("body_size");
                Err((
                    StatusCode::PAYLOAD_TOO_LARGE,
                    RpcError::invalid_request(format!(
                        "the request body is larger than {limit} bytes"
                    )),
                ))
            }
            Err(BodyError::Unreadable(error)) => Err((
                StatusCode::BAD_REQUEST,
                RpcError::parse(format!("the request body could not be read: {error}")),
            )),
            Err(BodyError::Late(seconds)) => {
                metrics().rejected("body_timeout");
                Err((
                    StatusCode::REQUEST_TIMEOUT,
                    RpcError::invalid_request(format!(
                        "the request body did not arrive within {seconds} s"
                    )),
                ))
            }
        };
        let body = match failure {
            Ok(body) => body,
            Err((status, error)) => {
                let body = jsonrpc::error_response(jsonrpc::Version::V2, &Value::Null, &error);
                let mut response = json_response(body);
                *response.status_mut() = status;
                return response;
            }
        };
        let parsed = jsonrpc::parse(&body, app.config.max_batch);
        // The body may be a slice of the connection's read buffer: holding it through a long
        // poll would pin that buffer (and make the connection allocate another).
        drop(body);
        let answer = match parsed {
            Err(error) => Some(error),
            Ok(Body::Single(request)) => answer(app, request, client).await,
            // Boxed: a single request's wait does not carry the batch loop's state.
            Ok(Body::Batch(requests)) => Box::pin(answer_batch(app, requests, client)).await,
        };
        match answer {
            Some(body) => json_response(body),
            None => {
                let mut response = Response::new(Fragments::new());
                *response.status_mut() = StatusCode::NO_CONTENT;
                response
            }
        }
    }
}

/// A batch's answers, in order (a Qik client may create a session and subscribe in one
/// batch), but get_events last: it moves the session's cursors, and nothing that could
/// still wait or fail may come between that and sending the answer.
async fn answer_batch(
    app: &App,
    requests: Vec<jsonrpc::Parsed>,
    client: Option<IpAddr>,
) -> Option<Fragments> {
    let mut answers: Vec<Option<Fragments>> = Vec::with_capacity(requests.len());
    let mut polls = Vec::new();
    for (i, request) in requests.into_iter().enumerate() {
        answers.push(None);
        if matches!(&request, Ok(r) if is_long_poll(app, &r.method)) {
            polls.push((i, request));
        } else {
            answers[i] = answer(app, request, client).await;
        }
    }
    for (i, request) in polls {
        answers[i] = answer(app, request, client).await;
    }
    jsonrpc::batch_response(answers.into_iter().flatten().collect())
}

async fn answer(app: &App, request: jsonrpc::Parsed, client: Option<IpAddr>) -> Option<Fragments> {
    match request {
        Err((version, id, error)) => Some(jsonrpc::error_response(version, &id, &error)),
        Ok(request) => {
            if request.id.is_none() && is_long_poll(app, &request.method) {
                // A notification gets no answer: taking events for it would lose them.
                return None;
            }
            let started = std::time::Instant::now();
            let resolved = table::resolve(&app.config, &request.method);
            let method = resolved.as_ref().map(|r| r.method());
            let limit = method.map_or(Limit::None, |m| m.limit);
            let outcome = match within_limits(app, limit, &request, client) {
                Ok(()) => table::call(app, &request.method, request.params.as_ref()).await,
                Err(refused) => Err(refused),
            };
            if let (Err(error), Some(method)) = (&outcome, method) {
                if !method.may_answer(error.code) {
                    metrics()
                        .undeclared_errors
                        .get_or_create(&MethodLabel {
                            method: method.name,
                        })
                        .inc();
                    tracing::error!(
                        "{} answered {} ({}), which its table entry does not declare",
                        method.name,
                        error.code,
                        error.message
                    );
                }
            }
            if let (Ok(Reply::Value(Value::String(id))), Limit::SessionsMade) = (&outcome, limit) {
                if let Some(session) = app.sessions.get(id) {
                    app.limits.created(client, session.clone());
                }
            }
            metrics()
                .rpc_seconds
                .get_or_create(&MethodLabel {
                    method: method.map_or("other", |m| m.name),
                })
                .observe(started.elapsed().as_secs_f64());
            let id = request.id?;
            Some(jsonrpc::response(request.version, &id, outcome))
        }
    }
}

/// Whether `name` is a long poll as this gateway answers names (`--method-prefix` too).
fn is_long_poll(app: &App, name: &str) -> bool {
    table::resolve(&app.config, name).is_some_and(|r| r.method().long_poll)
}

/// The per-address and per-session limits of the calls that create or write (`limits`),
/// as the method table says.
fn within_limits(
    app: &App,
    limit: Limit,
    request: &jsonrpc::Request,
    client: Option<IpAddr>,
) -> Result<(), RpcError> {
    match limit {
        Limit::SessionsMade => app.limits.check_create(client),
        Limit::GuestsMade => app.limits.check_guest(client),
        Limit::Placements => {
            let session = match &request.params {
                Some(Value::Array(items)) => items.first(),
                Some(Value::Object(map)) => map.get("session"),
                _ => None,
            };
            // A call without a session string fails on its params, counted per address.
            let session = session.and_then(Value::as_str).unwrap_or("");
            app.limits.check_place(client, session)
        }
        Limit::None => Ok(()),
    }
}

/// Ready for traffic: the database answers, the LISTEN connection is up, and the gateway
/// is not shutting down (a balancer stops sending it requests then).
async fn readyz(app: &App) -> Response<Fragments> {
    let listening = app.listening.load(Ordering::SeqCst);
    let closing = app.closing.load(Ordering::SeqCst);
    let cached = *app
        .database_checked
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    let database = match cached {
        Some((at, up)) if at.elapsed() < Duration::from_secs(1) => up,
        _ => {
            let up = tokio::time::timeout(Duration::from_secs(2), async {
                let client = app.pool.get().await.ok()?;
                client.simple_query("SELECT 1").await.ok()
            })
            .await
            .ok()
            .flatten()
            .is_some();
            *app.database_checked
                .lock()
                .unwrap_or_else(|e| e.into_inner()) = Some((std::time::Instant::now(), up));
            up
        }
    };
    let status = if listening && database && !closing {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let mut response = json_status(
        status,
        json!({"ok": status == StatusCode::OK, "database": database, "listen": listening,
            "shutting_down": closing}),
    );
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

fn metrics_text(app: &App) -> Response<Fragments> {
    let mut response = Response::new(Fragments::from(
        metrics()
            .encode(crate::metrics::Gauges {
                sessions: app.sessions.len(),
                waiting_polls: app.sessions.waiting_polls(),
                pool: app.pool.status(),
            })
            .into_bytes(),
    ));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/openmetrics-text; version=1.0.0; charset=utf-8"),
    );
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// A route as a metrics label (paths with ids in them are one route).
fn route_label(path: &str) -> &'static str {
    match path {
        "/jsonrpc" => "/jsonrpc",
        "/healthz" => "/healthz",
        "/readyz" => "/readyz",
        "/metrics" => "/metrics",
        path if bits_path(path).is_some() => "/boards/{id}/bits",
        path if png::png_path(path).is_some() => "/boards/{id}.png",
        path if assets::find(path).is_some() => "page",
        path if wire::board_of(path).is_some() => "/placer/boards/{id}",
        _ => "other",
    }
}

async fn bits(app: &App, req: &Request<Incoming>, id: &str) -> Response<Fragments> {
    let Ok(id) = id.parse::<i64>() else {
        return json_status(
            StatusCode::BAD_REQUEST,
            json!({"error": format!("{id:?} is not a board id (an integer)")}),
        );
    };
    let mirrored = match app.boards.get(&BoardRef::Id(id)).await {
        Ok(mirrored) => mirrored,
        Err(error) => return responses::for_rpc_error(&error),
    };
    let board = &mirrored.board;
    let (_, seq, bits) = board.packed();
    let settings = board.settings();
    let etag = format!("\"{id}-{seq}\"");
    let cache = format!(
        "public, max-age=1, stale-while-revalidate={}",
        app.config.bits_stale_secs
    );
    let not_modified = not_modified(req, &etag);
    let body = if not_modified || req.method() == Method::HEAD {
        Fragments::new()
    } else {
        Fragments::from(bits.clone())
    };
    let mut response = Response::new(body);
    if not_modified {
        *response.status_mut() = StatusCode::NOT_MODIFIED;
    }
    let headers = response.headers_mut();
    let mut set = |name: &'static str, value: String| {
        headers.insert(
            name,
            HeaderValue::from_str(&value).expect("ASCII header values"),
        );
    };
    set("etag", etag);
    set("cache-control", cache);
    set("x-pgplace-seq", seq.to_string());
    set("x-pgplace-width", settings.width.to_string());
    set("x-pgplace-height", settings.height.to_string());
    set(
        "x-pgplace-bits-per-tile",
        settings.bits_per_tile.to_string(),
    );
    if !not_modified {
        set("content-type", "application/octet-stream".to_string());
        if req.method() == Method::HEAD {
            set("content-length", bits.len().to_string());
        }
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_bodies_come_under_json_and_legacy_types_only() {
        let accepts = |value: &str| is_json_body_type(Some(&HeaderValue::from_str(value).unwrap()));
        assert!(is_json_body_type(None));
        for ok in [
            "application/json",
            "Application/JSON; charset=utf-8",
            "application/vnd.api+json",
            "text/plain;charset=UTF-8",
            "application/x-www-form-urlencoded",
            "application/json-rpc",
        ] {
            assert!(accepts(ok), "{ok}");
        }
        for refused in [
            "text/html",
            "application/xml",
            "multipart/form-data; boundary=x",
            "image/png",
            "",
        ] {
            assert!(!accepts(refused), "{refused}");
        }
    }

    #[test]
    fn request_ids_are_distinct_and_do_not_count() {
        let ids: Vec<u64> = (0..10_000)
            .map(|_| {
                let id = new_request_id();
                assert_eq!(id.len(), 16, "{id}");
                u64::from_str_radix(&id, 16).unwrap()
            })
            .collect();
        let distinct: std::collections::HashSet<_> = ids.iter().collect();
        assert_eq!(distinct.len(), ids.len());
        // Two in a row tell nothing of how many came between.
        let steps_of_one = ids
            .windows(2)
            .filter(|w| w[1].wrapping_sub(w[0]) == 1)
            .count();
        assert_eq!(steps_of_one, 0);
    }
}
