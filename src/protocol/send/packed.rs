//! A chain sent as one pack (layout 22, `protocol::pack`): [`send_packed`], the steps of
//! [`super::send_chain_as`] where `Packing::Where` lets a chain go as one slot.

use super::{
    link, pool, ready_check, reserve_for, send_chain_slots, Outgoing, Prepared, Sent, MAX_CHAIN,
};
use crate::layout::counter;
use crate::protocol::accounting::count;
use crate::protocol::dedup;
use crate::protocol::words;
use crate::protocol::{vis, Arena, Env, Fault, Owner, PResult};
use crate::sync::Ordering;

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
            Err(f) => {
                if crate::protocol::stopped(f) {
                    return Err(f);
                }
                // Nothing was linked: every key may be sent again (invariant D).
                for (k, r) in reserved.iter().enumerate() {
                    if let Some(entry) = r {
                        if let Some((index, word)) = entry {
                            dedup::abort(a, *index, *word)?;
                        }
                        results[k] = Err(f);
                    }
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
fn prepare_pack<'a>(
    a: &Arena<'a>,
    env: &dyn Env,
    me: Owner,
    outs: &[&Outgoing<'_>],
    reserved: &[Option<Option<(u32, u64)>>; MAX_CHAIN],
) -> PResult<Option<Prepared<'a>>> {
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
    let s = pool::alloc_slot(a, env, class, outs[0].cursor, me)?;
    crash_point!();
    let claimed = vis::pack(s.epoch0, vis::claimed(me));
    // SAFETY: the slot is claimed by us (just now), so nobody else reads or writes its
    // payload until we publish it.
    let unit = match unsafe {
        crate::protocol::pack::write_members(a, s.idx, s.epoch0, &ms[..k], &places)
    } {
        Ok(Some(unit)) => unit,
        Ok(None) => {
            pool::free(a, env, s.idx, claimed)?;
            return Ok(None);
        }
        Err(f) => {
            pool::free(a, env, s.idx, claimed)?;
            return Err(f);
        }
    };
    crash_point!();
    // Relaxed stores: published by the SeqCst link CAS in `append` (SYNC POINT(node-link)),
    // and to settlers by `set_msg`'s Release store below.
    s.h.own.lens.store(unit, Ordering::Relaxed);
    s.h.sent.store(env.now_ms(), Ordering::Relaxed);
    s.h.own.first_recv_ms.store(0, Ordering::Relaxed);
    // The members' back-pointers are their own (`recv_ms` in the directory).
    s.h.own.recv_ms.store(0, Ordering::Relaxed);
    for (index, _) in reserved.iter().flatten().flatten() {
        dedup::set_msg(a, *index, s.idx, s.inc)?;
        crash_point!();
    }
    Ok(Some(Prepared {
        h: s.h,
        idx: s.idx,
        inc: s.inc,
        epoch0: s.epoch0,
        claimed,
        entry: None,
        source_len: 0,
        prior_receives: 0,
        loaned: false,
    }))
}

/// Links pack `p` (prepared by [`prepare_pack`] for the messages `reserved` names) as one node,
/// commits each member's dedup entry (with its member and position), publishes the unit
/// (`vis` `PACKED`) and runs the ready check: [`send_chain`]'s steps for a chain of one node
/// that takes `k` positions.
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
    let (g, e, pred, seq_hi, pos0) = match link(a, env, me, outs[0], &chain) {
        Ok(l) => l,
        Err(f) => {
            if crate::protocol::stopped(f) {
                return Err(f); // stopped before the link CAS: nothing enqueued
            }
            // Before the link CAS: nothing was enqueued; the keys may be sent again
            // (invariant D: aborted before the slot is freed).
            for (k, r) in reserved.iter().enumerate() {
                if let Some(entry) = r {
                    if let Some((index, word)) = entry {
                        dedup::abort(a, *index, *word)?;
                    }
                    results[k] = Err(f);
                }
            }
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
