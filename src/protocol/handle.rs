//! Operations on receipt handles (delete, change visibility) and on the whole queue (purge).

use super::accounting::count;
use super::dedup;
use super::group::{self, Patience, TryClaim};
use super::list::{remove_unit, successor, Cycle, Next};
use super::pack;
use super::ready::{hint_if_ready, poke};
use super::release::{cleanup, or_release, release, Cleaned};
use super::times::{Times, MAX_VISIBILITY_MS};
use super::Owner;
use super::{gstate, node, stopped, vis, words, Arena, Env, Fault, PResult, MAX_STEPS};
use crate::layout::{counter, GroupEntry, MsgHeader, MsgWords};
use crate::sync::{fence, Ordering};

/// The most members a pack holds: a handle's member is below it.
pub use crate::layout::MAX_PACK;

/// A receipt handle decoded: which slot incarnation, which receive.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Handle {
    /// Global slot index.
    pub idx: u32,
    /// Slot incarnation.
    pub inc: u32,
    /// Epoch of the receive.
    pub epoch: u32,
    /// The member of the slot's pack (layout 22); 0 for a message in a slot of its own.
    pub member: u8,
}

/// Whether slot `h.idx` still holds the message `h` names as its receive left it: the same
/// incarnation and epoch, published (not deleted, freed or claimed). A borrowing reader calls
/// it after reading the payload in place: SYNC POINT(peek-seqlock), its reads of
/// the payload come before the Acquire fence here, and `pool::alloc` issues a Release fence
/// between a new claim (epoch and incarnation) and the new payload's writes, so a reader that
/// read any byte of a later message sees the slot changed. Every protocol step that frees or
/// re-receives a message moves its epoch (free, receive, purge, retention) or incarnation
/// (reuse); a pack member's bytes stay until the whole pack is freed, which moves the slot's
/// incarnation when it is reused. A hostile writer that restores these words is not detected
/// (documented).
pub fn still_taken(a: &Arena<'_>, h: Handle) -> PResult<bool> {
    let m = a.msg(h.idx)?;
    fence(Ordering::Acquire);
    // Relaxed: ordered after the caller's reads by the fence above.
    let u = m.own.vis.load(Ordering::Relaxed);
    let l = m.link.load(Ordering::Relaxed);
    if node::inc(l) != h.inc {
        return Ok(false);
    }
    // SAFETY: this call copies nothing into any payload; a slot reused meanwhile is told by
    // its incarnation, checked again below after the member's word is read.
    let w = match unsafe { member_word(a, m, h.idx, h.member, u) } {
        Ok(Some(w)) => w,
        Ok(None) | Err(_) => return Ok(false),
    };
    Ok(node::inc(m.link.load(Ordering::Relaxed)) == h.inc
        && vis::epoch(w) == h.epoch
        && matches!(vis::state(w), vis::State::Published(_)))
}

/// [`still_taken`] of every handle of `hs` (a borrowing receive's messages, read before this
/// call): the index of the first whose slot no longer holds its message as its receive left
/// it, or `None` if every one does. One Acquire fence for them all (SYNC POINT(peek-seqlock),
/// as `still_taken`'s); the handles of one slot at one incarnation that come together (a
/// pack's members, consecutive in a receive) share its header, its directory and the two
/// loads of its incarnation, before and after their state words: each word is then read
/// between two loads that found the handle's incarnation, as `still_taken` reads it (a pack's
/// ten members: one header, one directory and two incarnation loads where ten of each were).
pub fn first_not_taken(a: &Arena<'_>, hs: &[Handle]) -> PResult<Option<usize>> {
    fence(Ordering::Acquire);
    let mut i = 0;
    while let Some(h) = hs.get(i) {
        let run = hs[i..]
            .iter()
            .take_while(|o| o.idx == h.idx && o.inc == h.inc)
            .count();
        let m = a.msg(h.idx)?;
        // Relaxed: ordered after the caller's reads by the fence above.
        let u = m.own.vis.load(Ordering::Relaxed);
        if node::inc(m.link.load(Ordering::Relaxed)) != h.inc {
            return Ok(Some(i));
        }
        // SAFETY: this call copies nothing into any payload; a slot reused meanwhile is told by
        // its incarnation, checked again below after the members' words are read (after the
        // run's last, or at the first that fails, before anything is concluded from them).
        let Ok(words) = (unsafe { pack::words(a, h.idx, m, u) }) else {
            return Ok(Some(i));
        };
        for (k, o) in hs[i..i + run].iter().enumerate() {
            // Relaxed: see above.
            let w = words
                .get(usize::from(o.member))
                .map(|own| own.vis.load(Ordering::Relaxed));
            let held = w.is_some_and(|w| {
                vis::epoch(w) == o.epoch && matches!(vis::state(w), vis::State::Published(_))
            });
            if !held {
                // The slot reused after the first check (its directory, now another message's
                // bytes, read for the earlier members): the run's first is named, as
                // `still_taken` of it would fail; else this member is the first changed.
                if node::inc(m.link.load(Ordering::Relaxed)) != h.inc {
                    return Ok(Some(i));
                }
                return Ok(Some(i + k));
            }
        }
        if node::inc(m.link.load(Ordering::Relaxed)) != h.inc {
            return Ok(Some(i));
        }
        i += run;
    }
    Ok(None)
}

/// The words of message `member` in slot `idx` (header `m`), whose unit word was loaded as
/// `u`: a pack's member's entry if `u` says `PACKED` (layout 22), else the slot's own words
/// for member 0; `None` if the slot holds no such message.
///
/// # Safety
/// As [`pack::words`]'.
unsafe fn member_words<'a>(
    a: &Arena<'a>,
    m: &'a MsgHeader,
    idx: u32,
    member: u8,
    u: u64,
) -> PResult<Option<&'a MsgWords>> {
    if vis::state(u) != vis::State::Packed {
        return Ok((member == 0).then_some(&m.own));
    }
    // SAFETY: the caller's contract.
    let words = unsafe { pack::words(a, idx, m, u) }?;
    Ok(words.get(usize::from(member)))
}

/// [`member_words`]' state word, loaded Relaxed (the caller orders it).
///
/// # Safety
/// As [`pack::words`]'.
unsafe fn member_word(
    a: &Arena<'_>,
    m: &MsgHeader,
    idx: u32,
    member: u8,
    u: u64,
) -> PResult<Option<u64>> {
    // SAFETY: the caller's contract.
    let own = unsafe { member_words(a, m, idx, member, u) }?;
    // Relaxed: see above.
    Ok(own.map(|o| o.vis.load(Ordering::Relaxed)))
}

/// A pack's directory an earlier handle of the same call found, `(slot, incarnation,
/// entries)`: the handles of a batch's messages usually name the members of one pack, whose
/// directory is then found once a call.
pub(crate) type Seen<'a> = Option<(u32, u32, &'a [MsgWords])>;

/// The words of the message a handle names and their current `vis` word, if `h` is the live
/// in-flight handle of that message (and the message is within its retention period, T1).
///
/// A pack's member's words are found through its slot's directory without the group's claim:
/// the slot may be freed and reused between the incarnation check and a later CAS on them.
/// Such a CAS expects the whole word read here, under the right incarnation: a state word
/// published with this handle's epoch and a deadline. A reused slot's member words start at an
/// epoch past every epoch of the pack before (`release`'s cleanup frees a pack at an epoch
/// past its members'), so they never equal it; a message's bytes where a directory was would
/// have to equal those 8 bytes exactly.
#[inline(always)]
pub(crate) fn current<'a>(
    a: &Arena<'a>,
    env: &dyn Env,
    m: &'a MsgHeader,
    h: Handle,
    seen: &mut Seen<'a>,
) -> PResult<(&'a MsgWords, u64)> {
    current_at(a, &Times::load(a, env), m, h, seen)
}

/// [`current`] at the instant and settings `t` (a batch's deletes read them once).
#[inline(always)]
fn current_at<'a>(
    a: &Arena<'a>,
    t: &Times,
    m: &'a MsgHeader,
    h: Handle,
    seen: &mut Seen<'a>,
) -> PResult<(&'a MsgWords, u64)> {
    // Acquire: pairs with the allocation's link store published by the link CAS.
    if node::inc(m.link.load(Ordering::Acquire)) != h.inc {
        return Err(Fault::Expired);
    }
    // Acquire: the unit's state (a pack's directory was written before it was published); a
    // message's own: pairs with the receiver's store or CAS that issued the handle.
    let u = m.own.vis.load(Ordering::Acquire);
    let (own, w) = if vis::state(u) != vis::State::Packed {
        if h.member != 0 {
            return Err(Fault::Expired);
        }
        (&m.own, u)
    } else {
        pack_member(a, m, h, u, seen)?
    };
    if vis::epoch(w) != h.epoch {
        return Err(Fault::Expired);
    }
    match vis::state(w) {
        // Relaxed: `sent` was written before the node was published, which the receive that
        // issued the handle observed; it does not change while the handle is live.
        vis::State::Published(d) if d > t.now && !t.expired(m.sent.load(Ordering::Relaxed)) => {
            Ok((own, w))
        }
        _ => Err(Fault::Expired),
    }
}

/// [`current`]'s words of a pack's member (the slot's unit word `u` says `PACKED`) and its
/// `vis` word. Out of line: a message of its own needs none of it.
#[inline(never)]
fn pack_member<'a>(
    a: &Arena<'a>,
    m: &'a MsgHeader,
    h: Handle,
    u: u64,
    seen: &mut Seen<'a>,
) -> PResult<(&'a MsgWords, u64)> {
    let members = match *seen {
        // The same pack as the call's previous handle: the same incarnation (checked by the
        // caller) is the same pack, its directory where it was.
        Some((idx, inc, members)) if idx == h.idx && inc == h.inc => members,
        // SAFETY: no copy of ours into the slot's payload runs while we look: deletes and
        // visibility changes copy nothing into payloads. (Another thread's send into a slot
        // freed and reused meanwhile is the race `current` bounds.)
        _ => match unsafe { pack::words(a, h.idx, m, u) } {
            Ok(members) => {
                *seen = Some((h.idx, h.inc, members));
                members
            }
            // A pack's directory that does not check: damaged, or the slot moved on.
            Err(f) => {
                if node::inc(m.link.load(Ordering::Acquire)) != h.inc {
                    return Err(Fault::Expired);
                }
                return Err(f);
            }
        },
    };
    let Some(own) = members.get(usize::from(h.member)) else {
        return Err(Fault::Expired);
    };
    // Acquire: pairs with the receiver's store or CAS that issued the handle.
    Ok((own, own.vis.load(Ordering::Acquire)))
}

/// Deletes the message of a live handle (H1–H5), then cleans up its group.
pub fn delete(a: &Arena<'_>, env: &dyn Env, me: Owner, h: Handle) -> PResult<()> {
    let m = a.msg(h.idx)?;
    // Relaxed: a guess of the group to claim, checked under the claim (`mark_held`).
    let g = words::group_of(m.group_epoch0.load(Ordering::Relaxed));
    let t = Times::load(a, env);
    let d = Deleting::start(a, env, me, g);
    let r = d.mark(a, env, me, &t, m, h, &mut None);
    if matches!(r, Err(f) if stopped(f)) {
        return r.map(|_| ());
    }
    d.finish(a, env, me, u64::from(r == Ok(true)))?;
    r.map(|_| ())
}

/// Deletes the messages of several live handles (a `delete_batch`), each with its own result
/// in `results`, group by group: for each run of handles of one group, the group's claim is
/// taken once, their messages are marked deleted under it, and the group is cleaned up before
/// the claim is released (a batch's handles are mostly one group's, or a few groups' in runs).
///
/// **Under the claim a delete is a store (layout 25).** While we hold a group's claim nobody
/// else changes a message's epoch or removes it (a receive, a retake after expiry, a
/// dead-letter move, retention and purge hold the claim; a quarantine marks the group first,
/// which fails our claim as `Gone`), so a message we find
/// in flight under the handle's epoch stays so until our store. What can still change it
/// meanwhile is a handle holder's CAS without the claim (a visibility change, a delete with
/// the same handle from elsewhere) or a recovery's release, none of which moves the epoch:
/// our `DELETED` store then comes after it, and the handle was valid for both. The only thing
/// a store could lose is a count, so a delete without the claim (below) does not count itself.
///
/// **Where the claim is busy** (its live holder is another operation), each message is marked
/// by a CAS to [`vis::DELETED_UNCOUNTED`], uncounted, and the holder is asked to clean up
/// (`poke`). Whoever later removes the message under the claim stores `DELETED` over it and
/// counts it then (`release::cleanup`); a claim holder's delete that overwrote it counted it
/// itself. Each delete is thus counted once, in `counter::DELETED`, and until it is the
/// in-flight count errs high, R8's safe side (a census counts such a message in flight too).
/// Such a message behind its group's live head (deleted out of order, or a pack member whose
/// siblings are live), where the cleanup cannot reach it, is counted by the holder serving
/// our DIRTY request, or by our poke if the claim came free
/// (`release::count_uncounted`); it stays uncounted only while a stopped participant holds
/// the claim.
///
/// The claim is taken before the handle is looked at: a delete that fails (an expired
/// handle) holds it a moment too, and a receive meanwhile passes the group over (the
/// release's look hints it again).
///
/// A deleter dying between its marks and its count leaves the count high (the census corrects
/// it); one dying holding the claim leaves deleted messages at the group's head, which the
/// next cleanup (a receive, a sweep) removes.
pub fn delete_many(
    a: &Arena<'_>,
    env: &dyn Env,
    me: Owner,
    handles: &[Handle],
    results: &mut [PResult<()>],
) -> PResult<()> {
    // One instant for the batch (one clock read an operation).
    let t = Times::load(a, env);
    let mut seen = None;
    // The slot header of the handle before: a pack's members are consecutive handles of one
    // slot.
    let mut last: Option<(u32, &MsgHeader)> = None;
    let mut group: Option<Deleting<'_>> = None;
    let mut counted = 0;
    for (h, k) in handles.iter().zip(0..) {
        let Some(r) = results.get_mut(k) else { break };
        let m = match last {
            Some((idx, m)) if idx == h.idx => m,
            _ => match a.msg(h.idx) {
                Ok(m) => {
                    last = Some((h.idx, m));
                    m
                }
                Err(f) => {
                    *r = Err(f);
                    continue;
                }
            },
        };
        // Relaxed: a guess of the group to claim, checked under the claim (`mark_held`).
        let g = words::group_of(m.group_epoch0.load(Ordering::Relaxed));
        if group.as_ref().is_none_or(|d| d.g != g) {
            if let Some(d) = group.take() {
                d.finish(a, env, me, counted)?;
                counted = 0;
            }
            group = Some(Deleting::start(a, env, me, g));
        }
        let Some(d) = &group else { continue };
        *r = match d.mark(a, env, me, &t, m, *h, &mut seen) {
            Ok(true) => {
                counted += 1;
                Ok(())
            }
            Ok(false) => Ok(()),
            Err(f) if stopped(f) => return Err(f),
            Err(f) => Err(f),
        };
        crash_point!();
    }
    if let Some(d) = group {
        d.finish(a, env, me, counted)?;
    }
    Ok(())
}

/// The group a `delete_many` is deleting in: its claim word if we took the claim.
struct Deleting<'a> {
    g: u32,
    e: Option<&'a GroupEntry>,
    cw: Option<u64>,
}

impl<'a> Deleting<'a> {
    /// Takes group `g`'s claim if we can: not if a live participant holds it, the group is
    /// not active (retired: no message of it is live), or its entry is damaged.
    #[inline(always)]
    fn start(a: &Arena<'a>, env: &dyn Env, me: Owner, g: u32) -> Self {
        let e = a.group(g).ok();
        let cw = e.and_then(|e| {
            // Acquire: SYNC POINT(group-publish).
            let st = e.state.load(Ordering::Acquire);
            if gstate::kind(st) != gstate::ACTIVE {
                return None;
            }
            match group::try_claim(a, env, e, me, gstate::ginc(st)) {
                TryClaim::Acquired { cw, .. } => Some(cw),
                TryClaim::Busy(_) | TryClaim::Gone => None,
            }
        });
        Deleting { g, e, cw }
    }

    /// Marks the message of handle `h` (slot header `m`, guessed to be of our group) deleted,
    /// at the instant `t`: by a store under our claim (`Ok(true)`: the caller counts it), else
    /// uncounted by a CAS (`Ok(false)`).
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn mark(
        &self,
        a: &Arena<'a>,
        env: &dyn Env,
        me: Owner,
        t: &Times,
        m: &'a MsgHeader,
        h: Handle,
        seen: &mut Seen<'a>,
    ) -> PResult<bool> {
        // Under our claim, a store; the slot may hold another group's message now, under the
        // handle's incarnation (our guess read an older one): then, as without the claim, a
        // CAS.
        if self.cw.is_some() && matches!(mark_held(a, t, m, h, self.g, seen)?, Marked::Counted) {
            return Ok(true);
        }
        let other = mark_uncounted(a, t, m, h, seen)?;
        // A group other than ours is poked here; ours is, or is cleaned up, by `finish`.
        if other != self.g {
            if let Err(f) = poke(a, env, me, other) {
                if stopped(f) {
                    return Err(f);
                }
            }
        }
        Ok(false)
    }

    /// Counts the `counted` deletes we marked in the group under its claim, then cleans the
    /// group up and releases its claim if we hold it; else asks its holder to clean up
    /// (`poke`). A fault here concerns the group, not the deletes: only a loom model stopping
    /// us fails it.
    #[inline(always)]
    fn finish(self, a: &Arena<'_>, env: &dyn Env, me: Owner, counted: u64) -> PResult<()> {
        // Counted once for the group's deletes (the in-flight count subtracts them), before
        // the cleanup: until then the count is higher than the truth, the safe side of R8 (a
        // crash before this leaves it to the census), and a census between our marks and
        // this leaves it low until the next census (as before layout 25), a window kept
        // short.
        count(a, me, counter::DELETED, counted);
        let done = match (self.e, self.cw) {
            (Some(e), Some(cw)) => match or_release(e, cw, cleanup(a, env, cw, self.g, e)) {
                Ok(Cleaned::Kept) => or_release(e, cw, release(a, env, me, cw, self.g)),
                other => other.map(|_| ()),
            },
            _ => poke(a, env, me, self.g),
        };
        match done {
            Err(f) if stopped(f) => Err(f),
            _ => Ok(()),
        }
    }
}

/// What [`mark_held`] did.
enum Marked {
    /// Stored `DELETED`: the caller counts it.
    Counted,
    /// The message is another group's (the slot's group was read from an older incarnation):
    /// not marked.
    Elsewhere,
}

/// Under group `g`'s claim: marks the message of a live handle deleted (H1–H5), `m` its slot's
/// header, at the instant `t`, by a store (see [`delete_many`]).
#[inline(always)]
fn mark_held<'a>(
    a: &Arena<'a>,
    t: &Times,
    m: &'a MsgHeader,
    h: Handle,
    g: u32,
    seen: &mut Seen<'a>,
) -> PResult<Marked> {
    let (own, _) = current_at(a, t, m, h, seen)?;
    // Relaxed, then checked against the incarnation: read after `current_at` found the message
    // in flight, this is the group of that incarnation, or, where its own group's holder
    // removed it and the slot went to a message of ours meanwhile (a guess of `g` read from
    // an older incarnation: the message is another group's, whose holder we are not), of the
    // next. SYNC POINT(peek-seqlock): a send writes `group_epoch0` after the Release fence
    // that follows its new incarnation's link store, so after our Acquire fence the link
    // shows that incarnation where the group read is the new message's: expired, never a
    // store over the new message's word. With the incarnation unchanged it is the handle's
    // message, and in our group nobody but us removes it.
    let in_group = words::group_of(m.group_epoch0.load(Ordering::Relaxed)) == g;
    crate::sync::fence(Ordering::Acquire);
    // Relaxed: ordered by the fence above.
    if node::inc(m.link.load(Ordering::Relaxed)) != h.inc {
        return Err(Fault::Expired);
    }
    if !in_group {
        return Ok(Marked::Elsewhere);
    }
    crash_point!();
    // Release: the cleanup's and later claim holders' loads (through the claim's release)
    // see the deletion after our reads of the message; nobody but a claim holder writes a
    // `DELETED` word (handle holders' CASes expect a published one), so it stays until the
    // cleanup frees the slot.
    // A plain store: handle holders' CASes may race it (`store_racing_rmw_u64`).
    crate::sync::store_racing_rmw_u64(
        &own.vis,
        vis::pack(h.epoch, vis::DELETED),
        Ordering::Release,
    );
    Ok(Marked::Counted)
}

/// Without the group's claim: marks the message of a live handle deleted, uncounted (H1–H5),
/// `m` its slot's header, at the instant `t`; no cleanup. Returns its group (read before the
/// deletion: afterwards a cleaner may free and reuse the slot).
#[inline(never)]
fn mark_uncounted<'a>(
    a: &Arena<'a>,
    t: &Times,
    m: &'a MsgHeader,
    h: Handle,
    seen: &mut Seen<'a>,
) -> PResult<u32> {
    for _ in 0..MAX_STEPS {
        let (own, w) = current_at(a, t, m, h, seen)?;
        // Relaxed: stable while the message is in flight under our handle.
        let g = words::group_of(m.group_epoch0.load(Ordering::Relaxed));
        // AcqRel: Release hands the deletion to the cleaner's loads; Acquire keeps our reads
        // of `group_epoch0` before it.
        if own
            .vis
            .compare_exchange(
                w,
                vis::pack(h.epoch, vis::DELETED_UNCOUNTED),
                Ordering::AcqRel,
                Ordering::Relaxed,
            )
            .is_ok()
        {
            return Ok(g);
        }
    }
    Err(Fault::Corrupted("delete did not converge"))
}

/// Changes the visibility timeout of a live handle's message to `vt_ms` from now (H6, V1).
pub fn change_visibility(
    a: &Arena<'_>,
    env: &dyn Env,
    me: Owner,
    h: Handle,
    vt_ms: u64,
) -> PResult<()> {
    let m = a.msg(h.idx)?;
    for _ in 0..MAX_STEPS {
        let (own, w) = current(a, env, m, h, &mut None)?;
        let now = env.now_ms();
        // Relaxed: written by the receive that issued our handle, which we observed (Acquire).
        let recv = super::recv::ms(own.recv_ms.load(Ordering::Relaxed));
        // Never 0 (that means "never received").
        let deadline = now.checked_add(vt_ms).ok_or(Fault::VisibilityCap)?.max(1);
        if deadline > recv.saturating_add(MAX_VISIBILITY_MS) {
            return Err(Fault::VisibilityCap);
        }
        if deadline > vis::MAX_DEADLINE {
            return Err(Fault::ClockRange);
        }
        // SeqCst: a zero timeout publishes visibility; SYNC POINT(ready-check) with `status`.
        if own
            .vis
            .compare_exchange(
                w,
                vis::pack(h.epoch, vis::published(deadline)),
                Ordering::SeqCst,
                Ordering::Relaxed,
            )
            .is_ok()
        {
            // Relaxed: stable while the message is in flight under our handle.
            let g = words::group_of(m.group_epoch0.load(Ordering::Relaxed));
            if vt_ms == 0 {
                // The group may be unlocked now (R3): hint it if its first message is visible.
                hint_if_ready(a, env, me, g, a.group(g)?)?;
            } else {
                // SYNC POINT(expiry-wheel): filed after the SeqCst CAS above.
                super::timers::file(a, g, deadline)?;
                a.hdr.next_expiry.0.fetch_min(deadline, Ordering::AcqRel);
            }
            return Ok(());
        }
    }
    Err(Fault::Corrupted("change visibility did not converge"))
}

/// Deletes every published message (visible or in flight) and reopens emptied groups (P1).
/// Returns the number of messages deleted. A group whose claim a live participant keeps past
/// the wait bound (it is stopped) is passed over and tried again at the end; if it is still
/// held then, every other group is purged and the result is [`Fault::Busy`] (retry purges it).
pub fn purge(a: &Arena<'_>, env: &dyn Env, me: Owner) -> PResult<u64> {
    let mut n = 0;
    let mut held = None;
    // The first round waits for no claim; the second waits at most one bound in all (a
    // hostile or stopped arena could otherwise make it wait once per group).
    let mut p = Patience::new();
    for round in 0..2 {
        let mut busy = 0;
        for (g, e) in a.all_groups() {
            let wait = if round == 0 { None } else { Some(&mut p) };
            match purge_group(a, env, me, g, e, wait) {
                Ok(k) => n += k,
                Err(Fault::Busy(what)) if round == 0 || held.is_some() => {
                    busy += 1;
                    held = Some(what);
                }
                Err(f) => return Err(f),
            }
        }
        if busy == 0 {
            held = None;
            break;
        }
    }
    // D7: the dedup table is cleared too.
    dedup::clear(a);
    match held {
        Some(what) => Err(Fault::Busy(what)),
        None => Ok(n),
    }
}

/// Purges group `g` (entry `e`) under its claim. Returns how many messages it deleted.
/// Without `wait`, a claim held by a live participant is [`Fault::Busy`] at once; with it, the
/// claim is waited for within that (shared) patience.
fn purge_group(
    a: &Arena<'_>,
    env: &dyn Env,
    me: Owner,
    g: u32,
    e: &GroupEntry,
    mut wait: Option<&mut Patience>,
) -> PResult<u64> {
    // Acquire: SYNC POINT(group-publish).
    let st = e.state.load(Ordering::Acquire);
    if gstate::kind(st) != gstate::ACTIVE {
        return Ok(0);
    }
    let cw = loop {
        match group::try_claim(a, env, e, me, gstate::ginc(st)) {
            TryClaim::Acquired { cw, .. } => break cw,
            TryClaim::Gone => return Ok(0), // retired meanwhile
            TryClaim::Busy(_) => match wait.as_deref_mut() {
                Some(p) => p.wait(
                    env,
                    "a group claim is held by a live participant (stopped?)",
                )?,
                None => return Err(Fault::Busy("a group claim is held by a live participant")),
            },
        }
    };
    let walk = || -> PResult<u64> {
        let mut n = 0;
        let mut cur = e.head.load(Ordering::Acquire);
        let mut cycle = Cycle::from(cur);
        for _ in 0..a.steps() {
            let Next::Node(next, m, ninc) = successor(a, cur)? else {
                break;
            };
            // Acquire: the message's latest state.
            let w = m.own.vis.load(Ordering::Acquire);
            // Bumping the epoch expires every handle (H2); a failed CAS: look again.
            let (k, done) = remove_unit(a, me, m, next, w, |_| true)?;
            n += k;
            if !done {
                continue;
            }
            cur = node::pack(ninc, next);
            if cycle.met_again(cur) {
                break; // a damaged list: every message of it was met
            }
        }
        Ok(n)
    };
    let n = or_release(e, cw, walk())?;
    if or_release(e, cw, cleanup(a, env, cw, g, e))? == Cleaned::Kept {
        or_release(e, cw, release(a, env, me, cw, g))?;
    }
    Ok(n)
}
