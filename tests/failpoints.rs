//! Deterministic kill points: for each queue operation, a real process is SIGKILLed at
//! each step of it in turn (the `failpoints` feature turns every protocol crash point, the ones
//! the loom models stop a participant at, into a countdown that ends in `raise(SIGKILL)`), and
//! the survivors check that the queue recovers: nothing acknowledged lost, nothing duplicated,
//! per-group order kept, nothing left in flight or leaked, settings never torn.
//!
//! Run with `cargo test --features failpoints --test failpoints` (the README's test command
//! does). The binary is its own child: `SHMFIFO_FP_CHILD="op queue k"` runs one operation
//! armed to die at its `k`-th crash point. For each operation `k` goes 0, 1, 2 … until the
//! child completes, so every step is a kill point once.

mod common;

use std::collections::BTreeSet;
use std::os::unix::process::ExitStatusExt;
use std::process::Command;
use std::time::Duration;

use shmfifo::{
    failpoint, BatchEntry, Error, LoanOptions, Queue, QueueConfig, ReceiveOptions, RedrivePolicy,
    SendMessage,
};

/// The queue every case uses: small, deduplicating, with a long visibility timeout (so only a
/// release or an explicit change makes a message visible again within the test).
fn config() -> QueueConfig {
    QueueConfig::new()
        .max_messages(64)
        .max_groups(16)
        .maximum_message_size(1024)
        .dedup_entries(512)
        .visibility_timeout(Duration::from_secs(600))
        .size_limit(0) // a fixed capacity: the cases count slots coming back
}

/// [`config`] for a queue that grows (layout 13): the `send-grow` case.
fn grow_config() -> QueueConfig {
    config().size_limit(64 << 20)
}

/// The group of the child's message `x`: a new group for the `send-new-group` cases.
fn group_of_x(op: &str) -> &'static str {
    match op {
        "send-new-group" => "h",
        "send-new-group-grow" => "k",
        "send-kept" => "r",
        "send-placeholder" => "r",
        "send-new-group-reclaim" => "k",
        _ => "g",
    }
}

/// [`grow_config`] with a group table of one group in its base file (layout 16): the
/// `send-new-group-grow` case.
fn group_grow_config() -> QueueConfig {
    grow_config().max_groups(1)
}

/// Slots of [`config`]'s smallest class: the base file's.
const BASE_SLOTS: usize = 64;

/// The child side: open, arm, run one operation, report what was acknowledged on stdout.
fn child(spec: &str) {
    failpoint::stop_instead(std::env::var_os("SHMFIFO_FP_STOP").is_some());
    let f: Vec<&str> = spec.split(' ').collect();
    let (op, name, k) = (f[0], f[1], f[2].parse::<u64>().unwrap());
    if op == "release" {
        // Opening repairs what dead participants left (here: releases a dead holder's
        // messages), so the kill points of the release are those of the open.
        failpoint::arm(k);
    }
    let q = Queue::open(name).expect("child open");
    let long = ReceiveOptions::max(10).visibility_timeout(Duration::from_secs(600));
    let say = |s: String| {
        use std::io::Write;
        let mut o = std::io::stdout().lock();
        writeln!(o, "{s}").unwrap();
        o.flush().unwrap();
    };
    match op {
        "send"
        | "send-new-group"
        | "send-new-group-grow"
        | "send-grow"
        | "send-dedup-grow"
        | "send-kept"
        | "send-placeholder"
        | "send-new-group-reclaim" => {
            let g = group_of_x(op);
            failpoint::arm(k);
            let r = q.send(&SendMessage::new(g, "x").dedup_id("x1")).unwrap();
            failpoint::disarm();
            say(format!("ACK {}", r.message_id));
        }
        "send-large" => {
            // A message for the class laid out empty (layout 15): its first segment.
            let big = large_body();
            failpoint::arm(k);
            let r = q.send(&SendMessage::new("g", &big).dedup_id("x1")).unwrap();
            failpoint::disarm();
            say(format!("ACK {}", r.message_id));
        }
        "send-loan" => {
            // The slot lent, the body written in place, the loan sent.
            failpoint::arm(k);
            let mut loan = q.loan("g", 1).unwrap();
            loan.as_mut_slice().copy_from_slice(b"x");
            let r = loan.send_with(&LoanOptions::new().dedup_id("x1")).unwrap();
            failpoint::disarm();
            say(format!("ACK {}", r.message_id));
        }
        "send-loan-batch" => {
            // The batch of `send-batch` as loans (the batch form).
            failpoint::arm(k);
            let batch = the_batch();
            let loans: Vec<_> = batch
                .iter()
                .map(|e| {
                    let m = &e.entry;
                    let mut loan = q.loan(m.group_id.unwrap(), m.body.len()).unwrap();
                    loan.as_mut_slice().copy_from_slice(m.body.as_bytes());
                    (loan, LoanOptions::new().dedup_id(m.dedup_id.unwrap()))
                })
                .collect();
            let rs = q.send_loans(loans);
            failpoint::disarm();
            for (r, e) in rs.into_iter().zip(&batch) {
                say(format!("ACK {} {}", e.id, r.unwrap().message_id));
            }
        }
        "send-loan-pack" => {
            // The batch of `send-batch` in place: g's two entries as one loaned batch behind
            // a member repeating "a" (sent before: a duplicate, left out, the two moved down
            // over it in the slot), h's as a loan.
            failpoint::arm(k);
            let members = [
                (1, LoanOptions::new().dedup_id("a")),
                (2, LoanOptions::new().dedup_id("y1")),
                (2, LoanOptions::new().dedup_id("y2")),
            ];
            let mut batch = q.loan_batch("g", &members).unwrap();
            for (j, body) in [&b"a"[..], b"b1", b"b2"].iter().enumerate() {
                batch.body_mut(j).copy_from_slice(body);
            }
            let rs = batch.send().unwrap();
            let mut loan = q.loan("h", 2).unwrap();
            loan.as_mut_slice().copy_from_slice(b"c1");
            let c = loan.send_with(&LoanOptions::new().dedup_id("y3")).unwrap();
            failpoint::disarm();
            assert!(rs[0].as_ref().unwrap().duplicate, "the member repeating a");
            say(format!("ACK 1 {}", rs[1].as_ref().unwrap().message_id));
            say(format!("ACK 2 {}", rs[2].as_ref().unwrap().message_id));
            say(format!("ACK 3 {}", c.message_id));
        }
        "loan-drop" => {
            // A loan given back unsent.
            failpoint::arm(k);
            let mut loan = q.loan("g", 1).unwrap();
            loan.as_mut_slice().copy_from_slice(b"y");
            drop(loan);
        }
        "receive-borrowed-delete" => {
            failpoint::arm(k);
            let got = q.receive_borrowed(&long).unwrap();
            let mut ms = Vec::new();
            for m in got {
                let body = String::from_utf8(m.body().to_vec()).unwrap();
                m.verify().unwrap();
                say(format!("RECV {body}"));
                ms.push((body, m));
            }
            for (body, m) in ms {
                m.delete().unwrap();
                say(format!("DEL {body}"));
            }
        }
        "send-batch" | "send-pack" => {
            // `send-pack`: g's two entries go as one pack (layout 22).
            q.set_pack_batches(op == "send-pack");
            failpoint::arm(k);
            let rs = q.send_batch(&the_batch()).unwrap();
            failpoint::disarm();
            for r in rs {
                say(format!("ACK {} {}", r.id, r.result.unwrap().message_id));
            }
        }
        "receive-short" => {
            // A 100 ms visibility timeout, which the parent's test clock ends while we are
            // stopped; the message kept, not deleted.
            let short = ReceiveOptions::max(1)
                .visibility_timeout(Duration::from_millis(100))
                .wait(Duration::ZERO);
            failpoint::arm(k);
            for m in q.receive(&short).unwrap() {
                say(format!(
                    "RECV {} {}",
                    m.body,
                    m.first_receive_timestamp - m.sent_timestamp
                ));
            }
        }
        "receive-delete" => {
            failpoint::arm(k);
            let got = q.receive(&long).unwrap();
            for m in &got {
                say(format!("RECV {}", m.body));
            }
            for m in &got {
                q.delete(&m.receipt_handle).unwrap();
                say(format!("DEL {}", m.body));
            }
        }
        "receive-delete-batch" | "receive-delete-run" | "receive-delete-pack" => {
            failpoint::arm(k);
            let got = q.receive(&long).unwrap();
            for m in &got {
                say(format!("RECV {}", m.body));
            }
            let hs: Vec<String> = got.iter().map(|m| m.receipt_handle.to_string()).collect();
            let ids = ["0", "1", "2", "3", "4", "5", "6", "7", "8", "9"];
            let entries: Vec<BatchEntry<'_, &str>> = hs
                .iter()
                .zip(ids)
                .map(|(h, id)| BatchEntry {
                    id,
                    entry: h.as_str(),
                })
                .collect();
            if !entries.is_empty() {
                for (r, m) in q.delete_batch(&entries).unwrap().iter().zip(&got) {
                    r.result.as_ref().unwrap();
                    say(format!("DEL {}", m.body));
                }
            }
        }
        "change-visibility" => {
            let got = q.receive(&long).unwrap();
            for m in &got {
                say(format!("RECV {}", m.body));
            }
            failpoint::arm(k);
            q.change_visibility(&got[0].receipt_handle, Duration::ZERO)
                .unwrap();
        }
        "purge" => {
            failpoint::arm(k);
            q.purge().unwrap();
        }
        "delete-given" => {
            // The delete of a message the parent received (its receipt handle is `f[3]`).
            failpoint::arm(k);
            q.delete(&f[3].parse().unwrap()).unwrap();
            failpoint::disarm();
            say("DELETED".into());
        }
        "dead-letter-move" => {
            failpoint::arm(k);
            let got = q.receive(&long).unwrap();
            assert!(got.is_empty(), "moved, never delivered a 2nd time");
        }
        "attempt-receive" => {
            failpoint::arm(k);
            let got = q.receive_with_attempt_id(&long, "t1").unwrap();
            for m in &got {
                say(format!("RECV {}", m.body));
            }
        }
        "hold" => {
            let got = q.receive(&long).unwrap();
            say(format!("HELD {}", got.len()));
            // SAFETY: raise(3) has no preconditions; the process dies holding its messages.
            unsafe {
                libc::raise(libc::SIGKILL);
            }
        }
        "send-wait" => {
            // The class is full: the send waits (announced on the space doorbell) and times
            // out.
            failpoint::arm(k);
            let r = q.send_timeout(
                &SendMessage::new("g", "x").dedup_id("x1"),
                Duration::from_millis(150),
            );
            failpoint::disarm();
            match r {
                Ok(r) => say(format!("ACK {}", r.message_id)),
                Err(Error::SizeClassFull { .. }) => say("FULL".into()),
                Err(e) => panic!("send-wait: {e}"),
            }
        }
        "expiry-sweep" => {
            // Visibility timeouts end (on the test clock) with no hint queued, so
            // the receive drains the expiry wheel's due bucket, hints what expired and takes
            // it again; then deletes it.
            let short = ReceiveOptions::max(10).visibility_timeout(Duration::from_secs(10));
            let first = q.receive(&short).unwrap();
            assert!(!first.is_empty());
            q.advance_clock(Duration::from_secs(11)).unwrap();
            failpoint::arm(k);
            let got = q.receive(&long).unwrap();
            failpoint::disarm();
            for m in &got {
                say(format!("RECV {}", m.body));
            }
            for m in &got {
                q.delete(&m.receipt_handle).unwrap();
                say(format!("DEL {}", m.body));
            }
        }
        "release" => {
            q.recover().unwrap();
        }
        "quarantine" => {
            failpoint::arm(k);
            q.recover().unwrap();
        }
        "set-delay" => {
            // A change of a live setting that asks for a sweep (live::change, reschedule).
            failpoint::arm(k);
            q.set_attribute("DelaySeconds", "0").unwrap();
        }
        "census" => {
            // The in-flight limit is reached, the last census a second old: this receive
            // runs the census (accounting::fresh_budget), finds the one message in flight
            // real and takes nothing.
            failpoint::arm(k);
            let got = q.receive(&long.wait(Duration::ZERO)).unwrap();
            failpoint::disarm();
            assert!(got.is_empty(), "the limit holds");
        }
        "set-redrive-policy" => {
            failpoint::arm(k);
            q.set_attribute("RedrivePolicy", &policy_json(f[3], 3))
                .unwrap();
        }
        _ => panic!("unknown op {op}"),
    }
    failpoint::disarm();
    say("DONE".into());
}

fn policy_json(dlq: &str, n: u32) -> String {
    format!(r#"{{"deadLetterTargetArn":"{dlq}","maxReceiveCount":{n}}}"#)
}

/// What a child did: killed at its kill point or completed, and its report lines.
struct Outcome {
    killed: bool,
    lines: Vec<String>,
}

impl Outcome {
    fn with(&self, prefix: &str) -> Vec<String> {
        self.lines
            .iter()
            .filter_map(|l| l.strip_prefix(prefix).map(str::to_owned))
            .collect()
    }
}

fn run_child(op: &str, name: &str, k: u64, extra: &str) -> Outcome {
    let out = Command::new(std::env::current_exe().unwrap())
        .env("SHMFIFO_FP_CHILD", format!("{op} {name} {k} {extra}"))
        .output()
        .expect("spawn child");
    let killed = out.status.signal() == Some(libc::SIGKILL);
    assert!(
        killed || out.status.success(),
        "{op} k={k}: child failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect();
    assert_eq!(
        !killed,
        lines.iter().any(|l| l == "DONE"),
        "{op} k={k}: completed exactly when not killed"
    );
    Outcome { killed, lines }
}

/// Receives and deletes everything visible (after a recovery, which releases what dead
/// receivers held), returning bodies in delivery order; checks per-group order by the
/// sequence numbers.
fn drain(q: &Queue) -> Vec<String> {
    q.recover().unwrap();
    let mut out = Vec::new();
    let mut empty = 0;
    while empty < 2 {
        let got = q
            .receive(&ReceiveOptions::max(10).visibility_timeout(Duration::from_secs(600)))
            .unwrap();
        if got.is_empty() {
            empty += 1;
            q.recover().unwrap();
            continue;
        }
        for m in got {
            q.delete(&m.receipt_handle).unwrap();
            out.push(m.body);
        }
    }
    out
}

/// Messages of one small size that fit before the size class is full.
fn capacity(q: &Queue) -> usize {
    // Ids of this call's own: a second call on the queue would otherwise send duplicates of the
    // first's (accepted within the dedup interval, not enqueued, D1) and count them as room.
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut n = 0;
    loop {
        match q.send(&SendMessage::new("cap", "c").dedup_id(&format!("cap-{call}-{n}"))) {
            Ok(_) => n += 1,
            Err(Error::SizeClassFull { .. }) => break,
            Err(e) => panic!("capacity: {e}"),
        }
    }
    assert_eq!(drain(q).len(), n);
    n
}

/// After a case: nothing visible, in flight or delayed, and no slot leaked.
fn assert_clean(q: &Queue, full: usize, what: &str) {
    let a = q.attributes();
    assert_eq!(
        (
            a.approximate_number_of_messages,
            a.approximate_number_of_messages_not_visible,
            a.approximate_number_of_messages_delayed
        ),
        (0, 0, 0),
        "{what}: counts"
    );
    assert_group_count(q, what);
    // Every slot back: a drained group holds none (layout 19: the delete that empties it
    // reopens its list at its sentinel and frees its last message's slot).
    let c = capacity(q);
    assert!(c >= full, "{what}: capacity {c} of {full}: slots leaked");
}

/// The end of a case: "a" before "b" if both were delivered (one group), the queue clean, and
/// removed.
fn finish(q: &Queue, name: &str, got: &[String], full: usize, what: &str) {
    let pos = |b: &str| got.iter().position(|x| x == b);
    if let (Some(x), Some(y)) = (pos("a"), pos("b")) {
        assert!(x < y, "{what}: group order");
    }
    assert_clean(q, full, what);
    let _ = Queue::unlink(name);
}

/// Runs `op` killed at each of its steps in turn; `case` sets up a fresh queue, runs the child
/// and checks. Returns the number of kill points.
fn each_step(op: &str, full: usize, case: &dyn Fn(&str, u64, usize) -> bool) -> u64 {
    for k in 0..500 {
        if !case(op, k, full) {
            return k;
        }
    }
    panic!("{op}: still killed after 500 steps");
}

fn fresh(tag: &str, cfg: &QueueConfig) -> (String, Queue) {
    let name = common::unique(tag);
    let q = Queue::create(&name, cfg).expect("create");
    (name, q)
}

fn send(q: &Queue, g: &str, body: &str) {
    q.send(&SendMessage::new(g, body).dedup_id(body)).unwrap();
}

/// Sends "a", "b" to group g as one pack (layout 22), then "c" to h: what the
/// `receive-delete-pack` cases receive and delete.
fn send_pack_then_c(q: &Queue) {
    q.set_pack_batches(true);
    let rs = q
        .send_messages(&[
            SendMessage::new("g", "a").dedup_id("a"),
            SendMessage::new("g", "b").dedup_id("b"),
        ])
        .unwrap();
    let ids: Vec<_> = rs.into_iter().map(|r| r.unwrap().message_id).collect();
    // One slot: the ids differ only in the member (the first hex digit).
    assert_eq!(ids[0].to_string()[1..], ids[1].to_string()[1..], "a pack");
    q.set_pack_batches(false);
    send(q, "h", "c");
}

/// A loan killed at each step, holding it or giving it back: nothing sent, nothing leaked.
fn case_loan_drop(op: &str, k: u64, full: usize) -> bool {
    let (name, q) = fresh("fploan", &config());
    send(&q, "g", "a");
    let o = run_child(op, &name, k, "");
    let got = drain(&q);
    assert_eq!(got, ["a"], "{op} k={k}: only what was sent");
    assert_clean(&q, full, &format!("{op} k={k}"));
    let _ = Queue::unlink(&name);
    o.killed
}

/// Send, send to a new group and a loaned send: the retry with the same dedup id (as a producer that was not
/// acknowledged does) leaves exactly one "x", after "a" in its group; an acknowledged send is
/// a duplicate of itself.
fn case_send(op: &str, k: u64, full: usize) -> bool {
    let (name, q) = fresh("fpsend", &config());
    send(&q, "g", "a");
    let o = run_child(op, &name, k, "");
    q.recover().unwrap();
    let g = group_of_x(op);
    resend_x(&q, g, &o, op, k);
    let got = drain(&q);
    assert_eq!(got, ["a", "x"], "{op} k={k}: exactly one x, in order");
    assert_clean(&q, full, &format!("{op} k={k}"));
    let _ = Queue::unlink(&name);
    o.killed
}

/// The survivor sends the child's message again (`x` to group `g`, dedup id `x1`): one
/// message in all, a duplicate of the child's where the child was acknowledged.
fn resend_x(q: &Queue, g: &str, o: &Outcome, op: &str, k: u64) {
    let again = q.send(&SendMessage::new(g, "x").dedup_id("x1")).unwrap();
    if let Some(id) = o.with("ACK ").first() {
        assert!(again.duplicate, "{op} k={k}: acknowledged, so a duplicate");
        assert_eq!(&again.message_id.to_string(), id);
    }
}

/// Group `r` served in place and emptied (layout 27: its one message received, as the ready
/// ring's only hint, and deleted, with no receive after), so that its hint is left queued as
/// a placeholder; then `g` sent, hinted behind it. The `send-placeholder` cases: the child's
/// send to `r` finds the placeholder with a hint behind it, takes it out of the ring and
/// pushes a fresh one.
fn fresh_r_placeholder(tag: &str, cfg: &QueueConfig) -> (String, Queue) {
    let (name, q) = fresh(tag, cfg);
    send(&q, "r", "r0");
    let got = q
        .receive(&ReceiveOptions::max(1).wait(Duration::ZERO))
        .unwrap();
    assert_eq!(got.len(), 1);
    q.delete(&got[0].receipt_handle).unwrap();
    send(&q, "g", "a");
    (name, q)
}

/// A send to a group whose hint is a placeholder with another group hinted behind it, killed
/// at each step (its link, its publish, the placeholder taken out of the ring, its `STALE`
/// bit cleared, the fresh hint pushed): the survivor's send is the same message once, and
/// both messages are delivered, `a` (hinted first) before `x` where the child's send did not
/// die before its ready-check (R6), and the queue ends clean.
fn case_send_placeholder(op: &str, k: u64, full: usize) -> bool {
    let (name, q) = fresh_r_placeholder("fpplace", &config());
    let o = run_child(op, &name, k, "");
    q.recover().unwrap();
    resend_x(&q, "r", &o, op, k);
    let got = drain(&q);
    let mut sorted = got.clone();
    sorted.sort();
    assert_eq!(sorted, ["a", "x"], "{op} k={k}: exactly one x: {got:?}");
    if !o.killed {
        assert_eq!(got, ["a", "x"], "{op} k={k}: R6");
    }
    assert_clean(&q, full, &format!("{op} k={k}"));
    let _ = Queue::unlink(&name);
    o.killed
}

/// Group `r` emptied (its one message received and deleted), so that it is kept, idle, with
/// its key (layout 19) for the `send-kept` cases.
fn keep_r(q: &Queue) {
    send(q, "r", "r0");
    assert_eq!(drain(q), ["r0"]);
}

/// A fresh queue in which group `r` is kept (layout 19) and `then` was sent after it.
fn fresh_r_kept(tag: &str, cfg: &QueueConfig, then: &[(&str, &str)]) -> (String, Queue) {
    let (name, q) = fresh(tag, cfg);
    keep_r(&q);
    for (g, b) in then {
        send(&q, g, b);
    }
    assert_eq!(q.inspect(0).unwrap().kept_groups, 1, "{tag}: r is kept");
    (name, q)
}

/// The group table's count against its census: never below the entries it covers
/// (groups with messages and kept groups), and over them by at most the one participant killed
/// (between a count change and its entry's) and not yet recounted.
fn assert_group_count(q: &Queue, what: &str) {
    let i = q.inspect(0).unwrap();
    let census = i.active_groups + i.kept_groups;
    assert!(
        (census..=census + 1).contains(&i.group_entries_in_use),
        "{what}: {} group entries counted, {} active and {} kept",
        i.group_entries_in_use,
        i.active_groups,
        i.kept_groups
    );
}

/// A send to a kept group (layout 19: an append after its reopened sentinel, no insert),
/// killed at each step: the survivor's send is the same message once, into the one entry of
/// the group, and the queue ends clean.
fn case_send_kept(op: &str, k: u64, full: usize) -> bool {
    let (name, q) = fresh_r_kept("fpkept", &config(), &[("g", "a")]);
    let o = run_child(op, &name, k, "");
    q.recover().unwrap();
    resend_x(&q, "r", &o, op, k);
    let i = q.inspect(0).unwrap();
    assert_eq!(
        (i.active_groups, i.kept_groups),
        (2, 0),
        "{op} k={k}: r holds x, once"
    );
    assert_group_count(&q, &format!("{op} k={k}"));
    let mut got = drain(&q);
    got.sort();
    assert_eq!(got, ["a", "x"], "{op} k={k}: exactly one x");
    assert_clean(&q, full, &format!("{op} k={k}"));
    let _ = Queue::unlink(&name);
    o.killed
}

/// A send of a new group into a table at its capacity (two groups, one with a message and one
/// kept), killed at each step: the insert first retires the kept group (under its claim, its
/// sentinel closed, a plain tombstone counted out: the reclaim), then counts its own group in. The
/// survivor's send is the same message once, the count never falls below what it covers and
/// stays over it by at most the dead sender's one, and once the table is full again a send
/// of another new group gets in (the recount of a table that may not grow corrects the dead
/// sender's leak).
fn case_send_new_group_reclaim(op: &str, k: u64, full: usize) -> bool {
    let cfg = config().max_groups(2);
    let (name, q) = fresh_r_kept("fpreclaim", &cfg, &[("g", "a")]);
    let o = run_child(op, &name, k, "");
    q.recover().unwrap();
    let what = format!("{op} k={k}");
    assert_group_count(&q, &what);
    resend_x(&q, "k", &o, op, k);
    assert_group_count(&q, &what);
    let mut got = drain(&q);
    got.sort();
    assert_eq!(got, ["a", "x"], "{what}: exactly one x");
    // g and k are kept now, the table at its capacity: a third group gets in.
    send(&q, "m", "m1");
    assert_eq!(drain(&q), ["m1"], "{what}");
    assert_group_count(&q, &what);
    assert_clean(&q, full, &what);
    let _ = Queue::unlink(&name);
    o.killed
}

/// A send that grows a full class by a segment (layout 13), killed at each step of it
/// (holding the grow claim, with the segment's offset written, its blocks reserved, or it
/// published): the survivor's send is the same message once (a duplicate if it was
/// acknowledged), the class grows on (the dead grower's claim taken over), every message comes
/// back in order, and the file stays within its limit.
fn case_send_grow(op: &str, k: u64, _full: usize) -> bool {
    let (name, q) = fresh("fpgrow", &grow_config());
    for i in 0..BASE_SLOTS {
        send(&q, "f", &format!("f{i}"));
    }
    assert_eq!(q.size().grows, 0, "the base file holds {BASE_SLOTS}");
    let o = run_child(op, &name, k, "");
    q.recover().unwrap();
    resend_x(&q, "g", &o, op, k);
    // The class grows on: the claim of a dead grower is no obstacle.
    for i in 0..3 * BASE_SLOTS {
        send(&q, "m", &format!("m{i}"));
    }
    let s = q.size();
    assert!(
        s.grows >= 2 && s.bytes <= s.limit_bytes,
        "{op} k={k}: {s:?}"
    );
    let got = drain(&q);
    let of = |g: char| -> Vec<&String> { got.iter().filter(|b| b.starts_with(g)).collect() };
    let f: Vec<String> = (0..BASE_SLOTS).map(|i| format!("f{i}")).collect();
    let m: Vec<String> = (0..3 * BASE_SLOTS).map(|i| format!("m{i}")).collect();
    assert!(
        of('f')
            .iter()
            .map(|b| b.as_str())
            .eq(f.iter().map(String::as_str)),
        "{op} k={k}: f in order"
    );
    assert!(
        of('m')
            .iter()
            .map(|b| b.as_str())
            .eq(m.iter().map(String::as_str)),
        "{op} k={k}: m in order"
    );
    assert_eq!(of('x').len(), 1, "{op} k={k}: exactly one x");
    assert_eq!(got.len(), 4 * BASE_SLOTS + 1, "{op} k={k}: nothing else");
    let a = q.attributes();
    assert_eq!(
        (
            a.approximate_number_of_messages,
            a.approximate_number_of_messages_not_visible
        ),
        (0, 0),
        "{op} k={k}: counts"
    );
    let _ = Queue::unlink(&name);
    o.killed
}

/// A body for the class [`grow_config`] lays out empty (layout 15): larger than its
/// `maximum_message_size` of 1,024, so the queue's is raised first.
fn large_body() -> String {
    "L".repeat(4000)
}

/// A send of a new group to a full group table (layout 16: one group in the base table, two
/// with the first added table, both taken), which adds the next table; killed at each step of
/// that (holding the key's home claim, then the grow claim, with the table's offset written,
/// its blocks reserved, or it published): the survivor's send is the same message once, into
/// one entry of its group (a duplicate where it was acknowledged), the table grows on past the
/// dead grower's claim, and every message comes back in its group's order.
fn case_send_new_group_grow(op: &str, k: u64, _full: usize) -> bool {
    let (name, q) = fresh("fpggrow", &group_grow_config());
    send(&q, "g", "a");
    send(&q, "h", "b");
    assert_eq!(
        q.attributes().group_capacity,
        2,
        "the base table and one added"
    );
    let o = run_child(op, &name, k, "");
    q.recover().unwrap();
    resend_x(&q, "k", &o, op, k);
    assert_eq!(
        q.attributes().active_groups,
        3,
        "{op} k={k}: k inserted once"
    );
    // The table grows on: the claims of a dead grower are no obstacle.
    for i in 0..8 {
        send(&q, &format!("n{i}"), &format!("n{i}"));
    }
    let a = q.attributes();
    assert!(
        a.active_groups == 11 && a.group_capacity >= 11,
        "{op} k={k}: {} groups, capacity {}",
        a.active_groups,
        a.group_capacity
    );
    let mut got = drain(&q);
    got.sort();
    let mut want: Vec<String> = ["a", "b", "x"].iter().map(|s| s.to_string()).collect();
    want.extend((0..8).map(|i| format!("n{i}")));
    want.sort();
    assert_eq!(got, want, "{op} k={k}: exactly one x, nothing lost");
    let _ = Queue::unlink(&name);
    o.killed
}

/// A send of a message larger than the queue was created for, after `MaximumMessageSize` was
/// raised (layout 15): the class for it has no slot in the base file, so the send adds its
/// first segment; killed at each step of that: the survivor's send of the same message is one
/// message (a duplicate where it was acknowledged), the class grows on, and every message
/// comes back in order.
fn case_send_large(op: &str, k: u64, _full: usize) -> bool {
    let (name, q) = fresh("fplarge", &grow_config());
    q.set_attribute("MaximumMessageSize", "1048576").unwrap();
    send(&q, "g", "a");
    let o = run_child(op, &name, k, "");
    q.recover().unwrap();
    let big = large_body();
    let again = q.send(&SendMessage::new("g", &big).dedup_id("x1")).unwrap();
    if let Some(id) = o.with("ACK ").first() {
        assert!(again.duplicate, "{op} k={k}: acknowledged, so a duplicate");
        assert_eq!(&again.message_id.to_string(), id);
    }
    // The class grows on past a dead grower: two more large messages need its second segment.
    for b in ["M", "N"] {
        let body = b.repeat(4000);
        q.send(&SendMessage::new("g", &body).dedup_id(b)).unwrap();
    }
    assert!(q.size().grows >= 2, "{op} k={k}: {:?}", q.size());
    let got = drain(&q);
    let heads: Vec<String> = got
        .iter()
        .map(|b| format!("{}{}", &b[..1], b.len()))
        .collect();
    assert_eq!(
        heads,
        ["a1", "L4000", "M4000", "N4000"],
        "{op} k={k}: exactly one large x, in order"
    );
    let _ = Queue::unlink(&name);
    o.killed
}

/// A send whose new dedup id grows the dedup table (layout 14: a table of one entry, so the
/// second id needs a new segment), killed at each step of it: the survivor's send of the same
/// id is one message (a duplicate where it was acknowledged), the first id is still
/// remembered, nothing was evicted, and the messages come back in order.
fn case_send_dedup_grow(op: &str, k: u64, _full: usize) -> bool {
    let (name, q) = fresh("fpdgrow", &grow_config().dedup_entries(1));
    send(&q, "g", "a");
    let o = run_child(op, &name, k, "");
    q.recover().unwrap();
    resend_x(&q, "g", &o, op, k);
    let first = q.send(&SendMessage::new("g", "a").dedup_id("a")).unwrap();
    assert!(first.duplicate, "{op} k={k}: the first id is remembered");
    assert_eq!(
        q.attributes().dedup_evictions,
        0,
        "{op} k={k}: nothing forgotten"
    );
    assert!(
        q.attributes().dedup_entries >= 2,
        "{op} k={k}: the table grew"
    );
    assert_eq!(drain(&q), ["a", "x"], "{op} k={k}: exactly one x, in order");
    let _ = Queue::unlink(&name);
    o.killed
}

/// A producer waiting for space in a full class (`send_timeout`), killed at each step: the
/// queue keeps exactly what it held, a later waiter is still served when a delete frees room,
/// and nothing leaks.
fn case_send_wait(op: &str, k: u64, full: usize) -> bool {
    let (name, q) = fresh("fpwait", &config());
    for i in 0..full {
        send(&q, "f", &format!("f{i}"));
    }
    let o = run_child(op, &name, k, "");
    if !o.killed {
        assert_eq!(o.with("FULL").len(), 1, "{op} k={k}: timed out, class full");
    }
    q.recover().unwrap();
    // A live waiter after the dead one: woken by the delete of the group's last messages.
    std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(Duration::from_millis(20));
            let got = q
                .receive(&ReceiveOptions::max(10).visibility_timeout(Duration::from_secs(600)))
                .unwrap();
            for m in &got {
                q.delete(&m.receipt_handle).unwrap();
            }
        });
        q.send_timeout(
            &SendMessage::new("w", "w").dedup_id("w"),
            Duration::from_secs(30),
        )
        .unwrap();
    });
    let got = drain(&q);
    assert_eq!(got.len(), full + 1 - 10, "{op} k={k}: the rest and w");
    assert!(got.iter().any(|b| b == "w"), "{op} k={k}: w delivered");
    assert_clean(&q, full, &format!("{op} k={k}"));
    let _ = Queue::unlink(&name);
    o.killed
}

/// The batch of the `send-batch` case: two entries to group g, one to h.
fn the_batch() -> [BatchEntry<'static, SendMessage<'static>>; 3] {
    [
        BatchEntry {
            id: "1",
            entry: SendMessage::new("g", "b1").dedup_id("y1"),
        },
        BatchEntry {
            id: "2",
            entry: SendMessage::new("g", "b2").dedup_id("y2"),
        },
        BatchEntry {
            id: "3",
            entry: SendMessage::new("h", "c1").dedup_id("y3"),
        },
    ]
}

/// A batch (two entries to group g, one to h) killed at each step (each group's
/// entries are one chain): afterwards (a recovery, then the same batch again, whose entries
/// are duplicates of whatever was committed) each group's messages are delivered exactly
/// once, in order, g's two together after "a"; an acknowledged batch was committed whole.
fn case_send_batch(op: &str, k: u64, full: usize) -> bool {
    let (name, q) = fresh("fpbatch", &config());
    send(&q, "g", "a");
    let o = run_child(op, &name, k, "");
    q.recover().unwrap();
    let again = q.send_batch(&the_batch()).unwrap();
    let acked = o.with("ACK ");
    if !acked.is_empty() {
        assert_eq!(acked.len(), 3, "{op} k={k}");
        for r in &again {
            assert!(
                r.result.as_ref().unwrap().duplicate,
                "{op} k={k}: acknowledged, so a duplicate"
            );
        }
    }
    // Within g, the chain is whole: both duplicates of the child's, or both new.
    let dups: Vec<bool> = again
        .iter()
        .map(|r| r.result.as_ref().unwrap().duplicate)
        .collect();
    assert_eq!(
        dups[0], dups[1],
        "{op} k={k}: half a chain committed: {dups:?}"
    );
    let got = drain(&q);
    let g: Vec<&String> = got.iter().filter(|b| b.as_str() != "c1").collect();
    assert_eq!(
        g,
        ["a", "b1", "b2"],
        "{op} k={k}: g whole, in order, once: {got:?}"
    );
    assert_eq!(
        got.iter().filter(|b| b.as_str() == "c1").count(),
        1,
        "{op} k={k}"
    );
    assert_clean(&q, full, &format!("{op} k={k}"));
    let _ = Queue::unlink(&name);
    o.killed
}

/// Receive, then delete each: a message is deleted by the child or delivered afterwards, never
/// both, never lost (at most the one being deleted at the kill is in neither list), in order.
/// `receive-delete-run`: "a", "b", "c" of one group behind a dummy that is a message slot
/// ("x", deleted first), so the batch's cleanup frees a run of three slots (one swap of the
/// group's head, then the run last node first), killed at each of those steps too.
fn case_receive_delete(op: &str, k: u64, full: usize) -> bool {
    let (name, q) = fresh("fprd", &config());
    let run = op == "receive-delete-run";
    let sends: &[(&str, &str)] = if run {
        &[("g", "x"), ("g", "a"), ("g", "b"), ("g", "c")]
    } else {
        &[("g", "a"), ("g", "b"), ("h", "c")]
    };
    if op == "receive-delete-pack" {
        send_pack_then_c(&q);
    } else {
        for (g, b) in sends {
            send(&q, g, b);
        }
    }
    if run {
        let x = q
            .receive(&ReceiveOptions::max(1).wait(Duration::ZERO))
            .unwrap();
        assert_eq!(x.len(), 1);
        assert_eq!(x[0].body, "x");
        q.delete(&x[0].receipt_handle).unwrap();
    }
    let o = run_child(op, &name, k, "");
    let deleted: BTreeSet<String> = o.with("DEL ").into_iter().collect();
    let received: BTreeSet<String> = o.with("RECV ").into_iter().collect();
    let got = drain(&q);
    let set: BTreeSet<String> = got.iter().cloned().collect();
    assert_eq!(set.len(), got.len(), "{op} k={k}: no duplicate");
    assert!(
        set.is_disjoint(&deleted),
        "{op} k={k}: deleted, then delivered"
    );
    let missing: Vec<&str> = ["a", "b", "c"]
        .into_iter()
        .filter(|b| !set.contains(*b) && !deleted.contains(*b))
        .collect();
    // One delete acts before its acknowledgement; a batch's deletes all act before theirs.
    let most = if op == "receive-delete-batch" || op == "receive-delete-pack" || run {
        3
    } else {
        1
    };
    assert!(
        missing.len() <= most && missing.iter().all(|b| received.contains(*b)),
        "{op} k={k}: lost {missing:?}"
    );
    if run {
        let mut ordered = got.clone();
        ordered.sort();
        assert_eq!(got, ordered, "{op} k={k}: group order");
        // Drained, the group retired and freed its dummy: every slot of the run (x, a, b as
        // freed by the child or, after its death, by whoever took the claim) is back, not
        // just all but the two `assert_clean` allows for groups still holding a dummy.
        assert_eq!(capacity(&q), full, "{op} k={k}: a slot of the run leaked");
    }
    finish(&q, &name, &got, full, &format!("{op} k={k}"));
    o.killed
}

/// A visibility change to zero killed at each step: the message comes back exactly once.
fn case_change_visibility(op: &str, k: u64, full: usize) -> bool {
    let (name, q) = fresh("fpcmv", &config());
    send(&q, "g", "a");
    let o = run_child(op, &name, k, "");
    let got = drain(&q);
    assert_eq!(got, ["a"], "{op} k={k}");
    assert_clean(&q, full, &format!("{op} k={k}"));
    let _ = Queue::unlink(&name);
    o.killed
}

/// An expiry sweep killed at each step (draining the wheel's bucket, hinting, taking the
/// expired messages again): each message is delivered again exactly once (to the child, or
/// after the recovery of its death, to us), in group order, and nothing leaks.
fn case_expiry_sweep(op: &str, k: u64, full: usize) -> bool {
    let (name, q) = fresh("fpexp", &config().test_clock(true));
    for (g, b) in [("g", "a"), ("g", "b"), ("h", "c")] {
        send(&q, g, b);
    }
    let o = run_child(op, &name, k, "");
    let deleted: BTreeSet<String> = o.with("DEL ").into_iter().collect();
    let got = drain(&q);
    let mut all: Vec<String> = got.iter().chain(&deleted).cloned().collect();
    all.sort();
    assert_eq!(all, ["a", "b", "c"], "{op} k={k}: each once, nothing lost");
    finish(&q, &name, &got, full, &format!("{op} k={k}"));
    o.killed
}

/// Purge killed at each step (with one message in flight to a live holder): what survives is
/// delivered once, in group order; the in-flight one is purged or still ours to delete.
fn case_purge(op: &str, k: u64, full: usize) -> bool {
    let (name, q) = fresh("fppurge", &config());
    for (g, b) in [("g", "a"), ("g", "b"), ("h", "c"), ("i", "d")] {
        send(&q, g, b);
    }
    let held = q
        .receive(
            &ReceiveOptions::max(1)
                .visibility_timeout(Duration::from_secs(600))
                .wait(Duration::ZERO),
        )
        .unwrap();
    assert_eq!(held.len(), 1);
    let o = run_child(op, &name, k, "");
    let ours = q.delete(&held[0].receipt_handle);
    assert!(
        ours.is_ok() || matches!(ours, Err(Error::ReceiptHandleExpired { .. })),
        "{op} k={k}: {ours:?}"
    );
    if !o.killed {
        assert!(
            ours.is_err(),
            "{op} k={k}: a completed purge expires handles"
        );
    }
    let got = drain(&q);
    if !o.killed {
        assert!(
            got.is_empty(),
            "{op} k={k}: a completed purge leaves nothing"
        );
    }
    let set: BTreeSet<&String> = got.iter().collect();
    assert_eq!(set.len(), got.len(), "{op} k={k}: no duplicate");
    assert!(
        !set.contains(&held[0].body),
        "{op} k={k}: purged or deleted"
    );
    finish(&q, &name, &got, full, &format!("{op} k={k}"));
    o.killed
}

/// The quarantine of a damaged group inside `recover`, killed at each
/// step: a group whose `head` names a node that does not exist holds "a" and "b", a healthy
/// one holds "c". Afterwards a second `recover` finishes (or resumes) the quarantine: the
/// damaged group's messages are never delivered, "c" is, the group is counted once, and
/// every slot of the damaged group is free again.
fn case_quarantine(op: &str, k: u64, full: usize) -> bool {
    let (name, q) = fresh("fpquar", &config());
    for (g, b) in [
        ("the-damaged-group", "a"),
        ("the-damaged-group", "b"),
        ("healthy", "c"),
    ] {
        send(&q, g, b);
    }
    common::break_group(&format!("/dev/shm/{name}"), b"the-damag");
    let o = run_child(op, &name, k, "");
    let r = q
        .recover()
        .expect("the second recover finishes or resumes the quarantine");
    let a = q.attributes();
    assert_eq!(a.quarantined_groups, 1, "{op} k={k}: counted once ({r:?})");
    if !o.killed {
        assert_eq!(
            r.quarantined_groups, 0,
            "{op} k={k}: nothing left to quarantine"
        );
    }
    let got = drain(&q);
    assert_eq!(
        got,
        ["c"],
        "{op} k={k}: only the healthy group is delivered"
    );
    assert_eq!(q.recover().unwrap().quarantined_groups, 0);
    finish(&q, &name, &got, full, &format!("{op} k={k}"));
    o.killed
}

/// The dead-letter move inside a receive, killed at each step: afterwards (one more receive
/// finishes any move) the message is in the dead-letter queue exactly once and gone from the
/// source.
fn case_dead_letter_move(op: &str, k: u64, full: usize) -> bool {
    let (dname, dlq) = fresh("fpdlq", &config());
    let (name, q) = fresh(
        "fpsrc",
        &config().redrive_policy(RedrivePolicy::new(dname.clone(), 1)),
    );
    send(&q, "g", "a");
    let once = q
        .receive(&ReceiveOptions::max(1).visibility_timeout(Duration::ZERO))
        .unwrap();
    assert_eq!(once.len(), 1);
    let o = run_child(op, &name, k, "");
    q.recover().unwrap();
    let rest = q.receive(&ReceiveOptions::max(10)).unwrap();
    assert!(rest.is_empty(), "{op} k={k}: moved, never delivered again");
    let moved = drain(&dlq);
    assert_eq!(
        moved,
        ["a"],
        "{op} k={k}: in the dead-letter queue exactly once"
    );
    assert_clean(&q, full, &format!("{op} k={k} source"));
    let _ = Queue::unlink(&name);
    let _ = Queue::unlink(&dname);
    o.killed
}

/// A receive with an attempt id killed at each step (its record half written): a retry with
/// the same id, or a plain receive, delivers everything exactly once in order.
fn case_attempt_receive(op: &str, k: u64, full: usize) -> bool {
    let (name, q) = fresh("fpattempt", &config());
    send(&q, "g", "a");
    send(&q, "g", "b");
    let o = run_child(op, &name, k, "");
    q.recover().unwrap();
    let retry = q
        .receive_with_attempt_id(
            &ReceiveOptions::max(10).visibility_timeout(Duration::from_secs(600)),
            "t1",
        )
        .unwrap();
    let mut got: Vec<String> = Vec::new();
    for m in retry {
        q.delete(&m.receipt_handle).unwrap();
        got.push(m.body);
    }
    got.extend(drain(&q));
    assert_eq!(got, ["a", "b"], "{op} k={k}");
    assert_clean(&q, full, &format!("{op} k={k}"));
    let _ = Queue::unlink(&name);
    o.killed
}

/// Releasing a dead receiver's messages, killed at each step: a later recovery finishes; each
/// message comes back exactly once, in order, its receive count going on.
fn case_release(op: &str, k: u64, full: usize) -> bool {
    let (name, q) = fresh("fprelease", &config());
    for b in ["a", "b", "c"] {
        send(&q, "g", b);
    }
    let held = run_child("hold", &name, 0, "");
    assert!(held.killed && held.with("HELD ") == ["3"]);
    let o = run_child(op, &name, k, "");
    q.recover().unwrap();
    let got = q
        .receive(&ReceiveOptions::max(10).visibility_timeout(Duration::from_secs(600)))
        .unwrap();
    assert_eq!(
        got.iter().map(|m| m.body.as_str()).collect::<Vec<_>>(),
        ["a", "b", "c"],
        "{op} k={k}"
    );
    assert!(got.iter().all(|m| m.receive_count == 2));
    for m in &got {
        q.delete(&m.receipt_handle).unwrap();
    }
    assert_clean(&q, full, &format!("{op} k={k}"));
    let _ = Queue::unlink(&name);
    o.killed
}

/// The redrive policy writer killed at each step of its two-buffer write: readers see the old
/// policy or the new one, never a torn one, and the next writer takes the dead one's claim.
fn case_set_redrive_policy(op: &str, k: u64, _full: usize) -> bool {
    let (dname, _dlq) = fresh("fprpdlq", &config());
    let (name, q) = fresh("fprp", &config());
    let o = run_child(op, &name, k, &dname);
    let p = q.redrive_policy().unwrap();
    match &p {
        None => assert!(o.killed, "{op} k={k}: a completed write is seen"),
        Some(p) => {
            assert_eq!(p.max_receive_count, 3, "{op} k={k}");
            assert!(p.dead_letter_queue.ends_with(&dname), "{op} k={k}: {p:?}");
        }
    }
    q.set_attribute("RedrivePolicy", &policy_json(&dname, 5))
        .expect("the next writer is never wedged");
    assert_eq!(q.redrive_policy().unwrap().unwrap().max_receive_count, 5);
    let _ = Queue::unlink(&name);
    let _ = Queue::unlink(&dname);
    o.killed
}

/// A delay change killed at each step (L1): the setting is the old or the new value, never
/// torn; the delayed message is delivered once the delay is over by whichever value holds (on
/// the test clock), and nothing waits on the dead changer.
fn case_set_delay(op: &str, k: u64, full: usize) -> bool {
    let cfg = config().test_clock(true).delay(Duration::from_secs(900));
    let (name, q) = fresh("fpdelay", &cfg);
    send(&q, "g", "a");
    let o = run_child(op, &name, k, "");
    let delay = q.attributes().delay;
    assert!(
        delay == Duration::ZERO || delay == Duration::from_secs(900),
        "{op} k={k}: {delay:?}"
    );
    if !o.killed {
        assert_eq!(
            delay,
            Duration::ZERO,
            "{op} k={k}: a completed change is seen"
        );
    }
    // At most one periodic sweep later (1 s) where the change landed; past the old delay
    // otherwise.
    let wait = if delay.is_zero() { 1_100 } else { 901_000 };
    q.advance_clock(Duration::from_millis(wait)).unwrap();
    let got = drain(&q);
    assert_eq!(got, ["a"], "{op} k={k}: delivered once");
    q.set_attribute("DelaySeconds", "0").unwrap();
    finish(&q, &name, &got, full, &format!("{op} k={k}"));
    o.killed
}

/// The in-flight census killed at each step (R8): the limit still holds, the count is never
/// left short, and once the held message is deleted the next one is delivered.
fn case_census(op: &str, k: u64, full: usize) -> bool {
    let cfg = config().test_clock(true).max_in_flight(1);
    let (name, q) = fresh("fpcensus", &cfg);
    send(&q, "g", "a");
    send(&q, "h", "b");
    let long = ReceiveOptions::max(10)
        .visibility_timeout(Duration::from_secs(600))
        .wait(Duration::ZERO);
    let held = q.receive(&long).unwrap();
    assert_eq!(held.len(), 1, "the limit of 1");
    q.advance_clock(Duration::from_secs(2)).unwrap();
    let o = run_child(op, &name, k, "");
    q.recover().unwrap();
    assert!(
        q.receive(&long).unwrap().is_empty(),
        "{op} k={k}: the limit holds"
    );
    q.delete(&held[0].receipt_handle).unwrap();
    q.advance_clock(Duration::from_secs(2)).unwrap();
    let got = drain(&q);
    assert_eq!(got.len(), 1, "{op} k={k}: the other message, once: {got:?}");
    finish(&q, &name, &got, full, &format!("{op} k={k}"));
    o.killed
}

/// Spawns the child running `op` on queue `name`, armed to stop (SIGSTOP) at its `k`-th step,
/// and waits until it is stopped there (`true`) or has finished (`false`: `k` is past its
/// steps).
fn spawn_stopped(op: &str, name: &str, k: u64) -> (std::process::Child, bool) {
    spawn_stopped_with(op, name, k, "")
}

/// [`spawn_stopped`] with the child's `extra` argument (a receipt handle for `delete-given`).
fn spawn_stopped_with(op: &str, name: &str, k: u64, extra: &str) -> (std::process::Child, bool) {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .env("SHMFIFO_FP_CHILD", format!("{op} {name} {k} {extra}"))
        .env("SHMFIFO_FP_STOP", "1")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("spawn child");
    let pid = child.id();
    let stopped = loop {
        if child.try_wait().unwrap().is_some() {
            break false;
        }
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        if stat
            .rsplit(')')
            .next()
            .is_some_and(|r| r.trim_start().starts_with('T'))
        {
            break true;
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    (child, stopped)
}

/// Continues a child [`spawn_stopped`] left stopped (if it is), waits for it and returns its
/// output lines: it must finish, and complete its operation.
fn continue_child(child: std::process::Child, stopped: bool, what: &str) -> Vec<String> {
    if stopped {
        // SAFETY: kill(2) with a pid of our own child, which has not been reaped yet.
        unsafe {
            libc::kill(child.id() as i32, libc::SIGCONT);
        }
    }
    let out = child.wait_with_output().expect("wait child");
    assert!(
        out.status.success(),
        "{what}: the child finishes once continued"
    );
    let lines: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect();
    assert!(lines.iter().any(|l| l == "DONE"), "{what}: completed");
    lines
}

/// Stop points: the same steps as the kill points, but the child is stopped there
/// (SIGSTOP: alive, holding whatever it holds) while this process works on the queue, then
/// continued. A stopped participant is not corruption: meanwhile every operation either
/// succeeds or reports a typed, retryable error (`ParticipantBusy`, `DedupInProgress`), never
/// `Corrupted`; once continued the child finishes its operation, and nothing acknowledged is
/// lost, duplicated or reordered.
static BUSY: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

fn stop_case(op: &str, k: u64) -> bool {
    // The expiry sweep's child moves the test clock to end its timeouts.
    let cfg = match op {
        "expiry-sweep" => config().test_clock(true),
        "send-grow" => grow_config(),
        "send-dedup-grow" => grow_config().dedup_entries(1),
        "send-new-group-grow" => group_grow_config(),
        "send-large" => grow_config(),
        _ => config(),
    };
    let first: &[(&str, &str)] = if op == "receive-delete-run" {
        &[("g", "x"), ("g", "a"), ("g", "b"), ("g", "c")]
    } else {
        &[("g", "a"), ("g", "b"), ("h", "c")]
    };
    let (name, q) = if op == "send-kept" {
        // The stopped child sends to r, kept.
        fresh_r_kept("fpstop", &cfg, first)
    } else if op == "send-placeholder" {
        // The stopped child sends to r, whose hint is a placeholder with g's behind it.
        let (name, q) = fresh_r_placeholder("fpstop", &cfg);
        for (g, b) in &first[1..] {
            send(&q, g, b);
        }
        (name, q)
    } else if op == "receive-delete-pack" {
        let (name, q) = fresh("fpstop", &cfg);
        send_pack_then_c(&q);
        (name, q)
    } else {
        let (name, q) = fresh("fpstop", &cfg);
        for (g, b) in first {
            send(&q, g, b);
        }
        (name, q)
    };
    if op == "receive-delete-run" {
        // "x" deleted alone: its slot is the dummy the child's batch frees a run behind.
        let x = q
            .receive(&ReceiveOptions::max(1).wait(Duration::ZERO))
            .unwrap();
        assert_eq!(x[0].body, "x");
        q.delete(&x[0].receipt_handle).unwrap();
    }
    if op == "send-large" {
        q.set_attribute("MaximumMessageSize", "1048576").unwrap();
    }
    if op == "send-grow" {
        // The base file full: the stopped child's send grows the class, holding the grow
        // claim at some steps (then every send that needs room waits and says Busy).
        for i in 3..BASE_SLOTS {
            send(&q, "f", &format!("f{i}"));
        }
    }
    if op == "send-dedup-grow" {
        // The dedup table (1, then 1 + 1 + 2 entries after a, b, c) full with d: the child's
        // new id grows it, holding the key's home claim and the grow claim at some steps.
        send(&q, "f", "d");
    }
    if op == "quarantine" {
        // A damaged group for the stopped quarantine to work on.
        send(&q, "the-damaged-group", "z");
        common::break_group(&format!("/dev/shm/{name}"), b"the-damag");
    }
    let (child, stopped) = spawn_stopped(op, &name, k);
    let what = format!("{op} stopped at k={k}");
    let retryable = |r: &Result<(), Error>| match r {
        Ok(()) => {}
        Err(Error::ParticipantBusy { .. }) | Err(Error::DedupInProgress) => {
            BUSY.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        Err(e) => panic!("{what}: {e:?} while a peer is stopped"),
    };
    let mut ours: Vec<String> = Vec::new();
    let mut pending_new = false;
    if stopped {
        // A new group, a duplicate, and a receive-and-delete of whatever is visible.
        let r = q
            .send(&SendMessage::new(&format!("n{k}"), "n").dedup_id("n"))
            .map(|_| ());
        pending_new = r.is_err();
        retryable(&r);
        retryable(
            &q.send(&SendMessage::new("g", "a").dedup_id("a"))
                .map(|_| ()),
        );
        // The very send a stopped sender is making (same group and dedup id): a duplicate, a
        // new message (the child's then becomes the duplicate), or a retryable wait for it.
        let gx = group_of_x(op);
        retryable(
            &q.send(&SendMessage::new(gx, "x").dedup_id("x1"))
                .map(|_| ()),
        );
        let got = q.receive(
            &ReceiveOptions::max(10)
                .visibility_timeout(Duration::from_secs(600))
                .wait(Duration::ZERO),
        );
        match got {
            Ok(got) => {
                for m in got {
                    retryable(&q.delete(&m.receipt_handle));
                    ours.push(m.body);
                }
            }
            Err(e) => retryable(&Err(e)),
        }
    }
    let lines = continue_child(child, stopped, &what);
    if pending_new {
        q.send(&SendMessage::new(&format!("n{k}"), "n").dedup_id("n"))
            .expect("retried after the peer continued");
    }
    let theirs: Vec<String> = lines
        .iter()
        .filter_map(|l| l.strip_prefix("DEL ").map(str::to_owned))
        .collect();
    let got = drain(&q);
    let mut all: Vec<&String> = ours.iter().chain(&theirs).chain(&got).collect();
    all.sort();
    let n = all.len();
    all.dedup();
    assert_eq!(all.len(), n, "{what}: nothing delivered twice: {all:?}");
    // Received by the child and not deleted: in flight under its (long) visibility timeout,
    // not lost.
    let held: Vec<String> = lines
        .iter()
        .filter_map(|l| l.strip_prefix("RECV ").map(str::to_owned))
        .collect();
    if op != "purge" {
        for b in ["a", "b", "c"] {
            assert!(
                all.iter().any(|x| *x == b) || held.iter().any(|x| x == b),
                "{what}: {b} lost ({ours:?} {theirs:?} {got:?} {held:?})"
            );
        }
        if stopped {
            assert!(
                all.iter().any(|x| *x == "n"),
                "{what}: the new group's message"
            );
        }
    }
    let seq: Vec<&String> = ours.iter().chain(&got).collect();
    let pos = |b: &str| seq.iter().position(|x| *x == b);
    if let (Some(x), Some(y)) = (pos("a"), pos("b")) {
        assert!(x < y, "{what}: group order");
    }
    let _ = Queue::unlink(&name);
    stopped
}

/// A lost hint found by review (SYNC POINT(claim), the sweep's poke): a receiver stopped at
/// each step of a receive whose 100 ms visibility timeout the test clock ends while it is
/// stopped (200 ms), while this process receives (its idle sweep drains the expiry wheel).
/// Once the receiver is continued and done, a message it took before the clock moved is
/// receivable at once, without moving the clock again: through the hint its release gives (a
/// re-check at a fresh reading of the clock, asked for by the sweep's DIRTY request), or
/// through the wheel. Before the fix, a sweep that found the group held left it to the
/// holder's re-check, made at the instant its receive began, before the deadline: the message
/// waited for the periodic sweep, a second of test clock away. Returns the stops.
fn stopped_holder_past_its_deadline() -> u64 {
    let long = ReceiveOptions::max(10)
        .visibility_timeout(Duration::from_secs(600))
        .wait(Duration::ZERO);
    let mut stops = 0;
    for k in 0..500 {
        let (name, q) = fresh("fpheld", &config().test_clock(true));
        send(&q, "g", "a");
        let (child, stopped) = spawn_stopped("receive-short", &name, k);
        let what = format!("a receive stopped at k={k} past its deadline");
        let mut ours = Vec::new();
        if stopped {
            q.advance_clock(Duration::from_millis(200)).unwrap();
            for m in q.receive(&long).expect(&what) {
                q.delete(&m.receipt_handle).unwrap();
                ours.push(m.body);
            }
        }
        let lines = continue_child(child, stopped, &what);
        if !stopped {
            let _ = Queue::unlink(&name);
            break; // k is past the receive's steps
        }
        stops += 1;
        // The child's receive, and how long after the send (arena ms) it took the message.
        let took: Option<u64> = lines
            .iter()
            .find_map(|l| l.strip_prefix("RECV a ").map(|t| t.parse().unwrap()));
        match took {
            None => assert_eq!(ours, ["a"], "{what}: received here while it was stopped"),
            Some(t) if t < 200 => {
                // Taken before the clock moved: its deadline has passed.
                assert!(
                    ours.is_empty(),
                    "{what}: not received twice at once: {ours:?}"
                );
                let got = q.receive(&long).expect(&what);
                let bodies: Vec<&str> = got.iter().map(|m| m.body.as_str()).collect();
                assert_eq!(bodies, ["a"], "{what}: receivable at once, no clock moved");
                q.delete(&got[0].receipt_handle).unwrap();
            }
            Some(_) => {
                // Taken after the clock moved (its first clock reading came after the stop):
                // in flight for its 100 ms, then receivable.
                assert!(
                    ours.is_empty(),
                    "{what}: not received twice at once: {ours:?}"
                );
                q.advance_clock(Duration::from_millis(200)).unwrap();
                let got = q.receive(&long).expect(&what);
                assert_eq!(got.len(), 1, "{what}: receivable after its timeout");
                q.delete(&got[0].receipt_handle).unwrap();
            }
        }
        let _ = Queue::unlink(&name);
    }
    stops
}

/// An `AsyncQueue` replay of a recorded receive (R11) behind a stopped participant holding
/// the group's claim waits up to the claim wait bound (a second), as the blocking API does;
/// on a multi-threaded runtime it waits as blocking work, off the worker: here a runtime of
/// one worker, whose other task (a 5 ms ticker) goes on ticking while the replay waits.
/// Before, the replay ran on the worker and the ticker stood still for the whole second (and
/// so did every other connection of `serve`, whose ReceiveMessage this is). A delete of the
/// second recorded message is stopped at each of its steps; those at which it holds the
/// group's claim, before it changes the message, are those at which the replay waits.
/// Returns those steps.
#[cfg(feature = "tokio")]
fn async_replay_behind_a_stopped_holder() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;
    use std::time::Instant;

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_time()
        .build()
        .unwrap();
    let ticks = Arc::new(AtomicU64::new(0));
    let t = ticks.clone();
    rt.spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_millis(5)).await;
            // Relaxed: a counter read after the receive's join, no data behind it.
            t.fetch_add(1, Ordering::Relaxed);
        }
    });
    let long = ReceiveOptions::max(10).visibility_timeout(Duration::from_secs(600));
    let mut waited = 0;
    for k in 0..500 {
        let (name, q) = fresh("fpareplay", &config());
        send(&q, "g", "a");
        send(&q, "g", "b");
        let first = q.receive_with_attempt_id(&long, "t").unwrap();
        assert_eq!(first.len(), 2);
        let b = first[1].receipt_handle.to_string();
        let (child, stopped) = spawn_stopped_with("delete-given", &name, k, &b);
        let what = format!("an async replay behind a delete stopped at k={k}");
        // Checked once the child is continued (a failed check leaves no stopped process).
        let mut seen = None;
        if stopped {
            let aq = shmfifo::AsyncQueue::new(q.clone());
            let opts = long;
            let t0 = Instant::now();
            // Relaxed: as above.
            let before = ticks.load(Ordering::Relaxed);
            let got = rt
                .block_on(rt.spawn(async move { aq.receive_with_attempt_id(&opts, "t").await }))
                .unwrap();
            // Relaxed: as above.
            seen = Some((got, t0.elapsed(), ticks.load(Ordering::Relaxed) - before));
        }
        continue_child(child, stopped, &what);
        drop(q);
        let _ = Queue::unlink(&name);
        let Some((got, took, ticked)) = seen else {
            break; // k is past the delete's steps
        };
        match got {
            // Replayed (the holder gone by then, or never in the way): the same receipts.
            Ok(ms) if !ms.is_empty() => {
                assert_eq!(ms[0].receipt_handle, first[0].receipt_handle, "{what}");
            }
            // Behind the stopped holder past the bound: a fresh receive, which finds the
            // group held, or a retryable error.
            Ok(_) | Err(Error::ParticipantBusy { .. }) => {}
            Err(e) => panic!("{what}: {e:?}"),
        }
        if took >= Duration::from_millis(500) {
            waited += 1;
            assert!(
                ticked >= 10,
                "{what}: the worker's other task ticked {ticked} times in {took:?}: the replay held the worker"
            );
        }
    }
    waited
}

fn main() {
    if let Ok(spec) = std::env::var("SHMFIFO_FP_CHILD") {
        child(&spec);
        return;
    }
    let (name, q) = fresh("fpcap", &config());
    let full = capacity(&q);
    drop(q);
    let _ = Queue::unlink(&name);
    type Case = fn(&str, u64, usize) -> bool;
    let cases: [(&str, Case); 31] = [
        ("send", case_send),
        ("send-grow", case_send_grow),
        ("send-large", case_send_large),
        ("send-dedup-grow", case_send_dedup_grow),
        ("send-loan", case_send),
        ("loan-drop", case_loan_drop),
        ("send-wait", case_send_wait),
        ("send-new-group", case_send),
        ("send-new-group-grow", case_send_new_group_grow),
        ("send-kept", case_send_kept),
        ("send-placeholder", case_send_placeholder),
        ("send-new-group-reclaim", case_send_new_group_reclaim),
        ("send-batch", case_send_batch),
        ("send-pack", case_send_batch),
        ("send-loan-batch", case_send_batch),
        ("send-loan-pack", case_send_batch),
        ("receive-delete", case_receive_delete),
        ("receive-delete-batch", case_receive_delete),
        ("receive-delete-pack", case_receive_delete),
        ("receive-delete-run", case_receive_delete),
        ("receive-borrowed-delete", case_receive_delete),
        ("change-visibility", case_change_visibility),
        ("expiry-sweep", case_expiry_sweep),
        ("purge", case_purge),
        ("dead-letter-move", case_dead_letter_move),
        ("attempt-receive", case_attempt_receive),
        ("release", case_release),
        ("set-redrive-policy", case_set_redrive_policy),
        ("set-delay", case_set_delay),
        ("census", case_census),
        ("quarantine", case_quarantine),
    ];
    // `SHMFIFO_FP_ONLY=op[,op…]`: only those operations (a local run after a change to one
    // of them; CI runs every one).
    let only = std::env::var("SHMFIFO_FP_ONLY").ok();
    let chosen = |op: &str| {
        only.as_deref()
            .is_none_or(|o| o.split(',').any(|x| x == op))
    };
    let mut total = 0;
    let mut steps: Vec<(&str, u64)> = Vec::new();
    for (op, case) in cases {
        if !chosen(op) {
            continue;
        }
        let n = each_step(op, full, &case);
        assert!(n > 0, "{op}: no kill point reached (is the feature on?)");
        println!("{op}: killed at each of its {n} steps, recovered every time");
        total += n;
        steps.push((op, n));
    }
    // A send that finds a placeholder with a hint behind it (layout 27) takes it out of the
    // ring and pushes a fresh hint: more steps than a plain send, or the case set up no
    // placeholder and tested a plain send again.
    let of = |op: &str| steps.iter().find(|(o, _)| *o == op).map(|(_, n)| *n);
    if let (Some(plain), Some(placeholder)) = (of("send"), of("send-placeholder")) {
        assert!(
            placeholder > plain,
            "send-placeholder: {placeholder} steps, no more than a plain send's {plain}"
        );
    }
    println!("failpoints: {total} kills, all recovered");
    // Each operation's stop points on a queue of its own, two operations at a time: a case
    // is mostly a debug build's sends and a child's start, one CPU's work, and the two
    // share nothing but `BUSY` (the phase took 150 s one operation at a time on 2 CPUs).
    let stop_ops: Vec<&str> = [
        "send",
        "send-grow",
        "send-large",
        "send-dedup-grow",
        "send-loan",
        "send-new-group",
        "send-new-group-grow",
        "send-kept",
        "send-placeholder",
        "send-batch",
        "send-pack",
        "send-loan-batch",
        "send-loan-pack",
        "receive-delete",
        "receive-delete-run",
        "receive-delete-pack",
        "receive-borrowed-delete",
        "change-visibility",
        "expiry-sweep",
        "purge",
        "attempt-receive",
        "quarantine",
    ]
    .into_iter()
    .filter(|op| chosen(op))
    .collect();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let stops: u64 = std::thread::scope(|s| {
        let workers: Vec<_> = (0..2)
            .map(|_| {
                s.spawn(|| {
                    let mut stops = 0;
                    while let Some(&op) =
                        stop_ops.get(next.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
                    {
                        let mut n = 0;
                        while stop_case(op, n) {
                            n += 1;
                            assert!(n < 500, "{op}: still stopped after 500 steps");
                        }
                        assert!(n > 0, "{op}: no stop point reached");
                        println!(
                            "{op}: stopped at each of its {n} steps, never corruption, nothing lost"
                        );
                        stops += n;
                    }
                    stops
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).sum()
    });
    #[cfg(feature = "tokio")]
    if chosen("async-replay") {
        let waited = async_replay_behind_a_stopped_holder();
        assert!(
            waited > 0,
            "async-replay: no step at which the replay waited"
        );
        println!(
            "async-replay: waited behind a stopped delete at {waited} of its steps, the worker's other task served throughout"
        );
    }
    let held = stopped_holder_past_its_deadline();
    assert!(held > 0, "receive-short: no stop point reached");
    println!(
        "receive-short: stopped at each of its {held} steps past its deadline, the message receivable at once after"
    );
    println!(
        "stop points: {stops} stops, the others served throughout ({} retryable errors while a peer was stopped)",
        BUSY.load(std::sync::atomic::Ordering::Relaxed)
    );
}
