//! Walking a group's list and removing a published message from it.

use super::accounting::account_in_flight;
use super::Owner;
use super::{node, vis, Arena, PResult};
use crate::layout::{MsgHeader, MsgWords};
use crate::sync::Ordering;

/// Removes a published message of words `own` (a slot's, or a pack member's) (retention,
/// dead-letter move, purge): its epoch is bumped so every receipt handle expires (H2).
/// Returns whether this call removed it.
pub(crate) fn remove(a: &Arena<'_>, me: Owner, own: &MsgWords, w: u64) -> bool {
    // AcqRel: as a delete's CAS (Release hands the removal to the cleaner and handle holders).
    let ok = own
        .vis
        .compare_exchange(
            w,
            vis::pack(vis::next(vis::epoch(w)), vis::DELETED),
            Ordering::AcqRel,
            Ordering::Relaxed,
        )
        .is_ok();
    if ok && matches!(vis::state(w), vis::State::Published(d) if d > 0) {
        account_in_flight(a, me, -1);
    }
    ok
}

/// Under the claim: removes every published message of node `idx` (header `m`, unit word `w`
/// loaded with Acquire) that `which` accepts (given its `vis` word), as [`remove`] does: the
/// message itself, or each member of a pack (layout 22). Returns how many it removed, and
/// whether it is done: `false` if a message's CAS failed (it changed: look again; a pack's
/// members are looked at again here, a few times, before that), with what it removed so far
/// counted.
pub(crate) fn remove_unit(
    a: &Arena<'_>,
    me: Owner,
    m: &MsgHeader,
    idx: u32,
    w: u64,
    mut which: impl FnMut(u64) -> bool,
) -> PResult<(u64, bool)> {
    match vis::state(w) {
        vis::State::Published(_) => {
            if !which(w) {
                return Ok((0, true));
            }
            let done = remove(a, me, &m.own, w);
            Ok((u64::from(done), done))
        }
        vis::State::Packed => {
            // SAFETY: the caller holds the group claim: nobody frees or rewrites the pack, and
            // removals copy nothing into payloads.
            let members = unsafe { super::pack::words(a, idx, m, w) }?;
            let mut n = 0;
            for own in members {
                for tries in 0..=REMOVE_TRIES {
                    if tries == REMOVE_TRIES {
                        return Ok((n, false));
                    }
                    // Acquire: the member's latest state.
                    let mw = own.vis.load(Ordering::Acquire);
                    if !matches!(vis::state(mw), vis::State::Published(_)) || !which(mw) {
                        break;
                    }
                    if remove(a, me, own, mw) {
                        n += 1;
                        break;
                    }
                }
            }
            Ok((n, true))
        }
        _ => Ok((0, true)),
    }
}

/// How often [`remove_unit`] looks again at a pack's member whose CAS failed before it lets
/// its caller look at the whole node again: each failure is another participant's step (a
/// delete, a visibility change, a release), or a hostile peer flipping the word.
const REMOVE_TRIES: u32 = 64;

/// The first message of node `idx` (header `m`, unit word `w`) that is not deleted: its words
/// and its `vis` word, a pack's members' (layout 22) loaded with `order`; `None` if every one is
/// deleted (a message of its own: `w` says so).
///
/// # Safety
/// As [`super::pack::words`]'.
pub(crate) unsafe fn first_live<'a>(
    a: &Arena<'a>,
    idx: u32,
    m: &'a MsgHeader,
    w: u64,
    order: Ordering,
) -> PResult<Option<(&'a MsgWords, u64)>> {
    if vis::state(w) != vis::State::Packed {
        return Ok((vis::state(w) != vis::State::Deleted).then_some((&m.own, w)));
    }
    // SAFETY: the caller's contract.
    for own in unsafe { super::pack::words(a, idx, m, w) }? {
        // `order`: the caller's (see its SYNC POINT).
        let mw = own.vis.load(order);
        if vis::state(mw) != vis::State::Deleted {
            return Ok(Some((own, mw)));
        }
    }
    Ok(None)
}

/// Finds a cycle in a walk of a group list (Brent's algorithm): a walk that records each node
/// reference it moves to is told when it meets one it met before, within about four times the
/// length of the cycle and the path into it. Only a damaged list has a cycle; without this
/// check a walk went round one until [`Arena::steps`], every slot the classes may grow to
/// (millions with the default size limit), which a hostile word made cost seconds a walk.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Cycle {
    /// A reference met earlier (the tortoise), moved up to the walk at each power of two.
    saved: u64,
    /// Steps since `saved` was taken, and the step at which it is taken again.
    since: u32,
    power: u32,
}

impl Cycle {
    /// A walk that starts at node reference `start`.
    pub(crate) fn from(start: u64) -> Cycle {
        Cycle {
            saved: start,
            since: 0,
            power: 1,
        }
    }

    /// Records the walk's move to `cur`: `true` if the walk met `cur` before (a cycle).
    pub(crate) fn met_again(&mut self, cur: u64) -> bool {
        if cur == self.saved {
            return true;
        }
        self.since += 1;
        if self.since == self.power {
            self.saved = cur;
            self.since = 0;
            self.power = self.power.saturating_mul(2);
        }
        false
    }
}

/// One step of a group-list walk from node reference `cur`.
pub(crate) enum Next<'a> {
    /// `cur`'s link no longer carries `cur`'s incarnation: it was freed (under the group's
    /// claim, only corruption does that), or is a sentinel that moved on.
    Stale,
    /// The end of the list (`NIL`, or `CLOSED`: being retired).
    End,
    /// The next node: its index, its header and its current incarnation.
    Node(u32, &'a MsgHeader, u32),
}

/// The node after `cur` in its group's list.
#[inline]
pub(crate) fn successor<'a>(a: &Arena<'a>, cur: u64) -> PResult<Next<'a>> {
    step(a, cur, false)
}

/// [`successor`] for a walk that goes on to write the node it finds (a receive, which marks it
/// in flight): its header line is fetched once, for writing (`sync::load_for_write_u64`: a
/// `prefetchw` and a load on x86-64), instead of shared by the load and then again by the
/// write. One line less a received message (`shmfifo-lines`), no locked instruction.
#[inline]
pub(crate) fn successor_for_write<'a>(a: &Arena<'a>, cur: u64) -> PResult<Next<'a>> {
    step(a, cur, true)
}

#[inline]
fn step<'a>(a: &Arena<'a>, cur: u64, for_write: bool) -> PResult<Next<'a>> {
    // Acquire: SYNC POINT(node-link), so the node found is seen as its producer wrote it.
    let l = a.link(node::index(cur))?.load(Ordering::Acquire);
    if node::inc(l) != node::inc(cur) {
        // Layout 20: a sentinel whose reopen is between its sentinel store and its `head`
        // store heads an empty list.
        if node::index(cur) >= a.total && super::release::reopening(a, cur, l)? {
            return Ok(Next::End);
        }
        return Ok(Next::Stale);
    }
    let next = node::index(l);
    if next == node::NIL || next == node::CLOSED {
        return Ok(Next::End);
    }
    let m = a.msg(next)?;
    // Acquire: pairs with the allocation's link store, published by the link CAS.
    let w = if for_write {
        crate::sync::load_for_write_u64(&m.link, Ordering::Acquire)
    } else {
        m.link.load(Ordering::Acquire)
    };
    Ok(Next::Node(next, m, node::inc(w)))
}

#[cfg(all(test, not(shmfifo_loom)))]
mod tests {
    use super::Cycle;

    /// A walk along a chain of `tail` references into a cycle of `len` is told of the cycle
    /// within four times their sum, and a chain without one is never told.
    #[test]
    fn a_cycle_is_found_within_a_few_laps() {
        for tail in 0..40u64 {
            for len in 1..40u64 {
                let at = |i: u64| if i < tail { i } else { tail + (i - tail) % len };
                let mut c = Cycle::from(at(0));
                let found = (1..=4 * (tail + len)).find(|&i| c.met_again(at(i)));
                assert!(found.is_some(), "tail {tail}, cycle {len}");
            }
        }
        let mut c = Cycle::from(0);
        assert!((1..100_000u64).all(|i| !c.met_again(i)));
    }
}
