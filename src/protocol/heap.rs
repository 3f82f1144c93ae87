//! An arena on the heap, for unit tests and loom models: the same protocol code, no mapping.

use super::{pstate, Arena, Class, Env};
use crate::layout::{
    DedupEntry, Geometry, GroupEntry, Header, MsgHeader, Participant, MAX_CLASSES,
};
use crate::sync::{AtomicU32, AtomicU64, Ordering, UnsafeCell};

/// Heap storage for one arena.
#[derive(Debug)]
pub struct HeapArena {
    hdr: Box<Header>,
    parts: Box<[Participant]>,
    groups: Box<[GroupEntry]>,
    ready: Box<[AtomicU64]>,
    timers: Box<[AtomicU64]>,
    headers: Vec<Box<[MsgHeader]>>,
    payload: Vec<Box<[UnsafeCell<u8>]>>,
    caps: Vec<u32>,
    max_groups: u64,
    dedup: Box<[DedupEntry]>,
    dedup_keys: Box<[AtomicU64]>,
    dedup_key_words: usize,
    attempts: Box<[crate::layout::AttemptEntry]>,
}

// SAFETY: the payload cells are accessed only through the protocol, which gives one
// participant at a time the right to write a slot (CLAIMED) and readers access only after
// publication (SYNC POINT(node-link)); everything else is atomics.
unsafe impl Sync for HeapArena {}
// SAFETY: as above; the storage owns no thread-bound resources.
unsafe impl Send for HeapArena {}

fn boxed<T: Default>(n: usize) -> Box<[T]> {
    (0..n).map(|_| T::default()).collect()
}

impl HeapArena {
    /// Allocates a zeroed arena of this geometry with `participants` registered as alive
    /// (generation 1).
    pub fn new(g: &Geometry) -> Self {
        assert!(g.classes.len() <= MAX_CLASSES);
        let hdr: Box<Header> = Box::default();
        hdr.next_expiry.0.store(u64::MAX, Ordering::Relaxed);
        // Dedup interval: SQS's 5 minutes (D1); models change it through the header.
        hdr.dedup_interval_ms.store(300_000, Ordering::Relaxed);
        // Retention: SQS's 4 days (T1); models change it through the header.
        hdr.retention_ms.store(345_600_000, Ordering::Relaxed);
        let parts = boxed::<Participant>(g.participants as usize);
        for p in parts.iter() {
            p.state
                .store(pstate::pack(1, pstate::ALIVE), Ordering::Relaxed);
        }
        HeapArena {
            hdr,
            parts,
            groups: boxed(g.group_slots as usize),
            ready: boxed(g.ready_slots as usize),
            timers: boxed(
                crate::layout::WHEEL_BUCKETS * (1 + crate::layout::wheel_words(g.group_slots)),
            ),
            headers: g.classes.iter().map(|&(_, n)| boxed(n as usize)).collect(),
            payload: g
                .classes
                .iter()
                .map(|&(cap, n)| boxed(cap as usize * n as usize))
                .collect(),
            caps: g.classes.iter().map(|&(cap, _)| cap).collect(),
            max_groups: u64::from(g.max_groups),
            dedup: boxed(g.dedup_slots as usize),
            dedup_keys: boxed(g.dedup_slots as usize * g.dedup_key_words as usize),
            dedup_key_words: g.dedup_key_words as usize,
            attempts: boxed(g.attempt_slots as usize),
        }
    }

    /// The typed view.
    pub fn arena(&self) -> Arena<'_> {
        let mut classes = [None; MAX_CLASSES];
        let mut base = 0u32;
        for (k, h) in self.headers.iter().enumerate() {
            classes[k] = Some(Class {
                headers: h,
                payload: self.payload[k].as_ptr() as *mut u8,
                stride: self.caps[k] as usize,
                cap: self.caps[k],
                base,
            });
            base += h.len() as u32;
        }
        Arena {
            hdr: &self.hdr,
            parts: &self.parts,
            groups: &self.groups,
            ready: &self.ready,
            timers: &self.timers,
            classes,
            nclasses: self.headers.len(),
            total: base,
            max_groups: self.max_groups,
            dedup: &self.dedup,
            dedup_keys: &self.dedup_keys,
            dedup_key_words: self.dedup_key_words,
            attempts: &self.attempts,
            hint_from: super::hint_from(&classes, base),
        }
    }
}

/// A mock environment: a manual clock and a set of dead participants.
#[derive(Debug, Default)]
pub struct MockEnv {
    /// Current time, ms.
    pub now: AtomicU64,
    /// Bit i set: participant i is dead.
    pub dead: AtomicU64,
}

impl MockEnv {
    /// Marks participant `i` (< 64) dead.
    pub fn kill(&self, i: u32) {
        // SeqCst: the mock's own bookkeeping; tests read it from other threads.
        self.dead.fetch_or(1 << i, Ordering::SeqCst);
    }
    /// Advances the clock.
    pub fn advance(&self, ms: u64) {
        self.now.fetch_add(ms, Ordering::SeqCst);
    }
}

impl Env for MockEnv {
    fn now_ms(&self) -> u64 {
        // SeqCst: mock bookkeeping.
        self.now.load(Ordering::SeqCst)
    }
    fn wall_ms(&self) -> u64 {
        1_700_000_000_000 + self.now_ms()
    }
    fn participant_alive(&self, index: u32) -> bool {
        // SeqCst: mock bookkeeping.
        index >= 64 || self.dead.load(Ordering::SeqCst) & (1 << index) == 0
    }
    fn wake(&self, _word: &AtomicU32) {}
}

#[cfg(all(test, not(shmfifo_loom)))]
mod tests {
    use super::*;
    use crate::protocol::handle::{self, Handle};
    use crate::protocol::send::{self, Outgoing};
    use crate::protocol::{accounting, receive, recovery, words};
    use crate::protocol::{gstate, owner, vis, Fault};

    fn geom() -> Geometry {
        Geometry {
            participants: 3,
            max_groups: 4,
            group_slots: 8,
            ready_slots: 8,
            classes: vec![(16, 8)],
            dedup_slots: 8,
            dedup_key_words: 16,
            attempt_slots: 4,
        }
    }

    fn send(
        a: &Arena<'_>,
        env: &MockEnv,
        who: u32,
        g: &str,
        body: &[u8],
    ) -> Result<send::Sent, Fault> {
        let parts = [body];
        let out = Outgoing {
            class: 0,
            cursor: 0,
            hash: g.len() as u64,
            group_id: g.as_bytes(),
            lens: words::pack_lens(body.len(), 0, 0, 0),
            parts: &parts,
            dedup: None,
            source_len: 0,
            prior_receives: 0,
            loaned: None,
            in_place: 0,
        };
        send::send(a, env, owner::code(who, 1), &out)
    }

    fn recv(a: &Arena<'_>, env: &MockEnv, max: usize, vt: u64) -> Vec<(Handle, Vec<u8>, u32)> {
        let mut v = Vec::new();
        receive::receive(
            a,
            env,
            owner::code(0, 1),
            max,
            &mut receive::Policy::new(vt),
            &mut |t| {
                v.push((
                    Handle {
                        idx: t.idx,
                        inc: t.inc,
                        epoch: t.epoch,
                    },
                    t.payload.to_vec(),
                    t.receive_count,
                ));
                true
            },
        )
        .unwrap();
        v
    }

    /// V3 on the protocol alone: expiry (driven by the mock clock) returns the messages to the
    /// front of their group in order, with the receive count incremented; H2: the old handle
    /// is expired; deleting with the new one reclaims every slot.
    #[test]
    fn expiry_redelivers_in_order_and_reclaims() {
        let h = HeapArena::new(&geom());
        let env = MockEnv::default();
        let a = h.arena();
        for b in [b"a", b"b", b"c"] {
            send(&a, &env, 1, "g", b).unwrap();
        }
        let first = recv(&a, &env, 10, 100);
        assert_eq!(
            first.iter().map(|m| m.1.clone()).collect::<Vec<_>>(),
            [b"a", b"b", b"c"]
        );
        assert!(
            recv(&a, &env, 10, 100).is_empty(),
            "locked while in flight (R3)"
        );
        env.advance(100);
        let again = recv(&a, &env, 10, 100);
        assert_eq!(
            again.iter().map(|m| m.1.clone()).collect::<Vec<_>>(),
            [b"a", b"b", b"c"]
        );
        assert!(
            again.iter().all(|m| m.2 == 2),
            "receive count 2 on redelivery (R10)"
        );
        assert_eq!(
            handle::delete(&a, &env, owner::code(0, 1), first[0].0),
            Err(Fault::Expired)
        );
        for m in &again {
            handle::delete(&a, &env, owner::code(0, 1), m.0).unwrap();
        }
        let c = accounting::counts(&a, &env);
        assert_eq!((c.visible, c.in_flight, c.deleted, c.sending), (0, 0, 0, 0));
        for cl in a.classes.iter().flatten() {
            assert!(cl
                .headers
                .iter()
                .all(|h| vis::state(h.vis.load(Ordering::Relaxed)) == vis::State::Free));
        }
    }

    /// A producer that died holding a claimed, never-linked slot: recovery frees it, and only
    /// once its death is proven.
    #[test]
    fn recovery_frees_a_dead_producers_claim() {
        let h = HeapArena::new(&geom());
        let env = MockEnv::default();
        let a = h.arena();
        let (idx, _, _) = crate::protocol::pool::alloc(&a, 0, 0, owner::code(1, 1)).unwrap();
        let r = recovery::recover(&a, &env, owner::code(2, 1)).unwrap();
        assert_eq!(r.freed, 0, "alive: left alone");
        env.kill(1);
        let r = recovery::recover(&a, &env, owner::code(2, 1)).unwrap();
        assert_eq!(r.freed, 1);
        let w = a.msg(idx).unwrap().vis.load(Ordering::Relaxed);
        assert_eq!(vis::state(w), vis::State::Free);
    }

    /// A new group id per message (churn): emptied entries become tombstones that
    /// never become FREE again, so once the table has been cycled, a lookup that scanned to a
    /// FREE entry scanned the whole table. The probe length of each home keeps every lookup
    /// and insert within the few slots where its home's live entries are, however many
    /// tombstones the table holds: here 2,048 groups through a 64-slot table, a few live at a
    /// time, every message delivered in order and every group retired.
    #[test]
    fn a_new_group_per_message_keeps_probes_short() {
        let g = Geometry {
            participants: 3,
            max_groups: 32,
            group_slots: 64,
            ready_slots: 64,
            classes: vec![(16, 64)],
            dedup_slots: 0,
            dedup_key_words: 16,
            attempt_slots: 0,
        };
        let h = HeapArena::new(&g);
        let env = MockEnv::default();
        let a = h.arena();
        let me = owner::code(1, 1);
        let mut longest = 0;
        for round in 0..256u32 {
            // Eight new groups per round, each with two messages.
            for k in 0..8u32 {
                let id = format!("g-{round}-{k}");
                for body in [b"1", b"2"] {
                    let parts = [&body[..]];
                    let hash = id.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
                        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
                    });
                    send::send(
                        &a,
                        &env,
                        me,
                        &Outgoing {
                            class: 0,
                            cursor: 0,
                            hash,
                            group_id: id.as_bytes(),
                            lens: words::pack_lens(1, 0, 0, 0),
                            parts: &parts,
                            dedup: None,
                            source_len: 0,
                            prior_receives: 0,
                            loaned: None,
                            in_place: 0,
                        },
                    )
                    .unwrap_or_else(|f| panic!("round {round} group {k}: {f:?}"));
                }
            }
            let mut got = Vec::new();
            loop {
                let batch = recv(&a, &env, 10, 1_000);
                if batch.is_empty() {
                    break;
                }
                for m in batch {
                    handle::delete(&a, &env, owner::code(0, 1), m.0).unwrap();
                    got.push(m.1);
                }
            }
            assert_eq!(got.len(), 16, "round {round}: every message delivered");
            for pair in got.chunks(2) {
                assert_eq!(
                    pair,
                    [b"1".to_vec(), b"2".to_vec()],
                    "round {round}: in order"
                );
            }
            assert_eq!(a.hdr.active_groups.0.load(Ordering::Relaxed), 0);
            longest = a
                .groups
                .iter()
                .map(|e| e.probe.load(Ordering::Relaxed))
                .max()
                .unwrap()
                .max(longest);
        }
        // Eight live groups in 64 slots: probes stay within a few slots (the old scan walked
        // all 64 on every new id once no entry was FREE).
        assert!(longest < 16, "longest probe {longest}");
        assert!(
            a.groups
                .iter()
                .all(|e| gstate::kind(e.state.load(Ordering::Relaxed)) != gstate::FREE),
            "the table was cycled through: no entry is FREE any more"
        );
    }
}
