//! Starting the gateway: the pool, the LISTEN connection, sessions, the background tasks
//! and the HTTP server (which hands requests to `http`, with the state in `state`).

use crate::boards::Boards;
use crate::config::{Commit, Config};
use crate::cors::Cors;
use crate::db;
use crate::http::routes;
use crate::limits::{ConnectionRefused, ConnectionSlot, Limits};
use crate::listener::Listener;
use crate::mirror::board::Board;
use crate::mirror::cursors::TELL_CURSORS_EVERY;
use crate::placer::lease::Fleet;
use crate::placer::Groups;
use crate::sessions::checks::SessionChecks;
use crate::sessions::handover::Handovers;
use crate::sessions::legacy::ConnectionDeliveries;
use crate::sessions::registry::Sessions;
pub use crate::state::App;
use crate::unknown::Unknown;
use crate::views::list::registry::Lists;
use deadpool_postgres::Pool;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// A started gateway.
pub struct Running {
    pub addr: SocketAddr,
    /// Where GET /metrics is served when `--metrics-listen` moved it off `addr`.
    pub metrics_addr: Option<SocketAddr>,
    pub app: Arc<App>,
    stop: CancellationToken,
    tasks: Vec<JoinHandle<()>>,
    connections: TaskTracker,
}

impl Running {
    /// Stops the way SIGTERM asks: no new connections; every waiting `get_events`
    /// answers with what it has; requests in progress (a placement group among them)
    /// finish and are answered, each connection closing after its answer; then the LISTEN
    /// connection and the background tasks stop. Connections still open at `within` are
    /// dropped (a placement in flight is then committed wholly or not at all, unanswered).
    pub async fn shutdown_gracefully(&self, within: Duration) {
        let deadline = tokio::time::Instant::now() + within;
        self.app.closing.store(true, Ordering::SeqCst);
        if let Some(fleet) = &self.app.fleet {
            // A database away does not hold the shutdown up: the leases then run out.
            let _ =
                tokio::time::timeout(Duration::from_secs(1), fleet.give_up(&self.app.pool)).await;
        }
        self.app.sessions.drain();
        self.stop.cancel();
        self.connections.close();
        if tokio::time::timeout_at(deadline, self.connections.wait())
            .await
            .is_err()
        {
            tracing::warn!(
                "{} connections still open after {within:?}: dropped",
                self.connections.len()
            );
        }
        for task in &self.tasks {
            task.abort();
        }
    }

    /// Stops accepting, closes connections after their current request, stops the
    /// listener and the expiry.
    pub fn shutdown(&self) {
        self.stop.cancel();
        for task in &self.tasks {
            task.abort();
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.shutdown();
    }
}

#[derive(Debug)]
pub struct StartError(pub String);

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for StartError {}

pub async fn start(config: Config) -> Result<Running, StartError> {
    // sslmode and sslrootcert as libpq reads them (db::tls). The error does not repeat the
    // URL: it may hold a password.
    let mut primary = db::Target::parse(&config.database_url)
        .map_err(|e| StartError(format!("--database-url: {e}")))?;
    if primary.config.get_application_name().is_none() {
        primary.config.application_name("pgplace-gateway");
    }
    let pool = db::pool(primary.clone(), config.db_pool);
    let replica = match &config.replica_url {
        Some(url) => {
            let mut replica =
                db::Target::parse(url).map_err(|e| StartError(format!("--replica-url: {e}")))?;
            if replica.config.get_application_name().is_none() {
                replica.config.application_name("pgplace-gateway");
            }
            // Its connections are made when first used: a replica that is down at start
            // only sends those reads to the primary.
            Some(db::replica_pool(replica, config.db_pool))
        }
        None => None,
    };
    let (catch_up_tx, catch_up_rx) = tokio::sync::mpsc::unbounded_channel();
    let unknown = Arc::new(Unknown::default());
    let gateway_id = crate::sessions::ids::random_u64();
    let fleet = config.placer_url().map_err(StartError)?.map(|url| {
        let token = crate::sessions::ids::new_session_id();
        Arc::new(Fleet::new(gateway_id, url, token))
    });
    let boards = Arc::new(Boards::new(
        pool.clone(),
        config.session_buffer,
        Groups {
            max: config.max_group as usize,
            asynchronous: config.commit == Commit::Asynchronous,
            fleet: fleet.clone(),
        },
        catch_up_tx,
        unknown.clone(),
    ));
    let lists = Arc::new(Lists::new(
        pool.clone(),
        config.session_buffer as usize,
        Duration::from_millis(config.list_refresh_ms),
        unknown.clone(),
    ));
    let listening = Arc::new(AtomicBool::new(false));
    let sessions = Arc::new(Sessions::new(config.max_sessions, config.session_idle()));
    let trusted = config.trusted_proxy_networks().map_err(StartError)?;
    crate::rpc::table::check_view_methods(&config).map_err(StartError)?;
    let limits = Limits::new(&config, trusted);
    let cors = Cors::new(config.cors_origin_list());
    let site_sign_in = crate::jwt::SiteSignIn::from_config(&config).map_err(StartError)?;
    let tcp = bind(config.listen)
        .map_err(|e| StartError(format!("cannot listen on {}: {e}", config.listen)))?;
    let addr = tcp.local_addr().map_err(|e| StartError(e.to_string()))?;
    let metrics_tcp = config
        .metrics_listen
        .map(|at| {
            bind(at)
                .map_err(|e| StartError(format!("cannot listen on {at} (--metrics-listen): {e}")))
        })
        .transpose()?;
    let metrics_addr = metrics_tcp
        .as_ref()
        .map(TcpListener::local_addr)
        .transpose()
        .map_err(|e| StartError(e.to_string()))?;
    let (listener_sync, sync_requests) = tokio::sync::mpsc::unbounded_channel();
    let handovers = Arc::new(Handovers::default());
    let session_checks = Arc::new(SessionChecks::default());
    let listener = Listener {
        sessions: sessions.clone(),
        handovers: handovers.clone(),
        gateway_id,
        sync: sync_requests,
        session_checks: session_checks.clone(),
        config: primary.config,
        tls: primary.tls,
        pool: pool.clone(),
        boards: boards.clone(),
        lists: lists.clone(),
        up: listening.clone(),
        catch_up: catch_up_rx,
        replay_limit: config.session_buffer,
    };
    let freezer = tokio::spawn(announce_over_time(
        boards.clone(),
        pool.clone(),
        listening.clone(),
    ));
    let app = Arc::new(App {
        config,
        pool,
        replica,
        boards,
        lists: lists.clone(),
        sessions: sessions.clone(),
        handovers,
        session_checks,
        listening,
        gateway_id,
        fleet,
        listener_sync,
        closing: AtomicBool::new(false),
        limits: limits.clone(),
        unknown,
        database_checked: Default::default(),
        cors,
        site_sign_in,
        discovered: Default::default(),
    });
    let stop = CancellationToken::new();
    let connections = TaskTracker::new();
    let mut tasks = vec![
        tokio::spawn(listener.run()),
        tokio::spawn(sessions.clone().run_expiry()),
        tokio::spawn(crate::sessions::upkeep::run(
            app.pool.clone(),
            sessions,
            app.boards.clone(),
            app.config.session_idle(),
        )),
        tokio::spawn(lists.clone().run_view_checks()),
        tokio::spawn(crate::change_feed::run(
            app.pool.clone(),
            lists.clone(),
            Duration::from_millis(app.config.change_tick_ms),
        )),
        tokio::spawn(lists.run_pings(Duration::from_secs(app.config.list_ping_secs))),
        tokio::spawn(limits.run_upkeep()),
        freezer,
        tokio::spawn(accept(
            tcp,
            Serves::Everything,
            app.clone(),
            stop.clone(),
            connections.clone(),
        )),
    ];
    if let Some(tcp) = metrics_tcp {
        tracing::info!(
            "metrics on http://{}/metrics (not on the main address)",
            metrics_addr.expect("bound")
        );
        tasks.push(tokio::spawn(accept(
            tcp,
            Serves::Metrics,
            app.clone(),
            stop.clone(),
            connections.clone(),
        )));
    }
    Ok(Running {
        addr,
        metrics_addr,
        app,
        stop,
        tasks,
        connections,
    })
}

/// What sessions learn with no change in the database to bring it, a few times a second:
/// how many watch each board (`presence`), where their cursors are (`cursors`), and tiles
/// that froze.
///
/// Tiles freeze as time passes: each mirror with freeze_after logs the tiles whose moment
/// came (a board with nothing due costs one comparison). Before it does, every placement checked before the moment must
/// be in the mirror, or a client would see a tile frozen and then changed: the database
/// says which seq that is (`place.settled_seq` waits for placements in flight), and the
/// tiles announced are those due by then. Not while LISTEN is down.
async fn announce_over_time(boards: Arc<Boards>, pool: Pool, listening: Arc<AtomicBool>) {
    let mut tick = tokio::time::interval(Duration::from_millis(250));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // Boards whose last attempt failed (a missing grant, say) wait before the next one, so
    // the log gets a line every few seconds, not four a second.
    let mut failed: std::collections::HashMap<i64, std::time::Instant> = Default::default();
    loop {
        tick.tick().await;
        for mirrored in boards.all() {
            let now = std::time::Instant::now();
            mirrored.board.tell_watching(now, TELL_WATCHING_EVERY);
            mirrored.board.tell_cursors(now, TELL_CURSORS_EVERY);
        }
        if !listening.load(Ordering::SeqCst) {
            continue;
        }
        let now = db::now_micros();
        for mirrored in boards.all() {
            let board = &mirrored.board;
            if !board.freeze_is_due(now)
                || failed
                    .get(&board.id)
                    .is_some_and(|at| at.elapsed() < RETRY_FROZEN)
            {
                continue;
            }
            match settled(&pool, board).await {
                Ok(at) => {
                    failed.remove(&board.id);
                    board.freeze_due(at.min(now));
                }
                Err(error) => {
                    tracing::warn!("board {}: frozen tiles wait: {error}", board.id);
                    failed.insert(board.id, std::time::Instant::now());
                }
            }
        }
    }
}

const RETRY_FROZEN: Duration = Duration::from_secs(5);

/// How often at most sessions hear how many watch a board: each time, every page on it
/// answers its poll (10,000 pages: 1,000 answers a second).
const TELL_WATCHING_EVERY: Duration = Duration::from_secs(10);

/// The database's time once the mirror holds every placement checked before it.
async fn settled(pool: &Pool, board: &Board) -> Result<i64, String> {
    let client = pool.get().await.map_err(|e| e.to_string())?;
    let (seq, at) = db::settled_seq(&client, board.id)
        .await
        .map_err(|e| e.to_string())?;
    drop(client);
    tokio::time::timeout(Duration::from_secs(5), board.reached(seq))
        .await
        .map_err(|_| format!("the mirror did not reach seq {seq} within 5 s"))?;
    Ok(at)
}

/// Long-polling clients reconnect in bursts (after a restart, thousands at once): a deep
/// accept queue keeps them from waiting on a full one.
const LISTEN_BACKLOG: u32 = 4096;

fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(LISTEN_BACKLOG)
}

/// What a listening address serves.
#[derive(Clone, Copy)]
enum Serves {
    /// Every route (`--listen`).
    Everything,
    /// GET /metrics alone (`--metrics-listen`).
    Metrics,
}

/// Accepts connections until the gateway stops (then the listening socket closes). The
/// metrics address's connections count in the same limits and are tracked with the others:
/// a graceful shutdown waits for them too.
async fn accept(
    tcp: TcpListener,
    serves: Serves,
    app: Arc<App>,
    stop: CancellationToken,
    connections: TaskTracker,
) {
    loop {
        let (stream, peer) = tokio::select! {
            accepted = tcp.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Out of file descriptors, say: wait rather than spin.
                    tracing::warn!("accept: {error}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = stop.cancelled() => return,
        };
        let _ = stream.set_nodelay(true);
        match (app.limits.connection(peer.ip()), serves) {
            (Ok(slot), Serves::Everything) => {
                connections.spawn(serve(stream, peer.ip(), slot, app.clone(), stop.clone()));
            }
            (Ok(slot), Serves::Metrics) => {
                connections.spawn(serve_metrics(stream, slot, app.clone(), stop.clone()));
            }
            (Err(refused), _) => {
                connections.spawn(refuse(stream, refused));
            }
        }
    }
}

/// A connection over its address's limit or the gateway's: told so, then closed. What the
/// client sent is read (and dropped) for a moment first: closing with unread data would
/// reset the connection, and a reset can discard the answer before the client reads it.
async fn refuse(mut stream: TcpStream, refused: ConnectionRefused) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (status, body) = refused.answer();
    let security: String = crate::http::responses::SECURITY_HEADERS
        .iter()
        .map(|(name, value)| format!("{name}: {value}\r\n"))
        .collect();
    // Nothing of the request was read: a gateway forwarding placements may place them itself.
    let placed = format!(
        "{}: {}\r\n",
        crate::placer::wire::PLACED_HEADER,
        crate::placer::wire::NOT_PLACED
    );
    let answer = format!(
        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\n{security}{placed}\
         connection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        stream.write_all(answer.as_bytes()).await?;
        stream.shutdown().await?;
        let mut sink = [0; 1024];
        while stream.read(&mut sink).await? > 0 {}
        Ok::<_, std::io::Error>(())
    })
    .await;
}

/// How long a connection may stay open once shutdown began: a client that sends its next
/// request on it meanwhile is answered (and told to close) rather than cut off.
const CLOSE_IDLE_AFTER: Duration = Duration::from_millis(300);

/// One client connection, until it ends; then the legacy answers it carried are settled
/// by whether the client's TCP stack acknowledged them (`delivery`).
async fn serve(
    stream: TcpStream,
    peer: IpAddr,
    _slot: ConnectionSlot,
    app: Arc<App>,
    stop: CancellationToken,
) {
    let header_timeout = Duration::from_secs(app.config.header_timeout_secs);
    let deliveries = ConnectionDeliveries::new();
    let kept = deliveries.keep_socket(&stream);
    let requests = deliveries.clone();
    let service = service_fn(move |req| {
        // A request on the connection: its client may have read the earlier answers.
        requests.request_arrived();
        Box::pin(requests.scope(routes::handle(app.clone(), req, peer)))
    });
    let mut connection = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(header_timeout)
        // A client may close its sending side once its request is out and still read
        // the answer (RFC 9112, 9.6).
        .half_close(true)
        .serve_connection(TokioIo::new(deliveries.counted(stream)), service);
    // Dropped before the connection (and its socket) if the task ends early.
    let _kept = kept;
    let finished = tokio::select! {
        finished = std::future::poll_fn(|cx| connection.poll_without_shutdown(cx)) => finished,
        _ = async { stop.cancelled().await; tokio::time::sleep(CLOSE_IDLE_AFTER).await } => {
            // Shutting down: answers meanwhile said `Connection: close`; a connection
            // still idle now is closed, one with a request in progress once it is answered
            // (a waiting poll has been told to answer at once).
            std::pin::Pin::new(&mut connection).graceful_shutdown();
            std::future::poll_fn(|cx| connection.poll_without_shutdown(cx)).await
        }
    };
    // A malformed or slow request after an answer: the client was there to send it.
    let failed = finished.is_err_and(|e| !(e.is_parse() || e.is_timeout()));
    let stream = connection.into_parts().io.into_inner().into_inner();
    deliveries.settle(stream, failed).await;
}

/// One connection to the metrics address (a scraper), until it ends or the gateway stops:
/// then it closes at once once its answer (never a wait) is out.
async fn serve_metrics(
    stream: TcpStream,
    _slot: ConnectionSlot,
    app: Arc<App>,
    stop: CancellationToken,
) {
    let header_timeout = Duration::from_secs(app.config.header_timeout_secs);
    let service = service_fn(move |req| {
        std::future::ready(Ok::<_, std::convert::Infallible>(routes::metrics_listener(
            &app, &req,
        )))
    });
    let connection = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(header_timeout)
        .serve_connection(TokioIo::new(stream), service);
    tokio::pin!(connection);
    tokio::select! {
        _ = connection.as_mut() => {}
        _ = stop.cancelled() => {
            connection.as_mut().graceful_shutdown();
            let _ = connection.await;
        }
    }
}
