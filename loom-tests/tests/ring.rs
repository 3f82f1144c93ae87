//! Ready-hint ring: one CAS per push or pop, helped indices, crash between the CAS and the
//! index advance.
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
