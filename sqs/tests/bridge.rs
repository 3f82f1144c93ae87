//! The bridge (rule ids from docs/contract.md): SIGKILLed again and again mid-stream
//! and restarted, it forwards every message of a local queue to an SQS FIFO queue (SQS's API
//! on `shmfifo serve` and on moto's server, both with SQS's 5-minute deduplication) exactly
//! once and in group order (R1, D1); a message the remote queue refuses stops its own group
//! only, whether the remote refuses the entry (S13) or the whole batch (moto), and moves to
//! the local dead-letter queue before its group goes on; a remote slower than the visibility
//! timeout gets each message once, in order (R3, D1).

mod common;
mod hooked;

use std::collections::HashMap;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{create_remote, unique, Dir, Moto, Serve};
use hooked::Hooked;
use shmfifo::{
    BatchEntry, BatchResult, Error, FifoQueue, Queue, QueueConfig, ReceiveOptions, RedrivePolicy,
    RemoteKind, SendMessage,
};
use shmfifo_sqs::bridge::{bridge, BridgeOptions, BridgeReport};
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

/// The counter at the end of a body `…GROUP:K`.
fn counter(body: &str) -> usize {
    body.rsplit(':').next().unwrap().parse().unwrap()
}

/// Drains a queue: each group's counters in delivery order.
fn drain(remote: &dyn FifoQueue) -> HashMap<String, Vec<usize>> {
    let mut by_group: HashMap<String, Vec<usize>> = HashMap::new();
    loop {
        let got = remote
            .receive(&ReceiveOptions::max(10).wait(Duration::from_secs(1)), None)
            .unwrap();
        if got.is_empty() {
            return by_group;
        }
        for m in &got {
            by_group
                .entry(m.group_id.clone())
                .or_default()
                .push(counter(&m.body));
        }
        let ids: Vec<String> = (0..got.len()).map(|i| i.to_string()).collect();
        let entries: Vec<BatchEntry<'_, &str>> = got
            .iter()
            .zip(&ids)
            .map(|(m, id)| BatchEntry {
                id,
                entry: m.receipt_handle.as_str(),
            })
            .collect();
        for r in remote.delete_batch(&entries).unwrap() {
            r.result.unwrap();
        }
    }
}

/// The bridge command forwarding `local` to `url` (local visibility timeout 1 s, at most
/// `rate` messages per second, so that it is killed many times on the way; until empty).
fn bridge_command(local: &std::path::Path, url: &str, endpoint: &str, rate: u32) -> Command {
    let mut c = Command::new(BIN);
    c.args([
        local.to_str().unwrap(),
        url,
        "--endpoint-url",
        endpoint,
        "--visibility-timeout",
        "1",
        "--rate",
        &rate.to_string(),
        "--until-empty",
    ]);
    c
}

/// SIGKILLs the bridge at random moments (`pause_ms` plus up to `span_ms` after its start)
/// while it forwards `groups` × `per_group` messages to a new queue at `endpoint`, lets a
/// last one finish, then checks the remote queue.
fn killed_again_and_again(
    endpoint: &str,
    (groups, per_group): (usize, usize),
    rate: u32,
    (pause_ms, span_ms): (u64, u64),
) {
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
    fill(&local, groups, per_group);
    let url = create_remote(endpoint, &format!("{}.fifo", unique("inbox")), &[]);
    let mut kills = 0;
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    let start = Instant::now();
    while kills < 25 && start.elapsed() < Duration::from_secs(120) {
        let mut child = bridge_command(&local_path, &url, endpoint, rate)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        std::thread::sleep(Duration::from_millis(pause_ms + rng % span_ms));
        if child.try_wait().unwrap().is_some() {
            break; // it finished before we killed it
        }
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        kills += 1;
    }
    let killing = start.elapsed();
    let out = bridge_command(&local_path, &url, endpoint, rate)
        .output()
        .unwrap();
    let last = start.elapsed() - killing;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    println!(
        "bridge to {endpoint}: {kills} SIGKILLs in {killing:.1?}, then in {last:.1?}: {}",
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
    let remote = SqsQueue::open_url(&url, Some(endpoint)).unwrap();
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

/// R1, D1 on `shmfifo serve`: 25 SIGKILLs over 3,000 messages in 20 groups. A killed bridge's
/// groups stay locked for the visibility timeout (1 s), so the next one is killed up to 1.5 s
/// after its start; at most 250 messages/s, so that the stream outlasts most kills.
#[test]
fn a_bridge_killed_again_and_again_delivers_each_message_once_in_order() {
    let serve = Serve::start();
    killed_again_and_again(&serve.endpoint, (20, 150), 250, (30, 1500));
}

/// R1, D1 on moto's server (its 5-minute deduplication holds while nothing is deleted there):
/// up to 25 SIGKILLs over 200 messages in 10 groups (moto answers a batch in 0.1 s to 1 s: its
/// dedup check scans the queue). 25 messages a second: the first five kills come 0.2 to 1.5 s
/// after each start (5.1 s in all), in which a bridge at 100 a second could forward all 200
/// when moto answered fast, and the test then failed for fewer than five kills.
#[test]
fn a_bridge_killed_again_and_again_delivers_each_message_once_in_order_to_moto() {
    let moto = Moto::start();
    killed_again_and_again(&moto.endpoint, (10, 20), 25, (200, 1500));
}

/// R1, D1, R3 on `shmfifo serve`: a bridge SIGSTOPped for longer than its visibility timeout
/// while a second bridge takes its lapsed messages over (and is SIGKILLed), then SIGCONTed:
/// its renewals fail, it drops those groups and receives them again; every message arrives
/// once, each group in order.
#[test]
fn a_bridge_stopped_past_its_visibility_timeout_drops_its_holds_and_keeps_the_order() {
    let serve = Serve::start();
    let local_dir = Dir::new("bridge-sigstop");
    let local_path = local_dir.0.join("outbox");
    let local = Queue::create_at(&local_path, &QueueConfig::new()).unwrap();
    let (groups, per_group) = (10, 60);
    fill(&local, groups, per_group);
    let url = create_remote(&serve.endpoint, &format!("{}.fifo", unique("stop")), &[]);
    let run = |rate| {
        bridge_command(&local_path, &url, &serve.endpoint, rate)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    };
    let signal = |sig: &str, pid: u32| {
        assert!(Command::new("kill")
            .args([sig, &pid.to_string()])
            .status()
            .unwrap()
            .success());
    };
    let mut a = run(100);
    std::thread::sleep(Duration::from_millis(800));
    signal("-STOP", a.id());
    let mut b = run(100);
    std::thread::sleep(Duration::from_millis(2500));
    b.kill().unwrap();
    b.wait().unwrap();
    signal("-CONT", a.id());
    assert!(a.wait().unwrap().success());
    let out = bridge_command(&local_path, &url, &serve.endpoint, 1000)
        .output()
        .unwrap();
    assert!(out.status.success());
    let l = local.attributes();
    assert_eq!(
        (
            l.approximate_number_of_messages,
            l.approximate_number_of_messages_not_visible
        ),
        (0, 0)
    );
    let got = drain(&SqsQueue::open_url(&url, Some(&serve.endpoint)).unwrap());
    assert_eq!(got.len(), groups);
    for (g, ks) in &got {
        assert_eq!(
            ks,
            &all(per_group),
            "group {g}: each message once, in order"
        );
    }
}

/// Options for the refusal tests: until empty, 2 tries 50 ms then 100 ms apart, stopped
/// groups tried every 200–400 ms, and a cancel after 60 s (so that a bridge that never
/// returns fails the test instead of hanging it).
fn refusal_options() -> (BridgeOptions, Arc<AtomicBool>) {
    let cancel = Arc::new(AtomicBool::new(false));
    let c = Arc::clone(&cancel);
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(60));
        c.store(true, Ordering::Relaxed);
    });
    let opts = BridgeOptions {
        until_empty: true,
        wait: Duration::ZERO,
        max_tries: 2,
        backoff: Duration::from_millis(50),
        max_backoff: Duration::from_millis(400),
        cancel: Some(Arc::clone(&cancel)),
        ..Default::default()
    };
    (opts, cancel)
}

/// What a refusal run left.
struct Refusal {
    report: BridgeReport,
    elapsed: Duration,
    /// What the remote queue got, per group.
    remote: HashMap<String, Vec<usize>>,
    /// For each send of a `p:K` with K ≥ 10: how many messages the local dead-letter queue
    /// held at that moment.
    later_sends: Vec<u64>,
    /// The local dead-letter queue's messages, if there is one.
    dead: Option<Vec<shmfifo::Message>>,
    /// p:9's local message id.
    p9_id: String,
    /// Messages left in the local queue (visible and in flight).
    left: u64,
    /// What the status file says after the run.
    status: BridgeReport,
}

/// Group `p` (p:0…19, p:9 2,000 bytes: over the remote's MaximumMessageSize of 1024) and 20
/// small messages in each of `others`, sent interleaved, forwarded to a new queue at
/// `endpoint`; with a local dead-letter queue if `with_dlq`.
fn refusal(endpoint: &str, others: &[&str], with_dlq: bool) -> Refusal {
    let dir = Dir::new("bridge-refuse");
    let dlq_path = dir.0.join("dlq");
    let dlq = Queue::create_at(&dlq_path, &QueueConfig::new()).unwrap();
    let mut cfg = QueueConfig::new();
    if with_dlq {
        cfg = cfg.redrive_policy(RedrivePolicy::new(dlq_path.to_str().unwrap(), 10));
    }
    let local = Queue::create_at(dir.0.join("outbox"), &cfg).unwrap();
    let mut p9_id = String::new();
    for k in 0..20 {
        let pad = if k == 9 {
            "x".repeat(2000)
        } else {
            String::new()
        };
        let body = format!("{pad}p:{k}");
        let sent = local
            .send(&SendMessage::new("p", &body).dedup_id(&format!("p{k}")))
            .unwrap();
        if k == 9 {
            p9_id = sent.message_id.to_string();
        }
        for g in others {
            local
                .send(&SendMessage::new(g, &format!("{g}:{k}")).dedup_id(&format!("{g}{k}")))
                .unwrap();
        }
    }
    let url = create_remote(
        endpoint,
        &format!("{}.fifo", unique("refuse")),
        &[("MaximumMessageSize", "1024")],
    );
    let later = Arc::new(Mutex::new(Vec::new()));
    let (seen, dlq_seen) = (Arc::clone(&later), dlq.clone());
    let remote = Hooked {
        inner: Box::new(SqsQueue::open_url(&url, Some(endpoint)).unwrap()),
        answer: None,
        before: Box::new(move |entries| {
            for e in entries {
                if e.entry.group_id == Some("p") && counter(e.entry.body) >= 10 {
                    let n = dlq_seen.attributes().approximate_number_of_messages;
                    seen.lock().unwrap().push(n);
                }
            }
        }),
    };
    let (mut opts, cancel) = refusal_options();
    let status = shmfifo_sqs::bridge::status_path(&dir.0.join("outbox"));
    opts.status_file = Some(status.clone());
    let t = Instant::now();
    let report = bridge(&local, &remote, &opts, &mut |_| {}).unwrap();
    let elapsed = t.elapsed();
    assert!(
        !cancel.load(Ordering::Relaxed),
        "the bridge did not return in 60 s (until_empty)"
    );
    let dead = with_dlq.then(|| {
        dlq.receive(&ReceiveOptions::max(10).wait(Duration::ZERO))
            .unwrap()
    });
    let a = local.attributes();
    let remote = drain(&remote);
    let later_sends = later.lock().unwrap().clone();
    Refusal {
        report,
        elapsed,
        remote,
        later_sends,
        dead,
        p9_id,
        left: a.approximate_number_of_messages + a.approximate_number_of_messages_not_visible,
        status: shmfifo_sqs::bridge::read_status(&status, a.created_timestamp)
            .expect("the bridge's status file"),
    }
}

fn all(n: usize) -> Vec<usize> {
    (0..n).collect()
}

/// Checks a run with a local dead-letter queue: p:9 refused twice, then moved there (with
/// its local message id as its dedup id, D8) before any later message of p was sent; the
/// remote got p without p:9 and every other group whole, each in order (R1).
fn check_dead_lettered(r: &Refusal, others: &[&str]) {
    let p: Vec<usize> = (0..20).filter(|k| *k != 9).collect();
    assert_eq!(r.remote.get("p"), Some(&p), "group p in order, without p:9");
    for g in others {
        assert_eq!(
            r.remote.get(*g),
            Some(&all(20)),
            "group {g}: whole, in order"
        );
    }
    assert!(
        !r.later_sends.is_empty() && r.later_sends.iter().all(|n| *n >= 1),
        "p:10 and later went only once p:9 was in the dead-letter queue: {:?}",
        r.later_sends
    );
    let dead = r.dead.as_ref().unwrap();
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].group_id, "p");
    assert!(dead[0].body.ends_with("p:9") && dead[0].body.len() == 2003);
    assert_eq!(dead[0].dedup_id.as_deref(), Some(r.p9_id.as_str()));
    let n = 19 + 20 * others.len() as u64;
    assert_eq!(
        (r.report.forwarded, r.report.failed, r.report.dead_lettered),
        (n, 2, 1),
        "{:?}",
        r.report
    );
    assert!(r.report.stopped.is_empty());
    assert_eq!(r.status, r.report, "the status file says the same");
    assert_eq!(r.left, 0, "nothing left in the local queue");
}

/// R1 and S13 on `shmfifo serve`, which refuses the oversized entry alone: p stops at p:9,
/// which is tried twice and moved to the local dead-letter queue before p:10 goes; q flows.
#[test]
fn a_refused_message_moves_to_the_dead_letter_queue_before_its_group_goes_on() {
    let serve = Serve::start();
    let r = refusal(&serve.endpoint, &["q"], true);
    check_dead_lettered(&r, &["q"]);
}

/// R1 and S13 without a local dead-letter queue: p stays stopped at p:9 (p:9…19 stay in the
/// local queue, none of p:10…19 is ever sent), q flows, the report names p, the bridge
/// returns (until empty), and p:9 is tried at the capped backoff, not in a loop.
#[test]
fn without_a_dead_letter_queue_a_refused_message_stops_its_group_only() {
    let serve = Serve::start();
    let r = refusal(&serve.endpoint, &["q"], false);
    assert_eq!(r.remote.get("p"), Some(&all(9)), "p up to p:8, in order");
    assert_eq!(r.remote.get("q"), Some(&all(20)), "q whole, in order");
    assert!(r.later_sends.is_empty(), "no message after p:9 was sent");
    assert_eq!(r.report.stopped, vec!["p".to_owned()]);
    assert_eq!(r.status, r.report, "the status file names p too");
    assert_eq!((r.report.forwarded, r.report.dead_lettered), (29, 0));
    // Two tries, then one every 200–400 ms (the capped backoff with jitter).
    let bound = 2 + (r.elapsed.as_millis() / 200) as u64 + 1;
    assert!(
        (2..=bound).contains(&r.report.failed),
        "{} refusals in {:?}: a spin",
        r.report.failed,
        r.elapsed
    );
    assert_eq!(r.left, 11, "p:9…19 left in the local queue");
}

/// R1 on moto's server, which refuses a whole batch (InvalidParameterValue "Message must be
/// shorter than 1024 bytes", a request-level error) when one entry is too large, where SQS
/// refuses that entry alone (S13): the bridge splits the batch, finds p:9, moves it to the
/// local dead-letter queue, and every other group is forwarded whole and in order; the
/// bridge never exits with the error.
#[test]
fn a_batch_refused_as_a_whole_is_split_and_the_other_groups_flow_on() {
    let moto = Moto::start();
    let others = ["q", "r", "s", "t", "u"];
    let r = refusal(&moto.endpoint, &others, true);
    check_dead_lettered(&r, &others);
}

/// R3, D1: a remote queue slower than the local visibility timeout (1 s; some requests take
/// 2.5 s) gets every message sent once (none sent again because its local hold lapsed),
/// each group in order, and every local delete succeeds.
#[test]
fn a_remote_slower_than_the_visibility_timeout_gets_each_message_once_in_order() {
    let dir = Dir::new("bridge-slow");
    let local = Queue::create_at(dir.0.join("outbox"), &QueueConfig::new()).unwrap();
    let far = Queue::create_at(dir.0.join("inbox"), &QueueConfig::new()).unwrap();
    fill(&local, 3, 6);
    let sends: Arc<Mutex<HashMap<String, u32>>> = Arc::default();
    let requests = Arc::new(AtomicU32::new(0));
    let (count, n) = (Arc::clone(&sends), Arc::clone(&requests));
    let remote = Hooked {
        inner: Box::new(far.clone()),
        answer: None,
        before: Box::new(move |entries| {
            let mut c = count.lock().unwrap();
            for e in entries {
                *c.entry(e.entry.dedup_id.unwrap().to_owned()).or_default() += 1;
            }
            drop(c);
            if [0, 2].contains(&n.fetch_add(1, Ordering::Relaxed)) {
                std::thread::sleep(Duration::from_millis(2500));
            }
        }),
    };
    let opts = BridgeOptions {
        until_empty: true,
        wait: Duration::ZERO,
        visibility_timeout: Duration::from_secs(1),
        ..Default::default()
    };
    let r = bridge(&local, &remote, &opts, &mut |_| {}).unwrap();
    let sends = sends.lock().unwrap();
    assert_eq!(sends.len(), 18);
    assert!(
        sends.values().all(|n| *n == 1),
        "a message was sent more than once: {sends:?}"
    );
    assert_eq!((r.forwarded, r.retried, r.failed), (18, 0, 0));
    let a = local.attributes();
    assert_eq!(
        (
            a.approximate_number_of_messages,
            a.approximate_number_of_messages_not_visible
        ),
        (0, 0)
    );
    let got = drain(&far);
    assert_eq!(got.len(), 3);
    for (g, ks) in &got {
        assert_eq!(ks, &all(6), "group {g}: each message once, in order");
    }
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
    assert_eq!(
        (r.forwarded, r.retried, r.failed, r.dead_lettered),
        (1, 0, 0, 0)
    );
    // The status file (what `stat` and `metrics` show) adds up over runs.
    a.send(&SendMessage::new("g", "two").dedup_id("2")).unwrap();
    shmfifo_sqs::bridge::bridge(&a, &b, &opts, &mut |_| {}).unwrap();
    let created = a.attributes().created_timestamp;
    let total = shmfifo_sqs::bridge::read_status(&status, created).expect("a's status");
    assert_eq!((total.forwarded, total.retried, total.failed), (2, 0, 0));
    assert!(total.stopped.is_empty());
    let got = Queue::receive(&b, &ReceiveOptions::max(10)).unwrap();
    assert_eq!(got[0].body, "hello");
    assert_eq!(got[0].attributes.len(), 2);
    // The local message id became the deduplication id.
    assert_eq!(got[0].dedup_id.as_deref().map(str::len), Some(36));
}

/// A rate (`--rate`) paces what the bridge sends, not its polls: started on an empty queue it
/// long-polls as without one (its past allowance made every poll a zero wait, 430,000 empty
/// receives in 3 s), and time spent idle banks at most one request's allowance (an idle hour
/// let the next 360,000 messages of a rate of 100 go at full speed).
#[test]
fn a_rate_paces_the_sends_after_an_idle_start_and_never_spins() {
    let dir = Dir::new("bridge-rate");
    let a = Queue::create_at(dir.0.join("a"), &QueueConfig::new()).unwrap();
    let b = Queue::create_at(dir.0.join("b"), &QueueConfig::new()).unwrap();
    let cancel = Arc::new(AtomicBool::new(false));
    let opts = BridgeOptions {
        max_per_second: Some(20),
        wait: Duration::from_millis(200),
        cancel: Some(Arc::clone(&cancel)),
        remote_name: "b".into(),
        ..Default::default()
    };
    let (a2, b2) = (
        Queue::open_at(dir.0.join("a")).unwrap(),
        Queue::open_at(dir.0.join("b")).unwrap(),
    );
    let run = std::thread::spawn(move || bridge(&a2, &b2, &opts, &mut |_| {}).unwrap());
    std::thread::sleep(Duration::from_millis(1000));
    let idle = a.counters().empty_receives;
    assert!(
        idle <= 20,
        "an idle bridge polls, it does not spin: {idle} empty receives in 1 s"
    );
    let start = Instant::now();
    for k in 0..30 {
        a.send(
            &SendMessage::new(&format!("g{}", k % 5), &format!("m{k}")).dedup_id(&k.to_string()),
        )
        .unwrap();
    }
    while b.attributes().approximate_number_of_messages < 30 {
        assert!(start.elapsed() < Duration::from_secs(30), "not forwarded");
        std::thread::sleep(Duration::from_millis(5));
    }
    // 30 at 20 a second, at most 10 of them (one request) at once: 20 paced, a second at
    // least (with the banked second, 21 went at once and the rest in half a second).
    let took = start.elapsed();
    assert!(took >= Duration::from_millis(900), "{took:?}");
    cancel.store(true, Ordering::Relaxed);
    let r = run.join().unwrap();
    assert_eq!(r.forwarded, 30);
}

/// With every request slot taken (concurrency 1, a remote 300 ms away) and a rate whose
/// allowance is already due, the bridge waits for the reply: the past allowance made its waits
/// zero waits, a poll loop at full speed until each reply came.
#[test]
fn a_rate_already_due_waits_for_replies_without_spinning() {
    let dir = Dir::new("bridge-rate-busy");
    let a = Queue::create_at(dir.0.join("a"), &QueueConfig::new()).unwrap();
    let b = Queue::create_at(dir.0.join("b"), &QueueConfig::new()).unwrap();
    for k in 0..30 {
        a.send(&SendMessage::new(&format!("g{k}"), "m").dedup_id(&k.to_string()))
            .unwrap();
    }
    let slow = Hooked::delayed(Box::new(b), Duration::from_millis(300));
    let opts = BridgeOptions {
        max_per_second: Some(1000),
        concurrency: 1,
        until_empty: true,
        wait: Duration::ZERO,
        remote_name: "b".into(),
        ..Default::default()
    };
    let before = a.counters().empty_receives;
    {
        let local = Queue::open_at(dir.0.join("a")).unwrap();
        let r = bridge(&local, &slow, &opts, &mut |_| {}).unwrap();
        assert_eq!(r.forwarded, 30);
        // `local` closed here: its tally of empty receives reaches the queue's count.
    }
    let polls = a.counters().empty_receives - before;
    assert!(
        polls < 300,
        "{polls} empty receives in three 300 ms replies: a spin"
    );
}

/// A REMOTE with no scheme was taken for a local queue: `shmfifo bridge outbox orders.fifo`
/// (a forgotten `sqs://`) forwarded the outbox into `/dev/shm/orders.fifo`, the very file a
/// local serve serves, and exited 0. Now it is a usage error (2) naming the forms; a local far
/// end is named `shm:`.
#[test]
fn a_remote_without_a_scheme_is_refused_not_taken_for_a_local_queue() {
    let dir = Dir::new("bridge-scheme");
    let out_path = dir.0.join("outbox");
    let far_path = dir.0.join("orders.fifo");
    let outbox = Queue::create_at(&out_path, &QueueConfig::new()).unwrap();
    let far = Queue::create_at(&far_path, &QueueConfig::new()).unwrap();
    outbox
        .send(&SendMessage::new("g", "m").dedup_id("1"))
        .unwrap();
    let out = Command::new(BIN)
        .arg(&out_path)
        .arg(&far_path)
        .arg("--until-empty")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("not an SQS queue") && err.contains("sqs://"),
        "{err}"
    );
    assert_eq!(far.attributes().approximate_number_of_messages, 0);
    // Named with shm:, the local far end is taken.
    let out = Command::new(BIN)
        .arg(&out_path)
        .arg(format!("shm:{}", far_path.display()))
        .arg("--until-empty")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(far.attributes().approximate_number_of_messages, 1);
}

/// `--until-empty` exited 0 with a delayed message still in the local queue (left behind),
/// and exited 0 with every group stopped at a refused message (nothing forwarded): a script
/// draining the queue read success. Now it waits for delayed messages, and a run that ends
/// with groups stopped exits 3.
#[test]
fn until_empty_waits_for_delayed_messages_and_fails_with_groups_stopped() {
    let dir = Dir::new("bridge-until-empty");
    let (out_path, far_path) = (dir.0.join("outbox"), dir.0.join("far"));
    let outbox = Queue::create_at(
        &out_path,
        &QueueConfig::new().delay(Duration::from_millis(1500)),
    )
    .unwrap();
    let far = Queue::create_at(&far_path, &QueueConfig::new().maximum_message_size(1024)).unwrap();
    outbox
        .send(&SendMessage::new("g", "later").dedup_id("1"))
        .unwrap();
    let run = || {
        Command::new(BIN)
            .arg(&out_path)
            .arg(format!("shm:{}", far_path.display()))
            .args(["--until-empty", "--max-tries", "1"])
            .output()
            .unwrap()
    };
    let out = run();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        far.attributes().approximate_number_of_messages,
        1,
        "the delayed one came"
    );
    // A message the far end refuses (larger than its 1,024 bytes), no dead-letter queue.
    outbox.set_attribute("DelaySeconds", "0").unwrap();
    let big = "x".repeat(2000);
    outbox
        .send(&SendMessage::new("h", &big).dedup_id("2"))
        .unwrap();
    let out = run();
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    assert_eq!(
        outbox.attributes().approximate_number_of_messages,
        1,
        "still here"
    );
}

/// Restarts dead-lettered messages the remote never refused: each run hands back what it held
/// and the next receives it again, one more receive, so on a local queue with a redrive policy
/// a few restarts moved a group's held messages to the dead-letter queue (a gap in the group
/// on the remote, `dead_lettered` 0). The bridge's receives no longer move messages for their
/// count (X1 is left to the refusals, `max_tries`): messages received twice before, past a
/// `maxReceiveCount` of 1, all reach the remote, in order.
#[test]
fn restarts_do_not_dead_letter_what_the_remote_never_refused() {
    let dir = Dir::new("bridge-restarts");
    let dlq = Queue::create_at(dir.0.join("dlq"), &QueueConfig::new()).unwrap();
    let policy = RedrivePolicy::new(dir.0.join("dlq").display().to_string(), 1);
    let a = Queue::create_at(dir.0.join("a"), &QueueConfig::new().redrive_policy(policy)).unwrap();
    let b = Queue::create_at(dir.0.join("b"), &QueueConfig::new()).unwrap();
    for i in 0..5 {
        a.send(&SendMessage::new("g", &format!("m{i}")).dedup_id(&format!("{i}")))
            .unwrap();
    }
    // Two earlier runs' holds, handed back (another handle that does not move them either).
    let earlier = Queue::open_at(dir.0.join("a")).unwrap();
    earlier.set_dead_letter_on_receive(false);
    for _ in 0..2 {
        let got = earlier
            .receive(&ReceiveOptions::max(10).visibility_timeout(Duration::ZERO))
            .unwrap();
        assert_eq!(got.len(), 5);
    }
    drop(earlier);
    let opts = BridgeOptions {
        until_empty: true,
        wait: Duration::ZERO,
        remote_name: "b".into(),
        ..Default::default()
    };
    let r = bridge(&a, &b, &opts, &mut |_| {}).unwrap();
    assert_eq!((r.forwarded, r.dead_lettered), (5, 0), "{r:?}");
    assert_eq!(dlq.attributes().approximate_number_of_messages, 0);
    let got = Queue::receive(&b, &ReceiveOptions::max(10)).unwrap();
    let bodies: Vec<&str> = got.iter().map(|m| m.body.as_str()).collect();
    assert_eq!(bodies, ["m0", "m1", "m2", "m3", "m4"]);
}

/// The bridge's memory is bounded when many groups wait at a refused message: with one worker
/// (`max_held` 100) it holds at most 10 × 100 messages of groups held at a refusal (plus one
/// receive's worth), not the whole queue. 1,200 groups each start with a message the remote
/// refuses (2,000 bytes: over its MaximumMessageSize of 1,024) and go on with a small one;
/// without a dead-letter queue every group stops at its first message, so an unbounded bridge
/// would receive all 2,400.
#[test]
fn messages_held_by_groups_stopped_at_a_refusal_are_bounded() {
    let dir = Dir::new("bridge-cap");
    let local = Queue::create_at(dir.0.join("outbox"), &QueueConfig::new()).unwrap();
    let remote = Queue::create_at(
        dir.0.join("inbox"),
        &QueueConfig::new().maximum_message_size(1024),
    )
    .unwrap();
    let big = "x".repeat(2000);
    for g in 0..1200 {
        let group = format!("g{g}");
        local
            .send(&SendMessage::new(&group, &big).dedup_id(&format!("{g}a")))
            .unwrap();
        local
            .send(&SendMessage::new(&group, "small").dedup_id(&format!("{g}b")))
            .unwrap();
    }
    // The refusal tests' tries and backoff, one worker, and running until cancelled below;
    // every first message is refused alike, which the default `max_refused_in_a_row` would
    // take for a remote refusing everything and end the bridge at once: off here.
    let (mut opts, cancel) = refusal_options();
    opts.concurrency = 1;
    opts.until_empty = false;
    opts.max_refused_in_a_row = 0;
    let most = std::thread::scope(|s| {
        let run = s.spawn(|| bridge(&local, &remote, &opts, &mut |_| {}));
        // Sample what the bridge holds (messages in flight locally) for 3 s.
        let mut most = 0;
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(3) {
            most = most.max(
                local
                    .attributes()
                    .approximate_number_of_messages_not_visible,
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        cancel.store(true, Ordering::Relaxed);
        let report = run.join().unwrap().unwrap();
        assert_eq!(
            report.forwarded, 0,
            "the remote refused every first message"
        );
        assert!(report.failed > 0);
        most
    });
    // 10 × max_held of refused groups, max_held more of others, one receive past the bound.
    assert!(
        most <= 1000 + 100 + 10,
        "the bridge held {most} messages of stopped groups"
    );
    assert!(
        most >= 900,
        "the bridge held only {most}: the bound was not reached, so this run checks nothing"
    );
    assert_eq!(
        remote.attributes().approximate_number_of_messages,
        0,
        "nothing after a refused message was sent"
    );
}

/// A remote that lets every batch through to a local queue, `script` first.
fn scripted(far: &Queue, script: hooked::Script) -> Hooked {
    Hooked {
        inner: Box::new(far.clone()),
        before: Box::new(|_| {}),
        answer: Some(script),
    }
}

/// SQS's answer to a message with group and deduplication ids sent to a standard queue.
fn standard_queues_refusal() -> Error {
    Error::InvalidParameterValue {
        parameter: "MessageDeduplicationId",
        reason: "The request include parameter that is not valid for this queue type".into(),
    }
}

/// A remote that refuses every message for what the remote queue is (a standard queue given
/// where a FIFO queue was meant: SQS refuses the group and deduplication ids), whether for
/// each entry (S13) or for the whole request: the bridge ends with that error at the first
/// answer, and dead-letters nothing (before, each group's head was refused `max_tries`
/// times and moved to the local dead-letter queue, and the next, until the whole queue had
/// moved there); every message stays in the local queue.
#[test]
fn a_remote_refusing_every_message_for_its_queue_type_ends_the_bridge_and_dead_letters_nothing() {
    for per_entry in [true, false] {
        let dir = Dir::new("bridge-standard");
        let dlq_path = dir.0.join("dlq");
        let dlq = Queue::create_at(&dlq_path, &QueueConfig::new()).unwrap();
        let cfg =
            QueueConfig::new().redrive_policy(RedrivePolicy::new(dlq_path.to_str().unwrap(), 10));
        let local = Queue::create_at(dir.0.join("outbox"), &cfg).unwrap();
        fill(&local, 3, 4);
        let far = Queue::create_at(dir.0.join("far"), &QueueConfig::new()).unwrap();
        let remote = scripted(
            &far,
            Box::new(move |entries| {
                Some(if per_entry {
                    Ok(entries
                        .iter()
                        .map(|e| BatchResult {
                            id: e.id.to_owned(),
                            result: Err(standard_queues_refusal()),
                        })
                        .collect())
                } else {
                    Err(standard_queues_refusal())
                })
            }),
        );
        let (opts, cancel) = refusal_options();
        let r = bridge(&local, &remote, &opts, &mut |_| {});
        let what = if per_entry {
            "each entry refused"
        } else {
            "the request refused"
        };
        assert!(
            !cancel.load(Ordering::Relaxed),
            "{what}: the bridge did not end"
        );
        assert!(
            matches!(r, Err(Error::InvalidParameterValue { .. })),
            "{what}: ends with the remote's error: {r:?}"
        );
        assert_eq!(
            dlq.attributes().approximate_number_of_messages,
            0,
            "{what}: nothing dead-lettered"
        );
        let a = local.attributes();
        assert_eq!(
            a.approximate_number_of_messages + a.approximate_number_of_messages_not_visible,
            12,
            "{what}: every message still in the local queue"
        );
        assert_eq!(far.attributes().approximate_number_of_messages, 0);
    }
}

/// R1 behind a proxy that answers every batch of more than one entry with a 4xx page and no
/// SQS error code (a 413 for its size, say): such an answer is the remote failing, never a
/// refusal of a message (nothing is dead-lettered), but the same batch would get it again, so
/// its entries go one by one next. Every message arrives, each group in order. Before, the
/// bridge sent the same batch again and again, forever.
#[test]
fn a_batch_a_proxy_answers_with_a_4xx_page_goes_again_entry_by_entry() {
    let dir = Dir::new("bridge-proxy-4xx");
    let local = Queue::create_at(dir.0.join("outbox"), &QueueConfig::new()).unwrap();
    fill(&local, 5, 4);
    let far = Queue::create_at(dir.0.join("far"), &QueueConfig::new()).unwrap();
    let batches = Arc::new(AtomicU32::new(0));
    let b = Arc::clone(&batches);
    let remote = scripted(
        &far,
        Box::new(move |entries| {
            (entries.len() > 1).then(|| {
                b.fetch_add(1, Ordering::Relaxed);
                Err(Error::Remote {
                    kind: RemoteKind::Other,
                    code: "response-4xx".into(),
                    message: "HTTP 413 without an error code: request entity too large".into(),
                })
            })
        }),
    );
    let (opts, cancel) = refusal_options();
    let report = bridge(&local, &remote, &opts, &mut |_| {}).unwrap();
    assert!(
        !cancel.load(Ordering::Relaxed),
        "the bridge did not return in 60 s (until_empty)"
    );
    assert!(batches.load(Ordering::Relaxed) > 0, "a batch met the proxy");
    assert_eq!(report.failed, 0, "nothing refused: {report:?}");
    assert_eq!(report.dead_lettered, 0);
    let got = drain(&far);
    assert_eq!(got.len(), 5);
    for (g, ks) in &got {
        assert_eq!(ks, &all(4), "{g}: every message, in order");
    }
}

/// One message a proxy answers with a 4xx page whenever it goes (a 413 for its size, say),
/// sent alone after its batch was: it went again every 25–100 ms forever, each other group's
/// success resetting the backoff, never reported, and `until_empty` never returned. Now its
/// group backs off on its own, is reported stopped after `max_tries` such answers (nothing
/// refused or dead-lettered: the answer is not SQS's), and the others flow on; the run ends.
#[test]
fn a_message_a_proxy_always_answers_with_a_4xx_page_stops_its_group_only() {
    let dir = Dir::new("bridge-proxy-one");
    let local = Queue::create_at(dir.0.join("outbox"), &QueueConfig::new()).unwrap();
    fill(&local, 4, 3);
    let far = Queue::create_at(dir.0.join("far"), &QueueConfig::new()).unwrap();
    let alone = Arc::new(AtomicU32::new(0));
    let a = Arc::clone(&alone);
    let remote = scripted(
        &far,
        Box::new(move |entries| {
            entries
                .iter()
                .any(|e| e.entry.group_id == Some("g1"))
                .then(|| {
                    if entries.len() == 1 {
                        a.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(Error::Remote {
                        kind: RemoteKind::Other,
                        code: "response-4xx".into(),
                        message: "HTTP 413 without an error code: request entity too large".into(),
                    })
                })
        }),
    );
    let (opts, cancel) = refusal_options();
    let started = Instant::now();
    let report = bridge(&local, &remote, &opts, &mut |_| {}).unwrap();
    assert!(
        !cancel.load(Ordering::Relaxed),
        "the bridge did not return in 60 s (until_empty)"
    );
    assert_eq!(report.stopped, vec!["g1".to_owned()], "{report:?}");
    assert_eq!((report.failed, report.dead_lettered), (0, 0), "{report:?}");
    // max_tries (2) answers alone, and a few more at max_backoff (400 ms) while the other
    // groups finish: not one every 25-100 ms.
    let tries = alone.load(Ordering::Relaxed);
    let bound = 2 + (started.elapsed().as_millis() / 200) as u32 + 2;
    assert!(
        (2..=bound).contains(&tries),
        "{tries} sends alone in {:?}",
        started.elapsed()
    );
    let got = drain(&far);
    assert_eq!(got.len(), 3, "{got:?}");
    for (g, ks) in &got {
        assert_eq!(ks, &all(3), "{g}: every message, in order");
    }
    let a = local.attributes();
    assert_eq!(
        a.approximate_number_of_messages + a.approximate_number_of_messages_not_visible,
        3,
        "g1's messages stay here"
    );
}

/// A remote that refuses each message with an error code the bridge does not know as fatal.
fn refusing_everything(far: &Queue) -> Hooked {
    scripted(
        far,
        Box::new(|entries| {
            Some(Ok(entries
                .iter()
                .map(|e| BatchResult {
                    id: e.id.to_owned(),
                    result: Err(Error::Remote {
                        kind: shmfifo::RemoteKind::Other,
                        code: "AWS.SimpleQueueService.SomethingNew".into(),
                        message: "refused".into(),
                    }),
                })
                .collect()))
        }),
    )
}

/// A remote that refuses every message alike, with a code the bridge does not know as the end
/// of the road: the tenth distinct message refused alike in a row (`max_refused_in_a_row`, 10
/// by default) ends the bridge with the remote's code. With 12 groups the first request
/// carries ten heads: nothing is moved to the local dead-letter queue. With 4 groups of 5 the
/// heads go four at a time, each moved after its `max_tries` (2) refusals, so 8 are moved
/// before the run reaches ten (at most 9 ever are). Every other message stays in the local
/// queue. (Before, each head went to the dead-letter queue and then the next, until the whole
/// queue had moved there: 20 of 20.)
#[test]
fn ten_messages_refused_alike_in_a_row_end_the_bridge() {
    for (groups, per_group, moved) in [(12, 2, 0..=0), (4, 5, 1..=9)] {
        let dir = Dir::new("bridge-alike-end");
        let dlq_path = dir.0.join("dlq");
        let dlq = Queue::create_at(&dlq_path, &QueueConfig::new()).unwrap();
        let cfg =
            QueueConfig::new().redrive_policy(RedrivePolicy::new(dlq_path.to_str().unwrap(), 10));
        let local = Queue::create_at(dir.0.join("outbox"), &cfg).unwrap();
        fill(&local, groups, per_group);
        let far = Queue::create_at(dir.0.join("far"), &QueueConfig::new()).unwrap();
        let (opts, cancel) = refusal_options();
        let r = bridge(&local, &refusing_everything(&far), &opts, &mut |_| {});
        assert!(!cancel.load(Ordering::Relaxed), "the bridge did not end");
        match &r {
            Err(Error::Remote { code, message, .. }) => {
                assert_eq!(code, "AWS.SimpleQueueService.SomethingNew");
                assert!(message.contains("in a row"), "{message}");
            }
            r => panic!("{groups} groups: ends with the remote's code: {r:?}"),
        }
        let dead = dlq.attributes().approximate_number_of_messages;
        assert!(moved.contains(&dead), "{groups} groups: {dead} moved");
        let a = local.attributes();
        assert_eq!(
            a.approximate_number_of_messages + a.approximate_number_of_messages_not_visible + dead,
            (groups * per_group) as u64,
            "{groups} groups: every message not moved is still local"
        );
    }
}
