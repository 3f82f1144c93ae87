//! Criterion benchmark of the cost of deduplication on `send`.
//!
//! `send/{off,by_id,content}/{64B,4KiB,256KiB}`: one `send` of a body of that size, timed
//! alone, on a queue with deduplication off (the peer of the other two, measured in the same
//! run), with an explicit unique dedup id, and with content-based dedup (SHA-256 of the body,
//! bodies made unique by their first bytes). Sends are timed in chunks; each chunk's messages
//! are then received and deleted untimed, so the queue never fills. The dedup table has the
//! settings users get: the default table (`shmfifo::DEFAULT_DEDUP_ENTRIES`, 16,384 entries) and
//! SQS's 5-minute interval. The table grows (layout 14) as the ids come, up to the size limit
//! (about 8 million ids with the default 1 GiB); a run of a few million ids stays below it, so
//! the figures are those of a producer sending new ids into a growing index. Each fixture
//! prints its evictions and the effective dedup window when it is dropped.
//!
//! ```text
//! cargo bench -p shmfifo-benches --bench dedup             # full run
//! cargo bench -p shmfifo-benches --bench dedup -- --quick  # sanity run
//! ```

use std::time::{Duration, Instant};

mod common;

use common::{base_criterion, quick_mode};
use criterion::{BenchmarkId, Throughput};
use shmfifo::{Deduplication, Queue, QueueConfig, ReceiveBuffer, ReceiveOptions, SendMessage};

/// Body sizes.
const SIZES: [(usize, &str); 3] = [(64, "64B"), (4096, "4KiB"), (262_144, "256KiB")];

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Off,
    ById,
    Content,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Off => "off",
            Mode::ById => "by_id",
            Mode::Content => "content",
        }
    }
}

struct Fixture {
    queue: Queue,
    name: String,
    mode: Mode,
    body: Vec<u8>,
    ids: Vec<String>,
    counter: u64,
    chunk: usize,
    buf: ReceiveBuffer,
}

impl Drop for Fixture {
    fn drop(&mut self) {
        if self.mode != Mode::Off {
            let a = self.queue.attributes();
            eprintln!(
                "dedup {}: {} sends, {} ids evicted early, effective window {:.1?} (interval {:.0?})",
                self.mode.name(),
                self.counter,
                a.dedup_evictions,
                a.effective_deduplication_interval,
                a.deduplication_interval
            );
        }
        let _ = Queue::unlink(&self.name);
    }
}

impl Fixture {
    fn new(mode: Mode, size: usize) -> Fixture {
        let name = format!("shmfifo-bench-dedup-{}-{}", std::process::id(), mode.name());
        let _ = Queue::unlink(&name);
        let mut cfg = QueueConfig::new()
            .maximum_message_size(262_144)
            .max_messages(4096)
            .max_groups(64)
            .deduplication_interval(Duration::from_secs(300));
        cfg = match mode {
            Mode::Off => cfg.deduplication(Deduplication::Off),
            Mode::ById => cfg,
            Mode::Content => cfg.content_based_deduplication(true),
        };
        let queue = Queue::create(&name, &cfg).expect("create bench queue");
        // Slots of the class that holds this size: 4096 >> 2k, at least 4.
        let slots = queue
            .attributes()
            .size_classes
            .iter()
            .find(|&&(cap, _)| cap as usize >= size + 128)
            .map_or(4, |&(_, n)| n as usize);
        Fixture {
            queue,
            name,
            mode,
            body: vec![b'x'; size],
            ids: Vec::new(),
            counter: 0,
            chunk: (slots / 2).clamp(1, 1000),
            buf: ReceiveBuffer::new(),
        }
    }

    /// Sends `n` messages; returns the time spent in `send` alone.
    fn run(&mut self, n: u64) -> Duration {
        let mut spent = Duration::ZERO;
        let mut left = n;
        while left > 0 {
            let k = left.min(self.chunk as u64) as usize;
            self.ids.clear();
            for _ in 0..k {
                self.counter += 1;
                self.ids.push(format!("{:016x}", self.counter));
            }
            let t = Instant::now();
            for id in &self.ids {
                if self.mode == Mode::Content {
                    // Unique bodies: the id in the first 16 bytes (bodies are >= 64 bytes).
                    self.body[..16].copy_from_slice(id.as_bytes());
                }
                // Bodies are ASCII, hence UTF-8.
                let body = std::str::from_utf8(&self.body).expect("ascii");
                let msg = SendMessage::new("g", body);
                let msg = match self.mode {
                    Mode::ById => msg.dedup_id(id),
                    _ => msg,
                };
                let r = self.queue.send(&msg).expect("send");
                debug_assert!(!r.duplicate);
            }
            spent += t.elapsed();
            let opts = ReceiveOptions::max(10);
            let mut got = 0;
            while got < k {
                let m = self
                    .queue
                    .receive_into(&opts, &mut self.buf)
                    .expect("receive");
                assert!(m > 0, "every sent message comes back");
                for msg in self.buf.messages() {
                    self.queue.delete(&msg.receipt_handle).expect("delete");
                }
                got += m;
            }
            left -= k as u64;
        }
        spent
    }
}

fn main() {
    let mut c = base_criterion(quick_mode()).configure_from_args();
    let mut g = c.benchmark_group("send");
    for (size, label) in SIZES {
        g.throughput(Throughput::Bytes(size as u64));
        for mode in [Mode::Off, Mode::ById, Mode::Content] {
            let mut fx = Fixture::new(mode, size);
            g.bench_function(BenchmarkId::new(mode.name(), label), |b| {
                b.iter_custom(|n| fx.run(n))
            });
        }
    }
    g.finish();
    c.final_summary();
}
