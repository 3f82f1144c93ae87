//! Packs (layout 22, stage 1b of `docs/design/packed-batches.md`) through the API: a batch's
//! messages to one group sent as one slot, then received, deleted, made visible, moved,
//! purged, expired and inspected member by member, each under the contract's rules (cited).

use std::time::Duration;

use crate::{
    Error, Queue, QueueConfig, QueueSettings, ReceiptHandle, ReceiveOptions, RedrivePolicy,
    SendMessage, SendResult,
};

/// A queue on the test clock whose handle sends packs.
fn packing(config: QueueConfig) -> Queue {
    let q = Queue::create_anonymous(&config.test_clock(true)).unwrap();
    q.set_pack_batches(true);
    q
}

fn batch<'a>(group: &'a str, bodies: &'a [String], dedup: &'a [String]) -> Vec<SendMessage<'a>> {
    bodies
        .iter()
        .zip(dedup)
        .map(|(b, d)| SendMessage::new(group, b.as_str()).dedup_id(d.as_str()))
        .collect()
}

fn texts(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}{i}")).collect()
}

/// Slots in use (published, any state) across the size classes.
fn slots_used(q: &Queue) -> u32 {
    q.inspect(1)
        .unwrap()
        .size_classes
        .iter()
        .map(|c| c.used + c.deleted + c.sending)
        .sum()
}

/// S13, R1, M1: ten messages to one group are one slot; they come back in order, each with the
/// id and sequence number its send returned, consecutive sequence numbers; deleting them all
/// frees the slot (H1).
#[test]
fn a_batch_to_one_group_is_one_slot_received_in_order() {
    let q = packing(QueueConfig::new());
    let bodies = texts("m", 10);
    let ids = texts("d", 10);
    let sent = q.send_messages(&batch("g", &bodies, &ids)).unwrap();
    assert_eq!(slots_used(&q), 1, "one pack");
    let sent: Vec<_> = sent.into_iter().map(Result::unwrap).collect();
    let got = q.receive(&ReceiveOptions::max(10)).unwrap();
    assert_eq!(got.len(), 10);
    for (k, m) in got.iter().enumerate() {
        assert_eq!(m.body, bodies[k]);
        assert_eq!(
            m.message_id, sent[k].message_id,
            "M1: the id the send returned"
        );
        assert_eq!(m.sequence_number, sent[k].sequence_number);
        assert_eq!(m.receive_count, 1);
    }
    for w in sent.windows(2) {
        assert_eq!(w[1].sequence_number, w[0].sequence_number + 1, "R1");
    }
    let ids: std::collections::HashSet<_> = sent.iter().map(|s| s.message_id).collect();
    assert_eq!(ids.len(), 10, "every member its own id");
    let handles: Vec<ReceiptHandle> = got.iter().map(|m| m.receipt_handle).collect();
    assert!(q
        .delete_handles(&handles)
        .unwrap()
        .iter()
        .all(Result::is_ok));
    assert_eq!(slots_used(&q), 0, "the pack's slot is free again");
    assert!(q.receive(&ReceiveOptions::max(10)).unwrap().is_empty());
    // A message sent after a pack follows it (R1).
    q.send(&SendMessage::new("g", "after").dedup_id("x"))
        .unwrap();
    let next = q.receive(&ReceiveOptions::max(10)).unwrap();
    assert_eq!(next[0].body, "after");
    assert!(next[0].sequence_number > sent[9].sequence_number);
}

/// R3: a receive may end inside a pack; the rest of the group waits while its first members are
/// in flight, and comes next once they are deleted. A deleted member is passed over.
#[test]
fn a_receive_ends_inside_a_pack_and_the_rest_waits() {
    let q = packing(QueueConfig::new());
    let bodies = texts("m", 6);
    let ids = texts("d", 6);
    q.send_messages(&batch("g", &bodies, &ids)).unwrap();
    let first = q.receive(&ReceiveOptions::max(2)).unwrap();
    assert_eq!(
        first.iter().map(|m| m.body.as_str()).collect::<Vec<_>>(),
        ["m0", "m1"]
    );
    assert!(
        q.receive(&ReceiveOptions::max(10)).unwrap().is_empty(),
        "R3: the group is locked by its in-flight members"
    );
    q.delete(&first[0].receipt_handle).unwrap();
    assert!(q.receive(&ReceiveOptions::max(10)).unwrap().is_empty());
    q.delete(&first[1].receipt_handle).unwrap();
    let rest = q.receive(&ReceiveOptions::max(10)).unwrap();
    assert_eq!(
        rest.iter().map(|m| m.body.as_str()).collect::<Vec<_>>(),
        ["m2", "m3", "m4", "m5"]
    );
    assert_eq!(slots_used(&q), 1, "the pack stays while members live");
    let handles: Vec<_> = rest.iter().map(|m| m.receipt_handle).collect();
    q.delete_handles(&handles).unwrap();
    assert_eq!(slots_used(&q), 0);
}

/// H6, V1, R3: a member made visible again (timeout 0) is the group's next message; the members
/// behind it stay in flight under their own handles, and a member's handle changes only it.
#[test]
fn a_members_visibility_changes_alone() {
    let q = packing(QueueConfig::new());
    let bodies = texts("m", 4);
    let ids = texts("d", 4);
    q.send_messages(&batch("g", &bodies, &ids)).unwrap();
    let got = q.receive(&ReceiveOptions::max(10)).unwrap();
    q.delete(&got[0].receipt_handle).unwrap();
    q.change_visibility(&got[1].receipt_handle, Duration::ZERO)
        .unwrap();
    let again = q.receive(&ReceiveOptions::max(10)).unwrap();
    assert_eq!(
        again.iter().map(|m| m.body.as_str()).collect::<Vec<_>>(),
        ["m1"],
        "R3: m2 and m3 are still in flight behind it"
    );
    assert_eq!(again[0].receive_count, 2);
    // H2: the first receive's handle of m1 is stale now; m2's is still live.
    assert!(matches!(
        q.delete(&got[1].receipt_handle),
        Err(Error::ReceiptHandleExpired { .. }) | Ok(())
    ));
    q.verify(&got[2].receipt_handle).unwrap();
    assert!(q.verify(&got[1].receipt_handle).is_err());
    q.delete(&again[0].receipt_handle).unwrap();
    q.delete(&got[2].receipt_handle).unwrap();
    q.delete(&got[3].receipt_handle).unwrap();
    assert_eq!(slots_used(&q), 0);
    // A handle of the freed pack names nothing any more.
    assert!(q.verify(&got[3].receipt_handle).is_err());
}

/// V2, R3: when the visibility timeout ends, the pack's undeleted members come back in order.
#[test]
fn expired_members_come_back_in_order() {
    let q = packing(QueueConfig::new());
    let bodies = texts("m", 5);
    let ids = texts("d", 5);
    q.send_messages(&batch("g", &bodies, &ids)).unwrap();
    let got = q
        .receive(&ReceiveOptions::max(10).visibility_timeout(Duration::from_secs(30)))
        .unwrap();
    q.delete(&got[0].receipt_handle).unwrap();
    q.delete(&got[2].receipt_handle).unwrap();
    q.advance_clock(Duration::from_secs(31)).unwrap();
    let back = q.receive(&ReceiveOptions::max(10)).unwrap();
    assert_eq!(
        back.iter().map(|m| m.body.as_str()).collect::<Vec<_>>(),
        ["m1", "m3", "m4"]
    );
    assert!(back.iter().all(|m| m.receive_count == 2));
}

/// D1, D8: a repeated dedup id of a pack's member answers with that member's id and sequence
/// number.
#[test]
fn a_duplicate_of_a_member_names_that_member() {
    let q = packing(QueueConfig::new());
    let bodies = texts("m", 3);
    let ids = texts("d", 3);
    let sent = q.send_messages(&batch("g", &bodies, &ids)).unwrap();
    let again = q
        .send(&SendMessage::new("g", "other").dedup_id("d2"))
        .unwrap();
    assert!(again.duplicate);
    let original = sent[2].as_ref().unwrap();
    assert_eq!(again.message_id, original.message_id);
    assert_eq!(again.sequence_number, original.sequence_number);
}

/// X1, X4, D8: members past `maxReceiveCount` move to the dead-letter queue one by one, in
/// order, each with its own id; the pack's slot is freed once all are gone.
#[test]
fn members_move_to_the_dead_letter_queue_one_by_one() {
    let dlq_name = format!("packs-test-dlq-{}", std::process::id());
    let dlq = Queue::create(&dlq_name, &QueueConfig::new()).unwrap();
    struct Unlink(String);
    impl Drop for Unlink {
        fn drop(&mut self) {
            let _ = Queue::unlink(&self.0);
        }
    }
    let _cleanup = Unlink(dlq_name.clone());
    let q = packing(QueueConfig::new());
    q.set_attributes(
        &QueueSettings::new().redrive_policy(Some(RedrivePolicy::new(dlq_name.as_str(), 1))),
    )
    .unwrap();
    let bodies = texts("m", 4);
    let ids = texts("d", 4);
    let sent = q.send_messages(&batch("g", &bodies, &ids)).unwrap();
    let got = q
        .receive(&ReceiveOptions::max(10).visibility_timeout(Duration::from_secs(1)))
        .unwrap();
    assert_eq!(got.len(), 4);
    q.delete(&got[1].receipt_handle).unwrap();
    q.advance_clock(Duration::from_secs(2)).unwrap();
    assert!(q.receive(&ReceiveOptions::max(10)).unwrap().is_empty());
    let moved = dlq.receive(&ReceiveOptions::max(10)).unwrap();
    assert_eq!(
        moved.iter().map(|m| m.body.as_str()).collect::<Vec<_>>(),
        ["m0", "m2", "m3"]
    );
    let moved_ids: std::collections::HashSet<_> =
        moved.iter().map(|m| m.message_id.to_string()).collect();
    assert_eq!(moved_ids.len(), 3);
    assert_eq!(moved[0].message_id, sent[0].as_ref().unwrap().message_id);
    assert_eq!(slots_used(&q), 0);
}

/// P1: a purge deletes every member of a pack, in flight or not, and frees its slot.
#[test]
fn a_purge_deletes_every_member() {
    let q = packing(QueueConfig::new());
    let bodies = texts("m", 7);
    let ids = texts("d", 7);
    q.send_messages(&batch("g", &bodies, &ids)).unwrap();
    let got = q.receive(&ReceiveOptions::max(3)).unwrap();
    assert_eq!(q.purge().unwrap(), 7);
    assert_eq!(slots_used(&q), 0);
    assert!(q.delete(&got[0].receipt_handle).is_err() || q.verify(&got[0].receipt_handle).is_err());
    assert!(q.receive(&ReceiveOptions::max(10)).unwrap().is_empty());
}

/// T1: a pack past the retention period goes whole (its members share their enqueue time).
#[test]
fn retention_removes_a_whole_pack() {
    let q = packing(QueueConfig::new().message_retention_period(Duration::from_secs(60)));
    let bodies = texts("m", 3);
    let ids = texts("d", 3);
    q.send_messages(&batch("g", &bodies, &ids)).unwrap();
    q.advance_clock(Duration::from_secs(61)).unwrap();
    assert!(q.receive(&ReceiveOptions::max(10)).unwrap().is_empty());
    assert_eq!(slots_used(&q), 0);
    assert_eq!(q.counters().retention_expiries, 3);
}

/// C1: inspection counts a pack's members as messages and the pack as one slot; a peek shows
/// the visible members in order.
#[test]
fn inspection_counts_members_and_slots() {
    let q = packing(QueueConfig::new());
    let bodies = texts("m", 5);
    let ids = texts("d", 5);
    q.send_messages(&batch("g", &bodies, &ids)).unwrap();
    q.receive(&ReceiveOptions::max(2)).unwrap();
    let i = q.inspect(5).unwrap();
    assert_eq!((i.messages.visible, i.messages.in_flight), (3, 2));
    assert_eq!(i.locked_groups, 1);
    assert_eq!(i.largest_groups[0].backlog(), 5);
    assert_eq!(slots_used(&q), 1);
    q.send_messages(&batch("h", &texts("x", 3), &texts("e", 3)))
        .unwrap();
    let peeked = q.peek(10).unwrap();
    assert_eq!(
        peeked.iter().map(|m| m.body.as_str()).collect::<Vec<_>>(),
        ["x0", "x1", "x2"],
        "g is locked; h's pack is visible"
    );
}

/// R11: a receive retried with its attempt id returns the same members with the same handles.
#[test]
fn a_retried_receive_attempt_returns_the_same_members() {
    let q = packing(QueueConfig::new());
    let bodies = texts("m", 4);
    let ids = texts("d", 4);
    q.send_messages(&batch("g", &bodies, &ids)).unwrap();
    let first = q
        .receive_with_attempt_id(&ReceiveOptions::max(3), "attempt")
        .unwrap();
    let again = q
        .receive_with_attempt_id(&ReceiveOptions::max(3), "attempt")
        .unwrap();
    assert_eq!(first.len(), 3);
    assert_eq!(
        first.iter().map(|m| m.receipt_handle).collect::<Vec<_>>(),
        again.iter().map(|m| m.receipt_handle).collect::<Vec<_>>()
    );
    assert_eq!(again[2].body, "m2");
}

/// Batches with several groups pack each group's run; a chain too large for any class goes one
/// slot a message, in order all the same.
#[test]
fn each_groups_run_is_its_own_pack() {
    let q = packing(QueueConfig::new().size_classes(vec![(1024, 64), (262_656, 4)]));
    let msgs = vec![
        SendMessage::new("a", "a0").dedup_id("1"),
        SendMessage::new("b", "b0").dedup_id("2"),
        SendMessage::new("a", "a1").dedup_id("3"),
        SendMessage::new("b", "b1").dedup_id("4"),
    ];
    q.send_messages(&msgs).unwrap();
    assert_eq!(slots_used(&q), 2, "one pack a group");
    let big = "x".repeat(200_000);
    let large = vec![
        SendMessage::new("c", big.as_str()).dedup_id("5"),
        SendMessage::new("c", big.as_str()).dedup_id("6"),
    ];
    q.send_messages(&large).unwrap();
    assert_eq!(
        slots_used(&q),
        4,
        "two 200 KB bodies make no pack a class holds"
    );
    let got = q.receive(&ReceiveOptions::max(10)).unwrap();
    let bodies: Vec<&str> = got.iter().map(|m| &m.body[..2]).collect();
    assert_eq!(bodies, ["a0", "a1", "b0", "b1", "xx", "xx"]);
}

/// S7, S8, D2, D5, M1: members keep their own attributes and dedup ids (given or made from the
/// body's SHA-256); a content-based repeat of a member is a duplicate naming it; first receive
/// times and group ids are each member's.
#[test]
fn members_keep_their_attributes_and_dedup_ids() {
    use crate::{Deduplication, MessageAttribute};
    let q = packing(QueueConfig::new().deduplication(Deduplication::MessageGroup));
    let q_content = packing(QueueConfig::new().content_based_deduplication(true));
    let attrs = [
        MessageAttribute::string("colour", "red"),
        MessageAttribute::string("size", "large"),
    ];
    let msgs = [
        SendMessage::new("g", "plain").dedup_id("p"),
        SendMessage::new("g", "with attributes")
            .dedup_id("w")
            .attributes(&attrs),
        SendMessage::new("g", "last").dedup_id("l"),
    ];
    q.send_messages(&msgs).unwrap();
    assert_eq!(slots_used(&q), 1);
    let got = q.receive(&ReceiveOptions::max(10)).unwrap();
    assert_eq!(got.len(), 3);
    assert!(got[0].attributes.is_empty());
    let names: Vec<&str> = got[1].attributes.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names, ["colour", "size"]);
    assert_eq!(got[1].attributes[0].value, b"red");
    assert_eq!(got[2].dedup_id.as_deref(), Some("l"));
    assert!(got
        .iter()
        .all(|m| m.group_id == "g" && m.first_receive_timestamp > 0));
    // Content-based: ids made from each member's body.
    let sent = q_content
        .send_messages(&[SendMessage::new("g", "one"), SendMessage::new("g", "two")])
        .unwrap();
    assert_eq!(slots_used(&q_content), 1);
    let again = q_content.send(&SendMessage::new("g", "two")).unwrap();
    assert!(again.duplicate, "D5: the same body");
    assert_eq!(again.message_id, sent[1].as_ref().unwrap().message_id);
}

/// S13 (our choice for packs): a pack whose size class is full fails whole, every entry with
/// `SizeClassFull`, nothing of it enqueued; once a slot is free the same batch goes whole, in
/// order.
#[test]
fn a_pack_whose_class_is_full_fails_whole() {
    let q = packing(
        QueueConfig::new()
            .size_classes(vec![(192, 2), (262_656, 1)])
            .size_limit(0),
    );
    q.set_pack_batches(false);
    q.send(&SendMessage::new("x", "x").dedup_id("x")).unwrap();
    q.send(&SendMessage::new("y", "y").dedup_id("y")).unwrap();
    q.set_pack_batches(true);
    let msgs = [
        SendMessage::new("g", "a").dedup_id("a"),
        SendMessage::new("g", "b").dedup_id("b"),
    ];
    assert_all_refused_full(&q.send_messages(&msgs).unwrap());
    let got = q.receive(&ReceiveOptions::max(10)).unwrap();
    let bodies: Vec<&str> = got.iter().map(|m| m.body.as_str()).collect();
    assert_eq!(bodies, ["x", "y"], "nothing of the pack enqueued");
    q.delete(&got[0].receipt_handle).unwrap();
    let r = q.send_messages(&msgs).unwrap();
    assert!(
        r.iter().all(|r| r.as_ref().is_ok_and(|s| !s.duplicate)),
        "{r:?}"
    );
    q.delete(&got[1].receipt_handle).unwrap();
    let got = q.receive(&ReceiveOptions::max(10)).unwrap();
    let bodies: Vec<&str> = got.iter().map(|m| m.body.as_str()).collect();
    assert_eq!(bodies, ["a", "b"]);
}

/// S13 (our choice: packing never costs capacity): a pack whose class is full and may not
/// grow goes one slot a message where the messages' own class has room, in order after the
/// pack before it; every entry new, none refused.
#[test]
fn a_pack_whose_class_is_full_goes_one_slot_a_message() {
    let q = packing(
        QueueConfig::new()
            .size_classes(vec![(64, 4), (1024, 1), (262_656, 1)])
            .size_limit(0),
    );
    let first = [
        SendMessage::new("g", "a1").dedup_id("a1"),
        SendMessage::new("g", "a2").dedup_id("a2"),
    ];
    let second = [
        SendMessage::new("g", "b1").dedup_id("b1"),
        SendMessage::new("g", "b2").dedup_id("b2"),
    ];
    for msgs in [&first, &second] {
        let r = q.send_messages(msgs).unwrap();
        assert!(
            r.iter().all(|r| r.as_ref().is_ok_and(|s| !s.duplicate)),
            "{r:?}"
        );
    }
    let classes = q.inspect(1).unwrap().size_classes;
    let used: Vec<u32> = classes.iter().map(|c| c.used).collect();
    assert_eq!(
        used,
        [2, 1, 0],
        "the first batch one pack, the second one slot a message"
    );
    let got = q.receive(&ReceiveOptions::max(10)).unwrap();
    let bodies: Vec<&str> = got.iter().map(|m| m.body.as_str()).collect();
    assert_eq!(bodies, ["a1", "a2", "b1", "b2"], "R1: in order");
}

/// S13, R1: where a refused pack goes one slot a message, it stops at the first message that
/// finds no room: a later message of the group, whose own class has room, is not enqueued
/// ahead of it (both refused, nothing of the group enqueued).
#[test]
fn a_refused_packs_fallback_never_enqueues_past_a_refused_message() {
    let q = packing(
        QueueConfig::new()
            .size_classes(vec![(192, 4), (960, 1), (262_656, 1)])
            .size_limit(0),
    );
    let big = "b".repeat(500);
    q.send(&SendMessage::new("x", &big).dedup_id("x")).unwrap();
    let a = "a".repeat(300);
    let msgs = [
        SendMessage::new("g", &a).dedup_id("a"),
        SendMessage::new("g", "later").dedup_id("later"),
    ];
    assert_all_refused_full(&q.send_messages(&msgs).unwrap());
    let got = q.receive(&ReceiveOptions::max(10)).unwrap();
    let groups: Vec<&str> = got.iter().map(|m| m.group_id.as_str()).collect();
    assert_eq!(groups, ["x"], "nothing of g enqueued");
}

/// S13, D1: a batch whose pack fails on a full class around a duplicate enqueues nothing new
/// (not the message after the duplicate without the one before it); sent again with room,
/// both go, in order, the duplicate answering as before.
#[test]
fn a_full_class_around_a_duplicate_keeps_the_order() {
    let q = packing(
        QueueConfig::new()
            .size_classes(vec![(192, 3), (262_656, 1)])
            .size_limit(0),
    );
    q.send(&SendMessage::new("g", "b").dedup_id("b")).unwrap();
    q.send(&SendMessage::new("x", "x").dedup_id("x")).unwrap();
    q.send(&SendMessage::new("y", "y").dedup_id("y")).unwrap();
    let msgs = [
        SendMessage::new("g", "a").dedup_id("a"),
        SendMessage::new("g", "b").dedup_id("b"),
        SendMessage::new("g", "c").dedup_id("c"),
    ];
    let r = q.send_messages(&msgs).unwrap();
    assert!(matches!(r[0], Err(Error::SizeClassFull { .. })), "{r:?}");
    assert!(r[1].as_ref().is_ok_and(|s| s.duplicate), "{r:?}");
    assert!(matches!(r[2], Err(Error::SizeClassFull { .. })), "{r:?}");
    assert_eq!(
        q.counters().duplicates,
        1,
        "the duplicate counted once, not again on the retry"
    );
    let got = q.receive(&ReceiveOptions::max(10)).unwrap();
    let bodies: Vec<&str> = got.iter().map(|m| m.body.as_str()).collect();
    assert_eq!(bodies, ["b", "x", "y"], "nothing of the pack enqueued");
    q.delete(&got[1].receipt_handle).unwrap();
    let r = q.send_messages(&msgs).unwrap();
    assert!(r[0].as_ref().is_ok_and(|s| !s.duplicate), "{r:?}");
    assert!(r[1].as_ref().is_ok_and(|s| s.duplicate), "{r:?}");
    assert!(r[2].as_ref().is_ok_and(|s| !s.duplicate), "{r:?}");
    q.delete(&got[0].receipt_handle).unwrap();
    q.delete(&got[2].receipt_handle).unwrap();
    let got = q.receive(&ReceiveOptions::max(10)).unwrap();
    let bodies: Vec<&str> = got.iter().map(|m| m.body.as_str()).collect();
    assert_eq!(bodies, ["a", "c"]);
}

/// Every entry of a batch refused as `SizeClassFull`.
fn assert_all_refused_full(r: &[Result<SendResult, Error>]) {
    assert!(
        r.iter()
            .all(|r| matches!(r, Err(Error::SizeClassFull { .. }))),
        "{r:?}"
    );
}
