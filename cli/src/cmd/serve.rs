//! `shmfifo serve`: the SQS API over HTTP on the queues of a directory (see `shmfifo-serve`).

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

use clap::Args;

use super::Ctx;
use crate::errors::Failure;

/// Arguments of `serve`.
#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Address to listen on (loopback by default: anything on the host may then send).
    #[arg(long, default_value = "127.0.0.1")]
    pub host: IpAddr,
    /// Port (0: a free one, printed on stdout).
    #[arg(long, default_value_t = 9324)]
    pub port: u16,
    /// Directory of the queue files (queue NAME.fifo is DIR/NAME.fifo).
    #[arg(long, default_value = "/dev/shm")]
    pub dir: PathBuf,
    /// Check SigV4 signatures against this key pair, ACCESS_KEY_ID:SECRET (default: accept any
    /// signature, as local emulators do).
    #[arg(long, value_name = "ACCESS_KEY_ID:SECRET")]
    pub check_signature: Option<String>,
}

/// Serves until Ctrl-C or SIGTERM.
pub fn run(a: &ServeArgs, _ctx: Ctx) -> Result<(), Failure> {
    let check_signature = match &a.check_signature {
        None => None,
        Some(s) => {
            let (k, v) = s.split_once(':').ok_or_else(|| {
                Failure::input("--check-signature", "expected ACCESS_KEY_ID:SECRET")
            })?;
            Some(shmfifo_serve::sigv4::KeyPair {
                access_key: k.to_owned(),
                secret: v.to_owned(),
            })
        }
    };
    let cfg = shmfifo_serve::Config {
        addr: SocketAddr::new(a.host, a.port),
        dir: a.dir.clone(),
        check_signature,
        ..Default::default()
    };
    shmfifo_serve::run(cfg)
        .map_err(|e| Failure::input(format!("serve on {}:{}", a.host, a.port), e))
}
