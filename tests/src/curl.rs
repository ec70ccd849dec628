//! curl, one request per process (no `Connection` header, the connection closed after the
//! answer): a client the suite did not write, as the HTTP-stack and retry tests use it.

use std::net::SocketAddr;

/// curl with `args`: its output; panics when curl fails (a transport error).
async fn curl(args: &[&str]) -> String {
    let out = tokio::process::Command::new("curl")
        .args(args)
        .output()
        .await
        .unwrap_or_else(|e| panic!("curl runs: {e}"));
    assert!(
        out.status.success(),
        "curl: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// One JSON-RPC request to `addr`'s `/jsonrpc`: the answer's body.
pub async fn post_jsonrpc(addr: SocketAddr, body: &str) -> String {
    post_jsonrpc_with_status(addr, body).await.1
}

/// One JSON-RPC request to `addr`'s `/jsonrpc`: the answer's HTTP status and body.
pub async fn post_jsonrpc_with_status(addr: SocketAddr, body: &str) -> (u16, String) {
    let url = format!("http://{addr}/jsonrpc");
    // The status goes on a line of its own after the body (`-w`).
    let out = curl(&[
        "-sS",
        "-m",
        "30",
        "-H",
        "Content-Type: application/json",
        "--data-binary",
        body,
        "-w",
        "\n%{http_code}",
        &url,
    ])
    .await;
    let (body, status) = out.rsplit_once('\n').expect("curl wrote the status");
    (status.parse().expect("an HTTP status"), body.to_string())
}
