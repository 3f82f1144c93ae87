//! `shmfifo-lines [--json] [--messages N]`: cache-line transfers per message, counted, not
//! timed. Built with shmfifo's `lines` feature, every access the protocols make to an arena
//! (its atomics and the payload copies) is recorded as (actor, 64-byte line, read or write)
//! and run through a MESI model (`shmfifo::lines`): a read of a line another actor holds
//! modified is one transfer; a write to a line another actor holds is one transfer plus an
//! invalidation per other holder. The producer and the consumer are actors taking scripted
//! turns on one thread, so the figures are the same on every machine: what costs across
//! processes is lines moved, and on a VM whose line time changes fourfold within seconds these
//! counts steer where the clock cannot. (Where messages spread over many groups, the groups'
//! places in the table follow the arena's random hash keys: those workloads vary by a few
//! hundredths of a line from run to run; one-group workloads are exact.)
//!
//! Workloads (64-byte bodies, the settings users get: default sizes, SQS's 5-minute dedup
//! window, a new dedup id per message; producer and consumer are two handles, two
//! participants, on one named queue):
//! * `single`: send; receive (max 1); delete. One group.
//! * `batch`: send_batch of 10 to one group; receive (max 10); delete_handles. The ten go as
//!   one pack, as a batch's messages to one group do by default (layout 23).
//! * `batch-slots`: `batch` one slot a message (`Queue::set_pack_batches(false)`).
//! * `batch-lent`: `batch` written in place: one loaned batch (`Queue::loan_batch`), the
//!   producer writing each body into the slot; the same pack, no copy.
//! * `newgroup`: as `single`, a new group id per message.
//! * `groups1000`: 1,000 groups with a message queued in each; per message, a send to the
//!   next group and a receive and delete of the oldest.
//! * `zerocopy64k`: loan a 64 KiB slot, write the body in place, send; receive_borrowed, read
//!   the body in place, verify, delete.
//! * `roundtrip`: the spinning round trip of the harness: ping sent, received and deleted, pong
//!   sent back, received and deleted (two queues); figures per round trip.
//!
//! The floor beside each figure is what the message itself must move from producer to
//! consumer in today's layout: its 64-byte slot header line and its payload's lines. The
//! payload is the dedup id, then the body: a 64-byte body after a dedup id of a few bytes spans
//! two lines, so a message here occupies three. Each line counts once: these windows
//! (a few hundred messages) never come back to a slot of a small class, whose producer cursor
//! moves on round the class; a slot reused within the window (the 64 KiB class reuses the slot
//! freed last) moves its lines back to the producer too. A pack (`batch`) carries a
//! message's header in 32 bytes of its directory, its body and id right after it: 1.66.

use std::time::Duration;

use clap::Parser;
use shmfifo::lines::{self, Counts};
use shmfifo::{BatchEntry, LoanOptions, Queue, QueueConfig, ReceiveOptions, SendMessage};

const BODY: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
const IDS: [&str; 10] = ["0", "1", "2", "3", "4", "5", "6", "7", "8", "9"];
const PRODUCER: u8 = 0;
const CONSUMER: u8 = 1;

#[derive(Parser)]
#[command(about = "Cache-line transfers per message under a MESI model (deterministic)")]
struct Args {
    /// Print `{"<workload>": transfers_per_message, …}` only.
    #[arg(long)]
    json: bool,
    /// Messages measured per workload (after as many to warm up).
    #[arg(long, default_value_t = 200)]
    messages: u64,
    /// Only these workloads (comma-separated).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
}

/// One workload's result.
struct Figure {
    name: &'static str,
    per: &'static str,
    units: u64,
    floor: f64,
    counts: Counts,
}

/// A queue with a producer's and a consumer's handle on it.
struct Pair {
    name: String,
    p: Queue,
    c: Queue,
}

impl Pair {
    fn new(tag: &str, cfg: &QueueConfig) -> Pair {
        let name = format!("shmfifo-lines-{tag}-{}", std::process::id());
        let _ = Queue::unlink(&name);
        let p = Queue::create(&name, cfg).expect("create");
        let c = Queue::open(&name).expect("open");
        Pair { name, p, c }
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        let _ = Queue::unlink(&self.name);
    }
}

/// Runs `round` `warm` times, then `n` times counted; returns the counts.
fn measure(warm: u64, n: u64, mut round: impl FnMut(u64)) -> Counts {
    lines::reset_all();
    lines::record_on(true);
    for k in 0..warm {
        round(k);
    }
    lines::reset_counts();
    for k in warm..warm + n {
        round(k);
    }
    lines::record_on(false);
    lines::counts()
}

fn one() -> ReceiveOptions {
    ReceiveOptions::max(1).wait(Duration::ZERO)
}

/// Sends one message as the producer; receives and deletes one as the consumer.
fn pass(q: &Pair, group: &str, dedup: &str) {
    lines::set_actor(PRODUCER);
    q.p.send(&SendMessage::new(group, BODY).dedup_id(dedup))
        .expect("send");
    lines::set_actor(CONSUMER);
    let got = q.c.receive(&one()).expect("receive");
    assert_eq!(got.len(), 1, "one message per pass");
    q.c.delete(&got[0].receipt_handle).expect("delete");
}

fn single(n: u64) -> Figure {
    let q = Pair::new("single", &QueueConfig::new());
    let counts = measure(n, n, |k| pass(&q, "g", &k.to_string()));
    Figure {
        name: "single",
        per: "message",
        units: n,
        floor: 3.0,
        counts,
    }
}

fn newgroup(n: u64) -> Figure {
    let q = Pair::new("newgroup", &QueueConfig::new());
    let counts = measure(n, n, |k| pass(&q, &format!("g{k}"), &k.to_string()));
    Figure {
        name: "newgroup",
        per: "message",
        units: n,
        floor: 3.0,
        counts,
    }
}

fn batch(n: u64) -> Figure {
    batch_as(n, "batch")
}

fn batch_slots(n: u64) -> Figure {
    batch_as(n, "batch-slots")
}

/// `batch` (the producer's ten as one pack, the default), or `batch-slots` (one slot a
/// message, `Queue::set_pack_batches(false)`).
fn batch_as(n: u64, name: &'static str) -> Figure {
    let q = Pair::new(name, &QueueConfig::new());
    q.p.set_pack_batches(name != "batch-slots");
    let batches = n.div_ceil(10);
    let counts = measure(batches, batches, |k| {
        lines::set_actor(PRODUCER);
        let ids: Vec<String> = (0..10).map(|i| format!("{k}-{i}")).collect();
        let entries: Vec<BatchEntry<'_, SendMessage<'_>>> = ids
            .iter()
            .zip(IDS)
            .map(|(d, id)| BatchEntry {
                id,
                entry: SendMessage::new("g", BODY).dedup_id(d),
            })
            .collect();
        for r in q.p.send_batch(&entries).expect("send_batch") {
            r.result.expect("entry sent");
        }
        take_ten(&q);
    });
    Figure {
        name,
        per: "message",
        units: batches * 10,
        // As one pack (layout 23): a message's 32-byte directory entry, its 64-byte body and
        // its 4-byte dedup id back to back (100 bytes, 1.56 lines), and a tenth of the unit's
        // header line.
        floor: if name == "batch" { 1.66 } else { 3.0 },
        counts,
    }
}

/// The consumer's half of a batch workload: the ten received in one receive, deleted with
/// one `delete_handles`.
fn take_ten(q: &Pair) {
    lines::set_actor(CONSUMER);
    let got =
        q.c.receive(&ReceiveOptions::max(10).wait(Duration::ZERO))
            .expect("receive");
    assert_eq!(got.len(), 10, "the batch in one receive");
    let handles: Vec<_> = got.iter().map(|m| m.receipt_handle).collect();
    for r in q.c.delete_handles(&handles).expect("delete_handles") {
        r.expect("deleted");
    }
}

/// `batch-lent`: `batch` written in place, one loaned batch (`Queue::loan_batch`) of ten
/// members whose bodies the producer writes into the slot: the same pack, without a copy.
fn batch_lent(n: u64) -> Figure {
    let q = Pair::new("batch-lent", &QueueConfig::new());
    let batches = n.div_ceil(10);
    let counts = measure(batches, batches, |k| {
        lines::set_actor(PRODUCER);
        let ids: Vec<String> = (0..10).map(|i| format!("{k}-{i}")).collect();
        let members: Vec<(usize, LoanOptions<'_>)> = ids
            .iter()
            .map(|d| (BODY.len(), LoanOptions::new().dedup_id(d)))
            .collect();
        let mut batch = q.p.loan_batch("g", &members).expect("loan_batch");
        for j in 0..10 {
            batch.body_mut(j).copy_from_slice(BODY.as_bytes());
        }
        for r in batch.send().expect("send the loaned batch") {
            r.expect("member sent");
        }
        take_ten(&q);
    });
    Figure {
        name: "batch-lent",
        per: "message",
        units: batches * 10,
        // As `batch`'s pack.
        floor: 1.66,
        counts,
    }
}

fn groups1000(n: u64) -> Figure {
    let q = Pair::new("groups1000", &QueueConfig::new());
    lines::set_actor(PRODUCER);
    for g in 0..1000 {
        q.p.send(&SendMessage::new(&format!("g{g}"), BODY).dedup_id(&format!("pre{g}")))
            .expect("send");
    }
    // Warmed up over the whole backlog: every message received while counting was sent while
    // recording (the 1,000 sent above, before the model's reset, would read as first touches).
    let counts = measure(1000.max(n), n, |k| {
        lines::set_actor(PRODUCER);
        q.p.send(&SendMessage::new(&format!("g{}", k % 1000), BODY).dedup_id(&k.to_string()))
            .expect("send");
        lines::set_actor(CONSUMER);
        let got = q.c.receive(&one()).expect("receive");
        assert_eq!(got.len(), 1, "one message per pass");
        q.c.delete(&got[0].receipt_handle).expect("delete");
    });
    Figure {
        name: "groups1000",
        per: "message",
        units: n,
        floor: 3.0,
        counts,
    }
}

fn zerocopy64k(n: u64) -> Figure {
    let q = Pair::new("zerocopy", &QueueConfig::new());
    let large: Vec<u8> = (0..65_536).map(|i| b'a' + (i % 26) as u8).collect();
    let counts = measure(n, n, |k| {
        lines::set_actor(PRODUCER);
        let mut loan = q.p.loan("g", large.len()).expect("loan");
        loan.as_mut_slice().copy_from_slice(&large);
        let id = k.to_string();
        loan.send_with(&LoanOptions::new().dedup_id(&id))
            .map_err(|e| e.error.to_string())
            .expect("send");
        lines::set_actor(CONSUMER);
        let got = q.c.receive_borrowed(&one()).expect("receive");
        assert_eq!(got.len(), 1, "one message per pass");
        for m in got {
            std::hint::black_box(m.body().iter().map(|&b| u64::from(b)).sum::<u64>());
            m.verify().expect("verify");
            m.delete().expect("delete");
        }
    });
    Figure {
        name: "zerocopy64k",
        per: "message",
        units: n,
        floor: 1.0 + 1025.0,
        counts,
    }
}

fn roundtrip(n: u64) -> Figure {
    let ping = Pair::new("ping", &QueueConfig::new());
    let pong = Pair::new("pong", &QueueConfig::new());
    let counts = measure(n, n, |k| {
        let id = k.to_string();
        pass(&ping, "g", &id);
        // The consumer answers on the second queue, where it is the producer.
        lines::set_actor(CONSUMER);
        pong.p
            .send(&SendMessage::new("g", BODY).dedup_id(&id))
            .expect("send");
        lines::set_actor(PRODUCER);
        let got = pong.c.receive(&one()).expect("receive");
        assert_eq!(got.len(), 1, "the pong");
        pong.c.delete(&got[0].receipt_handle).expect("delete");
    });
    Figure {
        name: "roundtrip",
        per: "round trip",
        units: n,
        floor: 6.0,
        counts,
    }
}

fn main() {
    let args = Args::parse();
    let n = args.messages.max(10);
    type Workload = fn(u64) -> Figure;
    let all: [(&str, Workload); 8] = [
        ("single", single),
        ("batch", batch),
        ("batch-slots", batch_slots),
        ("batch-lent", batch_lent),
        ("newgroup", newgroup),
        ("groups1000", groups1000),
        ("zerocopy64k", zerocopy64k),
        ("roundtrip", roundtrip),
    ];
    let mut figures = Vec::new();
    for (name, run) in all {
        if args.only.is_empty() || args.only.iter().any(|o| o == name) {
            figures.push(run(if name == "zerocopy64k" { n.min(50) } else { n }));
        }
    }
    if args.json {
        let body: Vec<String> = figures
            .iter()
            .map(|f| {
                format!(
                    "\"{}\": {:.3}",
                    f.name,
                    f.counts.transfers as f64 / f.units as f64
                )
            })
            .collect();
        println!("{{{}}}", body.join(", "));
        return;
    }
    println!(
        "Cache-line transfers, MESI model, producer and consumer as scripted actors (deterministic)"
    );
    println!(
        "{:<12} {:>10} {:>10} {:>8}  per",
        "workload", "transfers", "invalid.", "floor"
    );
    for f in &figures {
        let u = f.units as f64;
        println!(
            "{:<12} {:>10.2} {:>10.2} {:>8.1}  {}",
            f.name,
            f.counts.transfers as f64 / u,
            f.counts.invalidations as f64 / u,
            f.floor,
            f.per
        );
    }
    for f in &figures {
        println!(
            "\n{} ({} measured): lines moved per {}, by field",
            f.name, f.units, f.per
        );
        for (field, t) in f.counts.by_field.iter().take(12) {
            println!("  {:>8.2}  {}", *t as f64 / f.units as f64, field);
        }
    }
}
