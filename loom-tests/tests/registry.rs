//! Models of the arena-level protocols that `attach` and `Drop` run: registration
//! (the two-pass slot take) racing with another registrant and with recovery, deregistration
//! stopped mid-step, and the clock rebase by two openers on a new boot. Each has a participant
//! that stops forever at each of its steps.
#![cfg(shmfifo_loom)]

use shmfifo::protocol::clock;
use shmfifo::protocol::registry::{self, Registration};
use shmfifo::protocol::{pstate, Env};
use shmfifo::sync::{AtomicU32, AtomicU64};
use shmfifo_loom_tests::*;

/// Liveness locks as the kernel keeps them: slot `i` is locked by a holder code (0: free). A
/// participant that stops forever keeps its lock (it is alive: SIGSTOP); one that dies loses
/// it ([`Locks::die`]). Liveness for the protocol is exactly "locked".
struct Locks {
    held: [AtomicU64; 3],
    now: AtomicU64,
}

impl Locks {
    fn new() -> Arc<Locks> {
        Arc::new(Locks {
            held: Default::default(),
            now: AtomicU64::new(1),
        })
    }
    fn try_lock(&self, i: u32, who: u64) -> Result<bool, ()> {
        // SeqCst: the mock kernel's own bookkeeping.
        Ok(self.held[i as usize]
            .compare_exchange(0, who, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok())
    }
    fn unlock(&self, i: u32) {
        self.held[i as usize].store(0, Ordering::SeqCst);
    }
    /// The kernel drops every lock of `who` when it dies.
    fn die(&self, who: u64) {
        for h in &self.held {
            let _ = h.compare_exchange(who, 0, Ordering::SeqCst, Ordering::SeqCst);
        }
    }
    fn register(&self, a: &Arena<'_>, who: u64) -> Option<Registration> {
        registry::register(a, who, &mut |i| self.try_lock(i, who), &mut |i| {
            self.unlock(i)
        })
        .unwrap()
    }
}

impl Env for Locks {
    fn now_ms(&self) -> u64 {
        self.now.load(Ordering::SeqCst)
    }
    fn wall_ms(&self) -> u64 {
        1_700_000_000_000 + self.now_ms()
    }
    fn participant_alive(&self, index: u32) -> bool {
        self.held
            .get(index as usize)
            .is_none_or(|h| h.load(Ordering::SeqCst) != 0)
    }
    fn wake(&self, _word: &AtomicU32) {}
}

/// Sets every registry slot `FREE` at generation 1 (heap arenas start with all registered).
fn all_free(a: &Arena<'_>) {
    for p in a.parts {
        p.state
            .store(pstate::pack(1, pstate::FREE), Ordering::SeqCst);
    }
}

/// Two registrants race for two slots; slot 0 carries a stale waiter count of a holder that
/// died waiting. Registrant A stops forever at its `k`-th step (keeping any lock it took: it is
/// alive). B always registers; the two never share a slot; a completed registration is `ALIVE`
/// at a new generation; the global waiter count is never below the real number (0) and is 0
/// once whoever took slot 0 completed.
#[test]
fn two_registrants_never_share_a_slot_and_a_stopped_one_blocks_only_its_own() {
    for k in [None, Some(0), Some(1), Some(2), Some(3), Some(4), Some(5)] {
        model(move || {
            let h = arena(2, 1, 1);
            let a = h.arena();
            all_free(&a);
            a.parts[0].waiting.store(1, Ordering::SeqCst);
            a.hdr.wake.0.waiters.store(1, Ordering::SeqCst);
            let locks = Locks::new();
            let (h1, l1, h2, l2) = (h.clone(), locks.clone(), h.clone(), locks.clone());
            let (ra, rb) = par(
                move || {
                    if let Some(k) = k {
                        crash::arm(k);
                    }
                    let r = l1.register(&h1.arena(), 1);
                    (r, crash::crashed())
                },
                move || l2.register(&h2.arena(), 2),
            );
            let (ra, a_stopped) = ra;
            let rb = rb.expect("B registers: A holds at most one slot");
            assert_eq!(rb.gen, 2);
            assert_eq!(rb.took_over, None);
            assert_eq!(
                pstate::status(a.parts[rb.index as usize].state.load(Ordering::SeqCst)),
                pstate::ALIVE
            );
            if let Some(ra) = ra.filter(|_| !a_stopped) {
                assert_ne!(ra.index, rb.index, "one slot, one participant");
            }
            let waiters = a.hdr.wake.0.waiters.load(Ordering::SeqCst);
            assert!(waiters <= 1, "never wraps below the real count: {waiters}");
            if !a_stopped {
                assert_eq!(waiters, 0, "the stale count is taken back");
            }
        });
    }
}

/// Slot 0 is registered to a participant that died (its lock is gone); slot 1 is participant
/// 1's. A registrant (stopping at its `k`-th step) finds no free slot and takes slot 0 over,
/// while participant 1 recovers. Whatever the order, slot 0 ends either `FREE` or `ALIVE` at a
/// generation above the dead one's, a completed registrant is never taken for dead by the
/// recovery, and a take-over is reported only for the dead generation.
#[test]
fn a_take_over_races_with_recovery_of_the_same_dead_slot() {
    for k in [None, Some(0), Some(1), Some(2), Some(3)] {
        model(move || {
            let h = arena(2, 1, 1);
            let a = h.arena();
            let locks = Locks::new();
            // Slot 1: participant 1, alive (locked). Slot 0: registered, unlocked: dead.
            locks.try_lock(1, 100).unwrap();
            let (h1, l1, h2, l2) = (h.clone(), locks.clone(), h.clone(), locks.clone());
            let (ra, _) = par(
                move || {
                    if let Some(k) = k {
                        crash::arm(k);
                    }
                    let r = l1.register(&h1.arena(), 7);
                    (r, crash::crashed())
                },
                move || recovery::recover(&h2.arena(), &*l2, owner::code(1, 1)).unwrap(),
            );
            let st = a.parts[0].state.load(Ordering::SeqCst);
            match ra {
                (Some(r), false) => {
                    assert_eq!(r.index, 0);
                    assert_eq!(r.gen, 2);
                    if let Some(t) = r.took_over {
                        assert_eq!(t, (0, 1), "only the dead generation is taken over");
                    }
                    assert_eq!(
                        st,
                        pstate::pack(2, pstate::ALIVE),
                        "recovery never frees it (k {k:?}, {r:?})"
                    );
                }
                (None, false) => panic!("a slot was there to take"),
                (_, true) => {
                    // Stopped (alive, holding slot 0's lock): a later recovery frees nothing
                    // of its and a later registrant takes nothing of its.
                    assert!(
                        st == pstate::pack(1, pstate::ALIVE)
                            || st == pstate::pack(1, pstate::FREE)
                            || st == pstate::pack(2, pstate::ALIVE)
                    );
                    recovery::recover(&a, &*locks, owner::code(1, 1)).unwrap();
                    assert_eq!(a.parts[0].state.load(Ordering::SeqCst), st);
                    assert_eq!(locks.register(&a, 9), None, "both slots are held");
                }
            }
        });
    }
}

/// Participant 1 closes (slot 1, one waiter counted) and dies at its `k`-th step of
/// deregistration, while participant 2 recovers; a last recovery runs after. The slot always
/// ends `FREE` at its generation (by the close or by recovery), and the waiter count is never
/// below the real one (0): a close that died between its two waiter steps over-counts, which
/// costs only spurious wake-ups.
#[test]
fn deregistration_stopped_at_each_step_is_finished_by_recovery() {
    for k in [None, Some(0), Some(1)] {
        model(move || {
            let h = arena(3, 1, 1);
            let a = h.arena();
            let locks = Locks::new();
            locks.try_lock(1, 1).unwrap();
            locks.try_lock(2, 2).unwrap();
            a.parts[1].waiting.store(1, Ordering::SeqCst);
            a.hdr.wake.0.waiters.store(1, Ordering::SeqCst);
            let (h1, l1, h2, l2) = (h.clone(), locks.clone(), h.clone(), locks.clone());
            par(
                move || {
                    if let Some(k) = k {
                        crash::arm(k);
                    }
                    registry::deregister(&h1.arena(), 1, 1);
                    // A clean close unlocks after `FREE`; a death drops the lock wherever.
                    l1.die(1);
                },
                move || {
                    recovery::recover(&h2.arena(), &*l2, owner::code(2, 1)).unwrap();
                },
            );
            recovery::recover(&a, &*locks, owner::code(2, 1)).unwrap();
            assert_eq!(
                a.parts[1].state.load(Ordering::SeqCst),
                pstate::pack(1, pstate::FREE)
            );
            let waiters = a.hdr.wake.0.waiters.load(Ordering::SeqCst);
            assert!(waiters <= 1, "never wraps: {waiters}");
            if k.is_none() {
                assert_eq!(waiters, 0);
            }
        });
    }
}

/// The arena was made on another boot. Two openers of the new boot rebase its clock at once;
/// opener A stops forever at its `k`-th step (after its CAS, before its informational
/// boot-id stores). Exactly one CAS wins, and every opener that returns agrees on the base,
/// which carries the new boot's tag.
#[test]
fn two_openers_on_a_new_boot_agree_on_one_clock_base() {
    for k in [None, Some(0)] {
        model(move || {
            let h = arena(2, 1, 1);
            let a = h.arena();
            let old = [1u64, 2];
            let new = [3u64, 5];
            a.hdr.clock.store(
                clock::clock_word(clock::boot_tag(old), 40),
                Ordering::SeqCst,
            );
            a.hdr.created_wall_ms.store(1_000, Ordering::SeqCst);
            let (h1, h2) = (h.clone(), h.clone());
            let (ra, rb) = par(
                move || {
                    if let Some(k) = k {
                        crash::arm(k);
                    }
                    clock::rebase(&h1.arena(), new, 10_000, 6_000)
                },
                move || clock::rebase(&h2.arena(), new, 10_001, 6_001),
            );
            let w = a.hdr.clock.load(Ordering::SeqCst);
            assert_eq!(w >> 40, clock::boot_tag(new), "the new boot's tag");
            assert_eq!(rb.base_ms, w & clock::CLOCK_MASK);
            assert_eq!(ra.base_ms, rb.base_ms, "one base for the boot");
            assert!(ra.rebased != rb.rebased, "exactly one rebaser");
        });
    }
}

/// Arena initialisation and an opener's header check at once (the creator may stop anywhere:
/// every prefix of its stores is an interleaving here): the opener sees no arena yet
/// (`NotAnArena`), an unfinished one (`NotReady`), or the whole header as written, never a
/// torn one (SYNC POINT(arena-ready)).
#[test]
fn an_opener_never_sees_a_half_initialised_header() {
    use shmfifo::protocol::view::{self, Fresh, Refused};
    use shmfifo::QueueConfig;
    model(|| {
        let mut g = Geometry {
            participants: 2,
            max_groups: 1,
            group_slots: 2,
            ready_slots: 2,
            classes: vec![(192, 4)],
            dedup_slots: 2,
            dedup_key_words: shmfifo::layout::DEDUP_KEY_WORDS,
            attempt_slots: 0,
            class_growth: vec![1],
            size_limit: 0,
            dedup_growth: 0,
            group_growth: 0,
        };
        let total = g.offsets().unwrap().total;
        // The growth fields as the header holds them: a limit of at least the base file, and
        // the growth it gives.
        g.size_limit = total + (1 << 20);
        g.derive_growth(total);
        let hdr: Arc<shmfifo::layout::Header> = Arc::new(Default::default());
        let (h1, h2) = (hdr.clone(), hdr.clone());
        let g1 = g.clone();
        let (_, seen) = par(
            move || {
                let fresh = Fresh {
                    hash_keys: (1, 2),
                    nonce: 3,
                    boot: [4, 5],
                    wall_ms: 6,
                    mono_ms: 7,
                };
                view::initialise(
                    &h1,
                    &QueueConfig::new().maximum_message_size(1024),
                    &g1,
                    total,
                    None,
                    &fresh,
                );
            },
            move || {
                // A field read after an accepted check is the creator's (SYNC
                // POINT(arena-ready)).
                view::check(&h2, total).map(|c| {
                    let max = h2.max_message_size.load(shmfifo::sync::Ordering::Relaxed);
                    (c, max)
                })
            },
        );
        match seen {
            Ok((c, max)) => {
                assert_eq!(c.geometry, g, "the whole geometry");
                assert_eq!(max, 1024);
            }
            Err(Refused::NotAnArena) | Err(Refused::NotReady) => {}
            Err(e) => panic!("a torn header: {e:?}"),
        }
        assert!(
            view::check(&hdr, total).is_ok(),
            "complete once the creator is done"
        );
    });
}
