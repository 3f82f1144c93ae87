//! An arena on the heap, for unit tests and loom models: the same protocol code, no mapping.

use super::segments::{Layout, Mapped, SegmentFile, Segments};
use super::{pstate, Arena, Class, Env, Fault, PResult};
use crate::layout::{
    DedupEntry, Geometry, GroupEntry, Header, MsgHeader, Participant, MAX_CLASSES, MAX_SEGMENTS,
    PAGE,
};
use crate::sync::{AtomicU32, AtomicU64, Ordering, UnsafeCell};

/// The storage of one reserved heap segment, typed by its layout.
#[derive(Debug)]
enum Storage {
    Slots(Box<[MsgHeader]>, Box<[UnsafeCell<u8>]>),
    Dedup(Box<[crate::layout::DedupEntry]>, Box<[AtomicU64]>),
    Groups(Box<[GroupEntry]>, Box<[AtomicU64]>),
}

/// The "file" of a heap arena's added segments: each reserved range gets its storage when it
/// is reserved (as a file system's blocks exist, zero-filled, before the grower publishes
/// them: under loom the storage is made by the grower, before its Release of the count), and
/// every map of it returns that storage.
#[derive(Debug, Default)]
pub struct HeapFile {
    /// Reserved ranges: offset, length, layout and storage.
    reserved: std::sync::Mutex<Vec<(u64, u64, Layout, Storage)>>,
    /// Mapped (so published) ranges: offset, length.
    mapped: std::sync::Mutex<Vec<(u64, u64)>>,
    /// Set: every reservation fails as a full file system would.
    pub full: crate::sync::local::AtomicBool,
}

// SAFETY: as `HeapArena`: payload cells are accessed only through the protocol.
unsafe impl Sync for HeapFile {}
// SAFETY: as above.
unsafe impl Send for HeapFile {}

impl SegmentFile for HeapFile {
    fn reserve(&self, offset: u64, len: u64, layout: Layout) -> PResult<()> {
        if self.full.load(crate::sync::local::Ordering::SeqCst) {
            return Err(Fault::NoSpace(len));
        }
        let mut r = self.reserved.lock().unwrap_or_else(|e| e.into_inner());
        if !r.iter().any(|x| (x.0, x.1, x.2) == (offset, len, layout)) {
            let storage = match layout {
                Layout::Slots { slots, stride } => {
                    Storage::Slots(boxed(slots as usize), boxed(slots as usize * stride))
                }
                Layout::Dedup { entries, key_words } => {
                    Storage::Dedup(boxed(entries as usize), boxed(entries as usize * key_words))
                }
                Layout::Groups { entries } => Storage::Groups(
                    boxed(entries as usize),
                    boxed(crate::layout::group_segment_words(entries) as usize),
                ),
            };
            r.push((offset, len, layout, storage));
        }
        Ok(())
    }

    fn map(&self, offset: u64, len: u64, layout: Layout) -> PResult<Mapped> {
        let r = self.reserved.lock().unwrap_or_else(|e| e.into_inner());
        let Some((_, _, _, st)) = r.iter().find(|x| (x.0, x.1, x.2) == (offset, len, layout))
        else {
            return Err(Fault::Corrupted("a published segment was never reserved"));
        };
        // Invariant G2, checked: a published (so mapped) segment shares no byte with another
        // published one. Storage is kept per reservation, so an overlap would not alias here:
        // it is reported instead, and the models that grow fail on it.
        let mut mapped = self.mapped.lock().unwrap_or_else(|e| e.into_inner());
        if mapped
            .iter()
            .any(|&(o, l)| (o, l) != (offset, len) && o < offset + len && offset < o + l)
        {
            return Err(Fault::Corrupted("two published segments overlap"));
        }
        if !mapped.contains(&(offset, len)) {
            mapped.push((offset, len));
        }
        Ok(match st {
            Storage::Slots(h, p) => Mapped {
                table: h.as_ptr() as *const u8,
                data: p.as_ptr() as *mut u8,
            },
            Storage::Dedup(e, k) => Mapped {
                table: e.as_ptr() as *const u8,
                data: k.as_ptr() as *mut u8,
            },
            Storage::Groups(e, w) => Mapped {
                table: e.as_ptr() as *const u8,
                data: w.as_ptr() as *mut u8,
            },
        })
    }
}

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
    growth: Vec<u32>,
    directory: Box<[AtomicU64]>,
    segs: Box<Segments>,
    /// Packs' directories, `MAX_PACK` entries a slot of every class's whole index range
    /// (`Arena::pack_words`), or none ([`HeapArena::with_packs`]).
    pack_words: Box<[crate::layout::MsgWords]>,
    file: std::sync::Arc<HeapFile>,
    base_len: u64,
    size_limit: u64,
    dedup_growth: u32,
    group_growth: u32,
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
        let file = std::sync::Arc::new(HeapFile::default());
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
            growth: (0..g.classes.len()).map(|k| g.growth(k)).collect(),
            directory: boxed(crate::layout::MAX_KINDS * MAX_SEGMENTS),
            segs: Box::new(Segments::new(Box::new(std::sync::Arc::clone(&file)))),
            // None until asked for (`with_packs`): a loom model pays for every atomic it
            // allocates, on every execution.
            pack_words: Box::default(),
            file,
            base_len: g.offsets().map_or(PAGE, |o| o.total),
            size_limit: g.size_limit.max(g.offsets().map_or(PAGE, |o| o.total)),
            dedup_growth: g.dedup_growth,
            group_growth: g.group_growth,
        }
    }

    /// [`HeapArena::new`] with room for packs (layout 22): a directory of `MAX_PACK` entries
    /// beside every slot of every class's whole index range (`Arena::pack_words`). Without
    /// it, the arena's slots hold no pack (`Arena::members` refuses every one).
    pub fn with_packs(g: &Geometry) -> Self {
        let slots: usize = (0..g.classes.len())
            .map(|k| crate::layout::slots_with(g.classes[k].1, g.growth(k)) as usize)
            .sum();
        HeapArena {
            pack_words: boxed(crate::layout::MAX_PACK * slots),
            ..Self::new(g)
        }
    }

    /// Makes every later growth fail as a full file system would ([`Fault::NoSpace`]).
    pub fn refuse_growth(&self) {
        self.file
            .full
            .store(true, crate::sync::local::Ordering::SeqCst);
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
                growth: self.growth[k],
                span: crate::layout::slots_with(h.len() as u32, self.growth[k]) as u32,
            });
            base += crate::layout::slots_with(h.len() as u32, self.growth[k]) as u32;
        }
        Arena {
            hdr: &self.hdr,
            parts: &self.parts,
            groups: &self.groups,
            ready: &self.ready,
            timers: &self.timers,
            classes,
            ranges: super::ranges(&classes),
            nclasses: self.headers.len(),
            total: base,
            first: super::first_headers(&classes),
            max_groups: self.max_groups,
            dedup: &self.dedup,
            dedup_keys: &self.dedup_keys,
            dedup_key_words: self.dedup_key_words,
            attempts: &self.attempts,
            hint_from: super::hint_from(&classes, base),
            directory: &self.directory,
            segs: &self.segs,
            base_len: self.base_len,
            size_limit: self.size_limit,
            dedup_growth: self.dedup_growth,
            group_growth: self.group_growth,
            base_slots: self.headers.iter().map(|h| h.len() as u64).sum(),
            pack_words: Some(&self.pack_words),
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

/// A small geometry for the protocol's unit tests: 3 participants, 4 groups, one class of 8
/// slots of 16 bytes.
#[cfg(all(test, not(shmfifo_loom)))]
pub(crate) fn test_geometry() -> Geometry {
    Geometry {
        participants: 3,
        max_groups: 4,
        group_slots: 8,
        ready_slots: 8,
        classes: vec![(16, 8)],
        dedup_slots: 8,
        dedup_key_words: crate::layout::DEDUP_KEY_WORDS,
        attempt_slots: 4,
        class_growth: Vec::new(),
        size_limit: 0,
        dedup_growth: 0,
        group_growth: 0,
    }
}

#[cfg(all(test, not(shmfifo_loom)))]
mod tests {
    use super::test_geometry as geom;
    use super::*;
    use crate::protocol::handle::{self, Handle};
    use crate::protocol::send::{self, Outgoing};
    use crate::protocol::{accounting, receive, recovery, words};
    use crate::protocol::{gstate, owner, vis, Fault};

    fn send(
        a: &Arena<'_>,
        env: &MockEnv,
        who: u32,
        g: &str,
        body: &[u8],
    ) -> Result<send::Sent, Fault> {
        send_hinted(a, env, who, g, body, None)
    }

    /// [`send`], passing `hint` (where an earlier send found the group).
    fn send_hinted(
        a: &Arena<'_>,
        env: &MockEnv,
        who: u32,
        g: &str,
        body: &[u8],
        hint: Option<crate::protocol::group::Found>,
    ) -> Result<send::Sent, Fault> {
        let parts = [body];
        let out = Outgoing {
            class: 0,
            cursor: 0,
            hash: g.len() as u64,
            group_id: g.as_bytes(),
            group_hint: hint,
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
                v.push((t.handle(), t.payload.to_vec(), t.receive_count));
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
                .all(|h| vis::state(h.own.vis.load(Ordering::Relaxed)) == vis::State::Free));
        }
    }

    /// `receive::idle` (an empty poll's first look) says a receive would take nothing only
    /// when it would, and never while a chore is due: true on a quiet queue; false with a
    /// hint queued, or a placeholder (layout 27) until a receive drops it; true while the
    /// only message is in flight (R3) and its deadline ahead;
    /// false once its deadline passed (the sweep that redelivers it is due, V1) and once the
    /// periodic sweep is a period old; true again after the receive that ran them.
    #[test]
    fn idle_says_empty_only_when_a_receive_takes_nothing() {
        let h = HeapArena::new(&geom());
        let env = MockEnv::default();
        let a = h.arena();
        env.advance(1);
        // Every chore run once at this instant: quiet from here.
        assert!(recv(&a, &env, 10, 100).is_empty());
        assert!(receive::idle(&a, &env), "a quiet, empty queue");
        send(&a, &env, 1, "g", b"a").unwrap();
        assert!(!receive::idle(&a, &env), "a hint queued");
        let got = recv(&a, &env, 10, 100);
        assert_eq!(got.len(), 1);
        // Layout 27: the receive served the ring's only hint in place, and left it queued as
        // a placeholder, which the next receive drops, taking nothing.
        assert!(!receive::idle(&a, &env), "a placeholder queued");
        assert!(recv(&a, &env, 10, 100).is_empty());
        assert!(receive::idle(&a, &env), "in flight, its deadline ahead");
        env.advance(99);
        assert!(receive::idle(&a, &env), "a millisecond before its deadline");
        env.advance(1);
        assert!(
            !receive::idle(&a, &env),
            "its deadline passed: the sweep is due"
        );
        let again = recv(&a, &env, 10, 100);
        assert_eq!(
            again.len(),
            1,
            "V1: redelivered by the receive idle declined"
        );
        handle::delete(&a, &env, owner::code(0, 1), again[0].0).unwrap();
        assert!(recv(&a, &env, 10, 100).is_empty());
        assert!(receive::idle(&a, &env), "drained");
        env.advance(crate::protocol::sweep::SWEEP_PERIOD_MS);
        assert!(!receive::idle(&a, &env), "the periodic sweep is due");
        assert!(recv(&a, &env, 10, 100).is_empty());
        assert!(receive::idle(&a, &env), "swept");
    }

    /// A release whose look at the group's first live message meets a damaged word (here the
    /// sentinel's link naming a slot past the arena) still gives the claim up, and reports
    /// the fault: since stop 54 the look comes before the releasing CAS, and a fault there
    /// must not leave a live process holding the group (every other receive, delete and sweep
    /// of it would find it busy for as long as the process lives).
    #[test]
    fn a_release_whose_look_meets_a_damaged_word_gives_the_claim_up() {
        use crate::protocol::{group, node, release};
        let h = HeapArena::new(&geom());
        let env = MockEnv::default();
        let a = h.arena();
        env.advance(1);
        send(&a, &env, 1, "g", b"a").unwrap();
        // The test's hash of a group id is its length (`send` above).
        let (g, ginc) = group::find(&a, 1, b"g").unwrap().expect("the group");
        let e = a.group(g).unwrap();
        let me = owner::code(0, 1);
        let group::TryClaim::Acquired { cw, .. } = group::try_claim(&a, &env, e, me, ginc) else {
            panic!("the claim is free");
        };
        let s = e.sentinel.load(Ordering::Relaxed);
        e.sentinel
            .store(node::pack(node::inc(s), u32::MAX - 2), Ordering::Relaxed);
        let r = release::release(&a, &env, me, cw, g);
        assert!(matches!(r, Err(Fault::Corrupted(_))), "{r:?}");
        assert_eq!(
            owner::clean(e.claim.load(Ordering::Relaxed)),
            0,
            "the claim is given up"
        );
    }

    /// R1 (a visible message is delivered): a receive that pops more hints of groups it served
    /// in this call than its requeue list holds (duplicates, which the ring may hold) requeues
    /// each group once, so that no group's hint is dropped with its `HINT` bit set (nobody
    /// would hint it again before a forced sweep). Here "hh" is popped again after ten
    /// duplicates of "g": the next receive gets both messages (visible again at once, timeout 0).
    #[test]
    fn a_receive_requeues_each_served_group_once_past_duplicate_hints() {
        use crate::protocol::{group, ready};
        let mut geo = geom();
        geo.ready_slots = 16;
        let h = HeapArena::new(&geo);
        let env = MockEnv::default();
        let a = h.arena();
        env.advance(1);
        send(&a, &env, 1, "g", b"a").unwrap();
        send(&a, &env, 1, "hh", b"b").unwrap();
        // The test's hash of a group id is its length (`send` above).
        let (g, _) = group::find(&a, 1, b"g").unwrap().expect("the group");
        for _ in 0..12 {
            assert!(ready::ring_for(&a, g).unwrap().push(g), "room in the ring");
        }
        assert_eq!(recv(&a, &env, 10, 0).len(), 2, "each group served once");
        let again = recv(&a, &env, 10, 1_000);
        let mut bodies: Vec<Vec<u8>> = again.into_iter().map(|(_, b, _)| b).collect();
        bodies.sort();
        assert_eq!(bodies, [b"a".to_vec(), b"b".to_vec()], "both hinted again");
    }

    /// A producer that died holding a claimed, never-linked slot: recovery frees it, and only
    /// once its death is proven.
    #[test]
    fn recovery_frees_a_dead_producers_claim() {
        let h = HeapArena::new(&geom());
        let env = MockEnv::default();
        let a = h.arena();
        let (idx, _, _) = crate::protocol::pool::alloc(&a, &env, 0, 0, owner::code(1, 1)).unwrap();
        let r = recovery::recover(&a, &env, owner::code(2, 1)).unwrap();
        assert_eq!(r.freed, 0, "alive: left alone");
        env.kill(1);
        let r = recovery::recover(&a, &env, owner::code(2, 1)).unwrap();
        assert_eq!(r.freed, 1);
        let w = a.msg(idx).unwrap().own.vis.load(Ordering::Relaxed);
        assert_eq!(vis::state(w), vis::State::Free);
    }

    /// A send passing where an earlier send found its group (`Outgoing::group_hint`,
    /// `group::recall`) appends there; a place that does not hold the group (another group's,
    /// another incarnation of the entry, one past every table, `UNPLACED`) is passed over and
    /// the group looked up: every message goes to its own group (M3), in order.
    #[test]
    fn a_kept_place_finds_its_group_and_a_wrong_one_is_looked_past() {
        use crate::protocol::group::{self, Found};
        let h = HeapArena::new(&geom());
        let env = MockEnv::default();
        let a = h.arena();
        let hinted = |g: &str, body: &[u8], hint: Option<Found>| {
            send_hinted(&a, &env, 1, g, body, hint).unwrap()
        };
        let at_a = hinted("a", b"a1", None).group.expect("placed");
        let at_b = hinted("bb", b"b1", None).group.expect("placed");
        assert_ne!(at_a, at_b);
        let (g, ginc) = group::find(&a, 1, b"a").unwrap().expect("found");
        assert_eq!(at_a, Found::new(g, ginc));
        // Where it was found holds, for its own id only.
        assert_eq!(group::recall(&a, at_a, b"a"), Some((g, ginc)));
        assert_eq!(group::recall(&a, at_a, b"bb"), None);
        assert_eq!(group::recall(&a, at_b, b"a"), None);
        assert_eq!(group::recall(&a, Found::new(g, ginc + 1), b"a"), None);
        assert_eq!(
            group::recall(&a, Found::new(u32::MAX - 1, ginc), b"a"),
            None
        );
        assert_eq!(group::recall(&a, Found::UNPLACED, b"a"), None);
        let wrong = [
            Some(at_a),
            Some(at_b),
            Some(Found::new(g, ginc + 1)),
            Some(Found::UNPLACED),
        ];
        for (k, hint) in wrong.into_iter().enumerate() {
            let body = format!("a{}", k + 2);
            let sent = hinted("a", body.as_bytes(), hint);
            assert_eq!(sent.group, Some(at_a), "hint {hint:?}");
        }
        // Group a's messages in order, then b's (or b's first): each in its own group.
        let got: Vec<Vec<u8>> = recv(&a, &env, 10, 1_000).into_iter().map(|m| m.1).collect();
        let a_msgs: Vec<&[u8]> = got
            .iter()
            .map(|b| &b[..])
            .filter(|b| b[0] == b'a')
            .collect();
        assert_eq!(a_msgs, [&b"a1"[..], b"a2", b"a3", b"a4", b"a5"]);
        assert_eq!(got.len(), 6);
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
            dedup_key_words: crate::layout::DEDUP_KEY_WORDS,
            attempt_slots: 0,
            class_growth: Vec::new(),
            size_limit: 0,
            dedup_growth: 0,
            group_growth: 0,
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
                            group_hint: None,
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
            // Every group emptied: none holds a message, and the count holds exactly the
            // entries kept (ACTIVE and idle) for their next send (layout 19).
            assert_eq!(crate::protocol::kept::count_active(&a), 0);
            assert_eq!(
                a.hdr.active_groups.0.load(Ordering::Relaxed),
                a.groups
                    .iter()
                    .filter(|e| crate::protocol::kept::counted_state(
                        e.state.load(Ordering::Relaxed)
                    ))
                    .count() as u64
            );
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

    /// A geometry whose one class of 2 slots may add 3 segments (2, 4 and 8 slots: 16 in all).
    fn growing() -> Geometry {
        Geometry {
            classes: vec![(16, 2)],
            class_growth: vec![3],
            size_limit: 1 << 30,
            dedup_growth: 0,
            group_growth: 0,
            ..geom()
        }
    }

    /// Layout 13: a full class grows segment by segment, up to its limit, then answers
    /// `ClassFull`; every message comes back in order; the growth is counted.
    #[test]
    fn a_full_class_grows_to_its_limit_and_delivers_in_order() {
        let h = HeapArena::new(&growing());
        let env = MockEnv::default();
        let a = h.arena();
        for i in 0..16u8 {
            send(&a, &env, 1, "g", &[i]).unwrap();
            assert!(a.slots_now(0) > u64::from(i));
        }
        assert_eq!(a.published(0), 3);
        assert_eq!(send(&a, &env, 1, "g", b"x"), Err(Fault::ClassFull(0)));
        let s = crate::protocol::grow::size(&a);
        assert_eq!(s.grows, 3);
        assert!(s.bytes > s.base && s.bytes <= s.limit);
        let mut got = Vec::new();
        loop {
            let v = recv(&a, &env, 10, 30_000);
            if v.is_empty() {
                break;
            }
            for (hd, body, _) in v {
                handle::delete(&a, &env, owner::code(0, 1), hd).unwrap();
                got.push(body[0]);
            }
        }
        assert_eq!(got, (0..16).collect::<Vec<u8>>());
        // The segments' slots are reused, no further growth.
        for i in 0..15u8 {
            send(&a, &env, 1, "g", &[i]).unwrap();
        }
        assert_eq!(crate::protocol::grow::size(&a).grows, 3);
    }

    /// A file system that refuses the blocks fails the send with `NoSpace`, publishes nothing
    /// and keeps the grow claim free.
    #[test]
    fn a_refused_growth_publishes_nothing() {
        let h = HeapArena::new(&growing());
        let env = MockEnv::default();
        let a = h.arena();
        send(&a, &env, 1, "g", b"a").unwrap();
        send(&a, &env, 1, "g", b"b").unwrap();
        h.refuse_growth();
        assert!(matches!(
            send(&a, &env, 1, "g", b"c"),
            Err(Fault::NoSpace(_))
        ));
        assert_eq!(a.published(0), 0);
        assert_eq!(crate::protocol::grow::size(&a).refused, 1);
        assert_eq!(a.hdr.grow.0.claim.load(Ordering::Relaxed), 0);
        assert_eq!(recv(&a, &env, 10, 30_000).len(), 2);
    }

    /// A grower that died holding the claim after writing its segment's offset (and
    /// reserving it) is redone by the next: the claim is taken over, the same range reserved
    /// again, the segment published once.
    #[test]
    fn a_dead_growers_half_growth_is_redone() {
        let h = HeapArena::new(&growing());
        let env = MockEnv::default();
        let a = h.arena();
        send(&a, &env, 1, "g", b"a").unwrap();
        send(&a, &env, 1, "g", b"b").unwrap();
        // Participant 2 took the claim, wrote the offset, reserved the range, and died.
        a.hdr
            .grow
            .0
            .claim
            .store(owner::code(2, 1).bits(), Ordering::Relaxed);
        let at = crate::protocol::grow::file_end(&a).unwrap();
        a.directory[0].store(at, Ordering::Relaxed);
        let len = crate::layout::segment_bytes(2, 16, 1);
        let layout = Layout::Slots {
            slots: 2,
            stride: 16,
        };
        h.segs.file().reserve(at, len, layout).unwrap();
        env.kill(2);
        send(&a, &env, 1, "g", b"c").unwrap();
        assert_eq!(a.published(0), 1);
        assert_eq!(a.directory[0].load(Ordering::Relaxed), at);
        assert_eq!(a.hdr.grow.0.claim.load(Ordering::Relaxed), 0);
        let got: Vec<_> = recv(&a, &env, 10, 30_000)
            .into_iter()
            .map(|m| m.1)
            .collect();
        assert_eq!(got, [b"a".to_vec(), b"b".to_vec(), b"c".to_vec()]);
    }

    /// An index in a segment that was never published is refused, never mapped (a receipt
    /// handle naming it is caller garbage, a link naming it corruption).
    #[test]
    fn an_index_beyond_the_published_segments_is_refused() {
        let h = HeapArena::new(&growing());
        let a = h.arena();
        assert!(a.is_slot(1));
        assert!(!a.is_slot(2));
        assert!(matches!(a.msg(2), Err(Fault::Corrupted(_))));
        assert!(matches!(a.msg(15), Err(Fault::Corrupted(_))));
        assert!(matches!(a.msg(16), Err(Fault::Corrupted(_))));
        // A hostile count past the class's growth is bounded by it.
        a.hdr.grow.0.segments[0].store(u64::MAX, Ordering::Relaxed);
        assert_eq!(a.published(0), 3);
        // Its directory entries are zero: below the base file, refused.
        assert!(matches!(a.msg(2), Err(Fault::Corrupted(_))));
    }

    /// Sends `body` to group `g` with dedup key `k` (its hash `k`'s bytes folded, so that every
    /// key of one byte has its own hash).
    fn send_key(a: &Arena<'_>, env: &MockEnv, g: &str, k: &str) -> Result<send::Sent, Fault> {
        let parts: [&[u8]; 1] = [b"m"];
        let out = Outgoing {
            class: 0,
            cursor: 0,
            hash: g.len() as u64,
            group_id: g.as_bytes(),
            group_hint: None,
            lens: words::pack_lens(1, 0, k.len(), 0),
            parts: &parts,
            dedup: Some(crate::protocol::dedup::Key {
                hash: k
                    .bytes()
                    .fold(7u64, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b))),
                check: k.len() as u64,
                dedup: k.as_bytes(),
                group: &[],
            }),
            source_len: 0,
            prior_receives: 0,
            loaned: None,
            in_place: 0,
        };
        send::send(a, env, owner::code(1, 1), &out)
    }

    /// Layout 14, D1: a dedup table of one entry (so every key's window is full at once) that
    /// may add two segments (1 + 1 + 2 entries) remembers four keys within the interval, each
    /// a duplicate when sent again, none evicted; at the size limit the fifth key evicts the
    /// oldest (counted), as a table that cannot grow does.
    #[test]
    fn the_dedup_table_grows_instead_of_forgetting() {
        let h = HeapArena::new(&Geometry {
            dedup_slots: 1,
            dedup_growth: 2,
            group_growth: 0,
            size_limit: 1 << 30,
            classes: vec![(16, 16)],
            ..geom()
        });
        let env = MockEnv::default();
        env.advance(1);
        let a = h.arena();
        for k in ["a", "b", "c", "d"] {
            assert!(!send_key(&a, &env, "g", k).unwrap().duplicate, "{k} is new");
        }
        assert_eq!(a.dedup_entries(), 4);
        for k in ["a", "b", "c", "d"] {
            assert!(
                send_key(&a, &env, "g", k).unwrap().duplicate,
                "{k} is remembered"
            );
        }
        assert_eq!(a.hdr.dedup_evict.0.count.load(Ordering::Relaxed), 0);
        assert!(!send_key(&a, &env, "g", "e").unwrap().duplicate);
        assert_eq!(a.hdr.dedup_evict.0.count.load(Ordering::Relaxed), 1);
        assert_eq!(crate::protocol::dedup::count(&a, env.now_ms()), (4, 0));
        // A purge clears every table (D7).
        handle::purge(&a, &env, owner::code(0, 1)).unwrap();
        assert_eq!(crate::protocol::dedup::count(&a, env.now_ms()), (0, 0));
        assert!(!send_key(&a, &env, "g", "a").unwrap().duplicate);
    }
}
