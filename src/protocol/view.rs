//! From bytes to a typed arena: header validation and the regions of a mapping.
//!
//! The header is untrusted input (any process with the file can write it): every count, size
//! and offset is range-checked here, and the regions are laid out by [`Geometry::offsets`]
//! from the checked counts only, so a view never reaches past the checked length.

use super::clock;
use super::segments::Segments;
use super::{Arena, Class};
use crate::config::{
    DedupOverflow, Deduplication, QueueConfig, MAX_ATTEMPT_ENTRIES, MAX_DEDUP_ENTRIES,
    MAX_DEDUP_INTERVAL, MAX_GROUPS, MAX_PARTICIPANTS, MAX_SLOTS,
};
use crate::layout::{
    wheel_words, AttemptEntry, DedupEntry, Geometry, GroupEntry, Header, MsgHeader, Participant,
    MAGIC, MAX_CLASSES, MAX_KINDS, MAX_SEGMENTS, STATE_INITIALISING, STATE_READY, WHEEL_BUCKETS,
};
use crate::sync::{AtomicU64, Ordering};

/// Id of the keyed hash used for group ids, dedup keys and attempt ids (SipHash-2-4).
pub const HASH_SIPHASH24: u64 = 1;

/// Why a header was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// The magic number is not shmfifo's.
    NotAnArena,
    /// Another layout version.
    Version(u64),
    /// Its creator has not published it yet.
    NotReady,
    /// The file is shorter than the header says.
    Truncated {
        /// Bytes the header's geometry needs.
        expected: u64,
        /// Bytes mapped.
        found: u64,
    },
    /// A value out of range.
    Corrupted(&'static str),
}

/// A validated header: what a view and a queue handle need from it.
#[derive(Debug, Clone)]
pub struct Checked {
    /// Region sizes.
    pub geometry: Geometry,
    /// Dedup mode.
    pub dedup: Deduplication,
    /// `FifoThroughputLimit=perMessageGroupId` (dedup mode 3: message-group scope with it).
    pub per_group_throughput: bool,
    /// Dedup interval, ms.
    pub dedup_interval_ms: u64,
    /// Arena time is the test clock (`Header::test_now`).
    pub test_clock: bool,
    /// Bodies are any bytes (`body_mode` 1), not text.
    pub binary: bool,
}

pub use crate::layout::{Geometry as Shape, LAYOUT_VERSION, MAX_REDRIVE_PATH};

/// The shortest file that can hold an arena (its header page).
pub const MIN_LEN: u64 = crate::layout::PAGE;

/// Bytes of a file's beginning that [`is_unfinished`] reads.
pub const HEAD_LEN: usize = 0x160;

/// Whether the first 8 bytes of a file are shmfifo's magic number.
pub fn has_magic(first: [u8; 8]) -> bool {
    u64::from_le_bytes(first) == MAGIC
}

/// Whether `head`, the first [`HEAD_LEN`] bytes of a file read with `read(2)` (not mapped), are
/// an arena of this layout whose creator never finished it (`state` still initialising).
pub fn is_unfinished(head: &[u8]) -> bool {
    let word = |at: usize| {
        head.get(at..at + 8)
            .and_then(|b| b.try_into().ok())
            .map_or(0, u64::from_le_bytes)
    };
    head.len() >= HEAD_LEN
        && word(0) == MAGIC
        && word(8) == LAYOUT_VERSION
        && word(core::mem::offset_of!(Header, state)) == STATE_INITIALISING
}

/// [`check`] on the header at `base`.
///
/// # Safety
///
/// `base` is page-aligned and maps at least [`MIN_LEN`] readable bytes, which stay mapped
/// during the call.
pub unsafe fn check_at(base: *const u8, len: u64) -> Result<Checked, Refused> {
    // SAFETY: the caller maps a page at `base`; `Header` fits in a page and is made of atomics,
    // valid for any bit pattern.
    let hdr = unsafe { &*(base as *const Header) };
    check(hdr, len)
}

/// [`initialise`] on the mapping at `base`.
///
/// # Safety
///
/// `base` is a fresh, zero-filled, page-aligned, writable mapping of `total` bytes that no
/// other process can reach yet.
pub unsafe fn initialise_at(
    base: *mut u8,
    cfg: &QueueConfig,
    g: &Geometry,
    total: u64,
    redrive: Option<(u32, &[u8])>,
    fresh: &Fresh,
) {
    // SAFETY: the caller maps at least a page at `base`; `Header` is made of atomics, valid for
    // the all-zero bit pattern, and fits in its first page.
    let hdr = unsafe { &*(base as *const Header) };
    initialise(hdr, cfg, g, total, redrive, fresh);
}

/// Validates the header of a mapping of `len` bytes (at least one page).
pub fn check(hdr: &Header, len: u64) -> Result<Checked, Refused> {
    use Refused::Corrupted as corrupt;
    let r = Ordering::Relaxed; // after the Acquire load of `state` below
    if hdr.magic.load(r) != MAGIC {
        return Err(Refused::NotAnArena);
    }
    // SYNC POINT(arena-ready): Acquire pairs with the creator's Release store; the state is
    // read before the other fields, so a creator still at work is `NotReady`, never a torn
    // header (a loom model checks it).
    let state = hdr.state.load(Ordering::Acquire);
    let found = hdr.layout_version.load(r);
    // Another build's arena says so whatever its state word (which may lie elsewhere in its
    // layout); a creator at work shows 0 or our version there, never another number.
    if found != 0 && found != LAYOUT_VERSION {
        return Err(Refused::Version(found));
    }
    if state == STATE_INITIALISING {
        return Err(Refused::NotReady);
    }
    if found != LAYOUT_VERSION {
        return Err(Refused::Version(found));
    }
    if state != STATE_READY {
        return Err(corrupt("unknown arena state word"));
    }
    if hdr.hash_alg.load(r) != HASH_SIPHASH24 {
        return Err(corrupt("unknown hash algorithm"));
    }
    let participants = hdr.participants.load(r);
    let max_groups = hdr.max_groups.load(r);
    let group_slots = hdr.group_slots.load(r);
    let ready_slots = hdr.ready_slots.load(r);
    let nclasses = hdr.class_count.load(r);
    if participants == 0 || participants > u64::from(MAX_PARTICIPANTS) {
        return Err(corrupt("participant count out of range"));
    }
    if max_groups == 0 || max_groups > u64::from(MAX_GROUPS) {
        return Err(corrupt("max groups out of range"));
    }
    if !group_slots.is_power_of_two() || group_slots < max_groups || group_slots > 1 << 24 {
        return Err(corrupt("group table size out of range"));
    }
    if ready_slots != group_slots {
        return Err(corrupt("ready ring size out of range"));
    }
    if nclasses == 0 || nclasses > MAX_CLASSES as u64 {
        return Err(corrupt("size class count out of range"));
    }
    let dedup_mode = hdr.dedup_mode.load(r);
    let dedup_slots = hdr.dedup_slots.load(r);
    let dedup_interval_ms = hdr.dedup_interval_ms.load(r);
    let (dedup, per_group_throughput) = match dedup_mode {
        0 => (Deduplication::Off, false),
        1 => (Deduplication::Queue, false),
        2 => (Deduplication::MessageGroup, false),
        3 => (Deduplication::MessageGroup, true),
        _ => return Err(corrupt("unknown dedup mode")),
    };
    let dedup_key_words = crate::layout::DEDUP_KEY_WORDS;
    let max_interval = MAX_DEDUP_INTERVAL.as_millis() as u64;
    let dedup_ok = if dedup_mode == 0 {
        dedup_slots == 0
    } else {
        dedup_slots.is_power_of_two()
            && dedup_slots <= u64::from(MAX_DEDUP_ENTRIES.next_power_of_two())
            && (1..=max_interval).contains(&dedup_interval_ms)
    };
    if !dedup_ok {
        return Err(corrupt("dedup table settings out of range"));
    }
    let attempt_slots = hdr.attempt_slots.load(r);
    if attempt_slots != 0
        && (!attempt_slots.is_power_of_two() || attempt_slots > u64::from(MAX_ATTEMPT_ENTRIES))
    {
        return Err(corrupt("attempt record count out of range"));
    }
    let mut classes = Vec::new();
    for k in 0..nclasses as usize {
        let cap = hdr.class_payload[k].load(r);
        let n = hdr.class_slots[k].load(r);
        // `n` 0: a class that starts empty and takes its first segment on demand (layout 15).
        if cap == 0 || cap > u64::from(u32::MAX) || n > MAX_SLOTS {
            return Err(corrupt("size class out of range"));
        }
        classes.push((cap as u32, n as u32));
    }
    let size_limit = hdr.size_limit.load(r);
    let mut class_growth = Vec::new();
    for k in 0..nclasses as usize {
        let most = hdr.class_growth[k].load(r);
        if most > MAX_SEGMENTS as u64 {
            return Err(corrupt("a size class's growth out of range"));
        }
        class_growth.push(most as u32);
    }
    let dedup_growth = hdr.dedup_growth.load(r);
    if dedup_growth > MAX_SEGMENTS as u64
        || (dedup_growth > 0 && dedup_slots << dedup_growth > MAX_SLOTS)
    {
        return Err(corrupt("the dedup table's growth out of range"));
    }
    let group_growth = hdr.group_growth.load(r);
    if group_growth > MAX_SEGMENTS as u64
        || (group_growth > 0 && group_slots << group_growth > crate::layout::MAX_GROUP_RANGE)
    {
        return Err(corrupt("the group table's growth out of range"));
    }
    let geometry = Geometry {
        participants: participants as u32,
        max_groups: max_groups as u32,
        group_slots: group_slots as u32,
        ready_slots: ready_slots as u32,
        classes,
        dedup_slots: dedup_slots as u32,
        dedup_key_words,
        attempt_slots: attempt_slots as u32,
        class_growth,
        size_limit,
        dedup_growth: dedup_growth as u32,
        group_growth: group_growth as u32,
    };
    if geometry.total_slots() > MAX_SLOTS || geometry.index_slots() > MAX_SLOTS {
        return Err(corrupt("too many message slots"));
    }
    let Some(o) = geometry.offsets() else {
        return Err(corrupt("geometry overflows"));
    };
    if hdr.total_size.load(r) != o.total {
        return Err(corrupt("total size does not match the geometry"));
    }
    if size_limit != 0 && size_limit < o.total {
        return Err(corrupt("size limit below the base file"));
    }
    // The growth fields fix every index range: they must be what the size limit gives, or
    // two processes could disagree on which index names which slot.
    let mut derived = geometry.clone();
    derived.size_limit = size_limit.max(o.total);
    derived.derive_growth(o.total);
    if derived.class_growth != geometry.class_growth
        || derived.dedup_growth != geometry.dedup_growth
        || derived.group_growth != geometry.group_growth
    {
        return Err(corrupt("growth settings do not match the size limit"));
    }
    if (0..geometry.classes.len()).any(|k| geometry.max_slots(k) == 0) {
        return Err(corrupt("a size class that can never hold a slot"));
    }
    if len < o.total {
        return Err(Refused::Truncated {
            expected: o.total,
            found: len,
        });
    }
    // `max_message_size` and `receive_wait_ms` are live settings (`set_attributes`), clamped
    // where they are read, as the other live settings are: a bad value is not a bad arena.
    let test_clock = match hdr.clock_mode.load(r) {
        0 => false,
        1 => true,
        _ => return Err(corrupt("unknown clock mode")),
    };
    let binary = match hdr.body_mode.load(r) {
        0 => false,
        1 => true,
        _ => return Err(corrupt("unknown body mode")),
    };
    Ok(Checked {
        geometry,
        dedup,
        per_group_throughput,
        dedup_interval_ms,
        test_clock,
        binary,
    })
}

/// The `n` elements of type `T` at byte offset `off` of the mapping at `base`.
///
/// # Safety
/// `off + n * size_of::<T>()` must lie inside a mapping that outlives the returned slice,
/// `base + off` must be aligned for `T`, and `T` must be valid for any bit pattern (atomics).
unsafe fn region<'a, T>(base: *mut u8, off: u64, n: usize) -> &'a [T] {
    // SAFETY: guaranteed by the caller.
    unsafe { core::slice::from_raw_parts(base.add(off as usize) as *const T, n) }
}

/// The typed view of a mapping whose header [`check`] accepted.
///
/// # Safety
/// `base` must be the start of a page-aligned mapping of at least `check`'s `len` bytes whose
/// header produced `c`, and the mapping must outlive `'a`.
pub unsafe fn view<'a>(base: *mut u8, c: &Checked, segs: &'a Segments) -> Arena<'a> {
    let g = &c.geometry;
    // `check` accepted `offsets()` and a length of at least `o.total`.
    let o = g.offsets().expect("checked geometry");
    #[cfg(all(feature = "lines", not(shmfifo_loom)))]
    {
        // SAFETY: `base` maps a header `check` accepted (the caller's contract).
        let hdr = unsafe { &*(base as *const Header) };
        crate::lines::register_arena(base, hdr.nonce.load(Ordering::Relaxed), &o, g);
    }
    // Offsets come from `Geometry::offsets`, which lays regions out disjointly, aligned (128 B
    // for tables, 64 B for headers) and inside `o.total`, at most the mapped length; the
    // element types are atomics, valid for any bit pattern; the mapping outlives `'a`.
    // SAFETY: as just said, for each region below.
    let (hdr, directory, parts, groups, ready, timers, dedup, dedup_keys, attempts) = unsafe {
        (
            &*(base as *const Header),
            region::<AtomicU64>(base, o.segments, MAX_KINDS * MAX_SEGMENTS),
            region::<Participant>(base, o.participants, g.participants as usize),
            region::<GroupEntry>(base, o.groups, g.group_slots as usize),
            region::<AtomicU64>(base, o.ready, g.ready_slots as usize),
            region::<AtomicU64>(
                base,
                o.timers,
                WHEEL_BUCKETS * (1 + wheel_words(g.group_slots)),
            ),
            region::<DedupEntry>(base, o.dedup, g.dedup_slots as usize),
            region::<AtomicU64>(
                base,
                o.dedup_keys,
                g.dedup_slots as usize * g.dedup_key_words as usize,
            ),
            region::<AttemptEntry>(base, o.attempts, g.attempt_slots as usize),
        )
    };
    let mut classes = [None; MAX_CLASSES];
    let mut first = 0u32;
    for (k, &(cap, n)) in g.classes.iter().enumerate() {
        let (ho, po, stride) = o.classes[k];
        classes[k] = Some(Class {
            // SAFETY: as above.
            headers: unsafe { region::<MsgHeader>(base, ho, n as usize) },
            // SAFETY: inside the mapping, as above.
            payload: unsafe { base.add(po as usize) },
            stride: stride as usize,
            cap,
            base: first,
            growth: g.growth(k),
            // `check` bounds every class's index range by `MAX_SLOTS` (< 2^31).
            span: g.max_slots(k) as u32,
        });
        // `check` bounds the whole index range (every class at its limit) by `MAX_SLOTS`.
        first += g.max_slots(k) as u32;
    }
    Arena {
        hdr,
        parts,
        groups,
        ready,
        timers,
        classes,
        ranges: super::ranges(&classes),
        nclasses: g.classes.len(),
        total: first,
        first: super::first_headers(&classes),
        max_groups: u64::from(g.max_groups),
        dedup,
        dedup_keys,
        dedup_key_words: g.dedup_key_words as usize,
        attempts,
        hint_from: super::hint_from(&classes, first),
        directory,
        segs,
        base_len: o.total,
        size_limit: g.size_limit.max(o.total),
        dedup_growth: g.dedup_growth,
        group_growth: g.group_growth,
        base_slots: g.total_slots(),
        // A mapping's packs keep their directories in their payloads.
        pack_words: None,
    }
}

/// What a new arena takes from the OS: its keys, its nonce, the boot and the clocks.
#[derive(Debug, Clone, Copy)]
pub struct Fresh {
    /// The SipHash key for group ids, dedup keys and attempt ids.
    pub hash_keys: (u64, u64),
    /// The arena nonce (in message ids and receipt handles).
    pub nonce: u64,
    /// The kernel boot id.
    pub boot: [u64; 2],
    /// Wall clock now, ms since the Unix epoch.
    pub wall_ms: u64,
    /// `CLOCK_MONOTONIC` now, ms.
    pub mono_ms: u64,
}

fn ms_of(d: core::time::Duration) -> u64 {
    d.as_millis().min(u128::from(u64::MAX)) as u64
}

/// Writes a fresh header for geometry `g` (an arena of `total` bytes, zero-filled, that no other
/// process can reach yet) and publishes it: the last store is `state = READY` with Release
/// (SYNC POINT(arena-ready)), so an opener that reads READY reads every field. A creator that
/// stops or dies before it leaves a file that opens as `NotReady` (and is never named: see
/// `Queue::create_at`).
pub fn initialise(
    hdr: &Header,
    cfg: &QueueConfig,
    g: &Geometry,
    total: u64,
    redrive: Option<(u32, &[u8])>,
    fresh: &Fresh,
) {
    let r = Ordering::Relaxed; // all published by the Release store of `state` below
    hdr.magic.store(MAGIC, r);
    hdr.layout_version.store(LAYOUT_VERSION, r);
    hdr.total_size.store(total, r);
    hdr.hash_alg.store(HASH_SIPHASH24, r);
    hdr.hash_k0.store(fresh.hash_keys.0, r);
    hdr.hash_k1.store(fresh.hash_keys.1, r);
    hdr.nonce.store(fresh.nonce, r);
    hdr.boot_id[0].store(fresh.boot[0], r);
    hdr.boot_id[1].store(fresh.boot[1], r);
    hdr.created_wall_ms.store(fresh.wall_ms, r);
    hdr.clock.store(
        clock::clock_word(clock::boot_tag(fresh.boot), fresh.mono_ms),
        r,
    );
    hdr.release_on_death
        .store(u64::from(cfg.release_on_death), r);
    hdr.participants.store(u64::from(g.participants), r);
    hdr.max_groups.store(u64::from(g.max_groups), r);
    hdr.group_slots.store(u64::from(g.group_slots), r);
    hdr.ready_slots.store(u64::from(g.ready_slots), r);
    hdr.class_count.store(g.classes.len() as u64, r);
    for (k, &(cap, n)) in g.classes.iter().enumerate() {
        hdr.class_payload[k].store(u64::from(cap), r);
        hdr.class_slots[k].store(u64::from(n), r);
    }
    hdr.max_message_size.store(u64::from(cfg.message_size()), r);
    hdr.visibility_timeout_ms
        .store(ms_of(cfg.visibility_timeout), r);
    hdr.delay_ms.store(ms_of(cfg.delay), r);
    hdr.retention_ms
        .store(ms_of(cfg.message_retention_period), r);
    hdr.max_in_flight.store(u64::from(cfg.max_in_flight), r);
    if let Some((max, path)) = redrive {
        // Buffer 0 is the current one (`current` is 0): published with the state word below.
        let b = &hdr.redrive.buffers[0];
        b.max_receive_count.store(u64::from(max), r);
        b.path_len.store(path.len() as u64, r);
        for (k, chunk) in path.chunks(8).enumerate() {
            b.path[k].store(super::words::text_word(chunk), r);
        }
    }
    hdr.receive_wait_ms
        .store(ms_of(cfg.receive_message_wait_time), r);
    hdr.dedup_mode.store(
        match (cfg.deduplication, cfg.per_message_group_throughput) {
            (Deduplication::Off, _) => 0,
            (Deduplication::Queue, _) => 1,
            (Deduplication::MessageGroup, false) => 2,
            (Deduplication::MessageGroup, true) => 3,
        },
        r,
    );
    hdr.dedup_interval_ms
        .store(ms_of(cfg.deduplication_interval), r);
    hdr.dedup_slots.store(u64::from(g.dedup_slots), r);
    hdr.mode.store(u64::from(cfg.mode), r);
    hdr.dedup_overflow.store(
        match cfg.dedup_overflow {
            DedupOverflow::ShortenWindow => 0,
            DedupOverflow::Refuse => 1,
        },
        r,
    );
    hdr.content_based_dedup
        .store(u64::from(cfg.content_based_deduplication), r);
    hdr.next_expiry.0.store(u64::MAX, r);
    hdr.clock_mode.store(u64::from(cfg.test_clock), r);
    hdr.body_mode.store(
        u64::from(cfg.body_mode == crate::config::BodyMode::Binary),
        r,
    );
    hdr.test_now.0.store(1, r);
    hdr.attempt_slots.store(u64::from(g.attempt_slots), r);
    for k in 0..g.classes.len() {
        hdr.class_growth[k].store(u64::from(g.growth(k)), r);
    }
    hdr.size_limit.store(g.size_limit.max(total), r);
    hdr.dedup_growth.store(u64::from(g.dedup_growth), r);
    hdr.group_growth.store(u64::from(g.group_growth), r);
    // SYNC POINT(arena-ready): Release publishes every store above to `open`'s Acquire load.
    hdr.state.store(STATE_READY, Ordering::Release);
}
