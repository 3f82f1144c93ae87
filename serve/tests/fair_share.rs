//! One local user cannot take every connection of a shared serve. Without signatures serve
//! listens on loopback, where every local user connects; the connection limit was shared by
//! all of them, so one unprivileged user holding connections open (a request every 25 s keeps
//! each from the idle timeout) shut every other user out, root included. Now a user other than
//! root and serve's own holds at most a quarter of the connections.

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt as _;
use std::process::{Command, Stdio};
use std::time::Duration;

use shmfifo_serve::Config;

#[path = "support/server.rs"]
mod server;
use server::{config, post_form, Dir, Server};

/// A child process, killed when dropped (a failed assertion must not leave it holding the
/// test's output open).
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// As user `uid` (root only), opens up to `n` connections to `addr` and keeps them open until
/// killed; prints how many it kept and how many serve closed at once.
fn holder(uid: u32, addr: std::net::SocketAddr, n: usize) -> Killed {
    let script = format!(
        r#"
import socket, time, sys
held, closed = [], 0
for _ in range({n}):
    s = socket.create_connection(("{ip}", {port}))
    s.settimeout(1.0)
    try:
        if s.recv(1) == b"":
            closed += 1
            continue
    except socket.timeout:
        pass
    held.append(s)
print(len(held), closed, flush=True)
while True:
    time.sleep(1)
"#,
        ip = addr.ip(),
        port = addr.port()
    );
    Killed(
        Command::new("python3")
            .uid(uid)
            .gid(uid)
            .args(["-c", &script])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("python3"),
    )
}

#[test]
fn one_local_user_holds_at_most_a_quarter_of_the_connections() {
    // SAFETY: geteuid cannot fail and touches no memory of ours.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("not root: another user's connections need another uid; skipped");
        return;
    }
    let dir = Dir::new("fair-share");
    let srv = Server::start(Config {
        max_connections: 8,
        ..config(&dir.0)
    });
    let mut child = holder(65534, srv.addr, 8);
    let mut line = String::new();
    BufReader::new(child.0.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let counts: Vec<usize> = line
        .split_whitespace()
        .map(|n| n.parse().unwrap())
        .collect();
    // nobody's first two connections are kept; its next six are closed at once.
    assert_eq!(counts, [2, 6], "{line}");
    // root (and serve's own user) still gets in while nobody holds its share.
    for _ in 0..3 {
        let (status, out) = post_form(srv.addr, "Action=ListQueues");
        assert_eq!(status, 200, "{out}");
    }
    drop(child);
    std::thread::sleep(Duration::from_millis(100));
}
