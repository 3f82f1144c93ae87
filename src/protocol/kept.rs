//! The group table's count (`active_groups`) and its kept groups: an insert counting itself in
//! under the capacity (reclaiming kept groups first when at it), the recount that corrects dead
//! participants' leaks, the census of groups with messages, and the plain tombstone of a dead
//! inserter's entry. A kept group (layout 19) is an idle one: `ACTIVE`, its list emptied and
//! reopened at its sentinel, its key in place, so that its next send appends with no insert.
//! Invariant K (ARCHITECTURE.md, "Group table"): the count is the entries INSERTING or ACTIVE,
//! plus the leaks of participants that died between a count change and its entry's CAS.

use super::group::{self, TryClaim};
use super::release::{cleanup, or_release, release, release_claim_word, retire_idle, Cleaned};
use super::{gstate, node, Arena, Env, Fault, Owner, PResult};
use crate::layout::GroupEntry;
use crate::sync::Ordering;

/// Whether an insert may count itself into `active_groups`.
pub(super) enum Counted {
    /// Counted: go on.
    Yes,
    /// Not now: scan again (a retire about to leave the count, or a corrected count).
    Again,
    /// At the capacity.
    Full,
}

/// Counts a new group into `active_groups` unless that reaches `cap` (the capacity of the
/// tables published). `may_grow`: the group table may add a table, so a full count is
/// answered at once (the caller grows) instead of waited on. The first time an insert finds
/// the count at the capacity (`reclaimed` false), the kept groups leave the count first
/// ([`reclaim_kept`]); unless that frees an eighth of the capacity where the table
/// may grow, the table grows anyway: one that full of groups with messages would soon scan
/// again.
pub(super) fn count_in(
    a: &Arena<'_>,
    env: &dyn Env,
    me: Owner,
    cap: u64,
    may_grow: bool,
    full_retries: &mut u32,
    reclaimed: &mut bool,
) -> PResult<Counted> {
    // Relaxed: a capacity counter; an over-count after a crash is corrected by recovery.
    let active = a.hdr.active_groups.0.fetch_add(1, Ordering::Relaxed);
    if active < cap {
        return Ok(Counted::Yes);
    }
    a.hdr.active_groups.0.fetch_sub(1, Ordering::Relaxed);
    if !core::mem::replace(reclaimed, true) {
        let freed = reclaim_kept(a, env, me, false)?;
        if freed > 0 && (!may_grow || freed >= cap / 8) {
            return Ok(Counted::Again);
        }
    }
    // The table grows (layout 16), for a count that inserts could have made: at most one
    // insert in progress per participant past the capacity (and a few dead inserters' leaks).
    // A count further past it was not made by inserts (a damaged word): the table must not
    // grow to the size limit for it, so the waits and the recount below decide, as in a table
    // that cannot grow. (Not recounted before each growth: a recount is a racy snapshot whose
    // store loses the increments of inserters between their count and their entry, which a
    // loom model caught making the count wrap.)
    if may_grow && active <= cap.saturating_add(a.parts.len() as u64 + 64) {
        return Ok(Counted::Full);
    }
    // A group being emptied is kept (idle) a moment later, and only then can it be
    // reclaimed; a quarantine counts its group out a moment after marking it: give those a
    // few rounds to finish before reporting the table full, reclaiming again after 2, 4 and 8
    // of them (layout 19: another key's insert never takes a kept group's entry as its room,
    // so what was kept since the first reclaim makes room only through a reclaim).
    *full_retries += 1;
    if *full_retries < 16 {
        if full_retries.is_power_of_two()
            && *full_retries > 1
            && reclaim_kept(a, env, me, true)? > 0
        {
            return Ok(Counted::Again);
        }
        crate::sync::yield_hint();
        return Ok(Counted::Again);
    }
    if *full_retries == 16 {
        // What was kept since the first reclaim leaves the count now.
        if reclaim_kept(a, env, me, true)? > 0 {
            return Ok(Counted::Again);
        }
        // The counter is over by one for each participant that died between a count change
        // and its entry's: recount once (a racy snapshot, corrected again the next time).
        if let Some(real) = recount(a, cap) {
            a.hdr.active_groups.0.store(real, Ordering::Relaxed);
            return Ok(Counted::Again);
        }
    }
    Ok(Counted::Full)
}

/// The entries in use (ACTIVE or INSERTING) in every published table, if fewer than `cap`.
fn recount(a: &Arena<'_>, cap: u64) -> Option<u64> {
    let real = a
        .all_groups()
        // Relaxed: a census for the capacity counter only.
        .filter(|(_, e)| counted_state(e.state.load(Ordering::Relaxed)))
        .count() as u64;
    (real < cap).then_some(real)
}

/// Whether an entry in state `st` counts in `active_groups`: INSERTING or ACTIVE (kept groups
/// are ACTIVE).
pub fn counted_state(st: u64) -> bool {
    matches!(gstate::kind(st), gstate::ACTIVE | gstate::INSERTING)
}

/// Whether group `g` (entry `e`, ACTIVE) is kept: idle, its `head` on its sentinel and the
/// sentinel's link `NIL` (read without the claim: a census, or a hint the claim holder checks
/// again).
pub fn is_kept(a: &Arena<'_>, g: u32, e: &GroupEntry) -> bool {
    // Acquire: a reopen's Release stores (of the sentinel's word, then its `head` store).
    let h = e.head.load(Ordering::Acquire);
    node::index(h) == a.sentinel_index(g)
        && e.sentinel.load(Ordering::Acquire) == node::pack(node::inc(h), node::NIL)
}

/// The groups with messages now in every published table: ACTIVE and not at rest (a census:
/// each entry read once, with no claim; a group at rest is kept, or closed by a reclaim that is
/// retiring it).
pub fn count_active(a: &Arena<'_>) -> u64 {
    a.all_groups()
        // Relaxed: a census for reports.
        .filter(|&(g, e)| {
            gstate::kind(e.state.load(Ordering::Relaxed)) == gstate::ACTIVE && !at_rest(a, g, e)
        })
        .count() as u64
}

/// Whether group `g`'s `head` is on its sentinel and the sentinel's link is `NIL` (kept) or
/// `CLOSED` (a reclaimer closed it and is retiring it, or died first: the cleanup finishes
/// that): no message either way.
pub fn at_rest(a: &Arena<'_>, g: u32, e: &GroupEntry) -> bool {
    // Acquire: as in `is_kept`.
    let h = e.head.load(Ordering::Acquire);
    let l = e.sentinel.load(Ordering::Acquire);
    node::index(h) == a.sentinel_index(g)
        && node::inc(l) == node::inc(h)
        && matches!(node::index(l), node::NIL | node::CLOSED)
}

/// Retires every kept group of the published tables into a plain tombstone, out of the count:
/// what an insert at the capacity does before it grows the table or reports it full. For each,
/// under its claim (a group whose claim is held is passed over): a cleanup (which frees what a
/// dead holder left), then, if it is still idle, a SeqCst CAS of its sentinel's link from `NIL`
/// to `CLOSED` (against appenders' link CAS: an append that wins keeps the group, and the
/// release hints it), then [`retire_idle`]. A reclaimer that dies after the close leaves the
/// retire to the next holder's cleanup (`release::cleanup_inner`), and appenders meeting the
/// closed sentinel help it there. Returns how many it took out.
///
/// `fresh_too`: also a group inserted and never sent to yet (its sentinel at position 0),
/// whose inserter is about to append, or died first. An insert's first reclaim leaves those
/// alone, so that two inserters at the capacity do not retire each other's new groups; its
/// later ones take them (one whose inserter died would otherwise hold its entry for good).
/// A fault met in one group (a damaged word) passes that group over: it is that group's, not
/// the insert's.
pub fn reclaim_kept(a: &Arena<'_>, env: &dyn Env, me: Owner, fresh_too: bool) -> PResult<u64> {
    let mut freed = 0;
    for (g, e) in a.all_groups() {
        // Acquire: SYNC POINT(group-publish).
        let st = e.state.load(Ordering::Acquire);
        if gstate::kind(st) != gstate::ACTIVE || !at_rest(a, g, e) {
            continue;
        }
        // Relaxed: a hint; a group sent to meanwhile is no longer idle, which the close checks.
        if !fresh_too && e.sentinel_pos.load(Ordering::Relaxed) == 0 {
            continue;
        }
        let TryClaim::Acquired { cw, .. } = group::try_claim(a, env, e, me, gstate::ginc(st))
        else {
            continue;
        };
        match or_release(e, cw, cleanup(a, env, cw, g, e)) {
            Ok(Cleaned::Kept) => {}
            Ok(Cleaned::Retired) => {
                freed += 1; // a dead reclaimer's close, retired by the cleanup
                continue;
            }
            Err(f) if passed_over(f) => continue,
            Err(f) => return Err(f),
        }
        // Acquire: as in `is_kept`; we hold the claim, so `head` stays.
        let h = e.head.load(Ordering::Acquire);
        let open = node::pack(node::inc(h), node::NIL);
        // SeqCst: SYNC POINT(quarantine-close), as a reopen's close.
        let closed = node::index(h) == a.sentinel_index(g)
            && e.sentinel
                .compare_exchange(
                    open,
                    node::pack(node::inc(h), node::CLOSED),
                    Ordering::SeqCst,
                    Ordering::Relaxed,
                )
                .is_ok();
        if !closed {
            match or_release(e, cw, release(a, env, me, cw, g)) {
                Err(f) if !passed_over(f) => return Err(f),
                _ => continue,
            }
        }
        crash_point!();
        retire_idle(a, e)?;
        release_claim_word(e, cw);
        freed += 1;
    }
    Ok(freed)
}

/// Whether a reclaim passes over the group where it met fault `f`: a damaged word of that
/// group, not a stop (loom) or a segment this process cannot map (a local failure).
fn passed_over(f: Fault) -> bool {
    !super::stopped(f) && !matches!(f, Fault::Mapping(_))
}

/// Turns the entry whose state word is `st` (INSERTING by a dead inserter) into a plain
/// tombstone and takes it out of the active count. Returns whether this call did it.
pub fn tombstone(a: &Arena<'_>, e: &GroupEntry, st: u64) -> bool {
    let dead = gstate::pack(gstate::ginc(st), gstate::TOMBSTONE, Owner::NOBODY);
    // Release: our last writes to the entry happen before a reuser's Acquire CAS of `state`.
    if e.state
        .compare_exchange(st, dead, Ordering::Release, Ordering::Relaxed)
        .is_ok()
    {
        // Relaxed: a capacity counter, no data depends on it.
        a.hdr.active_groups.0.fetch_sub(1, Ordering::Relaxed);
        return true;
    }
    false
}
