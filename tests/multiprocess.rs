//! Multi-process tests: producer and consumer processes (the `shmfifo-test-worker` binary in worker
//! mode) share one arena under /dev/shm; some are killed with SIGKILL mid-operation. The logs
//! they keep (acknowledged sends, receives with CLOCK_MONOTONIC times, successful deletes) are
//! checked by `shmfifo-test-worker verify`: every acknowledged message deleted exactly once, nothing
//! deleted twice, per-group order by receive time, sequence numbers increasing.

mod common;

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use shmfifo::{Deduplication, Queue, QueueConfig};

const BIN: &str = env!("CARGO_BIN_EXE_shmfifo-test-worker");

struct Run {
    name: String,
    logs: Vec<String>,
}

impl Run {
    fn new(tag: &str) -> Run {
        let name = common::unique(tag);
        let cfg = QueueConfig::new()
            .deduplication(Deduplication::Off)
            .max_messages(4096)
            .max_groups(256);
        drop(Queue::create(&name, &cfg).expect("create"));
        Run {
            name,
            logs: Vec::new(),
        }
    }

    fn spawn(&mut self, args: &[&str]) -> Child {
        let log = format!("/tmp/{}.{}.log", self.name, self.logs.len());
        let child = Command::new(BIN)
            .args(args)
            .stdout(Stdio::from(std::fs::File::create(&log).unwrap()))
            .spawn()
            .expect("spawn worker");
        self.logs.push(log);
        child
    }

    fn producer(&mut self, id: u32, groups: u32, n: u32) -> Child {
        let name = self.name.clone();
        self.spawn(&[
            "produce",
            &name,
            &id.to_string(),
            &groups.to_string(),
            &n.to_string(),
            "flush",
        ])
    }

    fn consumer(&mut self, vt_ms: u32, stall: bool) -> Child {
        let name = self.name.clone();
        let mut a = vec!["consume", &name, "", "flush"];
        let vt = vt_ms.to_string();
        a[2] = &vt;
        if stall {
            a.push("stall");
        }
        let a: Vec<&str> = a.to_vec();
        self.spawn(&a)
    }

    fn producers_done(&self) {
        std::fs::write(format!("/dev/shm/{}.done", self.name), b"").unwrap();
    }

    /// Runs the checker over every log; returns its report line.
    fn verify(&self) -> String {
        let out = Command::new(BIN)
            .arg("verify")
            .args(&self.logs)
            .output()
            .expect("verify");
        let text = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "verification failed:\n{text}");
        text
    }

    fn count(&self, prefix: &str) -> usize {
        self.logs
            .iter()
            .map(|l| {
                std::fs::read_to_string(l)
                    .unwrap_or_default()
                    .lines()
                    .filter(|x| x.starts_with(prefix))
                    .count()
            })
            .sum()
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        let _ = Queue::unlink(&self.name);
        let _ = std::fs::remove_file(format!("/dev/shm/{}.done", self.name));
        for l in &self.logs {
            let _ = std::fs::remove_file(l);
        }
    }
}

fn wait_ok(mut c: Child) {
    let s = c.wait().unwrap();
    assert!(s.success(), "worker failed: {s}");
}

/// Several producers and consumers in separate processes: every message delivered and deleted
/// exactly once, in order within each group (R3, M1), when nothing times out.
#[test]
fn producers_and_consumers_exactly_once_in_group_order() {
    let mut r = Run::new("mp");
    let cons: Vec<Child> = (0..3).map(|_| r.consumer(30_000, false)).collect();
    let prods: Vec<Child> = (0..3).map(|i| r.producer(i, 8, 1500)).collect();
    prods.into_iter().for_each(wait_ok);
    r.producers_done();
    cons.into_iter().for_each(wait_ok);
    let report = r.verify();
    assert!(
        report.contains("OK 4500 acknowledged, 4500 deleted"),
        "{report}"
    );
}

/// A producer killed with SIGKILL in the middle of sending: the others go on, and every send it
/// had acknowledged is delivered exactly once; nothing wedges.
#[test]
fn killed_producer_loses_no_acknowledged_message() {
    let mut r = Run::new("mpkp");
    let cons: Vec<Child> = (0..2).map(|_| r.consumer(30_000, false)).collect();
    let mut victim = r.producer(0, 4, 1_000_000);
    let prods: Vec<Child> = (1..3).map(|i| r.producer(i, 4, 1500)).collect();
    std::thread::sleep(Duration::from_millis(150));
    victim.kill().unwrap();
    victim.wait().unwrap();
    prods.into_iter().for_each(wait_ok);
    // A survivor repairs whatever the victim left half-made (also done on open and when idle).
    Queue::open(&r.name).unwrap().recover().unwrap();
    r.producers_done();
    cons.into_iter().for_each(wait_ok);
    let acked = r.count("ACK");
    assert!(
        acked > 3000,
        "the victim acknowledged some sends before it died ({acked})"
    );
    r.verify();
}

/// A consumer killed with SIGKILL while it holds received messages: they become visible again
/// after the visibility timeout and are delivered to the others; each is deleted exactly once,
/// and its groups keep their order.
#[test]
fn killed_consumer_messages_are_redelivered() {
    let mut r = Run::new("mpkc");
    let prods: Vec<Child> = (0..2).map(|i| r.producer(i, 4, 800)).collect();
    let mut victim = r.consumer(400, true);
    // Let the victim take a batch before the others start.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while r.count("RECV") == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the victim never received"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let cons: Vec<Child> = (0..2).map(|_| r.consumer(30_000, false)).collect();
    victim.kill().unwrap();
    victim.wait().unwrap();
    prods.into_iter().for_each(wait_ok);
    r.producers_done();
    cons.into_iter().for_each(wait_ok);
    let report = r.verify();
    assert!(
        report.contains("OK 1600 acknowledged, 1600 deleted"),
        "{report}"
    );
}

/// D1, D6 and crash safety across processes: four producers send the same dedup ids in
/// different orders at once; two are SIGKILLed mid-run (they send every id again and again, so
/// that no speed of the queue lets them finish first), and two more then send every id again.
/// Exactly one message per id is delivered, and every acknowledged send names it.
#[test]
fn overlapping_dedup_ids_with_killed_producers_deliver_exactly_once() {
    use shmfifo::ReceiveOptions;
    let name = common::unique("mpdedup");
    let n: u32 = 20_000;
    let cfg = QueueConfig::new()
        .max_messages(32_768)
        .max_groups(256)
        .dedup_entries(32_768);
    let q = Queue::create(&name, &cfg).expect("create");
    let spawn = |seed: u32| {
        // Seeds 0 and 1 are killed: rounds enough to outlast any run.
        let rounds = if seed < 2 { "1000000" } else { "1" };
        Command::new(BIN)
            .args([
                "dedup-produce",
                &name,
                &seed.to_string(),
                &n.to_string(),
                "50",
                rounds,
            ])
            .stdout(Stdio::null())
            .spawn()
            .expect("spawn worker")
    };
    let mut first: Vec<Child> = (0..4).map(spawn).collect();
    std::thread::sleep(Duration::from_millis(30));
    first[0].kill().unwrap();
    std::thread::sleep(Duration::from_millis(20));
    first[1].kill().unwrap();
    for (i, c) in first.iter_mut().enumerate() {
        let st = c.wait().unwrap();
        if i >= 2 {
            assert!(st.success(), "producer {i}: {st:?}");
        } else {
            use std::os::unix::process::ExitStatusExt;
            assert_eq!(st.signal(), Some(9), "producer {i} was killed mid-run");
        }
    }
    for seed in [4, 5] {
        assert!(spawn(seed).wait().unwrap().success(), "retry producer");
    }
    // Messages of killed producers whose sends had been committed are published by recovery.
    q.recover().unwrap();
    let mut seen = vec![0u32; n as usize];
    let opts = ReceiveOptions::max(10).visibility_timeout(Duration::from_secs(60));
    let mut empty = 0;
    while empty < 3 {
        let ms = q.receive(&opts).unwrap();
        if ms.is_empty() {
            empty += 1;
            q.recover().unwrap();
            continue;
        }
        empty = 0;
        for m in ms {
            let k: usize = m.body.strip_prefix("id-").unwrap().parse().unwrap();
            assert_eq!(m.dedup_id.as_deref(), Some(m.body.as_str()));
            seen[k] += 1;
            q.delete(&m.receipt_handle).unwrap();
        }
    }
    let missing = seen.iter().filter(|&&c| c == 0).count();
    let doubled = seen.iter().filter(|&&c| c > 1).count();
    assert_eq!(
        (missing, doubled),
        (0, 0),
        "every id delivered exactly once"
    );
    drop(q);
    Queue::unlink(&name).unwrap();
}

/// X1, X4 across processes: two consumer processes never delete the messages of group
/// "poison" (each is received twice, then moved to the dead-letter queue by whichever
/// consumer's receive comes next), while the other groups flow and are deleted exactly once.
/// The dead-letter queue ends with every poison message exactly once, in order, received twice.
#[test]
fn consumers_that_never_delete_drive_poison_to_the_dead_letter_queue() {
    use shmfifo::{RedrivePolicy, SendMessage};
    let dlq_name = common::unique("mpdlq-dlq");
    let dlq = Queue::create(&dlq_name, &QueueConfig::new().max_messages(1024)).expect("dlq");
    let mut r = Run {
        name: common::unique("mpdlq"),
        logs: Vec::new(),
    };
    let q = Queue::create(
        &r.name,
        &QueueConfig::new()
            .deduplication(Deduplication::Off)
            .max_messages(4096)
            .max_groups(256)
            .redrive_policy(RedrivePolicy::new(dlq_name.clone(), 2)),
    )
    .expect("create");
    let (poison, normal) = (8, 400);
    for i in 0..poison {
        q.send(&SendMessage::new("poison", &format!("p:{i}")))
            .unwrap();
    }
    for i in 0..normal {
        q.send(&SendMessage::new(
            &format!("g{}", i % 16),
            &format!("n:{i}"),
        ))
        .unwrap();
    }
    r.producers_done();
    let name = r.name.clone();
    let cons: Vec<Child> = (0..2)
        .map(|_| r.spawn(&["consume", &name, "40", "flush", "hold-poison"]))
        .collect();
    for mut c in cons {
        assert!(c.wait().unwrap().success());
    }
    r.verify();
    assert_eq!(r.count("DEL "), normal, "every other message deleted once");
    let a = q.attributes();
    assert_eq!(a.moved_to_dead_letter, poison as u64);
    assert_eq!(
        a.approximate_number_of_messages + a.approximate_number_of_messages_not_visible,
        0
    );
    let mut got = Vec::new();
    loop {
        let ms = dlq.receive(&shmfifo::ReceiveOptions::max(10)).unwrap();
        if ms.is_empty() {
            break;
        }
        for m in ms {
            assert_eq!(m.group_id, "poison");
            assert_eq!(m.receive_count, 3, "received twice before the move (M4)");
            got.push(m.body.clone());
            dlq.delete(&m.receipt_handle).unwrap();
        }
    }
    let want: Vec<String> = (0..poison).map(|i| format!("p:{i}")).collect();
    assert_eq!(got, want, "each poison message exactly once, in order");
    let _ = Queue::unlink(&dlq_name);
}

/// R11 across processes: a consumer killed after its receive (before it recorded anything)
/// is replaced by another process that retries with the same attempt id and gets the same
/// batch, with the same receipt handles, at once rather than after the visibility timeout.
#[test]
fn killed_consumer_recovers_its_batch_by_attempt_id() {
    use shmfifo::{ReceiveOptions, SendMessage};
    let name = common::unique("mpattempt");
    let q = Queue::create(
        &name,
        &QueueConfig::new()
            .deduplication(Deduplication::Off)
            .max_messages(1024)
            // R11 alone: a dead receiver's messages stay in flight (tests/recovery.rs covers
            // their release at once, the default).
            .release_on_death(false),
    )
    .expect("create");
    for i in 0..5 {
        q.send(&SendMessage::new("g", &format!("m{i}"))).unwrap();
    }
    let handles = common::receive_and_die(BIN, &name, "batch-7");
    assert_eq!(handles.len(), 5);
    let opts = ReceiveOptions::max(10).visibility_timeout(Duration::from_secs(30));
    assert!(
        q.receive(&opts).unwrap().is_empty(),
        "the batch is in flight"
    );
    let again = q.receive_with_attempt_id(&opts, "batch-7").unwrap();
    let got: Vec<String> = again.iter().map(|m| m.receipt_handle.to_string()).collect();
    assert_eq!(got, handles, "the same batch, the same handles");
    for m in &again {
        q.delete(&m.receipt_handle).unwrap();
    }
    let _ = Queue::unlink(&name);
}
