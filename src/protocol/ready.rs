//! Readiness of groups: claim release with its cleanup, ready hints, pokes of a busy holder,
//! and the sweep that re-derives lost hints and finds visibility expiries.
//!
//! These call each other by design: a release cleans up and hints, a hint may run a due sweep,
//! and a sweep takes over dead claims, cleans up and releases.

use super::accounting::count;
use super::doorbell::notify;
use super::group::{self, TryClaim};
use super::list::{remove, successor, Next};
use super::ring::Ring;
use super::timers;
use super::times::{Standing, Times};
use super::Owner;
use super::{gstate, node, owner, pool, vis, Arena, Env, Fault, PResult, MAX_STEPS};
use crate::layout::{counter, GroupEntry};

/// Group table entries one periodic sweep visits.
pub use crate::layout::SWEEP_CHUNK;
use crate::sync::Ordering;

/// A receiver that finds no hint sweeps at least this often, re-deriving lost hints.
pub const SWEEP_PERIOD_MS: u64 = 1000;

/// The ready ring of an arena.
pub fn ring<'a>(a: &Arena<'a>) -> Ring<'a> {
    Ring {
        entries: a.ready,
        head: &a.hdr.ready_head.0,
        tail: &a.hdr.ready_tail.0,
    }
}

/// Marks group `g` ready unless a hint is already queued. Returns whether it pushed one.
///
/// Groups that became ready by visibility expiry (no event) are found by a sweep; running a due
/// sweep first keeps them ahead of `g` in ready order (R6: a group is ready from the moment its
/// head became visible).
pub fn hint(a: &Arena<'_>, env: &dyn Env, me: Owner, g: u32) -> PResult<bool> {
    // Relaxed: a trigger only; `maybe_sweep` re-reads it with Acquire. The clock is read only
    // when some deadline is pending.
    let ne = a.hdr.next_expiry.0.load(Ordering::Relaxed);
    if ne != u64::MAX && env.now_ms() >= ne {
        maybe_sweep(a, env, me)?;
    }
    let e = a.group(g)?;
    // SYNC POINT(ready-check): a swap, not a CAS, so that it always writes: the receiver's
    // clearing swap then either reads our 1 (and so sees what we published before) or comes
    // first (and we read 0 and push).
    if e.hint.swap(1, Ordering::AcqRel) != 0 {
        return Ok(false);
    }
    let pushed = ring(a).push(g);
    crash_point!();
    if pushed {
        return Ok(true);
    }
    // Ring full (only under corruption: it has one entry per group slot): drop the hint and
    // ask the next idle receiver to sweep.
    e.hint.store(0, Ordering::Release);
    a.hdr.next_expiry.0.store(0, Ordering::Release);
    Ok(false)
}

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
    let r = cleanup_inner(a, env, e)?;
    if r == Cleaned::Retired {
        release_claim_word(e, cw);
    }
    Ok(r)
}

fn cleanup_inner(a: &Arena<'_>, env: &dyn Env, e: &GroupEntry) -> PResult<Cleaned> {
    let _ = env;
    // Acquire: SYNC POINT(claim); a dead holder's pending free is visible.
    let p = e.pending_free.load(Ordering::Acquire);
    if p != 0 && p != e.head.load(Ordering::Acquire) {
        pool::free_dummy(a, env, p)?;
    }
    if p != 0 {
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
                let m = a.msg(next)?;
                // SeqCst: SYNC POINT(ready-check) on the next iteration / post-release check.
                let w = m.vis.load(Ordering::SeqCst);
                if vis::state(w) != vis::State::Deleted {
                    return Ok(Cleaned::Kept);
                }
                let nref = node::pack(node::inc(m.link.load(Ordering::Acquire)), next);
                // Invariant 2: never leave `tail` on a node about to be freed. AcqRel pairs
                // with appenders' Acquire loads of `tail`.
                let _ = e
                    .tail
                    .compare_exchange(h, nref, Ordering::AcqRel, Ordering::Relaxed);
                if node::index(h) < a.total {
                    // Release: a stealer that takes the claim (Acquire) sees what to free.
                    e.pending_free.store(h, Ordering::Release);
                }
                crash_point!();
                // SYNC POINT(ready-check): a swap (AcqRel) against the producer's RMW on `head`;
                // our later loads of `vis` see any producer whose RMW came first.
                e.head.swap(nref, Ordering::AcqRel);
                crash_point!();
                pool::free_dummy(a, env, h)?;
                if node::index(h) < a.total {
                    e.pending_free.store(0, Ordering::Release);
                }
            }
        }
    }
    Err(Fault::Corrupted("cleanup did not converge"))
}

/// Frees the dummy `h` of a closed list and turns the entry into a tombstone.
fn finish_retire(a: &Arena<'_>, env: &dyn Env, e: &GroupEntry, h: u64) -> PResult<()> {
    pool::free_dummy(a, env, h)?;
    crash_point!();
    // Acquire: the state word as of our claim.
    let st = e.state.load(Ordering::Acquire);
    if gstate::kind(st) == gstate::ACTIVE {
        group::tombstone(a, e, st);
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

/// Hints group `g` (entry `e`) and rings the doorbell if its first message can be received now:
/// after a release of its claim, or a message made visible outside a receive.
pub(crate) fn hint_if_ready(
    a: &Arena<'_>,
    env: &dyn Env,
    me: Owner,
    g: u32,
    e: &GroupEntry,
) -> PResult<()> {
    if matches!(status(a, env, e)?, Status::Deliverable | Status::Expired) && hint(a, env, me, g)? {
        notify(a, env, me);
    }
    Ok(())
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
    let t = Times::load(a, env);
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
        match vis::state(m.vis.load(Ordering::SeqCst)) {
            vis::State::Deleted => cur = node::pack(ninc, next),
            vis::State::Published(d) => {
                // Relaxed: a hint (the claim holder re-validates).
                let sent = m.sent.load(Ordering::Relaxed);
                return Ok(match t.standing(sent, d) {
                    Standing::Expired => Status::Expired,
                    Standing::InFlight => Status::Locked(d.min(t.expiry(sent))),
                    Standing::Delayed => Status::Locked(sent.saturating_add(t.delay)),
                    Standing::Visible => Status::Deliverable,
                });
            }
            vis::State::Claimed(o) if a.owner_dead(env, o) => return Ok(Status::Deliverable),
            vis::State::Claimed(_) => return Ok(Status::Pending),
            vis::State::Free => return Ok(Status::Deliverable),
        }
    }
    Ok(Status::Deliverable)
}

/// Gets group `g` cleaned up and re-checked for readiness (after a delete, or when a hint met
/// a busy claim): take its claim, or ask its live holder to do it (DIRTY) before it releases.
pub(crate) fn poke(a: &Arena<'_>, env: &dyn Env, me: Owner, g: u32) -> PResult<()> {
    let e = a.group(g)?;
    for _ in 0..MAX_STEPS {
        // Acquire: SYNC POINT(group-publish).
        let st = e.state.load(Ordering::Acquire);
        if gstate::kind(st) != gstate::ACTIVE {
            return Ok(()); // retired: nothing left to clean
        }
        let ginc = gstate::ginc(st);
        // Acquire: SYNC POINT(claim).
        let cur = e.claim.load(Ordering::Acquire);
        let live_holder = cur != 0
            && owner::claim_ginc(cur) == (ginc & super::words::GINC_MASK)
            && (Owner::of_word(cur) == me || !a.owner_dead(env, Owner::of_word(cur)));
        if live_holder {
            if cur & owner::DIRTY != 0 {
                return Ok(()); // the holder will clean again before it releases
            }
            // Release: our DELETED store happens before the holder's Acquire load of DIRTY.
            if e.claim
                .compare_exchange(
                    cur,
                    cur | owner::DIRTY,
                    Ordering::Release,
                    Ordering::Relaxed,
                )
                .is_ok()
            {
                return Ok(());
            }
        } else {
            match group::try_claim(a, env, e, me, ginc) {
                TryClaim::Acquired { cw, .. } => {
                    if or_release(e, cw, cleanup(a, env, cw, e))? == Cleaned::Retired {
                        return Ok(());
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

/// Sweeps if a visibility deadline has passed or the last sweep is old. Returns whether it did.
pub fn maybe_sweep(a: &Arena<'_>, env: &dyn Env, me: Owner) -> PResult<bool> {
    sweep_if_due(a, env, me, SWEEP_PERIOD_MS)
}

/// A producer that found its size class full: a full sweep (which removes messages past their
/// retention period, T1) if none ran in the last [`FULL_CLASS_SWEEP_MS`], so that a full class
/// costs at most that many sweeps per second across the queue. Returns whether it swept.
pub fn sweep_for_room(a: &Arena<'_>, env: &dyn Env, me: Owner) -> PResult<bool> {
    sweep_if_due(a, env, me, FULL_CLASS_SWEEP_MS)
}

/// Shortest time between two sweeps run for a full size class (ms).
pub const FULL_CLASS_SWEEP_MS: u64 = 10;

/// Sweeps if a visibility deadline has passed or the last sweep is `period` ms old.
fn sweep_if_due(a: &Arena<'_>, env: &dyn Env, me: Owner, period: u64) -> PResult<bool> {
    let now = env.now_ms();
    // Acquire: pairs with the fetch_min of receivers, and (SYNC POINT(reschedule)) with a
    // settings change's Release store of 0 after its setting stores (`live::reschedule`).
    let ne = a.hdr.next_expiry.0.load(Ordering::Acquire);
    // Relaxed: the CAS below decides who sweeps.
    let ls = a.hdr.last_sweep.0.load(Ordering::Relaxed);
    let due = now >= ne || now >= ls.saturating_add(period);
    if !due || (now == ls && ne != 0) {
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

/// Re-derives ready hints for every group, repairs dead claims and inserts, retires empty
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
    let mut look = |g: u32, min: &mut u64| -> Option<u64> {
        let Ok(e) = a.group(g) else { return None };
        // A corrupted group is skipped: it must not stop the sweep for every other group.
        match sweep_group(a, env, me, g, e, full) {
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
            match timers::drain(a, b, now, left, &mut |g| look(g, &mut m)) {
                Ok(d) => out.visited += d.visited,
                // A stopped participant (loom) keeps its state; a corrupted wheel is the
                // periodic sweep's to mend.
                Err(f) if super::stopped(f) => return Err(f),
                Err(_) => min = min.min(now.saturating_add(SWEEP_PERIOD_MS)),
            }
            min = min.min(m);
        }
    }
    let n = a.groups.len() as u64;
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
    for i in 0..len {
        let g = ((start + i) % n) as u32;
        out.visited += 1;
        let mut m = u64::MAX;
        if let Some(d) = look(g, &mut m) {
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
    for (_, g) in expired {
        let e = a.group(g)?;
        if full {
            // Forced: a flag left set by a participant that died before pushing is reset.
            e.hint.store(1, Ordering::SeqCst);
        } else if e.hint.swap(1, Ordering::AcqRel) != 0 {
            continue; // already queued
        }
        if ring(a).push(g) {
            out.pushed += 1;
        } else {
            e.hint.store(0, Ordering::Release);
            // Full (or corrupted): the rest would fail too, each after a bounded spin. The
            // next sweep finds them again.
            min = min.min(now.saturating_add(1));
            break;
        }
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

/// One group of a sweep: whether to hint it, or until when it is locked.
fn sweep_group(
    a: &Arena<'_>,
    env: &dyn Env,
    me: Owner,
    g: u32,
    e: &GroupEntry,
    full: bool,
) -> PResult<Found> {
    // Acquire: SYNC POINT(group-publish).
    let st = e.state.load(Ordering::Acquire);
    match gstate::kind(st) {
        gstate::INSERTING if a.owner_dead(env, gstate::owner(st)) => {
            group::tombstone(a, e, st);
            return Ok(Found::Nothing);
        }
        gstate::ACTIVE => {}
        _ => return Ok(Found::Nothing),
    }
    let ginc = gstate::ginc(st);
    // Acquire: SYNC POINT(claim).
    let c = e.claim.load(Ordering::Acquire);
    let held = c != 0
        && owner::claim_ginc(c) == (ginc & super::words::GINC_MASK)
        && !a.owner_dead(env, Owner::of_word(c));
    let status = status(a, env, e)?;
    if held {
        // A live holder re-checks readiness when it releases; keep its lock deadline.
        return Ok(match status {
            Status::Locked(d) => Found::Locked(d),
            _ => Found::Nothing,
        });
    }
    if c != 0 || status == Status::Empty || status == Status::Expired {
        // Dead (or stale) holder, or an empty group nobody will touch: take the claim over,
        // clean up (which retires an empty group) and release (which re-hints).
        // An expired head (T1) is removed here, so memory comes back without any receiver.
        if let TryClaim::Acquired { cw, .. } = group::try_claim(a, env, e, me, ginc) {
            if or_release(e, cw, cleanup(a, env, cw, e))? == Cleaned::Kept {
                if status == Status::Expired {
                    or_release(e, cw, trim_expired(a, env, me, e))?;
                    if or_release(e, cw, cleanup(a, env, cw, e))? == Cleaned::Retired {
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
            // (L1): that hint was consumed while it was, so a sweep hints it now.
            // Relaxed: a live setting.
            let delayed_queue = a.hdr.delay_ms.load(Ordering::Relaxed) > 0;
            Ok(if d > 0 || full || delayed_queue {
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
    let mut n = 0;
    for _ in 0..a.steps() {
        let Next::Node(next, m, ninc) = successor(a, cur)? else {
            break;
        };
        // Acquire: the message's latest state.
        let w = m.vis.load(Ordering::Acquire);
        match vis::state(w) {
            vis::State::Deleted => cur = node::pack(ninc, next),
            // Relaxed: written before the node was published (Acquire above).
            vis::State::Published(_) if t.expired(m.sent.load(Ordering::Relaxed)) => {
                if remove(a, me, m, w) {
                    n += 1;
                    cur = node::pack(ninc, next);
                }
            }
            _ => break,
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
        let w = m.vis.load(Ordering::Acquire);
        match vis::state(w) {
            vis::State::Deleted => {
                cur = node::pack(node::inc(m.link.load(Ordering::Acquire)), next)
            }
            vis::State::Published(d) => return d,
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
