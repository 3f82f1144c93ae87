//! The doorbells: long-polling receivers announce themselves and sleep on a futex word; a
//! producer that published rings it only when someone may be asleep (SYNC POINT(doorbell)).
//! Producers waiting for a free slot (`Queue::send_timeout`) do the same on the space
//! doorbell, which whoever frees a slot rings (SYNC POINT(space-doorbell)).
//!
//! A participant's record counts its sleepers too (`Participant::waiting`: receivers in the
//! low 32 bits, producers in the high 32), so that a recoverer, a successor or a clean close
//! gives a dead or departed participant's counts back ([`give_back`]). A waiter that stops
//! forever while counted only makes wakers ring for nobody: a wasted wake-up, never a lost
//! one.

use super::accounting::count;
use super::Owner;
use super::{Arena, Env};
use crate::layout::{counter, WakeLine};
use crate::sync::{fence, Ordering};

/// Rings the doorbell if a receiver may be asleep. Called after the caller's ring push (a
/// hint) that made something receivable, whose SeqCst CAS on the ring entry is the
/// publication a sleeper's last check must see.
pub fn notify(a: &Arena<'_>, env: &dyn Env, me: Owner) {
    let w = &a.hdr.wake.0;
    // SYNC POINT(doorbell): the push's SeqCst CAS on the ring entry, then this SeqCst load,
    // against the receiver's SeqCst increment and fence before its last check (a pop, which
    // reads the entry): in the single total order either this load comes after the increment
    // (and sees the sleeper) or the sleeper's fence comes after the push (and its pop sees the
    // entry). No fence here, as in `notify_space`: it was a locked instruction a send.
    if crate::sync::load_after_seqcst_rmw_u32(&w.waiters) > 0 {
        // Release: a woken receiver's Acquire load of the doorbell sees our publication.
        w.doorbell.fetch_add(1, Ordering::Release);
        env.wake(&w.doorbell);
        count(a, me, counter::WAKE_UPS, 1);
    }
}

/// The receivers' doorbell: the futex word a receiver sleeps on after [`begin_wait`].
pub fn receivers<'a>(a: &Arena<'a>) -> &'a super::WakeWord {
    &a.hdr.wake.0.doorbell
}

/// The space doorbell: the futex word a producer sleeps on after [`space_begin_wait`].
pub fn producers<'a>(a: &Arena<'a>) -> &'a super::WakeWord {
    &a.hdr.space.0.doorbell
}

/// The receivers' doorbell's value now, for a watcher that sleeps on behalf of others (the
/// async watcher): a change since an earlier reading means a producer rang.
#[cfg_attr(not(feature = "tokio"), allow(dead_code))]
pub fn rung(a: &Arena<'_>) -> u32 {
    // Acquire: pairs with the producers' Release increment (SYNC POINT(doorbell)) and a
    // settings change's (SYNC POINT(reschedule)), so what they announced is seen.
    a.hdr.wake.0.doorbell.load(Ordering::Acquire)
}

/// Announces participant `part` as about to sleep on the doorbell; returns the doorbell value
/// to sleep on. The caller must re-check for messages after this, then sleep, then call
/// [`end_wait`].
pub fn begin_wait(a: &Arena<'_>, part: usize) -> u32 {
    // SYNC POINT(doorbell): against the producer's publication, fence, then `waiters` load.
    announce(a, &a.hdr.wake.0, part, RECEIVER)
}

/// Ends a wait begun with [`begin_wait`].
pub fn end_wait(a: &Arena<'_>, part: usize) {
    withdraw(a, &a.hdr.wake.0, part, RECEIVER);
}

/// Counts a sleeper on `line` (and `unit` in participant `part`'s record), then reads the
/// doorbell value to sleep on. The SeqCst increment and fence come before the caller's last
/// look, against a waker's change, fence (or SeqCst RMW), then `waiters` load: one of the two
/// sees the other (SYNC POINTs doorbell and space-doorbell).
fn announce(a: &Arena<'_>, line: &WakeLine, part: usize, unit: u64) -> u32 {
    // SeqCst, with the fence below: the sleeper's half of the store-buffering pair.
    line.waiters.fetch_add(1, Ordering::SeqCst);
    if let Some(p) = a.parts.get(part) {
        // Relaxed: bookkeeping for giving a dead waiter's count back (after the global
        // count, so a crash between the two over-counts rather than wraps).
        p.waiting.fetch_add(unit, Ordering::Relaxed);
    }
    fence(Ordering::SeqCst);
    // Acquire: pairs with the waker's Release increment of the doorbell.
    line.doorbell.load(Ordering::Acquire)
}

/// Undoes [`announce`].
fn withdraw(a: &Arena<'_>, line: &WakeLine, part: usize, unit: u64) {
    // Relaxed: counts only; the doorbell carries the synchronisation. Per-participant first,
    // so that a crash in between over-counts (a spurious wake-up) rather than wraps.
    if let Some(p) = a.parts.get(part) {
        p.waiting.fetch_sub(unit, Ordering::Relaxed);
    }
    line.waiters.fetch_sub(1, Ordering::Relaxed);
}

use super::words::waiting::{PRODUCER as SPACE_WAITER, RECEIVER};

/// Gives back the sleeper counts `w` (a swapped-out `Participant::waiting`) of a participant
/// that died or closed: receivers to the wake line, producers to the space line.
pub fn give_back(a: &Arena<'_>, w: u64) {
    // AcqRel: counts; the caller's swap made this the only give-back of `w`.
    let (receivers, producers) = super::words::waiting::unpack(w);
    if receivers > 0 {
        a.hdr.wake.0.waiters.fetch_sub(receivers, Ordering::AcqRel);
    }
    if producers > 0 {
        a.hdr.space.0.waiters.fetch_sub(producers, Ordering::AcqRel);
    }
}

/// Rings the space doorbell if a producer may be waiting for a slot. Called by whoever freed a
/// slot, after the SeqCst CAS that freed it.
pub fn notify_space(a: &Arena<'_>, env: &dyn Env) {
    let s = &a.hdr.space.0;
    // SYNC POINT(space-doorbell): the freeing SeqCst CAS in `pool::free`, then this SeqCst
    // load, against the waiter's SeqCst increment and fence before its retry: in the single
    // total order either this load comes after the increment (and sees the waiter) or the
    // waiter's fence comes after the free (and its retry sees the free slot). No fence here:
    // that would be a locked instruction per freed slot.
    if crate::sync::load_after_seqcst_rmw_u32(&s.waiters) > 0 {
        ring_space(a, env);
    }
}

/// [`notify_space`] for a caller that freed slots with Release stores and then issued a SeqCst
/// fence (`pool::free_dummies`: one fence for a run of frees).
pub fn notify_space_after_fence(a: &Arena<'_>, env: &dyn Env) {
    // SYNC POINT(space-doorbell): after the caller's SeqCst fence, against the waiter's SeqCst
    // increment and fence before its retry: of the two fences, the later one orders what came
    // before the earlier one before what follows it, so either this load sees the waiter or
    // its retry sees the free slots. A plain SeqCst load, also under loom (which models the
    // fences: a model with the caller's fence left out loses the wake-up).
    if a.hdr.space.0.waiters.load(Ordering::SeqCst) > 0 {
        ring_space(a, env);
    }
}

/// Rings the space doorbell: wakes every producer waiting for a slot.
fn ring_space(a: &Arena<'_>, env: &dyn Env) {
    let s = &a.hdr.space.0;
    // Release: a woken producer's Acquire load of the doorbell sees the free.
    s.doorbell.fetch_add(1, Ordering::Release);
    // Every waiter: they may wait on different size classes, and one woken for a class it
    // cannot use would leave the one that can asleep.
    env.wake_all(&s.doorbell);
}

/// Announces participant `part` as a producer about to sleep until a slot frees; returns the
/// space doorbell value to sleep on. The caller must try its send again after this, then
/// sleep, then call [`space_end_wait`].
pub fn space_begin_wait(a: &Arena<'_>, part: usize) -> u32 {
    // SYNC POINT(space-doorbell): against the freer's SeqCst CAS then SeqCst `waiters` load.
    announce(a, &a.hdr.space.0, part, SPACE_WAITER)
}

/// Ends a wait begun with [`space_begin_wait`].
pub fn space_end_wait(a: &Arena<'_>, part: usize) {
    withdraw(a, &a.hdr.space.0, part, SPACE_WAITER);
}
