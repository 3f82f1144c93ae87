//! `shmfifo serve`: the SQS API over HTTP on the queues of a directory (see `shmfifo-serve`).

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

use clap::Args;

use super::Ctx;
use crate::errors::Failure;

/// Arguments of `serve`.
#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Address to listen on. Loopback by default: each request then acts as the user that
    /// owns the client's socket, and may do what that user may do to the queue files. Any
    /// other address is refused unless signatures are checked. On every address (0.0.0.0,
    /// ::) queue URLs name the host each request was sent to (its Host header). An IP
    /// address, or localhost.
    #[arg(long, default_value = "127.0.0.1", value_parser = crate::parse::host)]
    pub host: IpAddr,
    /// Port (0: a free one, printed on stdout).
    #[arg(long, default_value_t = 9324)]
    pub port: u16,
    /// Directory of the queue files (queue NAME.fifo is DIR/NAME.fifo). No other user may be
    /// able to change the path to it or the names in it: it and every directory above it
    /// owned by root or the server's user, and one that others may write sticky (as /dev/shm)
    /// with the next one on the path root's or the server's user's; serve refuses to start
    /// otherwise.
    #[arg(long, default_value = "/dev/shm")]
    pub dir: PathBuf,
    /// Check SigV4 signatures against this key pair, ACCESS_KEY_ID:SECRET; a signed request
    /// acts as the server's own user (default: no signature checked; requests act as the
    /// user that owns the client's socket). Give it in the environment
    /// (SHMFIFO_SERVE_SIGNATURE): a command line is readable by every local user
    /// (/proc/PID/cmdline), and the secret lets anyone who reads it act as the server's user.
    #[arg(
        long,
        value_name = "ACCESS_KEY_ID:SECRET",
        env = SIGNATURE_ENV,
        hide_env_values = true
    )]
    pub check_signature: Option<String>,
    /// The region signatures must be scoped to (with --check-signature).
    #[arg(long, default_value = "us-east-1")]
    pub region: String,
    /// Most connections open at once (default: the descriptor limit less 192, at most 1,024).
    #[arg(long)]
    pub max_connections: Option<usize>,
}

/// The environment variable that gives `--check-signature`'s key pair.
const SIGNATURE_ENV: &str = "SHMFIFO_SERVE_SIGNATURE";

/// Serves until Ctrl-C or SIGTERM.
pub fn run(a: &ServeArgs, _ctx: Ctx) -> Result<(), Failure> {
    let check_signature = match &a.check_signature {
        None => None,
        Some(s) => {
            if std::env::var_os(SIGNATURE_ENV).is_none_or(|v| v != s.as_str()) {
                eprintln!(
                    "shmfifo serve: warning: the --check-signature secret is on the command line, \
                     which every local user can read (/proc/PID/cmdline); give it in \
                     {SIGNATURE_ENV} instead"
                );
            }
            let (k, v) = s.split_once(':').ok_or_else(|| {
                Failure::input("--check-signature", "expected ACCESS_KEY_ID:SECRET")
            })?;
            let mut kp = shmfifo_serve::sigv4::KeyPair::new(k, v);
            kp.region.clone_from(&a.region);
            Some(kp)
        }
    };
    let mut cfg = shmfifo_serve::Config {
        addr: SocketAddr::new(a.host, a.port),
        dir: a.dir.clone(),
        check_signature,
        ..Default::default()
    };
    if let Some(n) = a.max_connections {
        cfg.max_connections = n;
    }
    shmfifo_serve::run(cfg)
        .map_err(|e| Failure::start(format!("serve on {}:{}", a.host, a.port), e))
}
