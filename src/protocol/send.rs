//! Send: reserve the dedup key, allocate a slot, copy the payload, find or insert the group,
//! append, commit the dedup entry, publish, hint.

use super::accounting::count;
use super::dedup::{self, Reserved};
use super::doorbell::notify;
use super::group::{self, TryClaim};
use super::ready::hint;
use super::release::{cleanup, or_release, release, Cleaned};
use super::words::{self, pack_group_epoch0};
use super::Owner;
use super::{node, pool, vis, Arena, Env, Fault, PResult, MAX_STEPS};
use crate::layout::{counter, GroupEntry, MsgHeader};
use crate::sync::{fence, AtomicU64, Ordering};

mod packed;

pub use packed::send_lent_pack;

/// What a successful send produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sent {
    /// Global slot index.
    pub idx: u32,
    /// Slot incarnation.
    pub inc: u32,
    /// The message's member in its slot's pack (layout 22; 0: a slot of its own).
    pub member: u8,
    /// High 64 bits of the sequence number (group incarnation base).
    pub seq_hi: u64,
    /// Low 64 bits of the sequence number (position in the group incarnation).
    pub pos: u64,
    /// The send was a duplicate (D1): nothing was enqueued, and the fields above name the
    /// original message.
    pub duplicate: bool,
    /// Where the send found its group (`None` for a duplicate): a later send of the same
    /// group id may pass it back ([`Outgoing::group_hint`]).
    pub group: Option<group::Found>,
}

/// A message description for [`send`].
#[derive(Debug, Clone, Copy)]
pub struct Outgoing<'x> {
    /// Size class to allocate from.
    pub class: usize,
    /// Allocation cursor (per handle).
    pub cursor: u64,
    /// Keyed hash of the group id.
    pub hash: u64,
    /// Group id bytes.
    pub group_id: &'x [u8],
    /// Where an earlier send found this group id's group ([`Sent::group`]), if the caller
    /// kept it: tried first ([`group::recall`]), looked up if it no longer holds.
    pub group_hint: Option<group::Found>,
    /// Packed lengths for `MsgWords::lens`.
    pub lens: u64,
    /// Payload pieces in slot order (layout 10: body, dead-letter source, dedup id, framed
    /// attributes), copied in back to back.
    pub parts: &'x [&'x [u8]],
    /// The dedup key, if the queue deduplicates.
    pub dedup: Option<dedup::Key<'x>>,
    /// Bytes of dead-letter source path at the start of the payload (the first part).
    pub source_len: u8,
    /// Receives the message had before this queue (M4: a dead-lettered message keeps its
    /// count); 0 for a new message.
    pub prior_receives: u32,
    /// A slot lent earlier by [`loan`], whose first `in_place` bytes hold the body already
    /// (`parts` then go after them); `None`: allocate one from `class`.
    pub loaned: Option<Loaned>,
    /// Bytes of payload already in the lent slot (0 without a loan).
    pub in_place: usize,
}

impl Outgoing<'_> {
    /// Makes this message go in lent slot `l` of class `class`, whose first `in_place` bytes
    /// (the body) are written already.
    pub fn lend(&mut self, l: Loaned, class: usize, in_place: usize) {
        self.class = class;
        self.loaned = Some(l);
        self.in_place = in_place;
    }
}

/// A slot lent to its producer by [`loan`]: claimed by it (`vis` = CLAIMED(owner) at epoch
/// `epoch0`), not linked anywhere, so nobody else reads or writes it. A producer that dies
/// holding it leaves a claimed, never-linked slot, which recovery frees as it frees a
/// half-made send's (`settle`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Loaned {
    /// Global slot index.
    pub idx: u32,
    /// The incarnation it was claimed at.
    pub inc: u32,
    /// The epoch of its `vis` word while claimed.
    pub epoch0: u32,
}

/// Lends a free slot of `class` to `me` (the loaned send): claims it as a send does
/// (`pool::alloc`) and clears its dedup back-pointer, so a settler of a dead lender finds no
/// entry to settle and frees the slot. The caller writes the payload in place and later sends
/// it ([`Outgoing::loaned`]) or gives it back ([`return_loan`]).
pub fn loan(a: &Arena<'_>, env: &dyn Env, me: Owner, class: usize, cursor: u64) -> PResult<Loaned> {
    let s = pool::alloc_slot(a, env, class, cursor, me)?;
    crash_point!();
    // Relaxed: the slot is ours; a stale back-pointer names no PENDING entry of ours and this
    // slot either, so settlers ignore it: clearing it only keeps the word tidy.
    s.h.own.recv_ms.store(0, Ordering::Relaxed);
    Ok(Loaned {
        idx: s.idx,
        inc: s.inc,
        epoch0: s.epoch0,
    })
}

/// Gives a lent slot back (a loan dropped unsent, or sent as a duplicate): frees it if it is
/// still claimed by `me` at the loan's epoch. Returns whether this call freed it.
pub fn return_loan(a: &Arena<'_>, env: &dyn Env, me: Owner, l: Loaned) -> PResult<bool> {
    pool::free(a, env, l.idx, vis::pack(l.epoch0, vis::claimed(me)))
}

fn node_pos(a: &Arena<'_>, idx: u32) -> PResult<u64> {
    // Read between an Acquire load of the node's link (and, for a sentinel, of `tail`, which
    // the reopen that positioned it stored with Release) and a CAS on the link that fails if
    // the node changed incarnation (`append`).
    a.position(idx)
}

/// Sends one message: reserve its dedup key, allocate, copy, find or insert the group, append,
/// commit the dedup entry, publish, hint. (A chain of one: see [`send_chain`].)
pub fn send(a: &Arena<'_>, env: &dyn Env, me: Owner, out: &Outgoing<'_>) -> PResult<Sent> {
    let mut r = [Err(Fault::Corrupted("not sent"))];
    // A chain of one never packs: `send_chain_as`'s steps, compiled for one node.
    send_chain_slots::<1>(a, env, me, &[out], &mut r)?;
    let [r] = r;
    r
}

/// Most messages linked as one chain; a longer `outs` goes as consecutive chains of this many
/// (each one unit, in order).
pub const MAX_CHAIN: usize = 10;

/// Sends `outs`, all to the same group, in order, as one unit: each key reserved
/// (duplicates answer with their original, D1), each slot allocated and written, then one
/// group lookup, the slots linked to each other beforehand and appended to the group's list by
/// one link CAS (SYNC POINT(node-link)): the whole chain is committed at once or not at all
/// (invariant C: a producer that dies before that CAS leaves only unreachable slots, which
/// recovery frees; after it, every node is reachable and recovery publishes the ones still
/// claimed), then each entry committed and each node published in order, and one ready check
/// (one hint, one doorbell) for the chain. Writes one result per entry of `outs` into
/// `results` (as long as `outs`); an entry that fails before the link (its key in progress
/// elsewhere, its size class full) is left out of the chain, the others go on. A fault of the
/// group lookup or the append fails every entry of the chain (nothing of it was enqueued).
// The loom models' entry to a chain's steps (the library's sends go through `send` and
// `send_chain_as`).
#[cfg_attr(not(shmfifo_loom), allow(dead_code))]
pub fn send_chain(
    a: &Arena<'_>,
    env: &dyn Env,
    me: Owner,
    outs: &[&Outgoing<'_>],
    results: &mut [PResult<Sent>],
) -> PResult<()> {
    send_chain_as(a, env, me, outs, results, Packing::Never)
}

/// Whether a chain may go as a pack (layout 22, `protocol::pack`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Packing {
    /// One slot a message, always.
    Never,
    /// One slot for the chain's messages where they make a pack ([`send_chain_as`]).
    Where,
}

/// [`send_chain`], where `packing` says so as one pack (`protocol::pack`): a chain of two or
/// more new messages (no loan, no dead-letter source, no prior receive) whose pack fits a size
/// class goes in one slot, one node of its group's list, whose members take consecutive
/// positions; its dedup entries are settled as one send's (each names the slot, its member in
/// its `meta`). Otherwise, or where that class is full, one slot a message, as `send_chain`.
pub fn send_chain_as(
    a: &Arena<'_>,
    env: &dyn Env,
    me: Owner,
    outs: &[&Outgoing<'_>],
    results: &mut [PResult<Sent>],
    packing: Packing,
) -> PResult<()> {
    if outs.len() > MAX_CHAIN {
        for (o, r) in outs.chunks(MAX_CHAIN).zip(results.chunks_mut(MAX_CHAIN)) {
            send_chain_as(a, env, me, o, r, packing)?;
        }
        return Ok(());
    }
    if packing == Packing::Where
        && outs.len() >= 2
        && outs.iter().all(|o| {
            o.loaned.is_none()
                && o.source_len == 0
                && o.prior_receives == 0
                && words::unpack_lens(o.lens).3 == 0
        })
    {
        return packed::send_packed(a, env, me, outs, results);
    }
    send_chain_slots::<MAX_CHAIN>(a, env, me, outs, results)
}

/// [`send_chain`]'s steps, one slot a message (`outs` at most `N`, at most [`MAX_CHAIN`]).
/// `N` sizes the chain's arrays: [`send`] compiles these steps for a chain of one, whose
/// loops then unroll to straight code (callgrind: fewer instructions a single send).
#[inline]
fn send_chain_slots<const N: usize>(
    a: &Arena<'_>,
    env: &dyn Env,
    me: Owner,
    outs: &[&Outgoing<'_>],
    results: &mut [PResult<Sent>],
) -> PResult<()> {
    let mut nodes: [Option<Prepared<'_>>; N] = [None; N];
    let mut which = [0u8; N];
    debug_assert!(outs.len() <= N, "a chain longer than its arrays");
    let mut n = 0;
    for (k, out) in outs.iter().enumerate() {
        let Some(entry) = reserve_for(a, env, me, out, k, results)? else {
            continue;
        };
        match prepare(a, env, me, out, entry) {
            Ok(p) => {
                nodes[n] = Some(p);
                which[n] = k as u8;
                n += 1;
            }
            Err(f) => {
                if super::stopped(f) {
                    return Err(f);
                }
                // Nothing was linked: the key may be sent again (invariant D).
                if let Some((index, word)) = entry {
                    dedup::abort(a, index, word)?;
                }
                results[k] = Err(f);
            }
        }
    }
    if n == 0 {
        return Ok(());
    }
    let chain = &nodes[..n];
    let (g, ginc, e, pred, seq_hi, pos0) =
        match link(a, env, me, outs[usize::from(which[0])], chain) {
            Ok(l) => l,
            Err(f) => {
                if super::stopped(f) {
                    return Err(f); // stopped before the link CAS: nothing enqueued
                }
                for (p, &k) in chain.iter().flatten().zip(&which[..n]) {
                    // Every error of `link` comes before the link CAS: nothing was enqueued, the
                    // slots are freed (or still claimed by us) and the keys may be sent again.
                    give_up(a, env, p.idx, p.claimed, p.entry, p.loaned)?;
                    results[usize::from(k)] = Err(f);
                }
                return Ok(());
            }
        };
    // Committed at the link CAS: from here on every entry of the chain succeeded.
    // Indexed (every node of `chain` is `Some`): an iterator chain of `flatten`, `zip` and
    // `enumerate` here cost some 30 instructions more a single send.
    for (i, &k) in which[..n].iter().enumerate() {
        let Some(p) = &chain[i] else { continue };
        results[usize::from(k)] = Ok(Sent {
            idx: p.idx,
            inc: p.inc,
            member: 0,
            seq_hi,
            pos: pos0.wrapping_add(i as u64),
            duplicate: false,
            group: Some(group::Found::new(g, ginc)),
        });
    }
    #[cfg(shmfifo_loom)]
    if super::crash::crashed() {
        return Ok(()); // stopped right after the link CAS: committed
    }
    count(a, me, counter::SENT, n as u64);
    // Indexed, as above (every node of `chain` is `Some`).
    for (i, p) in chain.iter().enumerate() {
        let Some(p) = p else { continue };
        let h = p.h;
        if let Some((index, word)) = p.entry {
            // Invariant D: the entry is DONE before the slot leaves CLAIMED. A fault here
            // must not undo a committed send: the entry is left for a settler.
            let _ = dedup::commit(a, env, index, word, seq_hi, pos0.wrapping_add(i as u64), 0);
            crash_point!(Ok(()));
            // Relaxed: published by the CAS below; no back-pointer once published.
            h.own.recv_ms.store(0, Ordering::Relaxed);
        }
        // SYNC POINT(ready-check): the publish, then an RMW of `head` below. A store, not a
        // CAS (one locked instruction less a message): the word is `CLAIMED` by us, and only
        // a participant that proved us dead writes a claimed word of another (a settler, a
        // recovery, a quarantine), never while we run. Release: a receiver's Acquire load
        // that reads it sees the payload and header written before the link CAS; the order
        // against the cleaner's `head` swap comes from our RMW of `head` (AcqRel, below),
        // which the store precedes.
        h.own
            .vis
            .store(vis::pack(p.epoch0, vis::published(0)), Ordering::Release);
        crash_point!(Ok(()));
    }
    ready_check(a, env, me, g, e, pred, &chain[..n - 1]);
    Ok(())
}

/// After a chain's publication: hints its group (and rings the doorbell) if the chain's first
/// node is now the group's first live one. SYNC POINT(ready-check): an RMW on `head` (AcqRel)
/// is ordered against the cleaner's swap of `head`: either we read its new head, and if that
/// is the chain's predecessor `pred` or one of its nodes but the last (`but_last`), the next
/// node is ours and published: hint; or its swap reads ours and it then sees every
/// publication before. The chain is committed: a fault while hinting (corruption elsewhere)
/// must not turn it into an error the caller would retry.
#[inline(always)]
fn ready_check(
    a: &Arena<'_>,
    env: &dyn Env,
    me: Owner,
    g: u32,
    e: &GroupEntry,
    pred: u64,
    but_last: &[Option<Prepared<'_>>],
) {
    let h = crate::sync::idempotent_rmw_u64(&e.head, Ordering::AcqRel);
    let before_ours = h == pred
        || but_last
            .iter()
            .flatten()
            .any(|p| h == node::pack(p.inc, p.idx));
    if before_ours && hint(a, env, me, g).unwrap_or(false) {
        notify(a, env, me);
    }
}

/// Reserves `out`'s dedup key (entry `k` of its chain): `Some` with its `PENDING` entry (or
/// `None` inside, without a key) to send it; `None` where its result is written already (a
/// duplicate, D1: the original's; or the reservation's error), unless that stopped us.
#[inline(always)]
fn reserve_for(
    a: &Arena<'_>,
    env: &dyn Env,
    me: Owner,
    out: &Outgoing<'_>,
    k: usize,
    results: &mut [PResult<Sent>],
) -> PResult<Option<Option<(u32, u64)>>> {
    let Some(key) = &out.dedup else {
        return Ok(Some(None));
    };
    match dedup::reserve(a, env, me, key) {
        Ok(Reserved::Duplicate(o)) => {
            count(a, me, counter::DUPLICATES, 1);
            results[k] = Ok(Sent {
                idx: o.idx,
                inc: o.inc,
                member: o.member,
                seq_hi: o.seq_hi,
                pos: o.pos,
                duplicate: true,
                group: None,
            });
            Ok(None)
        }
        Ok(Reserved::New { index, word }) => Ok(Some(Some((index, word)))),
        Err(f) => {
            if super::stopped(f) {
                return Err(f);
            }
            results[k] = Err(f);
            Ok(None)
        }
    }
}

/// A slot claimed and written for one message of a chain.
#[derive(Debug, Clone, Copy)]
struct Prepared<'a> {
    /// Its header.
    h: &'a MsgHeader,
    idx: u32,
    inc: u32,
    epoch0: u32,
    /// Its `vis` word while we hold it.
    claimed: u64,
    /// Its dedup entry (index, reserved word), if the queue deduplicates.
    entry: Option<(u32, u64)>,
    /// Bytes of dead-letter source at the start of its payload.
    source_len: u8,
    /// Receives it had before this queue (M4).
    prior_receives: u32,
    /// A lent slot: a failed send leaves it to its lender instead of freeing it.
    loaned: bool,
}

/// Frees a slot we claimed, aborting our dedup entry first (invariant D); a lent slot stays
/// claimed by its lender (who may send it again or give it back), its back-pointer cleared.
fn give_up(
    a: &Arena<'_>,
    env: &dyn Env,
    idx: u32,
    claimed: u64,
    entry: Option<(u32, u64)>,
    loaned: bool,
) -> PResult<()> {
    if let Some((index, word)) = entry {
        dedup::abort(a, index, word)?;
    }
    if loaned {
        // Relaxed: the slot is still ours; the entry it named is FREE (a settler would ignore
        // the stale pointer anyway).
        a.msg(idx)?.own.recv_ms.store(0, Ordering::Relaxed);
    } else {
        pool::free(a, env, idx, claimed)?;
    }
    Ok(())
}

/// Claims a slot for `out` and writes its payload and header; points the dedup entry at it.
#[inline(always)]
fn prepare<'a>(
    a: &Arena<'a>,
    env: &dyn Env,
    me: Owner,
    out: &Outgoing<'_>,
    entry: Option<(u32, u64)>,
) -> PResult<Prepared<'a>> {
    let (idx, inc, epoch0, h, start, cap) = match out.loaned {
        None => {
            let s = pool::alloc_slot(a, env, out.class, out.cursor, me)?;
            (s.idx, s.inc, s.epoch0, s.h, s.start, s.cap)
        }
        Some(l) => {
            let (cl, h, start) = a.class_of(l.idx)?;
            // Relaxed: our own claim; only a hostile writer changes it meanwhile.
            if h.own.vis.load(Ordering::Relaxed) != vis::pack(l.epoch0, vis::claimed(me))
                || node::inc(h.link.load(Ordering::Relaxed)) != l.inc
            {
                return Err(Fault::Corrupted("a lent slot changed hands"));
            }
            (l.idx, l.inc, l.epoch0, h, start, cl.cap)
        }
    };
    let loaned = out.loaned.is_some();
    let claimed = vis::pack(epoch0, vis::claimed(me));
    // The pieces go in back to back after the bytes in place, each checked against the class
    // as it is copied (one pass over them, not a sum first: callgrind, 14 instructions a
    // message). Empty pieces (a message's dead-letter source, and its dedup id with
    // deduplication off) are passed over: a call of `memcpy` even for no byte costs 15.
    let cap = cap as usize;
    let mut at = out.in_place;
    let mut fits = at <= cap;
    if fits {
        for p in out.parts.iter().filter(|p| !p.is_empty()) {
            if p.len() > cap - at {
                fits = false;
                break;
            }
            // SAFETY: `start` begins the slot's payload (in the base file or a mapped
            // segment), which holds `stride >= cap >= at + p.len()` bytes (checked above), so
            // the range is inside the arena; the slot is CLAIMED by us, so no other
            // participant reads or writes these bytes until we publish it.
            unsafe { core::ptr::copy_nonoverlapping(p.as_ptr(), start.add(at), p.len()) };
            at += p.len();
        }
    }
    if !fits {
        give_up(a, env, idx, claimed, entry, loaned)?;
        return Err(Fault::Corrupted("payload larger than its class"));
    }
    // The body a loan wrote in place counts as written by this send, with our copies.
    crate::sync::payload_touch(start, at, true);
    crash_point!();
    // Relaxed stores: published by the SeqCst link CAS in `append` (SYNC POINT(node-link)).
    h.own.lens.store(out.lens, Ordering::Relaxed);
    h.sent.store(env.now_ms(), Ordering::Relaxed);
    h.own.first_recv_ms.store(0, Ordering::Relaxed);
    // While we produce, `recv_ms` points back to our dedup entry (for settlers), made visible
    // by `set_msg`'s Release store.
    h.own.recv_ms.store(
        entry.map_or(0, |(i, _)| u64::from(i) + 1),
        Ordering::Relaxed,
    );
    if let Some((index, _)) = entry {
        dedup::set_msg(a, index, idx, inc)?;
        crash_point!();
    }
    Ok(Prepared {
        h,
        idx,
        inc,
        epoch0,
        claimed,
        entry,
        source_len: out.source_len,
        prior_receives: out.prior_receives,
        loaned,
    })
}

/// Finds (or inserts) the group of `out` (first where `out.group_hint` says an earlier send
/// found it, [`group::recall`]) and appends `chain` to its list: the chain's nodes are linked
/// to each other first (unreachable until the append), then the first is linked to the list's
/// last node by one CAS. Returns the group and the incarnation it was found at, its entry, the
/// chain's predecessor, the sequence base and the first node's position. Every error comes
/// before that CAS.
#[allow(clippy::type_complexity)]
#[inline(always)]
fn link<'a>(
    a: &Arena<'a>,
    env: &dyn Env,
    me: Owner,
    out: &Outgoing<'_>,
    chain: &[Option<Prepared<'_>>],
) -> PResult<(u32, u32, &'a GroupEntry, u64, u64, u64)> {
    // Relaxed: the nodes are ours and unreachable; the link CAS publishes these stores.
    for w in chain.windows(2) {
        if let [Some(p), Some(q)] = w {
            p.h.link.store(node::pack(p.inc, q.idx), Ordering::Relaxed);
        }
    }
    if chain.len() > 1 {
        crash_point!();
    }
    let mut stuck = 0;
    // A send waits, bounded by time, for a live claim holder to finish reopening (or retiring)
    // a closed list.
    let mut busy = group::Patience::new();
    // The hint is tried once: a group it no longer finds, or one retired under us, is looked
    // up.
    let mut hint = out.group_hint;
    for _ in 0..MAX_STEPS {
        let (g, ginc) = match hint.take().and_then(|f| group::recall(a, f, out.group_id)) {
            Some(found) => found,
            None => group::find_or_insert(a, env, me, out.hash, out.group_id)?,
        };
        for p in chain {
            let Some(p) = p else { continue };
            // Relaxed: published by the link CAS.
            p.h.group_epoch0.store(
                pack_group_epoch0(p.source_len, p.epoch0.wrapping_sub(p.prior_receives), g),
                Ordering::Relaxed,
            );
        }
        let e = a.group(g)?;
        crash_point!();
        match append(a, me, g, e, ginc, chain)? {
            Some((pred, pos)) => {
                // Relaxed: the base was written before the group was published (Acquire).
                let linked = (g, ginc, e, pred, e.seq_base.load(Ordering::Relaxed), pos);
                crash_point!(Ok(linked));
                return Ok(linked);
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
                    // A live holder is finishing the reopen or retire (a few hundred ns); one
                    // that keeps the list closed far longer is stopped: give up, retryably.
                    busy.wait(
                        env,
                        "a group being reopened is held by a live participant (stopped?)",
                    )?;
                }
            },
        }
    }
    Err(Fault::Corrupted("send did not converge"))
}

/// Appends `chain` (its nodes already linked to each other) to the group's list. Returns
/// `(predecessor ref, position of the first node)`, or `None` if the list is closed (being
/// reopened, or the group retired) and the caller must help and look it up again.
fn append(
    a: &Arena<'_>,
    me: Owner,
    g: u32,
    e: &GroupEntry,
    ginc: u32,
    chain: &[Option<Prepared<'_>>],
) -> PResult<Option<(u64, u64)>> {
    let (Some(Some(head)), Some(Some(last))) = (chain.first(), chain.last()) else {
        return Err(Fault::Corrupted("an empty chain"));
    };
    // Consecutive tail moves without meeting the list's end: more than the arena has nodes
    // means the links form a cycle (only corruption does that): give up at once instead of
    // spinning for MAX_STEPS rounds (found by the live_scribble fuzz target).
    let mut helps = 0u32;
    for round in 0..MAX_STEPS {
        if round > 0 {
            count(a, me, counter::CONTENTION_RETRIES, 1);
        }
        // Acquire: pairs with the Release CAS that moved `tail`, and with `publish_entry`'s
        // Release store of it (SYNC POINT(entry-reuse), below).
        let t = e.tail.load(Ordering::Acquire);
        let tl = a.link(node::index(t))?;
        // Acquire: SYNC POINT(node-link), the predecessor's fields are visible.
        let l = tl.load(Ordering::Acquire);
        // SYNC POINT(entry-reuse): the incarnation checked after `tail` and its link are read, not
        // only before. Between the caller's lookup and the loads above, the group could have been
        // retired (a reclaim of an idle group, a quarantine) and the entry reused by another key,
        // whose sentinel `tail` then names: appending there would put this message in that key's
        // group (M3: a message keeps its group id; found by a loom model). A `tail` of the new
        // incarnation comes from `publish_entry`'s Release store, after that inserter's CAS that
        // took the entry from its tombstone: this Acquire load then sees the entry's state past our
        // incarnation. A `tail` and link of our incarnation, read before the reuse, fail the link
        // CAS below (the sentinel's incarnation moved on).
        if !group::is_active(e, ginc) {
            return Ok(None);
        }
        if node::inc(l) != node::inc(t) {
            // Relaxed re-read: if `tail` still names a node that moved on, it was freed under
            // it: a reopen frees its dummy a moment before it moves `tail` to the new sentinel
            // (or died between the two, and `settle_tail` mends it), or a damaged word did it.
            // Either way the list is not open here: the caller helps the claim holder.
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
            // SYNC POINT(quarantine-close): a quarantiner's, a reclaim's or a reopen's SeqCst
            // CAS to CLOSED won this link. A reopen moves `tail` to the sentinel a moment later:
            // look again at once if it did; otherwise the caller helps or waits.
            node::CLOSED => {
                // Relaxed: a hint; the next round loads it with Acquire.
                if e.tail.load(Ordering::Relaxed) != t {
                    continue;
                }
                return Ok(None);
            }
            node::NIL => {
                let pos = node_pos(a, node::index(t))?.wrapping_add(1);
                // Every node of a chain is `Some` (its senders make it so): indexed.
                for (i, p) in chain.iter().enumerate() {
                    let Some(p) = p else { continue };
                    // Relaxed: published by the CAS below.
                    p.h.pos.store(pos.wrapping_add(i as u64), Ordering::Relaxed);
                }
                // SYNC POINT(node-link): SeqCst makes the payloads and headers of the whole
                // chain (and its inner links) visible to anyone who loads this link with
                // Acquire, and orders it before `head` checks. SYNC POINT(quarantine-close):
                // against a quarantiner's SeqCst CAS of this word to CLOSED.
                if tl
                    .compare_exchange(
                        l,
                        node::pack(node::inc(l), head.idx),
                        Ordering::SeqCst,
                        Ordering::Relaxed,
                    )
                    .is_ok()
                {
                    // Release: pairs with the Acquire loads of `tail`. Failure: helped already.
                    let _ = e.tail.compare_exchange(
                        t,
                        node::pack(last.inc, last.idx),
                        Ordering::Release,
                        Ordering::Relaxed,
                    );
                    return Ok(Some((t, pos)));
                }
                // Another appender linked first: progress, not a cycle.
                helps = 0;
            }
            next => {
                helps += 1;
                if helps > a.steps() {
                    return Err(Fault::Corrupted("a group's list links in a cycle"));
                }
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
    /// A live participant holds the claim: wait for it to finish the reopen or retire.
    HolderBusy,
}

/// A sender found the group's list closed: make sure the reopen (or an idle group's retire)
/// completes (its holder may be dead).
fn help_retire(a: &Arena<'_>, env: &dyn Env, me: Owner, g: u32, ginc: u32) -> PResult<Helped> {
    let e = a.group(g)?;
    if !group::is_active(e, ginc) {
        return Ok(Helped::LookAgain);
    }
    match group::try_claim(a, env, e, me, ginc) {
        TryClaim::Acquired { cw, .. } => {
            if or_release(e, cw, cleanup(a, env, cw, g, e))? == Cleaned::Kept {
                or_release(e, cw, release(a, env, me, cw, g))?;
                // The group is live under our claim and its list reopened (layout 19): an
                // append found it closing at most once or twice a send; only corruption does
                // that persistently.
                return Ok(Helped::ClosedUnderUs);
            }
        }
        TryClaim::Busy(_) => return Ok(Helped::HolderBusy),
        TryClaim::Gone => {}
    }
    Ok(Helped::LookAgain)
}
