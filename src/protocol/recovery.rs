//! Recovery: finding participants that died while registered and repairing what they left
//! (waiter counts, half-made sends, held messages, and through a sweep their claims, inserts
//! and lost hints).

use super::accounting::count;
use super::pack;
use super::ready::hint_if_ready;
use super::settle::{settle_dead_send, Settled};
use super::sweep::sweep;
use super::Owner;
use super::{node, owner, pstate, vis, words, Arena, Env, PResult};
use crate::layout::counter;
use crate::sync::{fence, Ordering};

/// What a recovery (`Queue::recover`, on open, by idle receivers) repaired of what dead
/// participants left.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Repaired {
    /// Participants found dead while registered (liveness lock gone, never closed).
    pub dead_participants: u64,
    /// Messages of dead producers published (their link CAS had committed them).
    pub published: u64,
    /// Half-made messages of dead producers freed (never published).
    pub freed: u64,
    /// In-flight messages of dead receivers made visible at once (`release_on_death`).
    pub released: u64,
}

/// Period of the liveness check that idle receivers run (ms): a dead receiver's messages are
/// released about this long after its death, once some receiver is idle.
pub const LIVENESS_PERIOD_MS: u64 = 100;

/// Participants that died while registered: status `ALIVE` and no liveness lock (a clean close
/// stores `FREE` before unlocking, and a registrant locks before it stores `ALIVE`), as
/// `(index, generation)`.
pub fn dead_participants(a: &Arena<'_>, env: &dyn Env, me: Owner) -> Vec<(u32, u32)> {
    let mut dead = Vec::new();
    for (i, p) in a.parts.iter().enumerate() {
        // Acquire: pairs with the registration's Release store.
        let st = p.state.load(Ordering::Acquire);
        if pstate::status(st) != pstate::ALIVE {
            continue;
        }
        let gen = pstate::gen(st);
        if owner::code(i as u32, gen) == me || env.participant_alive(i as u32) {
            continue;
        }
        dead.push((i as u32, gen));
    }
    dead
}

/// Whether dead receivers' messages are released at once (a creation setting).
pub fn release_on_death(a: &Arena<'_>) -> bool {
    // Relaxed: written before the arena was published (SYNC POINT(arena-ready)).
    a.hdr.release_on_death.load(Ordering::Relaxed) != 0
}

/// Releases the in-flight messages of dead receivers at once instead of at their visibility
/// deadline: each published message in flight whose `recv_ms` names one of `dead` (index and
/// the low 8 bits of the generation) becomes visible, keeping its epoch (its receipt handle
/// stays valid until it is received again, as after an expiry), and its group is hinted.
/// Returns how many were released.
pub fn release_held(a: &Arena<'_>, env: &dyn Env, me: Owner, dead: &[(u32, u32)]) -> PResult<u64> {
    if dead.is_empty() {
        return Ok(0);
    }
    release_where(a, env, me, &|r| {
        super::recv::holder(r)
            .is_some_and(|(hi, hg)| dead.iter().any(|&(di, dg)| di == hi && dg & 0xFF == hg))
    })
}

/// Makes visible every in-flight message whose `recv_ms` word satisfies `pick` (see
/// [`release_held`]); `|_| true` releases them all (after a reboot every holder is gone).
pub fn release_where(
    a: &Arena<'_>,
    env: &dyn Env,
    me: Owner,
    pick: &dyn Fn(u64) -> bool,
) -> PResult<u64> {
    // A deadline that passes during the scan is released at `now` all the same: visible either way.
    let now = env.now_ms().max(1);
    let mut n = 0;
    for (i, h) in a.slots() {
        // Acquire: the slot's incarnation, against which a pack's member words are validated
        // below (a slot freed and reused meanwhile moves it, `pool::alloc`).
        let inc = node::inc(h.link.load(Ordering::Acquire));
        // Acquire: SYNC POINT(holder-record), pairs with the receiver's AcqRel CAS, so its `recv_ms` store (sequenced
        // before that CAS) is visible below: the holder we read is at least as new as `w`.
        let u = h.own.vis.load(Ordering::Acquire);
        // A pack's members (layout 22) are released one by one: members of one pack can be
        // in flight under different receivers (R3 allows it).
        if !matches!(vis::state(u), vis::State::Published(_) | vis::State::Packed) {
            continue;
        }
        let packed = vis::state(u) == vis::State::Packed;
        // SAFETY: a release copies nothing into payloads. Another thread of this process may
        // send into the slot if it is freed and reused meanwhile: what is read of it then is
        // told by the slot's words, validated below before any CAS (SYNC POINT(peek-seqlock),
        // as a peek's copies are).
        let Ok(members) = (unsafe { pack::words(a, i, h, u) }) else {
            continue;
        };
        let mut released = false;
        for own in members {
            // Acquire: as above (a message's own word is `u`, loaded again).
            let w = own.vis.load(Ordering::Acquire);
            let vis::State::Published(d) = vis::state(w) else {
                continue;
            };
            if d <= now {
                continue;
            }
            // Relaxed: ordered by the Acquire load above.
            if !pick(own.recv_ms.load(Ordering::Relaxed)) {
                continue;
            }
            // A pack's member words were read without a claim that keeps the slot: they are
            // this pack's only if the slot's words are unchanged after them. SYNC
            // POINT(peek-seqlock): the Acquire fence orders the loads above before these
            // re-checks, against `pool::alloc`'s Release store of the new incarnation and its
            // fence before a new payload's writes. Whatever the pack's fate after this, the
            // CAS expects this word, which no reused slot's words carry (invariant P).
            if packed {
                fence(Ordering::Acquire);
                // Relaxed: ordered by the fence above.
                if h.own.vis.load(Ordering::Relaxed) != u
                    || node::inc(h.link.load(Ordering::Relaxed)) != inc
                {
                    break;
                }
            }
            crash_point!();
            // SeqCst: publishes visibility, SYNC POINT(ready-check) with `status` (as a zero
            // visibility change). A failed CAS: deleted, changed or released meanwhile.
            if own
                .vis
                .compare_exchange(
                    w,
                    vis::pack(vis::epoch(w), vis::published(now)),
                    Ordering::SeqCst,
                    Ordering::Relaxed,
                )
                .is_err()
            {
                continue;
            }
            n += 1;
            released = true;
            crash_point!();
        }
        if !released {
            continue;
        }
        // Relaxed: stable while the message is published.
        let g = words::group_of(h.group_epoch0.load(Ordering::Relaxed));
        if let Ok(e) = a.group(g) {
            // A corrupted group is left to the sweep: the scan goes on.
            let _ = hint_if_ready(a, env, me, g, e);
        }
    }
    Ok(n)
}

/// Runs [`recover`] if the liveness period has passed and some registered participant has died
/// (one checker per period, by CAS on `Header::liveness`). Called by idle receivers, so that a
/// dead receiver's messages come back within about [`LIVENESS_PERIOD_MS`]. Returns whether it
/// repaired anything.
pub fn maybe_check_liveness(a: &Arena<'_>, env: &dyn Env, me: Owner) -> PResult<bool> {
    let now = env.now_ms();
    let (due, last) = liveness_due_at(a, now);
    if !due {
        return Ok(false);
    }
    // Relaxed: the word orders nothing; the participant and slot loads carry their own.
    if a.hdr
        .liveness
        .0
        .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
        .is_err()
    {
        return Ok(false);
    }
    let dead = dead_participants(a, env, me);
    if dead.is_empty() {
        return Ok(false);
    }
    let r = recover_dead(a, env, me, &dead)?;
    Ok(r != Repaired::default())
}

/// Whether a liveness check ([`maybe_check_liveness`]) is due at `now`: the last one is a
/// period old (or in the future: a clock set back). Where it says no, `maybe_check_liveness`
/// checks nothing (`receive::idle`).
pub fn liveness_due(a: &Arena<'_>, now: u64) -> bool {
    liveness_due_at(a, now).0
}

/// [`liveness_due`], and the `liveness` word it was decided on.
#[inline]
fn liveness_due_at(a: &Arena<'_>, now: u64) -> (bool, u64) {
    // Relaxed: the CAS after it decides who checks; a stale value only delays or repeats a
    // check.
    let last = a.hdr.liveness.0.load(Ordering::Relaxed);
    (
        !(now < last.saturating_add(LIVENESS_PERIOD_MS) && last <= now),
        last,
    )
}

/// Repairs what dead participants left: their waiter counts, their half-made sends, their
/// in-flight messages (released at once with `release_on_death`), and (through a sweep) their
/// claims, inserts and lost hints. Then marks each dead registration `FREE`, so that later
/// checks skip it.
pub fn recover(a: &Arena<'_>, env: &dyn Env, me: Owner) -> PResult<Repaired> {
    recover_dead(a, env, me, &dead_participants(a, env, me))
}

/// [`recover`] with the dead registrations already found (by [`dead_participants`]).
fn recover_dead(a: &Arena<'_>, env: &dyn Env, me: Owner, dead: &[(u32, u32)]) -> PResult<Repaired> {
    let mut r = Repaired::default();
    for &(i, _) in dead {
        r.dead_participants += 1;
        // AcqRel swap: exactly one recoverer subtracts a dead participant's waiters.
        let w = a.parts[i as usize].waiting.swap(0, Ordering::AcqRel);
        super::doorbell::give_back(a, w);
    }
    for (i, h) in a.slots() {
        // Acquire: the slot's current state.
        let w = h.own.vis.load(Ordering::Acquire);
        let vis::State::Claimed(o) = vis::state(w) else {
            continue;
        };
        if o == me || !a.owner_dead(env, o) {
            continue;
        }
        match settle_dead_send(a, env, me, i, w)? {
            Settled::Published => r.published += 1,
            Settled::Freed => r.freed += 1,
            // Another settler won, or the group's claim is held by a live participant
            // (next recovery).
            Settled::Raced | Settled::Busy => {}
        }
    }
    if release_on_death(a) {
        r.released = release_held(a, env, me, dead)?;
    }
    sweep(a, env, me)?;
    for &(i, gen) in dead {
        // SYNC POINT(registry-free): Release: our repairs above happen before a later reader sees `FREE`. A failed CAS:
        // another recoverer did it, or a new registrant took the slot (its own generation).
        if a.parts[i as usize]
            .state
            .compare_exchange(
                pstate::pack(gen, pstate::ALIVE),
                pstate::pack(gen, pstate::FREE),
                Ordering::Release,
                Ordering::Relaxed,
            )
            .is_ok()
        {
            count(a, me, counter::PARTICIPANTS_RECOVERED, 1);
        }
    }
    Ok(r)
}
