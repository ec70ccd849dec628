//! `POST /placer/boards/{id}`: placements another gateway forwards to this one, the holder of
//! the board's placer lease (`--placer-url`; `placer::wire` is the shape). They join this
//! gateway's own groups and are answered in order. Only a gateway that read this one's
//! token from the database (`place.claim_placer`, the player's) may send them: anyone else
//! gets 403 before the body is read, at no cost to the database.

use crate::db::Outcome;
use crate::fragments::Fragments;
use crate::http::body::{self, BodyError};
use crate::http::routes::json_status;
use crate::params::BoardRef;
use crate::placer::wire;
use crate::state::App;
use futures_util::future::join_all;
use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Request, Response, StatusCode};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;
use subtle::ConstantTimeEq;

/// The largest group body: `--max-group` placements with the longest keys, every byte of
/// them escaped (`\u00XX`, six bytes).
fn body_limit(app: &App) -> usize {
    (app.config.max_group as usize)
        .saturating_mul(2048)
        .max(64 * 1024)
}

pub async fn accept(app: Arc<App>, req: Request<Incoming>, board: i64) -> Response<Fragments> {
    let mut response = answer(app, req, board).await;
    if response.status() != StatusCode::OK {
        // Every refusal here comes before anything is placed: the sender may place the
        // group itself.
        response.headers_mut().insert(
            wire::PLACED_HEADER,
            HeaderValue::from_static(wire::NOT_PLACED),
        );
    }
    response
}

async fn answer(app: Arc<App>, req: Request<Incoming>, board: i64) -> Response<Fragments> {
    let Some(fleet) = &app.fleet else {
        return json_status(
            StatusCode::NOT_FOUND,
            json!({"error": "this gateway is no placer (it runs without --placer-url)"}),
        );
    };
    let token = req
        .headers()
        .get(wire::TOKEN_HEADER)
        .map(|v| v.as_bytes())
        .unwrap_or_default();
    if !bool::from(token.ct_eq(fleet.token.as_bytes())) {
        return json_status(
            StatusCode::FORBIDDEN,
            json!({"error": "not this placer's token"}),
        );
    }
    let within = Duration::from_secs(app.config.body_timeout_secs);
    let group: wire::Group = match body::read(req.into_body(), body_limit(&app), within).await {
        Ok(body) => match serde_json::from_slice(&body) {
            Ok(group) => group,
            Err(e) => {
                return json_status(
                    StatusCode::BAD_REQUEST,
                    json!({"error": format!("not a group of placements: {e}")}),
                )
            }
        },
        Err(BodyError::TooLarge(limit)) => {
            return json_status(
                StatusCode::PAYLOAD_TOO_LARGE,
                json!({"error": format!("a group is at most {limit} bytes")}),
            )
        }
        Err(BodyError::Unreadable(e)) => {
            return json_status(
                StatusCode::BAD_REQUEST,
                json!({"error": format!("the body: {e}")}),
            )
        }
        Err(BodyError::Late(seconds)) => {
            return json_status(
                StatusCode::REQUEST_TIMEOUT,
                json!({"error": format!("the body did not arrive within {seconds} s")}),
            )
        }
    };
    let outcomes: Vec<wire::ItemOutcome> = match app.boards.get(&BoardRef::Id(board)).await {
        Ok(mirrored) => join_all(
            group
                .items
                .into_iter()
                .map(|item| mirrored.placer.place_here(item.into())),
        )
        .await
        .into_iter()
        .map(Into::into)
        .collect(),
        Err(error) => group
            .items
            .iter()
            .map(|_| wire::ItemOutcome::from(Err::<Outcome, _>(error.clone())))
            .collect(),
    };
    let body = serde_json::to_vec(&wire::Answer { outcomes }).expect("outcomes serialize");
    let mut response = Response::new(Fragments::from(body));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}
