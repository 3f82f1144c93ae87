//! The participant registry: registration (the two-pass slot take) and deregistration.
//!
//! A participant first takes a slot's liveness lock (an OS lock the kernel drops when the
//! process dies, given through `try_lock`), then stores `ALIVE` with a new generation. A clean
//! close stores `FREE` before it unlocks. So a slot that reads `ALIVE` while its lock is free
//! belongs to a process that died registered: recovery releases what it held, then frees the
//! slot. A registrant prefers `FREE` slots (first pass) and takes over such a dead slot only
//! when there is no other (second pass), reporting it so the caller can release its messages.
//!
//! Stopped participants: a registrant or closer that stops between steps keeps its lock, so
//! its slot is never taken; every other slot stays available to others.

use super::{pstate, Arena};
use crate::sync::Ordering;

/// A slot taken by [`register`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Registration {
    /// Registry slot.
    pub index: u32,
    /// The slot's new generation (never 0).
    pub gen: u32,
    /// `(slot, generation)` of a participant that died registered and whose slot this
    /// registration took over (second pass): the caller releases what it held.
    pub took_over: Option<(u32, u32)>,
}

/// Takes a registry slot for process `pid`. `try_lock(i)` takes slot `i`'s liveness lock
/// (`Ok(false)`: held by a live process) and `unlock(i)` gives it back. `Ok(None)`: every slot
/// is held by a live participant.
pub fn register<E>(
    a: &Arena<'_>,
    pid: u64,
    try_lock: &mut dyn FnMut(u32) -> Result<bool, E>,
    unlock: &mut dyn FnMut(u32),
) -> Result<Option<Registration>, E> {
    // First pass: slots closed cleanly or repaired (FREE). A slot still registered to a dead
    // process is left to recovery, which releases what that process held before it frees the
    // slot; only when every slot is such a one does the second pass take one over.
    for pass in 0..2 {
        for (i, p) in a.parts.iter().enumerate() {
            let i = i as u32;
            if !try_lock(i)? {
                continue;
            }
            crash_point!(Ok(None));
            // SYNC POINT(registry-free): Acquire/Release: our registration happens after the previous holder's last
            // writes, and before any claim tagged with the new generation is seen. A CAS, not a
            // store: a recoverer may free a dead registration meanwhile (we then take a FREE
            // slot, and report no take-over: the recoverer released what the dead one held).
            let mut st = p.state.load(Ordering::Acquire);
            let taken = loop {
                // Registered and unlocked: its holder died, unnoticed so far. Left to recovery
                // on the first pass, taken over on the second.
                let dead = pstate::status(st) == pstate::ALIVE;
                if dead && pass == 0 {
                    break None;
                }
                let gen = pstate::gen(st).wrapping_add(1).max(1);
                // Relaxed: informational (only `inspect` reads it); published by the Release
                // of the CAS below, so a reader that Acquires our generation reads our pid,
                // never the previous holder's (or 0) beside it. Should the CAS fail, we take
                // the slot on the next round or give it back (a pid no reader looks at: the
                // slot is not ALIVE, or is ours).
                p.pid.store(pid, Ordering::Relaxed);
                match p.state.compare_exchange(
                    st,
                    pstate::pack(gen, pstate::ALIVE),
                    Ordering::AcqRel,
                    Ordering::Acquire,
                ) {
                    Ok(_) => break Some((gen, dead.then(|| (i, pstate::gen(st))))),
                    Err(now) => st = now,
                }
            };
            let Some((gen, took_over)) = taken else {
                unlock(i);
                continue;
            };
            crash_point!(Ok(None));
            // AcqRel: exactly one of us and a recoverer subtracts a dead holder's waiters.
            let stale = p.waiting.swap(0, Ordering::AcqRel);
            crash_point!(Ok(None));
            super::doorbell::give_back(a, stale);
            return Ok(Some(Registration {
                index: i,
                gen,
                took_over,
            }));
        }
    }
    Ok(None)
}

/// Gives slot `index`, registered at generation `gen`, up on a clean close: takes back our
/// waiter count and marks the slot `FREE`. The caller unlocks the slot's liveness lock
/// afterwards (never before: a slot that reads `ALIVE` with its lock free means a dead
/// participant). A slot that is not `ALIVE` at `gen` is not ours any more (recovery took it
/// over, or another participant registered there since): left as it is, its waiters too.
pub fn deregister(a: &Arena<'_>, index: u32, gen: u32) {
    let Some(p) = a.parts.get(index as usize) else {
        return;
    };
    // Acquire/Release: our last arena writes happen before a successor's registration.
    let st = p.state.load(Ordering::Acquire);
    if st != pstate::pack(gen, pstate::ALIVE) {
        return;
    }
    let w = p.waiting.swap(0, Ordering::AcqRel);
    crash_point!(());
    super::doorbell::give_back(a, w);
    crash_point!(());
    // Release: pairs with the next registrant's Acquire load (and with recovery's).
    p.state.store(
        pstate::pack(pstate::gen(st), pstate::FREE),
        Ordering::Release,
    );
}

#[cfg(all(test, not(shmfifo_loom)))]
mod tests {
    use super::*;
    use crate::protocol::heap::{test_geometry as geom, HeapArena};

    /// A release gives up its own registration only: a handle whose slot holds another
    /// generation now (taken over, registered again) leaves it, and its waiter count, as they
    /// are (a handle dropped, after its registrant died, where that pid was reused).
    #[test]
    fn deregistration_gives_up_its_own_generation_only() {
        let h = HeapArena::new(&geom());
        let a = h.arena();
        a.parts[1].waiting.store(1, Ordering::Relaxed);
        deregister(&a, 1, 2);
        assert_eq!(
            a.parts[1].state.load(Ordering::Relaxed),
            pstate::pack(1, pstate::ALIVE)
        );
        assert_eq!(a.parts[1].waiting.load(Ordering::Relaxed), 1);
        deregister(&a, 1, 1);
        assert_eq!(
            a.parts[1].state.load(Ordering::Relaxed),
            pstate::pack(1, pstate::FREE)
        );
        assert_eq!(a.parts[1].waiting.load(Ordering::Relaxed), 0);
        // Given up already: a second release changes nothing.
        deregister(&a, 1, 1);
        assert_eq!(
            a.parts[1].state.load(Ordering::Relaxed),
            pstate::pack(1, pstate::FREE)
        );
    }
}
