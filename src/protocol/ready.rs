//! Ready hints: the ring of groups that may have a deliverable message, a group's readiness
//! read without its claim (`status`), the hint a producer or a releaser gives
//! (SYNC POINT(ready-check)), and the poke that asks a busy holder to look again.
//!
//! The claim's release and cleanup are in `release`, the sweep that re-derives lost hints and
//! finds visibility expiries in `sweep`; they call each other by design: a release cleans up
//! and hints, a hint may run a due sweep, and a sweep takes over dead claims, cleans up and
//! releases.

use super::doorbell::notify;
use super::group::{self, TryClaim};
use super::list::{successor, Next};
use super::release::{cleanup, or_release, release, Cleaned};
use super::ring::Ring;
use super::sweep::maybe_sweep;
use super::times::{Standing, Times};
use super::Owner;
use super::{gstate, node, owner, vis, Arena, Env, Fault, PResult, MAX_STEPS};
use crate::layout::{GroupEntry, GROUP_KIND};

use crate::sync::Ordering;

/// The base group table's ready ring.
pub fn ring<'a>(a: &Arena<'a>) -> Ring<'a> {
    Ring {
        entries: a.ready,
        head: &a.hdr.ready_head.0,
        tail: &a.hdr.ready_tail.0,
        cursor: a.segs.ring_cursor(0),
        push_cursor: a.segs.ring_push_cursor(0),
    }
}

/// The ready ring of group `g`'s table (layout 16): the base ring for a group of the base
/// table, the added table's own ring (in its segment) otherwise. Each ring has one entry per
/// entry of its table, and a group has at most one hint queued, so no ring overflows.
#[inline]
pub fn ring_for<'a>(a: &Arena<'a>, g: u32) -> PResult<Ring<'a>> {
    if (g as usize) < a.groups.len() {
        return Ok(ring(a));
    }
    added_ring_for(a, g)
}

/// [`ring_for`] of a group of an added table.
#[cold]
#[inline(never)]
fn added_ring_for<'a>(a: &Arena<'a>, g: u32) -> PResult<Ring<'a>> {
    let n = a.groups.len() as u32;
    if n == 0 || g >= a.group_range() {
        return Err(Fault::Corrupted("group index out of range"));
    }
    let (k, _) = super::segments::segment_of(n, u64::from(g));
    Ok(a.group_segment(k)?.ring)
}

/// Ready ring `k`: the base table's (0), or added table `k`'s.
fn table_ring<'a>(a: &Arena<'a>, k: u32) -> Option<Ring<'a>> {
    if k == 0 {
        return Some(ring(a));
    }
    a.group_segment(k).ok().map(|s| s.ring)
}

/// Notes the tables the group table has added (layout 16) if it added any this process does
/// not know of yet, so that [`pop`] takes their rings too.
#[inline]
pub fn learn_tables(a: &Arena<'_>) {
    if a.growth(GROUP_KIND) > 0 && a.published(GROUP_KIND) > a.known_segments(GROUP_KIND) {
        a.refresh_segments(GROUP_KIND);
    }
}

/// Pops the hint of a ready group. A queue whose group table never grew has one ring; a grown
/// one has a ring per table (layout 16), taken in turn, each pop starting at the next (so that
/// no table's groups wait on another's), then any table published since this process last
/// looked. R6's order holds within each table; across tables, their rings are served in turn.
#[inline]
pub fn pop(a: &Arena<'_>) -> Option<u32> {
    if a.known_segments(GROUP_KIND) == 0 {
        if let Some(g) = ring(a).pop() {
            return Some(g);
        }
    }
    pop_tables(a)
}

/// [`pop`] past the base ring of a table that never grew: every ring in turn, then the tables
/// published since.
#[inline(never)]
fn pop_tables(a: &Arena<'_>) -> Option<u32> {
    let known = a.known_segments(GROUP_KIND);
    if known > 0 {
        let turn = a.segs.next_turn();
        let rings = u64::from(known) + 1;
        for i in 0..rings {
            let k = ((turn + i) % rings) as u32;
            if let Some(g) = table_ring(a, k).and_then(|r| r.pop()) {
                return Some(g);
            }
        }
    }
    // Every ring this process knows of is empty: a table published since may hold hints (a
    // load of the count, read-shared: an empty poll of a table that never grew writes nothing
    // more).
    if a.growth(GROUP_KIND) == 0 {
        return None;
    }
    let now = a.published(GROUP_KIND);
    if now <= known {
        return None;
    }
    a.refresh_segments(GROUP_KIND);
    (known + 1..=now).find_map(|k| table_ring(a, k).and_then(|r| r.pop()))
}

/// Whether a [`pop`] now would find every ready ring empty ([`Ring::is_empty`], the pop's own
/// test on the entry where it would start, read for writing as the pop reads it; [`looks_empty`]
/// reads it with a plain load): the base table's and every table published since, as `pop`
/// takes them.
///
/// [`Ring::is_empty`]: super::ring::Ring::is_empty
#[inline]
pub fn all_empty(a: &Arena<'_>) -> bool {
    ring(a).is_empty() && added_rings_empty(a)
}

/// [`all_empty`] past the base ring: the rings of the tables the group table added.
#[inline(never)]
fn added_rings_empty(a: &Arena<'_>) -> bool {
    // A table that may not grow has no other ring: no load of the shared count.
    if a.growth(GROUP_KIND) == 0 {
        return true;
    }
    (1..=a.published(GROUP_KIND)).all(|k| table_ring(a, k).is_none_or(|r| r.is_empty()))
}

/// Whether every ready ring looks empty: [`all_empty`] with plain loads (a spinning receiver's
/// look, shared by every spinner until a push takes the entry's line; the sweep's).
pub fn looks_empty(a: &Arena<'_>) -> bool {
    ring(a).looks_empty()
        && (1..=a.published(GROUP_KIND)).all(|k| table_ring(a, k).is_none_or(|r| r.looks_empty()))
}

/// Marks group `g` ready unless a hint is already queued. Returns whether it pushed one.
///
/// Groups that became ready by visibility expiry (no event) are found by a sweep; running a due
/// sweep first keeps them ahead of `g` in ready order (R6: a group is ready from the moment its
/// head became visible).
#[inline]
pub fn hint(a: &Arena<'_>, env: &dyn Env, me: Owner, g: u32) -> PResult<bool> {
    if sweep_due_first(a, env) {
        maybe_sweep(a, env, me)?;
    }
    let e = a.group(g)?;
    // A placeholder queued (layout 27: the group served in place)? Read for writing: the RMW
    // below writes the line next. Relaxed: a guess; the RMW decides.
    let w = crate::sync::load_for_write_u64(&e.claim, Ordering::Relaxed);
    if w & owner::STALE != 0 {
        return refresh_placeholder(a, env, g, e, w);
    }
    // SYNC POINT(ready-check): an RMW that always writes the bit (layout 24: the claim word's
    // `HINT`; a flag word of its own before): the receiver's CAS that takes the claim and
    // clears it then either reads our bit (and so sees what we published before) or comes
    // first (and we read it clear and push).
    let was = e.claim.fetch_or(owner::HINT, Ordering::AcqRel);
    if was & owner::STALE != 0 {
        // Served in place since our look (our RMW changed nothing).
        return refresh_placeholder(a, env, g, e, was);
    }
    if was & owner::HINT != 0 {
        return Ok(false);
    }
    push_hint(a, env, g, e)
}

/// Group `g` (entry `e`, its claim word last read as `w`, with `STALE`) became ready while
/// its queued hint is a placeholder (layout 27): a receive served the ring's only hint in
/// place and so consumed the place it stood for. R6 wants the group behind every group hinted
/// since: where the placeholder is still the ring's only hint, nothing is, and the hint is
/// made fresh where it stands (one CAS of the claim word, the ring's lines left read-shared:
/// a group that stays the only one ready, served again and again, moves no ring line); where
/// others are queued behind it, it is taken out of the ring (`Ring::pop_at`) and a fresh hint
/// pushed behind them. Where a pop took it already, its popper drops it (clears both bits,
/// `drop_placeholder`), and we wait for that, then hint as every producer does: a popper
/// whose look at the word came after a take-over of ours would read a fresh hint and serve
/// the group from the placeholder's place, ahead of the groups hinted since. Only a popper
/// that has not dropped it after [`TAKEOVER_ROUNDS`] looks (stopped, or dead) has its
/// placeholder taken over. Every way out comes after an RMW of ours on the word (SYNC
/// POINT(ready-check), as `hint`'s `fetch_or`: a receiver's claim after it reads what we
/// published before it). Returns whether a fresh hint
/// is queued that the caller rings for (SYNC POINT(doorbell): our RMW, SeqCst on x86 as every
/// locked instruction, then the caller's load of `waiters`).
#[inline(never)]
pub(crate) fn refresh_placeholder(
    a: &Arena<'_>,
    env: &dyn Env,
    g: u32,
    e: &GroupEntry,
    mut w: u64,
) -> PResult<bool> {
    let r = ring_for(a, g)?;
    let mut popped_rounds = 0;
    for _ in 0..MAX_STEPS {
        if w & owner::STALE == 0 {
            // Dropped by a popper, or made fresh or replaced by another ready-check: hint as
            // every producer does, an RMW that always writes (AcqRel: SYNC
            // POINT(ready-check), as in `hint`).
            w = e.claim.fetch_or(owner::HINT, Ordering::AcqRel);
            if w & owner::STALE != 0 {
                continue; // a placeholder again (served in place since)
            }
            if w & owner::HINT != 0 {
                return Ok(false);
            }
            return push_hint(a, env, g, e);
        }
        match r.first() {
            Some((_, v, true)) if v == g => {
                // The ring's only hint: fresh where it stands.
                match clear_stale(e, w) {
                    Ok(()) => {
                        // Made fresh, not yet rung for.
                        crash_point!();
                        return Ok(true);
                    }
                    Err(now) => w = now,
                }
            }
            Some((p, v, false)) if v == g => {
                // Others queued behind it: take it out, then queue a fresh one behind them.
                if r.pop_at(p, g) {
                    crash_point!();
                    // The bits are ours now (the placeholder gone, nobody pops it): the hint
                    // we push, whatever cleared `STALE` meanwhile. A ready-check that found
                    // the placeholder the ring's only hint just before our pop clears it by
                    // its CAS and believes the hint fresh where it stood, which we took out:
                    // ours is then the group's one hint. (A take-over of a popper past
                    // `TAKEOVER_ROUNDS`, where we were that slow, leaves a duplicate, which
                    // pops re-validate.) AcqRel: SYNC POINT(ready-check), as in `clear_stale`.
                    e.claim.fetch_and(!owner::STALE, Ordering::AcqRel);
                    crash_point!();
                    return push_hint(a, env, g, e);
                }
                // Popped meanwhile. Relaxed: the RMWs above decide.
                w = e.claim.load(Ordering::Relaxed);
            }
            _ => {
                // Popped already: its popper drops it (clears both bits). Wait for that a
                // while; a popper that never does (stopped, or dead) has it taken over.
                popped_rounds += 1;
                if popped_rounds < TAKEOVER_ROUNDS {
                    crate::sync::spin_hint();
                    // Relaxed: the RMWs above decide.
                    w = e.claim.load(Ordering::Relaxed);
                    continue;
                }
                match clear_stale(e, w) {
                    Ok(()) => {
                        crash_point!();
                        return push_hint(a, env, g, e);
                    }
                    Err(now) => w = now,
                }
            }
        }
    }
    Err(Fault::Corrupted(
        "a group's hint placeholder did not settle",
    ))
}

/// Looks a ready-check takes at a placeholder another participant popped before it takes the
/// hint over ([`refresh_placeholder`]): the popper's drop is a few instructions after its
/// pop, unless it has stopped or died.
const TAKEOVER_ROUNDS: u32 = 64;

/// Clears `STALE` from group entry `e`'s claim word, found as `w`; else the word found.
/// SYNC POINT(ready-check): AcqRel, our CAS is the RMW a receiver's claim then reads, as a
/// producer's `fetch_or` (it reads what we published before; a claim before it is read by it).
#[inline]
fn clear_stale(e: &GroupEntry, w: u64) -> Result<(), u64> {
    e.claim
        .compare_exchange(w, w & !owner::STALE, Ordering::AcqRel, Ordering::Relaxed)
        .map(|_| ())
}

/// A receive popped group `g`'s hint and found its claim word `w` with `STALE` (layout 27):
/// the hint is a placeholder, whose place a receive served in place consumed. Drops it: both
/// bits cleared (a ready-check after our CAS finds `HINT` clear and pushes; one before it
/// made the hint fresh, which our CAS then finds, and we serve it). Returns whether it was
/// dropped.
#[inline(never)]
pub(crate) fn drop_placeholder(e: &GroupEntry, mut w: u64) -> bool {
    for _ in 0..MAX_STEPS {
        if w & owner::STALE == 0 {
            return false;
        }
        // AcqRel: SYNC POINT(ready-check), the popper's side (as the claim's CAS that clears
        // `HINT`).
        match e.claim.compare_exchange(
            w,
            w & !owner::HINT_BITS,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(_) => return true,
            Err(now) => w = now,
        }
    }
    false
}

/// Whether position `p` of the base ring still holds group `g`'s hint ([`Ring::holds`]): a
/// receive that served it in place checks it after its claim.
#[inline]
pub fn still_queued(a: &Arena<'_>, p: u64, g: u32) -> bool {
    ring(a).holds(p, g)
}

/// Takes back the `STALE` a receive set by claiming group entry `e` in place (claim `cw`,
/// still ours), where the hint turned out not to be where it looked ([`still_queued`]).
/// Bounded: DIRTY requests and producers' RMWs may change the word under us; a word no longer
/// ours is left alone.
pub(crate) fn unmark_in_place(e: &GroupEntry, cw: u64) {
    for _ in 0..MAX_STEPS {
        // Relaxed: the CAS decides.
        let w = e.claim.load(Ordering::Relaxed);
        if owner::clean(w) != cw || w & owner::STALE == 0 {
            return;
        }
        // AcqRel: SYNC POINT(ready-check), as `clear_stale`: the hint is fresh again.
        if e.claim
            .compare_exchange(w, w & !owner::STALE, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
        {
            return;
        }
    }
}

/// The group whose hint is the base ring's only one, and its position, where the group
/// table never grew (one ring: a grown table's rings are served in turn, and another may
/// hold hints): what a receive serves *in place* (layout 27), its hint left queued as a
/// placeholder ([`group::try_claim_in_place`]). Plain loads ([`Ring::first`]).
#[inline]
pub fn only(a: &Arena<'_>) -> Option<(u64, u32)> {
    if a.known_segments(GROUP_KIND) != 0
        || (a.growth(GROUP_KIND) > 0 && a.published(GROUP_KIND) > 0)
    {
        return None;
    }
    match ring(a).first() {
        Some((p, g, true)) => Some((p, g)),
        _ => None,
    }
}

/// Whether a hint now runs a due sweep first ([`hint`]): some deadline is pending and has
/// passed. Relaxed: a trigger only; `maybe_sweep` re-reads it with Acquire. The clock is read
/// only when some deadline is pending.
#[inline]
pub(crate) fn sweep_due_first(a: &Arena<'_>, env: &dyn Env) -> bool {
    let ne = a.hdr.next_expiry.0.load(Ordering::Relaxed);
    ne != u64::MAX && env.now_ms() >= ne
}

/// Pushes group `g`'s hint (entry `e`), whose `HINT` bit our RMW has just set (it was clear):
/// [`hint`]'s second half, and a release's that set the bit with its own CAS. Returns whether
/// it pushed. Inlined into both (the send's hint was one function before).
#[inline(always)]
pub(crate) fn push_hint(a: &Arena<'_>, env: &dyn Env, g: u32, e: &GroupEntry) -> PResult<bool> {
    let pushed = ring_for(a, g)?.push(g);
    crash_point!();
    if pushed {
        return Ok(true);
    }
    // Ring full: only under corruption (each table's ring has one entry per entry of its
    // table). The group is filed on the expiry wheel as due now, so that the next sweep (due
    // now) hints it once the ring has room. Release: our hint reset happens before the
    // wheel's SeqCst RMW, which a drain's clearing swap reads, so the drain's hint RMW finds
    // it reset.
    clear_hint(e, Ordering::Release);
    let now = env.now_ms();
    super::timers::file(a, g, now)?;
    // AcqRel: as a receiver's deadline (SYNC POINT(expiry-publish)): a sweep that reset it
    // before reads our bit on the wheel, a later one runs because of it.
    a.hdr.next_expiry.0.fetch_min(now, Ordering::AcqRel);
    Ok(false)
}

/// Clears group entry `e`'s `HINT` bit (a hint that could not be pushed, or was popped for a
/// group that is gone), an RMW only where it is set; `order`: the caller says why.
pub(crate) fn clear_hint(e: &GroupEntry, order: Ordering) {
    // Relaxed: only a test; the RMW below carries the ordering.
    if e.claim.load(Ordering::Relaxed) & owner::HINT_BITS != 0 {
        e.claim.fetch_and(!owner::HINT_BITS, order);
    }
}

/// Hints group `g` (entry `e`) and rings the doorbell if its first message can be received now:
/// after a release of its claim, or a message made visible outside a receive.
pub(crate) fn hint_if_ready(
    a: &Arena<'_>,
    env: &dyn Env,
    me: Owner,
    g: u32,
    e: &GroupEntry,
) -> PResult<()> {
    if ready_now(a, env, e)? && hint(a, env, me, g)? {
        notify(a, env, me);
    }
    Ok(())
}

/// Whether group `e`'s first live message can be received now, or is past its retention
/// period (whoever takes the claim then removes it): what makes a group worth a hint.
#[inline]
pub(crate) fn ready_now(a: &Arena<'_>, env: &dyn Env, e: &GroupEntry) -> PResult<bool> {
    Ok(matches!(
        status(a, env, e)?,
        Status::Deliverable | Status::Expired
    ))
}

/// Readiness of a group, read without its claim (a hint; the claim holder re-validates).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Status {
    /// Its first live message is visible.
    Deliverable,
    /// Its first live message is in flight until this deadline.
    Locked(u64),
    /// No message.
    Empty,
    /// Its first message is still being published by a live producer.
    Pending,
    /// Its first live message is past its retention period (T1): whoever takes the claim
    /// removes it.
    Expired,
}

pub(crate) fn status(a: &Arena<'_>, env: &dyn Env, e: &GroupEntry) -> PResult<Status> {
    // Acquire: SYNC POINT(group-publish).
    if gstate::kind(e.state.load(Ordering::Acquire)) != gstate::ACTIVE {
        return Ok(Status::Empty);
    }
    // SeqCst: SYNC POINT(ready-check).
    let mut cur = e.head.load(Ordering::SeqCst);
    for _ in 0..1024 {
        let (next, m, ninc) = match successor(a, cur)? {
            // Moved under us: let a claim holder look.
            Next::Stale => return Ok(Status::Deliverable),
            Next::End => return Ok(Status::Empty),
            Next::Node(next, m, ninc) => (next, m, ninc),
        };
        // SeqCst: SYNC POINT(ready-check).
        let w = m.own.vis.load(Ordering::SeqCst);
        // A pack's (layout 22) first member not deleted stands for it. SeqCst: SYNC
        // POINT(ready-check), as above. SAFETY: a hint read (the claim holder re-validates);
        // it copies nothing into payloads.
        let w = match unsafe { super::list::first_live(a, next, m, w, Ordering::SeqCst) } {
            Ok(Some((_, w))) => w,
            Ok(None) => vis::pack(0, vis::DELETED),
            // A pack whose directory does not check (moved on, or damaged): let a claim
            // holder look.
            Err(_) => return Ok(Status::Deliverable),
        };
        match vis::state(w) {
            vis::State::Deleted => cur = node::pack(ninc, next),
            vis::State::Published(d) => {
                // Relaxed: a hint (the claim holder re-validates).
                let sent = m.sent.load(Ordering::Relaxed);
                // The clock and the settings only where a message stands (a kept group's
                // re-check after its reopen reads neither).
                let t = Times::load(a, env);
                return Ok(match t.standing(sent, d) {
                    Standing::Expired => Status::Expired,
                    Standing::InFlight => Status::Locked(d.min(t.expiry(sent))),
                    Standing::Delayed => Status::Locked(sent.saturating_add(t.delay)),
                    Standing::Visible => Status::Deliverable,
                });
            }
            vis::State::Claimed(o) if a.owner_dead(env, o) => return Ok(Status::Deliverable),
            vis::State::Claimed(_) => return Ok(Status::Pending),
            vis::State::Free | vis::State::Packed => return Ok(Status::Deliverable),
        }
    }
    Ok(Status::Deliverable)
}

/// Gets group `g` cleaned up and re-checked for readiness (after a delete, or when a hint met
/// a busy claim): take its claim, or ask its live holder to do it (DIRTY) before it releases.
pub(crate) fn poke(a: &Arena<'_>, env: &dyn Env, me: Owner, g: u32) -> PResult<()> {
    poke_as(a, env, me, g, false)
}

/// [`poke`] by a receiver that popped a ready hint of the group and found its claim busy:
/// the CAS that asks the holder to clean up again (or the one that takes the claim, if the
/// holder released meanwhile) also clears the word's `HINT` bit, as the receiver's claim
/// would have (layout 24), so that the holder's re-check, or the next producer, hints the
/// group anew.
#[cold]
pub(crate) fn poke_taking_hint(a: &Arena<'_>, env: &dyn Env, me: Owner, g: u32) -> PResult<()> {
    poke_as(a, env, me, g, true)
}

/// [`poke`], clearing the `HINT` bit if `take_hint` (inlined into both: the hot one, the
/// delete's, is then what it was before the bit).
#[inline(always)]
fn poke_as(a: &Arena<'_>, env: &dyn Env, me: Owner, g: u32, take_hint: bool) -> PResult<()> {
    let e = a.group(g)?;
    let taken = if take_hint { owner::HINT_BITS } else { 0 };
    for _ in 0..MAX_STEPS {
        // Acquire: SYNC POINT(group-publish).
        let st = e.state.load(Ordering::Acquire);
        if gstate::kind(st) != gstate::ACTIVE {
            if take_hint {
                clear_hint(e, Ordering::Relaxed); // the hint we popped: the group is gone
            }
            return Ok(()); // retired: nothing left to clean
        }
        let ginc = gstate::ginc(st);
        // Acquire: SYNC POINT(claim).
        let cur = e.claim.load(Ordering::Acquire);
        let live_holder = owner::clean(cur) != 0
            && owner::claims_ginc(cur, ginc)
            && (Owner::of_word(cur) == me || !a.owner_dead(env, Owner::of_word(cur)));
        if live_holder {
            if cur & owner::DIRTY != 0 && cur & taken == 0 {
                // The holder will clean again before it releases (another request is
                // pending). Not a plain return: nothing of ours would order our deletion (a
                // CAS to DELETED_UNCOUNTED) before the holder's look, which clears the bit by
                // an RMW and then reads the message's word. Release, by an RMW that changes
                // nothing: either it comes before the holder's clearing CAS in the word's
                // modification order (which then reads it, so our deletion happens before the
                // cleanup's load), or after it (it fails, finds the bit clear, and we set it
                // ourselves below). Rare: a second deleter while a request waits.
                if e.claim
                    .compare_exchange(cur, cur, Ordering::Release, Ordering::Relaxed)
                    .is_ok()
                {
                    return Ok(());
                }
                continue;
            }
            // Release: our deletion (a CAS to DELETED_UNCOUNTED, layout 25) happens before the
            // holder's Acquire load of DIRTY.
            if e.claim
                .compare_exchange(
                    cur,
                    (cur | owner::DIRTY) & !taken,
                    Ordering::Release,
                    Ordering::Relaxed,
                )
                .is_ok()
            {
                return Ok(());
            }
        } else {
            let claimed = if take_hint {
                group::try_claim_taking_hint(a, env, e, me, ginc)
            } else {
                group::try_claim(a, env, e, me, ginc)
            };
            match claimed {
                TryClaim::Acquired { cw, .. } => {
                    if or_release(e, cw, cleanup(a, env, cw, g, e))? == Cleaned::Retired {
                        return Ok(());
                    }
                    // A delete's poke (a hint's has nothing to count): its own uncounted
                    // deletions, where the cleanup could not reach them.
                    if !take_hint {
                        or_release(e, cw, crate::protocol::release::count_uncounted(a, e))?;
                    }
                    return or_release(e, cw, release(a, env, me, cw, g));
                }
                TryClaim::Gone => return Ok(()),
                TryClaim::Busy(_) => {}
            }
        }
        crate::sync::spin_hint();
    }
    Err(Fault::Corrupted("claim did not converge"))
}
