//! `shmfifo bridge` becomes `shmfifo-bridge` (exec, same process), so that killing it, even
//! with SIGKILL, leaves no bridge running. The bridge here is a stand-in
//! script beside a link to the `shmfifo` binary, where `shmfifo bridge` looks for it.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_shmfifo");

/// A directory holding `shmfifo` (a hard link to the built binary, or a copy); removed on
/// drop.
struct Dir(PathBuf);

impl Dir {
    fn new(tag: &str) -> Dir {
        let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("shmfifo-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        let exe = d.join("shmfifo");
        if std::fs::hard_link(BIN, &exe).is_err() {
            std::fs::copy(BIN, &exe).unwrap();
        }
        Dir(d)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Kills a stand-in bridge left running (by its pid), so that a failing run leaves nothing.
struct Reap(Option<u32>);

impl Drop for Reap {
    fn drop(&mut self) {
        if let Some(pid) = self.0 {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
    }
}

/// A `shmfifo-bridge` beside `dir`'s `shmfifo`: a shell script of `body`.
fn stub_bridge(dir: &Dir, body: &str) {
    let stub = dir.0.join("shmfifo-bridge");
    std::fs::write(&stub, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&stub, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn shmfifo_bridge_becomes_the_bridge_so_killing_it_leaves_none_running() {
    let dir = Dir::new("bridge-exec");
    let ran = dir.0.join("ran");
    // Writes its pid and arguments, then waits as the bridge would.
    stub_bridge(
        &dir,
        &format!(
            "echo \"$$ $*\" > {0}.tmp && mv {0}.tmp {0}\nexec sleep 120",
            ran.display()
        ),
    );
    let mut child = Command::new(dir.0.join("shmfifo"))
        .args(["bridge", "outbox", "sqs://inbox.fifo", "--until-empty"])
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while !ran.exists() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "the bridge never ran"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let text = std::fs::read_to_string(&ran).unwrap();
    let (pid, args) = text.trim().split_once(' ').unwrap();
    let pid: u32 = pid.parse().unwrap();
    let _reap = Reap((pid != child.id()).then_some(pid));
    assert_eq!(args, "outbox sqs://inbox.fifo --until-empty");
    assert_eq!(
        pid,
        child.id(),
        "the bridge runs as `shmfifo bridge`'s own process (exec), not as its child"
    );
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists(),
        "a bridge is left running after `shmfifo bridge` was killed"
    );
}

/// shmfifo's `-v` (before `bridge`, or right after it) was shmfifo's own and never reached the
/// bridge; it is handed on as the bridge's `-v`, `-vv` as `-vv`.
#[test]
fn shmfifos_verbose_flags_reach_the_bridge() {
    let dir = Dir::new("bridge-verbose");
    let ran = dir.0.join("ran");
    stub_bridge(&dir, &format!("echo \"$*\" > {}", ran.display()));
    for (args, seen) in [
        (
            &["-v", "bridge", "outbox", "shm:far"][..],
            "-v outbox shm:far",
        ),
        (
            &["bridge", "-vv", "outbox", "shm:far"][..],
            "-vv outbox shm:far",
        ),
        (
            &["bridge", "outbox", "shm:far", "-v"][..],
            "outbox shm:far -v",
        ),
        (&["bridge", "outbox", "shm:far"][..], "outbox shm:far"),
    ] {
        let _ = std::fs::remove_file(&ran);
        let st = Command::new(dir.0.join("shmfifo"))
            .args(args)
            .stdin(Stdio::null())
            .status()
            .unwrap();
        assert!(st.success(), "{args:?}");
        assert_eq!(
            std::fs::read_to_string(&ran).unwrap().trim(),
            seen,
            "{args:?}"
        );
    }
}

#[test]
fn shmfifo_bridge_without_the_bridge_program_says_how_to_build_it() {
    let dir = Dir::new("bridge-missing");
    let out = Command::new(dir.0.join("shmfifo"))
        .args(["bridge", "outbox", "sqs://inbox.fifo"])
        .env("PATH", dir.0.join("nothing-here"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("shmfifo-bridge") && err.contains("cargo install --locked --path sqs"),
        "{err}"
    );
}
