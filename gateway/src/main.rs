use clap::Parser;
use pgplace_gateway::{start, Config};
use tracing_subscriber::EnvFilter;

// Thousands of idle keep-alive connections each hold buffers that are mostly never
// written; jemalloc leaves those pages untouched (not resident), glibc's malloc does not.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[tokio::main]
async fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .init();
    let config = Config::parse();
    let running = match start(config).await {
        Ok(running) => running,
        Err(error) => {
            eprintln!("pgplace-gateway: {error}");
            std::process::exit(1);
        }
    };
    println!(
        "pgplace-gateway listening on http://{}/ (JSON-RPC at /jsonrpc)",
        running.addr
    );
    wait_for_stop().await;
    tracing::info!("stopping: answering waiting polls and requests in progress");
    tokio::select! {
        _ = running.shutdown_gracefully(SHUTDOWN_WITHIN) => {}
        _ = wait_for_stop() => tracing::warn!("asked again: stopping at once"),
    }
    running.shutdown();
    tracing::info!("stopped");
}

/// How long a SIGTERM gives requests in progress (orchestrators wait 10 s or more before
/// they kill).
const SHUTDOWN_WITHIN: std::time::Duration = std::time::Duration::from_secs(4);

async fn wait_for_stop() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("SIGTERM can be handled");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}
