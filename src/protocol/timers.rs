//! The expiry wheel (layout 12): the groups whose head is locked until a deadline (a
//! visibility timeout, or the queue delay of a never-received head), filed by that deadline,
//! so that a sweep due at an expiry visits the groups filed near it, not the whole group table.
//!
//! **Layout.** `timers[0..WHEEL_BUCKETS]` are the buckets' earliest deadlines, stored
//! inverted (`!d`: the zeroed region of a new arena reads "none", and lowering is a
//! `fetch_max`). Bucket `b`'s bitmap follows: `W = wheel_words(group slots)` words from
//! `WHEEL_BUCKETS + b × W`, bit `g` for group slot `g`. Each table the group table adds
//! (layout 16) carries its own 64 bitmaps after its entries, laid out the same way for its
//! entries; a drain of bucket `b` reads the base table's bitmap, then each added table's. A deadline `d` falls in bucket
//! `(d >> WHEEL_SHIFT) % WHEEL_BUCKETS`: a bucket holds deadlines 1,024 ms wide, and the wheel
//! turns in about 65 s, so a bucket may also hold deadlines one or more turns ahead.
//!
//! **Protocol** (SYNC POINT(expiry-wheel)).
//! * *Arming.* Whoever publishes a deadline `d` on group `g`'s head (a receive, a replayed
//!   receive, a visibility change) or finds its head delayed until `d` arms it after the
//!   SeqCst CAS that published it: a SeqCst load of `g`'s bit in bucket `b(d)` and a
//!   `fetch_or` if it is clear, then the bucket's minimum lowered to `d` if it is later.
//! * *Draining.* A sweeper drains a bucket whose minimum has passed: it resets the minimum
//!   (SeqCst swap), then, a bitmap word at a time, clears the word (SeqCst swap) and only then
//!   reads the status of each group it held (SeqCst loads): a group still locked is armed
//!   again, one whose deadline passed is hinted, any other stays off the wheel. A sweep looks
//!   at [`DRAIN_BUDGET`] groups at most; a bucket left over stays due for the next sweep.
//! * Either the arming load follows the clear in the SeqCst order (it sees the bit clear and
//!   sets it), or the clear follows the load, and then the sweeper's status read, later still,
//!   sees the published deadline and arms it again. So every published deadline has its bit and
//!   its bucket's minimum set, or a participant between those steps will set them
//!   (loom: `loom-tests/tests/timers.rs`).
//! * A participant that stops or dies between publishing a deadline and arming it, or a sweeper
//!   that stops mid-drain, leaves deadlines off the wheel: the periodic sweep, which looks at
//!   every group in turn (`SWEEP_CHUNK` entries per sweep), arms them again, as it re-derives
//!   every other lost hint.
//!
//! Bits may be stale (the message was deleted since): they cost one visit and are cleared when
//! their bucket is next drained. The wheel is a hint like the ready ring: a hostile peer that
//! scribbles over it delays expiries until the periodic sweep, and every index is checked.

use super::segments::segment_of;
use super::{Arena, Fault, PResult};
use crate::layout::{wheel_words, wheel_words_of, GROUP_KIND, WHEEL_BUCKETS, WHEEL_SHIFT};
use crate::sync::{AtomicU64, Ordering};

/// The wheel bucket of deadline `d` (ms).
pub fn bucket(d: u64) -> usize {
    ((d >> WHEEL_SHIFT) % WHEEL_BUCKETS as u64) as usize
}

/// Bucket `b`'s minimum word (inverted).
fn min_word<'a>(a: &Arena<'a>, b: usize) -> PResult<&'a AtomicU64> {
    a.timers
        .get(b)
        .filter(|_| b < WHEEL_BUCKETS)
        .ok_or(Fault::Corrupted("wheel bucket out of range"))
}

/// The bitmaps of group `g`'s table (the base table's after the bucket minima, or those of
/// the added table it lies in, layout 16), the words of one bucket's bitmap there, and `g`'s
/// index in its table.
#[inline]
fn bitmaps<'a>(a: &Arena<'a>, g: u32) -> PResult<(&'a [AtomicU64], usize, usize)> {
    let n = a.groups.len();
    if (g as usize) < n {
        let maps = a
            .timers
            .get(WHEEL_BUCKETS..)
            .ok_or(Fault::Corrupted("wheel index out of range"))?;
        return Ok((maps, wheel_words(n as u32), g as usize));
    }
    added_bitmaps(a, g)
}

/// [`bitmaps`] of a group of an added table.
#[cold]
#[inline(never)]
fn added_bitmaps<'a>(a: &Arena<'a>, g: u32) -> PResult<(&'a [AtomicU64], usize, usize)> {
    let n = a.groups.len();
    if n == 0 || g >= a.group_range() {
        return Err(Fault::Corrupted("wheel index out of range"));
    }
    let (k, j) = segment_of(n as u32, u64::from(g));
    let s = a.group_segment(k)?;
    Ok((s.maps, wheel_words_of(s.entries.len()), j as usize))
}

/// Table `k`'s bitmaps (as [`bitmaps`]), the global index of its first group and its entries.
fn table_maps<'a>(a: &Arena<'a>, k: u32) -> PResult<(&'a [AtomicU64], usize, u32, usize)> {
    if k == 0 {
        let (maps, w, _) = bitmaps(a, 0)?;
        return Ok((maps, w, 0, a.groups.len()));
    }
    let (first, t) = a.group_table(k)?;
    let s = a.group_segment(k)?;
    Ok((s.maps, wheel_words_of(t.len()), first, t.len()))
}

/// The word holding group `g`'s bit in bucket `b`, and the bit.
fn bit<'a>(a: &Arena<'a>, b: usize, g: u32) -> PResult<(&'a AtomicU64, u64)> {
    if b >= WHEEL_BUCKETS {
        return Err(Fault::Corrupted("wheel index out of range"));
    }
    let (maps, w, j) = bitmaps(a, g)?;
    maps.get(b * w + j / 64)
        .map(|word| (word, 1u64 << (j % 64)))
        .ok_or(Fault::Corrupted("wheel index out of range"))
}

/// Files group `g`, whose head is locked until `d`, on the wheel. Called after the SeqCst CAS
/// that published `d` (or, for a delayed head, after the SeqCst load that found it).
#[inline]
pub fn arm(a: &Arena<'_>, g: u32, d: u64) -> PResult<()> {
    arm_after(a, g, d, Published::ByRmw)
}

/// How the caller published the deadline it files: by a SeqCst RMW (a CAS of `vis`), or by
/// Release stores and then a SeqCst fence (a take of never-received messages).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Published {
    /// A SeqCst RMW (or load) came last.
    ByRmw,
    /// A SeqCst fence came last.
    ByFence,
}

impl Published {
    /// The SeqCst load of a store-buffering pair after the caller's publication: `sync`'s
    /// load after an RMW or after a fence (an RMW or a load under loom).
    #[inline]
    pub fn load(self, w: &crate::sync::AtomicU64) -> u64 {
        match self {
            Published::ByRmw => crate::sync::load_after_seqcst_rmw_u64(w),
            Published::ByFence => crate::sync::load_after_seqcst_fence_u64(w),
        }
    }
}

/// [`arm`] after a publication `how`.
#[inline]
pub fn arm_after(a: &Arena<'_>, g: u32, d: u64, how: Published) -> PResult<()> {
    let b = bucket(d);
    let (word, m) = bit(a, b, g)?;
    // SYNC POINT(expiry-wheel): a SeqCst load after our SeqCst publication of `d` (an RMW, or
    // stores and a fence), against a sweeper's SeqCst clear of the bit then SeqCst status
    // loads. A set bit is left alone, so a group re-armed in the same bucket costs no write
    // (and its line stays shared).
    if how.load(word) & m == 0 {
        // SeqCst: the other side of the same point (a later drain's clear is ordered after).
        word.fetch_or(m, Ordering::SeqCst);
    }
    crash_point!();
    lower(a, b, d, how)
}

/// [`arm`] where the deadline is already published: a wheel that cannot take it (only a
/// corrupted geometry) leaves it to the periodic sweep, which arms every locked group it
/// looks at. Returns an error only for a loom model's stop.
pub fn file(a: &Arena<'_>, g: u32, d: u64) -> PResult<()> {
    file_after(a, g, d, Published::ByRmw)
}

/// [`file`] after a publication `how`.
pub fn file_after(a: &Arena<'_>, g: u32, d: u64, how: Published) -> PResult<()> {
    match arm_after(a, g, d, how) {
        Err(f) if super::stopped(f) => Err(f),
        _ => Ok(()),
    }
}

/// Lowers bucket `b`'s minimum to `d` if it is later.
fn lower(a: &Arena<'_>, b: usize, d: u64, how: Published) -> PResult<()> {
    let w = min_word(a, b)?;
    // SeqCst load: after our bit's SeqCst RMW or load, against the drain's SeqCst reset of the
    // minimum: either we read the reset (and lower it) or the drain, which resets before it
    // reads the bits, finds our bit and arms the group again. A minimum already at or before
    // `d` is left alone (an earlier deadline is pending: the line stays shared).
    if d < !how.load(w) {
        // SeqCst (a locked RMW on x86 either way): composes with concurrent lowerings and a
        // drain's reset, and is ordered before the caller's SeqCst `next_expiry` load
        // (SYNC POINT(expiry-publish)): a sweeper whose swap that load misses reads this
        // minimum after its fence.
        w.fetch_max(!d, Ordering::SeqCst);
    }
    Ok(())
}

/// Bucket `b`'s earliest deadline (`u64::MAX`: none).
pub fn bucket_min(a: &Arena<'_>, b: usize) -> u64 {
    // Acquire: pairs with the AcqRel lowerings.
    min_word(a, b).map_or(u64::MAX, |w| !w.load(Ordering::Acquire))
}

/// The earliest deadline on the wheel (`u64::MAX`: none).
pub fn earliest(a: &Arena<'_>) -> u64 {
    (0..WHEEL_BUCKETS)
        .map(|b| bucket_min(a, b))
        .min()
        .unwrap_or(u64::MAX)
}

/// Groups the drains of one sweep look at, at most (rounded up to a whole bitmap word): due
/// buckets holding more (stale bits of many groups received about a turn ago, on a busy queue
/// with many groups) are drained over several sweeps, each of bounded work, instead of
/// stalling one.
pub const DRAIN_BUDGET: usize = 4_096;

/// What a [`drain`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Drained {
    /// Groups looked at.
    pub visited: usize,
    /// Whether the bucket was drained to its end (otherwise it stays due: the next sweep
    /// goes on).
    pub complete: bool,
}

/// Drains bucket `b` at time `now`: resets its minimum, then, a bitmap word at a time, clears
/// the word and calls `visit(g)` for each group it held, which returns the group's deadline if
/// its head is still locked (it is armed again). Once `budget` groups were looked at it stops
/// before the next word, and leaves the bucket due at `now` for the next sweep.
pub fn drain(
    a: &Arena<'_>,
    b: usize,
    now: u64,
    budget: usize,
    visit: &mut dyn FnMut(u32) -> Option<u64>,
) -> PResult<Drained> {
    // SYNC POINT(expiry-wheel): SeqCst reset, before the bits are read (see `lower`).
    min_word(a, b)?.swap(0, Ordering::SeqCst);
    crate::sync::fence(Ordering::SeqCst);
    let mut visited = 0;
    let mut damaged = None;
    // The base table's bitmap, then each added table's (layout 16). A table that cannot be
    // mapped (a damaged directory) is passed over: the others are drained, and the bucket
    // stays due.
    for k in 0..=a.published(GROUP_KIND) {
        let (maps, w, first, len) = match table_maps(a, k) {
            Ok(t) => t,
            Err(f) => {
                damaged = Some(f);
                continue;
            }
        };
        for i in 0..w {
            let Some(word) = maps.get(b * w + i) else {
                return Err(Fault::Corrupted("wheel index out of range"));
            };
            // Relaxed: a filter only (the swap below reads the bits that count).
            if word.load(Ordering::Relaxed) == 0 {
                continue;
            }
            if visited >= budget {
                lower(a, b, now, Published::ByRmw)?;
                return Ok(Drained {
                    visited,
                    complete: false,
                });
            }
            // SYNC POINT(expiry-wheel): clear the word first, then look at each of its
            // groups (SeqCst, see `arm`): one RMW per word, not per group. The fence after it
            // pairs with the fence of a take that published its deadlines by stores (SeqCst
            // loads after an RMW would order against it too, but loom models only fences
            // against fences); one locked instruction per word drained, off the hot path.
            let mut bits = word.swap(0, Ordering::SeqCst);
            crate::sync::fence(Ordering::SeqCst);
            crash_point!();
            while bits != 0 {
                let j = bits.trailing_zeros();
                bits &= bits - 1;
                let local = i * 64 + j as usize;
                if local >= len {
                    break; // a bit past the table (scribbled): cleared, ignored
                }
                let g = first + local as u32;
                visited += 1;
                if let Some(d) = visit(g) {
                    arm(a, g, d)?;
                }
            }
        }
    }
    if let Some(f) = damaged {
        lower(a, b, now, Published::ByRmw)?;
        return Err(f);
    }
    Ok(Drained {
        visited,
        complete: true,
    })
}

#[cfg(all(test, not(shmfifo_loom)))]
mod tests {
    use super::*;
    use crate::layout::Geometry;
    use crate::protocol::heap::HeapArena;

    fn wheel(groups: u32) -> HeapArena {
        HeapArena::new(&Geometry {
            participants: 1,
            max_groups: groups / 2,
            group_slots: groups,
            ready_slots: groups,
            classes: vec![(16, 4)],
            dedup_slots: 0,
            dedup_key_words: crate::layout::DEDUP_KEY_WORDS,
            attempt_slots: 0,
            class_growth: Vec::new(),
            size_limit: 0,
            dedup_growth: 0,
            group_growth: 0,
        })
    }

    /// Arming files a group in its deadline's bucket and lowers that bucket's minimum only;
    /// a drain visits exactly the groups filed there, re-arms those it is told are still
    /// locked and leaves the rest off the wheel.
    #[test]
    fn arm_and_drain_visit_exactly_the_filed_groups() {
        let h = wheel(256);
        let a = h.arena();
        assert_eq!(earliest(&a), u64::MAX, "a zeroed wheel is empty");
        arm(&a, 3, 5_120).unwrap();
        arm(&a, 200, 5_500).unwrap();
        arm(&a, 7, 6_144).unwrap(); // the next bucket
        arm(&a, 9, 5_120 + 64 * 1024).unwrap(); // one turn ahead: same bucket as 5,000
        let b = bucket(5_120);
        assert_eq!(bucket(5_500), b);
        assert_eq!(bucket_min(&a, b), 5_120);
        assert_eq!(bucket_min(&a, bucket(6_144)), 6_144);
        assert_eq!(earliest(&a), 5_120);
        let mut seen = Vec::new();
        let n = drain(&a, b, 5_120, DRAIN_BUDGET, &mut |g| {
            seen.push(g);
            // Group 9 is still locked a turn ahead; the others expired.
            (g == 9).then_some(5_120 + 64 * 1024)
        })
        .unwrap();
        seen.sort_unstable();
        assert_eq!((n.visited, n.complete, seen), (3, true, vec![3, 9, 200]));
        assert_eq!(bucket_min(&a, b), 5_120 + 64 * 1024, "re-armed");
        let mut again = Vec::new();
        drain(&a, b, 5_120, DRAIN_BUDGET, &mut |g| {
            again.push(g);
            None
        })
        .unwrap();
        assert_eq!(again, vec![9], "only the re-armed group is left");
        assert_eq!(bucket_min(&a, b), u64::MAX);
        assert_eq!(earliest(&a), 6_144);
    }

    /// Indices from shared memory are checked: a group past the table is refused, and a bit
    /// scribbled past the table is ignored by a drain.
    #[test]
    fn out_of_range_is_refused_not_followed() {
        let h = wheel(16);
        let a = h.arena();
        assert!(arm(&a, 16, 1).is_err());
        let (word, _) = bit(&a, 0, 0).unwrap();
        word.store(u64::MAX, Ordering::Relaxed); // bits 16..64 lie past the table
        let mut n = 0;
        let d = drain(&a, 0, 1, DRAIN_BUDGET, &mut |_| {
            n += 1;
            None
        })
        .unwrap();
        assert_eq!((d.visited, n), (16, 16));
        assert_eq!(
            word.load(Ordering::Relaxed),
            0,
            "cleared, bits past the table too"
        );
    }

    /// A bucket holding more groups than the budget is drained over several calls, each
    /// visiting at most the budget (rounded up to a word) and leaving the bucket due at the
    /// time given, until every group was visited once.
    #[test]
    fn a_crowded_bucket_drains_in_bounded_steps() {
        let h = wheel(16_384);
        let a = h.arena();
        for g in 0..10_000 {
            arm(&a, g, 70_000).unwrap();
        }
        let b = bucket(70_000);
        let mut seen = vec![0u32; 10_000];
        let mut calls = 0;
        loop {
            let d = drain(&a, b, 70_500, DRAIN_BUDGET, &mut |g| {
                seen[g as usize] += 1;
                None
            })
            .unwrap();
            calls += 1;
            assert!(d.visited <= DRAIN_BUDGET + 63, "{d:?}");
            if d.complete {
                break;
            }
            assert_eq!(bucket_min(&a, b), 70_500, "left due");
        }
        assert_eq!(calls, 10_000usize.div_ceil(DRAIN_BUDGET));
        assert!(seen.iter().all(|&n| n == 1), "each group once");
        assert_eq!(bucket_min(&a, b), u64::MAX);
    }
}
