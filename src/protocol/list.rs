//! Walking a group's list and removing a published message from it.

use super::accounting::account_in_flight;
use super::Owner;
use super::{node, vis, Arena, PResult};
use crate::layout::MsgHeader;
use crate::sync::Ordering;

/// Removes a published message (retention, dead-letter move): its epoch is bumped so every
/// receipt handle expires (H2). Returns whether this call removed it.
pub(crate) fn remove(a: &Arena<'_>, me: Owner, m: &MsgHeader, w: u64) -> bool {
    // AcqRel: as a delete (Release hands the removal to the cleaner and handle holders).
    let ok = m
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

/// One step of a group-list walk from node reference `cur`.
pub(crate) enum Next<'a> {
    /// `cur`'s link no longer carries `cur`'s incarnation: it was freed (under the group's
    /// claim, only corruption does that).
    Stale,
    /// The end of the list (`NIL`, or `CLOSED`: being retired).
    End,
    /// The next node: its index, its header and its current incarnation.
    Node(u32, &'a MsgHeader, u32),
}

/// The node after `cur` in its group's list.
#[inline]
pub(crate) fn successor<'a>(a: &Arena<'a>, cur: u64) -> PResult<Next<'a>> {
    // Acquire: SYNC POINT(node-link), so the node found is seen as its producer wrote it.
    let l = a.link(node::index(cur))?.load(Ordering::Acquire);
    if node::inc(l) != node::inc(cur) {
        return Ok(Next::Stale);
    }
    let next = node::index(l);
    if next == node::NIL || next == node::CLOSED {
        return Ok(Next::End);
    }
    let m = a.msg(next)?;
    // Acquire: pairs with the allocation's link store, published by the link CAS.
    let ninc = node::inc(m.link.load(Ordering::Acquire));
    Ok(Next::Node(next, m, ninc))
}
