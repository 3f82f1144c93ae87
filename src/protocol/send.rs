//! Send: reserve the dedup key, allocate a slot, copy the payload, find or insert the group,
//! append, commit the dedup entry, publish, hint.

use super::accounting::count;
use super::dedup::{self, Reserved};
use super::doorbell::notify;
use super::group::{self, TryClaim};
use super::ready::{cleanup, hint, or_release, release, Cleaned};
use super::words::{self, pack_group_epoch0};
use super::Owner;
use super::{node, pool, vis, Arena, Env, Fault, PResult, MAX_STEPS};
use crate::layout::{counter, GroupEntry};
use crate::sync::{fence, AtomicU64, Ordering};

/// What a successful send produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sent {
    /// Global slot index.
    pub idx: u32,
    /// Slot incarnation.
    pub inc: u32,
    /// High 64 bits of the sequence number (group incarnation base).
    pub seq_hi: u64,
    /// Low 64 bits of the sequence number (position in the group incarnation).
    pub pos: u64,
    /// The send was a duplicate (D1): nothing was enqueued, and the fields above name the
    /// original message.
    pub duplicate: bool,
}

/// A message description for [`send`].
#[derive(Debug)]
pub struct Outgoing<'x> {
    /// Size class to allocate from.
    pub class: usize,
    /// Allocation cursor (per handle).
    pub cursor: u64,
    /// Keyed hash of the group id.
    pub hash: u64,
    /// Group id bytes.
    pub group_id: &'x [u8],
    /// Packed lengths for `MsgHeader::lens`.
    pub lens: u64,
    /// Payload pieces (dedup id, encoded attributes, body), copied in back to back.
    pub parts: &'x [&'x [u8]],
    /// The dedup key, if the queue deduplicates.
    pub dedup: Option<dedup::Key<'x>>,
    /// Bytes of dead-letter source path at the start of the payload (the first part).
    pub source_len: u8,
    /// Receives the message had before this queue (M4: a dead-lettered message keeps its
    /// count); 0 for a new message.
    pub prior_receives: u32,
}

fn node_pos(a: &Arena<'_>, idx: u32) -> PResult<u64> {
    if idx >= a.total {
        return Ok(0);
    }
    // Relaxed: read between an Acquire load of the node's link and a CAS on it that fails if
    // the node changed incarnation (`append`).
    Ok(a.msg(idx)?.pos.load(Ordering::Relaxed))
}

/// Sends one message: reserve its dedup key, allocate, copy, find or insert the group, append,
/// commit the dedup entry, publish, hint.
pub fn send(a: &Arena<'_>, env: &dyn Env, me: Owner, out: &Outgoing<'_>) -> PResult<Sent> {
    let entry = match &out.dedup {
        None => None,
        Some(k) => match dedup::reserve(a, env, me, k)? {
            Reserved::Duplicate(o) => {
                count(a, me, counter::DUPLICATES, 1);
                return Ok(Sent {
                    idx: o.idx,
                    inc: o.inc,
                    seq_hi: o.seq_hi,
                    pos: o.pos,
                    duplicate: true,
                });
            }
            Reserved::New { index, word } => Some((index, word)),
        },
    };
    let r = send_reserved(a, env, me, out, entry);
    #[cfg(shmfifo_loom)]
    if super::crash::crashed() {
        return r;
    }
    if r.is_ok() {
        count(a, me, counter::SENT, 1);
    } else if let Some((index, word)) = entry {
        // Every error of `send_reserved` comes before the link CAS, so nothing was enqueued
        // and the key may be sent again. Our slot is freed (after `give_up` aborted the
        // entry) or still claimed by us: invariant D holds either way.
        dedup::abort(a, index, word)?;
    }
    r
}

/// Frees a slot we claimed, aborting our dedup entry first (invariant D).
fn give_up(a: &Arena<'_>, idx: u32, claimed: u64, entry: Option<(u32, u64)>) -> PResult<()> {
    if let Some((index, word)) = entry {
        dedup::abort(a, index, word)?;
    }
    pool::free(a, idx, claimed)?;
    Ok(())
}

fn send_reserved(
    a: &Arena<'_>,
    env: &dyn Env,
    me: Owner,
    out: &Outgoing<'_>,
    entry: Option<(u32, u64)>,
) -> PResult<Sent> {
    let (idx, inc, epoch0) = pool::alloc(a, out.class, out.cursor, me)?;
    let claimed = vis::pack(epoch0, vis::claimed(me));
    let (cl, slot) = a.class_of(idx)?;
    let total: usize = out.parts.iter().map(|p| p.len()).sum();
    if total > cl.cap as usize {
        give_up(a, idx, claimed, entry)?;
        return Err(Fault::Corrupted("payload larger than its class"));
    }
    // SAFETY: `slot < cl.headers.len()` and the payload array holds `headers.len() * stride`
    // bytes with `stride >= cap >= total`, so the range is inside the arena; the slot is
    // CLAIMED by us, so no other participant reads or writes these bytes until we publish it.
    unsafe {
        let mut dst = cl.payload.add(slot * cl.stride);
        for p in out.parts.iter() {
            core::ptr::copy_nonoverlapping(p.as_ptr(), dst, p.len());
            dst = dst.add(p.len());
        }
    }
    crash_point!();
    let h = &cl.headers[slot];
    // Relaxed stores: published by the SeqCst link CAS in `append` (SYNC POINT(node-link)).
    h.lens.store(out.lens, Ordering::Relaxed);
    h.sent.store(env.now_ms(), Ordering::Relaxed);
    h.first_recv_ms.store(0, Ordering::Relaxed);
    // While we produce, `recv_ms` points back to our dedup entry (for settlers), made visible
    // by `set_msg`'s Release store.
    h.recv_ms.store(
        entry.map_or(0, |(i, _)| u64::from(i) + 1),
        Ordering::Relaxed,
    );
    if let Some((index, _)) = entry {
        dedup::set_msg(a, index, idx, inc)?;
        crash_point!();
    }
    let mut stuck = 0;
    // A send waits, bounded by time, for a live claim holder to finish retiring a closed group.
    let mut busy = group::Patience::new();
    for _ in 0..MAX_STEPS {
        let (g, ginc) = match group::find_or_insert(a, env, me, out.hash, out.group_id) {
            Ok(x) => x,
            Err(f) => {
                #[cfg(shmfifo_loom)]
                if f == Fault::Crashed {
                    return Err(f);
                }
                give_up(a, idx, claimed, entry)?;
                return Err(f);
            }
        };
        // Relaxed: published by the link CAS.
        h.group_epoch0.store(
            pack_group_epoch0(out.source_len, epoch0.wrapping_sub(out.prior_receives), g),
            Ordering::Relaxed,
        );
        let e = a.group(g)?;
        crash_point!();
        match append(a, me, g, e, ginc, idx, inc)? {
            Some((pred, pos)) => {
                crash_point!();
                // Relaxed: the base was written before the group was published (Acquire).
                let seq_hi = e.seq_base.load(Ordering::Relaxed);
                // Committed at the link CAS: from here on the send succeeded.
                let done = Sent {
                    idx,
                    inc,
                    seq_hi,
                    pos,
                    duplicate: false,
                };
                if let Some((index, word)) = entry {
                    // Invariant D: the entry is DONE before the slot leaves CLAIMED. A fault
                    // here must not undo a committed send: the entry is left for a settler.
                    let _ = dedup::commit(a, env, index, word, seq_hi, pos);
                    crash_point!(Ok(done));
                    // Relaxed: published by the CAS below; no back-pointer once published.
                    h.recv_ms.store(0, Ordering::Relaxed);
                }
                // SYNC POINT(ready-check): SeqCst publish, then SeqCst load of `head`.
                let _ = h.vis.compare_exchange(
                    claimed,
                    vis::pack(epoch0, vis::published(0)),
                    Ordering::SeqCst,
                    Ordering::Relaxed,
                );
                crash_point!(Ok(done));
                // SYNC POINT(ready-check): an RMW on `head` (AcqRel) is ordered against the
                // cleaner's swap of `head`: either we read its new head (== pred, so we hint),
                // or its swap reads ours and it then sees our publication.
                // The send is committed: a fault while hinting (corruption elsewhere) must not
                // turn it into an error the caller would retry.
                if e.head.fetch_add(0, Ordering::AcqRel) == pred
                    && hint(a, env, me, g).unwrap_or(false)
                {
                    notify(a, env, me);
                }
                return Ok(done);
            }
            None => match help_retire(a, env, me, g, ginc)? {
                Helped::ClosedUnderUs => {
                    stuck += 1;
                    if stuck >= 64 {
                        break;
                    }
                }
                Helped::LookAgain => {}
                Helped::HolderBusy => {
                    // A live holder is finishing the retire (a few hundred ns); one that keeps
                    // the list closed far longer is stopped: give up, retryably.
                    if let Err(f) = busy.wait(
                        env,
                        "a group being retired is held by a live participant (stopped?)",
                    ) {
                        give_up(a, idx, claimed, entry)?;
                        return Err(f);
                    }
                }
            },
        }
    }
    give_up(a, idx, claimed, entry)?;
    Err(Fault::Corrupted("send did not converge"))
}

/// Appends node `idx` to the group's list. Returns `(predecessor ref, position)`, or `None`
/// if the group is closed (being retired) and the caller must look it up again.
fn append(
    a: &Arena<'_>,
    me: Owner,
    g: u32,
    e: &GroupEntry,
    ginc: u32,
    idx: u32,
    inc: u32,
) -> PResult<Option<(u64, u64)>> {
    let m = a.msg(idx)?;
    for round in 0..MAX_STEPS {
        if round > 0 {
            count(a, me, counter::CONTENTION_RETRIES, 1);
        }
        if !group::is_active(e, ginc) {
            return Ok(None);
        }
        // Acquire: pairs with the Release CAS that moved `tail`.
        let t = e.tail.load(Ordering::Acquire);
        let tl = a.link(node::index(t))?;
        // Acquire: SYNC POINT(node-link), the predecessor's fields are visible.
        let l = tl.load(Ordering::Acquire);
        if node::inc(l) != node::inc(t) {
            // Relaxed re-read: if `tail` still names a freed node, only a retire can have freed
            // it (invariant 2): the group is closing.
            if e.tail.load(Ordering::Relaxed) == t {
                return Ok(None);
            }
            continue;
        }
        if !node_in_group(a, g, t, tl)? {
            // A `tail` naming another group's node (only corruption does that) would splice
            // this message into that group's list: the group is damaged (see `quarantine`).
            return Err(Fault::Corrupted(
                "a group's tail names another group's node",
            ));
        }
        match node::index(l) {
            node::CLOSED => return Ok(None),
            node::NIL => {
                let pos = node_pos(a, node::index(t))?.wrapping_add(1);
                // Relaxed: published by the CAS below.
                m.pos.store(pos, Ordering::Relaxed);
                // SYNC POINT(node-link): SeqCst makes the payload and header visible to anyone
                // who loads this link with Acquire, and orders it before `head` checks.
                if tl
                    .compare_exchange(
                        l,
                        node::pack(node::inc(l), idx),
                        Ordering::SeqCst,
                        Ordering::Relaxed,
                    )
                    .is_ok()
                {
                    // Release: pairs with the Acquire loads of `tail`. Failure: helped already.
                    let _ = e.tail.compare_exchange(
                        t,
                        node::pack(inc, idx),
                        Ordering::Release,
                        Ordering::Relaxed,
                    );
                    return Ok(Some((t, pos)));
                }
            }
            next => {
                // Help the tail forward (Michael–Scott).
                let nl = a.link(next)?.load(Ordering::Acquire);
                let _ = e.tail.compare_exchange(
                    t,
                    node::pack(node::inc(nl), next),
                    Ordering::Release,
                    Ordering::Relaxed,
                );
            }
        }
    }
    Err(Fault::Corrupted("append did not converge"))
}

/// Whether node `t` (whose link word is `tl`, its incarnation just checked) belongs to group
/// `g`: `g`'s sentinel, or a message of `g`. A node freed and reused meanwhile (its
/// incarnation moved on) counts as belonging: the caller's next look finds it changed.
fn node_in_group(a: &Arena<'_>, g: u32, t: u64, tl: &AtomicU64) -> PResult<bool> {
    let i = node::index(t);
    if i >= a.total {
        return Ok(i == a.sentinel_index(g));
    }
    // Relaxed, then an Acquire fence and the incarnation again: a sequence lock against
    // `pool::alloc`, whose Release fence orders a new incarnation before the new message's
    // `group_epoch0` (SYNC POINT(peek-seqlock)). A `group_epoch0` of a newer incarnation is
    // never judged against the old one.
    let ge = a.msg(i)?.group_epoch0.load(Ordering::Relaxed);
    fence(Ordering::Acquire);
    if node::inc(tl.load(Ordering::Relaxed)) != node::inc(t) {
        return Ok(true);
    }
    Ok(words::group_of(ge) == g)
}

/// What [`help_retire`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Helped {
    /// Helped, or the incarnation is gone: look the group up again.
    LookAgain,
    /// The group is live under our claim yet its list is closed (only corruption does that).
    ClosedUnderUs,
    /// A live participant holds the claim: wait for it to finish the retire.
    HolderBusy,
}

/// A sender found the group closing: make sure the retire completes (its holder may be dead).
fn help_retire(a: &Arena<'_>, env: &dyn Env, me: Owner, g: u32, ginc: u32) -> PResult<Helped> {
    let e = a.group(g)?;
    if !group::is_active(e, ginc) {
        return Ok(Helped::LookAgain);
    }
    match group::try_claim(a, env, e, me, ginc) {
        TryClaim::Acquired { cw, .. } => {
            if or_release(e, cw, cleanup(a, env, cw, e))? == Cleaned::Kept {
                or_release(e, cw, release(a, env, me, cw, g))?;
                // The group is live under our claim, yet an append found it closing: only
                // corruption does that persistently.
                return Ok(Helped::ClosedUnderUs);
            }
        }
        TryClaim::Busy(_) => return Ok(Helped::HolderBusy),
        TryClaim::Gone => {}
    }
    Ok(Helped::LookAgain)
}
