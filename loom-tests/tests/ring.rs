//! Ready-hint ring: one CAS per push or pop, helped indices, crash between the CAS and the
//! index advance.
#![cfg(shmfifo_loom)]

use shmfifo::protocol::ring::Ring;
use shmfifo::sync::local::AtomicU64 as LocalU64;
use shmfifo::sync::AtomicU64;
use shmfifo_loom_tests::*;

struct R {
    entries: Box<[AtomicU64]>,
    head: AtomicU64,
    tail: AtomicU64,
    /// A pop cursor (layout 21), process memory: the poppers of a model that uses it are
    /// threads of one process.
    cursor: Option<LocalU64>,
    /// A push cursor (stop 53), process memory, as `cursor`: with it, the pushers of a model
    /// are threads of one process too.
    push_cursor: Option<LocalU64>,
    /// Pop and push cursors of three processes (`ring_in`): each its own, as in shared memory.
    procs: [(LocalU64, LocalU64); 3],
}

impl R {
    fn new(n: usize) -> Arc<R> {
        Self::with_cursor(n, false)
    }
    fn with_cursor(n: usize, cursor: bool) -> Arc<R> {
        Arc::new(R {
            entries: (0..n).map(|_| AtomicU64::new(0)).collect(),
            head: AtomicU64::new(0),
            tail: AtomicU64::new(0),
            cursor: cursor.then(|| LocalU64::new(0)),
            push_cursor: cursor.then(|| LocalU64::new(0)),
            procs: core::array::from_fn(|_| (LocalU64::new(0), LocalU64::new(0))),
        })
    }
    fn ring(&self) -> Ring<'_> {
        Ring {
            entries: &self.entries,
            head: &self.head,
            tail: &self.tail,
            cursor: self.cursor.as_ref(),
            push_cursor: self.push_cursor.as_ref(),
        }
    }
    /// The ring as process `k` (of 3) sees it: its own pop and push cursors.
    fn ring_in(&self, k: usize) -> Ring<'_> {
        Ring {
            entries: &self.entries,
            head: &self.head,
            tail: &self.tail,
            cursor: Some(&self.procs[k].0),
            push_cursor: Some(&self.procs[k].1),
        }
    }
}

/// Pushes `v` on a thread of its own, dying (stopping for good) at its `k`-th step if given.
fn push_dying_at(r: &Arc<R>, k: Option<u32>, v: u32) -> thread::JoinHandle<bool> {
    let r = r.clone();
    thread::spawn(move || {
        if let Some(k) = k {
            crash::arm(k);
        }
        r.ring().push(v)
    })
}

fn run(crash_pusher_at: Option<u32>) {
    model(move || {
        let r = R::new(2);
        let p1 = push_dying_at(&r, crash_pusher_at, 1);
        let p2 = {
            let r = r.clone();
            thread::spawn(move || r.ring().push(2))
        };
        let popped = r.ring().pop();
        let ok1 = p1.join().unwrap();
        let ok2 = p2.join().unwrap();
        assert!(ok2, "a ring of 2 never rejects the second value");
        let mut all: Vec<u32> = popped.into_iter().collect();
        while let Some(v) = r.ring().pop() {
            all.push(v);
        }
        all.sort();
        let mut want = vec![2];
        if ok1 {
            want.push(1);
        }
        want.sort();
        // A pusher that "died" after its entry CAS still delivered its value: ok1 is true then.
        assert_eq!(all, want, "every pushed value is popped exactly once");
        // After the crash the indices were helped forward: the ring works for the next lap.
        assert!(r.ring().push(3));
        assert_eq!(r.ring().pop(), Some(3));
    });
}

#[test]
fn mpmc_push_pop() {
    run(None);
}

#[test]
fn pusher_dies_before_advancing_tail() {
    run(Some(0));
}

/// A ring of 8 (stride 2: `head` and, since stop 53, `tail` move when a pop empties or a push
/// fills the last entry of a stride), one value first pushed and popped (position 0; `head`
/// and `tail` stay at 0) so that the race crosses a stride's end: two pushers and two poppers
/// (the first popper, or a pusher, dying at its `k`-th step: after its entry CAS, before
/// moving `head` or `tail`), starting at `head` and `tail` or (`cursor`) at their process's
/// cursors too (all threads of one process then: they share them). Every value pushed is
/// popped once, and the ring then works across the lap's end from the positions as the race
/// left them.
fn lagging(crash_pusher_at: Option<u32>, crash_popper_at: Option<u32>, cursor: bool) {
    model(move || {
        let r = R::with_cursor(8, cursor);
        assert!(r.ring().push(9));
        assert_eq!(r.ring().pop(), Some(9));
        let p1 = push_dying_at(&r, crash_pusher_at, 1);
        let c1 = {
            let r = r.clone();
            thread::spawn(move || {
                if let Some(k) = crash_popper_at {
                    crash::arm(k);
                }
                r.ring().pop()
            })
        };
        assert!(r.ring().push(2), "a ring of 8 has room");
        let popped = r.ring().pop();
        let ok1 = p1.join().unwrap();
        assert!(
            ok1,
            "a pusher that dies after its entry CAS delivered its value"
        );
        let mut all: Vec<u32> = popped.into_iter().chain(c1.join().unwrap()).collect();
        while let Some(v) = r.ring().pop() {
            all.push(v);
        }
        all.sort();
        assert_eq!(all, vec![1, 2], "every pushed value is popped exactly once");
        if cursor {
            assert!(
                r.ring().looks_empty(),
                "a drained ring looks empty to its process"
            );
        }
        // Across the lap's end from the positions as the race left them (3 to 9).
        for v in 10..16 {
            assert!(r.ring().push(v));
            assert_eq!(r.ring().pop(), Some(v));
        }
        assert_eq!(r.ring().pop(), None);
        // `tail` moves once a stride (stop 53), past filled entries only: positions 0 to 8
        // are filled, and whatever the race left (a pusher dead before moving it at a
        // stride's end), the pushes since walked it on to within a stride of 9.
        let t = r.tail.load(Ordering::SeqCst);
        assert!(t <= 9 && 9 - t < 2, "tail {t}");
        // Without a cursor, `head` may lag up to a stride: a look says "not empty" then (a
        // hint; the pop that follows finds nothing), with one it says empty.
        if cursor {
            assert!(r.ring().looks_empty());
        }
    });
}

#[test]
fn a_lagging_head_is_walked_past() {
    lagging(None, None, false);
}

#[test]
fn a_lagging_head_is_walked_past_from_a_cursor() {
    lagging(None, None, true);
}

#[test]
fn a_popper_dying_before_head_moves_leaves_a_working_ring() {
    lagging(None, Some(0), false);
}

#[test]
fn a_popper_dying_before_head_moves_leaves_a_working_ring_from_a_cursor() {
    lagging(None, Some(0), true);
}

#[test]
fn a_pusher_dying_before_tail_moves_beside_a_lagging_head_leaves_a_working_ring() {
    lagging(Some(0), None, true);
}

/// `is_empty` (an empty receive's first look, `receive::idle`) is exact: one pusher, possibly
/// dying (stopping for good) after its entry CAS and before it moves its cursor or `tail`,
/// beside the only popper, which looks, then pops. A look that says "not empty" is followed by
/// a pop that takes the value (nobody else pops); a look that says empty is right at that
/// instant (the value is taken afterwards, by a later pop). Once the pusher is done or dead, a
/// ring whose value was not taken says "not empty" (before stop 53 `looks_empty` compared
/// `tail`, which such a pusher left behind, and said it was empty: the negative control).
fn exact_look(crash_pusher_at: Option<u32>, cursor: bool) {
    model(move || {
        let r = R::with_cursor(4, cursor);
        // A first value pushed and popped: the look starts past position 0.
        assert!(r.ring().push(9));
        assert_eq!(r.ring().pop(), Some(9));
        let p1 = push_dying_at(&r, crash_pusher_at, 1);
        let empty = r.ring().is_empty();
        let popped = r.ring().pop();
        if !empty {
            assert_eq!(
                popped,
                Some(1),
                "a look that saw the value is followed by its pop"
            );
        }
        let ok = p1.join().unwrap();
        assert!(
            ok,
            "a pusher that dies after its entry CAS delivered its value"
        );
        if popped.is_none() {
            assert!(
                !r.ring().is_empty(),
                "a value pushed and not yet popped is seen, whether or not tail moved"
            );
            assert_eq!(r.ring().pop(), Some(1));
        }
        assert!(r.ring().is_empty(), "a drained ring is empty");
        assert_eq!(r.ring().pop(), None);
    });
}

#[test]
fn an_exact_look_sees_every_push() {
    exact_look(None, false);
}

#[test]
fn an_exact_look_sees_every_push_from_a_cursor() {
    exact_look(None, true);
}

#[test]
fn an_exact_look_sees_a_push_that_died_before_tail_moved() {
    exact_look(Some(0), false);
}

#[test]
fn an_exact_look_sees_a_push_that_died_before_tail_moved_from_a_cursor() {
    exact_look(Some(0), true);
}

#[test]
fn a_pusher_dying_at_a_strides_end_leaves_tail_to_the_next_push() {
    lagging(Some(0), None, false);
}

/// Producers and a consumer in three processes, each with its own pop and push cursors (as
/// in shared memory), on a ring of 8 (stride 2), position 0 pushed and popped by process 0:
/// process 0 pushes 1 (dying, if asked, right after its entry CAS: a stride's end when it
/// wins position 1, so `tail` is left behind), process 1 pushes 2 from its cursor at 0 (a
/// walk past what process 0 filled), process 2 pops meanwhile. Every value is popped once;
/// `tail` never passes an entry not filled and lags it by less than a stride; then pushes
/// alternating between the two producers, each cursor behind the other's pushes, are popped
/// in order across the lap's end.
fn processes(crash_pusher_at: Option<u32>) {
    model(move || {
        let r = R::new(8);
        assert!(r.ring_in(0).push(9));
        assert_eq!(r.ring_in(2).pop(), Some(9));
        let p0 = {
            let r = r.clone();
            thread::spawn(move || {
                if let Some(k) = crash_pusher_at {
                    crash::arm(k);
                }
                r.ring_in(0).push(1)
            })
        };
        let p1 = {
            let r = r.clone();
            thread::spawn(move || r.ring_in(1).push(2))
        };
        let popped = r.ring_in(2).pop();
        assert!(
            p0.join().unwrap(),
            "a pusher that dies after its entry CAS delivered it"
        );
        assert!(p1.join().unwrap());
        let mut all: Vec<u32> = popped.into_iter().collect();
        while let Some(v) = r.ring_in(2).pop() {
            all.push(v);
        }
        all.sort();
        assert_eq!(all, vec![1, 2], "every pushed value is popped exactly once");
        let t = r.tail.load(Ordering::SeqCst);
        assert!(t <= 3 && 3 - t < 2, "tail {t}: positions 0 to 2 filled");
        for v in 10..20u32 {
            assert!(r.ring_in(v as usize % 2).push(v));
            assert_eq!(r.ring_in(2).pop(), Some(v));
        }
        assert_eq!(r.ring_in(2).pop(), None);
        assert!(r.ring_in(2).is_empty() && r.ring_in(2).looks_empty());
    });
}

#[test]
fn producers_in_two_processes_walk_past_each_others_pushes() {
    processes(None);
}

#[test]
fn a_producer_dying_at_a_strides_end_beside_another_process() {
    processes(Some(0));
}
