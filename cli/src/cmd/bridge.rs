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
    /// [--concurrency N] [--max-tries N] [--max-refused-in-a-row N] [-v|-vv]
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
/// bridge's); returns only if that fails. shmfifo's `-v` and `-vv` (before `bridge` or just
/// after it, where shmfifo reads them) are handed on as the bridge's own: taken by shmfifo,
/// they never reached it. After LOCAL they are the bridge's already.
pub fn run(a: &BridgeArgs, verbose: u8) -> Result<(), Failure> {
    let p = program();
    let mut c = Command::new(&p);
    if verbose > 0 {
        c.arg(format!("-{}", "v".repeat(verbose.min(2).into())));
    }
    c.args(&a.args);
    let e = c.exec();
    Err(Failure::input(
        p.display().to_string(),
        format!("{e} (install it with `cargo install --locked --path sqs`, or put it on the PATH)"),
    ))
}
