//! curl run as another user (root only), so that a request comes from a socket that user owns.

use std::os::unix::process::CommandExt as _;

/// Runs `curl -s ARGS` as `uid` (and its group `uid`): the response's status and body.
pub fn curl_as(uid: u32, args: &[&str]) -> (u16, String) {
    let out = std::process::Command::new("curl")
        .uid(uid)
        .gid(uid)
        .args(["-s", "-w", "\n%{http_code}"])
        .args(args)
        .output()
        .expect("curl");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
    (code.trim().parse().unwrap_or(0), body.to_owned())
}
