//! Sending a group of placements to the gateway that holds the board's placer lease, over
//! kept-alive HTTP/1.1 connections (`POST /placer/boards/{id}`, `wire.rs`).

use super::lease::Remote;
use super::wire;
use crate::db::{Outcome, PlaceItem};
use crate::errors::RpcError;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::header::CONTENT_TYPE;
use hyper::{Request, StatusCode};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use std::time::Duration;

/// How long a forwarded group may take to be answered. Longer than a lease, so that a
/// placer paused for longer than that is replaced before its callers here give up.
pub const ANSWER_WITHIN: Duration = Duration::from_secs(10);
/// How long connecting to a placer may take.
const CONNECT_WITHIN: Duration = Duration::from_secs(1);

/// Why a group was not placed through the placer.
pub enum Failure {
    /// Never handed to the placer (unreachable, or it refused the request before reading
    /// it): placing here instead places nothing twice.
    NotSent(String),
    /// Handed over, but not answered: the placements may or may not have been made.
    Unanswered(String),
}

pub struct Forwarder {
    client: Client<HttpConnector, Full<Bytes>>,
}

impl Default for Forwarder {
    fn default() -> Self {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        connector.set_connect_timeout(Some(CONNECT_WITHIN));
        Forwarder {
            client: Client::builder(TokioExecutor::new())
                // Well within the placer's --header-timeout-secs (30 s by default): a group
                // written on a connection the placer is closing as idle would be lost in
                // flight, its outcome unknown.
                .pool_idle_timeout(Duration::from_secs(5))
                .build(connector),
        }
    }
}

impl Forwarder {
    /// Places `items` through the placer at `remote`: an outcome for each, in order.
    pub async fn send(
        &self,
        remote: &Remote,
        board: i64,
        items: &[PlaceItem],
    ) -> Result<Vec<Result<Outcome, RpcError>>, Failure> {
        let group = wire::Group {
            items: items.iter().map(wire::Item::from).collect(),
        };
        let body = serde_json::to_vec(&group).expect("a group serializes");
        let request = Request::post(format!("{}{}", remote.address, wire::path(board)))
            .header(CONTENT_TYPE, "application/json")
            .header(wire::TOKEN_HEADER, &*remote.token)
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| Failure::NotSent(format!("the placer's address: {e}")))?;
        let answered = tokio::time::timeout(ANSWER_WITHIN, async {
            let response = self.client.request(request).await.map_err(|e| {
                if e.is_connect() {
                    Failure::NotSent(format!("cannot reach the placer: {e}"))
                } else {
                    Failure::Unanswered(format!("the placer's connection: {e}"))
                }
            })?;
            let status = response.status();
            let not_placed = response
                .headers()
                .get(wire::PLACED_HEADER)
                .is_some_and(|v| v.as_bytes() == wire::NOT_PLACED.as_bytes());
            let bytes = response
                .into_body()
                .collect()
                .await
                .map_err(|e| Failure::Unanswered(format!("the placer's answer: {e}")))?
                .to_bytes();
            Ok((status, not_placed, bytes))
        })
        .await;
        let (status, not_placed, bytes) = match answered {
            Ok(answer) => answer?,
            Err(_) => {
                return Err(Failure::Unanswered(format!(
                    "no answer from the placer within {} s",
                    ANSWER_WITHIN.as_secs()
                )))
            }
        };
        match status {
            StatusCode::OK => {}
            // Refused before anything was placed, and said so: a token that changed hands,
            // a gateway that is no placer (any more), a body it would not take, a gateway
            // closing or full.
            status if not_placed => {
                return Err(Failure::NotSent(format!("the placer answered {status}")))
            }
            status => return Err(Failure::Unanswered(format!("the placer answered {status}"))),
        }
        let answer: wire::Answer = serde_json::from_slice(&bytes)
            .map_err(|e| Failure::Unanswered(format!("the placer's answer: {e}")))?;
        if answer.outcomes.len() != items.len() {
            return Err(Failure::Unanswered(format!(
                "the placer answered {} outcomes for {} placements",
                answer.outcomes.len(),
                items.len()
            )));
        }
        Ok(answer.outcomes.into_iter().map(Into::into).collect())
    }
}
