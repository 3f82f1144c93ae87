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
use crate::sync::local::{AtomicU64 as LocalU64, Ordering as LocalOrdering};
use crate::sync::{AtomicU64, Ordering};

/// Retries before a push or pop gives up (only reached under corruption or extreme contention;
/// a lost hint is repaired by the sweep).
const MAX_SPINS: u32 = 1 << 16;
/// Rounds a push waits on an entry in an impossible state before it calls the ring corrupted.
const ODD_ROUNDS: u32 = 256;

/// Whether an entry of stamp `s`, looked at for a position of lap `lap`, is done with that
/// position: popped (empty for the position a lap later), or filled again for it (a hint lags
/// less than a lap, so no later state is met in a live ring).
#[inline]
fn done(s: u64, lap: u64) -> bool {
    s == lap.wrapping_mul(2).wrapping_add(2) & SEQ_MASK
        || s == lap.wrapping_mul(2).wrapping_add(3) & SEQ_MASK
}

/// The ring: entries plus the two position hints.
#[derive(Debug, Clone, Copy)]
pub struct Ring<'a> {
    /// Entries; the length is a power of two.
    pub entries: &'a [AtomicU64],
    /// Consumer position hint.
    pub head: &'a AtomicU64,
    /// Producer position hint.
    pub tail: &'a AtomicU64,
    /// This process's positions after its last push (`[0]`) and pop (`[1]`) on this ring, if
    /// it keeps them (layout 20; process memory, not the arena's).
    pub cursors: Option<&'a [LocalU64; 2]>,
}

impl Ring<'_> {
    fn at(&self, pos: u64) -> (&AtomicU64, u64) {
        let r = self.entries.len() as u64;
        // The length is a power of two (checked on open), so the mask and the shift are exact
        // (a shift, not a division: this runs for every entry a push or pop looks at).
        (
            &self.entries[(pos & (r - 1)) as usize],
            pos >> r.trailing_zeros(),
        )
    }

    /// Positions between two moves of a position hint (layout 20): a push or pop moves its hint
    /// only when it fills or empties the last entry of a stride (8 entries: one cache line),
    /// and one that walks a whole stride of taken entries from a lagging hint moves it to where
    /// it is. A quarter of the ring at most, so a hint lags less than a lap behind the entries.
    fn stride(&self) -> u64 {
        (self.entries.len() as u64 / 4).clamp(1, 8)
    }

    /// Where a push (`side` 0) or pop (1) starts: the later of the shared hint and this
    /// process's cursor. Both are at or before the first entry not yet done with: a hint
    /// moves only past such entries, and the cursor names the entry after one this process
    /// filled (emptied), before which every entry was filled (emptied) already.
    #[inline]
    fn start(&self, hint: &AtomicU64, side: usize) -> u64 {
        // Acquire: pairs with the Release CAS that moved the hint, so the entries we then load
        // are at least as new as the ones taken before the move.
        let h = hint.load(Ordering::Acquire);
        match self.cursors {
            // Process-local: this process's own last position (any of its threads').
            Some(c) => h.max(c[side].load(LocalOrdering::Relaxed)),
            None => h,
        }
    }

    /// Notes that this process took position `p` on `side`; moves `hint` past it if `p` ends a
    /// stride.
    #[inline]
    fn took(&self, hint: &AtomicU64, side: usize, p: u64, stride: u64) {
        let next = p.wrapping_add(1);
        if let Some(c) = self.cursors {
            c[side].store(next, LocalOrdering::Relaxed);
        }
        // `stride` is a power of two (a quarter of the ring's length, at most 8).
        if next & (stride - 1) == 0 {
            Self::advance(hint, next);
        }
    }

    /// Moves `hint` forward to `to` unless it is there already (a position hint only moves
    /// forward). Release: pairs with the Acquire loads of the hint, so an entry read after a
    /// hint is at least as new as the one taken before its move.
    fn advance(hint: &AtomicU64, to: u64) {
        // Relaxed: the CAS below decides.
        let mut cur = hint.load(Ordering::Relaxed);
        for _ in 0..4 {
            if cur >= to {
                return;
            }
            match hint.compare_exchange(cur, to, Ordering::Release, Ordering::Relaxed) {
                Ok(_) => return,
                Err(now) => cur = now,
            }
        }
    }

    /// Pushes `value` (< 2^24). Returns `false` if the ring is full (or looks corrupted).
    pub fn push(&self, value: u32) -> bool {
        if self.entries.is_empty() {
            return false;
        }
        let stride = self.stride();
        // Rounds in a row that found `tail` unmoved on an entry in no state a live ring gives
        // it at that position: only corruption persists in that (a stale start moves on).
        let mut odd = 0;
        let mut t = self.start(self.tail, 0);
        let mut p = t;
        for _ in 0..MAX_SPINS {
            let (e, lap) = self.at(p);
            let empty = lap.wrapping_mul(2) & SEQ_MASK;
            let full = pack(lap.wrapping_mul(2).wrapping_add(1), value);
            // Read for writing (`load_for_write_u64`: a `prefetchw` and a load on x86-64), as a
            // pop reads: the CAS below then finds the entry's line here, fetched once and
            // exclusively from the consumer that emptied it (the line count's ring rows), and
            // an entry filled already (a lagging start, layout 20) costs a load, not a failed
            // locked CAS. Acquire: pairs with the CAS of the last push or pop of this entry
            // (what the branches below read).
            let w = crate::sync::load_for_write_u64(e, Ordering::Acquire);
            let s = seq(w);
            if s == empty {
                // SeqCst on success: Release publishes the value to the popper's Acquire RMW;
                // Acquire orders us after the pop that emptied the entry; and the total order
                // is the pusher's half of SYNC POINT(doorbell) (`doorbell::notify` loads
                // `waiters` after it, with no fence; a locked CAS either way on x86). (An
                // empty entry whose value is not 0 is only scribbled: taken all the same.)
                if e.compare_exchange(w, full, Ordering::SeqCst, Ordering::Relaxed)
                    .is_ok()
                {
                    crash_point!(true);
                    // Layout 20: `tail` moves when a push fills the last entry of a stride
                    // (one locked instruction every `stride` pushes, not every push). A pusher
                    // that dies before moving it leaves it lagging, which the next pushers
                    // walk past and move.
                    self.took(self.tail, 0, p, stride);
                    return true;
                }
                continue; // filled by another pusher meanwhile: look again
            } else if s == lap.wrapping_mul(2).wrapping_add(1) & SEQ_MASK || done(s, lap) {
                // Filled at position p (and maybe popped, and filled again for the next lap:
                // a lagging start sees that): look at the next, and move a hint that lags a
                // whole stride behind to here.
                p = p.wrapping_add(1);
                if p.wrapping_sub(t) >= stride {
                    Self::advance(self.tail, p);
                    t = p;
                }
                continue;
            } else if s.wrapping_add(1) & SEQ_MASK == empty {
                // Still holds the value of position p - R: full, unless `tail` moved meanwhile.
                // Relaxed: a re-read to rule out a stale start.
                if self.tail.load(Ordering::Relaxed) <= t {
                    return false;
                }
            } else if self.tail.load(Ordering::Relaxed) <= t {
                // Relaxed: as above.
                odd += 1;
                if odd >= ODD_ROUNDS {
                    return false;
                }
            } else {
                odd = 0;
            }
            crate::sync::spin_hint();
            // Start again from the shared hint (a process's cursor may be what was stale).
            // Acquire: as in `start`.
            t = self.tail.load(Ordering::Acquire);
            p = t;
        }
        false
    }

    /// Pops the oldest value, or `None` if the ring is empty.
    pub fn pop(&self) -> Option<u32> {
        if self.entries.is_empty() {
            return None;
        }
        let stride = self.stride();
        let mut h = self.start(self.head, 1);
        let mut p = h;
        for _ in 0..MAX_SPINS {
            let (e, lap) = self.at(p);
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
                    // Layout 20: as a push moves `tail`, once a stride.
                    self.took(self.head, 1, p, stride);
                    return Some(value(w));
                }
                continue; // taken by another popper meanwhile: look again
            } else if s == lap.wrapping_mul(2) & SEQ_MASK {
                // Empty for position p: pushes fill positions in order from starts that never
                // pass an empty entry, so nothing after it is filled. Relaxed: a re-read to
                // rule out a stale start (an entry of a lap ago seen from a start a lap behind).
                if self.head.load(Ordering::Relaxed) <= h {
                    return None;
                }
            } else if done(s, lap) {
                // Already popped (and maybe filled again for the next lap, seen from a lagging
                // start): look at the next, and move a hint a whole stride behind.
                p = p.wrapping_add(1);
                if p.wrapping_sub(h) >= stride {
                    Self::advance(self.head, p);
                    h = p;
                }
                continue;
            }
            crate::sync::spin_hint();
            // Start again from the shared hint. Acquire: as in `start`.
            h = self.head.load(Ordering::Acquire);
            p = h;
        }
        None
    }

    /// Whether the ring looks empty (a hint: a spinning receiver's look before it pops). The
    /// entries from the pop's start are read, not the hints alone (`tail` lags the pushes by
    /// up to a stride since layout 20): popped ones are passed over, and the first that is not
    /// says.
    pub fn looks_empty(&self) -> bool {
        if self.entries.is_empty() {
            return true;
        }
        // Relaxed: advisory only.
        let mut h = self.head.load(Ordering::Relaxed);
        if let Some(c) = self.cursors {
            h = h.max(c[1].load(LocalOrdering::Relaxed));
        }
        for p in h..h.saturating_add(2 * self.stride()) {
            let (e, lap) = self.at(p);
            // Relaxed: advisory only.
            let s = seq(e.load(Ordering::Relaxed));
            if !done(s, lap) {
                return s != lap.wrapping_mul(2).wrapping_add(1) & SEQ_MASK;
            }
        }
        false
    }
}

#[cfg(all(test, not(shmfifo_loom)))]
mod tests {
    use super::{LocalU64, Ring};
    use crate::sync::{AtomicU64, Ordering};

    /// With hints that move once a stride (layout 20), with and without a process's cursors, a
    /// ring holds exactly its length, hands values back in push order over many laps whatever
    /// the fill, says when it is empty, and its hints lag less than a stride behind.
    #[test]
    fn a_ring_with_lagging_hints_holds_its_length_in_order() {
        for n in [1usize, 2, 4, 8, 16, 64] {
            for with_cursors in [false, true] {
                let entries: Vec<AtomicU64> = (0..n).map(|_| AtomicU64::new(0)).collect();
                let (head, tail) = (AtomicU64::new(0), AtomicU64::new(0));
                let cursors = [LocalU64::new(0), LocalU64::new(0)];
                let r = Ring {
                    entries: &entries,
                    head: &head,
                    tail: &tail,
                    cursors: with_cursors.then_some(&cursors),
                };
                let stride = r.stride();
                let (mut next_in, mut next_out) = (0u32, 0u32);
                for round in 0..40usize {
                    let fill = round % (n + 1);
                    for _ in 0..fill {
                        assert!(r.push(next_in), "n={n} round={round}");
                        next_in += 1;
                    }
                    assert_eq!(r.looks_empty(), fill == 0, "n={n} round={round}");
                    if fill == n {
                        assert!(!r.push(999), "n={n}: full at {n}");
                    }
                    assert!(u64::from(next_in) - tail.load(Ordering::SeqCst) < stride);
                    for _ in 0..fill {
                        assert_eq!(r.pop(), Some(next_out), "n={n} round={round}");
                        next_out += 1;
                    }
                    assert_eq!(r.pop(), None);
                    assert!(r.looks_empty());
                    assert!(u64::from(next_out) - head.load(Ordering::SeqCst) < stride);
                }
            }
        }
    }
}
