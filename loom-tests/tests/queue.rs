//! Models of the queue protocols on a heap arena: slot allocation, per-group lists, group
//! table insert and reuse, receive claim, visibility expiry and takeover, delete and cleanup,
//! ready hints, the doorbell, and participants that stop forever mid-step.
//!
//! Concurrent work always runs on two spawned threads (`par`); the main thread prepares and
//! checks. A thread that "dies" is marked dead in the mock environment (as the kernel drops its
//! liveness lock) only after it stopped.
#![cfg(shmfifo_loom)]

use shmfifo_loom_tests::*;

type Env = Arc<MockEnv>;

fn setup(participants: u32, groups: u32, slots: u32) -> (Arc<HeapArena>, Env) {
    (
        arena(participants, groups, slots),
        Arc::new(MockEnv::default()),
    )
}

/// Two producers create the same new group at once: one entry, both messages, delivered in
/// sequence order; everything reclaimed after draining.
#[test]
fn concurrent_sends_to_a_new_group() {
    model(|| {
        let (h, env) = setup(3, 2, 3);
        let (h1, e1, h2, e2) = (h.clone(), env.clone(), h.clone(), env.clone());
        let (s0, s1) = par(
            move || send(&h1.arena(), &e1, 0, "g", b"a").unwrap(),
            move || send(&h2.arena(), &e2, 1, "g", b"b").unwrap(),
        );
        assert_eq!(s0.seq_hi, s1.seq_hi, "one group incarnation");
        assert_ne!(s0.pos, s1.pos);
        let a = h.arena();
        let got = drain(&a, &env, 2);
        let want: Vec<Vec<u8>> = if s0.pos < s1.pos {
            vec![b"a".to_vec(), b"b".to_vec()]
        } else {
            vec![b"b".to_vec(), b"a".to_vec()]
        };
        assert_eq!(got, want, "delivery follows sequence order (M1, R3)");
        assert_clean(&a);
    });
}

/// A delete that empties a group (and reopens its list, layout 19) races with a send to the
/// same group: the send lands behind the old dummy (before the close) or behind the reopened
/// sentinel; never lost.
#[test]
fn send_races_with_retire() {
    model(|| {
        let (h, env) = setup(3, 2, 3);
        let a = h.arena();
        send(&a, &env, 0, "g", b"1").unwrap();
        let handle = recv(&a, &env, 0, 1, 1_000).unwrap()[0].0;
        let (h1, e1, h2, e2) = (h.clone(), env.clone(), h.clone(), env.clone());
        let (s, d) = par(
            move || send(&h1.arena(), &e1, 1, "g", b"2"),
            move || handle::delete(&h2.arena(), &*e2, me(0), handle),
        );
        s.unwrap();
        d.unwrap();
        assert_eq!(drain(&a, &env, 2), vec![b"2".to_vec()]);
        assert_clean(&a);
    });
}

/// Two receivers on one group: at most one holds its messages (R3), and it is the first.
#[test]
fn receivers_of_one_group_are_exclusive() {
    model(|| {
        let (h, env) = setup(3, 1, 2);
        let a = h.arena();
        send(&a, &env, 0, "g", b"1").unwrap();
        send(&a, &env, 0, "g", b"2").unwrap();
        let (h1, e1, h2, e2) = (h.clone(), env.clone(), h.clone(), env.clone());
        let (x, y) = par(
            move || recv(&h1.arena(), &e1, 1, 1, 1_000).unwrap(),
            move || recv(&h2.arena(), &e2, 2, 1, 1_000).unwrap(),
        );
        assert_eq!(
            x.len() + y.len(),
            1,
            "the group is locked by its first in-flight message"
        );
        assert_eq!(x.iter().chain(y.iter()).next().unwrap().1, b"1");
    });
}

/// A receiver dies at each step of a receive (holding the claim, or after taking a message);
/// another receiver runs meanwhile. After the visibility timeout everything is delivered, in
/// order, and reclaimed.
#[test]
fn receiver_dies_at_every_step() {
    for k in 0..4 {
        model(move || {
            let (h, env) = setup(3, 1, 2);
            let a = h.arena();
            send(&a, &env, 0, "g", b"1").unwrap();
            send(&a, &env, 0, "g", b"2").unwrap();
            let (h1, e1, h2, e2) = (h.clone(), env.clone(), h.clone(), env.clone());
            let (dead, live) = par(
                move || {
                    as_participant(&e1.clone(), 1, Some(k), || {
                        recv(&h1.arena(), &e1, 1, 2, 1_000)
                    })
                },
                move || recv(&h2.arena(), &e2, 2, 2, 1_000).unwrap(),
            );
            env.kill(1);
            let mut first: Vec<Vec<u8>> = live.iter().map(|(_, b)| b.clone()).collect();
            if let Ok(v) = &dead {
                first.extend(v.iter().map(|(_, b)| b.clone()));
            }
            assert!(first.len() <= 2);
            env.advance(2_000); // every visibility timeout has passed
            let rest = drain(&a, &env, 2);
            assert_eq!(
                rest,
                vec![b"1".to_vec(), b"2".to_vec()],
                "redelivered in order (V3), nothing lost"
            );
            assert_clean(&a);
        });
    }
}

/// Visibility expiry and takeover race with the old holder's delete: exactly one wins (H2).
#[test]
fn expiry_takeover_races_with_delete() {
    model(|| {
        let (h, env) = setup(3, 1, 1);
        let a = h.arena();
        send(&a, &env, 0, "g", b"1").unwrap();
        let handle = recv(&a, &env, 0, 1, 10).unwrap()[0].0;
        let (h1, e1, h2, e2) = (h.clone(), env.clone(), h.clone(), env.clone());
        let (deleted, taken) = par(
            move || handle::delete(&h1.arena(), &*e1, me(0), handle),
            move || {
                e2.advance(20);
                recv(&h2.arena(), &e2, 1, 1, 1_000).unwrap()
            },
        );
        match deleted {
            Ok(()) => assert!(taken.is_empty(), "deleted, so not delivered again"),
            // Delivered again: by that receive, or, if it found the group's claim held by the
            // delete (layout 25 claims before it looks), by the next, which the delete's
            // release hinted.
            Err(Fault::Expired) => {
                let again = if taken.is_empty() {
                    recv(&a, &env, 1, 1, 1_000).unwrap()
                } else {
                    taken
                };
                assert_eq!(again.len(), 1, "expired, so delivered again");
            }
            Err(e) => panic!("{e:?}"),
        }
    });
}

/// A delete while another receiver holds the group claim: the DIRTY request makes the holder
/// clean up, and the next message is hinted (no sweep: a lost hint fails here).
#[test]
fn delete_while_the_claim_is_held() {
    model(|| {
        let (h, env) = setup(3, 1, 2);
        let a = h.arena();
        send(&a, &env, 0, "g", b"1").unwrap();
        send(&a, &env, 0, "g", b"2").unwrap();
        let handle = recv(&a, &env, 0, 1, 1_000).unwrap()[0].0;
        let (h1, e1, h2, e2) = (h.clone(), env.clone(), h.clone(), env.clone());
        let (d, theirs) = par(
            move || handle::delete(&h1.arena(), &*e1, me(0), handle),
            move || recv(&h2.arena(), &e2, 1, 10, 1_000).unwrap(),
        );
        d.unwrap();
        let mut got: Vec<Vec<u8>> = theirs.iter().map(|(_, b)| b.clone()).collect();
        for (h2, _) in &theirs {
            handle::delete(&a, &*env, me(1), *h2).unwrap();
        }
        for (h2, b) in recv(&a, &env, 2, 10, 1_000).unwrap() {
            handle::delete(&a, &*env, me(2), h2).unwrap();
            got.push(b);
        }
        assert_eq!(got, vec![b"2".to_vec()]);
        assert_clean(&a);
    });
}

/// Why `sync::store_racing_rmw_u64` is a `swap` under loom: loom orders a plain store only
/// partially against another thread's RMW, so some execution lets the storer's own later load
/// read the value of a CAS that read what the store replaced (C11's total modification order
/// forbids it: the CAS would have failed). Should a loom release order them totally, this
/// fails, and the facade can be a plain store under loom too.
#[test]
fn loom_orders_a_store_loosely_against_an_rmw() {
    static SEEN: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    model(|| {
        let x = Arc::new(shmfifo::sync::AtomicU64::new(0));
        let (x1, x2) = (x.clone(), x.clone());
        let (after, swapped) = par(
            move || {
                x1.store(2, Ordering::Release);
                x1.load(Ordering::SeqCst)
            },
            move || {
                x2.compare_exchange(0, 1, Ordering::AcqRel, Ordering::Relaxed)
                    .is_ok()
            },
        );
        if after == 1 && swapped {
            SEEN.store(true, std::sync::atomic::Ordering::Relaxed);
        }
    });
    assert!(SEEN.load(std::sync::atomic::Ordering::Relaxed));
}

/// H1, R8 (layout 25): two deletes of one message with the same handle race. The one that
/// takes the group's claim marks it by a store; the other, finding the claim held, by a CAS
/// to `DELETED_UNCOUNTED`, which the claim holder's cleanup counts. Whatever the order of the
/// store and the CAS (the store may overwrite the CAS), at least one delete succeeds, the
/// message is never delivered again, and the delete is counted exactly once.
#[test]
fn deletes_with_and_without_the_claim_count_once() {
    model(|| {
        let (h, env) = setup(3, 1, 1);
        let a = h.arena();
        send(&a, &env, 0, "g", b"1").unwrap();
        let handle = recv(&a, &env, 0, 1, 1_000).unwrap()[0].0;
        assert_eq!(accounting::in_flight(&a), 1);
        let (h1, e1, h2, e2) = (h.clone(), env.clone(), h.clone(), env.clone());
        let (x, y) = par(
            move || handle::delete(&h1.arena(), &*e1, me(0), handle),
            move || handle::delete(&h2.arena(), &*e2, me(1), handle),
        );
        for r in [&x, &y] {
            assert!(matches!(r, Ok(()) | Err(Fault::Expired)), "{r:?}");
        }
        assert!(x.is_ok() || y.is_ok(), "one of them deleted it");
        env.advance(2_000);
        assert!(drain(&a, &env, 2).is_empty(), "never delivered again");
        assert_eq!(deleted_count(&a), 1, "counted once ({x:?}, {y:?})");
        assert_eq!(accounting::in_flight(&a), 0);
        assert_clean(&a);
    });
}

/// Two messages of group `g` sent and received by participant 0: their handles, in order.
fn two_in_flight(a: &Arena<'_>, env: &MockEnv) -> Vec<(Handle, Vec<u8>)> {
    send(a, env, 0, "g", b"1").unwrap();
    send(a, env, 0, "g", b"2").unwrap();
    let got = recv(a, env, 0, 10, 1_000).unwrap();
    assert_eq!(got.len(), 2);
    got
}

/// R8 (layout 25): a delete of a group's second message in flight, racing a receive of the
/// group that holds its claim a moment (the group is locked: it takes nothing). The delete
/// that finds the claim held leaves its message uncounted, behind the group's live first
/// message where no cleanup moves past it; the holder it pokes (or the delete itself, if the
/// claim came free) counts it at once, so the in-flight count is exact when both are done:
/// the first message alone.
#[test]
fn an_uncounted_delete_behind_a_live_head_is_counted_at_once() {
    model(|| {
        let (h, env) = setup(3, 1, 2);
        let a = h.arena();
        let got = two_in_flight(&a, &env);
        let second = got[1].0;
        delete_beside_a_locked_receive(&h, &env, second);
        assert_eq!(accounting::in_flight(&a), 1, "the first message alone");
    });
}

/// R8 (layout 25): a delete that finds its group's claim held marks its message uncounted and
/// asks the holder to clean up (DIRTY); the holder dies before it serves the request. Whoever
/// takes the claim over serves it: a receive that finds the group locked by its live first
/// message (nothing to take, no cleanup past it) counts the uncounted delete behind it. The
/// taking over dropped the request with the dead holder's word, and the count stayed one high
/// until a cleanup reached the message (a visibility timeout later, or never while the first
/// message stayed in flight).
#[test]
fn a_dead_holders_dirty_request_is_served_by_whoever_takes_the_claim_over() {
    model(|| {
        let (h, env) = setup(3, 1, 2);
        let a = h.arena();
        let got = two_in_flight(&a, &env);
        let (g, ginc) = shmfifo::protocol::group::find(&a, hash(b"g"), b"g")
            .unwrap()
            .unwrap();
        let e = a.group(g).unwrap();
        // Participant 1 holds the claim (a receive, a sweep) ...
        let held = shmfifo::protocol::group::try_claim(&a, &*env, e, me(1), ginc);
        assert!(
            matches!(held, shmfifo::protocol::group::TryClaim::Acquired { .. }),
            "{held:?}"
        );
        // ... while the second message is deleted: uncounted, the holder asked to count it.
        handle::delete(&a, &*env, me(0), got[1].0).unwrap();
        assert_eq!(deleted_count(&a), 0, "uncounted while the claim is held");
        assert_ne!(e.claim.load(Ordering::SeqCst) & owner::DIRTY, 0);
        // The holder dies; a receive takes the group's claim over and takes nothing (the
        // first message is in flight).
        env.kill(1);
        ready::hint(&a, &*env, me(2), g).unwrap();
        assert!(recv(&a, &env, 2, 10, 1_000).unwrap().is_empty(), "R3");
        assert_eq!(deleted_count(&a), 1, "counted by the taker");
        assert_eq!(accounting::in_flight(&a), 1, "the first message alone");
        assert_eq!(e.claim.load(Ordering::SeqCst) & owner::DIRTY, 0);
    });
}

/// R8 (layout 25), SYNC POINT(claim): two deletes without the claim, one after the other,
/// while a receive holds the group's claim (the group is locked by its first message: the
/// receive takes nothing). The first delete asks the holder to clean up (DIRTY); the second
/// finds the request still pending and adds nothing to the word but a no-op Release CAS. The
/// holder's clearing CAS reads that CAS or a later value, so its look that follows sees the
/// second deletion too: both are counted at once, whatever the order. With a plain return
/// instead of the no-op CAS, nothing orders the second deletion before the holder's look,
/// which may read the message as still in flight (this model fails so): the delete is
/// counted late, by whichever cleanup next reaches it.
#[test]
fn a_delete_behind_a_pending_cleanup_request_is_counted_by_the_holder() {
    model(|| {
        let (h, env) = setup(3, 1, 4);
        let a = h.arena();
        for body in [b"1", b"2", b"3"] {
            send(&a, &env, 0, "g", body).unwrap();
        }
        let got = recv(&a, &env, 0, 10, 1_000).unwrap();
        assert_eq!(got.len(), 3);
        let (second, third) = (got[1].0, got[2].0);
        let (g, _) = shmfifo::protocol::group::find(&a, hash(b"g"), b"g")
            .unwrap()
            .unwrap();
        let (h1, e1, h2, e2) = (h.clone(), env.clone(), h.clone(), env.clone());
        let (deleted, received) = par(
            move || {
                let a = h1.arena();
                handle::delete(&a, &*e1, me(0), second)?;
                handle::delete(&a, &*e1, me(0), third)
            },
            move || {
                let a = h2.arena();
                ready::hint(&a, &*e2, me(1), g)?;
                recv(&a, &e2, 1, 10, 1_000)
            },
        );
        deleted.unwrap();
        assert!(
            received.unwrap().is_empty(),
            "R3: locked by its first message"
        );
        assert_eq!(deleted_count(&a), 2, "both deletes counted at once");
        assert_eq!(accounting::in_flight(&a), 1, "the first message alone");
    });
}

/// As above, with the first deleter stopping at each step of its delete, forever (alive: it
/// keeps the claim if it holds it) or dying there. The second delete succeeds or finds the
/// message deleted, the message is never delivered again, the delete is counted at most once,
/// and after a death and recovery a census brings the in-flight count back to zero (a deleter
/// that died between its store and its count left it high, R8's safe side).
#[test]
fn a_deleter_stopped_or_dead_at_each_step_against_a_delete_of_the_same_handle() {
    // A single delete has 8 crash points (its mark, the cleanup's, the release's): k = 8 runs
    // it to the end.
    for k in 0..9 {
        for dies in [false, true] {
            model(move || {
                let (h, env) = setup(3, 1, 1);
                let a = h.arena();
                send(&a, &env, 0, "g", b"1").unwrap();
                let handle = recv(&a, &env, 0, 1, 1_000).unwrap()[0].0;
                let (h1, e1, h2, e2) = (h.clone(), env.clone(), h.clone(), env.clone());
                let (x, y) = par(
                    move || {
                        crash::arm(k);
                        handle::delete(&h1.arena(), &*e1, me(0), handle)
                    },
                    move || handle::delete(&h2.arena(), &*e2, me(1), handle),
                );
                assert!(
                    matches!(x, Ok(()) | Err(Fault::Crashed | Fault::Expired)),
                    "{x:?}"
                );
                assert!(matches!(y, Ok(()) | Err(Fault::Expired)), "{y:?}");
                assert!(x.is_ok() || y.is_ok() || x == Err(Fault::Crashed));
                assert!(deleted_count(&a) <= 1, "counted at most once");
                env.advance(2_000);
                if x.is_err() && !dies {
                    // Stopped, alive: nobody receives the message, wherever it stopped.
                    assert!(recv(&a, &env, 2, 10, 1_000).unwrap().is_empty());
                    return;
                }
                env.kill(0);
                recovery::recover(&a, &*env, me(2)).unwrap();
                assert!(drain(&a, &env, 2).is_empty(), "never delivered again");
                accounting::in_flight_census(&a);
                assert_eq!(accounting::in_flight(&a), 0);
                assert_clean(&a);
            });
        }
    }
}

/// SYNC POINT(ready-check): a producer publishing while a deleter cleans up and advances the
/// head; afterwards the message is reachable through a hint alone (no sweep).
#[test]
fn publish_races_with_cleanup_hint_not_lost() {
    model(|| {
        let (h, env) = setup(3, 1, 2);
        let a = h.arena();
        send(&a, &env, 0, "g", b"1").unwrap();
        let handle = recv(&a, &env, 0, 1, 1_000).unwrap()[0].0;
        let (h1, e1, h2, e2) = (h.clone(), env.clone(), h.clone(), env.clone());
        let (s, d) = par(
            move || send(&h1.arena(), &e1, 1, "g", b"2"),
            move || handle::delete(&h2.arena(), &*e2, me(0), handle),
        );
        s.unwrap();
        d.unwrap();
        let got = recv(&a, &env, 2, 10, 1_000).unwrap();
        assert_eq!(got.len(), 1, "hint present without a sweep");
        assert_eq!(got[0].1, b"2");
    });
}

/// A receive whose take leaves its group locked (its first message in flight) releases the
/// claim without re-checking readiness (`release_locked`): a producer linking behind the taken
/// message meanwhile leaves the hint to the delete that unlocks the group, which gives it.
/// Afterwards the message is reachable through a hint alone (no sweep: a lost hint fails here).
#[test]
fn a_receive_that_leaves_its_group_locked_loses_no_hint() {
    model(|| {
        let (h, env) = setup(3, 1, 3);
        let a = h.arena();
        send(&a, &env, 0, "g", b"1").unwrap();
        let (h1, e1, h2, e2) = (h.clone(), env.clone(), h.clone(), env.clone());
        let (s, first) = par(
            move || send(&h1.arena(), &e1, 1, "g", b"2"),
            move || recv_and_delete(&h2.arena(), &e2, 2, 1, 1_000),
        );
        s.unwrap();
        assert_eq!(first, vec![b"1".to_vec()], "R3: the first message, alone");
        let got = recv(&a, &env, 0, 10, 1_000).unwrap();
        assert_eq!(got.len(), 1, "hint present without a sweep");
        assert_eq!(got[0].1, b"2");
        handle::delete(&a, &*env, me(0), got[0].0).unwrap();
        assert_clean(&a);
    });
}

/// The other side of `release_locked`: a take that leaves its group unlocked (a zero visibility
/// timeout: the message is visible again at once) re-checks readiness after its release, while
/// a producer links behind it, so the group is hinted again (no sweep: a lost hint fails here).
#[test]
fn a_receive_with_a_zero_timeout_hints_its_group_again() {
    model(|| {
        let (h, env) = setup(3, 1, 3);
        // Arena time starts at 1 (a deadline of 0 means "never received"): at 0 a zero
        // timeout's deadline, 1, would still lie ahead.
        env.advance(1);
        let a = h.arena();
        send(&a, &env, 0, "g", b"1").unwrap();
        let (h1, e1, h2, e2) = (h.clone(), env.clone(), h.clone(), env.clone());
        let (s, first) = par(
            move || send(&h1.arena(), &e1, 1, "g", b"2"),
            move || recv(&h2.arena(), &e2, 2, 1, 0).unwrap(),
        );
        s.unwrap();
        assert_eq!(first.len(), 1);
        assert_eq!(first[0].1, b"1");
        let got = recv(&a, &env, 0, 1, 1_000).unwrap();
        assert_eq!(got.len(), 1, "hint present without a sweep");
        assert_eq!(
            got[0].1, b"1",
            "R3: the first message again, its receive count 2"
        );
        handle::delete(&a, &*env, me(0), got[0].0).unwrap();
        let got = recv(&a, &env, 0, 1, 1_000).unwrap();
        assert_eq!(got.len(), 1, "hinted by the delete");
        assert_eq!(got[0].1, b"2");
        handle::delete(&a, &*env, me(0), got[0].0).unwrap();
        assert_clean(&a);
    });
}

/// A sweep that finds a group's first message visible again (its deadline passed) while the
/// receiver that took it still holds the claim, alive (slow, or stopped between its take and
/// its release), asks the holder to look again (`ready::poke`: DIRTY, or its own claim and
/// re-check if the holder released meanwhile), which re-checks at a fresh reading of the
/// clock (`Env::refresh_now`). Otherwise the message waits for the periodic sweep: a receive
/// whose take left the group locked skips its re-check (`release_locked`), and one that
/// re-checks does so at the instant its operation began, before the deadline (the API reads
/// the clock once an operation; the mock clock here may be read stale, to the same effect).
/// Found by review; the model fails without the sweep's poke, with or without
/// `release_locked`.
#[test]
fn a_sweep_during_a_locked_hold_leaves_the_expired_message_hinted() {
    model(|| {
        let (h, env) = setup(3, 1, 2);
        // Arena time starts at 1.
        env.advance(1);
        let a = h.arena();
        send(&a, &env, 0, "g", b"1").unwrap();
        let (h1, e1, h2, e2) = (h.clone(), env.clone(), h.clone(), env.clone());
        let (first, ()) = par(
            move || recv(&h1.arena(), &e1, 1, 1, 1).unwrap().len(),
            move || {
                // The 1 ms timeout of a receive at 1 ends at 2.
                e2.advance(1);
                sweep::sweep_due(&h2.arena(), &*e2, me(2), false).unwrap();
            },
        );
        // Past any deadline the receive may have set (2, or 3 had it come after the sweep's
        // clock step): the message is receivable, through a hint or, where the wheel still
        // holds its group, the receive's own idle sweep (not the periodic one: 1 s away).
        env.advance(5);
        let deadline = earliest_deadline(&a);
        let ne = a.hdr.next_expiry.0.load(Ordering::SeqCst);
        let e0 = a.group(0).unwrap();
        let dbg = format!(
            "ring empty {}, claim (with its HINT bit) {:x}, last_sweep {}",
            ready::looks_empty(&a),
            e0.claim.load(Ordering::SeqCst),
            a.hdr.last_sweep.0.load(Ordering::SeqCst)
        );
        let got = recv(&a, &env, 0, 1, 1_000).unwrap();
        assert_eq!(
            got.len(),
            1,
            "the message visible again is reachable (first receive took {first}, deadline \
             {deadline}, next_expiry {ne}, {dbg})"
        );
        assert_eq!(got[0].1, b"1");
        handle::delete(&a, &*env, me(0), got[0].0).unwrap();
        assert_clean(&a);
    });
}

/// SYNC POINT(doorbell): a receiver announces itself and re-checks while a producer sends; if
/// the re-check found nothing, the producer saw the waiter and rang the bell.
#[test]
fn doorbell_has_no_lost_wakeup() {
    model(|| {
        let (h, env) = setup(2, 1, 1);
        let (h1, e1, h2, e2) = (h.clone(), env.clone(), h.clone(), env.clone());
        let ((bell, got), ()) = par(
            move || {
                let a = h1.arena();
                let bell = doorbell::begin_wait(&a, 0);
                (bell, recv(&a, &e1, 0, 1, 1_000).unwrap())
            },
            move || {
                send(&h2.arena(), &e2, 1, "g", b"x").unwrap();
            },
        );
        // The receiver is still counted as a waiter: had it slept, would it be woken?
        let a = h.arena();
        if got.is_empty() {
            assert_ne!(
                a.hdr.wake.0.doorbell.load(Ordering::Acquire),
                bell,
                "the sleeper is woken"
            );
        }
        doorbell::end_wait(&a, 0);
    });
}

/// After a producer of a full class announced itself (doorbell value `bell`, participant 1)
/// and tried again (`retry`) while a freer ran: its retry found a slot, or the freer saw it and
/// rang. Ends its wait.
fn assert_sent_or_woken(a: &Arena<'_>, bell: u32, retry: PResult<()>) {
    match retry {
        Ok(()) => {}
        Err(Fault::ClassFull(0)) => assert_ne!(
            a.hdr.space.0.doorbell.load(Ordering::Acquire),
            bell,
            "the sleeping producer is woken"
        ),
        Err(f) => panic!("{f:?}"),
    }
    doorbell::space_end_wait(a, 1);
}

/// SYNC POINT(space-doorbell): a producer whose size class is full announces itself and tries
/// again while a consumer deletes the message holding the only slot; if the retry still found
/// the class full, the deleter saw the waiter and rang the space doorbell.
#[test]
fn space_doorbell_has_no_lost_wakeup() {
    model(|| {
        let (h, env) = setup(2, 2, 1);
        let a = h.arena();
        send(&a, &env, 0, "g", b"1").unwrap();
        assert_eq!(
            send(&a, &env, 1, "h", b"2").map(|_| ()),
            Err(Fault::ClassFull(0))
        );
        let handle = recv(&a, &env, 0, 1, 1_000).unwrap()[0].0;
        let (h1, e1, h2, e2) = (h.clone(), env.clone(), h.clone(), env.clone());
        let ((bell, retry), ()) = par(
            move || {
                let a = h1.arena();
                let bell = doorbell::space_begin_wait(&a, 1);
                (bell, send(&a, &e1, 1, "h", b"2").map(|_| ()))
            },
            move || handle::delete(&h2.arena(), &*e2, me(0), handle).unwrap(),
        );
        let a = h.arena();
        assert_sent_or_woken(&a, bell, retry);
        assert_eq!(a.hdr.space.0.waiters.load(Ordering::SeqCst), 0);
    });
}

/// SYNC POINT(space-doorbell) for a run of frees (`pool::free_dummies`): a `delete_batch` of
/// three of four messages frees two slots with Release stores and one SeqCst fence, while a
/// producer of the full class announces itself and tries again: it finds a slot, or the
/// deleter saw it and rang. (With the fence left out, loom finds the lost wake-up, in this
/// model and the single-free one above.)
#[test]
fn space_doorbell_after_a_run_of_frees() {
    model(|| {
        let (h, env) = setup(2, 2, 4);
        let a = h.arena();
        for b in [b"1", b"2", b"3", b"4"] {
            send(&a, &env, 0, "g", b).unwrap();
        }
        let handles: Vec<_> = recv(&a, &env, 0, 3, 1_000)
            .unwrap()
            .into_iter()
            .map(|(hd, _)| hd)
            .collect();
        assert_eq!(handles.len(), 3);
        let (h1, e1, h2, e2) = (h.clone(), env.clone(), h.clone(), env.clone());
        let ((bell, retry), ()) = par(
            move || {
                let a = h1.arena();
                let bell = doorbell::space_begin_wait(&a, 1);
                (bell, send(&a, &e1, 1, "h", b"5").map(|_| ()))
            },
            move || {
                let mut r = [Ok(()), Ok(()), Ok(())];
                handle::delete_many(&h2.arena(), &*e2, me(0), &handles, &mut r).unwrap();
                assert!(r.iter().all(|r| r.is_ok()));
            },
        );
        let a = h.arena();
        assert_sent_or_woken(&a, bell, retry);
        // Two slots were freed by the run: both sends fit now.
        send(&a, &env, 1, "h", b"6").unwrap();
    });
}

/// A producer waiting for space stops forever at each step (announced, retrying), and a
/// deleter stops forever at each step of a delete that frees the slot: nothing wedges. The
/// stopped waiter's count is given back by recovery (wakers stop ringing for it), and the slot
/// is free for the next producer, which finds it when it looks again by itself (the API's
/// waits are bounded by the liveness period) even if the deleter died before ringing.
#[test]
fn space_waiter_and_freer_stop_at_every_step() {
    let waiter_stops = (0..3).map(|k| (Some(k), None));
    let deleter_stops = (0..6).map(|k| (None, Some(k)));
    for (kw, kd) in waiter_stops.chain(deleter_stops) {
        model(move || {
            let (h, env) = setup(3, 2, 1);
            let a = h.arena();
            send(&a, &env, 0, "g", b"1").unwrap();
            let handle = recv(&a, &env, 0, 1, 1_000).unwrap()[0].0;
            let (h1, e1, h2, e2) = (h.clone(), env.clone(), h.clone(), env.clone());
            let (sent, ()) = par(
                move || {
                    as_participant(&e1.clone(), 1, kw, || {
                        let a = h1.arena();
                        doorbell::space_begin_wait(&a, 1);
                        let r = send(&a, &e1, 1, "h", b"2");
                        if !crash::crashed() {
                            doorbell::space_end_wait(&a, 1);
                        }
                        r.is_ok()
                    })
                },
                move || {
                    as_participant(&e2.clone(), 0, kd, || {
                        let _ = handle::delete(&h2.arena(), &*e2, me(0), handle);
                    })
                },
            );
            let a = h.arena();
            // Past the visibility timeout (1 s): a deleter that stopped holding the group's
            // claim before its mark (layout 25 marks under the claim) leaves the message in
            // flight under its dead receiver, to come back then.
            env.advance(2_000);
            recovery::recover(&a, &*env, me(2)).unwrap();
            assert_eq!(
                a.hdr.space.0.waiters.load(Ordering::SeqCst),
                0,
                "a stopped waiter's count is given back"
            );
            let got = drain(&a, &env, 2);
            assert!(got.len() <= 2, "never duplicated");
            if sent {
                assert!(
                    got.contains(&b"2".to_vec()),
                    "an acknowledged send is never lost"
                );
            }
            // The slot is free again (or holds a message the drain took): a new send fits.
            send(&a, &env, 2, "k", b"3").unwrap();
            assert_eq!(drain(&a, &env, 2), [b"3".to_vec()]);
            assert_clean(&a);
        });
    }
}

/// The earliest visibility deadline of the messages in flight (`u64::MAX`: none).
fn earliest_deadline(a: &Arena<'_>) -> u64 {
    let mut min = u64::MAX;
    for cl in a.classes.iter().flatten() {
        for h in cl.headers {
            if let vis::State::Published(d) = vis::state(h.own.vis.load(Ordering::SeqCst)) {
                if d > 0 {
                    min = min.min(d);
                }
            }
        }
    }
    min
}

/// SYNC POINT(expiry-publish): a receive sets a deadline while a sweep resets and recomputes
/// `next_expiry`. The receive lowers `next_expiry` only when its deadline is earlier than what
/// it reads (with an earlier deadline pending it writes nothing); either way, afterwards
/// `next_expiry` is at most the earliest deadline in flight, so no expiry goes unnoticed.
#[test]
fn a_deadline_survives_a_concurrent_sweep() {
    for earlier in [false, true] {
        model(move || {
            let (h, env) = setup(3, 2, 3);
            let a = h.arena();
            send(&a, &env, 0, "g", b"1").unwrap();
            if earlier {
                // In flight with an earlier deadline: the receive below skips its fetch_min.
                send(&a, &env, 0, "e", b"0").unwrap();
                assert_eq!(recv(&a, &env, 0, 1, 500).unwrap().len(), 1);
            }
            let (h1, e1, h2, e2) = (h.clone(), env.clone(), h.clone(), env.clone());
            let (got, ()) = par(
                move || recv(&h1.arena(), &e1, 1, 1, 1_000).unwrap().len(),
                move || {
                    sweep::sweep(&h2.arena(), &*e2, me(2)).unwrap();
                },
            );
            let a = h.arena();
            let ne = a.hdr.next_expiry.0.load(Ordering::SeqCst);
            assert!(
                ne <= earliest_deadline(&a),
                "next_expiry {ne} after the earliest deadline (received {got})"
            );
        });
    }
}

/// A producer stops forever at each step of a send while a consumer runs. After its death is
/// known, recovery publishes a committed message or frees a half-made one: nothing wedges, an
/// acknowledged send is never lost, nothing is duplicated, everything is reclaimed.
#[test]
fn producer_dies_at_every_step() {
    for k in 0..9 {
        model(move || {
            let (h, env) = setup(3, 1, 2);
            let (h1, e1, h2, e2) = (h.clone(), env.clone(), h.clone(), env.clone());
            let (acked, early) = par(
                move || {
                    as_participant(&e1.clone(), 1, Some(k), || {
                        send(&h1.arena(), &e1, 1, "g", b"x").is_ok()
                    })
                },
                move || {
                    let a = h2.arena();
                    let got = recv(&a, &e2, 0, 1, 1_000).unwrap();
                    for (hd, _) in &got {
                        handle::delete(&a, &*e2, me(0), *hd).unwrap();
                    }
                    got.len()
                },
            );
            env.kill(1);
            let a = h.arena();
            recovery::recover(&a, &*env, me(2)).unwrap();
            let n = early + drain(&a, &env, 2).len();
            assert!(n <= 1, "never duplicated");
            if acked {
                assert_eq!(n, 1, "an acknowledged send is never lost");
            }
            assert_clean(&a);
        });
    }
}

/// A deleter stops forever at each step of its delete and cleanup while a producer sends to the
/// group; another participant recovers: the new message is delivered, nothing is reclaimed
/// twice or leaked.
#[test]
fn deleter_dies_at_every_step() {
    for k in 0..8 {
        model(move || {
            let (h, env) = setup(3, 1, 2);
            let a = h.arena();
            send(&a, &env, 0, "g", b"1").unwrap();
            let handle = recv(&a, &env, 0, 1, 1_000).unwrap()[0].0;
            let (h1, e1, h2, e2) = (h.clone(), env.clone(), h.clone(), env.clone());
            let (del, s) = par(
                move || {
                    as_participant(&e1.clone(), 1, Some(k), || {
                        handle::delete(&h1.arena(), &*e1, me(1), handle)
                    })
                },
                move || send(&h2.arena(), &e2, 2, "g", b"2"),
            );
            s.unwrap();
            env.kill(1);
            env.advance(2_000);
            recovery::recover(&a, &*env, me(2)).unwrap();
            let rest = drain(&a, &env, 2);
            match del {
                Ok(()) => assert_eq!(rest, vec![b"2".to_vec()]),
                // Died before or after its DELETED CAS: "1" comes back after its timeout or not.
                Err(_) => assert!(
                    rest == vec![b"2".to_vec()] || rest == vec![b"1".to_vec(), b"2".to_vec()],
                    "{rest:?}"
                ),
            }
            assert_clean(&a);
        });
    }
}

/// Two allocators race for the slots of a class; one dies right after claiming: slots are
/// never shared, and recovery frees the dead claim.
#[test]
fn slot_allocation_is_exclusive_and_recoverable() {
    model(|| {
        let (h, env) = setup(3, 1, 2);
        let (h1, e1, h2, e2) = (h.clone(), env.clone(), h.clone(), env.clone());
        let (x, y) = par(
            move || {
                as_participant(&e1.clone(), 1, Some(0), || {
                    shmfifo::protocol::pool::alloc(&h1.arena(), &*e1, 0, 0, me(1))
                })
            },
            move || shmfifo::protocol::pool::alloc(&h2.arena(), &*e2, 0, 0, me(0)).unwrap(),
        );
        assert!(matches!(x, Err(Fault::Crashed)));
        let a = h.arena();
        // The survivor's slot is claimed by it; the dead one's claim is freed by recovery.
        let r = recovery::recover(&a, &*env, me(2)).unwrap();
        assert_eq!(r.freed, 1);
        let w = a.classes[0].unwrap().headers[y.0 as usize]
            .own
            .vis
            .load(Ordering::SeqCst);
        assert_eq!(vis::state(w), vis::State::Claimed(me(0)));
    });
}

/// Two keys with the same home slot: one group empties (its last message deleted: kept, layout
/// 19) while a producer inserts the other and a third sends to the first again: each key has at
/// most one active entry, every message is delivered once.
#[test]
fn colliding_groups_insert_retire_and_reuse() {
    // Keys whose hashes share the home slot of a 4-slot table.
    let keys: Vec<String> = (0..64).map(|i| format!("k{i}")).collect();
    let a0 = keys[0].clone();
    let b0 = keys
        .iter()
        .skip(1)
        .find(|k| hash(k.as_bytes()) % 4 == hash(a0.as_bytes()) % 4)
        .unwrap()
        .clone();
    model(move || {
        let (h, env) = setup(3, 2, 4);
        let a = h.arena();
        send(&a, &env, 0, &a0, b"a1").unwrap();
        let handle = recv(&a, &env, 0, 1, 1_000).unwrap()[0].0;
        let (h1, e1, h2, e2) = (h.clone(), env.clone(), h.clone(), env.clone());
        let (b, d) = {
            let b0 = b0.clone();
            par(
                move || send(&h1.arena(), &e1, 1, &b0, b"b1"),
                move || handle::delete(&h2.arena(), &*e2, me(0), handle),
            )
        };
        b.unwrap();
        d.unwrap();
        send(&a, &env, 2, &a0, b"a2").unwrap();
        let mut active = 0;
        for e in a.groups {
            if gstate::kind(e.state.load(Ordering::SeqCst)) == gstate::ACTIVE {
                active += 1;
            }
        }
        assert_eq!(active, 2, "one entry per key");
        let mut got = drain(&a, &env, 2);
        got.sort();
        assert_eq!(got, vec![b"a2".to_vec(), b"b1".to_vec()]);
        assert_clean(&a);
    });
}

/// Purge (P1) racing with a receive and delete: every message is either purged or delivered
/// and deleted once; the purged messages' handles are expired; nothing leaks.
#[test]
fn purge_races_with_receive() {
    model(|| {
        let (h, env) = setup(3, 1, 3);
        let a = h.arena();
        send(&a, &env, 0, "g", b"1").unwrap();
        send(&a, &env, 0, "g", b"2").unwrap();
        let (h1, e1, h2, e2) = (h.clone(), env.clone(), h.clone(), env.clone());
        let (purged, delivered) = par(
            move || handle::purge(&h1.arena(), &*e1, me(1)).unwrap(),
            move || {
                let a = h2.arena();
                let got = recv(&a, &e2, 2, 10, 1_000).unwrap();
                let mut deleted = 0;
                for (hd, _) in &got {
                    match handle::delete(&a, &*e2, me(2), *hd) {
                        Ok(()) => deleted += 1,
                        Err(Fault::Expired) => {} // purged under us
                        Err(e) => panic!("{e:?}"),
                    }
                }
                (got.len() as u64, deleted)
            },
        );
        let (received, deleted) = delivered;
        assert!(
            purged + deleted <= 2 && purged + received >= 2,
            "purged {purged}, received {received}"
        );
        assert!(
            drain(&a, &env, 0).is_empty(),
            "nothing survives a purge that ran after the sends"
        );
        assert_clean(&a);
    });
}

/// Reviewer's scenario for claim incarnations: a deleter's clean-up races with another key's
/// insert into a table at its capacity, which retires the group once it is kept (the reclaim)
/// and reuses its entry. A claim taken for the old
/// incarnation never lets anyone act on the new one: the new group's message is delivered once
/// and everything is reclaimed.
#[test]
fn stale_claim_never_acts_on_a_reused_entry() {
    let keys: Vec<String> = (0..64).map(|i| format!("k{i}")).collect();
    let a0 = keys[0].clone();
    let b0 = keys
        .iter()
        .skip(1)
        .find(|k| hash(k.as_bytes()) % 2 == hash(a0.as_bytes()) % 2)
        .unwrap()
        .clone();
    model(move || {
        let (h, env) = setup(3, 1, 3);
        let a = h.arena();
        send(&a, &env, 0, &a0, b"a1").unwrap();
        let handle = recv(&a, &env, 0, 1, 1_000).unwrap()[0].0;
        let (h1, e1, h2, e2) = (h.clone(), env.clone(), h.clone(), env.clone());
        let b0 = b0.clone();
        let (d, s) = par(
            move || handle::delete(&h1.arena(), &*e1, me(0), handle),
            move || send(&h2.arena(), &e2, 1, &b0, b"b1"),
        );
        d.unwrap();
        s.unwrap();
        assert_eq!(drain(&a, &env, 2), vec![b"b1".to_vec()]);
        assert_clean(&a);
    });
}

/// A receiver polling without a wait (`receive::idle_after_empty` before each receive, as
/// `Queue::try_receive` asks it) beside a sender: its first poll found nothing, so its next
/// looks first, racing the send at every step. Whatever the interleaving, the message is taken
/// by that poll or by the first one after the send returned: a look never hides a message a
/// send published.
#[test]
fn a_polling_receivers_look_never_hides_a_sent_message() {
    fn poll(a: &Arena<'_>, env: &MockEnv) -> Vec<Vec<u8>> {
        if receive::idle_after_empty(a, env) {
            return Vec::new();
        }
        recv(a, env, 2, 10, 1_000)
            .unwrap()
            .into_iter()
            .map(|m| m.1)
            .collect()
    }
    model(|| {
        let (h, env) = setup(3, 2, 3);
        let a = h.arena();
        assert!(poll(&a, &env).is_empty());
        assert!(
            receive::idle_after_empty(&a, &*env),
            "quiet: the look says so"
        );
        let (h1, e1, h2, e2) = (h.clone(), env.clone(), h.clone(), env.clone());
        let (sent, racing) = par(
            move || send(&h1.arena(), &e1, 0, "g", b"m"),
            move || poll(&h2.arena(), &e2),
        );
        sent.unwrap();
        let mut got = racing;
        got.extend(poll(&a, &env));
        assert_eq!(
            got,
            vec![b"m".to_vec()],
            "taken once, at the latest by the next poll"
        );
    });
}

/// H1–H5, SYNC POINT(peek-seqlock) in `handle::mark_held`: a delete's guess of the group to
/// claim is a Relaxed read of the slot, so a handle that reached the deleter without
/// synchronising (a receipt passed as text between processes) may be met with an older
/// incarnation's group. Here slot s held "A" of group g (deleted, freed), then "M" of group x,
/// received by participant 0, whose handle participant 1 reads through Relaxed cells (no
/// happens-before) and deletes; meanwhile participant 0 deletes M itself (x empties, s is
/// freed) and sends "B" to g, into s. Participant 1 may guess g (A's), take g's claim, find M
/// in flight under its handle, and then read s's group as g again: B's. Its re-check of the
/// incarnation after an Acquire fence expires the handle there; without it, it stored
/// DELETED over B's word (this model fails so): B was never delivered. Whatever the order, B
/// is delivered, once, and each delete succeeds or finds the handle expired.
#[test]
fn a_stale_group_guess_never_deletes_the_slots_next_message() {
    model(|| {
        let (h, env) = setup(3, 2, 3);
        let a = h.arena();
        // g: A, C, D; A and C deleted (A's slot freed behind C's dummy), D in flight.
        for b in [b"A", b"C", b"D"] {
            send(&a, &env, 0, "g", b).unwrap();
        }
        for _ in 0..2 {
            let x = recv(&a, &env, 0, 1, 1_000).unwrap()[0].0;
            handle::delete(&a, &*env, me(0), x).unwrap();
        }
        let d = recv(&a, &env, 0, 1, 1_000).unwrap()[0].0;
        // The handle's words, Relaxed: nothing orders participant 0's writes before 1's reads.
        let cells = Arc::new([
            shmfifo::sync::AtomicU64::new(0),
            shmfifo::sync::AtomicU64::new(0),
        ]);
        let (h1, e1, h2, e2) = (h.clone(), env.clone(), h.clone(), env.clone());
        let (c1, c2) = (cells.clone(), cells.clone());
        let (own, other) = par(
            move || {
                let a = h1.arena();
                send(&a, &e1, 0, "x", b"M").unwrap();
                let m = recv(&a, &e1, 0, 1, 1_000).unwrap()[0].0;
                c1[0].store(
                    1 << 63 | u64::from(m.idx) << 32 | u64::from(m.inc),
                    Ordering::Relaxed,
                );
                c1[1].store(1 << 63 | u64::from(m.epoch), Ordering::Relaxed);
                let r = handle::delete(&a, &*e1, me(0), m);
                // M's slot may still be in use (participant 1 holds x's claim, and frees it
                // when it serves our delete's DIRTY request): then B goes after the race.
                let sent = match send(&a, &e1, 0, "g", b"B") {
                    Ok(_) => true,
                    Err(Fault::ClassFull(_)) => false,
                    Err(f) => panic!("{f:?}"),
                };
                (r, sent)
            },
            move || {
                let (w0, w1) = (c2[0].load(Ordering::Relaxed), c2[1].load(Ordering::Relaxed));
                if w0 >> 63 == 0 || w1 >> 63 == 0 {
                    return None; // not there yet: nothing to delete
                }
                let m = Handle {
                    idx: (w0 >> 32) as u32 & 0x7fff_ffff,
                    inc: w0 as u32,
                    epoch: w1 as u32,
                    member: 0,
                };
                Some(handle::delete(&h2.arena(), &*e2, me(1), m))
            },
        );
        let (own, sent) = own;
        assert!(matches!(own, Ok(()) | Err(Fault::Expired)), "{own:?}");
        if let Some(r) = other {
            assert!(matches!(r, Ok(()) | Err(Fault::Expired)), "{r:?}");
        }
        if !sent {
            send(&a, &env, 0, "g", b"B").unwrap();
        }
        handle::delete(&a, &*env, me(0), d).unwrap();
        assert_eq!(drain(&a, &env, 2), vec![b"B".to_vec()], "B delivered, once");
    });
}
