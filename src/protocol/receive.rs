//! Receive: pop ready groups, claim each, take its visible prefix (applying delay, retention,
//! the in-flight limit and the dead-letter move); and the replay of a recorded receive (R11).

use super::accounting::{account_in_flight, count};
use super::doorbell::notify;
use super::group::{self, TryClaim};
use super::list::{remove, successor, successor_for_write, Cycle, Next};
use super::pack::{self, Pack};
use super::quarantine;
use super::ready::poke_taking_hint;
use super::recovery::{maybe_check_liveness, release_on_death};
use super::release::{
    cleanup, cleanup_before_take, or_release, release, release_claim_word, release_locked, Cleaned,
};
use super::settle::{settle_known, Link, Then};
use super::sweep::sweep_if_idle;
use super::timers;
use super::times::{Standing, Times};
use super::words::{self, unpack_group_epoch0};
use super::Owner;
use super::{gstate, node, owner, vis, Arena, Env, Fault, PResult, MAX_STEPS};
use crate::layout::{counter, GroupEntry, MsgHeader, MsgWords};
use crate::sync::Ordering;

mod replay;
mod take;

pub use replay::replay;
use take::{bytes_of, take};

/// A message taken by [`receive`], handed to the sink while the group claim is held.
#[derive(Debug)]
pub struct Taken<'t> {
    /// Global slot index.
    pub idx: u32,
    /// Slot incarnation.
    pub inc: u32,
    /// The message's member in its slot's pack (layout 22; 0: a slot of its own).
    pub member: u8,
    /// The message's own words (its slot header's, or its pack member's directory entry).
    pub(super) own: &'t MsgWords,
    /// Epoch of this receive (goes into the receipt handle).
    pub epoch: u32,
    /// Receive count including this one.
    pub receive_count: u32,
    /// The message header (read through `Taken`'s methods, `protocol::message`).
    pub(super) header: &'t MsgHeader,
    /// The group entry (read through `Taken`'s methods).
    pub(super) group: &'t GroupEntry,
    /// The payload bytes (body, dead-letter source, dedup id, attributes: layout 10; split
    /// by `message::split` with [`Taken::lengths`]).
    pub payload: &'t [u8],
    /// The message's `vis` word as this receive left it (epoch and deadline).
    pub vis: u64,
}

/// The dead-letter mover of a [`Policy`]: returns whether the dead-letter queue has the
/// message now.
pub type Mover<'p> = &'p mut dyn FnMut(&Taken<'_>) -> bool;

/// Receives each message taken, and answers whether it could read it. A message it could not
/// read (a corrupted word) is quarantined at once (see [`super::quarantine`]), not returned.
pub type Sink<'s> = dyn FnMut(&Taken<'_>) -> bool + 's;

/// What a receive applies beyond its count: the caller reads these from the arena's live
/// settings (and its own request).
pub struct Policy<'p> {
    /// Visibility timeout of the messages taken, ms.
    pub vt_ms: u64,
    /// Never-received messages this receive may take (R8: the in-flight limit's room);
    /// `usize::MAX` without a limit.
    pub fresh_budget: usize,
    /// `maxReceiveCount` and the mover (X1): called, under the group claim, with a message
    /// whose next receive would exceed the count (its `receive_count` is the receives so
    /// far); returns whether the dead-letter queue has it now (sent, or a duplicate of an
    /// earlier move). The message is then removed here.
    pub dead_letter: Option<(u32, Mover<'p>)>,
}

impl core::fmt::Debug for Policy<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Policy")
            .field("vt_ms", &self.vt_ms)
            .field("fresh_budget", &self.fresh_budget)
            .field("max_receive_count", &self.dead_letter.as_ref().map(|d| d.0))
            .finish()
    }
}

#[cfg(any(test, feature = "loom"))]
impl Policy<'_> {
    /// A receive with visibility timeout `vt_ms`, no in-flight limit and no dead-letter queue.
    pub fn new(vt_ms: u64) -> Self {
        Policy {
            vt_ms,
            fresh_budget: usize::MAX,
            dead_letter: None,
        }
    }
}

/// What a receive did besides returning messages.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Received {
    /// Messages taken (handed to the sink).
    pub taken: usize,
    /// The in-flight limit stopped the receive early (R8).
    pub limited: bool,
    /// Messages moved to the dead-letter queue (X1).
    pub moved: u64,
    /// A move failed: the message stays, and its group yields nothing this time.
    pub move_failed: bool,
    /// Messages removed by retention (T1).
    pub expired: u64,
}

/// Whether a [`receive`] now would take nothing and do nothing: every ready ring is empty
/// where the pops would start (`ready::all_empty`), and neither of an idle receive's chores is
/// due (a liveness check with `release_on_death`, a sweep), so that its pop would find nothing
/// and both would decline (the sweep's own test without its once-a-millisecond skip: it says
/// "due" at least as often). Reads what an empty receive reads (the rings' entries, `head`,
/// the chores' header words) and the clock once, and changes no shared word (the entry is
/// read for writing as the pop reads it: a `prefetchw` on x86-64, an RMW adding 0 elsewhere;
/// a table published since this process looked is mapped, as a pop maps it). Every try of a
/// receive on a handle whose last one found nothing asks this first (`Queue::try_receive`:
/// a spinning receiver's polls, a long poll's tries) and skips the receive's setup (754
/// instructions an empty poll through it, 295 with this look first). A push that lands after
/// it answered is the next try's, as it would be the next receive's.
pub fn idle(a: &Arena<'_>, env: &dyn Env) -> bool {
    if !super::ready::all_empty(a) {
        return false;
    }
    let now = env.now_ms();
    let chore_due = super::sweep::idle_sweep_due(a, now)
        || (release_on_death(a) && super::recovery::liveness_due(a, now));
    !chore_due
}

/// [`idle`], asked only where this process's last receive took nothing (a receiver polling a
/// queue it keeps up with): a receive after one that found messages goes straight on, where
/// the look would read the ring's entry twice.
#[inline]
pub fn idle_after_empty(a: &Arena<'_>, env: &dyn Env) -> bool {
    a.segs.polled_empty() && idle(a, env)
}

/// Takes up to `max` messages, group by group in ready order, each group's visible prefix
/// (R3, R5, R6), applying delay, retention, the in-flight limit and the dead-letter move.
/// Calls `sink` for each while the group is claimed.
pub fn receive(
    a: &Arena<'_>,
    env: &dyn Env,
    me: Owner,
    max: usize,
    policy: &mut Policy<'_>,
    sink: &mut Sink<'_>,
) -> PResult<Received> {
    // Once a call: a table the group table added since this process last looked (layout 16)
    // holds hints on its own ring, which the pops below take in turn only once known. A load
    // of the count (a read-shared line, written only when a table is added).
    super::ready::learn_tables(a);
    let mut rep = Received::default();
    let mut swept = false;
    // Groups already served by this call: with a zero visibility timeout a group is ready again
    // at once, and one response must not hold a message twice.
    let mut seen = [u32::MAX; 10];
    let mut nseen = 0;
    let mut requeue = [u32::MAX; 10];
    let mut nrequeue = 0;
    // Groups whose first message needed room under the in-flight limit (R8): each is
    // re-hinted when released, so stop after a few rather than meet them again.
    let mut limited_pops = 0;
    let mut move_failures = 0;
    let mut damaged = None;
    let mut damaged_groups = 0;
    // Layout 27: the ring's only hint is served in place, left queued as a placeholder
    // (`group::try_claim_in_place`), until a try of it takes nothing or cannot claim; then
    // hints are popped, as before, for the rest of the call (a popped placeholder is dropped).
    // Where this process's last receive left a placeholder that is still `STALE` (nothing
    // made its group ready since: a new group was sent to, or none), the ring is popped from
    // the start, which takes the placeholder out with the line read once, for writing (a look
    // at the ring, then the pop, fetched it twice). The claim word read for writing: the CAS
    // that serves the group in place writes it next.
    let mut in_place_ok = match a.segs.placeholder() {
        Some(x) => a.group(x).is_ok_and(|e| {
            crate::sync::load_for_write_u64(&e.claim, Ordering::Relaxed) & owner::STALE == 0
        }),
        None => true,
    };
    let mut placeholder = None;
    while rep.taken < max && limited_pops < 16 && move_failures < 4 {
        let only = if in_place_ok {
            super::ready::only(a)
        } else {
            None
        };
        let (popped, at) = match only {
            // Served already in this call: the only hint is ours, nothing else is hinted.
            Some((_, g)) if seen[..nseen].contains(&g) => (None, None),
            Some((p, g)) => (Some(g), Some(p)),
            None => (super::ready::pop(a), None),
        };
        let in_place = at.is_some();
        crash_point!();
        let Some(g) = popped else {
            if swept {
                break;
            }
            // Idle: release dead receivers' messages (at most once per liveness period), then
            // sweep if a deadline passed. Either may have hinted groups: look once more.
            if !idle_chores(a, env, me) {
                break;
            }
            swept = true;
            continue;
        };
        let Ok(e) = a.group(g) else {
            in_place_ok &= !in_place;
            continue;
        };
        // Acquire: SYNC POINT(group-publish). Read for writing (`load_for_write_u64`): the
        // CAS that takes the claim writes this line next, which then comes once, exclusively
        // (a load then the CAS fetched it twice from the producer: the line count's group
        // rows; the hint flag's swap came first before layout 24).
        let st = crate::sync::load_for_write_u64(&e.state, Ordering::Acquire);
        if !in_place {
            // A placeholder popped (layout 27: its place consumed by a receive that served it
            // in place): dropped, not served. Relaxed: a test on the line just read; the CAS
            // that drops it decides.
            let w = e.claim.load(Ordering::Relaxed);
            if w & owner::STALE != 0 && super::ready::drop_placeholder(e, w) {
                continue;
            }
        }
        if seen[..nseen].contains(&g) {
            // Served already in this call (ready again after a zero visibility timeout): leave
            // it for the next receive, re-hinted after the loop (its `HINT` bit stays set
            // meanwhile), once: a group's further hints here are duplicates, which the one
            // push after the loop stands for. The requeued groups are served ones, at most
            // `seen`'s 10, so the list never fills (it did with duplicates, and then dropped a
            // served group's hint with its bit set: nobody hinted it before a forced sweep).
            if nrequeue < requeue.len() && !requeue[..nrequeue].contains(&g) {
                requeue[nrequeue] = g;
                nrequeue += 1;
            }
            continue;
        }
        if gstate::kind(st) != gstate::ACTIVE {
            if in_place {
                // Its hint stays queued: the pop that takes it clears the bit.
                in_place_ok = false;
            } else {
                // The hint we popped: the group is gone (its entry's next insert clears it too).
                super::ready::clear_hint(e, Ordering::Relaxed);
            }
            continue;
        }
        // SYNC POINT(ready-check) with `hint`: the CAS that takes the claim clears the word's
        // `HINT` bit (layout 24); if a producer's RMW found it set, our CAS reads its bit
        // (Acquire) and our scan below sees its message.
        // In place, the CAS marks the hint a placeholder (`STALE`) and keeps it queued.
        let claimed = if in_place {
            group::try_claim_in_place(e, me, gstate::ginc(st))
        } else {
            group::try_claim_taking_hint(a, env, e, me, gstate::ginc(st))
        };
        let cw = match claimed {
            TryClaim::Acquired { cw, .. }
                if at.is_some_and(|p| !super::ready::still_queued(a, p, g)) =>
            {
                // The hint we looked at was popped, and the group hinted again, since our look
                // (the claim's word had `HINT` alone again): its hint is no longer the ring's
                // first entry, where a placeholder must be. Not ours to serve in place: the
                // `STALE` we set taken back, the claim released, and the rest popped.
                super::ready::unmark_in_place(e, cw);
                in_place_ok = false;
                if or_release(e, cw, release(a, env, me, cw, g)).is_err() {
                    break;
                }
                continue;
            }
            TryClaim::Acquired { cw, .. } => cw,
            TryClaim::Gone => {
                in_place_ok &= !in_place;
                continue;
            }
            TryClaim::Busy(_) if in_place => {
                // Held, a placeholder already, or not the group's hint: pop it instead.
                in_place_ok = false;
                continue;
            }
            TryClaim::Busy(_) => {
                count(a, me, counter::CONTENTION_RETRIES, 1);
                // Ask the holder to re-check before it releases (DIRTY), clearing the hint's
                // bit with the same CAS: the RMW chain on `claim` carries whatever made the
                // group ready to it. (If it released meanwhile, the poke takes the claim,
                // cleans up and re-hints the group itself.) An error here concerns that group
                // only: keep what we already took.
                if poke_taking_hint(a, env, me, g).is_err() && rep.taken > 0 {
                    break;
                }
                continue;
            }
        };
        crash_point!();
        let failed_before = core::mem::take(&mut rep.move_failed);
        let got = take(
            a,
            env,
            me,
            cw,
            g,
            e,
            max - rep.taken,
            policy,
            &mut rep,
            sink,
        );
        // A dead-letter move that failed here leaves the group deliverable, and `release`
        // re-hints it: serve it no more in this call (it is seen), and stop after a few such
        // groups (the dead-letter queue is gone or full for all of them).
        let failed_here = core::mem::replace(&mut rep.move_failed, failed_before);
        rep.move_failed |= failed_here;
        let got = match got {
            Ok(Some(k)) => k,
            Ok(None) => continue, // retired (and released) during cleanup
            Err(f) => {
                if super::stopped(f) {
                    return Err(f); // stopped forever, still holding the claim
                }
                release_claim_word(e, cw);
                // Its placeholder, if left queued, is popped from now on (and dropped).
                in_place_ok = false;
                // One damaged group (a corrupted word) must not stop the others: remember the
                // fault, leave the group (its hint is consumed; a sweep offers it again), and
                // go on. The fault is reported only if nothing else could be taken.
                damaged.get_or_insert(f);
                damaged_groups += 1;
                if damaged_groups >= 4 {
                    break;
                }
                continue;
            }
        };
        if (got > 0 || failed_here) && nseen < seen.len() {
            seen[nseen] = g;
            nseen += 1;
        }
        if in_place && got > 0 {
            placeholder = Some(g);
        }
        if in_place && got == 0 {
            // Nothing to take in place: from now on pop, so that the placeholder is taken out
            // of the ring (a receiver that then sleeps has an empty ring, and the next
            // ready-check pushes and rings).
            in_place_ok = false;
        }
        if failed_here {
            move_failures += 1;
        }
        if rep.limited {
            limited_pops += 1;
        }
        rep.taken += got;
        // Taken and filed on the wheel, the claim still ours: a sweep may drain the group now.
        crash_point!();
        // The messages are taken: a fault while releasing must not lose them for the caller.
        // Taken in flight until a deadline after now (the first is the group's first live
        // message), with no failed move after them: the group stays locked by them.
        let released = if got > 0 && !failed_here && policy.vt_ms > 0 {
            release_locked(a, env, me, cw, g)
        } else {
            release(a, env, me, cw, g)
        };
        // A fault in the release's cleanup (a damaged word) gives the claim up all the same:
        // a live process holding it would otherwise keep every other from the group.
        let released = or_release(e, cw, released);
        if released.is_err() {
            break;
        }
    }
    for &g in &requeue[..nrequeue] {
        // The `HINT` bit is still set from the hint we popped: push directly, no change.
        if !super::ready::ring_for(a, g)?.push(g) {
            super::ready::clear_hint(a.group(g)?, Ordering::Release);
        }
    }
    if nrequeue > 0 {
        notify(a, env, me);
    }
    a.segs.note_polled(rep.taken == 0);
    a.segs.note_placeholder(placeholder);
    match damaged {
        Some(f) if rep.taken == 0 => Err(f),
        _ => Ok(rep),
    }
}

/// A receive's chores when the ready rings are empty: dead receivers' messages released (at
/// most once per liveness period), then a sweep if a deadline passed; whether either may
/// have hinted a group. Out of line and cold: most receives find a group, and inlined its
/// state took registers from the receive's loop.
#[cold]
#[inline(never)]
fn idle_chores(a: &Arena<'_>, env: &dyn Env, me: Owner) -> bool {
    let released = release_on_death(a) && maybe_check_liveness(a, env, me).unwrap_or(false);
    let swept = sweep_if_idle(a, env, me).unwrap_or(false);
    swept || released
}
