//! The gateway's settings: command-line flags, each also readable from the environment.

use clap::Parser;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// Long-polling JSON-RPC gateway for pgplace boards.
///
/// Clients POST JSON-RPC 2.0 (or 1.0-style) requests to /jsonrpc; GET /boards/{id}/bits
/// returns a board's packed tiles; GET /readyz says whether the database and the LISTEN
/// connection are up, GET /healthz that the process is alive, GET /metrics what it does
/// (Prometheus). Every flag can also be given by the environment variable shown.
#[derive(Parser, Debug, Clone)]
#[command(name = "pgplace-gateway", version)]
pub struct Config {
    /// PostgreSQL connection URL of the database that has the pgplace extension. TLS as
    /// libpq's `sslmode` (disable, prefer, require, verify-ca, verify-full) and
    /// `sslrootcert` (a PEM file of CA certificates, or `system`) say; no `sslmode`: no TLS.
    #[arg(
        long,
        env = "PGPLACE_DATABASE_URL",
        default_value = "postgresql://postgres@127.0.0.1:54329/pgplace"
    )]
    pub database_url: String,

    /// A streaming replica of that database, for the reads that need no freshness
    /// guarantee (board.tile_history, pictures of the past): they go there, and to the
    /// primary while the replica cannot be reached. LISTEN and every write stay on the
    /// primary, and so does everything a view's exactness rests on. TLS as for
    /// `--database-url`.
    #[arg(long, env = "PGPLACE_REPLICA_URL")]
    pub replica_url: Option<String>,

    /// Address and port to listen on (port 0 picks a free port).
    #[arg(long, env = "PGPLACE_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,

    /// Address and port to serve GET /metrics on instead (port 0 picks a free port): the
    /// main address then answers /metrics with 404, so only who can reach this one (a
    /// private network, loopback) reads the metrics. By default none: /metrics is served
    /// on `--listen` with everything else.
    #[arg(long, env = "PGPLACE_METRICS_LISTEN")]
    pub metrics_listen: Option<SocketAddr>,

    /// Largest number of pooled database connections (the LISTEN connection is extra).
    #[arg(long, env = "PGPLACE_DB_POOL", default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub db_pool: u32,

    /// Most sessions held at once; session.create fails with a clear error beyond it.
    #[arg(long, env = "PGPLACE_MAX_SESSIONS", default_value_t = 100_000)]
    pub max_sessions: usize,

    /// Seconds a session lives without a get_events call.
    #[arg(long, env = "PGPLACE_SESSION_IDLE", default_value_t = 120, value_parser = clap::value_parser!(u64).range(1..))]
    pub session_idle_secs: u64,

    /// Most events a session may fall behind on one view; a session further behind (a
    /// client that stopped polling) gets a `reset` with a fresh initial state instead.
    #[arg(long, env = "PGPLACE_SESSION_BUFFER", default_value_t = 20_000, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    pub session_buffer: u64,

    /// Also answer every method under this prefix: a legacy client's own names (`qik.`
    /// makes `qik.session.create`, `qik.session.get_events`, ...). Empty: none.
    #[arg(long, env = "PGPLACE_METHOD_PREFIX")]
    pub method_prefix: Option<String>,

    /// List views' own subscribe methods, comma-separated `METHOD=VIEW` pairs:
    /// `METHOD(session, limit)` answers exactly as `session.subscribe(session, VIEW,
    /// {"limit": limit})` (Qik's `stream.subscribe_public_live=public_live`).
    #[arg(long, env = "PGPLACE_VIEW_METHODS", default_value = "")]
    pub view_methods: String,

    /// Most subscriptions one session may hold.
    #[arg(long, env = "PGPLACE_MAX_SUBSCRIPTIONS", default_value_t = 16)]
    pub max_subscriptions: usize,

    /// Longest a get_events call waits, in seconds (a larger timeout is capped to this).
    #[arg(long, env = "PGPLACE_MAX_POLL", default_value_t = 90, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub max_poll_secs: u64,

    /// Most placements committed in one group (one place.place_many call).
    #[arg(long, env = "PGPLACE_MAX_GROUP", default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub max_group: u64,

    /// How a group of placements commits. `asynchronous` (pgplace 0.8.11 or later): before
    /// it is durable, then the gateway waits for durability before it answers, so the
    /// board's seq lock is free during the WAL flush and the synchronous standby's answer.
    /// Worth it where those take long next to the database's CPU time per group (a standby
    /// on another machine, a slow disk); where the database's CPU is the limit it costs
    /// (tests/bench/README.md, Asynchronous commits). Either way nothing is answered or
    /// shown before it is durable.
    #[arg(long, env = "PGPLACE_COMMIT", value_enum, default_value_t = Commit::Synchronous)]
    pub commit: Commit,

    /// Where the other gateways reach this one (http://host:port), to send it the
    /// placements of the boards whose placer lease it holds (pgplace 0.8.12 or later). Set
    /// on every gateway of one database: each board's placements are then grouped by one
    /// gateway, however many take them. Unset: this gateway places what it takes itself.
    #[arg(long, env = "PGPLACE_PLACER_URL")]
    pub placer_url: Option<String>,

    /// Largest request body accepted, in bytes.
    #[arg(long, env = "PGPLACE_MAX_BODY", default_value_t = 1 << 20)]
    pub max_body_bytes: usize,

    /// Most requests in one JSON-RPC batch.
    #[arg(long, env = "PGPLACE_MAX_BATCH", default_value_t = 100)]
    pub max_batch: usize,

    /// Seconds a client has to send a request's headers once it started (or, on a kept-alive
    /// connection, once the last answer went out): slow clients hold a connection no longer.
    #[arg(long, env = "PGPLACE_HEADER_TIMEOUT", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub header_timeout_secs: u64,

    /// Seconds a request body may take to arrive once its headers have.
    #[arg(long, env = "PGPLACE_BODY_TIMEOUT", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub body_timeout_secs: u64,

    /// Proxies whose `X-Forwarded-For` names the client (IP addresses or networks,
    /// comma-separated; "" for none). A request from one that names no other client is not
    /// limited per address or session: by default, loopback (a local nginx, local tools).
    #[arg(
        long,
        env = "PGPLACE_TRUSTED_PROXIES",
        default_value = "127.0.0.0/8,::1/128"
    )]
    pub trusted_proxies: String,

    /// Most connections open at once in all, trusted proxies' too; beyond it a new one is
    /// answered 503 and closed, so that many addresses together cannot take every file
    /// descriptor and the memory of the process. Keep it under the open-files limit
    /// (`ulimit -n`) less the database pool: past that, accept() fails first, and new
    /// clients wait unanswered instead of being told.
    #[arg(long, env = "PGPLACE_MAX_CONNECTIONS", default_value_t = 20_000, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_connections: u32,

    /// Most connections open at once from one client address (not a trusted proxy). Every
    /// per-address limit counts an IPv6 client by its /64: one host may hold all of it.
    #[arg(long, env = "PGPLACE_MAX_CONNECTIONS_PER_ADDRESS", default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_connections_per_address: u32,

    /// Most sessions one client address (IPv6: /64) may hold on this gateway.
    #[arg(long, env = "PGPLACE_MAX_SESSIONS_PER_ADDRESS", default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_sessions_per_address: u32,

    /// Sessions one client address (IPv6: /64) may create per second, on average ...
    #[arg(long, env = "PGPLACE_SESSION_CREATE_RATE", default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..))]
    pub session_create_rate: u32,

    /// ... and at once (a burst: an office behind one address opening the page).
    #[arg(long, env = "PGPLACE_SESSION_CREATE_BURST", default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..))]
    pub session_create_burst: u32,

    /// board.place calls one session may make per second (cooldowns limit users; this
    /// limits a script hammering one session).
    #[arg(long, env = "PGPLACE_PLACE_RATE_PER_SESSION", default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..))]
    pub place_rate_per_session: u32,

    /// board.place calls one client address (IPv6: /64) may make per second (bursts of
    /// twice that).
    #[arg(long, env = "PGPLACE_PLACE_RATE_PER_ADDRESS", default_value_t = 500, value_parser = clap::value_parser!(u32).range(1..))]
    pub place_rate_per_address: u32,

    /// Distinct `board_region` rectangles one board serves at once (each a copy of its
    /// tiles, its state and its log; every session on a rectangle shares its copy).
    #[arg(long, env = "PGPLACE_MAX_REGIONS_PER_BOARD", default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_regions_per_board: u32,

    /// Their tiles together, per board (16 Mi: sixteen whole copies of a 1000x1000 board;
    /// 8 MiB at 4 bits a tile, and their JSON states 11 MiB more).
    #[arg(long, env = "PGPLACE_MAX_REGION_TILES_PER_BOARD", default_value_t = 16_777_216, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_region_tiles_per_board: u64,

    /// Distinct rectangles one client address (IPv6: /64) may have made that are still
    /// served (so that one address cannot take a board's whole budget above).
    #[arg(long, env = "PGPLACE_MAX_REGIONS_PER_ADDRESS", default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_regions_per_address: u32,

    /// Database work one client address (IPv6: /64) may cause per second: every pooled
    /// connection a request of it takes (a session read, an unknown board looked up, the
    /// bits, a PNG, a history page, ...). Placements go through their own limits above and
    /// the batcher, polls answered from memory cost nothing. A flood from one address then
    /// leaves the pool, which the placer shares, to everyone else.
    #[arg(long, env = "PGPLACE_DB_RATE_PER_ADDRESS", default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..))]
    pub db_rate_per_address: u32,

    /// ... and at once (a page opening: create, subscribe, a few history pages).
    #[arg(long, env = "PGPLACE_DB_BURST_PER_ADDRESS", default_value_t = 200, value_parser = clap::value_parser!(u32).range(1..))]
    pub db_burst_per_address: u32,

    /// How long a request over that budget waits for it (milliseconds) before it is
    /// refused: a burst a little past it is served late rather than failed, and a flood
    /// is paced by its own answers (0: refused at once).
    #[arg(long, env = "PGPLACE_DB_WAIT_MS", default_value_t = 1000, value_parser = clap::value_parser!(u32).range(0..=60_000))]
    pub db_wait_ms: u32,

    /// Pooled connections one client address (IPv6: /64) may hold at once (of `--db-pool`):
    /// a burst within its budget is served a few at a time, and the rest of the pool is
    /// left to everyone else (a request waits for one within `--db-wait-ms`).
    #[arg(long, env = "PGPLACE_DB_CONNECTIONS_PER_ADDRESS", default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..))]
    pub db_connections_per_address: u32,

    /// Origins whose pages may call the gateway (CORS), comma-separated, or "*"; by
    /// default none: only the gateway's own page.
    #[arg(long, env = "PGPLACE_CORS_ORIGINS", default_value = "")]
    pub cors_origins: String,

    /// `stale-while-revalidate` seconds sent with /boards/{id}/bits.
    #[arg(long, env = "PGPLACE_BITS_STALE", default_value_t = 10)]
    pub bits_stale_secs: u64,

    /// A list view with no event for this many seconds sends its sessions a `ping`.
    #[arg(long, env = "PGPLACE_LIST_PING", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub list_ping_secs: u64,

    /// The least time between two reads of one list view from the database (milliseconds):
    /// a burst of commits on its table costs one read.
    #[arg(long, env = "PGPLACE_LIST_REFRESH_MS", default_value_t = 10, value_parser = clap::value_parser!(u64).range(0..=60_000))]
    pub list_refresh_ms: u64,

    /// How often the gateway gives committed changes of watched tables their positions
    /// (`place.tick()`) and reads them (milliseconds). A round with nothing new reads two
    /// index entries and writes nothing.
    #[arg(long, env = "PGPLACE_CHANGE_TICK_MS", default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pub change_tick_ms: u64,

    /// Boards a visitor may play on without an account (comma-separated names or ids, or
    /// `*` for all): the page offers "Play as a guest", which makes a guest user
    /// (`session.play_as_guest`), and guests place on these boards only. By default none.
    #[arg(long, env = "PGPLACE_GUEST_BOARDS", default_value = "")]
    pub guest_boards: String,

    /// Guests one client address may make an hour (−32011 beyond).
    #[arg(long, env = "PGPLACE_GUESTS_PER_ADDRESS_PER_HOUR", default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=3600))]
    pub guests_per_address_per_hour: u32,

    /// Sign-in from the site that embeds the board: the `iss` its identity provider puts
    /// in the JWTs that `session.authorize` then takes besides pgplace's tokens (with
    /// `--jwt-audience` and a key). By default none: only pgplace's tokens.
    #[arg(long, env = "PGPLACE_JWT_ISSUER")]
    pub jwt_issuer: Option<String>,

    /// The `aud` a sign-in JWT must carry (the provider's name for this site).
    #[arg(long, env = "PGPLACE_JWT_AUDIENCE")]
    pub jwt_audience: Option<String>,

    /// A file holding the HS256 secret the provider signs JWTs with (at least 32 bytes;
    /// a final newline is not part of it).
    #[arg(long, env = "PGPLACE_JWT_HS256_SECRET_FILE")]
    pub jwt_hs256_secret_file: Option<PathBuf>,

    /// A JWKS file (the provider's `jwks_uri` document) with the public keys of RS256 and
    /// ES256 JWTs, chosen by the token's `kid`. Read at start: restart to take new keys.
    #[arg(long, env = "PGPLACE_JWT_JWKS_FILE")]
    pub jwt_jwks_file: Option<PathBuf>,

    /// The claim whose string becomes a JWT user's name when they first sign in (a taken
    /// name gets the user's id after it).
    #[arg(long, env = "PGPLACE_JWT_NAME_CLAIM", default_value = "name")]
    pub jwt_name_claim: String,
}

impl Config {
    pub fn session_idle(&self) -> Duration {
        Duration::from_secs(self.session_idle_secs)
    }

    /// `placer_url` checked: an http:// URL with a host and no path, or why not.
    pub fn placer_url(&self) -> Result<Option<String>, String> {
        let Some(url) = &self.placer_url else {
            return Ok(None);
        };
        let uri: hyper::Uri = url
            .parse()
            .map_err(|e| format!("--placer-url {url:?} is not a URL: {e}"))?;
        let plain = uri.scheme_str() == Some("http")
            && uri.authority().is_some_and(|a| !a.host().is_empty())
            && matches!(uri.path(), "" | "/")
            && uri.query().is_none();
        if !plain {
            return Err(format!(
                "--placer-url {url:?} must be http://host:port, where the other gateways reach this one"
            ));
        }
        Ok(Some(url.trim_end_matches('/').to_string()))
    }

    /// `trusted_proxies` read: the error names the entry that is not an address or network.
    pub fn trusted_proxy_networks(&self) -> Result<Vec<ipnet::IpNet>, String> {
        list(&self.trusted_proxies)
            .map(|entry| {
                entry
                    .parse::<ipnet::IpNet>()
                    .or_else(|_| entry.parse::<std::net::IpAddr>().map(ipnet::IpNet::from))
                    .map_err(|_| {
                        format!("--trusted-proxies: {entry:?} is not an IP address or network")
                    })
            })
            .collect()
    }

    /// `view_methods` read: (method, view) pairs; the error names the entry that is not one.
    pub fn view_method_list(&self) -> Result<Vec<(&str, &str)>, String> {
        list(&self.view_methods)
            .map(|entry| match entry.split_once('=') {
                Some((method, view))
                    if !method.trim().is_empty()
                        && !view.trim().is_empty()
                        && !method.contains(char::is_whitespace) =>
                {
                    Ok((method.trim(), view.trim()))
                }
                _ => Err(format!(
                    "--view-methods: {entry:?} is not METHOD=VIEW (a method name without \
                     spaces, a list view's name)"
                )),
            })
            .collect()
    }

    /// The (method, view) pairs of `view_methods` (checked at start).
    pub fn view_methods(&self) -> Vec<(&str, &str)> {
        self.view_method_list().unwrap_or_default()
    }

    /// The list view whose own subscribe method `method` is.
    pub fn view_method(&self, method: &str) -> Option<&str> {
        list(&self.view_methods)
            .filter_map(|entry| entry.split_once('='))
            .find(|(m, _)| m.trim() == method)
            .map(|(_, view)| view.trim())
    }

    /// Whether board `id` named `name` takes guests (`--guest-boards`).
    pub fn takes_guests(&self, id: i64, name: &str) -> bool {
        list(&self.guest_boards)
            .any(|entry| entry == "*" || entry == name || entry == id.to_string())
    }

    /// `cors_origins` read.
    pub fn cors_origin_list(&self) -> Vec<String> {
        list(&self.cors_origins).map(str::to_string).collect()
    }

    pub fn max_poll(&self) -> Duration {
        Duration::from_secs(self.max_poll_secs)
    }

    /// The defaults, pointed at `database_url` and a free loopback port (for tests).
    pub fn for_database(database_url: &str) -> Self {
        let mut config = Config::parse_from(["pgplace-gateway"]);
        config.database_url = database_url.to_string();
        config.listen = SocketAddr::from(([127, 0, 0, 1], 0));
        config.metrics_listen = None;
        config
    }
}

/// How a group of placements commits (`--commit`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Commit {
    Synchronous,
    Asynchronous,
}

/// The entries of a comma-separated list.
fn list(text: &str) -> impl Iterator<Item = &str> {
    text.split(',').map(str::trim).filter(|e| !e.is_empty())
}
