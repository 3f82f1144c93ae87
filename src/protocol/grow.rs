//! Growing a size class (layout 13) or the dedup table (layout 14) by one segment: an arena
//! that starts at its base size and holds a backlog, and remembers every dedup id of its
//! interval, up to its size limit.
//!
//! A producer that finds every slot of its class taken (base file and published segments), or
//! a dedup id that finds every entry near its home (`dedup::PLACE_WINDOW`) holding an id of the
//! interval, adds the next segment of that kind, twice what it has so far:
//!
//! 1. It takes the *grow claim* (`GrowLine::claim`, owner-tagged: taken over only from a
//!    proven-dead owner; a live holder, even a stopped one, is waited for at most
//!    [`CLAIM_WAIT_MS`](super::group::CLAIM_WAIT_MS), then the send fails retryably).
//! 2. Under it, it re-reads the class's published count (someone may have grown it
//!    meanwhile: then it is done) and finds the file's end from the directory: the end of the
//!    last published segment of any class, or the base file's.
//! 3. It writes the new segment's offset into the directory (not yet published).
//! 4. It reserves the segment's blocks (`fallocate`): the file system gives them or the growth
//!    fails with [`Fault::NoSpace`], nothing published. Zero-filled blocks are free slots
//!    (a zero header is `FREE`, incarnation 0), so a segment needs no initialisation.
//! 5. It publishes the segment: the class's count, Release (SYNC POINT(segment-publish)).
//! 6. It releases the claim.
//!
//! A grower that dies at any step leaves at most an offset written beyond the published
//! count (ignored, and overwritten by the next grower) and blocks reserved past the directory's
//! end (reserved again, idempotently, by the next grower, which computes the same end): the
//! next grower takes the claim over and redoes the step. Nothing is ever published before its
//! blocks exist, and no two segments share a byte: every offset is chosen under the claim from
//! the published segments, and a published segment is never unpublished. Segments are kept
//! for the arena's life (no shrinking in layout 13: a burst's slots stay, free).

use super::group::Patience;
use super::{Arena, Env, Fault, Owner, PResult};
use crate::layout::{DEDUP_KIND, GROUP_KIND, MAX_SEGMENTS, PAGE};
use crate::sync::Ordering;

/// What a call to [`grow`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Grew {
    /// It added and published the class's next segment.
    Added,
    /// The class had more published segments than the caller saw (another producer grew
    /// it): look again.
    Found,
    /// The class has all the segments it may have, or the next would pass the size limit.
    AtLimit,
}

/// Grows kind `c` (a size class, or [`DEDUP_KIND`](crate::layout::DEDUP_KIND)), which the
/// caller found full with `seen` published segments.
pub fn grow(a: &Arena<'_>, env: &dyn Env, me: Owner, c: usize, seen: u32) -> PResult<Grew> {
    if a.published(c) > seen {
        return Ok(Grew::Found);
    }
    if a.segs.at_limit(c) {
        return Ok(Grew::AtLimit);
    }
    if seen >= a.growth(c) {
        a.segs.note_at_limit(c);
        return Ok(Grew::AtLimit);
    }
    let mut p = Patience::new();
    while !take_claim(a, env, me) {
        if a.published(c) > seen {
            return Ok(Grew::Found);
        }
        p.wait(
            env,
            "the grow claim is held by a live participant (stopped?)",
        )?;
    }
    crash_point!();
    let r = grow_locked(a, c, seen);
    if r == Ok(Grew::AtLimit) {
        a.segs.note_at_limit(c);
    }
    if let Err(f) = r {
        if super::stopped(f) {
            return r; // a model's participant stopped forever keeps the claim
        }
    }
    release_claim(a, me);
    r
}

/// Steps 2–5 under the grow claim.
fn grow_locked(a: &Arena<'_>, c: usize, seen: u32) -> PResult<Grew> {
    let line = &a.hdr.grow.0;
    // An RMW (AcqRel), not a load: it reads the latest count in its modification order, so
    // a grower that took the claim over from a dead one (whose release we never read) still
    // sees every segment published before (SYNC POINT(segment-publish)).
    let n = crate::sync::idempotent_rmw_u64(&line.segments[c], Ordering::AcqRel);
    if n > u64::from(seen) {
        return Ok(Grew::Found);
    }
    if n < u64::from(seen) {
        // Counts only grow: a smaller one was written by no grower.
        return Err(Fault::Corrupted("a segment count went down"));
    }
    if n >= u64::from(a.growth(c)) {
        return Ok(Grew::AtLimit);
    }
    let k = n as u32 + 1;
    let (layout, len) = a.segment_layout(c, k)?;
    let at = end_of(a, Some((c, n)))?;
    if at.saturating_add(len) > a.size_limit {
        return Ok(Grew::AtLimit);
    }
    // Relaxed: published by the Release store of the count below.
    a.directory[c * MAX_SEGMENTS + k as usize - 1].store(at, Ordering::Relaxed);
    crash_point!();
    if let Err(f) = a.segs.file().reserve(at, len, layout) {
        if f == Fault::NoSpace(len) {
            // Relaxed: a statistic.
            line.refused.fetch_add(1, Ordering::Relaxed);
        }
        return Err(f);
    }
    crash_point!();
    // SYNC POINT(segment-publish): Release makes the directory entry (and the reserved
    // blocks, which exist from here on) visible to whoever loads the count with Acquire
    // before it maps the segment (`Arena::segment`). An RMW, not a store: every write of the
    // count is then an RMW, so an inserter's RMW read of it (`group::published_latest`) and its
    // later loads see one modification order (a plain store is ordered against other
    // threads' RMWs only by causality in loom's model, which let a load after such an RMW
    // read an older count).
    line.segments[c].fetch_max(u64::from(k), Ordering::Release);
    // Relaxed: a statistic.
    line.grows.fetch_add(1, Ordering::Relaxed);
    crash_point!(Ok(Grew::Added));
    Ok(Grew::Added)
}

/// The end of the arena's file as the directory says: the end of the last published segment
/// of any kind, or the base file's end. Checked: a directory entry out of range is
/// corruption.
pub fn file_end(a: &Arena<'_>) -> PResult<u64> {
    end_of(a, None)
}

/// [`file_end`]; `latest`: under the grow claim, each count read by an RMW (the latest in its
/// modification order, whoever held the claim before), kind `c`'s given as `n` (read so by the
/// caller).
fn end_of(a: &Arena<'_>, latest: Option<(usize, u64)>) -> PResult<u64> {
    let mut end = a.base_len;
    // Kinds that may not grow have no segments: not even their counts are read.
    for c in (0..a.nclasses)
        .chain([DEDUP_KIND, GROUP_KIND])
        .filter(|&c| a.growth(c) > 0)
    {
        let published = match latest {
            Some((k, n)) if k == c => n.min(u64::from(a.growth(c))) as u32,
            // AcqRel: see `grow_locked`.
            Some(_) => crate::sync::idempotent_rmw_u64(&a.hdr.grow.0.segments[c], Ordering::AcqRel)
                .min(u64::from(a.growth(c))) as u32,
            None => a.published(c),
        };
        for k in 1..=published {
            // Relaxed: published by the count's Release store, read by an Acquire or AcqRel
            // operation above.
            let off = a.directory[c * MAX_SEGMENTS + k as usize - 1].load(Ordering::Relaxed);
            let (_, len) = a.segment_layout(c, k)?;
            let e = off
                .checked_add(len)
                .filter(|&e| off >= a.base_len && e <= a.size_limit && off % PAGE == 0)
                .ok_or(Fault::Corrupted("a segment's offset is out of range"))?;
            end = end.max(e);
        }
    }
    Ok(end)
}

/// Takes the grow claim, or takes it over from a proven-dead owner. Returns whether we hold it.
fn take_claim(a: &Arena<'_>, env: &dyn Env, me: Owner) -> bool {
    let w = &a.hdr.grow.0.claim;
    // SYNC POINT(claim): AcqRel/Acquire, as a group claim: the previous holder's writes (its
    // directory entry and count) happen before ours.
    match w.compare_exchange(0, me.bits(), Ordering::AcqRel, Ordering::Acquire) {
        Ok(_) => true,
        Err(cur) => {
            let holder = Owner::of_word(cur);
            holder != me
                && a.owner_dead(env, holder)
                && w.compare_exchange(cur, me.bits(), Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
        }
    }
}

/// Gives the grow claim up if it still names us.
fn release_claim(a: &Arena<'_>, me: Owner) {
    // SYNC POINT(claim): Release hands our directory writes to the next holder.
    let _ = a
        .hdr
        .grow
        .0
        .claim
        .compare_exchange(me.bits(), 0, Ordering::Release, Ordering::Relaxed);
}

/// How large the arena is and may grow, for `stat`, `inspect`, the metrics and the queue
/// attributes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Size {
    /// Bytes of the file in use: the base file and every published segment.
    pub bytes: u64,
    /// Bytes of the base file.
    pub base: u64,
    /// The size limit.
    pub limit: u64,
    /// Segments added over the arena's life.
    pub grows: u64,
    /// Growths the file system refused (no space).
    pub refused: u64,
}

/// The arena's size now (a snapshot; a corrupted directory counts as the base file).
pub fn size(a: &Arena<'_>) -> Size {
    let line = &a.hdr.grow.0;
    Size {
        bytes: file_end(a).unwrap_or(a.base_len),
        base: a.base_len,
        limit: a.size_limit,
        // Relaxed: statistics.
        grows: line.grows.load(Ordering::Relaxed),
        refused: line.refused.load(Ordering::Relaxed),
    }
}
