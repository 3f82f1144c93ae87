//! The bounds of a request before its action: a body declared over the limit, a head over
//! serve's buffer.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use shmfifo_serve::Config;

#[path = "support/server.rs"]
mod server;
use server::{config, exchange, post_form, Dir, Server};

/// A request that declares a body far over the limit (`Content-Length`, more than four times
/// it) is answered 413 at once and its connection closed: it held a connection (and waited
/// for up to 4 MiB of a body that would be refused, in memory) until the body timeout, then
/// answered 408. One a little over is read and thrown away, then answered 413 (a client that
/// sends its whole body first reads the answer, not a broken pipe).
#[test]
fn a_declared_length_over_the_limit_is_refused_before_the_body() {
    let dir = Dir::new("declared");
    let srv = Server::start(Config {
        max_body: 1 << 20,
        // Far longer than the test's read: an answer must come without the body.
        body_timeout: Duration::from_secs(120),
        ..config(&dir.0)
    });
    let mut s = TcpStream::connect(srv.addr).unwrap();
    write!(
        s,
        "POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\n\
         Content-Length: {}\r\n\r\nAction=List",
        (4u64 << 20) + 1
    )
    .unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut answer = Vec::new();
    // To the close: an answer that left the connection open would time out here.
    let read = s.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer);
    assert!(read.is_ok(), "no close: {read:?}, {answer}");
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(answer.contains("RequestEntityTooLarge"), "{answer}");

    // A little over the limit, sent whole before the answer is read: 413, read.
    let form = format!("Action=ListQueues&Pad={}", "x".repeat(3 << 20));
    let (status, out) = post_form(srv.addr, &form);
    assert_eq!(status, 413, "{out}");
    // At the limit exactly it is read and served.
    let head = "Action=ListQueues&Pad=";
    let form = format!("{head}{}", "x".repeat((1 << 20) - head.len()));
    assert_eq!(form.len(), 1 << 20);
    let (status, out) = post_form(srv.addr, &form);
    assert_eq!(status, 200, "{out}");
}

/// Heads of 400 KiB were read (hyper's default buffer), a quarter of a megabyte held per
/// connection by a header no SQS request needs. A head over serve's buffer (72 KiB) is 431
/// now; a query-protocol GET at hyper's 64 KiB bound on a URI is still served.
#[test]
fn a_head_over_the_buffer_is_431_and_a_long_query_still_served() {
    let dir = Dir::new("head");
    let srv = Server::start(config(&dir.0));
    // The server stops reading at its buffer, answers and closes: the rest of the head may
    // meet a reset, which the answer before it survives.
    let mut s = TcpStream::connect(srv.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let head = format!(
        "GET /?Action=ListQueues HTTP/1.1\r\nHost: x\r\nX-Pad: {}\r\nConnection: close\r\n\r\n",
        "x".repeat(200_000)
    );
    let _ = s.write_all(head.as_bytes());
    let mut answer = Vec::new();
    let mut b = [0u8; 4096];
    while let Ok(n @ 1..) = s.read(&mut b) {
        answer.extend_from_slice(&b[..n]);
    }
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 431"), "{answer}");
    let (status, out) = exchange(
        srv.addr,
        format!(
            "GET /?Action=ListQueues&Pad={} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
            "x".repeat(60_000)
        )
        .as_bytes(),
    );
    assert_eq!(status, 200, "{out}");
}
