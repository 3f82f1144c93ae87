//! Models of the read-only operator views: `peek` walks a group's list without its
//! claim while a receiver takes, deletes and frees its messages and a producer reuses the
//! freed slot. Whatever the interleaving, and wherever the receiver stops forever, a peek
//! terminates and returns a snapshot a receive could have returned at some instant: the
//! group's visible prefix, never a torn or reused slot, never a message twice.
#![cfg(shmfifo_loom)]

use shmfifo::protocol::inspect;
use shmfifo_loom_tests::*;

type Env = Arc<MockEnv>;

fn setup() -> (Arc<HeapArena>, Env) {
    // One group, two 16-byte slots: "c" can only be sent into the slot "a" leaves.
    let h = arena(3, 1, 2);
    let env: Env = Arc::new(MockEnv::default());
    env.advance(1);
    (h, env)
}

/// Peeks as an observer (not a registered participant): the `(index, incarnation)` of each
/// message copied. Payload bytes are raw memory, which loom does not model: a model checks
/// the protocol on the atomics (which message, in which state, when), and the copy's
/// consistency rests on the sequence-lock fences (SYNC POINT(peek-seqlock)).
fn peek(a: &Arena<'_>, env: &MockEnv) -> Vec<(u32, u32)> {
    inspect::peek(a, env, 10, &mut |t| Ok((t.idx, t.inc)))
        .expect("peek")
        .0
}

/// Names the messages of a peek from the identities their sends returned.
fn names(seen: &[(u32, u32)], sent: &[(&'static str, send::Sent)]) -> Vec<&'static str> {
    seen.iter()
        .map(|&(idx, inc)| {
            sent.iter()
                .find(|(_, s)| (s.idx, s.inc) == (idx, inc))
                .map_or("?", |(n, _)| *n)
        })
        .collect()
}

fn bodies(v: &[Vec<u8>]) -> Vec<&str> {
    v.iter()
        .map(|b| std::str::from_utf8(b).expect("a torn body"))
        .collect()
}

/// Participant 1 receives "a" and "b" while participant 2 peeks. The receive takes them one
/// after the other under the group's claim; the peek reads them one after the other without
/// it. It returns `[a, b]` (before the receive) or `[]` (the group is locked, R3), never
/// `[a]`: a prefix whose first message was taken before the walk stopped is walked again.
#[test]
fn peek_races_with_a_receive() {
    model(|| {
        let (h, env) = setup();
        let a = h.arena();
        let sa = send(&a, &env, 0, "g", b"a").unwrap();
        let sb = send(&a, &env, 0, "g", b"b").unwrap();
        let (h1, e1, h2, e2) = (h.clone(), env.clone(), h.clone(), env.clone());
        let (got, seen) = par(
            move || recv(&h1.arena(), &e1, 1, 2, 1_000).unwrap().len(),
            move || peek(&h2.arena(), &e2),
        );
        assert_eq!(got, 2);
        let seen = names(&seen, &[("a", sa), ("b", sb)]);
        assert!(
            [&["a", "b"][..], &[]].contains(&seen.as_slice()),
            "not a snapshot: {seen:?}"
        );
    });
}

/// "a" and "b" are in flight; participant 1 deletes them and sends "c" into a freed slot
/// (the group empties and its list is reopened) while participant 2 peeks. The peek follows links
/// into slots that may be freed and reused under it: it returns `[]` or `[c]`, never a
/// deleted message, never a reused slot under its old identity.
#[test]
fn peek_races_with_delete_and_slot_reuse() {
    model(|| {
        let (h, env) = setup();
        let a = h.arena();
        let sa = send(&a, &env, 0, "g", b"a").unwrap();
        let sb = send(&a, &env, 0, "g", b"b").unwrap();
        let held = recv(&a, &env, 1, 2, 1_000).unwrap();
        assert_eq!(held.len(), 2);
        let (h1, e1, h2, e2) = (h.clone(), env.clone(), h.clone(), env.clone());
        let (sc, seen) = par(
            move || {
                let a = h1.arena();
                for (hd, _) in held {
                    handle::delete(&a, &*e1, me(1), hd).unwrap();
                }
                send(&a, &e1, 1, "g", b"c").unwrap()
            },
            move || peek(&h2.arena(), &e2),
        );
        let seen = names(&seen, &[("a", sa), ("b", sb), ("c", sc)]);
        assert!(
            [&[][..], &["c"]].contains(&seen.as_slice()),
            "not a snapshot: {seen:?}"
        );
        // The peek changed nothing: c is still there.
        let rest = drain(&a, &env, 2);
        assert_eq!(bodies(&rest), ["c"]);
        assert_clean(&a);
    });
}

/// The receiver stops forever at its `k`-th step of receive-and-delete (its claim, its
/// in-flight message or its half-done cleanup left behind). A peek racing with it, and one
/// after it, terminate with `[a, b]`, `[]` or `[b]`; recovery then drains what is left.
#[test]
fn peek_with_a_receiver_stopped_mid_step() {
    for k in 0..24 {
        model(move || {
            let (h, env) = setup();
            let a = h.arena();
            let sa = send(&a, &env, 0, "g", b"a").unwrap();
            let sb = send(&a, &env, 0, "g", b"b").unwrap();
            let sent = [("a", sa), ("b", sb)];
            let (h1, e1, h2, e2) = (h.clone(), env.clone(), h.clone(), env.clone());
            let (_, seen) = par(
                move || {
                    as_participant(&e1.clone(), 1, Some(k), || {
                        let a = h1.arena();
                        if let Ok(got) = recv(&a, &e1, 1, 1, 1_000) {
                            if let Some((hd, _)) = got.first() {
                                let _ = handle::delete(&a, &*e1, me(1), *hd);
                            }
                        }
                    })
                },
                move || peek(&h2.arena(), &e2),
            );
            let ok: [&[&str]; 3] = [&["a", "b"], &[], &["b"]];
            let seen = names(&seen, &sent);
            assert!(ok.contains(&seen.as_slice()), "not a snapshot: {seen:?}");
            let after = names(&peek(&a, &env), &sent);
            assert!(
                ok.contains(&after.as_slice()),
                "not a snapshot after the stop"
            );
            // Whatever the stop left, recovery (and the visibility timeout) hands out the
            // rest; a peek never took or hid anything.
            env.kill(1);
            recovery::recover(&a, &*env, me(2)).unwrap();
            env.advance(2_000);
            let rest = drain(&a, &env, 2);
            assert!(
                rest == [b"a".to_vec(), b"b".to_vec()] || rest == [b"b".to_vec()],
                "{rest:?}"
            );
        });
    }
}
