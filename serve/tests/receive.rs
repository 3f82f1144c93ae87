//! ReceiveMessage through serve.
//!
//! A long poll follows its queue's name (R1 through serve): a queue deleted and created again
//! during a ReceiveMessage's wait was polled on the removed file until the wait ended (a
//! handle keeps its file open after the name goes, the library's rule), while messages were
//! sent to the new queue. Now the wait moves to the file the name names, or answers as a new
//! request would where it names none.
//!
//! A binary queue (the library's extension) is refused before anything is taken: its message
//! was answered with an empty body and taken.

#[path = "support/server.rs"]
mod server;
use std::time::{Duration, Instant};

use server::{config, post_json, Dir, Server};
use shmfifo::{BodyMode, Queue, QueueConfig, ReceiveOptions, SendMessage};

const CREATE: &str = r#"{"QueueName":"lp.fifo","Attributes":{"FifoQueue":"true","ContentBasedDeduplication":"true"}}"#;

/// A ReceiveMessage of `wait` seconds on `url`, answered on another thread: (status, answer,
/// how long it took).
fn poll(srv: &Server, url: &str, wait: u32) -> std::thread::JoinHandle<(u16, String, Duration)> {
    let addr = srv.addr;
    let body = format!(r#"{{"QueueUrl":"{url}","WaitTimeSeconds":{wait}}}"#);
    std::thread::spawn(move || {
        let t0 = Instant::now();
        let (status, out) = post_json(addr, "ReceiveMessage", &body);
        (status, out, t0.elapsed())
    })
}

/// Waits for `waiting`'s answer: `status`, with `text` in it, long before its 20 s wait (within
/// the name's look, 1 s, and the scheduling around it).
fn answered(waiting: std::thread::JoinHandle<(u16, String, Duration)>, status: u16, text: &str) {
    let (got, out, took) = waiting.join().unwrap();
    assert_eq!(got, status, "{out}");
    assert!(out.contains(text), "{out}");
    assert!(took < Duration::from_secs(10), "answered after {took:?}");
}

/// A 20 s poll of `url` begun, then the queue deleted through serve while it waits.
fn poll_then_delete(srv: &Server, url: &str) -> std::thread::JoinHandle<(u16, String, Duration)> {
    let waiting = poll(srv, url, 20);
    std::thread::sleep(Duration::from_millis(300));
    let (status, out) = post_json(
        srv.addr,
        "DeleteQueue",
        &format!(r#"{{"QueueUrl":"{url}"}}"#),
    );
    assert_eq!(status, 200, "{out}");
    waiting
}

fn send(srv: &Server, url: &str, body: &str) {
    let (status, out) = post_json(
        srv.addr,
        "SendMessage",
        &format!(r#"{{"QueueUrl":"{url}","MessageBody":"{body}","MessageGroupId":"g"}}"#),
    );
    assert_eq!(status, 200, "{out}");
}

#[test]
fn a_long_poll_follows_a_queue_deleted_and_created_again() {
    let dir = Dir::new("long-poll");
    let srv = Server::start(config(&dir.0));
    let url = srv.url("lp.fifo");
    let (status, out) = post_json(srv.addr, "CreateQueue", CREATE);
    assert_eq!(status, 200, "{out}");

    // Through serve: DeleteQueue, CreateQueue, SendMessage while a 20 s poll waits.
    let waiting = poll_then_delete(&srv, &url);
    let (status, out) = post_json(srv.addr, "CreateQueue", CREATE);
    assert_eq!(status, 200, "{out}");
    send(&srv, &url, "to the new queue");
    answered(waiting, 200, "to the new queue");

    // Outside serve: the file removed and a queue created under the name by the library.
    let waiting = poll(&srv, &url, 20);
    std::thread::sleep(Duration::from_millis(300));
    std::fs::remove_file(dir.0.join("lp.fifo")).unwrap();
    // A small queue: made well within the 700 ms before the poll's first look.
    let q = Queue::create_at(
        dir.0.join("lp.fifo"),
        &QueueConfig::new()
            .max_messages(64)
            .size_limit(0)
            .content_based_deduplication(true),
    )
    .unwrap();
    q.send(&SendMessage::new("g", "made by the library"))
        .unwrap();
    answered(waiting, 200, "made by the library");

    // Deleted and not created again: answered as a request made now is.
    let waiting = poll_then_delete(&srv, &url);
    answered(waiting, 400, "QueueDoesNotExist");

    // A poll whose queue stays is the poll it was: the whole wait, nothing taken.
    let (status, out) = post_json(srv.addr, "CreateQueue", CREATE);
    assert_eq!(status, 200, "{out}");
    let (status, out, took) = poll(&srv, &url, 2).join().unwrap();
    assert_eq!(status, 200, "{out}");
    assert!(!out.contains("Messages"), "{out}");
    assert!(
        took >= Duration::from_millis(1900),
        "answered after {took:?}"
    );
}

#[test]
fn a_binary_queue_is_refused_before_anything_is_taken() {
    let dir = Dir::new("binary");
    let srv = Server::start(config(&dir.0));
    let q = Queue::create_at(
        dir.0.join("bin.fifo"),
        &QueueConfig::new()
            .body_mode(BodyMode::Binary)
            .content_based_deduplication(true),
    )
    .unwrap();
    q.send(&SendMessage::bytes("g", b"\xff\x00")).unwrap();
    let (status, out) = post_json(
        srv.addr,
        "ReceiveMessage",
        &format!(r#"{{"QueueUrl":"{}"}}"#, srv.url("bin.fifo")),
    );
    assert_eq!(status, 400, "{out}");
    assert!(out.contains("UnsupportedOperation"), "{out}");
    // Nothing taken: the message is there for the library's receive, first delivery.
    let got = q.receive(&ReceiveOptions::max(10)).unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].bytes(), b"\xff\x00");
    assert_eq!(got[0].receive_count, 1);
}
