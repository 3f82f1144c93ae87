//! `shmfifo-sweeps GROUPS...`: what sweeping costs a receiver as the group table grows
//! (a visibility expiry found in time proportional to what expired, not by looking
//! at every group).
//!
//! For each group count N: an anonymous queue with `max_groups` N (a table of 2N entries),
//! one message sent to each of N groups and received with a one-hour visibility timeout, so
//! that every group is locked. Then, for 3 s, an idle receiver polls every millisecond (each
//! empty receive may run the periodic sweep): the slowest poll and the time spent in polls
//! over 100 µs. Then 10 more groups get messages received with a 1 ms timeout; once it ended,
//! the time of the one receive that finds and takes them again. Last, on a fresh queue, N
//! groups each get a message received with a 2 s timeout and deleted at once (a busy queue's
//! wheel: every group filed, every filing stale); once the timeouts would have ended, the
//! slowest of the polls that sweep the stale filings away.
//!
//! ```text
//! cargo run --release -p shmfifo-benches --bin shmfifo-sweeps -- 4096 100000 1000000
//! ```

use std::time::{Duration, Instant};

use shmfifo::{Deduplication, Queue, QueueConfig, ReceiveBuffer, ReceiveOptions, SendMessage};

fn main() {
    let counts: Vec<u32> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("GROUPS: numbers of groups"))
        .collect();
    if counts.is_empty() {
        eprintln!("usage: shmfifo-sweeps GROUPS...   (e.g. 4096 100000 1000000)");
        std::process::exit(2);
    }
    println!("| groups | idle polls | slowest idle poll | time in polls > 100 µs | receive that finds 10 expiries | slowest poll sweeping N stale filings |");
    println!("|---|---|---|---|---|---|");
    for n in counts {
        run(n);
    }
}

fn config(n: u32) -> QueueConfig {
    let limit = QueueConfig::new().stored_size_limit();
    QueueConfig::new()
        .deduplication(Deduplication::Off)
        .max_groups(n + 16)
        .max_in_flight(2 * n + 8_192)
        .size_classes(vec![(192, 2 * n + 4_096), (limit, 4)])
}

fn run(n: u32) {
    let q = Queue::create_anonymous(&config(n)).expect("create");
    for g in 0..n {
        q.send(&SendMessage::new(&format!("g{g}"), "x"))
            .expect("send");
    }
    let mut buf = ReceiveBuffer::new();
    let hour = ReceiveOptions::max(10)
        .wait(Duration::ZERO)
        .visibility_timeout(Duration::from_secs(3_600));
    let mut got = 0;
    while got < n as usize {
        let k = q.receive_into(&hour, &mut buf).expect("receive");
        assert!(k > 0, "every message is received once");
        got += k;
    }
    let (mut polls, mut worst, mut slow) = (0u64, Duration::ZERO, Duration::ZERO);
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(3) {
        let t = Instant::now();
        assert_eq!(q.receive_into(&hour, &mut buf).expect("poll"), 0);
        let d = t.elapsed();
        polls += 1;
        worst = worst.max(d);
        if d > Duration::from_micros(100) {
            slow += d;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    for g in 0..10 {
        q.send(&SendMessage::new(&format!("e{g}"), "x"))
            .expect("send");
    }
    let brief = ReceiveOptions::max(10)
        .wait(Duration::ZERO)
        .visibility_timeout(Duration::from_millis(1));
    assert_eq!(q.receive_into(&brief, &mut buf).expect("receive"), 10);
    std::thread::sleep(Duration::from_millis(5));
    let t = Instant::now();
    let again = q.receive_into(&hour, &mut buf).expect("receive again");
    let expiry = t.elapsed();
    assert_eq!(again, 10, "the expired messages come back");
    drop(q);
    let stale = stale(n);
    println!("| {n} | {polls} | {worst:.1?} | {slow:.1?} over 3 s | {expiry:.1?} | {stale:.1?} |");
}

/// N groups filed on the wheel and then deleted; the slowest poll over the second after their
/// timeouts would have ended.
fn stale(n: u32) -> Duration {
    let q = Queue::create_anonymous(&config(n)).expect("create");
    let mut buf = ReceiveBuffer::new();
    let two = ReceiveOptions::max(10)
        .wait(Duration::ZERO)
        .visibility_timeout(Duration::from_secs(2));
    let mut handles = Vec::with_capacity(10);
    let mut done = 0;
    let mut g = 0;
    while done < n {
        while g < n && g < done + 10_000 {
            q.send(&SendMessage::new(&format!("g{g}"), "x"))
                .expect("send");
            g += 1;
        }
        let k = q.receive_into(&two, &mut buf).expect("receive");
        assert!(k > 0, "every message is received once");
        handles.clear();
        handles.extend(buf.messages().iter().map(|m| m.receipt_handle));
        for r in q.delete_handles(&handles).expect("delete") {
            r.expect("deleted");
        }
        done += k as u32;
    }
    std::thread::sleep(Duration::from_millis(2_500));
    let mut worst = Duration::ZERO;
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(1) {
        let t = Instant::now();
        assert_eq!(q.receive_into(&two, &mut buf).expect("poll"), 0);
        worst = worst.max(t.elapsed());
        std::thread::sleep(Duration::from_millis(1));
    }
    worst
}
