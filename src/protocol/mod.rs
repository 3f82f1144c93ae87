//! The lock-free protocols, on typed references into any memory (a mapping or the heap).
//!
//! `protocol` never calls the OS: time, liveness and wake-ups come through [`Env`], so loom can
//! drive the same code with mocks.
//!
//! # Structures
//!
//! * **Message slots** (`pool`): size-classed; a slot's `vis` word is its allocation and
//!   visibility state, its `link` word its incarnation and the next node of its group.
//! * **Groups** (`group`): an open-addressing table of [`GroupEntry`]; each active group is a
//!   Michael–Scott list of message nodes behind a dummy (`head`), appended lock-free by
//!   producers, consumed under the group's short, owner-tagged, stealable `claim`.
//! * **Ready hints** (`ring`): a bounded MPMC ring of group indices, one CAS per push or pop;
//!   hints may be lost or duplicated, consumers re-validate, a sweep re-derives lost ones.
//!
//! # Invariants
//!
//! 1. A node reachable from a group's `head` is never freed; only the claim holder moves
//!    `head`, and frees the old dummy (and the run of deleted nodes it moved past, last node
//!    first) only after the move (`pending_free` names the run's first slot first).
//! 2. `tail` never points at a freed node: `head` is moved past a node only after `tail` has
//!    been helped past it.
//! 3. A node's `link` word carries its incarnation; every reference (`head`, `tail`, receipt
//!    handles) carries the incarnation it expects, so a stale reference fails its CAS.
//! 4. A message's `vis` epoch only grows (mod 2^24) over the slot's whole life; a receipt handle
//!    names the epoch it was issued under, so any later receive, delete or free expires it.
//! 5. Every claim carries its claimer's owner code (participant, generation) and is taken over
//!    only with proof of death ([`Env::participant_alive`] false, or a changed generation).
//!
//! # Sync points
//!
//! Every Release/Acquire (or SeqCst) pair the protocols rely on is tagged `SYNC POINT(<name>)` at
//! both ends; the table of writers and readers is in `ARCHITECTURE.md` ("Sync points"), and
//! `ci/sync-points.sh` checks that this list, that table and the tags name the same points.
//! The 24 names: `arena-ready`, `slot-free`, `node-link`, `group-publish`, `claim`,
//! `ready-check`, `doorbell`, `space-doorbell`, `expiry-publish`, `expiry-wheel`,
//! `dedup-publish`, `dedup-seqlock`, `dedup-msg`, `attempt-seqlock`, `settings-publish`,
//! `holder-record`, `registry-free`, `clock-rebase`, `peek-seqlock`, `quarantine-close`,
//! `reschedule`, `census`, `segment-publish`, `entry-reuse`.
#![cfg_attr(feature = "loom", allow(unreachable_pub, missing_docs))]

/// Stops the calling participant here when a loom model armed a crash for this step: the
/// function returns `Fault::Crashed` and the model thread stops forever, leaving the shared
/// state exactly as at this instruction. Compiled to nothing outside loom.
///
/// With the `failpoints` feature (tests only), the same points kill the calling process with
/// SIGKILL when [`crate::failpoint::arm`] counted down to them: a real process stops at exactly
/// that instruction boundary, and the multi-process tests show that the others recover.
macro_rules! crash_point {
    () => {
        #[cfg(shmfifo_loom)]
        {
            if $crate::protocol::crash::hit() {
                return Err($crate::protocol::Fault::Crashed);
            }
        }
        #[cfg(all(feature = "failpoints", not(shmfifo_loom)))]
        $crate::failpoint::hit();
    };
    ($ret:expr) => {
        #[cfg(shmfifo_loom)]
        {
            if $crate::protocol::crash::hit() {
                // `crash_point!(())` in a function that returns nothing.
                #[allow(clippy::unused_unit)]
                return $ret;
            }
        }
        #[cfg(all(feature = "failpoints", not(shmfifo_loom)))]
        $crate::failpoint::hit();
    };
}

/// Crash injection for loom models: a per-thread countdown of crash points.
#[cfg(shmfifo_loom)]
pub mod crash {
    crate::sync::thread_local! {
        static LEFT: core::cell::Cell<u32> = core::cell::Cell::new(u32::MAX);
    }
    /// Crash at the `k`-th crash point this thread reaches from now on (0 = the next one).
    pub fn arm(k: u32) {
        LEFT.with(|c| c.set(k));
    }
    /// Whether this thread has crashed (it stays crashed).
    pub fn hit() -> bool {
        LEFT.with(|c| {
            let v = c.get();
            if v == 0 {
                true
            } else {
                if v != u32::MAX {
                    c.set(v - 1);
                }
                false
            }
        })
    }
    /// Whether this thread has crashed, without counting a step.
    pub fn crashed() -> bool {
        LEFT.with(|c| c.get() == 0)
    }
}

pub mod accounting;
pub mod attempt;
pub mod claim;
pub mod clock;
pub mod dedup;
pub mod doorbell;
pub mod group;
pub mod grow;
pub mod handle;
#[cfg(any(test, feature = "loom"))]
pub mod heap;
pub mod inspect;
pub mod kept;
pub mod list;
pub mod live;
pub mod message;
pub mod pack;
pub mod pool;
pub mod quarantine;
pub mod ready;
pub mod receive;
pub mod recovery;
pub mod registry;
pub mod release;
pub mod ring;
pub mod segments;
pub mod send;
pub mod settings;
pub mod settle;
pub mod sweep;
pub mod timers;
pub mod times;
pub mod view;
pub mod words;

use crate::layout::{
    AttemptEntry, DedupEntry, GroupEntry, Header, MsgHeader, MsgWords, Participant, GROUP_KIND,
    MAX_PACK,
};
use crate::sync::{AtomicU32, AtomicU64};

/// Time, liveness and wake-ups, provided by the OS layer (or by loom mocks).
/// A futex word of the arena (a doorbell): what [`Env::wake`] wakes sleepers on. The API only
/// passes it to the system's futex calls; the protocol alone reads and writes it.
pub type WakeWord = AtomicU32;

pub trait Env {
    /// Milliseconds since the arena's time base (monotonic, shared by all processes).
    fn now_ms(&self) -> u64;
    /// Milliseconds since the Unix epoch (for timestamps shown to users).
    fn wall_ms(&self) -> u64;
    /// Whether the process registered in participant slot `index` still holds its liveness
    /// lock. `false` must be proof of death.
    fn participant_alive(&self, index: u32) -> bool;
    /// Wakes one receiver sleeping on `word`.
    fn wake(&self, word: &WakeWord);
    /// Wakes every process sleeping on `word` (by default, as [`Env::wake`] does).
    fn wake_all(&self, word: &WakeWord) {
        self.wake(word);
    }
    /// A fresh reading of [`Env::now_ms`]'s clock, for measuring how long a wait has lasted.
    /// `now_ms` may be read once per operation and reused (the API's [`Env`] does); this one
    /// never is.
    fn elapsed_ms(&self) -> u64 {
        self.now_ms()
    }
    /// Makes the next [`Env::now_ms`] read the clock again where the operation reuses one
    /// reading (the API's [`Env`]): a claim holder that learns, by a DIRTY request, that its
    /// group changed under it may have been held past a deadline its reading predates (a
    /// sweep found the group visible again), and re-checks at the time it acts.
    fn refresh_now(&self) {}
    /// Whether a size class whose slots are all taken may grow in this operation (layout 13).
    /// The API's first attempt says no: it reclaims first (messages past their retention, a
    /// dead producer's slots) and grows only when that freed nothing, so that a queue holding
    /// what its base file holds never grows for want of a sweep.
    fn may_grow(&self) -> bool {
        true
    }
}

/// A fault found in shared memory or a capacity limit reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// A value read from the arena is out of range or inconsistent.
    Corrupted(&'static str),
    /// No free slot in the size class with this index.
    ClassFull(usize),
    /// The group table has no room for another active group.
    GroupsFull,
    /// The file system refused the blocks of a new segment (this many bytes): the arena
    /// could not grow, though its size limit allows it.
    NoSpace(u64),
    /// This process could not map (or reserve) an added segment: a local failure with this
    /// `errno` (the address space, `vm.max_map_count`, a file descriptor), not damage in the
    /// arena. Nothing was changed; the operation may be retried.
    Mapping(i32),
    /// The receipt handle is stale (expired, superseded, deleted).
    Expired,
    /// The visibility change would pass 12 hours after the receive (H6).
    VisibilityCap,
    /// Time went beyond what the arena can represent.
    ClockRange,
    /// Every dedup table entry holds a key accepted within the interval.
    DedupFull,
    /// A live participant has been sending the same dedup key for too long (it may be
    /// stopped); the outcome is unknown.
    DedupBusy,
    /// A claim this operation needs is held by a live participant for longer than
    /// `group::CLAIM_WAIT_MS` (it may be stopped: SIGSTOP, a debugger, a paused container).
    /// Nothing was changed; the operation may be retried.
    Busy(&'static str),
    /// A loom model stopped this participant here (it "died").
    #[cfg(shmfifo_loom)]
    Crashed,
}

/// Whether `f` is a loom model's participant stopping forever (it must keep its state, not
/// carry on); never outside loom.
pub(crate) fn stopped(f: Fault) -> bool {
    #[cfg(shmfifo_loom)]
    {
        f == Fault::Crashed
    }
    #[cfg(not(shmfifo_loom))]
    {
        let _ = f;
        false
    }
}

/// Asks the CPU to start loading the cache line `off` bytes into `*at` (`off` below its
/// size). Only a hint: nothing is read into the program, nothing can fault; a no-op off x86_64
/// and under loom.
#[inline]
pub(crate) fn prefetch_line<T>(at: &T, off: usize) {
    #[cfg(all(target_arch = "x86_64", not(shmfifo_loom)))]
    {
        use core::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let p = (at as *const T).cast::<i8>().wrapping_add(off);
        // SAFETY: `_mm_prefetch` needs SSE, which every x86_64 CPU has (the build's baseline);
        // a prefetch reads nothing into the program and cannot fault, whatever the address
        // (here one inside `*at`, by the caller's `off`).
        #[allow(unsafe_code)]
        unsafe {
            _mm_prefetch::<_MM_HINT_T0>(p);
        }
    }
    #[cfg(not(all(target_arch = "x86_64", not(shmfifo_loom))))]
    {
        let _ = (at, off);
    }
}

/// Result type of the protocol layer.
pub type PResult<T> = Result<T, Fault>;

pub use words::{gstate, node, owner, pstate, recv, vis, Owner};

/// Bound on retry loops (each failed CAS means another participant progressed); reaching it
/// means corruption.
pub(crate) const MAX_STEPS: u32 = 1 << 24;

/// One size class of message slots.
#[derive(Debug, Clone, Copy)]
pub struct Class<'a> {
    /// Slot headers.
    pub headers: &'a [MsgHeader],
    /// Start of the payload array (`headers.len() * stride` bytes).
    pub payload: *mut u8,
    /// Bytes between consecutive payloads.
    pub stride: usize,
    /// Usable payload bytes per slot.
    pub cap: u32,
    /// Global index of the first slot: the class's index range is `base ..
    /// base + n × 2^growth` (room for every segment it may add).
    pub base: u32,
    /// The most segments the class may add (layout 13).
    pub growth: u32,
    /// The size of its index range, `slots_with(n, growth)` (≤ 2^31), kept so that locating a
    /// message index (several times a message) does not compute it.
    pub span: u32,
}

impl Class<'_> {
    /// Slots in the base file (segment 0); the class's `k`-th added segment holds
    /// `n × 2^(k-1)` more (a class that starts empty, layout 15: `2^(k-1)`).
    #[inline]
    pub fn n(&self) -> u32 {
        self.headers.len() as u32
    }

    /// The most slots the class may hold (its index range).
    #[inline]
    pub fn max_slots(&self) -> u64 {
        u64::from(self.span)
    }

    /// The slots the class holds once it has added `k` segments.
    #[inline]
    pub fn slots_with(&self, k: u32) -> u64 {
        crate::layout::slots_with(self.n(), k)
    }

    /// Bytes one slot takes: its header and its payload.
    pub fn slot_bytes(&self) -> u64 {
        (core::mem::size_of::<MsgHeader>() + self.stride) as u64
    }
}

/// Typed view of one arena. Every index read from shared memory is checked against it.
#[derive(Debug, Clone, Copy)]
pub struct Arena<'a> {
    /// The header.
    pub hdr: &'a Header,
    /// Participant registry.
    pub parts: &'a [Participant],
    /// Group table (length a power of two).
    pub groups: &'a [GroupEntry],
    /// Ready ring (length a power of two).
    pub ready: &'a [AtomicU64],
    /// Expiry wheel (see [`timers`]): `WHEEL_BUCKETS` bucket minima, then the buckets'
    /// bitmaps of `wheel_words(groups.len())` words each.
    pub timers: &'a [AtomicU64],
    /// Size classes (only the first `nclasses` are meaningful).
    pub classes: [Option<Class<'a>>; crate::layout::MAX_CLASSES],
    /// Number of classes.
    pub nclasses: usize,
    /// Each class's index range as `(base, span)` ([`Class::base`], [`Class::span`]; `(0, 0)`
    /// for a class that is absent), side by side so that locating an index (several times a
    /// message) reads one line, not a field of each class's description.
    pub ranges: [(u32, u32); crate::layout::MAX_CLASSES],
    /// Total message slots.
    pub total: u32,
    /// The base-file headers of the class whose index range starts at 0 (the smallest), so
    /// that locating one of them, most messages, is one compare ([`first_headers`]); empty if
    /// no class starts there.
    pub first: &'a [MsgHeader],
    /// Maximum active groups.
    pub max_groups: u64,
    /// Dedup table (empty with dedup off; else length a power of two).
    pub dedup: &'a [DedupEntry],
    /// Dedup key words, `dedup_key_words` per entry.
    pub dedup_keys: &'a [AtomicU64],
    /// Key words per dedup entry.
    pub dedup_key_words: usize,
    /// Attempt-id records (R11; empty: none, else length a power of two).
    pub attempts: &'a [AttemptEntry],
    /// The first slot of the first class that reuses the slot freed last (payload of at
    /// least `pool::HINT_MIN_CAP`; `total`: none): a free below it skips the hint in one
    /// compare.
    pub hint_from: u32,
    /// The segment directory (layout 13): per class, [`MAX_SEGMENTS`] file offsets.
    ///
    /// [`MAX_SEGMENTS`]: crate::layout::MAX_SEGMENTS
    pub directory: &'a [AtomicU64],
    /// This process's map of the added segments.
    pub segs: &'a segments::Segments,
    /// Bytes of the base file (segments lie at or after it).
    pub base_len: u64,
    /// The size limit (segments end at or before it).
    pub size_limit: u64,
    /// The most segments the dedup table may add (layout 14).
    pub dedup_growth: u32,
    /// The most segments the group table may add (layout 16).
    pub group_growth: u32,
    /// Message slots of the base file, all classes.
    pub base_slots: u64,
    /// Packs' directories (layout 22) beside the payloads, `MAX_PACK` entries a slot by
    /// global index: a heap arena's (tests, loom models), whose payloads are bytes that cannot
    /// hold atomics (unaligned; loom's atomics are not words); empty for a heap arena not
    /// made for packs, whose slots then hold none. `None` for a mapping, whose directories are
    /// in the payloads ([`Arena::members`]).
    pub pack_words: Option<&'a [MsgWords]>,
}

/// [`Arena::ranges`] of these classes.
pub fn ranges(classes: &[Option<Class<'_>>]) -> [(u32, u32); crate::layout::MAX_CLASSES] {
    let mut r = [(0, 0); crate::layout::MAX_CLASSES];
    for (r, c) in r.iter_mut().zip(classes) {
        if let Some(c) = c {
            *r = (c.base, c.span);
        }
    }
    r
}

/// [`Arena::first`] of these classes: the base-file headers of the one whose index range
/// starts at 0.
pub fn first_headers<'a>(classes: &[Option<Class<'a>>]) -> &'a [MsgHeader] {
    match classes.first() {
        Some(Some(c)) if c.base == 0 => c.headers,
        _ => &[],
    }
}

/// [`Arena::hint_from`] of these classes.
pub fn hint_from(classes: &[Option<Class<'_>>], total: u32) -> u32 {
    classes
        .iter()
        .flatten()
        .find(|c| c.cap >= pool::HINT_MIN_CAP)
        .map_or(total, |c| c.base)
}

impl<'a> Arena<'a> {
    /// Group entries now: the base table's and those of every published added table (layout
    /// 16).
    pub fn group_entries(&self) -> u64 {
        crate::layout::slots_with(self.groups.len() as u32, self.published(GROUP_KIND))
    }

    /// Where a scan of the group table goes on from group `g`, an index this process cannot
    /// look up: past the whole table (base or added) that holds `g`, since every entry of an
    /// added table that cannot be mapped (a scribbled directory entry) fails alike. A scan
    /// that stepped entry by entry would fail once an entry, over up to
    /// [`crate::layout::MAX_GROUP_RANGE`] of them, on every sweep and recovery.
    pub fn past_group_table(&self, g: u32) -> u64 {
        segments::past_segment(self.groups.len() as u32, u64::from(g))
    }

    /// The group index range, fixed at creation: every table the group table may add.
    pub fn group_range(&self) -> u32 {
        crate::layout::slots_with(self.groups.len() as u32, self.group_growth)
            .min(crate::layout::MAX_GROUP_RANGE) as u32
    }

    /// Group table `k` (0: the base file's; `k ≥ 1`: its `k`-th added table, mapped here the
    /// first time): the global index of its first entry, and its entries.
    pub fn group_table(&self, k: u32) -> PResult<(u32, &'a [GroupEntry])> {
        if k == 0 {
            return Ok((0, self.groups));
        }
        let first = crate::layout::segment_start(self.groups.len() as u32, k) as u32;
        Ok((first, self.group_segment(k)?.entries))
    }

    /// Every group entry of every published table, with its index (a table that cannot be
    /// mapped, a corrupted directory, is skipped).
    pub fn all_groups<'b>(&'b self) -> impl Iterator<Item = (u32, &'a GroupEntry)> + 'b {
        (0..=self.published(GROUP_KIND))
            .filter_map(move |k| self.group_table(k).ok())
            .flat_map(|(first, t)| {
                t.iter()
                    .enumerate()
                    .map(move |(j, e)| (first + j as u32, e))
            })
    }

    /// Slots of the participant registry.
    pub fn participant_slots(&self) -> u32 {
        self.parts.len() as u32
    }

    /// Entries of the dedup table now: the base file's and those of its published segments
    /// (0 without deduplication).
    pub fn dedup_entries(&self) -> u64 {
        (self.dedup.len() as u64) << self.published(crate::layout::DEDUP_KIND)
    }

    /// Entries of the base file's dedup table (0 without deduplication).
    pub fn dedup_base_entries(&self) -> u64 {
        self.dedup.len() as u64
    }

    /// Entries of the base file's group table.
    pub fn group_base_entries(&self) -> u64 {
        self.groups.len() as u64
    }

    /// Receive attempt records the arena keeps (0: none, `attempt_entries(0)`).
    pub fn attempt_entries(&self) -> u64 {
        self.attempts.len() as u64
    }

    /// `(class, slot)` of a global message index.
    #[inline]
    pub fn locate(&self, idx: u32) -> PResult<(usize, usize)> {
        if idx >= self.total {
            return Err(Fault::Corrupted("message index out of range"));
        }
        // From the smallest class up (small messages, the common case, stop at the first):
        // each class's range is `base .. base + n × 2^growth`, the next class's base its end.
        // (An index below a class's base wraps past its span, as every class's base + span is
        // at most `total` < 2^32, which `view::check` bounds by `MAX_SLOTS`; a class that is
        // absent, past `nclasses` too, has span 0.)
        for (c, &(base, span)) in self.ranges.iter().enumerate() {
            let off = idx.wrapping_sub(base);
            if off < span {
                return Ok((c, off as usize));
            }
        }
        Err(Fault::Corrupted("message index in no class"))
    }

    /// The header of message `idx`.
    #[inline]
    pub fn msg(&self, idx: u32) -> PResult<&'a MsgHeader> {
        // The first class's base file: its slots are global indices `0 .. first.len()`.
        if let Some(h) = self.first.get(idx as usize) {
            return Ok(h);
        }
        let (c, i) = self.locate(idx)?;
        Ok(self.slot(c, i as u64)?.0)
    }

    /// The class of message `idx`, its header and the start of its payload.
    pub fn class_of(&self, idx: u32) -> PResult<(Class<'a>, &'a MsgHeader, *mut u8)> {
        // The first class's base file (see `msg`): `first` is its headers, so it is present.
        if let (Some(h), Some(Some(cl))) = (self.first.get(idx as usize), self.classes.first()) {
            // `idx` indexes the base slots, so the payload lies inside the class's array.
            return Ok((*cl, h, cl.payload.wrapping_add(idx as usize * cl.stride)));
        }
        let (c, i) = self.locate(idx)?;
        let (h, p) = self.slot(c, i as u64)?;
        Ok((self.classes[c].ok_or(Fault::Corrupted("class"))?, h, p))
    }

    /// Every message slot of every class (its base file and its published segments), with
    /// its global index. A segment that cannot be mapped (a corrupted directory) is skipped.
    pub fn slots<'b>(&'b self) -> impl Iterator<Item = (u32, &'a MsgHeader)> + 'b {
        (0..self.nclasses).flat_map(move |c| self.slots_of(c))
    }

    /// Every message slot of class `c` (its base file and its published segments), with its
    /// global index. A segment that cannot be mapped (a corrupted directory) is skipped.
    pub fn slots_of<'b>(&'b self, c: usize) -> impl Iterator<Item = (u32, &'a MsgHeader)> + 'b {
        let cl = self.classes.get(c).copied().flatten();
        let n = cl.map_or(0, |cl| cl.n());
        let base = cl.map_or(0, |cl| cl.base);
        let segments = self.published(c);
        (0..=segments).flat_map(move |k| {
            let (first, len) = match k {
                0 if cl.is_some() => (0, u64::from(n)),
                0 => (0, 0),
                _ => {
                    let s = crate::layout::segment_slots(n, k);
                    let first = crate::layout::segment_start(n, k);
                    (first, if self.segment(c, k).is_ok() { s } else { 0 })
                }
            };
            (first..first + len)
                .filter_map(move |i| self.slot(c, i).ok().map(|(h, _)| (base + i as u32, h)))
        })
    }

    /// The payload of message `idx` (dead-letter source, dedup id, attributes, body) as its
    /// header words `lens` and `group_epoch0` (`ge`) size it, bounded by its class.
    ///
    /// # Safety
    /// While the slice lives, no participant may free or rewrite the message: the caller holds
    /// its group's claim, or the group is marked by its quarantine.
    pub unsafe fn payload(&self, idx: u32, lens: u64, ge: u64) -> PResult<&'a [u8]> {
        let (cl, _, p) = self.class_of(idx)?;
        let len = words::payload_len(lens, ge).min(cl.cap as usize);
        // Whoever takes the slice reads it (a copy out, or a borrowed body read in place).
        crate::sync::payload_touch(p, len, false);
        // SAFETY: `p` starts the payload of a slot of the class (`class_of` checked the index,
        // in the base file or a mapped segment) and `len <= cap <= stride`, so the bytes are
        // inside the payload, mapped as long as the arena; the caller keeps every writer away
        // from them while the slice lives.
        Ok(unsafe { core::slice::from_raw_parts(p, len) })
    }

    /// The first `k` entries of the directory of the pack in slot `idx` (layout 22,
    /// [`pack`]): in a mapping, the first `32 × k` bytes of the slot's payload; in a heap
    /// arena, the slot's entries in [`Arena::pack_words`]. A `k` past [`MAX_PACK`] or past the
    /// slot, or a slot past the arena, is corruption.
    ///
    /// # Safety
    /// In a mapping the entries are the payload's bytes, which a send fills by plain copies:
    /// while the slice lives, no participant of this process may copy into the slot's payload
    /// (the caller has the slot claimed, or holds its group's claim while the pack is linked,
    /// as [`Arena::payload`]'s callers do), or, for a reader without such a claim (a handle,
    /// recovery's release, a borrowed read, a replay's first pass, the ready check, the census,
    /// inspection), what it loads while one might is validated against the slot's words
    /// afterwards or is only a hint, and it writes nothing but by a CAS that expects a word no
    /// reused slot carries (invariant P): the sequence-lock discipline a peek's copies follow
    /// (SYNC POINT(peek-seqlock)), with its same caveat about a race with this process's own
    /// copies. Other processes' writes are the shared memory's (untrusted, as every word of
    /// the arena).
    pub unsafe fn members(&self, idx: u32, k: usize) -> PResult<&'a [MsgWords]> {
        if self.pack_words.is_some() {
            // SAFETY: the caller's contract; a heap arena's table needs no class.
            return unsafe { self.members_in(idx, k, None) };
        }
        let (cl, _, p) = self.class_of(idx)?;
        // SAFETY: the caller's contract, and `(cl, p)` are `class_of(idx)`'s.
        unsafe { self.members_in(idx, k, Some((&cl, p))) }
    }

    /// [`Arena::members`] where the caller has slot `idx`'s class and payload from
    /// [`Arena::class_of`] already (`None` only for a heap arena, whose table needs neither).
    ///
    /// # Safety
    /// As [`Arena::members`]', and `at` is `class_of(idx)`'s class and payload.
    #[inline]
    pub unsafe fn members_in(
        &self,
        idx: u32,
        k: usize,
        at: Option<(&Class<'a>, *mut u8)>,
    ) -> PResult<&'a [MsgWords]> {
        if k > MAX_PACK || idx >= self.total {
            return Err(Fault::Corrupted("pack directory"));
        }
        if let Some(table) = self.pack_words {
            let at = idx as usize * MAX_PACK;
            return table
                .get(at..at + k)
                .ok_or(Fault::Corrupted("a heap arena without packs"));
        }
        #[cfg(shmfifo_loom)]
        {
            // A loom model's arena is a heap arena: it always has a table (maybe empty).
            let _ = at;
            Err(Fault::Corrupted("no pack table"))
        }
        #[cfg(not(shmfifo_loom))]
        {
            let Some((cl, p)) = at else {
                return Err(Fault::Corrupted("pack directory"));
            };
            if k * core::mem::size_of::<MsgWords>() > cl.cap as usize
                || (p as usize) % core::mem::align_of::<MsgWords>() != 0
            {
                return Err(Fault::Corrupted("pack directory"));
            }
            // SAFETY: `p` starts the payload of slot `idx` of the class (the caller had it from
            // `class_of`, which checked the index, in the base file or a mapped segment), is
            // aligned for `MsgWords` (checked: a mapping's payloads start on lines, its strides
            // are whole lines), and the `k` entries, at most `cap <= stride` bytes (checked),
            // lie inside that payload, mapped as long as the arena. `MsgWords` is four atomics,
            // valid for any bit pattern and shared with other processes as every word of the
            // arena is; no plain copy of this process overlaps them while the slice lives (the
            // caller's contract).
            Ok(unsafe { core::slice::from_raw_parts(p as *const MsgWords, k) })
        }
    }

    /// The group entry `g`: in the base table, or in an added one (layout 16, mapped here the
    /// first time).
    #[inline]
    pub fn group(&self, g: u32) -> PResult<&'a GroupEntry> {
        match self.groups.get(g as usize) {
            Some(e) => Ok(e),
            None => self.group_in_segment(g),
        }
    }

    /// [`Arena::group`] past the base table.
    #[inline(never)]
    fn group_in_segment(&self, g: u32) -> PResult<&'a GroupEntry> {
        let n = self.groups.len() as u32;
        if n == 0 || g >= self.group_range() {
            return Err(Fault::Corrupted("group index out of range"));
        }
        let (k, j) = segments::segment_of(n, u64::from(g));
        let m = self.segment(GROUP_KIND, k)?;
        // SAFETY: `segment` mapped the whole segment, whose first array is its table's
        // `segment_slots(n, k)` group entries, for as long as the arena's segment map lives (at
        // least 'a); `j` is below that by `segment_of` (and `g` below the index range, so `k`
        // is a segment the table may add); entries are atomics, valid for any bit pattern.
        Ok(unsafe { &*(m.table as *const GroupEntry).add(j as usize) })
    }

    /// The link word of node `idx` (a message, or the sentinel of group `idx - total`).
    #[inline]
    pub fn link(&self, idx: u32) -> PResult<&'a AtomicU64> {
        if idx < self.total {
            Ok(&self.msg(idx)?.link)
        } else {
            Ok(&self.group(idx - self.total)?.sentinel)
        }
    }

    /// The last position of node `idx` in its group's list: a message's, a pack's last
    /// member's (layout 22), or the sentinel's (`GroupEntry::sentinel_pos`, layout 19). Relaxed: callers read it between an Acquire
    /// load that published it (the node's link, or `tail`/`head`) and a check that fails if
    /// the node changed incarnation meanwhile.
    #[inline]
    pub fn position(&self, idx: u32) -> PResult<u64> {
        if idx < self.total {
            // A pack (layout 22) takes its members' positions: its first is `pos`, its last
            // `pos + k - 1`. Its `lens` word is written with `pos` and stable while it is.
            let m = self.msg(idx)?;
            let span = words::unit_span(m.own.lens.load(crate::sync::Ordering::Relaxed));
            Ok(m.pos
                .load(crate::sync::Ordering::Relaxed)
                .wrapping_add(span - 1))
        } else {
            Ok(self
                .group(idx - self.total)?
                .sentinel_pos
                .load(crate::sync::Ordering::Relaxed))
        }
    }

    /// Bound on walking a group list: longer than the number of nodes means a cycle, which
    /// only corruption can make.
    pub fn steps(&self) -> u32 {
        // A list holds messages and at most one sentinel (its own group's): the group table's
        // size (not its index range, layout 16) is room enough, as before the table grew.
        self.total
            .saturating_add(self.groups.len() as u32)
            .saturating_add(64)
    }

    /// Node index of group `g`'s sentinel.
    pub fn sentinel_index(&self, g: u32) -> u32 {
        self.total + g
    }

    /// Whether the owner code names a participant proven dead.
    pub fn owner_dead(&self, env: &dyn Env, code: Owner) -> bool {
        let (index, gen) = owner::decode(code);
        let Some(p) = self.parts.get(index as usize) else {
            // A code naming no slot can only come from corruption; nobody can hold it.
            return true;
        };
        // Acquire: pairs with the registration's Release store, which happens before the
        // owner code appears in any claim (claims are taken with AcqRel, codes read with
        // Acquire), so the registry we read is at least as new as the code. A newer
        // generation in the registry proves the owner gone; an older one (the code names a
        // generation never registered) can only come from corruption, and nobody can hold
        // it: a hostile word must not keep a claim forever (one bad word).
        let st = p.state.load(crate::sync::Ordering::Acquire);
        let reg = pstate::gen(st) & ((1 << owner::GEN_BITS) - 1);
        if reg != gen {
            return true;
        }
        if pstate::status(st) != pstate::ALIVE {
            return true;
        }
        !env.participant_alive(index)
    }
}
