//! The gateway under test, as a separate process: started with limits raised for the
//! benchmark, watched through /proc, stopped with SIGTERM (SIGKILL if it lingers).

use crate::client::Conn;
use crate::Result;
use std::fs::File;
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::process::{Child, Command};

/// Where one gateway's output goes.
pub struct GatewayLog {
    path: PathBuf,
}

impl GatewayLog {
    pub fn new(dir: &Path, scenario: &str) -> Result<Self> {
        std::fs::create_dir_all(dir)?;
        Ok(GatewayLog {
            path: dir.join(format!("gateway-{scenario}.log")),
        })
    }

    /// The last lines, to explain a failure.
    fn tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(&self.path).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }
}

pub struct Gateway {
    pub addr: SocketAddr,
    pub pid: u32,
    child: Child,
    log: GatewayLog,
}

impl Gateway {
    pub async fn start(bin: &Path, db_url: &str, log: GatewayLog) -> Result<Self> {
        Self::start_with(bin, db_url, log, &[]).await
    }

    /// `start`, with `extra` arguments (flags other than the ones `start` passes; `{listen}`
    /// in one stands for the address the gateway listens on).
    pub async fn start_with(
        bin: &Path,
        db_url: &str,
        log: GatewayLog,
        extra: &[&str],
    ) -> Result<Self> {
        let addr = free_port()?;
        let out = File::create(&log.path)?;
        let child = Command::new(bin)
            .arg("--database-url")
            .arg(db_url)
            .arg("--listen")
            .arg(addr.to_string())
            // Room for every session of every scenario, and sessions that outlive a slow
            // setup phase.
            .args(["--max-sessions", "1000000", "--session-idle-secs", "3600"])
            .args(
                extra
                    .iter()
                    .map(|a| a.replace("{listen}", &addr.to_string())),
            )
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            // Should this process die (a panic), the gateway must not outlive it.
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("starting {}: {e}", bin.display()))?;
        let pid = child.id().ok_or("the gateway exited at once")?;
        let mut gateway = Gateway {
            addr,
            pid,
            child,
            log,
        };
        gateway.wait_healthy().await?;
        Ok(gateway)
    }

    /// Waits (up to 30 s) for GET /readyz to answer 200.
    async fn wait_healthy(&mut self) -> Result<()> {
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(30) {
            if let Some(status) = self.child.try_wait()? {
                return Err(self.failure(&format!("the gateway exited ({status})")));
            }
            if let Ok(mut conn) = Conn::open(self.addr).await {
                if let Ok((200, _)) = conn.get("/readyz", None).await {
                    return Ok(());
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Err(self.failure("the gateway did not become healthy within 30 s"))
    }

    /// An error that carries the end of the gateway's log.
    pub fn failure(&self, what: &str) -> crate::Error {
        format!(
            "{what}; the end of {}:\n{}",
            self.log.path.display(),
            self.log.tail(20)
        )
        .into()
    }

    /// CPU time used so far (user + system).
    pub fn cpu(&self) -> Duration {
        cpu_of(&format!("/proc/{}/stat", self.pid))
    }

    /// A field of /proc/<pid>/status in kB (VmRSS, VmHWM).
    pub fn status_kb(&self, field: &str) -> u64 {
        status_kb(&format!("/proc/{}/status", self.pid), field)
    }

    /// Open file descriptors (sockets included).
    pub fn open_fds(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.pid)).map_or(0, |d| d.count())
    }

    /// Whether the gateway is still running (it should be, until `stop`).
    pub fn check_alive(&mut self) -> Result<()> {
        match self.child.try_wait()? {
            None => Ok(()),
            Some(status) => Err(self.failure(&format!("the gateway exited ({status})"))),
        }
    }

    /// SIGTERM, then SIGKILL after 5 s.
    pub async fn stop(mut self) {
        // SAFETY: kill(2) on our own child's pid; no memory is involved.
        unsafe {
            libc::kill(self.pid as libc::pid_t, libc::SIGTERM);
        }
        if tokio::time::timeout(Duration::from_secs(5), self.child.wait())
            .await
            .is_err()
        {
            eprintln!("the gateway ignored SIGTERM for 5 s: killing it");
            let _ = self.child.kill().await;
        }
    }
}

/// A loopback port free right now (the gateway binds it a moment later; nothing else on
/// this machine is expected to grab it in between).
fn free_port() -> Result<SocketAddr> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?)
}

/// utime + stime of a /proc/<pid>/stat file.
pub fn cpu_of(stat_path: &str) -> Duration {
    // After the name, utime and stime are the 12th and 13th fields (fields 14 and 15).
    ticks_of(&stat_fields(stat_path), &[11, 12])
}

/// The fields of a /proc/<pid>/stat after the command's name (empty when it is gone).
fn stat_fields(stat_path: &str) -> Vec<String> {
    let text = std::fs::read_to_string(stat_path).unwrap_or_default();
    // The command name (field 2) is in parentheses and may hold spaces: count from its end.
    text.rsplit_once(')')
        .map_or("", |(_, rest)| rest)
        .split_whitespace()
        .map(str::to_string)
        .collect()
}

fn ticks_of(fields: &[String], which: &[usize]) -> Duration {
    let ticks: u64 = which
        .iter()
        .filter_map(|&i| fields.get(i)?.parse::<u64>().ok())
        .sum();
    Duration::from_secs_f64(ticks as f64 / clock_ticks_per_second())
}

/// The CPU a PostgreSQL cluster has spent so far: its postmaster's own and its reaped
/// children's (backends that have exited), plus every live child's.
pub fn cluster_cpu(postmaster: u32) -> Duration {
    // After the name: the ppid is the 2nd field; cutime and cstime the 14th and 15th.
    let mut total = ticks_of(
        &stat_fields(&format!("/proc/{postmaster}/stat")),
        &[11, 12, 13, 14],
    );
    let parent = postmaster.to_string();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
        else {
            continue;
        };
        let fields = stat_fields(&format!("/proc/{pid}/stat"));
        if fields.get(1) == Some(&parent) {
            total += ticks_of(&fields, &[11, 12]);
        }
    }
    total
}

/// The time every core of the machine has been idle so far (/proc/stat: idle and iowait).
pub fn machine_idle() -> Duration {
    let text = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let fields: Vec<String> = text
        .lines()
        .find_map(|line| line.strip_prefix("cpu "))
        .unwrap_or("")
        .split_whitespace()
        .map(str::to_string)
        .collect();
    ticks_of(&fields, &[3, 4])
}

fn clock_ticks_per_second() -> f64 {
    // SAFETY: sysconf only reads a constant of the system.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 {
        ticks as f64
    } else {
        100.0
    }
}

pub fn status_kb(status_path: &str, field: &str) -> u64 {
    let text = std::fs::read_to_string(status_path).unwrap_or_default();
    text.lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}
