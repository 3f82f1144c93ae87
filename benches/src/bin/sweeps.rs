//! `shmfifo-sweeps GROUPS...`: what sweeping costs a receiver as the group table grows
//! (issue 14: a visibility expiry found in time proportional to what expired, not by looking
//! at every group).
//!
//! For each group count N: an anonymous queue with `max_groups` N (a table of 2N entries),
//! one message sent to each of N groups and received with a one-hour visibility timeout, so
//! that every group is locked. Then, for 3 s, an idle receiver polls every millisecond (each
//! empty receive may run the periodic sweep): the slowest poll and the time spent in polls
//! over 100 µs. Last, 10 more groups get messages received with a 1 ms timeout; once it ended,
//! the time of the one receive that finds and takes them again.
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
    println!("| groups locked | idle polls | slowest idle poll | time in polls > 100 µs | receive that finds 10 expiries |");
    println!("|---|---|---|---|---|");
    for n in counts {
        run(n);
    }
}

fn run(n: u32) {
    let limit = QueueConfig::new().stored_size_limit();
    let cfg = QueueConfig::new()
        .deduplication(Deduplication::Off)
        .max_groups(n + 16)
        .max_in_flight(2 * n + 8_192)
        .size_classes(vec![(192, 2 * n + 4_096), (limit, 4)]);
    let q = Queue::create_anonymous(&cfg).expect("create");
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
    println!("| {n} | {polls} | {worst:.1?} | {slow:.1?} over 3 s | {expiry:.1?} |");
}
