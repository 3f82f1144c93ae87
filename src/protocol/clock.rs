//! The arena clock: arena time is `CLOCK_MONOTONIC` ms minus a base kept in the header's
//! `clock` word, `[boot_tag:24][base_ms:40]`. `CLOCK_MONOTONIC` restarts with each boot, so
//! the first opener on a new boot rebases the clock by CAS: arena time goes on from the
//! arena's wall-clock age, never below its last sweep or liveness check.

use super::Arena;
use crate::sync::Ordering;

pub use super::words::clock::{boot_tag, pack as clock_word, CLOCK_MASK};

/// The clock base [`rebase`] settled on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Based {
    /// `CLOCK_MONOTONIC` ms of arena time 0 on this boot.
    pub base_ms: u64,
    /// This call moved the clock to this boot: every holder of the old boot is gone, so the
    /// caller releases every in-flight message.
    pub rebased: bool,
}

/// The clock base as the clock word has it, without rebasing (an observer, which writes
/// nothing; on a boot the arena has not seen yet, arena times read from it are the last
/// boot's until a participant opens the queue).
pub fn base_ms(a: &Arena<'_>) -> u64 {
    let hdr = a.hdr;
    // Acquire: pairs with the rebaser's AcqRel CAS (SYNC POINT(clock-rebase)).
    hdr.clock.load(Ordering::Acquire) & CLOCK_MASK
}

/// The clock base on boot `boot`, rebasing the arena clock if it was made on another boot.
/// `mono_ms` is `CLOCK_MONOTONIC` now and `wall_ms` the wall clock now (both ms).
///
/// Lock-free: one CAS decides the rebaser per boot; a loser (or an opener that stopped
/// between the CAS and its boot-id stores, which are informational) reads the winner's word.
pub fn rebase(a: &Arena<'_>, boot: [u64; 2], mono_ms: u64, wall_ms: u64) -> Based {
    let hdr = a.hdr;
    let tag = boot_tag(boot);
    let r = Ordering::Relaxed;
    loop {
        // Acquire: SYNC POINT(clock-rebase), pairs with a rebaser's AcqRel CAS (and the creator's publication).
        let c = hdr.clock.load(Ordering::Acquire);
        if super::words::clock::tag(c) == tag {
            return Based {
                base_ms: c & CLOCK_MASK,
                rebased: false,
            };
        }
        // Relaxed: fixed at creation, published by SYNC POINT(arena-ready); the floors are
        // advisory (a racing sweep only makes the floor a little lower).
        let age = wall_ms.saturating_sub(hdr.created_wall_ms.load(r));
        let floor = hdr.last_sweep.0.load(r).max(hdr.liveness.0.load(r)) + 1;
        let t = age.max(floor).min(CLOCK_MASK / 2);
        let base = mono_ms.wrapping_sub(t) & CLOCK_MASK;
        // SYNC POINT(clock-rebase): AcqRel, one rebaser per boot; a loser reloads the winner's word.
        if hdr
            .clock
            .compare_exchange(
                c,
                clock_word(tag, base),
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_ok()
        {
            let done = Based {
                base_ms: base,
                rebased: true,
            };
            crash_point!(done);
            // Relaxed: informational (the tag in `clock` is what openers compare).
            hdr.boot_id[0].store(boot[0], r);
            hdr.boot_id[1].store(boot[1], r);
            return done;
        }
    }
}
