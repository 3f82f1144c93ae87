//! An endpoint that answers with an endless body (a broken or hostile server, an intercepting
//! proxy) costs the backend at most `MAX_RESPONSE_BYTES` of it per attempt: the call fails as
//! an unreadable answer, long before the attempt timeout, instead of reading the body whole
//! into memory. Its own process: it sets the environment the SDK reads.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use shmfifo::{FifoQueue, ReceiveOptions};
use shmfifo_sqs::{SqsQueue, MAX_RESPONSE_BYTES};

#[test]
fn an_endless_answer_is_read_no_further_than_the_limit() {
    // SAFETY: the only test of this binary, and it starts no thread before these calls.
    unsafe {
        std::env::set_var("AWS_ACCESS_KEY_ID", "test");
        std::env::set_var("AWS_SECRET_ACCESS_KEY", "test");
        std::env::set_var("AWS_REGION", "us-east-1");
        std::env::set_var("AWS_EC2_METADATA_DISABLED", "true");
        std::env::remove_var("AWS_ENDPOINT_URL");
        std::env::remove_var("AWS_PROFILE");
    }
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    // The most body bytes one connection got out before the client stopped reading.
    let most = Arc::new(AtomicU64::new(0));
    let m = Arc::clone(&most);
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { return };
            let m = Arc::clone(&m);
            std::thread::spawn(move || {
                // The request's head (its body, if any, is left unread).
                let mut r = BufReader::new(conn.try_clone().unwrap());
                let mut line = String::new();
                while r.read_line(&mut line).is_ok_and(|n| n > 2) {
                    line.clear();
                }
                let head = "HTTP/1.1 200 OK\r\ncontent-type: application/x-amz-json-1.0\r\n\
                            transfer-encoding: chunked\r\n\r\n";
                if conn.write_all(head.as_bytes()).is_err() {
                    return;
                }
                // A JSON answer that never ends: `{"Messages":[` then spaces, 1 MiB a chunk.
                let chunk = vec![b' '; 1 << 20];
                let mut sent = 0u64;
                let mut first = b"{\"Messages\":[".to_vec();
                loop {
                    let data = if first.is_empty() {
                        &chunk[..]
                    } else {
                        &first[..]
                    };
                    let framed =
                        [format!("{:x}\r\n", data.len()).as_bytes(), data, b"\r\n"].concat();
                    if conn.write_all(&framed).is_err() {
                        break;
                    }
                    sent += data.len() as u64;
                    m.fetch_max(sent, Ordering::Relaxed);
                    first.clear();
                    // Past four times the limit the client is not reading it as it should.
                    if sent > 4 * MAX_RESPONSE_BYTES as u64 {
                        break;
                    }
                }
            });
        }
    });
    let url = format!("http://127.0.0.1:{port}/000000000000/orders.fifo");
    let q = SqsQueue::open_url(&url, Some(&format!("http://127.0.0.1:{port}"))).unwrap();
    let t = Instant::now();
    let r = q.receive(&ReceiveOptions::max(10).wait(Duration::ZERO), None);
    let took = t.elapsed();
    assert!(r.is_err(), "an endless answer is no answer: {r:?}");
    // Relaxed: read after the call, whose connections wrote it.
    let most = most.load(Ordering::Relaxed);
    // What the client took in, plus what the kernel's socket buffers held when it stopped:
    // at most the largest receive and send buffers (`tcp_rmem`, `tcp_wmem`: 32 MiB and 4 MiB
    // by default, autotuned on loopback), a chunk and the client's own read buffer.
    let buffers = socket_buffer_max("tcp_rmem") + socket_buffer_max("tcp_wmem") + (2 << 20);
    assert!(
        most <= MAX_RESPONSE_BYTES as u64 + buffers,
        "read {most} bytes of one answer: past the limit of {MAX_RESPONSE_BYTES}"
    );
    assert!(
        took < shmfifo_sqs::ATTEMPT_TIMEOUT,
        "stopped reading at the limit, not at the attempt timeout ({took:?})"
    );
}

/// The largest buffer `/proc/sys/net/ipv4/NAME` allows a TCP socket (its third figure);
/// 32 MiB where it cannot be read.
fn socket_buffer_max(name: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/sys/net/ipv4/{name}"))
        .ok()
        .and_then(|t| t.split_whitespace().nth(2)?.parse().ok())
        .unwrap_or(32 << 20)
}
