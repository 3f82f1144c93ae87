//! Models of a batch sent as one chain: the producer links its messages to each
//! other, appends the chain by one CAS and publishes each, and may die at each of those steps,
//! while another participant sends a single message to the same group and a third receives.
//! The chain is committed whole or not at all, in order, and never interleaved with another
//! producer's message.
#![cfg(shmfifo_loom)]

use shmfifo_loom_tests::*;

/// Participant 1 sends "a", "b" to group "g" as one chain and dies at its `k`-th step;
/// participant 2 meanwhile sends "c" to "g". After recovery and a drain: "a" and "b" were both
/// delivered or neither (delivered if 1's call returned them as sent), in that order, with "c"
/// before both or after both; "c" always; nothing twice; every slot free.
#[test]
fn a_chain_is_committed_whole_or_not_at_all_and_never_interleaved() {
    for k in 0..10 {
        model(move || {
            let h = arena(3, 2, 4);
            let env = Arc::new(MockEnv::default());
            env.advance(1);
            let (h1, e1, h2, e2) = (h.clone(), env.clone(), h.clone(), env.clone());
            let (chain, single) = par(
                move || {
                    as_participant(&e1.clone(), 1, Some(k), || {
                        send_batch(&h1.arena(), &e1, 1, "g", &[b"a", b"b"])
                    })
                },
                move || send(&h2.arena(), &e2, 2, "g", b"c"),
            );
            single.expect("the single send is served");
            let a = h.arena();
            recovery::recover(&a, &*env, me(0)).unwrap();
            let got = drain(&a, &env, 0);
            let pos = |b: &[u8]| got.iter().position(|x| x == b);
            assert!(pos(b"c").is_some(), "c delivered: {got:?}");
            match (pos(b"a"), pos(b"b")) {
                (Some(x), Some(y)) => {
                    assert_eq!(y, x + 1, "a then b, nothing between: {got:?}");
                }
                (None, None) => {
                    if let Ok(rs) = &chain {
                        assert!(
                            rs.iter().all(|r| r.is_err()),
                            "a chain reported sent was delivered: {got:?}"
                        );
                    }
                }
                _ => panic!("half a chain: {got:?}"),
            }
            assert_eq!(
                got.len(),
                got.iter().collect::<std::collections::HashSet<_>>().len()
            );
            assert_clean(&a);
        });
    }
}

/// A `delete_batch` (`handle::delete_many`): participant 1 holds "a", "b" of group "g" and
/// deletes both in one call, each group cleaned up once at the end, and dies at its `k`-th
/// step, while participant 2 sends "c" to "g" and receives. After recovery and a sweep, "c" is
/// delivered exactly once, "a" and "b" were each deleted or are delivered again (never lost,
/// never twice), in order, and every slot is free once drained.
#[test]
fn a_delete_batch_dying_at_each_step_loses_nothing() {
    for k in 0..6 {
        model(move || {
            let h = arena(3, 2, 4);
            let env = Arc::new(MockEnv::default());
            env.advance(1);
            let a = h.arena();
            send(&a, &env, 0, "g", b"a").unwrap();
            send(&a, &env, 0, "g", b"b").unwrap();
            let held = recv(&a, &env, 1, 10, 1_000).unwrap();
            assert_eq!(held.len(), 2);
            let handles: Vec<Handle> = held.iter().map(|(h, _)| *h).collect();
            let (h1, e1, h2, e2) = (h.clone(), env.clone(), h.clone(), env.clone());
            let (deleted, got2) = par(
                move || {
                    as_participant(&e1.clone(), 1, Some(k), || {
                        let mut r = vec![Ok(()); handles.len()];
                        let _ = handle::delete_many(&h1.arena(), &*e1, me(1), &handles, &mut r);
                        r
                    })
                },
                move || {
                    let a = h2.arena();
                    send(&a, &e2, 2, "g", b"c").expect("sent");
                    let got = recv(&a, &e2, 2, 10, 1_000).unwrap_or_default();
                    for (h, _) in &got {
                        handle::delete(&a, &*e2, me(2), *h).expect("its own delete");
                    }
                    got
                },
            );
            let _ = deleted;
            // 1 is gone; its undeleted messages come back after their visibility timeout.
            env.kill(1);
            recovery::recover(&a, &*env, me(0)).unwrap();
            env.advance(1_001);
            let mut bodies: Vec<Vec<u8>> = got2.into_iter().map(|(_, b)| b).collect();
            bodies.extend(drain(&a, &env, 0));
            assert_eq!(
                bodies.iter().filter(|b| b.as_slice() == b"c").count(),
                1,
                "c once: {bodies:?}"
            );
            let mut seen = bodies.clone();
            seen.sort();
            seen.dedup();
            assert_eq!(seen.len(), bodies.len(), "nothing twice: {bodies:?}");
            assert_clean(&a);
        });
    }
}

/// Group "g" holding "a", "b", "c" behind a dummy that is a message slot ("x", sent first,
/// received and deleted alone), all three received by participant 1: their handles, whose
/// delete leaves a run of three slots to free (the dummy, "a", "b").
fn a_run_behind_a_slot_dummy(a: &Arena<'_>, env: &MockEnv) -> Vec<Handle> {
    for body in [&b"x"[..], b"a", b"b", b"c"] {
        send(a, env, 0, "g", body).unwrap();
    }
    let x = recv(a, env, 0, 1, 1_000).unwrap();
    assert_eq!(x.len(), 1);
    handle::delete(a, env, me(0), x[0].0).unwrap();
    let held = recv(a, env, 1, 10, 1_000).unwrap();
    assert_eq!(held.len(), 3);
    held.iter().map(|(h, _)| *h).collect()
}

/// A cleanup that moves `head` past a run of deleted messages by one swap and then frees the
/// run, last node first (`release::cleanup`): participant 1 deletes "a", "b", "c" of group "g"
/// in one call, behind a dummy that is a message slot ("x", deleted before), so the run holds
/// three slots to free; it stops forever at its `k`-th step (at some steps holding the
/// group's claim, with the run named in `pending_free` and partly freed), while participant 2
/// sends "d" to "g" and receives. Nothing 2 does is `Corrupted`. Once 1 is dead, recovery and
/// a drain deliver "d" once, each message 1 did not delete once, in order, nothing twice, and
/// every slot is free: the run's frees are finished by whoever takes the claim, none lost and
/// none freed twice.
#[test]
fn a_run_freed_by_a_cleaner_that_stops_at_each_step_leaks_nothing() {
    at_each_step(64, 8, |k| {
        model(move || {
            let h = arena(3, 2, 6);
            let env = Arc::new(MockEnv::default());
            env.advance(1);
            let a = h.arena();
            let handles = a_run_behind_a_slot_dummy(&a, &env);
            let (h1, e1, h2, e2) = (h.clone(), env.clone(), h.clone(), env.clone());
            let ((deleted, crashed), got2) = par(
                move || {
                    as_participant(&e1.clone(), 1, Some(k), || {
                        let mut r = vec![Ok(()); handles.len()];
                        let _ = handle::delete_many(&h1.arena(), &*e1, me(1), &handles, &mut r);
                        let crashed = crash::crashed();
                        if crashed {
                            stopped();
                        }
                        (r.iter().filter(|r| r.is_ok()).count(), crashed)
                    })
                },
                move || {
                    let a = h2.arena();
                    send(&a, &e2, 2, "g", b"d").expect("sent");
                    let got = recv(&a, &e2, 2, 10, 1_000);
                    assert!(
                        !matches!(got, Err(Fault::Corrupted(_))),
                        "a receive beside a stopped cleaner: {got:?}"
                    );
                    let got = got.unwrap_or_default();
                    for (h, _) in &got {
                        let d = handle::delete(&a, &*e2, me(2), *h);
                        assert!(!matches!(d, Err(Fault::Corrupted(_))), "its delete: {d:?}");
                    }
                    got
                },
            );
            env.kill(1);
            recovery::recover(&a, &*env, me(0)).unwrap();
            env.advance(1_001);
            let mut bodies: Vec<Vec<u8>> = got2.into_iter().map(|(_, b)| b).collect();
            bodies.extend(drain(&a, &env, 0));
            assert_eq!(
                bodies.iter().filter(|b| b.as_slice() == b"d").count(),
                1,
                "d once: {bodies:?}"
            );
            if !crashed {
                assert_eq!(deleted, 3);
                assert!(
                    bodies.iter().all(|b| b.as_slice() == b"d"),
                    "deleted, never delivered again: {bodies:?}"
                );
            }
            let mut seen = bodies.clone();
            seen.sort();
            seen.dedup();
            assert_eq!(seen.len(), bodies.len(), "nothing twice: {bodies:?}");
            let undeleted: Vec<&Vec<u8>> = bodies.iter().filter(|b| b.as_slice() != b"d").collect();
            let mut ordered = undeleted.clone();
            ordered.sort();
            assert_eq!(undeleted, ordered, "in order: {bodies:?}");
            assert_eq!(
                bodies.last().map(|b| b.as_slice()),
                Some(&b"d"[..]),
                "d after every message before it in its group: {bodies:?}"
            );
            assert_clean(&a);
        });
    });
}

/// What a dead cleaner left of its run is freed around slots of the run already reused
/// (`release::free_pending`), by a holder that may die in turn: participant 1 deletes "a",
/// "b", "c" behind the slot dummy "x" and dies at its `k1`-th step (at some, with the run
/// named in `pending_free` and its last nodes freed); participant 2 then sends "d" to "g" (into
/// a slot of the run freed already, where there is one: linked after "c", at a later position)
/// and purges, which marks "d" deleted before its cleanup walks the run, dying at its `k2`-th
/// step (at some, inside that walk's frees). Nothing is `Corrupted`; after a last recovery and
/// purge every slot is free and no group active: no node freed while linked ("d"'s position
/// stops the walk), none leaked, none freed twice. Sequential: each (k1, k2) is one execution.
#[test]
fn a_dead_cleaners_run_is_freed_around_a_reused_slot_by_a_purger_dying_at_each_step() {
    use std::sync::atomic::{AtomicBool, Ordering as StdOrdering};
    static FIRST_CRASHED: AtomicBool = AtomicBool::new(false);
    static SECOND_CRASHED: AtomicBool = AtomicBool::new(false);
    for k1 in 0..64 {
        for k2 in 0..64 {
            FIRST_CRASHED.store(false, StdOrdering::Relaxed);
            SECOND_CRASHED.store(false, StdOrdering::Relaxed);
            model(move || {
                let h = arena(3, 2, 6);
                let env = Arc::new(MockEnv::default());
                env.advance(1);
                let a = h.arena();
                let handles = a_run_behind_a_slot_dummy(&a, &env);
                let first = as_participant(&env, 1, Some(k1), || {
                    let mut r = vec![Ok(()); handles.len()];
                    let _ = handle::delete_many(&a, &*env, me(1), &handles, &mut r);
                    crash::crashed()
                });
                FIRST_CRASHED.store(first, StdOrdering::Relaxed);
                crash::arm(u32::MAX); // this thread goes on as the next participants
                env.kill(1);
                send(&a, &env, 2, "g", b"d").expect("sent");
                let (purged, second) = as_participant(&env, 2, Some(k2), || {
                    (handle::purge(&a, &*env, me(2)), crash::crashed())
                });
                SECOND_CRASHED.store(second, StdOrdering::Relaxed);
                crash::arm(u32::MAX);
                assert!(
                    !matches!(purged, Err(Fault::Corrupted(_))),
                    "k1={k1} k2={k2}: {purged:?}"
                );
                env.kill(2);
                recovery::recover(&a, &*env, me(0)).unwrap();
                env.advance(1_001);
                handle::purge(&a, &*env, me(0)).expect("the last purge");
                assert!(drain(&a, &env, 0).is_empty(), "k1={k1} k2={k2}: purged");
                assert_clean(&a);
            });
            if !SECOND_CRASHED.load(StdOrdering::Relaxed) {
                break;
            }
        }
        if !FIRST_CRASHED.load(StdOrdering::Relaxed) {
            return;
        }
    }
    panic!("participant 1 still crashing after 64 steps");
}
