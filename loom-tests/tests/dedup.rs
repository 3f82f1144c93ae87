//! Models of the dedup table protocol (protocol::dedup): reserve / commit, a duplicate of a
//! send in progress, a sender that stops forever at every step, expiry and reuse of entries
//! across homes, and a hash collision.
#![cfg(shmfifo_loom)]

use shmfifo_loom_tests::*;

type Env = Arc<MockEnv>;

fn setup(dedup_slots: u32) -> (Arc<HeapArena>, Env) {
    (
        arena_dedup(3, 2, 4, dedup_slots),
        Arc::new(MockEnv::default()),
    )
}

/// Two producers send the same dedup id at once: exactly one message is enqueued, and both
/// sends name it (D1, D6).
#[test]
fn concurrent_duplicates_enqueue_one() {
    model(|| {
        let (h, env) = setup(2);
        let (h1, e1, h2, e2) = (h.clone(), env.clone(), h.clone(), env.clone());
        let (x, y) = par(
            move || send_dedup(&h1.arena(), &e1, 0, "g", b"a", "k", 0).unwrap(),
            move || send_dedup(&h2.arena(), &e2, 1, "g", b"b", "k", 0).unwrap(),
        );
        assert!(x.duplicate != y.duplicate, "exactly one is the original");
        assert_eq!(
            (x.idx, x.inc, x.seq_hi, x.pos),
            (y.idx, y.inc, y.seq_hi, y.pos)
        );
        let a = h.arena();
        let got = drain(&a, &env, 2);
        let want: &[u8] = if x.duplicate { b"b" } else { b"a" };
        assert_eq!(got, vec![want.to_vec()]);
        assert_clean(&a);
    });
}

/// Runs a send as participant 0 that stops forever at its `k`-th crash point, then marks it
/// dead. Returns whether it stopped (false: it completed).
fn dying_send(h: &Arc<HeapArena>, env: &Env, k: u32, body: &[u8]) -> bool {
    let (h1, e1) = (h.clone(), env.clone());
    let body = body.to_vec();
    thread::spawn(move || {
        crash::arm(k);
        let r = send_dedup(&h1.arena(), &e1, 0, "g", &body, "k", 0);
        let stopped = crash::crashed();
        if stopped {
            e1.kill(0);
        } else {
            r.unwrap();
        }
        stopped
    })
    .join()
    .unwrap()
}

/// A sender stops forever at each step of a dedup send; afterwards a retry with the same id
/// (with a recovery first, a receive first, or neither) is a duplicate exactly when the dead
/// send's message was linked, and exactly one message is delivered. (The receive first is the
/// torture harness's find: a receiver that publishes a dead producer's linked node must settle
/// its dedup entry first, or the retry fails.)
#[test]
fn sender_dies_at_every_step_then_a_retry() {
    use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
    // How many stopped sends had (not) been linked: both outcomes must be covered.
    static LINKED: AtomicUsize = AtomicUsize::new(0);
    static UNLINKED: AtomicUsize = AtomicUsize::new(0);
    for first in ["nothing", "recover", "receive"] {
        for k in 0..16 {
            model(move || {
                let (h, env) = setup(2);
                let stopped = dying_send(&h, &env, k, b"dead");
                let a = h.arena();
                let mut got = Vec::new();
                match first {
                    "recover" => {
                        recovery::recover(&a, &*env, me(1)).unwrap();
                    }
                    "receive" => got = drain(&a, &env, 2),
                    _ => {}
                }
                let r = send_dedup(&a, &env, 1, "g", b"retry", "k", 0).unwrap();
                got.extend(drain(&a, &env, 2));
                assert_eq!(got.len(), 1, "exactly one message (k = {k})");
                let want: &[u8] = if r.duplicate { b"dead" } else { b"retry" };
                assert_eq!(got[0], want, "a duplicate names the delivered message");
                if !stopped {
                    assert!(r.duplicate);
                } else if r.duplicate {
                    LINKED.fetch_add(1, Relaxed);
                } else {
                    UNLINKED.fetch_add(1, Relaxed);
                }
                recovery::recover(&a, &*env, me(1)).unwrap();
                assert_clean(&a);
                assert!(
                    send_dedup(&a, &env, 1, "g", b"again", "k", 0)
                        .unwrap()
                        .duplicate,
                    "the id stays deduplicated"
                );
            });
        }
    }
    assert!(LINKED.load(Relaxed) >= 2 && UNLINKED.load(Relaxed) >= 10);
}

/// A duplicate races with a send that stops forever in the middle (after its slot is recorded
/// in the entry, `k` = 5, or after the link, before the commit, `k` = 9): the duplicate waits,
/// then settles the dead send; exactly one message.
#[test]
fn duplicate_of_a_send_that_dies_in_progress() {
    for k in [5, 9] {
        model(move || {
            let (h, env) = setup(2);
            let (h1, e1, h2, e2) = (h.clone(), env.clone(), h.clone(), env.clone());
            let (_, r) = par(
                move || {
                    crash::arm(k);
                    let r = send_dedup(&h1.arena(), &e1, 0, "g", b"dead", "k", 0);
                    if crash::crashed() {
                        e1.kill(0);
                    } else {
                        r.unwrap();
                    }
                },
                move || send_dedup(&h2.arena(), &e2, 1, "g", b"live", "k", 0).unwrap(),
            );
            let a = h.arena();
            recovery::recover(&a, &*env, me(2)).unwrap();
            let got = drain(&a, &env, 2);
            assert_eq!(got.len(), 1, "exactly one message");
            let want: &[u8] = if r.duplicate { b"dead" } else { b"live" };
            assert_eq!(got[0], want);
            assert_clean(&a);
        });
    }
}

/// Entries expire (D1) and are reused in place, concurrently, by a key of their own home and a
/// key of another home; with the strict setting (`DedupOverflow::Refuse`) a full table fails
/// cleanly before that.
#[test]
fn expiry_and_reuse_across_homes() {
    model(|| {
        let (h, env) = setup(2);
        let a = h.arena();
        a.hdr.dedup_overflow.store(1, Ordering::Relaxed);
        a.hdr
            .dedup_interval_ms
            .store(10, shmfifo::sync::Ordering::Relaxed);
        assert!(
            !send_dedup(&a, &env, 2, "g", b"1", "k1", 0)
                .unwrap()
                .duplicate
        );
        assert!(
            !send_dedup(&a, &env, 2, "g", b"2", "k2", 1)
                .unwrap()
                .duplicate
        );
        assert_eq!(
            send_dedup(&a, &env, 2, "g", b"3", "k3", 1),
            Err(Fault::DedupFull),
            "no entry is evicted before its interval"
        );
        assert!(
            send_dedup(&a, &env, 2, "g", b"x", "k2", 1)
                .unwrap()
                .duplicate
        );
        env.advance(10);
        let (h1, e1, h2, e2) = (h.clone(), env.clone(), h.clone(), env.clone());
        let (x, y) = par(
            move || send_dedup(&h1.arena(), &e1, 0, "g", b"4", "k1", 0).unwrap(),
            move || send_dedup(&h2.arena(), &e2, 1, "g", b"5", "k3", 1).unwrap(),
        );
        assert!(
            !x.duplicate && !y.duplicate,
            "both ids are new after the interval"
        );
        assert!(
            send_dedup(&a, &env, 2, "g", b"6", "k1", 0)
                .unwrap()
                .duplicate
        );
        assert!(
            send_dedup(&a, &env, 2, "g", b"7", "k3", 1)
                .unwrap()
                .duplicate
        );
        let got = drain(&a, &env, 2);
        assert_eq!(got.len(), 4);
        assert_clean(&a);
    });
}

/// The default setting (`DedupOverflow::ShortenWindow`): the table (2 entries) is
/// full of ids within their interval. A new id evicts the oldest (k1) while another sender
/// retries k1: the retry is a duplicate of k1's message (it came first) or a new message (the
/// eviction came first), never refused, never lost, and the eviction is counted.
#[test]
fn eviction_races_a_retry_of_the_evicted_id() {
    model(|| {
        let (h, env) = setup(2);
        let a = h.arena();
        let k1 = send_dedup(&a, &env, 2, "g", b"1", "k1", 0).unwrap();
        env.advance(1);
        assert!(
            !send_dedup(&a, &env, 2, "g", b"2", "k2", 1)
                .unwrap()
                .duplicate
        );
        let (h1, e1, h2, e2) = (h.clone(), env.clone(), h.clone(), env.clone());
        let (x, y) = par(
            move || send_dedup(&h1.arena(), &e1, 0, "g", b"3", "k3", 1),
            move || send_dedup(&h2.arena(), &e2, 1, "g", b"4", "k1", 0),
        );
        let (x, y) = (x.expect("never refused"), y.expect("never refused"));
        assert!(!x.duplicate, "k3 is new");
        if y.duplicate {
            assert_eq!(
                (y.idx, y.inc),
                (k1.idx, k1.inc),
                "a duplicate of k1's message"
            );
        }
        let evicted = a.hdr.dedup_evict.0.count.load(Ordering::Relaxed);
        assert!(evicted >= 1, "the eviction is counted");
        let got = drain(&a, &env, 2);
        assert_eq!(got.len(), 3 + usize::from(!y.duplicate), "{got:?}");
        assert_clean(&a);
    });
}

/// Two different ids with the same hash are both sent (keys are compared in full), while a
/// third sender repeats one of them.
#[test]
fn hash_collision_never_drops_a_message() {
    model(|| {
        let (h, env) = setup(4);
        let a = h.arena();
        assert!(
            !send_dedup(&a, &env, 2, "g", b"a", "first", 7)
                .unwrap()
                .duplicate
        );
        let (h1, e1, h2, e2) = (h.clone(), env.clone(), h.clone(), env.clone());
        let (x, y) = par(
            move || send_dedup(&h1.arena(), &e1, 0, "g", b"b", "second", 7).unwrap(),
            move || send_dedup(&h2.arena(), &e2, 1, "g", b"c", "first", 7).unwrap(),
        );
        assert!(!x.duplicate, "same hash, different id: delivered");
        assert!(y.duplicate);
        let got = drain(&a, &env, 2);
        assert_eq!(got, vec![b"a".to_vec(), b"b".to_vec()]);
    });
}
