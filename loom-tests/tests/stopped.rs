//! Models of a participant that stops forever (SIGSTOP: alive, so nothing it holds can be
//! taken over) at each step of a receive: the others keep serving every group it
//! does not hold, and an operation that needs its group returns the retryable `Fault::Busy`
//! after a bounded wait, never `Corrupted`.
#![cfg(shmfifo_loom)]

use shmfifo::protocol::group;
use shmfifo_loom_tests::*;

/// Participant 1 receives group "g" and stops forever at its `k`-th step (alive: never marked
/// dead). Participant 2 meanwhile sends to "g" and to a new group "h", receives, and purges.
/// Nothing it does is `Corrupted`; the purge either completes or says `Busy` (the group 1
/// holds); "h" is served whatever 1 holds (at once, or after the sweep that re-derives a hint
/// the stopped receiver had popped).
#[test]
fn a_receiver_stopped_forever_holds_only_its_group() {
    for k in 0..8 {
        model(move || {
            let h = arena(3, 2, 4);
            let env = Arc::new(MockEnv::default());
            env.advance(1);
            let a = h.arena();
            send(&a, &env, 0, "g", b"a").unwrap();
            let (h1, e1, h2, e2) = (h.clone(), env.clone(), h.clone(), env.clone());
            let (_, (sent_g, got)) = par(
                move || {
                    crash::arm(k);
                    // Stopped (not dead): whatever it holds stays held.
                    let _ = recv(&h1.arena(), &e1, 1, 10, 1_000);
                },
                move || {
                    let a = h2.arena();
                    let sent_g = send(&a, &e2, 2, "g", b"b");
                    send(&a, &e2, 2, "h", b"c").expect("a new group is served");
                    let got = recv(&a, &e2, 2, 10, 1_000).expect("receive is served");
                    (sent_g, got)
                },
            );
            assert!(
                !matches!(sent_g, Err(Fault::Corrupted(_))),
                "send to the held group: {sent_g:?}"
            );
            // A hint popped by the stopped receiver is lost until the next full sweep (at most
            // a sweep period later): then "h" is served, whatever 1 holds.
            let mut bodies: Vec<Vec<u8>> = got.into_iter().map(|(_, b)| b).collect();
            env.advance(sweep::SWEEP_PERIOD_MS + 1);
            bodies.extend(drain(&a, &env, 2));
            // Unless the stopped receiver holds "h" itself (it may have claimed it mid-receive).
            let holds_h = group::find(&a, hash(b"h"), b"h")
                .unwrap()
                .is_some_and(|(i, _)| {
                    Owner::of_word(a.groups[i as usize].claim.load(Ordering::SeqCst)) == me(1)
                });
            assert!(
                holds_h || bodies.contains(&b"c".to_vec()),
                "the group it does not hold is served: {bodies:?}"
            );
            let purged = handle::purge(&a, &*env, me(2));
            assert!(
                matches!(purged, Ok(_) | Err(Fault::Busy(_))),
                "purge: {purged:?}"
            );
        });
    }
}

/// Participant 1 sends "x" with dedup key "k" to a new group "g" and stops forever at its
/// `k`-th step (holding, at some steps, the dedup home claim, the group table's insert claim or
/// a claimed slot). Participant 2 sends the same message and a message to another new group:
/// each succeeds or says `Busy` / `DedupBusy` (retryable), never `Corrupted`, and a send that
/// succeeds is never lost: it is received.
#[test]
fn a_sender_stopped_forever_blocks_nothing_but_its_own_key_and_insert() {
    for k in 0..14 {
        model(move || {
            let h = arena_dedup(3, 2, 4, 4);
            let env = Arc::new(MockEnv::default());
            env.advance(1);
            let (h1, e1, h2, e2) = (h.clone(), env.clone(), h.clone(), env.clone());
            let (_, (same, other)) = par(
                move || {
                    crash::arm(k);
                    let _ = send_dedup(&h1.arena(), &e1, 1, "g", b"x", "k", 7);
                },
                move || {
                    let a = h2.arena();
                    let same = send_dedup(&a, &e2, 2, "g", b"x", "k", 7);
                    let other = send(&a, &e2, 2, "h", b"y");
                    (same, other)
                },
            );
            let ok = |r: &PResult<send::Sent>| {
                matches!(r, Ok(_) | Err(Fault::Busy(_)) | Err(Fault::DedupBusy))
            };
            assert!(ok(&same), "same key: {same:?}");
            assert!(ok(&other), "another group: {other:?}");
            let a = h.arena();
            env.advance(sweep::SWEEP_PERIOD_MS + 1);
            let got = drain(&a, &env, 2);
            if other.is_ok() {
                assert!(got.contains(&b"y".to_vec()), "{got:?}");
            }
            if matches!(same, Ok(s) if !s.duplicate) {
                assert!(got.contains(&b"x".to_vec()), "{got:?}");
            }
        });
    }
}
