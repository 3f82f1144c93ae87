//! Models of the recovery paths: a dead receiver's in-flight messages released at
//! once racing with its own delete and with another receiver, a releaser that stops forever
//! mid-release, and the repair of a dead producer's claim racing with a live send and a second
//! repairer (a late commit must never be undone, a half-made send never published twice).
#![cfg(shmfifo_loom)]

use shmfifo_loom_tests::*;

type Env = Arc<MockEnv>;

/// An arena with `release_on_death` on (the API's default) and a clock at 1 ms.
fn setup(participants: u32, groups: u32, slots: u32) -> (Arc<HeapArena>, Env) {
    let h = arena(participants, groups, slots);
    h.arena().hdr.release_on_death.store(1, Ordering::SeqCst);
    let env: Env = Arc::new(MockEnv::default());
    env.advance(1);
    (h, env)
}

/// Participant 1 receives "a" and "b" (visibility 1 s; the clock never moves), then deletes
/// them, stopping forever at its `k`-th step; meanwhile participant 2 recovers and receives.
/// While 1 lives, nothing is released; once it is dead, recovery releases what it had not
/// deleted, at once. Every message is deleted by 1 or delivered to 2 exactly once, in order,
/// and nothing stays in flight or leaks.
#[test]
fn release_of_a_dead_receivers_messages_races_with_its_delete() {
    for k in 0..10 {
        model(move || {
            let (h, env) = setup(3, 1, 2);
            let a = h.arena();
            send(&a, &env, 0, "g", b"a").unwrap();
            send(&a, &env, 0, "g", b"b").unwrap();
            let held = recv(&a, &env, 1, 10, 1_000).unwrap();
            assert_eq!(held.len(), 2);
            let (h1, e1, h2, e2) = (h.clone(), env.clone(), h.clone(), env.clone());
            let ((deleted, crashed), early) = par(
                move || {
                    as_participant(&e1.clone(), 1, Some(k), || {
                        let a = h1.arena();
                        let mut n = 0;
                        for (hd, _) in &held {
                            if handle::delete(&a, &*e1, me(1), *hd).is_err() {
                                break;
                            }
                            n += 1;
                        }
                        (n, crash::crashed())
                    })
                },
                move || {
                    let a = h2.arena();
                    recovery::recover(&a, &*e2, me(2)).unwrap();
                    let got = recv(&a, &e2, 2, 10, 1_000).unwrap();
                    for (hd, _) in &got {
                        handle::delete(&a, &*e2, me(2), *hd).unwrap();
                    }
                    got.into_iter().map(|(_, b)| b).collect::<Vec<_>>()
                },
            );
            if !crashed {
                assert_eq!(deleted, 2);
                assert!(
                    early.is_empty(),
                    "a live receiver's messages are never released"
                );
            }
            env.kill(1);
            recovery::recover(&a, &*env, me(2)).unwrap();
            let mut all = early.clone();
            all.extend(drain(&a, &env, 2)); // no clock move: only a release returns them
            assert!(all.len() + deleted <= 2, "never delivered twice: {all:?}");
            let want: Vec<Vec<u8>> = [b"a".to_vec(), b"b".to_vec()][2 - all.len()..].to_vec();
            assert_eq!(all, want, "the undeleted suffix, in order");
            assert_eq!(accounting::in_flight(&a), 0);
            assert_clean(&a);
        });
    }
}

/// A dead receiver's messages are released by a recoverer that itself stops forever at its
/// `k`-th step, racing with a receiver; a later recovery finishes the job: each message is
/// delivered exactly once, in order, without the clock moving, and everything is reclaimed.
#[test]
fn releaser_dies_at_every_step() {
    for k in 0..8 {
        model(move || {
            let (h, env) = setup(4, 1, 2);
            let a = h.arena();
            send(&a, &env, 0, "g", b"a").unwrap();
            send(&a, &env, 0, "g", b"b").unwrap();
            assert_eq!(recv(&a, &env, 1, 10, 1_000).unwrap().len(), 2);
            env.kill(1);
            let (h2, e2, h3, e3) = (h.clone(), env.clone(), h.clone(), env.clone());
            let (_, early) = par(
                move || {
                    as_participant(&e2.clone(), 2, Some(k), || {
                        recovery::recover(&h2.arena(), &*e2, me(2)).map(|_| ())
                    })
                },
                move || {
                    let a = h3.arena();
                    let got = recv(&a, &e3, 3, 10, 1_000).unwrap();
                    for (hd, _) in &got {
                        handle::delete(&a, &*e3, me(3), *hd).unwrap();
                    }
                    got.into_iter().map(|(_, b)| b).collect::<Vec<_>>()
                },
            );
            // Whatever the stopped releaser had not released, the next recovery does.
            let mut all = early;
            recovery::recover(&a, &*env, me(0)).unwrap();
            all.extend(drain(&a, &env, 0));
            assert_eq!(all, vec![b"a".to_vec(), b"b".to_vec()]);
            assert_eq!(accounting::in_flight(&a), 0);
            assert_clean(&a);
        });
    }
}

/// Participant 1 sends "x" to "g", stopping forever at its `k`-th step, on its own thread (a
/// crash countdown is per thread, and the main thread checks), then is marked dead. Returns
/// whether the send returned Ok and whether it stopped.
fn send_stopping_at(h: &Arc<HeapArena>, env: &Env, k: u32) -> (bool, bool) {
    let (h1, e1) = (h.clone(), env.clone());
    let r = thread::spawn(move || {
        as_participant(&e1.clone(), 1, Some(k), || {
            (
                send(&h1.arena(), &e1, 1, "g", b"x").is_ok(),
                crash::crashed(),
            )
        })
    })
    .join()
    .unwrap();
    env.kill(1);
    r
}

/// A producer stops forever at its `k`-th step of a send to "g"; then, concurrently, one
/// participant repairs it while another sends to "g", and a last repair follows. The repairs
/// never undo a committed (linked) send nor publish a half-made one twice; the live send is
/// never touched;
/// "x" is delivered once before "y" if its send had committed, and always if it returned Ok.
#[test]
fn dead_send_repair_races_a_live_send_and_another_repair() {
    for k in 0..9 {
        model(move || {
            let (h, env) = setup(3, 1, 2);
            let (acked, crashed) = send_stopping_at(&h, &env, k);
            let (h2, e2, h0, e0) = (h.clone(), env.clone(), h.clone(), env.clone());
            par(
                move || {
                    recovery::recover(&h2.arena(), &*e2, me(2)).unwrap();
                },
                move || {
                    send(&h0.arena(), &e0, 0, "g", b"y").unwrap();
                },
            );
            let a = h.arena();
            recovery::recover(&a, &*env, me(2)).unwrap();
            let rest = drain(&a, &env, 2);
            if acked {
                assert_eq!(rest, vec![b"x".to_vec(), b"y".to_vec()]);
            } else {
                assert!(
                    rest == vec![b"y".to_vec()] || rest == vec![b"x".to_vec(), b"y".to_vec()],
                    "k={k} crashed={crashed}: {rest:?}"
                );
            }
            assert_clean(&a);
        });
    }
}

/// A live producer is slow: a repairer runs in the middle of its send. Nothing of the send is
/// repaired (its owner is alive), and the message is delivered exactly once.
#[test]
fn repair_never_touches_a_live_send() {
    model(|| {
        let (h, env) = setup(3, 1, 2);
        let (h1, e1, h2, e2) = (h.clone(), env.clone(), h.clone(), env.clone());
        let (sent, r) = par(
            move || send(&h1.arena(), &e1, 1, "g", b"x").is_ok(),
            move || recovery::recover(&h2.arena(), &*e2, me(2)).unwrap(),
        );
        assert!(sent);
        assert_eq!((r.published, r.freed, r.released), (0, 0, 0));
        let a = h.arena();
        assert_eq!(drain(&a, &env, 2), vec![b"x".to_vec()]);
        assert_clean(&a);
    });
}

/// A producer stops forever at its `k`-th step of a send to "g"; then a recoverer repairs the
/// send while a receiver takes "g"'s message (publishing a linked orphan itself, under the
/// claim the repair let go of after finding the node). A repair that resumes after the take
/// never wipes the receiver's holder record (`recv_ms`): the message still names its holder,
/// so that holder's death releases it at once, and H6's 12-hour cap counts from its receive.
#[test]
fn a_repair_resuming_after_a_take_keeps_the_holders_record() {
    for k in 0..9 {
        model(move || {
            let (h, env) = setup(3, 1, 2);
            send_stopping_at(&h, &env, k);
            let (h2, e2, h0, e0) = (h.clone(), env.clone(), h.clone(), env.clone());
            let (r, got) = par(
                move || recovery::recover(&h2.arena(), &*e2, me(2)).unwrap(),
                move || recv(&h0.arena(), &e0, 0, 1, 60_000).unwrap(),
            );
            let a = h.arena();
            for (hd, body) in &got {
                assert_eq!(body, b"x");
                let w = a.msg(hd.idx).unwrap().own.recv_ms.load(Ordering::SeqCst);
                assert_eq!(
                    words::recv::holder(w),
                    Some((0, 1)),
                    "k={k}: the receiver's holder record was wiped: {w:#x}, vis {:?}, {r:?}",
                    vis::state(a.msg(hd.idx).unwrap().own.vis.load(Ordering::SeqCst))
                );
            }
        });
    }
}
