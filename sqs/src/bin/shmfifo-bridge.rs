//! `shmfifo-bridge LOCAL REMOTE`: forwards every message of a local queue to an SQS FIFO queue
//! exactly once, in group order (see `shmfifo_sqs::bridge`). `shmfifo bridge` runs it.

use std::io::IsTerminal;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use shmfifo::{FifoQueue, Queue};
use shmfifo_sqs::bridge::{bridge, BridgeOptions};
use shmfifo_sqs::SqsQueue;

/// Forward a local queue to an SQS FIFO queue, exactly once and in group order.
#[derive(Parser, Debug)]
#[command(name = "shmfifo bridge", version)]
struct Args {
    /// The local queue: NAME (/dev/shm/NAME) or a path.
    local: String,
    /// The SQS queue: its URL (https://sqs.REGION.amazonaws.com/ACCOUNT/NAME.fifo) or
    /// sqs://NAME.fifo.
    remote: String,
    /// The SQS endpoint (default: AWS_ENDPOINT_URL, else the URL's own host).
    #[arg(long)]
    endpoint_url: Option<String>,
    /// Visibility timeout of the local receives, seconds: how long a killed bridge's messages
    /// wait before a restarted one sends them again (within SQS's 5-minute dedup interval).
    #[arg(long, default_value_t = 30)]
    visibility_timeout: u64,
    /// Most messages per second.
    #[arg(long)]
    rate: Option<u32>,
    /// Stop once the local queue is empty.
    #[arg(long)]
    until_empty: bool,
}

fn main() {
    let a = Args::parse();
    let cancel = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        let _ = signal_hook::flag::register(sig, Arc::clone(&cancel));
    }
    let local = if a.local.contains('/') {
        Queue::open_at(&a.local)
    } else {
        Queue::open(&a.local)
    };
    let local = local.unwrap_or_else(|e| fail(&a.local, &e));
    let remote: Box<dyn FifoQueue> = match a.remote.strip_prefix("sqs://") {
        Some(name) => Box::new(
            SqsQueue::open_name(name, a.endpoint_url.as_deref())
                .unwrap_or_else(|e| fail(&a.remote, &e)),
        ),
        None if a.remote.contains("://") => {
            let endpoint = a
                .endpoint_url
                .clone()
                .or_else(|| std::env::var("AWS_ENDPOINT_URL").ok())
                .or_else(|| {
                    let (scheme, rest) = a.remote.split_once("://")?;
                    Some(format!("{scheme}://{}", rest.split('/').next()?))
                });
            Box::new(
                SqsQueue::open_url(&a.remote, endpoint.as_deref())
                    .unwrap_or_else(|e| fail(&a.remote, &e)),
            )
        }
        // A local queue as the far end (tests, or a second host's arena on shared storage).
        None => shmfifo_sqs::open_url(&a.remote).unwrap_or_else(|e| fail(&a.remote, &e)),
    };
    let opts = BridgeOptions {
        status_file: local.path().map(shmfifo_sqs::bridge::status_path),
        remote_name: a.remote.clone(),
        visibility_timeout: Duration::from_secs(a.visibility_timeout),
        max_per_second: a.rate,
        until_empty: a.until_empty,
        cancel: Some(cancel),
        ..Default::default()
    };
    let tty = std::io::stderr().is_terminal();
    let r = bridge(&local, remote.as_ref(), &opts, &mut |r| {
        if tty {
            eprint!(
                "\rforwarded {}, retried {}, failed {}   ",
                r.forwarded, r.retried, r.failed
            );
        }
    });
    match r {
        Ok(r) => {
            if tty {
                eprintln!();
            }
            println!(
                "forwarded {}, retried {}, failed {}",
                r.forwarded, r.retried, r.failed
            );
        }
        Err(e) => fail(&a.remote, &e),
    }
}

fn fail(what: &str, e: &shmfifo::Error) -> ! {
    eprintln!("shmfifo bridge: {what}: {e}");
    std::process::exit(match e {
        shmfifo::Error::Remote { .. } => 41,
        _ => 1,
    })
}
