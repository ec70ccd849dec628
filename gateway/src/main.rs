//! pgplace-gateway: the long-polling JSON-RPC gateway. Not built yet; the crate exists so
//! the workspace has its final shape and the gateway shares `pgplace-core` from the start.

fn main() {
    eprintln!("pgplace-gateway is not built yet");
    std::process::exit(1);
}
