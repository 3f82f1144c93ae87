//! The files a run leaves when it does not end by itself: its queues, its control block and
//! its sockets are named `shmfifo-harness-PID-…` in /dev/shm and the temporary directory, so
//! a run interrupted (Ctrl-C, SIGTERM) removes its own before it exits, and each run removes
//! those of runs that are over (a SIGKILL, a crash). An interrupted groups case left a 1.1 GB
//! arena in /dev/shm that no later run removed.
//!
//! A run is over when nobody holds the lock on its control block's file (each run holds it
//! for its life, [`hold`]), not when its pid is gone: runs in other pid namespaces (containers
//! sharing /dev/shm) have pids this one cannot see. Only this user's files are looked at.

use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Where a run's files are: /dev/shm and the temporary directory (sockets, FIFOs).
fn dirs() -> [PathBuf; 2] {
    [PathBuf::from("/dev/shm"), std::env::temp_dir()]
}

/// Opens and locks (`flock`, exclusive) the control block at `path` for the run's life; the
/// lock goes with the process, however it ends.
pub fn hold(path: &Path) -> Result<std::fs::File, String> {
    let f = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    // SAFETY: flock on a descriptor we own; no memory is passed.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        return Err(format!(
            "{}: {}",
            path.display(),
            std::io::Error::last_os_error()
        ));
    }
    Ok(f)
}

/// Whether the run whose control block is `ctl` is over: the file is this user's and nobody
/// holds its lock (taken here and let go at once).
fn over(ctl: &Path) -> bool {
    let Ok(f) = std::fs::File::open(ctl) else {
        return false;
    };
    // SAFETY: geteuid cannot fail and touches no memory of ours.
    let me = unsafe { libc::geteuid() };
    if f.metadata().map_or(true, |m| m.uid() != me) {
        return false;
    }
    // SAFETY: flock on a descriptor we own; no memory is passed. Closing `f` lets it go.
    unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) == 0 }
}

/// The prefix of every file of run `pid`.
fn prefix(pid: u32) -> String {
    format!("shmfifo-harness-{pid}-")
}

/// The run a file name belongs to, if it is a harness file.
fn run_of(name: &str) -> Option<u32> {
    let rest = name.strip_prefix("shmfifo-harness-")?;
    rest.split('-').next()?.parse().ok()
}

/// Removes the files of run `pid` (ours, or a dead run's).
fn remove_run(pid: u32) {
    let prefix = prefix(pid);
    // SAFETY: geteuid cannot fail and touches no memory of ours.
    let me = unsafe { libc::geteuid() };
    for dir in dirs() {
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        for e in entries.flatten() {
            let ours = e.metadata().is_ok_and(|m| m.uid() == me);
            if ours
                && e.file_name()
                    .to_str()
                    .is_some_and(|n| n.starts_with(&prefix))
            {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
}

/// Removes the files of every run of this user's that is over ([`over`]: its control block
/// unlocked). A run's files without its control block are left (a run removes its control
/// block last, at its end).
pub fn remove_dead_runs() {
    let Ok(entries) = std::fs::read_dir("/dev/shm") else {
        return;
    };
    let mut dead = Vec::new();
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(name) = name.to_str() else {
            continue;
        };
        if let Some(pid) = run_of(name).filter(|_| name.ends_with("-ctl")) {
            if pid != std::process::id() && over(&e.path()) {
                dead.push(pid);
            }
        }
    }
    for pid in dead {
        eprintln!("shmfifo-harness: removing what run {pid} left (it is over)");
        remove_run(pid);
    }
}

/// On SIGINT or SIGTERM: removes this run's files and exits (130 or 143). The workers die
/// with the harness (their parent-death signal).
pub fn remove_on_signal() {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGINT, SIGTERM]) else {
        return; // no handler: the next run removes what this one leaves
    };
    std::thread::spawn(move || {
        if let Some(sig) = signals.forever().next() {
            remove_run(std::process::id());
            eprintln!("shmfifo-harness: interrupted; this run's files are removed");
            std::process::exit(128 + sig);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn harness_file_names_name_their_run() {
        assert_eq!(run_of("shmfifo-harness-123-ctl"), Some(123));
        assert_eq!(run_of("shmfifo-harness-123-4-groups1000000"), Some(123));
        assert_eq!(run_of("shmfifo-harness-x-ctl"), None);
        assert_eq!(run_of("shmfifo-demo-123"), None);
        assert!("shmfifo-harness-12-ctl".starts_with(&prefix(12)));
        assert!(!"shmfifo-harness-123-ctl".starts_with(&prefix(12)));
    }
}
