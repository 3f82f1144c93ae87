//! Deterministic counts of cache-line transfers (feature `lines`): every access the protocols
//! make to shared memory, through the `sync` facade's atomics and the payload copies, is
//! recorded as (actor, 64-byte line, read or write) and run through a MESI model. A read of a
//! line another actor holds modified is one transfer; a write (or read-modify-write) to a line
//! another actor holds is one transfer plus one invalidation per other holder. A cold miss (a
//! line nobody holds) is no transfer: memory, not coherence.
//!
//! Actors are what the caller says they are ([`set_actor`]): the benches' `shmfifo-lines` runs
//! a producer and consumers as scripted steps on one thread, so the count does not depend on
//! the machine, its scheduler or its cache sizes (the model's caches never evict). Wall-clock
//! figures on a VM whose line time changes fourfold within seconds cannot steer the line
//! budget; these counts can.
//!
//! With the feature off nothing of this is compiled, and the facade's atomics are core's.

use core::mem::offset_of;
use core::sync::atomic::Ordering;
use std::collections::HashMap;
use std::sync::Mutex;

use crate::layout::{AttemptEntry, DedupEntry, GroupEntry, Header, MsgHeader, Participant};

/// The size of a cache line.
pub const LINE: usize = 64;

/// What an access does to its line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// A load.
    Read,
    /// A store or a read-modify-write.
    Write,
}

/// A line's state in the model: the actor holding it modified, else the actors sharing it.
#[derive(Debug, Clone, Copy, Default)]
struct State {
    modified: Option<u8>,
    sharers: u64,
}

#[derive(Default)]
struct Model {
    on: bool,
    actor: u8,
    lines: HashMap<usize, State>,
    transfers: u64,
    invalidations: u64,
    by_line: HashMap<usize, u64>,
    regions: Vec<Region>,
    /// Mappings of arenas: one arena mapped by several handles (processes) is one set of
    /// lines, at a canonical address per arena.
    mappings: Vec<Mapping>,
    /// Arenas seen, by nonce: arena `k` lives at canonical address `(k + 1) << 40`.
    arenas: Vec<u64>,
}

#[derive(Debug, Clone, Copy)]
struct Mapping {
    start: usize,
    end: usize,
    canon: usize,
}

#[derive(Debug, Clone)]
struct Region {
    start: usize,
    end: usize,
    name: &'static str,
    /// Size of one element (0: not an array of structs), and its fields by offset.
    stride: usize,
    fields: &'static [(usize, &'static str)],
}

static MODEL: Mutex<Option<Model>> = Mutex::new(None);

fn with<T>(f: impl FnOnce(&mut Model) -> T) -> T {
    let mut g = MODEL.lock().unwrap_or_else(|e| e.into_inner());
    f(g.get_or_insert_with(Model::default))
}

/// Makes `actor` (0–63) the one whose accesses are recorded from now on.
pub fn set_actor(actor: u8) {
    assert!(actor < 64, "actors are 0 to 63");
    with(|m| m.actor = actor);
}

/// Starts (or pauses) recording. Recording is off until the first call.
pub fn record_on(on: bool) {
    with(|m| m.on = on);
}

/// Forgets the counts (not the lines' states: a workload measured after a warm-up starts from
/// the caches the warm-up left).
pub fn reset_counts() {
    with(|m| {
        m.transfers = 0;
        m.invalidations = 0;
        m.by_line.clear();
    });
}

/// Forgets the counts and every line's state (cold caches), and stops recording; the arenas
/// registered stay (their handles keep them mapped).
pub fn reset_all() {
    with(|m| {
        m.on = false;
        m.lines.clear();
        m.transfers = 0;
        m.invalidations = 0;
        m.by_line.clear();
    });
}

/// Records an access of `len` bytes at `addr` by the current actor.
pub fn touch(addr: usize, len: usize, access: Access) {
    if len == 0 {
        return;
    }
    with(|m| {
        if !m.on {
            return;
        }
        let addr = m
            .mappings
            .iter()
            .find(|p| addr >= p.start && addr < p.end)
            .map_or(addr, |p| p.canon + (addr - p.start));
        let me = m.actor;
        let bit = 1u64 << me;
        let first = addr / LINE;
        let last = (addr + len - 1) / LINE;
        for line in first..=last {
            let s = m.lines.entry(line).or_default();
            let mut moved = 0;
            let mut inval = 0;
            match access {
                Access::Read => match s.modified {
                    Some(o) if o != me => {
                        moved = 1;
                        s.modified = None;
                        s.sharers = (1u64 << o) | bit;
                    }
                    Some(_) => {}
                    None => s.sharers |= bit,
                },
                Access::Write => {
                    let others = match s.modified {
                        Some(o) if o != me => 1u64 << o,
                        Some(_) => 0,
                        None => s.sharers & !bit,
                    };
                    if others != 0 {
                        moved = 1;
                        inval = u64::from(others.count_ones());
                    }
                    s.modified = Some(me);
                    s.sharers = bit;
                }
            }
            if moved > 0 {
                m.transfers += moved;
                m.invalidations += inval;
                *m.by_line.entry(line).or_default() += moved;
            }
        }
    });
}

/// What was counted since the last [`reset_counts`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counts {
    /// Line transfers between actors.
    pub transfers: u64,
    /// Copies invalidated by writes.
    pub invalidations: u64,
    /// Transfers by what the line holds (`region.field`, or an address outside any arena),
    /// most first.
    pub by_field: Vec<(String, u64)>,
}

/// The counts since the last [`reset_counts`].
pub fn counts() -> Counts {
    with(|m| {
        let mut by: HashMap<String, u64> = HashMap::new();
        for (&line, &n) in &m.by_line {
            *by.entry(describe_line(&m.regions, line)).or_default() += n;
        }
        let mut by_field: Vec<(String, u64)> = by.into_iter().collect();
        by_field.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        Counts {
            transfers: m.transfers,
            invalidations: m.invalidations,
            by_field,
        }
    })
}

/// The fields a line holds, named: `region.field[+field…]`.
fn describe_line(regions: &[Region], line: usize) -> String {
    let lo = line * LINE;
    let Some(r) = regions.iter().find(|r| lo < r.end && lo + LINE > r.start) else {
        return "outside the arena".into();
    };
    if r.fields.is_empty() || r.stride == 0 {
        return r.name.into();
    }
    let mut names: Vec<&str> = Vec::new();
    for b in (lo.max(r.start)..(lo + LINE).min(r.end)).step_by(8) {
        let off = (b - r.start) % r.stride;
        if let Some(&(_, f)) = r.fields.iter().rev().find(|&&(o, _)| o <= off) {
            if names.last() != Some(&f) && !names.contains(&f) {
                names.push(f);
            }
        }
    }
    format!("{}.{}", r.name, names.join("+"))
}

/// Registers a mapping of the arena `nonce` at `base`: its accesses count on the arena's
/// canonical lines (shared by every handle that maps it), and counts name the fields they hold.
pub(crate) fn register_arena(
    base: *const u8,
    nonce: u64,
    o: &crate::layout::Offsets,
    g: &crate::layout::Geometry,
) {
    let start = base as usize;
    let end = start + o.total as usize;
    let (canon, new) = with(|m| {
        let (k, new) = match m.arenas.iter().position(|&n| n == nonce) {
            Some(k) => (k, false),
            None => {
                m.arenas.push(nonce);
                (m.arenas.len() - 1, true)
            }
        };
        let canon = (k + 1) << 40;
        m.mappings.retain(|p| p.end <= start || p.start >= end);
        m.mappings.push(Mapping { start, end, canon });
        (canon, new)
    });
    if !new {
        return;
    }
    let b = canon;
    let mut v = vec![
        region(b, 0, core::mem::size_of::<Header>(), "header", HEADER),
        region(
            b,
            o.participants,
            g.participants as usize * core::mem::size_of::<Participant>(),
            "participant",
            PARTICIPANT,
        )
        .with_stride(core::mem::size_of::<Participant>()),
        region(
            b,
            o.groups,
            g.group_slots as usize * core::mem::size_of::<GroupEntry>(),
            "group",
            GROUP,
        )
        .with_stride(core::mem::size_of::<GroupEntry>()),
        region(b, o.ready, g.ready_slots as usize * 8, "ready_ring", &[]),
        region(
            b,
            o.timers,
            (o.dedup.max(o.timers) - o.timers) as usize,
            "expiry_wheel",
            &[],
        ),
        region(
            b,
            o.dedup,
            g.dedup_slots as usize * core::mem::size_of::<DedupEntry>(),
            "dedup",
            DEDUP,
        )
        .with_stride(core::mem::size_of::<DedupEntry>()),
        region(
            b,
            o.dedup_keys,
            g.dedup_slots as usize * g.dedup_key_words as usize * 8,
            "dedup_keys",
            &[],
        ),
        region(
            b,
            o.attempts,
            g.attempt_slots as usize * core::mem::size_of::<AttemptEntry>(),
            "attempt",
            ATTEMPT,
        )
        .with_stride(core::mem::size_of::<AttemptEntry>()),
    ];
    for (k, &(cap, n)) in g.classes.iter().enumerate() {
        let (ho, po, stride) = o.classes[k];
        v.push(
            region(
                b,
                ho,
                n as usize * core::mem::size_of::<MsgHeader>(),
                "slot_header",
                MSG,
            )
            .with_stride(core::mem::size_of::<MsgHeader>()),
        );
        let _ = cap;
        v.push(region(b, po, n as usize * stride as usize, "payload", &[]));
    }
    with(|m| m.regions.extend(v));
}

fn region(
    base: usize,
    off: u64,
    len: usize,
    name: &'static str,
    fields: &'static [(usize, &'static str)],
) -> Region {
    let start = base + off as usize;
    Region {
        start,
        end: start + len,
        name,
        stride: len,
        fields,
    }
}

impl Region {
    fn with_stride(mut self, stride: usize) -> Self {
        self.stride = stride;
        self
    }
}

const HEADER: &[(usize, &str)] = &[
    (offset_of!(Header, magic), "magic"),
    (offset_of!(Header, layout_version), "layout_version"),
    (offset_of!(Header, total_size), "total_size"),
    (offset_of!(Header, hash_alg), "hash_alg"),
    (offset_of!(Header, hash_k0), "hash_k0"),
    (offset_of!(Header, hash_k1), "hash_k1"),
    (offset_of!(Header, nonce), "nonce"),
    (offset_of!(Header, boot_id), "boot_id"),
    (offset_of!(Header, created_wall_ms), "created_wall_ms"),
    (offset_of!(Header, clock), "clock"),
    (offset_of!(Header, participants), "participants"),
    (offset_of!(Header, max_groups), "max_groups"),
    (offset_of!(Header, group_slots), "group_slots"),
    (offset_of!(Header, ready_slots), "ready_slots"),
    (offset_of!(Header, class_count), "class_count"),
    (offset_of!(Header, class_payload), "class_payload"),
    (offset_of!(Header, class_slots), "class_slots"),
    (offset_of!(Header, max_message_size), "max_message_size"),
    (
        offset_of!(Header, visibility_timeout_ms),
        "visibility_timeout_ms",
    ),
    (offset_of!(Header, receive_wait_ms), "receive_wait_ms"),
    (offset_of!(Header, dedup_mode), "dedup_mode"),
    (offset_of!(Header, dedup_interval_ms), "dedup_interval_ms"),
    (offset_of!(Header, dedup_slots), "dedup_slots"),
    (
        offset_of!(Header, content_based_dedup),
        "content_based_dedup",
    ),
    (offset_of!(Header, delay_ms), "delay_ms"),
    (offset_of!(Header, retention_ms), "retention_ms"),
    (offset_of!(Header, max_in_flight), "max_in_flight"),
    (offset_of!(Header, in_flight_fix), "in_flight_fix"),
    (offset_of!(Header, state), "state"),
    (offset_of!(Header, wake), "wake"),
    (offset_of!(Header, next_expiry), "next_expiry"),
    (offset_of!(Header, last_sweep), "last_sweep"),
    (offset_of!(Header, sweep_cursor), "sweep_cursor"),
    (offset_of!(Header, group_seq), "group_seq"),
    (offset_of!(Header, active_groups), "active_groups"),
    (offset_of!(Header, ready_head), "ready_head"),
    (offset_of!(Header, ready_tail), "ready_tail"),
    (offset_of!(Header, census), "census"),
    (offset_of!(Header, redrive), "redrive"),
    (offset_of!(Header, attempt_slots), "attempt_slots"),
    (offset_of!(Header, release_on_death), "release_on_death"),
    (offset_of!(Header, liveness), "liveness"),
    (offset_of!(Header, dedup_overflow), "dedup_overflow"),
    (offset_of!(Header, dedup_evict), "dedup_evict"),
    (offset_of!(Header, mode), "mode"),
    (offset_of!(Header, quarantine), "quarantine"),
    (offset_of!(Header, clock_mode), "clock_mode"),
    (offset_of!(Header, test_now), "test_now"),
    (offset_of!(Header, space), "space"),
    (offset_of!(Header, body_mode), "body_mode"),
    (offset_of!(Header, free_hint), "free_hint"),
    (offset_of!(Header, empty_receives), "empty_receives"),
];

const GROUP: &[(usize, &str)] = &[
    (offset_of!(GroupEntry, state), "state"),
    (offset_of!(GroupEntry, sentinel_pos), "sentinel_pos"),
    (offset_of!(GroupEntry, claim), "claim"),
    (offset_of!(GroupEntry, unused), "unused"),
    (offset_of!(GroupEntry, head), "head"),
    (offset_of!(GroupEntry, tail), "tail"),
    (offset_of!(GroupEntry, sentinel), "sentinel"),
    (offset_of!(GroupEntry, seq_base), "seq_base"),
    (offset_of!(GroupEntry, probe), "probe"),
    (offset_of!(GroupEntry, hash), "hash"),
    (offset_of!(GroupEntry, id_len), "id_len"),
    (offset_of!(GroupEntry, home_claim), "home_claim"),
    (offset_of!(GroupEntry, id), "id"),
    (offset_of!(GroupEntry, pending_free), "pending_free"),
];

const MSG: &[(usize, &str)] = &[
    (offset_of!(MsgHeader, own.vis), "vis"),
    (offset_of!(MsgHeader, own.lens), "lens"),
    (offset_of!(MsgHeader, own.recv_ms), "recv_ms"),
    (offset_of!(MsgHeader, own.first_recv_ms), "first_recv_ms"),
    (offset_of!(MsgHeader, link), "link"),
    (offset_of!(MsgHeader, pos), "pos"),
    (offset_of!(MsgHeader, group_epoch0), "group_epoch0"),
    (offset_of!(MsgHeader, sent), "sent"),
];

const PARTICIPANT: &[(usize, &str)] = &[
    (offset_of!(Participant, state), "state"),
    (offset_of!(Participant, pid), "pid"),
    (offset_of!(Participant, waiting), "waiting"),
    (offset_of!(Participant, in_flight), "in_flight"),
    (offset_of!(Participant, counters), "counters"),
];

const DEDUP: &[(usize, &str)] = &[
    (offset_of!(DedupEntry, state), "state"),
    (offset_of!(DedupEntry, home_claim), "home_claim"),
    (offset_of!(DedupEntry, probe), "probe"),
    (offset_of!(DedupEntry, hash), "hash"),
    (offset_of!(DedupEntry, msg), "msg"),
    (offset_of!(DedupEntry, seq_hi), "seq_hi"),
    (offset_of!(DedupEntry, pos), "pos"),
    (offset_of!(DedupEntry, meta), "meta"),
];

const ATTEMPT: &[(usize, &str)] = &[
    (offset_of!(AttemptEntry, state), "state"),
    (offset_of!(AttemptEntry, hash), "hash"),
    (offset_of!(AttemptEntry, created), "created"),
    (offset_of!(AttemptEntry, meta), "meta"),
    (offset_of!(AttemptEntry, refs), "refs"),
    (offset_of!(AttemptEntry, vis), "vis"),
    (offset_of!(AttemptEntry, id), "id"),
];

/// An atomic that records each access (see the module doc); the same layout as core's.
macro_rules! recorded {
    ($name:ident, $core:ty, $int:ty) => {
        #[doc = concat!("`", stringify!($core), "` recording each access (feature `lines`).")]
        #[repr(transparent)]
        #[derive(Default)]
        pub struct $name($core);

        impl core::fmt::Debug for $name {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                self.0.fmt(f)
            }
        }

        impl $name {
            /// A new atomic holding `v`.
            pub const fn new(v: $int) -> Self {
                Self(<$core>::new(v))
            }
            fn at(&self, a: Access) {
                touch(
                    self as *const Self as usize,
                    core::mem::size_of::<$int>(),
                    a,
                );
            }
            /// The core atomic (for the futex calls).
            pub fn as_core(&self) -> &$core {
                &self.0
            }
            /// See core's.
            pub fn load(&self, o: Ordering) -> $int {
                self.at(Access::Read);
                self.0.load(o)
            }
            /// See core's.
            pub fn store(&self, v: $int, o: Ordering) {
                self.at(Access::Write);
                self.0.store(v, o)
            }
            /// See core's.
            pub fn swap(&self, v: $int, o: Ordering) -> $int {
                self.at(Access::Write);
                self.0.swap(v, o)
            }
            /// See core's.
            pub fn fetch_add(&self, v: $int, o: Ordering) -> $int {
                self.at(Access::Write);
                self.0.fetch_add(v, o)
            }
            /// `fetch_add(0, o)` recorded as a read: LLVM lowers an RMW that provably writes
            /// nothing to a fence and a load on x86, which fetch the line shared
            /// (`sync::idempotent_rmw_u64`).
            pub fn idempotent_rmw(&self, o: Ordering) -> $int {
                self.at(Access::Read);
                self.0.fetch_add(0, o)
            }
            /// See core's.
            pub fn fetch_sub(&self, v: $int, o: Ordering) -> $int {
                self.at(Access::Write);
                self.0.fetch_sub(v, o)
            }
            /// See core's.
            pub fn fetch_or(&self, v: $int, o: Ordering) -> $int {
                self.at(Access::Write);
                self.0.fetch_or(v, o)
            }
            /// See core's.
            pub fn fetch_and(&self, v: $int, o: Ordering) -> $int {
                self.at(Access::Write);
                self.0.fetch_and(v, o)
            }
            /// See core's.
            pub fn fetch_max(&self, v: $int, o: Ordering) -> $int {
                self.at(Access::Write);
                self.0.fetch_max(v, o)
            }
            /// See core's.
            pub fn fetch_min(&self, v: $int, o: Ordering) -> $int {
                self.at(Access::Write);
                self.0.fetch_min(v, o)
            }
            /// See core's. A failed exchange still takes the line exclusive (a locked
            /// instruction does).
            pub fn compare_exchange(
                &self,
                current: $int,
                new: $int,
                success: Ordering,
                failure: Ordering,
            ) -> Result<$int, $int> {
                self.at(Access::Write);
                self.0.compare_exchange(current, new, success, failure)
            }
            /// See core's.
            pub fn compare_exchange_weak(
                &self,
                current: $int,
                new: $int,
                success: Ordering,
                failure: Ordering,
            ) -> Result<$int, $int> {
                self.at(Access::Write);
                self.0.compare_exchange_weak(current, new, success, failure)
            }
            /// See core's.
            pub fn fetch_update<F: FnMut($int) -> Option<$int>>(
                &self,
                set: Ordering,
                fetch: Ordering,
                f: F,
            ) -> Result<$int, $int> {
                self.at(Access::Write);
                self.0.fetch_update(set, fetch, f)
            }
        }
    };
}

recorded!(AtomicU64, core::sync::atomic::AtomicU64, u64);
recorded!(AtomicU32, core::sync::atomic::AtomicU32, u32);

#[cfg(test)]
mod tests {
    use super::*;

    /// One line per value, as the toys need.
    #[repr(align(64))]
    #[derive(Default)]
    struct Line(AtomicU64);

    // The model is one global: the toys run one at a time.
    static TOYS: Mutex<()> = Mutex::new(());

    fn fresh() -> std::sync::MutexGuard<'static, ()> {
        let g = TOYS.lock().unwrap_or_else(|e| e.into_inner());
        reset_all();
        record_on(true);
        g
    }

    /// A ping-pong of one line by read-modify-writes: each side takes the line from the other,
    /// 2 transfers per round trip (and 1 invalidation each).
    #[test]
    fn a_ping_pong_of_one_line_moves_it_twice_per_round_trip() {
        let _g = fresh();
        let flag = Line::default();
        for _ in 0..3 {
            set_actor(0);
            flag.0.fetch_add(1, Ordering::AcqRel);
            set_actor(1);
            flag.0.fetch_add(1, Ordering::AcqRel);
        }
        reset_counts();
        for _ in 0..100 {
            set_actor(0);
            flag.0.fetch_add(1, Ordering::AcqRel);
            set_actor(1);
            flag.0.fetch_add(1, Ordering::AcqRel);
        }
        let c = counts();
        assert_eq!((c.transfers, c.invalidations), (200, 200));
        record_on(false);
    }

    /// Lines nobody else touches move nothing, however often they are written and read; a
    /// line read by many after one write moves once per reader.
    #[test]
    fn private_lines_move_nothing_and_a_shared_read_moves_once_per_reader() {
        let _g = fresh();
        let mine = Line::default();
        let shared = Line::default();
        set_actor(0);
        for _ in 0..50 {
            mine.0.store(1, Ordering::Relaxed);
            mine.0.load(Ordering::Relaxed);
        }
        shared.0.store(7, Ordering::Release);
        for a in 1..=3 {
            set_actor(a);
            shared.0.load(Ordering::Acquire);
            shared.0.load(Ordering::Acquire);
        }
        let c = counts();
        // The first reader takes the modified line (1); the others read a shared copy (0).
        assert_eq!((c.transfers, c.invalidations), (1, 0));
        // A write to a line three others share: 1 transfer, 3 invalidations.
        set_actor(0);
        shared.0.store(8, Ordering::Release);
        let c = counts();
        assert_eq!((c.transfers, c.invalidations), (2, 3));
        record_on(false);
    }

    /// An SPSC ring of 4 one-line slots with cached indices (Lamport's queue as rtrb builds it),
    /// one message at a time. Per message: the producer writes the slot the consumer read a
    /// lap ago (1) and its tail, which the consumer read (1); the consumer reads the tail (1)
    /// and the slot (1). Per lap of 4: the producer, its cached head exhausted, reads the head
    /// (1), and the consumer's next head write takes it back (1). Textbook: 4 + 2/4 = 4.5 per
    /// message.
    #[test]
    fn an_spsc_ring_with_cached_indices_moves_four_and_a_half_lines_per_message() {
        let _g = fresh();
        const CAP: u64 = 4;
        let slots: Vec<Line> = (0..CAP).map(|_| Line::default()).collect();
        let (head, tail) = (Line::default(), Line::default());
        let (mut p_tail, mut p_head_cache) = (0u64, 0u64);
        let (mut c_head, mut c_tail_cache) = (0u64, 0u64);
        let mut step = |n: u64| {
            for v in 0..n {
                set_actor(0);
                if p_tail - p_head_cache == CAP {
                    p_head_cache = head.0.load(Ordering::Acquire);
                    assert!(p_tail - p_head_cache < CAP);
                }
                slots[(p_tail % CAP) as usize].0.store(v, Ordering::Relaxed);
                p_tail += 1;
                tail.0.store(p_tail, Ordering::Release);
                set_actor(1);
                if c_tail_cache == c_head {
                    c_tail_cache = tail.0.load(Ordering::Acquire);
                }
                assert_eq!(slots[(c_head % CAP) as usize].0.load(Ordering::Relaxed), v);
                c_head += 1;
                head.0.store(c_head, Ordering::Release);
            }
        };
        step(2 * CAP); // warm: every line has been through both caches
        reset_counts();
        step(100 * CAP);
        let c = counts();
        assert_eq!(c.transfers, 100 * CAP * 9 / 2, "{c:?}");
        record_on(false);
    }

    /// The slot header's transfers per message over `n` rounds of `round` (after as many to
    /// warm up), a producer (actor 0) and a consumer (actor 1) on two handles of one queue.
    fn header_per_message(
        tag: &str,
        per_round: u64,
        round: impl Fn(&crate::Queue, &crate::Queue),
    ) -> f64 {
        // The model is taken first: creating and opening the queue are accesses too, and a toy
        // running meanwhile counted them as its own (a flaky count of the SPSC toy).
        let _g = fresh();
        let name = format!("shmfifo-lines-test-{tag}-{}", std::process::id());
        let _ = crate::Queue::unlink(&name);
        let p = crate::Queue::create(&name, &crate::QueueConfig::new()).expect("create");
        let c = crate::Queue::open(&name).expect("open");
        for _ in 0..20 {
            round(&p, &c);
        }
        reset_counts();
        for _ in 0..40 {
            round(&p, &c);
        }
        let n: u64 = counts()
            .by_field
            .iter()
            .filter(|(f, _)| f.starts_with("slot_header."))
            .map(|&(_, n)| n)
            .sum();
        record_on(false);
        drop((p, c));
        let _ = crate::Queue::unlink(&name);
        n as f64 / (40 * per_round) as f64
    }

    /// A received message's header comes to the consumer once, for writing: the receive's
    /// cleanup and walk fetch it for writing (`sync::load_for_write_u64`), where a load then the
    /// in-flight CAS fetched it twice (2 per message before). One group, send, receive,
    /// delete; and a batch of 10 received at once, whose messages after the first the walk
    /// fetches, one slot a message, and as one pack.
    #[test]
    fn a_received_message_header_moves_once() {
        use crate::{BatchEntry, ReceiveOptions, SendMessage};
        let body = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
        let one = ReceiveOptions::max(1).wait(std::time::Duration::ZERO);
        let k = std::cell::Cell::new(0u64);
        let single = header_per_message("single", 1, |p, c| {
            set_actor(0);
            k.set(k.get() + 1);
            let id = k.get().to_string();
            p.send(&SendMessage::new("g", body).dedup_id(&id))
                .expect("send");
            set_actor(1);
            let got = c.receive(&one).expect("receive");
            c.delete(&got[0].receipt_handle).expect("delete");
        });
        assert_eq!(single, 1.0);
        let ten = ReceiveOptions::max(10).wait(std::time::Duration::ZERO);
        let batch_of = |packs: bool| {
            header_per_message(if packs { "pack" } else { "batch" }, 10, |p, c| {
                p.set_pack_batches(packs);
                set_actor(0);
                k.set(k.get() + 1);
                let ids: Vec<String> = (0..10).map(|i| format!("{}-{i}", k.get())).collect();
                let names = ["0", "1", "2", "3", "4", "5", "6", "7", "8", "9"];
                let entries: Vec<_> = ids
                    .iter()
                    .zip(names)
                    .map(|(d, id)| BatchEntry {
                        id,
                        entry: SendMessage::new("g", body).dedup_id(d),
                    })
                    .collect();
                for r in p.send_batch(&entries).expect("send_batch") {
                    r.result.expect("sent");
                }
                set_actor(1);
                let got = c.receive(&ten).expect("receive");
                assert_eq!(got.len(), 10);
                let handles: Vec<_> = got.iter().map(|m| m.receipt_handle).collect();
                for r in c.delete_handles(&handles).expect("delete") {
                    r.expect("deleted");
                }
            })
        };
        assert_eq!(batch_of(false), 1.0, "one slot a message");
        // As one pack (layout 22, the default since 23): one header line for the ten.
        assert_eq!(batch_of(true), 0.1, "one pack");
    }

    /// The least a message of two lines (a header line that also signals, and a payload line)
    /// can move in this model when its slots are reused: an SPSC ring of 8 such slots, one
    /// message at a time, with no tail index at all (the consumer finds the message by its
    /// header's sequence, as Vyukov's queue does) and a cached head. Each of the message's
    /// lines goes to the consumer (1) and back to the producer's next write a lap later (1:
    /// the consumer holds a copy): 4 per message, plus the head, 2 a lap. Whatever the design,
    /// a 64-byte body beside its header cannot move fewer than 4 lines per message here.
    #[test]
    fn a_message_of_two_lines_moves_each_twice_when_its_slot_is_reused() {
        let _g = fresh();
        const CAP: u64 = 8;
        let headers: Vec<Line> = (0..CAP).map(|_| Line::default()).collect();
        let payloads: Vec<Line> = (0..CAP).map(|_| Line::default()).collect();
        let head = Line::default();
        let (mut p_tail, mut p_head_cache) = (0u64, 0u64);
        let mut c_head = 0u64;
        let mut step = |n: u64| {
            for v in 0..n {
                set_actor(0);
                if p_tail - p_head_cache == CAP {
                    p_head_cache = head.0.load(Ordering::Acquire);
                    assert!(p_tail - p_head_cache < CAP);
                }
                let k = (p_tail % CAP) as usize;
                payloads[k].0.store(v, Ordering::Relaxed);
                p_tail += 1;
                headers[k].0.store(p_tail, Ordering::Release);
                set_actor(1);
                let k = (c_head % CAP) as usize;
                assert_eq!(headers[k].0.load(Ordering::Acquire), c_head + 1);
                assert_eq!(payloads[k].0.load(Ordering::Relaxed), v);
                c_head += 1;
                head.0.store(c_head, Ordering::Release);
            }
        };
        step(2 * CAP); // warm
        reset_counts();
        step(100 * CAP);
        let c = counts();
        assert_eq!(c.transfers, 100 * CAP * 4 + 100 * 2, "{c:?}");
        record_on(false);
    }
}
