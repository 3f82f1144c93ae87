//! Integration tests of the SQS FIFO rules (SQS-FIFO.md) on the public API: send (S), identity
//! (M), receive (R), receipt handles (H), visibility (V), purge (P) and counters (C). Each test
//! names the rule ids it pins.

mod common;
use common::*;

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use shmfifo::{
    BatchEntry, Deduplication, Error, Message, MessageAttribute, Queue, QueueConfig,
    ReceiveOptions, SendMessage,
};

const LONG: Duration = Duration::from_secs(30);
const SHORT: Duration = Duration::from_millis(300);
/// Comfortably past `SHORT`.
const PAST_SHORT: Duration = Duration::from_millis(500);
const TWELVE_HOURS: Duration = Duration::from_secs(43_200);

fn wall_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

fn try_send(q: &Queue, msg: SendMessage<'_>) -> Result<shmfifo::SendResult, Error> {
    q.send(&msg)
}

fn recv_opts(q: &Queue, opts: ReceiveOptions) -> Vec<Message> {
    q.receive(&opts).expect("receive")
}

fn delete_all(q: &Queue, ms: &[Message]) {
    for m in ms {
        q.delete(&m.receipt_handle).expect("delete");
    }
}

/// Receives and deletes everything that can be received now.
fn drain(q: &Queue) -> Vec<String> {
    let mut out = Vec::new();
    loop {
        let ms = recv_vt(q, 10, LONG);
        if ms.is_empty() {
            return out;
        }
        out.extend(ms.iter().map(|m| m.body.clone()));
        delete_all(q, &ms);
    }
}

fn is_invalid(r: &Result<impl std::fmt::Debug, Error>, param: &str) -> bool {
    matches!(r, Err(Error::InvalidParameterValue { parameter, .. }) if *parameter == param)
}

// ---------------------------------------------------------------------------------------------
// S: send
// ---------------------------------------------------------------------------------------------

#[test]
fn s1_missing_group_is_missing_parameter() {
    let q = queue("s1", &small());
    let msg = SendMessage {
        group_id: None,
        dedup_id: None,
        body: "x",
        bytes: None,
        attributes: &[],
        delay_seconds: None,
    };
    let r = try_send(&q, msg);
    assert!(
        matches!(
            r,
            Err(Error::MissingParameter {
                parameter: "MessageGroupId"
            })
        ),
        "{r:?}"
    );
    // S4 precedence: group absent + dedup present is still MissingParameter.
    let msg = SendMessage {
        dedup_id: Some("d1"),
        ..msg
    };
    let r = try_send(&q, msg);
    assert!(
        matches!(
            r,
            Err(Error::MissingParameter {
                parameter: "MessageGroupId"
            })
        ),
        "{r:?}"
    );
    assert!(
        recv(&q, 10).is_empty(),
        "a rejected send enqueued a message"
    );
}

#[test]
fn s2_group_id_charset_and_length() {
    let q = queue("s2", &small());
    let g128 = "g".repeat(128);
    let punct = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~";
    try_send(&q, SendMessage::new(&g128, "a")).expect("128-char group id is valid");
    try_send(&q, SendMessage::new(punct, "b")).expect("ASCII punctuation is valid");
    try_send(&q, SendMessage::new("Az09", "c")).expect("alphanumerics are valid");
    let g129 = "g".repeat(129);
    for bad in ["", "group 123", "é", "a\u{8}", "tab\there", g129.as_str()] {
        let r = try_send(&q, SendMessage::new(bad, "x"));
        assert!(is_invalid(&r, "MessageGroupId"), "{bad:?}: {r:?}");
    }
    let ms = recv(&q, 10);
    let mut groups: Vec<&str> = ms.iter().map(|m| m.group_id.as_str()).collect();
    groups.sort();
    let mut want = vec![g128.as_str(), punct, "Az09"];
    want.sort();
    assert_eq!(
        groups, want,
        "only the valid sends were enqueued, group ids round-trip"
    );
}

/// S2: group ids are compared in full: two 128-character ids differing only in the last
/// character are distinct groups (separate order and in-flight exclusion, R3).
#[test]
fn s2_long_group_ids_differing_at_the_end_are_distinct() {
    let q = queue("s2long", &small());
    let a = format!("{}A", "p".repeat(127));
    let b = format!("{}B", "p".repeat(127));
    send(&q, &a, "a1");
    send(&q, &b, "b1");
    send(&q, &a, "a2");
    let first = recv_vt(&q, 1, LONG);
    assert_eq!(bodies(&first), ["a1"]);
    assert_eq!(first[0].group_id, a);
    let second = recv_vt(&q, 10, LONG);
    assert_eq!(bodies(&second), ["b1"], "a is locked, b is not");
    assert_eq!(second[0].group_id, b);
}

#[test]
fn s3_dedup_id_charset_and_length() {
    let q = queue("s3", &small_dedup());
    let a128 = "a".repeat(128);
    try_send(&q, SendMessage::new("g", "x").dedup_id(&a128)).expect("128 x 'a' accepted");
    let d129 = "a".repeat(129);
    for bad in ["", "dedup 1", "é", "a\u{8}", d129.as_str()] {
        let r = try_send(&q, SendMessage::new("g", "y").dedup_id(bad));
        assert!(is_invalid(&r, "MessageDeduplicationId"), "{bad:?}: {r:?}");
    }
    let ms = recv(&q, 10);
    assert_eq!(bodies(&ms), ["x"]);
    assert_eq!(ms[0].dedup_id.as_deref(), Some(a128.as_str()));
}

#[test]
fn s5_per_message_delay_rejected_zero_accepted() {
    let q = queue("s5", &small());
    let msg = SendMessage {
        delay_seconds: Some(2),
        ..SendMessage::new("g", "delayed")
    };
    let r = try_send(&q, msg);
    assert!(is_invalid(&r, "DelaySeconds"), "{r:?}");
    let msg = SendMessage {
        delay_seconds: Some(900),
        ..SendMessage::new("g", "delayed")
    };
    assert!(is_invalid(&try_send(&q, msg), "DelaySeconds"));
    let msg = SendMessage {
        delay_seconds: Some(0),
        ..SendMessage::new("g", "zero")
    };
    try_send(&q, msg).expect("DelaySeconds=0 is accepted");
    // The queue's delay (0) applies: visible at once.
    assert_eq!(bodies(&recv(&q, 10)), ["zero"]);
}

#[test]
fn s6_size_limit_counts_body_and_attributes() {
    // small(): maximum_message_size 4096.
    let q = queue("s6", &small());
    let max = "m".repeat(4096);
    try_send(&q, SendMessage::new("g", &max)).expect("a body of exactly the maximum");
    let over = "m".repeat(4097);
    let r = try_send(&q, SendMessage::new("g", &over));
    assert!(
        matches!(r, Err(Error::InvalidParameterValue { .. })),
        "{r:?}"
    );
    // Bytes, not characters: 2048 x 'é' = 4096 bytes fits, 2049 does not.
    let e2048 = "é".repeat(2048);
    try_send(&q, SendMessage::new("g", &e2048)).expect("4096 bytes of UTF-8");
    let e2049 = "é".repeat(2049);
    assert!(matches!(
        try_send(&q, SendMessage::new("g", &e2049)),
        Err(Error::InvalidParameterValue { .. })
    ));
    // Attributes count: name + data type + value.
    let body = "b".repeat(4000);
    let name = "n".repeat(40); // 40 + "String" (6) = 46; value 50 → 4096 in all
    let v50 = "v".repeat(50);
    let v51 = "v".repeat(51);
    let ok = [MessageAttribute::string(&name, &v50)];
    try_send(&q, SendMessage::new("g", &body).attributes(&ok))
        .expect("body + attributes = maximum");
    let too_big = [MessageAttribute::string(&name, &v51)];
    let r = try_send(&q, SendMessage::new("g", &body).attributes(&too_big));
    assert!(
        matches!(r, Err(Error::InvalidParameterValue { .. })),
        "attributes must count: {r:?}"
    );
    let ms = recv_vt(&q, 10, LONG);
    assert_eq!(
        bodies(&ms).len(),
        3,
        "only the three valid messages were enqueued"
    );
    assert_eq!(ms[0].body, max);
    assert_eq!(ms[1].body, e2048);
    assert_eq!(ms[2].body, body);
    delete_all(&q, &ms);
    // The largest stored form: maximum size with 10 attributes and a 128-character dedup id.
    let names: Vec<String> = (0..10).map(|i| format!("attr{i}")).collect();
    let ten: Vec<MessageAttribute<'_>> = names
        .iter()
        .map(|n| MessageAttribute::string(n, "v"))
        .collect();
    let attr_bytes: usize = ten
        .iter()
        .map(|a| a.name.len() + a.data_type.len() + a.value.len())
        .sum();
    let fill = "f".repeat(4096 - attr_bytes);
    let d128 = "d".repeat(128);
    let q = queue("s6max", &small_dedup());
    let r = try_send(
        &q,
        SendMessage::new("full", &fill)
            .attributes(&ten)
            .dedup_id(&d128),
    );
    r.expect("maximum size with 10 attributes and a 128-char dedup id");
    let ms = recv_vt(&q, 10, LONG);
    let full = ms.iter().find(|m| m.group_id == "full").expect("received");
    assert_eq!(full.body, fill);
    assert_eq!(full.attributes.len(), 10);
    assert_eq!(full.dedup_id.as_deref(), Some(d128.as_str()));
    delete_all(&q, &ms);
    // The body must have at least one character.
    assert!(matches!(
        try_send(&q, SendMessage::new("g", "")),
        Err(Error::InvalidParameterValue { .. })
    ));
    assert!(recv(&q, 10).is_empty());
}

#[test]
fn s7_invalid_body_characters() {
    let q = queue("s7", &small());
    for bad in [
        "a\u{0}b", "\u{1}", "x\u{1F}", "\u{FFFE}", "\u{FFFF}", "ok\u{B}",
    ] {
        let r = try_send(&q, SendMessage::new("g", bad));
        assert!(
            matches!(r, Err(Error::InvalidMessageContents { .. })),
            "{bad:?}: {r:?}"
        );
    }
    let good = "hello\t\n\r \u{D7FF}\u{E000}\u{FFFD}\u{10000}\u{10FFFF}";
    try_send(&q, SendMessage::new("g", good)).expect("allowed characters");
    let ms = recv(&q, 10);
    assert_eq!(bodies(&ms), [good]);
}

#[test]
fn s8_attributes_round_trip() {
    let q = queue("s8", &small());
    let bin = [0u8, 1, 2, 254, 255];
    let attrs = [
        MessageAttribute::string("trace.id", "abc-123"),
        MessageAttribute::number("Count_1", "12.5"),
        MessageAttribute::binary("blob", &bin),
        MessageAttribute {
            name: "json-doc",
            data_type: "String.json",
            value: b"{\"a\":1}",
        },
        MessageAttribute::string("Case", "upper"),
        MessageAttribute::string("case", "lower"),
    ];
    try_send(&q, SendMessage::new("g", "with attrs").attributes(&attrs)).unwrap();
    try_send(&q, SendMessage::new("g", "without")).unwrap();
    let ms = recv(&q, 10);
    assert_eq!(bodies(&ms), ["with attrs", "without"]);
    let got: Vec<(&str, &str, &[u8])> = ms[0]
        .attributes
        .iter()
        .map(|a| (a.name.as_str(), a.data_type.as_str(), a.value.as_slice()))
        .collect();
    let want: Vec<(&str, &str, &[u8])> = attrs
        .iter()
        .map(|a| (a.name, a.data_type, a.value))
        .collect();
    assert_eq!(got, want);
    assert!(
        ms[1].attributes.is_empty(),
        "a message without attributes has none"
    );
}

#[test]
fn s8_invalid_attributes_rejected() {
    let q = queue("s8bad", &small());
    let long = "n".repeat(257);
    for (name, ty, value) in [
        ("AWS.x", "String", &b"x"[..]),
        ("aws.x", "String", b"x"),
        ("Amazon.x", "String", b"x"),
        ("AMAZON.x", "String", b"x"),
        (".x", "String", b"x"),
        ("x.", "String", b"x"),
        ("a..b", "String", b"x"),
        ("a b", "String", b"x"),
        ("é", "String", b"x"),
        ("", "String", b"x"),
        (long.as_str(), "String", b"x"),
        ("x", "Text", b"x"),
        ("x", "string", b"x"),
        ("x", "Number", b"abc"),
        // As SQS: no NaN or infinity, at most 38 significant digits, 10^-128 to 10^126.
        ("x", "Number", b"NaN"),
        ("x", "Number", b"inf"),
        ("x", "Number", b"-infinity"),
        ("x", "Number", b"123456789012345678901234567890123456789012"),
        ("x", "Number", b"1e127"),
        ("x", "Number", b"1e-129"),
        ("x", "Number.float", b"NaN"),
        // Our choice (S8 is silent): a text value takes a body's characters (S7), so that
        // every wire carries it unchanged (XML cannot carry U+0001).
        ("x", "String", b"\x01"),
        ("x", "String", b"ok\x0bnot"),
        ("x", "String.label", "\u{FFFE}".as_bytes()),
    ] {
        let a = [MessageAttribute {
            name,
            data_type: ty,
            value,
        }];
        let r = try_send(&q, SendMessage::new("g", "x").attributes(&a));
        assert!(
            matches!(r, Err(Error::InvalidParameterValue { .. })),
            "{name:?} {ty:?}: {r:?}"
        );
    }
    // Names are unique.
    let dup = [
        MessageAttribute::string("a", "1"),
        MessageAttribute::string("a", "2"),
    ];
    assert!(matches!(
        try_send(&q, SendMessage::new("g", "x").attributes(&dup)),
        Err(Error::InvalidParameterValue { .. })
    ));
    // At most 10.
    let names: Vec<String> = (0..11).map(|i| format!("a{i}")).collect();
    let eleven: Vec<MessageAttribute<'_>> = names
        .iter()
        .map(|n| MessageAttribute::string(n, "v"))
        .collect();
    let r = try_send(&q, SendMessage::new("g", "x").attributes(&eleven));
    assert!(
        matches!(r, Err(Error::InvalidParameterValue { .. })),
        "11 attributes: {r:?}"
    );
    try_send(&q, SendMessage::new("g", "ten").attributes(&eleven[..10])).expect("10 attributes");
    // A 256-character name is fine.
    let n256 = "n".repeat(256);
    let a = [MessageAttribute::string(&n256, "v")];
    try_send(&q, SendMessage::new("g", "n256").attributes(&a)).expect("256-char name");
    // Tab, newline, carriage return and any other S7 character are fine in a text value.
    let a = [MessageAttribute::string("t", "a\tb\nc\rd \u{e9}\u{1F600}")];
    try_send(&q, SendMessage::new("g", "s7").attributes(&a)).expect("S7 characters");
    let ms = recv(&q, 10);
    assert_eq!(bodies(&ms), ["ten", "n256", "s7"]);
    assert_eq!(ms[0].attributes.len(), 10);
    assert_eq!(
        ms[2].attributes[0].value,
        "a\tb\nc\rd \u{e9}\u{1F600}".as_bytes()
    );
}

fn entry<'a>(id: &'a str, group: &'a str, body: &'a str) -> BatchEntry<'a, SendMessage<'a>> {
    BatchEntry {
        id,
        entry: SendMessage::new(group, body),
    }
}

#[test]
fn s11_s12_batch_request_level_errors() {
    let q = queue("s12", &small());
    assert!(matches!(q.send_batch(&[]), Err(Error::EmptyBatchRequest)));
    let ids: Vec<String> = (0..11).map(|i| format!("e{i}")).collect();
    let eleven: Vec<_> = ids.iter().map(|id| entry(id, "g", "x")).collect();
    assert!(matches!(
        q.send_batch(&eleven),
        Err(Error::TooManyEntriesInBatchRequest { entries: 11 })
    ));
    let long81 = "i".repeat(81);
    for bad in ["", "a!", "a b", "é", long81.as_str()] {
        let r = q.send_batch(&[entry("ok", "g", "x"), entry(bad, "g", "y")]);
        assert!(
            matches!(r, Err(Error::InvalidBatchEntryId { .. })),
            "{bad:?}: {r:?}"
        );
    }
    let r = q.send_batch(&[
        entry("a", "g", "x"),
        entry("b", "g", "y"),
        entry("a", "g", "z"),
    ]);
    assert!(
        matches!(r, Err(Error::BatchEntryIdsNotDistinct { .. })),
        "{r:?}"
    );
    // A FIFO entry without a group: request-level InvalidParameterValue (not MissingParameter).
    let nogroup = BatchEntry {
        id: "n",
        entry: SendMessage {
            group_id: None,
            dedup_id: None,
            body: "x",
            bytes: None,
            attributes: &[],
            delay_seconds: None,
        },
    };
    let r = q.send_batch(&[entry("a", "g", "first"), nogroup, entry("c", "g", "last")]);
    assert!(is_invalid(&r, "MessageGroupId"), "{r:?}");
    assert!(
        recv(&q, 10).is_empty(),
        "no request-level failure may enqueue anything"
    );
    // 80-character ids with every allowed character class are fine.
    let id80 = format!("{}-_A9", "x".repeat(76));
    let r = q
        .send_batch(&[entry(&id80, "g", "ok")])
        .expect("80-char id");
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].id, id80);
    assert!(r[0].result.is_ok());
    let ten: Vec<_> = ids[..10].iter().map(|id| entry(id, "g", "t")).collect();
    let r = q.send_batch(&ten).expect("10 entries");
    assert!(r.iter().all(|e| e.result.is_ok()));
    assert_eq!(recv(&q, 10).len(), 10);
}

/// S11–S13 for `send_messages`, the batch without entry ids: the same request-level errors
/// reject the whole batch (nothing enqueued), an entry's own failure is its own, and the
/// messages of a group go in their order, as one chain.
#[test]
fn s11_s13_send_messages_batches_without_entry_ids() {
    let q = queue("s11typed", &small());
    assert!(matches!(
        q.send_messages(&[]),
        Err(Error::EmptyBatchRequest)
    ));
    let eleven = vec![SendMessage::new("g", "x"); 11];
    assert!(matches!(
        q.send_messages(&eleven),
        Err(Error::TooManyEntriesInBatchRequest { entries: 11 })
    ));
    let nogroup = SendMessage {
        group_id: None,
        dedup_id: None,
        body: "x",
        bytes: None,
        attributes: &[],
        delay_seconds: None,
    };
    let r = q.send_messages(&[SendMessage::new("g", "first"), nogroup]);
    assert!(is_invalid(&r, "MessageGroupId"), "{r:?}");
    assert!(
        recv(&q, 10).is_empty(),
        "no request-level failure may enqueue anything"
    );
    // S13: the empty body fails alone; the others go, each group in its order.
    let r = q
        .send_messages(&[
            SendMessage::new("a", "a1"),
            SendMessage::new("b", "b1"),
            SendMessage::new("a", ""),
            SendMessage::new("a", "a2"),
            SendMessage::new("b", "b2"),
        ])
        .expect("a batch with one bad entry");
    assert_eq!(r.len(), 5);
    assert!(
        matches!(r[2], Err(Error::InvalidParameterValue { .. })),
        "{:?}",
        r[2]
    );
    let ok: Vec<_> = [0, 1, 3, 4]
        .iter()
        .map(|&k| r[k].as_ref().unwrap())
        .collect();
    assert!(
        ok[0].sequence_number < ok[2].sequence_number,
        "a1 before a2 in the queue's sequence"
    );
    let got = recv(&q, 10);
    let mut by_group: Vec<(String, String)> = got
        .iter()
        .map(|m| (m.group_id.clone(), m.body.clone()))
        .collect();
    by_group.sort_by(|x, y| x.0.cmp(&y.0));
    assert_eq!(
        by_group,
        [("a", "a1"), ("a", "a2"), ("b", "b1"), ("b", "b2")]
            .map(|(g, b)| (g.to_owned(), b.to_owned())),
        "every message once, each group in its order"
    );
    for m in &got {
        assert!(
            ok.iter().any(|s| s.message_id == m.message_id),
            "{} was reported sent, with its id",
            m.body
        );
    }
}

/// A queue taking messages of up to 1 MiB (dedup off), for batches over 1 MiB in all.
fn one_mib_queue(tag: &str) -> TestQueue {
    let cfg = QueueConfig::new()
        .deduplication(Deduplication::Off)
        .maximum_message_size(1_048_576)
        .max_messages(16);
    queue(tag, &cfg)
}

/// S12: over 1 MiB in all rejects a `send_messages` batch whole, as it does `send_batch`.
#[test]
fn s12_send_messages_request_too_long() {
    let q = one_mib_queue("s12typedlong");
    let big = "b".repeat(600_000);
    let r = q.send_messages(&[SendMessage::new("g", &big), SendMessage::new("g", &big)]);
    assert!(
        matches!(r, Err(Error::BatchRequestTooLong { bytes: 1_200_000 })),
        "{r:?}"
    );
    assert!(recv(&q, 10).is_empty());
}

#[test]
fn s12_batch_request_too_long() {
    let q = one_mib_queue("s12long");
    let half = "h".repeat(524_288);
    let big = "b".repeat(600_000);
    let r = q.send_batch(&[entry("a", "g", &big), entry("b", "g", &big)]);
    assert!(
        matches!(r, Err(Error::BatchRequestTooLong { bytes: 1_200_000 })),
        "{r:?}"
    );
    assert!(recv(&q, 10).is_empty(), "nothing enqueued");
    let r = q
        .send_batch(&[entry("a", "g", &half), entry("b", "g", &half)])
        .expect("exactly 1 MiB in all");
    assert!(r.iter().all(|e| e.result.is_ok()), "{r:?}");
    let ms = recv_vt(&q, 10, LONG);
    assert_eq!(ms.len(), 2);
    assert!(ms.iter().all(|m| m.body == half));
    delete_all(&q, &ms);
    // S6: a 1 MiB message on a queue whose maximum is 1 MiB, and not one byte more.
    let mib = "M".repeat(1_048_576);
    send(&q, "g", &mib);
    let over = "M".repeat(1_048_577);
    assert!(matches!(
        try_send(&q, SendMessage::new("g", &over)),
        Err(Error::InvalidParameterValue { .. })
    ));
    let ms = recv(&q, 10);
    assert_eq!(ms.len(), 1);
    assert_eq!(ms[0].body.len(), 1_048_576);
}

#[test]
fn s13_oversize_entry_fails_alone_and_s11_order_kept() {
    let q = queue("s13", &small());
    let big = "x".repeat(4097);
    let batch = [
        entry("e1", "g1", "g1-m1"),
        entry("e2", "g2", "g2-m1"),
        entry("e3", "g1", &big),
        entry("e4", "g1", "g1-m2"),
        entry("e5", "g1", "g1-m3"),
    ];
    let res = q
        .send_batch(&batch)
        .expect("per-entry failures are not request errors");
    let ids: Vec<&str> = res.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids, ["e1", "e2", "e3", "e4", "e5"]);
    assert!(
        matches!(res[2].result, Err(Error::InvalidParameterValue { .. })),
        "{:?}",
        res[2].result
    );
    for k in [0, 1, 3, 4] {
        assert!(res[k].result.is_ok(), "{}: {:?}", res[k].id, res[k].result);
    }
    let seq = |k: usize| res[k].result.as_ref().unwrap().sequence_number;
    assert!(
        seq(0) < seq(3) && seq(3) < seq(4),
        "g1 entries enqueued in order (M1)"
    );
    let ms = recv(&q, 10);
    assert_eq!(bodies(&ms), ["g1-m1", "g1-m2", "g1-m3", "g2-m1"]);
    assert_eq!(ms[0].message_id, res[0].result.as_ref().unwrap().message_id);
}

#[test]
fn s13_entries_of_one_group_enqueued_in_order() {
    let q = queue("s11ord", &small());
    let ids: Vec<String> = (0..10).map(|i| format!("e{i}")).collect();
    let bodies_in: Vec<String> = (0..10).map(|i| format!("m{i}")).collect();
    let batch: Vec<_> = (0..10)
        .map(|i| entry(&ids[i], "g", &bodies_in[i]))
        .collect();
    let res = q.send_batch(&batch).unwrap();
    let seqs: Vec<u128> = res
        .iter()
        .map(|r| r.result.as_ref().unwrap().sequence_number)
        .collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
    let ms = recv(&q, 10);
    assert_eq!(bodies(&ms), bodies_in);
}

// ---------------------------------------------------------------------------------------------
// M: identity and system attributes
// ---------------------------------------------------------------------------------------------

#[test]
fn m1_sequence_numbers_increase_within_group_across_emptying() {
    let q = queue("m1", &small());
    let mut last = 0u128;
    let mut sent = Vec::new();
    for round in 0..4 {
        for i in 0..5 {
            let r = send(&q, "g1", &format!("r{round}-{i}"));
            assert!(
                r.sequence_number > last,
                "round {round}: {} <= {last}",
                r.sequence_number
            );
            last = r.sequence_number;
            sent.push(r);
            // Another group in between, which may reuse g1's table entry after g1 retires.
            send(&q, &format!("other-{round}-{i}"), "o");
        }
        // Receive everything: g1's sequence numbers come back as sent, in order.
        let mut got = Vec::new();
        loop {
            let ms = recv_vt(&q, 10, LONG);
            if ms.is_empty() {
                break;
            }
            got.extend(
                ms.iter()
                    .filter(|m| m.group_id == "g1")
                    .map(|m| (m.message_id, m.sequence_number)),
            );
            delete_all(&q, &ms);
        }
        let want: Vec<_> = sent
            .iter()
            .map(|r| (r.message_id, r.sequence_number))
            .collect();
        assert_eq!(got, want, "round {round}");
        sent.clear();
        assert_eq!(q.attributes().active_groups, 0, "every group emptied");
    }
}

#[test]
fn m3_system_attributes() {
    // Content-based dedup gives the message sent without an id a generated one (D5).
    let q = queue("m3", &small_dedup().content_based_deduplication(true));
    let before = wall_ms();
    let r1 = try_send(&q, SendMessage::new("grp-A", "with dedup").dedup_id("dd-1")).unwrap();
    let r2 = send(&q, "grp-A", "no dedup");
    let after = wall_ms();
    let ms = recv_vt(&q, 10, SHORT);
    let received_at = wall_ms();
    assert_eq!(ms.len(), 2);
    let (a, b) = (&ms[0], &ms[1]);
    assert_eq!(a.group_id, "grp-A");
    assert_eq!(b.group_id, "grp-A");
    assert_eq!(a.dedup_id.as_deref(), Some("dd-1"));
    let generated = b.dedup_id.as_deref().expect("generated dedup id");
    assert_eq!(generated.len(), 64);
    assert!(generated
        .bytes()
        .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c)));
    assert_eq!(
        (a.message_id, a.sequence_number),
        (r1.message_id, r1.sequence_number)
    );
    assert_eq!(
        (b.message_id, b.sequence_number),
        (r2.message_id, r2.sequence_number)
    );
    assert_ne!(a.message_id, b.message_id);
    for m in &ms {
        assert!(
            // Derived from the arena's monotonic clock: within 1 ms of the wall clock.
            m.sent_timestamp + 1 >= before && m.sent_timestamp <= after + 1,
            "sent {} not in [{before},{after}]",
            m.sent_timestamp
        );
        assert!(
            m.first_receive_timestamp + 1 >= m.sent_timestamp
                && m.first_receive_timestamp <= received_at + 1,
            "first receive {} not in [{}, {received_at}]",
            m.first_receive_timestamp,
            m.sent_timestamp
        );
        assert_eq!(m.receive_count, 1);
    }
    std::thread::sleep(PAST_SHORT);
    let again = recv_vt(&q, 10, LONG);
    assert_eq!(again.len(), 2);
    for (m0, m1) in ms.iter().zip(&again) {
        assert_eq!(
            m1.receive_count, 2,
            "ApproximateReceiveCount +1 per receive"
        );
        assert_eq!(
            m1.first_receive_timestamp, m0.first_receive_timestamp,
            "first receive is stable"
        );
        assert_eq!(m1.sent_timestamp, m0.sent_timestamp);
        assert_eq!(m1.sequence_number, m0.sequence_number);
        assert_eq!(m1.message_id, m0.message_id);
        assert_eq!(m1.dedup_id, m0.dedup_id);
        assert_eq!(m1.body, m0.body);
    }
}

// ---------------------------------------------------------------------------------------------
// R: receive
// ---------------------------------------------------------------------------------------------

#[test]
fn r1_receive_parameter_ranges() {
    let q = queue("r1", &small());
    send(&q, "g", "m");
    for n in [0, 11, 100] {
        let r = q.receive(&ReceiveOptions::max(n));
        assert!(is_invalid(&r, "MaxNumberOfMessages"), "{n}: {r:?}");
    }
    let r = q
        .receive(&ReceiveOptions::max(1).visibility_timeout(TWELVE_HOURS + Duration::from_secs(1)));
    assert!(is_invalid(&r, "VisibilityTimeout"), "{r:?}");
    let r = q.receive(&ReceiveOptions::max(1).wait(Duration::from_secs(21)));
    assert!(is_invalid(&r, "WaitTimeSeconds"), "{r:?}");
    let r = q.receive(&ReceiveOptions::max(1).wait(Duration::from_millis(20_001)));
    assert!(is_invalid(&r, "WaitTimeSeconds"), "{r:?}");
    // Rejected receives took nothing; the bounds themselves are accepted.
    let ms = recv_opts(
        &q,
        ReceiveOptions::max(10)
            .visibility_timeout(TWELVE_HOURS)
            .wait(Duration::from_secs(20)),
    );
    assert_eq!(bodies(&ms), ["m"]);
    assert_eq!(ms[0].receive_count, 1, "rejected receives must not count");
}

#[test]
fn r3_precise_prefix_rule() {
    let q = queue("r3", &small());
    for b in ["foo", "bar", "baz"] {
        send(&q, "g", b);
    }
    let ms = recv_vt(&q, 10, SHORT);
    assert_eq!(bodies(&ms), ["foo", "bar", "baz"]);
    q.change_visibility(&ms[1].receipt_handle, LONG)
        .expect("extend bar");
    std::thread::sleep(PAST_SHORT);
    // foo and baz are visible again, bar is in flight: only the prefix before bar.
    let again = recv_vt(&q, 10, LONG);
    assert_eq!(bodies(&again), ["foo"]);
    assert_eq!(again[0].receive_count, 2);
    // Nothing more while foo (head) and bar are in flight.
    assert!(recv(&q, 10).is_empty());
    // Deleting foo leaves bar (in flight) at the head: the group still yields nothing.
    q.delete(&again[0].receipt_handle).unwrap();
    assert!(recv(&q, 10).is_empty());
    // Deleting bar unlocks baz.
    q.delete(&ms[1].receipt_handle).unwrap();
    let last = recv(&q, 10);
    assert_eq!(bodies(&last), ["baz"]);
    assert_eq!(last[0].receive_count, 2);
}

#[test]
fn r3_group_with_head_in_flight_yields_nothing() {
    let q = queue("r3head", &small());
    send(&q, "g1", "a");
    send(&q, "g1", "b");
    send(&q, "g1", "c");
    let ms = recv_vt(&q, 2, LONG);
    assert_eq!(bodies(&ms), ["a", "b"]);
    // c is visible but behind in-flight messages.
    assert!(recv(&q, 10).is_empty());
    // Making b (not the head) visible again does not unlock the group: a is still in flight.
    q.change_visibility(&ms[1].receipt_handle, Duration::ZERO)
        .unwrap();
    send(&q, "g2", "x");
    assert_eq!(
        bodies(&recv(&q, 10)),
        ["x"],
        "only the other group's message"
    );
    assert!(recv(&q, 10).is_empty());
}

#[test]
fn r3_group_locked_until_head_visible_or_deleted() {
    let q = queue("r3lock", &small());
    send(&q, "g", "1");
    send(&q, "g", "2");
    let a = recv_vt(&q, 1, LONG);
    assert_eq!(bodies(&a), ["1"]);
    assert!(recv(&q, 10).is_empty(), "2 is blocked while 1 is in flight");
    q.change_visibility(&a[0].receipt_handle, Duration::ZERO)
        .unwrap();
    let b = recv_vt(&q, 10, LONG);
    assert_eq!(
        bodies(&b),
        ["1", "2"],
        "visible again at the head of its group"
    );
}

#[test]
fn r5_batch_packs_each_group_contiguously() {
    let q = queue("r5", &small());
    send(&q, "g1", "g1-m1");
    send(&q, "g2", "g2-m1");
    send(&q, "g1", "g1-m2");
    send(&q, "g1", "g1-m3");
    let ms = recv(&q, 10);
    assert_eq!(bodies(&ms), ["g1-m1", "g1-m2", "g1-m3", "g2-m1"]);
}

#[test]
fn r5_full_batch_from_one_group_then_other_group() {
    let q = queue("r5full", &small());
    for i in 0..12 {
        send(&q, "g1", &format!("g1-{i}"));
    }
    send(&q, "g2", "g2-0");
    let ms = recv_vt(&q, 10, LONG);
    let want: Vec<String> = (0..10).map(|i| format!("g1-{i}")).collect();
    assert_eq!(bodies(&ms), want);
    // g1 is locked now (R3); g2 is served.
    assert_eq!(bodies(&recv(&q, 10)), ["g2-0"]);
}

#[test]
fn r6_groups_served_in_the_order_they_became_ready() {
    let q = queue("r6", &small());
    // 20 groups, first sends in a scrambled order (not the order of their names or hashes).
    let order: Vec<usize> = (0..20).map(|i| (i * 7 + 3) % 20).collect();
    for &k in &order {
        send(&q, &format!("grp-{k}"), &format!("grp-{k}"));
    }
    let mut got: Vec<String> = Vec::new();
    for _ in 0..2 {
        got.extend(recv_vt(&q, 10, LONG).into_iter().map(|m| m.body));
    }
    let want: Vec<String> = order.iter().map(|k| format!("grp-{k}")).collect();
    assert_eq!(got, want);
    // One at a time as well.
    let q = queue("r6b", &small());
    for g in ["zeta", "alpha", "mid", "beta"] {
        send(&q, g, g);
    }
    for g in ["zeta", "alpha", "mid", "beta"] {
        assert_eq!(bodies(&recv_vt(&q, 1, LONG)), [g]);
    }
}

/// R6 across a group entry's reuse (layout 27): `a` is served in place and emptied, so its
/// hint stays queued as a placeholder, the ring's first entry; `c` is hinted behind it; then a
/// new group `b` takes `a`'s entry (the table at its two groups, `a` kept: the insert reclaims
/// it). `c` became ready before `b` and is served first: the placeholder, naming the entry `b`
/// now holds, is dropped by the pop that meets it, not taken for `b`'s hint.
#[test]
fn r6_a_new_group_in_a_reclaimed_entry_queues_behind_ready_groups() {
    // Where a new group lands in the table follows the arena's random hash keys: several new
    // ids, a fresh queue each, so that some take `a`'s entry (each checks R6 either way).
    for k in 0..24 {
        let q = queue("r6reuse", &small().max_groups(2).size_limit(0));
        // `c` kept (its message received and deleted), then `a` served in place and emptied
        // (its first message popped behind `c`'s placeholder, its second the ring's only
        // hint).
        for (g, b) in [("c", "c0"), ("a", "a0"), ("a", "a1")] {
            send(&q, g, b);
            let m = recv_vt(&q, 1, LONG);
            assert_eq!(bodies(&m), [b]);
            q.delete(&m[0].receipt_handle).unwrap();
        }
        send(&q, "c", "c1");
        let b = format!("b{k}");
        send(&q, &b, &b);
        assert_eq!(
            bodies(&recv_vt(&q, 1, LONG)),
            ["c1"],
            "{b}: c was ready first"
        );
        assert_eq!(bodies(&recv_vt(&q, 1, LONG)), [b.as_str()]);
    }
}

#[test]
fn r6_group_unlocked_by_delete_queues_behind_ready_groups() {
    let q = queue("r6del", &small());
    send(&q, "gA", "gA-1");
    send(&q, "gA", "gA-2");
    send(&q, "gB", "gB-1");
    send(&q, "gC", "gC-1");
    let a = recv_vt(&q, 1, LONG);
    assert_eq!(bodies(&a), ["gA-1"]);
    q.delete(&a[0].receipt_handle).unwrap();
    // gA became ready again only now, after gB and gC.
    assert_eq!(bodies(&recv(&q, 10)), ["gB-1", "gC-1", "gA-2"]);
}

#[test]
fn r6_group_unlocked_by_change_visibility_zero_is_ready_from_then() {
    let q = queue("r6cmv", &small());
    send(&q, "gA", "gA-1");
    let a = recv_vt(&q, 1, LONG);
    send(&q, "gB", "gB-1");
    q.change_visibility(&a[0].receipt_handle, Duration::ZERO)
        .unwrap();
    send(&q, "gC", "gC-1");
    assert_eq!(bodies(&recv(&q, 10)), ["gB-1", "gA-1", "gC-1"]);
}

/// R6: a head returning from visibility timeout is available from the moment it became visible
/// again; a group first sent to after that moment comes after it.
#[test]
fn r6_group_returning_from_visibility_timeout_is_ready_from_its_expiry() {
    let q = queue("r6exp", &small());
    send(&q, "gA", "gA-1");
    assert_eq!(bodies(&recv_vt(&q, 1, SHORT)), ["gA-1"]);
    std::thread::sleep(PAST_SHORT);
    // gA-1 has been visible again for ~200 ms; gB-1 is sent now.
    send(&q, "gB", "gB-1");
    assert_eq!(bodies(&recv_vt(&q, 10, LONG)), ["gA-1", "gB-1"]);
}

/// R7 (our choice where SQS has a scan window): a large backlog in one group whose head is in
/// flight never blocks a message of another group sent later, and stays in order itself.
#[test]
fn r7_no_scan_window_backlog_never_blocks_other_groups() {
    let cfg = QueueConfig::new()
        .deduplication(Deduplication::Off)
        .max_messages(2048)
        .max_groups(64)
        .maximum_message_size(1024);
    let q = queue("r7", &cfg);
    for i in 0..900 {
        send(&q, "big", &format!("big-{i}"));
    }
    // Head of the backlog in flight.
    let head = recv_vt(&q, 1, LONG);
    assert_eq!(bodies(&head), ["big-0"]);
    send(&q, "small", "small-1");
    let ms = recv_vt(&q, 10, LONG);
    assert_eq!(
        bodies(&ms),
        ["small-1"],
        "the other group's message is not delayed by 899 blocked messages"
    );
    // And the backlog itself is still in order behind its head.
    q.delete(&head[0].receipt_handle).unwrap();
    let ms = recv_vt(&q, 10, LONG);
    let want: Vec<String> = (1..11).map(|i| format!("big-{i}")).collect();
    assert_eq!(bodies(&ms), want);
}

#[test]
fn r7_backlog_not_in_flight_does_not_delay_group_sent_later() {
    let cfg = QueueConfig::new()
        .deduplication(Deduplication::Off)
        .max_messages(2048)
        .max_groups(64)
        .maximum_message_size(1024);
    let q = queue("r7b", &cfg);
    for i in 0..900 {
        send(&q, "big", &format!("big-{i}"));
    }
    send(&q, "late", "late-1");
    let first = recv_vt(&q, 10, LONG);
    assert_eq!(first.len(), 10);
    assert!(first.iter().all(|m| m.group_id == "big"));
    assert_eq!(bodies(&recv_vt(&q, 10, LONG)), ["late-1"]);
}

#[test]
fn r10_new_receipt_handle_per_receive() {
    let q = queue("r10h", &small());
    send(&q, "g", "m");
    let a = recv_vt(&q, 1, SHORT);
    std::thread::sleep(PAST_SHORT);
    let b = recv_vt(&q, 1, LONG);
    assert_eq!(a[0].message_id, b[0].message_id);
    assert_ne!(a[0].receipt_handle, b[0].receipt_handle);
    assert_ne!(
        a[0].receipt_handle.to_string(),
        b[0].receipt_handle.to_string()
    );
    q.change_visibility(&b[0].receipt_handle, Duration::ZERO)
        .unwrap();
    let c = recv_vt(&q, 1, LONG);
    assert_eq!(c[0].message_id, a[0].message_id);
    assert_ne!(c[0].receipt_handle, a[0].receipt_handle);
    assert_ne!(c[0].receipt_handle, b[0].receipt_handle);
    assert_eq!(c[0].receive_count, 3);
}

/// R10: `VisibilityTimeout=0` returns messages that stay visible; their group is not locked.
#[test]
fn r10_zero_visibility_timeout_leaves_messages_visible() {
    let q = queue("r10zero", &small());
    send(&q, "g", "a");
    send(&q, "g", "b");
    let first = recv_vt(&q, 10, Duration::ZERO);
    assert_eq!(
        bodies(&first),
        ["a", "b"],
        "one receive never returns a message twice"
    );
    let c = q.attributes();
    assert_eq!(
        (
            c.approximate_number_of_messages,
            c.approximate_number_of_messages_not_visible
        ),
        (2, 0),
        "still visible"
    );
    let second = recv_vt(&q, 10, LONG);
    assert_eq!(
        bodies(&second),
        ["a", "b"],
        "visible at once, group not locked"
    );
    assert_eq!(
        second.iter().map(|m| m.receive_count).collect::<Vec<_>>(),
        [2, 2]
    );
}

#[test]
fn r10_zero_visibility_timeout_single_message_receives() {
    let q = queue("r10zero1", &small());
    send(&q, "g", "a");
    let first = recv_vt(&q, 1, Duration::ZERO);
    assert_eq!(bodies(&first), ["a"]);
    let second = recv_vt(&q, 1, Duration::ZERO);
    assert_eq!(
        bodies(&second),
        ["a"],
        "still visible after a VisibilityTimeout=0 receive"
    );
    assert_eq!(second[0].receive_count, 2);
}

#[test]
fn r10_zero_visibility_timeout_never_duplicates_within_one_receive() {
    let q = queue("r10dup", &small());
    send(&q, "g1", "a");
    send(&q, "g2", "b");
    send(&q, "g1", "c");
    let ms = recv_vt(&q, 10, Duration::ZERO);
    let ids: Vec<_> = ms.iter().map(|m| m.message_id).collect();
    let mut uniq = ids.clone();
    uniq.sort_by_key(|m| m.0);
    uniq.dedup();
    assert_eq!(
        uniq.len(),
        ids.len(),
        "duplicates in one response: {:?}",
        bodies(&ms)
    );
    assert_eq!(bodies(&ms), ["a", "c", "b"]);
}

// ---------------------------------------------------------------------------------------------
// V: visibility timeout
// ---------------------------------------------------------------------------------------------

#[test]
fn v3_expiry_returns_messages_to_front_in_order() {
    let q = queue("v3", &small());
    for b in ["m0", "m1", "m2"] {
        send(&q, "g", b);
    }
    let first = recv_vt(&q, 10, SHORT);
    assert_eq!(bodies(&first), ["m0", "m1", "m2"]);
    // A message sent while the others are in flight goes behind them.
    send(&q, "g", "m3");
    assert!(recv(&q, 10).is_empty());
    std::thread::sleep(PAST_SHORT);
    let again = recv_vt(&q, 10, LONG);
    assert_eq!(bodies(&again), ["m0", "m1", "m2", "m3"]);
    assert_eq!(
        again.iter().map(|m| m.receive_count).collect::<Vec<_>>(),
        [2, 2, 2, 1]
    );
    for (a, b) in first.iter().zip(&again) {
        assert_eq!(a.message_id, b.message_id);
        assert_ne!(a.receipt_handle, b.receipt_handle);
    }
}

#[test]
fn v1_queue_default_visibility_timeout_applies() {
    let q = queue("v1", &small().visibility_timeout(SHORT));
    send(&q, "g", "m");
    let a = recv(&q, 1);
    assert_eq!(bodies(&a), ["m"]);
    assert!(recv(&q, 1).is_empty());
    std::thread::sleep(PAST_SHORT);
    let b = recv(&q, 1);
    assert_eq!(bodies(&b), ["m"]);
    assert_eq!(b[0].receive_count, 2);
}

// ---------------------------------------------------------------------------------------------
// H: receipt handles
// ---------------------------------------------------------------------------------------------

#[test]
fn h2_delete_after_visibility_expired_is_rejected_and_message_stays() {
    let q = queue("h2", &small());
    send(&q, "g", "m");
    let a = recv_vt(&q, 1, SHORT);
    std::thread::sleep(PAST_SHORT);
    let r = q.delete(&a[0].receipt_handle);
    assert!(
        matches!(r, Err(Error::ReceiptHandleExpired { .. })),
        "{r:?}"
    );
    assert_eq!(r.unwrap_err().sqs_code(), "InvalidParameterValue");
    let r = q.change_visibility(&a[0].receipt_handle, LONG);
    assert!(
        matches!(r, Err(Error::ReceiptHandleExpired { .. })),
        "{r:?}"
    );
    let b = recv_vt(&q, 1, LONG);
    assert_eq!(bodies(&b), ["m"], "the message stays");
    assert_eq!(b[0].receive_count, 2);
    q.delete(&b[0].receipt_handle).unwrap();
    assert!(recv(&q, 10).is_empty());
}

#[test]
fn h2_delete_after_extension_past_original_timeout_succeeds() {
    let q = queue("h2ext", &small());
    send(&q, "g", "m");
    let a = recv_vt(&q, 1, SHORT);
    q.change_visibility(&a[0].receipt_handle, Duration::from_secs(10))
        .unwrap();
    std::thread::sleep(PAST_SHORT);
    assert!(
        recv(&q, 10).is_empty(),
        "still in flight after the original timeout"
    );
    q.delete(&a[0].receipt_handle)
        .expect("extended handle still current");
    assert_eq!(q.attributes().approximate_number_of_messages_not_visible, 0);
    assert!(recv(&q, 10).is_empty());
}

#[test]
fn h3_older_handle_after_newer_receive_is_expired() {
    let q = queue("h3", &small());
    send(&q, "g", "m");
    let old = recv_vt(&q, 1, SHORT);
    std::thread::sleep(PAST_SHORT);
    let new = recv_vt(&q, 1, LONG);
    assert_eq!(new[0].message_id, old[0].message_id);
    let r = q.delete(&old[0].receipt_handle);
    assert!(
        matches!(r, Err(Error::ReceiptHandleExpired { .. })),
        "{r:?}"
    );
    let r = q.change_visibility(&old[0].receipt_handle, Duration::ZERO);
    assert!(
        matches!(r, Err(Error::ReceiptHandleExpired { .. })),
        "{r:?}"
    );
    // Untouched: still in flight under the new handle.
    assert!(recv(&q, 10).is_empty());
    let c = q.attributes();
    assert_eq!(
        (
            c.approximate_number_of_messages,
            c.approximate_number_of_messages_not_visible
        ),
        (0, 1)
    );
    q.delete(&new[0].receipt_handle)
        .expect("the newest handle works");
}

#[test]
fn h4_malformed_and_foreign_handles_are_invalid() {
    let q = queue("h4", &small());
    let other = queue("h4other", &small());
    send(&q, "g", "m");
    send(&other, "g", "o");
    let mine = recv_vt(&q, 1, LONG);
    let theirs = recv_vt(&other, 1, LONG);
    for bad in [
        "garbage",
        "",
        "sf2",
        "sf2zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz",
        // Layout 21's form, before handles named a pack's member.
        "sf1deadbeef0123456700000007fffffffeabcdef",
    ] {
        let r = q.delete_str(bad);
        assert!(
            matches!(r, Err(Error::ReceiptHandleIsInvalid { .. })),
            "{bad:?}: {r:?}"
        );
        let r = q.change_visibility_str(bad, Duration::ZERO);
        assert!(
            matches!(r, Err(Error::ReceiptHandleIsInvalid { .. })),
            "{bad:?}: {r:?}"
        );
    }
    assert_eq!(
        q.delete_str("garbage").unwrap_err().sqs_code(),
        "ReceiptHandleIsInvalid"
    );
    // A well-formed handle of another queue.
    let r = q.delete(&theirs[0].receipt_handle);
    assert!(
        matches!(r, Err(Error::ReceiptHandleIsInvalid { .. })),
        "{r:?}"
    );
    let r = q.change_visibility(&theirs[0].receipt_handle, Duration::ZERO);
    assert!(
        matches!(r, Err(Error::ReceiptHandleIsInvalid { .. })),
        "{r:?}"
    );
    // A well-formed handle of this queue naming a slot it does not have.
    let text = mine[0].receipt_handle.to_string();
    let out_of_range = format!("{}ffffffff{}", &text[..19], &text[27..]);
    assert_eq!(out_of_range.len(), text.len());
    let r = q.delete_str(&out_of_range);
    assert!(
        matches!(r, Err(Error::ReceiptHandleIsInvalid { .. })),
        "{r:?}"
    );
    // The same receive's handle naming another member of a pack (layout 22): well formed,
    // but no such receive exists (the message has a slot of its own), so it is stale, and a
    // member past a pack's ten is no handle at all.
    for (digit, invalid) in [('1', false), ('9', false), ('a', true)] {
        let other_member = format!("{}{digit}{}", &text[..35], &text[36..]);
        let r = q.delete_str(&other_member);
        assert!(
            if invalid {
                matches!(r, Err(Error::ReceiptHandleIsInvalid { .. }))
            } else {
                matches!(r, Err(Error::ReceiptHandleExpired { .. }))
            },
            "{other_member}: {r:?}"
        );
        let r = q.change_visibility_str(&other_member, Duration::ZERO);
        assert!(r.is_err(), "{other_member}: {r:?}");
    }
    // Nothing was touched: both handles still work.
    q.delete_str(&text).expect("text form of a live handle");
    other.delete(&theirs[0].receipt_handle).unwrap();
}

#[test]
fn h4_delete_twice_second_is_expired() {
    let q = queue("h4twice", &small());
    send(&q, "g", "m");
    send(&q, "g", "n");
    let a = recv_vt(&q, 1, LONG);
    q.delete(&a[0].receipt_handle).unwrap();
    let r = q.delete(&a[0].receipt_handle);
    assert!(
        matches!(r, Err(Error::ReceiptHandleExpired { .. })),
        "{r:?}"
    );
    let r = q.change_visibility(&a[0].receipt_handle, Duration::ZERO);
    assert!(
        matches!(r, Err(Error::ReceiptHandleExpired { .. })),
        "{r:?}"
    );
    let b = recv_vt(&q, 10, LONG);
    assert_eq!(bodies(&b), ["n"], "the second delete touched nothing else");
}

#[test]
fn h5_delete_last_in_flight_unlocks_group_and_wakes_long_poller() {
    let q = queue("h5", &small());
    send(&q, "g", "first");
    send(&q, "g", "second");
    let a = recv_vt(&q, 1, LONG);
    assert_eq!(bodies(&a), ["first"]);
    let other = Queue::open(&q.name).unwrap();
    std::thread::scope(|s| {
        let waiter = s.spawn(|| {
            let t = Instant::now();
            let ms = other
                .receive(&ReceiveOptions::max(10).wait(Duration::from_secs(5)))
                .unwrap();
            (ms, t.elapsed())
        });
        std::thread::sleep(Duration::from_millis(300));
        q.delete(&a[0].receipt_handle).unwrap();
        let (ms, elapsed) = waiter.join().unwrap();
        assert_eq!(bodies(&ms), ["second"]);
        assert!(
            elapsed < Duration::from_secs(2),
            "woke after {elapsed:?} (the wait was 5 s)"
        );
    });
}

#[test]
fn h5_partial_delete_keeps_group_locked() {
    let q = queue("h5part", &small());
    for b in ["a", "b", "c"] {
        send(&q, "g", b);
    }
    let ms = recv_vt(&q, 2, LONG);
    assert_eq!(bodies(&ms), ["a", "b"]);
    // Delete the second in-flight message first: the head is still in flight.
    q.delete(&ms[1].receipt_handle).unwrap();
    assert!(
        recv(&q, 10).is_empty(),
        "a is still in flight: the group stays locked"
    );
    q.delete(&ms[0].receipt_handle).unwrap();
    assert_eq!(bodies(&recv_vt(&q, 10, LONG)), ["c"]);

    let q = queue("h5part2", &small());
    for b in ["a", "b", "c"] {
        send(&q, "g", b);
    }
    let ms = recv_vt(&q, 2, LONG);
    q.delete(&ms[0].receipt_handle).unwrap();
    assert!(
        recv(&q, 10).is_empty(),
        "b is still in flight: the group stays locked"
    );
    q.delete(&ms[1].receipt_handle).unwrap();
    assert_eq!(bodies(&recv(&q, 10)), ["c"]);
}

#[test]
fn h6_change_visibility_zero_makes_message_visible_at_once() {
    let q = queue("h6zero", &small());
    send(&q, "g", "m");
    let a = recv_vt(&q, 1, LONG);
    assert!(recv(&q, 1).is_empty());
    q.change_visibility(&a[0].receipt_handle, Duration::ZERO)
        .unwrap();
    let c = q.attributes();
    assert_eq!(
        (
            c.approximate_number_of_messages,
            c.approximate_number_of_messages_not_visible
        ),
        (1, 0)
    );
    let b = recv_vt(&q, 1, LONG);
    assert_eq!(bodies(&b), ["m"]);
    assert_eq!(b[0].receive_count, 2);
    // The old handle is no longer current.
    assert!(matches!(
        q.delete(&a[0].receipt_handle),
        Err(Error::ReceiptHandleExpired { .. })
    ));
}

#[test]
fn h6_total_visibility_capped_at_12_hours_from_receive() {
    let q = queue("h6cap", &small());
    send(&q, "g", "m");
    let a = recv_vt(&q, 1, LONG);
    let h = &a[0].receipt_handle;
    std::thread::sleep(Duration::from_millis(50));
    // 12 h from now ends after 12 h from the receive.
    let r = q.change_visibility(h, TWELVE_HOURS);
    assert!(is_invalid(&r, "VisibilityTimeout"), "{r:?}");
    let r = q.change_visibility(h, TWELVE_HOURS + Duration::from_secs(1));
    assert!(is_invalid(&r, "VisibilityTimeout"), "{r:?}");
    q.change_visibility(h, TWELVE_HOURS - Duration::from_secs(60))
        .expect("within the cap");
    // Extending again does not reset the cap.
    std::thread::sleep(Duration::from_millis(50));
    let r = q.change_visibility(h, TWELVE_HOURS - Duration::from_millis(10));
    assert!(is_invalid(&r, "VisibilityTimeout"), "{r:?}");
    // The rejected changes left the handle current and the message in flight.
    assert!(recv(&q, 1).is_empty());
    q.delete(h).expect("handle still current");
}

#[test]
fn h6_change_applies_only_to_that_receipt() {
    let q = queue("h6once", &small().visibility_timeout(SHORT));
    send(&q, "g", "m");
    let a = recv(&q, 1);
    q.change_visibility(&a[0].receipt_handle, LONG).unwrap();
    std::thread::sleep(PAST_SHORT);
    assert!(recv(&q, 1).is_empty(), "extended to 30 s");
    q.change_visibility(&a[0].receipt_handle, Duration::ZERO)
        .unwrap();
    // The next receive uses the queue default (300 ms) again.
    let b = recv(&q, 1);
    assert_eq!(bodies(&b), ["m"]);
    std::thread::sleep(PAST_SHORT);
    let c = recv(&q, 1);
    assert_eq!(bodies(&c), ["m"]);
    assert_eq!(c[0].receive_count, 3);
}

#[test]
fn h6_change_visibility_can_shorten() {
    let q = queue("h6short", &small());
    send(&q, "g", "m");
    let a = recv_vt(&q, 1, LONG);
    q.change_visibility(&a[0].receipt_handle, SHORT).unwrap();
    assert!(recv(&q, 1).is_empty());
    std::thread::sleep(PAST_SHORT);
    assert_eq!(bodies(&recv(&q, 1)), ["m"]);
}

/// H7: a visibility change on one message of a received batch affects only that message (and,
/// through R3, what its group may deliver); the other handles of the batch are untouched.
#[test]
fn h7_change_visibility_affects_only_that_message() {
    let q = queue("h7", &small());
    send(&q, "g1", "a");
    send(&q, "g1", "b");
    send(&q, "g2", "x");
    let ms = recv_vt(&q, 10, LONG);
    assert_eq!(bodies(&ms), ["a", "b", "x"]);
    q.change_visibility(&ms[2].receipt_handle, Duration::ZERO)
        .unwrap();
    assert_eq!(
        bodies(&recv_vt(&q, 10, LONG)),
        ["x"],
        "a and b stay in flight"
    );
    q.change_visibility(&ms[0].receipt_handle, Duration::ZERO)
        .unwrap();
    let again = recv_vt(&q, 10, LONG);
    assert_eq!(
        bodies(&again),
        ["a"],
        "b stays in flight and blocks nothing before it"
    );
    // b's handle is untouched.
    q.delete(&ms[1].receipt_handle)
        .expect("b's handle still current");
}

#[test]
fn h8_batch_request_level_errors() {
    let q = queue("h8req", &small());
    send(&q, "g", "m");
    let ms = recv_vt(&q, 1, LONG);
    let h = ms[0].receipt_handle.to_string();
    assert!(matches!(q.delete_batch(&[]), Err(Error::EmptyBatchRequest)));
    assert!(matches!(
        q.change_visibility_batch(&[]),
        Err(Error::EmptyBatchRequest)
    ));
    let ids: Vec<String> = (0..11).map(|i| format!("e{i}")).collect();
    let del11: Vec<_> = ids
        .iter()
        .map(|id| BatchEntry {
            id,
            entry: h.as_str(),
        })
        .collect();
    assert!(matches!(
        q.delete_batch(&del11),
        Err(Error::TooManyEntriesInBatchRequest { entries: 11 })
    ));
    let cmv11: Vec<_> = ids
        .iter()
        .map(|id| BatchEntry {
            id,
            entry: (h.as_str(), Duration::ZERO),
        })
        .collect();
    assert!(matches!(
        q.change_visibility_batch(&cmv11),
        Err(Error::TooManyEntriesInBatchRequest { entries: 11 })
    ));
    let r = q.delete_batch(&[
        BatchEntry {
            id: "ok",
            entry: h.as_str(),
        },
        BatchEntry {
            id: "bad id",
            entry: "x",
        },
    ]);
    assert!(matches!(r, Err(Error::InvalidBatchEntryId { .. })), "{r:?}");
    let r = q.change_visibility_batch(&[BatchEntry {
        id: "bad!",
        entry: (h.as_str(), Duration::ZERO),
    }]);
    assert!(matches!(r, Err(Error::InvalidBatchEntryId { .. })), "{r:?}");
    let r = q.delete_batch(&[
        BatchEntry {
            id: "a",
            entry: h.as_str(),
        },
        BatchEntry {
            id: "a",
            entry: "x",
        },
    ]);
    assert!(
        matches!(r, Err(Error::BatchEntryIdsNotDistinct { .. })),
        "{r:?}"
    );
    let r = q.change_visibility_batch(&[
        BatchEntry {
            id: "a",
            entry: (h.as_str(), Duration::ZERO),
        },
        BatchEntry {
            id: "a",
            entry: ("x", Duration::ZERO),
        },
    ]);
    assert!(
        matches!(r, Err(Error::BatchEntryIdsNotDistinct { .. })),
        "{r:?}"
    );
    // None of the rejected requests touched the message.
    assert!(recv(&q, 10).is_empty(), "still in flight");
    q.delete_str(&h).expect("handle still current");
}

#[test]
fn h8_batch_per_entry_results() {
    let q = queue("h8entry", &small());
    for g in ["g1", "g2", "g3", "g4"] {
        send(&q, g, g);
    }
    let expired = recv_vt(&q, 1, SHORT);
    assert_eq!(bodies(&expired), ["g1"]);
    let ms = recv_vt(&q, 10, LONG);
    assert_eq!(bodies(&ms), ["g2", "g3", "g4"]);
    std::thread::sleep(PAST_SHORT);
    let old = expired[0].receipt_handle.to_string();
    let h: Vec<String> = ms.iter().map(|m| m.receipt_handle.to_string()).collect();
    let res = q
        .delete_batch(&[
            BatchEntry {
                id: "d1",
                entry: h[0].as_str(),
            },
            BatchEntry {
                id: "d2",
                entry: "garbage",
            },
            BatchEntry {
                id: "d3",
                entry: old.as_str(),
            },
            BatchEntry {
                id: "d4",
                entry: h[1].as_str(),
            },
        ])
        .expect("per-entry failures are not request errors");
    assert_eq!(
        res.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
        ["d1", "d2", "d3", "d4"]
    );
    assert!(res[0].result.is_ok(), "{:?}", res[0].result);
    assert!(
        matches!(res[1].result, Err(Error::ReceiptHandleIsInvalid { .. })),
        "{:?}",
        res[1].result
    );
    assert!(
        matches!(res[2].result, Err(Error::ReceiptHandleExpired { .. })),
        "{:?}",
        res[2].result
    );
    assert!(res[3].result.is_ok(), "{:?}", res[3].result);
    // g2 and g3 deleted; g1 visible again, g4 in flight.
    let c = q.attributes();
    assert_eq!(
        (
            c.approximate_number_of_messages,
            c.approximate_number_of_messages_not_visible
        ),
        (1, 1)
    );

    let res = q
        .change_visibility_batch(&[
            BatchEntry {
                id: "c1",
                entry: (h[2].as_str(), Duration::ZERO),
            },
            BatchEntry {
                id: "c2",
                entry: (h[0].as_str(), Duration::ZERO),
            },
            BatchEntry {
                id: "c3",
                entry: ("garbage", Duration::ZERO),
            },
            BatchEntry {
                id: "c4",
                entry: (h[2].as_str(), TWELVE_HOURS + Duration::from_secs(1)),
            },
        ])
        .expect("per-entry failures are not request errors");
    assert_eq!(
        res.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
        ["c1", "c2", "c3", "c4"]
    );
    assert!(res[0].result.is_ok(), "{:?}", res[0].result);
    assert!(
        matches!(res[1].result, Err(Error::ReceiptHandleExpired { .. })),
        "deleted: {:?}",
        res[1].result
    );
    assert!(
        matches!(res[2].result, Err(Error::ReceiptHandleIsInvalid { .. })),
        "{:?}",
        res[2].result
    );
    assert!(res[3].result.is_err(), "over 12 h: {:?}", res[3].result);
    let mut got: Vec<String> = recv_vt(&q, 10, LONG).into_iter().map(|m| m.body).collect();
    got.sort();
    assert_eq!(got, ["g1", "g4"]);
}

/// H1–H5 through the typed batch delete: each handle is deleted or refused on its own (a
/// spent one is `ReceiptHandleExpired`, one of another queue `ReceiptHandleIsInvalid`),
/// results come in the handles' order, more than 10 handles are taken, and each group moves
/// on to its next message.
#[test]
fn h1_h5_delete_handles_deletes_or_refuses_each_handle() {
    let q = Queue::create_anonymous(&QueueConfig::new().deduplication(Deduplication::Off)).unwrap();
    let other =
        Queue::create_anonymous(&QueueConfig::new().deduplication(Deduplication::Off)).unwrap();
    const GROUPS: [&str; 4] = ["a", "b", "c", "d"];
    for g in GROUPS {
        for k in 0..4 {
            q.send(&SendMessage::new(g, &format!("{g}{k}"))).unwrap();
        }
    }
    other.send(&SendMessage::new("x", "elsewhere")).unwrap();
    let mut handles = Vec::new();
    let mut bodies = Vec::new();
    loop {
        let got = recv_vt(&q, 10, LONG);
        if got.is_empty() {
            break;
        }
        for m in got {
            bodies.push(m.body);
            handles.push(m.receipt_handle);
        }
    }
    let n = handles.len();
    assert!(n > 10 && n < 16, "{bodies:?}");
    let foreign = recv_vt(&other, 1, LONG).remove(0).receipt_handle;
    let spent = handles[0];
    q.delete(&spent).unwrap();
    let mut asked = handles.clone();
    asked.insert(3, foreign);
    let res = q.delete_handles(&asked).unwrap();
    assert_eq!(res.len(), n + 1);
    for (k, r) in res.iter().enumerate() {
        match k {
            0 => assert!(
                matches!(r, Err(Error::ReceiptHandleExpired { .. })),
                "{r:?}"
            ),
            3 => assert!(
                matches!(r, Err(Error::ReceiptHandleIsInvalid { .. })),
                "{r:?}"
            ),
            _ => assert!(r.is_ok(), "handle {k}: {r:?}"),
        }
    }
    assert!(q.delete_handles(&[]).unwrap().is_empty());
    // All received gone; the other queue's message untouched; the rest come next, in order.
    let c = q.attributes();
    assert_eq!(
        (
            c.approximate_number_of_messages,
            c.approximate_number_of_messages_not_visible
        ),
        (16 - n as u64, 0)
    );
    assert_eq!(
        other
            .attributes()
            .approximate_number_of_messages_not_visible,
        1
    );
    let rest: Vec<String> = recv_vt(&q, 10, LONG).into_iter().map(|m| m.body).collect();
    let want: Vec<String> = GROUPS
        .iter()
        .flat_map(|g| (0..4).map(move |k| format!("{g}{k}")))
        .filter(|b| !bodies.contains(b))
        .collect();
    assert_eq!(rest, want, "each group's next messages, in order");
}

// ---------------------------------------------------------------------------------------------
// P, C: purge and counters
// ---------------------------------------------------------------------------------------------

#[test]
fn p1_purge_removes_visible_and_in_flight_and_expires_handles() {
    let q = queue("p1", &small());
    for i in 0..3 {
        send(&q, "g1", &format!("g1-{i}"));
        send(&q, "g2", &format!("g2-{i}"));
    }
    let inflight = recv_vt(&q, 2, LONG);
    assert_eq!(bodies(&inflight), ["g1-0", "g1-1"]);
    assert_eq!(q.purge().unwrap(), 6);
    let c = q.attributes();
    assert_eq!(
        (
            c.approximate_number_of_messages,
            c.approximate_number_of_messages_not_visible,
            c.active_groups
        ),
        (0, 0, 0)
    );
    assert!(recv(&q, 10).is_empty());
    for m in &inflight {
        let r = q.delete(&m.receipt_handle);
        assert!(
            matches!(r, Err(Error::ReceiptHandleExpired { .. })),
            "{r:?}"
        );
        let r = q.change_visibility(&m.receipt_handle, Duration::ZERO);
        assert!(
            matches!(r, Err(Error::ReceiptHandleExpired { .. })),
            "{r:?}"
        );
    }
    // The queue works normally afterwards, groups start afresh.
    send(&q, "g1", "after");
    assert_eq!(bodies(&recv(&q, 10)), ["after"]);
    assert_eq!(q.purge().unwrap(), 1, "a second purge at once is allowed");
}

#[test]
fn c1_counters() {
    let q = queue("c1", &small());
    for g in ["g1", "g2", "g3"] {
        send(&q, g, &format!("{g}-1"));
        send(&q, g, &format!("{g}-2"));
    }
    let c = q.attributes();
    assert_eq!(c.approximate_number_of_messages, 6);
    assert_eq!(bodies(&recv_vt(&q, 1, SHORT)), ["g1-1"]);
    assert_eq!(bodies(&recv_vt(&q, 1, SHORT)), ["g2-1"]);
    let c = q.attributes();
    assert_eq!(
        (
            c.approximate_number_of_messages,
            c.approximate_number_of_messages_not_visible,
            c.approximate_number_of_messages_delayed
        ),
        (4, 2, 0),
        "messages behind an in-flight message count as visible"
    );
    assert_eq!(c.active_groups, 3);
    std::thread::sleep(PAST_SHORT);
    let c = q.attributes();
    assert_eq!(
        (
            c.approximate_number_of_messages,
            c.approximate_number_of_messages_not_visible,
            c.approximate_number_of_messages_delayed
        ),
        (6, 0, 0)
    );
}

#[test]
fn c1_counters_after_deletes() {
    let q = queue("c1del", &small());
    for i in 0..4 {
        send(&q, "g", &format!("{i}"));
    }
    let ms = recv_vt(&q, 2, LONG);
    q.delete(&ms[0].receipt_handle).unwrap();
    let c = q.attributes();
    assert_eq!(
        (
            c.approximate_number_of_messages,
            c.approximate_number_of_messages_not_visible
        ),
        (2, 1)
    );
    q.delete(&ms[1].receipt_handle).unwrap();
    assert_eq!(drain(&q), ["2", "3"]);
    let c = q.attributes();
    assert_eq!(
        (
            c.approximate_number_of_messages,
            c.approximate_number_of_messages_not_visible,
            c.active_groups
        ),
        (0, 0, 0)
    );
}

// ---------------------------------------------------------------------------------------------
// Long polling (R1 WaitTimeSeconds)
// ---------------------------------------------------------------------------------------------

#[test]
fn r1_long_poll_returns_as_soon_as_another_thread_sends() {
    let q = queue("lp", &small());
    let producer = Queue::open(&q.name).unwrap();
    std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(Duration::from_millis(300));
            send(&producer, "g", "hello");
        });
        let t = Instant::now();
        let ms = q
            .receive(&ReceiveOptions::max(10).wait(Duration::from_secs(5)))
            .unwrap();
        let elapsed = t.elapsed();
        assert_eq!(bodies(&ms), ["hello"]);
        assert!(
            elapsed < Duration::from_secs(2),
            "returned after {elapsed:?} (the wait was 5 s)"
        );
    });
}

#[test]
fn r1_long_poll_same_handle_other_thread() {
    let q = queue("lpsame", &small());
    std::thread::scope(|s| {
        let qq = &*q;
        s.spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            send(qq, "g", "hi");
        });
        let t = Instant::now();
        let ms = q
            .receive(&ReceiveOptions::max(1).wait(Duration::from_secs(5)))
            .unwrap();
        assert_eq!(bodies(&ms), ["hi"]);
        assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    });
}

#[test]
fn r1_long_poll_with_nothing_sent_returns_empty_after_the_wait() {
    let q = queue("lpempty", &small());
    let t = Instant::now();
    let ms = q
        .receive(&ReceiveOptions::max(10).wait(Duration::from_millis(400)))
        .unwrap();
    let elapsed = t.elapsed();
    assert!(ms.is_empty());
    assert!(
        elapsed >= Duration::from_millis(390),
        "returned early: {elapsed:?}"
    );
    assert!(
        elapsed < Duration::from_secs(2),
        "returned late: {elapsed:?}"
    );
    // wait(0) returns at once.
    let t = Instant::now();
    assert!(q
        .receive(&ReceiveOptions::max(10).wait(Duration::ZERO))
        .unwrap()
        .is_empty());
    assert!(t.elapsed() < Duration::from_millis(200));
}

#[test]
fn r1_queue_default_wait_applies() {
    let q = queue(
        "lpdefault",
        &small().receive_message_wait_time(Duration::from_millis(400)),
    );
    assert_eq!(
        q.attributes().receive_message_wait_time,
        Duration::from_millis(400)
    );
    let t = Instant::now();
    assert!(recv(&q, 10).is_empty());
    let elapsed = t.elapsed();
    assert!(elapsed >= Duration::from_millis(390), "{elapsed:?}");
    assert!(elapsed < Duration::from_secs(2), "{elapsed:?}");
    let t = Instant::now();
    assert!(q
        .receive(&ReceiveOptions::max(10).wait(Duration::ZERO))
        .unwrap()
        .is_empty());
    assert!(
        t.elapsed() < Duration::from_millis(200),
        "an explicit 0 overrides the queue's wait"
    );
}

#[test]
fn r1_long_poll_returns_when_visibility_expires() {
    let q = queue("lpexp", &small());
    send(&q, "g", "m");
    assert_eq!(bodies(&recv_vt(&q, 1, SHORT)), ["m"]);
    let t = Instant::now();
    let ms = q
        .receive(
            &ReceiveOptions::max(10)
                .visibility_timeout(LONG)
                .wait(Duration::from_secs(5)),
        )
        .unwrap();
    let elapsed = t.elapsed();
    assert_eq!(bodies(&ms), ["m"]);
    assert_eq!(ms[0].receive_count, 2);
    assert!(
        elapsed < Duration::from_secs(2),
        "returned after {elapsed:?}"
    );
}

#[test]
fn r1_long_poll_wakes_on_change_visibility_zero() {
    let q = queue("lpcmv", &small());
    send(&q, "g", "m");
    let a = recv_vt(&q, 1, LONG);
    let other = Queue::open(&q.name).unwrap();
    std::thread::scope(|s| {
        let waiter = s.spawn(|| {
            let t = Instant::now();
            let ms = other
                .receive(&ReceiveOptions::max(10).wait(Duration::from_secs(5)))
                .unwrap();
            (ms, t.elapsed())
        });
        std::thread::sleep(Duration::from_millis(300));
        q.change_visibility(&a[0].receipt_handle, Duration::ZERO)
            .unwrap();
        let (ms, elapsed) = waiter.join().unwrap();
        assert_eq!(bodies(&ms), ["m"]);
        assert!(elapsed < Duration::from_secs(2), "woke after {elapsed:?}");
    });
}

/// R3, R5, M1 under concurrency: producers and consumers on separate handles. Every message is
/// delivered once, each group in send order, and never to two consumers at once.
#[test]
fn r3_concurrent_consumers_keep_group_order_and_exclusivity() {
    use std::collections::{HashMap, HashSet};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;

    const GROUPS: usize = 8;
    const PER_GROUP: usize = 150;
    const TOTAL: usize = GROUPS * PER_GROUP;
    let q = queue("conc", &small().max_messages(2048));
    let next: Mutex<HashMap<String, usize>> = Mutex::new(HashMap::new());
    let held: Mutex<HashSet<String>> = Mutex::new(HashSet::new());
    let done = AtomicUsize::new(0);
    let deadline = Instant::now() + Duration::from_secs(30);
    std::thread::scope(|s| {
        for p in 0..2 {
            let name = q.name.clone();
            s.spawn(move || {
                let h = Queue::open(&name).unwrap();
                for i in 0..PER_GROUP {
                    for g in (p..GROUPS).step_by(2) {
                        send(&h, &format!("g{g}"), &i.to_string());
                    }
                }
            });
        }
        for _ in 0..3 {
            let name = q.name.clone();
            let (next, held, done) = (&next, &held, &done);
            s.spawn(move || {
                let h = Queue::open(&name).unwrap();
                while done.load(Ordering::SeqCst) < TOTAL {
                    assert!(
                        Instant::now() < deadline,
                        "stalled at {} of {TOTAL}",
                        done.load(Ordering::SeqCst)
                    );
                    let ms = h
                        .receive(
                            &ReceiveOptions::max(10)
                                .visibility_timeout(LONG)
                                .wait(Duration::from_millis(50)),
                        )
                        .unwrap();
                    {
                        let mut next = next.lock().unwrap();
                        let mut held = held.lock().unwrap();
                        let mut seen_here = HashSet::new();
                        for m in &ms {
                            assert_eq!(m.receive_count, 1, "redelivered {} {}", m.group_id, m.body);
                            if seen_here.insert(m.group_id.clone()) {
                                assert!(
                                    held.insert(m.group_id.clone()),
                                    "group {} held by two consumers",
                                    m.group_id
                                );
                            }
                            let want = next.entry(m.group_id.clone()).or_insert(0);
                            assert_eq!(
                                m.body,
                                want.to_string(),
                                "group {} out of order",
                                m.group_id
                            );
                            *want += 1;
                        }
                    }
                    for (i, m) in ms.iter().enumerate() {
                        let last_of_group = !ms[i + 1..].iter().any(|n| n.group_id == m.group_id);
                        if last_of_group {
                            held.lock().unwrap().remove(&m.group_id);
                        }
                        h.delete(&m.receipt_handle).unwrap();
                    }
                    done.fetch_add(ms.len(), Ordering::SeqCst);
                }
            });
        }
    });
    assert_eq!(done.load(Ordering::SeqCst), TOTAL);
    let next = next.into_inner().unwrap();
    assert_eq!(next.len(), GROUPS);
    assert!(next.values().all(|&n| n == PER_GROUP), "{next:?}");
    assert!(recv(&q, 10).is_empty());
}
