//! Quarantine: what a corrupted word made unreadable is taken out of the queue, counted and
//! reported, so that it breaks one message or one group and never the queue.
//!
//! * **A message that cannot be read** (its lengths exceed its slot, its text or its group id is
//!   not UTF-8, its attributes do not decode): the receive that took it removes it at once,
//!   under the group's claim, as a dead-letter move would ([`message`]), and goes on with the
//!   group's next message. It cannot be moved to a dead-letter queue (its bytes are not a
//!   message), so it is dropped and counted.
//! * **A group whose list cannot be walked** (a link or `head` names a free slot, another
//!   group's message, or nothing): see [`begin`] and [`finish`].
//!
//! Both are counted in [`QuarantineLine`](crate::layout::QuarantineLine), with the time and the
//! slot of the last message, for `attributes()`, `shmfifo stat` and the Prometheus output.

use super::group::{self, Patience, TryClaim};
use super::list::{remove, successor, Cycle, Next};
use super::receive::Taken;
use super::release::{or_release, release, release_claim_word};
use super::{gstate, node, pool, vis, words, Arena, Env, Fault, Owner, PResult, MAX_STEPS};
use crate::layout::{GroupEntry, MsgHeader, MsgWords};
use crate::sync::Ordering;

/// Under the group's claim: takes out the message of words `own` (slot `idx`, incarnation `inc`) that a
/// receive holds in flight with `vis` word `w` but could not read. Returns whether this call
/// removed it (a failed CAS: a purge got there first).
pub fn message(
    a: &Arena<'_>,
    env: &dyn Env,
    me: Owner,
    own: &MsgWords,
    idx: u32,
    inc: u32,
    w: u64,
) -> bool {
    if !remove(a, me, own, w) {
        return false;
    }
    note(a, env, 1, 0, node_ref(idx, inc));
    true
}

pub use super::words::quarantined_ref as node_ref;

/// Counts `messages` and `groups` quarantined, the last message being `last_ref`.
fn note(a: &Arena<'_>, env: &dyn Env, messages: u64, groups: u64, last_ref: u64) {
    let q = &a.hdr.quarantine.0;
    // Relaxed: statistics for operators; nothing is ordered by them.
    q.messages.fetch_add(messages, Ordering::Relaxed);
    q.groups.fetch_add(groups, Ordering::Relaxed);
    q.last_ms.store(env.now_ms(), Ordering::Relaxed);
    if messages > 0 {
        q.last_ref.store(last_ref, Ordering::Relaxed);
    }
}

/// A group being quarantined: marked, its list closed, its senders waited for.
#[derive(Debug)]
pub struct Quarantine {
    /// Group table index.
    pub g: u32,
    /// The incarnation quarantined.
    pub ginc: u32,
    /// The published messages of the group, as `(slot, incarnation, member, vis word)` (the
    /// member of a pack, layout 22; 0 in a slot of its own), in the order they were sent
    /// (their positions).
    pub messages: Vec<(u32, u32, u8, u64)>,
}

/// Whether group `g` (entry `e`), whose claim we hold, can be walked from `head` to its end:
/// every node reachable is a live message of `g` (or its sentinel), within [`Arena::steps`].
/// An added segment this process could not map ([`Fault::Mapping`]: a local failure, not a
/// damaged list) is an error, never a reason to quarantine.
pub fn walkable(a: &Arena<'_>, g: u32, e: &GroupEntry) -> PResult<bool> {
    // Acquire: we hold the claim (SYNC POINT(claim)).
    let mut cur = e.head.load(Ordering::Acquire);
    if !of_group(a, g, cur)? {
        return Ok(false);
    }
    let mut cycle = Cycle::from(cur);
    for _ in 0..a.steps() {
        match successor(a, cur) {
            Ok(Next::End) => return Ok(true),
            Ok(Next::Node(next, m, ninc)) => {
                // Acquire: the node's state as its last writer left it.
                if vis::state(m.own.vis.load(Ordering::Acquire)) == vis::State::Free
                    // Relaxed: written before the link CAS that made it reachable.
                    || words::group_of(m.group_epoch0.load(Ordering::Relaxed)) != g
                {
                    return Ok(false);
                }
                cur = node::pack(ninc, next);
                if cycle.met_again(cur) {
                    return Ok(false);
                }
            }
            Err(f @ Fault::Mapping(_)) => return Err(f),
            Ok(Next::Stale) | Err(_) => return Ok(false),
        }
    }
    Ok(false) // a cycle
}

/// Whether node reference `r` names group `g`'s sentinel or a slot holding a message of `g`.
fn of_group(a: &Arena<'_>, g: u32, r: u64) -> PResult<bool> {
    let i = node::index(r);
    if i >= a.total {
        return Ok(i == a.sentinel_index(g));
    }
    match a.msg(i) {
        // Relaxed: a check under the claim; the walk re-reads what it uses.
        Ok(m) => Ok(words::group_of(m.group_epoch0.load(Ordering::Relaxed)) == g),
        Err(f @ Fault::Mapping(_)) => Err(f),
        Err(_) => Ok(false),
    }
}

/// Starts (or resumes) quarantining group `g` if its list cannot be walked:
///
/// 1. **Claim and confirm**: the group's claim, then [`walkable`] under it (a sound group is
///    released untouched: `Ok(None)`).
/// 2. **Mark**: the state word goes from `ACTIVE(ginc)` to `TOMBSTONE(ginc)` owned by us, which
///    no insert reuses and no lookup finds: new sends of the group's id start a fresh group,
///    and appenders that looked it up before fail their `is_active` check or the link CAS
///    below and look again.
/// 3. **Close**: every node of the group (its sentinel, and each slot whose `group_epoch0`
///    names it) and every node linked after one of them gets `CLOSED` in place of `NIL`, so no
///    append can succeed any more (the link word is where appenders and we agree).
/// 4. **Wait for senders** that linked before the close: their slots are `CLAIMED` by a live
///    participant and name the group; they publish within a moment (or are stopped: then
///    [`Fault::Busy`](super::Fault::Busy), the mark stays, and the next recovery resumes here).
///
/// Resuming: a `TOMBSTONE` owned by us or by a dead participant is taken over at step 3.
/// Returns the group's published messages for the caller to move to the dead-letter queue or
/// drop, then [`finish`].
///
/// Every wait (for the claim, for senders) draws on `p`, which the caller may share between
/// groups, so a pass over many groups waits one bound in all, not one per group.
pub fn begin(
    a: &Arena<'_>,
    env: &dyn Env,
    me: Owner,
    g: u32,
    p: &mut Patience,
) -> PResult<Option<Quarantine>> {
    let e = a.group(g)?;
    // Acquire: SYNC POINT(group-publish).
    let st = e.state.load(Ordering::Acquire);
    let ginc = gstate::ginc(st);
    let marked = gstate::pack(ginc, gstate::TOMBSTONE, me);
    match gstate::kind(st) {
        gstate::ACTIVE => {
            let cw = loop {
                match group::try_claim(a, env, e, me, ginc) {
                    TryClaim::Acquired { cw, .. } => break cw,
                    TryClaim::Gone => return Ok(None),
                    TryClaim::Busy(_) => p.wait(
                        env,
                        "a group claim is held by a live participant (stopped?)",
                    )?,
                }
            };
            if or_release(e, cw, walkable(a, g, e))? {
                or_release(e, cw, release(a, env, me, cw, g))?;
                return Ok(None);
            }
            crash_point!();
            // SeqCst: appenders' `is_active` loads and link CASes are ordered against the mark
            // (a sender that saw ACTIVE linked before the close below, or fails there).
            if e.state
                .compare_exchange(st, marked, Ordering::SeqCst, Ordering::Relaxed)
                .is_err()
            {
                release_claim_word(e, cw);
                return Ok(None);
            }
            // Relaxed: a capacity counter (the group no longer counts as active).
            a.hdr.active_groups.0.fetch_sub(1, Ordering::Relaxed);
            // The claim word is of this incarnation only: nobody acts on a group that is not
            // ACTIVE, and a later incarnation takes a stale claim over.
            release_claim_word(e, cw);
            crash_point!();
        }
        gstate::TOMBSTONE
            if gstate::owner(st) != Owner::NOBODY
                && (gstate::owner(st) == me || a.owner_dead(env, gstate::owner(st))) =>
        {
            // A quarantine left by a dead (or our own earlier, busy) recovery: take it over.
            // SeqCst: as the mark.
            if e.state
                .compare_exchange(st, marked, Ordering::SeqCst, Ordering::Relaxed)
                .is_err()
            {
                return Ok(None);
            }
        }
        _ => return Ok(None),
    }
    // The sentinel's current incarnation (layout 19: a reopen moves it on). Acquire: we hold
    // the claim, or took the quarantine over from a dead participant.
    let sinc = node::inc(e.sentinel.load(Ordering::Acquire));
    close(a, g, node::pack(sinc, a.sentinel_index(g)));
    for (i, h) in a.slots() {
        // Acquire: pairs with the Release of whoever wrote the slot last, so `group_epoch0`
        // is the one of the state read.
        let w = h.own.vis.load(Ordering::Acquire);
        if vis::state(w) != vis::State::Free
            // Relaxed: ordered by the Acquire load above.
            && words::group_of(h.group_epoch0.load(Ordering::Relaxed)) == g
        {
            // Acquire: the incarnation of the node to close.
            close(
                a,
                g,
                node::pack(node::inc(h.link.load(Ordering::Acquire)), i),
            );
        }
    }
    crash_point!();
    // Senders that linked before the close publish their messages now; wait for them.
    loop {
        let busy = a.slots().any(|(i, h)| {
            // Acquire: the slot's latest state.
            let w = h.own.vis.load(Ordering::Acquire);
            matches!(vis::state(w), vis::State::Claimed(o) if o != me && !a.owner_dead(env, o))
                // Relaxed: ordered by the Acquire load above.
                && words::group_of(h.group_epoch0.load(Ordering::Relaxed)) == g
                && linked(a, g, i)
        });
        if !busy {
            break;
        }
        p.wait(
            env,
            "a sender of a quarantined group is still publishing (stopped?)",
        )?;
    }
    let mut messages: Vec<(u32, u32, u8, u64, u64)> = Vec::new();
    for (i, h) in a.slots() {
        // Acquire: as above.
        let w = h.own.vis.load(Ordering::Acquire);
        // Relaxed: ordered by the Acquire load above.
        if !matches!(vis::state(w), vis::State::Published(_) | vis::State::Packed)
            || words::group_of(h.group_epoch0.load(Ordering::Relaxed)) != g
        {
            continue;
        }
        // Acquire: the incarnation the message ids are made of.
        let inc = node::inc(h.link.load(Ordering::Acquire));
        // Relaxed: as above.
        let pos = h.pos.load(Ordering::Relaxed);
        // SAFETY: the group is marked: nobody receives, moves or frees its messages, and this
        // copies nothing into payloads. A pack whose directory does not check is a damaged
        // message: left out, then freed by `finish`.
        let Ok(members) = (unsafe { super::pack::words(a, i, h, w) }) else {
            continue;
        };
        for (j, own) in members.iter().enumerate() {
            // Acquire: the message's state (a pack member's: its own word).
            let mw = own.vis.load(Ordering::Acquire);
            if let vis::State::Published(_) = vis::state(mw) {
                messages.push((i, inc, j as u8, mw, pos.wrapping_add(j as u64)));
            }
        }
    }
    messages.sort_by_key(|m| m.4);
    Ok(Some(Quarantine {
        g,
        ginc,
        messages: messages
            .into_iter()
            .map(|(i, inc, j, w, _)| (i, inc, j, w))
            .collect(),
    }))
}

/// Whether the message in slot `target` of group `g` is linked: some node's link names it (a sender
/// whose append failed at the close never is, and looks the group up again).
fn linked(a: &Arena<'_>, g: u32, target: u32) -> bool {
    let named = |l: u64| node::index(l) == target;
    // Acquire: links are published by SeqCst CASes.
    let sentinel = a
        .link(a.sentinel_index(g))
        .is_ok_and(|w| named(w.load(Ordering::Acquire)));
    sentinel
        || a.slots()
            .any(|(_, x)| named(x.link.load(Ordering::Acquire)))
}

/// Closes the chain that starts at node `r` of group `g`: follows links through nodes of `g`
/// and turns the first `NIL` into `CLOSED` (keeping the incarnation), so no append can link
/// after it. Bounded by [`Arena::steps`]; stops at a freed node or one of another group.
fn close(a: &Arena<'_>, g: u32, mut r: u64) {
    let mut cycle = Cycle::from(r);
    for _ in 0..a.steps() {
        let Ok(lw) = a.link(node::index(r)) else {
            return;
        };
        // Acquire: SYNC POINT(node-link), a node linked here is seen with its fields.
        let l = lw.load(Ordering::Acquire);
        if node::inc(l) != node::inc(r) {
            return; // freed meanwhile
        }
        match node::index(l) {
            node::CLOSED => return,
            node::NIL => {
                // SYNC POINT(quarantine-close): SeqCst, against appenders' SeqCst link CAS
                // (`send::append`); exactly one of the two wins per link word.
                if lw
                    .compare_exchange(
                        l,
                        node::pack(node::inc(l), node::CLOSED),
                        Ordering::SeqCst,
                        Ordering::Relaxed,
                    )
                    .is_ok()
                {
                    return;
                }
            }
            next => {
                let Ok(m) = a.msg(next) else { return };
                // Relaxed: written before the link CAS we just read with Acquire.
                if words::group_of(m.group_epoch0.load(Ordering::Relaxed)) != g {
                    return;
                }
                // Acquire: the next node's incarnation.
                r = node::pack(node::inc(m.link.load(Ordering::Acquire)), next);
                if cycle.met_again(r) {
                    return; // a damaged list: closed wherever it can be
                }
            }
        }
    }
}

/// The word [`finish`] frees slot `i` (header `h`, `vis` word `w`, a message of the group, or a
/// pack of its messages) from, and how many published messages this call removed (counted);
/// `None` leaves the slot alone (a live producer's claim, ours, a free slot).
///
/// Counts a deletion a handle holder left uncounted in `own` (`vis::DELETED_UNCOUNTED`,
/// layout 25: its group's claim was held), as the cleanup that would have freed it does: a CAS
/// to `DELETED` first, so that a quarantine resumed after our death does not count it again.
fn count_uncounted(a: &Arena<'_>, me: Owner, own: &MsgWords) {
    // Acquire: as `finish`'s load.
    let w = own.vis.load(Ordering::Acquire);
    // AcqRel: as a removal (the group is marked: only quarantiners write its words).
    if vis::uncounted(w)
        && own
            .vis
            .compare_exchange(
                w,
                vis::pack(vis::epoch(w), vis::DELETED),
                Ordering::AcqRel,
                Ordering::Relaxed,
            )
            .is_ok()
    {
        super::accounting::count(a, me, crate::layout::counter::DELETED, 1);
    }
}

/// A published message may change under us: its receipt holder deletes it or changes its
/// visibility, a recovery releases it. Each is one step, so a removal that lost looks at the
/// word again (a bounded number of times): the group becomes a plain tombstone after
/// `finish`, which no later pass looks at, so a slot skipped here would leak (loom
/// `a_quarantine_racing_a_receipt_holders_delete_frees_every_slot`). A pack's members are
/// removed one by one so, then its unit word goes `DELETED` (at its members' largest epoch,
/// [`super::pack::deleted_word`]) for the free.
fn freeable(
    a: &Arena<'_>,
    env: &dyn Env,
    me: Owner,
    i: u32,
    h: &MsgHeader,
    mut w: u64,
) -> Option<(u64, u64)> {
    // A pack's members removed by earlier tries of this loop.
    let mut removed = 0;
    for _ in 0..MAX_STEPS {
        return match vis::state(w) {
            vis::State::Published(_) => {
                if !remove(a, me, &h.own, w) {
                    // Acquire: as `finish`'s load.
                    w = h.own.vis.load(Ordering::Acquire);
                    continue;
                }
                // Acquire: the incarnation of the message removed. Counted at once, so a
                // quarantine that dies later has counted what it removed.
                note(
                    a,
                    env,
                    1,
                    0,
                    node_ref(i, node::inc(h.link.load(Ordering::Acquire))),
                );
                Some((vis::pack(vis::next(vis::epoch(w)), vis::DELETED), 1))
            }
            vis::State::Packed => {
                // SAFETY: the group is marked: nobody receives, moves or frees its messages,
                // and this copies nothing into payloads.
                let deleted = match unsafe { super::pack::words(a, i, h, w) } {
                    // Every member removed, each counted at once (as above), what one try
                    // removed counted even when a member changed under it (the next try looks
                    // again, within this loop's bound); then the unit word at their largest
                    // epoch (every member stays deleted: nobody writes a member after its
                    // removal, a handle holder's CAS expects a published word).
                    Ok(members) => {
                        let inc = node::inc(h.link.load(Ordering::Acquire));
                        let (k, done) = super::list::remove_unit(a, me, h, i, w, |_| true).ok()?;
                        note(a, env, k, 0, node_ref(i, inc));
                        removed += k;
                        if !done {
                            // Acquire: as `finish`'s load.
                            w = h.own.vis.load(Ordering::Acquire);
                            continue;
                        }
                        for own in members {
                            count_uncounted(a, me, own);
                        }
                        super::pack::deleted_word(w, members)
                    }
                    // A damaged pack: freed whole, as a damaged message is, from a `DELETED`
                    // word half the epoch space on (its members' epochs are unknown: no
                    // handle of theirs matches a reused slot's words for 2^23 reuses).
                    Err(_) => vis::pack(vis::epoch(w).wrapping_add(1 << 23), vis::DELETED),
                };
                // AcqRel: as a removal. Only the claim holder writes a pack's unit word, and
                // the group is marked: nobody holds its claim.
                if h.own
                    .vis
                    .compare_exchange(w, deleted, Ordering::AcqRel, Ordering::Relaxed)
                    .is_err()
                {
                    // Acquire: as `finish`'s load.
                    w = h.own.vis.load(Ordering::Acquire);
                    continue;
                }
                Some((deleted, removed))
            }
            // A deletion left uncounted (layout 25): counted first, then looked at again.
            vis::State::Deleted if vis::uncounted(w) => {
                count_uncounted(a, me, &h.own);
                // Acquire: as `finish`'s load.
                w = h.own.vis.load(Ordering::Acquire);
                continue;
            }
            vis::State::Deleted => Some((w, 0)),
            vis::State::Claimed(o) if o != me && a.owner_dead(env, o) => Some((w, 0)),
            _ => None,
        };
    }
    None
}

/// Ends a quarantine begun by [`begin`], once the caller has moved or dropped its messages:
/// frees every slot of the group (its published messages, deleted nodes, and sends of dead
/// producers), makes the entry a plain, reusable tombstone, and counts it. Returns how many
/// published messages it removed. Safe to repeat after a crash (every step is a CAS from the
/// state it found).
pub fn finish(a: &Arena<'_>, env: &dyn Env, me: Owner, q: &Quarantine) -> PResult<u64> {
    let e = a.group(q.g)?;
    let marked = gstate::pack(q.ginc, gstate::TOMBSTONE, me);
    // Acquire: our mark, or a resumer's.
    if e.state.load(Ordering::Acquire) != marked {
        return Ok(0);
    }
    let mut removed = 0;
    for (i, h) in a.slots() {
        // Acquire: as in `begin`.
        let w = h.own.vis.load(Ordering::Acquire);
        // Relaxed: ordered by the Acquire load above.
        if words::group_of(h.group_epoch0.load(Ordering::Relaxed)) != q.g {
            continue;
        }
        let Some((w, published)) = freeable(a, env, me, i, h, w) else {
            continue;
        };
        removed += published;
        crash_point!();
        pool::free(a, env, i, w)?;
    }
    // Release: our frees happen before a reuser's Acquire CAS of `state`.
    if e.state
        .compare_exchange(
            marked,
            gstate::pack(q.ginc, gstate::TOMBSTONE, Owner::NOBODY),
            Ordering::Release,
            Ordering::Relaxed,
        )
        .is_ok()
    {
        note(a, env, 0, 1, 0);
    }
    Ok(removed)
}

/// Whether group `g` may need a quarantine (checked without its claim, so a group changing
/// under the look may be suspected wrongly: [`begin`] checks again under the claim): it is
/// `ACTIVE` and cannot be walked, or a quarantine of it was left by a dead participant (or
/// by us, busy).
pub fn suspect(a: &Arena<'_>, env: &dyn Env, me: Owner, g: u32) -> bool {
    let Ok(e) = a.group(g) else { return false };
    // Acquire: SYNC POINT(group-publish).
    let st = e.state.load(Ordering::Acquire);
    match gstate::kind(st) {
        // A group this process cannot map now is not suspected: `begin` would fail on it.
        gstate::ACTIVE => walkable(a, g, e).is_ok_and(|w| !w),
        gstate::TOMBSTONE => {
            let o = gstate::owner(st);
            o != Owner::NOBODY && (o == me || a.owner_dead(env, o))
        }
        _ => false,
    }
}

/// A published message of a group being quarantined (`member` of the pack in slot `idx`, or
/// 0, the slot's own message), as a receive would hand it over (to the dead-letter mover):
/// its header, group entry and payload.
pub fn taken<'a>(
    a: &Arena<'a>,
    g: u32,
    idx: u32,
    inc: u32,
    member: u8,
    w: u64,
) -> PResult<Taken<'a>> {
    let m = a.msg(idx)?;
    // Relaxed: written before the message was published; nobody else acts on a marked group.
    let ge = m.group_epoch0.load(Ordering::Relaxed);
    // Acquire: the unit's state (a pack's directory was written before it).
    let u = m.own.vis.load(Ordering::Acquire);
    // SAFETY: the group is marked: nobody receives, moves or frees its messages until
    // `finish`, which runs after the caller is done with them; this copies nothing into
    // payloads.
    let (own, payload) = unsafe {
        match super::pack::unit(a, idx, m, u)? {
            super::pack::Unit::Pack(p) => (
                p.members
                    .get(usize::from(member))
                    .ok_or(Fault::Corrupted("pack member"))?,
                p.bytes(usize::from(member))
                    .ok_or(Fault::Corrupted("pack member"))?,
            ),
            super::pack::Unit::One(own) if member == 0 => {
                (own, a.payload(idx, own.lens.load(Ordering::Relaxed), ge)?)
            }
            super::pack::Unit::One(_) => return Err(Fault::Corrupted("pack member")),
        }
    };
    let epoch = vis::epoch(w);
    Ok(Taken {
        idx,
        inc,
        member,
        own,
        epoch,
        receive_count: epoch.wrapping_sub(words::unpack_group_epoch0(ge).1) & vis::EPOCH_MASK,
        header: m,
        group: a.group(g)?,
        payload,
        vis: w,
    })
}
