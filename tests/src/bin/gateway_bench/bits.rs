//! Scenario `bits`: GET /boards/{id}/bits (the whole packed board) from keep-alive
//! connections; then the same with If-None-Match, answered 304 while the board is unchanged.

use crate::client::Conn;
use crate::process::Gateway;
use crate::report::{rate, CpuClock, Latencies, Table};
use crate::{Result, Setup};
use std::sync::Arc;
use std::time::{Duration, Instant};

const CONNECTIONS: usize = 16;
/// 1000 x 1000 tiles of 4 bits.
const BOARD_BYTES: usize = 500_000;
const NAME: &str = "bits";

/// What one phase measured.
#[derive(Default)]
struct Phase {
    requests: usize,
    bytes: usize,
    latencies: Latencies,
    /// Answers with another status than the one expected, or of the wrong length.
    wrong: usize,
    elapsed: Duration,
    cpu: String,
}

pub async fn run(setup: &Setup) -> Result<Table> {
    let gateway = setup.gateway(NAME).await?;
    let path = format!("/boards/{}/bits", setup.board);
    // The first request loads the board's mirror: outside the measurement.
    let first = Conn::open(gateway.addr)
        .await?
        .get_full(&path, None)
        .await?;
    if first.status != 200 || first.body.len() != BOARD_BYTES {
        return Err(gateway.failure(&format!(
            "GET {path}: HTTP {}, {} bytes",
            first.status,
            first.body.len()
        )));
    }
    let etag = first.etag.ok_or("no ETag on /bits")?;
    let full = measure(&gateway, &path, None, setup.phase()).await?;
    let cached = measure(&gateway, &path, Some(etag), setup.phase() / 2).await?;
    gateway.stop().await;
    Ok(report(full, cached))
}

/// Every connection GETs `path` back to back for `length`.
async fn measure(
    gateway: &Gateway,
    path: &str,
    etag: Option<String>,
    length: Duration,
) -> Result<Phase> {
    let mut conns = Vec::with_capacity(CONNECTIONS);
    for _ in 0..CONNECTIONS {
        conns.push(Conn::open(gateway.addr).await?);
    }
    let (path, etag) = (Arc::<str>::from(path), etag.map(Arc::<str>::from));
    let cpu = CpuClock::start(gateway);
    let started = Instant::now();
    let tasks: Vec<_> = conns
        .into_iter()
        .map(|conn| tokio::spawn(fetch(conn, path.clone(), etag.clone(), started + length)))
        .collect();
    let mut phase = Phase::default();
    for task in tasks {
        let one = task.await??;
        phase.requests += one.requests;
        phase.bytes += one.bytes;
        phase.wrong += one.wrong;
        phase.latencies.extend(one.latencies);
    }
    phase.elapsed = started.elapsed();
    phase.cpu = cpu.finish(gateway);
    Ok(phase)
}

/// One connection's loop.
async fn fetch(
    mut conn: Conn,
    path: Arc<str>,
    etag: Option<Arc<str>>,
    end: Instant,
) -> Result<Phase> {
    let (want_status, want_len) = if etag.is_some() {
        (304, 0)
    } else {
        (200, BOARD_BYTES)
    };
    let mut phase = Phase::default();
    while Instant::now() < end {
        let sent = Instant::now();
        let (status, body) =
            tokio::time::timeout(Duration::from_secs(10), conn.get(&path, etag.as_deref()))
                .await
                .map_err(|_| "GET /bits took over 10 s")??;
        phase.latencies.push(sent.elapsed());
        phase.requests += 1;
        phase.bytes += body.len();
        if status != want_status || body.len() != want_len {
            phase.wrong += 1;
        }
    }
    Ok(phase)
}

fn report(full: Phase, cached: Phase) -> Table {
    let mut t = Table::new();
    let wrong = full.wrong + cached.wrong;
    let per_second = rate(full.requests, full.elapsed);
    t.target(
        NAME,
        &format!("200 (500 kB) requests/s, {CONNECTIONS} conns"),
        format!(
            "{per_second:.0} ({:.0} MB/s)",
            full.bytes as f64 / 1e6 / full.elapsed.as_secs_f64()
        ),
        ">= 2,000/s",
        per_second >= 2000.0,
    );
    t.info(
        NAME,
        "  latency p50 / p99 / max",
        full.latencies.sorted().summary(),
    );
    t.info(NAME, "  CPU", full.cpu.clone());
    t.info(
        NAME,
        "304 (If-None-Match) requests/s",
        format!("{:.0}", rate(cached.requests, cached.elapsed)),
    );
    t.info(
        NAME,
        "  latency p50 / p99 / max",
        cached.latencies.sorted().summary(),
    );
    t.info(NAME, "  CPU", cached.cpu.clone());
    t.target(
        NAME,
        "wrong status or length",
        wrong.to_string(),
        "0",
        wrong == 0,
    );
    t
}
