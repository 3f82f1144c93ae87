//! `shmfifo`: create, inspect, operate and script shmfifo queues from a shell.
//!
//! A queue argument is a NAME (the file `/dev/shm/NAME`) or, when it contains a `/`, a path.
//! Tables by default, `--json` for scripts; exit codes tell success, empty and each error kind
//! apart (see [`errors::EXIT_CODES`] and `cli/README.md`).
#![warn(missing_docs, missing_debug_implementations, rust_2018_idioms)]

mod batch_input;
mod cmd;
mod errors;
mod output;
mod parse;

#[cfg(test)]
mod fuzz_replay;

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

/// The command line.
#[derive(Parser, Debug)]
#[command(
    name = "shmfifo",
    version,
    about = "Create, inspect, operate and script shmfifo queues (SQS FIFO semantics over shared memory)",
    long_about = "Create, inspect, operate and script shmfifo queues (SQS FIFO semantics over \
                  shared memory).\n\nA QUEUE is a NAME (the file /dev/shm/NAME) or, when it \
                  contains a '/', a path. Durations take a unit: 30 (seconds, SQS's unit), 30s, \
                  500ms, 5m, 12h, 4d."
)]
pub struct Cli {
    /// Print JSON for scripts instead of tables (one document; one line per refresh for
    /// `watch`).
    #[arg(long, global = true)]
    pub json: bool,
    /// Log events on stderr, each line with its time: the library's repairs of what dead
    /// processes left, quarantines of corrupted messages and groups, dead-letter moves, and
    /// serve's queue changes and move tasks (-v: info); -vv adds every request serve answers
    /// (debug). Without it, warnings and errors only (none with --json). RUST_LOG, when set,
    /// chooses instead (e.g. RUST_LOG=shmfifo_serve=debug,info).
    #[arg(long, short = 'v', global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// The subcommand.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Create a queue (every setting, with SQS's names).
    Create(cmd::create::CreateArgs),
    /// List the queues in /dev/shm (or --dir) with their message counts.
    Ls(cmd::ls::LsArgs),
    /// Show a queue's settings, counts, groups, participants, memory and counters.
    Stat(cmd::stat::StatArgs),
    /// Send a message (body from an argument, --file or stdin), or a batch of JSON lines.
    Send(cmd::send::SendArgs),
    /// Receive messages and print them with their system attributes.
    Receive(cmd::receive::ReceiveArgs),
    /// Delete received messages by receipt handle.
    Delete(cmd::receive::DeleteArgs),
    /// Change the visibility timeout of a received message.
    ChangeVisibility(cmd::receive::ChangeVisibilityArgs),
    /// Read the messages a receive would return now, without receiving them or changing
    /// anything.
    Peek(cmd::receive::PeekArgs),
    /// Delete every message, visible or in flight.
    Purge(cmd::QueueArg),
    /// Move messages from a dead-letter queue back to their source queues (or --to a queue).
    Redrive(cmd::redrive::RedriveArgs),
    /// Repair what dead processes left behind, and report it.
    Recover(cmd::QueueArg),
    /// Change a live setting by its SQS attribute name, for every process at once.
    Set(cmd::admin::SetArgs),
    /// Remove a queue's file (processes that have it open keep using it).
    Unlink(cmd::QueueArg),
    /// A live, refreshing view of a queue's counts, counters and rates.
    Watch(cmd::watch::WatchArgs),
    /// Serve the SQS API (JSON and query protocols) over HTTP on a directory of queues, for
    /// every AWS SDK and the aws CLI (--endpoint-url http://127.0.0.1:9324).
    Serve(cmd::serve::ServeArgs),
    /// Forward every message of a local queue to an SQS FIFO queue, exactly once and in group
    /// order (runs shmfifo-bridge).
    Bridge(cmd::bridge::BridgeArgs),
    /// Serve Prometheus metrics (CloudWatch's SQS names) for every queue of a directory at
    /// /metrics, observing them without joining.
    Metrics(cmd::metrics::MetricsArgs),
}

/// Set by SIGINT (Ctrl-C) and SIGTERM once a command that looks at it has called
/// [`catch_interrupts`] (or [`interrupt_flag`]): long-running commands (`watch`, a long-poll
/// `receive`, `redrive`, `send --wait`) stop at their next check and return, so that every
/// queue handle is dropped cleanly (a process that dies registered counts as a dead
/// participant). Every other command keeps the signals' default: Ctrl-C ends it at once (a
/// `send` reading its body from stdin sends nothing; a process killed mid-call loses nothing,
/// the queue is crash-safe). Handlers installed for every command made Ctrl-C do nothing in
/// those that never look, and a body cut short by it was sent at end of input.
static INTERRUPTED: std::sync::LazyLock<std::sync::Arc<std::sync::atomic::AtomicBool>> =
    std::sync::LazyLock::new(|| {
        let flag = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
            // Registration fails only for a forbidden signal; these are not.
            let _ = signal_hook::flag::register(sig, std::sync::Arc::clone(&flag));
        }
        flag
    });

/// From now on, Ctrl-C and SIGTERM set the flag [`interrupted`] reads instead of ending the
/// process: for a command that looks at it while it waits.
pub fn catch_interrupts() {
    std::sync::LazyLock::force(&INTERRUPTED);
}

/// The flag Ctrl-C and SIGTERM set, for library calls that take a cancel flag (`redrive`);
/// catches them ([`catch_interrupts`]).
pub fn interrupt_flag() -> std::sync::Arc<std::sync::atomic::AtomicBool> {
    std::sync::Arc::clone(&INTERRUPTED)
}

/// Whether Ctrl-C or SIGTERM arrived.
pub fn interrupted() -> bool {
    INTERRUPTED.load(std::sync::atomic::Ordering::Relaxed)
}

/// Installs a subscriber that writes events to stderr, each line with its time (UTC, RFC
/// 3339), level and target: the levels RUST_LOG names (`info`, `shmfifo_serve=debug,warn`:
/// targets and levels, comma-separated), else `-v` info and `-vv` debug; without either, the
/// warnings and errors of shmfifo's own crates (a redrive's message left behind and why, a
/// bridge's or server's failure: a command that says "see the warning" shows it), except with
/// `--json` (stderr then holds only the error, as JSON).
fn init_logging(verbose: u8, json: bool) {
    use tracing_subscriber::filter::{LevelFilter, Targets};
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let by_flag = match verbose {
        // With --json, stderr holds the error as JSON only (a program parses it).
        0 if json => None,
        // `shmfifo` matches every target of shmfifo's crates (`shmfifo_serve`, …): a prefix.
        0 => Some(Targets::new().with_target("shmfifo", LevelFilter::WARN)),
        1 => Some(Targets::new().with_default(LevelFilter::INFO)),
        _ => Some(Targets::new().with_default(LevelFilter::DEBUG)),
    };
    let filter = match std::env::var("RUST_LOG") {
        Ok(s) if !s.trim().is_empty() => match s.parse::<Targets>() {
            Ok(t) => Some(t),
            Err(e) => {
                eprintln!("shmfifo: RUST_LOG={s:?} is ignored: {e} (use e.g. info or shmfifo_serve=debug,warn)");
                by_flag
            }
        },
        _ => by_flag,
    };
    if let Some(f) = filter {
        let _ = tracing_subscriber::registry()
            .with(tracing_subscriber::fmt::layer().with_writer(std::io::stderr))
            .with(f)
            .try_init();
    }
}

fn main() -> ExitCode {
    let matches = Cli::command()
        .after_help(errors::exit_code_help())
        .get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    // Every queue handle is dropped inside `run`, before the process exits: a handle closed
    // cleanly leaves its received messages in flight (their receipts stay valid for other
    // processes); a process that exits holding one counts as dead.
    let json = cli.json;
    init_logging(cli.verbose, json);
    match cmd::run(cli) {
        Ok(()) => ExitCode::from(errors::OK),
        Err(f) => {
            let msg = if json { f.report_json() } else { f.report() };
            if let Some(msg) = msg {
                eprint!("{msg}");
            }
            ExitCode::from(f.exit_code())
        }
    }
}
