//! Releasing a group's claim: the cleanup a holder runs before it lets go (moving `head` past
//! deleted messages, reopening an emptied list at its sentinel), DIRTY requests from deleters,
//! and the readiness look that decides whether the release hints the group (SYNC POINT(claim)):
//! made while the claim is still held, and the hint's bit set by the releasing CAS itself.

use super::accounting::count;
use super::doorbell::notify;
use super::group;
use super::pack;
use super::ready::{self, hint_if_ready, push_hint};
use super::Owner;
use super::{gstate, node, owner, pool, vis, Arena, Env, Fault, PResult, MAX_STEPS};
use crate::layout::counter;
use crate::layout::GroupEntry;
use crate::sync::Ordering;

/// Outcome of a cleanup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cleaned {
    /// The group is still active.
    Kept,
    /// The group was retired (an idle group a dead reclaimer closed) and our claim released.
    Retired,
}

/// Under the claim: frees a dead holder's pending dummy, moves `head` past deleted nodes, and
/// reopens the list at the group's sentinel if it is empty (layout 19: the group stays active,
/// idle).
pub(crate) fn cleanup(
    a: &Arena<'_>,
    env: &dyn Env,
    cw: u64,
    g: u32,
    e: &GroupEntry,
) -> PResult<Cleaned> {
    finish(e, cw, cleanup_inner(a, env, g, e, false)?)
}

/// [`cleanup`] by a receive about to take the first live message: each node it visits is read
/// for writing (`sync::load_for_write_u64`, SeqCst): the first live message, which the receive
/// marks in flight next, so its line comes from the producer once, exclusively, not shared
/// and then again (one line less a received message; a `prefetchw` on x86-64, no locked
/// instruction); and any deleted message before it (rare here: a delete's own cleanup moves
/// past them), which becomes the dummy and is freed when `head` moves on. Other cleanups stop at a message
/// nobody writes next, and mostly walk deleted messages the caller deleted itself: a plain
/// load.
pub(crate) fn cleanup_before_take(
    a: &Arena<'_>,
    env: &dyn Env,
    cw: u64,
    g: u32,
    e: &GroupEntry,
) -> PResult<Cleaned> {
    finish(e, cw, cleanup_inner(a, env, g, e, true)?)
}

fn finish(e: &GroupEntry, cw: u64, r: Cleaned) -> PResult<Cleaned> {
    if r == Cleaned::Retired {
        release_claim_word(e, cw);
    }
    Ok(r)
}

/// The most deleted nodes one step of a cleanup moves `head` past (one swap), and frees.
const RUN: usize = 16;

fn cleanup_inner(
    a: &Arena<'_>,
    env: &dyn Env,
    g: u32,
    e: &GroupEntry,
    for_take: bool,
) -> PResult<Cleaned> {
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
        let at_sentinel = node::index(h) >= a.total;
        if node::inc(hl) != node::inc(h) {
            // Layout 20: a reopen from the sentinel that died between its sentinel store and
            // its `head` store: finish that store (Release, as the reopen's, see `reopen`);
            // the next step finds the list empty at the sentinel and frees the dummy `tail`
            // names ([`settle_tail`]).
            if at_sentinel && node::index(h) == a.sentinel_index(g) && reopening(a, h, hl)? {
                e.head
                    .store(node::pack(node::inc(hl), node::index(h)), Ordering::Release);
                crash_point!();
                continue;
            }
            // A dummy is freed only after `head` moved off it (a run's swap, a reopen's store), and
            // the sentinel's incarnation changes only while `head` is a message or the
            // sentinel whose list a reopen closed (above): only a damaged word makes `head`
            // name a node that moved on.
            return Err(Fault::Corrupted("a group's head names a freed node"));
        }
        match node::index(hl) {
            // An idle group closed by a reclaim that died before retiring it: finish that.
            node::CLOSED if at_sentinel => {
                retire_idle(a, e)?;
                return Ok(Cleaned::Retired);
            }
            // A reopen that died after its close: finish it.
            node::CLOSED => reopen(a, env, g, e, h)?,
            // Idle: empty and open, kept for its next send (layout 19).
            node::NIL if at_sentinel => {
                settle_tail(a, env, g, e, h)?;
                return Ok(Cleaned::Kept);
            }
            node::NIL => {
                // Empty behind a consumed message: close its link so no append can succeed
                // there, then reopen the list at the sentinel. SeqCst: orders the close
                // against appenders' SeqCst link CAS (exactly one of them wins).
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
                    reopen(a, env, g, e, h)?;
                    // Reopened: the list is empty at the new sentinel, `tail` on it (the
                    // reopen stored it last), as a look again would find it; a message linked
                    // since is live (only a claim holder takes one, and we hold the claim),
                    // where the look would stop too. Kept either way.
                    return Ok(Cleaned::Kept);
                }
                // An append won: look again.
            }
            next => {
                if at_sentinel {
                    if let Some(done) = reopen_from_sentinel(a, env, g, e, h, next, for_take)? {
                        return Ok(done);
                    }
                }
                // The run of deleted nodes after the dummy `h` (at most RUN): the last becomes
                // the dummy, by one swap of `head`, and `h` and the others are freed.
                let mut run = [0u64; RUN];
                let mut n = 0;
                let mut dummy = h;
                let mut at = next;
                while n < RUN {
                    let m = a.msg(at)?;
                    if !deleted(a, e, at, m, for_take)? {
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
                pool::free_dummies(a, env, run)?;
                if first.is_some() {
                    e.pending_free.store(0, Ordering::Release);
                }
            }
        }
    }
    Err(Fault::Corrupted("cleanup did not converge"))
}

/// Under the claim, with `head` on the sentinel `h`, whose link names node `next`: if that is
/// the list's only node, deleted (a group's only message, deleted), closes its link and
/// reopens the list from the sentinel (layout 20), without first moving `head` onto the
/// message as a run's swap would (one locked instruction less an emptying delete). Returns
/// `Some(Kept)` when it reopened, or when that node is live (no run: the cleanup ends there,
/// as the run below would end, with the node's line read once); `None` leaves everything to
/// the run below (a run of several, an append that won the close: whatever the run finds).
///
/// Between the reopen's sentinel store and its `head` store, `head` names the sentinel's old
/// incarnation, whose word holds the next one ([`reopening`]). `tail` is moved onto the message
/// first if it lags on the sentinel (an appender that died before moving it): the reopen leaves
/// it on its dummy, where [`settle_tail`] and [`reopening`] look for it.
fn reopen_from_sentinel(
    a: &Arena<'_>,
    env: &dyn Env,
    g: u32,
    e: &GroupEntry,
    h: u64,
    next: u32,
    for_take: bool,
) -> PResult<Option<Cleaned>> {
    let m = a.msg(next)?;
    // The run's first load, which this one stands for (no swap came before it here).
    if !deleted(a, e, next, m, for_take)? {
        return Ok(Some(Cleaned::Kept)); // nothing to move `head` past
    }
    let l = m.link.load(Ordering::Acquire);
    if !matches!(node::index(l), node::NIL | node::CLOSED) {
        return Ok(None);
    }
    let dummy = node::pack(node::inc(l), next);
    // Invariant 2, as the run's: AcqRel pairs with appenders' Acquire loads of `tail`. A
    // failed CAS saw it move on, to the message (the list's last node).
    let t = e.tail.load(Ordering::Acquire);
    if t == h {
        let _ = e
            .tail
            .compare_exchange(t, dummy, Ordering::AcqRel, Ordering::Relaxed);
    }
    crash_point!();
    // SeqCst: as the close of an emptied list (SYNC POINT(quarantine-close)): exactly one of
    // it and an appender's link CAS wins.
    if node::index(l) == node::NIL
        && m.link
            .compare_exchange(
                l,
                node::pack(node::inc(l), node::CLOSED),
                Ordering::SeqCst,
                Ordering::Relaxed,
            )
            .is_err()
    {
        return Ok(None); // an append won: the run below finds it
    }
    crash_point!();
    reopen(a, env, g, e, dummy)?;
    Ok(Some(Cleaned::Kept))
}

/// A cleanup's read of the `vis` word of a node after `head` (see [`cleanup_before_take`]: read
/// for writing when the receive marks the node in flight next). SeqCst: SYNC POINT(ready-check)
/// on the cleanup's next step or the post-release check.
#[inline]
fn run_vis(m: &crate::layout::MsgHeader, for_take: bool) -> u64 {
    if for_take {
        crate::sync::load_for_write_u64(&m.own.vis, Ordering::SeqCst)
    } else {
        m.own.vis.load(Ordering::SeqCst)
    }
}

/// Under the claim: whether node `idx` (header `m`) after `head` is deleted, its state word
/// read by [`run_vis`]: a message `DELETED`, or a pack (layout 22) whose every member is. Such
/// a pack's unit word is stored `DELETED` here, at its members' largest epoch
/// ([`pack::deleted_word`]), so that the run frees it as it frees a message. A store: while a
/// pack is published only the claim holder writes its unit word (handle holders write member
/// words), and a pack whose members are all deleted is never written by anyone else again.
/// A damaged pack's directory is the group's fault (the caller's error path). A deletion not
/// yet counted (a handle holder's without the claim, layout 25) is counted here
/// ([`count_deletion`]).
#[inline]
fn deleted(
    a: &Arena<'_>,
    e: &GroupEntry,
    idx: u32,
    m: &crate::layout::MsgHeader,
    for_take: bool,
) -> PResult<bool> {
    let w = run_vis(m, for_take);
    // The field itself (`vis::state` decodes both deleted values as one).
    match w & vis::FIELD_MASK {
        vis::DELETED => Ok(true),
        vis::PACKED => pack_deleted(a, e, idx, m, w),
        vis::DELETED_UNCOUNTED => {
            count_deletion(a, e, &m.own, w)?;
            Ok(true)
        }
        _ => Ok(false),
    }
}

/// Under the claim: counts the deletion of a message whose word `own` (in slot header `m`) a
/// handle holder marked [`vis::DELETED_UNCOUNTED`] (`handle::delete_many`) as `w`, and stores
/// it `DELETED` first, so that it is counted at most once: nobody but a claim holder writes a
/// deleted word (handle holders' CASes expect a published one). A holder that dies between the
/// two leaves the count high, R8's safe side, which a census corrects. Counted as the claim
/// holder, us, named by the claim word of the group we hold (`e`: the message's own group
/// but where a damaged link led the walk into another's list, whose claim word would name
/// another process, whose record is not ours to write). Out of line: rare (the delete's
/// group's claim was busy).
#[cold]
#[inline(never)]
fn count_deletion(
    a: &Arena<'_>,
    e: &GroupEntry,
    own: &crate::layout::MsgWords,
    w: u64,
) -> PResult<()> {
    // Relaxed: read again only by claim holders (ours next, later ones through the claim's
    // Release and Acquire) and by the free's own loads.
    own.vis
        .store(vis::pack(vis::epoch(w), vis::DELETED), Ordering::Relaxed);
    crash_point!();
    // Relaxed: our own claim word.
    let me = Owner::of_word(e.claim.load(Ordering::Relaxed));
    count(a, me, counter::DELETED, 1);
    Ok(())
}

/// Where [`count_uncounted`] stops: after this many live messages (a group's messages in
/// flight are among its first 10 live ones: every receive's run starts at the group's oldest
/// undeleted message and takes at most 10, R3, and deletes only shorten what lies before),
/// or this many nodes (deleted ones can pile up between them: a first message whose
/// visibility goes back to 0 again and again, its followers deleted each time).
const IN_FLIGHT_LIVE: usize = super::attempt::MAX_MESSAGES;
/// The most nodes [`count_uncounted`] looks at (see [`IN_FLIGHT_LIVE`]).
const IN_FLIGHT_NODES: usize = 64;

/// Under the claim, after a DIRTY request (or a poke that took the claim): counts the
/// deletions that handle holders left uncounted ([`vis::DELETED_UNCOUNTED`], layout 25: the
/// claim was held) where the group's messages in flight lie (see [`IN_FLIGHT_LIVE`]), each as
/// the cleanup counts one it moves past ([`count_deletion`]). The cleanup just ran, so what
/// is left is behind the group's first live message (deleted out of order, or a pack's
/// member whose siblings are live), where the cleanup cannot move yet: without this such a
/// delete would count only once the head reached it, up to its visibility timeout later.
/// Rare (a delete that met the claim held), so out of line. A node that does not check ends
/// the look: the cleanup and the receive report damage.
#[cold]
#[inline(never)]
pub(crate) fn count_uncounted(a: &Arena<'_>, e: &GroupEntry) -> PResult<()> {
    // Acquire: as the cleanup's.
    let mut cur = e.head.load(Ordering::Acquire);
    let mut live = 0;
    for _ in 0..IN_FLIGHT_NODES {
        if live >= IN_FLIGHT_LIVE {
            return Ok(());
        }
        let Ok(super::list::Next::Node(idx, m, inc)) = super::list::successor(a, cur) else {
            return Ok(());
        };
        // Acquire: pairs with the deleter's CAS (its Release), as the cleanup's loads.
        let w = m.own.vis.load(Ordering::Acquire);
        match vis::state(w) {
            vis::State::Deleted if vis::uncounted(w) => count_deletion(a, e, &m.own, w)?,
            vis::State::Deleted => {}
            vis::State::Packed => {
                // SAFETY: we hold the claim: nobody frees or rewrites the pack, and this
                // copies nothing into payloads.
                let Ok(members) = (unsafe { pack::words(a, idx, m, w) }) else {
                    return Ok(());
                };
                for own in members {
                    // Acquire: as above.
                    let mw = own.vis.load(Ordering::Acquire);
                    if vis::uncounted(mw) {
                        count_deletion(a, e, own, mw)?;
                    } else if vis::state(mw) != vis::State::Deleted {
                        live += 1;
                    }
                }
            }
            _ => live += 1,
        }
        cur = node::pack(inc, idx);
    }
    Ok(())
}

/// [`deleted`] of a pack (unit word `w`): every member deleted, then its unit word stored
/// `DELETED`. Out of line: a message of its own needs none of it.
#[inline(never)]
fn pack_deleted(
    a: &Arena<'_>,
    e: &GroupEntry,
    idx: u32,
    m: &crate::layout::MsgHeader,
    w: u64,
) -> PResult<bool> {
    // SAFETY: we hold the claim: nobody frees or rewrites the pack, and a cleanup copies
    // nothing into payloads.
    let members = unsafe { pack::words(a, idx, m, w) }?;
    // Acquire: pairs with each deleter's Release store or CAS, so the free that follows
    // comes after their last access (that of the one whose write is read: a handle holder's
    // CAS that a claim holder's store overwrote reads no payload); SYNC POINT(ready-check) is the unit word's, loaded by the
    // caller (a producer's publication of a later node is ordered by our `head` swap).
    if !members
        .iter()
        .all(|own| own.vis.load(Ordering::Acquire) & vis::FIELD_MASK == vis::DELETED)
        && !uncounted_members_counted(a, e, members)?
    {
        return Ok(false);
    }
    // Relaxed: our own next loads (`pool::free_one`) read it; others learn of the free by
    // its Release store.
    m.own
        .vis
        .store(pack::deleted_word(w, members), Ordering::Relaxed);
    Ok(true)
}

/// [`pack_deleted`]'s second look, where not every member's word is `DELETED`: whether every
/// member is deleted, counted or not, and if so each uncounted one counted
/// ([`count_deletion`]). Out of line: the first look mostly fails at a live first member (a
/// receive's cleanup at a live pack), and this one then fails there too.
#[cold]
#[inline(never)]
fn uncounted_members_counted(
    a: &Arena<'_>,
    e: &GroupEntry,
    members: &[crate::layout::MsgWords],
) -> PResult<bool> {
    // Acquire: as `pack_deleted`'s.
    if !members
        .iter()
        .all(|own| vis::state(own.vis.load(Ordering::Acquire)) == vis::State::Deleted)
    {
        return Ok(false);
    }
    for own in members {
        // Relaxed: read Acquire just above; only a claim holder writes a deleted word.
        let mw = own.vis.load(Ordering::Relaxed);
        if vis::uncounted(mw) {
            count_deletion(a, e, own, mw)?;
        }
    }
    Ok(true)
}

/// Frees what a dead holder's cleanup left of its run (named by `p`, the run's first slot; its
/// new dummy `h` is `head` now): the prefix of the run it had not freed, since it freed the
/// run last node first. Walks from `p` along the links while each node is still the run's:
/// the incarnation `p` names (then its group's), deleted, in the same group, at the next
/// position, and before `h`'s position. A node the holder freed is free, or claimed again
/// with a new incarnation, or linked again at a later position (past `h`'s) or in another
/// group; the walk stops there. Where `head` was not moved yet (the holder died before its
/// swap) the run is still in the list, behind the sentinel, whose position (`sentinel_pos`,
/// layout 19) is before the run's: nothing qualifies.
#[cold]
#[inline(never)]
fn free_pending(a: &Arena<'_>, env: &dyn Env, p: u64, h: u64) -> PResult<()> {
    // Relaxed: the dead holder's writes came before its death, which we learned of (see
    // `cleanup_inner`); positions and groups of deleted nodes do not change until they are
    // freed, and the incarnation re-check below catches a slot freed and claimed meanwhile.
    let end = a.position(node::index(h))?;
    let mut run = [0u64; RUN];
    let mut n = 0;
    let mut cur = p;
    let mut last: Option<(u64, u32)> = None;
    while n < RUN && cur != h && node::index(cur) < a.total {
        let m = a.msg(node::index(cur))?;
        // Acquire: as `pool::free_dummy`, pairs with the store or CAS that set DELETED.
        let l = m.link.load(Ordering::Acquire);
        if node::inc(l) != node::inc(cur)
            || vis::state(m.own.vis.load(Ordering::Acquire)) != vis::State::Deleted
        {
            break;
        }
        let pos = m.pos.load(Ordering::Relaxed);
        let g = super::words::group_of(m.group_epoch0.load(Ordering::Relaxed));
        // A pack takes its members' positions (layout 22): the next node follows its last.
        let span = super::words::unit_span(m.own.lens.load(Ordering::Relaxed));
        let follows = last.is_none_or(|(lp, lg)| lg == g && lp.wrapping_add(1) == pos);
        // Re-checked: an unchanged incarnation proves the words read belong to this node.
        if !follows || pos >= end || node::inc(m.link.load(Ordering::Acquire)) != node::inc(cur) {
            break;
        }
        run[n] = cur;
        n += 1;
        last = Some((pos.wrapping_add(span - 1), g));
        let next = node::index(l);
        if next >= a.total {
            break; // NIL, CLOSED or a sentinel: not a node of the run
        }
        cur = node::pack(node::inc(a.link(next)?.load(Ordering::Acquire)), next);
    }
    // Last first, as the holder did.
    pool::free_dummies(a, env, &run[..n])
}

/// Under the claim, with `head` on `h`, a consumed message whose link is `CLOSED` (the list
/// was empty behind it), or on the sentinel whose only node after it is `h`, deleted and
/// closed (layout 20): the list starts again at a new incarnation of group `g`'s sentinel,
/// positioned one past `h` so that positions (and sequence numbers) keep growing, and `h` is
/// freed (layout 19). The group stays `ACTIVE` and counted, its key in place: its next send
/// appends, with no insert.
///
/// `head` moves to the new sentinel first, `tail` last, so no append can link after the
/// sentinel while `head` is still on `h`: whoever walks the list from `head` (a receive, a
/// purge, a quarantine's check, a settler looking for a dead producer's message) finds every
/// message linked, at every step. `h` is freed between the two (no word on the consumer's own
/// line, `pending_free`'s, names it: the producer of a new group reads that line). Each step
/// may die:
///
/// - before the sentinel store: `head` is on `h`, closed, or on the sentinel before `h`, and
///   nobody saw the new sentinel (only `tail` leads appenders to it): a next holder does it
///   all again, with the next incarnation;
/// - between the sentinel store and the `head` store, from the sentinel (layout 20): `head`
///   names the sentinel's old incarnation, whose word holds the new one, `NIL` ([`reopening`]):
///   walkers find the list empty, and a next holder's cleanup does the store and goes on as
///   below;
/// - after it: the list is empty at the sentinel with `tail` still on `h`, freed or not, which
///   the next holder's cleanup finds ([`settle_tail`]): it frees `h` if it is not yet, and
///   moves `tail`. Appenders meanwhile find `tail` closed, or freed (its incarnation moved on),
///   and wait for the claim.
fn reopen(a: &Arena<'_>, env: &dyn Env, g: u32, e: &GroupEntry, h: u64) -> PResult<()> {
    // Relaxed: while `head` is a message, or the sentinel whose link names `h` (closed), only
    // claim holders write the sentinel's word (no appender's CAS expects a word that is not
    // `NIL`).
    let s = node::inc(e.sentinel.load(Ordering::Relaxed)).wrapping_add(1);
    let new = node::pack(s, a.sentinel_index(g));
    // Relaxed: published by the Release stores below.
    e.sentinel_pos.store(
        a.position(node::index(h))?.wrapping_add(1),
        Ordering::Relaxed,
    );
    // Release: an appender that reads the new incarnation (through `tail`) sees the position.
    e.sentinel
        .store(node::pack(s, node::NIL), Ordering::Release);
    crash_point!();
    // A store, not a run's swap (one locked instruction less an emptying delete): nothing
    // after this needs an RMW's order. Our list is empty behind the new sentinel, so this
    // cleanup looks at no `vis` after it (a run's swap pairs with the producers' RMW of
    // `head` for those loads, SYNC POINT(ready-check)); no producer has linked after the
    // sentinel, whose link CAS expects the new incarnation, which it learns only from `tail`,
    // stored below. Release: such a producer's Acquire load of `tail` then orders its RMW of
    // `head` after this store, so that RMW finds its predecessor, the sentinel, there and it
    // hints the group itself; readers without the claim (a peek, the inspection, the sweep's
    // status) that load this `head` (Acquire) see the sentinel's word and position above.
    e.head.store(new, Ordering::Release);
    crash_point!();
    pool::free_dummy(a, env, h)?;
    crash_point!();
    // Release: pairs with appenders' Acquire loads of `tail`: they see the sentinel's word and
    // position above. A plain store: no appender moves `tail` off a closed or freed node (its
    // link CAS expects the incarnation `tail` names), and a helper's CAS from an older value
    // fails against this one.
    e.tail.store(new, Ordering::Release);
    crash_point!();
    Ok(())
}

/// Under the claim of group `g` (entry `e`), whose list is empty at its sentinel `h`: if `tail`
/// is not on `h`, a reopen died between its `head` store and its `tail` store, and `tail` names
/// its old dummy, freed or not: free it if it is not (only a node that is that dummy: `g`'s,
/// closed, deleted, one position before the sentinel's; a damaged `tail` names anything), then
/// move `tail` to `h`. Nothing else leaves `tail` off `head` in an empty list (appenders move
/// it only after a link).
fn settle_tail(a: &Arena<'_>, env: &dyn Env, g: u32, e: &GroupEntry, h: u64) -> PResult<()> {
    // Acquire: pairs with the Release stores of `tail`.
    let t = e.tail.load(Ordering::Acquire);
    if t == h {
        return Ok(());
    }
    if reopen_dummy(a, g, e, t)? {
        pool::free_dummy(a, env, t)?;
        crash_point!();
    }
    // Release: as the reopen's store. A CAS: should an appender have moved it meanwhile (it
    // cannot while the sentinel's link is NIL), its value stands.
    let _ = e
        .tail
        .compare_exchange(t, h, Ordering::Release, Ordering::Relaxed);
    Ok(())
}

/// Whether `t` (what group `g`'s `tail` names) is the dummy a reopen of its list left: a
/// message of `g` with that incarnation, closed, one position before the sentinel's (a damaged
/// `tail` names anything). Its fields are read between an Acquire load of its link and the
/// incarnation check `pool::free_dummy` makes again (a node freed and claimed again meanwhile
/// is left alone).
fn reopen_dummy(a: &Arena<'_>, g: u32, e: &GroupEntry, t: u64) -> PResult<bool> {
    let i = node::index(t);
    if i >= a.total {
        return Ok(false);
    }
    let m = a.msg(i)?;
    // Acquire: as `pool::free_dummy`.
    let l = m.link.load(Ordering::Acquire);
    // Relaxed: a reopener's writes came before its `sentinel` store (Release), which the
    // caller's Acquire load read, or before its death, which reached us.
    Ok(l == node::pack(node::inc(t), node::CLOSED)
        && super::words::group_of(m.group_epoch0.load(Ordering::Relaxed)) == g
        && a.position(i)?.wrapping_add(1) == e.sentinel_pos.load(Ordering::Relaxed))
}

/// Whether sentinel reference `h` (`head`, or a walk's node) whose link word `hl` carries
/// another incarnation is a reopen from the sentinel caught between its sentinel store and its
/// `head` store (layout 20): `hl` is the next incarnation, `NIL`, and `tail` still names the
/// dummy the reopen closed ([`reopen_dummy`]). The list is empty then. Anything else in that
/// word is a damaged one (or, to a walker without the claim, a sentinel that moved on).
#[cold]
#[inline(never)]
pub(crate) fn reopening(a: &Arena<'_>, h: u64, hl: u64) -> PResult<bool> {
    let i = node::index(h);
    if i < a.total || hl != node::pack(node::inc(h).wrapping_add(1), node::NIL) {
        return Ok(false);
    }
    let g = i - a.total;
    let e = a.group(g)?;
    // Acquire: pairs with the Release stores of `tail`; the sentinel position it is checked
    // against was stored before the sentinel word the caller read (Acquire).
    reopen_dummy(a, g, e, e.tail.load(Ordering::Acquire))
}

/// Retires the idle group of entry `e`, whose sentinel a reclaim closed (layout 19), into a
/// plain tombstone out of the count (see `kept::reclaim_kept`). A CAS from the `ACTIVE` word:
/// a reclaimer that died after it left nothing to do. A death between the CAS and the count
/// leaves the count one over, as a dead inserter does (invariant K).
pub(crate) fn retire_idle(a: &Arena<'_>, e: &GroupEntry) -> PResult<()> {
    // Acquire: the state word as of our claim.
    let st = e.state.load(Ordering::Acquire);
    if gstate::kind(st) != gstate::ACTIVE {
        return Ok(());
    }
    let dead = gstate::pack(gstate::ginc(st), gstate::TOMBSTONE, super::Owner::NOBODY);
    // Release: our last writes to the entry happen before a reuser's Acquire CAS of `state`.
    if e.state
        .compare_exchange(st, dead, Ordering::Release, Ordering::Relaxed)
        .is_ok()
    {
        crash_point!();
        // Relaxed: a capacity counter, no data depends on it.
        a.hdr.active_groups.0.fetch_sub(1, Ordering::Relaxed);
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

/// [`Env::refresh_now`], out of the release's hot path.
#[cold]
#[inline(never)]
fn refresh(env: &dyn Env) {
    env.refresh_now();
}

/// Gives up the claim word if it still names us (any DIRTY bit is moot after a retire),
/// keeping its `HINT` bit ([`group::give_up_claim`]).
pub(crate) fn release_claim_word(e: &GroupEntry, cw: u64) {
    group::give_up_claim(&e.claim, cw);
}

/// Releases group `g`'s claim `cw`, cleaning up again for every DIRTY request, and hints the
/// group if it has a deliverable message (H5: a delete that unlocks a group wakes a receiver):
/// looked at before the releasing CAS, which sets the hint's bit (see [`release_then`]).
#[inline]
pub(crate) fn release(a: &Arena<'_>, env: &dyn Env, me: Owner, cw: u64, g: u32) -> PResult<()> {
    release_then(a, env, me, cw, g, false)
}

/// [`release`] by a receive whose take left the group locked: it took its first live message
/// (at least one, none of them followed by a failed dead-letter move) in flight until a
/// deadline after now. The readiness re-check is skipped unless a DIRTY request made us clean
/// up again: nothing in the group can be delivered while that message is in flight (R3), and
/// what unlocks it announces itself. A delete or a purge of it pokes the group (a DIRTY
/// request while we hold the claim, a claim and a re-check of its own after), a visibility
/// change to 0 re-checks it (`hint_if_ready`), and its deadline is on the expiry wheel for a
/// sweep; a sweep that drains it while we still hold the claim (our deadline passed during
/// the hold: we are slow or stopped) pokes the group, so that we re-check with a fresh clock
/// (`Env::refresh_now`) or, if we released meanwhile, it cleans up and re-checks itself; a
/// producer that links behind the message finds another node than its predecessor at `head`
/// and leaves the hint to those (SYNC POINT(ready-check)). One readiness check (a walk from
/// `head`, some 150 instructions) less a received message.
#[inline]
pub(crate) fn release_locked(
    a: &Arena<'_>,
    env: &dyn Env,
    me: Owner,
    cw: u64,
    g: u32,
) -> PResult<()> {
    release_then(a, env, me, cw, g, true)
}

#[inline]
fn release_then(
    a: &Arena<'_>,
    env: &dyn Env,
    me: Owner,
    cw: u64,
    g: u32,
    locked: bool,
) -> PResult<()> {
    let e = a.group(g)?;
    // Whether a DIRTY request made us clean up again: the group changed under our claim.
    let mut dirty = false;
    for _ in 0..MAX_STEPS {
        // Acquire: a deleter's DIRTY request carries its delete (Release CAS).
        let cur = e.claim.load(Ordering::Acquire);
        if owner::clean(cur) != cw {
            return Ok(()); // taken from us (we were presumed dead) or corrupted
        }
        if cur & owner::DIRTY != 0 {
            dirty = true;
            // The request taken (its bit cleared), a queued hint's bit kept.
            if e.claim
                .compare_exchange(
                    cur,
                    cur & !owner::DIRTY,
                    Ordering::AcqRel,
                    Ordering::Relaxed,
                )
                .is_ok()
            {
                if cleanup(a, env, cw, g, e)? == Cleaned::Retired {
                    return Ok(());
                }
                // A DIRTY request may be an uncounted delete's behind the group's live head.
                count_uncounted(a, e)?;
            }
            continue;
        }
        // Whether to hint the group, decided while we hold the claim (since stop 54; after
        // the release before): a group to hint is released with its `HINT` bit set by the
        // release's own CAS, where the release's CAS and then the hint's RMW of the bit were
        // two locked instructions. Anything that changes the group after this look and before
        // our CAS either makes the CAS fail (a DIRTY request: we clean up and look again) or
        // hints the group itself (a producer that links behind an empty list finds its
        // predecessor at `head`; a visibility change to 0 hints after its CAS).
        let mut hinting = hinting(a, env, g, e, locked, dirty)?;
        if matches!(hinting, Hinting::Now) && cur & owner::STALE != 0 {
            // The queued hint is a placeholder (layout 27: served in place). Still the ring's
            // only hint: our release makes it fresh where it stands. Else it is replaced
            // after the release (`ready::hint`), behind the groups hinted since.
            hinting = match super::ready::only(a) {
                Some((_, v)) if v == g => Hinting::Fresh,
                _ => Hinting::Replace,
            };
        }
        let released = match hinting {
            Hinting::Now | Hinting::Fresh => owner::HINT,
            Hinting::No | Hinting::After | Hinting::Replace => cur & owner::HINT_BITS,
        };
        // SYNC POINT(claim): SeqCst release; also orders it before a readiness check after
        // it. A queued hint's bit (`HINT`, set by a producer while we held the claim) is kept:
        // its hint is in a ring. SYNC POINT(ready-check) where it sets the bit: a receiver's
        // CAS that takes the claim reads it, as it reads a producer's RMW.
        if e.claim
            .compare_exchange(cur, released, Ordering::SeqCst, Ordering::Relaxed)
            .is_ok()
        {
            match hinting {
                // The bit was clear: the hint is ours to push.
                Hinting::Now if cur & owner::HINT == 0 && push_hint(a, env, g, e)? => {
                    notify(a, env, me);
                }
                Hinting::After => hint_if_ready(a, env, me, g, e)?,
                Hinting::Fresh => notify(a, env, me),
                Hinting::Replace if ready::hint(a, env, me, g)? => notify(a, env, me),
                _ => {}
            }
            return Ok(());
        }
    }
    Err(Fault::Corrupted(
        "a group's claim did not converge on release",
    ))
}

/// What [`release_then`] does about a hint.
#[derive(Clone, Copy)]
enum Hinting {
    /// Nothing: the group is not ready, or needs no look.
    No,
    /// The group is ready: the release sets its `HINT` bit, and pushes a hint if it was clear.
    Now,
    /// A sweep is due first ([`ready::hint`] runs it, R6): look again after the release, as
    /// before stop 54, not while we hold the claim (the sweep takes groups' claims).
    After,
    /// Ready, its queued hint a placeholder that is still the ring's only hint (layout 27):
    /// the release's CAS makes it fresh (clears `STALE`), and we ring.
    Fresh,
    /// Ready, its queued hint a placeholder with others queued behind it (layout 27): it is
    /// replaced after the release ([`ready::hint`]: out of the ring, a fresh hint behind).
    Replace,
}

/// Whether [`release_then`]'s release of group `g` (entry `e`) hints it, looked at while the
/// claim is ours. A receive that left the group locked and met no DIRTY request (`locked`,
/// `!dirty`) does not look (see [`release_locked`]); one that met a DIRTY request (`dirty`)
/// reads the clock afresh first: a sweep that came past our deadline left the group to our re-check. A kept group
/// (idle, layout 19) has nothing to look at: a producer that linked before the cleanup's last
/// swap of `head` was seen by it (SYNC POINT(ready-check)), so the list would not be empty (a
/// reopen's close wins against any later link), and one that links after the reopen's
/// sentinel learns of it from `tail`, stored after `head`, finds its predecessor, the
/// sentinel, at `head` and hints the group itself.
#[inline]
fn hinting(
    a: &Arena<'_>,
    env: &dyn Env,
    g: u32,
    e: &GroupEntry,
    locked: bool,
    dirty: bool,
) -> PResult<Hinting> {
    if locked && !dirty {
        return Ok(Hinting::No); // see `release_locked`
    }
    if dirty {
        refresh(env);
    }
    if super::kept::is_kept(a, g, e) {
        return Ok(Hinting::No);
    }
    if ready::sweep_due_first(a, env) {
        return Ok(Hinting::After);
    }
    Ok(match ready::ready_now(a, env, e) {
        Ok(true) => Hinting::Now,
        Ok(false) => Hinting::No,
        // A damaged word met by the look: release first, and look again after (whose error
        // is then ours), as before stop 54, so that no fault leaves the claim held.
        Err(_) => Hinting::After,
    })
}
