//! Size-classed message slots: allocation by CAS on the `vis` word, owner-tagged.
//!
//! A slot is free when its `vis` field is `FREE`. Allocation scans from a caller-chosen start
//! (each handle keeps its own cursor, so processes spread out) and claims the first free slot
//! with one CAS to `CLAIMED(owner)`; a producer that dies while holding a claim leaves a slot
//! that recovery can attribute to it. Freeing is one CAS back to `FREE` with the epoch bumped.

use super::grow::{self, Grew};
use super::{doorbell, node, vis, Arena, Env, Fault, Owner, PResult};
use crate::layout::segment_slots;
use crate::layout::MsgHeader;
use crate::sync::{fence, Ordering};

/// Classes whose slots hold at least this many payload bytes reuse the slot freed last first
/// (`Header::free_hint`): for large messages the cost is the payload's cache misses, and a
/// producer that walks a class round robin touches every slot's lines in turn (64 MiB for the
/// 1 MiB class), while the slot freed last is usually still cached. Smaller classes keep the
/// round robin and never touch the hint line.
pub const HINT_MIN_CAP: u32 = 4096;

/// A slot [`alloc_slot`] claimed: where it is, so that the caller need not locate its index.
#[derive(Debug, Clone, Copy)]
pub struct Claimed<'a> {
    /// Global index.
    pub idx: u32,
    /// Its new incarnation.
    pub inc: u32,
    /// The epoch of its `vis` word while claimed.
    pub epoch0: u32,
    /// Its header.
    pub h: &'a MsgHeader,
    /// The start of its payload (`cap` bytes, in the base file or a mapped segment).
    pub start: *mut u8,
    /// Usable payload bytes of its class.
    pub cap: u32,
}

/// [`alloc`], returning the slot's header, payload and capacity as well.
pub fn alloc_slot<'a>(
    a: &Arena<'a>,
    env: &dyn Env,
    class: usize,
    start: u64,
    owner: Owner,
) -> PResult<Claimed<'a>> {
    let cl = class_at(a, class)?;
    // The slot at the caller's cursor, when it lies in a round-robin class's base file or in
    // a segment this process knows of: the first slot `alloc`'s scan would try, claimed here
    // without its setup (a producer's cursor sits just past the slot it took last, so in a
    // stream it is usually free; in a class that grew, three quarters of the time in a
    // segment).
    if cl.cap < HINT_MIN_CAP {
        let at = match usize::try_from(start).ok().and_then(|i| cl.headers.get(i)) {
            // Inside the class's payload array, as `Arena::slot` computes it.
            Some(h) => Some((h, cl.payload.wrapping_add(start as usize * cl.stride))),
            // A segment that cannot be mapped (a damaged directory) is left to the scan.
            None if start < cl.slots_with(a.known_segments(class)) => a.slot(class, start).ok(),
            None => None,
        };
        if let Some((h, payload)) = at {
            if let Some((inc, epoch0)) = try_claim(h, owner)? {
                return Ok(Claimed {
                    // `start` is below the class's slots (fewer than 2^32 in all).
                    idx: cl.base + start as u32,
                    inc,
                    epoch0,
                    h,
                    start: payload,
                    cap: cl.cap,
                });
            }
        }
    }
    let (idx, inc, epoch0) = alloc(a, env, class, start, owner)?;
    // `idx` is `cl.base` plus a position the scan found within the class.
    let (h, start) = a.slot(class, u64::from(idx.wrapping_sub(cl.base)))?;
    Ok(Claimed {
        idx,
        inc,
        epoch0,
        h,
        start,
        cap: cl.cap,
    })
}

/// Size class `class` of the arena (an index past its classes is a damaged word's).
#[inline]
fn class_at<'a>(a: &Arena<'a>, class: usize) -> PResult<super::Class<'a>> {
    a.classes
        .get(class)
        .copied()
        .flatten()
        .ok_or(Fault::Corrupted("class"))
}

/// Claims a free slot of class `class` for `owner`, scanning from `start`; a class whose
/// every slot is taken grows by a segment ([`grow`]) while its size limit allows.
///
/// Returns the global index, the new incarnation and the epoch the slot was claimed at.
pub fn alloc(
    a: &Arena<'_>,
    env: &dyn Env,
    class: usize,
    start: u64,
    owner: Owner,
) -> PResult<(u32, u32, u32)> {
    let cl = class_at(a, class)?;
    if cl.cap >= HINT_MIN_CAP {
        // Relaxed: a hint (index + 1 of the slot freed last); the claim CAS decides.
        let hint = a.hdr.free_hint.0[class].load(Ordering::Relaxed);
        let i = hint.wrapping_sub(1).wrapping_sub(u64::from(cl.base));
        if hint != 0 && i < cl.max_slots() {
            if let Ok((h, _)) = a.slot(class, i) {
                if let Some((inc, epoch)) = try_claim(h, owner)? {
                    return Ok((cl.base + i as u32, inc, epoch));
                }
            }
        }
    }
    // Every slot of the segments this process knows of (no shared word read: the hot path
    // of a class that does not grow reads nothing of the growth line), from the caller's
    // cursor (a producer's cursor sits just past the slot it took last, so a filling backlog
    // finds the next free slot at once); when every slot is taken, the shared count (a
    // segment another process added: `Grew::Found`) or a new segment, whose slots are all
    // free.
    let mut seen = a.known_segments(class);
    // A class that starts empty (layout 15) and has no segment yet holds no slot.
    let mut from = start.checked_rem(cl.slots_with(seen)).unwrap_or(0);
    let mut wrap = true;
    let growth = if env.may_grow() { cl.growth } else { 0 };
    for _ in 0..=growth + 1 {
        let now = cl.slots_with(seen);
        if let Some(got) = scan(a, class, from, now, owner)? {
            return Ok(got);
        }
        if wrap {
            if let Some(got) = scan(a, class, 0, from, owner)? {
                return Ok(got);
            }
        }
        if growth == 0 {
            break; // not in this operation (see `Env::may_grow`)
        }
        match grow::grow(a, env, owner, class, seen)? {
            Grew::Added | Grew::Found => {
                // Only the new slots are worth a look (another producer's, or ours).
                from = now;
                wrap = false;
                seen = a.refresh_segments(class);
            }
            Grew::AtLimit => break,
        }
    }
    Err(Fault::ClassFull(class))
}

/// Claims the first free slot of class `class` at positions `from .. to` (within the class,
/// across its segments): its global index, incarnation and epoch.
fn scan(
    a: &Arena<'_>,
    class: usize,
    from: u64,
    to: u64,
    owner: Owner,
) -> PResult<Option<(u32, u32, u32)>> {
    let cl = a.classes[class].ok_or(Fault::Corrupted("class"))?;
    let n = cl.n();
    let mut i = from;
    while i < to {
        let (k, j) = super::segments::segment_of(n, i);
        let first = i - j;
        if k == 0 {
            let end = to.min(u64::from(n));
            for x in i..end {
                if let Some((inc, epoch)) = try_claim(&cl.headers[x as usize], owner)? {
                    return Ok(Some((cl.base + x as u32, inc, epoch)));
                }
            }
            i = end;
            continue;
        }
        let m = a.segment(class, k)?;
        let end = to.min(first + segment_slots(n, k));
        for x in i..end {
            // SAFETY: `segment` mapped the whole segment, `segment_slots(n, k)` headers, for
            // the arena's life, and `x - first` is below that; headers are atomics, valid for
            // any bit pattern.
            let h = unsafe { &*m.headers().add((x - first) as usize) };
            if let Some((inc, epoch)) = try_claim(h, owner)? {
                return Ok(Some((cl.base + x as u32, inc, epoch)));
            }
        }
        i = end;
    }
    Ok(None)
}

/// Claims slot `h` for `owner` if it is free: its new incarnation and epoch, or `None`.
#[inline]
fn try_claim(h: &MsgHeader, owner: Owner) -> PResult<Option<(u32, u32)>> {
    // Relaxed: only a hint; the CAS below is what decides.
    let w = h.own.vis.load(Ordering::Relaxed);
    if vis::state(w) != vis::State::Free {
        return Ok(None);
    }
    let epoch = vis::next(vis::epoch(w));
    // SYNC POINT(slot-free): Acquire pairs with the Release CAS in `free`, so the previous
    // incarnation's last reads of header and payload happen before our writes.
    if h.own
        .vis
        .compare_exchange(
            w,
            vis::pack(epoch, vis::claimed(owner)),
            Ordering::Acquire,
            Ordering::Relaxed,
        )
        .is_err()
    {
        return Ok(None);
    }
    crash_point!();
    // Relaxed load: the slot is ours. The new incarnation reaches receivers through the
    // SeqCst link CAS that makes the node reachable (SYNC POINT(node-link)); the store is
    // Release for peekers, who read slots without a claim (SYNC POINT(peek-seqlock)): one that
    // sees the new incarnation also sees this claim and every free before it.
    let inc = node::inc(h.link.load(Ordering::Relaxed)).wrapping_add(1);
    h.link.store(node::pack(inc, node::NIL), Ordering::Release);
    // SYNC POINT(peek-seqlock): Release orders the claim and the new incarnation before the
    // payload writes that follow, against `inspect::peek`'s Acquire fence: a peeker that
    // copied any of the new payload sees the slot changed when it re-checks. (On x86 both are
    // compiler barriers only.)
    fence(Ordering::Release);
    Ok(Some((inc, epoch)))
}

/// Frees slot `idx` if its `vis` word still equals `expected` (a `DELETED` or `CLAIMED` word),
/// then rings the space doorbell if a producer waits for a slot. Returns whether this call
/// freed it.
pub fn free(a: &Arena<'_>, env: &dyn Env, idx: u32, expected: u64) -> PResult<bool> {
    let h = a.msg(idx)?;
    let epoch = vis::next(vis::epoch(expected));
    // SYNC POINT(slot-free): Release (within SeqCst) orders our reads of the slot before the
    // next claimer's Acquire CAS in `alloc`. SYNC POINT(space-doorbell): SeqCst puts this free
    // in the single total order before `notify_space`'s SeqCst load of the waiters (a locked
    // CAS either way on x86).
    let freed = h
        .own
        .vis
        .compare_exchange(
            expected,
            vis::pack(epoch, vis::FREE),
            Ordering::SeqCst,
            Ordering::Relaxed,
        )
        .is_ok();
    if freed {
        crash_point!(Ok(true));
        if idx >= a.hint_from {
            hint_freed(a, idx)?;
        }
        doorbell::notify_space(a, env);
    }
    Ok(freed)
}

/// Names slot `idx` of a class at or past [`HINT_MIN_CAP`] as the one freed last (see
/// [`alloc`]). Out of line: inlined in a loop, the class look-up's loads were hoisted to the
/// top of every call.
#[inline(never)]
fn hint_freed(a: &Arena<'_>, idx: u32) -> PResult<()> {
    // Relaxed: a hint for the next producer of this class; a stale or lost one only sends it
    // to the round robin.
    let (c, _) = a.locate(idx)?;
    a.hdr.free_hint.0[c].store(u64::from(idx) + 1, Ordering::Relaxed);
    Ok(())
}

/// Frees a node that was a group's dummy, if it is a message in the `DELETED` state of the
/// expected incarnation: [`free_dummies`] of one node, without its loop (a single message's
/// delete frees one).
pub fn free_dummy(a: &Arena<'_>, env: &dyn Env, node_ref: u64) -> PResult<()> {
    if free_one(a, node_ref)? {
        ring_after_frees(a, env);
    }
    Ok(())
}

/// Under their group's claim: frees the nodes of `run` (dummies `head` moved past) that are
/// still messages in the `DELETED` state of the expected incarnation, then rings the space
/// doorbell once if a producer waits. Idempotent: a node freed already (and perhaps claimed
/// again) is left alone; a group's sentinel (no slot, only ever a run's first node) is
/// skipped. Last node first: what is not freed yet (a freer that dies midway) stays a prefix
/// of the run, linked from its first node (each node's link changes only when the slot is
/// claimed again), which `release::free_pending` walks.
///
/// Each slot is freed by a store, not a CAS: only the holder of its group's claim writes the
/// `vis` word of a `DELETED` node of the group's list (deletes, visibility changes, takes,
/// recovery's releases and the sweeps all expect another state, and a quarantine frees only a
/// group it marked under the claim, which nobody claims again), so the word cannot change
/// between the check and the store. A run of ten costs one locked instruction (the fence
/// after it), not ten. Damaged shared memory that breaks the claim's exclusion can make two
/// freers store the same free word (a slot is claimed by a CAS from it, so by one producer);
/// it cannot make us read or write out of bounds.
pub fn free_dummies(a: &Arena<'_>, env: &dyn Env, run: &[u64]) -> PResult<()> {
    let mut freed = false;
    for &node_ref in run.iter().rev() {
        match free_one(a, node_ref) {
            Ok(f) => freed |= f,
            Err(f) => {
                // A damaged node further on (or a segment that cannot be mapped): the slots
                // freed before it still ring (a stopped participant does nothing more).
                if freed && !super::stopped(f) {
                    ring_after_frees(a, env);
                }
                return Err(f);
            }
        }
    }
    if freed {
        ring_after_frees(a, env);
    }
    Ok(())
}

/// One node of [`free_dummies`], freed by a Release store; no fence, no doorbell. Returns
/// whether it freed the slot.
#[inline(always)]
fn free_one(a: &Arena<'_>, node_ref: u64) -> PResult<bool> {
    let idx = node::index(node_ref);
    if idx >= a.total {
        return Ok(false); // a sentinel, not a slot
    }
    let h = a.msg(idx)?;
    // Acquire: pairs with the Release store or CAS that set DELETED (layout 25: a delete
    // under the claim stores it), so freeing is ordered after the deleter's last access (a
    // handle holder's CAS that such a store overwrote is not: it reads no payload).
    let l = h.link.load(Ordering::Acquire);
    if node::inc(l) != node::inc(node_ref) {
        return Ok(false); // already freed and reused
    }
    let w = h.own.vis.load(Ordering::Acquire);
    // Re-check the incarnation: a reallocation stores a new `link` before its node can be
    // deleted, so an unchanged incarnation proves `w` belongs to the dummy we were given.
    if node::inc(h.link.load(Ordering::Acquire)) != node::inc(node_ref)
        || vis::state(w) != vis::State::Deleted
    {
        return Ok(false);
    }
    // SYNC POINT(slot-free): Release orders our reads of the slot before the next claimer's
    // Acquire CAS in `alloc`.
    h.own.vis.store(
        vis::pack(vis::next(vis::epoch(w)), vis::FREE),
        Ordering::Release,
    );
    crash_point!();
    if idx >= a.hint_from {
        hint_freed(a, idx)?;
    }
    Ok(true)
}

/// After the free stores of [`free_dummies`]: the fence, then the space doorbell if a
/// producer waits.
#[inline]
fn ring_after_frees(a: &Arena<'_>, env: &dyn Env) {
    // SYNC POINT(space-doorbell): the SeqCst fence after our free stores, before
    // `notify_space_after_fence`'s load of the waiters, against the waiter's SeqCst increment
    // and fence before its retry (two fences: either our load sees the waiter or its retry
    // sees the slots free). On x86 a locked `or` on the stack: one locked instruction for a
    // run, as the one CAS of a single free was.
    fence(Ordering::SeqCst);
    doorbell::notify_space_after_fence(a, env);
}
