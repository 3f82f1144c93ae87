//! The bridge, SIGKILLed again and again mid-stream and restarted, forwards every message of a
//! local queue to an SQS FIFO queue (SQS's API on `shmfifo serve`, which keeps SQS's 5-minute
//! deduplication) exactly once and in group order (R1, D1).

mod common;

use std::collections::HashMap;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{create_remote, Dir, Serve};
use shmfifo::{FifoQueue, Queue, QueueConfig, ReceiveOptions, SendMessage};
use shmfifo_sqs::SqsQueue;

const BIN: &str = env!("CARGO_BIN_EXE_shmfifo-bridge");

fn fill(q: &Queue, groups: usize, per_group: usize) {
    for k in 0..per_group {
        for g in 0..groups {
            q.send(
                &SendMessage::new(&format!("g{g}"), &format!("g{g}:{k}"))
                    .dedup_id(&format!("{g}-{k}")),
            )
            .unwrap();
        }
    }
}

/// Drains the remote queue: (group, counter) in delivery order per group, and how many.
fn drain(remote: &SqsQueue) -> HashMap<String, Vec<usize>> {
    let mut by_group: HashMap<String, Vec<usize>> = HashMap::new();
    loop {
        let got = remote
            .receive(&ReceiveOptions::max(10).wait(Duration::from_secs(1)), None)
            .unwrap();
        if got.is_empty() {
            return by_group;
        }
        for m in &got {
            let k: usize = m.body.rsplit(':').next().unwrap().parse().unwrap();
            by_group.entry(m.group_id.clone()).or_default().push(k);
        }
        let handles: Vec<String> = got.iter().map(|m| m.receipt_handle.clone()).collect();
        for h in &handles {
            remote.delete(h).unwrap();
        }
    }
}

/// The bridge command forwarding `local` to `url` (local visibility timeout 1 s, until empty).
fn bridge_command(local: &std::path::Path, url: &str, endpoint: &str) -> Command {
    let mut c = Command::new(BIN);
    c.args([
        local.to_str().unwrap(),
        url,
        "--endpoint-url",
        endpoint,
        "--visibility-timeout",
        "1",
        "--until-empty",
    ]);
    c
}

#[test]
fn a_bridge_killed_again_and_again_delivers_each_message_once_in_order() {
    let serve = Serve::start();
    let local_dir = Dir::new("bridge-local");
    let local_path = local_dir.0.join("outbox");
    let local = Queue::create_at(
        &local_path,
        &QueueConfig::new()
            .max_messages(4096)
            .max_groups(64)
            .dedup_entries(4096),
    )
    .unwrap();
    let (groups, per_group) = (20, 150);
    fill(&local, groups, per_group);
    let url = create_remote(&serve.endpoint, "inbox.fifo", &[]);
    let mut kills = 0;
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    let start = Instant::now();
    // Kill the bridge at random moments while it forwards, then let a last one finish.
    while kills < 25 && start.elapsed() < Duration::from_secs(120) {
        let mut child = bridge_command(&local_path, &url, &serve.endpoint)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        std::thread::sleep(Duration::from_millis(30 + rng % 250));
        if child.try_wait().unwrap().is_some() {
            break; // it finished before we killed it
        }
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        kills += 1;
    }
    let out = bridge_command(&local_path, &url, &serve.endpoint)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    println!(
        "bridge: {kills} SIGKILLs, then: {}",
        String::from_utf8_lossy(&out.stdout).trim()
    );
    assert!(kills >= 5, "the bridge was killed only {kills} times");
    let a = local.attributes();
    assert_eq!(
        (
            a.approximate_number_of_messages,
            a.approximate_number_of_messages_not_visible
        ),
        (0, 0),
        "everything forwarded and deleted locally"
    );
    let remote = SqsQueue::open_url(&url, Some(&serve.endpoint)).unwrap();
    let got = drain(&remote);
    assert_eq!(got.len(), groups);
    for (g, ks) in &got {
        assert_eq!(
            ks,
            &(0..per_group).collect::<Vec<_>>(),
            "group {g}: each message once, in order"
        );
    }
}

/// The bridge's throughput to SQS's API on `shmfifo serve` (a figure for the note, printed;
/// never a timed assertion).
#[test]
fn bridge_throughput_against_the_local_server() {
    let serve = Serve::start();
    let dir = Dir::new("bridge-tput");
    let path = dir.0.join("outbox");
    let local = Queue::create_at(
        &path,
        &QueueConfig::new()
            .max_messages(8192)
            .max_groups(256)
            .dedup_entries(8192),
    )
    .unwrap();
    fill(&local, 100, 30);
    let url = create_remote(&serve.endpoint, "tput.fifo", &[]);
    let remote = SqsQueue::open_url(&url, Some(&serve.endpoint)).unwrap();
    let t = Instant::now();
    let r = shmfifo_sqs::bridge::bridge(
        &local,
        &remote,
        &shmfifo_sqs::bridge::BridgeOptions {
            until_empty: true,
            wait: Duration::ZERO,
            ..Default::default()
        },
        &mut |_| {},
    )
    .unwrap();
    let secs = t.elapsed().as_secs_f64();
    assert_eq!(r.forwarded, 3000);
    println!(
        "bridge throughput: {} messages in {secs:.2} s = {:.0} messages/s (100 groups, debug build)",
        r.forwarded,
        r.forwarded as f64 / secs
    );
}

#[test]
fn a_bridge_between_two_local_queues_keeps_attributes() {
    let dir = Dir::new("bridge-two");
    let a = Queue::create_at(dir.0.join("a"), &QueueConfig::new()).unwrap();
    let b = Queue::create_at(dir.0.join("b"), &QueueConfig::new()).unwrap();
    let attrs = [
        shmfifo::MessageAttribute::string("k", "v"),
        shmfifo::MessageAttribute::binary("bin", &[0, 1, 2]),
    ];
    a.send(
        &SendMessage::new("g", "hello")
            .dedup_id("1")
            .attributes(&attrs),
    )
    .unwrap();
    let status = shmfifo_sqs::bridge::status_path(&dir.0.join("a"));
    let opts = shmfifo_sqs::bridge::BridgeOptions {
        until_empty: true,
        wait: Duration::ZERO,
        status_file: Some(status.clone()),
        remote_name: "b".into(),
        ..Default::default()
    };
    let r = shmfifo_sqs::bridge::bridge(&a, &b, &opts, &mut |_| {}).unwrap();
    assert_eq!((r.forwarded, r.retried, r.failed), (1, 0, 0));
    // The status file (what `stat` and `metrics` show) adds up over runs.
    a.send(&SendMessage::new("g", "two").dedup_id("2")).unwrap();
    shmfifo_sqs::bridge::bridge(&a, &b, &opts, &mut |_| {}).unwrap();
    let total = shmfifo_sqs::bridge::read_status(&status);
    assert_eq!((total.forwarded, total.retried, total.failed), (2, 0, 0));
    let got = Queue::receive(&b, &ReceiveOptions::max(10)).unwrap();
    assert_eq!(got[0].body, "hello");
    assert_eq!(got[0].attributes.len(), 2);
    // The local message id became the deduplication id.
    assert_eq!(got[0].dedup_id.as_deref().map(str::len), Some(36));
}
