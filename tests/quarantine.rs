//! One bad word breaks one entry, not the queue. A corrupted word written
//! into the arena behind the library's back (as another process could) makes one message or
//! one group unreadable: receives pass over it, `recover` quarantines it (its messages to the
//! dead-letter queue where a redrive policy names one, otherwise dropped, by id in the
//! report), and every other group keeps serving in order throughout.

mod common;

use std::time::Duration;

use common::*;
use shmfifo::{Message, Queue, ReceiveOptions, RedrivePolicy, SendMessage};

/// Receives (30 s visibility) and deletes until a receive comes back empty twice.
fn drain(q: &Queue) -> Vec<Message> {
    let mut out = Vec::new();
    let mut empty = 0;
    while empty < 2 {
        let got = q
            .receive(&ReceiveOptions::max(10).visibility_timeout(Duration::from_secs(30)))
            .expect("the other groups are served");
        if got.is_empty() {
            empty += 1;
        }
        for m in got {
            q.delete(&m.receipt_handle).unwrap();
            out.push(m);
        }
    }
    out
}

fn bodies_of(ms: &[Message], group: &str) -> Vec<String> {
    ms.iter()
        .filter(|m| m.group_id == group)
        .map(|m| m.body.clone())
        .collect()
}

/// A group whose `head` names a slot that does not exist: receives serve the other groups in
/// order, `recover` quarantines the damaged group (its messages dropped, by id), counts it,
/// and the group's id works again afterwards, as a fresh group (R1).
#[test]
fn a_damaged_group_is_quarantined_and_the_rest_keeps_serving() {
    let q = queue("quarantine", &small_dedup());
    let path = format!("/dev/shm/{}", q.name);
    let mut damaged_ids = Vec::new();
    for k in 0..3 {
        for g in ["healthy-one", "the-damaged-group", "healthy-two"] {
            let r = q
                .send(&SendMessage::new(g, &format!("{g} {k}")).dedup_id(&format!("{g}-{k}")))
                .unwrap();
            if g == "the-damaged-group" {
                damaged_ids.push(r.message_id);
            }
        }
    }
    break_group(&path, b"the-damag");
    // R1, R3: the healthy groups come out whole and in order, before any recovery.
    let got = drain(&q);
    for g in ["healthy-one", "healthy-two"] {
        assert_eq!(
            bodies_of(&got, g),
            (0..3).map(|k| format!("{g} {k}")).collect::<Vec<_>>()
        );
    }
    assert!(bodies_of(&got, "the-damaged-group").is_empty());
    let r = q.recover().expect("recover quarantines, it does not fail");
    assert_eq!(r.quarantined_groups, 1, "{r:?}");
    assert_eq!(
        r.dropped, damaged_ids,
        "every message of the group, by id, in order"
    );
    assert!(r.dead_lettered.is_empty());
    let a = q.attributes();
    assert_eq!((a.quarantined_groups, a.quarantined_messages), (1, 3));
    assert_eq!(a.approximate_number_of_messages, 0);
    assert!(q.inspect(10).unwrap().damaged_groups.is_empty());
    // The slots came back: the group's id starts afresh, and a second recover finds nothing.
    q.send(&SendMessage::new("the-damaged-group", "again").dedup_id("again"))
        .unwrap();
    assert_eq!(bodies_of(&drain(&q), "the-damaged-group"), ["again"]);
    let r = q.recover().unwrap();
    assert_eq!(r.quarantined_groups, 0);
}

/// X1 with a quarantine: where the queue has a redrive policy, the damaged group's messages
/// go to its dead-letter queue (their ids kept, M2) instead of being dropped.
#[test]
fn a_quarantined_group_goes_to_the_dead_letter_queue() {
    let dlq = queue("quarantine-dlq", &small_dedup());
    let q = queue(
        "quarantine-src",
        &small_dedup().redrive_policy(RedrivePolicy::new(dlq.name.clone(), 5)),
    );
    let path = format!("/dev/shm/{}", q.name);
    let mut ids = Vec::new();
    for k in 0..2 {
        ids.push(
            q.send(
                &SendMessage::new("the-damaged-group", &format!("m{k}")).dedup_id(&format!("d{k}")),
            )
            .unwrap()
            .message_id,
        );
    }
    q.send(&SendMessage::new("healthy", "h").dedup_id("h"))
        .unwrap();
    break_group(&path, b"the-damag");
    let r = q.recover().unwrap();
    assert_eq!(r.quarantined_groups, 1);
    assert_eq!(r.dead_lettered, ids);
    assert!(r.dropped.is_empty());
    let moved = drain(&dlq);
    assert_eq!(bodies_of(&moved, "the-damaged-group"), ["m0", "m1"]);
    assert_eq!(
        moved.iter().map(|m| m.message_id).collect::<Vec<_>>(),
        ids,
        "M2: ids are kept"
    );
    assert_eq!(bodies_of(&drain(&q), "healthy"), ["h"]);
}

/// X1 with a quarantine of a group holding packs (layout 22): each member of
/// the damaged group's pack goes to the dead-letter queue with its own id, in order, after the
/// message before the pack; every slot of the group is freed.
#[test]
fn a_quarantined_groups_packs_go_to_the_dead_letter_queue_member_by_member() {
    let dlq = queue("quarantine-pack-dlq", &small_dedup());
    let q = queue(
        "quarantine-pack-src",
        &small_dedup().redrive_policy(RedrivePolicy::new(dlq.name.clone(), 5)),
    );
    let path = format!("/dev/shm/{}", q.name);
    let before = q.inspect(0).unwrap().size_classes;
    let mut ids = vec![
        q.send(&SendMessage::new("the-damaged-group", "m0").dedup_id("d0"))
            .unwrap()
            .message_id,
    ];
    q.set_pack_batches(true);
    let pack = q
        .send_messages(&[
            SendMessage::new("the-damaged-group", "m1").dedup_id("d1"),
            SendMessage::new("the-damaged-group", "m2").dedup_id("d2"),
            SendMessage::new("the-damaged-group", "m3").dedup_id("d3"),
        ])
        .unwrap();
    ids.extend(pack.into_iter().map(|r| r.unwrap().message_id));
    q.send(&SendMessage::new("healthy", "h").dedup_id("h"))
        .unwrap();
    break_group(&path, b"the-damag");
    let r = q.recover().unwrap();
    assert_eq!(r.quarantined_groups, 1);
    assert_eq!(r.dead_lettered, ids);
    let moved = drain(&dlq);
    assert_eq!(
        bodies_of(&moved, "the-damaged-group"),
        ["m0", "m1", "m2", "m3"]
    );
    assert_eq!(
        moved.iter().map(|m| m.message_id).collect::<Vec<_>>(),
        ids,
        "M2: each member's id is kept"
    );
    assert_eq!(bodies_of(&drain(&q), "healthy"), ["h"]);
    let after = q.inspect(0).unwrap().size_classes;
    for (b, a) in before.iter().zip(&after) {
        assert_eq!(a.free, b.free, "every slot of the group back");
    }
}

/// A message whose lengths word is corrupted cannot be read: the receive that meets it takes
/// it out (counted), and its group goes on with its next message, in order.
#[test]
fn an_unreadable_message_is_quarantined_and_its_group_goes_on() {
    let q = queue("quarantine-msg", &small());
    let path = format!("/dev/shm/{}", q.name);
    let first = send(&q, "g", "first");
    send(&q, "g", "second");
    send(&q, "g", "third");
    // Find the first message's slot header by scanning headers for the slot's `pos` of the
    // first message, then corrupt its `lens` (the header's second word, layout 22).
    let h = first_message_header(&path, first.sequence_number);
    write_word(&path, h + 8, u64::MAX); // `lens`
    let got = drain(&q);
    assert_eq!(bodies_of(&got, "g"), ["second", "third"]);
    assert_eq!(q.attributes().quarantined_messages, 1);
}

/// A slot whose `lens` word says it holds a pack (layout 22: flag 2, two members, a `used` of
/// one byte, short of the directory itself, so damaged however packs are read) is a damaged
/// message like any other: taken out, counted, its group goes on in order. (That this build
/// refuses every pack as a message is `message::split`'s own test.)
#[test]
fn a_damaged_pack_is_quarantined_and_its_group_goes_on() {
    let q = queue("quarantine-pack", &small());
    let path = format!("/dev/shm/{}", q.name);
    send(&q, "g", "first");
    let second = send(&q, "g", "second");
    send(&q, "g", "third");
    let h = first_message_header(&path, second.sequence_number);
    write_word(&path, h + 8, (2 << 56) | (2 << 48) | 1); // `lens`
    let got = drain(&q);
    assert_eq!(bodies_of(&got, "g"), ["first", "third"]);
    assert_eq!(q.attributes().quarantined_messages, 1);
}

/// A group entry whose hash word no longer matches its id (damaged after the buffer's last
/// receive checked that id, so the buffer remembers the id as checked): the next message of
/// the group is unreadable (quarantined, counted), not handed out under that entry, even by
/// a receive into the same buffer, one message at a time; the group's other messages and
/// the other groups are unaffected before the damage.
#[test]
fn a_group_id_that_no_longer_matches_its_hash_is_unreadable_in_a_reused_buffer() {
    use shmfifo::ReceiveBuffer;
    let q = queue("quarantine-hash", &small());
    let path = format!("/dev/shm/{}", q.name);
    for body in ["first", "second", "third"] {
        send(&q, "the-hashed-group", body);
    }
    let one = ReceiveOptions::max(1).wait(Duration::ZERO);
    let mut buf = ReceiveBuffer::new();
    assert_eq!(q.receive_into(&one, &mut buf).unwrap(), 1);
    assert_eq!(buf.messages()[0].body, "first");
    q.delete(&buf.messages()[0].receipt_handle).unwrap();
    assert_eq!(q.receive_into(&one, &mut buf).unwrap(), 1);
    assert_eq!(buf.messages()[0].body, "second");
    q.delete(&buf.messages()[0].receipt_handle).unwrap();
    // The entry's `hash` word (72 bytes in, after `probe`), one bit flipped.
    let entry = group_entry(&path, b"the-hashed-group");
    let bytes = std::fs::read(&path).unwrap();
    let at = (entry + 72) as usize;
    let hash = u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap());
    write_word(&path, entry + 72, hash ^ 1);
    assert_eq!(q.receive_into(&one, &mut buf).unwrap(), 0, "not handed out");
    assert_eq!(q.attributes().quarantined_messages, 1);
}

/// The offset of the header of the message with sequence number `seq` (its `pos` word, 40
/// bytes into a 64-byte header since layout 22, is the low 64 bits of the sequence number),
/// looking only at 64-byte-aligned headers whose `pos` matches and whose `vis`,
/// `group_epoch0` and `lens` words are non-zero.
fn first_message_header(path: &str, seq: u128) -> u64 {
    let bytes = std::fs::read(path).unwrap();
    let pos = (seq as u64).to_le_bytes();
    let mut found = None;
    for off in (4096..bytes.len() - 64).step_by(64) {
        let w = |k: usize| &bytes[off + 8 * k..off + 8 * k + 8];
        if w(5) == pos && w(0) != [0; 8] && w(6) != [0; 8] && w(1) != [0; 8] {
            assert!(found.is_none(), "one header matches");
            found = Some(off as u64);
        }
    }
    found.expect("the message's header")
}
