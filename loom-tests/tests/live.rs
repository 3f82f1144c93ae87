//! Live settings and the in-flight census (`protocol::live`, `accounting::fresh_budget`):
//! SYNC POINTs reschedule and census, with a participant that stops forever mid-step.

use shmfifo::protocol::live;
use shmfifo_loom_tests::*;

type Env = Arc<MockEnv>;

/// A mock environment whose clock reads `ms`.
fn at(ms: u64) -> MockEnv {
    let e = MockEnv::default();
    e.advance(ms);
    e
}

/// One participant slot per role, one group, one slot; a queue delay long enough that the
/// message sent in the set-up is delayed until a change ends it.
fn delayed() -> (Arc<HeapArena>, Env) {
    let env: Env = Arc::new(MockEnv::default());
    env.advance(1);
    let h = arena(3, 1, 1);
    let a = h.arena();
    live::change(
        &a,
        &*env,
        &live::Change {
            delay_ms: Some(900_000),
            ..Default::default()
        },
    );
    send(&a, &env, 0, "g", b"m").unwrap();
    (h, env)
}

fn delay_ends(a: &Arena<'_>, env: &MockEnv) {
    live::change(
        a,
        env,
        &live::Change {
            delay_ms: Some(0),
            ..Default::default()
        },
    );
}

/// L1, SYNC POINT(reschedule): a receiver announces itself as a sleeper and looks (a sweep if
/// one is due, then a receive) while another participant ends the queue's delay. Either the
/// receiver got the message, or it would be woken (the doorbell moved since it announced) and
/// gets it when it looks again: at once where the change's request for a sweep is still
/// pending, and in any case once the periodic sweep is due (a sweep that ran while the
/// receiver held the group's claim, with the old delay, may have consumed the request).
#[test]
fn a_setting_change_wakes_a_sleeper_or_is_seen() {
    model(|| {
        let (h, env) = delayed();
        let (h1, e1, h2, e2) = (h.clone(), env.clone(), h.clone(), env.clone());
        let ((bell, got), ()) = par(
            move || {
                let a = h1.arena();
                let bell = doorbell::begin_wait(&a, 1);
                let _ = sweep::maybe_sweep(&a, &*e1, me(1));
                (bell, recv(&a, &e1, 1, 1, 1_000).unwrap())
            },
            move || delay_ends(&h2.arena(), &e2),
        );
        let a = h.arena();
        doorbell::end_wait(&a, 1);
        if !got.is_empty() {
            return;
        }
        assert_ne!(doorbell::rung(&a), bell, "the sleeper is woken");
        let pending = a.hdr.next_expiry.0.load(Ordering::SeqCst) == 0;
        let _ = sweep::maybe_sweep(&a, &*env, me(1));
        let mut again = recv(&a, &env, 1, 1, 1_000).unwrap();
        if pending {
            assert_eq!(again.len(), 1, "the change's sweep request was pending");
        }
        if again.is_empty() {
            env.advance(sweep::SWEEP_PERIOD_MS + 1);
            sweep::maybe_sweep(&a, &*env, me(1)).unwrap();
            again = recv(&a, &env, 1, 1, 1_000).unwrap();
        }
        assert_eq!(
            again.len(),
            1,
            "delivered by the periodic sweep at the latest"
        );
    });
}

/// L1: the participant changing the delay stops forever at each step of the change. The
/// others never wait on it; the message is delivered at the latest once the periodic sweep is
/// due, and at once where the change got as far as asking for a sweep.
#[test]
fn a_changer_stopped_mid_change_delays_nothing_past_the_sweep_period() {
    at_each_step(8, 1, |k| {
        model(move || {
            let (h, env) = delayed();
            let (h1, e1) = (h.clone(), env.clone());
            let asked = thread::spawn(move || {
                crash::arm(k);
                delay_ends(&h1.arena(), &e1);
                if crash::crashed() {
                    stopped();
                }
                // Whether the change got as far as asking for a sweep.
                h1.arena().hdr.next_expiry.0.load(Ordering::SeqCst) == 0
            })
            .join()
            .unwrap();
            let a = h.arena();
            let _ = sweep::maybe_sweep(&a, &*env, me(1));
            let got = recv(&a, &env, 1, 1, 1_000).unwrap();
            if asked {
                assert_eq!(got.len(), 1, "a sweep was asked for");
                return;
            }
            if got.is_empty() {
                env.advance(sweep::SWEEP_PERIOD_MS + 1);
                sweep::maybe_sweep(&a, &*env, me(1)).unwrap();
                let later = recv(&a, &env, 1, 1, 1_000).unwrap();
                let delay = live::read(&a).delay_ms;
                assert_eq!(later.len(), usize::from(delay == 0), "delay {delay}");
            }
        });
    });
}

/// R8, SYNC POINT(census): the in-flight count says one message too many (a receiver died
/// between its receive and its count), so the limit of 1 leaves no room. Two receivers ask for
/// room at once, a second after the last census: one CAS elects one censor, whose census
/// corrects the count; neither is told of room that is not there, and afterwards the room is
/// exact.
#[test]
fn census_corrects_the_count_once_a_second() {
    model(|| {
        let env: Env = Arc::new(MockEnv::default());
        let h = arena(3, 2, 2);
        let a = h.arena();
        a.hdr.max_in_flight.store(1, Ordering::Relaxed);
        accounting::account_in_flight(&a, me(0), 1); // a count nobody holds
        env.advance(2_000);
        assert_eq!(
            accounting::fresh_budget(&a, &at(999)),
            0,
            "no census before a second"
        );
        let (h1, h2) = (h.clone(), h.clone());
        let (x, y) = par(
            move || accounting::fresh_budget(&h1.arena(), &at(2_000)),
            move || accounting::fresh_budget(&h2.arena(), &at(2_000)),
        );
        assert!(x <= 1 && y <= 1, "never more room than there is: {x} {y}");
        assert!(x + y >= 1, "the censor finds the room: {x} {y}");
        assert_eq!(a.hdr.census.0.last_ms.load(Ordering::SeqCst), 2_000);
        assert_eq!(accounting::fresh_budget(&a, &at(2_000)), 1);
    });
}

/// R8: the censor stops forever right after winning the election, before its census. The
/// count stays wrong until the next census, a second later, which any participant runs.
#[test]
fn a_censor_stopped_mid_census_is_replaced_a_second_later() {
    at_each_step(4, 0, |k| {
        model(move || {
            let h = arena(3, 2, 2);
            let a = h.arena();
            a.hdr.max_in_flight.store(1, Ordering::Relaxed);
            accounting::account_in_flight(&a, me(0), 1);
            let h1 = h.clone();
            let first = thread::spawn(move || {
                crash::arm(k);
                let r = accounting::fresh_budget(&h1.arena(), &at(1_000));
                if crash::crashed() {
                    stopped();
                }
                r
            })
            .join()
            .unwrap();
            let now = if first == 1 { 1_000 } else { 2_000 };
            assert_eq!(accounting::fresh_budget(&a, &at(now)), 1);
        });
    });
}

/// L1, R3: a receive whose instant was read before the producer stamped its message (each
/// operation reads the clock once) pops the producer's hint. Without a delay the message is
/// visible whatever the two instants: taken at once, never mistaken for a delayed one (which
/// nobody would hint again before a periodic sweep: the 1 s stall a two-consumer run found).
#[test]
fn a_receiver_whose_instant_is_older_than_the_send_takes_the_message() {
    model(|| {
        let h = arena(3, 1, 2);
        let a = h.arena();
        let (sender, receiver) = (at(10), at(5));
        send(&a, &sender, 0, "g", b"m").unwrap();
        let got = recv(&a, &receiver, 1, 10, 1_000).unwrap();
        assert_eq!(got.len(), 1, "taken by the receiver of the older instant");
    });
}

/// L1: a taker found a message delayed and filed its group on the expiry wheel at the delay's
/// end, then the delay was removed (by a changer stopped before it asked for a sweep). When
/// the filed time comes, the expiry sweep (the wheel's due buckets only) hints the group,
/// though its head was never received: whoever files a group leaves its hint to the sweep.
#[test]
fn a_group_filed_while_delayed_is_hinted_by_the_expiry_sweep() {
    model(|| {
        let h = arena(3, 1, 2);
        let a = h.arena();
        a.hdr.delay_ms.store(1_000, Ordering::Relaxed);
        send(&a, &at(10), 0, "g", b"m").unwrap();
        assert!(
            recv(&a, &at(20), 1, 10, 1_000).unwrap().is_empty(),
            "delayed"
        );
        a.hdr.delay_ms.store(0, Ordering::Relaxed);
        let swept = sweep::sweep_due(&a, &at(1_011), me(1), false).unwrap();
        assert_eq!(swept.pushed, 1, "hinted from the wheel: {swept:?}");
        assert_eq!(recv(&a, &at(1_012), 1, 10, 1_000).unwrap().len(), 1);
    });
}
