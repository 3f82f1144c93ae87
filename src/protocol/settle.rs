//! Settling a dead producer's send: its dedup entry first (invariant D), then its slot,
//! published if its link CAS had committed it, else freed.
//!
//! `settle` and `dedup` are the one deliberate import pair of the protocol: a reservation that
//! meets a dead sender's pending entry settles it here, and a settle commits or aborts the
//! entry there.

use super::dedup::{self, PENDING};
use super::group::{self, TryClaim};
use super::ready::hint_if_ready;
use super::release::{or_release, release};
use super::Owner;
use super::{gstate, node, pool, vis, words, Arena, Env, Fault, PResult};
use crate::layout::MsgHeader;
use crate::sync::Ordering;

/// Settles a dead producer's slot `idx`, claimed in vis word `w`: its dedup entry first
/// (invariant D), then the slot: published if its link CAS had committed it, else freed.
pub fn settle_dead_send(
    a: &Arena<'_>,
    env: &dyn Env,
    me: Owner,
    idx: u32,
    w: u64,
) -> PResult<Settled> {
    if !matches!(vis::state(w), vis::State::Claimed(_)) {
        return Ok(Settled::Raced);
    }
    let h = a.msg(idx)?;
    let linked = match find_in_group(a, env, me, h, idx)? {
        Walked::Found => Link::Linked,
        Walked::Absent => Link::Unlinked,
        Walked::Busy => return Ok(Settled::Busy),
    };
    settle_known(a, env, me, idx, w, linked, Then::HintGroup)
}

/// Settles a dead producer's slot `idx` (claimed in `w`) once it is known whether its node is
/// linked (found in its group's list under the claim): its dedup entry first (invariant D),
/// then the slot: published (and its group hinted unless `then` says not) if linked, else freed.
pub(crate) fn settle_known(
    a: &Arena<'_>,
    env: &dyn Env,
    me: Owner,
    idx: u32,
    w: u64,
    linked: Link,
    then: Then,
) -> PResult<Settled> {
    let vis::State::Claimed(o) = vis::state(w) else {
        return Ok(Settled::Raced);
    };
    let h = a.msg(idx)?;
    // Relaxed: the dead producer's last writes, ordered before its link CAS (if any), which
    // `linked` read with Acquire; a stale value names no matching entry.
    let back = h.own.recv_ms.load(Ordering::Relaxed);
    let inc = node::inc(h.link.load(Ordering::Acquire));
    let seq = if linked == Link::Linked {
        let g = words::group_of(h.group_epoch0.load(Ordering::Relaxed));
        // Relaxed: written before the group was published.
        let hi = a.group(g)?.seq_base.load(Ordering::Relaxed);
        Some((hi, h.pos.load(Ordering::Relaxed)))
    } else {
        None
    };
    // Relaxed: as `back`. A pack's (layout 22) unit word was written before any of its
    // entries named the slot (`set_msg`) and before its link: a stale one, of a producer that
    // died before writing it, comes with a stale directory, whose back-pointers name no entry
    // of this incarnation.
    let lens = h.own.lens.load(Ordering::Relaxed);
    let packed = lens >> 56 == u64::from(words::LENS_PACKED);
    if packed {
        let (k, _) = words::unpack_unit_lens(lens);
        // SAFETY: the slot is claimed by its dead producer, and settlers copy nothing into a
        // payload: no participant of this process copies into it while we look.
        if let Ok(members) = unsafe { a.members(idx, k) } {
            for (j, m) in members.iter().enumerate() {
                // Relaxed: as `back` above.
                let back = m.recv_ms.load(Ordering::Relaxed);
                let seq = seq.map(|(hi, pos)| (hi, pos.wrapping_add(j as u64)));
                settle_for_slot(a, env, back, o, idx, inc, seq, j as u8)?;
            }
        }
    } else {
        settle_for_slot(a, env, back, o, idx, inc, seq, 0)?;
    }
    if linked == Link::Linked {
        // The back-pointer is left in `recv_ms`, not cleared: `find_in_group` let go of the
        // claim, so a receiver may have published the orphan itself and taken it by now, and
        // a store of 0 here wiped its holder record (loom
        // `a_repair_resuming_after_a_take_keeps_the_holders_record`: its death then released
        // nothing, and H6's cap counted from time 0). Nothing reads the word of a published
        // message before its first take, which writes its holder record there before its CAS
        // (release on death and visibility changes read it for messages in flight only, and
        // a back-pointer names no holder).
        if h.own
            .vis
            .compare_exchange(
                w,
                vis::pack(vis::epoch(w), published_unit(packed)),
                Ordering::SeqCst,
                Ordering::Relaxed,
            )
            .is_err()
        {
            return Ok(Settled::Raced);
        }
        let g = words::group_of(h.group_epoch0.load(Ordering::Relaxed));
        if let (Then::HintGroup, Ok(e)) = (then, a.group(g)) {
            hint_if_ready(a, env, me, g, e)?;
        }
        Ok(Settled::Published)
    } else if pool::free(a, env, idx, w)? {
        Ok(Settled::Freed)
    } else {
        Ok(Settled::Raced)
    }
}

/// The state field of a unit its send published: a pack's `PACKED` (its members' words were
/// written published), a message's `Published(0)` (never received).
pub(crate) fn published_unit(packed: bool) -> u64 {
    if packed {
        vis::PACKED
    } else {
        vis::published(0)
    }
}

/// What [`settle_dead_send`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settled {
    /// The message had been linked: we published it.
    Published,
    /// The message had not been linked: we freed its slot.
    Freed,
    /// Another settler changed the slot first.
    Raced,
    /// Its group's claim is held by a live participant: try later.
    Busy,
}

/// Whether a dead producer's node is in its group's list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Link {
    /// Its link CAS committed the send: the node is in the list.
    Linked,
    /// It never linked: the send did not happen.
    Unlinked,
}

/// What a settle does after publishing a linked message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Then {
    /// Hint its group if the message can be received now (recovery).
    HintGroup,
    /// Nothing: the caller holds the group's claim and looks at the message itself (`take`).
    NoHint,
}

/// What [`find_in_group`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Walked {
    /// The node is in its group's list.
    Found,
    /// It is not (or its group is gone).
    Absent,
    /// The group's claim is held by a live participant: the check is left for a later recovery
    /// rather than waiting (its holder may be stopped).
    Busy,
}

/// Whether node `idx` is reachable in the group its header names (walks under the claim).
fn find_in_group(
    a: &Arena<'_>,
    env: &dyn Env,
    me: Owner,
    h: &MsgHeader,
    idx: u32,
) -> PResult<Walked> {
    // Relaxed: a dead producer's last write; validated by the walk.
    let g = words::group_of(h.group_epoch0.load(Ordering::Relaxed));
    let Ok(e) = a.group(g) else {
        return Ok(Walked::Absent);
    };
    // Acquire: SYNC POINT(group-publish).
    let st = e.state.load(Ordering::Acquire);
    if gstate::kind(st) != gstate::ACTIVE {
        return Ok(Walked::Absent);
    }
    let cw = match group::try_claim(a, env, e, me, gstate::ginc(st)) {
        TryClaim::Acquired { cw, .. } => cw,
        TryClaim::Gone => return Ok(Walked::Absent),
        TryClaim::Busy(_) => return Ok(Walked::Busy),
    };
    let walk = || -> PResult<bool> {
        let mut cur = e.head.load(Ordering::Acquire);
        let mut cycle = super::list::Cycle::from(cur);
        for _ in 0..a.steps() {
            let l = a.link(node::index(cur))?.load(Ordering::Acquire);
            let next = node::index(l);
            if node::inc(l) != node::inc(cur) || next == node::NIL || next == node::CLOSED {
                break;
            }
            if next == idx {
                return Ok(true);
            }
            cur = node::pack(node::inc(a.link(next)?.load(Ordering::Acquire)), next);
            if cycle.met_again(cur) {
                break; // a damaged list, without the slot
            }
        }
        Ok(false)
    };
    let found = or_release(e, cw, walk())?;
    or_release(e, cw, release(a, env, me, cw, g))?;
    Ok(if found { Walked::Found } else { Walked::Absent })
}

/// Settles the `PENDING` entry `i` (state `st`) of a dead sender: through its slot if it
/// recorded one (the slot is settled too), else by aborting it.
pub(crate) fn settle_entry(
    a: &Arena<'_>,
    env: &dyn Env,
    me: Owner,
    i: usize,
    st: u64,
) -> PResult<()> {
    let e = dedup::entry(a, i)?;
    // Acquire: SYNC POINT(dedup-msg), pairs with `set_msg`.
    let m = e.msg.load(Ordering::Acquire);
    let idx = node::index(m);
    if idx == node::NIL {
        // Never appended: its slot (if any) is freed by recovery.
        return dedup::abort(a, i as u32, st);
    }
    let h = a.msg(idx)?;
    // Acquire: the slot's current state.
    let w = h.own.vis.load(Ordering::Acquire);
    // Relaxed: an incarnation changes only after a free, which comes after the settle.
    let inc = node::inc(h.link.load(Ordering::Relaxed));
    if vis::state(w) == vis::State::Claimed(gstate::owner(st)) && inc == node::inc(m) {
        // `None`: the group's claim is held by a live participant; the caller looks again.
        let _ = settle_dead_send(a, env, me, idx, w)?;
        return Ok(());
    }
    if e.state.load(Ordering::Acquire) == st {
        return Err(Fault::Corrupted(
            "dedup entry names a message its sender no longer holds",
        ));
    }
    Ok(())
}

/// Settles the dedup entry of a dead producer's slot `idx` (owner `o`, incarnation `inc`; the
/// message `member` of its pack, 0 in a slot of its own), before the slot itself is published
/// (`linked`) or freed. Called by [`settle_dead_send`].
#[allow(clippy::too_many_arguments)]
pub fn settle_for_slot(
    a: &Arena<'_>,
    env: &dyn Env,
    back: u64,
    o: Owner,
    idx: u32,
    inc: u32,
    linked: Option<(u64, u64)>,
    member: u8,
) -> PResult<()> {
    let Some(i) = back.checked_sub(1) else {
        return Ok(());
    };
    // A stale or hostile back-pointer names no entry, or an entry that is not this send's.
    let e = match usize::try_from(i)
        .map_err(|_| Fault::Corrupted("dedup index"))
        .and_then(|i| dedup::entry(a, i))
    {
        Ok(e) => e,
        // This process could not map the entry's segment: settle later, never as if the
        // entry were not this send's (invariant D).
        Err(f @ Fault::Mapping(_)) => return Err(f),
        Err(_) => return Ok(()),
    };
    // Acquire: SYNC POINT(dedup-publish).
    let st = e.state.load(Ordering::Acquire);
    if dedup::kind(st) != PENDING
        || gstate::owner(st) != o
        || e.msg.load(Ordering::Acquire) != node::pack(inc, idx)
    {
        return Ok(());
    }
    match linked {
        Some((seq_hi, pos)) => dedup::commit(a, env, i as u32, st, seq_hi, pos, member),
        None => dedup::abort(a, i as u32, st),
    }
}
