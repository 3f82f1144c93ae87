//! The group table's count (`active_groups`) and its kept groups (layout 17): an insert
//! counting itself in under the capacity (reclaiming kept groups first when at it), the
//! recount that corrects dead participants' leaks, the census of groups with messages, the
//! retire that keeps a group, and the plain tombstone of a dead inserter's entry. Invariant K
//! (ARCHITECTURE.md, "Group table"): the count is the entries INSERTING, ACTIVE or kept, plus
//! the leaks of participants that died between a count change and its entry's CAS.

use super::{gstate, Arena, Owner, PResult};
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
/// ([`reclaim_kept`], layout 17); unless that frees an eighth of the capacity where the table
/// may grow, the table grows anyway: one that full of groups with messages would soon scan
/// again.
pub(super) fn count_in(
    a: &Arena<'_>,
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
        let freed = reclaim_kept(a)?;
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
    // A group being retired (its list closed) is kept a moment later, and only then can it be
    // reclaimed; a quarantine counts its group out a moment after marking it: give those a
    // few rounds to finish before reporting the table full.
    *full_retries += 1;
    if *full_retries < 16 {
        crate::sync::yield_hint();
        return Ok(Counted::Again);
    }
    if *full_retries == 16 {
        // What was kept since the first reclaim leaves the count now.
        if reclaim_kept(a)? > 0 {
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

/// The entries in use (ACTIVE, INSERTING or kept) in every published table, if fewer than
/// `cap`.
fn recount(a: &Arena<'_>, cap: u64) -> Option<u64> {
    let real = a
        .all_groups()
        // Relaxed: a census for the capacity counter only.
        .filter(|(_, e)| counted_state(e.state.load(Ordering::Relaxed)))
        .count() as u64;
    (real < cap).then_some(real)
}

/// Whether an entry in state `st` counts in `active_groups`: INSERTING, ACTIVE, or kept.
pub fn counted_state(st: u64) -> bool {
    matches!(gstate::kind(st), gstate::ACTIVE | gstate::INSERTING) || gstate::is_kept(st)
}

/// The groups ACTIVE now in every published table (a census: each state word read once, with
/// no claim; the count of groups with messages, whatever the kept entries).
pub fn count_active(a: &Arena<'_>) -> u64 {
    a.all_groups()
        // Relaxed: a census for reports.
        .filter(|(_, e)| gstate::kind(e.state.load(Ordering::Relaxed)) == gstate::ACTIVE)
        .count() as u64
}

/// Turns every kept group of the published tables into a plain tombstone, out of the count
/// (layout 17): what an insert at the capacity does before it grows the table or reports it
/// full. Each by a CAS from the kept word read (a reviver or a reuser of the entry may win
/// it instead), counted out at once (one that dies between the two leaves the count one
/// over, as a dead inserter does). Returns how many it took out.
pub fn reclaim_kept(a: &Arena<'_>) -> PResult<u64> {
    let mut freed = 0;
    for (_, e) in a.all_groups() {
        // Relaxed: the CAS below decides, and a kept entry carries no data to read.
        let st = e.state.load(Ordering::Relaxed);
        if !gstate::is_kept(st) {
            continue;
        }
        let plain = gstate::pack(gstate::ginc(st), gstate::TOMBSTONE, Owner::NOBODY);
        // Relaxed: the entry stays a reusable tombstone with the same key and incarnation;
        // a reuser's Acquire CAS of `state` pairs with the retire's Release (kept), which
        // this CAS continues in the word's modification order (release sequence).
        if e.state
            .compare_exchange(st, plain, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
        {
            crash_point!();
            // Relaxed: a capacity counter.
            a.hdr.active_groups.0.fetch_sub(1, Ordering::Relaxed);
            freed += 1;
        }
    }
    Ok(freed)
}

/// Retires the ACTIVE group whose state word is `st` into a kept entry (layout 17): its key
/// stays, and so does its place in `active_groups`. Returns whether this call did it.
pub fn keep(e: &GroupEntry, st: u64) -> bool {
    // Release: our last writes to the entry happen before a reviver's or reuser's Acquire
    // CAS of `state`.
    e.state
        .compare_exchange(
            st,
            gstate::kept(gstate::ginc(st)),
            Ordering::Release,
            Ordering::Relaxed,
        )
        .is_ok()
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
