//! Scenario `peers`: pgplace beside the designs people run today, in the same run, on the
//! same machine, every peer started here on loopback.
//!
//! Durable placements: pgplace's `place_many` over SQL (2 connections, batches of 100);
//! `board.place` through one gateway, straight and behind nginx, and through two behind
//! nginx, each placing itself and with one placer per board (`--placer-url`: the gateway
//! that holds the board's lease groups every placement; 64 keep-alive clients);
//! the design r/Place 2017 and One Million Checkboxes ran — Redis with one Lua script
//! (cooldown `SET NX EX`, `BITFIELD SET u4`, `PUBLISH`), 64 connections — with
//! `appendfsync always` (durable, like pgplace) and `everysec` (for reference). Redis keeps
//! no history; pgplace keeps every placement.
//!
//! Snapshot: `GET /boards/{id}/bits` (500 KB) against nginx serving the same bytes from a
//! file, 16 keep-alive connections each.

use crate::client::{metric_values, Conn};
use crate::place::{Placers, Tally, CLIENTS};
use crate::process::{cluster_cpu, cpu_of, machine_idle};
use crate::report::{rate, Latencies, Table};
use crate::{Result, Setup};
use pgplace_tests::processes::{free_port, Nginx};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Barrier;

const NAME: &str = "peers";
const SQL_CONNECTIONS: usize = 2;
const SQL_BATCH: usize = 100;
const SNAPSHOT_CONNECTIONS: usize = 16;

/// One measured system.
struct Measured {
    system: String,
    per_second: f64,
    latencies: String,
    cpu: String,
    errors: usize,
    /// The commonest error messages, for a count that is not zero.
    error_kinds: BTreeMap<String, usize>,
}

pub async fn run(setup: &Setup) -> Result<Table> {
    let dir = setup.args.log_dir.join("peers");
    std::fs::create_dir_all(&dir)?;
    let mut durable = Vec::new();
    durable.push(sql_place_many(setup).await?);
    durable.push(through_gateways(setup, Fleet::Direct, &dir).await?);
    durable.push(through_gateways(setup, Fleet::Proxied(1, Placing::Each), &dir).await?);
    durable.push(through_gateways(setup, Fleet::Proxied(2, Placing::Each), &dir).await?);
    durable.push(through_gateways(setup, Fleet::Proxied(2, Placing::OnePlacer), &dir).await?);
    for fsync in ["always", "everysec"] {
        durable.push(redis_lua(setup, fsync, &dir).await?);
    }
    let snapshot = vec![
        bits_from_gateway(setup).await?,
        bits_from_nginx(setup, &dir).await?,
    ];
    Ok(report(&durable, &snapshot))
}

/// CPU of this process, of other processes and of the cluster over a phase, in % of one
/// core and per placement, and how long the machine's cores sat idle: what a placement
/// costs each party, and whether the phase was short of CPU or waiting.
struct Clock {
    wall: Instant,
    idle: Duration,
    ours: Duration,
    others: Vec<(String, u32, Duration)>,
    cluster: Option<(u32, Duration)>,
}

impl Clock {
    /// `cluster`: the postmaster, for the phases that place in PostgreSQL.
    fn start(others: &[(&str, u32)], cluster: Option<u32>) -> Self {
        Clock {
            wall: Instant::now(),
            idle: machine_idle(),
            ours: cpu_of("/proc/self/stat"),
            others: others
                .iter()
                .map(|(name, pid)| (name.to_string(), *pid, cpu_of(&format!("/proc/{pid}/stat"))))
                .collect(),
            cluster: cluster.map(|pid| (pid, cluster_cpu(pid))),
        }
    }

    /// "load generator N%, … (100% = one core); per placement: load generator M µs, …"
    /// for `done` of `unit` (placement, request).
    fn finish(&self, done: usize, unit: &str) -> String {
        let wall = self.wall.elapsed().as_secs_f64();
        let mut spent = vec![(
            "load generator".to_string(),
            cpu_of("/proc/self/stat").saturating_sub(self.ours),
        )];
        for (name, pid, before) in &self.others {
            let now = cpu_of(&format!("/proc/{pid}/stat"));
            spent.push((name.clone(), now.saturating_sub(*before)));
        }
        if let Some((pid, before)) = self.cluster {
            spent.push((
                "PostgreSQL".to_string(),
                cluster_cpu(pid).saturating_sub(before),
            ));
        }
        let pct = |d: Duration| 100.0 * d.as_secs_f64() / wall;
        let shares: Vec<String> = spent
            .iter()
            .map(|(name, d)| format!("{name} {:.0}%", pct(*d)))
            .collect();
        let each: Vec<String> = spent
            .iter()
            .map(|(name, d)| {
                format!(
                    "{name} {:.1} µs",
                    d.as_secs_f64() * 1e6 / done.max(1) as f64
                )
            })
            .collect();
        format!(
            "{}, idle {:.0}% (100% = one core); per {unit}: {}",
            shares.join(", "),
            pct(machine_idle().saturating_sub(self.idle)),
            each.join(", ")
        )
    }
}

async fn sql_place_many(setup: &Setup) -> Result<Measured> {
    let phase = setup.phase();
    let ready = Arc::new(Barrier::new(SQL_CONNECTIONS + 1));
    let mut tasks = Vec::new();
    for c in 0..SQL_CONNECTIONS {
        let (url, board, ready) = (setup.db_url.clone(), setup.board, ready.clone());
        let users: Vec<i64> = setup
            .writers
            .iter()
            .copied()
            .cycle()
            .take(SQL_BATCH)
            .collect();
        tasks.push(tokio::spawn(async move {
            let client = pgplace_tests::connect(&url).await;
            let statement = client
                .prepare("SELECT count(*) FROM place.place_many($1, $2, $3, $4, $5) WHERE placed")
                .await?;
            ready.wait().await;
            let (mut placed, mut latencies) = (0usize, Latencies::default());
            let end = Instant::now() + phase;
            let mut n = c as i32 * 1_000_003;
            while Instant::now() < end {
                let xs: Vec<i32> = (0..SQL_BATCH as i32).map(|i| (n + i * 7) % 1000).collect();
                let ys: Vec<i32> = (0..SQL_BATCH as i32).map(|i| (n / 3 + i) % 1000).collect();
                let cs: Vec<i32> = (0..SQL_BATCH as i32).map(|i| (n + i) % 16).collect();
                n = n.wrapping_add(101);
                let sent = Instant::now();
                let row = client
                    .query_one(&statement, &[&board, &users, &xs, &ys, &cs])
                    .await?;
                latencies.push(sent.elapsed());
                placed += row.get::<_, i64>(0) as usize;
            }
            Ok::<_, crate::Error>((placed, latencies))
        }));
    }
    ready.wait().await;
    let clock = Clock::start(&[], setup.postmaster);
    let started = Instant::now();
    let (mut placed, mut latencies) = (0, Latencies::default());
    for task in tasks {
        let (p, l) = task.await??;
        placed += p;
        latencies.extend(l);
    }
    let elapsed = started.elapsed();
    Ok(Measured {
        system: format!(
            "pgplace place_many over SQL ({SQL_CONNECTIONS} connections, batches of {SQL_BATCH})"
        ),
        per_second: rate(placed, elapsed),
        latencies: format!("per batch {}", latencies.sorted().summary()),
        cpu: clock.finish(placed, "placement"),
        errors: 0,
        error_kinds: BTreeMap::new(),
    })
}

/// Which gateways the clients place through.
#[derive(Clone, Copy)]
enum Fleet {
    /// One gateway, no proxy.
    Direct,
    /// This many gateways behind nginx.
    Proxied(usize, Placing),
}

/// Who groups a board's placements.
#[derive(Clone, Copy, PartialEq)]
enum Placing {
    /// Each gateway its own.
    Each,
    /// The gateway that holds the board's placer lease (`--placer-url`).
    OnePlacer,
}

/// `board.place` from 64 clients, straight to one gateway or through nginx to some.
async fn through_gateways(setup: &Setup, fleet: Fleet, dir: &std::path::Path) -> Result<Measured> {
    let (count, placing) = match fleet {
        Fleet::Direct => (1, Placing::Each),
        Fleet::Proxied(count, placing) => (count, placing),
    };
    let extra: &[&str] = match placing {
        Placing::Each => &[],
        Placing::OnePlacer => &["--placer-url", "http://{listen}"],
    };
    let mut gateways = Vec::new();
    for i in 0..count {
        let name = match fleet {
            Fleet::Direct => format!("{NAME}-direct"),
            Fleet::Proxied(_, Placing::Each) => format!("{NAME}-{count}-{i}"),
            Fleet::Proxied(_, Placing::OnePlacer) => format!("{NAME}-{count}-placer-{i}"),
        };
        gateways.push(setup.gateway_with(&name, extra).await?);
    }
    let nginx = matches!(fleet, Fleet::Proxied(..)).then(|| {
        let addrs: Vec<_> = gateways.iter().map(|g| g.addr).collect();
        Nginx::start(&addrs, dir, CLIENTS + 64)
    });
    let target = match &nginx {
        Some(nginx) => {
            nginx.wait_ready().await;
            nginx.addr
        }
        None => gateways[0].addr,
    };
    let mut watched: Vec<(String, u32)> = gateways
        .iter()
        .enumerate()
        .map(|(i, g)| (format!("gateway {}", i + 1), g.pid))
        .collect();
    if let Some(nginx) = &nginx {
        watched.extend(
            nginx
                .worker_pids()
                .into_iter()
                .map(|p| ("nginx".to_string(), p)),
        );
    }
    let watched: Vec<(&str, u32)> = watched.iter().map(|(n, p)| (n.as_str(), *p)).collect();
    let placers = Placers::start(setup, target, setup.phase()).await?;
    let clock = Clock::start(&watched, setup.postmaster);
    let started = Instant::now();
    let Tally {
        latencies,
        errors: error_kinds,
    } = placers.join().await?;
    let errors = error_kinds.values().sum();
    let elapsed = started.elapsed();
    let placed = latencies.len();
    let cpu = clock.finish(placed, "placement");
    let groups = mean_group(&gateways).await?;
    drop(nginx);
    for gateway in gateways {
        gateway.stop().await;
    }
    Ok(Measured {
        system: match fleet {
            Fleet::Direct => format!("pgplace board.place, 1 gateway ({CLIENTS} clients)"),
            Fleet::Proxied(1, _) => {
                format!("pgplace board.place, 1 gateway behind nginx ({CLIENTS} clients)")
            }
            Fleet::Proxied(count, Placing::Each) => format!(
                "pgplace board.place, {count} gateways behind nginx, each placing ({CLIENTS} clients)"
            ),
            Fleet::Proxied(count, Placing::OnePlacer) => format!(
                "pgplace board.place, {count} gateways behind nginx, one placer per board ({CLIENTS} clients)"
            ),
        },
        per_second: rate(placed, elapsed),
        latencies: latencies.sorted().summary(),
        cpu: format!("{cpu}, {groups:.1} placements per place_many group"),
        errors,
        error_kinds,
    })
}

/// How many placements the gateways' groups held on average (their
/// pgplace_placement_group_size histograms): what one place_many call carried.
async fn mean_group(gateways: &[crate::process::Gateway]) -> Result<f64> {
    let (mut sum, mut count) = (0.0, 0.0);
    for gateway in gateways {
        let values = metric_values(
            gateway.addr,
            &[
                "pgplace_placement_group_size_sum",
                "pgplace_placement_group_size_count",
            ],
        )
        .await?;
        sum += values[0];
        count += values[1];
    }
    Ok(sum / count.max(1.0))
}

/// One placement in Redis as r/Place 2017 and One Million Checkboxes did it.
const PLACE_LUA: &str = r"
if redis.call('SET', KEYS[1], '1', 'NX', 'EX', ARGV[3]) then
  redis.call('BITFIELD', KEYS[2], 'SET', 'u4', '#' .. ARGV[1], ARGV[2])
  redis.call('PUBLISH', KEYS[3], ARGV[4])
  return 1
end
return 0
";

/// redis-server on a free port, killed when dropped.
struct Redis {
    port: u16,
    child: Child,
}

impl Redis {
    fn start(fsync: &str, dir: &std::path::Path) -> Result<Redis> {
        let port = free_port();
        let data: PathBuf = dir.join(format!("redis-{fsync}"));
        let _ = std::fs::remove_dir_all(&data);
        std::fs::create_dir_all(&data)?;
        let child = Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
            ])
            .args([
                "--appendonly",
                "yes",
                "--appendfsync",
                fsync,
                "--protected-mode",
                "no",
            ])
            .arg("--dir")
            .arg(&data)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("starting redis-server (Debian's redis-server package): {e}"))?;
        Ok(Redis { port, child })
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn redis_lua(setup: &Setup, fsync: &str, dir: &std::path::Path) -> Result<Measured> {
    let redis = Redis::start(fsync, dir)?;
    let client = redis::Client::open(format!("redis://127.0.0.1:{}/", redis.port))?;
    let mut first = None;
    for _ in 0..100 {
        match client.get_multiplexed_async_connection().await {
            Ok(con) => {
                first = Some(con);
                break;
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
    first.ok_or("redis-server did not start")?;
    let ready = Arc::new(Barrier::new(CLIENTS + 1));
    let phase = setup.phase();
    let mut tasks = Vec::new();
    for c in 0..CLIENTS {
        // Its own TCP connection per client, like the gateway's clients.
        let mut con = client.get_multiplexed_async_connection().await?;
        let ready = ready.clone();
        tasks.push(tokio::spawn(async move {
            let script = redis::Script::new(PLACE_LUA);
            ready.wait().await;
            let (mut latencies, mut errors) = (Latencies::default(), 0usize);
            let end = Instant::now() + phase;
            let mut n: u64 = 0;
            while Instant::now() < end {
                // A user of its own each time: every call must place.
                let user = format!("cooldown:{c}:{n}");
                let offset = (c as u64 * 7919 + n * 104_729) % 1_000_000;
                let color = n % 16;
                n += 1;
                let sent = Instant::now();
                let placed: redis::RedisResult<i64> = script
                    .key(&user)
                    .key("board:bench")
                    .key("board:bench:changes")
                    .arg(offset)
                    .arg(color)
                    .arg(300)
                    .arg(format!("{offset},{color}"))
                    .invoke_async(&mut con)
                    .await;
                match placed {
                    Ok(1) => latencies.push(sent.elapsed()),
                    _ => errors += 1,
                }
            }
            (latencies, errors)
        }));
    }
    ready.wait().await;
    let clock = Clock::start(&[("redis-server", redis.child.id())], None);
    let started = Instant::now();
    let (mut latencies, mut errors) = (Latencies::default(), 0);
    for task in tasks {
        let (l, e) = task.await?;
        latencies.extend(l);
        errors += e;
    }
    let elapsed = started.elapsed();
    let placed = latencies.len();
    let cpu = clock.finish(placed, "placement");
    Ok(Measured {
        system: format!("Redis + Lua, appendfsync {fsync} ({CLIENTS} connections; no history)"),
        per_second: rate(placed, elapsed),
        latencies: latencies.sorted().summary(),
        cpu,
        errors,
        error_kinds: BTreeMap::new(),
    })
}

/// GET `path` from `addr` on 16 keep-alive connections for one phase; answers of another
/// length than `bytes` count as errors.
async fn get_many(
    addr: std::net::SocketAddr,
    path: &str,
    bytes: usize,
    phase: Duration,
) -> Result<(usize, Latencies, usize, Duration)> {
    let ready = Arc::new(Barrier::new(SNAPSHOT_CONNECTIONS + 1));
    let mut tasks = Vec::new();
    for _ in 0..SNAPSHOT_CONNECTIONS {
        let mut conn = Conn::open(addr).await?;
        let (ready, path) = (ready.clone(), path.to_string());
        tasks.push(tokio::spawn(async move {
            ready.wait().await;
            let (mut latencies, mut wrong) = (Latencies::default(), 0usize);
            let end = Instant::now() + phase;
            while Instant::now() < end {
                let sent = Instant::now();
                match conn.get(&path, None).await {
                    Ok((200, body)) if body.len() == bytes => latencies.push(sent.elapsed()),
                    Ok(_) => wrong += 1,
                    // The connection is gone: this client stops (its count says so).
                    Err(_) => {
                        wrong += 1;
                        break;
                    }
                }
            }
            (latencies, wrong)
        }));
    }
    ready.wait().await;
    let started = Instant::now();
    let (mut latencies, mut wrong) = (Latencies::default(), 0);
    for task in tasks {
        let (l, w) = task.await?;
        latencies.extend(l);
        wrong += w;
    }
    Ok((latencies.len(), latencies, wrong, started.elapsed()))
}

/// The packed board's size: 1000 x 1000 tiles of 4 bits.
const BOARD_BYTES: usize = 500_000;

async fn bits_from_gateway(setup: &Setup) -> Result<Measured> {
    let gateway = setup.gateway(&format!("{NAME}-bits")).await?;
    let path = format!("/boards/{}/bits", setup.board);
    Conn::open(gateway.addr).await?.get(&path, None).await?;
    let clock = Clock::start(&[("gateway", gateway.pid)], None);
    let (n, latencies, wrong, elapsed) =
        get_many(gateway.addr, &path, BOARD_BYTES, setup.phase()).await?;
    let cpu = clock.finish(n, "request");
    gateway.stop().await;
    Ok(Measured {
        system: format!("pgplace GET /boards/{{id}}/bits ({SNAPSHOT_CONNECTIONS} connections)"),
        per_second: rate(n, elapsed),
        latencies: latencies.sorted().summary(),
        cpu,
        errors: wrong,
        error_kinds: BTreeMap::new(),
    })
}

async fn bits_from_nginx(setup: &Setup, dir: &std::path::Path) -> Result<Measured> {
    let root = dir.join("static");
    std::fs::create_dir_all(&root)?;
    let bits: Vec<u8> =
        pgplace_tests::board_bits(&pgplace_tests::connect(&setup.db_url).await, setup.board)
            .await
            .1;
    std::fs::write(root.join("bits"), &bits)?;
    let http = format!(
        "    sendfile on;\n    keepalive_requests 1000000;\n    server {{\n        listen {{addr}};\n        location / {{ root {}; }}\n    }}\n",
        root.display()
    );
    // Its workers read the file as root: the checkout may be closed to other users.
    let nginx = Nginx::start_with(
        dir,
        "nginx-static",
        &http,
        "user root;",
        SNAPSHOT_CONNECTIONS + 16,
    );
    nginx.wait_ready().await;
    let workers = nginx.worker_pids();
    let watched: Vec<(&str, u32)> = workers.iter().map(|p| ("nginx", *p)).collect();
    let clock = Clock::start(&watched, None);
    let (n, latencies, wrong, elapsed) =
        get_many(nginx.addr, "/bits", bits.len(), setup.phase()).await?;
    Ok(Measured {
        system: format!("nginx, the same bytes from a file ({SNAPSHOT_CONNECTIONS} connections)"),
        per_second: rate(n, elapsed),
        latencies: latencies.sorted().summary(),
        cpu: clock.finish(n, "request"),
        errors: wrong,
        error_kinds: BTreeMap::new(),
    })
}

fn report(durable: &[Measured], snapshot: &[Measured]) -> Table {
    let mut table = Table::new();
    let redis_always = durable
        .iter()
        .find(|m| m.system.contains("always"))
        .map_or(0.0, |m| m.per_second);
    for m in durable {
        let ratio = if redis_always > 0.0 {
            m.per_second / redis_always
        } else {
            0.0
        };
        table.info(
            NAME,
            &format!("durable placements: {}", m.system),
            format!(
                "{:.0}/s ({ratio:.2}x Redis always), {}, {}, {} errors",
                m.per_second, m.latencies, m.cpu, m.errors
            ),
        );
        let mut kinds: Vec<_> = m.error_kinds.iter().collect();
        kinds.sort_by(|a, b| b.1.cmp(a.1));
        for (error, n) in kinds.into_iter().take(5) {
            table.info(NAME, &format!("  {n} x"), error.clone());
        }
    }
    let gateway = durable
        .iter()
        .find(|m| m.system.contains("1 gateway"))
        .map_or(0.0, |m| m.per_second);
    table.target(
        NAME,
        "durable placements/s through the gateway vs Redis appendfsync always",
        format!(
            "{:.2}x",
            if redis_always > 0.0 {
                gateway / redis_always
            } else {
                0.0
            }
        ),
        ">= 1.0x",
        gateway >= redis_always && redis_always > 0.0,
    );
    let behind_nginx = |needle: &str| {
        durable
            .iter()
            .find(|m| m.system.contains(needle))
            .map_or(0.0, |m| m.per_second)
    };
    let one = behind_nginx("1 gateway behind nginx");
    for (placing, needle) in [
        ("each placing", "each placing"),
        ("one placer per board", "one placer"),
    ] {
        let two = behind_nginx(needle);
        let ratio = if one > 0.0 { two / one } else { 0.0 };
        table.target(
            NAME,
            &format!("2 gateways ({placing}) vs 1, both behind nginx"),
            format!("{ratio:.2}x"),
            ">= 0.9x",
            ratio >= 0.9,
        );
    }
    for m in snapshot {
        table.info(
            NAME,
            &format!("snapshot: {}", m.system),
            format!(
                "{:.0}/s, {}, {}, {} wrong",
                m.per_second, m.latencies, m.cpu, m.errors
            ),
        );
    }
    if let [ours, nginx] = snapshot {
        table.info(
            NAME,
            "snapshot: gateway / nginx",
            format!("{:.2}x", ours.per_second / nginx.per_second.max(1e-9)),
        );
    }
    table
}
