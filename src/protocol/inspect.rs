//! Read-only views of a live arena for operators: groups by backlog, and `peek` (visible
//! messages read without receiving them). Slot use by size class is
//! [`super::accounting::counts_per_class`].
//!
//! Nothing here writes to the arena or takes a claim, so an inspector can never delay, wedge
//! or change the queue it looks at, and may die anywhere. The price is that it reads lists
//! that their claim holders change under it: every walk is bounded ([`Arena::steps`]), a walk
//! that meets a freed node starts again (a few times, then leaves the group out), and `peek`
//! validates what it copied as a sequence lock would: when a group's walk stops, the `vis`
//! word and incarnation of every message it copied, and the group's state word, must be
//! unchanged, or the group is walked again (SYNC POINT(peek-seqlock): a producer's Release
//! fence after it claims a slot and before it writes the payload, against the peeker's
//! Acquire fence after its copies). So a peek shows each group as it was at one instant.

use super::list::{successor, Cycle, Next};
use super::pack::{unit, Pack, Unit};
use super::receive::Taken;
use super::times::{Standing, Times};
use super::words::{payload_len, unpack_group_epoch0};
use super::{gstate, node, vis, Arena, Env, Fault, PResult};
use crate::layout::{GroupEntry, MsgHeader, MsgWords};
use crate::sync::{fence, Ordering};

/// Walks that meet a node freed under them start again at most this often per group.
const WALK_RESTARTS: u32 = 4;

/// One group's messages, by state (a snapshot: approximate while the queue is in use).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GroupCounts {
    /// Group table index.
    pub index: u32,
    /// Receivable now or once the messages before them are deleted.
    pub visible: u64,
    /// In flight.
    pub in_flight: u64,
    /// Delayed (L1).
    pub delayed: u64,
    /// Being written by a producer.
    pub sending: u64,
    /// Whether the group's first message is in flight (R3: the group is locked).
    pub locked: bool,
}

impl GroupCounts {
    /// Messages in the group, whatever their state.
    pub fn backlog(&self) -> u64 {
        self.visible + self.in_flight + self.delayed + self.sending
    }
}

/// The group table, summarised.
#[derive(Debug, Clone, Default)]
pub struct Groups {
    /// Active groups with a message (or being emptied).
    pub active: u64,
    /// Groups whose first message is in flight.
    pub locked: u64,
    /// Groups kept, idle, after their last message for their next send (layout 19).
    pub kept: u64,
    /// The largest groups by backlog, largest first.
    pub largest: Vec<GroupCounts>,
    /// Groups whose list could not be walked (a corrupted word): their indices and what is
    /// wrong. They are left out of the counts; every other group is counted.
    pub damaged: Vec<(u32, &'static str)>,
}

/// One message a walk met: its slot, header and incarnation, its own words (the slot's, or its
/// pack member's, layout 22), its member, its `vis` word as read, and its pack (if any).
#[derive(Clone, Copy)]
struct Met<'a> {
    idx: u32,
    m: &'a MsgHeader,
    inc: u32,
    own: &'a MsgWords,
    member: u8,
    w: u64,
    pack: Option<Pack<'a>>,
}

/// What a walk of one group's list does with each live message, given its standing (`None`:
/// being written by its producer): `true` goes on.
type Visit<'v, 'a> = dyn FnMut(Met<'a>, Option<Standing>) -> bool + 'v;

/// Walks group `e`'s list from `head` without its claim, calling `visit(message, standing)`
/// for each message that is not deleted or past retention (a pack's members one by one),
/// until it returns `false` or the list ends. Returns `false` if the walk met a node freed under it (the group
/// moved on): the caller forgets what it saw and walks again, at most [`WALK_RESTARTS`]
/// times.
fn walk<'a>(a: &Arena<'a>, t: &Times, e: &GroupEntry, visit: &mut Visit<'_, 'a>) -> PResult<bool> {
    // Acquire: pairs with the claim holder's Release store of `head`, so the node it names is
    // at least as new as that store.
    let mut cur = e.head.load(Ordering::Acquire);
    let mut cycle = Cycle::from(cur);
    for _ in 0..a.steps() {
        let (next, m, ninc) = match successor(a, cur)? {
            Next::Stale => return Ok(false),
            Next::End => return Ok(true),
            Next::Node(next, m, ninc) => (next, m, ninc),
        };
        // Acquire: pairs with the publishing or receiving CAS, so the header fields read after
        // it are those of this state.
        let w = m.own.vis.load(Ordering::Acquire);
        // Without the claim, `next` may have been freed and reused since `cur` pointed at it:
        // the incarnation read again after `vis` must be the one `successor` saw.
        // Acquire: pairs with the Release store of a new incarnation in `pool::alloc` (SYNC
        // POINT(peek-seqlock)), so a `vis` word of a newer incarnation is never paired with
        // the old one.
        if node::inc(m.link.load(Ordering::Acquire)) != ninc {
            return Ok(false);
        }
        let one = Met {
            idx: next,
            m,
            inc: ninc,
            own: &m.own,
            member: 0,
            w,
            pack: None,
        };
        let unit = match vis::state(w) {
            vis::State::Deleted => None,
            vis::State::Free => return Ok(false),
            vis::State::Claimed(_) => {
                if !visit(one, None) {
                    return Ok(true);
                }
                None
            }
            // SAFETY: an inspector copies nothing into payloads; a slot reused meanwhile is
            // told by its incarnation, checked after every word read below.
            vis::State::Published(_) | vis::State::Packed => match unsafe { unit(a, next, m, w) } {
                Ok(u) => Some(u),
                Err(_) if node::inc(m.link.load(Ordering::Acquire)) != ninc => return Ok(false),
                Err(f) => return Err(f),
            },
        };
        // Relaxed: ordered by the Acquire load of `vis`.
        let sent = m.sent.load(Ordering::Relaxed);
        let pack = match unit {
            Some(Unit::Pack(p)) => Some(p),
            _ => None,
        };
        for (j, own) in unit.iter().flat_map(|u| u.words().iter()).enumerate() {
            // A member's word, then the incarnation again (as above). Acquire: as above.
            let mw = match pack {
                Some(_) => own.vis.load(Ordering::Acquire),
                None => w,
            };
            if pack.is_some() && node::inc(m.link.load(Ordering::Acquire)) != ninc {
                return Ok(false);
            }
            let standing = match vis::state(mw) {
                vis::State::Deleted => continue,
                vis::State::Published(d) => match t.standing(sent, d) {
                    Standing::Expired => continue,
                    s => s,
                },
                _ => return Err(Fault::Corrupted("a pack member's state")),
            };
            let met = Met {
                own,
                member: j as u8,
                w: mw,
                pack,
                ..one
            };
            if !visit(met, Some(standing)) {
                return Ok(true);
            }
        }
        cur = node::pack(ninc, next);
        if cycle.met_again(cur) {
            // A damaged list (nodes of it were visited twice): the group is reported as
            // damaged, its counts and copies left out.
            return Err(Fault::Corrupted("a group's list links in a cycle"));
        }
    }
    Ok(true)
}

/// Counts the messages of every active group (walking each list: O(messages + groups)) and
/// returns the `top` largest by backlog.
pub fn groups(a: &Arena<'_>, env: &dyn Env, top: usize) -> PResult<Groups> {
    let t = Times::load(a, env);
    let mut out = Groups::default();
    let mut all = Vec::new();
    for (g, e) in a.all_groups() {
        // Acquire: SYNC POINT(group-publish), the entry's fields are initialised.
        let st = e.state.load(Ordering::Acquire);
        if gstate::kind(st) != gstate::ACTIVE {
            continue;
        }
        if super::kept::at_rest(a, g, e) {
            out.kept += 1;
            continue;
        }
        out.active += 1;
        let mut c = GroupCounts::default();
        for _ in 0..WALK_RESTARTS {
            c = GroupCounts {
                index: g,
                ..GroupCounts::default()
            };
            let mut first = true;
            let walked = walk(a, &t, e, &mut |_, standing| {
                match standing {
                    Some(Standing::InFlight) => {
                        c.in_flight += 1;
                        c.locked |= first;
                    }
                    Some(Standing::Delayed) => c.delayed += 1,
                    Some(Standing::Visible | Standing::Expired) => c.visible += 1,
                    None => c.sending += 1,
                }
                first = false;
                true
            });
            match walked {
                Ok(true) => break,
                Ok(false) => {}
                // One bad word breaks one group, not the inspection: report it and go on.
                Err(f) => {
                    out.damaged.push((g, fault_text(f)));
                    c = GroupCounts::default();
                    break;
                }
            }
        }
        out.locked += u64::from(c.locked);
        if c.backlog() > 0 {
            all.push(c);
        }
    }
    all.sort_unstable_by(|x, y| y.backlog().cmp(&x.backlog()).then(x.index.cmp(&y.index)));
    all.truncate(top);
    out.largest = all;
    Ok(out)
}

/// Copies up to `max` messages that a receive could return now (each group's visible
/// prefix: from its first message up to the first that is in flight, delayed or being
/// written), in group-table order, changing nothing. `f` turns each copy into a `T`; the
/// [`Taken`] it gets points at private copies of the header and payload, its
/// `receive_count` is the receives so far, and its `group` is live. A copy is kept only if,
/// when its group's walk stops, it and every other message copied from the group are
/// unchanged. Returns the copies, and what `f` reported about the first copy it rejected
/// although its message was unchanged (corruption, not a race): its group keeps the messages
/// before it.
pub fn peek<T>(
    a: &Arena<'_>,
    env: &dyn Env,
    max: usize,
    f: &mut dyn FnMut(&Taken<'_>) -> Result<T, &'static str>,
) -> PResult<(Vec<T>, Option<&'static str>)> {
    let t = Times::load(a, env);
    let mut out: Vec<T> = Vec::new();
    let mut bad = None;
    for (_, e) in a.all_groups() {
        if out.len() >= max {
            break;
        }
        // Acquire: SYNC POINT(group-publish).
        let st = e.state.load(Ordering::Acquire);
        if gstate::kind(st) != gstate::ACTIVE {
            continue;
        }
        let start = out.len();
        // The messages copied from this group, as (header, own words, vis word, incarnation).
        let mut marks: Vec<(&MsgHeader, &MsgWords, u64, u32)> = Vec::new();
        let mut settled = false;
        for _ in 0..WALK_RESTARTS {
            out.truncate(start);
            marks.clear();
            let mut failed = None;
            let walked = walk(a, &t, e, &mut |met, standing| {
                // Being written, in flight (the group is locked) or delayed: the walk stops.
                if standing != Some(Standing::Visible) || out.len() >= max {
                    return false;
                }
                marks.push((met.m, met.own, met.w, met.inc));
                match copy(a, e, &met, f) {
                    Ok(v) => {
                        out.push(v);
                        true
                    }
                    Err(what) => {
                        failed = Some(what);
                        false
                    }
                }
            });
            // A corrupted list: this group is left out of the peek (reported), the others go on.
            let done = match walked {
                Ok(done) => done,
                Err(f) => {
                    bad.get_or_insert(fault_text(f));
                    out.truncate(start);
                    settled = true;
                    break;
                }
            };
            // The copies are a snapshot only if every message copied, and the group, are still
            // as they were when the walk stopped: then at that instant they were all visible,
            // their copies were not torn, and whatever stopped the walk (an in-flight, delayed
            // or unfinished message, or the end) was there too.
            // Acquire: SYNC POINT(peek-seqlock), orders the copies and the walk's loads before
            // these re-checks (the read side of a sequence lock), against the Release store
            // and fence a producer runs after it claims a slot and before it writes the
            // payload (`pool::alloc`).
            // (With nothing copied there is nothing to validate: the group's state matters
            // only for the group id that `f` read.)
            fence(Ordering::Acquire);
            let same = marks.is_empty()
                || (e.state.load(Ordering::Relaxed) == st
                    && marks.iter().all(|&(m, own, w, inc)| {
                        // Relaxed: after the fence above.
                        own.vis.load(Ordering::Relaxed) == w
                            && node::inc(m.link.load(Ordering::Relaxed)) == inc
                    }));
            if done && same {
                if let Some(what) = failed {
                    bad.get_or_insert(what);
                }
                settled = true;
                break;
            }
        }
        if !settled {
            // A group that kept changing under the walk: leave it out of this peek.
            out.truncate(start);
        }
    }
    Ok((out, bad))
}

/// What a fault found while walking a list says.
fn fault_text(f: Fault) -> &'static str {
    match f {
        Fault::Corrupted(what) => what,
        _ => "group list unreadable",
    }
}

/// Copies one message (header fields, its own words, then its payload: a pack member's bytes,
/// or its slot's) and hands the copy to `f`. The caller validates the copy afterwards.
fn copy<T>(
    a: &Arena<'_>,
    e: &GroupEntry,
    met: &Met<'_>,
    f: &mut dyn FnMut(&Taken<'_>) -> Result<T, &'static str>,
) -> Result<T, &'static str> {
    let (m, own) = (met.m, met.own);
    let r = Ordering::Relaxed; // ordered by the Acquire load of `vis`, validated by `peek`
    let snap = MsgHeader::default();
    for (dst, src) in [
        (&snap.pos, &m.pos),
        (&snap.group_epoch0, &m.group_epoch0),
        (&snap.sent, &m.sent),
        (&snap.own.first_recv_ms, &own.first_recv_ms),
        (&snap.own.recv_ms, &own.recv_ms),
        (&snap.own.lens, &own.lens),
    ] {
        dst.store(src.load(r), r);
    }
    let ge = snap.group_epoch0.load(r);
    let (src, len) = match &met.pack {
        Some(p) => p.span(usize::from(met.member)).ok_or("pack member")?,
        None => {
            let (cl, _, src) = a.class_of(met.idx).map_err(|_| "message slot index")?;
            let len = payload_len(snap.own.lens.load(r), ge).min(cl.cap as usize);
            (src as *const u8, len)
        }
    };
    let mut payload = vec![0u8; len];
    // SAFETY: `src` starts the message's bytes in the slot's payload (checked by `class_of`,
    // in the base file or a mapped segment, or by `pack::open`'s `place` for a member), and
    // `len` bytes of it lie inside the payload; `payload` has `len` bytes. The bytes may be
    // rewritten meanwhile only if the message was freed and its slot reused, which changes its
    // `vis` word and incarnation: `peek`'s re-checks then drop the copy.
    unsafe { core::ptr::copy_nonoverlapping(src, payload.as_mut_ptr(), len) };
    crate::sync::payload_touch(src, len, false);
    let epoch = vis::epoch(met.w);
    let receive_count = epoch.wrapping_sub(unpack_group_epoch0(ge).1) & vis::EPOCH_MASK;
    f(&Taken {
        idx: met.idx,
        inc: met.inc,
        member: met.member,
        own: &snap.own,
        epoch,
        receive_count,
        header: &snap,
        group: e,
        payload: &payload,
        vis: met.w,
    })
}

/// A live participant's record, for display.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Member {
    /// Registry slot.
    pub slot: u32,
    /// Generation of the slot's registration.
    pub generation: u32,
    /// Process id it registered with.
    pub pid: u32,
    /// Its owner code (as claims carry it).
    pub owner: super::Owner,
}

/// The registered participants (a snapshot, for display).
pub fn members(a: &Arena<'_>) -> Vec<Member> {
    use super::words::{owner, pstate};
    let mut out = Vec::new();
    for (i, p) in a.parts.iter().enumerate() {
        // Acquire: pairs with the registrant's CAS to ALIVE, so the pid below is the one it
        // stored before (a snapshot for display: never the previous holder's pid beside the
        // new generation).
        let st = p.state.load(Ordering::Acquire);
        if pstate::status(st) != pstate::ALIVE {
            continue;
        }
        let generation = pstate::gen(st);
        out.push(Member {
            slot: i as u32,
            generation,
            // Relaxed: display only.
            pid: p.pid.load(Ordering::Relaxed) as u32,
            owner: owner::code(i as u32, generation),
        });
    }
    out
}

/// Copies the id of the group at table index `g` into `out` (a snapshot, for display);
/// returns its length (0 for an index out of range).
pub fn group_id(a: &Arena<'_>, g: u32, out: &mut [u8; crate::layout::MAX_ID_LEN]) -> usize {
    a.group(g).map_or(0, |e| super::group::read_id(e, out))
}
