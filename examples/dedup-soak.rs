//! With the default settings (SQS's 5-minute deduplication interval, the
//! default table), a producer sending as fast as it can with a new dedup id per message, and a
//! consumer receiving and deleting, for a given time: no send is refused, memory stays bounded,
//! and the shortened window is reported.
//!
//! ```sh
//! cargo run --release --example dedup-soak -- 600   # seconds (default 10)
//! ```
//!
//! Prints, every 10 s and at the end: sends, sends refused (must stay 0), dedup evictions, the
//! effective deduplication window, the arena size and the process's resident memory.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use shmfifo::{Queue, QueueConfig, ReceiveBuffer, ReceiveOptions, SendMessage};

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

fn main() -> Result<(), shmfifo::Error> {
    let secs: u64 = std::env::args()
        .nth(1)
        .map_or(10, |s| s.parse().expect("seconds"));
    let q = Queue::create_anonymous(&QueueConfig::new())?;
    let stop = Arc::new(AtomicBool::new(false));
    let received = Arc::new(AtomicU64::new(0));
    let consumer = {
        let q = q.clone();
        let stop = stop.clone();
        let received = received.clone();
        std::thread::spawn(move || -> Result<(), shmfifo::Error> {
            let mut buf = ReceiveBuffer::new();
            let opts = ReceiveOptions::max(10).wait(Duration::from_millis(100));
            while !stop.load(Ordering::Relaxed) {
                let n = q.receive_into(&opts, &mut buf)?;
                for m in &buf.messages()[..n] {
                    q.delete(&m.receipt_handle)?;
                }
                received.fetch_add(n as u64, Ordering::Relaxed);
            }
            Ok(())
        })
    };
    let start = Instant::now();
    let mut report = start + Duration::from_secs(10);
    let (mut sent, mut refused, mut full) = (0u64, 0u64, 0u64);
    let mut id = String::new();
    while start.elapsed() < Duration::from_secs(secs) {
        id.clear();
        use std::fmt::Write;
        let _ = write!(id, "id-{sent}-{refused}");
        match q.send(
            &SendMessage::new(
                "g",
                "a 64-byte payload, as in the harness's dedup case ..............",
            )
            .dedup_id(&id),
        ) {
            Ok(_) => sent += 1,
            Err(shmfifo::Error::DedupTableFull { .. }) => refused += 1,
            // The consumer is behind: the queue itself is full (not a dedup refusal).
            Err(shmfifo::Error::SizeClassFull { .. }) => {
                full += 1;
                std::thread::yield_now();
            }
            Err(e) => return Err(e),
        }
        if Instant::now() >= report {
            report += Duration::from_secs(10);
            print_line(&q, start, sent, refused, full, &received);
        }
    }
    stop.store(true, Ordering::Relaxed);
    consumer.join().expect("consumer")?;
    print_line(&q, start, sent, refused, full, &received);
    assert_eq!(refused, 0, "a send was refused for want of dedup room");
    Ok(())
}

fn print_line(q: &Queue, start: Instant, sent: u64, refused: u64, full: u64, received: &AtomicU64) {
    let a = q.attributes();
    let t = start.elapsed().as_secs_f64();
    println!(
        "{t:6.0} s: sent {sent} ({:.0}/s), refused {refused}, queue full {full}, received {}, \
         dedup evictions {}, effective window {:?} (interval {:?}), arena {} MiB, RSS {} MiB",
        sent as f64 / t,
        received.load(Ordering::Relaxed),
        a.dedup_evictions,
        a.effective_deduplication_interval,
        a.deduplication_interval,
        a.arena_bytes >> 20,
        rss_kib() >> 10
    );
}
