//! Where a slot of an added segment lives in this process (layout 13): the process-local map
//! from `(class, segment)` to the segment's headers and payloads, filled the first time a
//! participant meets one of its slots.
//!
//! A size class's slots are numbered `0 ..` within the class: the base file holds the first
//! `n` (segment 0), the class's `k`-th added segment the next `n × 2^(k-1)`, so slot `i ≥ n`
//! lies in segment `k = ⌊log2(i / n)⌋ + 1` at `i - n × 2^(k-1)`: arithmetic, no table walk. A
//! slot of segment 0 never reads anything here. A slot of an added segment reads this
//! process's pointer for it; only the first time (a null pointer) does it read the shared
//! directory: the class's published count (Acquire, SYNC POINT(segment-publish)), then the
//! segment's offset, checked against the base file and the size limit, before it maps the
//! segment. A segment that is not published is never mapped, so no participant touches a page
//! whose blocks were not reserved (no SIGBUS), and an index beyond the published segments is
//! corruption (an error).

use crate::sync::local::{AtomicPtr, Ordering as StdOrdering};
use core::fmt;

use super::{Arena, Fault, PResult};
use crate::layout::{
    dedup_segment_bytes, group_segment_bytes, group_segment_words, segment_bytes, segment_slots,
    slots_with, wheel_words_of, DedupEntry, GroupEntry, MsgHeader, DEDUP_ENTRY_SIZE, DEDUP_KIND,
    GROUP_ENTRY_SIZE, GROUP_KIND, GROUP_RING_OFFSET_WORDS, MAX_KINDS, MAX_SEGMENTS,
    MSG_HEADER_SIZE, PAGE, WHEEL_BUCKETS,
};
use crate::sync::Ordering;
use crate::sync::{AtomicU32, AtomicU64};

/// What a segment holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// `slots` message headers, then their payloads `stride` bytes apart.
    Slots {
        /// Slots.
        slots: u64,
        /// Bytes between payloads.
        stride: usize,
    },
    /// `entries` dedup entries, then their key words, `key_words` each.
    Dedup {
        /// Entries.
        entries: u64,
        /// Key words per entry.
        key_words: usize,
    },
    /// `entries` group entries, then their expiry-wheel bitmaps (layout 16).
    Groups {
        /// Entries.
        entries: u64,
    },
}

impl Layout {
    /// Bytes of the segment's first array (slot headers, dedup entries, group entries): the
    /// second (payloads, key words, bitmaps) starts there.
    pub fn table_bytes(&self) -> u64 {
        match *self {
            Layout::Slots { slots, .. } => slots * MSG_HEADER_SIZE as u64,
            Layout::Dedup { entries, .. } => entries * DEDUP_ENTRY_SIZE as u64,
            Layout::Groups { entries } => entries * GROUP_ENTRY_SIZE as u64,
        }
    }
}

/// Where one mapped segment's two arrays start: slot headers and payloads, or dedup entries
/// and key words.
#[derive(Debug, Clone, Copy)]
pub struct Mapped {
    /// Its slot headers, or its dedup entries.
    pub table: *const u8,
    /// Its payloads, or its key words.
    pub data: *mut u8,
}

impl Mapped {
    /// The slot headers of a `Slots` segment.
    pub fn headers(&self) -> *const MsgHeader {
        self.table as *const MsgHeader
    }
}

/// The file behind an arena's added segments: reserves their blocks (a grower) and maps them
/// (every participant). Implemented over the arena's file by the API, over the heap by
/// `heap::HeapArena`.
pub trait SegmentFile: Send + Sync + fmt::Debug {
    /// Makes `len` bytes at `offset` of the file exist (`fallocate`): afterwards a mapping of
    /// them can never fault for want of space. [`Fault::NoSpace`] if the file system has no
    /// room. Reserving a range again is harmless (a grower that died after reserving is
    /// redone by the next).
    fn reserve(&self, offset: u64, len: u64, layout: Layout) -> PResult<()>;

    /// Maps the segment laid out as `layout` found at `offset` (`len` bytes, reserved and
    /// published). The mapping lasts as long as `self`.
    fn map(&self, offset: u64, len: u64, layout: Layout) -> PResult<Mapped>;

    /// The furthest file offset this process has mapped a segment to (0: none): a participant
    /// that checks its file for truncation compares the file's length with it.
    fn mapped_end(&self) -> u64 {
        0
    }

    /// Writes the file's pages back to its storage and waits (`fdatasync`): every segment's,
    /// mapped by this process or not (a segment's pages are the file's, whoever wrote them).
    /// Nothing to write for an arena without a file.
    fn sync(&self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<T: SegmentFile> SegmentFile for std::sync::Arc<T> {
    fn reserve(&self, offset: u64, len: u64, layout: Layout) -> PResult<()> {
        (**self).reserve(offset, len, layout)
    }

    fn map(&self, offset: u64, len: u64, layout: Layout) -> PResult<Mapped> {
        (**self).map(offset, len, layout)
    }

    fn mapped_end(&self) -> u64 {
        (**self).mapped_end()
    }

    fn sync(&self) -> std::io::Result<()> {
        (**self).sync()
    }
}

/// One process's map of the added segments of one arena.
pub struct Segments {
    table: [[AtomicPtr<u8>; MAX_SEGMENTS]; MAX_KINDS],
    data: [[AtomicPtr<u8>; MAX_SEGMENTS]; MAX_KINDS],
    /// Per kind, the most segments this process knows to be published (it mapped one that
    /// far, or read the count): a lower bound of the shared count, read without touching it.
    /// A facade atomic, not a local one: a thread that reads it uses segments another thread
    /// learnt of, so it carries that thread's Acquire of the count (loom checks it).
    known: [AtomicU32; MAX_KINDS],
    /// `[grows:32][slots:32]`: the message slots of every class as this process last counted
    /// them, and the arena's growth count when it did (see [`Arena::slots_counted`]).
    counted: crate::sync::local::AtomicU64,
    /// Which ready ring a pop of a grown group table tries first (layout 16): each pop starts
    /// at the next, so the tables' rings are served in turn.
    turn: crate::sync::local::AtomicU64,
    /// Per ready ring (the base table's, then each added table's), this process's pop cursor
    /// (layout 21): where its next pop looks first when it is past the shared `head`, which
    /// moves once a stride (`ring::Ring`).
    cursors: [crate::sync::local::AtomicU64; MAX_SEGMENTS + 1],
    /// Per ready ring, this process's push cursor (since stop 53): where its next push looks
    /// first when it is past the shared `tail`, which moves once a stride.
    push_cursors: [crate::sync::local::AtomicU64; MAX_SEGMENTS + 1],
    /// Whether this process's last receive took nothing (1) or something (0): its next one
    /// looks first (`receive::idle_after_empty`).
    polled_empty: crate::sync::local::AtomicU64,
    /// The group (+ 1; 0: none) whose hint this process's last receive served in place and
    /// left queued as a placeholder (layout 27): its next receive reads that group's claim
    /// word first, and pops (rather than serving in place) where the placeholder is still
    /// `STALE` (`receive::receive`).
    placeholder: crate::sync::local::AtomicU64,
    /// Bit `c`: kind `c` is at its growth limit (a grower found so, [`grow`]). Both limits
    /// (the kind's segment count, the arena's size limit) are fixed at creation and the file
    /// only grows, so the bit is set once and stays true; it spares a producer at the limit
    /// the grow claim on every attempt.
    ///
    /// [`grow`]: super::grow::grow
    at_limit: crate::sync::local::AtomicU64,
    file: Box<dyn SegmentFile>,
}

impl fmt::Debug for Segments {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Segments")
            .field("file", &self.file)
            .finish_non_exhaustive()
    }
}

impl Segments {
    /// This process's pop cursor of ready ring `k` (0: the base table's), if there is such a
    /// ring.
    pub fn ring_cursor(&self, k: usize) -> Option<&crate::sync::local::AtomicU64> {
        self.cursors.get(k)
    }

    /// This process's push cursor of ready ring `k` (0: the base table's), if there is such a
    /// ring.
    pub fn ring_push_cursor(&self, k: usize) -> Option<&crate::sync::local::AtomicU64> {
        self.push_cursors.get(k)
    }

    /// A map with nothing mapped yet, over `file`.
    pub fn new(file: Box<dyn SegmentFile>) -> Self {
        Segments {
            table: core::array::from_fn(|_| {
                core::array::from_fn(|_| AtomicPtr::new(core::ptr::null_mut()))
            }),
            data: core::array::from_fn(|_| {
                core::array::from_fn(|_| AtomicPtr::new(core::ptr::null_mut()))
            }),
            known: core::array::from_fn(|_| AtomicU32::new(0)),
            counted: crate::sync::local::AtomicU64::new(0),
            turn: crate::sync::local::AtomicU64::new(0),
            cursors: core::array::from_fn(|_| crate::sync::local::AtomicU64::new(0)),
            push_cursors: core::array::from_fn(|_| crate::sync::local::AtomicU64::new(0)),
            polled_empty: crate::sync::local::AtomicU64::new(0),
            placeholder: crate::sync::local::AtomicU64::new(0),
            at_limit: crate::sync::local::AtomicU64::new(0),
            file,
        }
    }

    /// Notes that kind `c` has at least `k` published segments.
    fn note(&self, c: usize, k: u32) {
        // Release: the caller read the count with Acquire (or mapped after it) before; a
        // thread that reads `k` here with Acquire then sees the segments' blocks as the
        // grower published them (SYNC POINT(segment-publish), carried on).
        self.known[c].fetch_max(k, Ordering::Release);
    }

    /// The next turn of the ready rings' rotation (process-local; a plain load and store: two
    /// threads that take the same turn only start at the same ring).
    pub fn next_turn(&self) -> u64 {
        let t = self.turn.load(StdOrdering::Relaxed);
        self.turn.store(t.wrapping_add(1), StdOrdering::Relaxed);
        t
    }

    /// Whether kind `c` is known to be at its growth limit ([`Segments::note_at_limit`]).
    pub fn at_limit(&self, c: usize) -> bool {
        // Acquire: pairs with `note_at_limit`'s Release, so that the kind's count read after
        // the bit is the final one the grower read before it (see `dedup::choose`). A thread
        // that has not seen the bit grows as before and finds the limit itself.
        c < 64 && self.at_limit.load(StdOrdering::Acquire) & (1 << c) != 0
    }

    /// Notes that kind `c` is at its growth limit, for good.
    pub fn note_at_limit(&self, c: usize) {
        if c < 64 && !self.at_limit(c) {
            // Release: see `at_limit`.
            self.at_limit.fetch_or(1 << c, StdOrdering::Release);
        }
    }

    /// Whether this process's last receive took nothing ([`Segments::note_polled`]).
    pub fn polled_empty(&self) -> bool {
        // Relaxed: a process-local hint, whichever thread set it.
        self.polled_empty.load(StdOrdering::Relaxed) != 0
    }

    /// Notes whether a receive took nothing; written only when it changes (threads of one
    /// process share the word's line).
    pub fn note_polled(&self, empty: bool) {
        if self.polled_empty() != empty {
            // Relaxed: as above.
            self.polled_empty
                .store(u64::from(empty), StdOrdering::Relaxed);
        }
    }

    /// The group whose hint this process's last receive left queued as a placeholder
    /// ([`Segments::note_placeholder`]).
    pub fn placeholder(&self) -> Option<u32> {
        // Relaxed: a process-local hint, whichever thread set it.
        let v = self.placeholder.load(StdOrdering::Relaxed);
        v.checked_sub(1).map(|g| g as u32)
    }

    /// Notes the group whose hint a receive left queued as a placeholder, or none; written
    /// only when it changes (threads of one process share the word's line).
    pub fn note_placeholder(&self, g: Option<u32>) {
        let v = g.map_or(0, |g| u64::from(g) + 1);
        // Relaxed: as above.
        if self.placeholder.load(StdOrdering::Relaxed) != v {
            self.placeholder.store(v, StdOrdering::Relaxed);
        }
    }

    /// The file behind the segments.
    pub fn file(&self) -> &dyn SegmentFile {
        &*self.file
    }

    /// This process's mapping of segment `k` (from 1) of kind `c`, if it made one.
    #[inline]
    fn get(&self, c: usize, k: usize) -> Option<Mapped> {
        // Process-local: Acquire pairs with the Release store in `put`, so the data pointer
        // stored before it is seen with the table pointer.
        let t = self.table[c][k - 1].load(StdOrdering::Acquire);
        if t.is_null() {
            return None;
        }
        let d = self.data[c][k - 1].load(StdOrdering::Relaxed);
        Some(Mapped { table: t, data: d })
    }

    fn put(&self, c: usize, k: usize, m: Mapped) {
        // Process-local: another thread that mapped the same segment stored the same file
        // range; either mapping serves (both last as long as the file's mappings).
        self.data[c][k - 1].store(m.data, StdOrdering::Relaxed);
        self.table[c][k - 1].store(m.table as *mut u8, StdOrdering::Release);
        self.note(c, k as u32);
    }
}

/// The segment of slot `i` of a class whose base file holds `n` slots: `(segment, slot in
/// it)`; segment 0 is the base file. A class that starts empty (`n` 0, layout 15) has no
/// segment 0: its slot `i` is slot `i + 1` of a class of one base slot.
#[inline]
pub fn segment_of(n: u32, i: u64) -> (u32, u64) {
    let n64 = u64::from(n);
    if i < n64 {
        return (0, i);
    }
    let (seed, at) = if n == 0 { (1, i + 1) } else { (n64, i) };
    // `k - 1 = ⌊log2(at / seed)⌋` without a division (tens of cycles on every touch of a
    // grown slot): the difference of the two logarithms, or one less where `seed` shifted by
    // it passes `at`. `at ≥ seed`, so `d ≥ 0`; both are below 2^33, so the shift cannot
    // overflow.
    let d = seed.leading_zeros() - at.leading_zeros();
    let d = d - u32::from(seed << d > at);
    (d + 1, at - (seed << d))
}

/// The first index past the segment (or, `k = 0`, the base) that holds index `i` of a table
/// of `n` base entries: where a scan goes on when the segment cannot be mapped (a scribbled
/// directory entry fails every index of it alike).
pub fn past_segment(n: u32, i: u64) -> u64 {
    let (k, _) = segment_of(n, i);
    // `k` segments added hold `slots_with(n, k)` entries, the first index of segment `k + 1`.
    crate::layout::slots_with(n, k).max(i + 1)
}

impl<'a> Arena<'a> {
    /// The most segments kind `c` (a class, [`DEDUP_KIND`] or [`GROUP_KIND`]) may add.
    pub fn growth(&self, c: usize) -> u32 {
        if c == GROUP_KIND {
            return self.group_growth;
        }
        if c == DEDUP_KIND {
            if self.dedup.is_empty() {
                0
            } else {
                self.dedup_growth
            }
        } else {
            self.classes
                .get(c)
                .copied()
                .flatten()
                .map_or(0, |cl| cl.growth)
        }
    }

    /// Entries of kind `c` in the base file: a class's slots, the dedup table's entries or
    /// the group table's.
    pub fn base_count(&self, c: usize) -> u32 {
        if c == GROUP_KIND {
            return self.groups.len() as u32;
        }
        if c == DEDUP_KIND {
            self.dedup.len() as u32
        } else {
            self.classes
                .get(c)
                .copied()
                .flatten()
                .map_or(0, |cl| cl.n())
        }
    }

    /// The layout of segment `k` (from 1) of kind `c`, and its bytes.
    pub fn segment_layout(&self, c: usize, k: u32) -> PResult<(Layout, u64)> {
        let n = self.base_count(c);
        if c == GROUP_KIND {
            return Ok((
                Layout::Groups {
                    entries: segment_slots(n, k),
                },
                group_segment_bytes(n, k),
            ));
        }
        if c == DEDUP_KIND {
            let kw = self.dedup_key_words as u32;
            return Ok((
                Layout::Dedup {
                    entries: segment_slots(n, k),
                    key_words: kw as usize,
                },
                dedup_segment_bytes(n, kw, k),
            ));
        }
        let cl = self.classes[c].ok_or(Fault::Corrupted("class"))?;
        Ok((
            Layout::Slots {
                slots: segment_slots(n, k),
                stride: cl.stride,
            },
            segment_bytes(n, cl.stride as u64, k),
        ))
    }

    /// The published segments kind `c` has added (Acquire: SYNC POINT(segment-publish)),
    /// bounded by the most it may add.
    pub fn published(&self, c: usize) -> u32 {
        if c >= MAX_KINDS {
            return 0;
        }
        // Acquire: SYNC POINT(segment-publish), against the grower's Release store of the
        // count after the segment's directory entry and its reserved blocks.
        let n = self.hdr.grow.0.segments[c].load(Ordering::Acquire);
        n.min(u64::from(self.growth(c))) as u32
    }

    /// The segments kind `c` has added as far as this process knows, without reading the
    /// shared count (a lower bound of [`Arena::published`]: every slot of these segments
    /// exists). The hot path scans these; only a full scan reads the count.
    pub fn known_segments(&self, c: usize) -> u32 {
        if c >= MAX_KINDS {
            return 0;
        }
        // Acquire: pairs with `Segments::note`'s Release (see there).
        self.segs.known[c]
            .load(Ordering::Acquire)
            .min(self.growth(c))
    }

    /// [`Arena::published`], noted as known to this process.
    pub fn refresh_segments(&self, c: usize) -> u32 {
        let n = self.published(c);
        if c < MAX_KINDS {
            self.segs.note(c, n);
        }
        n
    }

    /// The slots class `c` holds now: its base slots and those of its published segments.
    pub fn slots_now(&self, c: usize) -> u64 {
        if c >= self.nclasses {
            return 0;
        }
        slots_with(self.base_count(c), self.published(c))
    }

    /// The message slots of every class now ([`Arena::slots_now`] summed), for an arena that
    /// has grown `grows` times (the header's count, read by the caller): counted once per
    /// growth and kept in this process, so that a receive in a grown arena does not read every
    /// class's count. A growth published after `grows` was read is seen at the next call.
    pub fn slots_counted(&self, grows: u64) -> u64 {
        // Process-local, a cache: a pair written whole by whichever thread counted last.
        let c = self.segs.counted.load(StdOrdering::Relaxed);
        if c >> 32 == grows & 0xffff_ffff && c != 0 {
            return c & 0xffff_ffff;
        }
        let slots: u64 = (0..self.nclasses).map(|k| self.slots_now(k)).sum();
        // `slots` ≤ 2^31 (the index ranges), so it fits its half.
        let pair = ((grows & 0xffff_ffff) << 32) | slots.min(0xffff_ffff);
        self.segs.counted.store(pair, StdOrdering::Relaxed);
        slots
    }

    /// Whether `idx` names a slot that exists now: in the base file, or in a published
    /// segment (a receipt handle naming any other index was never handed out).
    pub fn is_slot(&self, idx: u32) -> bool {
        match self.locate(idx) {
            Ok((c, i)) => {
                let n = self.classes[c].map_or(0, |cl| cl.n());
                i < n as usize || (i as u64) < self.slots_now(c)
            }
            Err(_) => false,
        }
    }

    /// Segment `k` (from 1) of kind `c`, mapped in this process (the first time: read from
    /// the shared directory, checked, mapped).
    #[inline]
    pub fn segment(&self, c: usize, k: u32) -> PResult<Mapped> {
        if c < MAX_KINDS && k >= 1 && k as usize <= MAX_SEGMENTS {
            if let Some(m) = self.segs.get(c, k as usize) {
                return Ok(m);
            }
        }
        self.map_segment(c, k)
    }

    /// [`Arena::segment`] the first time this process meets it: read from the shared
    /// directory, checked, mapped.
    #[cold]
    #[inline(never)]
    fn map_segment(&self, c: usize, k: u32) -> PResult<Mapped> {
        if c >= MAX_KINDS || k == 0 || k > self.growth(c) {
            return Err(Fault::Corrupted("an index beyond its table's segments"));
        }
        if let Some(m) = self.segs.get(c, k as usize) {
            return Ok(m);
        }
        if k > self.published(c) {
            return Err(Fault::Corrupted(
                "an index in a segment that was never published",
            ));
        }
        // Relaxed: published by the Release store of the count, read with Acquire above.
        let off = self.directory[c * MAX_SEGMENTS + k as usize - 1].load(Ordering::Relaxed);
        let (layout, len) = self.segment_layout(c, k)?;
        let end = off.checked_add(len);
        if off % PAGE != 0 || off < self.base_len || end.is_none_or(|e| e > self.size_limit) {
            return Err(Fault::Corrupted("a segment's offset is out of range"));
        }
        let m = self.segs.file().map(off, len, layout)?;
        self.segs.put(c, k as usize, m);
        Ok(m)
    }

    /// Header and payload start of slot `i` of class `c` (a slot of the base file, or of a
    /// published segment, mapped here the first time).
    #[inline]
    pub fn slot(&self, c: usize, i: u64) -> PResult<(&'a MsgHeader, *mut u8)> {
        let Some(Some(cl)) = self.classes.get(c) else {
            return Err(Fault::Corrupted("class"));
        };
        // The base file's slots: no growth state read, one compare.
        if i < cl.headers.len() as u64 {
            // `i` indexes the base slots, so the payload lies inside the class's array.
            return Ok((
                &cl.headers[i as usize],
                cl.payload.wrapping_add(i as usize * cl.stride),
            ));
        }
        self.slot_in_segment(c, cl, i)
    }

    /// [`Arena::slot`] past the base file: the segment's pointer cached in this process (its
    /// first touch maps it, on a cold path).
    #[inline]
    fn slot_in_segment(
        &self,
        c: usize,
        cl: &super::Class<'a>,
        i: u64,
    ) -> PResult<(&'a MsgHeader, *mut u8)> {
        let (k, j) = segment_of(cl.n(), i);
        if k == 0 {
            return Err(Fault::Corrupted("slot index"));
        }
        let m = self.segment(c, k)?;
        // SAFETY: `segment` mapped (or found mapped) the whole segment, `segment_slots` headers
        // then as many payloads, for as long as the arena's segment map lives (at least 'a);
        // `j` is below `segment_slots(n, k)` by `segment_of`; headers are atomics, valid for
        // any bit pattern.
        let h = unsafe { &*m.headers().add(j as usize) };
        Ok((h, m.data.wrapping_add(j as usize * cl.stride)))
    }

    /// Dedup table segment `k` (from 1): its entries and their key words.
    pub fn dedup_segment(&self, k: u32) -> PResult<(&'a [DedupEntry], &'a [AtomicU64])> {
        let m = self.segment(DEDUP_KIND, k)?;
        let n = segment_slots(self.dedup.len() as u32, k) as usize;
        // SAFETY: `segment` mapped the whole segment, `n` entries then `n × key_words` key
        // words (`dedup_segment_bytes`), for as long as the arena's segment map lives (at
        // least 'a); entries and words are atomics, valid for any bit pattern, and the
        // mapping is page-aligned (entries are 64 bytes, words 8).
        unsafe {
            Ok((
                core::slice::from_raw_parts(m.table as *const DedupEntry, n),
                core::slice::from_raw_parts(m.data as *const AtomicU64, n * self.dedup_key_words),
            ))
        }
    }
}

/// One group table segment (layout 16): the entries of an added group table, their
/// expiry-wheel bitmaps and their ready ring.
#[derive(Debug, Clone, Copy)]
pub struct GroupSegment<'a> {
    /// The table's entries.
    pub entries: &'a [GroupEntry],
    /// [`WHEEL_BUCKETS`] bitmaps of [`wheel_words_of`]`(entries)` words.
    pub maps: &'a [AtomicU64],
    /// The table's ready ring (one entry per table entry): the hints of its groups.
    pub ring: super::ring::Ring<'a>,
}

impl<'a> Arena<'a> {
    /// Group table segment `k` (from 1, layout 16): its entries, their expiry-wheel bitmaps
    /// and their ready ring.
    pub fn group_segment(&self, k: u32) -> PResult<GroupSegment<'a>> {
        let m = self.segment(GROUP_KIND, k)?;
        let n = segment_slots(self.groups.len() as u32, k) as usize;
        let w = WHEEL_BUCKETS * wheel_words_of(n);
        // SAFETY: `segment` mapped the whole segment, `n` entries then the tail of
        // `group_segment_words(n)` words (`group_segment_bytes`), for as long as the arena's
        // segment map lives (at least 'a); entries and words are atomics, valid for any bit
        // pattern, and the mapping is page-aligned (entries are 256 bytes, words 8).
        let (entries, tail) = unsafe {
            (
                core::slice::from_raw_parts(m.table as *const GroupEntry, n),
                core::slice::from_raw_parts(
                    m.data as *const AtomicU64,
                    group_segment_words(n as u64) as usize,
                ),
            )
        };
        let r = w + GROUP_RING_OFFSET_WORDS as usize;
        Ok(GroupSegment {
            entries,
            maps: &tail[..w],
            ring: super::ring::Ring {
                entries: &tail[r..r + n],
                head: &tail[w],
                tail: &tail[w + 16],
                cursor: self.segs.ring_cursor(k as usize),
                push_cursor: self.segs.ring_push_cursor(k as usize),
            },
        })
    }
}

#[cfg(all(test, not(shmfifo_loom)))]
mod tests {
    use super::{past_segment, segment_of};

    /// `segment_of` agrees with its definition (segment `k` of a class of `n` base slots
    /// starts at `n·2^(k-1)`; a class of none: slot `i` is slot `i + 1` of a class of one) for
    /// every slot of several sizes, powers of two and not.
    #[test]
    fn segment_of_matches_its_definition() {
        for n in [0u32, 1, 3, 4, 7, 64, 100, 8192, 12_345] {
            let seed = u64::from(n.max(1));
            let t = u64::from(n == 0);
            for i in 0..(seed << 6).min(200_000) {
                let want = if i < u64::from(n) {
                    (0, i)
                } else {
                    let at = i + t;
                    let k = 64 - (at / seed).leading_zeros();
                    (k, at - (seed << (k - 1)))
                };
                assert_eq!(segment_of(n, i), want, "n={n} i={i}");
            }
        }
        assert_eq!(segment_of(1, (1 << 31) - 2), (31, (1 << 30) - 2));
    }

    /// `past_segment` is the first index of the next segment: every index before it is in
    /// `i`'s segment, the index itself in the next one.
    #[test]
    fn past_segment_is_the_next_segments_first_index() {
        for n in [0u32, 1, 3, 8, 100] {
            let seed = u64::from(n.max(1));
            for i in 0..(seed << 6) {
                let p = past_segment(n, i);
                let k = segment_of(n, i).0;
                assert!(p > i, "n={n} i={i}");
                assert_eq!(segment_of(n, p - 1).0, k, "n={n} i={i}");
                assert_eq!(segment_of(n, p).0, k + 1, "n={n} i={i}");
            }
        }
        assert_eq!(past_segment(8, 0), 8);
        assert_eq!(past_segment(8, 9), 16);
        assert_eq!(past_segment(8, 16), 32);
    }
}
