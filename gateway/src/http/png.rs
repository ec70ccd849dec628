//! `GET /boards/{id}.png`: a board as an indexed-colour PNG, drawn by
//! `pgplace_core::png::render` from the gateway's mirror (no query to the database), or,
//! with `at`, from `place.board_at` (the board as it was then).
//!
//! Query: `scale` (pixels per tile side, default 1), the crop `x`, `y` (default 0),
//! `width`, `height` (default: to the board's edge), and `at` (a timestamptz as Postgres
//! reads it, percent-encoded; `+` is kept as a plus sign so that `+02` offsets work).
//! Unknown or repeated parameters are refused, so a typo does not silently draw the
//! whole board.
//!
//! The ETag names the board, its seq, a fingerprint of the layout and palette (a palette
//! change repaints the picture without a new seq) and the rectangle and scale drawn, so a
//! 304 needs no drawing at all.

use crate::db;
use crate::fragments::Fragments;
use crate::http::responses::{self, not_modified};
use crate::params::BoardRef;
use crate::state::App;
use bytes::Bytes;
use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use pgplace_core::bits::TileWidth;
use pgplace_core::png::{render, Region, RenderError, RenderOptions};
use serde_json::json;
use std::sync::OnceLock;
use tokio::sync::Semaphore;

/// Drawing takes milliseconds of CPU (up to ~100 ms for the largest pictures): it runs on
/// the blocking pool, at most one per core at a time, so that a burst of picture requests
/// cannot occupy every runtime thread and stall long polls and placements.
fn renders() -> &'static Semaphore {
    static RENDERS: OnceLock<Semaphore> = OnceLock::new();
    RENDERS
        .get_or_init(|| Semaphore::new(std::thread::available_parallelism().map_or(2, |n| n.get())))
}

/// `/boards/{id}.png` → the id text.
pub fn png_path(path: &str) -> Option<&str> {
    path.strip_prefix("/boards/")?.strip_suffix(".png")
}

/// The query of a picture request.
#[derive(Debug, Clone, PartialEq)]
pub struct Query {
    pub options: RenderOptions,
    pub at: Option<String>,
}

/// Parses `scale`, `x`, `y`, `width`, `height` and `at`; the error names the bad value.
pub fn parse_query(query: Option<&str>) -> Result<Query, String> {
    let mut parsed = Query {
        options: RenderOptions::default(),
        at: None,
    };
    let mut seen: Vec<&str> = Vec::new();
    for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        let (key, raw) = pair.split_once('=').unwrap_or((pair, ""));
        let value = percent_decode(raw)
            .ok_or_else(|| format!("{key} = {raw:?} is not valid percent-encoded UTF-8"))?;
        let name = match key {
            "scale" | "x" | "y" | "width" | "height" | "at" => key,
            _ => {
                return Err(format!(
                    "unknown parameter {key:?} (allowed: scale, x, y, width, height, at)"
                ))
            }
        };
        if seen.contains(&name) {
            return Err(format!("{name} is given more than once"));
        }
        seen.push(name);
        if name == "at" {
            if value.is_empty() {
                return Err("at is empty (expected a timestamp, e.g. 2026-01-31T12:00:00Z)".into());
            }
            parsed.at = Some(value);
            continue;
        }
        let number: i64 = value
            .parse()
            .map_err(|_| format!("{name} = {value:?} is not an integer"))?;
        let o = &mut parsed.options;
        match name {
            "scale" => o.scale = number,
            "x" => o.x = number,
            "y" => o.y = number,
            "width" => o.width = Some(number),
            _ => o.height = Some(number),
        }
    }
    Ok(parsed)
}

/// `%XX` decoding (a `+` stays a plus sign); None for a bad escape or invalid UTF-8.
fn percent_decode(raw: &str) -> Option<String> {
    let bytes = raw.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = raw.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// FNV-1a over what changes the picture without changing the seq: the layout and the
/// palette. Stable across builds, unlike std's hasher, so gateways agree on ETags.
fn fingerprint(width: i32, height: i32, bits_per_tile: i32, palette: &[String]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for b in bytes {
            hash ^= u64::from(*b);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
    };
    eat(&width.to_le_bytes());
    eat(&height.to_le_bytes());
    eat(&bits_per_tile.to_le_bytes());
    for colour in palette {
        eat(colour.as_bytes());
        eat(b",");
    }
    hash
}

/// The strong ETag of one picture (no comma in it: If-None-Match is a comma-separated
/// list).
pub fn etag(id: i64, seq: i64, fingerprint: u64, region: &Region) -> String {
    format!(
        "\"{id}-{seq}-{fingerprint:016x}-s{}-{}.{}-{}x{}\"",
        region.scale, region.x, region.y, region.width, region.height
    )
}

fn json_status(status: StatusCode, body: serde_json::Value) -> Response<Fragments> {
    let mut response = Response::new(Fragments::from(serde_json::to_vec(&body).expect("JSON")));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

fn error(status: StatusCode, message: impl Into<String>) -> Response<Fragments> {
    json_status(status, json!({"error": message.into()}))
}

/// The whole route: method, id, query, board, drawing, caching headers.
pub async fn serve(app: &App, req: &Request<Incoming>) -> Response<Fragments> {
    if req.method() != Method::GET && req.method() != Method::HEAD {
        let mut response = error(
            StatusCode::METHOD_NOT_ALLOWED,
            "method not allowed here; use GET, HEAD",
        );
        response
            .headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
        return response;
    }
    let id_text = png_path(req.uri().path()).unwrap_or("");
    let Ok(id) = id_text.parse::<i64>() else {
        return error(
            StatusCode::BAD_REQUEST,
            format!("{id_text:?} is not a board id (an integer)"),
        );
    };
    let query = match parse_query(req.uri().query()) {
        Ok(query) => query,
        Err(message) => return error(StatusCode::BAD_REQUEST, message),
    };
    let mirrored = match app.boards.get(&BoardRef::Id(id)).await {
        Ok(mirrored) => mirrored,
        Err(e) => return responses::for_rpc_error(&e),
    };
    // The settings and the bits are read under two locks: a resize in between gives bits
    // of the other layout, which `render` refuses (BitsLength); read both again then.
    let mut attempts = 0;
    loop {
        attempts += 1;
        let settings = mirrored.board.settings();
        // The size the picture has: the board's now, or then (it may have been resized).
        let (seq, width, height, bits) = match &query.at {
            None => {
                let (_, seq, bits) = mirrored.board.packed();
                (seq, settings.width, settings.height, bits)
            }
            Some(at) => match board_at(app, id, at).await {
                Ok(past) => (past.seq, past.width, past.height, Bytes::from(past.bits)),
                Err(response) => return response,
            },
        };
        let region = match query.options.resolve(width as u32, height as u32) {
            Ok(region) => region,
            Err(e) => return error(StatusCode::BAD_REQUEST, e.to_string()),
        };
        let tag = etag(
            id,
            seq,
            fingerprint(width, height, settings.bits_per_tile, &settings.palette),
            &region,
        );
        let cache = format!(
            "public, max-age=1, stale-while-revalidate={}",
            app.config.bits_stale_secs
        );
        if not_modified(req, &tag) {
            let mut response = Response::new(Fragments::new());
            *response.status_mut() = StatusCode::NOT_MODIFIED;
            set_headers(&mut response, &tag, &cache, seq);
            return response;
        }
        let tile = match TileWidth::new(settings.bits_per_tile.into()) {
            Ok(tile) => tile,
            Err(e) => return error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
        };
        let options = query.options;
        let drawn = {
            let Ok(_permit) = renders().acquire().await else {
                return error(StatusCode::SERVICE_UNAVAILABLE, "the gateway is stopping");
            };
            let settings = settings.clone();
            tokio::task::spawn_blocking(move || {
                render(
                    &bits,
                    width as u32,
                    height as u32,
                    tile,
                    &settings.palette,
                    &options,
                )
            })
            .await
        };
        let png = match drawn {
            Ok(Ok(png)) => png,
            Ok(Err(RenderError::BitsLength { .. })) if query.at.is_none() && attempts < 3 => {
                continue
            }
            Ok(Err(e)) if e.is_bad_argument() => {
                return error(StatusCode::BAD_REQUEST, e.to_string())
            }
            Ok(Err(e)) => {
                tracing::error!("rendering board {id}: {e}");
                return error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string());
            }
            Err(e) => {
                tracing::error!("rendering board {id}: {e}");
                return error(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "drawing the picture failed",
                );
            }
        };
        let length = png.len();
        let mut response = Response::new(if req.method() == Method::HEAD {
            Fragments::new()
        } else {
            Fragments::from(Bytes::from(png))
        });
        set_headers(&mut response, &tag, &cache, seq);
        let headers = response.headers_mut();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("image/png"));
        if req.method() == Method::HEAD {
            headers.insert(header::CONTENT_LENGTH, HeaderValue::from(length));
        }
        return response;
    }
}

fn set_headers(response: &mut Response<Fragments>, etag: &str, cache: &str, seq: i64) {
    let headers = response.headers_mut();
    let value = |v: &str| HeaderValue::from_str(v).expect("ASCII header values");
    headers.insert(header::ETAG, value(etag));
    headers.insert(header::CACHE_CONTROL, value(cache));
    headers.insert("x-pgplace-seq", HeaderValue::from(seq));
}

/// The board at `at` from `place.board_at`, or the response that explains why not.
async fn board_at(
    app: &App,
    id: i64,
    at: &str,
) -> Result<crate::mirror::snapshot::Past, Response<Fragments>> {
    let client = app
        .lagging_read_client()
        .await
        .map_err(|e| responses::for_rpc_error(&e))?;
    match db::board_at(&client, id, at).await {
        Ok(Some(past)) => Ok(past),
        Ok(None) => Err(error(
            StatusCode::NOT_FOUND,
            format!("board {id} has no state at {at:?}"),
        )),
        Err(e) => Err(match e.as_db_error() {
            Some(db) if db.code().code() == "42883" => error(
                StatusCode::NOT_IMPLEMENTED,
                format!(
                    "at is not available: this database's pgplace has no place.board_at ({})",
                    db.message()
                ),
            ),
            Some(db) if db.code().code().starts_with("22") => error(
                StatusCode::BAD_REQUEST,
                format!("at = {at:?}: {}", db.message()),
            ),
            Some(db) if db.code().code() == "42704" => {
                error(StatusCode::NOT_FOUND, db.message().to_string())
            }
            // Before the kept history (`compact_history`): that picture is gone for good.
            Some(db) if db.code().code() == "55000" => {
                error(StatusCode::GONE, db.message().to_string())
            }
            // The history was compacted under the read: asking again finds the keyframe.
            Some(db) if db.code().code() == "40001" => {
                let mut response = error(StatusCode::SERVICE_UNAVAILABLE, db.message().to_string());
                response
                    .headers_mut()
                    .insert(hyper::header::RETRY_AFTER, HeaderValue::from(1));
                response
            }
            Some(db) => {
                tracing::error!("place.board_at: {} {}", db.code().code(), db.message());
                error(StatusCode::INTERNAL_SERVER_ERROR, db.message().to_string())
            }
            None => {
                tracing::warn!("place.board_at: {e}");
                error(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "the database is unavailable",
                )
            }
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_query_is_parsed_strictly() {
        let q = parse_query(Some("scale=4&x=1&y=2&width=3&height=5")).unwrap();
        assert_eq!(
            q.options,
            RenderOptions {
                scale: 4,
                x: 1,
                y: 2,
                width: Some(3),
                height: Some(5)
            }
        );
        assert_eq!(parse_query(None).unwrap().options, RenderOptions::default());
        let q = parse_query(Some("at=2026-01-31%2012:00:00+02")).unwrap();
        assert_eq!(q.at.as_deref(), Some("2026-01-31 12:00:00+02"));
        assert_eq!(
            parse_query(Some("scale=x")).unwrap_err(),
            "scale = \"x\" is not an integer"
        );
        assert_eq!(
            parse_query(Some("scal=2")).unwrap_err(),
            "unknown parameter \"scal\" (allowed: scale, x, y, width, height, at)"
        );
        assert_eq!(
            parse_query(Some("x=1&x=2")).unwrap_err(),
            "x is given more than once"
        );
        assert!(parse_query(Some("at=%zz")).is_err());
        assert!(parse_query(Some("at=")).is_err());
    }

    #[test]
    fn the_etag_changes_with_the_palette_and_the_region() {
        let region = Region {
            x: 0,
            y: 0,
            width: 4,
            height: 4,
            scale: 1,
        };
        let a = fingerprint(4, 4, 1, &["#ffffff".into(), "#000000".into()]);
        let b = fingerprint(4, 4, 1, &["#ffffff".into(), "#ff0000".into()]);
        assert_ne!(a, b);
        assert_ne!(
            etag(1, 7, a, &region),
            etag(1, 7, a, &Region { scale: 2, ..region })
        );
        assert_eq!(etag(1, 7, a, &region), etag(1, 7, a, &region));
        assert!(
            !etag(1, 7, a, &region).contains(','),
            "If-None-Match splits on commas"
        );
    }
}
