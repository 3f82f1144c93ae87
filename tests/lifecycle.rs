//! Message lifecycle, rule by rule: queue delay (L1, L2, R4), retention (T1–T3), the in-flight
//! limit (R8), dead-letter queues (X1–X5, D8, M2, M4), redrive back (X6) and live settings
//! (Q3–Q5). Short configured durations stand in for SQS's seconds.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::sleep;
use std::time::{Duration, Instant};

use common::*;
use shmfifo::{
    Error, ErrorCode, MessageAttribute, Queue, QueueConfig, QueueSettings, ReceiveOptions,
    RedriveOptions, RedrivePolicy, SendMessage,
};

const LONG: Duration = Duration::from_secs(60);

fn counts(q: &Queue) -> (u64, u64, u64) {
    let a = q.attributes();
    (
        a.approximate_number_of_messages,
        a.approximate_number_of_messages_not_visible,
        a.approximate_number_of_messages_delayed,
    )
}

/// L1, L2: with a queue delay, a new message is delayed (counted as Delayed, not returned)
/// until the delay has passed.
#[test]
fn l1_l2_queue_delay_hides_and_counts_new_messages() {
    let q = queue("l1", &small().delay(Duration::from_millis(300)));
    send(&q, "g", "a");
    send(&q, "g", "b");
    assert!(recv(&q, 10).is_empty(), "delayed messages are not returned");
    assert_eq!(counts(&q), (0, 0, 2), "L2: counted as delayed");
    let start = Instant::now();
    // Each message's delay ends on its own (its send time plus 300 ms): the two may become
    // visible a millisecond apart, so a receive can get "a" alone; it is then made visible
    // again and the receive repeated.
    let mut got = Vec::new();
    while start.elapsed() < Duration::from_secs(5) {
        got = q
            .receive(&ReceiveOptions::max(10).wait(Duration::from_secs(5)))
            .unwrap();
        if got.len() >= 2 {
            break;
        }
        for m in &got {
            q.change_visibility(&m.receipt_handle, Duration::ZERO)
                .unwrap();
        }
    }
    assert_eq!(bodies(&got), ["a", "b"], "in order once the delay ends");
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "a waiting receiver is woken"
    );
    assert_eq!(q.attributes().delay, Duration::from_millis(300));
}

/// Attribute values by SQS name are whole numbers as `u64`'s parser reads them (a `+` and
/// blanks allowed); one too large for any setting is refused by the setting's range, naming it,
/// not as "not a number"; anything else is not a number.
#[test]
fn attribute_values_are_whole_numbers_checked_by_their_range() {
    let q = queue("attrnum", &small());
    q.set_attribute("VisibilityTimeout", " +45 ").unwrap();
    assert_eq!(q.attributes().visibility_timeout, Duration::from_secs(45));
    for (name, value) in [
        ("MessageRetentionPeriod", "99999999999999999999"),
        ("VisibilityTimeoutMs", "18446744073709551616"),
        ("MaximumMessageSize", "99999999999999999999"),
    ] {
        let e = q.set_attribute(name, value).unwrap_err();
        assert!(matches!(e, Error::InvalidConfig { .. }), "{name}: {e:?}");
        assert!(
            !e.to_string().contains("must be a non-negative integer"),
            "{name}: {e}"
        );
        assert!(
            !e.to_string().contains("integer number of bytes"),
            "{name}: {e}"
        );
    }
    for bad in ["", "-1", "4.5", "1e3", "+", "ten"] {
        let e = q.set_attribute("DelaySeconds", bad).unwrap_err();
        assert!(matches!(e, Error::InvalidConfig { .. }), "{bad:?}: {e:?}");
    }
    assert_eq!(q.attributes().visibility_timeout, Duration::from_secs(45));
}

/// Q6: `LastModifiedTimestamp` is the creation until a change of the settings, then the
/// change's time (on the queue's clock: a test clock's here), in every process, and in the
/// attributes by SQS name (it was not answered).
#[test]
fn q6_last_modified_is_the_last_change_of_the_settings() {
    let q = queue("lastmod", &small().test_clock(true));
    let created = q.attributes().created_timestamp;
    assert_eq!(q.attributes().last_modified_timestamp, created);
    q.advance_clock(Duration::from_secs(90)).unwrap();
    q.set_attribute("VisibilityTimeout", "45").unwrap();
    let a = Queue::open(&q.name).unwrap().attributes();
    assert!(
        (created + 90_000..created + 91_000).contains(&a.last_modified_timestamp),
        "{} after {created}",
        a.last_modified_timestamp
    );
    let by_name = a.sqs_attributes();
    let get = |n: &str| {
        by_name
            .iter()
            .find(|(k, _)| *k == n)
            .map(|(_, v)| v.clone())
    };
    assert_eq!(
        get("LastModifiedTimestamp"),
        Some((a.last_modified_timestamp / 1000).to_string())
    );
    // A refused change changes nothing.
    q.advance_clock(Duration::from_secs(60)).unwrap();
    q.set_attribute("VisibilityTimeout", "999999").unwrap_err();
    assert_eq!(
        q.attributes().last_modified_timestamp,
        a.last_modified_timestamp
    );
}

/// L1: the queue delay is retroactive on FIFO queues: shortening it releases waiting messages,
/// lengthening it delays messages not yet received.
#[test]
fn l1_delay_change_is_retroactive() {
    let q = queue("l1retro", &small().delay(Duration::from_secs(600)));
    send(&q, "g", "a");
    assert!(recv(&q, 1).is_empty());
    q.set_attributes(&QueueSettings::new().delay(Duration::ZERO))
        .unwrap();
    assert_eq!(bodies(&recv_vt(&q, 1, Duration::ZERO)), ["a"]);
    send(&q, "g2", "b");
    q.set_attribute("DelaySeconds", "600").unwrap();
    assert_eq!(q.attributes().delay, Duration::from_secs(600));
    let got = recv(&q, 10);
    assert_eq!(
        bodies(&got),
        ["a"],
        "b (never received) is delayed again; a was received already"
    );
    assert_eq!(counts(&q).2, 1);
}

/// R4: delayed messages do not lock their group; only in-flight ones do. A delayed message
/// behind a deleted head is simply not yet deliverable, and becomes so when its delay ends.
#[test]
fn r4_delayed_messages_lock_nothing() {
    let q = queue("r4delay", &small().delay(Duration::from_millis(200)));
    send(&q, "g", "a");
    sleep(Duration::from_millis(250));
    send(&q, "g", "b");
    send(&q, "h", "c");
    let got = recv_vt(&q, 10, LONG);
    assert_eq!(bodies(&got), ["a"], "b and c are still delayed");
    q.delete(&got[0].receipt_handle).unwrap();
    assert_eq!(counts(&q), (0, 0, 2));
    sleep(Duration::from_millis(250));
    let mut got = bodies(&recv(&q, 10))
        .into_iter()
        .map(str::to_owned)
        .collect::<Vec<_>>();
    got.sort();
    assert_eq!(got, ["b", "c"]);
}

/// S5: a per-message delay is rejected on FIFO queues (only the queue delay exists, L1).
#[test]
fn s5_per_message_delay_is_rejected() {
    let q = queue("s5delay", &small());
    let mut m = SendMessage::new("g", "x");
    m.delay_seconds = Some(5);
    assert!(matches!(
        q.send(&m),
        Err(Error::InvalidParameterValue {
            parameter: "DelaySeconds",
            ..
        })
    ));
}

/// T1: messages older than the retention period disappear, visible or in flight; a later
/// delete with an in-flight message's handle gets the expired-handle error.
#[test]
fn t1_retention_removes_visible_and_in_flight_messages() {
    let q = queue(
        "t1",
        &small().message_retention_period(Duration::from_millis(300)),
    );
    send(&q, "g1", "visible");
    send(&q, "g2", "in-flight");
    let held = recv_vt(&q, 1, LONG);
    assert_eq!(bodies(&held), ["visible"]);
    let held2 = recv_vt(&q, 1, LONG);
    assert_eq!(bodies(&held2), ["in-flight"]);
    q.change_visibility(&held[0].receipt_handle, Duration::ZERO)
        .unwrap();
    assert_eq!(counts(&q), (1, 1, 0));
    sleep(Duration::from_millis(350));
    assert_eq!(counts(&q), (0, 0, 0), "both are gone");
    assert!(recv(&q, 10).is_empty());
    assert!(matches!(
        q.delete(&held2[0].receipt_handle),
        Err(Error::ReceiptHandleExpired { .. })
    ));
    // A sweep (run by an idle receiver, or here by recover) reclaims what nobody received.
    q.recover().unwrap();
    assert_eq!(q.attributes().retention_expiries, 2);
    assert_eq!(q.attributes().active_groups, 0);
}

/// T1, Q5: changing the retention period applies to messages already in the queue.
#[test]
fn t1_retention_change_applies_to_existing_messages() {
    let q = queue("t1change", &small());
    send(&q, "g", "old");
    sleep(Duration::from_millis(120));
    q.set_attribute("MessageRetentionPeriodMs", "100").unwrap();
    assert!(recv(&q, 10).is_empty(), "older than the new period: gone");
    q.set_attributes(&QueueSettings::new().message_retention_period(Duration::from_secs(60)))
        .unwrap();
    send(&q, "g", "new");
    assert_eq!(bodies(&recv(&q, 10)), ["new"]);
}

/// T1: expired messages give their memory back without any receiver (a full class runs
/// recovery, whose sweep removes them).
#[test]
fn t1_expired_messages_are_reclaimed_without_receivers() {
    let cfg = small()
        .maximum_message_size(1024)
        .size_classes(vec![(1488, 4)])
        .size_limit(0) // no growth: the class fills
        .message_retention_period(Duration::from_millis(100));
    let q = queue("t1reclaim", &cfg);
    for i in 0..4 {
        send(&q, &format!("g{i}"), "x");
    }
    assert!(matches!(
        q.send(&SendMessage::new("g9", "y")),
        Err(Error::SizeClassFull { .. })
    ));
    sleep(Duration::from_millis(150));
    send(&q, "g9", "y");
    assert_eq!(bodies(&recv(&q, 10)), ["y"]);
}

/// R8: at the in-flight limit receives return fewer messages, with no error, and a counter
/// records it; deleting makes room again; re-receiving a message that timed out needs none.
#[test]
fn r8_in_flight_limit_shortens_receives() {
    let q = queue("r8", &small().max_in_flight(3));
    for i in 0..5 {
        send(&q, &format!("g{i}"), &format!("m{i}"));
    }
    let got = recv_vt(&q, 10, LONG);
    assert_eq!(got.len(), 3, "limited to 3 in flight");
    assert!(recv_vt(&q, 10, LONG).is_empty(), "no error, just nothing");
    let a = q.attributes();
    assert_eq!((a.max_in_flight, a.in_flight_count), (3, 3));
    assert!(a.in_flight_limit_hits >= 1);
    q.delete(&got[0].receipt_handle).unwrap();
    assert_eq!(
        recv_vt(&q, 10, LONG).len(),
        1,
        "a delete makes room for one"
    );
    q.change_visibility(&got[1].receipt_handle, Duration::ZERO)
        .unwrap();
    let again = recv_vt(&q, 10, LONG);
    assert_eq!(
        again.len(),
        1,
        "a message received before is not new to the count"
    );
    assert_eq!(again[0].body, got[1].body);
}

/// R8: a receive changes the in-flight count once for what it takes, however many it asked
/// for: a receive of up to 10 that finds fewer (a group with 3 messages, then one whose head is
/// in flight, then an empty queue) leaves exactly the messages it took counted, and deletes
/// take them out again.
#[test]
fn r8_in_flight_count_is_what_receives_took() {
    let q = queue("r8count", &small().max_in_flight(100));
    for b in ["a1", "a2", "a3"] {
        send(&q, "a", b);
    }
    let got = recv_vt(&q, 10, LONG);
    assert_eq!(got.len(), 3);
    assert_eq!(
        q.attributes().in_flight_count,
        3,
        "three taken of ten asked"
    );
    send(&q, "a", "a4");
    send(&q, "b", "b1");
    let more = recv_vt(&q, 10, LONG);
    assert_eq!(bodies(&more), ["b1"], "group a's head is in flight (R3)");
    assert_eq!(q.attributes().in_flight_count, 4);
    assert!(recv_vt(&q, 10, LONG).is_empty());
    assert_eq!(
        q.attributes().in_flight_count,
        4,
        "an empty receive counts nothing"
    );
    for m in got.iter().chain(&more) {
        q.delete(&m.receipt_handle).unwrap();
    }
    assert_eq!(q.attributes().in_flight_count, 0);
    assert_eq!(bodies(&recv_vt(&q, 10, LONG)), ["a4"]);
    assert_eq!(q.attributes().in_flight_count, 1);
}

/// R8 with receives again (layout 20 counts a first receive through the lifetime counters:
/// received less received again): a message whose visibility ended and that is received again
/// stays counted once, in flight from its first receive to its delete, whichever receive's
/// handle deletes it; the counters say how it got there.
#[test]
fn r8_a_message_received_again_is_counted_in_flight_once() {
    let q = queue("r8again", &small().max_in_flight(100));
    send(&q, "a", "a1");
    send(&q, "b", "b1");
    let first = recv_vt(&q, 10, LONG);
    assert_eq!(bodies(&first), ["a1", "b1"]);
    assert_eq!(q.attributes().in_flight_count, 2);
    q.change_visibility(&first[0].receipt_handle, Duration::ZERO)
        .unwrap();
    for round in 1..=3u64 {
        let again = recv_vt(&q, 10, LONG);
        assert_eq!(bodies(&again), ["a1"], "round {round}");
        assert_eq!(again[0].receive_count, round as u32 + 1);
        assert_eq!(
            q.attributes().in_flight_count,
            2,
            "round {round}: a receive again adds nothing"
        );
        q.change_visibility(&again[0].receipt_handle, Duration::ZERO)
            .unwrap();
    }
    let last = recv_vt(&q, 10, LONG);
    assert_eq!(bodies(&last), ["a1"]);
    q.delete(&last[0].receipt_handle).unwrap();
    assert_eq!(q.attributes().in_flight_count, 1);
    q.delete(&first[1].receipt_handle).unwrap();
    assert_eq!(q.attributes().in_flight_count, 0);
    let s = q.counters();
    assert_eq!(
        (s.received, s.visibility_expiries, s.deleted),
        (6, 4, 2),
        "two first receives, four again"
    );
}

fn dlq_pair(tag: &str, max_receive_count: u32) -> (TestQueue, TestQueue) {
    let dlq = queue(&format!("{tag}-dlq"), &small_dedup());
    let src = queue(
        tag,
        &small().redrive_policy(RedrivePolicy::new(dlq.name.clone(), max_receive_count)),
    );
    (src, dlq)
}

/// X1, X3, M2, M4, D8, T2, V2: a message received and not deleted before its visibility
/// timeout ends counts as a failed receive (V2); the receive that would deliver it for the
/// (maxReceiveCount+1)-th time moves it instead and does not return it; in the dead-letter
/// queue it keeps id, body, attributes and group, its dedup id is its message id, its receive
/// count goes on, and it names its source.
#[test]
fn x1_message_moves_on_the_receive_after_max_receive_count() {
    let (src, dlq) = dlq_pair("x1", 2);
    let attrs = [MessageAttribute::string("color", "red")];
    let sent = src
        .send(&SendMessage::new("g", "poison").attributes(&attrs))
        .unwrap();
    for k in 1..=2 {
        let got = recv_vt(&src, 10, Duration::ZERO);
        assert_eq!(bodies(&got), ["poison"], "delivery {k}");
        assert_eq!(got[0].receive_count, k);
    }
    assert!(
        recv_vt(&src, 10, Duration::ZERO).is_empty(),
        "moved, not returned"
    );
    assert_eq!(counts(&src), (0, 0, 0));
    assert_eq!(src.attributes().moved_to_dead_letter, 1);
    let got = recv(&dlq, 10);
    assert_eq!(got.len(), 1);
    let m = &got[0];
    assert_eq!(m.message_id, sent.message_id, "M2: the id is kept");
    assert_eq!(m.body, "poison");
    assert_eq!(m.group_id, "g");
    assert_eq!(m.attributes.len(), 1);
    assert_eq!(m.attributes[0].name, "color");
    assert_eq!(m.attributes[0].value, b"red");
    assert_eq!(
        m.dedup_id.as_deref(),
        Some(sent.message_id.to_string().as_str()),
        "D8"
    );
    assert_eq!(m.receive_count, 3, "M4: counting goes on");
    let source = std::fs::canonicalize(src.path().unwrap()).unwrap();
    assert_eq!(
        m.dead_letter_source.as_deref(),
        Some(source.to_str().unwrap())
    );
}

/// X4: moving a group's head unblocks the group; our choice for the [AMB] part: the same
/// receive goes on with the group's next message.
#[test]
fn x4_moving_the_head_unblocks_the_group_at_once() {
    let (src, dlq) = dlq_pair("x4", 1);
    send(&src, "g", "bad");
    send(&src, "g", "good");
    let first = recv_vt(&src, 1, Duration::ZERO);
    assert_eq!(bodies(&first), ["bad"]);
    let got = recv_vt(&src, 10, LONG);
    assert_eq!(
        bodies(&got),
        ["good"],
        "bad moved, good returned by the same receive"
    );
    assert_eq!(bodies(&recv(&dlq, 10)), ["bad"]);
}

/// X2 after the policy: a dead-letter queue's MaximumMessageSize lowered below its source's
/// made a large message's move fail at every receive (the message stuck at its group's head,
/// each receive answering `DeadLetterQueue`); a move now takes what the dead-letter queue's
/// arena holds, whatever its live setting. And the source's MaximumMessageSize raised past
/// its dead-letter queue's is refused, as a policy to such a queue is.
#[test]
fn x2_sizes_changed_after_the_policy_strand_no_message() {
    let dlq = queue("x2-size-dlq", &small_dedup());
    let q = queue(
        "x2-size",
        &small().redrive_policy(RedrivePolicy::new(dlq.name.clone(), 1)),
    );
    dlq.set_attribute("MaximumMessageSize", "1024").unwrap();
    let big = "b".repeat(3000);
    q.send(&SendMessage::new("g", &big)).unwrap();
    assert_eq!(recv_vt(&q, 1, Duration::ZERO).len(), 1);
    assert!(recv(&q, 1).is_empty(), "moved on its second receive (X1)");
    let moved = recv(&dlq, 1);
    assert_eq!(moved[0].body, big);
    // The source may not take larger messages than its dead-letter queue.
    let e = q.set_attribute("MaximumMessageSize", "8192").unwrap_err();
    assert!(matches!(e, Error::InvalidConfig { .. }), "{e:?}");
    assert!(e.to_string().contains(&dlq.name), "{e}");
    dlq.set_attribute("MaximumMessageSize", "8192").unwrap();
    q.set_attribute("MaximumMessageSize", "8192").unwrap();
}

/// X1, X2: a bad redrive target is a clear error when the policy is set, and nothing changes.
#[test]
fn x2_bad_dead_letter_targets_are_rejected() {
    let nodedup = queue("x2-nodedup", &small());
    let missing = unique("x2-missing");
    let q = queue("x2", &small());
    for (target, max) in [(missing.as_str(), 3), (nodedup.name.as_str(), 3)] {
        let r = q.set_attributes(
            &QueueSettings::new().redrive_policy(Some(RedrivePolicy::new(target, max))),
        );
        assert!(matches!(r, Err(Error::DeadLetterQueue { .. })), "{r:?}");
    }
    let r = q.set_attributes(
        &QueueSettings::new().redrive_policy(Some(RedrivePolicy::new(q.name.clone(), 3))),
    );
    assert!(
        matches!(r, Err(Error::DeadLetterQueue { .. })),
        "itself: {r:?}"
    );
    let dlq = queue("x2-ok", &small_dedup());
    for max in [0, 1001] {
        let r = q.set_attributes(
            &QueueSettings::new().redrive_policy(Some(RedrivePolicy::new(dlq.name.clone(), max))),
        );
        assert!(
            matches!(r, Err(Error::InvalidParameterValue { .. })),
            "{max}: {r:?}"
        );
    }
    assert_eq!(q.redrive_policy().unwrap(), None, "nothing changed");
    let r = Queue::create(
        &unique("x2-create"),
        &small().redrive_policy(RedrivePolicy::new(missing.clone(), 3)),
    );
    assert!(matches!(r, Err(Error::DeadLetterQueue { .. })), "{r:?}");
}

/// X1, Q3: the redrive policy is a live setting, in SQS's JSON (maxReceiveCount as a number
/// or a string), seen by every handle; removing it stops moves.
#[test]
fn x1_redrive_policy_is_live_and_takes_sqs_json() {
    let dlq = queue("x1live-dlq", &small_dedup());
    let q = queue("x1live", &small());
    let other = Queue::open(&q.name).unwrap();
    let json = format!(
        r#"{{"deadLetterTargetArn": "{}", "maxReceiveCount": "1"}}"#,
        dlq.name
    );
    other.set_attribute("RedrivePolicy", &json).unwrap();
    let p = q.redrive_policy().unwrap().expect("policy");
    assert_eq!(p.max_receive_count, 1);
    send(&q, "g", "m");
    assert_eq!(recv_vt(&q, 1, Duration::ZERO).len(), 1);
    assert!(recv_vt(&q, 1, Duration::ZERO).is_empty(), "moved");
    assert_eq!(recv(&dlq, 10).len(), 1);
    other.set_attribute("RedrivePolicy", "").unwrap();
    assert_eq!(q.redrive_policy().unwrap(), None);
    send(&q, "g", "n");
    for _ in 0..3 {
        assert_eq!(
            recv_vt(&q, 1, Duration::ZERO).len(),
            1,
            "no policy: no move"
        );
    }
    for bad in ["{", r#"{"maxReceiveCount": 2}"#, r#"{"x": 1}"#] {
        assert!(matches!(
            q.set_attribute("RedrivePolicy", bad),
            Err(Error::InvalidConfig { .. })
        ));
    }
    let json = format!(
        r#"{{"deadLetterTargetArn":"{}","maxReceiveCount":5}}"#,
        dlq.name
    );
    q.set_attribute("RedrivePolicy", &json).unwrap();
    assert_eq!(
        other.redrive_policy().unwrap().unwrap().max_receive_count,
        5
    );
}

/// X6, M2: redrive moves dead-lettered messages back to their source, oldest first, as new
/// messages (new id, receive count from 1), and reports how many.
#[test]
fn x6_redrive_back_to_the_source() {
    let (src, dlq) = dlq_pair("x6", 1);
    for b in ["a", "b", "c"] {
        send(&src, "g", b);
    }
    for _ in 0..3 {
        // Deliver each once (VT 0), then the next receive moves it.
        let _ = recv_vt(&src, 1, Duration::ZERO);
    }
    while !recv_vt(&src, 10, Duration::ZERO).is_empty() {}
    assert_eq!(dlq.attributes().approximate_number_of_messages, 3);
    let old_ids: Vec<_> = {
        let m = dlq
            .receive(&ReceiveOptions::max(10).visibility_timeout(Duration::ZERO))
            .unwrap();
        assert_eq!(bodies(&m), ["a", "b", "c"]);
        m.iter().map(|m| m.message_id).collect()
    };
    let rep = dlq.redrive(&RedriveOptions::default()).unwrap();
    assert_eq!((rep.moved, rep.skipped, rep.cancelled), (3, 0, false));
    assert_eq!(counts(&dlq), (0, 0, 0));
    let back = recv_vt(&src, 10, LONG);
    assert_eq!(bodies(&back), ["a", "b", "c"]);
    assert!(back.iter().all(|m| m.receive_count == 1));
    assert!(
        back.iter().all(|m| !old_ids.contains(&m.message_id)),
        "new ids"
    );
}

/// X6: redrive to a named queue, rate-limited, limited in count, and cancellable.
#[test]
fn x6_redrive_to_a_destination_with_rate_limit_and_cancel() {
    let dlq = queue("x6d-dlq", &small_dedup());
    let dest = queue("x6d-dest", &small());
    for i in 0..6 {
        dlq.send(&SendMessage::new("g", &format!("m{i}")).dedup_id(&format!("d{i}")))
            .unwrap();
    }
    let start = Instant::now();
    // The progress counter, read from another thread while the redrive runs, ends at the
    // report's count (and never passes it on the way).
    let progress = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let watching = Arc::new(AtomicBool::new(true));
    let watcher = {
        let (p, w) = (Arc::clone(&progress), Arc::clone(&watching));
        std::thread::spawn(move || {
            let mut seen = Vec::new();
            while w.load(Ordering::Relaxed) {
                seen.push(p.load(Ordering::Relaxed));
                std::thread::sleep(Duration::from_millis(5));
            }
            seen
        })
    };
    let rep = dlq
        .redrive(&RedriveOptions {
            destination: Some(dest.name.clone()),
            max_per_second: Some(20),
            limit: Some(4),
            cancel: None,
            sources: None,
            progress: Some(Arc::clone(&progress)),
        })
        .unwrap();
    watching.store(false, Ordering::Relaxed);
    let seen = watcher.join().unwrap();
    assert_eq!(rep.moved, 4);
    assert_eq!(progress.load(Ordering::Relaxed), 4);
    assert!(seen.windows(2).all(|w| w[0] <= w[1]) && seen.iter().all(|&n| n <= 4));
    assert!(
        seen.iter().any(|&n| n > 0 && n < 4),
        "seen under way: {seen:?}"
    );
    assert!(
        start.elapsed() >= Duration::from_millis(140),
        "4 messages at 20/s take at least 150 ms"
    );
    assert_eq!(bodies(&recv(&dest, 10)), ["m0", "m1", "m2", "m3"]);
    let cancel = Arc::new(AtomicBool::new(true));
    let rep = dlq
        .redrive(&RedriveOptions {
            destination: Some(dest.name.clone()),
            cancel: Some(cancel),
            ..Default::default()
        })
        .unwrap();
    assert_eq!((rep.moved, rep.cancelled), (0, true));
    assert_eq!(counts(&dlq).0, 2, "cancelled messages are put back");
    // A message without a source and no destination is skipped, not lost, and visible again
    // at once (it was held for 30 s).
    let rep = dlq.redrive(&RedriveOptions::default()).unwrap();
    assert_eq!((rep.moved, rep.skipped), (0, 2));
    assert_eq!((counts(&dlq).0, counts(&dlq).1), (2, 0));
    // Into itself, deduplicating or not: refused before anything moves (it dropped every
    // message as a duplicate of itself; without deduplication, it moved them round for ever).
    for q in [&dlq, &dest] {
        let before = counts(q);
        let err = q
            .redrive(&RedriveOptions {
                destination: Some(q.name.clone()),
                ..Default::default()
            })
            .unwrap_err();
        assert_eq!(err.code(), ErrorCode::InvalidParameterValue, "{err}");
        assert_eq!(counts(q), before, "nothing moved");
    }
    // A copy of a queue's file (its nonce the same) is another queue: a redrive from it into
    // the original is no redrive into itself.
    let copy = std::env::temp_dir().join(format!("shmfifo-x6-copy-{}", std::process::id()));
    std::fs::copy(std::path::Path::new("/dev/shm").join(&dlq.name), &copy).unwrap();
    let from_copy = Queue::open_at(&copy).unwrap();
    let rep = from_copy
        .redrive(&RedriveOptions {
            destination: Some(dlq.name.clone()),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(rep.moved, 2, "the copy's two messages, into the original");
    drop(from_copy);
    Queue::unlink_at(&copy).unwrap();
}

/// X6: a redrive that cannot move a message back (its source queue is gone) puts the messages
/// back at once: they are visible in the dead-letter queue again, not hidden for the
/// redrive's 30 s (reported skipped and unreachable), and a later redrive moves them. A
/// destination named that is not there is the error at once, whether or not a message is
/// there to move.
#[test]
fn x6_a_failed_redrive_puts_its_messages_back_at_once() {
    let (src, dlq) = dlq_pair("x6f", 1);
    for b in ["m0", "m1", "m2"] {
        send(&src, "g", b);
    }
    for _ in 0..3 {
        let _ = recv_vt(&src, 1, Duration::ZERO);
    }
    while !recv_vt(&src, 10, Duration::ZERO).is_empty() {}
    assert_eq!(counts(&dlq), (3, 0, 0));
    // The source goes away: its messages have nowhere to go back to. They stay, visible
    // again at once, and are reported (the redrive failed as a whole before, the messages
    // of every other source stuck behind them).
    let src_name = src.name.clone();
    drop(src);
    let rep = dlq.redrive(&RedriveOptions::default()).unwrap();
    assert_eq!((rep.moved, rep.skipped, rep.unreachable), (0, 3, 3));
    assert_eq!(counts(&dlq), (3, 0, 0), "visible again, none in flight");
    // A named destination that is not there: refused before anything is taken, also where
    // nothing is to move.
    let gone = common::unique("x6f-gone");
    let named = || RedriveOptions {
        destination: Some(gone.clone()),
        ..Default::default()
    };
    let err = dlq.redrive(&named()).unwrap_err();
    assert!(
        matches!(err, shmfifo::Error::QueueDoesNotExist { .. }),
        "{err:?}"
    );
    assert_eq!(counts(&dlq), (3, 0, 0));
    let empty = queue("x6f-empty", &small_dedup());
    let err = empty.redrive(&named()).unwrap_err();
    assert!(
        matches!(err, shmfifo::Error::QueueDoesNotExist { .. }),
        "{err:?}"
    );
    // The source made again: a later redrive moves them.
    let again = Queue::create(&src_name, &small()).unwrap();
    let rep = dlq.redrive(&RedriveOptions::default()).unwrap();
    assert_eq!(rep.moved, 3);
    assert_eq!(bodies(&recv(&again, 10)), ["m0", "m1", "m2"]);
    drop(again);
    let _ = Queue::unlink(&src_name);
}

/// X6 with a source gone: one message whose source queue could not be opened stopped the
/// whole redrive (the messages of every other source stayed, the moves before it went
/// unreported), and a message naming no source was held 30 s, so that a redrive `--to` a
/// queue right after found nothing. Now each such message stays, visible again when the
/// redrive returns; the others move.
#[test]
fn x6_a_missing_source_holds_back_only_its_own_messages() {
    let dlq = queue("x6m-dlq", &small_dedup());
    let policy = || RedrivePolicy::new(dlq.name.clone(), 1);
    let a = queue("x6m-a", &small().redrive_policy(policy()));
    let b = queue("x6m-b", &small().redrive_policy(policy()));
    send(&a, "ga", "from a");
    send(&b, "gb", "from b");
    for q in [&a, &b] {
        let _ = recv_vt(q, 1, Duration::ZERO);
        assert!(recv_vt(q, 1, Duration::ZERO).is_empty(), "moved");
    }
    dlq.send(&SendMessage::new("gx", "no source").dedup_id("x"))
        .unwrap();
    assert_eq!(counts(&dlq).0, 3);
    let a_name = a.name.clone();
    drop(a);
    let rep = dlq.redrive(&RedriveOptions::default()).unwrap();
    assert_eq!((rep.moved, rep.skipped, rep.unreachable), (1, 2, 1));
    assert_eq!(bodies(&recv(&b, 10)), ["from b"]);
    assert_eq!(
        counts(&dlq),
        (2, 0, 0),
        "the two left are visible again at once"
    );
    // A destination given takes them now, not 30 s later.
    let to = queue("x6m-to", &small());
    let rep = dlq
        .redrive(&RedriveOptions {
            destination: Some(to.name.clone()),
            ..Default::default()
        })
        .unwrap();
    assert_eq!((rep.moved, rep.skipped), (2, 0));
    let mut got: Vec<String> = recv(&to, 10).into_iter().map(|m| m.body).collect();
    got.sort();
    assert_eq!(got, ["from a", "no source"]);
    let _ = Queue::unlink(&a_name);
}

/// X6 with a message its destination refuses (larger than the destination's
/// MaximumMessageSize): it stopped the whole redrive, every later one meeting it again. It
/// stays now, and the rest of its group behind it; other groups move.
#[test]
fn x6_a_refused_message_holds_back_only_its_group() {
    let dlq = queue("x6r-dlq", &small_dedup().maximum_message_size(8192));
    let to = queue("x6r-to", &small());
    to.set_attribute("MaximumMessageSize", "1024").unwrap();
    let big = "b".repeat(3000);
    for (g, body, d) in [
        ("g", "g1", "1"),
        ("g", big.as_str(), "2"),
        ("g", "g3", "3"),
        ("h", "h1", "4"),
    ] {
        dlq.send(&SendMessage::new(g, body).dedup_id(d)).unwrap();
    }
    let rep = dlq
        .redrive(&RedriveOptions {
            destination: Some(to.name.clone()),
            ..Default::default()
        })
        .unwrap();
    assert_eq!((rep.moved, rep.skipped), (2, 2), "{rep:?}");
    let mut got: Vec<String> = recv(&to, 10).into_iter().map(|m| m.body).collect();
    got.sort();
    assert_eq!(got, ["g1", "h1"]);
    // The refused one and the one behind it, in order, visible again at once.
    let left = recv(&dlq, 10);
    assert_eq!(left.len(), 2);
    assert_eq!((left[0].body.len(), left[1].body.as_str()), (3000, "g3"));
}

/// Q3–Q5: the visibility default and content-based dedup are live settings seen by every
/// handle; settings fixed at creation and unknown names are clear errors.
#[test]
fn live_settings_apply_to_every_handle_and_fixed_ones_are_refused() {
    let q = queue("live", &small_dedup());
    let other = Queue::open(&q.name).unwrap();
    other.set_attribute("VisibilityTimeout", "7").unwrap();
    assert_eq!(q.attributes().visibility_timeout, Duration::from_secs(7));
    assert!(matches!(
        q.send(&SendMessage::new("g", "x")),
        Err(Error::InvalidParameterValue { .. })
    ));
    other
        .set_attributes(&QueueSettings::new().content_based_deduplication(true))
        .unwrap();
    assert!(q.attributes().content_based_deduplication);
    q.send(&SendMessage::new("g", "x")).unwrap();
    assert!(q.send(&SendMessage::new("g", "x")).unwrap().duplicate);
    for name in ["DeduplicationScope", "FifoThroughputLimit", "MaxInFlight"] {
        assert!(matches!(
            q.set_attribute(name, "1"),
            Err(Error::AttributeNotMutable { .. })
        ));
    }
    assert!(matches!(
        q.set_attribute("NoSuchThing", "1"),
        Err(Error::InvalidAttributeName { .. })
    ));
    // Out of range: named by its SQS name in SQS's words, by either path (it said "invalid
    // setting visibility_timeout: at most 12 hours", the config's field).
    let e = q.set_attribute("VisibilityTimeout", "43201").unwrap_err();
    assert!(matches!(e, Error::InvalidConfig { .. }), "{e:?}");
    assert_eq!(e.sqs_code(), "InvalidAttributeValue");
    assert!(
        e.to_string().contains(
            "Invalid value for the parameter VisibilityTimeout. Reason: at most 43,200 seconds"
        ),
        "{e}"
    );
    for (name, value) in [
        ("VisibilityTimeout", "99999"),
        ("DelaySeconds", "901"),
        ("MessageRetentionPeriod", "1209601"),
        ("ReceiveMessageWaitTimeSeconds", "21"),
        ("MaximumMessageSize", "1023"),
    ] {
        let e = small()
            .from_sqs_attributes([("FifoQueue", "true"), (name, value)])
            .unwrap_err();
        assert_eq!(e.sqs_code(), "InvalidAttributeValue", "{name}");
        assert!(
            e.to_string().contains(&format!(
                "Invalid value for the parameter {name}: \"{value}\". Reason:"
            )),
            "{e}"
        );
    }
    // A value that does not parse: SQS's InvalidAttributeValue, naming the attribute.
    let e = q.set_attribute("DelaySeconds", "soon").unwrap_err();
    assert_eq!(e.sqs_code(), "InvalidAttributeValue");
    assert!(e.to_string().contains("DelaySeconds"), "{e}");
    // Q2: FifoQueue=true is a no-op on a FIFO queue; false would change its type.
    q.set_attribute("FifoQueue", "true").unwrap();
    let e = q.set_attribute("FifoQueue", "false").unwrap_err();
    assert_eq!(e.sqs_code(), "InvalidAttributeValue");
    assert!(
        e.to_string()
            .contains("Modifying queue type is not supported"),
        "{e}"
    );
    assert_eq!(
        other.attributes().visibility_timeout,
        Duration::from_secs(7)
    );
    let _ = QueueConfig::new();
}

/// Q3, TP2, Q7: `FifoThroughputLimit` was accepted and thrown away (always read back as
/// `perQueue`), so a `CreateQueue` of a high-throughput queue done again (every start of an
/// application, an infrastructure tool) found a different queue; and the fixed attributes
/// set to the values they have were refused. Now the limit is kept and read back, and a fixed
/// attribute set to its own value changes nothing and succeeds.
#[test]
fn q3_fifo_throughput_limit_reads_back_as_set_and_fixed_values_may_be_set_again() {
    let ht = [
        ("DeduplicationScope", "messageGroup"),
        ("FifoThroughputLimit", "perMessageGroupId"),
    ];
    let cfg = small().from_sqs_attributes(ht).unwrap();
    let q = queue("q3ht", &cfg);
    let attrs = q.attributes();
    assert!(attrs.per_message_group_throughput);
    let sqs = attrs.sqs_attributes();
    for (name, value) in ht {
        assert!(
            sqs.iter().any(|(n, v)| *n == name && v == value),
            "{name}: {sqs:?}"
        );
    }
    // Reopened, it is still so (kept in the file).
    let again = Queue::open_at(q.path().unwrap()).unwrap();
    assert!(again.attributes().per_message_group_throughput);
    // The values it has: accepted, nothing changes; others: fixed.
    q.set_attributes_by_name(ht).unwrap();
    assert!(matches!(
        q.set_attribute("FifoThroughputLimit", "perQueue"),
        Err(Error::AttributeNotMutable { .. })
    ));
    // A queue of the default attributes reads perQueue, and perMessageGroupId needs the
    // message-group scope however it is asked for.
    let plain = queue("q3plain", &small());
    assert!(plain
        .attributes()
        .sqs_attributes()
        .contains(&("FifoThroughputLimit", "perQueue".to_owned())));
    plain
        .set_attribute("FifoThroughputLimit", "perQueue")
        .unwrap();
    let in_flight = plain.attributes().max_in_flight.to_string();
    plain.set_attribute("MaxInFlight", &in_flight).unwrap();
    assert!(matches!(
        small().per_message_group_throughput(true).validate(),
        Err(Error::InvalidConfig {
            setting: "per_message_group_throughput",
            ..
        })
    ));
}

/// R11: a receive retried with the same attempt id returns the same messages and receipt
/// handles and restarts their visibility, without counting another receive.
#[test]
fn r11_retry_with_attempt_id_returns_the_same_batch() {
    let q = queue("r11", &small());
    for b in ["a", "b", "c"] {
        send(&q, "g", b);
    }
    let opts = ReceiveOptions::max(2).visibility_timeout(Duration::from_millis(400));
    let first = q.receive_with_attempt_id(&opts, "try-1").unwrap();
    assert_eq!(bodies(&first), ["a", "b"]);
    sleep(Duration::from_millis(250));
    let again = q.receive_with_attempt_id(&opts, "try-1").unwrap();
    assert_eq!(
        again, first,
        "same messages, same handles, same receive counts"
    );
    sleep(Duration::from_millis(250));
    // 500 ms after the first receive: its timeout (400 ms) has passed, but the retry restarted it.
    assert!(recv(&q, 10).is_empty(), "still in flight");
    for m in &again {
        q.delete(&m.receipt_handle).unwrap();
    }
    // After a delete, the id no longer replays: a fresh receive.
    let fresh = q.receive_with_attempt_id(&opts, "try-1").unwrap();
    assert_eq!(bodies(&fresh), ["c"]);
    assert_ne!(fresh[0].receipt_handle, first[0].receipt_handle);
}

/// R11 on a queue made to keep no attempt records (`attempt_entries(0)`): a receive with an
/// attempt id was a plain receive, so its retry took other messages while the first stayed
/// in flight. Now it is refused at once, and nothing is taken.
#[test]
fn r11_an_attempt_id_on_a_queue_without_records_is_refused() {
    let q = queue("r11none", &small().attempt_entries(0));
    send(&q, "g", "x");
    let r = q.receive_with_attempt_id(&ReceiveOptions::max(10), "a1");
    assert!(
        matches!(
            r,
            Err(Error::InvalidParameterValue {
                parameter: "ReceiveRequestAttemptId",
                ..
            })
        ),
        "{r:?}"
    );
    assert_eq!(counts(&q), (1, 0, 0), "nothing taken");
    assert_eq!(q.attributes().attempt_entries, 0);
}

/// R11, R1: a retry asking for fewer messages than the recorded receive returned is a fresh
/// receive, never a response larger than its MaxNumberOfMessages (found by the C ABI fuzz
/// target: the replay wrote past the caller's array).
#[test]
fn r11_a_retry_with_a_smaller_maximum_never_returns_more() {
    let q = queue("r11max", &small());
    for g in ["g1", "g2", "g3", "g4"] {
        send(&q, g, g);
    }
    let three = ReceiveOptions::max(3).visibility_timeout(Duration::from_secs(30));
    let first = q.receive_with_attempt_id(&three, "try-max").unwrap();
    assert_eq!(first.len(), 3);
    let one = ReceiveOptions::max(1).visibility_timeout(Duration::from_secs(30));
    let again = q.receive_with_attempt_id(&one, "try-max").unwrap();
    assert_eq!(again.len(), 1, "at most MaxNumberOfMessages");
    assert!(
        first
            .iter()
            .all(|m| m.receipt_handle != again[0].receipt_handle),
        "a fresh receive: the recorded messages are still in flight"
    );
}

/// R11: a visibility change, a timeout or another id each make the retry a fresh receive;
/// an invalid id is rejected like other ids.
#[test]
fn r11_changed_messages_make_a_fresh_receive() {
    let q = queue("r11b", &small());
    send(&q, "g", "a");
    send(&q, "h", "b");
    let opts = ReceiveOptions::max(1).visibility_timeout(LONG);
    let first = q.receive_with_attempt_id(&opts, "x").unwrap();
    q.change_visibility(&first[0].receipt_handle, Duration::ZERO)
        .unwrap();
    let second = q.receive_with_attempt_id(&opts, "x").unwrap();
    assert_eq!(second.len(), 1);
    assert_ne!(second[0].receipt_handle, first[0].receipt_handle, "fresh");
    let other = q.receive_with_attempt_id(&opts, "y").unwrap();
    assert_eq!(other.len(), 1);
    assert_ne!(other[0].body, second[0].body, "another id: another receive");
    let short = ReceiveOptions::max(1).visibility_timeout(Duration::from_millis(50));
    let z = q.receive_with_attempt_id(&short, "z");
    assert!(z.unwrap().is_empty(), "everything is in flight");
    for bad in ["", "has space", &"x".repeat(129)] {
        assert!(matches!(
            q.receive_with_attempt_id(&opts, bad),
            Err(Error::InvalidParameterValue { .. })
        ));
    }
}

/// X1 with attributes at the size limit (a fuzzing find): a message as large as the queue
/// allows, attributes included, moves to a dead-letter queue of the same maximum size (sizes
/// are counted as `send` counts them, without the arena's attribute framing).
#[test]
fn x1_a_message_at_the_size_limit_moves_with_its_attributes() {
    let (src, dlq) = dlq_pair("x1size", 1);
    let attrs = [
        MessageAttribute::string("a", "1"),
        MessageAttribute::string("b", "2"),
    ];
    // small() has maximum_message_size 4096; "a" "String" "1" twice is 16 bytes.
    let body = "x".repeat(4096 - 16);
    src.send(&SendMessage::new("g", &body).attributes(&attrs))
        .expect("at the limit");
    assert_eq!(recv_vt(&src, 1, Duration::ZERO).len(), 1);
    assert!(recv(&src, 10).is_empty(), "moved");
    let moved = recv(&dlq, 10);
    assert_eq!(moved.len(), 1);
    assert_eq!(moved[0].body.len(), body.len());
    assert_eq!(moved[0].attributes.len(), 2);
}

/// X1, our choice where SQS cannot fail: a move to a dead-letter queue that is gone fails; the
/// receive returns `DeadLetterQueue` at once (a fuzzing find: it used to retry the group
/// forever), the message stays, and other groups are still served.
#[test]
fn x1_a_failed_move_returns_an_error_and_serves_other_groups() {
    let (src, dlq) = dlq_pair("x1gone", 1);
    src.send(&SendMessage::new("poison", "p")).unwrap();
    assert_eq!(recv_vt(&src, 1, Duration::ZERO).len(), 1);
    drop(dlq); // unlinks the dead-letter queue
    let t = Instant::now();
    let r = src.receive(&ReceiveOptions::max(10));
    assert!(matches!(r, Err(Error::DeadLetterQueue { .. })), "{r:?}");
    assert!(t.elapsed() < Duration::from_secs(5));
    src.send(&SendMessage::new("other", "o")).unwrap();
    let mut got = Vec::new();
    for _ in 0..3 {
        if let Ok(ms) = src.receive(&ReceiveOptions::max(10)) {
            got.extend(ms);
        }
    }
    assert_eq!(bodies(&got), ["o"], "other groups flow");
    assert_eq!(counts(&src).0, 1, "the poison message stays");
}

/// X1: a dead-letter queue deleted after a move is gone for the next move too. A handle kept
/// the queue it had opened for its first move, and moved every later message into the removed
/// file (counted as moved, read by nobody), and into it still once a queue was created again
/// under the name: now a move goes to what the policy's name names, or leaves the message
/// where it is, as a queue never opened does.
#[test]
fn x1_a_dead_letter_queue_deleted_after_a_move_is_not_moved_into() {
    let (src, dlq) = dlq_pair("x1again", 1);
    let poison = |body: &str| {
        src.send(&SendMessage::new("poison", body)).unwrap();
        assert_eq!(bodies(&recv_vt(&src, 1, Duration::ZERO)), [body]);
    };
    poison("first");
    assert!(recv(&src, 10).is_empty(), "moved on its second receive");
    assert_eq!(counts(&dlq).0, 1);
    let name = dlq.name.clone();
    drop(dlq); // unlinks the dead-letter queue
    poison("second");
    let r = src.receive(&ReceiveOptions::max(10));
    assert!(matches!(r, Err(Error::DeadLetterQueue { .. })), "{r:?}");
    assert_eq!(counts(&src).0, 1, "the message stays");
    // Created again under the name: the policy's queue, moved into.
    let again = TestQueue {
        q: Queue::create(&name, &small_dedup()).unwrap(),
        name,
    };
    assert!(recv(&src, 10).is_empty(), "moved now");
    assert_eq!(counts(&src).0, 0);
    assert_eq!(bodies(&recv(&again, 10)), ["second"]);
}

/// Q4, S6, R5: `MaximumMessageSize` and `ReceiveMessageWaitTimeSeconds` change live, for every
/// process, within what the arena was created for (SQS lets both change; the arena's size
/// classes bound the first).
#[test]
fn maximum_message_size_and_wait_time_are_live() {
    let q = queue("live-size", &small().maximum_message_size(4096));
    let other = Queue::open(&q.name).unwrap();
    let limit = q.maximum_message_size_limit();
    assert!(limit >= 4096);
    q.set_attribute("MaximumMessageSize", "1024").unwrap();
    assert_eq!(other.maximum_message_size(), 1024);
    assert_eq!(other.attributes().maximum_message_size, 1024);
    let big = "x".repeat(2000);
    let e = other.send(&SendMessage::new("g", &big)).unwrap_err();
    assert_eq!(e.sqs_code(), "InvalidParameterValue");
    q.set_attribute("MaximumMessageSize", &limit.to_string())
        .unwrap();
    other.send(&SendMessage::new("g", &big)).unwrap();
    let e = q
        .set_attribute("MaximumMessageSize", &(limit + 1).to_string())
        .unwrap_err();
    assert_eq!(e.sqs_code(), "InvalidAttributeValue");
    assert!(e.to_string().contains("created for"), "{e}");
    assert!(q.set_attribute("MaximumMessageSize", "1023").is_err());
    // A receive that gives no wait uses the queue's, set from another handle.
    q.set_attribute("ReceiveMessageWaitTimeSeconds", "1")
        .unwrap();
    assert_eq!(
        other.attributes().receive_message_wait_time,
        Duration::from_secs(1)
    );
    recv(&other, 1); // takes the message sent above
    let start = std::time::Instant::now();
    assert!(other.receive(&ReceiveOptions::max(1)).unwrap().is_empty());
    assert!(start.elapsed() >= Duration::from_millis(900));
    let e = q
        .set_attribute("ReceiveMessageWaitTimeSeconds", "21")
        .unwrap_err();
    assert_eq!(e.sqs_code(), "InvalidAttributeValue");
}

/// A receive after one that found nothing looks first and answers an empty queue before it
/// sets up (`receive::idle`), but only when nothing is due: a receiver polling without a wait
/// takes, at its first poll after, a message sent between two polls, one whose visibility
/// timeout ended (V1, R4: found by the sweep the ended deadline makes due), and one whose
/// queue delay passed (L1), all on the queue's clock.
#[test]
fn a_receiver_polling_an_empty_queue_sees_what_becomes_visible() {
    let cfg = small_dedup().test_clock(true);
    let q = queue("idle-poll", &cfg);
    let poll = ReceiveOptions::max(1)
        .wait(Duration::ZERO)
        .visibility_timeout(Duration::from_secs(30));
    let empty_polls = |why: &str| {
        for _ in 0..3 {
            assert!(q.receive(&poll).unwrap().is_empty(), "{why}");
        }
    };
    empty_polls("nothing sent yet");
    q.send(&SendMessage::new("g", "a").dedup_id("a")).unwrap();
    let a = q.receive(&poll).unwrap();
    assert_eq!(
        bodies(&a),
        ["a"],
        "sent between two polls: taken at the next"
    );
    empty_polls("R3: in flight, its group locked");
    q.advance_clock(Duration::from_secs(30) - Duration::from_millis(1))
        .unwrap();
    empty_polls("V1: visible a millisecond early");
    q.advance_clock(Duration::from_millis(1)).unwrap();
    let again = q.receive(&poll).unwrap();
    assert_eq!(bodies(&again), ["a"], "V1: visible at the first poll after");
    assert_eq!(again[0].message_id, a[0].message_id);
    assert_eq!(again[0].receive_count, 2);
    q.delete(&again[0].receipt_handle).unwrap();
    empty_polls("deleted");

    q.set_attribute("DelaySeconds", "5").unwrap();
    q.send(&SendMessage::new("h", "late").dedup_id("late"))
        .unwrap();
    empty_polls("L1: delayed");
    q.advance_clock(Duration::from_secs(5)).unwrap();
    let late = q.receive(&poll).unwrap();
    assert_eq!(
        bodies(&late),
        ["late"],
        "L1: visible at the first poll after"
    );
    q.delete(&late[0].receipt_handle).unwrap();
    empty_polls("drained");
}

/// A queue on a test clock (`QueueConfig::test_clock`): every timer of the contract runs on
/// the queue's time, moved by `advance_clock` from any handle; waits stay real time.
#[test]
fn a_test_clock_runs_every_timer_without_waiting() {
    let cfg = small_dedup().test_clock(true);
    let q = queue("test-clock", &cfg);
    let other = Queue::open(&q.name).unwrap();
    let hour = Duration::from_secs(3600);
    assert_eq!(q.attributes().test_clock_ms, Some(1));

    // V1/R4: a 12-hour visibility timeout ends when the clock passes it, not before.
    q.send(&SendMessage::new("g", "a").dedup_id("a")).unwrap();
    let a = q
        .receive(&ReceiveOptions::max(1).visibility_timeout(12 * hour))
        .unwrap();
    q.advance_clock(12 * hour - Duration::from_millis(1))
        .unwrap();
    assert!(recv(&other, 1).is_empty(), "visible a millisecond early");
    other.advance_clock(Duration::from_millis(1)).unwrap();
    let again = recv(&q, 1);
    assert_eq!(again[0].message_id, a[0].message_id);
    assert_eq!(again[0].receive_count, 2);
    // M3: timestamps follow the queue's clock.
    assert_eq!(
        again[0].first_receive_timestamp - a[0].sent_timestamp,
        0,
        "first received at its sending instant"
    );
    q.delete(&again[0].receipt_handle).unwrap();
    let b = q.send(&SendMessage::new("g", "b").dedup_id("b")).unwrap();
    let got = recv(&q, 1);
    assert_eq!(got[0].message_id, b.message_id);
    assert_eq!(
        got[0].sent_timestamp - a[0].sent_timestamp,
        12 * 3600 * 1000
    );
    q.delete(&got[0].receipt_handle).unwrap();

    // D1: the 5-minute dedup interval ends on the queue's clock.
    let first = q.send(&SendMessage::new("g", "c").dedup_id("c")).unwrap();
    q.advance_clock(Duration::from_secs(299)).unwrap();
    assert!(
        q.send(&SendMessage::new("g", "c").dedup_id("c"))
            .unwrap()
            .duplicate
    );
    q.advance_clock(Duration::from_secs(1)).unwrap();
    let fresh = q.send(&SendMessage::new("g", "c").dedup_id("c")).unwrap();
    assert!(!fresh.duplicate && fresh.message_id != first.message_id);
    q.purge().unwrap();

    // L1: a 15-minute queue delay passes at once.
    q.set_attribute("DelaySeconds", "900").unwrap();
    q.send(&SendMessage::new("g", "late").dedup_id("late"))
        .unwrap();
    assert_eq!(q.attributes().approximate_number_of_messages_delayed, 1);
    assert!(recv(&q, 1).is_empty());
    q.advance_clock(Duration::from_secs(900)).unwrap();
    assert_eq!(bodies(&recv_vt(&q, 1, Duration::ZERO)), ["late"]);
    q.set_attribute("DelaySeconds", "0").unwrap();

    // T1: retention removes a message once the clock passes it.
    q.set_attribute("MessageRetentionPeriod", "60").unwrap();
    q.advance_clock(Duration::from_secs(60)).unwrap();
    assert!(recv(&q, 1).is_empty());
    assert_eq!(q.attributes().approximate_number_of_messages, 0);
    q.set_attribute("MessageRetentionPeriod", "345600").unwrap();

    // R11: the 5-minute attempt-id window.
    q.send(&SendMessage::new("g", "job").dedup_id("job"))
        .unwrap();
    let opts = ReceiveOptions::max(1).visibility_timeout(hour);
    let r1 = q.receive_with_attempt_id(&opts, "try").unwrap();
    assert_eq!(
        q.receive_with_attempt_id(&opts, "try").unwrap()[0].receipt_handle,
        r1[0].receipt_handle
    );
    q.advance_clock(Duration::from_secs(301)).unwrap();
    assert!(q.receive_with_attempt_id(&opts, "try").unwrap().is_empty());

    // A long poll wakes when the clock moves past the expiry it waits for (H5-like wake);
    // its wait time itself is real time.
    let waiter = {
        let name = q.name.clone();
        std::thread::spawn(move || {
            let w = Queue::open(&name).unwrap();
            let start = Instant::now();
            let got = w
                .receive(&ReceiveOptions::max(1).wait(Duration::from_secs(10)))
                .unwrap();
            (got.len(), start.elapsed())
        })
    };
    sleep(Duration::from_millis(100));
    q.advance_clock(hour).unwrap();
    let (n, waited) = waiter.join().unwrap();
    assert_eq!(n, 1);
    assert!(waited < Duration::from_secs(5), "woke after {waited:?}");
    let start = Instant::now();
    assert!(q
        .receive(&ReceiveOptions::max(1).wait(Duration::from_millis(200)))
        .unwrap()
        .is_empty());
    let waited = start.elapsed();
    assert!(
        waited >= Duration::from_millis(190) && waited < Duration::from_secs(5),
        "{waited:?}"
    );

    // A real clock cannot be advanced.
    let real = queue("real-clock", &small());
    assert_eq!(real.attributes().test_clock_ms, None);
    assert_eq!(
        real.advance_clock(hour).unwrap_err().sqs_code(),
        "InvalidAttributeValue"
    );
}

/// CloudWatch's `ApproximateAgeOfOldestMessage`: the age of the oldest message still in the
/// queue, in flight ones included; zero when empty (on a test clock, exact).
#[test]
fn the_age_of_the_oldest_message() {
    let q = queue("oldest", &small().test_clock(true));
    assert_eq!(
        q.attributes().approximate_age_of_oldest_message,
        Duration::ZERO
    );
    q.send(&SendMessage::new("a", "first")).unwrap();
    q.advance_clock(Duration::from_secs(60)).unwrap();
    q.send(&SendMessage::new("b", "second")).unwrap();
    q.advance_clock(Duration::from_secs(30)).unwrap();
    assert_eq!(
        q.attributes().approximate_age_of_oldest_message,
        Duration::from_secs(90)
    );
    // In flight still counts; deleted does not.
    let got = recv_vt(&q, 1, Duration::from_secs(3600));
    assert_eq!(got[0].body, "first");
    assert_eq!(
        q.attributes().approximate_age_of_oldest_message,
        Duration::from_secs(90)
    );
    q.delete(&got[0].receipt_handle).unwrap();
    assert_eq!(
        q.attributes().approximate_age_of_oldest_message,
        Duration::from_secs(30)
    );
}

/// Q5: several attributes by name apply together or not at all (our choice: the request is
/// checked before anything changes), and a redrive policy set with a new
/// MaximumMessageSize is checked against that new size: the dead-letter queue must take what
/// the queue will take.
#[test]
fn attributes_set_together_are_checked_together() {
    let dlq = queue("together-dlq", &small_dedup().maximum_message_size(1024));
    let policy = format!(
        "{{\"deadLetterTargetArn\":\"{}\",\"maxReceiveCount\":3}}",
        dlq.name
    );
    // Shrunk to the dead-letter queue's size in the same request: taken.
    let q = queue("together", &small());
    q.set_attributes_by_name([("MaximumMessageSize", "1024"), ("RedrivePolicy", &policy)])
        .unwrap();
    assert_eq!(q.maximum_message_size(), 1024);
    assert!(q.attributes().redrive_policy.is_some());
    // Grown past it in the same request: refused, and nothing changes.
    let r = q.set_attributes_by_name([
        ("MaximumMessageSize", "4096"),
        ("RedrivePolicy", &policy),
        ("DelaySeconds", "7"),
    ]);
    assert!(matches!(r, Err(Error::DeadLetterQueue { .. })), "{r:?}");
    assert_eq!(q.maximum_message_size(), 1024);
    assert_eq!(q.attributes().delay, Duration::ZERO);
    // One bad value among good ones: none applies.
    let r = q.set_attributes_by_name([("DelaySeconds", "7"), ("VisibilityTimeout", "-5")]);
    assert_eq!(r.unwrap_err().sqs_code(), "InvalidAttributeValue");
    assert_eq!(q.attributes().delay, Duration::ZERO);
}
