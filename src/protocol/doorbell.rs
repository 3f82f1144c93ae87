//! The doorbell: long-polling receivers announce themselves and sleep on a futex word; a
//! producer that published rings it only when someone may be asleep (SYNC POINT(doorbell)).

use super::accounting::count;
use super::Owner;
use super::{Arena, Env};
use crate::layout::counter;
use crate::sync::{fence, Ordering};

/// Rings the doorbell if a receiver may be asleep.
pub fn notify(a: &Arena<'_>, env: &dyn Env, me: Owner) {
    let w = &a.hdr.wake.0;
    // SYNC POINT(doorbell): the fence orders our publication before the `waiters` load, against
    // the receiver's SeqCst increment and fence before its last check.
    if crate::sync::fence_then_load_u32(&w.waiters) > 0 {
        // Release: a woken receiver's Acquire load of the doorbell sees our publication.
        w.doorbell.fetch_add(1, Ordering::Release);
        env.wake(&w.doorbell);
        count(a, me, counter::WAKE_UPS, 1);
    }
}

/// Announces participant `part` as about to sleep on the doorbell; returns the doorbell value
/// to sleep on. The caller must re-check for messages after this, then sleep, then call
/// [`end_wait`].
pub fn begin_wait(a: &Arena<'_>, part: usize) -> u32 {
    let w = &a.hdr.wake.0;
    // SYNC POINT(doorbell): SeqCst increment and fence before the caller's re-check, against
    // the producer's publication, fence, then `waiters` load: one of the two sees the other.
    w.waiters.fetch_add(1, Ordering::SeqCst);
    if let Some(p) = a.parts.get(part) {
        // Relaxed: bookkeeping for recovery of a dead waiter's count (incremented after the
        // global count, so a crash between the two over-counts rather than wraps).
        p.waiting.fetch_add(1, Ordering::Relaxed);
    }
    fence(Ordering::SeqCst);
    // Acquire: pairs with the producer's Release increment of the doorbell.
    w.doorbell.load(Ordering::Acquire)
}

/// Ends a wait begun with [`begin_wait`].
pub fn end_wait(a: &Arena<'_>, part: usize) {
    // Relaxed: counts only; the doorbell carries the synchronisation. Per-participant first,
    // so that a crash in between over-counts (a spurious wake-up) rather than wraps.
    if let Some(p) = a.parts.get(part) {
        p.waiting.fetch_sub(1, Ordering::Relaxed);
    }
    a.hdr.wake.0.waiters.fetch_sub(1, Ordering::Relaxed);
}
