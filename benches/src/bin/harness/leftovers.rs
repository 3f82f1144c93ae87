//! The files a run leaves when it does not end by itself: its queues, its control block and
//! its sockets are named `shmfifo-harness-PID-…` in /dev/shm and /tmp, so a run interrupted
//! (Ctrl-C, SIGTERM) removes its own before it exits, and each run removes those of runs
//! whose process is gone (a SIGKILL, a crash). An interrupted groups case left a 1.1 GB arena
//! in /dev/shm that no later run removed.

use std::path::Path;

/// Where a run's files are.
const DIRS: [&str; 2] = ["/dev/shm", "/tmp"];

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
    for dir in DIRS {
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        for e in entries.flatten() {
            if e.file_name()
                .to_str()
                .is_some_and(|n| n.starts_with(&prefix))
            {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
}

/// Removes the files of every run whose process is gone (no `/proc/PID`), of this user's
/// (a file another user owns is theirs to remove, and the sticky /tmp refuses anyway).
pub fn remove_dead_runs() {
    let mut dead = std::collections::BTreeSet::new();
    for dir in DIRS {
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        for e in entries.flatten() {
            if let Some(pid) = e.file_name().to_str().and_then(run_of) {
                if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
                    dead.insert(pid);
                }
            }
        }
    }
    for pid in dead {
        eprintln!("shmfifo-harness: removing what run {pid} left (its process is gone)");
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
