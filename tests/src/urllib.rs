//! Python's `urllib.request`, one request per process: it sends `Connection: close`, and
//! raises on any status but 2xx, as the plainest Python client does.

use std::net::SocketAddr;

/// One JSON-RPC request to `addr`'s `/jsonrpc`: the answer's HTTP status and body. Panics
/// when urllib fails (a transport error, or a status urllib raises on).
pub async fn post_jsonrpc(addr: SocketAddr, body: &str) -> (u16, String) {
    const SCRIPT: &str = "import sys, urllib.request as u
r = u.urlopen(u.Request(sys.argv[1], data=sys.argv[2].encode(), headers={'Content-Type': 'application/json'}), timeout=30)
sys.stdout.write(str(r.status) + '\\n' + r.read().decode())
";
    let out = tokio::process::Command::new("python3")
        .args(["-c", SCRIPT, &format!("http://{addr}/jsonrpc"), body])
        .output()
        .await
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "urllib: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = String::from_utf8(out.stdout).expect("a UTF-8 answer");
    let (status, body) = out.split_once('\n').expect("urllib wrote the status");
    (status.parse().expect("an HTTP status"), body.to_string())
}
