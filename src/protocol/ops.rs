//! The queue operations: send, receive, delete, change visibility, purge, sweep, recovery.
//!
//! Hot paths (send, receive, delete with no waiting) make no system call and allocate nothing;
//! their cost depends on the message, never on the number of groups or the backlog.

use super::dedup::{self, Reserved};
use super::group::{self, TryClaim};
use super::ring::Ring;
use super::{gstate, node, owner, pool, vis, Arena, Env, Fault, PResult};
use crate::layout::{counter, GroupEntry, MsgHeader};
use crate::sync::{fence, Ordering};

/// Bound on retry loops (each failed CAS means another participant progressed); reaching it
/// means corruption.
const MAX_STEPS: u32 = 1 << 24;
/// Rounds a send waits (with backoff) for a live claim holder to finish retiring a closed group.
const MAX_BUSY_ROUNDS: u32 = 1 << 16;
/// The longest a message may stay in flight after a receive (H6: 12 hours).
pub const MAX_VISIBILITY_MS: u64 = 12 * 3600 * 1000;
/// A receiver that finds no hint sweeps at least this often, re-deriving lost hints.
pub const SWEEP_PERIOD_MS: u64 = 1000;

/// The ready ring of an arena.
pub fn ring<'a>(a: &Arena<'a>) -> Ring<'a> {
    Ring {
        entries: a.ready,
        head: &a.hdr.ready_head.0,
        tail: &a.hdr.ready_tail.0,
    }
}

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
pub fn send(a: &Arena<'_>, env: &dyn Env, me: u64, out: &Outgoing<'_>) -> PResult<Sent> {
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
    me: u64,
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
    let (mut stuck, mut busy) = (0, 0);
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
        match append(a, me, e, ginc, idx, inc)? {
            Some((pred, pos)) => {
                crash_point!();
                // Relaxed: the base was written before the group was published (Acquire).
                let seq_hi = e.seq_base.load(Ordering::Relaxed);
                if let Some((index, word)) = entry {
                    // Invariant D: the entry is DONE before the slot leaves CLAIMED. A fault
                    // here must not undo a committed send: the entry is left for a settler.
                    let _ = dedup::commit(a, env, index, word, seq_hi, pos);
                    crash_point!(Ok(Sent {
                        idx,
                        inc,
                        seq_hi,
                        pos,
                        duplicate: false,
                    }));
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
                crash_point!(Ok(Sent {
                    idx,
                    inc,
                    seq_hi,
                    pos,
                    duplicate: false,
                }));
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
                return Ok(Sent {
                    idx,
                    inc,
                    seq_hi,
                    pos,
                    duplicate: false,
                });
            }
            None => match help_retire(a, env, me, g, ginc)? {
                Some(true) => {
                    stuck += 1;
                    if stuck >= 64 {
                        break;
                    }
                }
                Some(false) => {}
                None => {
                    // A live holder is finishing the retire (a few hundred ns); one that keeps
                    // the list closed far longer is stopped, or the arena is corrupted.
                    busy += 1;
                    if busy >= MAX_BUSY_ROUNDS {
                        give_up(a, idx, claimed, entry)?;
                        return Err(Fault::Corrupted(
                            "group closed too long under a live participant's claim",
                        ));
                    }
                    group::backoff(busy);
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
    me: u64,
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

/// A sender found the group closing: make sure the retire completes (its holder may be dead).
/// `Some(true)`: the group is live under our claim yet its list is closed (corruption);
/// `Some(false)`: helped, or the incarnation is gone (look it up again); `None`: a live
/// participant holds the claim (wait for it).
fn help_retire(a: &Arena<'_>, env: &dyn Env, me: u64, g: u32, ginc: u32) -> PResult<Option<bool>> {
    let e = a.group(g)?;
    if !group::is_active(e, ginc) {
        return Ok(Some(false));
    }
    match group::try_claim(a, env, e, me, ginc) {
        TryClaim::Acquired { cw, .. } => {
            if cleanup(a, env, cw, e)? == Cleaned::Kept {
                release(a, env, me, cw, g)?;
                // The group is live under our claim, yet an append found it closing: only
                // corruption does that persistently.
                return Ok(Some(true));
            }
        }
        TryClaim::Busy(_) => return Ok(None),
        TryClaim::Gone => {}
    }
    Ok(Some(false))
}

/// Marks group `g` ready unless a hint is already queued. Returns whether it pushed one.
///
/// Groups that became ready by visibility expiry (no event) are found by a sweep; running a due
/// sweep first keeps them ahead of `g` in ready order (R6: a group is ready from the moment its
/// head became visible).
pub fn hint(a: &Arena<'_>, env: &dyn Env, me: u64, g: u32) -> PResult<bool> {
    // Relaxed: a trigger only; `maybe_sweep` re-reads it with Acquire. The clock is read only
    // when some deadline is pending.
    let ne = a.hdr.next_expiry.0.load(Ordering::Relaxed);
    if ne != u64::MAX && env.now_ms() >= ne {
        maybe_sweep(a, env, me)?;
    }
    let e = a.group(g)?;
    // SYNC POINT(ready-check): a swap, not a CAS, so that it always writes: the receiver's
    // clearing swap then either reads our 1 (and so sees what we published before) or comes
    // first (and we read 0 and push).
    if e.hint.swap(1, Ordering::AcqRel) != 0 {
        return Ok(false);
    }
    let pushed = ring(a).push(g);
    crash_point!();
    if pushed {
        return Ok(true);
    }
    // Ring full (only under corruption: it has one entry per group slot): drop the hint and
    // ask the next idle receiver to sweep.
    e.hint.store(0, Ordering::Release);
    a.hdr.next_expiry.0.store(0, Ordering::Release);
    Ok(false)
}

/// Rings the doorbell if a receiver may be asleep.
pub fn notify(a: &Arena<'_>, env: &dyn Env, me: u64) {
    let w = &a.hdr.wake.0;
    // SYNC POINT(doorbell): the fence orders our publication before the `waiters` load, against
    // the receiver's SeqCst increment and fence before its last check.
    if crate::sync::fence_then_load_u32(&w.waiters) > 0 {
        // Release: a woken receiver's Acquire load of the doorbell sees our publication.
        w.doorbell.fetch_add(1, Ordering::Release);
        env.wake(&w.doorbell);
        count(a, me, counter::WAKE_UPS, 1);
    }
}

/// Announces participant `part` as about to sleep on the doorbell; returns the doorbell value
/// to sleep on. The caller must re-check for messages after this, then sleep, then call
/// [`end_wait`].
pub fn begin_wait(a: &Arena<'_>, part: usize) -> u32 {
    let w = &a.hdr.wake.0;
    // SYNC POINT(doorbell): SeqCst increment and fence before the caller's re-check, against
    // the producer's publication, fence, then `waiters` load: one of the two sees the other.
    w.waiters.fetch_add(1, Ordering::SeqCst);
    if let Some(p) = a.parts.get(part) {
        // Relaxed: bookkeeping for recovery of a dead waiter's count (incremented after the
        // global count, so a crash between the two over-counts rather than wraps).
        p.waiting.fetch_add(1, Ordering::Relaxed);
    }
    fence(Ordering::SeqCst);
    // Acquire: pairs with the producer's Release increment of the doorbell.
    w.doorbell.load(Ordering::Acquire)
}

/// Ends a wait begun with [`begin_wait`].
pub fn end_wait(a: &Arena<'_>, part: usize) {
    // Relaxed: counts only; the doorbell carries the synchronisation. Per-participant first,
    // so that a crash in between over-counts (a spurious wake-up) rather than wraps.
    if let Some(p) = a.parts.get(part) {
        p.waiting.fetch_sub(1, Ordering::Relaxed);
    }
    a.hdr.wake.0.waiters.fetch_sub(1, Ordering::Relaxed);
}

/// A message taken by [`receive`], handed to the sink while the group claim is held.
#[derive(Debug)]
pub struct Taken<'t> {
    /// Global slot index.
    pub idx: u32,
    /// Slot incarnation.
    pub inc: u32,
    /// Epoch of this receive (goes into the receipt handle).
    pub epoch: u32,
    /// Receive count including this one.
    pub receive_count: u32,
    /// The message header.
    pub header: &'t MsgHeader,
    /// The group entry.
    pub group: &'t GroupEntry,
    /// The payload bytes (dead-letter source, dedup id, attributes, body).
    pub payload: &'t [u8],
    /// The message's `vis` word as this receive left it (epoch and deadline).
    pub vis: u64,
}

/// The dead-letter mover of a [`Policy`]: returns whether the dead-letter queue has the
/// message now.
pub type Mover<'p> = &'p mut dyn FnMut(&Taken<'_>) -> bool;

/// What a receive applies beyond its count: the caller reads these from the arena's live
/// settings (and its own request).
pub struct Policy<'p> {
    /// Visibility timeout of the messages taken, ms.
    pub vt_ms: u64,
    /// Never-received messages this receive may take (R8: the in-flight limit's room);
    /// `usize::MAX` without a limit.
    pub fresh_budget: usize,
    /// `maxReceiveCount` and the mover (X1): called, under the group claim, with a message
    /// whose next receive would exceed the count (its `receive_count` is the receives so
    /// far); returns whether the dead-letter queue has it now (sent, or a duplicate of an
    /// earlier move). The message is then removed here.
    pub dead_letter: Option<(u32, Mover<'p>)>,
}

impl core::fmt::Debug for Policy<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Policy")
            .field("vt_ms", &self.vt_ms)
            .field("fresh_budget", &self.fresh_budget)
            .field("max_receive_count", &self.dead_letter.as_ref().map(|d| d.0))
            .finish()
    }
}

#[cfg(any(test, feature = "loom"))]
impl Policy<'_> {
    /// A receive with visibility timeout `vt_ms`, no in-flight limit and no dead-letter queue.
    pub fn new(vt_ms: u64) -> Self {
        Policy {
            vt_ms,
            fresh_budget: usize::MAX,
            dead_letter: None,
        }
    }
}

/// What a receive did besides returning messages.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Received {
    /// Messages taken (handed to the sink).
    pub taken: usize,
    /// The in-flight limit stopped the receive early (R8).
    pub limited: bool,
    /// Messages moved to the dead-letter queue (X1).
    pub moved: u64,
    /// A move failed: the message stays, and its group yields nothing this time.
    pub move_failed: bool,
    /// Messages removed by retention (T1).
    pub expired: u64,
}

/// The live time settings of an arena, read once per operation.
#[derive(Debug, Clone, Copy)]
pub struct Times {
    /// Arena time now, ms.
    pub now: u64,
    /// Queue delay, ms (L1).
    pub delay: u64,
    /// Retention period, ms (T1).
    pub retention: u64,
}

impl Times {
    /// Reads the settings (Relaxed: live settings; an operation racing with a change may
    /// apply either value).
    pub fn load(a: &Arena<'_>, env: &dyn Env) -> Times {
        Times {
            now: env.now_ms(),
            delay: a.hdr.delay_ms.load(Ordering::Relaxed),
            retention: a.hdr.retention_ms.load(Ordering::Relaxed).max(1),
        }
    }
    /// Whether a message enqueued at `sent` is past its retention period (T1, T3).
    pub fn expired(&self, sent: u64) -> bool {
        self.now.saturating_sub(sent) >= self.retention
    }
    /// The arena time at which a message enqueued at `sent` expires.
    pub fn expiry(&self, sent: u64) -> u64 {
        sent.saturating_add(self.retention)
    }
    /// Whether a never-received message enqueued at `sent` is still delayed (L1).
    pub fn delayed(&self, sent: u64) -> bool {
        self.now < sent.saturating_add(self.delay)
    }
    /// Where a published message enqueued at `sent`, with deadline field `d` (0: never
    /// received), stands now. Expiry comes first: an expired message is gone whatever its
    /// deadline (T1).
    pub fn standing(&self, sent: u64, d: u64) -> Standing {
        if self.expired(sent) {
            Standing::Expired
        } else if d > self.now {
            Standing::InFlight
        } else if d == 0 && self.delayed(sent) {
            Standing::Delayed
        } else {
            Standing::Visible
        }
    }
}

/// Where a published message stands at one instant ([`Times::standing`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Standing {
    /// Past its retention period (T1): gone, removed by the next walk that passes it.
    Expired,
    /// In flight: its visibility deadline is ahead (R3 locks its group from it on).
    InFlight,
    /// Never received and within the queue delay (L1).
    Delayed,
    /// Receivable (once the messages before it in its group are gone).
    Visible,
}

/// Adds `delta` to participant `me`'s share of the in-flight count (R8).
pub fn account_in_flight(a: &Arena<'_>, me: u64, delta: i64) {
    if let Some(p) = a.parts.get(owner::decode(me).0 as usize) {
        // Relaxed: a statistic summed by readers; corrected by a census after a crash.
        p.in_flight.fetch_add(delta as u64, Ordering::Relaxed);
    }
}

/// The in-flight count: the participants' shares plus the census correction (R8).
pub fn in_flight(a: &Arena<'_>) -> u64 {
    let sum = stat_sum(a, |p| &p.in_flight);
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
    for cl in a.classes.iter().take(a.nclasses).flatten() {
        for h in cl.headers {
            // Relaxed: a census; concurrent operations make it approximate.
            if let vis::State::Published(d) = vis::state(h.vis.load(Ordering::Relaxed)) {
                real += u64::from(d > 0);
            }
        }
    }
    let sum = stat_sum(a, |p| &p.in_flight);
    a.hdr
        .in_flight_fix
        .store(real.wrapping_sub(sum), Ordering::Relaxed);
}

/// Adds `n` to participant `me`'s lifetime counter `which` (an index of
/// [`crate::layout::counter`]).
pub fn count(a: &Arena<'_>, me: u64, which: usize, n: u64) {
    if n == 0 {
        return;
    }
    if let Some(c) = a
        .parts
        .get(owner::decode(me).0 as usize)
        .and_then(|p| p.counters.get(which))
    {
        // Relaxed: a statistic; our own slot, so no other writer contends for the line.
        c.fetch_add(n, Ordering::Relaxed);
    }
}

/// Sums a per-participant statistic over every registry slot (wrapping: shares may be
/// negative).
pub fn stat_sum(
    a: &Arena<'_>,
    pick: fn(&crate::layout::Participant) -> &crate::sync::AtomicU64,
) -> u64 {
    a.parts.iter().fold(0, |s, p| {
        // Relaxed: statistics, approximate while operations run.
        s.wrapping_add(pick(p).load(Ordering::Relaxed))
    })
}

/// The lifetime counters summed over every registry slot, indexed by
/// [`crate::layout::counter`].
pub fn counters(a: &Arena<'_>) -> [u64; crate::layout::counter::COUNT] {
    let mut sum = [0u64; crate::layout::counter::COUNT];
    for p in a.parts {
        for (s, c) in sum.iter_mut().zip(&p.counters) {
            // Relaxed: statistics, approximate while operations run.
            *s = s.wrapping_add(c.load(Ordering::Relaxed));
        }
    }
    sum
}

/// Removes a published message (retention, dead-letter move): its epoch is bumped so every
/// receipt handle expires (H2). Returns whether this call removed it.
fn remove(a: &Arena<'_>, me: u64, m: &MsgHeader, w: u64) -> bool {
    // AcqRel: as a delete (Release hands the removal to the cleaner and handle holders).
    let ok = m
        .vis
        .compare_exchange(
            w,
            vis::pack(vis::next(vis::epoch(w)), vis::DELETED),
            Ordering::AcqRel,
            Ordering::Relaxed,
        )
        .is_ok();
    if ok && matches!(vis::state(w), vis::State::Published(d) if d > 0) {
        account_in_flight(a, me, -1);
    }
    ok
}

/// Takes up to `max` messages, group by group in ready order, each group's visible prefix
/// (R3, R5, R6), applying delay, retention, the in-flight limit and the dead-letter move.
/// Calls `sink` for each while the group is claimed.
pub fn receive(
    a: &Arena<'_>,
    env: &dyn Env,
    me: u64,
    max: usize,
    policy: &mut Policy<'_>,
    sink: &mut dyn FnMut(&Taken<'_>),
) -> PResult<Received> {
    let r = ring(a);
    let mut rep = Received::default();
    let mut swept = false;
    // Groups already served by this call: with a zero visibility timeout a group is ready again
    // at once, and one response must not hold a message twice.
    let mut seen = [u32::MAX; 10];
    let mut nseen = 0;
    let mut requeue = [u32::MAX; 10];
    let mut nrequeue = 0;
    // Groups whose first message needed room under the in-flight limit (R8): each is
    // re-hinted when released, so stop after a few rather than meet them again.
    let mut limited_pops = 0;
    let mut move_failures = 0;
    while rep.taken < max && limited_pops < 16 && move_failures < 4 {
        let popped = r.pop();
        crash_point!();
        let Some(g) = popped else {
            if swept {
                break;
            }
            // Idle: release dead receivers' messages (at most once per liveness period), then
            // sweep if a deadline passed. Either may have hinted groups: look once more.
            let released = release_on_death(a) && maybe_check_liveness(a, env, me).unwrap_or(false);
            if !maybe_sweep(a, env, me).unwrap_or(false) && !released {
                break;
            }
            swept = true;
            continue;
        };
        let Ok(e) = a.group(g) else { continue };
        if seen[..nseen].contains(&g) {
            // Served already in this call (ready again after a zero visibility timeout): leave
            // it for the next receive, re-hinted after the loop (its flag stays set meanwhile).
            if nrequeue < requeue.len() {
                requeue[nrequeue] = g;
                nrequeue += 1;
            }
            continue;
        }
        // SYNC POINT(ready-check) with `hint`: if a producer's swap found the flag set, our
        // swap reads its 1 (AcqRel) and our scan below sees its message.
        e.hint.swap(0, Ordering::AcqRel);
        // Acquire: SYNC POINT(group-publish).
        let st = e.state.load(Ordering::Acquire);
        if gstate::kind(st) != gstate::ACTIVE {
            continue;
        }
        let cw = match group::try_claim(a, env, e, me, gstate::ginc(st)) {
            TryClaim::Acquired { cw, .. } => cw,
            TryClaim::Gone => continue,
            TryClaim::Busy(_) => {
                count(a, me, counter::CONTENTION_RETRIES, 1);
                // Ask the holder to re-check before it releases (DIRTY): the RMW chain on
                // `claim` carries whatever made the group ready to it. (If it released
                // meanwhile, `poke` takes the claim, cleans up and re-hints the group itself.)
                // An error here concerns that group only: keep what we already took.
                if poke(a, env, me, g).is_err() && rep.taken > 0 {
                    break;
                }
                continue;
            }
        };
        crash_point!();
        let failed_before = core::mem::take(&mut rep.move_failed);
        let got = take(a, env, me, cw, e, max - rep.taken, policy, &mut rep, sink);
        // A dead-letter move that failed here leaves the group deliverable, and `release`
        // re-hints it: serve it no more in this call (it is seen), and stop after a few such
        // groups (the dead-letter queue is gone or full for all of them).
        let failed_here = core::mem::replace(&mut rep.move_failed, failed_before);
        rep.move_failed |= failed_here;
        let got = match got {
            Ok(Some(k)) => k,
            Ok(None) => continue, // retired (and released) during cleanup
            Err(f) => {
                #[cfg(shmfifo_loom)]
                if f == Fault::Crashed {
                    return Err(f); // stopped forever, still holding the claim
                }
                release_claim_word(e, cw);
                return if rep.taken > 0 { Ok(rep) } else { Err(f) };
            }
        };
        if (got > 0 || failed_here) && nseen < seen.len() {
            seen[nseen] = g;
            nseen += 1;
        }
        if failed_here {
            move_failures += 1;
        }
        if rep.limited {
            limited_pops += 1;
        }
        rep.taken += got;
        // The messages are taken: a fault while releasing must not lose them for the caller.
        if release(a, env, me, cw, g).is_err() {
            break;
        }
    }
    for &g in &requeue[..nrequeue] {
        // The flag is still 1 from the hint we popped: push directly, no flag change needed.
        if !ring(a).push(g) {
            a.group(g)?.hint.store(0, Ordering::Release);
        }
    }
    if nrequeue > 0 {
        notify(a, env, me);
    }
    count(a, me, counter::RECEIVED, rep.taken as u64);
    Ok(rep)
}

/// Replays a recorded receive (R11): if every message is still in flight exactly as that
/// receive left it (same incarnation, epoch and deadline: not deleted, not changed, not
/// expired), restarts each one's visibility for `vt_ms` and hands it to `sink` again, with the
/// same receipt (epoch) and receive count. Returns `false` (a fresh receive is due) as soon as
/// one is not; messages already handed over stay in flight under their restarted timeout.
pub fn replay(
    a: &Arena<'_>,
    env: &dyn Env,
    me: u64,
    rec: &super::attempt::Record,
    vt_ms: u64,
    sink: &mut dyn FnMut(&Taken<'_>),
) -> PResult<bool> {
    let t = Times::load(a, env);
    let unchanged = |m: &MsgHeader, r: u64, w: u64| {
        // Acquire: pairs with the link store published by the link CAS.
        node::inc(m.link.load(Ordering::Acquire)) == node::inc(r)
            // Acquire: the message's latest state.
            && m.vis.load(Ordering::Acquire) == w
            && matches!(vis::state(w), vis::State::Published(d) if d > t.now)
            // Relaxed: written before publication, stable while published.
            && !t.expired(m.sent.load(Ordering::Relaxed))
    };
    let n = rec.count.min(super::attempt::MAX_MESSAGES);
    for k in 0..n {
        if !unchanged(a.msg(node::index(rec.refs[k]))?, rec.refs[k], rec.vis[k]) {
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
        let (r, w) = (rec.refs[k], rec.vis[k]);
        let idx = node::index(r);
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
        let Some(cw) = group::claim_wait(a, env, e, me, gstate::ginc(st))? else {
            return Ok(false);
        };
        let epoch = vis::epoch(w);
        let new = vis::pack(epoch, vis::published(deadline));
        // We hold the message now (its first holder died or gave up): record us as holder, at
        // the original receive time (H6's cap). Relaxed, before the CAS that publishes it, so a
        // releaser that reads the new `vis` (Acquire) reads us, not the dead holder. If the CAS
        // fails, the message was deleted, released or changed meanwhile: naming us as holder
        // then costs at most an early release should we die.
        let rw = m.recv_ms.load(Ordering::Relaxed);
        if unchanged(m, r, w) {
            m.recv_ms.store(
                super::recv::pack(me, super::recv::ms(rw)),
                Ordering::Relaxed,
            );
        }
        // AcqRel: as a visibility change (Acquire orders the payload reads below after the
        // producer's writes; Release publishes the new deadline).
        let ok = unchanged(m, r, w)
            && m.vis
                .compare_exchange(w, new, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok();
        if ok {
            let (cl, slot) = a.class_of(idx)?;
            // Relaxed: read under the claim, after the Acquire CAS.
            let len = payload_len(m.lens.load(Ordering::Relaxed), ge).min(cl.cap as usize);
            // SAFETY: as in `take`: inside the class's payload array, and we hold the group
            // claim, so the message cannot be freed while we read.
            let payload =
                unsafe { core::slice::from_raw_parts(cl.payload.add(slot * cl.stride), len) };
            sink(&Taken {
                idx,
                inc: node::inc(r),
                epoch,
                receive_count: epoch.wrapping_sub(epoch0) & vis::EPOCH_MASK,
                header: m,
                group: e,
                payload,
                vis: new,
            });
            if vt_ms > 0 {
                // AcqRel: as in `take`.
                a.hdr.next_expiry.0.fetch_min(deadline, Ordering::AcqRel);
            }
        }
        release(a, env, me, cw, g)?;
        if !ok {
            return Ok(false);
        }
    }
    Ok(true)
}

/// One step of a group-list walk from node reference `cur`.
pub(crate) enum Next<'a> {
    /// `cur`'s link no longer carries `cur`'s incarnation: it was freed (under the group's
    /// claim, only corruption does that).
    Stale,
    /// The end of the list (`NIL`, or `CLOSED`: being retired).
    End,
    /// The next node: its index, its header and its current incarnation.
    Node(u32, &'a MsgHeader, u32),
}

/// The node after `cur` in its group's list.
pub(crate) fn successor<'a>(a: &Arena<'a>, cur: u64) -> PResult<Next<'a>> {
    // Acquire: SYNC POINT(node-link), so the node found is seen as its producer wrote it.
    let l = a.link(node::index(cur))?.load(Ordering::Acquire);
    if node::inc(l) != node::inc(cur) {
        return Ok(Next::Stale);
    }
    let next = node::index(l);
    if next == node::NIL || next == node::CLOSED {
        return Ok(Next::End);
    }
    let m = a.msg(next)?;
    // Acquire: pairs with the allocation's link store, published by the link CAS.
    let ninc = node::inc(m.link.load(Ordering::Acquire));
    Ok(Next::Node(next, m, ninc))
}

/// Under the claim: cleans up, then takes the group's visible prefix, removing expired
/// messages (T1) and moving those past `maxReceiveCount` (X1) on the way.
#[allow(clippy::too_many_arguments)]
fn take(
    a: &Arena<'_>,
    env: &dyn Env,
    me: u64,
    cw: u64,
    e: &GroupEntry,
    want: usize,
    policy: &mut Policy<'_>,
    rep: &mut Received,
    sink: &mut dyn FnMut(&Taken<'_>),
) -> PResult<Option<usize>> {
    if cleanup(a, env, cw, e)? == Cleaned::Retired {
        return Ok(None);
    }
    let t = Times::load(a, env);
    let now = t.now;
    let vt_ms = policy.vt_ms;
    // A deadline is never 0 (that means "never received").
    let deadline = now
        .checked_add(vt_ms)
        .filter(|&d| d <= vis::MAX_DEADLINE)
        .ok_or(Fault::ClockRange)?
        .max(1);
    let wall = env.wall_ms();
    // Acquire: we hold the claim, the previous holder's head store is visible (SYNC POINT(claim)).
    let mut cur = e.head.load(Ordering::Acquire);
    let mut taken = 0;
    let (mut moved, mut expired, mut redelivered) = (0, 0, 0);
    for _ in 0..a.steps() {
        if taken == want {
            break;
        }
        let (next, m, ninc) = match successor(a, cur)? {
            Next::Stale => return Err(Fault::Corrupted("group node freed under its claim")),
            Next::End => break,
            Next::Node(next, m, ninc) => (next, m, ninc),
        };
        // SeqCst: SYNC POINT(ready-check) (see `receive`).
        let w = m.vis.load(Ordering::SeqCst);
        match vis::state(w) {
            vis::State::Deleted => cur = node::pack(ninc, next),
            vis::State::Free => return Err(Fault::Corrupted("free slot linked in a group")),
            vis::State::Claimed(o) => {
                if !a.owner_dead(env, o) {
                    break; // its producer is publishing it right now
                }
                // Linked by a producer that died before publishing: the send committed at the
                // link CAS, so publish it on its behalf, its dedup entry settled first
                // (invariant D: a retry of its dedup id must find the message). We hold the
                // claim, so no hint: the loop looks at the message again.
                // A corrupted dedup entry must not wedge the group: publish all the same.
                if settle_known(a, env, me, next, w, true, false).is_err() {
                    let _ = m.vis.compare_exchange(
                        w,
                        vis::pack(vis::epoch(w), vis::published(0)),
                        Ordering::SeqCst,
                        Ordering::Relaxed,
                    );
                }
            }
            vis::State::Published(d) => {
                // Relaxed: written before the link CAS that published the node (Acquire above).
                let sent = m.sent.load(Ordering::Relaxed);
                match t.standing(sent, d) {
                    Standing::Expired => {
                        // T1: gone, visible or in flight. (A failed CAS: changed, look again.)
                        if remove(a, me, m, w) {
                            expired += 1;
                            cur = node::pack(ninc, next);
                        }
                        continue;
                    }
                    Standing::InFlight => {
                        // The group is locked from here on (R3). Retention may end before the
                        // visibility timeout: wake a sweep for it.
                        if t.expiry(sent) < d {
                            // AcqRel: as the deadline's fetch_min below.
                            a.hdr
                                .next_expiry
                                .0
                                .fetch_min(t.expiry(sent), Ordering::AcqRel);
                        }
                        break;
                    }
                    Standing::Delayed => {
                        // L1, R4: delayed messages are at the tail and lock nothing; a sweep
                        // hints the group when the delay ends.
                        // AcqRel: as the deadline's fetch_min below.
                        a.hdr
                            .next_expiry
                            .0
                            .fetch_min(sent.saturating_add(t.delay), Ordering::AcqRel);
                        break;
                    }
                    Standing::Visible => {}
                }
                let epoch = vis::next(vis::epoch(w));
                // Relaxed: stable while the message is published; we hold the claim.
                let ge = m.group_epoch0.load(Ordering::Relaxed);
                let receive_count = epoch.wrapping_sub(unpack_group_epoch0(ge).1) & vis::EPOCH_MASK;
                let (cl, slot) = a.class_of(next)?;
                let lens = m.lens.load(Ordering::Relaxed);
                let len = payload_len(lens, ge).min(cl.cap as usize);
                // SAFETY: `slot` indexes the class (checked by `class_of`), `len <= cap <=
                // stride`, so the bytes are inside the payload array. We hold the group claim,
                // so no participant can receive, delete or free this message while we read.
                let payload =
                    unsafe { core::slice::from_raw_parts(cl.payload.add(slot * cl.stride), len) };
                if let Some((max_count, mover)) = policy.dead_letter.as_mut() {
                    if receive_count > *max_count {
                        // X1: this receive would deliver it for the (max+1)-th time: move it
                        // instead. A mover that dies after its send and before the removal
                        // leaves the message here; the next mover's send is a duplicate
                        // (the dead-letter queue dedups on the message id, D8).
                        let moved_ok = mover(&Taken {
                            idx: next,
                            inc: ninc,
                            epoch: vis::epoch(w),
                            receive_count: receive_count.wrapping_sub(1),
                            header: m,
                            group: e,
                            payload,
                            vis: w,
                        });
                        crash_point!();
                        if !moved_ok {
                            rep.move_failed = true;
                            break;
                        }
                        if remove(a, me, m, w) {
                            moved += 1;
                            cur = node::pack(ninc, next);
                        }
                        continue; // X4: the group goes on with its next message
                    }
                }
                if d == 0 {
                    // R8: a first receive adds to the in-flight count.
                    if policy.fresh_budget == 0 {
                        rep.limited = true;
                        break;
                    }
                    policy.fresh_budget -= 1;
                }
                // Relaxed, before the CAS that publishes it: `change_visibility` reads it after
                // an Acquire load of `vis`. Nobody else can take this visible message: we hold
                // the group claim.
                m.recv_ms
                    .store(super::recv::pack(me, now), Ordering::Relaxed);
                // AcqRel: Acquire orders our payload reads after the producer's writes;
                // Release publishes the new deadline to deleters and other receivers.
                if m.vis
                    .compare_exchange(
                        w,
                        vis::pack(epoch, vis::published(deadline)),
                        Ordering::AcqRel,
                        Ordering::Relaxed,
                    )
                    .is_err()
                {
                    if d == 0 {
                        policy.fresh_budget += 1;
                    }
                    continue; // changed under us (purge); look again
                }
                if d == 0 {
                    account_in_flight(a, me, 1);
                }
                crash_point!();
                // Relaxed: informational fields of a message we now hold.
                let _ =
                    m.first_recv_ms
                        .compare_exchange(0, wall, Ordering::Relaxed, Ordering::Relaxed);
                sink(&Taken {
                    idx: next,
                    inc: ninc,
                    epoch,
                    receive_count,
                    header: m,
                    group: e,
                    payload,
                    vis: vis::pack(epoch, vis::published(deadline)),
                });
                taken += 1;
                redelivered += u64::from(d != 0);
                cur = node::pack(ninc, next);
            }
        }
    }
    if taken > 0 && vt_ms > 0 {
        // AcqRel: a sweeper's swap-then-fetch_min keeps our deadline (see `sweep`).
        a.hdr.next_expiry.0.fetch_min(deadline, Ordering::AcqRel);
    }
    rep.moved += moved;
    rep.expired += expired;
    count(a, me, counter::MOVED_TO_DEAD_LETTER, moved);
    count(a, me, counter::VISIBILITY_EXPIRIES, redelivered);
    count(a, me, counter::RETENTION_EXPIRIES, expired);
    // Removed messages are deleted nodes: move `head` past them now, as a delete's cleanup
    // would, so that a producer appending behind them sees its predecessor at `head` and
    // hints the group (SYNC POINT(ready-check)). Taken messages stop the cleanup, so a retire
    // here means nothing was taken.
    if (moved > 0 || expired > 0) && cleanup(a, env, cw, e)? == Cleaned::Retired {
        return Ok(None);
    }
    Ok(Some(taken))
}

/// Flag of `MsgHeader::lens`: the message id is the dedup id (a dead-lettered message, D8).
pub const LENS_MOVED: u8 = 1;

/// Packed `MsgHeader::lens`: `[flags:8][body:24][attrs:24][dedup:8]`.
pub fn pack_lens(body: usize, attrs: usize, dedup: usize, flags: u8) -> u64 {
    (u64::from(flags) << 56)
        | (((body as u64) & 0xFF_FFFF) << 32)
        | (((attrs as u64) & 0xFF_FFFF) << 8)
        | (dedup as u64 & 0xFF)
}

/// `(body, attrs, dedup, flags)` of a packed lens word.
pub fn unpack_lens(w: u64) -> (usize, usize, usize, u8) {
    (
        ((w >> 32) & 0xFF_FFFF) as usize,
        ((w >> 8) & 0xFF_FFFF) as usize,
        (w & 0xFF) as usize,
        (w >> 56) as u8,
    )
}

/// Packed `MsgHeader::group_epoch0`: `[source_len:8][epoch0:24][group:32]`.
pub fn pack_group_epoch0(source_len: u8, epoch0: u32, g: u32) -> u64 {
    (u64::from(source_len) << 56) | (u64::from(epoch0 & vis::EPOCH_MASK) << 32) | u64::from(g)
}

/// `(source_len, epoch0, group)` of a packed `group_epoch0` word.
pub fn unpack_group_epoch0(w: u64) -> (usize, u32, u32) {
    (
        (w >> 56) as usize,
        ((w >> 32) as u32) & vis::EPOCH_MASK,
        w as u32,
    )
}

/// Bytes of payload: dead-letter source, dedup id, attributes, body.
pub(crate) fn payload_len(lens: u64, ge: u64) -> usize {
    let (b, at, d, _) = unpack_lens(lens);
    b + at + d + unpack_group_epoch0(ge).0
}

/// Outcome of a cleanup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cleaned {
    /// The group is still active.
    Kept,
    /// The group was retired and our claim released.
    Retired,
}

/// Under the claim: frees a dead holder's pending dummy, moves `head` past deleted nodes, and
/// retires the group if it is empty.
fn cleanup(a: &Arena<'_>, env: &dyn Env, cw: u64, e: &GroupEntry) -> PResult<Cleaned> {
    let r = cleanup_inner(a, env, e)?;
    if r == Cleaned::Retired {
        release_claim_word(e, cw);
    }
    Ok(r)
}

fn cleanup_inner(a: &Arena<'_>, env: &dyn Env, e: &GroupEntry) -> PResult<Cleaned> {
    let _ = env;
    // Acquire: SYNC POINT(claim); a dead holder's pending free is visible.
    let p = e.pending_free.load(Ordering::Acquire);
    if p != 0 && p != e.head.load(Ordering::Acquire) {
        pool::free_dummy(a, p)?;
    }
    if p != 0 {
        e.pending_free.store(0, Ordering::Release);
    }
    for _ in 0..a.steps() {
        let h = e.head.load(Ordering::Acquire);
        let hlw = a.link(node::index(h))?;
        let hl = hlw.load(Ordering::Acquire);
        if node::inc(hl) != node::inc(h) {
            // Only a retire frees the dummy (invariant 1): finish it.
            finish_retire(a, e, h)?;
            return Ok(Cleaned::Retired);
        }
        match node::index(hl) {
            node::CLOSED => {
                finish_retire(a, e, h)?;
                return Ok(Cleaned::Retired);
            }
            node::NIL => {
                // Empty: close the list so no append can succeed, then retire. SeqCst: orders
                // the close against appenders' SeqCst link CAS (exactly one of them wins).
                if hlw
                    .compare_exchange(
                        hl,
                        node::pack(node::inc(hl), node::CLOSED),
                        Ordering::SeqCst,
                        Ordering::Relaxed,
                    )
                    .is_ok()
                {
                    crash_point!();
                    finish_retire(a, e, h)?;
                    return Ok(Cleaned::Retired);
                }
                continue; // an append won: look again
            }
            next => {
                let m = a.msg(next)?;
                // SeqCst: SYNC POINT(ready-check) on the next iteration / post-release check.
                let w = m.vis.load(Ordering::SeqCst);
                if vis::state(w) != vis::State::Deleted {
                    return Ok(Cleaned::Kept);
                }
                let nref = node::pack(node::inc(m.link.load(Ordering::Acquire)), next);
                // Invariant 2: never leave `tail` on a node about to be freed. AcqRel pairs
                // with appenders' Acquire loads of `tail`.
                let _ = e
                    .tail
                    .compare_exchange(h, nref, Ordering::AcqRel, Ordering::Relaxed);
                if node::index(h) < a.total {
                    // Release: a stealer that takes the claim (Acquire) sees what to free.
                    e.pending_free.store(h, Ordering::Release);
                }
                crash_point!();
                // SYNC POINT(ready-check): a swap (AcqRel) against the producer's RMW on `head`;
                // our later loads of `vis` see any producer whose RMW came first.
                e.head.swap(nref, Ordering::AcqRel);
                crash_point!();
                pool::free_dummy(a, h)?;
                if node::index(h) < a.total {
                    e.pending_free.store(0, Ordering::Release);
                }
            }
        }
    }
    Err(Fault::Corrupted("cleanup did not converge"))
}

/// Frees the dummy `h` of a closed list and turns the entry into a tombstone.
fn finish_retire(a: &Arena<'_>, e: &GroupEntry, h: u64) -> PResult<()> {
    pool::free_dummy(a, h)?;
    crash_point!();
    // Acquire: the state word as of our claim.
    let st = e.state.load(Ordering::Acquire);
    if gstate::kind(st) == gstate::ACTIVE {
        group::tombstone(a, e, st);
    }
    Ok(())
}

/// Gives up the claim word if it still names us (any DIRTY bit is moot after a retire).
fn release_claim_word(e: &GroupEntry, cw: u64) {
    for _ in 0..64 {
        // Relaxed: the CAS below carries the ordering.
        let cur = e.claim.load(Ordering::Relaxed);
        if owner::clean(cur) != cw {
            return;
        }
        // SYNC POINT(claim): Release hands our writes to the next holder.
        if e.claim
            .compare_exchange(cur, 0, Ordering::Release, Ordering::Relaxed)
            .is_ok()
        {
            return;
        }
    }
}

/// Releases group `g`'s claim `cw`, cleaning up again for every DIRTY request, then re-hints
/// the group if it has a deliverable message (H5: a delete that unlocks a group wakes a
/// receiver).
fn release(a: &Arena<'_>, env: &dyn Env, me: u64, cw: u64, g: u32) -> PResult<()> {
    let e = a.group(g)?;
    for _ in 0..MAX_STEPS {
        // Acquire: a deleter's DIRTY request carries its delete (Release CAS).
        let cur = e.claim.load(Ordering::Acquire);
        if owner::clean(cur) != cw {
            return Ok(()); // taken from us (we were presumed dead) or corrupted
        }
        if cur & owner::DIRTY != 0 {
            if e.claim
                .compare_exchange(cur, cw, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
                && cleanup(a, env, cw, e)? == Cleaned::Retired
            {
                return Ok(());
            }
            continue;
        }
        // SYNC POINT(claim): SeqCst release; also orders it before the readiness check.
        if e.claim
            .compare_exchange(cw, 0, Ordering::SeqCst, Ordering::Relaxed)
            .is_ok()
        {
            break;
        }
    }
    hint_if_ready(a, env, me, g, e)
}

/// Hints group `g` (entry `e`) and rings the doorbell if its first message can be received now:
/// after a release of its claim, or a message made visible outside a receive.
fn hint_if_ready(a: &Arena<'_>, env: &dyn Env, me: u64, g: u32, e: &GroupEntry) -> PResult<()> {
    if matches!(status(a, env, e)?, Status::Deliverable | Status::Expired) && hint(a, env, me, g)? {
        notify(a, env, me);
    }
    Ok(())
}

/// Readiness of a group, read without its claim (a hint; the claim holder re-validates).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Status {
    /// Its first live message is visible.
    Deliverable,
    /// Its first live message is in flight until this deadline.
    Locked(u64),
    /// No message.
    Empty,
    /// Its first message is still being published by a live producer.
    Pending,
    /// Its first live message is past its retention period (T1): whoever takes the claim
    /// removes it.
    Expired,
}

fn status(a: &Arena<'_>, env: &dyn Env, e: &GroupEntry) -> PResult<Status> {
    // Acquire: SYNC POINT(group-publish).
    if gstate::kind(e.state.load(Ordering::Acquire)) != gstate::ACTIVE {
        return Ok(Status::Empty);
    }
    let t = Times::load(a, env);
    // SeqCst: SYNC POINT(ready-check).
    let mut cur = e.head.load(Ordering::SeqCst);
    for _ in 0..1024 {
        let (next, m, ninc) = match successor(a, cur)? {
            // Moved under us: let a claim holder look.
            Next::Stale => return Ok(Status::Deliverable),
            Next::End => return Ok(Status::Empty),
            Next::Node(next, m, ninc) => (next, m, ninc),
        };
        // SeqCst: SYNC POINT(ready-check).
        match vis::state(m.vis.load(Ordering::SeqCst)) {
            vis::State::Deleted => cur = node::pack(ninc, next),
            vis::State::Published(d) => {
                // Relaxed: a hint (the claim holder re-validates).
                let sent = m.sent.load(Ordering::Relaxed);
                return Ok(match t.standing(sent, d) {
                    Standing::Expired => Status::Expired,
                    Standing::InFlight => Status::Locked(d.min(t.expiry(sent))),
                    Standing::Delayed => Status::Locked(sent.saturating_add(t.delay)),
                    Standing::Visible => Status::Deliverable,
                });
            }
            vis::State::Claimed(o) if a.owner_dead(env, o) => return Ok(Status::Deliverable),
            vis::State::Claimed(_) => return Ok(Status::Pending),
            vis::State::Free => return Ok(Status::Deliverable),
        }
    }
    Ok(Status::Deliverable)
}

/// A receipt handle decoded: which slot incarnation, which receive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Handle {
    /// Global slot index.
    pub idx: u32,
    /// Slot incarnation.
    pub inc: u32,
    /// Epoch of the receive.
    pub epoch: u32,
}

/// Loads the current `vis` word if `h` is the live in-flight handle of its message (and the
/// message is within its retention period, T1).
fn current(a: &Arena<'_>, env: &dyn Env, m: &MsgHeader, h: Handle) -> PResult<u64> {
    // Acquire: pairs with the allocation's link store published by the link CAS.
    if node::inc(m.link.load(Ordering::Acquire)) != h.inc {
        return Err(Fault::Expired);
    }
    // Acquire: pairs with the receiver's AcqRel CAS that issued the handle.
    let w = m.vis.load(Ordering::Acquire);
    if vis::epoch(w) != h.epoch {
        return Err(Fault::Expired);
    }
    let t = Times::load(a, env);
    match vis::state(w) {
        // Relaxed: `sent` was written before the node was published, which the receive that
        // issued the handle observed; it does not change while the handle is live.
        vis::State::Published(d) if d > t.now && !t.expired(m.sent.load(Ordering::Relaxed)) => {
            Ok(w)
        }
        _ => Err(Fault::Expired),
    }
}

/// Deletes the message of a live handle (H1–H5), then cleans up its group.
pub fn delete(a: &Arena<'_>, env: &dyn Env, me: u64, h: Handle) -> PResult<()> {
    let m = a.msg(h.idx)?;
    let mut g = 0;
    for _ in 0..MAX_STEPS {
        let w = current(a, env, m, h)?;
        // Relaxed: stable while the message is in flight under our handle.
        g = m.group_epoch0.load(Ordering::Relaxed) as u32;
        // AcqRel: Release hands the deletion to the cleaner's loads; Acquire keeps our reads
        // of `group_epoch0` before it.
        if m.vis
            .compare_exchange(
                w,
                vis::pack(h.epoch, vis::DELETED),
                Ordering::AcqRel,
                Ordering::Relaxed,
            )
            .is_ok()
        {
            account_in_flight(a, me, -1);
            count(a, me, counter::DELETED, 1);
            crash_point!();
            // Deleted: a fault while cleaning up concerns the group, not this delete.
            let _ = poke(a, env, me, g);
            return Ok(());
        }
    }
    let _ = g;
    Err(Fault::Corrupted("delete did not converge"))
}

/// Gets group `g` cleaned up and re-checked for readiness (after a delete, or when a hint met
/// a busy claim): take its claim, or ask its live holder to do it (DIRTY) before it releases.
fn poke(a: &Arena<'_>, env: &dyn Env, me: u64, g: u32) -> PResult<()> {
    let e = a.group(g)?;
    for _ in 0..MAX_STEPS {
        // Acquire: SYNC POINT(group-publish).
        let st = e.state.load(Ordering::Acquire);
        if gstate::kind(st) != gstate::ACTIVE {
            return Ok(()); // retired: nothing left to clean
        }
        let ginc = gstate::ginc(st);
        // Acquire: SYNC POINT(claim).
        let cur = e.claim.load(Ordering::Acquire);
        let live_holder = cur != 0
            && owner::claim_ginc(cur) == owner::claim_ginc(owner::claim(ginc, 0))
            && (cur & owner::MASK == me || !a.owner_dead(env, cur & owner::MASK));
        if live_holder {
            if cur & owner::DIRTY != 0 {
                return Ok(()); // the holder will clean again before it releases
            }
            // Release: our DELETED store happens before the holder's Acquire load of DIRTY.
            if e.claim
                .compare_exchange(
                    cur,
                    cur | owner::DIRTY,
                    Ordering::Release,
                    Ordering::Relaxed,
                )
                .is_ok()
            {
                return Ok(());
            }
        } else {
            match group::try_claim(a, env, e, me, ginc) {
                TryClaim::Acquired { cw, .. } => {
                    if cleanup(a, env, cw, e)? == Cleaned::Retired {
                        return Ok(());
                    }
                    return release(a, env, me, cw, g);
                }
                TryClaim::Gone => return Ok(()),
                TryClaim::Busy(_) => {}
            }
        }
        crate::sync::spin_hint();
    }
    Err(Fault::Corrupted("claim did not converge"))
}

/// Changes the visibility timeout of a live handle's message to `vt_ms` from now (H6, V1).
pub fn change_visibility(
    a: &Arena<'_>,
    env: &dyn Env,
    me: u64,
    h: Handle,
    vt_ms: u64,
) -> PResult<()> {
    let m = a.msg(h.idx)?;
    for _ in 0..MAX_STEPS {
        let w = current(a, env, m, h)?;
        let now = env.now_ms();
        // Relaxed: written by the receive that issued our handle, which we observed (Acquire).
        let recv = super::recv::ms(m.recv_ms.load(Ordering::Relaxed));
        // Never 0 (that means "never received").
        let deadline = now.checked_add(vt_ms).ok_or(Fault::VisibilityCap)?.max(1);
        if deadline > recv.saturating_add(MAX_VISIBILITY_MS) {
            return Err(Fault::VisibilityCap);
        }
        if deadline > vis::MAX_DEADLINE {
            return Err(Fault::ClockRange);
        }
        // SeqCst: a zero timeout publishes visibility; SYNC POINT(ready-check) with `status`.
        if m.vis
            .compare_exchange(
                w,
                vis::pack(h.epoch, vis::published(deadline)),
                Ordering::SeqCst,
                Ordering::Relaxed,
            )
            .is_ok()
        {
            if vt_ms == 0 {
                // The group may be unlocked now (R3): hint it if its first message is visible.
                let g = m.group_epoch0.load(Ordering::Relaxed) as u32;
                hint_if_ready(a, env, me, g, a.group(g)?)?;
            } else {
                a.hdr.next_expiry.0.fetch_min(deadline, Ordering::AcqRel);
            }
            return Ok(());
        }
    }
    Err(Fault::Corrupted("change visibility did not converge"))
}

/// Sweeps if a visibility deadline has passed or the last sweep is old. Returns whether it did.
pub fn maybe_sweep(a: &Arena<'_>, env: &dyn Env, me: u64) -> PResult<bool> {
    let now = env.now_ms();
    // Acquire: pairs with the fetch_min of receivers.
    let ne = a.hdr.next_expiry.0.load(Ordering::Acquire);
    // Relaxed: the CAS below decides who sweeps.
    let ls = a.hdr.last_sweep.0.load(Ordering::Relaxed);
    let due = now >= ne || now >= ls.saturating_add(SWEEP_PERIOD_MS);
    if !due || (now == ls && ne != 0) {
        return Ok(false);
    }
    // AcqRel: one sweeper per millisecond.
    if a.hdr
        .last_sweep
        .0
        .compare_exchange(ls, now, Ordering::AcqRel, Ordering::Relaxed)
        .is_err()
    {
        return Ok(false);
    }
    // Only expiries are due: hint just the groups whose visibility ended. Periodically, or when
    // asked (`next_expiry == 0`), re-derive every hint (lost by a participant that died).
    let full = ne == 0 || now >= ls.saturating_add(SWEEP_PERIOD_MS);
    sweep_with(a, env, me, full)?;
    Ok(true)
}

/// Re-derives ready hints for every group, repairs dead claims and inserts, retires empty
/// groups and recomputes the next visibility deadline. O(group table); runs only when a
/// receiver is idle. Returns the number of hints pushed.
pub fn sweep(a: &Arena<'_>, env: &dyn Env, me: u64) -> PResult<usize> {
    sweep_with(a, env, me, true)
}

/// A sweep; `full` also hints ready groups whose head was never received (normally hinted by
/// their producer). Groups ready by visibility expiry are hinted in deadline order (R6).
fn sweep_with(a: &Arena<'_>, env: &dyn Env, me: u64, full: bool) -> PResult<usize> {
    // Swap (an RMW, AcqRel) then fetch_min: a receiver's fetch_min before the swap is acquired
    // by it, so the scan below sees that receiver's in-flight message; later ones are kept.
    a.hdr.next_expiry.0.swap(u64::MAX, Ordering::AcqRel);
    let mut min = u64::MAX;
    let mut pushed = 0;
    let mut expired: Vec<(u64, u32)> = Vec::new();
    for (g, e) in a.groups.iter().enumerate() {
        let g = g as u32;
        // A corrupted group is skipped: it must not stop the sweep for every other group.
        match sweep_group(a, env, me, g, e, full, &mut min) {
            Ok(Some(d)) => expired.push((d, g)),
            Ok(None) => {}
            Err(_) => min = min.min(env.now_ms().saturating_add(SWEEP_PERIOD_MS)),
        }
    }
    // Ready order (R6): by the moment each head became visible again.
    expired.sort_unstable();
    for (_, g) in expired {
        let e = a.group(g)?;
        if full {
            // Forced: a flag left set by a participant that died before pushing is reset.
            e.hint.store(1, Ordering::SeqCst);
        } else if e.hint.swap(1, Ordering::AcqRel) != 0 {
            continue; // already queued
        }
        if ring(a).push(g) {
            pushed += 1;
        } else {
            e.hint.store(0, Ordering::Release);
            // Full (or corrupted): the rest would fail too, each after a bounded spin. The
            // next sweep finds them again.
            min = min.min(env.now_ms().saturating_add(1));
            break;
        }
    }
    a.hdr.next_expiry.0.fetch_min(min, Ordering::AcqRel);
    if pushed > 0 {
        notify(a, env, me);
    }
    Ok(pushed)
}

/// One group of a sweep. Returns the group's ready time if it should be hinted.
fn sweep_group(
    a: &Arena<'_>,
    env: &dyn Env,
    me: u64,
    g: u32,
    e: &GroupEntry,
    full: bool,
    min: &mut u64,
) -> PResult<Option<u64>> {
    // Acquire: SYNC POINT(group-publish).
    let st = e.state.load(Ordering::Acquire);
    match gstate::kind(st) {
        gstate::INSERTING if a.owner_dead(env, gstate::owner(st)) => {
            group::tombstone(a, e, st);
            return Ok(None);
        }
        gstate::ACTIVE => {}
        _ => return Ok(None),
    }
    let ginc = gstate::ginc(st);
    // Acquire: SYNC POINT(claim).
    let c = e.claim.load(Ordering::Acquire);
    let held = c != 0
        && owner::claim_ginc(c) == owner::claim_ginc(owner::claim(ginc, 0))
        && !a.owner_dead(env, c & owner::MASK);
    let status = status(a, env, e)?;
    if held {
        // A live holder re-checks readiness when it releases; keep its lock deadline.
        if let Status::Locked(d) = status {
            *min = (*min).min(d);
        }
        return Ok(None);
    }
    if c != 0 || status == Status::Empty || status == Status::Expired {
        // Dead (or stale) holder, or an empty group nobody will touch: take the claim over,
        // clean up (which retires an empty group) and release (which re-hints).
        // An expired head (T1) is removed here, so memory comes back without any receiver.
        if let TryClaim::Acquired { cw, .. } = group::try_claim(a, env, e, me, ginc) {
            if cleanup(a, env, cw, e)? == Cleaned::Kept {
                if status == Status::Expired {
                    trim_expired(a, env, me, e)?;
                    if cleanup(a, env, cw, e)? == Cleaned::Retired {
                        return Ok(None);
                    }
                }
                release(a, env, me, cw, g)?;
            }
        }
        return Ok(None);
    }
    match status {
        Status::Deliverable => {
            let d = head_deadline(a, e);
            // A never-received head is hinted by its producer, except when it was delayed
            // (L1): that hint was consumed while it was, so a sweep hints it now.
            // Relaxed: a live setting.
            let delayed_queue = a.hdr.delay_ms.load(Ordering::Relaxed) > 0;
            Ok((d > 0 || full || delayed_queue).then_some(d))
        }
        Status::Locked(d) => {
            *min = (*min).min(d);
            Ok(None)
        }
        Status::Pending | Status::Empty | Status::Expired => Ok(None),
    }
}

/// Under the claim: removes the messages past their retention period at the front of the
/// group (T1). Returns how many.
fn trim_expired(a: &Arena<'_>, env: &dyn Env, me: u64, e: &GroupEntry) -> PResult<u64> {
    let t = Times::load(a, env);
    // Acquire: SYNC POINT(claim), as in `take`.
    let mut cur = e.head.load(Ordering::Acquire);
    let mut n = 0;
    for _ in 0..a.steps() {
        let Next::Node(next, m, ninc) = successor(a, cur)? else {
            break;
        };
        // Acquire: the message's latest state.
        let w = m.vis.load(Ordering::Acquire);
        match vis::state(w) {
            vis::State::Deleted => cur = node::pack(ninc, next),
            // Relaxed: written before the node was published (Acquire above).
            vis::State::Published(_) if t.expired(m.sent.load(Ordering::Relaxed)) => {
                if remove(a, me, m, w) {
                    n += 1;
                    cur = node::pack(ninc, next);
                }
            }
            _ => break,
        }
    }
    count(a, me, counter::RETENTION_EXPIRIES, n);
    Ok(n)
}

/// The visibility deadline of a group's first live message (0 if never received), a hint.
fn head_deadline(a: &Arena<'_>, e: &GroupEntry) -> u64 {
    // Acquire loads: a racy read for ordering hints only; every step is validated.
    let mut cur = e.head.load(Ordering::Acquire);
    for _ in 0..1024 {
        let Ok(l) = a.link(node::index(cur)).map(|l| l.load(Ordering::Acquire)) else {
            return 0;
        };
        let next = node::index(l);
        let Ok(m) = a.msg(next) else { return 0 };
        let w = m.vis.load(Ordering::Acquire);
        match vis::state(w) {
            vis::State::Deleted => {
                cur = node::pack(node::inc(m.link.load(Ordering::Acquire)), next)
            }
            vis::State::Published(d) => return d,
            _ => return 0,
        }
    }
    0
}

/// Deletes every published message (visible or in flight) and retires emptied groups (P1).
/// Returns the number of messages deleted.
pub fn purge(a: &Arena<'_>, env: &dyn Env, me: u64) -> PResult<u64> {
    let mut n = 0;
    for (g, e) in a.groups.iter().enumerate() {
        // Acquire: SYNC POINT(group-publish).
        let st = e.state.load(Ordering::Acquire);
        if gstate::kind(st) != gstate::ACTIVE {
            continue;
        }
        let Some(cw) = group::claim_wait(a, env, e, me, gstate::ginc(st))? else {
            continue; // retired meanwhile
        };
        let mut cur = e.head.load(Ordering::Acquire);
        for _ in 0..a.steps() {
            let Next::Node(next, m, ninc) = successor(a, cur)? else {
                break;
            };
            // Acquire: the message's latest state.
            let w = m.vis.load(Ordering::Acquire);
            if let vis::State::Published(_) = vis::state(w) {
                // Bumping the epoch expires every handle (H2); a failed CAS: look again.
                if !remove(a, me, m, w) {
                    continue;
                }
                n += 1;
            }
            cur = node::pack(ninc, next);
        }
        if cleanup(a, env, cw, e)? == Cleaned::Kept {
            release(a, env, me, cw, g as u32)?;
        }
    }
    // D7: the dedup table is cleared too.
    dedup::clear(a);
    Ok(n)
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
}

impl Counts {
    /// Slots holding a published message, expired ones included.
    pub fn published(&self) -> u64 {
        self.visible + self.in_flight + self.delayed + self.expired
    }
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
    for cl in a.classes.iter().take(a.nclasses).flatten() {
        let mut c = Counts::default();
        for h in cl.headers {
            // Relaxed: an approximate snapshot, as C1 allows.
            match vis::state(h.vis.load(Ordering::Relaxed)) {
                // Relaxed: as above.
                vis::State::Published(d) => match t.standing(h.sent.load(Ordering::Relaxed), d) {
                    Standing::Expired => c.expired += 1,
                    Standing::InFlight => c.in_flight += 1,
                    Standing::Delayed => c.delayed += 1,
                    Standing::Visible => c.visible += 1,
                },
                vis::State::Claimed(_) => c.sending += 1,
                vis::State::Deleted => c.deleted += 1,
                vis::State::Free => {}
            }
        }
        per_class(cl, &c);
        total.visible += c.visible;
        total.in_flight += c.in_flight;
        total.delayed += c.delayed;
        total.expired += c.expired;
        total.sending += c.sending;
        total.deleted += c.deleted;
    }
    total
}

/// What [`recover`] repaired.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Recovered {
    /// Participants found dead while registered (liveness lock gone, never closed).
    pub dead_participants: u64,
    /// Messages of dead producers published (their link CAS had committed them).
    pub published: u64,
    /// Half-made messages of dead producers freed (never published).
    pub freed: u64,
    /// In-flight messages of dead receivers made visible at once (`release_on_death`).
    pub released: u64,
}

/// Period of the liveness check that idle receivers run (ms): a dead receiver's messages are
/// released about this long after its death, once some receiver is idle.
pub const LIVENESS_PERIOD_MS: u64 = 100;

/// Participants that died while registered: status `ALIVE` and no liveness lock (a clean close
/// stores `FREE` before unlocking, and a registrant locks before it stores `ALIVE`), as
/// `(index, generation)`.
pub fn dead_participants(a: &Arena<'_>, env: &dyn Env, me: u64) -> Vec<(u32, u32)> {
    let mut dead = Vec::new();
    for (i, p) in a.parts.iter().enumerate() {
        // Acquire: pairs with the registration's Release store.
        let st = p.state.load(Ordering::Acquire);
        if super::pstate::status(st) != super::pstate::ALIVE {
            continue;
        }
        let gen = super::pstate::gen(st);
        if owner::code(i as u32, gen) == me || env.participant_alive(i as u32) {
            continue;
        }
        dead.push((i as u32, gen));
    }
    dead
}

/// Whether dead receivers' messages are released at once (a creation setting).
pub fn release_on_death(a: &Arena<'_>) -> bool {
    // Relaxed: written before the arena was published (SYNC POINT(arena-ready)).
    a.hdr.release_on_death.load(Ordering::Relaxed) != 0
}

/// Releases the in-flight messages of dead receivers at once instead of at their visibility
/// deadline: each published message in flight whose `recv_ms` names one of `dead` (index and
/// the low 8 bits of the generation) becomes visible, keeping its epoch (its receipt handle
/// stays valid until it is received again, as after an expiry), and its group is hinted.
/// Returns how many were released.
pub fn release_held(a: &Arena<'_>, env: &dyn Env, me: u64, dead: &[(u32, u32)]) -> PResult<u64> {
    if dead.is_empty() {
        return Ok(0);
    }
    release_where(a, env, me, &|r| {
        super::recv::holder(r)
            .is_some_and(|(hi, hg)| dead.iter().any(|&(di, dg)| di == hi && dg & 0xFF == hg))
    })
}

/// Makes visible every in-flight message whose `recv_ms` word satisfies `pick` (see
/// [`release_held`]); `|_| true` releases them all (after a reboot every holder is gone).
pub fn release_where(
    a: &Arena<'_>,
    env: &dyn Env,
    me: u64,
    pick: &dyn Fn(u64) -> bool,
) -> PResult<u64> {
    // A deadline that passes during the scan is released at `now` all the same: visible either way.
    let now = env.now_ms().max(1);
    let mut n = 0;
    for cl in a.classes.iter().take(a.nclasses).flatten() {
        for h in cl.headers {
            // Acquire: pairs with the receiver's AcqRel CAS, so its `recv_ms` store (sequenced
            // before that CAS) is visible below: the holder we read is at least as new as `w`.
            let w = h.vis.load(Ordering::Acquire);
            let vis::State::Published(d) = vis::state(w) else {
                continue;
            };
            if d <= now {
                continue;
            }
            // Relaxed: ordered by the Acquire load above.
            if !pick(h.recv_ms.load(Ordering::Relaxed)) {
                continue;
            }
            crash_point!();
            // SeqCst: publishes visibility, SYNC POINT(ready-check) with `status` (as a zero
            // visibility change). A failed CAS: deleted, changed or released meanwhile.
            if h.vis
                .compare_exchange(
                    w,
                    vis::pack(vis::epoch(w), vis::published(now)),
                    Ordering::SeqCst,
                    Ordering::Relaxed,
                )
                .is_err()
            {
                continue;
            }
            n += 1;
            crash_point!();
            // Relaxed: stable while the message is published.
            let g = h.group_epoch0.load(Ordering::Relaxed) as u32;
            if let Ok(e) = a.group(g) {
                // A corrupted group is left to the sweep: the scan goes on.
                let _ = hint_if_ready(a, env, me, g, e);
            }
        }
    }
    Ok(n)
}

/// Runs [`recover`] if the liveness period has passed and some registered participant has died
/// (one checker per period, by CAS on `Header::liveness`). Called by idle receivers, so that a
/// dead receiver's messages come back within about [`LIVENESS_PERIOD_MS`]. Returns whether it
/// repaired anything.
pub fn maybe_check_liveness(a: &Arena<'_>, env: &dyn Env, me: u64) -> PResult<bool> {
    let now = env.now_ms();
    // Relaxed: the CAS below decides who checks; a stale value only delays or repeats a check.
    let last = a.hdr.liveness.0.load(Ordering::Relaxed);
    if now < last.saturating_add(LIVENESS_PERIOD_MS) && last <= now {
        return Ok(false);
    }
    // Relaxed: the word orders nothing; the participant and slot loads carry their own.
    if a.hdr
        .liveness
        .0
        .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
        .is_err()
    {
        return Ok(false);
    }
    let dead = dead_participants(a, env, me);
    if dead.is_empty() {
        return Ok(false);
    }
    let r = recover_dead(a, env, me, &dead)?;
    Ok(r != Recovered::default())
}

/// Repairs what dead participants left: their waiter counts, their half-made sends, their
/// in-flight messages (released at once with `release_on_death`), and (through a sweep) their
/// claims, inserts and lost hints. Then marks each dead registration `FREE`, so that later
/// checks skip it.
pub fn recover(a: &Arena<'_>, env: &dyn Env, me: u64) -> PResult<Recovered> {
    recover_dead(a, env, me, &dead_participants(a, env, me))
}

/// [`recover`] with the dead registrations already found (by [`dead_participants`]).
fn recover_dead(a: &Arena<'_>, env: &dyn Env, me: u64, dead: &[(u32, u32)]) -> PResult<Recovered> {
    let mut r = Recovered::default();
    for &(i, _) in dead {
        r.dead_participants += 1;
        // AcqRel swap: exactly one recoverer subtracts a dead participant's waiters.
        let w = a.parts[i as usize].waiting.swap(0, Ordering::AcqRel);
        if w > 0 {
            a.hdr.wake.0.waiters.fetch_sub(w as u32, Ordering::AcqRel);
        }
    }
    for cl in a.classes.iter().take(a.nclasses).flatten() {
        for (i, h) in cl.headers.iter().enumerate() {
            // Acquire: the slot's current state.
            let w = h.vis.load(Ordering::Acquire);
            let vis::State::Claimed(o) = vis::state(w) else {
                continue;
            };
            if o == me || !a.owner_dead(env, o) {
                continue;
            }
            match settle_dead_send(a, env, me, cl.base + i as u32, w)? {
                Settled::Published => r.published += 1,
                Settled::Freed => r.freed += 1,
                // Another settler won, or the group's claim is held by a live participant
                // (next recovery).
                Settled::Raced | Settled::Busy => {}
            }
        }
    }
    if release_on_death(a) {
        r.released = release_held(a, env, me, dead)?;
    }
    sweep(a, env, me)?;
    for &(i, gen) in dead {
        // Release: our repairs above happen before a later reader sees `FREE`. A failed CAS:
        // another recoverer did it, or a new registrant took the slot (its own generation).
        if a.parts[i as usize]
            .state
            .compare_exchange(
                super::pstate::pack(gen, super::pstate::ALIVE),
                super::pstate::pack(gen, super::pstate::FREE),
                Ordering::Release,
                Ordering::Relaxed,
            )
            .is_ok()
        {
            count(a, me, counter::PARTICIPANTS_RECOVERED, 1);
        }
    }
    Ok(r)
}

/// Settles a dead producer's slot `idx`, claimed in vis word `w`: its dedup entry first
/// (invariant D), then the slot: published if its link CAS had committed it, else freed.
pub fn settle_dead_send(
    a: &Arena<'_>,
    env: &dyn Env,
    me: u64,
    idx: u32,
    w: u64,
) -> PResult<Settled> {
    if !matches!(vis::state(w), vis::State::Claimed(_)) {
        return Ok(Settled::Raced);
    }
    let h = a.msg(idx)?;
    let Some(linked) = linked(a, env, me, h, idx)? else {
        return Ok(Settled::Busy);
    };
    settle_known(a, env, me, idx, w, linked, true)
}

/// Settles a dead producer's slot `idx` (claimed in `w`) once it is known whether its node is
/// linked (found in its group's list under the claim): its dedup entry first (invariant D),
/// then the slot: published (and its group hinted if `hint`) if linked, else freed.
fn settle_known(
    a: &Arena<'_>,
    env: &dyn Env,
    me: u64,
    idx: u32,
    w: u64,
    linked: bool,
    hint_group: bool,
) -> PResult<Settled> {
    let vis::State::Claimed(o) = vis::state(w) else {
        return Ok(Settled::Raced);
    };
    let h = a.msg(idx)?;
    // Relaxed: the dead producer's last writes, ordered before its link CAS (if any), which
    // `linked` read with Acquire; a stale value names no matching entry.
    let back = h.recv_ms.load(Ordering::Relaxed);
    let inc = node::inc(h.link.load(Ordering::Acquire));
    let seq = if linked {
        let g = h.group_epoch0.load(Ordering::Relaxed) as u32;
        // Relaxed: written before the group was published.
        let hi = a.group(g)?.seq_base.load(Ordering::Relaxed);
        Some((hi, h.pos.load(Ordering::Relaxed)))
    } else {
        None
    };
    dedup::settle_for_slot(a, env, back, o, idx, inc, seq)?;
    if linked {
        h.recv_ms.store(0, Ordering::Relaxed);
        if h.vis
            .compare_exchange(
                w,
                vis::pack(vis::epoch(w), vis::published(0)),
                Ordering::SeqCst,
                Ordering::Relaxed,
            )
            .is_err()
        {
            return Ok(Settled::Raced);
        }
        let g = h.group_epoch0.load(Ordering::Relaxed) as u32;
        if let (true, Ok(e)) = (hint_group, a.group(g)) {
            hint_if_ready(a, env, me, g, e)?;
        }
        Ok(Settled::Published)
    } else if pool::free(a, idx, w)? {
        Ok(Settled::Freed)
    } else {
        Ok(Settled::Raced)
    }
}

/// What [`settle_dead_send`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settled {
    /// The message had been linked: we published it.
    Published,
    /// The message had not been linked: we freed its slot.
    Freed,
    /// Another settler changed the slot first.
    Raced,
    /// Its group's claim is held by a live participant: try later.
    Busy,
}

/// Whether node `idx` is reachable in the group its header names (walks under the claim).
/// `None` when the group's claim is held by a live participant: the check is left for a later
/// recovery rather than waiting (its holder may be stopped).
fn linked(a: &Arena<'_>, env: &dyn Env, me: u64, h: &MsgHeader, idx: u32) -> PResult<Option<bool>> {
    // Relaxed: a dead producer's last write; validated by the walk.
    let g = h.group_epoch0.load(Ordering::Relaxed) as u32;
    let Ok(e) = a.group(g) else {
        return Ok(Some(false));
    };
    // Acquire: SYNC POINT(group-publish).
    let st = e.state.load(Ordering::Acquire);
    if gstate::kind(st) != gstate::ACTIVE {
        return Ok(Some(false));
    }
    let cw = match group::try_claim(a, env, e, me, gstate::ginc(st)) {
        TryClaim::Acquired { cw, .. } => cw,
        TryClaim::Gone => return Ok(Some(false)),
        TryClaim::Busy(_) => return Ok(None),
    };
    let mut found = false;
    let mut cur = e.head.load(Ordering::Acquire);
    for _ in 0..a.steps() {
        let l = a.link(node::index(cur))?.load(Ordering::Acquire);
        let next = node::index(l);
        if node::inc(l) != node::inc(cur) || next == node::NIL || next == node::CLOSED {
            break;
        }
        if next == idx {
            found = true;
            break;
        }
        cur = node::pack(node::inc(a.link(next)?.load(Ordering::Acquire)), next);
    }
    release(a, env, me, cw, g)?;
    Ok(Some(found))
}
