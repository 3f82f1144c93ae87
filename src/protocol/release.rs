//! Releasing a group's claim: the cleanup a holder runs before it lets go (moving `head` past
//! deleted messages, retiring an empty group), DIRTY requests from deleters, and the
//! readiness re-check after the release (SYNC POINT(claim)).

use super::ready::hint_if_ready;
use super::Owner;
use super::{gstate, node, owner, pool, vis, Arena, Env, Fault, PResult, MAX_STEPS};
use crate::layout::GroupEntry;
use crate::sync::Ordering;

/// Outcome of a cleanup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cleaned {
    /// The group is still active.
    Kept,
    /// The group was retired and our claim released.
    Retired,
}

/// Under the claim: frees a dead holder's pending dummy, moves `head` past deleted nodes, and
/// retires the group if it is empty.
pub(crate) fn cleanup(a: &Arena<'_>, env: &dyn Env, cw: u64, e: &GroupEntry) -> PResult<Cleaned> {
    finish(e, cw, cleanup_inner(a, env, e, false)?)
}

/// [`cleanup`] by a receive about to take the first live message: each node it visits is read
/// for writing (`sync::load_for_write_u64`, SeqCst): the first live message, which the receive
/// marks in flight next, so its line comes from the producer once, exclusively, not shared
/// and then again (one line less a received message, one locked instruction more); and any
/// deleted message before it (rare here: a delete's own cleanup moves past them), which
/// becomes the dummy and is freed when `head` moves on. Other cleanups stop at a message
/// nobody writes next, and mostly walk deleted messages the caller deleted itself: a plain
/// load.
pub(crate) fn cleanup_before_take(
    a: &Arena<'_>,
    env: &dyn Env,
    cw: u64,
    e: &GroupEntry,
) -> PResult<Cleaned> {
    finish(e, cw, cleanup_inner(a, env, e, true)?)
}

fn finish(e: &GroupEntry, cw: u64, r: Cleaned) -> PResult<Cleaned> {
    if r == Cleaned::Retired {
        release_claim_word(e, cw);
    }
    Ok(r)
}

/// The most deleted nodes one step of a cleanup moves `head` past (one swap), and frees.
const RUN: usize = 16;

fn cleanup_inner(a: &Arena<'_>, env: &dyn Env, e: &GroupEntry, for_take: bool) -> PResult<Cleaned> {
    // Acquire: pairs with the Release stores of a holder that released the claim to us (SYNC
    // POINT(claim)). A holder that died never released it: its writes all came before its
    // death, which reached us through the kernel (its liveness lock, `owner_dead`), so they are
    // visible to the stealer that learned of it.
    let p = e.pending_free.load(Ordering::Acquire);
    if p != 0 {
        let h = e.head.load(Ordering::Acquire);
        if p != h {
            free_pending(a, env, p, h)?;
        }
        e.pending_free.store(0, Ordering::Release);
    }
    for _ in 0..a.steps() {
        let h = e.head.load(Ordering::Acquire);
        let hlw = a.link(node::index(h))?;
        let hl = hlw.load(Ordering::Acquire);
        if node::inc(hl) != node::inc(h) {
            // Only a retire frees the dummy (invariant 1): finish it.
            finish_retire(a, env, e, h)?;
            return Ok(Cleaned::Retired);
        }
        match node::index(hl) {
            node::CLOSED => {
                finish_retire(a, env, e, h)?;
                return Ok(Cleaned::Retired);
            }
            node::NIL => {
                // Empty: close the list so no append can succeed, then retire. SeqCst: orders
                // the close against appenders' SeqCst link CAS (exactly one of them wins).
                if hlw
                    .compare_exchange(
                        hl,
                        node::pack(node::inc(hl), node::CLOSED),
                        Ordering::SeqCst,
                        Ordering::Relaxed,
                    )
                    .is_ok()
                {
                    crash_point!();
                    finish_retire(a, env, e, h)?;
                    return Ok(Cleaned::Retired);
                }
                continue; // an append won: look again
            }
            next => {
                // The run of deleted nodes after the dummy `h` (at most RUN): the last becomes
                // the dummy, by one swap of `head`, and `h` and the others are freed.
                let mut run = [0u64; RUN];
                let mut n = 0;
                let mut dummy = h;
                let mut at = next;
                while n < RUN {
                    let m = a.msg(at)?;
                    // SeqCst: SYNC POINT(ready-check) on the next iteration / post-release
                    // check.
                    let w = if for_take {
                        crate::sync::load_for_write_u64(&m.vis, Ordering::SeqCst)
                    } else {
                        m.vis.load(Ordering::SeqCst)
                    };
                    if vis::state(w) != vis::State::Deleted {
                        break;
                    }
                    let l = m.link.load(Ordering::Acquire);
                    run[n] = dummy;
                    n += 1;
                    dummy = node::pack(node::inc(l), at);
                    match node::index(l) {
                        node::NIL | node::CLOSED => break,
                        i => at = i,
                    }
                }
                if n == 0 {
                    return Ok(Cleaned::Kept);
                }
                let run = &run[..n];
                // Invariant 2: never leave `tail` on a node about to be freed. AcqRel pairs
                // with appenders' Acquire loads of `tail`. `tail` moves only forward along the
                // list (appenders' helping CAS, ours), and we see it at least where the
                // cleanup that made `h` the dummy left it (the claim's Acquire, or our own
                // CAS): on a node of the run or past it. A failed CAS saw it move forward, so
                // this ends within the run's length; a value past the run stays past it (the
                // incarnation in the word rules out a reused node), and a locked CAS is saved
                // where `tail` is past already (the common case: only the list's last node
                // has `tail` on it).
                for _ in 0..=n {
                    let t = e.tail.load(Ordering::Acquire);
                    if !run.contains(&t)
                        || e.tail
                            .compare_exchange(t, dummy, Ordering::AcqRel, Ordering::Relaxed)
                            .is_ok()
                    {
                        break;
                    }
                }
                crash_point!();
                // The run's first slot (a group's sentinel is no slot, and only ever the
                // first node of a run) names the run for a holder after us, should we die
                // before it is freed (`free_pending`). Release: a holder we hand the claim to
                // sees it (one that takes it after our death, by learning of the death).
                let first = run.iter().copied().find(|&r| node::index(r) < a.total);
                if let Some(f) = first {
                    e.pending_free.store(f, Ordering::Release);
                }
                crash_point!();
                // SYNC POINT(ready-check): a swap (AcqRel) against the producer's RMW on `head`;
                // our later loads of `vis` see any producer whose RMW came first.
                e.head.swap(dummy, Ordering::AcqRel);
                crash_point!();
                free_last_first(a, env, run)?;
                if first.is_some() {
                    e.pending_free.store(0, Ordering::Release);
                }
            }
        }
    }
    Err(Fault::Corrupted("cleanup did not converge"))
}

/// Frees what a dead holder's cleanup left of its run (named by `p`, the run's first slot; its
/// new dummy `h` is `head` now): the prefix of the run it had not freed, since it freed the
/// run last node first. Walks from `p` along the links while each node is still the run's:
/// the incarnation `p` names (then its group's), deleted, in the same group, at the next
/// position, and before `h`'s position. A node the holder freed is free, or claimed again
/// with a new incarnation, or linked again at a later position (past `h`'s) or in another
/// group; the walk stops there. Where `head` was not moved yet (the holder died before its
/// swap) the run is still in the list, behind a sentinel of position 0: nothing qualifies.
#[cold]
#[inline(never)]
fn free_pending(a: &Arena<'_>, env: &dyn Env, p: u64, h: u64) -> PResult<()> {
    // Relaxed: the dead holder's writes came before its death, which we learned of (see
    // `cleanup_inner`); positions and groups of deleted nodes do not change until they are
    // freed, and the incarnation re-check below catches a slot freed and claimed meanwhile.
    let end = if node::index(h) < a.total {
        a.msg(node::index(h))?.pos.load(Ordering::Relaxed)
    } else {
        0
    };
    let mut run = [0u64; RUN];
    let mut n = 0;
    let mut cur = p;
    let mut last: Option<(u64, u32)> = None;
    while n < RUN && cur != h && node::index(cur) < a.total {
        let m = a.msg(node::index(cur))?;
        // Acquire: as `pool::free_dummy`, pairs with the CAS that set DELETED.
        let l = m.link.load(Ordering::Acquire);
        if node::inc(l) != node::inc(cur)
            || vis::state(m.vis.load(Ordering::Acquire)) != vis::State::Deleted
        {
            break;
        }
        let pos = m.pos.load(Ordering::Relaxed);
        let g = super::words::group_of(m.group_epoch0.load(Ordering::Relaxed));
        let follows = last.is_none_or(|(lp, lg)| lg == g && lp.wrapping_add(1) == pos);
        // Re-checked: an unchanged incarnation proves the words read belong to this node.
        if !follows || pos >= end || node::inc(m.link.load(Ordering::Acquire)) != node::inc(cur) {
            break;
        }
        run[n] = cur;
        n += 1;
        last = Some((pos, g));
        let next = node::index(l);
        if next >= a.total {
            break; // NIL, CLOSED or a sentinel: not a node of the run
        }
        cur = node::pack(node::inc(a.link(next)?.load(Ordering::Acquire)), next);
    }
    // Last first, as the holder did.
    free_last_first(a, env, &run[..n])
}

/// Frees the slots of `run` last node first: what is not freed yet stays a prefix of the run,
/// linked from its first node (each node's link changes only when the slot is claimed again).
/// The sentinel, only ever a run's first node, is no slot to free.
fn free_last_first(a: &Arena<'_>, env: &dyn Env, run: &[u64]) -> PResult<()> {
    for &r in run.iter().rev().filter(|&&r| node::index(r) < a.total) {
        pool::free_dummy(a, env, r)?;
        crash_point!();
    }
    Ok(())
}

/// Frees the dummy `h` of a closed list and retires the entry into a kept group (layout 17:
/// its key and its place in the count stay for its next send, see `group`).
fn finish_retire(a: &Arena<'_>, env: &dyn Env, e: &GroupEntry, h: u64) -> PResult<()> {
    pool::free_dummy(a, env, h)?;
    crash_point!();
    // Acquire: the state word as of our claim.
    let st = e.state.load(Ordering::Acquire);
    if gstate::kind(st) == gstate::ACTIVE {
        super::kept::keep(e, st);
    }
    Ok(())
}

/// What a step made under group `e`'s claim `cw` returned: on a fault (a corrupted word met
/// under the claim), the claim is given up first, so that the fault breaks the operation and
/// never leaves the group held by a process that goes on living (its later operations, and
/// everyone else's, would wait on it). Under loom a participant stopped forever keeps it.
pub(crate) fn or_release<T>(e: &GroupEntry, cw: u64, r: PResult<T>) -> PResult<T> {
    if let Err(f) = &r {
        if super::stopped(*f) {
            return r;
        }
        release_claim_word(e, cw);
    }
    r
}

/// Gives up the claim word if it still names us (any DIRTY bit is moot after a retire).
pub(crate) fn release_claim_word(e: &GroupEntry, cw: u64) {
    for _ in 0..64 {
        // Relaxed: the CAS below carries the ordering.
        let cur = e.claim.load(Ordering::Relaxed);
        if owner::clean(cur) != cw {
            return;
        }
        // SYNC POINT(claim): Release hands our writes to the next holder.
        if e.claim
            .compare_exchange(cur, 0, Ordering::Release, Ordering::Relaxed)
            .is_ok()
        {
            return;
        }
    }
}

/// Releases group `g`'s claim `cw`, cleaning up again for every DIRTY request, then re-hints
/// the group if it has a deliverable message (H5: a delete that unlocks a group wakes a
/// receiver).
#[inline]
pub(crate) fn release(a: &Arena<'_>, env: &dyn Env, me: Owner, cw: u64, g: u32) -> PResult<()> {
    let e = a.group(g)?;
    for _ in 0..MAX_STEPS {
        // Acquire: a deleter's DIRTY request carries its delete (Release CAS).
        let cur = e.claim.load(Ordering::Acquire);
        if owner::clean(cur) != cw {
            return Ok(()); // taken from us (we were presumed dead) or corrupted
        }
        if cur & owner::DIRTY != 0 {
            if e.claim
                .compare_exchange(cur, cw, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
                && cleanup(a, env, cw, e)? == Cleaned::Retired
            {
                return Ok(());
            }
            continue;
        }
        // SYNC POINT(claim): SeqCst release; also orders it before the readiness check.
        if e.claim
            .compare_exchange(cw, 0, Ordering::SeqCst, Ordering::Relaxed)
            .is_ok()
        {
            break;
        }
    }
    hint_if_ready(a, env, me, g, e)
}
