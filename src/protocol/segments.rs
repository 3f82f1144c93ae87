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
use crate::layout::{segment_bytes, segment_slots, MsgHeader, MAX_CLASSES, MAX_SEGMENTS, PAGE};
use crate::sync::Ordering;

/// Where one mapped segment's headers and payloads start.
#[derive(Debug, Clone, Copy)]
pub struct Mapped {
    /// Its slot headers (`segment_slots` of them).
    pub headers: *const MsgHeader,
    /// Its payloads (`stride` bytes apart).
    pub payload: *mut u8,
}

/// The file behind an arena's added segments: reserves their blocks (a grower) and maps them
/// (every participant). Implemented over the arena's file by the API, over the heap by
/// `heap::HeapArena`.
pub trait SegmentFile: Send + Sync + fmt::Debug {
    /// Makes `len` bytes at `offset` of the file exist (`fallocate`): afterwards a mapping of
    /// them can never fault for want of space. [`Fault::NoSpace`] if the file system has no
    /// room. Reserving a range again is harmless (a grower that died after reserving is
    /// redone by the next).
    fn reserve(&self, offset: u64, len: u64) -> PResult<()>;

    /// Maps the segment of `slots` slots with payloads `stride` bytes apart found at `offset`
    /// (`len` bytes, reserved and published). The mapping lasts as long as `self`.
    fn map(&self, offset: u64, len: u64, slots: u64, stride: usize) -> PResult<Mapped>;
}

impl<T: SegmentFile> SegmentFile for std::sync::Arc<T> {
    fn reserve(&self, offset: u64, len: u64) -> PResult<()> {
        (**self).reserve(offset, len)
    }

    fn map(&self, offset: u64, len: u64, slots: u64, stride: usize) -> PResult<Mapped> {
        (**self).map(offset, len, slots, stride)
    }
}

/// One process's map of the added segments of one arena.
pub struct Segments {
    headers: [[AtomicPtr<MsgHeader>; MAX_SEGMENTS]; MAX_CLASSES],
    payload: [[AtomicPtr<u8>; MAX_SEGMENTS]; MAX_CLASSES],
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
    /// A map with nothing mapped yet, over `file`.
    pub fn new(file: Box<dyn SegmentFile>) -> Self {
        Segments {
            headers: core::array::from_fn(|_| {
                core::array::from_fn(|_| AtomicPtr::new(core::ptr::null_mut()))
            }),
            payload: core::array::from_fn(|_| {
                core::array::from_fn(|_| AtomicPtr::new(core::ptr::null_mut()))
            }),
            file,
        }
    }

    /// The file behind the segments.
    pub fn file(&self) -> &dyn SegmentFile {
        &*self.file
    }

    /// This process's mapping of segment `k` (from 1) of class `c`, if it made one.
    fn get(&self, c: usize, k: usize) -> Option<Mapped> {
        // Process-local: Acquire pairs with the Release store in `put`, so the payload
        // pointer stored before it is seen with the headers pointer.
        let h = self.headers[c][k - 1].load(StdOrdering::Acquire);
        if h.is_null() {
            return None;
        }
        let p = self.payload[c][k - 1].load(StdOrdering::Relaxed);
        Some(Mapped {
            headers: h,
            payload: p,
        })
    }

    fn put(&self, c: usize, k: usize, m: Mapped) {
        // Process-local: another thread that mapped the same segment stored the same file
        // range; either mapping serves (both last as long as the file's mappings).
        self.payload[c][k - 1].store(m.payload, StdOrdering::Relaxed);
        self.headers[c][k - 1].store(m.headers as *mut MsgHeader, StdOrdering::Release);
    }
}

/// The segment of slot `i` of a class whose base file holds `n` slots: `(segment, slot in
/// it)`; segment 0 is the base file.
#[inline]
pub fn segment_of(n: u32, i: u64) -> (u32, u64) {
    let n64 = u64::from(n);
    if i < n64 {
        return (0, i);
    }
    let k = 64 - (i / n64).leading_zeros();
    (k, i - segment_slots(n, k))
}

impl<'a> Arena<'a> {
    /// The published segments class `c` has added (Acquire: SYNC POINT(segment-publish)),
    /// bounded by the most it may add.
    pub fn published_segments(&self, c: usize) -> u32 {
        let Some(cl) = self.classes.get(c).copied().flatten() else {
            return 0;
        };
        // Acquire: SYNC POINT(segment-publish), against the grower's Release store of the
        // count after the segment's directory entry and its reserved blocks.
        let n = self.hdr.grow.0.segments[c].load(Ordering::Acquire);
        n.min(u64::from(cl.growth)) as u32
    }

    /// The slots class `c` holds now: its base slots and those of its published segments.
    pub fn slots_now(&self, c: usize) -> u64 {
        self.classes
            .get(c)
            .copied()
            .flatten()
            .map_or(0, |cl| u64::from(cl.n()) << self.published_segments(c))
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

    /// Segment `k` (from 1) of class `c`, mapped in this process (the first time: read from
    /// the shared directory, checked, mapped).
    pub fn segment(&self, c: usize, k: u32) -> PResult<Mapped> {
        let cl = self.classes[c].ok_or(Fault::Corrupted("class"))?;
        if k == 0 || k > cl.growth {
            return Err(Fault::Corrupted("slot index beyond the class's segments"));
        }
        if let Some(m) = self.segs.get(c, k as usize) {
            return Ok(m);
        }
        if k > self.published_segments(c) {
            return Err(Fault::Corrupted(
                "slot index in a segment that was never published",
            ));
        }
        // Relaxed: published by the Release store of the count, read with Acquire above.
        let off = self.directory[c * MAX_SEGMENTS + k as usize - 1].load(Ordering::Relaxed);
        let len = segment_bytes(cl.n(), cl.stride as u64, k);
        let end = off.checked_add(len);
        if off % PAGE != 0 || off < self.base_len || end.is_none_or(|e| e > self.size_limit) {
            return Err(Fault::Corrupted("a segment's offset is out of range"));
        }
        let m = self
            .segs
            .file()
            .map(off, len, segment_slots(cl.n(), k), cl.stride)?;
        self.segs.put(c, k as usize, m);
        Ok(m)
    }

    /// Header and payload start of slot `i` of class `c` (a slot of the base file, or of a
    /// published segment, mapped here the first time).
    #[inline]
    pub fn slot(&self, c: usize, i: u64) -> PResult<(&'a MsgHeader, *mut u8)> {
        let cl = self.classes[c].ok_or(Fault::Corrupted("class"))?;
        let (k, j) = segment_of(cl.n(), i);
        if k == 0 {
            let h = cl
                .headers
                .get(j as usize)
                .ok_or(Fault::Corrupted("slot index"))?;
            // `j` indexes the base slots, so the payload lies inside the class's array.
            return Ok((h, cl.payload.wrapping_add(j as usize * cl.stride)));
        }
        let m = self.segment(c, k)?;
        // SAFETY: `segment` mapped (or found mapped) the whole segment, `segment_slots` headers
        // then as many payloads, for as long as the arena's segment map lives (at least 'a);
        // `j` is below `segment_slots(n, k)` by `segment_of`; headers are atomics, valid for
        // any bit pattern.
        let h = unsafe { &*m.headers.add(j as usize) };
        Ok((h, m.payload.wrapping_add(j as usize * cl.stride)))
    }
}
