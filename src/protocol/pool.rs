//! Size-classed message slots: allocation by CAS on the `vis` word, owner-tagged.
//!
//! A slot is free when its `vis` field is `FREE`. Allocation scans from a caller-chosen start
//! (each handle keeps its own cursor, so processes spread out) and claims the first free slot
//! with one CAS to `CLAIMED(owner)`; a producer that dies while holding a claim leaves a slot
//! that recovery can attribute to it. Freeing is one CAS back to `FREE` with the epoch bumped.

use super::{doorbell, node, vis, Arena, Env, Fault, Owner, PResult};
use crate::sync::{fence, Ordering};

/// Claims a free slot of class `class` for `owner`, scanning from `start`.
///
/// Returns the global index, the new incarnation and the epoch the slot was claimed at.
pub fn alloc(a: &Arena<'_>, class: usize, start: u64, owner: Owner) -> PResult<(u32, u32, u32)> {
    let cl = a
        .classes
        .get(class)
        .copied()
        .flatten()
        .ok_or(Fault::Corrupted("class"))?;
    let n = cl.headers.len();
    if n == 0 {
        return Err(Fault::ClassFull(class));
    }
    let start = (start % n as u64) as usize;
    for k in 0..n {
        let i = if start + k >= n {
            start + k - n
        } else {
            start + k
        };
        let h = &cl.headers[i];
        // Relaxed: only a hint; the CAS below is what decides.
        let w = h.vis.load(Ordering::Relaxed);
        if vis::state(w) != vis::State::Free {
            continue;
        }
        let epoch = vis::next(vis::epoch(w));
        // SYNC POINT(slot-free): Acquire pairs with the Release CAS in `free`, so the previous
        // incarnation's last reads of header and payload happen before our writes.
        if h.vis
            .compare_exchange(
                w,
                vis::pack(epoch, vis::claimed(owner)),
                Ordering::Acquire,
                Ordering::Relaxed,
            )
            .is_ok()
        {
            crash_point!();
            // Relaxed load: the slot is ours. The new incarnation reaches receivers through
            // the SeqCst link CAS that makes the node reachable (SYNC POINT(node-link)); the
            // store is Release for peekers, who read slots without a claim (SYNC
            // POINT(peek-seqlock)): one that sees the new incarnation also sees this claim
            // and every free before it.
            let inc = node::inc(h.link.load(Ordering::Relaxed)).wrapping_add(1);
            h.link.store(node::pack(inc, node::NIL), Ordering::Release);
            // SYNC POINT(peek-seqlock): Release orders the claim and the new incarnation
            // before the payload writes that follow, against `inspect::peek`'s Acquire fence:
            // a peeker that copied any of the new payload sees the slot changed when it
            // re-checks. (On x86 both are compiler barriers only.)
            fence(Ordering::Release);
            return Ok((cl.base + i as u32, inc, epoch));
        }
    }
    Err(Fault::ClassFull(class))
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
        doorbell::notify_space(a, env);
    }
    Ok(freed)
}

/// Frees a node that was a group's dummy, if it is a message in the `DELETED` state of the
/// expected incarnation. Idempotent: a second call finds it freed and does nothing.
pub fn free_dummy(a: &Arena<'_>, env: &dyn Env, node_ref: u64) -> PResult<()> {
    let idx = node::index(node_ref);
    if idx >= a.total {
        return Ok(()); // a sentinel, not a slot
    }
    let h = a.msg(idx)?;
    // Acquire: pairs with the Release/SeqCst CAS that set DELETED, so freeing is ordered after
    // the deleter's last access.
    let l = h.link.load(Ordering::Acquire);
    if node::inc(l) != node::inc(node_ref) {
        return Ok(()); // already freed and reused
    }
    let w = h.vis.load(Ordering::Acquire);
    // Re-check the incarnation: a reallocation stores a new `link` before its node can be
    // deleted, so an unchanged incarnation proves `w` belongs to the dummy we were given.
    if node::inc(h.link.load(Ordering::Acquire)) != node::inc(node_ref) {
        return Ok(());
    }
    if vis::state(w) == vis::State::Deleted {
        free(a, env, idx, w)?;
    }
    Ok(())
}
