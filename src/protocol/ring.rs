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
//!
//! `head` moves once a stride (layout 21): a pop moves it when it empties the last entry of a
//! stride (8 entries; a quarter of a ring under 32), or when it walked a whole stride of
//! popped entries from a lagging start. Pops start at the later of `head` and their process's
//! own pop cursor (process memory), walking past entries already popped. `tail` moves the same
//! way (since stop 53): a push moves it when it fills the last entry of a stride, or when it
//! walked a whole stride of filled entries; pushes start at the later of `tail` and their
//! process's push cursor, walking past entries already filled. So a lone producer's push is
//! one locked instruction (the entry's CAS), and a pop or a push moves its index once a stride.
//! Pushes still fill positions in order (each fills the first entry not filled from a start
//! before which every entry is), which is what a pop's "empty, so nothing after it is filled"
//! rests on. Nobody decides anything from `tail` but where a push starts: a receiver's look
//! ([`Ring::is_empty`], [`Ring::looks_empty`]) reads the entry where its pop would start.

use super::words::ring::{pack, seq, value, SEQ_MASK};
use crate::sync::local::{AtomicU64 as LocalU64, Ordering as LocalOrdering};
use crate::sync::{AtomicU64, Ordering};

/// Retries before a push or pop gives up (only reached under corruption or extreme contention;
/// a lost hint is repaired by the sweep).
const MAX_SPINS: u32 = 1 << 16;
/// Rounds a push waits on an entry in an impossible state before it calls the ring corrupted.
const ODD_ROUNDS: u32 = 256;

/// Whether stamp `s` comes after stamp `base` (modulo the stamp's 40 bits: within half their
/// range after it). An entry's stamp only grows (each push and pop adds one), so an entry whose
/// stamp is after the one a position expects has been past that state.
#[inline]
fn after(s: u64, base: u64) -> bool {
    let d = s.wrapping_sub(base) & SEQ_MASK;
    d != 0 && d <= SEQ_MASK >> 1
}

/// Whether an entry of stamp `s`, looked at for a position of lap `lap`, is done with that
/// position: popped (empty for the position a lap later), or anything after (filled again for
/// a later lap, and so on: `head` left laps behind by poppers that stopped or died right after
/// their entry CAS at the end of a stride, before moving it, meets such entries, and pops walk
/// past them).
#[inline]
fn done(s: u64, lap: u64) -> bool {
    after(s, lap.wrapping_mul(2).wrapping_add(1) & SEQ_MASK)
}

/// Where a pop or a push starts: the later of its shared index `i` (`head` or `tail`, loaded
/// with `order`) and this process's cursor `c` for it, both at or before the first entry not
/// done with (the index moves only past such entries; a cursor is set only to such a
/// position).
#[inline]
fn start(i: &AtomicU64, c: Option<&LocalU64>, order: Ordering) -> u64 {
    let at = i.load(order);
    match c {
        // Process-local: this process's own position (any of its threads'). Acquire: pairs
        // with the Release store of `note`, so that a pop or push starting past another
        // thread's of this process comes after it (a receiver that reads ours then reads
        // theirs).
        Some(c) => at.max(c.load(LocalOrdering::Acquire)),
        None => at,
    }
}

/// Notes in this process's cursor `c` that every entry before `p` is done with (popped, or
/// filled).
#[inline]
fn note(c: Option<&LocalU64>, p: u64) {
    if let Some(c) = c {
        // Process-local; a race between this process's threads may set it back, never past
        // an entry not yet done with (every value stored was such a position). Release:
        // pairs with `start`'s Acquire load (after our entry CAS).
        c.store(p, LocalOrdering::Release);
    }
}

/// Moves index `i` (`head` or `tail`) forward to `to` unless it is there already (it only
/// moves forward; four lost CASes leave it to the next mover). Release: pairs with the Acquire
/// loads of the index, so an entry read after it is at least as new as the one popped or
/// filled before its move.
fn advance(i: &AtomicU64, to: u64) {
    // Relaxed: the CAS below decides.
    let mut cur = i.load(Ordering::Relaxed);
    for _ in 0..4 {
        if cur >= to {
            return;
        }
        match i.compare_exchange(cur, to, Ordering::Release, Ordering::Relaxed) {
            Ok(_) => return,
            Err(now) => cur = now,
        }
    }
}

/// The ring: entries plus the two position hints.
#[derive(Debug, Clone, Copy)]
pub struct Ring<'a> {
    /// Entries; the length is a power of two.
    pub entries: &'a [AtomicU64],
    /// Consumer position hint.
    pub head: &'a AtomicU64,
    /// Producer position hint: at or before the first entry not filled, less than a stride
    /// behind it but where a pusher died or stopped before moving it (or gave up moving it
    /// after four lost CASes: the next stride's end or walk moves it on).
    pub tail: &'a AtomicU64,
    /// This process's pop cursor on this ring (layout 21; process memory, not the arena's):
    /// a position before which every entry is popped, where its pops start when it is past
    /// `head`. `None`: pops start at `head` (the ring's own loom models of poppers in separate
    /// processes; the protocol's models on heap arenas share one arena's cursor among their
    /// threads, as threads of one process).
    pub cursor: Option<&'a LocalU64>,
    /// This process's push cursor on this ring (process memory): a position before which
    /// every entry is filled, where its pushes start when it is past `tail`. `None`: pushes
    /// start at `tail` (as `cursor`).
    pub push_cursor: Option<&'a LocalU64>,
}

impl Ring<'_> {
    #[inline(always)]
    fn at(&self, pos: u64) -> (&AtomicU64, u64) {
        let r = self.entries.len() as u64;
        // The length is a power of two (the base ring's checked on open, an added table's
        // the base's times a power of two, both from this process's own geometry), so the
        // mask is exact and the lap a shift (a division is tens of cycles, on every push and
        // pop). Whatever the length, the index is in bounds (masked below it, and checked).
        debug_assert!(r.is_power_of_two());
        (
            &self.entries[(pos & (r - 1)) as usize],
            pos >> r.trailing_zeros(),
        )
    }

    /// Pushes `value` (< 2^24). Returns `false` if the ring is full (or looks corrupted).
    ///
    /// A push fills the first entry not yet filled, looking from where this process's next
    /// push goes (its push cursor, process memory) or from `tail` where that is later, and
    /// walks past entries filled (and maybe popped) since. `tail` moves once a stride, as
    /// `head` does: when a push fills the last entry of a stride, or when one walked a whole
    /// stride from a lagging start. So a lone producer's push is one CAS, the entry's (one
    /// locked instruction where it was two, the entry's and `tail`'s).
    #[inline]
    pub fn push(&self, value: u32) -> bool {
        if self.entries.is_empty() {
            return false;
        }
        // The first look, where a lone producer's push always succeeds: the entry at its
        // start as a pop leaves it, one CAS (see `push_walking` for the orderings).
        let p = self.push_start(Ordering::Acquire);
        let (e, lap) = self.at(p);
        let empty = pack(lap.wrapping_mul(2) & SEQ_MASK, 0);
        let full = pack(lap.wrapping_mul(2).wrapping_add(1), value);
        if e.compare_exchange(empty, full, Ordering::SeqCst, Ordering::Acquire)
            .is_ok()
        {
            crash_point!(true);
            self.pushed(p);
            return true;
        }
        self.push_walking(value)
    }

    /// After a push filled position `p`: the push cursor past it, and `tail` moved if `p` was
    /// a stride's last entry.
    #[inline]
    fn pushed(&self, p: u64) {
        let next = p.wrapping_add(1);
        self.note_push(next);
        // The stride is a power of two (a quarter of a power of two, at most 8).
        if next & (self.stride() - 1) == 0 {
            self.advance_tail(next);
        }
    }

    /// [`Ring::push`] past a first look that did not fill its entry: another push filled it
    /// (a producer in another process, or the start lagging), a value not 0 in an empty entry
    /// (only scribbled), the ring full, or corruption. Out of line: a lone producer never
    /// comes here.
    #[cold]
    #[inline(never)]
    fn push_walking(&self, value: u32) -> bool {
        // Acquire: pairs with the Release CAS that moved `tail`, so the entries we then look
        // at are at least as new as the ones filled before the move. (The cursor gives no such
        // order: a stale entry it leads to is only looked at again.)
        let mut t = self.push_start(Ordering::Acquire);
        let mut p = t;
        // Rounds in a row that found an entry in no state a live ring gives it at or after
        // where a push looks: only corruption persists in that (a stale start moves on).
        let mut odd = 0;
        for _ in 0..MAX_SPINS {
            let (e, lap) = self.at(p);
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
                    self.pushed(p);
                    return true;
                }
                // Changed under us (another push filled it): look at it again.
            } else if s == lap.wrapping_mul(2).wrapping_add(1) & SEQ_MASK || done(s, lap) {
                // Filled at position p (and maybe popped since, or filled again for later
                // laps, seen from a lagging start): look at the next, and move `tail` if it
                // lags a whole stride behind. Pushes fill positions in order (each the first
                // entry not filled from a start before which every entry is), so the first
                // empty entry is the next position.
                p = p.wrapping_add(1);
                odd = 0;
                if p.wrapping_sub(t) >= self.stride() {
                    self.advance_tail(p);
                    t = p;
                }
                continue;
            } else if s.wrapping_add(1) & SEQ_MASK == empty {
                // Still holds the value of position p - R, which no pop took: every entry
                // holds a value (position p is the first not filled, see above), the ring is
                // full. Only under corruption: a ring has an entry for each group of its
                // table, and a group has one hint queued at most.
                return false;
            } else {
                odd += 1;
                if odd >= ODD_ROUNDS {
                    return false;
                }
                // Start again from `tail`. Acquire: as above.
                t = self.tail.load(Ordering::Acquire);
                p = t;
            }
            crate::sync::spin_hint();
        }
        false
    }

    /// Where a push starts: the later of `tail` and this process's push cursor, both at or
    /// before the first entry not filled (`tail` moves only past filled entries; the cursor is
    /// set only to such a position). `order`: the load of `tail` (the caller says why).
    #[inline]
    fn push_start(&self, order: Ordering) -> u64 {
        start(self.tail, self.push_cursor, order)
    }

    /// Notes in this process's push cursor that every entry before `p` is filled.
    #[inline]
    fn note_push(&self, p: u64) {
        note(self.push_cursor, p);
    }

    /// Moves `tail` forward to `to` unless it is there already (see [`advance`]).
    fn advance_tail(&self, to: u64) {
        advance(self.tail, to);
    }

    /// Positions between two moves of `head` (layout 21): a pop moves it only when it empties
    /// the last entry of a stride, and one that walks a whole stride of popped entries from a
    /// lagging start moves it to where it is. 8 entries (one cache line of the ring), a
    /// quarter of the ring at most.
    fn stride(&self) -> u64 {
        (self.entries.len() as u64 / 4).clamp(1, 8)
    }

    /// Where a pop starts: the later of `head` and this process's cursor, both at or before the
    /// first entry not yet popped (`head` moves only past popped entries; the cursor is set
    /// only to such a position). `order`: the load of `head` (the caller says why).
    #[inline]
    fn pop_start(&self, order: Ordering) -> u64 {
        start(self.head, self.cursor, order)
    }

    /// Notes in this process's cursor that every entry before `p` is popped.
    #[inline]
    fn note(&self, p: u64) {
        note(self.cursor, p);
    }

    /// Moves `head` forward to `to` unless it is there already (see [`advance`]).
    fn advance_head(&self, to: u64) {
        advance(self.head, to);
    }

    /// Pops the oldest value, or `None` if the ring is empty.
    #[inline]
    pub fn pop(&self) -> Option<u32> {
        if self.entries.is_empty() {
            return None;
        }
        // Acquire: pairs with the Release CAS that moved `head`, so the entries we then load
        // are at least as new as the ones popped before the move. (The cursor gives no such
        // order: a stale entry it leads to is only looked at again.)
        let start = self.pop_start(Ordering::Acquire);
        let mut h = start;
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
                    // Layout 21: `head` moves when a pop empties the last entry of a stride
                    // (one locked instruction every `stride` pops, not every pop). A popper
                    // that dies or stops before moving it leaves it lagging, which the next
                    // pops walk past and move.
                    let next = p.wrapping_add(1);
                    self.note(next);
                    // The stride is a power of two (a quarter of a power of two, at most 8).
                    if next & (self.stride() - 1) == 0 {
                        self.advance_head(next);
                    }
                    return Some(value(w));
                }
                continue; // taken by another popper meanwhile: look again
            } else if s == lap.wrapping_mul(2) & SEQ_MASK {
                // Empty for position p: pushes fill positions in order (a push fills the first
                // entry not filled from a start, `tail` or its process's push cursor, before
                // which every entry is filled), so nothing after it is filled, and every entry before it is popped (walked past, or before the
                // start). Relaxed: a re-read that rules out a stale `head`.
                if self.head.load(Ordering::Relaxed) <= h {
                    if p != start {
                        self.note(p); // walked past popped entries
                    }
                    return None;
                }
            } else if done(s, lap) {
                // Already popped (and maybe filled again for later laps, seen from a lagging
                // start): look at the next, and move `head` if it lags a whole stride behind.
                p = p.wrapping_add(1);
                if p.wrapping_sub(h) >= self.stride() {
                    self.advance_head(p);
                    h = p;
                }
                continue;
            }
            crate::sync::spin_hint();
            // Start again from `head`. Acquire: as in `pop_start`.
            h = self.head.load(Ordering::Acquire);
            p = h;
        }
        None
    }

    /// The first value queued: `(position, value, only)`, where `only` says that nothing is
    /// queued behind it (the next entry is empty for its position: pushes fill positions in
    /// order). Walks from where a pop would start past popped entries, as a pop does, but with
    /// plain loads and writing nothing: a ring nobody pushes to or pops from stays read-shared
    /// (layout 27: a receive serving the ring's only hint in place, a ready-check making such a
    /// hint fresh). `None` where nothing is queued, or where it cannot say at once (an entry in
    /// no state a position expects: a start that lags a lap, or corruption).
    #[inline]
    pub fn first(&self) -> Option<(u64, u32, bool)> {
        let r = self.entries.len() as u64;
        if r < 2 {
            return None;
        }
        // Acquire: as in `pop`.
        let mut p = self.pop_start(Ordering::Acquire);
        for _ in 0..r {
            let (e, lap) = self.at(p);
            // Acquire: pairs with the SeqCst CAS of the push that filled it (a hint: whoever
            // acts on the value takes the group's claim, which carries the ordering that
            // counts).
            let w = e.load(Ordering::Acquire);
            let s = seq(w);
            if s == lap.wrapping_mul(2).wrapping_add(1) & SEQ_MASK {
                let next = p.wrapping_add(1);
                let (n, nlap) = self.at(next);
                // Acquire: as above.
                let only = seq(n.load(Ordering::Acquire)) == nlap.wrapping_mul(2) & SEQ_MASK;
                return Some((p, value(w), only));
            }
            if !done(s, lap) {
                return None; // empty for position p (nothing after it is filled), or odd
            }
            p = p.wrapping_add(1);
        }
        None
    }

    /// Whether position `p` still holds `value` (filled for it, not popped): a plain load
    /// (layout 27: a receive that served a hint in place checks, after its claim, that the
    /// hint it found is still the one queued there).
    #[inline]
    pub fn holds(&self, p: u64, value: u32) -> bool {
        if self.entries.is_empty() {
            return false;
        }
        let (e, lap) = self.at(p);
        // Acquire: as in `first`.
        e.load(Ordering::Acquire) == pack(lap.wrapping_mul(2).wrapping_add(1), value)
    }

    /// Pops position `p` if it still holds `value` (layout 27: a ready-check taking a hint
    /// placeholder out of the ring, found by [`Ring::first`]). Returns whether it did: `false`
    /// where another pop took it first. The pop's own CAS and bookkeeping.
    pub fn pop_at(&self, p: u64, value: u32) -> bool {
        if self.entries.is_empty() {
            return false;
        }
        let (e, lap) = self.at(p);
        // AcqRel: as in `pop`.
        if e.compare_exchange(
            pack(lap.wrapping_mul(2).wrapping_add(1), value),
            pack(lap.wrapping_mul(2).wrapping_add(2), 0),
            Ordering::AcqRel,
            Ordering::Relaxed,
        )
        .is_err()
        {
            return false;
        }
        crash_point!(true);
        let next = p.wrapping_add(1);
        self.note(next);
        if next & (self.stride() - 1) == 0 {
            self.advance_head(next);
        }
        true
    }

    /// Whether a pop now would return `None` at its first look: the entry where it would
    /// start is empty for that position (a pop's own test, and its own reads: `head`, this
    /// process's cursor, the entry's line for writing). A push that filled its entry and
    /// stopped there, before moving its cursor or `tail`, makes it say "not empty", as the pop
    /// takes that entry; so does an entry popped already (a lagging start, which the pop walks
    /// past). An empty receive's look before anything else (`receive::idle`);
    /// [`Ring::looks_empty`] is the same look with a plain load.
    #[inline]
    pub fn is_empty(&self) -> bool {
        if self.entries.is_empty() {
            return true;
        }
        // Acquire: as in `pop`.
        let start = self.pop_start(Ordering::Acquire);
        let (e, lap) = self.at(start);
        // Read for writing, as `pop` reads it: an empty receive moves the lines it moved
        // before this look, and a pop that follows finds the entry's line here. Acquire:
        // as in `pop`.
        let w = crate::sync::load_for_write_u64(e, Ordering::Acquire);
        seq(w) == lap.wrapping_mul(2) & SEQ_MASK
    }

    /// [`Ring::is_empty`] with a plain load of the entry (a spinning receiver's look before
    /// it pops, and the sweep's): spinners share the entry's line until a push takes it,
    /// where reading it for writing would take it from each other.
    pub fn looks_empty(&self) -> bool {
        if self.entries.is_empty() {
            return true;
        }
        // Acquire: as in `pop`.
        let start = self.pop_start(Ordering::Acquire);
        let (e, lap) = self.at(start);
        // Acquire: as in `pop`.
        seq(e.load(Ordering::Acquire)) == lap.wrapping_mul(2) & SEQ_MASK
    }
}

#[cfg(all(test, not(shmfifo_loom)))]
mod tests {
    use super::{LocalU64, Ring};
    use crate::sync::{AtomicU64, Ordering};

    /// With `head` and `tail` moving once a stride (layout 21, stop 53), with and without a
    /// process's cursors, a ring holds exactly its length, hands values back in push order
    /// over many laps whatever the fill, says when it is empty, and `head` and `tail` each lag
    /// less than a stride.
    #[test]
    fn a_ring_with_a_lagging_head_holds_its_length_in_order() {
        for n in [1usize, 2, 4, 8, 16, 64] {
            for with_cursor in [false, true] {
                let entries: Vec<AtomicU64> = (0..n).map(|_| AtomicU64::new(0)).collect();
                let (head, tail) = (AtomicU64::new(0), AtomicU64::new(0));
                let (cursor, push_cursor) = (LocalU64::new(0), LocalU64::new(0));
                let r = Ring {
                    entries: &entries,
                    head: &head,
                    tail: &tail,
                    cursor: with_cursor.then_some(&cursor),
                    push_cursor: with_cursor.then_some(&push_cursor),
                };
                let stride = r.stride();
                let (mut next_in, mut next_out) = (0u32, 0u32);
                for round in 0..40usize {
                    let fill = round % (n + 1);
                    for _ in 0..fill {
                        assert!(r.push(next_in), "n={n} round={round}");
                        next_in += 1;
                    }
                    let t = tail.load(Ordering::SeqCst);
                    assert!(t <= u64::from(next_in) && u64::from(next_in) - t < stride);
                    if with_cursor || fill > 0 {
                        assert_eq!(r.looks_empty(), fill == 0, "n={n} round={round}");
                    }
                    if fill == n {
                        assert!(!r.push(999), "n={n}: full at {n}");
                    }
                    for _ in 0..fill {
                        assert_eq!(r.pop(), Some(next_out), "n={n} round={round}");
                        next_out += 1;
                    }
                    assert_eq!(r.pop(), None);
                    if with_cursor {
                        assert!(r.looks_empty(), "n={n} round={round}");
                    }
                    assert!(u64::from(next_out) - head.load(Ordering::SeqCst) < stride);
                }
            }
        }
    }

    /// `tail` left behind (pushers that stopped or died right after their entry CAS at the
    /// end of a stride, before moving it; here set back by hand), with and without a push
    /// cursor: a push walks past every filled entry there and fills the first empty one, in
    /// order, and moves `tail` on; a lone pusher with its cursor takes one CAS a push.
    #[test]
    fn a_tail_left_behind_is_walked_past() {
        for with_cursor in [false, true] {
            let entries: Vec<AtomicU64> = (0..8).map(|_| AtomicU64::new(0)).collect();
            let (head, tail) = (AtomicU64::new(0), AtomicU64::new(0));
            let (cursor, push_cursor) = (LocalU64::new(0), LocalU64::new(0));
            let r = Ring {
                entries: &entries,
                head: &head,
                tail: &tail,
                cursor: with_cursor.then_some(&cursor),
                push_cursor: with_cursor.then_some(&push_cursor),
            };
            for v in 0..5 {
                assert!(r.push(v));
            }
            tail.store(0, Ordering::SeqCst);
            assert!(r.push(5), "cursor={with_cursor}");
            assert!(
                tail.load(Ordering::SeqCst) >= 4,
                "moved on by the walk or the stride's end"
            );
            for v in 0..6 {
                assert_eq!(r.pop(), Some(v), "cursor={with_cursor}");
            }
            assert_eq!(r.pop(), None);
            assert!(r.push(6) && r.pop() == Some(6));
        }
    }

    /// `head` or `tail` left laps behind (poppers or pushers that stopped or died right after
    /// their entry CAS at the ends of strides, before moving it; here set back by hand), no
    /// cursors: a pop or a push walks past every entry there, whatever its stamp's lap, and
    /// moves the index on; a push fills the first empty entry.
    #[test]
    fn an_index_laps_behind_is_walked_past() {
        for tail_behind in [false, true] {
            for laps in 1..4u32 {
                let entries: Vec<AtomicU64> = (0..8).map(|_| AtomicU64::new(0)).collect();
                let (head, tail) = (AtomicU64::new(0), AtomicU64::new(0));
                let r = Ring {
                    entries: &entries,
                    head: &head,
                    tail: &tail,
                    cursor: None,
                    push_cursor: None,
                };
                for v in 0..(8 * laps + 1) {
                    assert!(r.push(v));
                    assert_eq!(r.pop(), Some(v));
                }
                let behind = if tail_behind { &tail } else { &head };
                behind.store(0, Ordering::SeqCst);
                if !tail_behind {
                    assert!(!r.looks_empty(), "a lagging head says: look");
                }
                assert!(r.push(100), "laps={laps}");
                assert_eq!(r.pop(), Some(100), "laps={laps}");
                assert_eq!(r.pop(), None);
                // The walk moved the index on (to within a stride).
                assert!(behind.load(Ordering::SeqCst) >= u64::from(8 * laps));
                assert!(r.looks_empty());
                assert!(r.push(101) && r.pop() == Some(101));
            }
        }
    }
}
