//! Abuse limits: how much one client address and one session may ask of this gateway, and
//! how many connections all clients together may hold open. Each refusal says when to come
//! back (`data.retry_after_ms`, as cooldowns say `retry_at`) or what limit it met, changes
//! nothing, and is counted in /metrics.
//!
//! The client address is the connection's peer, unless the peer is a configured trusted
//! proxy: then the nearest address in `X-Forwarded-For` that is not a trusted proxy (a
//! client cannot choose its address by sending the header itself). A request whose
//! client address is a trusted proxy (loopback by default: a local proxy that names no
//! client, local tools) is not limited per address or session.
//!
//! "Per address" is per IPv4 address, but per /64 for IPv6 (`limit_key`).

use crate::config::Config;
use crate::errors::{RpcError, TOO_FAST, TOO_MANY};
use crate::lock::lock;
use crate::metrics::metrics;
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota};
use hyper::header::HeaderMap;
use ipnet::IpNet;
use serde_json::json;
use std::any::Any;
use std::collections::HashMap;
use std::net::IpAddr;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};

/// The maps here are bounded by their entries, each of a fixed size: every key is an
/// address (`LimitKey`, an IPv4 address or an IPv6 /64: what a client cannot choose without
/// owning it, a TCP peer or our proxy's word) or a string `names::is_session_id` accepted (32
/// bytes), and every value a count, a rate limiter's state, a semaphore or weak pointers to
/// what the address holds. None keeps a string a client wrote. How many entries: `connections`
/// one per address with a connection open (at most `--max-connections`); the rate limiters
/// and `database_connections` one per address (or session id) seen since the last upkeep
/// (`forget_idle`, every minute), `places_by_session` only after the address's own placement
/// budget let the call through; `sessions` and `regions` what is alive (`--max-sessions`,
/// the region limits) plus what ended since the last upkeep.
pub struct Limits {
    trusted: Vec<IpNet>,
    max_connections: usize,
    /// Every connection open now, trusted proxies' too: the per-address counts alone would
    /// let many addresses (or many /64s of one network) hold any number.
    open_connections: AtomicUsize,
    max_connections_per_address: usize,
    max_sessions_per_address: usize,
    connections: Mutex<HashMap<LimitKey, usize>>,
    sessions: HeldBy,
    creates: DefaultKeyedRateLimiter<LimitKey>,
    /// Guests made per address (`--guests-per-address-per-hour`).
    guests: DefaultKeyedRateLimiter<LimitKey>,
    places_by_address: DefaultKeyedRateLimiter<LimitKey>,
    places_by_session: DefaultKeyedRateLimiter<Arc<str>>,
    database_by_address: DefaultKeyedRateLimiter<LimitKey>,
    /// How long a request over its address's database budget waits for it (`--db-wait-ms`).
    database_wait: std::time::Duration,
    /// Pooled connections one address may hold at once (`--db-connections-per-address`),
    /// and what each address holds.
    database_connections_per_address: usize,
    database_connections: Mutex<HashMap<LimitKey, Arc<tokio::sync::Semaphore>>>,
    max_regions_per_address: usize,
    regions: HeldBy,
}

tokio::task_local! {
    /// The client a request is answered for, so that the database work it causes, however
    /// deep in the call, is charged to its address (`charge_database`).
    static REQUESTER: (Arc<Limits>, Option<IpAddr>);
}

/// Runs a request's handler for `address` (None: not limited, as `client_address` says).
pub fn answered_for<F: std::future::Future>(
    limits: &Arc<Limits>,
    address: Option<IpAddr>,
    handler: F,
) -> impl std::future::Future<Output = F::Output> {
    REQUESTER.scope((limits.clone(), address), handler)
}

/// The client address of the request being answered (None outside one, or for a trusted
/// proxy).
pub fn requester() -> Option<IpAddr> {
    REQUESTER.try_with(|(_, address)| *address).ok().flatten()
}

/// Before a request takes a pooled connection: charged to its client's database budget
/// (`--db-rate-per-address`), waiting for it when spent (`Limits::wait_for_database`); the
/// permit (its address's share of the pool, `--db-connections-per-address`) is held for as
/// long as the connection is. Outside a request (the listener, the batcher, upkeep) and
/// for trusted proxies, free (None).
pub async fn charge_database() -> Result<Option<DatabasePermit>, RpcError> {
    let Ok((limits, address)) = REQUESTER.try_with(|(limits, address)| (limits.clone(), *address))
    else {
        return Ok(None);
    };
    limits.wait_for_database(address).await
}

/// One of an address's pooled connections at once (`--db-connections-per-address`).
pub struct DatabasePermit(#[allow(dead_code)] tokio::sync::OwnedSemaphorePermit);

/// What a per-address limit counts by (made by `limit_key` only).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LimitKey(IpAddr);

/// The key every per-address limit and count uses for `address`: an IPv4 address as it is
/// (and an IPv4 address seen on an IPv6 socket, `::ffff:a.b.c.d`, as that address), an
/// IPv6 address as its /64. One host is commonly given a whole /64 (SLAAC) and may use any
/// address in it: limited per address, it would have 2^64 budgets, and fill our maps.
pub fn limit_key(address: IpAddr) -> LimitKey {
    match address.to_canonical() {
        IpAddr::V4(v4) => LimitKey(IpAddr::V4(v4)),
        IpAddr::V6(v6) => {
            let prefix = u128::from(v6) & !(u128::MAX >> 64);
            LimitKey(IpAddr::V6(prefix.into()))
        }
    }
}

/// As the limits' messages name it: `192.0.2.1`, `2001:db8:1:2::/64`.
impl std::fmt::Display for LimitKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            IpAddr::V4(v4) => write!(f, "{v4}"),
            IpAddr::V6(v6) => write!(f, "{v6}/64"),
        }
    }
}

/// One `X-Forwarded-For` hop: an address, or an address with a port (some proxies add it).
fn read_hop(hop: &[u8]) -> Option<IpAddr> {
    let text = std::str::from_utf8(hop).ok()?.trim();
    text.parse::<IpAddr>()
        .ok()
        .or_else(|| text.parse::<std::net::SocketAddr>().ok().map(|a| a.ip()))
}

/// `rate` a second, in bursts of up to `burst`.
fn quota(rate: u32, burst: u32) -> Quota {
    let rate = NonZeroU32::new(rate.max(1)).expect("at least 1");
    let burst = NonZeroU32::new(burst.max(1)).expect("at least 1");
    Quota::per_second(rate).allow_burst(burst)
}

/// `n` an hour, all of them at once if need be.
fn per_hour(n: u32) -> Quota {
    let n = NonZeroU32::new(n.max(1)).expect("at least 1");
    Quota::with_period(std::time::Duration::from_secs(3600) / n.get())
        .expect("a period of at least a second")
        .allow_burst(n)
}

/// -32011: too many `what`; the budget has room again after `wait`.
fn too_fast(what: &str, wait: std::time::Duration) -> RpcError {
    let retry_after_ms = wait.as_millis().max(1) as u64;
    RpcError::new(
        TOO_FAST,
        format!("too many {what}; retry in {retry_after_ms} ms"),
    )
    .with_data(json!({"retry_after_ms": retry_after_ms}))
}

/// A connection counted against the gateway's maximum and its address's until dropped.
pub struct ConnectionSlot {
    limits: Arc<Limits>,
    /// None for a trusted proxy (no maximum of its own).
    address: Option<LimitKey>,
}

/// Why a connection was refused (`Limits::connection`); `app` answers it and closes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConnectionRefused {
    /// The client's address holds `--max-connections-per-address`: the client is asked to
    /// slow down (429).
    Address { address: LimitKey, max: usize },
    /// The gateway holds `--max-connections`: not this client's doing, so 503, which a
    /// balancer in front can take as "try another gateway".
    Gateway { max: usize },
}

impl ConnectionRefused {
    /// The status line and the JSON body of the answer.
    pub fn answer(self) -> (&'static str, String) {
        let (status, error) = match self {
            ConnectionRefused::Address { address, max } => (
                "429 Too Many Requests",
                format!("too many connections from this address: {address} holds {max}"),
            ),
            ConnectionRefused::Gateway { max } => (
                "503 Service Unavailable",
                format!("this gateway holds its maximum of {max} connections; retry later"),
            ),
        };
        (status, json!({ "error": error }).to_string())
    }
}

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        self.limits.open_connections.fetch_sub(1, Ordering::Relaxed);
        let Some(address) = self.address else {
            return;
        };
        let mut connections = lock(&self.limits.connections);
        if let Some(count) = connections.get_mut(&address) {
            *count -= 1;
            if *count == 0 {
                connections.remove(&address);
            }
        }
    }
}

/// What each address holds that lives on without it (sessions, regions it made): counted
/// while something else still holds them.
/// Kept as `dyn Any`: the limits need only whether each is alive, not what it is.
#[derive(Default)]
struct HeldBy(Mutex<HashMap<LimitKey, Vec<Weak<dyn Any + Send + Sync>>>>);

impl HeldBy {
    /// How many of `address`'s are still alive.
    fn live(&self, address: LimitKey) -> usize {
        let mut held = lock(&self.0);
        let list = held.entry(address).or_default();
        list.retain(|t| t.strong_count() > 0);
        list.len()
    }

    fn add(&self, address: LimitKey, thing: Arc<dyn Any + Send + Sync>) {
        lock(&self.0)
            .entry(address)
            .or_default()
            .push(Arc::downgrade(&thing));
    }

    /// Forgets what is gone, and the addresses left with nothing.
    fn forget_gone(&self) {
        lock(&self.0).retain(|_, list| {
            list.retain(|t| t.strong_count() > 0);
            !list.is_empty()
        });
    }
}

impl Limits {
    pub fn new(config: &Config, trusted: Vec<IpNet>) -> Arc<Self> {
        Arc::new(Limits {
            trusted,
            max_connections: config.max_connections as usize,
            open_connections: AtomicUsize::new(0),
            max_connections_per_address: config.max_connections_per_address as usize,
            max_sessions_per_address: config.max_sessions_per_address as usize,
            connections: Mutex::default(),
            sessions: HeldBy::default(),
            creates: DefaultKeyedRateLimiter::keyed(quota(
                config.session_create_rate,
                config.session_create_burst,
            )),
            guests: DefaultKeyedRateLimiter::keyed(per_hour(config.guests_per_address_per_hour)),
            places_by_address: DefaultKeyedRateLimiter::keyed(quota(
                config.place_rate_per_address,
                config.place_rate_per_address.saturating_mul(2),
            )),
            places_by_session: DefaultKeyedRateLimiter::keyed(quota(
                config.place_rate_per_session,
                config.place_rate_per_session,
            )),
            database_by_address: DefaultKeyedRateLimiter::keyed(quota(
                config.db_rate_per_address,
                config.db_burst_per_address,
            )),
            database_wait: std::time::Duration::from_millis(config.db_wait_ms.into()),
            database_connections_per_address: config.db_connections_per_address as usize,
            database_connections: Mutex::default(),
            max_regions_per_address: config.max_regions_per_address as usize,
            regions: HeldBy::default(),
        })
    }

    fn is_trusted(&self, address: IpAddr) -> bool {
        self.trusted.iter().any(|net| net.contains(&address))
    }

    /// The address a request counts against (see the module's comment); None for a
    /// trusted proxy that names no client (not limited).
    pub fn client_address(&self, peer: IpAddr, headers: &HeaderMap) -> Option<IpAddr> {
        let peer = peer.to_canonical();
        if !self.is_trusted(peer) {
            return Some(peer);
        }
        // Each proxy appends the address it got the request from: read from the right,
        // past our own proxies; the first other address is the client. A hop that cannot
        // be read (not an address, not UTF-8: a client may send anything before what our
        // proxy appended) ends the walk and is limited as the hop that passed it on.
        let mut client = peer;
        for value in headers.get_all("x-forwarded-for").iter().rev() {
            for hop in value.as_bytes().rsplit(|b| *b == b',') {
                let Some(address) = read_hop(hop) else {
                    return Some(client);
                };
                client = address.to_canonical();
                if !self.is_trusted(client) {
                    return Some(client);
                }
            }
        }
        None
    }

    /// Counts a new connection from `peer`, unless the gateway holds its maximum of
    /// connections already, or the peer's address its own (trusted proxies have none of
    /// their own: they carry many clients; they count in the gateway's).
    pub fn connection(self: &Arc<Self>, peer: IpAddr) -> Result<ConnectionSlot, ConnectionRefused> {
        let one_more = |open: usize| (open < self.max_connections).then_some(open + 1);
        let open = &self.open_connections;
        if open
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, one_more)
            .is_err()
        {
            metrics().rejected("connections");
            return Err(ConnectionRefused::Gateway {
                max: self.max_connections,
            });
        }
        // From here the slot's drop gives the gateway's count back, refused or not.
        let mut slot = ConnectionSlot {
            limits: self.clone(),
            address: None,
        };
        let peer = peer.to_canonical();
        if self.is_trusted(peer) {
            return Ok(slot);
        }
        let key = limit_key(peer);
        let mut connections = lock(&self.connections);
        let count = connections.entry(key).or_insert(0);
        if *count >= self.max_connections_per_address {
            metrics().rejected("connections_per_address");
            return Err(ConnectionRefused::Address {
                address: key,
                max: self.max_connections_per_address,
            });
        }
        *count += 1;
        slot.address = Some(key);
        Ok(slot)
    }

    /// Before a `session.create` from `address` (None: not limited).
    pub fn check_create(&self, address: Option<IpAddr>) -> Result<(), RpcError> {
        let Some(address) = address.map(limit_key) else {
            return Ok(());
        };
        if self.sessions.live(address) >= self.max_sessions_per_address {
            metrics().rejected("sessions_per_address");
            return Err(RpcError::new(
                TOO_MANY,
                format!(
                    "{address} holds its maximum of {} sessions on this gateway; destroy one \
                     or let it expire",
                    self.max_sessions_per_address
                ),
            ));
        }
        self.check_rate(
            &self.creates,
            &address,
            "session_create_rate",
            "sessions created",
        )
    }

    /// After a `session.create` from `address` made `session`.
    pub fn created(&self, address: Option<IpAddr>, session: Arc<dyn Any + Send + Sync>) {
        let Some(address) = address.map(limit_key) else {
            return;
        };
        self.sessions.add(address, session);
    }

    /// Before a `board.place` from `address` on `session` (None: not limited). The
    /// address first: a call it refuses spends nothing of the session's budget.
    pub fn check_place(&self, address: Option<IpAddr>, session: &str) -> Result<(), RpcError> {
        let Some(address) = address.map(limit_key) else {
            return Ok(());
        };
        self.check_rate(
            &self.places_by_address,
            &address,
            "place_rate_per_address",
            "placements from this address",
        )?;
        // Only what can be a session id gets a budget of its own: made-up strings cannot
        // grow the limiter, and its keys are 32 bytes each.
        if !crate::names::is_session_id(session) {
            // Not a session: the call fails on its params or as an unknown session.
            return Ok(());
        }
        self.check_rate(
            &self.places_by_session,
            &Arc::from(session),
            "place_rate_per_session",
            "placements by this session",
        )
    }

    /// Before `address` makes a new distinct region (None: not limited).
    pub fn check_new_region(&self, address: Option<IpAddr>) -> Result<(), RpcError> {
        let Some(address) = address.map(limit_key) else {
            return Ok(());
        };
        if self.regions.live(address) >= self.max_regions_per_address {
            metrics().rejected("regions_per_address");
            return Err(RpcError::new(
                TOO_MANY,
                format!(
                    "{address} made its most distinct regions that are still watched ({}): \
                     subscribe to one of them, or to the whole board",
                    self.max_regions_per_address
                ),
            ));
        }
        Ok(())
    }

    /// After `address` made `region`.
    pub fn made_region(&self, address: Option<IpAddr>, region: Arc<dyn Any + Send + Sync>) {
        let Some(address) = address.map(limit_key) else {
            return;
        };
        self.regions.add(address, region);
    }

    /// Before database work for a request from `address` (None: not limited): at once
    /// within its budget; past it, the request waits for the budget up to `--db-wait-ms`,
    /// and is refused only then. A refusal that came at once would invite the next request
    /// at once: a flood on keep-alive connections was answered 33,000 refusals a second,
    /// and refusing them took the CPU that other clients' requests needed. Waiting costs a
    /// sleeping future; a flood gets as many answers a second as it holds connections
    /// (`--max-connections-per-address`) over the wait, plus its budget. Then it waits, as
    /// long, for one of its address's share of the pool (`--db-connections-per-address`),
    /// held as long as the connection it takes (the permit returned).
    pub async fn wait_for_database(
        &self,
        address: Option<IpAddr>,
    ) -> Result<Option<DatabasePermit>, RpcError> {
        let Some(address) = address.map(limit_key) else {
            return Ok(None);
        };
        let deadline = tokio::time::Instant::now() + self.database_wait;
        let mut waited = false;
        loop {
            let wait = match self.database_by_address.check_key(&address) {
                Ok(()) => break,
                Err(not_until) => not_until.wait_time_from(DefaultClock::default().now()),
            };
            let now = tokio::time::Instant::now();
            if now + wait > deadline {
                // Refused no sooner than the wait: the answer paces the client itself.
                tokio::time::sleep_until(deadline).await;
                metrics().rejected("db_rate_per_address");
                return Err(too_fast("database calls from this address", wait));
            }
            waited = true;
            tokio::time::sleep(wait).await;
        }
        // Its share of the pool: a burst within the budget (a page opening, or a flood's
        // first 200 calls) takes a few connections at a time, not the whole pool.
        let share = self.database_share(address);
        let permit = match share.clone().try_acquire_owned() {
            Ok(permit) => permit,
            Err(_) => {
                waited = true;
                match tokio::time::timeout_at(
                    deadline.max(tokio::time::Instant::now()),
                    share.acquire_owned(),
                )
                .await
                {
                    Ok(Ok(permit)) => permit,
                    _ => {
                        metrics().rejected("db_connections_per_address");
                        return Err(RpcError::new(
                            TOO_FAST,
                            format!(
                                "{address} holds its {} database connections at once; retry \
                                 in 100 ms",
                                self.database_connections_per_address
                            ),
                        )
                        .with_data(json!({"retry_after_ms": 100})));
                    }
                }
            }
        };
        if waited {
            metrics().waited("db_rate_per_address");
        }
        Ok(Some(DatabasePermit(permit)))
    }

    /// The semaphore of `address`'s pooled connections.
    fn database_share(&self, address: LimitKey) -> Arc<tokio::sync::Semaphore> {
        lock(&self.database_connections)
            .entry(address)
            .or_insert_with(|| {
                Arc::new(tokio::sync::Semaphore::new(
                    self.database_connections_per_address,
                ))
            })
            .clone()
    }

    fn check_rate<K: Clone + std::hash::Hash + Eq>(
        &self,
        limiter: &DefaultKeyedRateLimiter<K>,
        key: &K,
        limit: &'static str,
        what: &str,
    ) -> Result<(), RpcError> {
        limiter.check_key(key).map_err(|not_until| {
            metrics().rejected(limit);
            too_fast(
                what,
                not_until.wait_time_from(DefaultClock::default().now()),
            )
        })
    }

    /// Refuses a guest (`session.play_as_guest`) past the address's hourly budget.
    pub fn check_guest(&self, address: Option<IpAddr>) -> Result<(), RpcError> {
        let Some(address) = address.map(limit_key) else {
            return Ok(());
        };
        self.check_rate(&self.guests, &address, "guests_per_address", "guests made")
    }

    /// Forgets addresses and sessions with nothing left to limit (every minute).
    pub fn forget_idle(&self) {
        self.creates.retain_recent();
        self.guests.retain_recent();
        self.places_by_address.retain_recent();
        self.places_by_session.retain_recent();
        self.database_by_address.retain_recent();
        // Addresses that hold no connection and wait for none.
        lock(&self.database_connections).retain(|_, share| Arc::strong_count(share) > 1);
        self.database_by_address.shrink_to_fit();
        self.creates.shrink_to_fit();
        self.guests.shrink_to_fit();
        self.places_by_address.shrink_to_fit();
        self.places_by_session.shrink_to_fit();
        self.sessions.forget_gone();
        self.regions.forget_gone();
    }

    pub async fn run_upkeep(self: Arc<Self>) {
        let mut tick = tokio::time::interval(std::time::Duration::from_secs(60));
        loop {
            tick.tick().await;
            self.forget_idle();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::header::HeaderValue;

    fn limits(trusted: &[&str]) -> Arc<Limits> {
        let config = Config::for_database("postgresql://nowhere/x");
        Limits::new(
            &config,
            trusted.iter().map(|t| t.parse().unwrap()).collect(),
        )
    }

    /// An address holds at most its share of the pool at once: one more waits for a
    /// connection to come back (up to the wait), then is refused; another address is not.
    #[tokio::test(start_paused = true)]
    async fn an_address_holds_its_share_of_the_pool_at_once() {
        let mut config = Config::for_database("postgresql://nowhere/x");
        config.db_connections_per_address = 2;
        config.db_wait_ms = 100;
        let limits = Limits::new(&config, Vec::new());
        let (a, b): (IpAddr, IpAddr) = ("192.0.2.1".parse().unwrap(), "192.0.2.2".parse().unwrap());
        let first = limits.wait_for_database(Some(a)).await.unwrap();
        let _second = limits.wait_for_database(Some(a)).await.unwrap();
        let started = tokio::time::Instant::now();
        let refused = limits
            .wait_for_database(Some(a))
            .await
            .err()
            .expect("refused");
        assert_eq!(refused.code, TOO_FAST);
        assert!(started.elapsed() >= std::time::Duration::from_millis(100));
        assert!(limits.wait_for_database(Some(b)).await.unwrap().is_some());
        // One comes back while the next waits: it is served.
        let waiting = {
            let limits = limits.clone();
            tokio::spawn(
                async move { limits.wait_for_database(Some(a)).await.map(|p| p.is_some()) },
            )
        };
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        drop(first);
        assert_eq!(waiting.await.unwrap().ok(), Some(true));
        // Trusted proxies hold no share.
        assert!(limits.wait_for_database(None).await.unwrap().is_none());
    }

    fn forwarded(values: &[&str]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for v in values {
            headers.append("x-forwarded-for", HeaderValue::from_str(v).unwrap());
        }
        headers
    }

    #[test]
    fn the_client_address_comes_from_trusted_hops_only() {
        let ip = |s: &str| Some(s.parse::<IpAddr>().unwrap());
        let none = limits(&[]);
        // Not behind a trusted proxy: the header is the client's own word, ignored.
        assert_eq!(
            none.client_address(ip("203.0.113.9").unwrap(), &forwarded(&["10.0.0.1"])),
            ip("203.0.113.9")
        );
        let behind = limits(&["127.0.0.1/32", "10.1.0.0/16"]);
        let peer = ip("127.0.0.1").unwrap();
        let client = |values: &[&str]| behind.client_address(peer, &forwarded(values));
        assert_eq!(client(&["198.51.100.7"]), ip("198.51.100.7"));
        // A client that sends its own header: the proxy appended the real address last.
        assert_eq!(client(&["1.2.3.4, 198.51.100.7"]), ip("198.51.100.7"));
        assert_eq!(client(&["1.2.3.4", "198.51.100.7"]), ip("198.51.100.7"));
        // Two trusted proxies in a row; an address with a port.
        assert_eq!(client(&["198.51.100.7, 10.1.2.3"]), ip("198.51.100.7"));
        assert_eq!(client(&["198.51.100.7:5555"]), ip("198.51.100.7"));
        // An unreadable hop is limited as the trusted hop that passed it on, never exempt.
        assert_eq!(client(&["bogus"]), ip("127.0.0.1"));
        assert_eq!(client(&["bogus, 10.1.2.3"]), ip("10.1.2.3"));
        let mut raw = HeaderMap::new();
        raw.append(
            "x-forwarded-for",
            HeaderValue::from_bytes(b"\xff\xfe, 198.51.100.8").unwrap(),
        );
        assert_eq!(behind.client_address(peer, &raw), ip("198.51.100.8"));
        let mut raw = HeaderMap::new();
        raw.append("x-forwarded-for", HeaderValue::from_bytes(b"\xff").unwrap());
        assert_eq!(behind.client_address(peer, &raw), ip("127.0.0.1"));
        // No client named: the trusted proxy itself, not limited.
        assert_eq!(client(&[]), None);
        // An IPv4 peer seen on an IPv6 socket is the IPv4 address.
        assert_eq!(
            behind.client_address("::ffff:127.0.0.1".parse().unwrap(), &forwarded(&[])),
            None
        );
    }

    #[test]
    fn only_session_ids_get_a_budget_of_their_own() {
        let mut config = Config::for_database("postgresql://nowhere/x");
        config.place_rate_per_session = 1;
        config.place_rate_per_address = 1000;
        let limits = Limits::new(&config, Vec::new());
        let a = Some("192.0.2.1".parse().unwrap());
        for i in 0..100 {
            limits.check_place(a, &format!("made-up-{i}")).unwrap();
        }
        assert_eq!(limits.places_by_session.len(), 0);
        let id = "0123456789abcdef0123456789abcdef";
        limits.check_place(a, id).unwrap();
        assert!(limits.check_place(a, id).is_err());
    }

    #[test]
    fn ipv6_addresses_are_limited_per_64_and_mapped_ipv4_as_ipv4() {
        let key = |s: &str| limit_key(s.parse().unwrap());
        assert_eq!(
            key("2001:db8:1:2::1"),
            key("2001:db8:1:2:ffff:ffff:ffff:ffff")
        );
        assert_ne!(key("2001:db8:1:2::1"), key("2001:db8:1:3::1"));
        assert_eq!(key("::ffff:1.2.3.4"), key("1.2.3.4"));
        assert_ne!(key("1.2.3.4"), key("1.2.3.5"));
        assert_eq!(key("2001:db8:1:2:3:4:5:6").to_string(), "2001:db8:1:2::/64");
        assert_eq!(key("::ffff:1.2.3.4").to_string(), "1.2.3.4");

        // Every per-address budget: connections, sessions, creations, placements.
        let mut config = Config::for_database("postgresql://nowhere/x");
        config.max_connections_per_address = 1;
        config.session_create_rate = 1;
        config.session_create_burst = 1;
        config.place_rate_per_address = 1;
        let limits = Limits::new(&config, Vec::new());
        let (a, b, other): (IpAddr, IpAddr, IpAddr) = (
            "2001:db8:1:2::1".parse().unwrap(),
            "2001:db8:1:2::2".parse().unwrap(),
            "2001:db8:1:3::1".parse().unwrap(),
        );
        let _slot = limits.connection(a).unwrap();
        assert!(limits.connection(b).is_err());
        assert!(limits.connection(other).is_ok());
        limits.check_create(Some(a)).unwrap();
        let refused = limits.check_create(Some(b)).unwrap_err();
        assert_eq!(refused.code, TOO_FAST);
        limits.check_create(Some(other)).unwrap();
        limits.check_place(Some(a), "").unwrap();
        limits.check_place(Some(a), "").unwrap();
        assert!(limits.check_place(Some(b), "").is_err());
        limits.check_place(Some(other), "").unwrap();
        let (v4, mapped): (IpAddr, IpAddr) = (
            "1.2.3.4".parse().unwrap(),
            "::ffff:1.2.3.4".parse().unwrap(),
        );
        let _slot = limits.connection(v4).unwrap();
        assert!(limits.connection(mapped).is_err());
    }

    #[test]
    fn sessions_per_address_count_every_address_of_a_64() {
        let mut config = Config::for_database("postgresql://nowhere/x");
        config.max_sessions_per_address = 1;
        let limits = Limits::new(&config, Vec::new());
        let a = Some("2001:db8:1:2::1".parse().unwrap());
        let b = Some("2001:db8:1:2::2".parse().unwrap());
        // What a session is does not matter here: only that it is alive.
        let session: Arc<dyn Any + Send + Sync> = Arc::new(());
        limits.check_create(a).unwrap();
        limits.created(a, session.clone());
        let refused = limits.check_create(b).unwrap_err();
        assert_eq!(refused.code, TOO_MANY);
        assert!(
            refused.message.contains("2001:db8:1:2::/64"),
            "{}",
            refused.message
        );
    }

    #[test]
    fn connections_per_address_are_counted_until_dropped() {
        let mut config = Config::for_database("postgresql://nowhere/x");
        config.max_connections_per_address = 2;
        let limits = Limits::new(&config, Vec::new());
        let a: IpAddr = "192.0.2.1".parse().unwrap();
        let first = limits.connection(a).unwrap();
        let _second = limits.connection(a).unwrap();
        assert!(limits.connection(a).is_err());
        assert!(limits.connection("192.0.2.2".parse().unwrap()).is_ok());
        drop(first);
        assert!(limits.connection(a).is_ok());
    }

    #[test]
    fn connections_in_all_are_counted_until_dropped() {
        let mut config = Config::for_database("postgresql://nowhere/x");
        config.max_connections = 3;
        config.max_connections_per_address = 2;
        let limits = Limits::new(&config, vec!["127.0.0.1/32".parse().unwrap()]);
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let first = limits.connection(ip("192.0.2.1")).unwrap();
        let second = limits.connection(ip("192.0.2.1")).unwrap();
        // Refused by its address: nothing of the gateway's count is kept.
        assert!(matches!(
            limits.connection(ip("192.0.2.1")),
            Err(ConnectionRefused::Address { max: 2, .. })
        ));
        // A trusted proxy has no maximum of its own, but counts in the gateway's.
        let proxy = limits.connection(ip("127.0.0.1")).unwrap();
        for other in ["198.51.100.1", "127.0.0.1", "2001:db8::1"] {
            assert_eq!(
                limits.connection(ip(other)).err(),
                Some(ConnectionRefused::Gateway { max: 3 }),
                "{other}"
            );
        }
        drop(first);
        let other = limits.connection(ip("198.51.100.1")).unwrap();
        assert!(limits.connection(ip("192.0.2.2")).is_err());
        drop((second, proxy, other));
        assert_eq!(limits.open_connections.load(Ordering::Relaxed), 0);
        assert!(lock(&limits.connections).is_empty());

        let (status, body) = ConnectionRefused::Gateway { max: 3 }.answer();
        assert_eq!(status, "503 Service Unavailable");
        let body: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert!(
            body["error"].as_str().unwrap().contains("maximum of 3"),
            "{body}"
        );
    }
}
