//! pgplace's gateway: long-polling JSON-RPC sessions and views over LISTEN/NOTIFY.
//!
//! A session subscribes to views (`sessions::Subscription`); each kind of view keeps one
//! shared log per instance that every session on it reads by cursor:
//!
//! | view kind | instance | where |
//! |---|---|---|
//! | `board` (Qik or compact form) | a board | `board` (mirror and log), `boards` |
//! | `board_region` | (board, rectangle, form) | `region`, fed by `board` |
//! | `recent_placements` | (board, limit) | `recent` (a `list_view`), fed by `board` |
//! | a named list view | (view, limit): read at `max_limit`, the smaller limits derived | `lists`, `list_view`, `list_diff` |
//! | presence: `watching`, `cursors` | a board | `board`, `cursors` |
//!
//! # Layout
//! - `config`: flags and environment.
//! - `app`: starting everything (pool, listener, background tasks, HTTP server); `state`:
//!   what every handler shares; `http`: routes; `responses`: the security headers of
//!   every answer (CSP, nosniff, referrer policy) and conditional responses;
//!   `jsonrpc`: envelopes; `params`: method params; `methods`: the methods; `errors`:
//!   error codes (one list, checked against the page's and the README's).
//! - `board`: one mirrored board and its event log; `boards`: the mirrored boards;
//!   `freezing`: which of a board's tiles are frozen, and when the others freeze.
//! - `change_feed`: ticks the change log (`place.tick`) and reads its new positions, which
//!   tell `lists` which instances to read again.
//! - `lists`: the list view instances (`place.create_view`) and when each is read again;
//!   `view_checks`: what `view` notifications say, checked against `place.views`;
//!   `list_view`: one instance, its window and event log; `list_diff`: the events between
//!   two windows; `events`: list and region events as clients get them; `recent`: a board's newest
//!   placements as a list view (`recent_placements`), fed by the board's mirror;
//!   `region`: a rectangle of a board (`board_region`), fed by the board's mirror.
//! - `cursors`: where the people watching a board point (`session.set_presence`).
//! - `listener`: the LISTEN connection that keeps the mirrors and list views exact (a
//!   notification wakes it; the boards' placements are read from the history).
//! - `sessions`: this gateway's copies of sessions, their subscriptions (a board, region or
//!   list view, each with where it began and where a legacy client stands), their cursors
//!   on boards, long polls and expiry; `poll_cursor`: the `cursor` of a resumable poll.
//! - `session_store`: sessions in the database (any gateway serves any session);
//!   `session_checks`: what other gateways say of sessions, checked against their rows;
//!   `session_access`: finding a session's copy, hearing the other gateways before a poll,
//!   legacy takeovers, extending a board's log back for an old ack; `session_upkeep`:
//!   seen marks, expiry and watching counts over every gateway.
//! - `delivery`: whether a legacy poll's answer reached its client (else it comes again).
//! - `metrics`: what `GET /metrics` reports; `limits`: per-address (an IPv6 client per
//!   /64) and per-session abuse limits, and the gateway's open connections in all (and who
//!   the client is behind a proxy); `cors`: which other origins may call.
//! - `placer`: group commit of placements through `place.place_many`.
//! - `png_route`: `GET /boards/{id}.png`, a board drawn as a PNG.
//! - `assets`: the embedded web page;
//! - `shared_log`: events serialized once, read by many sessions by cursor.
//! - `db`: every SQL statement, and `db::checkout`, the pooled connection a request takes
//!   (charged to its client's database budget, `limits::charge_database`); `unknown`:
//!   board ids, view names and session ids the database just said it lacks; `fragments`:
//!   responses made of shared buffers.

pub mod app;
pub mod boards;
pub mod change_feed;
pub mod config;
pub mod cors;
pub mod db;
pub mod errors;
pub mod fragments;
pub mod http;
pub mod json;
pub mod limits;
pub mod listener;
pub mod metrics;
pub mod mirror;
pub mod params;
pub mod placer;
pub mod rpc;
pub mod sessions;
pub mod shared_log;
pub mod state;
pub mod unknown;
pub mod views;

pub use app::{start, Running};
pub use config::Config;
