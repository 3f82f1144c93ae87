//! In-flight accounting (R8), lifetime counters and message counts (C1).
//!
//! Each participant adds only to its own registry record, so no counter is a contended line;
//! readers sum over the registry.

use super::times::{Standing, Times};
use super::Owner;
use super::{owner, vis, Arena, Env};
use crate::sync::{AtomicU64, Ordering};

/// The lifetime counters' indices.
pub use crate::layout::counter;

/// Room left under the in-flight limit (R8): `usize::MAX` without a limit. The clock is read
/// (`env.now_ms`) only when a census may be due. When the count says there is none, corrects it by a census, at most once a second
/// among all participants (SYNC POINT(census): one CAS of `census.last_ms` elects the
/// censor). A censor that stops mid-census leaves the count as it was; the next census, a
/// second later, corrects it. Loom: `census_corrects_the_count_once_a_second`.
pub fn fresh_budget(a: &Arena<'_>, env: &dyn Env) -> usize {
    // Relaxed: fixed at creation, published by SYNC POINT(arena-ready).
    let limit = a.hdr.max_in_flight.load(Ordering::Relaxed);
    // Never reached with as many slots as there are now: cost nothing. Every possible slot
    // (the index ranges) first; then, in an arena that never grew (one Relaxed load of the
    // read-shared growth line), the base file's; else the slots of the published segments too.
    if limit >= u64::from(a.total) {
        return usize::MAX;
    }
    // Relaxed: a statistic that only grows; a growth it misses is seen at the next receive.
    let grows = a.hdr.grow.0.grows.load(Ordering::Relaxed);
    let slots = if grows == 0 {
        a.base_slots
    } else {
        a.slots_counted(grows)
    };
    if limit >= slots {
        return usize::MAX;
    }
    let room = limit.saturating_sub(in_flight(a));
    if room > 0 {
        return room as usize;
    }
    let now = env.now_ms();
    let c = &a.hdr.census.0;
    // Relaxed: the CAS below decides.
    let last = c.last_ms.load(Ordering::Relaxed);
    // SYNC POINT(census): AcqRel, one censor per second; the census's Relaxed reads and store
    // are approximate by nature (concurrent receives and deletes move the count meanwhile).
    if now >= last.saturating_add(1000)
        && c.last_ms
            .compare_exchange(last, now, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
    {
        crash_point!(0);
        in_flight_census(a);
        return limit.saturating_sub(in_flight(a)) as usize;
    }
    0
}

/// Adds `n` receives that returned no message (CloudWatch's `NumberOfEmptyReceives`).
pub fn count_empty_receives(a: &Arena<'_>, n: u64) {
    // Relaxed: a statistic.
    a.hdr.empty_receives.0.fetch_add(n, Ordering::Relaxed);
}

/// Receives that returned no message, since creation.
pub fn empty_receives(a: &Arena<'_>) -> u64 {
    // Relaxed: a statistic.
    a.hdr.empty_receives.0.load(Ordering::Relaxed)
}

/// Adds `delta` to participant `me`'s share of the in-flight count (R8).
pub fn account_in_flight(a: &Arena<'_>, me: Owner, delta: i64) {
    if let Some(p) = a.parts.get(owner::decode(me).0 as usize) {
        // Relaxed: a statistic summed by readers; corrected by a census after a crash.
        p.in_flight.fetch_add(delta as u64, Ordering::Relaxed);
    }
}

/// The participants' shares of the in-flight count: their first receives, which are their
/// receives (`counter::RECEIVED`) less those of messages received before
/// (`counter::VISIBILITY_EXPIRIES`), plus their other changes (`Participant::in_flight`: the
/// removals of received messages other than deletes, and never-received messages marked in
/// flight but not handed out), less their deletes (`counter::DELETED`). Layout 19 counts a
/// delete once, layout 20 a receive: each in its lifetime counter only, not in a second word.
fn shares(a: &Arena<'_>) -> u64 {
    use crate::layout::counter::{DELETED, RECEIVED, VISIBILITY_EXPIRIES};
    a.parts.iter().fold(0u64, |s, p| {
        rows(p, counter::STRIPED).fold(
            s.wrapping_add(p.in_flight.load(Ordering::Relaxed)),
            |s, r| {
                // Relaxed: statistics, approximate while operations run.
                let c = |k: usize| r[k].load(Ordering::Relaxed);
                s.wrapping_add(c(RECEIVED))
                    .wrapping_sub(c(VISIBILITY_EXPIRIES))
                    .wrapping_sub(c(DELETED))
            },
        )
    })
}

/// A record's rows of counters: its own first `n`, then each stripe's (layout 21; a stripe
/// holds the first [`counter::STRIPED`]).
fn rows(p: &crate::layout::Participant, n: usize) -> impl Iterator<Item = &[AtomicU64]> {
    core::iter::once(&p.counters[..n]).chain(p.stripes.iter().map(|r| &r[..]))
}

/// The in-flight count: the participants' shares plus the census correction (R8).
pub fn in_flight(a: &Arena<'_>) -> u64 {
    let sum = shares(a);
    let v = sum.wrapping_add(a.hdr.in_flight_fix.load(Ordering::Relaxed));
    if (v as i64) < 0 {
        0
    } else {
        v
    }
}

/// Recounts messages received and not yet removed, and corrects the in-flight count to it (a
/// participant that died between a receive or delete and its count left it off). O(slots).
pub fn in_flight_census(a: &Arena<'_>) {
    let mut real = 0u64;
    for c in 0..a.nclasses {
        for (i, h) in a.slots_of(c) {
            // Relaxed: a census; concurrent operations make it approximate.
            // A deletion not yet counted (`vis::DELETED_UNCOUNTED`) is in the shares still,
            // as in flight: counted so here too, so that its count later does not take the
            // count below the truth.
            each_message(
                a,
                i,
                h,
                h.own.vis.load(Ordering::Relaxed),
                |w| match vis::state(w) {
                    vis::State::Published(d) => real += u64::from(d > 0),
                    vis::State::Deleted => real += u64::from(vis::uncounted(w)),
                    _ => {}
                },
            );
        }
    }
    let sum = shares(a);
    a.hdr
        .in_flight_fix
        .store(real.wrapping_sub(sum), Ordering::Relaxed);
}

/// Calls `f` with the state word of each message in slot `idx` (header `h`) whose unit word is
/// `w`: `w` itself, or each member's of a pack (layout 22), loaded Relaxed (a census or a
/// snapshot; a pack whose directory does not check, damaged or reused meanwhile, counts
/// nothing).
fn each_message(
    a: &Arena<'_>,
    idx: u32,
    h: &crate::layout::MsgHeader,
    w: u64,
    mut f: impl FnMut(u64),
) {
    if vis::state(w) != vis::State::Packed {
        return f(w);
    }
    // SAFETY: a census copies nothing into payloads; what it reads of a slot that moves on
    // meanwhile only makes it approximate, as C1 allows.
    if let Ok(members) = unsafe { super::pack::words(a, idx, h, w) } {
        for m in members {
            // Relaxed: as the caller's.
            f(m.vis.load(Ordering::Relaxed));
        }
    }
}

/// Adds `n` to participant `me`'s lifetime counter `which` (an index of
/// [`crate::layout::counter`]): in this thread's stripe (layout 21), with a plain load and
/// store, where the counter has stripes and the thread holds one; with `fetch_add` on the
/// record's own counter otherwise.
#[inline]
pub fn count(a: &Arena<'_>, me: Owner, which: usize, n: u64) {
    if n == 0 {
        return;
    }
    let Some(p) = a.parts.get(owner::decode(me).0 as usize) else {
        return;
    };
    if which < counter::STRIPED {
        if let Some(row) = stripe::mine().and_then(|k| p.stripes.get(k)) {
            let c = &row[which];
            // Relaxed: a statistic. A plain load and store, not a read-modify-write: this
            // thread holds the stripe (`stripe::mine`), and the record is its process's own
            // (a registration is one process's; `Queue` says a forked child opens the queue
            // again), so no other thread or process writes the word. Program order keeps
            // a take's `VISIBILITY_EXPIRIES` before its `RECEIVED`, as `fetch_add`s did.
            c.store(c.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
            return;
        }
    }
    if let Some(c) = p.counters.get(which) {
        // Relaxed: a statistic; our own slot, so no other process contends for the line.
        c.fetch_add(n, Ordering::Relaxed);
    }
}

/// Per-thread stripes of the hot counters (layout 21): which stripe of `Participant::stripes`
/// this thread writes. A claim in a process-wide bitmap, taken at the thread's first count
/// and given back when the thread ends, makes each stripe one thread's at a time in every
/// record of this process (the records are this process's own), so its words need no locked
/// read-modify-write. Process memory only: nothing shared is involved, and no other process
/// ever writes the records' stripes.
mod stripe {
    use super::counter::STRIPES;
    use crate::sync::local::{AtomicU64, Ordering};
    use core::cell::Cell;

    /// Bit `k` set: stripe `k` is held by a live thread of this process.
    static HELD: AtomicU64 = AtomicU64::new(0);
    const _: () = assert!(STRIPES <= 64);

    /// No stripe claimed yet.
    const UNSET: u8 = u8::MAX;
    /// Every stripe was held when this thread asked: it counts with `fetch_add`.
    const NONE: u8 = u8::MAX - 1;

    /// Gives this thread's stripe back when the thread ends (registered at the claim, so
    /// that `MINE`, read on every count, is a plain thread-local without a destructor).
    struct Release;

    impl Drop for Release {
        fn drop(&mut self) {
            // `MINE` has no destructor, so it is still readable (and writable) while other
            // thread-locals' destructors run, before or after this one. It is set to `NONE`
            // before the stripe is given back: a destructor that counts after this one (a
            // thread-local that sends or deletes when dropped) then adds with `fetch_add`,
            // never to a stripe another thread may hold by then, and does not claim again.
            let k = MINE.with(|m| m.replace(NONE));
            if (k as usize) < STRIPES {
                // Release: this thread's last stores to the stripe's words happen before the
                // next holder's Acquire claim, so its first load reads them.
                HELD.fetch_and(!(1 << k), Ordering::Release);
            }
        }
    }

    std::thread_local! {
        static MINE: Cell<u8> = const { Cell::new(UNSET) };
        static RELEASE: Release = const { Release };
    }

    /// This thread's stripe, claimed at its first call; `None` where every stripe is held by
    /// another thread, or (under loom, whose model threads share one OS thread's
    /// thread-locals) always.
    #[inline(always)]
    pub(super) fn mine() -> Option<usize> {
        if cfg!(shmfifo_loom) {
            return None;
        }
        let mut k = MINE.with(Cell::get);
        if k == UNSET {
            k = claim();
        }
        ((k as usize) < STRIPES).then_some(usize::from(k))
    }

    /// Claims the lowest free stripe for this thread, or `NONE`, and notes it in `MINE`.
    #[cold]
    #[inline(never)]
    fn claim() -> u8 {
        // A thread already past its thread-locals' destructors counts without a stripe (and
        // is not given one: nothing would give it back).
        if RELEASE.try_with(|_| ()).is_err() {
            return NONE;
        }
        let k = claim_bit();
        MINE.with(|m| m.set(k));
        k
    }

    /// The lowest free stripe, now held, or `NONE`.
    fn claim_bit() -> u8 {
        // Relaxed: the CAS below decides.
        let mut cur = HELD.load(Ordering::Relaxed);
        loop {
            let k = (!cur).trailing_zeros() as usize;
            if k >= STRIPES {
                return NONE;
            }
            // Acquire: pairs with the Release `fetch_and` of the stripe's last holder.
            match HELD.compare_exchange_weak(
                cur,
                cur | (1 << k),
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => return k as u8,
                Err(now) => cur = now,
            }
        }
    }

    /// A thread never adds to a stripe it no longer holds: a thread-local dropped after the
    /// stripe went back (destructors run in an order of the platform's choosing) finds no
    /// stripe, so it counts with `fetch_add` and cannot undo the adds of the stripe's next
    /// holder.
    #[cfg(all(test, not(shmfifo_loom)))]
    mod tests {
        use super::{mine, HELD};
        use crate::sync::local::Ordering;
        use std::sync::mpsc;

        struct Probe(mpsc::Sender<(Option<usize>, bool)>, usize);

        impl Drop for Probe {
            fn drop(&mut self) {
                // Whether this thread's stripe is still marked held, and what `mine` says.
                let held = HELD.load(Ordering::Acquire) & (1 << self.1) != 0;
                let _ = self.0.send((mine(), held));
            }
        }

        std::thread_local! {
            static PROBE: std::cell::RefCell<Option<Probe>> = const { std::cell::RefCell::new(None) };
        }

        #[test]
        fn a_stripe_given_back_is_not_used_by_later_destructors() {
            let (tx, rx) = mpsc::channel();
            for order in 0..2 {
                let tx = tx.clone();
                std::thread::spawn(move || {
                    // Registered before or after the stripe's own destructor.
                    if order == 0 {
                        PROBE.with(|_| ()); // its destructor registered first
                    }
                    let Some(k) = mine() else { return }; // every stripe held: nothing to see
                    PROBE.with(|p| p.borrow_mut().replace(Probe(tx, k)));
                })
                .join()
                .unwrap();
                while let Ok((now, held)) = rx.try_recv() {
                    assert!(held || now.is_none(), "a stripe used after it went back");
                }
            }
        }
    }
}

/// The lifetime counters summed over every registry slot, indexed by
/// [`crate::layout::counter`].
pub fn counters(a: &Arena<'_>) -> [u64; crate::layout::counter::COUNT] {
    let mut sum = [0u64; crate::layout::counter::COUNT];
    for p in a.parts {
        for row in rows(p, counter::COUNT) {
            for (s, c) in sum.iter_mut().zip(row) {
                // Relaxed: statistics, approximate while operations run.
                *s = s.wrapping_add(c.load(Ordering::Relaxed));
            }
        }
    }
    sum
}

/// Approximate message counts (C1).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Visible (including those behind an in-flight message of their group).
    pub visible: u64,
    /// In flight.
    pub in_flight: u64,
    /// Delayed (L2): never received, within the queue delay.
    pub delayed: u64,
    /// Past retention (T1), not yet removed: counted nowhere else.
    pub expired: u64,
    /// Being written by a producer.
    pub sending: u64,
    /// Deleted but not yet reclaimed.
    pub deleted: u64,
    /// The earliest send time (arena ms) of a message still in the queue (visible, in flight
    /// or delayed); 0 when there is none.
    pub oldest_sent: u64,
    /// Slots holding published messages, expired ones included: one a message, or one a
    /// pack of them (layout 22), whatever its members' states.
    pub slots_published: u64,
    /// Slots holding a deleted message (or a pack of them) not yet reclaimed.
    pub slots_deleted: u64,
}

/// Counts messages by state, scanning every slot (O(capacity)).
pub fn counts(a: &Arena<'_>, env: &dyn Env) -> Counts {
    counts_per_class(a, env, &mut |_, _| {})
}

/// [`counts`], also handing each size class and its own counts to `per_class`.
pub fn counts_per_class(
    a: &Arena<'_>,
    env: &dyn Env,
    per_class: &mut dyn FnMut(&super::Class<'_>, &Counts),
) -> Counts {
    let t = Times::load(a, env);
    let mut total = Counts::default();
    for (k, cl) in a.classes.iter().take(a.nclasses).enumerate() {
        let Some(cl) = cl else { continue };
        let mut c = Counts::default();
        for (i, h) in a.slots_of(k) {
            // Relaxed: an approximate snapshot, as C1 allows.
            let w = h.own.vis.load(Ordering::Relaxed);
            // Relaxed: as above.
            let sent = h.sent.load(Ordering::Relaxed);
            match vis::state(w) {
                vis::State::Published(_) | vis::State::Packed => c.slots_published += 1,
                vis::State::Deleted => c.slots_deleted += 1,
                _ => {}
            }
            each_message(a, i, h, w, |w| match vis::state(w) {
                vis::State::Published(d) => match t.standing(sent, d) {
                    Standing::Expired => c.expired += 1,
                    s => {
                        match s {
                            Standing::InFlight => c.in_flight += 1,
                            Standing::Delayed => c.delayed += 1,
                            _ => c.visible += 1,
                        }
                        if sent > 0 && (c.oldest_sent == 0 || sent < c.oldest_sent) {
                            c.oldest_sent = sent;
                        }
                    }
                },
                vis::State::Claimed(_) => c.sending += 1,
                vis::State::Deleted => c.deleted += 1,
                // A member's word is never `FREE` or `PACKED`: a damaged pack, not counted.
                vis::State::Free | vis::State::Packed => {}
            });
        }
        per_class(cl, &c);
        total.visible += c.visible;
        total.in_flight += c.in_flight;
        total.delayed += c.delayed;
        total.expired += c.expired;
        total.sending += c.sending;
        total.deleted += c.deleted;
        total.slots_published += c.slots_published;
        total.slots_deleted += c.slots_deleted;
        if c.oldest_sent > 0 && (total.oldest_sent == 0 || c.oldest_sent < total.oldest_sent) {
            total.oldest_sent = c.oldest_sent;
        }
    }
    total
}
