//! Models of the quarantine of a damaged group: a recoverer that marks the
//! group, closes its list, waits for its senders and frees its slots, racing with a sender
//! appending to the same group, and stopping (dying) at each of its steps; a second recoverer
//! then resumes the quarantine. Nothing is lost silently: every message sent is delivered or
//! counted as quarantined, no slot leaks, and the sender never sees `Corrupted`.
#![cfg(shmfifo_loom)]

use shmfifo::protocol::node;
use shmfifo_loom_tests::*;

/// Sends "a" to group "g", then corrupts the group's `head`: a node index past every slot
/// and sentinel, so its list cannot be walked.
fn damaged_g(a: &Arena<'_>, env: &MockEnv) {
    send(a, env, 0, "g", b"a").unwrap();
    let (g, _) = shmfifo::protocol::group::find(a, hash(b"g"), b"g")
        .unwrap()
        .expect("g is active");
    a.groups[g as usize]
        .head
        .store(node::pack(0, 0x00FF_FF00), Ordering::SeqCst);
}

/// Group "g" holds "a" and its `head` is corrupted (it names a node that does not exist).
/// Participant 1 quarantines it and dies at its `k`-th step; participant 2 meanwhile sends
/// "b" to "g" (onto the damaged list before the mark, or to a fresh group after it).
/// Participant 0 then recovers (settling 1's leftovers) and quarantines again, resuming what 1
/// left. Afterwards: "a" was never delivered; "b" was delivered or counted as quarantined;
/// the quarantine count covers "a"; every slot is free once the queue is drained.
#[test]
fn a_quarantine_racing_a_sender_and_dying_at_each_step_loses_nothing_silently() {
    for k in 0..8 {
        model(move || {
            let h = arena(3, 2, 4);
            let env = Arc::new(MockEnv::default());
            env.advance(1);
            let a = h.arena();
            damaged_g(&a, &env);
            let (h1, e1, h2, e2) = (h.clone(), env.clone(), h.clone(), env.clone());
            let (_, sent_b) = par(
                move || {
                    as_participant(&e1.clone(), 1, Some(k), || {
                        let _ = quarantine_all(&h1.arena(), &e1, 1);
                    })
                },
                move || send(&h2.arena(), &e2, 2, "g", b"b"),
            );
            assert!(
                !matches!(sent_b, Err(Fault::Corrupted(_))),
                "the sender is not told Corrupted: {sent_b:?}"
            );
            // Participant 1 stopped at step k or finished; either way it is gone now.
            env.kill(1);
            recovery::recover(&a, &*env, me(0)).unwrap();
            quarantine_all(&a, &env, 0).unwrap();
            let got = drain(&a, &env, 0);
            assert!(
                !got.contains(&b"a".to_vec()),
                "the damaged group's message was not delivered"
            );
            let counted = a.hdr.quarantine.0.messages.load(Ordering::SeqCst);
            assert!(counted >= 1, "the quarantine counted \"a\"");
            if sent_b.is_ok() {
                assert!(
                    got.contains(&b"b".to_vec()) || counted >= 2,
                    "\"b\" was delivered or counted as quarantined: {got:?}, {counted}"
                );
            }
            assert_eq!(
                a.hdr.quarantine.0.groups.load(Ordering::SeqCst),
                1,
                "one group quarantined, once"
            );
            assert_clean(&a);
        });
    }
}

/// As above, but participant 1 stops forever at its `k`-th step and stays alive (SIGSTOP):
/// nothing it holds can be taken over. Participant 2's send to "g" is never `Corrupted` (a
/// marked group is looked up afresh), and participant 0's recovery and quarantine pass go on
/// around it: "a" is never delivered, and a message sent after the pass to a new group is.
#[test]
fn a_quarantine_stopped_forever_blocks_nothing_else() {
    for k in 0..8 {
        model(move || {
            let h = arena(3, 2, 6);
            let env = Arc::new(MockEnv::default());
            env.advance(1);
            let a = h.arena();
            damaged_g(&a, &env);
            let (h1, e1, h2, e2) = (h.clone(), env.clone(), h.clone(), env.clone());
            let (_, sent_b) = par(
                move || {
                    crash::arm(k);
                    // Stopped (not dead): whatever it holds stays held.
                    let _ = quarantine_all(&h1.arena(), &e1, 1);
                },
                move || send(&h2.arena(), &e2, 2, "g", b"b"),
            );
            assert!(
                !matches!(sent_b, Err(Fault::Corrupted(_))),
                "the sender is not told Corrupted: {sent_b:?}"
            );
            recovery::recover(&a, &*env, me(0)).unwrap();
            let pass = quarantine_all(&a, &env, 0);
            assert!(
                matches!(pass, Ok(_) | Err(Fault::Busy(_))),
                "the pass goes on around the stopped one: {pass:?}"
            );
            send(&a, &env, 0, "h", b"c").expect("a new group is served");
            let got = drain(&a, &env, 0);
            assert!(
                !got.contains(&b"a".to_vec()),
                "the damaged group's message was not delivered"
            );
            assert!(
                got.contains(&b"c".to_vec()),
                "the new group is served: {got:?}"
            );
        });
    }
}

/// A quarantine's `finish` races a receipt holder's delete of the group's message in flight
/// (the holder received "a" before the group's `head` was damaged). Whichever way the delete
/// and `finish`'s removal interleave, every slot is free afterwards: a removal that lost to
/// the delete looks at the word again and frees the deleted slot, where it once skipped it
/// (the group is a plain tombstone then, which no later pass looks at: the slot leaked).
#[test]
fn a_quarantine_racing_a_receipt_holders_delete_frees_every_slot() {
    model(|| {
        let h = arena(3, 2, 2);
        let env = Arc::new(MockEnv::default());
        env.advance(1);
        let a = h.arena();
        send(&a, &env, 0, "g", b"a").unwrap();
        let got = recv(&a, &env, 2, 1, 1_000).unwrap();
        assert_eq!(got.len(), 1);
        let handle = got[0].0;
        let (g, _) = shmfifo::protocol::group::find(&a, hash(b"g"), b"g")
            .unwrap()
            .expect("g is active");
        a.groups[g as usize]
            .head
            .store(node::pack(0, 0x00FF_FF00), Ordering::SeqCst);
        let (h1, e1, h2, e2) = (h.clone(), env.clone(), h.clone(), env.clone());
        let (q, deleted) = par(
            move || quarantine_all(&h1.arena(), &e1, 1),
            move || handle::delete(&h2.arena(), &*e2, me(2), handle),
        );
        q.unwrap();
        assert!(
            matches!(deleted, Ok(()) | Err(Fault::Expired)),
            "{deleted:?}"
        );
        assert_clean(&a);
    });
}
