//! Ready-hint ring: one CAS per push or pop, helped indices, crash between the CAS and the
//! index advance; on a ring of 8 (layout 20: the hints move once a stride of 2), lagging hints
//! walked past across strides and a lap's end, and a pusher or popper dying before its hint's
//! move.
#![cfg(shmfifo_loom)]

use shmfifo::protocol::ring::Ring;
use shmfifo::sync::AtomicU64;
use shmfifo_loom_tests::*;

struct R {
    entries: Box<[AtomicU64]>,
    head: AtomicU64,
    tail: AtomicU64,
}

impl R {
    fn new(n: usize) -> Arc<R> {
        Arc::new(R {
            entries: (0..n).map(|_| AtomicU64::new(0)).collect(),
            head: AtomicU64::new(0),
            tail: AtomicU64::new(0),
        })
    }
    fn ring(&self) -> Ring<'_> {
        Ring {
            entries: &self.entries,
            head: &self.head,
            tail: &self.tail,
            cursors: None,
        }
    }
}

fn run(crash_pusher_at: Option<u32>) {
    model(move || {
        let r = R::new(2);
        let p1 = {
            let r = r.clone();
            thread::spawn(move || {
                if let Some(k) = crash_pusher_at {
                    crash::arm(k);
                }
                r.ring().push(1)
            })
        };
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

/// A ring of 8 (stride 2: `tail` and `head` move when a push or pop fills or empties the last
/// entry of a stride), its positions first moved to 1 so that the concurrent pushes cross a
/// stride boundary: two pushers (the first dying at its `k`-th step: after its entry CAS,
/// before its hint's move) and a popper (or the popper dying so). Every value pushed is popped
/// once, and the ring then works across the lap's end from the hints as they were left.
fn lagging(crash_pusher_at: Option<u32>, crash_popper_at: Option<u32>) {
    model(move || {
        let r = R::new(8);
        assert!(r.ring().push(9));
        assert_eq!(r.ring().pop(), Some(9));
        let p1 = {
            let r = r.clone();
            thread::spawn(move || {
                if let Some(k) = crash_pusher_at {
                    crash::arm(k);
                }
                r.ring().push(1)
            })
        };
        let p2 = {
            let r = r.clone();
            thread::spawn(move || r.ring().push(2))
        };
        if let Some(k) = crash_popper_at {
            crash::arm(k);
        }
        let popped = r.ring().pop();
        let ok1 = p1.join().unwrap();
        assert!(p2.join().unwrap(), "a ring of 8 has room");
        assert!(
            ok1,
            "a pusher that dies after its entry CAS delivered its value"
        );
        let mut all: Vec<u32> = popped.into_iter().collect();
        while let Some(v) = r.ring().pop() {
            all.push(v);
        }
        all.sort();
        assert_eq!(all, vec![1, 2], "every pushed value is popped exactly once");
        assert!(r.ring().looks_empty());
        // Across the lap's end from the hints as the race left them (positions 3 to 9).
        for v in 10..16 {
            assert!(r.ring().push(v));
            assert_eq!(r.ring().pop(), Some(v));
        }
        assert_eq!(r.ring().pop(), None);
    });
}

#[test]
fn lagging_hints_are_walked_past() {
    lagging(None, None);
}

#[test]
fn a_pusher_dying_before_its_hint_moves_leaves_a_working_ring() {
    lagging(Some(0), None);
}

#[test]
fn a_popper_dying_before_its_hint_moves_leaves_a_working_ring() {
    lagging(None, Some(0));
}
