//! `shmfifo metrics --listen ADDR`: Prometheus's `/metrics` for every queue of a directory (or
//! the queues named), with CloudWatch's SQS metric names (see `shmfifo_serve::metrics`).

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Args;

use crate::errors::Failure;

/// Arguments of `metrics`.
#[derive(Args, Debug)]
pub struct MetricsArgs {
    /// Address to serve /metrics on, IP:PORT or localhost:PORT (loopback unless told
    /// otherwise; port 0 picks one).
    #[arg(long, default_value = "127.0.0.1:9325", value_parser = crate::parse::listen)]
    pub listen: SocketAddr,
    /// Directory of the queues to scrape.
    #[arg(long, default_value = "/dev/shm")]
    pub dir: PathBuf,
    /// Only these queues (names under --dir, or paths); default: every queue in --dir.
    pub queues: Vec<String>,
    /// Serve every queue this user may observe to every client that can connect, and allow a
    /// non-loopback --listen address (nothing authenticates a client). Without it a local
    /// client sees only the queues its own user may open.
    #[arg(long)]
    pub public: bool,
}

/// Serves until Ctrl-C or SIGTERM.
pub fn run(a: &MetricsArgs) -> Result<(), Failure> {
    // Not refused (the endpoint may start before the queues' directory is made), but said: it
    // started silently and served nothing.
    if !a.dir.is_dir() {
        eprintln!(
            "shmfifo metrics: warning: --dir {}: not a directory (yet): nothing to report until it is",
            a.dir.display()
        );
    }
    let cfg = shmfifo_serve::metrics::MetricsConfig {
        addr: a.listen,
        dir: a.dir.clone(),
        queues: a.queues.clone(),
        public: a.public,
        ..Default::default()
    };
    shmfifo_serve::run_metrics(cfg)
        .map_err(|e| Failure::start(format!("metrics on {}", a.listen), e))
}
