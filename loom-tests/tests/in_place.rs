//! Models of a receive that serves the ready ring's only hint in place (layout 27): the hint
//! stays queued as a placeholder, its group's claim word marked `STALE`, and the group's next
//! ready-check makes it fresh where it is still the ring's only hint, or takes it out and
//! pushes a fresh one behind the groups hinted since. What must not happen: a message
//! stranded with its hint bits set and no hint that serves it (nobody would look at its group
//! until a full sweep), a receiver asleep beside a deliverable message that nobody rings for,
//! or a placeholder served ahead of a group hinted before its group became ready (R6).
#![cfg(shmfifo_loom)]

use shmfifo::protocol::group;
use shmfifo_loom_tests::*;

/// Sends `body` to `id`, receives it in place and deletes it: `id`'s hint is left queued as
/// a placeholder (the only hint, served in place), its claim word `HINT | STALE`.
fn served_in_place(a: &Arena<'_>, env: &MockEnv, id: &str, body: &[u8]) {
    send(a, env, 0, id, body).unwrap();
    let got = recv(a, env, 0, 1, 1_000).unwrap();
    assert_eq!(got.len(), 1);
    handle::delete(a, env, me(0), got[0].0).unwrap();
    let (g, _) = group::find(a, hash(id.as_bytes()), id.as_bytes())
        .unwrap()
        .unwrap();
    let w = a.groups[g as usize].claim.load(Ordering::SeqCst);
    assert_eq!(
        w & owner::HINT_BITS,
        owner::HINT_BITS,
        "served in place: a placeholder queued"
    );
}

/// Receives (up to `max` messages each time, visibility 1 s) and deletes, `times` times, as
/// participant `who`: every body in delivery order.
fn receives(a: &Arena<'_>, env: &MockEnv, who: u32, max: usize, times: usize) -> Vec<Vec<u8>> {
    (0..times)
        .flat_map(|_| recv_and_delete(a, env, who, max, 1_000))
        .collect()
}

/// A receive serves "g"'s only hint in place and deletes what it took while a producer sends
/// to "g" again: the second message is found by the next receive, without a sweep (the clock
/// does not move: no sweep is due), and the queue ends clean.
#[test]
fn a_hint_served_in_place_races_a_send_and_strands_nothing() {
    model(|| {
        let h = arena(3, 1, 4);
        let env = Arc::new(MockEnv::default());
        let a = h.arena();
        send(&a, &env, 0, "g", b"1").unwrap();
        let (h1, e1, h2, e2) = (h.clone(), env.clone(), h.clone(), env.clone());
        let (first, ()) = par(
            move || recv_and_delete(&h1.arena(), &e1, 1, 1, 1_000),
            move || {
                send(&h2.arena(), &e2, 2, "g", b"2").unwrap();
            },
        );
        let mut got = first;
        got.extend(receives(&a, &env, 0, 10, 2));
        assert_eq!(
            got,
            [b"1".to_vec(), b"2".to_vec()],
            "both, in order, without a sweep"
        );
        assert_clean(&a);
    });
}

/// The placeholder's group and another group become ready at once: "h" sent by one
/// participant while another sends "g" again (its ready-check finds the placeholder, the
/// ring's only hint or one with "h" behind it) and a third receives one message. Every
/// message is delivered once, without a sweep (the two sends race: their order is free).
#[test]
fn a_placeholder_and_another_group_made_ready_at_once() {
    model(|| {
        let h = arena(4, 2, 4);
        let env = Arc::new(MockEnv::default());
        let a = h.arena();
        served_in_place(&a, &env, "g", b"0");
        let (h1, e1, h2, e2) = (h.clone(), env.clone(), h.clone(), env.clone());
        let (((), ()), got) = {
            let (h3, e3) = (h.clone(), env.clone());
            let t = thread::spawn(move || recv_and_delete(&h3.arena(), &e3, 3, 1, 1_000));
            let r = par(
                move || {
                    send(&h1.arena(), &e1, 1, "h", b"x").unwrap();
                },
                move || {
                    send(&h2.arena(), &e2, 2, "g", b"2").unwrap();
                },
            );
            (r, t.join().unwrap())
        };
        let mut all = got.clone();
        all.extend(receives(&a, &env, 0, 1, 3));
        let mut sorted = all.clone();
        sorted.sort();
        assert_eq!(
            sorted,
            [b"2".to_vec(), b"x".to_vec()],
            "each once, without a sweep: {all:?}"
        );
        assert_clean(&a);
    });
}

/// R6 with a placeholder, one producer: "h" is sent, then "g" again, while a receiver takes
/// one message. "g"'s message is never served before "h"'s: a receive that finds it sent
/// finds "h"'s, sent before it, ready too. So the receive takes nothing or "h"'s, and what
/// follows serves the rest in that order: "g"'s placeholder, queued ahead of "h"'s hint,
/// never serves "g" before it (a receiver that popped the placeholder and is slow to drop it
/// included: the ready-check waits for its drop rather than take the hint over).
#[test]
fn a_placeholder_is_not_served_ahead_of_a_group_hinted_before() {
    model(|| {
        let h = arena(3, 2, 4);
        let env = Arc::new(MockEnv::default());
        let a = h.arena();
        served_in_place(&a, &env, "g", b"0");
        let (h1, e1, h2, e2) = (h.clone(), env.clone(), h.clone(), env.clone());
        let ((), got) = par(
            move || {
                let a = h1.arena();
                send(&a, &e1, 1, "h", b"x").unwrap();
                send(&a, &e1, 1, "g", b"2").unwrap();
            },
            move || recv_and_delete(&h2.arena(), &e2, 2, 1, 1_000),
        );
        let rest = receives(&a, &env, 0, 1, 3);
        let mut all = got.clone();
        all.extend(rest.iter().cloned());
        assert_eq!(
            all,
            [b"x".to_vec(), b"2".to_vec()],
            "R6: h first: {got:?} {rest:?}"
        );
        assert_clean(&a);
    });
}

/// SYNC POINT(doorbell) beside a placeholder: "g" was served in place and emptied (its hint
/// a placeholder). A receiver announces its sleep and looks while another participant sends
/// to "g" again (the ready-check makes the placeholder fresh, pushing nothing): if the look
/// found nothing while a message can be received, the doorbell rang after the announcement.
#[test]
fn a_receiver_asleep_beside_a_placeholder_is_woken() {
    model(|| {
        let h = arena(3, 1, 4);
        let env = Arc::new(MockEnv::default());
        let a = h.arena();
        served_in_place(&a, &env, "g", b"0");
        let (h1, e1, h2, e2) = (h.clone(), env.clone(), h.clone(), env.clone());
        let ((bell, got), ()) = par(
            move || {
                let a = h1.arena();
                let bell = doorbell::begin_wait(&a, 0);
                (bell, recv(&a, &e1, 0, 1, 1_000).unwrap())
            },
            move || {
                send(&h2.arena(), &e2, 1, "g", b"1").unwrap();
            },
        );
        if got.is_empty() {
            // Had the receiver slept, would it be woken? Only if something is there to take.
            let left = recv(&a, &env, 2, 10, 1_000).unwrap();
            if !left.is_empty() {
                assert_ne!(
                    a.hdr.wake.0.doorbell.load(Ordering::Acquire),
                    bell,
                    "a receiver asleep beside a deliverable message is woken"
                );
            }
        }
        doorbell::end_wait(&a, 0);
    });
}

/// A sender of the placeholder's group dies at each step (its link, its publish, the
/// ready-check that takes the placeholder out of the ring, with "h" queued behind it, and
/// pushes a fresh hint) while another participant sends to "g" too: after recovery every
/// accepted message is delivered, "h"'s included, and the queue ends clean.
#[test]
fn a_sender_refreshing_a_placeholder_that_dies_at_each_step_loses_nothing() {
    at_each_step(32, 3, |k| {
        model(move || {
            let h = arena(3, 2, 4);
            let env = Arc::new(MockEnv::default());
            let a = h.arena();
            served_in_place(&a, &env, "g", b"0");
            send(&a, &env, 0, "h", b"x").unwrap();
            let (h1, e1, h2, e2) = (h.clone(), env.clone(), h.clone(), env.clone());
            let (dead, other) = par(
                move || {
                    as_participant(&e1, 1, Some(k), || {
                        let r = send(&h1.arena(), &e1, 1, "g", b"d");
                        if crash::crashed() {
                            stopped();
                        }
                        r
                    })
                },
                move || send(&h2.arena(), &e2, 2, "g", b"y"),
            );
            let a = h.arena();
            let other = match other {
                Err(Fault::Busy(_)) => send(&a, &env, 2, "g", b"y"),
                r => r,
            };
            other.expect("the survivor's send is accepted");
            recovery::recover(&a, &*env, me(2)).expect("recovery");
            env.advance(sweep::SWEEP_PERIOD_MS + 1);
            let got = drain(&a, &env, 2);
            assert!(got.contains(&b"x".to_vec()), "k={k}: {got:?}");
            assert!(got.contains(&b"y".to_vec()), "k={k}: {got:?}");
            if dead.is_ok() {
                assert!(got.contains(&b"d".to_vec()), "k={k}: {got:?}");
            }
            assert_clean(&a);
        });
    });
}

/// A sender of the placeholder's group stopped forever (alive) at each step, "h" queued
/// behind the placeholder: another participant's receive is served "h"'s message, and after
/// it a send to "h" and the receives that follow, at once (no sweep); nothing is `Corrupted`.
/// (The later send runs after the join: a second pusher of the same heap arena shares the
/// stopped one's process-local push cursor, a std atomic loom does not see, and would then
/// read the stopped one's entry as loom's oldest value.)
#[test]
fn a_sender_refreshing_a_placeholder_stopped_forever_blocks_no_other_group() {
    at_each_step(32, 3, |k| {
        model(move || {
            let h = arena(3, 2, 4);
            let env = Arc::new(MockEnv::default());
            let a = h.arena();
            served_in_place(&a, &env, "g", b"0");
            send(&a, &env, 0, "h", b"x").unwrap();
            let (h1, e1, h2, e2) = (h.clone(), env.clone(), h.clone(), env.clone());
            let (sent, got) = par(
                move || {
                    crash::arm(k);
                    let r = send(&h1.arena(), &e1, 1, "g", b"d");
                    if crash::crashed() {
                        stopped();
                    }
                    r
                },
                move || recv_and_delete(&h2.arena(), &e2, 2, 10, 1_000),
            );
            assert!(!matches!(sent, Err(Fault::Corrupted(_))), "k={k}: {sent:?}");
            assert!(got.contains(&b"x".to_vec()), "k={k}: {got:?}");
            send(&a, &env, 2, "h", b"z").expect("another group is served");
            let rest = receives(&a, &env, 2, 10, 2);
            assert!(rest.contains(&b"z".to_vec()), "k={k}: {got:?} {rest:?}");
        });
    });
}
