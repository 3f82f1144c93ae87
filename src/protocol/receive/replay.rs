//! The replay of a recorded receive (R11, `protocol::attempt`): [`replay`].

use super::{bytes_of, Sink, Taken};
use crate::layout::{MsgHeader, MsgWords};
use crate::protocol::pack::{self, Unit};
use crate::protocol::release::{or_release, release};
use crate::protocol::times::Times;
use crate::protocol::words::unpack_group_epoch0;
use crate::protocol::{group, gstate, node, quarantine, timers, vis};
use crate::protocol::{Arena, Env, Fault, Owner, PResult};
use crate::sync::Ordering;

/// Replays a recorded receive (R11): if every message is still in flight exactly as that
/// receive left it (same incarnation, epoch and deadline: not deleted, not changed, not
/// expired), restarts each one's visibility for `vt_ms` and hands it to `sink` again, with the
/// same receipt (epoch) and receive count. Returns `false` (a fresh receive is due) as soon as
/// one is not; messages already handed over stay in flight under their restarted timeout.
pub fn replay(
    a: &Arena<'_>,
    env: &dyn Env,
    me: Owner,
    rec: &crate::protocol::attempt::Record,
    vt_ms: u64,
    sink: &mut Sink<'_>,
) -> PResult<bool> {
    let t = Times::load(a, env);
    let unchanged = |m: &MsgHeader, own: &MsgWords, inc: u32, w: u64| {
        // Acquire: pairs with the link store published by the link CAS.
        node::inc(m.link.load(Ordering::Acquire)) & crate::protocol::attempt::INC_MASK == inc
            // Acquire: the message's latest state.
            && own.vis.load(Ordering::Acquire) == w
            && matches!(vis::state(w), vis::State::Published(d) if d > t.now)
            // Relaxed: written before publication, stable while published.
            && !t.expired(m.sent.load(Ordering::Relaxed))
    };
    let n = rec.count.min(crate::protocol::attempt::MAX_MESSAGES);
    for k in 0..n {
        let (idx, inc, member) = crate::protocol::attempt::ref_parts(rec.refs[k]);
        let m = a.msg(idx)?;
        // SAFETY: no copy of ours into the slot's payload runs while we look: a replay
        // copies nothing into payloads, and the words are compared, not acted on, until the
        // claim below is held and they are compared again.
        let Some(own) = (unsafe { words_of(a, m, idx, member) })? else {
            return Ok(false);
        };
        if !unchanged(m, own, inc, rec.vis[k]) {
            return Ok(false);
        }
    }
    let deadline = t
        .now
        .checked_add(vt_ms)
        .filter(|&d| d <= vis::MAX_DEADLINE)
        .ok_or(Fault::ClockRange)?
        .max(1);
    for k in 0..n {
        let w = rec.vis[k];
        let (idx, rinc, member) = crate::protocol::attempt::ref_parts(rec.refs[k]);
        let m = a.msg(idx)?;
        // Relaxed: stable while the message is in flight under the recorded receipt.
        let ge = m.group_epoch0.load(Ordering::Relaxed);
        let (_, epoch0, g) = unpack_group_epoch0(ge);
        let e = a.group(g)?;
        // Acquire: SYNC POINT(group-publish).
        let st = e.state.load(Ordering::Acquire);
        if gstate::kind(st) != gstate::ACTIVE {
            return Ok(false);
        }
        // The payload is read under the group claim: nobody frees the message meanwhile.
        // A group held by a live participant (stopped?) past the wait bound: a fresh receive
        // instead (messages already handed over stay in flight under their restarted timeout).
        let cw = match group::claim_wait(a, env, e, me, gstate::ginc(st)) {
            Ok(Some(cw)) => cw,
            Ok(None) | Err(Fault::Busy(_)) => return Ok(false),
            Err(f) => return Err(f),
        };
        // Under the claim now: the unit is looked up again (a slot freed and reused since the
        // first pass is told by its words below).
        // SAFETY: we hold the claim of the group `ge` names; should the slot have moved to
        // another group meanwhile, its words fail `unchanged`, compared before any use, and
        // a replay copies nothing into payloads.
        let unit = match or_release(e, cw, unsafe { words_of_unit(a, m, idx, member) })? {
            Some(u) => u,
            None => {
                or_release(e, cw, release(a, env, me, cw, g))?;
                return Ok(false);
            }
        };
        let own = &unit.words()[usize::from(member)];
        let inc = node::inc(m.link.load(Ordering::Acquire));
        let epoch = vis::epoch(w);
        let new = vis::pack(epoch, vis::published(deadline));
        // We hold the message now (its first holder died or gave up): record us as holder, at
        // the original receive time (H6's cap). SYNC POINT(holder-record): Relaxed, before the
        // CAS that publishes it, so a releaser that reads the new `vis` (Acquire) reads us, not
        // the dead holder. If the CAS
        // fails, the message was deleted, released or changed meanwhile: naming us as holder
        // then costs at most an early release should we die.
        let rw = own.recv_ms.load(Ordering::Relaxed);
        if unchanged(m, own, rinc, w) {
            own.recv_ms.store(
                crate::protocol::recv::pack(me, crate::protocol::recv::ms(rw)),
                Ordering::Relaxed,
            );
        }
        // SeqCst: as a visibility change (Acquire orders the payload reads below after the
        // producer's writes; Release publishes the new deadline; SYNC POINT(expiry-wheel)
        // orders it before the arming below).
        let ok = unchanged(m, own, rinc, w)
            && own
                .vis
                .compare_exchange(w, new, Ordering::SeqCst, Ordering::Relaxed)
                .is_ok();
        if ok {
            let pack = match &unit {
                Unit::Pack(p) => Some(p),
                Unit::One(_) => None,
            };
            // SAFETY: we hold the group claim, so nobody frees or rewrites the message while
            // the sink reads it.
            let payload = or_release(e, cw, unsafe {
                bytes_of(a, pack, own, idx, usize::from(member), ge)
            })?;
            let read = sink(&Taken {
                idx,
                inc,
                member,
                own,
                epoch,
                receive_count: epoch.wrapping_sub(epoch0) & vis::EPOCH_MASK,
                header: m,
                group: e,
                payload,
                vis: new,
            });
            if !read {
                // Unreadable now (corrupted since it was first received): take it out, and
                // let a fresh receive answer this attempt.
                quarantine::message(a, env, me, own, idx, inc, new);
                or_release(e, cw, release(a, env, me, cw, g))?;
                return Ok(false);
            }
            if vt_ms > 0 {
                or_release(e, cw, timers::file(a, g, deadline))?;
                // AcqRel: as in `take`.
                a.hdr.next_expiry.0.fetch_min(deadline, Ordering::AcqRel);
            }
        }
        or_release(e, cw, release(a, env, me, cw, g))?;
        if !ok {
            return Ok(false);
        }
    }
    Ok(true)
}

/// The unit in slot `idx` (header `m`) if it holds message `member` (a pack's member, or
/// member 0, a message of its own); `None` if it does not (the slot moved on).
///
/// # Safety
/// As [`pack::open`]'s.
unsafe fn words_of_unit<'a>(
    a: &Arena<'a>,
    m: &'a MsgHeader,
    idx: u32,
    member: u8,
) -> PResult<Option<Unit<'a>>> {
    // Acquire: the unit's state, and (a pack's) the directory written before it.
    let w = m.own.vis.load(Ordering::Acquire);
    if vis::state(w) != vis::State::Packed {
        return Ok((member == 0).then_some(Unit::One(&m.own)));
    }
    // SAFETY: the caller's contract.
    let unit = unsafe { pack::unit(a, idx, m, w) }?;
    Ok((usize::from(member) < unit.words().len()).then_some(unit))
}

/// [`words_of_unit`]'s message words.
///
/// # Safety
/// As [`pack::open`]'s.
unsafe fn words_of<'a>(
    a: &Arena<'a>,
    m: &'a MsgHeader,
    idx: u32,
    member: u8,
) -> PResult<Option<&'a MsgWords>> {
    // SAFETY: the caller's contract.
    let unit = unsafe { words_of_unit(a, m, idx, member) }?;
    Ok(unit.map(|u| &u.words()[usize::from(member)]))
}
