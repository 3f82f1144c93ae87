//! A chain sent as one pack (layout 22, `protocol::pack`): [`send_packed`], the steps of
//! [`super::send_chain_as`] where `Packing::Where` lets a chain go as one slot.

use super::{
    link, pool, ready_check, reserve_for, send_chain_slots, Loaned, Outgoing, Prepared, Sent,
    MAX_CHAIN,
};
use crate::layout::counter;
use crate::protocol::accounting::count;
use crate::protocol::dedup;
use crate::protocol::group;
use crate::protocol::node;
use crate::protocol::pack::{self, Places, MAX_PACK};
use crate::protocol::words;
use crate::protocol::{vis, Arena, Env, Fault, Owner, PResult};
use crate::sync::Ordering;

// A chain's members fit a pack's directory (`send_lent_pack` indexes places by chain entry).
const _: () = assert!(MAX_CHAIN <= MAX_PACK);

/// Nothing of a chain was linked: every key `reserved` names is given back (invariant D: before
/// any slot its entry may point at is freed) and each reserved entry's result is `f`.
fn give_back(
    a: &Arena<'_>,
    reserved: &[Option<Option<(u32, u64)>>; MAX_CHAIN],
    f: Fault,
    results: &mut [PResult<Sent>],
) -> PResult<()> {
    for (k, r) in reserved.iter().enumerate() {
        if let Some(entry) = r {
            if let Some((index, word)) = entry {
                dedup::abort(a, *index, *word)?;
            }
            results[k] = Err(f);
        }
    }
    Ok(())
}

/// [`send_chain_as`] of a chain that may go as a pack: every key reserved, then the pack
/// ([`prepare_pack`], [`send_pack`]). Where the messages make no pack (fewer than two new
/// ones, no class holds them), their keys are given back (nothing was linked: invariant D)
/// and they go one slot each ([`send_chain_slots`], which reserves them again; a key a
/// concurrent send took meanwhile makes ours its duplicate, as if we had come second). A full
/// class, or any other fault before the link, fails every entry of the pack.
pub(super) fn send_packed(
    a: &Arena<'_>,
    env: &dyn Env,
    me: Owner,
    outs: &[&Outgoing<'_>],
    results: &mut [PResult<Sent>],
) -> PResult<()> {
    let mut reserved: [Option<Option<(u32, u64)>>; MAX_CHAIN] = [None; MAX_CHAIN];
    for (k, out) in outs.iter().enumerate() {
        reserved[k] = reserve_for(a, env, me, out, k, results)?;
    }
    if reserved.iter().flatten().count() >= 2 {
        match prepare_pack(a, env, me, outs, &reserved) {
            Ok(Some(p)) => return send_pack(a, env, me, outs, &reserved, p, results),
            Ok(None) => {}
            Err((f, slot)) => {
                if crate::protocol::stopped(f) {
                    return Err(f);
                }
                // Nothing was linked: every key may be sent again, then the slot is freed.
                give_back(a, &reserved, f, results)?;
                if let Some((idx, claimed)) = slot {
                    pool::free(a, env, idx, claimed)?;
                }
                return Ok(());
            }
        }
    }
    let mut rest = [outs[0]; MAX_CHAIN];
    let mut at = [0usize; MAX_CHAIN];
    let mut m = 0;
    for (k, r) in reserved.iter().enumerate() {
        if let Some(entry) = r {
            if let Some((index, word)) = entry {
                dedup::abort(a, *index, *word)?;
            }
            rest[m] = outs[k];
            at[m] = k;
            m += 1;
        }
    }
    let mut got = [Err(Fault::Corrupted("not sent")); MAX_CHAIN];
    send_chain_slots::<MAX_CHAIN>(a, env, me, &rest[..m], &mut got[..m])?;
    for (&k, r) in at[..m].iter().zip(got) {
        results[k] = r;
    }
    Ok(())
}

/// Claims one slot for the chain's reserved messages (`reserved[k]`: `Some` with its dedup
/// entry, if any, for each message to send) and writes them into it as a pack: the members and
/// their directory (each member's `recv_ms` its dedup back-pointer), the unit's `lens`, `sent`
/// and no back-pointer of its own, then each entry pointed at the slot (`dedup::set_msg`,
/// after the words a settler reads). `None` where they make no pack that some class holds:
/// the caller sends them one slot each; that class full is `ClassFull`, for the whole chain.
/// An error comes with the slot (and its claimed word) still to free, if there is one: after
/// the caller gives the keys back, as entries may point at it.
#[allow(clippy::type_complexity)]
fn prepare_pack<'a>(
    a: &Arena<'a>,
    env: &dyn Env,
    me: Owner,
    outs: &[&Outgoing<'_>],
    reserved: &[Option<Option<(u32, u64)>>; MAX_CHAIN],
) -> Result<Option<Prepared<'a>>, (Fault, Option<(u32, u64)>)> {
    let alone = |f: Fault| (f, None);
    let mut ms = [crate::protocol::pack::Member {
        body: 0,
        dedup: 0,
        attrs: 0,
        parts: &[],
        back: 0,
    }; MAX_CHAIN];
    let mut sizes = [(0, 0, 0); MAX_CHAIN];
    let mut k = 0;
    for (out, r) in outs.iter().zip(reserved) {
        let Some(entry) = r else { continue };
        let (body, attrs, dedup, _) = words::unpack_lens(out.lens);
        sizes[k] = (body, dedup, attrs);
        ms[k] = crate::protocol::pack::Member {
            body,
            dedup,
            attrs,
            parts: out.parts,
            back: entry.map_or(0, |(i, _)| u64::from(i) + 1),
        };
        k += 1;
    }
    // Laid out for any slot, then the smallest class that holds it: the places are the same
    // in it (they depend on the lengths only).
    let Some(places) = crate::protocol::pack::lay_out(&sizes[..k], usize::MAX) else {
        return Ok(None);
    };
    let used = places.used;
    let Some(class) =
        (0..a.nclasses).find(|&c| a.classes[c].is_some_and(|cl| cl.cap as usize >= used))
    else {
        return Ok(None);
    };
    // A full class fails the whole chain (`ClassFull` for every entry, the keys given back):
    // a pack is all or nothing, so that a retry (the API makes room and sends the chain again,
    // growing the class if it may) keeps the group's order, where one slot a message could
    // enqueue a later message without an earlier one.
    let s = pool::alloc_slot(a, env, class, outs[0].cursor, me).map_err(alone)?;
    crash_point!(Err((Fault::Crashed, None)));
    let claimed = vis::pack(s.epoch0, vis::claimed(me));
    // SAFETY: the slot is claimed by us (just now), so nobody else reads or writes its
    // payload until we publish it; `places` is `lay_out`'s for these members' lengths.
    let unit = match unsafe {
        crate::protocol::pack::write_members(a, s.idx, s.epoch0, &ms[..k], &places)
    } {
        Ok(Some(unit)) => unit,
        Ok(None) => {
            pool::free(a, env, s.idx, claimed).map_err(alone)?;
            return Ok(None);
        }
        // No entry points at the slot yet (`set_msg` comes after): freed first.
        Err(f) => {
            pool::free(a, env, s.idx, claimed).map_err(alone)?;
            return Err(alone(f));
        }
    };
    crash_point!(Err((Fault::Crashed, None)));
    finish_pack(a, env, me, s.idx, s.inc, s.epoch0, s.h, unit, reserved)
        .map(Some)
        .map_err(|f| (f, Some((s.idx, claimed))))
}

/// The last steps of preparing a pack written in claimed slot `idx` (incarnation `inc`,
/// epoch `epoch0`, header `h`): the unit's `lens` word `unit`, `sent` and no back-pointer of
/// its own, then each reserved entry pointed at the slot (`dedup::set_msg`, after the words a
/// settler reads).
#[allow(clippy::too_many_arguments)]
fn finish_pack<'a>(
    a: &Arena<'a>,
    env: &dyn Env,
    me: Owner,
    idx: u32,
    inc: u32,
    epoch0: u32,
    h: &'a crate::layout::MsgHeader,
    unit: u64,
    reserved: &[Option<Option<(u32, u64)>>; MAX_CHAIN],
) -> PResult<Prepared<'a>> {
    // Relaxed stores: published by the SeqCst link CAS in `append` (SYNC POINT(node-link)),
    // and to settlers by `set_msg`'s Release store below.
    h.own.lens.store(unit, Ordering::Relaxed);
    h.sent.store(env.now_ms(), Ordering::Relaxed);
    h.own.first_recv_ms.store(0, Ordering::Relaxed);
    // The members' back-pointers are their own (`recv_ms` in the directory).
    h.own.recv_ms.store(0, Ordering::Relaxed);
    for (index, _) in reserved.iter().flatten().flatten() {
        dedup::set_msg(a, *index, idx, inc)?;
        crash_point!();
    }
    Ok(Prepared {
        h,
        idx,
        inc,
        epoch0,
        claimed: vis::pack(epoch0, vis::claimed(me)),
        entry: None,
        source_len: 0,
        prior_receives: 0,
        loaned: false,
    })
}

/// Links pack `p` (prepared by [`prepare_pack`] for the messages `reserved` names) as one node,
/// commits each member's dedup entry (with its member and position), publishes the unit
/// (`vis` `PACKED`) and runs the ready check: [`send_chain`]'s steps for a chain of one node
/// that takes `k` positions. Always inlined into each of its two callers (out of line it cost
/// 6 instructions a batched message).
#[inline(always)]
fn send_pack(
    a: &Arena<'_>,
    env: &dyn Env,
    me: Owner,
    outs: &[&Outgoing<'_>],
    reserved: &[Option<Option<(u32, u64)>>; MAX_CHAIN],
    p: Prepared<'_>,
    results: &mut [PResult<Sent>],
) -> PResult<()> {
    let chain = [Some(p)];
    let (g, ginc, e, pred, seq_hi, pos0) = match link(a, env, me, outs[0], &chain) {
        Ok(l) => l,
        Err(f) => {
            if crate::protocol::stopped(f) {
                return Err(f); // stopped before the link CAS: nothing enqueued
            }
            // Before the link CAS: nothing was enqueued; the keys may be sent again
            // (invariant D: aborted before the slot is freed).
            give_back(a, reserved, f, results)?;
            pool::free(a, env, p.idx, p.claimed)?;
            return Ok(());
        }
    };
    // Committed at the link CAS: every member was sent.
    let mut j = 0u8;
    for (k, r) in reserved.iter().enumerate() {
        if r.is_some() {
            results[k] = Ok(Sent {
                idx: p.idx,
                inc: p.inc,
                member: j,
                seq_hi,
                pos: pos0.wrapping_add(u64::from(j)),
                duplicate: false,
                group: Some(group::Found::new(g, ginc)),
            });
            j += 1;
        }
    }
    #[cfg(shmfifo_loom)]
    if crate::protocol::crash::crashed() {
        return Ok(()); // stopped right after the link CAS: committed
    }
    count(a, me, counter::SENT, u64::from(j));
    // Invariant D: every entry is DONE before the slot leaves CLAIMED. A fault here must not
    // undo a committed send: the entry is left for a settler.
    // Members are numbered as the directory numbers them: every message sent, key or not.
    for (j, entry) in reserved.iter().flatten().enumerate() {
        let Some((index, word)) = entry else {
            continue;
        };
        let pos = pos0.wrapping_add(j as u64);
        let _ = dedup::commit(a, env, *index, *word, seq_hi, pos, j as u8);
        crash_point!(Ok(()));
    }
    // SYNC POINT(ready-check): the publish, then the RMW of `head` in `ready_check`. A store,
    // as `send_chain`'s: the word is `CLAIMED` by us, and only a participant that proved us
    // dead writes it. Release: a receiver's Acquire load that reads `PACKED` sees the members'
    // words and bytes written before the link CAS (the members' own words were stored
    // `Published(0)` then, read by nobody before this).
    p.h.own
        .vis
        .store(vis::pack(p.epoch0, vis::PACKED), Ordering::Release);
    crash_point!(Ok(()));
    ready_check(a, env, me, g, e, pred, &[]);
    Ok(())
}

/// Sends the batch a lender wrote in place (`Queue::loan_batch`): slot `l`, lent to us, holds
/// member `j`'s bytes (its body, dedup id and framed attributes, back to back) at
/// `places.members()[j]`: a pack's places ([`pack::lay_out`]), or, for one member, a message's
/// own (its bytes from the payload's start). `outs[j]` describes member `j` (its lengths as
/// its place's, its dedup key); `None` leaves it out (the caller answered it already: a text
/// it refused, a repeat of an earlier member's key). Each key is reserved in member order, as
/// [`send_packed`] reserves a chain's; the members then sent are what is left (a duplicate,
/// D1, or a refused key is answered and left out), moved down over those left out, in
/// member order, to the places [`pack::lay_out`] gives the rest (the slot is ours: nobody
/// else reads it before the link), and sent as one pack: [`send_pack`]'s steps, the slot's
/// claim standing for `alloc_slot`'s. One left goes as a message of its own in the slot (its
/// bytes moved to the payload's start, its key given back and reserved again by the send of
/// one, as `send_packed`'s fallback does), none frees the slot.
///
/// The slot is used up either way: linked, or freed (a duplicate, an error after the keys'
/// reservations, each member reserved answered with it). An error returned comes before
/// any reservation (the slot not ours as lent, a description that does not fit it: the slot
/// is left as it was, for the caller to give back), or is a stopped participant's.
pub fn send_lent_pack(
    a: &Arena<'_>,
    env: &dyn Env,
    me: Owner,
    l: Loaned,
    outs: &[Option<&Outgoing<'_>>],
    places: &Places,
    results: &mut [PResult<Sent>],
) -> PResult<()> {
    let claimed = vis::pack(l.epoch0, vis::claimed(me));
    let (cl, h, payload) = a.class_of(l.idx)?;
    // Relaxed: our own claim; only a hostile writer changes it meanwhile.
    if h.own.vis.load(Ordering::Relaxed) != claimed
        || node::inc(h.link.load(Ordering::Relaxed)) != l.inc
    {
        return Err(Fault::Corrupted("a lent slot changed hands"));
    }
    let k = places.k;
    let described = outs.len() == k
        && results.len() >= k
        && (1..=MAX_CHAIN).contains(&k)
        && places.used <= cl.cap as usize
        && outs.iter().zip(places.members()).all(|(o, p)| {
            o.is_none_or(|o| words::unpack_lens(o.lens) == (p.body, p.attrs, p.dedup, 0))
        });
    // The places as `lay_out` (or `lay_out_one`) makes them: in member order, apart, past the
    // directory, within `used`, so that every move below stays inside the slot's payload.
    let mut end = if k == 1 { 0 } else { pack::first_body(k) };
    if !described
        || !places.members().iter().all(|p| {
            let ok = p.at >= end && p.end() <= places.used;
            end = p.end();
            ok
        })
    {
        return Err(Fault::Corrupted("a lent batch's description"));
    }
    let mut reserved: [Option<Option<(u32, u64)>>; MAX_CHAIN] = [None; MAX_CHAIN];
    for (j, out) in outs.iter().enumerate() {
        if let Some(out) = out {
            reserved[j] = reserve_for(a, env, me, out, j, results)?;
        }
    }
    let mut which = [0usize; MAX_CHAIN];
    let mut sizes = [(0, 0, 0); MAX_CHAIN];
    let mut n = 0;
    for (j, p) in places.members().iter().enumerate() {
        if reserved[j].is_some() {
            which[n] = j;
            sizes[n] = (p.body, p.dedup, p.attrs);
            n += 1;
        }
    }
    // A fault after the reservations fails every member reserved: its key given back (nothing
    // was linked: invariant D), the slot freed; a stopped participant does nothing more.
    let fail = |f: Fault, results: &mut [PResult<Sent>]| -> PResult<()> {
        if crate::protocol::stopped(f) {
            return Err(f);
        }
        give_back(a, &reserved, f, results)?;
        pool::free(a, env, l.idx, claimed)?;
        Ok(())
    };
    let now = match n {
        0 => {
            pool::free(a, env, l.idx, claimed)?;
            return Ok(());
        }
        1 => None,
        // Nothing left out: every member stays where it was written.
        _ if n == k => Some(*places),
        _ => match pack::lay_out(&sizes[..n], cl.cap as usize) {
            Some(now) => Some(now),
            // Fewer members than the lender's, each as long: only a damaged description.
            None => {
                return fail(
                    Fault::Corrupted("a lent batch's rest makes no pack"),
                    results,
                )
            }
        },
    };
    // Moved down in member order: a member's new place starts at or before its old one (a
    // directory as long or shorter, fewer bytes before it), and past the new end of the one
    // moved before it, so no move writes over bytes a later one still reads.
    for (i, &j) in which[..n].iter().enumerate() {
        let from = places.members()[j];
        let to = now.as_ref().map_or(0, |now| now.members[i].at);
        if to != from.at {
            // SAFETY: both ranges lie in the slot's payload (`from` within `places.used <=
            // cap`, checked above; `to` below `from`, or within `now.used <= cap`); the slot
            // is claimed by us (checked above) and linked nowhere, so nobody else reads or
            // writes it; `copy` is a `memmove`, for ranges that overlap.
            unsafe { core::ptr::copy(payload.add(from.at), payload.add(to), from.end() - from.at) };
        }
    }
    crash_point!();
    let Some(now) = now else {
        // One left: a message of its own in the slot, its bytes at the payload's start now.
        let j = which[0];
        let (Some(out), p) = (outs[j], places.members()[j]) else {
            return fail(Fault::Corrupted("a lent batch's description"), results);
        };
        if let Some(Some((index, word))) = reserved[j] {
            dedup::abort(a, index, word)?;
        }
        let mut one = *out;
        one.loaned = Some(l);
        one.in_place = p.end() - p.at;
        one.parts = &[];
        let mut r = [Err(Fault::Corrupted("not sent"))];
        send_chain_slots::<1>(a, env, me, &[&one], &mut r)?;
        let [r] = r;
        if !matches!(r, Ok(s) if !s.duplicate) {
            // Not linked (a duplicate, an error): the slot goes back.
            pool::free(a, env, l.idx, claimed)?;
        }
        results[j] = r;
        return Ok(());
    };
    let mut backs = [0u64; MAX_CHAIN];
    for (b, &j) in backs.iter_mut().zip(&which[..n]) {
        *b = reserved[j].flatten().map_or(0, |(i, _)| u64::from(i) + 1);
    }
    // SAFETY: the slot is claimed by us (checked above): nobody else reads or writes its
    // payload until we publish it.
    let unit = match unsafe { pack::write_directory(a, l.idx, l.epoch0, &backs[..n], &now) } {
        Ok(Some(unit)) => unit,
        Ok(None) => {
            return fail(
                Fault::Corrupted("a lent batch's rest makes no pack"),
                results,
            )
        }
        Err(f) => return fail(f, results),
    };
    crash_point!();
    let p = match finish_pack(a, env, me, l.idx, l.inc, l.epoch0, h, unit, &reserved) {
        Ok(p) => p,
        Err(f) => return fail(f, results),
    };
    let Some(first) = outs[which[0]] else {
        return fail(Fault::Corrupted("a lent batch's description"), results);
    };
    send_pack(a, env, me, &[first], &reserved, p, results)
}
