//! Operator views: lifetime counters against a known workload, `peek` changing
//! nothing, and `inspect` (groups, participants, size classes).

mod common;

use std::thread::sleep;
use std::time::Duration;

use common::*;
use shmfifo::{Counters, Queue, QueueConfig, ReceiveOptions, RedrivePolicy, SendMessage};

/// Every counter, checked against a workload whose events are known exactly.
#[test]
fn counters_match_a_known_workload() {
    let dlq = queue("cnt-dlq", &small_dedup());
    let q = queue(
        "cnt",
        &small_dedup()
            .max_in_flight(3)
            .redrive_policy(RedrivePolicy::new(&dlq.name, 2)),
    );
    assert_eq!(
        q.counters(),
        Counters::default(),
        "a new queue counts nothing"
    );
    // 6 sends, 2 of them duplicates (D1).
    for (g, id) in [
        ("a", "1"),
        ("a", "2"),
        ("b", "3"),
        ("c", "4"),
        ("a", "1"),
        ("b", "3"),
    ] {
        q.send(&SendMessage::new(g, id).dedup_id(id)).unwrap();
    }
    // The in-flight limit (3) cuts the first receive short: 3 received, one limit hit (R8).
    let first = q
        .receive(&ReceiveOptions::max(10).visibility_timeout(Duration::from_millis(50)))
        .unwrap();
    assert_eq!(first.len(), 3);
    // Delete one; the other two time out and are received again (2 visibility expiries).
    let deleted = first
        .iter()
        .find(|m| m.group_id == "c")
        .unwrap_or(&first[0]);
    q.delete(&deleted.receipt_handle).unwrap();
    sleep(Duration::from_millis(120));
    let second = q
        .receive(&ReceiveOptions::max(10).visibility_timeout(Duration::from_millis(50)))
        .unwrap();
    assert_eq!(second.len(), 3, "two redeliveries and the fourth message");
    let redelivered = second.iter().filter(|m| m.receive_count == 2).count() as u64;
    assert_eq!(redelivered, 2);
    // After their second visibility ends, the two twice-received messages move to the
    // dead-letter queue (maxReceiveCount 2, X1) on the next receive; the once-received one
    // comes back for its second receive.
    sleep(Duration::from_millis(120));
    let third = q.receive(&ReceiveOptions::max(10)).unwrap();
    assert_eq!(third.len(), 1);
    q.delete(&third[0].receipt_handle).unwrap();
    let c = q.counters();
    assert_eq!(
        c,
        Counters {
            sent: 4,
            duplicates: 2,
            received: 3 + 3 + 1,
            deleted: 2,
            visibility_expiries: 2 + 1,
            moved_to_dead_letter: 2,
            retention_expiries: 0,
            in_flight_limit_hits: 1,
            waits: 0,
            wake_ups: 0,
            contention_retries: 0,
            participants_recovered: 0,
            empty_receives: 0,
        }
    );
    // The dead-letter queue counts the two moves as its sends.
    assert_eq!(dlq.counters().sent, 2);
    // Another handle (another participant record) sees the same sums, and adds to them.
    let other = Queue::open(&q.name).unwrap();
    assert_eq!(other.counters(), c);
    other
        .send(&SendMessage::new("z", "z").dedup_id("z"))
        .unwrap();
    assert_eq!(q.counters().sent, 5);
    // Attributes report the same counts as the counters.
    let at = q.attributes();
    assert_eq!(at.moved_to_dead_letter, 2);
    assert_eq!(at.in_flight_limit_hits, 1);
}

/// `NumberOfEmptyReceives` (CloudWatch's metric for idle pollers): each receive that returns no
/// message counts once, a long poll that ends empty once however long it waited, an
/// attempt-id receive and a borrowing one too; a receive that returns a message does not.
/// Polls that do not wait are tallied by their handle and added to the queue's count 64 at a
/// time (a spinning consumer pays no locked instruction per poll), a long poll at once, and a
/// handle adds what it tallied when it closes.
#[test]
fn counters_count_empty_receives() {
    let q = queue("cnt-empty", &small_dedup());
    let other = Queue::open(&q.name).unwrap();
    let now = ReceiveOptions::max(10).wait(Duration::ZERO);
    assert!(q.receive(&now).unwrap().is_empty());
    let poll = ReceiveOptions::max(10).wait(Duration::from_millis(30));
    assert!(q.receive(&poll).unwrap().is_empty());
    assert!(q.receive_with_attempt_id(&now, "a1").unwrap().is_empty());
    assert!(q.receive_borrowed(&now).unwrap().is_empty());
    assert_eq!(
        q.counters().empty_receives,
        4,
        "this handle's count, its tally included"
    );
    assert_eq!(
        other.counters().empty_receives,
        2,
        "the queue's: the long poll added itself and the tally before it"
    );
    q.send(&SendMessage::new("g", "m").dedup_id("1")).unwrap();
    assert_eq!(q.receive(&now).unwrap().len(), 1);
    assert_eq!(
        q.counters().empty_receives,
        4,
        "a receive with a message is not empty"
    );
    // The 64th poll of a handle adds its tally to the queue's count.
    for _ in 0..64 {
        assert!(other.receive(&now).unwrap().is_empty());
    }
    assert_eq!(q.counters().empty_receives, 4 + 64);
    // A handle that closes adds what it tallied.
    let third = Queue::open(&q.name).unwrap();
    for _ in 0..5 {
        assert!(third.receive(&now).unwrap().is_empty());
    }
    drop(third);
    assert_eq!(other.counters().empty_receives, 2 + 64 + 5);
    assert!(q
        .counters()
        .named()
        .iter()
        .any(|&(n, v, _)| n == "empty_receives" && v == 2 + 64 + 5 + 2));
    // A receive that gives no wait time waits the queue's ReceiveMessageWaitTimeSeconds: a
    // long poll too, counted at once.
    q.set_attribute("ReceiveMessageWaitTimeSeconds", "1")
        .unwrap();
    // (This handle's count, its tally included: the long poll adds that tally too.)
    let before = q.counters().empty_receives;
    let default_wait = ReceiveOptions::max(10);
    let t = std::time::Instant::now();
    assert!(q.receive(&default_wait).unwrap().is_empty());
    assert!(
        t.elapsed() >= Duration::from_millis(900),
        "it waited the queue's second"
    );
    assert_eq!(q.counters().empty_receives, before + 1);
    assert_eq!(
        other.counters().empty_receives,
        before + 1,
        "added to the queue's count at once, with the tally before it"
    );
}

/// A cancellable long poll (what `shmfifo receive --wait` uses, so that Ctrl-C ends it): a
/// flag set by another thread ends a 20-second wait within its look interval, and the empty
/// receive counts once in `NumberOfEmptyReceives` however many times it looked at the flag
/// (a CLI polling in 100 ms slices counted one a slice); an attempt id records nothing for
/// it. A flag already set ends only the wait: a message already there is taken.
#[test]
fn a_cancelled_long_poll_counts_one_empty_receive() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let q = queue("cnt-cancel", &small_dedup());
    let other = Queue::open(&q.name).unwrap();
    let stop = AtomicBool::new(false);
    let long = ReceiveOptions::max(10).wait(Duration::from_secs(20));
    let mut buf = shmfifo::ReceiveBuffer::new();
    let start = std::time::Instant::now();
    std::thread::scope(|s| {
        s.spawn(|| {
            sleep(Duration::from_millis(450));
            stop.store(true, Ordering::Relaxed);
        });
        let n = q
            .receive_cancellable_into(&long, Some("cancel-a1"), &stop, &mut buf)
            .unwrap();
        assert_eq!(n, 0);
    });
    let waited = start.elapsed();
    assert!(
        waited >= Duration::from_millis(450) && waited < Duration::from_secs(15),
        "ended by the flag, not by its 20 s: {waited:?}"
    );
    assert_eq!(
        other.counters().empty_receives,
        1,
        "one long poll, counted once, at once"
    );
    // The flag set: no wait, but a message there is taken, and the attempt id (which
    // recorded nothing for the empty receive) records this one.
    q.send(&SendMessage::new("g", "m").dedup_id("1")).unwrap();
    let n = q
        .receive_cancellable_into(&long, Some("cancel-a1"), &stop, &mut buf)
        .unwrap();
    assert_eq!(n, 1);
    let handle = buf.messages()[0].receipt_handle;
    let retry = q.receive_with_attempt_id(&long, "cancel-a1").unwrap();
    assert_eq!(retry.len(), 1);
    assert_eq!(retry[0].receipt_handle, handle);
    let start = std::time::Instant::now();
    assert_eq!(
        q.receive_cancellable_into(&long, None, &stop, &mut buf)
            .unwrap(),
        0
    );
    assert!(start.elapsed() < Duration::from_secs(15));
    assert_eq!(other.counters().empty_receives, 2);
}

/// The borrowing form (what the C ABI's `shmfifo_receive_cancellable` with `borrow` uses): a
/// flag ends the long poll, counted once, recording nothing under the attempt id; a retry with
/// the id after a receive hands out the same message in place (R11).
#[test]
fn a_cancelled_borrowed_long_poll_ends_and_keeps_its_attempt() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let q = queue("cnt-cancel-b", &small_dedup());
    let stop = AtomicBool::new(false);
    let long = ReceiveOptions::max(10).wait(Duration::from_secs(20));
    let mut buf = shmfifo::ReceiveBuffer::new();
    let start = std::time::Instant::now();
    std::thread::scope(|s| {
        s.spawn(|| {
            sleep(Duration::from_millis(300));
            stop.store(true, Ordering::Relaxed);
        });
        let got = q
            .receive_borrowed_cancellable_into(&long, Some("b-a1"), &stop, &mut buf)
            .unwrap();
        assert_eq!(got.len(), 0);
    });
    let waited = start.elapsed();
    assert!(
        waited >= Duration::from_millis(300) && waited < Duration::from_secs(15),
        "ended by the flag, not by its 20 s: {waited:?}"
    );
    assert_eq!(q.counters().empty_receives, 1);
    q.send(&SendMessage::new("g", "frame").dedup_id("1"))
        .unwrap();
    let first = {
        let got = q
            .receive_borrowed_cancellable_into(&long, Some("b-a1"), &stop, &mut buf)
            .unwrap();
        assert_eq!(got.len(), 1, "a flag already set ends only the wait");
        let m = got.get(0).unwrap();
        assert_eq!(m.body(), b"frame");
        m.verify().unwrap();
        *m.receipt_handle()
    };
    let retry = q
        .receive_borrowed_cancellable_into(&long, Some("b-a1"), &stop, &mut buf)
        .unwrap();
    assert_eq!(retry.len(), 1);
    let m = retry.get(0).unwrap();
    assert_eq!(
        *m.receipt_handle(),
        first,
        "R11: the same message, in place"
    );
    assert_eq!(m.body(), b"frame");
}

/// Waits and wake-ups: a receiver that sleeps on the futex and a producer that wakes it.
#[test]
fn counters_count_waits_and_wake_ups() {
    let q = queue("cnt-wait", &small());
    let name = q.name.clone();
    let sender = std::thread::spawn(move || {
        let p = Queue::open(&name).unwrap();
        sleep(Duration::from_millis(150));
        p.send(&SendMessage::new("g", "wake")).unwrap();
        p
    });
    let got = q
        .receive(&ReceiveOptions::max(1).wait(Duration::from_secs(10)))
        .unwrap();
    let _p = sender.join().unwrap();
    assert_eq!(got.len(), 1);
    let c = q.counters();
    assert!(c.waits >= 1, "the receiver slept: {c:?}");
    assert_eq!(c.wake_ups, 1, "one send rang the doorbell: {c:?}");
}

/// Retention removals count (T1).
#[test]
fn counters_count_retention_expiries() {
    let q = queue(
        "cnt-ret",
        &small().message_retention_period(Duration::from_millis(50)),
    );
    for i in 0..3 {
        send(&q, "g", &format!("m{i}"));
    }
    sleep(Duration::from_millis(100));
    assert!(recv(&q, 10).is_empty());
    assert_eq!(q.counters().retention_expiries, 3);
}

/// `peek` returns what a receive would, and changes nothing: counts, receive counts,
/// visibility, counters.
#[test]
fn peek_changes_nothing() {
    let q = queue("peek", &small());
    for g in ["a", "b"] {
        for i in 0..3 {
            q.send(&SendMessage::new(g, &format!("{g}{i}")).attributes(&[
                shmfifo::MessageAttribute {
                    name: "k",
                    data_type: "String",
                    value: b"v",
                },
            ]))
            .unwrap();
        }
    }
    // Group a is locked by an in-flight message: peek shows only group b (R3).
    let held = recv_vt(&q, 1, Duration::from_secs(30));
    assert_eq!(bodies(&held), ["a0"]);
    // The age of the oldest message moves with the clock; everything else must not change.
    let attributes = |q: &Queue| shmfifo::QueueAttributes {
        approximate_age_of_oldest_message: Duration::ZERO,
        ..q.attributes()
    };
    let before = (attributes(&q), q.counters());
    let peeked = q.peek(10).unwrap();
    let pb: Vec<&str> = peeked.iter().map(|m| m.body.as_str()).collect();
    assert_eq!(pb, ["b0", "b1", "b2"]);
    assert!(peeked
        .iter()
        .all(|m| m.group_id == "b" && m.receive_count == 0));
    assert!(peeked
        .iter()
        .all(|m| m.attributes.len() == 1 && m.attributes[0].value == b"v"));
    assert!(peeked
        .windows(2)
        .all(|w| w[0].sequence_number < w[1].sequence_number));
    assert_eq!(q.peek(2).unwrap().len(), 2, "max is honoured");
    let after = (attributes(&q), q.counters());
    assert_eq!(before, after, "peek changed nothing");
    // A receive returns the same messages, with the same ids, for the first time.
    let got = recv(&q, 10);
    let ids: Vec<_> = got.iter().map(|m| m.message_id).collect();
    let pids: Vec<_> = peeked.iter().map(|m| m.message_id).collect();
    assert_eq!(ids, pids);
    assert!(got.iter().all(|m| m.receive_count == 1));
    assert!(
        q.peek(10).unwrap().is_empty(),
        "everything is in flight now"
    );
}

/// `inspect`: counts by state, locked groups, the largest groups, participants, classes.
#[test]
fn inspect_reports_groups_participants_and_classes() {
    let q = queue("insp", &small().delay(Duration::from_secs(0)));
    for (g, n) in [("big", 5), ("mid", 3), ("small", 1)] {
        for i in 0..n {
            send(&q, g, &format!("{g}{i}"));
        }
    }
    let held = recv_vt(&q, 1, Duration::from_secs(30));
    assert_eq!(held[0].group_id, "big");
    let other = Queue::open(&q.name).unwrap();
    let s = q.inspect(2).unwrap();
    assert_eq!(s.messages.visible, 8);
    assert_eq!(s.messages.in_flight, 1);
    assert_eq!(s.active_groups, 3);
    assert_eq!(s.locked_groups, 1);
    let largest: Vec<(&str, u64, bool)> = s
        .largest_groups
        .iter()
        .map(|g| (g.group_id.as_str(), g.backlog(), g.locked))
        .collect();
    assert_eq!(largest, [("big", 5, true), ("mid", 3, false)]);
    assert_eq!(s.largest_groups[0].in_flight, 1);
    assert_eq!(s.participants.len(), 2);
    assert!(s
        .participants
        .iter()
        .all(|p| p.alive && p.pid == std::process::id()));
    assert_eq!(s.participants.iter().filter(|p| p.is_self).count(), 1);
    let used: u32 = s.size_classes.iter().map(|c| c.used).sum();
    assert_eq!(used, 9);
    let slots: u32 = s.size_classes.iter().map(|c| c.slots).sum();
    let free: u32 = s.size_classes.iter().map(|c| c.free).sum();
    assert_eq!(free + used, slots);
    assert_eq!(s.counters.sent, 9);
    drop(other);
    assert_eq!(
        q.inspect(10).unwrap().participants.len(),
        1,
        "a closed handle is gone"
    );
}

/// A queue made with `QueueConfig::new()` defaults reports its in-flight limit and classes.
#[test]
fn inspect_on_defaults() {
    let q = queue("insp-def", &QueueConfig::new().max_messages(1000));
    let s = q.inspect(10).unwrap();
    assert_eq!(s.messages.visible, 0);
    assert!(s.largest_groups.is_empty());
    assert!(!s.size_classes.is_empty());
    assert!(s.size_classes.iter().all(|c| c.slot_bytes >= 64));
}

/// A receiver killed with the queue open: the next recovery repairs it, releases its
/// message, and counts it once, however many recoveries run after.
#[test]
fn counters_count_recovered_participants() {
    let q = queue(
        "cnt-dead",
        &small().visibility_timeout(Duration::from_secs(600)),
    );
    send(&q, "g", "held");
    let handles = receive_and_die(env!("CARGO_BIN_EXE_shmfifo-test-worker"), &q.name, "victim");
    assert_eq!(handles.len(), 1);
    let r = q.recover().unwrap();
    assert_eq!((r.dead_participants, r.released), (1, 1));
    q.recover().unwrap();
    let c = q.counters();
    assert_eq!(c.participants_recovered, 1);
    let again = recv(&q, 10);
    assert_eq!(bodies(&again), ["held"]);
    assert_eq!(
        q.counters().visibility_expiries,
        1,
        "released, then received again"
    );
}

/// One bad word breaks one entry, not the queue. A corrupted `head` word in one
/// group's entry: `inspect` reports that group as damaged and counts every other one, `peek`
/// shows the others, and receiving from the other groups goes on.
#[test]
fn one_corrupted_group_breaks_only_itself() {
    let q = queue("onebad", &small_dedup());
    for (g, b) in [
        ("healthy-one", "a"),
        ("the-damaged-group", "b"),
        ("healthy-two", "c"),
    ] {
        q.send(&SendMessage::new(g, b).dedup_id(b)).unwrap();
    }
    break_group(&format!("/dev/shm/{}", q.name), b"the-damag");
    let i = q.inspect(10).expect("inspection goes on");
    assert_eq!(i.damaged_groups.len(), 1, "{:?}", i.damaged_groups);
    let names: Vec<&str> = i
        .largest_groups
        .iter()
        .map(|g| g.group_id.as_str())
        .collect();
    assert!(
        names.contains(&"healthy-one") && names.contains(&"healthy-two"),
        "{names:?}"
    );
    let peeked: Vec<String> = q.peek(10).unwrap().into_iter().map(|m| m.body).collect();
    assert!(peeked.contains(&"a".to_string()) && peeked.contains(&"c".to_string()));
    // One receive passes over the damaged group and serves both others.
    let got: Vec<String> = q
        .receive(&ReceiveOptions::max(10))
        .expect("the other groups are served")
        .into_iter()
        .map(|m| m.body)
        .collect();
    assert!(
        got.contains(&"a".to_string()) && got.contains(&"c".to_string()),
        "{got:?}"
    );
}

/// An observer (`Queue::observe`) joins nothing: it works on a queue whose participant slots
/// are all taken, on a file it may only read, and leaves the queue exactly as it was (C1:
/// its counts are the same snapshot a participant's are).
#[test]
fn an_observer_joins_nothing_and_changes_nothing() {
    let q = queue("observe", &small().max_participants(1));
    for (g, d) in [("a", "1"), ("a", "2"), ("b", "3")] {
        q.send(&SendMessage::new(g, d)).unwrap();
    }
    let got = recv(&q, 1);
    assert!(matches!(
        Queue::open(&q.name),
        Err(shmfifo::Error::ParticipantLimitReached { .. })
    ));
    // The age of the oldest message moves with the clock; everything else must not change.
    let attributes = |q: &Queue| shmfifo::QueueAttributes {
        approximate_age_of_oldest_message: Duration::ZERO,
        ..q.attributes()
    };
    let before = (attributes(&q), q.counters(), q.inspect(10).unwrap());
    let o = Queue::observe(&q.name).unwrap();
    let a = o.attributes();
    assert_eq!(
        (
            a.approximate_number_of_messages,
            a.approximate_number_of_messages_not_visible
        ),
        (2, 1)
    );
    assert_eq!(o.counters(), before.1);
    let i = o.inspect(10).unwrap();
    assert_eq!(i.participants.len(), 1, "the observer registered");
    assert!(i.participants.iter().all(|p| !p.is_self && p.alive));
    assert_eq!((i.active_groups, i.locked_groups), (2, 1));
    let peeked = o.peek(10).unwrap();
    assert_eq!(bodies_of(&peeked), ["3"]);
    o.check().unwrap();
    drop(o);
    // Nothing changed: the same counts, counters and participants; the in-flight message is
    // still ours to delete.
    assert_eq!(attributes(&q), before.0);
    assert_eq!(q.counters(), before.1);
    assert_eq!(q.inspect(10).unwrap().participants, before.2.participants);
    q.delete(&got[0].receipt_handle).unwrap();
    // With read permission only, an observer still sees the queue.
    let path = format!("/dev/shm/{}", q.name);
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o400)).unwrap();
    let o = Queue::observe_at(&path).unwrap();
    assert_eq!(o.attributes().approximate_number_of_messages, 2);
    assert_eq!(o.path(), Some(std::path::Path::new(&path)));
    // A missing queue is the same error as for open.
    assert!(matches!(
        Queue::observe("shmfifo-test-no-such-queue"),
        Err(shmfifo::Error::QueueDoesNotExist { .. })
    ));
}

fn bodies_of(m: &[shmfifo::PeekedMessage]) -> Vec<&str> {
    m.iter().map(|m| m.body.as_str()).collect()
}

/// Counters that threads write in per-thread stripes (layout 21): more threads than there are
/// stripes (some count without one), in rounds (a thread that ends gives its stripe back to
/// the next), counting on one handle at once, lose nothing; and the in-flight count (R8),
/// which sums the stripes, counts each message held by a thread once, whichever thread
/// received it and whichever deletes it.
#[test]
fn counters_of_more_threads_than_stripes_lose_nothing() {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Barrier;
    let q = queue("cnt-threads", &small());
    const THREADS: usize = 7;
    const EACH: u64 = 40;
    let total = THREADS as u64 * EACH;
    for round in 0..3u64 {
        let (held, released) = (Barrier::new(THREADS + 1), Barrier::new(THREADS + 1));
        let deleted = AtomicU64::new(0);
        let counted = std::thread::scope(|s| {
            for t in 0..THREADS {
                let (q, held, released, deleted) = (&q, &held, &released, &deleted);
                s.spawn(move || {
                    let g = format!("r{round}t{t}");
                    for k in 0..EACH {
                        q.send(&SendMessage::new(&g, &k.to_string())).unwrap();
                    }
                    // One message held (in flight) per thread while the count is read.
                    let one = ReceiveOptions::max(1).wait(Duration::from_secs(5));
                    let mine = loop {
                        if let Some(m) = q.receive(&one).unwrap().pop() {
                            break m;
                        }
                    };
                    held.wait();
                    released.wait();
                    q.delete(&mine.receipt_handle).unwrap();
                    deleted.fetch_add(1, Ordering::Relaxed);
                    let ten = ReceiveOptions::max(10).wait(Duration::ZERO);
                    while deleted.load(Ordering::Relaxed) < total {
                        for m in q.receive(&ten).unwrap() {
                            q.delete(&m.receipt_handle).unwrap();
                            deleted.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                });
            }
            held.wait();
            let counted = q.attributes().in_flight_count;
            released.wait();
            counted
        });
        assert_eq!(
            counted, THREADS as u64,
            "R8: each held message counted once (round {round})"
        );
        let n = (round + 1) * total;
        let c = q.counters();
        assert_eq!((c.sent, c.received, c.deleted), (n, n, n), "round {round}");
        assert_eq!(c.visibility_expiries, 0);
        assert_eq!(q.attributes().in_flight_count, 0, "round {round}");
    }
}
