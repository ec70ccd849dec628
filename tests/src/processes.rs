//! Real processes for the scale-out tests: gateways (the release or debug binary, so that
//! one can be SIGKILLed and started again) and Debian's nginx in front of them, doing plain
//! round-robin (its configuration is written from `docker/nginx-gateways.conf`'s pattern).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The gateway binary: `GATEWAY_BIN` (./pgplace.sh test builds it).
pub fn gateway_bin() -> PathBuf {
    std::env::var_os("GATEWAY_BIN")
        .map(PathBuf::from)
        .expect("GATEWAY_BIN (the pgplace-gateway binary) is set by ./pgplace.sh test")
}

/// A free loopback port (bound, then released: the process started next takes it).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free loopback port")
        .port()
}

/// One gateway process.
pub struct GatewayProcess {
    pub addr: SocketAddr,
    pub name: String,
    database_url: String,
    log: PathBuf,
    extra_env: Vec<(String, String)>,
    child: Option<Child>,
}

impl GatewayProcess {
    /// Starts `name` (also its connections' application_name) on a free port.
    pub fn start(name: &str, database_url: &str, dir: &Path, extra_env: &[(&str, &str)]) -> Self {
        let env: Vec<(String, String)> = extra_env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Self::start_on(name, free_port(), database_url, dir, &env)
    }

    /// `start`, on loopback port `port`.
    pub fn start_on(
        name: &str,
        port: u16,
        database_url: &str,
        dir: &Path,
        extra_env: &[(String, String)],
    ) -> Self {
        let mut gateway = GatewayProcess {
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            name: name.to_string(),
            database_url: database_url.to_string(),
            log: dir.join(format!("{name}.log")),
            extra_env: extra_env.to_vec(),
            child: None,
        };
        gateway.spawn();
        gateway
    }

    fn spawn(&mut self) {
        let separator = if self.database_url.contains('?') {
            '&'
        } else {
            '?'
        };
        let url = format!(
            "{}{separator}application_name={}",
            self.database_url, self.name
        );
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .expect("the gateway's log file");
        let child = Command::new(gateway_bin())
            .env("PGPLACE_DATABASE_URL", url)
            .env("PGPLACE_LISTEN", self.addr.to_string())
            .env("RUST_LOG", "info")
            .envs(self.extra_env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("a log handle"))
            .stderr(log)
            .spawn()
            .expect("the gateway starts");
        self.child = Some(child);
    }

    /// Waits until /readyz says ready (up to 30 s).
    pub async fn wait_healthy(&self) {
        for _ in 0..300 {
            if let Ok(mut stream) = tokio::net::TcpStream::connect(self.addr).await {
                use tokio::io::{AsyncReadExt, AsyncWriteExt};
                let request = "GET /readyz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
                let mut answer = Vec::new();
                if stream.write_all(request.as_bytes()).await.is_ok()
                    && stream.read_to_end(&mut answer).await.is_ok()
                    && answer.starts_with(b"HTTP/1.1 200")
                {
                    return;
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!(
            "gateway {} did not become healthy (log: {})",
            self.name,
            self.log.display()
        );
    }

    /// SIGKILL, no goodbye.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGTERM, then waits for the process to end: its exit status and how long it took.
    pub fn terminate(&mut self) -> (std::process::ExitStatus, Duration) {
        let mut child = self.child.take().expect("the gateway runs");
        let started = std::time::Instant::now();
        // SAFETY: kill(2) on our own child's pid, which we have not waited for yet.
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
        let status = child.wait().expect("the gateway's exit status");
        (status, started.elapsed())
    }

    /// Stopped (SIGSTOP) for `pause`, then let go on (SIGCONT): a process that hangs.
    pub async fn pause(&self, pause: Duration) {
        let pid = self.pid().expect("the gateway runs") as libc::pid_t;
        // SAFETY: kill(2) on our own child's pid, which we have not waited for yet.
        unsafe { libc::kill(pid, libc::SIGSTOP) };
        tokio::time::sleep(pause).await;
        // SAFETY: as above.
        unsafe { libc::kill(pid, libc::SIGCONT) };
    }

    /// Starts again on the same port.
    pub fn restart(&mut self) {
        self.kill();
        self.spawn();
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }

    /// Resident memory now, in bytes.
    pub fn rss(&self) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid()?)).ok()?;
        let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
        let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kb * 1024)
    }
}

impl Drop for GatewayProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

/// nginx (Debian's package) on a free loopback port, round-robin over `upstreams`.
pub struct Nginx {
    pub addr: SocketAddr,
    prefix: PathBuf,
    child: Option<Child>,
}

impl Nginx {
    /// Round-robin over `upstreams` (each waiting long poll holds two connections).
    pub fn start(upstreams: &[SocketAddr], dir: &Path, connections: usize) -> Self {
        let servers: String = upstreams
            .iter()
            .map(|u| format!("        server {u} max_fails=1 fail_timeout=2s;\n"))
            .collect();
        let http = format!(
            "    upstream pgplace_gateways {{
{servers}        keepalive 256;
        keepalive_requests 1000000;
    }}
    server {{
        listen {{addr}};
        # nginx closes a keep-alive connection after 1,000 requests by default; clients
        # here (the benchmark's placers) each keep one connection for a whole phase.
        keepalive_requests 1000000;
        location / {{
            proxy_pass http://pgplace_gateways;
            proxy_http_version 1.1;
            proxy_set_header Connection \"\";
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
            proxy_read_timeout 120s;
            proxy_buffering off;
            proxy_next_upstream error timeout;
        }}
    }}
"
        );
        Self::start_with(dir, "nginx", &http, "", connections)
    }

    /// nginx with `http` inside its http block (`{addr}` stands for its address) and
    /// `main` at the top level (load_module lines); in `dir`/`name`.
    pub fn start_with(dir: &Path, name: &str, http: &str, main: &str, connections: usize) -> Self {
        let prefix = dir.join(name);
        std::fs::create_dir_all(prefix.join("logs")).expect("nginx's directory");
        // nginx reads -c relative to -p: both absolute.
        let prefix = std::fs::canonicalize(&prefix).expect("nginx's directory exists");
        let addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
        let http = http.replace("{addr}", &addr.to_string());
        let conf = format!(
            "# Written by tests/src/processes.rs (the proxy: docker/nginx-gateways.conf's pattern).
{main}
worker_processes 1;
worker_rlimit_nofile {files};
pid {prefix}/nginx.pid;
error_log {prefix}/logs/error.log warn;
events {{ worker_connections {conns}; }}
http {{
    access_log off;
    client_body_temp_path {prefix}/body;
    proxy_temp_path {prefix}/proxy;
    fastcgi_temp_path {prefix}/fastcgi;
    uwsgi_temp_path {prefix}/uwsgi;
    scgi_temp_path {prefix}/scgi;
{http}}}
",
            prefix = prefix.display(),
            files = connections * 3 + 100,
            conns = connections * 2 + 100,
        );
        std::fs::write(prefix.join("nginx.conf"), conf).expect("writing nginx.conf");
        let mut nginx = Nginx {
            addr,
            prefix,
            child: None,
        };
        let child = nginx
            .command()
            .args(["-g", "daemon off;"])
            .stdin(Stdio::null())
            .spawn()
            .expect("nginx starts (Debian's nginx package; ./pgplace.sh test installs it)");
        nginx.child = Some(child);
        nginx
    }

    /// The master's pid (CPU and memory of the server: its one worker is its child).
    pub fn worker_pids(&self) -> Vec<u32> {
        let Some(master) = self.child.as_ref().map(|c| c.id()) else {
            return Vec::new();
        };
        let children = std::fs::read_to_string(format!("/proc/{master}/task/{master}/children"))
            .unwrap_or_default();
        children
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect()
    }

    fn command(&self) -> Command {
        let mut command = Command::new("nginx");
        command
            .arg("-p")
            .arg(&self.prefix)
            .arg("-c")
            .arg(self.prefix.join("nginx.conf"));
        command
    }

    /// Waits until nginx accepts connections.
    pub async fn wait_ready(&self) {
        for _ in 0..100 {
            if tokio::net::TcpStream::connect(self.addr).await.is_ok() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!(
            "nginx did not start (log: {}/logs/error.log)",
            self.prefix.display()
        );
    }

    /// `nginx -s reload`: new workers; the old ones finish what they hold.
    pub fn reload(&self) {
        let status = self
            .command()
            .args(["-s", "reload"])
            .status()
            .expect("nginx -s reload runs");
        assert!(status.success(), "nginx -s reload failed");
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = self.command().args(["-s", "stop"]).status();
            let _ = child.wait();
        }
    }
}

/// Raises this process's open-files limit to its hard limit (many client connections).
pub fn raise_open_files() -> u64 {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit with a valid pointer to an rlimit.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 {
            limit.rlim_cur = limit.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
    }
    limit.rlim_cur
}
