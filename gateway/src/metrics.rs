//! What `GET /metrics` reports, in the Prometheus (OpenMetrics) text format.
//!
//! Counters and histograms are the process's (one registry, as a scrape sees one process);
//! the gauges of the state (sessions, waiting polls, the pool) are read when scraped.
//!
//! No label comes from a client: every series is a memory the gateway keeps forever, and a
//! client that could choose a label value could grow `/metrics` without end. Labels are
//! `&'static str` chosen by the code (a method from the method table, `other` for an
//! unknown one; a route's pattern, `other` for an unknown path; a limit, a reason, an
//! outcome), an HTTP status, or — the one exception, `ViewLabel` — a list view's name
//! once the database returned the view's rows.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use std::sync::LazyLock;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct MethodLabel {
    pub method: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabel {
    pub reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LimitLabel {
    pub limit: &'static str,
}

/// How it ended. A placement: `placed`, `refused` (cooldown, frozen tile, ...: the group
/// committed without it) or `failed` (the group's transaction failed). A hand-over:
/// `handed` or `not_handed`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabel {
    pub outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RouteLabel {
    pub route: &'static str,
    pub status: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PoolLabel {
    pub state: &'static str,
}

pub struct Metrics {
    registry: Registry,
    sessions: Gauge,
    waiting_polls: Gauge,
    db_pool: Family<PoolLabel, Gauge>,
    pub events_delivered: Counter,
    pub placements: Family<OutcomeLabel, Counter>,
    pub placement_group_size: Histogram,
    pub placements_forwarded: Counter,
    pub listen_reconnects: Counter,
    pub catch_up_seqs: Histogram,
    pub resets: Family<ReasonLabel, Counter>,
    pub rpc_seconds: Family<MethodLabel, Histogram>,
    pub http_requests: Family<RouteLabel, Counter>,
    pub rejected: Family<LimitLabel, Counter>,
    pub waited: Family<LimitLabel, Counter>,
    /// Errors a method answered that its table entry does not declare (a bug: clients
    /// generated from `rpc.discover` would not expect them).
    pub undeclared_errors: Family<MethodLabel, Counter>,
    list_view_reads: Family<ViewLabel, Counter>,
    /// Legacy sessions taken over from another gateway: how long until its positions came
    /// (`handed`) or the wait gave up (`not_handed`: the views start with a reset).
    handovers: Family<OutcomeLabel, Histogram>,
}

/// A list view, by name: set only from a read the database answered with the view's rows
/// (`list_view_read`), never from a name a client asked for, so the series are the views a
/// DBA made (`place.create_view`), not what clients make up. A dropped view's series is
/// removed when this gateway learns that the database no longer has it (`list_view_dropped`):
/// without that, an application that makes and drops views as it goes (one per event, say)
/// would grow `/metrics` for as long as the gateway runs. One dropped while this gateway
/// did not hear of it (LISTEN down) stays until restart; those are still views a DBA made.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ViewLabel {
    view: String,
}

/// A read of list view `view` answered with its rows.
pub fn list_view_read(view: &str) {
    metrics()
        .list_view_reads
        .get_or_create(&ViewLabel { view: view.into() })
        .inc();
}

/// The database no longer has list view `view`: its series goes.
pub fn list_view_dropped(view: &str) {
    metrics()
        .list_view_reads
        .remove(&ViewLabel { view: view.into() });
}

/// Whether list view `view` has a series (a drop of it must be looked into).
pub fn list_view_counted(view: &str) -> bool {
    metrics()
        .list_view_reads
        .get(&ViewLabel { view: view.into() })
        .is_some()
}

/// The process's metrics.
pub fn metrics() -> &'static Metrics {
    static METRICS: LazyLock<Metrics> = LazyLock::new(Metrics::new);
    &METRICS
}

fn latency_histogram() -> Histogram {
    // 100 µs .. ~105 s: a placement's commit to a long poll's whole wait.
    Histogram::new(exponential_buckets(0.0001, 2.0, 21))
}

impl Metrics {
    fn new() -> Self {
        let m = Metrics {
            registry: Registry::with_prefix("pgplace"),
            sessions: Gauge::default(),
            waiting_polls: Gauge::default(),
            db_pool: Family::default(),
            events_delivered: Counter::default(),
            placements: Family::default(),
            placement_group_size: Histogram::new(exponential_buckets(1.0, 2.0, 14)),
            placements_forwarded: Counter::default(),
            listen_reconnects: Counter::default(),
            catch_up_seqs: Histogram::new(exponential_buckets(1.0, 4.0, 12)),
            resets: Family::default(),
            rpc_seconds: Family::new_with_constructor(latency_histogram as fn() -> Histogram),
            http_requests: Family::default(),
            rejected: Family::default(),
            waited: Family::default(),
            undeclared_errors: Family::default(),
            list_view_reads: Family::default(),
            handovers: Family::new_with_constructor(latency_histogram as fn() -> Histogram),
        };
        let mut registry = m.registry;
        registry.register(
            "sessions",
            "Sessions this gateway holds a copy of",
            m.sessions.clone(),
        );
        registry.register(
            "waiting_polls",
            "get_events calls waiting for events",
            m.waiting_polls.clone(),
        );
        registry.register(
            "db_pool_connections",
            "Database pool connections (size, available, waiting callers, max)",
            m.db_pool.clone(),
        );
        registry.register(
            "events_delivered",
            "Events sent in get_events answers",
            m.events_delivered.clone(),
        );
        registry.register(
            "placements",
            "Placements through board.place by outcome",
            m.placements.clone(),
        );
        registry.register(
            "placement_group_size",
            "Placements committed in one place_many group",
            m.placement_group_size.clone(),
        );
        registry.register(
            "placements_forwarded",
            "Placements sent to the gateway that holds their board's placer lease (--placer-url)",
            m.placements_forwarded.clone(),
        );
        registry.register(
            "listen_reconnects",
            "Times the LISTEN connection was made again",
            m.listen_reconnects.clone(),
        );
        registry.register(
            "catch_up_seqs",
            "Placements a board caught up on from the database after LISTEN was lost or a notice was missed",
            m.catch_up_seqs.clone(),
        );
        registry.register(
            "list_view_reads",
            "Reads of each list view from the database: one per change of its table, whatever limits its sessions ask for",
            m.list_view_reads.clone(),
        );
        registry.register(
            "legacy_handover_seconds",
            "Legacy sessions taken over from another gateway, by whether its positions came (handed) or not (not_handed), and the wait",
            m.handovers.clone(),
        );
        registry.register(
            "resets",
            "reset events sent to views, by reason",
            m.resets.clone(),
        );
        registry.register(
            "rpc_duration_seconds",
            "JSON-RPC calls by method (a get_events includes its wait)",
            m.rpc_seconds.clone(),
        );
        registry.register(
            "http_requests",
            "HTTP requests by route and status",
            m.http_requests.clone(),
        );
        registry.register(
            "rejected_requests",
            "Requests refused by a limit",
            m.rejected.clone(),
        );
        registry.register(
            "undeclared_errors",
            "Errors a method answered that rpc.discover does not list for it (a bug)",
            m.undeclared_errors.clone(),
        );
        registry.register(
            "limit_waits",
            "Requests served after waiting for a limit's budget",
            m.waited.clone(),
        );
        Metrics { registry, ..m }
    }

    pub fn reset(&self, reason: &'static str) {
        self.resets.get_or_create(&ReasonLabel { reason }).inc();
    }

    pub fn handover(&self, handed: bool, waited: std::time::Duration) {
        let outcome = if handed { "handed" } else { "not_handed" };
        self.handovers
            .get_or_create(&OutcomeLabel { outcome })
            .observe(waited.as_secs_f64());
    }

    pub fn rejected(&self, limit: &'static str) {
        self.rejected.get_or_create(&LimitLabel { limit }).inc();
    }

    pub fn waited(&self, limit: &'static str) {
        self.waited.get_or_create(&LimitLabel { limit }).inc();
    }

    /// The text a scrape gets: the gauges as read now, then every metric.
    pub fn encode(&self, gauges: Gauges) -> String {
        self.sessions.set(gauges.sessions as i64);
        self.waiting_polls.set(gauges.waiting_polls as i64);
        let pool = gauges.pool;
        for (state, value) in [
            ("size", pool.size),
            ("available", pool.available),
            ("waiting", pool.waiting),
            ("max", pool.max_size),
        ] {
            self.db_pool
                .get_or_create(&PoolLabel { state })
                .set(value as i64);
        }
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry)
            .expect("writing to a String cannot fail");
        text
    }
}

/// What a scrape reads of the gateway's state at the moment.
pub struct Gauges {
    pub sessions: usize,
    pub waiting_polls: usize,
    pub pool: deadpool_postgres::Status,
}
