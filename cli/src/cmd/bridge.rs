//! `shmfifo bridge`: becomes `shmfifo-bridge` (crate shmfifo-sqs), which forwards a local
//! queue to an SQS FIFO queue exactly once. A separate program, so that the AWS SDK is linked
//! only where it is used; exec'd, not spawned, so that a signal to `shmfifo bridge` (SIGKILL
//! included) reaches the bridge itself and no bridge is left running without it.

use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Command;

use clap::Args;

use crate::errors::Failure;

/// Arguments of `bridge` (passed on to `shmfifo-bridge`; `shmfifo bridge --help` shows them).
#[derive(Args, Debug)]
pub struct BridgeArgs {
    /// LOCAL REMOTE [--endpoint-url URL] [--visibility-timeout SECS] [--rate N] [--until-empty]
    /// [--concurrency N] [--max-tries N] [--max-refused-in-a-row N]
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub args: Vec<String>,
}

/// `shmfifo-bridge` beside this program, else on the PATH.
fn program() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(|d| d.join("shmfifo-bridge")))
        .filter(|p| p.exists())
        .unwrap_or_else(|| PathBuf::from("shmfifo-bridge"))
}

/// Replaces this process with the bridge (same pid, so its exit code and signals are the
/// bridge's); returns only if that fails. `-v` and `-vv` (shmfifo's, before or after
/// `bridge`) become the bridge's RUST_LOG (info, debug) unless RUST_LOG is set: the flag was
/// taken by shmfifo and never reached the bridge.
pub fn run(a: &BridgeArgs, verbose: u8) -> Result<(), Failure> {
    let p = program();
    let mut c = Command::new(&p);
    c.args(&a.args);
    let set = std::env::var("RUST_LOG").is_ok_and(|s| !s.trim().is_empty());
    if !set && verbose > 0 {
        c.env("RUST_LOG", if verbose == 1 { "info" } else { "debug" });
    }
    let e = c.exec();
    Err(Failure::input(
        p.display().to_string(),
        format!("{e} (install it with `cargo install --locked --path sqs`, or put it on the PATH)"),
    ))
}
