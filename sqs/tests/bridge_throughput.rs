//! The bridge's throughput to SQS's API on `shmfifo serve` and on moto's server, 100 groups,
//! at several concurrencies (figures printed, run with `--nocapture`; never a timed
//! assertion). In a file of its own so that no other test shares the cores while it runs.

mod common;
mod hooked;

use std::time::{Duration, Instant};

use common::{create_remote, unique, Dir, Moto, Serve};
use hooked::Hooked;
use shmfifo::{Queue, QueueConfig, SendMessage};
use shmfifo_sqs::bridge::{bridge, BridgeOptions};
use shmfifo_sqs::SqsQueue;

/// Forwards `groups` × `per_group` messages to a new queue at `endpoint`, each request
/// `latency` longer (a far remote); prints messages/s.
fn measure(
    what: &str,
    endpoint: &str,
    (groups, per_group): (usize, usize),
    latency: Duration,
    concurrency: usize,
) {
    let dir = Dir::new("bridge-tput");
    let local = Queue::create_at(
        dir.0.join("outbox"),
        &QueueConfig::new()
            .max_messages(8192)
            .max_groups(256)
            .dedup_entries(8192),
    )
    .unwrap();
    for k in 0..per_group {
        for g in 0..groups {
            local
                .send(
                    &SendMessage::new(&format!("g{g}"), &format!("g{g}:{k}"))
                        .dedup_id(&format!("{g}-{k}")),
                )
                .unwrap();
        }
    }
    let url = create_remote(endpoint, &format!("{}.fifo", unique("tput")), &[]);
    let remote = Hooked::delayed(
        Box::new(SqsQueue::open_url(&url, Some(endpoint)).unwrap()),
        latency,
    );
    let t = Instant::now();
    let r = bridge(
        &local,
        &remote,
        &BridgeOptions {
            until_empty: true,
            wait: Duration::ZERO,
            concurrency,
            ..Default::default()
        },
        &mut |_| {},
    )
    .unwrap();
    let secs = t.elapsed().as_secs_f64();
    assert_eq!(r.forwarded, (groups * per_group) as u64);
    println!(
        "bridge to {what}{}: {} messages ({groups} groups) in {secs:.2} s = {:.0} messages/s, concurrency {concurrency} ({} build)",
        if latency.is_zero() { String::new() } else { format!(" + {latency:?} a request") },
        r.forwarded,
        r.forwarded as f64 / secs,
        if cfg!(debug_assertions) { "debug" } else { "release" }
    );
}

#[test]
fn bridge_throughput_to_serve_and_moto() {
    let serve = Serve::start();
    // Concurrency 1 and 8 (4 lies between them; CI runs this in a debug build, its figures
    // are the bridge's shape, not its speed).
    for c in [1, 8] {
        measure(
            "shmfifo serve",
            &serve.endpoint,
            (100, 30),
            Duration::ZERO,
            c,
        );
    }
    // As far as an SQS region is (10 ms a request), where requests in flight at once count.
    for c in [1, 8] {
        let ms = Duration::from_millis(10);
        measure("shmfifo serve", &serve.endpoint, (100, 10), ms, c);
    }
    drop(serve);
    let moto = Moto::start();
    // moto's SendMessageBatch scans the queue's messages (0.3 s a batch at 300 messages):
    // fewer messages, a figure of moto more than of the bridge (21-24 msg/s at concurrency 1
    // and 4 alike; one of them, for CI's time).
    measure("moto_server", &moto.endpoint, (100, 3), Duration::ZERO, 4);
}
