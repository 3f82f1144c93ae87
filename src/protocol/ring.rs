//! The ready-hint ring: a bounded MPMC ring of group indices where every push and every pop is
//! a single CAS on the entry, and `head`/`tail` are hints that anyone helps forward.
//!
//! Entry word: `[seq:40][value:24]`. For position `p` in entry `p % R`, with `lap = p / R`:
//! `seq == 2·lap` means "empty, next written for position p"; `seq == 2·lap + 1` means "holds
//! the value pushed at position p". A pop of position `p` stores `2·(lap + 1)`: empty for
//! position `p + R`. (This is crossbeam's `ArrayQueue` stamp, but the stamp and value change
//! together, so a participant that dies between two steps leaves nothing half-done: at worst
//! `head` or `tail` lags, and the next participant helps it forward.)
//!
//! Hints are allowed to be lost (full ring, corrupted entry) or duplicated: consumers re-validate
//! the group, and a sweep re-derives lost hints.

use super::words::ring::{pack, seq, value, SEQ_MASK};
use crate::sync::{AtomicU64, Ordering};

/// Retries before a push or pop gives up (only reached under corruption or extreme contention;
/// a lost hint is repaired by the sweep).
const MAX_SPINS: u32 = 1 << 16;
/// Rounds a push waits on an entry in an impossible state before it calls the ring corrupted.
const ODD_ROUNDS: u32 = 256;

/// The ring: entries plus the two position hints.
#[derive(Debug, Clone, Copy)]
pub struct Ring<'a> {
    /// Entries; the length is a power of two.
    pub entries: &'a [AtomicU64],
    /// Consumer position hint.
    pub head: &'a AtomicU64,
    /// Producer position hint.
    pub tail: &'a AtomicU64,
}

impl Ring<'_> {
    fn at(&self, pos: u64) -> (&AtomicU64, u64) {
        let r = self.entries.len() as u64;
        // The length is a power of two (checked on open), so the mask is exact.
        (&self.entries[(pos & (r - 1)) as usize], pos / r)
    }

    /// Pushes `value` (< 2^24). Returns `false` if the ring is full (or looks corrupted).
    pub fn push(&self, value: u32) -> bool {
        if self.entries.is_empty() {
            return false;
        }
        // Rounds in a row that found `tail` unmoved on an entry in no state a live ring gives
        // it at that position: only corruption persists in that (a stale `tail` moves on).
        let mut odd = 0;
        for _ in 0..MAX_SPINS {
            // Acquire: pairs with the Release CAS that advanced `tail`, so the entry we then
            // load is at least as new as the one that was filled before the advance.
            let t = self.tail.load(Ordering::Acquire);
            let (e, lap) = self.at(t);
            let empty = lap.wrapping_mul(2) & SEQ_MASK;
            let full = pack(lap.wrapping_mul(2).wrapping_add(1), value);
            // The entry as a pop leaves it (empty for this lap, value 0) is expected, and taken
            // with one CAS: one exclusive fetch of the entry's line, where a load then a CAS
            // fetch it twice from the consumer that emptied it (the line count's ring rows).
            // SeqCst on success: Release publishes the value to the popper's Acquire RMW;
            // Acquire orders us after the pop that emptied the entry; and the total order is
            // the pusher's half of SYNC POINT(doorbell) (`doorbell::notify` loads `waiters`
            // after it, with no fence; a locked CAS either way on x86). Acquire on failure:
            // pairs with the CAS of the last push or pop of this entry (what the branches
            // below read).
            let first =
                e.compare_exchange(pack(empty, 0), full, Ordering::SeqCst, Ordering::Acquire);
            let w = first.unwrap_or_else(|cur| cur);
            let s = seq(w);
            if s == empty {
                // SeqCst: as above (an empty entry whose value is not 0 is only scribbled).
                if first.is_ok()
                    || e.compare_exchange(w, full, Ordering::SeqCst, Ordering::Relaxed)
                        .is_ok()
                {
                    crash_point!(true);
                    // Release: pairs with the Acquire loads of `tail` above. Failure means
                    // someone already helped.
                    let _ = self.tail.compare_exchange(
                        t,
                        t.wrapping_add(1),
                        Ordering::Release,
                        Ordering::Relaxed,
                    );
                    return true;
                }
            } else if s == lap.wrapping_mul(2).wrapping_add(1) & SEQ_MASK
                || s == lap.wrapping_mul(2).wrapping_add(2) & SEQ_MASK
            {
                // Filled at position t (and maybe already popped): help the tail forward.
                let _ = self.tail.compare_exchange(
                    t,
                    t.wrapping_add(1),
                    Ordering::Release,
                    Ordering::Relaxed,
                );
            } else if s.wrapping_add(1) & SEQ_MASK == empty {
                // Still holds the value of position t - R: full, unless `tail` moved meanwhile.
                // Relaxed: a re-read to rule out a stale `t`.
                if self.tail.load(Ordering::Relaxed) == t {
                    return false;
                }
            } else if self.tail.load(Ordering::Relaxed) == t {
                // Relaxed: as above.
                odd += 1;
                if odd >= ODD_ROUNDS {
                    return false;
                }
            } else {
                odd = 0;
            }
            crate::sync::spin_hint();
        }
        false
    }

    /// Pops the oldest value, or `None` if the ring is empty.
    pub fn pop(&self) -> Option<u32> {
        if self.entries.is_empty() {
            return None;
        }
        for _ in 0..MAX_SPINS {
            // Acquire: pairs with the Release CAS that advanced `head`.
            let h = self.head.load(Ordering::Acquire);
            let (e, lap) = self.at(h);
            // Read for writing (`load_for_write_u64`): the CAS that takes the value below then
            // finds the entry's line here (a load then a CAS fetch it twice from the producer
            // that filled it: the line count's ring rows). Acquire: pairs with the AcqRel CAS
            // of the push that filled this entry.
            let w = crate::sync::load_for_write_u64(e, Ordering::Acquire);
            let s = seq(w);
            if s == lap.wrapping_mul(2).wrapping_add(1) & SEQ_MASK {
                // AcqRel: Acquire takes the pushed value; Release hands the emptied entry to
                // the next lap's pusher.
                if e.compare_exchange(
                    w,
                    pack(lap.wrapping_mul(2).wrapping_add(2), 0),
                    Ordering::AcqRel,
                    Ordering::Relaxed,
                )
                .is_ok()
                {
                    crash_point!(Some(value(w)));
                    let _ = self.head.compare_exchange(
                        h,
                        h.wrapping_add(1),
                        Ordering::Release,
                        Ordering::Relaxed,
                    );
                    return Some(value(w));
                }
            } else if s == lap.wrapping_mul(2) & SEQ_MASK {
                // Relaxed: a re-read to rule out a stale `h`.
                if self.head.load(Ordering::Relaxed) == h {
                    return None;
                }
            } else if s == lap.wrapping_mul(2).wrapping_add(2) & SEQ_MASK {
                // Already popped: help the head forward.
                let _ = self.head.compare_exchange(
                    h,
                    h.wrapping_add(1),
                    Ordering::Release,
                    Ordering::Relaxed,
                );
            }
            crate::sync::spin_hint();
        }
        None
    }

    /// Whether the ring looks empty (a hint).
    pub fn looks_empty(&self) -> bool {
        // Relaxed: advisory only.
        let h = self.head.load(Ordering::Relaxed);
        let t = self.tail.load(Ordering::Relaxed);
        t <= h
    }
}
