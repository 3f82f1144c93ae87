//! `shmfifo-growth [ROUNDS]`: what an arena that grows costs (layout 13).
//!
//! 1. **The send that adds a segment.** A default queue (deduplication off) is filled with
//!    64-byte messages and no consumer: each send that finds the small class full adds a segment
//!    as large as all its slots so far (`fallocate`, a new mapping, its first pages touched). Printed: the
//!    time of each such send, beside the median send around it.
//! 2. **The steady state after growth.** Two queues each hold 4 × 8,192 small slots: one grew to
//!    it (created at the default 8,192, filled to 32,768 and drained: its producer now takes
//!    slots of the added segments), one was created with them (`max_messages(32768)`, filled
//!    and drained the same way). Then, alternating in `ROUNDS` rounds (default 20) so that the
//!    VM's drift hits both alike, each runs 20,000 send + receive + delete of a 64-byte message
//!    in one group; printed: the median time per message of each and their ratio, paired by
//!    round.
//!
//! 3. **Groups (layout 16).** The same pairing for the group table: a queue whose base table
//!    holds the default 4,096 groups, grown to 32,768 (three added tables), against one created
//!    with `max_groups(32768)`, both with room for 65,536 small messages (no size class grows)
//!    and one message in each of the 32,768 groups; then each runs 20,000 rounds of a send to
//!    the next group in turn, a receive of one message and its delete (every group keeps a
//!    backlog: looked up, never inserted; the grown queue's groups spread over four tables,
//!    each with its own ready ring).
//!    Printed before it: the sends that added a group table, against the median new-group send
//!    before them.
//!
//! ```text
//! cargo run --release -p shmfifo-benches --bin shmfifo-growth
//! ```

use std::time::{Duration, Instant};

use shmfifo::{Deduplication, Queue, QueueConfig, ReceiveBuffer, ReceiveOptions, SendMessage};

const BODY: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
const BASE: usize = 8_192;

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .map_or(20, |a| a.parse().expect("ROUNDS: a number"));
    growth_sends();
    steady_state(rounds);
    group_growth_sends();
    group_steady_state(rounds);
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn growth_sends() {
    let q = Queue::create_anonymous(&QueueConfig::new().deduplication(Deduplication::Off))
        .expect("create");
    let base = q.size();
    println!(
        "A default queue: base file {:.1} MiB, size limit {:.0} MiB",
        base.base_bytes as f64 / (1 << 20) as f64,
        base.limit_bytes as f64 / (1 << 20) as f64
    );
    println!("| segment | slots after | file after | the send that grew | median send (the 1,000 before) |");
    println!("|---|---|---|---|---|");
    let mut times: Vec<f64> = Vec::new();
    let mut grows = 0;
    let mut slots = BASE;
    while grows < 5 {
        let before = q.size().grows;
        let t = Instant::now();
        q.send(&SendMessage::new("g", BODY)).expect("send");
        let dt = t.elapsed().as_secs_f64() * 1e6;
        if q.size().grows > before {
            grows += 1;
            slots *= 2;
            let k = times.len().saturating_sub(1_000);
            let m = median(&mut times[k..].to_vec());
            println!(
                "| {grows} | {slots} | {:.1} MiB | {dt:.0} µs | {m:.2} µs |",
                q.size().bytes as f64 / (1 << 20) as f64
            );
        }
        times.push(dt);
    }
}

/// Fills `q` with `n` messages to group "fill", then receives and deletes them all.
fn fill_and_drain(q: &Queue, n: usize) {
    for _ in 0..n {
        q.send(&SendMessage::new("fill", BODY)).expect("fill");
    }
    let mut buf = ReceiveBuffer::new();
    let ten = ReceiveOptions::max(10).wait(Duration::ZERO);
    let mut left = n;
    while left > 0 {
        let k = q.receive_into(&ten, &mut buf).expect("drain");
        assert!(k > 0, "{left} left, none visible");
        let handles: Vec<_> = buf.messages().iter().map(|m| m.receipt_handle).collect();
        for r in q.delete_handles(&handles).expect("delete") {
            r.expect("deleted");
        }
        left -= k;
    }
}

/// ns per send + receive + delete of one message, over `n`.
fn per_message(q: &Queue, n: usize) -> f64 {
    let mut buf = ReceiveBuffer::new();
    let one = ReceiveOptions::max(1).wait(Duration::ZERO);
    let t = Instant::now();
    for _ in 0..n {
        q.send(&SendMessage::new("g", BODY)).expect("send");
        assert_eq!(q.receive_into(&one, &mut buf).expect("receive"), 1);
        q.delete(&buf.messages()[0].receipt_handle).expect("delete");
    }
    t.elapsed().as_secs_f64() * 1e9 / n as f64
}

fn steady_state(rounds: usize) {
    let off = QueueConfig::new().deduplication(Deduplication::Off);
    let grown = Queue::create_anonymous(&off).expect("create");
    fill_and_drain(&grown, 4 * BASE);
    let made = Queue::create_anonymous(&off.clone().max_messages(4 * BASE as u32)).expect("create");
    fill_and_drain(&made, 4 * BASE);
    assert!(grown.size().grows >= 2 && made.size().grows == 0);
    let (mut g, mut m, mut r) = (Vec::new(), Vec::new(), Vec::new());
    for k in 0..rounds {
        // Alternate which goes first, so that neither always runs warmer.
        let (a, b) = if k % 2 == 0 {
            let a = per_message(&grown, 20_000);
            (a, per_message(&made, 20_000))
        } else {
            let b = per_message(&made, 20_000);
            (per_message(&grown, 20_000), b)
        };
        g.push(a);
        m.push(b);
        r.push(a / b);
    }
    println!();
    println!("| 32,768 small slots | median per message (send + receive + delete, 64 B) |");
    println!("|---|---|");
    println!(
        "| grown to them (added segments) | {:.0} ns |",
        median(&mut g)
    );
    println!("| created with them | {:.0} ns |", median(&mut m));
    println!(
        "| ratio grown / created, median of {rounds} paired rounds | {:.3} |",
        median(&mut r)
    );
}

/// Groups of the group-table pairing: the base table of a default queue holds 4,096.
const GROUPS: usize = 32_768;

fn group_name(i: usize) -> String {
    format!("group-{i:06}")
}

fn group_growth_sends() {
    let q = Queue::create_anonymous(&QueueConfig::new().deduplication(Deduplication::Off))
        .expect("create");
    println!();
    println!(
        "A default queue's group table: room for {} groups, at most {}",
        q.attributes().group_capacity,
        q.attributes().max_groups
    );
    println!("| table | groups after | the new-group send that grew | median new-group send (the 1,000 before) |");
    println!("|---|---|---|---|");
    let mut times: Vec<f64> = Vec::new();
    let mut cap = q.attributes().group_capacity;
    let mut tables = 0;
    for i in 0..GROUPS {
        let t = Instant::now();
        q.send(&SendMessage::new(&group_name(i), BODY))
            .expect("send");
        let dt = t.elapsed().as_secs_f64() * 1e6;
        if i as u64 + 1 > cap {
            // This send was past the capacity before it: it added a table.
            cap = q.attributes().group_capacity;
            tables += 1;
            let k = times.len().saturating_sub(1_000);
            let m = median(&mut times[k..].to_vec());
            println!("| {tables} | {cap} | {dt:.0} µs | {m:.2} µs |");
        }
        times.push(dt);
    }
}

/// A queue of `max_groups` base groups and room for 65,536 small messages (so that no size
/// class grows: only the group table may), holding one message in each of [`GROUPS`] groups.
fn groups_queue(max_groups: u32) -> Queue {
    let q = Queue::create_anonymous(
        &QueueConfig::new()
            .deduplication(Deduplication::Off)
            .max_messages(65_536)
            .max_groups(max_groups),
    )
    .expect("create");
    for i in 0..GROUPS {
        q.send(&SendMessage::new(&group_name(i), BODY))
            .expect("fill");
    }
    q
}

/// ns per message over `n` rounds of: a send to the next group in turn, then a receive of one
/// message and its delete. Every group keeps one or two messages, so groups are looked up,
/// never inserted.
fn per_message_groups(q: &Queue, names: &[String], n: usize, next: &mut usize) -> f64 {
    let mut buf = ReceiveBuffer::new();
    let one = ReceiveOptions::max(1).wait(Duration::from_millis(100));
    let t = Instant::now();
    for _ in 0..n {
        q.send(&SendMessage::new(&names[*next % names.len()], BODY))
            .expect("send");
        *next += 1;
        assert_eq!(q.receive_into(&one, &mut buf).expect("receive"), 1);
        q.delete(&buf.messages()[0].receipt_handle).expect("delete");
    }
    t.elapsed().as_secs_f64() * 1e9 / n as f64
}

fn group_steady_state(rounds: usize) {
    let grown = groups_queue(4_096);
    let made = groups_queue(GROUPS as u32);
    assert!(grown.attributes().group_capacity >= GROUPS as u64);
    assert_eq!(made.size().grows, 0);
    let names: Vec<String> = (0..GROUPS).map(group_name).collect();
    let (mut ng, mut nm) = (0, 0);
    let (mut g, mut m, mut r) = (Vec::new(), Vec::new(), Vec::new());
    for k in 0..rounds {
        let (a, b) = if k % 2 == 0 {
            let a = per_message_groups(&grown, &names, 20_000, &mut ng);
            (a, per_message_groups(&made, &names, 20_000, &mut nm))
        } else {
            let b = per_message_groups(&made, &names, 20_000, &mut nm);
            (per_message_groups(&grown, &names, 20_000, &mut ng), b)
        };
        g.push(a);
        m.push(b);
        r.push(a / b);
    }
    println!();
    println!("| 32,768 groups with a backlog, each sent to in turn | median per message (send + receive + delete, 64 B) |");
    println!("|---|---|");
    println!(
        "| group table grown to them (3 added tables, each with its ready ring) | {:.0} ns |",
        median(&mut g)
    );
    println!(
        "| created with them (one table, one ring) | {:.0} ns |",
        median(&mut m)
    );
    println!(
        "| ratio grown / created, median of {rounds} paired rounds | {:.3} |",
        median(&mut r)
    );
}
