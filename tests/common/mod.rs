//! Shared helpers for integration tests: unique queue names that are unlinked on drop.
#![allow(dead_code)]

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use shmfifo::{Deduplication, Message, Queue, QueueConfig, ReceiveOptions, SendMessage};

static N: AtomicU32 = AtomicU32::new(0);

/// A queue under /dev/shm with a unique name, unlinked when dropped.
pub struct TestQueue {
    pub name: String,
    pub q: Queue,
}

impl std::ops::Deref for TestQueue {
    type Target = Queue;
    fn deref(&self) -> &Queue {
        &self.q
    }
}

impl Drop for TestQueue {
    fn drop(&mut self) {
        let _ = Queue::unlink(&self.name);
    }
}

pub fn unique(tag: &str) -> String {
    format!(
        "shmfifo-test-{tag}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// A small queue without deduplication (a shmfifo extension), so that tests of other rules
/// can send without dedup ids. Dedup tests use [`small_dedup`].
pub fn small() -> QueueConfig {
    small_dedup().deduplication(Deduplication::Off)
}

/// A small queue with SQS's default deduplication (queue scope, 5 minutes).
pub fn small_dedup() -> QueueConfig {
    QueueConfig::new()
        .max_messages(1024)
        .max_groups(256)
        .maximum_message_size(4096)
        .dedup_entries(1024)
}

pub fn queue(tag: &str, cfg: &QueueConfig) -> TestQueue {
    let name = unique(tag);
    let q = Queue::create(&name, cfg).expect("create");
    TestQueue { name, q }
}

pub fn send(q: &Queue, group: &str, body: &str) -> shmfifo::SendResult {
    q.send(&SendMessage::new(group, body)).expect("send")
}

pub fn recv(q: &Queue, max: u32) -> Vec<Message> {
    q.receive(&ReceiveOptions::max(max)).expect("receive")
}

pub fn recv_vt(q: &Queue, max: u32, vt: Duration) -> Vec<Message> {
    q.receive(&ReceiveOptions::max(max).visibility_timeout(vt))
        .expect("receive")
}

pub fn bodies(ms: &[Message]) -> Vec<&str> {
    ms.iter().map(|m| m.body.as_str()).collect()
}

/// Starts `shmfifo-test-worker attempt-receive QUEUE ID` (`bin`: the demo binary; a receive of up to 10
/// messages with a 30 s visibility timeout, then a sleep), reads its receipt handles up to its
/// `READY` line, and SIGKILLs it. Returns the handles.
pub fn receive_and_die(bin: &str, name: &str, attempt_id: &str) -> Vec<String> {
    use std::io::BufRead;
    use std::process::{Command, Stdio};
    let mut child = Command::new(bin)
        .args(["attempt-receive", name, attempt_id])
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut handles = Vec::new();
    for line in std::io::BufReader::new(child.stdout.take().unwrap()).lines() {
        let line = line.unwrap();
        if line == "READY" {
            break;
        }
        handles.push(line.strip_prefix("HANDLE ").unwrap().to_owned());
    }
    child.kill().unwrap();
    child.wait().unwrap();
    handles
}

/// Deterministic pseudo-random numbers (xorshift64), so a failure reproduces.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

/// Offset in the arena file at `path` of the group entry whose id starts with `id` (found by
/// its bytes: the id words are 96 bytes into a 256-byte entry, layout 19, pinned in
/// `layout.rs`).
pub fn group_entry(path: &str, id: &[u8]) -> u64 {
    let bytes = std::fs::read(path).unwrap();
    let at = bytes
        .windows(id.len())
        .position(|w| w == id)
        .expect("the group id is in the arena");
    (at - 96) as u64
}

/// Writes the word `w` at `off` in the arena file at `path`, as another process could.
pub fn write_word(path: &str, off: u64, w: u64) {
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.write_all_at(&w.to_le_bytes(), off).unwrap();
}

/// Points the `head` (32 bytes into the entry, pinned in `layout.rs`) of the group whose id
/// starts with `id` at a node that does not exist: the group's list can no longer be walked.
pub fn break_group(path: &str, id: &[u8]) {
    write_word(path, group_entry(path, id) + 32, 0xFFFF_FFF0);
}
