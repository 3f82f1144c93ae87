//! The owner-tagged claims of the group table: a group's claim (the right to take its
//! messages and move its `head`; its word also carries the DIRTY request and, layout 24, the
//! `HINT` bit) and a home slot's insert claim, with how long a claimer waits for a live holder.
//! Re-exported by [`super::group`], whose table they guard.

use super::group::is_active;
use super::Owner;
use super::{owner, Arena, Env, Fault, PResult};
use crate::layout::GroupEntry;
use crate::sync::{AtomicU64, Ordering};

/// Result of trying to take a group claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub enum TryClaim {
    /// The claim is ours, for the incarnation we asked for, which is still active. `cw` is the
    /// claim word to release with.
    Acquired {
        /// Whether it was taken over (from a dead owner, or left from an older incarnation).
        stolen: bool,
        /// Our claim word (incarnation and owner code).
        cw: u64,
    },
    /// A live participant holds it for this incarnation.
    Busy(u64),
    /// The incarnation is no longer active (retired, or the entry was reused).
    Gone,
}

/// Tries once to take group `e`'s claim for incarnation `ginc`.
///
/// The claim word carries the incarnation, so a claim left over from an older incarnation of
/// the entry never counts as holding the current one: it is taken over without proof of death
/// (nobody can act on an incarnation other than the one in its word, see below). A claim of the
/// current incarnation is taken over only from a proven-dead owner. After acquiring, the state
/// is re-checked: only while the entry is ACTIVE with `ginc` may the holder act, and then
/// nobody else can retire it. A queued hint's bit (`HINT`, layout 24) is kept: only the
/// receiver that popped the hint clears it ([`try_claim_taking_hint`]).
#[inline]
pub fn try_claim(a: &Arena<'_>, env: &dyn Env, e: &GroupEntry, me: Owner, ginc: u32) -> TryClaim {
    try_claim_as(a, env, e, me, ginc, false)
}

/// [`try_claim`] by a receiver that popped a ready hint of the group: the CAS that takes the
/// claim also clears the word's `HINT` bit (layout 24: before, a swap of a flag word of its
/// own, one locked instruction more a receive). SYNC POINT(ready-check): a producer's RMW that
/// set the bit before our CAS is read by it (Acquire: we see what it published before), and
/// one after it finds the bit clear and pushes a hint of its own.
#[inline]
pub fn try_claim_taking_hint(
    a: &Arena<'_>,
    env: &dyn Env,
    e: &GroupEntry,
    me: Owner,
    ginc: u32,
) -> TryClaim {
    try_claim_as(a, env, e, me, ginc, true)
}

/// [`try_claim`] by a receive serving the ready ring's only hint in place (layout 27): one
/// CAS from the free word with a fresh hint queued (`HINT` alone) to our claim with `HINT |
/// STALE`, so that the hint stays queued as a placeholder: the place it stood for is ours
/// (consumed, as a pop consumes it), and the group's next ready-check makes it fresh or
/// replaces it (`ready::hint`). Anything else found (held, a placeholder already, no hint
/// bit) is `Busy` with the word found, and the caller pops instead. SYNC POINT(ready-check)
/// as [`try_claim_taking_hint`]'s: a producer's RMW before our CAS is read by it; one after
/// it finds `STALE` and makes the hint fresh.
#[inline]
pub fn try_claim_in_place(e: &GroupEntry, me: Owner, ginc: u32) -> TryClaim {
    let cw = owner::claim(ginc, me);
    // SYNC POINT(claim) and SYNC POINT(ready-check): as in `try_claim_as`.
    match e.claim.compare_exchange(
        owner::HINT,
        cw | owner::HINT_BITS,
        Ordering::AcqRel,
        Ordering::Acquire,
    ) {
        Ok(_) => claimed(e, ginc, cw, false),
        Err(cur) => TryClaim::Busy(cur),
    }
}

/// [`try_claim`], clearing the `HINT` bit if `take_hint`: the free word it most likely finds
/// tried inline (a receiver popped a hint, so its bit is most likely set; anyone else most
/// likely finds it clear), anything else out of line.
#[inline(always)]
fn try_claim_as(
    a: &Arena<'_>,
    env: &dyn Env,
    e: &GroupEntry,
    me: Owner,
    ginc: u32,
    take_hint: bool,
) -> TryClaim {
    let cw = owner::claim(ginc, me);
    // The free word most likely found: with `HINT` where a receiver popped a hint; anyone
    // else's, with the hint bits the word has now (layout 27: a group served in place keeps
    // its queued placeholder's `HINT | STALE`, which a delete's claim then finds; a first try
    // without them failed and went out of line). Relaxed: a guess, the CAS decides (the
    // callers have just loaded `state`, on the same line).
    let likely = if take_hint {
        owner::HINT
    } else {
        e.claim.load(Ordering::Relaxed) & owner::HINT_BITS
    };
    let keep = if take_hint { 0 } else { likely };
    // SYNC POINT(claim): AcqRel/Acquire pairs with the releasing CAS of the previous holder;
    // Release also publishes our registration (owner code) to whoever reads this word.
    // Acquire also pairs with a producer's RMW that set `HINT` (which we clear, or which we
    // keep: the bits of `likely`, unless we take them).
    match e
        .claim
        .compare_exchange(likely, cw | keep, Ordering::AcqRel, Ordering::Acquire)
    {
        Ok(_) => claimed(e, ginc, cw, false),
        Err(cur) => try_claim_from(a, env, e, me, ginc, take_hint, cur),
    }
}

/// [`try_claim_as`] past its first CAS, which found `cur`: a free word with the other `HINT`
/// bit, a holder (live: busy; dead, or of an older incarnation: taken over), or a word that
/// changed again under us.
#[cold]
#[inline(never)]
fn try_claim_from(
    a: &Arena<'_>,
    env: &dyn Env,
    e: &GroupEntry,
    me: Owner,
    ginc: u32,
    take_hint: bool,
    mut cur: u64,
) -> TryClaim {
    let cw = owner::claim(ginc, me);
    // What our claim word keeps of the word it replaces: its `HINT` bit, unless we take it;
    // and a dead (or stale) holder's unserved DIRTY request, which is then ours: our release
    // cleans up again and counts the uncounted deletes it stood for (a delete that found the
    // claim held left its message uncounted; dropped with the holder's word, the count stayed
    // high until a cleanup reached the message).
    let keep = |w: u64| {
        let hint = if take_hint { 0 } else { w & owner::HINT_BITS };
        let dirty = if owner::clean(w) != 0 {
            w & owner::DIRTY
        } else {
            0
        };
        hint | dirty
    };
    // Bounded: a free word's `HINT` bit may change between two tries (producers set it,
    // receivers clear it); a held word is tried once.
    for _ in 0..4 {
        let stolen = owner::clean(cur) != 0;
        if stolen {
            let holder = Owner::of_word(cur);
            let stale = owner::claim_ginc(cur) != owner::claim_ginc(cw) && is_active(e, ginc);
            if !stale && (holder == me || !a.owner_dead(env, holder)) {
                // Live (another thread of this process shares our code: also busy).
                return TryClaim::Busy(cur);
            }
        }
        // SYNC POINT(claim), and a producer's `HINT`: as in `try_claim_as`.
        match e
            .claim
            .compare_exchange(cur, cw | keep(cur), Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => return claimed(e, ginc, cw, stolen),
            // A taking-over that lost to another taker: whoever won holds it now. (One that
            // lost only to a change of the `HINT` or DIRTY bit looks again.)
            Err(now) if stolen && owner::clean(now) != owner::clean(cur) => {
                return TryClaim::Busy(now)
            }
            Err(now) => cur = now,
        }
    }
    TryClaim::Busy(cur)
}

/// After a CAS took group `e`'s claim `cw`: ours if the incarnation `ginc` is still active,
/// else given up again.
#[inline(always)]
fn claimed(e: &GroupEntry, ginc: u32, cw: u64, stolen: bool) -> TryClaim {
    if is_active(e, ginc) {
        TryClaim::Acquired { stolen, cw }
    } else {
        give_up_claim(&e.claim, cw);
        TryClaim::Gone
    }
}

/// Gives up group claim word `word` if it still names `cw` (any DIRTY request is moot: the
/// group is gone, or will be looked at again by whoever asked), keeping its `HINT` bit.
/// Bounded (64 rounds; a word that changed under each leaves the claim to a taker's look at
/// its holder): producers' and sweeps' `HINT` RMWs, `clear_hint` and DIRTY requests race it.
pub fn give_up_claim(word: &AtomicU64, cw: u64) {
    for _ in 0..64 {
        // Relaxed: the CAS below carries the ordering.
        let cur = word.load(Ordering::Relaxed);
        if owner::clean(cur) != cw {
            return;
        }
        // SYNC POINT(claim): Release hands our writes to the next holder.
        if word
            .compare_exchange(
                cur,
                cur & owner::HINT_BITS,
                Ordering::Release,
                Ordering::Relaxed,
            )
            .is_ok()
        {
            return;
        }
    }
}

/// Takes group `e`'s claim for `ginc`, waiting for a live holder to give it up (it holds it for
/// a few hundred nanoseconds). Returns the claim word, or `None` if the incarnation is gone;
/// [`Fault::Busy`] after [`CLAIM_WAIT_MS`] under a live holder (one stopped by SIGSTOP or a
/// debugger is alive: the caller reports a retryable error or goes on without the group).
pub fn claim_wait(
    a: &Arena<'_>,
    env: &dyn Env,
    e: &GroupEntry,
    me: Owner,
    ginc: u32,
) -> PResult<Option<u64>> {
    let mut p = Patience::new();
    loop {
        match try_claim(a, env, e, me, ginc) {
            TryClaim::Acquired { cw, .. } => return Ok(Some(cw)),
            TryClaim::Gone => return Ok(None),
            TryClaim::Busy(_) => {}
        }
        p.wait(
            env,
            "a group claim is held by a live participant (stopped?)",
        )?;
    }
}

/// How long an operation waits for a claim held by a live participant before it gives up with
/// the retryable [`Fault::Busy`] (ms). Claims are held for well under a microsecond; a holder
/// preempted by the scheduler for a few milliseconds; one stopped (SIGSTOP, a debugger, a
/// paused container) for as long as it stays stopped, and it is alive, so its claims cannot be
/// taken over.
pub const CLAIM_WAIT_MS: u64 = 1_000;

/// A wait for a live participant, bounded by time (never by a count that a hostile word could
/// stretch): spin, then yield, and read the clock every 64 rounds.
#[derive(Debug)]
pub struct Patience {
    rounds: u32,
    since: Option<u64>,
    budget_ms: u64,
    spent: bool,
}

impl Patience {
    /// A wait of at most [`CLAIM_WAIT_MS`].
    pub fn new() -> Self {
        Self::within(CLAIM_WAIT_MS)
    }

    /// A wait of at most `budget_ms`.
    pub fn within(budget_ms: u64) -> Self {
        Patience {
            rounds: 0,
            since: None,
            budget_ms,
            spent: false,
        }
    }

    /// Waits one round, or returns [`Fault::Busy`]`(what)` once the budget is spent.
    pub fn wait(&mut self, env: &dyn Env, what: &'static str) -> PResult<()> {
        self.rounds = self.rounds.saturating_add(1);
        // Under loom time stands still unless a model moves it: a few rounds stand for the
        // budget, so a model with a participant stopped forever ends.
        #[cfg(shmfifo_loom)]
        if self.rounds > 4 {
            return Err(Fault::Busy(what));
        }
        // Once spent, spent: a patience shared by many waits (a purge over every group) gives
        // each later wait up at once.
        if self.spent || self.rounds % 64 == 1 {
            let now = env.elapsed_ms();
            let t0 = *self.since.get_or_insert(now);
            if self.spent || now.saturating_sub(t0) >= self.budget_ms {
                self.spent = true;
                return Err(Fault::Busy(what));
            }
        }
        backoff(self.rounds);
        Ok(())
    }
}

impl Default for Patience {
    fn default() -> Self {
        Self::new()
    }
}

/// Waits a little for a claim holder: spin first, then yield the CPU.
pub fn backoff(spin: u32) {
    if spin < 64 {
        crate::sync::spin_hint();
    } else {
        crate::sync::yield_hint();
    }
}

/// Takes an insert (home) claim: owner code only, stolen from a proven-dead owner;
/// [`Fault::Busy`] after [`CLAIM_WAIT_MS`] under a live holder.
pub fn home_claim_wait(a: &Arena<'_>, env: &dyn Env, word: &AtomicU64, me: Owner) -> PResult<()> {
    home_claim_taken(a, env, word, me).map(|_| ())
}

/// [`home_claim_wait`], returning whether the claim was taken over from a dead owner (whose
/// release, and so whose view, we never read).
pub fn home_claim_taken(
    a: &Arena<'_>,
    env: &dyn Env,
    word: &AtomicU64,
    me: Owner,
) -> PResult<bool> {
    let mut p = Patience::new();
    loop {
        // SYNC POINT(claim): as in `try_claim`.
        match word.compare_exchange(0, me.bits(), Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return Ok(false),
            Err(cur) => {
                let holder = Owner::of_word(cur);
                if holder != me
                    && a.owner_dead(env, holder)
                    && word
                        .compare_exchange(cur, me.bits(), Ordering::AcqRel, Ordering::Acquire)
                        .is_ok()
                {
                    return Ok(true);
                }
            }
        }
        p.wait(
            env,
            "an insert claim is held by a live participant (stopped?)",
        )?;
    }
}

/// Releases a home claim (an insert's, a dedup reservation's) that we hold, by a
/// Release store: one locked instruction less an insert or a reservation than
/// [`release_plain`]'s CAS. A home claim is taken over only from a proven-dead owner
/// ([`home_claim_taken`]: a stopped one is alive) and carries no DIRTY request, so while we
/// hold it no other participant writes the word. (A group's claim may be taken over from a
/// live holder of an older incarnation: it is released by CAS.) Damaged shared memory that
/// wrote the word meanwhile is overwritten, which it could also have done after a CAS.
pub fn release_home_claim(word: &AtomicU64) {
    // (No check of the word: damaged shared memory must not make us panic.)
    // SYNC POINT(claim): Release hands our writes to the next holder's Acquire CAS.
    word.store(0, Ordering::Release);
}

/// Releases a claim word if it still holds exactly `cw` (no DIRTY request pending).
pub fn release_plain(word: &AtomicU64, cw: u64) {
    // SYNC POINT(claim): Release hands our writes to the next holder's Acquire.
    let _ = word.compare_exchange(cw, 0, Ordering::Release, Ordering::Relaxed);
}
