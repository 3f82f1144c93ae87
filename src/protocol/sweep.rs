//! The sweep: re-derives ready hints lost by participants that died or stopped, finds the
//! groups whose visibility, delay or retention ended (the expiry wheel, `timers`), repairs dead
//! claims and inserts, and reopens emptied groups' lists. Run by idle receivers when due, by producers
//! that found their size class full, by recovery, and when a settings change asks
//! (`live::reschedule`).

use super::accounting::count;
use super::doorbell::notify;
use super::group::{self, TryClaim};
use super::list::{remove_unit, successor, Cycle, Next};
use super::ready::{looks_empty, poke, ring_for, status, Status};
use super::release::{cleanup, or_release, release, Cleaned};
use super::timers;
use super::times::Times;
use super::Owner;
use super::{gstate, node, owner, vis, Arena, Env, PResult};
use crate::layout::{counter, GroupEntry};
use crate::sync::Ordering;

/// Group table entries one periodic sweep visits.
pub use crate::layout::SWEEP_CHUNK;

/// A receiver that finds no hint sweeps at least this often, re-deriving lost hints.
pub const SWEEP_PERIOD_MS: u64 = 1000;

/// Sweeps if a visibility deadline has passed or the last sweep is old. Returns whether it did.
pub fn maybe_sweep(a: &Arena<'_>, env: &dyn Env, me: Owner) -> PResult<bool> {
    sweep_if_due(a, env, me, SWEEP_PERIOD_MS, false)
}

/// [`maybe_sweep`] for a receiver that found the ready ring empty: it also sweeps again within
/// the millisecond of the last sweep when an expiry is due and the ring looks empty, as it is
/// when groups ready beyond the ring's capacity wait on the wheel (filed as due now, layout
/// 16) and the ring has drained. Such a sweep is never idle work: with an empty ring it may
/// push as many hints as the ring holds, and it clears every due bit it looks at.
pub fn sweep_if_idle(a: &Arena<'_>, env: &dyn Env, me: Owner) -> PResult<bool> {
    sweep_if_due(a, env, me, SWEEP_PERIOD_MS, true)
}

/// Whether an idle receiver's sweep ([`sweep_if_idle`]) may be due at `now`: a visibility
/// deadline passed or the last sweep is a period old. Where it says no, `sweep_if_idle`
/// sweeps nothing (`receive::idle`).
pub fn idle_sweep_due(a: &Arena<'_>, now: u64) -> bool {
    due_at(a, now, SWEEP_PERIOD_MS).0
}

/// Whether a sweep is due at `now` with `period` between sweeps, and the `next_expiry` and
/// `last_sweep` words it was decided on.
#[inline]
fn due_at(a: &Arena<'_>, now: u64, period: u64) -> (bool, u64, u64) {
    // Acquire: pairs with the fetch_min of receivers, and (SYNC POINT(reschedule)) with a
    // settings change's Release store of 0 after its setting stores (`live::reschedule`).
    let ne = a.hdr.next_expiry.0.load(Ordering::Acquire);
    // Relaxed: the CAS below decides who sweeps.
    let ls = a.hdr.last_sweep.0.load(Ordering::Relaxed);
    (now >= ne || now >= ls.saturating_add(period), ne, ls)
}

/// A producer that found its size class full: a full sweep (which removes messages past their
/// retention period, T1) if none ran in the last [`FULL_CLASS_SWEEP_MS`], so that a full class
/// costs at most that many sweeps per second across the queue. Returns whether it swept.
pub fn sweep_for_room(a: &Arena<'_>, env: &dyn Env, me: Owner) -> PResult<bool> {
    sweep_if_due(a, env, me, FULL_CLASS_SWEEP_MS, false)
}

/// Shortest time between two sweeps run for a full size class (ms).
pub const FULL_CLASS_SWEEP_MS: u64 = 10;

/// Sweeps if a visibility deadline has passed or the last sweep is `period` ms old; `idle`: see
/// [`sweep_if_idle`].
fn sweep_if_due(a: &Arena<'_>, env: &dyn Env, me: Owner, period: u64, idle: bool) -> PResult<bool> {
    let now = env.now_ms();
    let (due, ne, ls) = due_at(a, now, period);
    // Once a millisecond, unless asked (`next_expiry == 0`) or idle with an expiry due and the
    // ring drained (`sweep_if_idle`).
    let again = ne == 0 || (idle && now >= ne && looks_empty(a));
    if !due || (now == ls && !again) {
        return Ok(false);
    }
    // AcqRel: one sweeper per millisecond.
    if a.hdr
        .last_sweep
        .0
        .compare_exchange(ls, now, Ordering::AcqRel, Ordering::Relaxed)
        .is_err()
    {
        return Ok(false);
    }
    // Only expiries are due: drain the wheel's due buckets. Periodically, also look at the
    // next chunk of the group table (re-deriving hints lost by a participant that died or
    // stopped, and arming deadlines left off the wheel); when asked (`next_expiry == 0`), at
    // the whole table.
    let scope = if ne == 0 {
        Scope::Table
    } else if now >= ls.saturating_add(period) {
        Scope::Chunk
    } else {
        Scope::Expiries
    };
    sweep_with(a, env, me, scope)?;
    Ok(true)
}

/// What a sweep looks at besides the wheel's due buckets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scope {
    /// Nothing else: the groups filed at expired deadlines.
    Expiries,
    /// The next [`SWEEP_CHUNK`] entries of the group table (all of a smaller table).
    Chunk,
    /// The whole group table.
    Table,
}

/// What a sweep did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Swept {
    /// Ready hints pushed.
    pub pushed: usize,
    /// Groups looked at (on the wheel and in the table).
    pub visited: usize,
}

/// Re-derives ready hints for every group, repairs dead claims and inserts, reopens emptied
/// groups, files every locked group on the expiry wheel and recomputes the next visibility
/// deadline. O(group table): run by recovery and when asked (`next_expiry == 0`); the sweeps
/// of idle receivers drain the wheel and look at one chunk of the table at a time.
pub fn sweep(a: &Arena<'_>, env: &dyn Env, me: Owner) -> PResult<usize> {
    Ok(sweep_with(a, env, me, Scope::Table)?.pushed)
}

/// The sweep of an idle receiver that found a deadline passed (or its period over), as
/// [`maybe_sweep`] runs it when due: the wheel's due buckets, then, when `periodic`, the
/// next chunk of the group table. For tests and models that count its work.
#[cfg(any(test, feature = "loom"))]
pub fn sweep_due(a: &Arena<'_>, env: &dyn Env, me: Owner, periodic: bool) -> PResult<Swept> {
    let scope = if periodic {
        Scope::Chunk
    } else {
        Scope::Expiries
    };
    sweep_with(a, env, me, scope)
}

/// A sweep: drains the expiry wheel's due buckets, then looks at the table `scope` names
/// (hinting there also ready groups whose head was never received, normally hinted by their
/// producer). Groups ready by visibility expiry are hinted in deadline order (R6).
fn sweep_with(a: &Arena<'_>, env: &dyn Env, me: Owner, scope: Scope) -> PResult<Swept> {
    // Swap (an RMW) then fetch_min: a receiver's fetch_min before the swap is acquired by it,
    // so the wheel (or the table) read below holds that receiver's deadline; later ones are
    // kept. SYNC POINT(expiry-publish): SeqCst swap and fence before the reads, against a
    // receiver's SeqCst deadline CAS, arming, then SeqCst load of `next_expiry` (which skips
    // its fetch_min when an earlier deadline is pending): either it sees our reset or we see
    // its deadline (on the wheel: SYNC POINT(expiry-wheel)).
    a.hdr.next_expiry.0.swap(u64::MAX, Ordering::SeqCst);
    crate::sync::fence(Ordering::SeqCst);
    let now = env.now_ms();
    let full = scope != Scope::Expiries;
    let mut min = u64::MAX;
    let mut out = Swept::default();
    let mut expired: Vec<(u64, u32)> = Vec::new();
    // One group: hinted if its deadline passed, its deadline returned if it is still locked.
    // `filed`: found on the wheel, where whoever found it locked or delayed left its hint to
    // the sweep, so it is hinted when deliverable even if its head was never received.
    let mut look = |g: u32, min: &mut u64, filed: bool| -> Option<u64> {
        let Ok(e) = a.group(g) else { return None };
        // A corrupted group is skipped: it must not stop the sweep for every other group.
        match sweep_group(a, env, me, g, e, full || filed) {
            Ok(Found::Ready(d)) => {
                expired.push((d, g));
                None
            }
            Ok(Found::Locked(d)) => Some(d),
            Ok(Found::Nothing) => None,
            Err(_) => {
                *min = (*min).min(now.saturating_add(SWEEP_PERIOD_MS));
                None
            }
        }
    };
    // The due buckets, within one budget for the whole sweep (a bucket left over stays due).
    for b in 0..crate::layout::WHEEL_BUCKETS {
        if out.visited >= timers::DRAIN_BUDGET {
            break; // the buckets left are still due: the next sweep drains them
        }
        if timers::bucket_min(a, b) <= now {
            let mut m = u64::MAX;
            let left = timers::DRAIN_BUDGET - out.visited;
            match timers::drain(a, b, now, left, &mut |g| look(g, &mut m, true)) {
                Ok(d) => out.visited += d.visited,
                // A stopped participant (loom) keeps its state; a corrupted wheel is the
                // periodic sweep's to mend.
                Err(f) if super::stopped(f) => return Err(f),
                Err(_) => min = min.min(now.saturating_add(SWEEP_PERIOD_MS)),
            }
            min = min.min(m);
        }
    }
    let n = a.group_entries();
    let (start, len) = match scope {
        Scope::Expiries => (0, 0),
        Scope::Table => (0, n),
        Scope::Chunk if n <= SWEEP_CHUNK => (0, n),
        // Relaxed: a position only; consecutive periodic sweeps take consecutive chunks
        // (`n` is a power of two, so the wrapping sum stays in step modulo it).
        Scope::Chunk => (
            a.hdr
                .sweep_cursor
                .0
                .fetch_add(SWEEP_CHUNK, Ordering::Relaxed)
                % n,
            SWEEP_CHUNK,
        ),
    };
    let mut i = 0;
    while i < len {
        let g = ((start + i) % n) as u32;
        i += 1;
        out.visited += 1;
        if a.group(g).is_err() {
            // A table this process cannot map (a corrupted directory entry): its other
            // entries would fail alike, so the scan goes on past it.
            i += a.past_group_table(g) - u64::from(g) - 1;
            continue;
        }
        let mut m = u64::MAX;
        if let Some(d) = look(g, &mut m, false) {
            // Locked: on the wheel (again, if whoever set its deadline stopped before).
            if let Err(f) = timers::arm(a, g, d) {
                if super::stopped(f) {
                    return Err(f);
                }
                min = min.min(d);
            }
        }
        min = min.min(m);
    }
    // Ready order (R6): by the moment each head became visible again.
    expired.sort_unstable();
    let mut refile = Vec::new();
    for (_, g) in expired {
        if !refile.is_empty() {
            // A ring was full: the rest wait too, behind the first (R6).
            refile.push(g);
            continue;
        }
        let e = a.group(g)?;
        // The claim word's `HINT` bit (layout 24), whoever holds the claim.
        // SeqCst where forced, as the store it replaces; AcqRel otherwise, as a producer's.
        let order = if full {
            Ordering::SeqCst
        } else {
            Ordering::AcqRel
        };
        let was = e.claim.fetch_or(owner::HINT, order);
        if was & owner::STALE != 0 {
            // Its queued hint is a placeholder (layout 27: served in place): fresh where it
            // is the ring's only hint, else replaced behind the others (our RMW changed
            // nothing).
            if super::ready::refresh_placeholder(a, env, g, e, was)? {
                out.pushed += 1;
            }
            continue;
        }
        // Forced where `full`: a bit left set by a participant that died before pushing is
        // taken as not queued.
        if !full && was & owner::HINT != 0 {
            continue; // already queued
        }
        if ring_for(a, g).is_ok_and(|r| r.push(g)) {
            out.pushed += 1;
        } else {
            super::ready::clear_hint(e, Ordering::Release);
            // Full (only under corruption: each table's ring holds one hint per entry): this
            // group and the rest go back on the wheel as due now, for the next sweep, which
            // sorts them again by the moment each became ready.
            refile.push(g);
        }
    }
    for g in refile {
        if let Err(f) = timers::arm(a, g, now) {
            if super::stopped(f) {
                return Err(f);
            }
            min = min.min(now.saturating_add(SWEEP_PERIOD_MS));
        }
        min = min.min(now);
    }
    // The next deadline: the wheel's earliest (after our re-arming), or sooner where a
    // group could not be looked at.
    a.hdr
        .next_expiry
        .0
        .fetch_min(min.min(timers::earliest(a)), Ordering::AcqRel);
    if out.pushed > 0 {
        notify(a, env, me);
    }
    Ok(out)
}

/// What a sweep found in one group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Found {
    /// Ready since this time (0: never received): hint it.
    Ready(u64),
    /// Its head is locked until this deadline.
    Locked(u64),
    /// Nothing to do.
    Nothing,
}

/// One group of a sweep: whether to hint it, or until when it is locked. `fresh_too`: hint a
/// deliverable group whose head was never received too (a full sweep; a group filed on the
/// wheel).
fn sweep_group(
    a: &Arena<'_>,
    env: &dyn Env,
    me: Owner,
    g: u32,
    e: &GroupEntry,
    fresh_too: bool,
) -> PResult<Found> {
    // Acquire: SYNC POINT(group-publish).
    let st = e.state.load(Ordering::Acquire);
    match gstate::kind(st) {
        gstate::INSERTING if a.owner_dead(env, gstate::owner(st)) => {
            super::kept::tombstone(a, e, st);
            return Ok(Found::Nothing);
        }
        gstate::ACTIVE => {}
        _ => return Ok(Found::Nothing),
    }
    let ginc = gstate::ginc(st);
    // Acquire: SYNC POINT(claim).
    // Its holder's claim, without the DIRTY and HINT bits (0: free).
    let c = owner::clean(e.claim.load(Ordering::Acquire));
    let held = c != 0 && owner::claims_ginc(c, ginc) && !a.owner_dead(env, Owner::of_word(c));
    let status = status(a, env, e)?;
    if held {
        // A live holder re-checks readiness when it releases, unless its take left the group
        // locked (`release::release_locked`): a message it took may have become visible again
        // or expired since (its deadline or retention passed while the holder, slow or
        // stopped, kept the claim), and the wheel's bit for it is cleared now. Ask the holder
        // to look again (DIRTY), or, if it released meanwhile, clean up and re-check
        // ourselves (`poke`). Keep a lock deadline.
        return Ok(match status {
            Status::Locked(d) => Found::Locked(d),
            Status::Deliverable | Status::Expired => {
                poke(a, env, me, g)?;
                Found::Nothing
            }
            _ => Found::Nothing,
        });
    }
    if c == 0 && status == Status::Empty && super::kept::is_kept(a, g, e) {
        return Ok(Found::Nothing); // kept (idle): nothing to clean up
    }
    if c != 0 || status == Status::Empty || status == Status::Expired {
        // Dead (or stale) holder, or an empty group nobody will touch (deleted messages
        // behind `head`): take the claim over, clean up (which reopens an emptied list) and
        // release (which re-hints).
        // An expired head (T1) is removed here, so memory comes back without any receiver.
        if let TryClaim::Acquired { cw, .. } = group::try_claim(a, env, e, me, ginc) {
            if or_release(e, cw, cleanup(a, env, cw, g, e))? == Cleaned::Kept {
                if status == Status::Expired {
                    or_release(e, cw, trim_expired(a, env, me, e))?;
                    if or_release(e, cw, cleanup(a, env, cw, g, e))? == Cleaned::Retired {
                        return Ok(Found::Nothing);
                    }
                }
                or_release(e, cw, release(a, env, me, cw, g))?;
            }
        }
        return Ok(Found::Nothing);
    }
    match status {
        Status::Deliverable => {
            let d = head_deadline(a, e);
            // A never-received head is hinted by its producer, except when it was delayed
            // (L1): that hint was consumed while it was, so a sweep hints it now (and a group
            // filed on the wheel: its taker found it delayed, under a delay since removed).
            // Relaxed: a live setting.
            let delayed_queue = a.hdr.delay_ms.load(Ordering::Relaxed) > 0;
            Ok(if d > 0 || fresh_too || delayed_queue {
                Found::Ready(d)
            } else {
                Found::Nothing
            })
        }
        Status::Locked(d) => Ok(Found::Locked(d)),
        Status::Pending | Status::Empty | Status::Expired => Ok(Found::Nothing),
    }
}

/// Under the claim: removes the messages past their retention period at the front of the
/// group (T1). Returns how many.
fn trim_expired(a: &Arena<'_>, env: &dyn Env, me: Owner, e: &GroupEntry) -> PResult<u64> {
    let t = Times::load(a, env);
    // Acquire: SYNC POINT(claim), as in `take`.
    let mut cur = e.head.load(Ordering::Acquire);
    let mut cycle = Cycle::from(cur);
    let mut n = 0;
    for _ in 0..a.steps() {
        let Next::Node(next, m, ninc) = successor(a, cur)? else {
            break;
        };
        // Acquire: the message's latest state.
        let w = m.own.vis.load(Ordering::Acquire);
        match vis::state(w) {
            vis::State::Deleted => {}
            // Relaxed: written before the node was published (Acquire above). A pack's
            // members share its `sent`: all of them go.
            vis::State::Published(_) | vis::State::Packed
                if t.expired(m.sent.load(Ordering::Relaxed)) =>
            {
                let (k, done) = remove_unit(a, me, m, next, w, |_| true)?;
                n += k;
                if !done {
                    continue; // changed meanwhile: look again
                }
            }
            _ => break,
        }
        cur = node::pack(ninc, next);
        if cycle.met_again(cur) {
            break; // a damaged list
        }
    }
    count(a, me, counter::RETENTION_EXPIRIES, n);
    Ok(n)
}

/// The visibility deadline of a group's first live message (0 if never received), a hint.
fn head_deadline(a: &Arena<'_>, e: &GroupEntry) -> u64 {
    // Acquire loads: a racy read for ordering hints only; every step is validated.
    let mut cur = e.head.load(Ordering::Acquire);
    for _ in 0..1024 {
        let Ok(l) = a.link(node::index(cur)).map(|l| l.load(Ordering::Acquire)) else {
            return 0;
        };
        let next = node::index(l);
        let Ok(m) = a.msg(next) else { return 0 };
        let w = m.own.vis.load(Ordering::Acquire);
        // SAFETY: a hint read: this copies nothing into payloads, and whatever it reads of a
        // slot that moved on is only a hint.
        let first = unsafe { super::list::first_live(a, next, m, w, Ordering::Acquire) };
        match first.map(|f| f.map(|(_, w)| vis::state(w))) {
            Ok(None) => cur = node::pack(node::inc(m.link.load(Ordering::Acquire)), next),
            Ok(Some(vis::State::Published(d))) => return d,
            _ => return 0,
        }
    }
    0
}

/// Wipes the expiry wheel, as a participant stopped between publishing deadlines and filing
/// them would leave it (tests: the periodic sweeps must file them again).
#[cfg(all(test, not(shmfifo_loom)))]
pub(crate) fn forget_the_wheel(a: &Arena<'_>) {
    for w in a.timers {
        // Relaxed: a test, single-threaded here.
        w.store(0, Ordering::Relaxed);
    }
}
