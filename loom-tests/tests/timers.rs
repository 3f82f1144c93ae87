//! Models of the expiry wheel (layout 12): SYNC POINT(expiry-wheel) between a
//! receiver filing its deadline and a sweeper draining the bucket, and a sweeper that stops
//! forever mid-drain.
#![cfg(shmfifo_loom)]

use shmfifo::layout::{wheel_words, WHEEL_BUCKETS};
use shmfifo::protocol::timers;
use shmfifo_loom_tests::*;

/// Every message in flight (a deadline after `now`) is on the wheel: its group's bit is set in
/// its deadline's bucket, that bucket's minimum is at most the deadline, and `next_expiry` too.
fn assert_filed(a: &Arena<'_>, now: u64) {
    let w = wheel_words(a.groups.len() as u32);
    for cl in a.classes.iter().flatten() {
        for h in cl.headers {
            let vis::State::Published(d) = vis::state(h.own.vis.load(Ordering::SeqCst)) else {
                continue;
            };
            if d <= now {
                continue;
            }
            let g = words::group_of(h.group_epoch0.load(Ordering::SeqCst)) as usize;
            let b = timers::bucket(d);
            let word = a.timers[WHEEL_BUCKETS + b * w + g / 64].load(Ordering::SeqCst);
            assert!(
                word & (1 << (g % 64)) != 0,
                "deadline {d} of group {g} not filed"
            );
            assert!(
                timers::bucket_min(a, b) <= d,
                "bucket {b} minimum after {d}"
            );
            let ne = a.hdr.next_expiry.0.load(Ordering::SeqCst);
            assert!(ne <= d, "next_expiry {ne} after the deadline {d}");
        }
    }
}

/// SYNC POINT(expiry-wheel): group "e"'s timeout has ended (its deadline, 101, and the new one
/// below share bucket 0) and a sweeper drains that bucket while a receiver takes group "g"'s
/// next message and files its deadline (701) there, where "g"'s bit is still set from its
/// deleted first message (so the receiver only reads it). Whatever the interleaving,
/// afterwards the new deadline is filed (bit, bucket minimum, `next_expiry`), and "e" was
/// hinted: it is received again without a full sweep.
#[test]
fn a_deadline_filed_during_a_drain_stays_on_the_wheel() {
    model(|| {
        let h = arena(3, 2, 4);
        let env = Arc::new(MockEnv::default());
        env.advance(1);
        let a = h.arena();
        send(&a, &env, 0, "e", b"0").unwrap();
        send(&a, &env, 0, "g", b"x").unwrap();
        send(&a, &env, 0, "g", b"1").unwrap();
        let first = recv(&a, &env, 0, 2, 100).unwrap();
        assert_eq!(first.len(), 2, "one message of each group");
        for (hd, b) in first {
            if b == b"x" {
                handle::delete(&a, &*env, me(0), hd).unwrap(); // "g"'s bit stays set
            }
        }
        env.advance(200); // "e"'s deadline (101) has passed
        assert_eq!(timers::bucket(101), timers::bucket(201 + 500));
        let (h1, e1, h2, e2) = (h.clone(), env.clone(), h.clone(), env.clone());
        let (got, _) = par(
            move || recv(&h1.arena(), &e1, 1, 1, 500).unwrap(),
            move || sweep::maybe_sweep(&h2.arena(), &*e2, me(2)).unwrap(),
        );
        let a = h.arena();
        assert_filed(&a, env.now.load(Ordering::SeqCst));
        // "e" comes back by its hint (the sweep above, or a later due one): no full sweep.
        let mut bodies: Vec<Vec<u8>> = got.into_iter().map(|(_, b)| b).collect();
        if !bodies.contains(&b"0".to_vec()) {
            sweep::maybe_sweep(&a, &*env, me(2)).unwrap();
            bodies.extend(
                recv(&a, &env, 2, 10, 500)
                    .unwrap()
                    .into_iter()
                    .map(|(_, b)| b),
            );
        }
        bodies.sort();
        assert_eq!(bodies, vec![b"0".to_vec(), b"1".to_vec()]);
    });
}

/// A sweeper stops forever at each step of a drain (alive: it is never marked dead), after
/// clearing bits it may not have re-filed, while a receiver takes "g" and files its deadline.
/// Nothing is lost: once the timeouts end, the periodic sweep (which looks at every group of
/// this small table) finds what the wheel lost, and both messages are received again.
#[test]
fn a_sweeper_stopped_mid_drain_loses_no_expiry() {
    at_each_step(12, 2, |k| {
        model(move || {
            let h = arena(3, 2, 3);
            let env = Arc::new(MockEnv::default());
            env.advance(1);
            let a = h.arena();
            send(&a, &env, 0, "e", b"0").unwrap();
            assert_eq!(recv(&a, &env, 0, 1, 100).unwrap().len(), 1);
            send(&a, &env, 0, "g", b"1").unwrap();
            env.advance(200);
            let (h1, e1, h2, e2) = (h.clone(), env.clone(), h.clone(), env.clone());
            let (got, _) = par(
                move || recv(&h1.arena(), &e1, 1, 1, 500).unwrap(),
                move || {
                    crash::arm(k);
                    let r = sweep::maybe_sweep(&h2.arena(), &*e2, me(2));
                    if crash::crashed() {
                        stopped();
                    }
                    r
                },
            );
            let a = h.arena();
            let mut bodies: Vec<Vec<u8>> = got.into_iter().map(|(_, b)| b).collect();
            // Every timeout ends and a sweep period passes: the periodic sweep runs.
            env.advance(sweep::SWEEP_PERIOD_MS + 1_000);
            sweep::maybe_sweep(&a, &*env, me(0)).unwrap();
            for (_, b) in recv(&a, &env, 0, 10, 500).unwrap() {
                bodies.push(b);
            }
            bodies.sort();
            bodies.dedup();
            assert_eq!(bodies, vec![b"0".to_vec(), b"1".to_vec()], "nothing lost");
        });
    });
}
