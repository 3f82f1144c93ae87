//! Deduplication rules (D1–D9, S3, S4 of SQS-FIFO.md), through the public API. Durations are
//! short configured intervals; each test names the rule it pins.

mod common;

use std::time::Duration;

use common::*;
use shmfifo::{
    BatchEntry, DedupOverflow, Deduplication, Error, MessageAttribute, QueueConfig, ReceiveOptions,
    SendMessage,
};

fn send_d(q: &shmfifo::Queue, group: &str, body: &str, id: &str) -> shmfifo::SendResult {
    q.send(&SendMessage::new(group, body).dedup_id(id))
        .expect("send")
}

fn drain_bodies(q: &shmfifo::Queue) -> Vec<String> {
    let mut out = Vec::new();
    loop {
        let ms = recv(q, 10);
        if ms.is_empty() {
            return out;
        }
        for m in ms {
            q.delete(&m.receipt_handle).expect("delete");
            out.push(m.body);
        }
    }
}

fn invalid_reason(e: Error) -> (&'static str, String) {
    match e {
        Error::InvalidParameterValue { parameter, reason } => (parameter, reason),
        other => panic!("expected InvalidParameterValue, got {other:?}"),
    }
}

/// D1: a send whose dedup id was accepted within the interval succeeds and delivers nothing.
#[test]
fn d1_duplicate_within_interval_is_accepted_and_not_delivered() {
    let q = queue("d1", &small_dedup());
    let a = send_d(&q, "g", "first", "id-1");
    assert!(!a.duplicate);
    let b = send_d(&q, "g", "second", "id-1");
    assert!(b.duplicate, "the second send is a duplicate");
    assert_eq!(drain_bodies(&q), ["first"]);
}

/// D1: the interval is anchored at the first accepted send; a duplicate does not extend it,
/// and a send after the interval is a new message.
#[test]
fn d1_window_is_anchored_at_the_first_send_and_ends() {
    let q = queue(
        "d1win",
        &small_dedup().deduplication_interval(Duration::from_millis(400)),
    );
    let a = send_d(&q, "g", "one", "k");
    std::thread::sleep(Duration::from_millis(200));
    assert!(send_d(&q, "g", "dup", "k").duplicate, "within the interval");
    std::thread::sleep(Duration::from_millis(300));
    // 500 ms after the first send, 300 ms after the duplicate: the window has ended.
    let c = send_d(&q, "g", "two", "k");
    assert!(!c.duplicate, "a resend after the interval is not detected");
    assert_ne!(a.message_id, c.message_id);
    assert_eq!(drain_bodies(&q), ["one", "two"]);
}

/// D2: dedup is queue-wide by default: the same id in another group is a duplicate.
#[test]
fn d2_queue_scope_spans_groups() {
    let q = queue("d2q", &small_dedup());
    let a = send_d(&q, "g1", "a", "same");
    let b = send_d(&q, "g2", "b", "same");
    assert!(b.duplicate);
    assert_eq!(a.message_id, b.message_id);
    assert_eq!(drain_bodies(&q), ["a"]);
    assert_eq!(q.attributes().deduplication, Deduplication::Queue);
}

/// D2: with messageGroup scope the key is (group, dedup id).
#[test]
fn d2_message_group_scope_keys_by_group() {
    let q = queue(
        "d2g",
        &small_dedup().deduplication(Deduplication::MessageGroup),
    );
    assert!(!send_d(&q, "g1", "a", "same").duplicate);
    assert!(
        !send_d(&q, "g2", "b", "same").duplicate,
        "another group: not a duplicate"
    );
    assert!(
        send_d(&q, "g1", "c", "same").duplicate,
        "same group: duplicate"
    );
    // Keys that concatenate alike must not collide: (g1, "x") vs (g, "1x").
    assert!(!send_d(&q, "g", "d", "1x").duplicate);
    assert!(!send_d(&q, "g1", "e", "x").duplicate);
    let mut got = drain_bodies(&q);
    got.sort();
    assert_eq!(got, ["a", "b", "d", "e"]);
    let reopened = shmfifo::Queue::open(&q.name).unwrap();
    assert_eq!(
        reopened.attributes().deduplication,
        Deduplication::MessageGroup,
        "the scope is fixed at creation and read back on open (D3)"
    );
}

/// D4: dedup tracking survives receive and delete.
#[test]
fn d4_dedup_survives_receive_and_delete() {
    let q = queue("d4", &small_dedup());
    let a = send_d(&q, "g", "a", "k");
    assert_eq!(drain_bodies(&q), ["a"]);
    let b = send_d(&q, "g", "again", "k");
    assert!(b.duplicate);
    assert_eq!(b.message_id, a.message_id);
    assert!(drain_bodies(&q).is_empty());
}

/// D5: content-based dedup: id = lowercase hex SHA-256 of the body, attributes excluded; an
/// explicit id overrides it; an explicit id equal to a generated one is a duplicate.
#[test]
fn d5_content_based_dedup() {
    let q = queue("d5", &small_dedup().content_based_deduplication(true));
    let hello = "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824";
    let a = q.send(&SendMessage::new("g", "hello")).unwrap();
    assert!(!a.duplicate);
    let attrs = [MessageAttribute::string("k", "v")];
    let b = q
        .send(&SendMessage::new("g", "hello").attributes(&attrs))
        .unwrap();
    assert!(
        b.duplicate,
        "attributes do not count toward content-based dedup"
    );
    let c = q
        .send(&SendMessage::new("g", "hello").dedup_id("explicit"))
        .unwrap();
    assert!(!c.duplicate, "an explicit id overrides the generated one");
    let d = q
        .send(&SendMessage::new("g2", "other body").dedup_id(hello))
        .unwrap();
    assert!(d.duplicate, "an explicit id equal to a generated one");
    assert_eq!(d.message_id, a.message_id);
    let ms = recv(&q, 10);
    assert_eq!(bodies(&ms), ["hello", "hello"]);
    assert_eq!(
        ms[0].dedup_id.as_deref(),
        Some(hello),
        "the generated id is the message's dedup id"
    );
    assert_eq!(ms[1].dedup_id.as_deref(), Some("explicit"));
    assert!(q.attributes().content_based_deduplication);
}

/// D6: a duplicate returns the original message id and sequence number and consumes no
/// sequence number.
#[test]
fn d6_duplicate_returns_the_original_and_consumes_no_sequence_number() {
    let q = queue("d6", &small_dedup());
    let a = send_d(&q, "g", "a", "k1");
    let dup = send_d(&q, "g", "b", "k1");
    assert_eq!(
        (dup.message_id, dup.sequence_number),
        (a.message_id, a.sequence_number)
    );
    let c = send_d(&q, "g", "c", "k2");
    assert_eq!(
        c.sequence_number,
        a.sequence_number + 1,
        "the duplicate took no sequence number"
    );
}

/// D7: purge clears the dedup table.
#[test]
fn d7_purge_clears_dedup() {
    let q = queue("d7", &small_dedup());
    send_d(&q, "g", "a", "k");
    q.purge().unwrap();
    let b = send_d(&q, "g", "b", "k");
    assert!(!b.duplicate, "after a purge the id is new");
    assert_eq!(drain_bodies(&q), ["b"]);
}

/// D9: two entries with the same dedup id in one batch: the second is the duplicate, and is
/// reported as successful.
#[test]
fn d9_batch_second_entry_is_the_duplicate() {
    let q = queue("d9", &small_dedup());
    let r = q
        .send_batch(&[
            BatchEntry {
                id: "a",
                entry: SendMessage::new("g", "first").dedup_id("k"),
            },
            BatchEntry {
                id: "b",
                entry: SendMessage::new("g", "second").dedup_id("k"),
            },
        ])
        .unwrap();
    let a = r[0].result.as_ref().unwrap();
    let b = r[1].result.as_ref().unwrap();
    assert!(!a.duplicate && b.duplicate);
    assert_eq!(a.message_id, b.message_id);
    assert_eq!(drain_bodies(&q), ["first"]);
}

/// S4: no dedup id with content-based dedup off → InvalidParameterValue, with SQS's text.
/// Precedence: group absent → MissingParameter, whatever the dedup id.
#[test]
fn s4_dedup_id_required_without_content_based_dedup() {
    let q = queue("s4", &small_dedup());
    let e = q.send(&SendMessage::new("g", "x")).unwrap_err();
    assert_eq!(e.sqs_code(), "InvalidParameterValue");
    let (p, reason) = invalid_reason(e);
    assert_eq!(p, "MessageDeduplicationId");
    assert_eq!(reason, "The queue should either have ContentBasedDeduplication enabled or MessageDeduplicationId provided explicitly");
    let none = SendMessage {
        group_id: None,
        ..SendMessage::new("g", "x")
    };
    assert!(matches!(
        q.send(&none),
        Err(Error::MissingParameter {
            parameter: "MessageGroupId"
        })
    ));
    // S12: in a batch the missing id rejects the whole request.
    let e = q
        .send_batch(&[
            BatchEntry {
                id: "a",
                entry: SendMessage::new("g", "ok").dedup_id("d"),
            },
            BatchEntry {
                id: "b",
                entry: SendMessage::new("g", "no id"),
            },
        ])
        .unwrap_err();
    assert_eq!(invalid_reason(e).0, "MessageDeduplicationId");
    assert!(recv(&q, 10).is_empty(), "nothing was enqueued");
}

/// S3 on a dedup queue: invalid ids are rejected before anything is reserved.
#[test]
fn s3_invalid_dedup_ids_reserve_nothing() {
    let q = queue("s3d", &small_dedup().dedup_entries(1));
    for bad in ["", "has space", "é", "a\u{8}"] {
        let e = q
            .send(&SendMessage::new("g", "x").dedup_id(bad))
            .unwrap_err();
        assert_eq!(invalid_reason(e).0, "MessageDeduplicationId");
    }
    assert_eq!(q.attributes().dedup_entries_in_use, 0);
    assert!(!send_d(&q, "g", "x", &"a".repeat(128)).duplicate);
}

/// Extension: a queue with deduplication off keeps no table, needs no dedup id, and rejects
/// one (as SQS does on a queue type without dedup, S9).
#[test]
fn dedup_off_keeps_no_table() {
    let off = queue("doff", &small());
    let on = queue("don", &small_dedup());
    assert!(!common::send(&off, "g", "same").duplicate);
    assert!(!common::send(&off, "g", "same").duplicate);
    assert_eq!(drain_bodies(&off), ["same", "same"]);
    let e = off
        .send(&SendMessage::new("g", "x").dedup_id("d"))
        .unwrap_err();
    assert_eq!(invalid_reason(e).0, "MessageDeduplicationId");
    let (ao, an) = (off.attributes(), on.attributes());
    assert_eq!(ao.deduplication, Deduplication::Off);
    assert_eq!(ao.dedup_entries, 0);
    assert_eq!(an.dedup_entries, 1024);
    assert!(ao.arena_bytes < an.arena_bytes);
    assert!(matches!(
        QueueConfig::new()
            .deduplication(Deduplication::Off)
            .content_based_deduplication(true)
            .validate(),
        Err(Error::InvalidConfig {
            setting: "content_based_deduplication",
            ..
        })
    ));
}

/// Capacity, strict setting (`DedupOverflow::Refuse`): when every entry holds an id accepted
/// within the interval, a send fails with DedupTableFull; no entry is evicted early
/// (duplicates are still caught); once the interval passes, entries are reclaimed by later
/// sends (no background thread).
#[test]
fn full_table_fails_clearly_and_recovers_after_the_interval() {
    let q = queue(
        "dfull",
        &small_dedup()
            .dedup_entries(4)
            .dedup_overflow(DedupOverflow::Refuse)
            .size_limit(0) // no growth: the table fills
            .deduplication_interval(Duration::from_millis(300)),
    );
    for i in 0..4 {
        assert!(!send_d(&q, "g", "m", &format!("k{i}")).duplicate);
    }
    let e = q
        .send(&SendMessage::new("g", "m").dedup_id("k4"))
        .unwrap_err();
    assert!(
        matches!(
            e,
            Error::DedupTableFull {
                entries: 4,
                interval_ms: 300
            }
        ),
        "{e:?}"
    );
    assert_eq!(e.sqs_code(), "shmfifo.DedupTableFull");
    for i in 0..4 {
        assert!(
            send_d(&q, "g", "m", &format!("k{i}")).duplicate,
            "k{i} was not evicted"
        );
    }
    assert_eq!(q.attributes().dedup_entries_in_use, 4);
    std::thread::sleep(Duration::from_millis(350));
    for i in 4..8 {
        assert!(!send_d(&q, "g", "m", &format!("k{i}")).duplicate);
    }
    assert_eq!(drain_bodies(&q).len(), 8, "k0-k3 and k4-k7, nothing lost");
}

/// Settings are validated with clear errors.
#[test]
fn dedup_settings_are_validated() {
    for (cfg, setting) in [
        (
            QueueConfig::new().deduplication_interval(Duration::ZERO),
            "deduplication_interval",
        ),
        (
            QueueConfig::new().deduplication_interval(Duration::from_secs(15 * 86_400)),
            "deduplication_interval",
        ),
        (QueueConfig::new().dedup_entries(0), "dedup_entries"),
        (QueueConfig::new().dedup_entries(u32::MAX), "dedup_entries"),
    ] {
        match cfg.validate() {
            Err(Error::InvalidConfig { setting: s, .. }) => assert_eq!(s, setting),
            other => panic!("{setting}: {other:?}"),
        }
    }
    let q = queue(
        "dset",
        &small_dedup()
            .dedup_entries(1000)
            .deduplication_interval(Duration::from_millis(1234)),
    );
    let a = q.attributes();
    assert_eq!(a.dedup_entries, 1024, "rounded up to a power of two");
    assert_eq!(a.deduplication_interval, Duration::from_millis(1234));
    assert!(!a.content_based_deduplication);
}

/// Many threads send overlapping dedup ids at once: exactly one message per id.
#[test]
fn concurrent_duplicates_deliver_exactly_once() {
    let q = queue("dconc", &small_dedup().dedup_entries(4096));
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let q = q.q.clone();
            std::thread::spawn(move || {
                let mut originals = Vec::new();
                for i in 0..300u32 {
                    // Each thread walks the ids in its own order.
                    let k = (i * (2 * t + 1) + 7 * t) % 300;
                    let id = format!("id-{k}");
                    let r = q
                        .send(&SendMessage::new(&format!("g{}", k % 7), &id).dedup_id(&id))
                        .unwrap();
                    originals.push((k, r.message_id, r.duplicate));
                }
                originals
            })
        })
        .collect();
    let mut by_id = std::collections::HashMap::new();
    let mut fresh = 0;
    for t in threads {
        for (k, mid, dup) in t.join().unwrap() {
            fresh += usize::from(!dup);
            let first = *by_id.entry(k).or_insert(mid);
            assert_eq!(first, mid, "every send of id-{k} names one message");
        }
    }
    assert_eq!(fresh, 300, "exactly one send per id enqueued");
    let mut got = drain_bodies(&q);
    got.sort();
    got.dedup();
    assert_eq!(got.len(), 300);
}

/// D1 under load, default setting (`DedupOverflow::ShortenWindow`): a table of 64
/// entries and SQS's 5-minute interval take 5,000 sends with new ids without one refusal
/// (SQS would accept them all). The oldest ids are forgotten early, which is counted and
/// reported as a shorter effective interval; an id sent a moment ago is still a duplicate.
#[test]
fn d1_a_full_table_shortens_the_window_instead_of_refusing() {
    let q = queue(
        "dshort",
        &small_dedup()
            .max_messages(256)
            .dedup_entries(64)
            .size_limit(0) // no growth: the table fills
            .deduplication_interval(Duration::from_secs(300)),
    );
    assert_eq!(q.attributes().dedup_overflow, DedupOverflow::ShortenWindow);
    assert_eq!(q.attributes().dedup_evictions, 0);
    assert_eq!(
        q.attributes().effective_deduplication_interval,
        Duration::from_secs(300),
        "nothing evicted yet: the full interval"
    );
    for i in 0..5_000 {
        let id = format!("id-{i}");
        let r = q
            .send(&SendMessage::new("g", "m").dedup_id(&id))
            .unwrap_or_else(|e| panic!("send {i} refused: {e}"));
        assert!(!r.duplicate, "send {i}");
        // The id just sent is remembered: its retry is a duplicate of it.
        let again = q.send(&SendMessage::new("g", "m").dedup_id(&id)).unwrap();
        assert!(again.duplicate, "retry of {i}");
        assert_eq!(again.message_id, r.message_id);
        // Keep the queue from filling: consume as we go.
        for m in q.receive(&ReceiveOptions::max(10)).unwrap() {
            q.delete(&m.receipt_handle).unwrap();
        }
    }
    let a = q.attributes();
    assert!(
        a.dedup_evictions >= 5_000 - 64,
        "evictions counted: {}",
        a.dedup_evictions
    );
    assert!(
        a.effective_deduplication_interval < Duration::from_secs(300),
        "the shorter window is reported: {:?}",
        a.effective_deduplication_interval
    );
}
