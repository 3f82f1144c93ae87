//! `shmfifo-bridge LOCAL REMOTE`: forwards every message of a local queue to an SQS FIFO queue
//! exactly once, in group order (see `shmfifo_sqs::bridge`). `shmfifo bridge` runs it.

use std::io::IsTerminal;
use std::os::unix::fs::MetadataExt;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use shmfifo::{FifoQueue, Queue, RemoteKind};
use shmfifo_sqs::bridge::{bridge, BridgeOptions};
use shmfifo_sqs::SqsQueue;

/// Forward a local queue to an SQS FIFO queue, exactly once and in group order.
// The field docs are the command's help text, printed as written: a URL there is plain text.
#[allow(rustdoc::bare_urls)]
#[derive(Parser, Debug)]
#[command(name = "shmfifo bridge", version)]
struct Args {
    /// The local queue: NAME (/dev/shm/NAME) or a path.
    local: String,
    /// The SQS queue: its URL (https://sqs.REGION.amazonaws.com/ACCOUNT/NAME.fifo) or
    /// sqs://NAME.fifo. (A local queue as the far end, for tests: shm:NAME or shm:PATH.)
    remote: String,
    /// The SQS endpoint (default: AWS_ENDPOINT_URL, else the URL's own host).
    #[arg(long)]
    endpoint_url: Option<String>,
    /// Visibility timeout of the local receives, seconds (1 to 240; renewed while the bridge
    /// holds a message): how long a killed bridge's messages wait before a restarted one sends
    /// them again, within SQS's 5-minute dedup interval (which drops the resend).
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=240))]
    visibility_timeout: u64,
    /// Most messages per second.
    #[arg(long)]
    rate: Option<u32>,
    /// Stop once the local queue is empty (delayed messages included: they are waited for),
    /// apart from the groups stopped at a message the remote queue refuses (listed on stderr;
    /// the exit code is then 3). Exit codes: 0 all forwarded; 1 a local error (no such queue,
    /// ...); 2 usage; 3 groups left stopped; 41 the remote failed for good (credentials, no
    /// such queue, every message refused alike) or did not answer at start. Another consumer of the local queue may make
    /// it stop early.
    #[arg(long)]
    until_empty: bool,
    /// Requests in flight to the remote queue at once (each with the next message of up to
    /// 10 groups; a group's messages still go one after another), 1 to 64.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u64).range(1..=64))]
    concurrency: u64,
    /// Refusals of one message before it moves to the local queue's dead-letter queue (or,
    /// without a redrive policy, before its group is reported stopped); also answers that are
    /// a 4xx page without an SQS error code to one message sent alone, before its group is
    /// reported stopped (never dead-lettered). Tries are spaced 1 s, 2 s, 4 s ... up to 60 s
    /// apart, with jitter.
    #[arg(long, default_value_t = 5)]
    max_tries: u32,
    /// Distinct messages refused in a row with one error code, nothing acknowledged between,
    /// that end the bridge (a remote refusing every message alike; 0: never), rather than
    /// move message after message to the dead-letter queue.
    #[arg(long, default_value_t = 10)]
    max_refused_in_a_row: u32,
    /// Log more on stderr: -v info, -vv debug (RUST_LOG, when set, chooses instead).
    #[arg(short, long, action = clap::ArgAction::Count)]
    verbose: u8,
}

/// Writes the bridge's events to stderr (each line with its time, level and target): the
/// levels RUST_LOG names (`info`, `shmfifo_sqs=debug`), else `-v` info, `-vv` debug, else
/// warnings and errors (a remote failing, a refusal, a dead-letter move, a local delete that
/// failed).
fn init_logging(verbose: u8) {
    use tracing_subscriber::filter::{LevelFilter, Targets};
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    // Not the SDK's instance-metadata warnings: without a region, each start logged three of
    // a page each (IMDS, unreachable off EC2) before the bridge's one line saying to set
    // AWS_REGION. The SDK's other warnings (a malformed AWS_ENDPOINT_URL, a broken profile)
    // stay. RUST_LOG=warn shows them all.
    let level = match verbose {
        0 => LevelFilter::WARN,
        1 => LevelFilter::INFO,
        _ => LevelFilter::DEBUG,
    };
    let mut warn = Targets::new().with_default(level);
    if verbose == 0 {
        // Each credential provider's failure on the way (the instance-metadata one a page
        // long): the bridge says what failed, once. `-v` shows them (debugging credentials).
        warn = warn
            .with_target("aws_config::imds", LevelFilter::ERROR)
            .with_target("aws_config::meta::credentials", LevelFilter::ERROR);
    }
    let filter = match std::env::var("RUST_LOG") {
        Ok(s) if !s.trim().is_empty() => s.parse::<Targets>().unwrap_or_else(|e| {
            eprintln!("shmfifo bridge: RUST_LOG={s:?} is ignored: {e} (use e.g. info or shmfifo_sqs=debug)");
            warn
        }),
        _ => warn,
    };
    let _ = tracing_subscriber::registry()
        .with(tracing_subscriber::fmt::layer().with_writer(std::io::stderr))
        .with(filter)
        .try_init();
}

fn main() {
    let a = Args::parse();
    init_logging(a.verbose);
    // Exits once `run` has returned: the local queue's handle is dropped first, so that a
    // bridge that fails leaves no participant for the next opener to repair ("repaired what
    // dead participants left" after every refused start).
    std::process::exit(run(&a));
}

/// Whether `url` can name an SQS FIFO queue: http or https, its last path segment a `.fifo`
/// name (an `ftp://` remote was "unreachable", 41; a name without `.fifo` was refused as a
/// local queue name, 1).
fn fifo_url(url: &str) -> bool {
    let Some((scheme, rest)) = url.split_once("://") else {
        return false;
    };
    // As the library reads a queue URL: its query and fragment are not the name's.
    let rest = rest.split(['?', '#']).next().unwrap_or("");
    let Some((host, path)) = rest.split_once('/') else {
        return false;
    };
    let name = path.trim_end_matches('/').rsplit('/').next().unwrap_or("");
    matches!(scheme.to_ascii_lowercase().as_str(), "http" | "https")
        && !host.is_empty()
        && name.len() > ".fifo".len()
        && name.ends_with(".fifo")
}

/// The bridge; its exit code.
fn run(a: &Args) -> i32 {
    // The far end first: a bridge that cannot reach it never joins the local queue.
    let mut far_path = None;
    let remote: Box<dyn FifoQueue> = match a.remote.strip_prefix("sqs://") {
        // A local queue as the far end (tests, or a second host's arena on shared storage):
        // only by name with `shm:` (or `shm://`), looked at first. A REMOTE without a scheme
        // was taken for a local queue, and a forgotten `sqs://` forwarded the outbox into a
        // local file of that name.
        _ if a.remote.starts_with("shm:") => match local_far_end(a) {
            Ok((q, path)) => {
                far_path = path;
                Box::new(q)
            }
            Err(code) => return code,
        },
        Some(name) => match SqsQueue::open_name(name, a.endpoint_url.as_deref()) {
            Ok(q) => Box::new(q),
            Err(e) => return fail(&a.remote, &e),
        },
        None if a.remote.contains("://") && !fifo_url(&a.remote) => {
            eprintln!(
                "shmfifo bridge: {}: not an SQS FIFO queue URL: give http:// or https://, and a \
                 queue name ending in .fifo (https://sqs.REGION.amazonaws.com/ACCOUNT/NAME.fifo)",
                a.remote
            );
            return 2;
        }
        None if a.remote.contains("://") => {
            let endpoint = a
                .endpoint_url
                .clone()
                .or_else(|| std::env::var("AWS_ENDPOINT_URL").ok())
                .or_else(|| {
                    let (scheme, rest) = a.remote.split_once("://")?;
                    Some(format!("{scheme}://{}", rest.split('/').next()?))
                });
            match SqsQueue::open_url(&a.remote, endpoint.as_deref()) {
                Ok(q) => Box::new(q),
                Err(e) => return fail(&a.remote, &e),
            }
        }
        None => {
            eprintln!(
                "shmfifo bridge: {}: not an SQS queue: give its URL \
                 (https://sqs.REGION.amazonaws.com/ACCOUNT/NAME.fifo) or sqs://NAME.fifo \
                 (shm:NAME names a local queue as the far end)",
                a.remote
            );
            return 2;
        }
    };
    // Asked once before the first message (`sqs://` asked already, for its URL): a URL whose
    // endpoint refuses connections was retried for ever, silently but for warnings. Once
    // running, an outage is waited out.
    match remote.attributes() {
        Ok(attrs) => {
            // SQS names `FifoQueue` for FIFO queues only: a standard queue's answer has none
            // (one made on moto with a `.fifo` name but without `FifoQueue` was bridged, and
            // its order lost).
            if !attrs.iter().any(|(k, v)| k == "FifoQueue" && v == "true") {
                eprintln!(
                    "shmfifo bridge: {}: not a FIFO queue (its attributes have no FifoQueue=true)",
                    a.remote
                );
                return REMOTE;
            }
        }
        // Not reached at all (no connection, no answer in time): a wrong port or host.
        Err(
            ref e @ shmfifo::Error::Remote {
                kind: RemoteKind::Unreachable,
                ref code,
                ..
            },
        ) if code == "dispatch" || code == "timeout" => {
            // No credential provider answered (off EC2 without keys, the instance-metadata
            // service refusing): nothing was sent, so say that, not "did not answer".
            // (A provider that failed rather than found nothing: the SDK's text says so.)
            let what = if e.to_string().contains("credentials") {
                CREDENTIALS_HINT
            } else {
                "the remote queue did not answer"
            };
            eprintln!(
                "shmfifo bridge: {}: {what}: {e} (asked before the first message; once \
                 running, the bridge waits out an outage)",
                a.remote
            );
            return REMOTE;
        }
        // No such queue, or credentials no call gets through with: every send would fail
        // alike.
        Err(
            e @ (shmfifo::Error::QueueDoesNotExist { .. }
            | shmfifo::Error::Remote {
                kind: RemoteKind::Credentials,
                ..
            }),
        ) if !denied_this_action(&e) => return fail(&a.remote, &e),
        // Anything else (a role allowed to send but not to read attributes, a 5xx): the
        // sends will tell.
        Err(e) => {
            tracing::warn!(error = %e, "bridge: the remote queue's attributes could not be read; going on");
        }
    }
    // Ctrl-C and SIGTERM end the run cleanly from here on (the held messages handed back).
    // Before, with nothing of the local queue taken, they end the process at once: a probe of
    // a host that drops packets could otherwise hold a stop for its 90 s.
    let cancel = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        let _ = signal_hook::flag::register(sig, Arc::clone(&cancel));
    }
    let local = match open_local(&a.local) {
        Ok(q) => q,
        Err(e) => {
            eprintln!("shmfifo bridge: {}: {e}", a.local);
            return 1;
        }
    };
    // A queue bridged into itself forwarded each message onto its own tail for ever.
    let file = |p: &std::path::Path| std::fs::metadata(p).map(|m| (m.dev(), m.ino())).ok();
    if let (Some(far), Some(near)) = (
        far_path.as_deref().and_then(file),
        local.path().and_then(file),
    ) {
        if far == near {
            eprintln!(
                "shmfifo bridge: {}: the far end is the local queue {} itself",
                a.remote, a.local
            );
            return 2;
        }
    }
    let opts = BridgeOptions {
        status_file: local.path().map(shmfifo_sqs::bridge::status_path),
        remote_name: a.remote.clone(),
        visibility_timeout: Duration::from_secs(a.visibility_timeout),
        max_per_second: a.rate,
        until_empty: a.until_empty,
        cancel: Some(cancel),
        concurrency: a.concurrency as usize,
        max_tries: a.max_tries.max(1),
        max_refused_in_a_row: a.max_refused_in_a_row,
        ..Default::default()
    };
    let tty = std::io::stderr().is_terminal();
    // A message dead-lettered and a group stopped are reported as they happen by the bridge's
    // own warnings (logged at the default level, with the group, the message id and the
    // remote's error): a line of this program's beside each said it twice.
    let r = bridge(&local, remote.as_ref(), &opts, &mut |r| {
        if tty {
            eprint!(
                "\rforwarded {}, retried {}, failed {}, dead-lettered {}, stopped groups {}   ",
                r.forwarded,
                r.retried,
                r.failed,
                r.dead_lettered,
                r.stopped.len()
            );
        }
    });
    match r {
        Ok(r) => {
            if tty {
                eprintln!();
            }
            println!(
                "forwarded {}, retried {}, failed {}, dead-lettered {}",
                r.forwarded, r.retried, r.failed, r.dead_lettered
            );
            if !r.stopped.is_empty() {
                eprintln!(
                    "shmfifo bridge: stopped at a message the remote queue refuses or answers with an error page (left in the local queue): groups {}",
                    r.stopped.join(", ")
                );
                // Not all forwarded: a script draining the queue before it goes must not
                // read success (it exited 0 with every group stopped and nothing sent).
                if a.until_empty {
                    return STOPPED;
                }
            }
            0
        }
        Err(e) => fail(&a.remote, &e),
    }
}

/// A local queue as the far end (`shm:NAME`, `shm:PATH`), checked to drop a resent message:
/// a bridge killed after a send sends the message again once the local visibility timeout
/// has passed, and only the far end's deduplication makes that once. Its deduplication must
/// be on and keep ids longer than the visibility timeout (a queue keeping them 1 s got
/// duplicates over kills). Usage (2) where it does not.
fn local_far_end(a: &Args) -> Result<(Queue, Option<std::path::PathBuf>), i32> {
    let name = a.remote["shm:".len()..].trim_start_matches("//");
    let far = open_local(name).map_err(|e| fail(&a.remote, &e))?;
    let attrs = far.attributes();
    let vt = Duration::from_secs(a.visibility_timeout);
    let why = if attrs.deduplication == shmfifo::Deduplication::Off {
        Some("its deduplication is off".to_owned())
    } else if attrs.deduplication_interval < vt + DEDUP_MARGIN {
        Some(format!(
            "it keeps deduplication ids {} s, less than the visibility timeout ({} s) plus {} s",
            attrs.deduplication_interval.as_secs_f64(),
            vt.as_secs(),
            DEDUP_MARGIN.as_secs()
        ))
    } else {
        if attrs.effective_deduplication_interval < vt + DEDUP_MARGIN {
            // Its table overflowed lately (shorten-window): ids went early, for now.
            tracing::warn!(
                kept_s = attrs.effective_deduplication_interval.as_secs_f64(),
                "bridge: the far end's deduplication table is full: it forgets ids before their \
                 interval ends, and a resend after a kill may arrive twice until it has room"
            );
        }
        None
    };
    if let Some(why) = why {
        eprintln!(
            "shmfifo bridge: {}: {why}: a message resent after a killed bridge's visibility \
             timeout would arrive twice (lower --visibility-timeout, or keep ids longer)",
            a.remote
        );
        return Err(2);
    }
    let path = far.path().map(ToOwned::to_owned);
    Ok((far, path))
}

/// A local queue by NAME (/dev/shm/NAME) or path (anything containing '/').
fn open_local(name: &str) -> shmfifo::Result<Queue> {
    if name.contains('/') {
        Queue::open_at(name)
    } else {
        Queue::open(name)
    }
}

/// How much longer than the local visibility timeout a far end must keep deduplication ids:
/// the time between a killed bridge's send and the visibility timeout's start, and between
/// the message's return and its resend.
const DEDUP_MARGIN: Duration = Duration::from_secs(10);

/// The exit code of an `--until-empty` run that ended with groups stopped at a message the
/// remote refuses: their messages are still in the local queue.
const STOPPED: i32 = 3;

/// Whether `e` refuses this one action to these credentials (IAM's `AccessDenied`), which a
/// role allowed `SendMessage` but not `GetQueueAttributes` gets: not a sign that sends fail.
fn denied_this_action(e: &shmfifo::Error) -> bool {
    matches!(e, shmfifo::Error::Remote { code, .. } if code.starts_with("AccessDenied"))
}

/// The exit code of a remote that failed for good (credentials, no such queue, not a FIFO
/// queue, every message refused alike) or did not answer at start.
const REMOTE: i32 = 41;

/// What to set when no credentials could be loaded.
const CREDENTIALS_HINT: &str =
    "no AWS credentials could be loaded: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE";

/// Says what failed at the far end or in the run; its exit code: [`REMOTE`] where the remote
/// failed or has no such queue, 2 where no region is set (a usage error, as a malformed
/// REMOTE is), 1 otherwise (the local queue).
fn fail(what: &str, e: &shmfifo::Error) -> i32 {
    eprintln!("shmfifo bridge: {what}: {e}");
    match e {
        shmfifo::Error::Remote {
            kind: RemoteKind::Credentials,
            ..
        } => {
            eprintln!("hint: {CREDENTIALS_HINT}");
            REMOTE
        }
        shmfifo::Error::Remote { .. } | shmfifo::Error::QueueDoesNotExist { .. } => REMOTE,
        shmfifo::Error::InvalidConfig {
            setting: "region", ..
        } => 2,
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::fifo_url;

    /// The URLs that can name an SQS FIFO queue, as the library reads them (its query and
    /// fragment are not the name's), and those that cannot.
    #[test]
    fn fifo_urls_are_http_with_a_host_and_a_fifo_name() {
        for ok in [
            "https://sqs.us-east-1.amazonaws.com/123456789012/orders.fifo",
            "https://sqs.us-east-1.amazonaws.com/123456789012/orders.fifo/",
            "HTTPS://sqs.us-east-1.amazonaws.com/123456789012/orders.fifo",
            "http://[::1]:9324/000000000000/orders.fifo",
            "http://127.0.0.1:9324/000000000000/orders.fifo?x=1",
        ] {
            assert!(fifo_url(ok), "{ok}");
        }
        for bad in [
            "ftp://127.0.0.1/000000000000/orders.fifo",
            "http://127.0.0.1:9324/000000000000/orders",
            "http://127.0.0.1:9324/000000000000/.fifo",
            "http:///000000000000/orders.fifo",
            "http://127.0.0.1:9324",
            "http://127.0.0.1:9324/q?name=x.fifo",
        ] {
            assert!(!fifo_url(bad), "{bad}");
        }
    }
}
