//! A receive's work under a group's claim: clean up, then take the group's visible prefix
//! (R3, R5), removing expired messages (T1) and moving those past `maxReceiveCount` (X1) on
//! the way ([`take`]), and what it needs to hold and walk the group.

use super::*;

/// Under the claim: cleans up, then takes the group's visible prefix, removing expired
/// messages (T1) and moving those past `maxReceiveCount` (X1) on the way.
/// Inlined into `receive`, its one caller, as it was before it moved out of receive.rs (a
/// function of its own in another codegen unit cost about 100 instructions a message).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub(super) fn take(
    a: &Arena<'_>,
    env: &dyn Env,
    me: Owner,
    cw: u64,
    g: u32,
    e: &GroupEntry,
    want: usize,
    policy: &mut Policy<'_>,
    rep: &mut Received,
    sink: &mut Sink<'_>,
) -> PResult<Option<usize>> {
    if cleanup_before_take(a, env, cw, g, e)? == Cleaned::Retired {
        return Ok(None);
    }
    let t = Times::load(a, env);
    // A deadline is never 0 (that means "never received").
    let deadline = t
        .now
        .checked_add(policy.vt_ms)
        .filter(|&d| d <= vis::MAX_DEADLINE)
        .ok_or(Fault::ClockRange)?
        .max(1);
    let c = Holder {
        a,
        env,
        me,
        e,
        t,
        deadline,
        wall: env.wall_ms(),
        fresh: core::cell::Cell::new(0),
        took: core::cell::Cell::new(0),
        again: core::cell::Cell::new(0),
    };
    // The walk, then the in-flight count (R8) changed once for every never-received message it
    // marked (layout 20: through the take's `RECEIVED` less `VISIBILITY_EXPIRIES` counts, up to
    // three adds of its own record's words a group), whatever way the walk ended (an error
    // too: those messages are in flight now). A receiver that dies in between leaves the count
    // low by at most this take's batch, as one dying between a CAS and its count did; a census
    // corrects it once the count says full.
    // (Counting ahead of the CASes instead erred high on a death, but a census running
    // meanwhile folded the reservation into its correction and left the count low.)
    let walked = (|| -> PResult<(u64, u64)> {
        // Acquire: we hold the claim, the previous holder's head store is visible (SYNC POINT(claim)).
        let mut cur = e.head.load(Ordering::Acquire);
        let first = cur;
        let mut cycle = Cycle::from(cur);
        // Whether the last step moved to the next node (a step that looks again stays; a node
        // whose link names itself moves to the same reference).
        let mut advanced = false;
        let (mut moved, mut expired) = (0, 0);
        for _ in 0..a.steps() {
            if c.took.get() == want {
                break;
            }
            // Each node the walk moved to, checked once.
            if core::mem::take(&mut advanced) && cycle.met_again(cur) {
                break; // a damaged list
            }
            // The first message was fetched for writing by the cleanup; those after it here.
            let step = if cur == first {
                successor
            } else {
                successor_for_write
            };
            let (next, m, ninc) = match step(a, cur)? {
                Next::Stale => return Err(Fault::Corrupted("group node freed under its claim")),
                Next::End => break,
                Next::Node(next, m, ninc) => (next, m, ninc),
            };
            // SeqCst: SYNC POINT(ready-check) (see `receive`).
            let w = m.own.vis.load(Ordering::SeqCst);
            if vis::state(w) != vis::State::Free
                // Relaxed: written before the link CAS that made the node reachable (Acquire in
                // `successor`); a node of another group means a corrupted link.
                && words::group_of(m.group_epoch0.load(Ordering::Relaxed)) != g
            {
                return Err(Fault::Corrupted(
                    "another group's message linked in a group",
                ));
            }
            match vis::state(w) {
                vis::State::Deleted => {
                    cur = node::pack(ninc, next);
                    advanced = true;
                    continue;
                }
                vis::State::Free => return Err(Fault::Corrupted("free slot linked in a group")),
                vis::State::Claimed(o) => {
                    if !a.owner_dead(env, o) {
                        break; // its producer is publishing it right now
                    }
                    publish_orphan(a, env, me, m, next, w);
                    continue; // we hold the claim, so no hint: the loop looks at it again
                }
                vis::State::Published(_) | vis::State::Packed => {}
            }
            // A pack's directory opened and checked once a node (its members' bytes are read
            // as they are taken).
            let pack = if vis::state(w) == vis::State::Packed {
                // Relaxed: written before the link CAS that published the node (Acquire in
                // `successor`).
                let unit = m.own.lens.load(Ordering::Relaxed);
                // SAFETY: we hold the group claim, so nobody frees or rewrites the node while
                // we look, and the sink copies nothing into it. Read for writing: the walk
                // takes or passes the members next (a receive's first look at a pack).
                Some(unsafe { pack::open_to_take(a, next, unit) }?)
            } else {
                None
            };
            let packed = pack.is_some();
            let words: &[MsgWords] = match &pack {
                Some(p) => p.members,
                None => core::slice::from_ref(&m.own),
            };
            // Relaxed: written before the link CAS that published the node (Acquire above).
            let sent = m.sent.load(Ordering::Relaxed);
            let at = |j| At {
                m,
                words,
                pack: pack.as_ref(),
                j,
                idx: next,
                inc: ninc,
                sent,
                g,
            };
            if !packed {
                // A message of its own, its word loaded above: taken, passed or removed, the
                // walk moves on; changed under us, the node is stepped to again.
                match c.visit(&at(0), w, policy, rep, sink, &mut moved, &mut expired)? {
                    Visit::Pass => {
                        cur = node::pack(ninc, next);
                        advanced = true;
                    }
                    Visit::Again => {}
                    Visit::Stop => break,
                }
                continue;
            }
            // A pack's members in order (R3 member by member: a deleted one is passed, an
            // in-flight one stops the group; one that changed under us is looked at again in
            // place: a member taken by this walk is in flight now, so the walk cannot start
            // the pack over).
            let mut end = false;
            'members: for (j, own) in words.iter().enumerate() {
                for _ in 0..MAX_STEPS {
                    if c.took.get() == want {
                        end = true;
                        break 'members;
                    }
                    // SeqCst: SYNC POINT(ready-check), as the unit's above.
                    let mw = own.vis.load(Ordering::SeqCst);
                    match c.visit(&at(j), mw, policy, rep, sink, &mut moved, &mut expired)? {
                        Visit::Pass => continue 'members,
                        Visit::Stop => {
                            end = true;
                            break 'members;
                        }
                        Visit::Again => {}
                    }
                }
                return Err(Fault::Corrupted("a pack member changed without end"));
            }
            if end {
                break;
            }
            cur = node::pack(ninc, next);
            advanced = true;
        }
        Ok((moved, expired))
    })();
    // A loom model's crash returns through here: the dead participant does nothing more.
    #[cfg(shmfifo_loom)]
    let dead = crate::protocol::crash::crashed();
    #[cfg(not(shmfifo_loom))]
    let dead = false;
    if !dead {
        // Layout 20: the in-flight count's share of a first receive is its `RECEIVED` count
        // less `VISIBILITY_EXPIRIES` (a receive again of a message already counted in flight),
        // so a take adds to its own counters only (one locked instruction less a receive than
        // a separate in-flight word). A never-received message marked in flight but not handed
        // out (unreadable, quarantined: its removal subtracts it) is added to `in_flight`.
        // `VISIBILITY_EXPIRIES` first: a census between two of these adds then leaves the
        // count high (the safe side), never low, as one between the CASes and the adds does.
        let (took, again) = (c.took.get() as u64, c.again.get());
        count(a, me, counter::VISIBILITY_EXPIRIES, again);
        count(a, me, counter::RECEIVED, took);
        let unread = c.fresh.get().wrapping_sub(took.wrapping_sub(again));
        if unread != 0 {
            account_in_flight(a, me, unread as i64);
        }
    }
    // The messages taken are in flight whatever ended the walk: their deadline is filed on
    // the wheel, so that a sweep makes them visible again at its end (an error after a take
    // left them to the periodic sweep's cursor).
    if !dead && c.took.get() > 0 && policy.vt_ms > 0 {
        // Takes of never-received messages were stores: one SeqCst fence orders them all
        // before the wheel's and `next_expiry`'s loads (SYNC POINT(expiry-wheel),
        // SYNC POINT(expiry-publish)), where a CAS each did before (on x86 a locked `or` on
        // the stack: one locked instruction for the run).
        let how = if c.fresh.get() > 0 {
            crate::sync::fence(Ordering::SeqCst);
            timers::Published::ByFence
        } else {
            timers::Published::ByRmw
        };
        let filed = publish_deadline(a, g, deadline, how);
        // A walk's error is what the caller hears, unless the filing stopped us (a loom
        // model's death: the caller must not release the claim after it).
        if walked.is_ok() || filed.is_err_and(crate::protocol::stopped) {
            filed?;
        }
    }
    let (moved, expired) = walked?;
    let taken = c.took.get();
    rep.moved += moved;
    rep.expired += expired;
    count(a, me, counter::MOVED_TO_DEAD_LETTER, moved);
    count(a, me, counter::RETENTION_EXPIRIES, expired);
    // Removed messages are deleted nodes: move `head` past them now, as a delete's cleanup
    // would, so that a producer appending behind them sees its predecessor at `head` and
    // hints the group (SYNC POINT(ready-check)). Taken messages stop the cleanup, so a retire
    // here (only of a group a dead reclaimer closed) means nothing was taken.
    if (moved > 0 || expired > 0) && cleanup(a, env, cw, g, e)? == Cleaned::Retired {
        return Ok(None);
    }
    Ok(Some(taken))
}

/// Message `j`'s payload bytes: a pack member's (`pack`), or the message's own slot's (its
/// words `own`).
///
/// # Safety
/// As [`Arena::payload`]'s.
#[inline]
pub(super) unsafe fn bytes_of<'a>(
    a: &Arena<'a>,
    pack: Option<&Pack<'a>>,
    own: &MsgWords,
    idx: u32,
    j: usize,
    ge: u64,
) -> PResult<&'a [u8]> {
    match pack {
        // Relaxed: written before the node was published, which the caller observed.
        // SAFETY: the caller's contract.
        None => unsafe { a.payload(idx, own.lens.load(Ordering::Relaxed), ge) },
        // SAFETY: the caller's contract.
        Some(p) => unsafe { p.bytes(j) }.ok_or(Fault::Corrupted("pack member")),
    }
}

/// Linked by a producer that died before publishing: the send committed at the link CAS, so
/// the claim holder publishes it on its behalf, its dedup entry settled first (invariant D: a
/// retry of its dedup id must find the message). A corrupted dedup entry must not wedge the
/// group: published all the same.
fn publish_orphan(a: &Arena<'_>, env: &dyn Env, me: Owner, m: &MsgHeader, idx: u32, w: u64) {
    if settle_known(a, env, me, idx, w, Link::Linked, Then::NoHint).is_err() {
        // Relaxed: written before the link CAS, which the walk read with Acquire.
        let packed = m.own.lens.load(Ordering::Relaxed) >> 56 == u64::from(words::LENS_PACKED);
        // SeqCst: as the settle's own publication (SYNC POINT(ready-check)).
        let _ = m.own.vis.compare_exchange(
            w,
            vis::pack(
                vis::epoch(w),
                crate::protocol::settle::published_unit(packed),
            ),
            Ordering::SeqCst,
            Ordering::Relaxed,
        );
    }
}

/// Files group `g` on the expiry wheel at `at` and lowers `next_expiry` to it: a sweep wakes
/// for the group then (a delay or a retention period that ends while its head is locked).
fn wake_at(a: &Arena<'_>, g: u32, at: u64) -> PResult<()> {
    timers::file(a, g, at)?;
    // AcqRel: as the deadline's fetch_min in `publish_deadline`.
    a.hdr.next_expiry.0.fetch_min(at, Ordering::AcqRel);
    Ok(())
}

/// After a take: the group filed on the wheel at the messages' visibility deadline, and
/// `next_expiry` lowered to it where it is earlier.
fn publish_deadline(a: &Arena<'_>, g: u32, deadline: u64, how: timers::Published) -> PResult<()> {
    // SYNC POINT(expiry-wheel): the group filed on the wheel at its deadline, after the SeqCst
    // CASes, or the stores and the fence, that published it (one arming for every message
    // taken: they share the deadline).
    timers::file_after(a, g, deadline, how)?;
    // SYNC POINT(expiry-publish): lower `next_expiry` only when our deadline is earlier than
    // it: usually an earlier deadline is pending, and a read leaves the header's line shared
    // instead of taking it exclusive on every receive. A SeqCst load after our SeqCst deadline
    // CASes, against a sweeper's SeqCst swap, fence, then scan: either this load sees the
    // sweeper's reset (MAX, so we lower it) or its scan sees our deadlines; and a later sweep,
    // due at the earlier deadline we saw, scans after our CASes.
    if deadline < how.load(&a.hdr.next_expiry.0) {
        // AcqRel: a sweeper's swap-then-fetch_min keeps our deadline (see `sweep`).
        a.hdr.next_expiry.0.fetch_min(deadline, Ordering::AcqRel);
    }
    Ok(())
}

/// What a take knows for the whole group: the claim it holds and the instant it acts at.
struct Holder<'x, 'a> {
    a: &'x Arena<'a>,
    env: &'x dyn Env,
    me: Owner,
    e: &'x GroupEntry,
    t: Times,
    /// The visibility deadline of the messages taken.
    deadline: u64,
    /// Wall-clock now (the first receive's timestamp).
    wall: u64,
    /// Never-received messages this take marked in flight so far (see [`take`]).
    fresh: core::cell::Cell<u64>,
    /// Messages this take handed to the sink so far (see [`take`]).
    took: core::cell::Cell<usize>,
    /// Of those, messages received before (their visibility had ended).
    again: core::cell::Cell<u64>,
}

/// What [`Holder::hold`] did with one visible message.
enum Held {
    /// Handed to the sink, in flight now (`redelivered`: it had been received before).
    Taken { redelivered: bool },
    /// Out of the group: moved to the dead-letter queue (`moved`), or unreadable and
    /// quarantined.
    Gone { moved: bool },
    /// Changed under us (a purge, a move that lost its removal): look at it again.
    LookAgain,
    /// The group yields nothing more this time (the in-flight limit, a failed move).
    Stop,
}

/// Where a walk stands: message `j` of node `idx` (a pack's member, or the message itself),
/// its header, the node's messages' own words and its pack (if it is one), the node's enqueue
/// time, and the group.
struct At<'x, 'a> {
    m: &'a MsgHeader,
    words: &'a [MsgWords],
    pack: Option<&'x Pack<'a>>,
    j: usize,
    idx: u32,
    inc: u32,
    sent: u64,
    g: u32,
}

/// What [`Holder::visit`] did with one message of a walk.
enum Visit {
    /// Done with it (deleted, removed, taken, moved): the walk goes on with the next.
    Pass,
    /// Changed under us: look at it again.
    Again,
    /// The group yields nothing more this time.
    Stop,
}

impl Holder<'_, '_> {
    /// Under the claim: one message of the walk, whose state word is `w` (a member's must be
    /// published or deleted: anything else is a damaged pack): passed if deleted, removed if
    /// past retention (T1), a stop if in flight or delayed, else held ([`Holder::hold`]).
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn visit(
        &self,
        at: &At<'_, '_>,
        w: u64,
        policy: &mut Policy<'_>,
        rep: &mut Received,
        sink: &mut Sink<'_>,
        moved: &mut u64,
        expired: &mut u64,
    ) -> PResult<Visit> {
        let (a, t) = (self.a, &self.t);
        let own = &at.words[at.j];
        let d = match vis::state(w) {
            vis::State::Deleted => return Ok(Visit::Pass),
            vis::State::Published(d) => d,
            _ => return Err(Fault::Corrupted("a pack member's state")),
        };
        match t.standing(at.sent, d) {
            Standing::Expired => {
                // T1: gone, visible or in flight. (A failed CAS: changed, look again.)
                if remove(a, self.me, own, w) {
                    *expired += 1;
                    return Ok(Visit::Pass);
                }
                return Ok(Visit::Again);
            }
            Standing::InFlight => {
                // The group is locked from here on (R3). Retention may end before the
                // visibility timeout: wake a sweep for it (SYNC POINT(expiry-wheel): after the
                // SeqCst CAS that published `d`).
                if t.expiry(at.sent) < d {
                    wake_at(a, at.g, t.expiry(at.sent))?;
                }
                return Ok(Visit::Stop);
            }
            Standing::Delayed => {
                // L1, R4: delayed messages are at the tail and lock nothing; a sweep hints the
                // group when the delay ends (SYNC POINT(expiry-wheel): after the load that
                // found it published).
                wake_at(a, at.g, at.sent.saturating_add(t.delay))?;
                return Ok(Visit::Stop);
            }
            Standing::Visible => {}
        }
        Ok(match self.hold(at, w, d, policy, rep, sink)? {
            Held::Taken { redelivered } => {
                self.took.set(self.took.get() + 1);
                self.again.set(self.again.get() + u64::from(redelivered));
                Visit::Pass
            }
            Held::Gone { moved: m } => {
                *moved += u64::from(m);
                Visit::Pass
            }
            Held::LookAgain => Visit::Again,
            Held::Stop => Visit::Stop,
        })
    }

    /// Under the claim: takes visible message `at` (state word `w` with deadline field `d`),
    /// or moves it to the dead-letter queue past `maxReceiveCount`.
    #[inline(always)]
    fn hold(
        &self,
        at: &At<'_, '_>,
        w: u64,
        d: u64,
        policy: &mut Policy<'_>,
        rep: &mut Received,
        sink: &mut Sink<'_>,
    ) -> PResult<Held> {
        let (m, idx, inc) = (at.m, at.idx, at.inc);
        let own = &at.words[at.j];
        let member = at.j as u8;
        let a = self.a;
        let epoch = vis::next(vis::epoch(w));
        // Relaxed: stable while the message is published; we hold the claim.
        let ge = m.group_epoch0.load(Ordering::Relaxed);
        let receive_count = epoch.wrapping_sub(unpack_group_epoch0(ge).1) & vis::EPOCH_MASK;
        // SAFETY: we hold the group claim, so no participant can receive, delete or free this
        // message while we read.
        let payload = unsafe { bytes_of(a, at.pack, own, idx, at.j, ge) }?;
        if let Some((max_count, mover)) = policy.dead_letter.as_mut() {
            if receive_count > *max_count {
                // X1: this receive would deliver it for the (max+1)-th time: move it instead. A
                // mover that dies after its send and before the removal leaves the message
                // here; the next mover's send is a duplicate (the dead-letter queue dedups on
                // the message id, D8).
                let moved_ok = mover(&Taken {
                    idx,
                    inc,
                    member,
                    own,
                    epoch: vis::epoch(w),
                    receive_count: receive_count.wrapping_sub(1),
                    header: m,
                    group: self.e,
                    payload,
                    vis: w,
                });
                crash_point!();
                if !moved_ok {
                    rep.move_failed = true;
                    return Ok(Held::Stop);
                }
                // X4: the group goes on with its next message.
                return Ok(if remove(a, self.me, own, w) {
                    Held::Gone { moved: true }
                } else {
                    Held::LookAgain
                });
            }
        }
        if d == 0 {
            // R8: a first receive adds to the in-flight count.
            if policy.fresh_budget == 0 {
                rep.limited = true;
                return Ok(Held::Stop);
            }
            policy.fresh_budget -= 1;
        }
        // SYNC POINT(holder-record): Relaxed, before the CAS that publishes it:
        // `change_visibility` reads it after an Acquire load of `vis`. Nobody else can take
        // this visible message: we hold the group claim.
        own.recv_ms.store(
            crate::protocol::recv::pack(self.me, self.t.now),
            Ordering::Relaxed,
        );
        let held = vis::pack(epoch, vis::published(self.deadline));
        if d == 0 {
            // Never received: a store, not a CAS. While the word says so, only the claim
            // holder writes it: no receipt handle names this incarnation yet (so no delete,
            // visibility change or recovery release expects it), and purges, trims, moves
            // and quarantines of the group's messages all run under the claim we hold. The
            // payload reads are ordered after the producer's writes by the walk's SeqCst
            // load that found the word published. Release publishes the deadline and the
            // holder record to deleters, visibility changes and recovery's releases (their
            // Acquire loads). SYNC POINT(expiry-publish): the take's SeqCst fence before it
            // files the deadline ([`take`]) orders these stores, a fence for the whole run.
            // Damaged shared memory that breaks the claim's exclusion can make two takers
            // hand out the same message; it cannot make us read or write out of bounds.
            own.vis.store(held, Ordering::Release);
            // In flight now: counted when the walk ends (see `take`).
            self.fresh.set(self.fresh.get() + 1);
        } else if own
            .vis
            // Received before, its visibility ended: a holder of an earlier handle may still
            // delete or change it (its clock read before the deadline passed), so a CAS.
            // Acquire orders our payload reads after the producer's writes; Release publishes
            // the new deadline to deleters and other receivers. SYNC POINT(expiry-publish):
            // SeqCst, so that this deadline and the `next_expiry` load after the take are
            // ordered against a sweeper's swap and fence.
            .compare_exchange(w, held, Ordering::SeqCst, Ordering::Relaxed)
            .is_err()
        {
            return Ok(Held::LookAgain); // changed under us
        }
        crash_point!();
        // Relaxed: informational fields of a message we now hold. A load and a store, not a
        // CAS: only the holder of the group claim writes it after the send (which stores 0
        // before publishing), so nothing writes it between the two (one locked instruction
        // less a received message).
        if own.first_recv_ms.load(Ordering::Relaxed) == 0 {
            own.first_recv_ms.store(self.wall, Ordering::Relaxed);
        }
        let read = sink(&Taken {
            idx,
            inc,
            member,
            own,
            epoch,
            receive_count,
            header: m,
            group: self.e,
            payload,
            vis: held,
        });
        if !read {
            // A corrupted word made it unreadable: take it out, and go on with the group's
            // next message (it breaks itself, not its group). A failed CAS (a purge got there
            // first) removed it all the same.
            quarantine::message(a, self.env, self.me, own, idx, inc, held);
            return Ok(Held::Gone { moved: false });
        }
        Ok(Held::Taken {
            redelivered: d != 0,
        })
    }
}
