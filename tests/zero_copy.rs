//! Loaned sends and borrowed receives on the public API: the SQS FIFO rules hold for
//! messages written in place (S2, S4, S6, S7, D1, R3 order) and a borrowed view proves it is
//! still its message (H-rules: a view ends where its receipt handle would).

mod common;
use common::*;

use std::time::Duration;

use shmfifo::{
    Error, LoanOptions, MessageAttribute, Queue, QueueConfig, ReceiveOptions, SendMessage,
};

fn opts() -> ReceiveOptions {
    ReceiveOptions::max(10).wait(Duration::ZERO)
}

/// Two slot classes: 256 bytes and 4,560 (the least a 4 KiB maximum message size allows, with
/// its dedup id and attribute framing), `n` slots each.
/// Two classes of `n` slots that do not grow (these tests count slots coming back).
fn two_classes(n: u32) -> QueueConfig {
    small_dedup()
        .maximum_message_size(4096)
        .size_classes(vec![(256, n), (4560, n)])
        .size_limit(0)
}

#[test]
fn a_loan_is_sent_in_place_and_received_both_ways() {
    let q = queue("zc-roundtrip", &small_dedup());
    let attrs = [MessageAttribute::string("kind", "frame")];
    let mut loan = q.loan("g", 11).unwrap();
    assert_eq!(loan.len(), 11);
    assert_eq!(loan.group_id(), "g");
    loan.as_mut_slice().copy_from_slice(b"hello world");
    let sent = loan
        .send_with(&LoanOptions::new().dedup_id("1").attributes(&attrs))
        .unwrap();
    assert!(!sent.duplicate);

    // Copying receive: the same message a plain send makes.
    let got = q.receive(&opts()).unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].message_id, sent.message_id);
    assert_eq!(got[0].body, "hello world");
    assert_eq!(got[0].dedup_id.as_deref(), Some("1"));
    assert_eq!(got[0].attributes[0].name, "kind");
    assert_eq!(got[0].attributes[0].value, b"frame");
    q.change_visibility(&got[0].receipt_handle, Duration::ZERO)
        .unwrap();

    // Borrowed receive: the body in place, everything else copied.
    let b = q.receive_borrowed(&opts()).unwrap();
    assert_eq!(b.len(), 1);
    assert_eq!(b[0].body(), b"hello world");
    assert_eq!(b[0].body_str().unwrap(), "hello world");
    b[0].verify().unwrap();
    assert_eq!(b[0].message().message_id, sent.message_id);
    assert_eq!(b[0].message().receive_count, 2);
    assert_eq!(b[0].message().attributes[0].value, b"frame");
    assert!(b[0].message().body.is_empty());
    assert_eq!(b[0].to_message().unwrap().body, "hello world");
    for m in b {
        m.delete().unwrap();
    }
    assert!(q.receive(&opts()).unwrap().is_empty());
}

#[test]
fn r3_loans_and_plain_sends_keep_one_group_in_order() {
    let q = queue("zc-order", &small());
    for i in 0..20 {
        let body = format!("m{i:02}");
        if i % 2 == 0 {
            let mut loan = q.loan("g", body.len()).unwrap();
            loan.as_mut_slice().copy_from_slice(body.as_bytes());
            loan.send().unwrap();
        } else {
            send(&q, "g", &body);
        }
    }
    let mut seen = Vec::new();
    loop {
        let got = q.receive_borrowed(&opts()).unwrap();
        if got.is_empty() {
            break;
        }
        for m in got {
            seen.push(String::from_utf8(m.body().to_vec()).unwrap());
            m.verify().unwrap();
            m.delete().unwrap();
        }
    }
    let want: Vec<String> = (0..20).map(|i| format!("m{i:02}")).collect();
    assert_eq!(seen, want);
}

#[test]
fn a_dropped_loan_gives_its_slot_back() {
    let q = queue(
        "zc-drop",
        &two_classes(4).deduplication(shmfifo::Deduplication::Off),
    );
    let loans: Vec<_> = (0..4).map(|_| q.loan("g", 100).unwrap()).collect();
    // Every 256-byte slot is lent: the class is full for loans and sends alike.
    assert!(matches!(q.loan("g", 100), Err(Error::SizeClassFull { .. })));
    assert!(matches!(
        q.send(&SendMessage::new("g", "x")),
        Err(Error::SizeClassFull { .. })
    ));
    drop(loans);
    for i in 0..4 {
        send(&q, "g", &format!("{i}"));
    }
}

#[test]
fn d1_a_duplicate_loan_is_accepted_and_its_slot_given_back() {
    let q = queue("zc-dup", &two_classes(2));
    let mut first = q.loan("g", 3).unwrap();
    first.as_mut_slice().copy_from_slice(b"one");
    let a = first.send_with(&LoanOptions::new().dedup_id("d")).unwrap();
    let mut again = q.loan("g", 3).unwrap();
    again.as_mut_slice().copy_from_slice(b"two");
    let b = again.send_with(&LoanOptions::new().dedup_id("d")).unwrap();
    assert!(b.duplicate);
    assert_eq!(b.message_id, a.message_id);
    // Two slots in the class: one holds "one", the duplicate's came back.
    let _third = q.loan("g", 3).unwrap();
    assert!(matches!(q.loan("g", 3), Err(Error::SizeClassFull { .. })));
    let got = q.receive(&opts()).unwrap();
    assert_eq!(bodies(&got), ["one"]);
}

#[test]
fn s4_s7_a_refused_loan_comes_back_untouched() {
    let q = queue("zc-refused", &small_dedup());
    let mut loan = q.loan("g", 4).unwrap();
    loan.as_mut_slice()
        .copy_from_slice(&[0xff, b'a', b'b', b'c']);
    // Not UTF-8: InvalidMessageContents, the loan comes back.
    let e = loan
        .send_with(&LoanOptions::new().dedup_id("1"))
        .unwrap_err();
    assert!(
        matches!(e.error, Error::InvalidMessageContents { .. }),
        "{e:?}"
    );
    let mut loan = e.loan;
    assert_eq!(loan.as_slice(), &[0xff, b'a', b'b', b'c']);
    // A control character (S7).
    loan.as_mut_slice().copy_from_slice(b"a\x01bc");
    let e = loan
        .send_with(&LoanOptions::new().dedup_id("1"))
        .unwrap_err();
    assert!(
        matches!(e.error, Error::InvalidMessageContents { .. }),
        "{e:?}"
    );
    // No dedup id on a queue that needs one (S4).
    let mut loan = e.loan;
    loan.as_mut_slice().copy_from_slice(b"abcd");
    let e = loan.send().unwrap_err();
    assert!(
        matches!(e.error, Error::InvalidParameterValue { .. }),
        "{e:?}"
    );
    // Mended, it goes.
    e.loan.send_with(&LoanOptions::new().dedup_id("1")).unwrap();
    assert_eq!(bodies(&q.receive(&opts()).unwrap()), ["abcd"]);
}

#[test]
fn s2_s6_loans_of_no_bytes_too_many_bytes_or_a_bad_group_are_refused() {
    let q = queue("zc-bounds", &two_classes(4));
    let bad = |r: Result<shmfifo::Loan<'_>, Error>, p: &str| {
        assert!(
            matches!(&r, Err(Error::InvalidParameterValue { parameter, .. }) if *parameter == p),
            "{r:?}"
        );
    };
    bad(q.loan("g", 0), "MessageBody");
    bad(q.loan("g", 4097), "MessageBody");
    bad(q.loan("", 1), "MessageGroupId");
    bad(q.loan("a b", 1), "MessageGroupId");
    // The largest body a class holds comes from it.
    q.loan("g", 4096).unwrap();
}

#[test]
fn a_loan_whose_options_outgrow_its_class_is_copied_once() {
    let q = queue("zc-outgrow", &two_classes(1));
    let value = "v".repeat(100);
    let attrs = [MessageAttribute::string("a", &value)];
    // 200 bytes fit the 256-byte class alone, not with the attribute.
    let mut loan = q.loan("g", 200).unwrap();
    loan.as_mut_slice().fill(b'x');
    loan.send_with(&LoanOptions::new().dedup_id("1").attributes(&attrs))
        .unwrap();
    // The lent 256-byte slot came back; the message sits in the 4 KiB class.
    let _small = q.loan("g", 200).unwrap();
    assert!(matches!(q.loan("g", 300), Err(Error::SizeClassFull { .. })));
    let got = q.receive(&opts()).unwrap();
    assert_eq!(got[0].body, "x".repeat(200));
    assert_eq!(got[0].attributes[0].value, value.as_bytes());
}

#[test]
fn truncate_sends_what_was_written() {
    let q = queue("zc-truncate", &small());
    let mut loan = q.loan("g", 1000).unwrap();
    loan.as_mut_slice()[..3].copy_from_slice(b"abc");
    loan.truncate(3);
    assert_eq!(loan.len(), 3);
    loan.truncate(0); // a body keeps one byte at least
    assert_eq!(loan.as_slice(), b"a");
    loan.send().unwrap();
    assert_eq!(bodies(&q.receive(&opts()).unwrap()), ["a"]);
}

#[test]
fn a_loan_moves_to_another_thread() {
    let q = queue("zc-thread", &small());
    let mut loan = q.loan("g", 4).unwrap();
    std::thread::scope(|s| {
        s.spawn(move || {
            loan.as_mut_slice().copy_from_slice(b"away");
            loan.send().unwrap();
        });
    });
    assert_eq!(bodies(&q.receive(&opts()).unwrap()), ["away"]);
}

#[test]
fn p1_a_borrowed_view_sees_a_purge() {
    let q = queue("zc-purge", &small());
    send(&q, "g", "doomed");
    let b = q.receive_borrowed(&opts()).unwrap();
    b[0].verify().unwrap();
    q.purge().unwrap();
    // Freed under the view: verify says so, whatever the bytes now hold.
    assert!(matches!(
        b[0].verify(),
        Err(Error::ReceiptHandleExpired { .. })
    ));
    assert!(b[0].body_str().is_err());
}

#[test]
fn v1_a_borrowed_view_ends_when_another_receive_takes_the_message() {
    let q = queue("zc-rereceive", &small());
    send(&q, "g", "contested");
    let first = q.receive_borrowed(&opts()).unwrap();
    q.change_visibility(first[0].receipt_handle(), Duration::ZERO)
        .unwrap();
    let second = q.receive(&opts()).unwrap();
    assert_eq!(bodies(&second), ["contested"]);
    assert!(matches!(
        first[0].verify(),
        Err(Error::ReceiptHandleExpired { .. })
    ));
    // H: the first view's delete fails as its receipt handle would.
    assert!(first.into_iter().next().unwrap().delete().is_err());
    // Deleted and the slot reused: the second's view would fail too.
    q.delete(&second[0].receipt_handle).unwrap();
    send(&q, "g", "next one");
    let third = q.receive_borrowed(&opts()).unwrap();
    assert_eq!(third[0].body(), b"next one");
    third[0].verify().unwrap();
}

#[test]
fn a_borrowed_receive_waits_like_a_receive() {
    let q = queue("zc-wait", &small());
    let name = q.name.clone();
    let t = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(50));
        let q = Queue::open(&name).unwrap();
        q.send(&SendMessage::new("g", "late")).unwrap();
    });
    let got = q
        .receive_borrowed(&ReceiveOptions::max(1).wait(Duration::from_secs(10)))
        .unwrap();
    assert_eq!(got[0].body(), b"late");
    t.join().unwrap();
}

// ---------------------------------------------------------------------------------------------
// Bodies of any bytes (an extension: BodyMode::Binary)
// ---------------------------------------------------------------------------------------------

fn binary() -> QueueConfig {
    small().body_mode(shmfifo::BodyMode::Binary)
}

#[test]
fn a_binary_queue_takes_any_bytes_and_says_so() {
    let q = queue("zc-binary", &binary());
    assert_eq!(q.body_mode(), shmfifo::BodyMode::Binary);
    assert_eq!(q.attributes().body_mode, shmfifo::BodyMode::Binary);
    let frame: Vec<u8> = (0..=255u8).collect();
    q.send(&SendMessage::bytes("g", &frame)).unwrap();
    q.send(&SendMessage::bytes("g", "plain text".as_bytes()))
        .unwrap();
    let mut loan = q.loan("g", 4).unwrap();
    loan.as_mut_slice().copy_from_slice(&[0, 0xff, 0x01, 0xfe]);
    loan.send().unwrap();
    // Copying receive: exact bytes; `body` holds them only where they are UTF-8.
    let got = q.receive(&opts()).unwrap();
    assert_eq!(got.len(), 3);
    assert_eq!(got[0].body_bytes, frame);
    assert!(got[0].body.is_empty());
    assert_eq!(got[0].bytes(), frame.as_slice());
    assert_eq!(got[1].body, "plain text");
    assert_eq!(got[1].bytes(), b"plain text");
    assert_eq!(got[2].bytes(), &[0, 0xff, 0x01, 0xfe]);
    for m in &got {
        q.change_visibility(&m.receipt_handle, Duration::ZERO)
            .unwrap();
    }
    // Borrowed receive: the same bytes in place.
    let b = q.receive_borrowed(&opts()).unwrap();
    assert_eq!(b[0].body(), frame.as_slice());
    assert!(b[0].body_str().is_err(), "not text");
    assert_eq!(b[2].body(), &[0, 0xff, 0x01, 0xfe]);
    // Copied out, as the copying receive returns it: the bytes, and text only where they are.
    let copied = b[0].to_message().unwrap();
    assert_eq!(
        (copied.body_bytes.as_slice(), copied.body.as_str()),
        (frame.as_slice(), "")
    );
    let copied = b[1].to_message().unwrap();
    assert_eq!(
        (copied.bytes(), copied.body.as_str()),
        (&b"plain text"[..], "plain text")
    );
}

#[test]
fn s6_s7_a_text_queue_refuses_bytes_that_are_not_text_and_an_empty_body_stays_refused() {
    let text = queue("zc-text-bytes", &small());
    assert_eq!(text.body_mode(), shmfifo::BodyMode::Text);
    assert!(matches!(
        text.send(&SendMessage::bytes("g", &[0xff, 0xfe])),
        Err(Error::InvalidMessageContents { .. })
    ));
    assert!(matches!(
        text.send(&SendMessage::bytes("g", b"a\x00")),
        Err(Error::InvalidMessageContents { .. })
    ));
    text.send(&SendMessage::bytes("g", "text as bytes".as_bytes()))
        .unwrap();
    let got = text.receive(&opts()).unwrap();
    assert_eq!(got[0].body, "text as bytes");
    assert!(
        got[0].body_bytes.is_empty(),
        "a text queue's body is `body`"
    );
    let bin = queue("zc-binary-empty", &binary());
    assert!(matches!(
        bin.send(&SendMessage::bytes("g", &[])),
        Err(Error::InvalidParameterValue { .. })
    ));
}

#[test]
fn x1_a_binary_queue_needs_a_binary_dead_letter_queue_and_moves_bytes_intact() {
    let text_dlq = queue("zc-dlq-text", &small_dedup());
    let bin_dlq = queue(
        "zc-dlq-bin",
        &small_dedup().body_mode(shmfifo::BodyMode::Binary),
    );
    let refused = Queue::create_anonymous(
        &binary().redrive_policy(shmfifo::RedrivePolicy::new(text_dlq.name.as_str(), 1)),
    );
    assert!(
        matches!(refused, Err(Error::DeadLetterQueue { .. })),
        "{refused:?}"
    );
    let q = Queue::create_anonymous(
        &binary()
            .visibility_timeout(Duration::ZERO)
            .redrive_policy(shmfifo::RedrivePolicy::new(bin_dlq.name.as_str(), 1)),
    )
    .unwrap();
    let frame = [0u8, 1, 2, 0xff];
    q.send(&SendMessage::bytes("g", &frame)).unwrap();
    assert_eq!(q.receive(&opts()).unwrap().len(), 1);
    // Past maxReceiveCount on the next receive: moved, bytes intact.
    assert!(q.receive(&opts()).unwrap().is_empty());
    let moved = bin_dlq.receive(&opts()).unwrap();
    assert_eq!(moved[0].bytes(), &frame);
}

/// X6 with binary bodies: a redrive carries the bytes back, exactly (it used to send the
/// body's text form, empty for bytes that are not UTF-8).
#[test]
fn x6_a_redrive_carries_binary_bodies_back() {
    let bin_dlq = queue(
        "zc-redrive-dlq",
        &small_dedup().body_mode(shmfifo::BodyMode::Binary),
    );
    let src = queue(
        "zc-redrive-src",
        &small_dedup()
            .body_mode(shmfifo::BodyMode::Binary)
            .visibility_timeout(Duration::ZERO)
            .redrive_policy(shmfifo::RedrivePolicy::new(bin_dlq.name.as_str(), 1)),
    );
    let frame = [0u8, 0xff, 7];
    src.send(&SendMessage::bytes("g", &frame).dedup_id("f"))
        .unwrap();
    assert_eq!(src.receive(&opts()).unwrap().len(), 1);
    assert!(
        src.receive(&opts()).unwrap().is_empty(),
        "moved on this receive"
    );
    let report = bin_dlq
        .redrive(&shmfifo::RedriveOptions::default())
        .unwrap();
    assert_eq!(report.moved, 1);
    let back = src.receive(&opts()).unwrap();
    assert_eq!(back[0].bytes(), &frame, "the same bytes");
}

/// A producer of a large class reuses the slot freed last (its lines are likely still cached)
/// instead of walking the class round robin; a small class keeps the round robin.
#[test]
fn a_large_class_reuses_the_slot_freed_last() {
    let slot_of = |id: shmfifo::MessageId| (id.0 >> 32) as u32;
    let q = queue(
        "zc-reuse",
        &small().size_classes(vec![(256, 64), (4560, 64)]),
    );
    let big = "x".repeat(1000);
    let mut slots = Vec::new();
    for _ in 0..8 {
        let sent = q.send(&SendMessage::new("g", &big)).unwrap();
        slots.push(slot_of(sent.message_id));
        let got = q.receive(&opts()).unwrap();
        q.delete(&got[0].receipt_handle).unwrap();
    }
    slots.dedup();
    assert_eq!(slots.len(), 1, "the same slot every time: {slots:?}");
    let mut small_slots = Vec::new();
    for _ in 0..8 {
        let sent = q.send(&SendMessage::new("g", "small")).unwrap();
        small_slots.push(slot_of(sent.message_id));
        let got = q.receive(&opts()).unwrap();
        q.delete(&got[0].receipt_handle).unwrap();
    }
    small_slots.dedup();
    assert_eq!(small_slots.len(), 8, "round robin: {small_slots:?}");
}

/// The batch form: each group's loans go as one chain, in order (R3), a duplicate (D1) gives
/// its slot back, a refused loan comes back while the others go, and a request-level error
/// (S12) gives every loan back.
#[test]
fn s11_s13_a_batch_of_loans_is_sent_as_chains_in_order() {
    let q = queue("zc-batch", &two_classes(8));
    fn fill<'q>(q: &'q Queue, g: &str, body: &[u8]) -> shmfifo::Loan<'q> {
        let mut l = q.loan(g, body.len()).unwrap();
        l.as_mut_slice().copy_from_slice(body);
        l
    }
    let first = q
        .send_loans(vec![(
            fill(&q, "g", b"d0"),
            LoanOptions::new().dedup_id("0"),
        )])
        .pop()
        .unwrap()
        .unwrap();
    let loans = vec![
        (fill(&q, "g", b"a1"), LoanOptions::new().dedup_id("1")),
        (fill(&q, "h", b"b1"), LoanOptions::new().dedup_id("2")),
        (fill(&q, "g", b"\x01"), LoanOptions::new().dedup_id("3")), // S7: refused
        (fill(&q, "g", b"a2"), LoanOptions::new().dedup_id("4")),
        (fill(&q, "g", b"dup"), LoanOptions::new().dedup_id("0")), // D1
    ];
    let rs = q.send_loans(loans);
    assert!(rs[0].is_ok() && rs[1].is_ok() && rs[3].is_ok());
    let dup = rs[4].as_ref().unwrap();
    assert!(dup.duplicate);
    assert_eq!(dup.message_id, first.message_id);
    let refused = rs.into_iter().nth(2).unwrap().unwrap_err();
    assert!(matches!(
        refused.error,
        Error::InvalidMessageContents { .. }
    ));
    assert_eq!(refused.loan.as_slice(), b"\x01");
    drop(refused);
    let got = q.receive(&opts()).unwrap();
    let bodies: Vec<(&str, &str)> = got
        .iter()
        .map(|m| (m.group_id.as_str(), m.body.as_str()))
        .collect();
    // Group g first (its first message was there first), then h; each in order.
    assert_eq!(bodies, [("g", "d0"), ("g", "a1"), ("g", "a2"), ("h", "b1")]);
    // Slots: 4 messages hold 4 of the 8 small slots; the refused and the duplicate came back.
    let held: Vec<_> = (0..4).map(|_| q.loan("z", 1).unwrap()).collect();
    assert!(matches!(q.loan("z", 1), Err(Error::SizeClassFull { .. })));
    drop(held);
    // S12: a missing dedup id fails the whole request; every loan comes back.
    let rs = q.send_loans(vec![
        (fill(&q, "g", b"x"), LoanOptions::new().dedup_id("9")),
        (fill(&q, "g", b"y"), LoanOptions::new()),
    ]);
    for r in rs {
        let e = r.unwrap_err();
        assert!(
            matches!(e.error, Error::InvalidParameterValue { .. }),
            "{e:?}"
        );
    }
    // A loan of another handle is refused alone.
    let other = Queue::open(&q.name).unwrap();
    let mut foreign = other.loan("g", 1).unwrap();
    foreign.as_mut_slice()[0] = b'f';
    let rs = q.send_loans(vec![(foreign, LoanOptions::new().dedup_id("f"))]);
    assert!(matches!(
        rs[0].as_ref().unwrap_err().error,
        Error::InvalidParameterValue { .. }
    ));
}

/// R11 with a borrowed receive: a retry with the same attempt id hands out the same messages
/// (the same receipt handles, bodies in place); once one of them is deleted it is a fresh
/// receive.
#[test]
fn r11_a_borrowed_receive_replays_under_its_attempt_id() {
    let q = queue("zc-attempt", &small());
    send(&q, "g", "one");
    send(&q, "h", "two");
    let first = q.receive_borrowed_with_attempt_id(&opts(), "a1").unwrap();
    assert_eq!(first.len(), 2);
    let retry = q.receive_borrowed_with_attempt_id(&opts(), "a1").unwrap();
    let handles = |v: &[shmfifo::BorrowedMessage<'_>]| {
        v.iter().map(|m| *m.receipt_handle()).collect::<Vec<_>>()
    };
    assert_eq!(handles(&retry), handles(&first));
    assert_eq!(retry[0].body(), b"one");
    for m in &retry {
        m.verify().unwrap();
        assert_eq!(m.message().receive_count, 1, "a replay does not count");
    }
    let mut it = retry.into_iter();
    it.next().unwrap().delete().unwrap();
    assert!(q
        .receive_borrowed_with_attempt_id(&opts(), "a1")
        .unwrap()
        .is_empty());
}

/// A loaned batch's members, each `(len, dedup id)`.
fn members<'a>(m: &[(usize, &'a str)]) -> Vec<(usize, LoanOptions<'a>)> {
    m.iter()
        .map(|&(len, id)| (len, LoanOptions::new().dedup_id(id)))
        .collect()
}

/// Writes each body of `batch` (as long as the loan asked) and sends it.
fn fill_and_send(
    mut batch: shmfifo::LoanBatch<'_>,
    bodies: &[&str],
) -> Vec<shmfifo::Result<shmfifo::SendResult>> {
    assert_eq!(batch.len(), bodies.len());
    for (j, b) in bodies.iter().enumerate() {
        batch.body_mut(j).copy_from_slice(b.as_bytes());
        assert_eq!(batch.body(j), b.as_bytes());
    }
    batch.send().expect("send the loaned batch")
}

#[test]
fn s11_r3_a_loaned_batch_is_sent_in_place_as_one_unit_in_order() {
    // Two 256-byte slots: the batch's three members take one of them (a pack), so a single
    // send still finds room after it, and a third message none.
    let q = queue("zc-batch", &two_classes(2));
    let attrs = [MessageAttribute::string("kind", "frame")];
    let mut m = members(&[(6, "1"), (6, "2"), (6, "3")]);
    m[1].1 = m[1].1.attributes(&attrs);
    let batch = q.loan_batch("g", &m).unwrap();
    assert_eq!(batch.group_id(), "g");
    let sent = fill_and_send(batch, &["frame0", "frame1", "frame2"]);
    assert!(sent.iter().all(|r| !r.as_ref().unwrap().duplicate));
    q.send(&SendMessage::new("g", "after").dedup_id("after"))
        .unwrap();
    assert!(matches!(
        q.send(&SendMessage::new("g", "full").dedup_id("f")),
        Err(Error::SizeClassFull { .. })
    ));
    let got = q.receive(&opts()).unwrap();
    assert_eq!(bodies(&got), ["frame0", "frame1", "frame2", "after"]);
    for (g, s) in got.iter().zip(&sent) {
        assert_eq!(g.message_id, s.as_ref().unwrap().message_id);
    }
    assert_eq!(got[1].attributes.len(), 1);
    assert_eq!(got[1].attributes[0].name, "kind");
    assert_eq!(got[1].attributes[0].value, b"frame");
    assert!(got[0].attributes.is_empty() && got[2].attributes.is_empty());
    assert_eq!(got[2].dedup_id.as_deref(), Some("3"));
    // The members are read in place too, each its own message (handles, visibility).
    for g in &got {
        q.change_visibility(&g.receipt_handle, Duration::ZERO)
            .unwrap();
    }
    let b = q.receive_borrowed(&opts()).unwrap();
    let seen: Vec<&[u8]> = b.iter().map(|m| m.body()).collect();
    assert_eq!(seen, [&b"frame0"[..], b"frame1", b"frame2", b"after"]);
    for m in &b {
        m.verify().unwrap();
        q.delete(&m.message().receipt_handle).unwrap();
    }
    // Every slot back: two sends fit again.
    q.send(&SendMessage::new("g", "x").dedup_id("x")).unwrap();
    q.send(&SendMessage::new("g", "y").dedup_id("y")).unwrap();
}

#[test]
fn d1_d9_a_loaned_batch_answers_its_duplicates_and_sends_the_rest_moved_down() {
    let q = queue("zc-batch-dup", &two_classes(4));
    q.send(&SendMessage::new("g", "one").dedup_id("1")).unwrap();
    q.send(&SendMessage::new("g", "two").dedup_id("2")).unwrap();
    let originals = q.receive(&opts()).unwrap();
    for m in &originals {
        q.change_visibility(&m.receipt_handle, Duration::ZERO)
            .unwrap();
    }
    // Members 0 and 2 repeat messages sent before (D1); member 4 repeats member 1 (D9).
    let batch = q
        .loan_batch(
            "g",
            &members(&[(3, "1"), (1, "x"), (5, "2"), (2, "y"), (1, "x")]),
        )
        .unwrap();
    let r = fill_and_send(batch, &["dup", "X", "dup-2", "YY", "Z"]);
    let r: Vec<_> = r.into_iter().map(|r| r.unwrap()).collect();
    assert!(r[0].duplicate && r[2].duplicate && r[4].duplicate);
    assert!(!r[1].duplicate && !r[3].duplicate);
    assert_eq!(r[0].message_id, originals[0].message_id);
    assert_eq!(r[2].message_id, originals[1].message_id);
    assert_eq!(r[4].message_id, r[1].message_id);
    assert_eq!(r[4].sequence_number, r[1].sequence_number);
    let got = q.receive(&opts()).unwrap();
    assert_eq!(bodies(&got), ["one", "two", "X", "YY"]);
    assert_eq!(got[2].message_id, r[1].message_id);
    assert_eq!(got[3].message_id, r[3].message_id);
    assert_eq!(got[3].dedup_id.as_deref(), Some("y"));
}

#[test]
fn d1_a_loaned_batch_with_one_new_member_sends_it_as_a_message_and_all_duplicates_give_the_slot_back(
) {
    let q = queue("zc-batch-one", &two_classes(3));
    q.send(&SendMessage::new("g", "one").dedup_id("1")).unwrap();
    // One new member left: a message of its own, moved to its slot's start.
    let r = fill_and_send(
        q.loan_batch("g", &members(&[(3, "1"), (4, "n")])).unwrap(),
        &["dup", "next"],
    );
    assert!(r[0].as_ref().unwrap().duplicate);
    assert!(!r[1].as_ref().unwrap().duplicate);
    // Every member a duplicate: nothing enqueued, the slot given back (two of the three
    // 256-byte slots hold "one" and "next": a second loan would not fit otherwise).
    for _ in 0..3 {
        let r = fill_and_send(
            q.loan_batch("g", &members(&[(3, "1"), (4, "n")])).unwrap(),
            &["abc", "defg"],
        );
        assert!(r.iter().all(|r| r.as_ref().unwrap().duplicate));
    }
    let got = q.receive(&opts()).unwrap();
    assert_eq!(bodies(&got), ["one", "next"]);
    assert_eq!(got[1].message_id, r[1].as_ref().unwrap().message_id);
    for m in &got {
        q.delete(&m.receipt_handle).unwrap();
    }
    // A batch of one is a message too.
    let r = fill_and_send(
        q.loan_batch("g", &members(&[(4, "solo")])).unwrap(),
        &["solo"],
    );
    assert!(!r[0].as_ref().unwrap().duplicate);
    assert_eq!(bodies(&q.receive(&opts()).unwrap()), ["solo"]);
}

#[test]
fn s7_a_loaned_batch_member_that_is_not_text_fails_alone() {
    let q = queue("zc-batch-text", &two_classes(2));
    let mut batch = q
        .loan_batch("g", &members(&[(2, "a"), (2, "b"), (2, "c")]))
        .unwrap();
    batch.body_mut(0).copy_from_slice(b"ok");
    batch.body_mut(1).copy_from_slice(&[0xff, 0xfe]);
    batch.body_mut(2).copy_from_slice(b"k2");
    let r = batch.send().unwrap();
    assert!(matches!(r[1], Err(Error::InvalidMessageContents { .. })));
    assert!(r[0].is_ok() && r[2].is_ok());
    assert_eq!(bodies(&q.receive(&opts()).unwrap()), ["ok", "k2"]);
    // The refused member's key was not taken: it may be sent.
    let again = q.send(&SendMessage::new("g", "b").dedup_id("b")).unwrap();
    assert!(!again.duplicate);
}

#[test]
fn d5_a_loaned_batch_on_a_content_based_queue_generates_each_members_id() {
    let q = queue(
        "zc-batch-content",
        &two_classes(4).content_based_deduplication(true),
    );
    let m = vec![(5, LoanOptions::new()), (5, LoanOptions::new())];
    let mut batch = q.loan_batch("g", &m).unwrap();
    batch.body_mut(0).copy_from_slice(b"alpha");
    batch.body_mut(1).copy_from_slice(b"bravo");
    let r = batch.send().unwrap();
    assert!(r.iter().all(|r| !r.as_ref().unwrap().duplicate));
    // The same body sent again is the member's duplicate (D5: the id is the body's SHA-256).
    let again = q.send(&SendMessage::new("g", "bravo")).unwrap();
    assert!(again.duplicate);
    assert_eq!(again.message_id, r[1].as_ref().unwrap().message_id);
    let got = q.receive(&opts()).unwrap();
    assert_eq!(bodies(&got), ["alpha", "bravo"]);
    assert_eq!(got[0].dedup_id.as_deref().map(str::len), Some(64));
}

#[test]
fn s2_s4_s6_s12_s13_a_loaned_batch_is_refused_before_anything_is_lent() {
    let q = queue("zc-batch-refused", &two_classes(1));
    assert!(matches!(
        q.loan_batch("g", &[]),
        Err(Error::EmptyBatchRequest)
    ));
    let eleven = members(&[(1, "a"); 11]);
    assert!(matches!(
        q.loan_batch("g", &eleven),
        Err(Error::TooManyEntriesInBatchRequest { entries: 11 })
    ));
    let zero = members(&[(1, "a"), (0, "b")]);
    assert!(matches!(
        q.loan_batch("g", &zero),
        Err(Error::InvalidParameterValue { .. })
    ));
    let no_id = vec![
        (1, LoanOptions::new().dedup_id("a")),
        (1, LoanOptions::new()),
    ];
    assert!(q.loan_batch("g", &no_id).is_err());
    assert!(matches!(
        q.loan_batch("bad group!", &members(&[(1, "a")])),
        Err(Error::InvalidParameterValue { .. })
    ));
    let too_long = members(&[(4097, "a")]);
    assert!(matches!(
        q.loan_batch("g", &too_long),
        Err(Error::InvalidParameterValue { .. })
    ));
    // Ten members of 4 KiB: more than the largest class holds in one slot.
    let large = members(&[(4000, "a"); 10]);
    assert!(matches!(
        q.loan_batch("g", &large),
        Err(Error::InvalidParameterValue { .. })
    ));
    // Nothing was lent by any of them: the one 256-byte slot is free, and a dropped loaned
    // batch gives it back each time.
    for _ in 0..3 {
        drop(q.loan_batch("g", &members(&[(1, "a"), (1, "b")])).unwrap());
    }
    q.send(&SendMessage::new("g", "fits").dedup_id("fits"))
        .unwrap();
}

#[test]
fn a_loaned_batch_moves_to_another_thread() {
    let q = queue("zc-batch-thread", &two_classes(2));
    let mut batch = q.loan_batch("g", &members(&[(1, "a"), (1, "b")])).unwrap();
    std::thread::scope(|s| {
        s.spawn(move || {
            batch.body_mut(0).copy_from_slice(b"1");
            batch.body_mut(1).copy_from_slice(b"2");
            assert!(batch.send().unwrap().iter().all(|r| r.is_ok()));
        });
    });
    assert_eq!(bodies(&q.receive(&opts()).unwrap()), ["1", "2"]);
}

#[test]
fn d1_a_duplicate_in_a_loaned_batch_s_middle_is_left_out_and_the_long_members_after_it_move_intact()
{
    let q = queue("zc-batch-middle", &two_classes(4));
    q.send(&SendMessage::new("g", "original").dedup_id("m"))
        .unwrap();
    let text = |n: usize, seed: usize| -> String {
        (0..n)
            .map(|i| (b'a' + ((i * 7 + seed) % 26) as u8) as char)
            .collect()
    };
    // Each body a few hundred bytes: moved down over the member left out (its 32-byte entry
    // and its bytes), each move overlaps the bytes it reads.
    let (b0, b2, b3) = (text(300, 1), text(700, 2), text(500, 3));
    let attrs = [MessageAttribute::string("kind", "tail")];
    let members = vec![
        (b0.len(), LoanOptions::new().dedup_id("m0")),
        (3, LoanOptions::new().dedup_id("m")),
        (b2.len(), LoanOptions::new().dedup_id("m2")),
        (
            b3.len(),
            LoanOptions::new().dedup_id("m3").attributes(&attrs),
        ),
    ];
    let batch = q.loan_batch("g", &members).unwrap();
    let r = fill_and_send(batch, &[&b0, "dup", &b2, &b3]);
    let r: Vec<_> = r.into_iter().map(|r| r.unwrap()).collect();
    assert_eq!(
        r.iter().map(|s| s.duplicate).collect::<Vec<_>>(),
        [false, true, false, false]
    );
    let got = q.receive(&opts()).unwrap();
    assert_eq!(
        bodies(&got),
        ["original", b0.as_str(), b2.as_str(), b3.as_str()]
    );
    assert_eq!(r[1].message_id, got[0].message_id);
    for (g, s) in got[1..].iter().zip([&r[0], &r[2], &r[3]]) {
        assert_eq!(g.message_id, s.message_id);
    }
    let ids: Vec<_> = got.iter().map(|m| m.dedup_id.as_deref()).collect();
    assert_eq!(ids, [Some("m"), Some("m0"), Some("m2"), Some("m3")]);
    assert_eq!(got[3].attributes.len(), 1);
    assert_eq!(got[3].attributes[0].value, b"tail");
    assert!(got[1].attributes.is_empty() && got[2].attributes.is_empty());
}

#[test]
fn a_borrowed_receive_into_a_reused_buffer_reads_in_place_and_the_buffer_copies_again_after() {
    let q = queue("zc-borrow-into", &two_classes(8));
    let mut buf = shmfifo::ReceiveBuffer::new();
    for round in 0..3 {
        let bodies: Vec<String> = (0..3).map(|i| format!("r{round}-{i}")).collect();
        for (i, b) in bodies.iter().enumerate() {
            q.send(&SendMessage::new("g", b).dedup_id(&format!("{round}-{i}")))
                .unwrap();
        }
        let got = q.receive_borrowed_into(&opts(), &mut buf).unwrap();
        assert_eq!(got.len(), 3);
        assert!(got.get(3).is_none());
        let seen: Vec<&[u8]> = got.iter().map(|m| m.body()).collect();
        let want: Vec<&[u8]> = bodies.iter().map(|b| b.as_bytes()).collect();
        assert_eq!(seen, want);
        for m in got.iter() {
            m.verify().unwrap();
            assert_eq!(
                m.body_str().unwrap(),
                std::str::from_utf8(m.body()).unwrap()
            );
            // The body is in place: the buffer's copy of the message holds none.
            assert!(m.message().body.is_empty());
            assert_eq!(m.message().receive_count, 1);
        }
        let handles: Vec<_> = got.iter().map(|m| *m.receipt_handle()).collect();
        let first = got.get(0).unwrap();
        for r in q.delete_handles(&handles).unwrap() {
            r.unwrap();
        }
        // H-rules: deleted, the view no longer proves its bytes.
        assert!(matches!(
            first.verify(),
            Err(Error::ReceiptHandleExpired { .. })
        ));
    }
    // The same buffer in a copying receive copies the bodies again.
    q.send(&SendMessage::new("g", "copied").dedup_id("c"))
        .unwrap();
    assert_eq!(q.receive_into(&opts(), &mut buf).unwrap(), 1);
    assert_eq!(buf.messages()[0].body, "copied");
    // And an empty borrowed receive is an empty batch.
    let none = q.receive_borrowed_into(&opts(), &mut buf).unwrap();
    assert!(none.is_empty() && none.iter().next().is_none());
}

#[test]
fn r11_a_borrowed_receive_into_a_buffer_replays_under_its_attempt_id() {
    let q = queue("zc-borrow-attempt", &two_classes(8));
    q.send(&SendMessage::new("g", "a").dedup_id("a")).unwrap();
    q.send(&SendMessage::new("g", "b").dedup_id("b")).unwrap();
    let mut buf = shmfifo::ReceiveBuffer::new();
    let first: Vec<_> = q
        .receive_borrowed_with_attempt_id_into(&opts(), "att-1", &mut buf)
        .unwrap()
        .iter()
        .map(|m| *m.receipt_handle())
        .collect();
    assert_eq!(first.len(), 2);
    // The answer was lost: the retry hands out the same messages, in place.
    let retry = q
        .receive_borrowed_with_attempt_id_into(&opts(), "att-1", &mut buf)
        .unwrap();
    let handles: Vec<_> = retry.iter().map(|m| *m.receipt_handle()).collect();
    assert_eq!(handles, first);
    let seen: Vec<&[u8]> = retry.iter().map(|m| m.body()).collect();
    assert_eq!(seen, [&b"a"[..], b"b"]);
    for m in retry.iter() {
        m.verify().unwrap();
    }
    // One of them deleted: the id no longer replays; a fresh receive finds "b" in flight.
    q.delete(&first[0]).unwrap();
    let again = q
        .receive_borrowed_with_attempt_id_into(&opts(), "att-1", &mut buf)
        .unwrap();
    assert!(again.is_empty());
}

/// H1, H2 on a borrowed batch checked at once (`BorrowedBatch::verify`): a pack's members and
/// messages in slots of their own are all as the receive left them; a delete of one, then of
/// an earlier one, makes the check name the first changed message, exactly where the
/// message's own check fails; a purge names the first of all.
#[test]
fn h1_h2_a_borrowed_batch_verified_at_once_names_its_first_changed_message() {
    let q = queue("zc-batch-verify", &two_classes(16));
    let ids = ["a", "b", "c", "d", "e", "f"];
    let pack: Vec<_> = ids
        .iter()
        .map(|&id| SendMessage::new("g", "member").dedup_id(id))
        .collect();
    for r in q.send_messages(&pack).unwrap() {
        r.unwrap();
    }
    q.send(&SendMessage::new("h", "own slot").dedup_id("x"))
        .unwrap();
    q.send(&SendMessage::new("h", "own slot").dedup_id("y"))
        .unwrap();
    let mut buf = shmfifo::ReceiveBuffer::new();
    let got = q.receive_borrowed_into(&opts(), &mut buf).unwrap();
    assert_eq!(got.len(), 8);
    got.verify().unwrap();
    let handles: Vec<_> = got.iter().map(|m| *m.receipt_handle()).collect();
    // Each one's own check agrees with the batch's: the first whose own check fails is named.
    let agrees = |want: Option<usize>| {
        for (k, m) in got.iter().enumerate() {
            assert_eq!(m.verify().is_ok(), want != Some(k), "the message at {k}");
        }
        match (got.verify(), want) {
            (Ok(()), None) => {}
            (Err(Error::ReceiptHandleExpired { handle }), Some(k)) => {
                assert_eq!(handle, handles[k].to_string(), "named the message at {k}")
            }
            (r, w) => panic!("batch check {r:?}, expected the message at {w:?}"),
        }
    };
    agrees(None);
    // The last pack member's neighbour in its own slot, then a member in the pack's middle.
    q.delete(&handles[6]).unwrap();
    agrees(Some(6));
    q.delete(&handles[2]).unwrap();
    assert!(got.get(6).unwrap().verify().is_err());
    match got.verify() {
        Err(Error::ReceiptHandleExpired { handle }) => assert_eq!(handle, handles[2].to_string()),
        r => panic!("{r:?}"),
    }
    q.purge().unwrap();
    match got.verify() {
        Err(Error::ReceiptHandleExpired { handle }) => assert_eq!(handle, handles[0].to_string()),
        r => panic!("{r:?}"),
    }
}
