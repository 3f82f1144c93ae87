//! Criterion benchmarks of the public queue API.
//!
//! * `inproc/per_message/G`: one `send` (64-byte body), one `receive` (max 1, no wait) and one
//!   `delete`, in one process, with G = 1, 1,000 or 1,000,000 message groups. Sends go
//!   round-robin over the groups and the queue holds a steady backlog of one message per group
//!   (at least one), so every receive finds work and the group table holds G active groups.
//! * `inproc/per_batch_10/G`: `send_batch` of 10 (10 consecutive groups of the round robin),
//!   `receive` of max 10, `delete` of each; the backlog is at least 10 messages. Criterion's
//!   time is per batch; its throughput line counts messages.
//! * `pingpong/round_trip/{spin,sleep,longpoll_busy}`: two processes. This binary re-executes
//!   itself as an echo peer (see [`PEER_ENV`]) that receives from `ping`, sends the body to
//!   `pong` and deletes; the bench times `send(ping)` → `receive(pong)` → `delete`. `spin`: both
//!   sides poll with a zero wait in a loop. `sleep`: both long-poll with a 1 s wait and the bench
//!   idles 100 µs (untimed) before each ping, so both are asleep on the futex when their message
//!   comes (two futex wake-ups per round trip). `longpoll_busy`: 1 s wait, back to back (the
//!   library's short spin before sleeping usually catches the message). After criterion's run,
//!   a fixed number of round trips is timed one by one into an HdrHistogram whose percentiles
//!   are printed to stdout, with both processes' context switches per round trip (from
//!   `/proc`), which show whether the receivers really slept.
//!
//! Quick sanity mode (`-- --quick`, or `SHMFIFO_BENCH_QUICK=1`): small samples and short
//! times, the whole file runs in seconds. Queue names carry the pid and are unlinked after
//! each case.
//!
//! ```text
//! cargo bench -p shmfifo-benches                      # everything
//! cargo bench -p shmfifo-benches -- --quick           # sanity run
//! cargo bench -p shmfifo-benches -- pingpong          # one group (criterion filter)
//! ```

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod common;

use common::{base_criterion, quick_mode};
use criterion::{BenchmarkId, Criterion, Throughput};
use hdrhistogram::Histogram;
use shmfifo::{
    BatchEntry, Deduplication, Queue, QueueConfig, ReceiveBuffer, ReceiveOptions, SendMessage,
};
use shmfifo_benches::ctx_switches;

/// The message body: 64 bytes.
const BODY: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
/// What the bench sends to make the echo peer exit.
const QUIT: &str = "quit";
/// Entries of a batch (the SQS maximum).
const BATCH: usize = 10;
/// Batch entry ids.
const IDS: [&str; BATCH] = ["0", "1", "2", "3", "4", "5", "6", "7", "8", "9"];
/// Group counts of the in-process cases.
const GROUP_COUNTS: [u32; 3] = [1, 1_000, 1_000_000];
/// Group of the ping-pong messages.
const PING_GROUP: &str = "pp";

/// Set (to anything) in the environment of the re-executed echo peer.
const PEER_ENV: &str = "SHMFIFO_BENCH_ECHO_PEER";
const PEER_PING_ENV: &str = "SHMFIFO_BENCH_PING";
const PEER_PONG_ENV: &str = "SHMFIFO_BENCH_PONG";
const PEER_WAIT_ENV: &str = "SHMFIFO_BENCH_WAIT_MS";
const PEER_PARENT_ENV: &str = "SHMFIFO_BENCH_PARENT";
/// The echo peer exits after this long without a message.
const PEER_IDLE_EXIT: Duration = Duration::from_secs(60);
/// The bench gives up on a reply after this long.
const REPLY_TIMEOUT: Duration = Duration::from_secs(10);
/// Polls (zero wait) between liveness checks of a spinning receiver (a power of two; a mask,
/// not `is_multiple_of`, which is newer than the workspace's rust-version).
const SPIN_CHECK_EVERY: u64 = 1 << 14;

fn main() {
    if std::env::var_os(PEER_ENV).is_some() {
        echo_peer();
    }
    let quick = quick_mode();
    let mut c = base_criterion(quick).configure_from_args();
    inproc(&mut c);
    pingpong(&mut c, quick);
    c.final_summary();
}

/// A queue under `/dev/shm` with a pid-unique name, unlinked on drop.
struct NamedQueue {
    queue: Queue,
    name: String,
}

impl NamedQueue {
    fn create(tag: &str, cfg: &QueueConfig) -> NamedQueue {
        let name = format!("shmfifo-bench-{}-{tag}", std::process::id());
        // A leftover of an earlier run of this pid (pids get reused): ours to replace.
        let _ = Queue::unlink(&name);
        let queue = Queue::create(&name, cfg)
            .unwrap_or_else(|e| panic!("creating queue {name} under /dev/shm: {e}"));
        NamedQueue { queue, name }
    }
}

impl Drop for NamedQueue {
    fn drop(&mut self) {
        let _ = Queue::unlink(&self.name);
    }
}

/// A config for `groups` groups and up to `backlog` messages waiting, small size classes
/// (64-byte bodies all go to the first class; the last class is only there because it must
/// hold a maximum-size message).
fn config(groups: u32, backlog: usize) -> QueueConfig {
    let cfg = QueueConfig::new()
        .deduplication(Deduplication::Off)
        .max_groups(groups.max(4_096));
    // The backlog, a batch in flight, and one list-head slot per group whose head was consumed.
    let slots = backlog + groups as usize + 2 * BATCH + 1_024;
    let slots = u32::try_from(slots).expect("slot count fits u32");
    let last = cfg.stored_size_limit();
    cfg.size_classes(vec![(192, slots), (last, 16)])
}

// ---------------------------------------------------------------------------------------------
// In-process
// ---------------------------------------------------------------------------------------------

/// One in-process case: a queue with a backlog, and the round-robin cursor over its groups.
struct InProc {
    nq: NamedQueue,
    groups: Vec<String>,
    next: usize,
    buf: ReceiveBuffer,
    batches: u64,
    receives: u64,
}

impl InProc {
    /// A queue for `groups` groups, holding `max(groups, min_backlog)` messages sent
    /// round-robin.
    fn new(tag: &str, groups: u32, min_backlog: usize) -> InProc {
        let backlog = (groups as usize).max(min_backlog);
        let t = Instant::now();
        let nq = NamedQueue::create(tag, &config(groups, backlog));
        let bytes = std::fs::metadata(format!("/dev/shm/{}", nq.name)).map_or(0, |m| m.len());
        let mut fx = InProc {
            nq,
            groups: (0..groups).map(|g| format!("g{g}")).collect(),
            next: 0,
            buf: ReceiveBuffer::new(),
            batches: 0,
            receives: 0,
        };
        for _ in 0..backlog {
            let g = fx.next_group();
            fx.nq
                .queue
                .send(&SendMessage::new(&fx.groups[g], BODY))
                .expect("prefill send");
        }
        println!(
            "  [{tag}: {groups} groups, arena {:.1} MiB, {backlog} messages prefilled, \
             set up in {:.2} s]",
            bytes as f64 / (1 << 20) as f64,
            t.elapsed().as_secs_f64()
        );
        fx
    }

    fn next_group(&mut self) -> usize {
        let g = self.next;
        self.next += 1;
        if self.next == self.groups.len() {
            self.next = 0;
        }
        g
    }

    /// `iters` × (send, receive 1, delete).
    fn run_per_message(&mut self, iters: u64) -> Duration {
        let opts = ReceiveOptions::max(1).wait(Duration::ZERO);
        let start = Instant::now();
        for _ in 0..iters {
            let g = self.next_group();
            let q = &self.nq.queue;
            q.send(&SendMessage::new(&self.groups[g], BODY))
                .expect("send");
            let n = q.receive_into(&opts, &mut self.buf).expect("receive");
            assert_eq!(n, 1, "the backlog ran dry");
            q.delete(&self.buf.messages()[0].receipt_handle)
                .expect("delete");
        }
        start.elapsed()
    }

    /// `iters` × (send_batch of 10, receive max 10, delete each). Receives again if a receive
    /// returns fewer than 10 (it should not with the backlog), so the backlog stays steady;
    /// such extra receives are counted and reported.
    fn run_per_batch(&mut self, iters: u64) -> Duration {
        let len = self.groups.len();
        let start = Instant::now();
        for _ in 0..iters {
            let q = &self.nq.queue;
            let first = self.next;
            let entries: [BatchEntry<'_, SendMessage<'_>>; BATCH] =
                std::array::from_fn(|k| BatchEntry {
                    id: IDS[k],
                    entry: SendMessage::new(&self.groups[(first + k) % len], BODY),
                });
            self.next = (first + BATCH) % len;
            for r in q.send_batch(&entries).expect("send_batch") {
                if let Err(e) = r.result {
                    panic!("send_batch entry {}: {e}", r.id);
                }
            }
            let mut got = 0;
            while got < BATCH {
                let opts = ReceiveOptions::max((BATCH - got) as u32).wait(Duration::ZERO);
                let n = q.receive_into(&opts, &mut self.buf).expect("receive");
                assert!(n > 0, "the backlog ran dry");
                self.receives += 1;
                for m in self.buf.messages() {
                    q.delete(&m.receipt_handle).expect("delete");
                }
                got += n;
            }
            self.batches += 1;
        }
        start.elapsed()
    }
}

impl Drop for InProc {
    fn drop(&mut self) {
        if self.batches > 0 && self.receives != self.batches {
            println!(
                "  [{}: {:.3} receives per batch]",
                self.nq.name,
                self.receives as f64 / self.batches as f64
            );
        }
    }
}

fn inproc(c: &mut Criterion) {
    let mut g = c.benchmark_group("inproc");
    for groups in GROUP_COUNTS {
        // Fixtures are made on first use, so a filtered-out case costs nothing, and dropped
        // (unlinked) right after their case.
        g.throughput(Throughput::Elements(1));
        let mut fx: Option<InProc> = None;
        g.bench_function(BenchmarkId::new("per_message", groups), |b| {
            let f = fx.get_or_insert_with(|| InProc::new(&format!("msg-{groups}"), groups, 1));
            b.iter_custom(|iters| f.run_per_message(iters));
        });
        drop(fx);

        g.throughput(Throughput::Elements(BATCH as u64));
        let mut fx: Option<InProc> = None;
        g.bench_function(BenchmarkId::new("per_batch_10", groups), |b| {
            let f =
                fx.get_or_insert_with(|| InProc::new(&format!("batch-{groups}"), groups, BATCH));
            b.iter_custom(|iters| f.run_per_batch(iters));
        });
        drop(fx);
    }
    // The churn case: a new group id per message (SQS's advice for deduplication without
    // ordering). Send, receive, delete, each message in a group never seen before, after the
    // default-sized group table has been cycled through several times (dedup off, so that the
    // figure is the group table's alone).
    g.throughput(Throughput::Elements(1));
    let mut fx: Option<(NamedQueue, u64)> = None;
    g.bench_function("new_group_per_message", |b| {
        let (q, n) = fx.get_or_insert_with(|| {
            let cfg = QueueConfig::new().deduplication(Deduplication::Off);
            let q = NamedQueue::create("newgroup", &cfg);
            let slots = 2 * q.queue.attributes().max_groups;
            let mut n = 0;
            // Cycle the table: every entry used at least once (no FREE entry left).
            while n < 4 * slots {
                new_group_round_trip(&q.queue, n);
                n += 1;
            }
            (q, n)
        });
        b.iter_custom(|iters| {
            let t = Instant::now();
            for _ in 0..iters {
                new_group_round_trip(&q.queue, *n);
                *n += 1;
            }
            t.elapsed()
        });
    });
    drop(fx);
    g.finish();
}

/// Sends one 64-byte message to group `g{n}`, receives and deletes it.
fn new_group_round_trip(q: &Queue, n: u64) {
    let group = format!("g{n}");
    q.send(&SendMessage::new(&group, &"x".repeat(64)))
        .expect("send");
    let got = q
        .receive(&ReceiveOptions::max(1).wait(Duration::ZERO))
        .expect("receive");
    for m in &got {
        q.delete(&m.receipt_handle).expect("delete");
    }
}

// ---------------------------------------------------------------------------------------------
// Two-process ping-pong
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy)]
enum Mode {
    /// Receivers poll with a zero wait in a loop; round trips back to back.
    Spin,
    /// Receivers long-poll (1 s wait) and the bench idles [`SLEEP_GAP`] (busy, untimed) before
    /// each ping, longer than the library's pre-sleep spin: both receivers are asleep on the
    /// futex when their message arrives, so a round trip includes two futex wake-ups.
    Sleep,
    /// Receivers long-poll (1 s wait); round trips back to back. The library's short spin
    /// before sleeping usually catches the next message, so this is mostly the spin path.
    LongPollBusy,
}

/// Idle time before each ping in [`Mode::Sleep`].
const SLEEP_GAP: Duration = Duration::from_micros(100);

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Spin => "spin",
            Mode::Sleep => "sleep",
            Mode::LongPollBusy => "longpoll_busy",
        }
    }
    fn wait(self) -> Duration {
        match self {
            Mode::Spin => Duration::ZERO,
            Mode::Sleep | Mode::LongPollBusy => Duration::from_secs(1),
        }
    }
    fn gap(self) -> Option<Duration> {
        match self {
            Mode::Sleep => Some(SLEEP_GAP),
            Mode::Spin | Mode::LongPollBusy => None,
        }
    }
}

/// Busy-waits `d` (a sleep would itself be a context switch, muddying the counts).
fn idle(d: Duration) {
    let t = Instant::now();
    while t.elapsed() < d {
        std::hint::spin_loop();
    }
}

/// The two queues and the echo peer process. Dropping it stops the peer and unlinks the queues.
struct PingPong {
    ping: NamedQueue,
    pong: NamedQueue,
    child: Option<Child>,
    opts: ReceiveOptions,
    spin: bool,
    gap: Option<Duration>,
    buf: ReceiveBuffer,
}

impl PingPong {
    fn start(mode: Mode) -> PingPong {
        let cfg = QueueConfig::new().deduplication(Deduplication::Off);
        let ping = NamedQueue::create(&format!("ping-{}", mode.name()), &cfg);
        let pong = NamedQueue::create(&format!("pong-{}", mode.name()), &cfg);
        let exe = std::env::current_exe().expect("current_exe");
        let child = Command::new(exe)
            .env(PEER_ENV, "1")
            .env(PEER_PING_ENV, &ping.name)
            .env(PEER_PONG_ENV, &pong.name)
            .env(PEER_WAIT_ENV, mode.wait().as_millis().to_string())
            .env(PEER_PARENT_ENV, std::process::id().to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawning the echo peer");
        let mut pp = PingPong {
            ping,
            pong,
            child: Some(child),
            opts: ReceiveOptions::max(1).wait(mode.wait()),
            spin: matches!(mode, Mode::Spin),
            gap: mode.gap(),
            buf: ReceiveBuffer::new(),
        };
        // The first round trip also waits for the peer to start and open the queues.
        for _ in 0..1_000 {
            pp.round_trip();
        }
        pp
    }

    /// send(ping) → receive(pong) → delete.
    fn round_trip(&mut self) {
        self.ping
            .queue
            .send(&SendMessage::new(PING_GROUP, BODY))
            .expect("send ping");
        let mut polls = 0u64;
        let mut since: Option<Instant> = None;
        loop {
            let n = self
                .pong
                .queue
                .receive_into(&self.opts, &mut self.buf)
                .expect("receive pong");
            if n > 0 {
                break;
            }
            polls += 1;
            if !self.spin || polls & (SPIN_CHECK_EVERY - 1) == 0 {
                let t = *since.get_or_insert_with(Instant::now);
                self.check_peer(t);
            }
        }
        let m = &self.buf.messages()[0];
        assert_eq!(m.body, BODY, "the echo peer returned another body");
        self.pong
            .queue
            .delete(&m.receipt_handle)
            .expect("delete pong");
    }

    fn check_peer(&mut self, waiting_since: Instant) {
        if let Some(child) = &mut self.child {
            if let Ok(Some(st)) = child.try_wait() {
                self.child = None;
                panic!("the echo peer exited ({st}) during the benchmark");
            }
        }
        assert!(
            waiting_since.elapsed() < REPLY_TIMEOUT,
            "no reply from the echo peer within {REPLY_TIMEOUT:?}"
        );
    }

    /// `iters` round trips: timed as a whole, or one by one leaving the idle gaps out.
    fn run(&mut self, iters: u64) -> Duration {
        let Some(gap) = self.gap else {
            let start = Instant::now();
            for _ in 0..iters {
                self.round_trip();
            }
            return start.elapsed();
        };
        let mut total = Duration::ZERO;
        for _ in 0..iters {
            idle(gap);
            let t = Instant::now();
            self.round_trip();
            total += t.elapsed();
        }
        total
    }

    /// `n` round trips, each timed into a histogram (ns), and the context switches of both
    /// processes over them.
    fn histogram(&mut self, n: u64) -> (Histogram<u64>, Option<Switches>) {
        let mut h = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).expect("histogram");
        let me = std::process::id();
        let peer = self.child.as_ref().map_or(0, Child::id);
        let before = ctx_switches(me).zip(ctx_switches(peer));
        for _ in 0..n {
            if let Some(gap) = self.gap {
                idle(gap);
            }
            let t = Instant::now();
            self.round_trip();
            h.saturating_record(t.elapsed().as_nanos() as u64);
        }
        let after = ctx_switches(me).zip(ctx_switches(peer));
        let per = |a: u64, b: u64| (b - a) as f64 / n as f64;
        let sw = before.zip(after).map(|((b0, b1), (a0, a1))| Switches {
            bench: (per(b0.0, a0.0), per(b0.1, a0.1)),
            peer: (per(b1.0, a1.0), per(b1.1, a1.1)),
        });
        (h, sw)
    }
}

/// Context switches per round trip, `(voluntary, involuntary)`.
struct Switches {
    bench: (f64, f64),
    peer: (f64, f64),
}

impl Drop for PingPong {
    fn drop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let _ = self.ping.queue.send(&SendMessage::new(PING_GROUP, QUIT));
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            match child.try_wait() {
                Ok(Some(_)) => return,
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(5))
                }
                _ => break,
            }
        }
        eprintln!("the echo peer did not quit; killing it");
        let _ = child.kill();
        let _ = child.wait();
    }
}

fn pingpong(c: &mut Criterion, quick: bool) {
    let mut g = c.benchmark_group("pingpong");
    for mode in [Mode::Spin, Mode::Sleep, Mode::LongPollBusy] {
        let hist_n: u64 = match (quick, mode) {
            (true, _) => 2_000,
            (false, Mode::Sleep) => 50_000,
            (false, _) => 100_000,
        };
        let mut pp: Option<PingPong> = None;
        g.bench_function(BenchmarkId::new("round_trip", mode.name()), |b| {
            let p = pp.get_or_insert_with(|| PingPong::start(mode));
            b.iter_custom(|iters| p.run(iters));
        });
        if let Some(p) = &mut pp {
            let (h, sw) = p.histogram(hist_n);
            let us = |ns: u64| ns as f64 / 1_000.0;
            println!(
                "pingpong/round_trip/{}: hdrhistogram over {} round trips (µs): \
                 p50 {:.2}  p90 {:.2}  p99 {:.2}  p99.9 {:.2}  max {:.2}  mean {:.2}",
                mode.name(),
                h.len(),
                us(h.value_at_quantile(0.50)),
                us(h.value_at_quantile(0.90)),
                us(h.value_at_quantile(0.99)),
                us(h.value_at_quantile(0.999)),
                us(h.max()),
                h.mean() / 1_000.0,
            );
            if let Some(sw) = sw {
                println!(
                    "pingpong/round_trip/{}: context switches per round trip \
                     (voluntary/involuntary): bench {:.2}/{:.2}, echo peer {:.2}/{:.2}",
                    mode.name(),
                    sw.bench.0,
                    sw.bench.1,
                    sw.peer.0,
                    sw.peer.1,
                );
            }
        }
        drop(pp);
    }
    g.finish();
}

/// The echo peer: receive from ping, send the body to pong, delete; exit on [`QUIT`], when the
/// bench process is gone (unlinking the two queues it left), or after [`PEER_IDLE_EXIT`]
/// without a message.
fn echo_peer() -> ! {
    let var = |k: &str| std::env::var(k).unwrap_or_else(|_| panic!("echo peer: {k} unset"));
    let ping = Queue::open(&var(PEER_PING_ENV)).expect("echo peer: open ping");
    let pong = Queue::open(&var(PEER_PONG_ENV)).expect("echo peer: open pong");
    let wait = Duration::from_millis(var(PEER_WAIT_ENV).parse().expect("wait ms"));
    let parent: u32 = var(PEER_PARENT_ENV).parse().expect("parent pid");
    let opts = ReceiveOptions::max(1).wait(wait);
    let mut buf = ReceiveBuffer::new();
    let mut idle_since: Option<Instant> = None;
    let mut polls = 0u64;
    loop {
        let n = ping
            .receive_into(&opts, &mut buf)
            .expect("echo peer: receive");
        if n == 0 {
            polls += 1;
            if !wait.is_zero() || polls & (SPIN_CHECK_EVERY - 1) == 0 {
                if std::os::unix::process::parent_id() != parent {
                    // The bench died without cleaning up: its queues are ours to remove.
                    let _ = Queue::unlink(&var(PEER_PING_ENV));
                    let _ = Queue::unlink(&var(PEER_PONG_ENV));
                    std::process::exit(2);
                }
                let t = *idle_since.get_or_insert_with(Instant::now);
                if t.elapsed() > PEER_IDLE_EXIT {
                    std::process::exit(3);
                }
            }
            continue;
        }
        idle_since = None;
        for m in buf.messages() {
            if m.body == QUIT {
                let _ = ping.delete(&m.receipt_handle);
                std::process::exit(0);
            }
            pong.send(&SendMessage::new(&m.group_id, &m.body))
                .expect("echo peer: send");
            ping.delete(&m.receipt_handle).expect("echo peer: delete");
        }
    }
}
