//! Multi-process demo: creates a default queue under /dev/shm (`QueueConfig::new()`: 16.7 MiB,
//! growing as it needs; it runs in a container's default 64 MiB), starts producer and consumer processes
//! (this example again, in its worker modes), checks per-group order and exactly-once deletion,
//! prints the throughput and removes the queue. Options: `--producers N --consumers N
//! --groups N --messages N`.
//!
//! ```sh
//! cargo run --release --example shmfifo-demo
//! ```

#[path = "../tests/worker/roles.rs"]
mod roles;

use std::process::Child;
use std::time::Instant;

use roles::{collect, parse, spawn, verify, Report};
use shmfifo::{Queue, QueueConfig};

fn demo(args: &[String]) -> Result<(), String> {
    let opt = |name: &str, default: u64| -> u64 {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .map_or(default, |v| v.parse().expect(name))
    };
    let producers = opt("--producers", 4);
    let consumers = opt("--consumers", 4);
    let groups = opt("--groups", 1000);
    let messages = opt("--messages", 200_000);
    let name = format!("shmfifo-demo-{}", std::process::id());
    // A default queue (16.7 MiB, three fit a container's 64 MiB /dev/shm): every message has
    // its own dedup id, remembered for SQS's 5 minutes, and the dedup table and the slots grow
    // as the ids, the backlog and the groups need (up to the size limit), or the producers wait
    // for room.
    let cfg = QueueConfig::new();
    let q = Queue::create(&name, &cfg).map_err(|e| e.to_string())?;
    println!(
        "shmfifo demo: {producers} producer and {consumers} consumer processes, {} groups, {messages} messages, queue /dev/shm/{name}",
        groups
    );
    let per = messages / producers;
    let gpp = (groups / producers).max(1);
    let start = Instant::now();
    let log = |role: &str, i: u64| format!("/tmp/{name}.{role}{i}.log");
    let cons: Vec<(Child, String)> = (0..consumers)
        .map(|i| {
            (
                spawn(
                    &["consume".into(), name.clone(), "30000".into()],
                    &log("c", i),
                ),
                log("c", i),
            )
        })
        .collect();
    let prods: Vec<(Child, String)> = (0..producers)
        .map(|i| {
            let args = [
                "produce".into(),
                name.clone(),
                i.to_string(),
                gpp.to_string(),
                per.to_string(),
            ];
            (spawn(&args, &log("p", i)), log("p", i))
        })
        .collect();
    let mut report = Report::default();
    for (p, l) in prods {
        parse(&mut report, &collect(p, &l));
    }
    let sent_at = start.elapsed();
    std::fs::write(format!("/dev/shm/{name}.done"), b"").map_err(|e| e.to_string())?;
    for (c, l) in cons {
        parse(&mut report, &collect(c, &l));
    }
    let elapsed = start.elapsed();
    let _ = std::fs::remove_file(format!("/dev/shm/{name}.done"));
    let attrs = q.attributes();
    drop(q);
    let _ = Queue::unlink(&name);
    let problems = verify(&report);
    let total = report.acked.len();
    println!(
        "sent {total} in {:.2?}, delivered and deleted {} in {:.2?}: {:.0} messages/s end to end",
        sent_at,
        report.deleted.len(),
        elapsed,
        total as f64 / elapsed.as_secs_f64()
    );
    println!(
        "left in queue: {} visible, {} in flight",
        attrs.approximate_number_of_messages, attrs.approximate_number_of_messages_not_visible
    );
    if problems.is_empty() && total as u64 == per * producers {
        println!("OK: per-group order kept, every message deleted exactly once");
        Ok(())
    } else {
        Err(format!("FAILED: {}", problems.join("; ")))
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let r = roles::dispatch(&args).unwrap_or_else(|| demo(&args));
    if let Err(e) = r {
        eprintln!("{e}");
        std::process::exit(1);
    }
}
