//! The deduplication table (D1–D9): which dedup keys were accepted within the interval, and
//! which message each one produced.
//!
//! Open addressing with linear probing from the home entry `hash & (D - 1)`. All reservations
//! of one key hold the *home claim* of its home entry, so a key is never reserved twice at
//! once; the home entry's `probe` word (only growing) bounds how far its keys lie, so lookups
//! never depend on `FREE` entries ending a chain (expired and aborted entries are reused in
//! place).
//!
//! An entry goes `FREE/expired → WRITING → PENDING → DONE`, or `PENDING → FREE` (abort):
//!
//! 1. *Reserve* (under the home claim): a live `DONE` entry with the key means a duplicate; a
//!    `PENDING` one means the same key is being sent: a live sender is waited for, a dead one's
//!    send is settled first (see below). Otherwise the first reusable entry near the key's home
//!    is taken (`PLACE_WINDOW`; when none is, the table grows, and only at its size limit does
//!    the key go farther, or evict the oldest key near it), `WRITING`, the key written, the
//!    home's `probe` raised, and the entry marked `PENDING`.
//! 2. The sender allocates its slot, records the entry in the slot (`MsgWords::recv_ms`) and
//!    the slot in the entry (`msg`), then appends the message: the link CAS commits it.
//! 3. *Commit*: sequence number and expiry are written and the entry becomes `DONE`, **before**
//!    the slot is published. On any failure before the link, the entry is aborted (`FREE`)
//!    before the slot is freed.
//!
//! Invariant D: an entry leaves `PENDING` before its message's slot leaves `CLAIMED`. While the
//! slot stays claimed by its (dead) producer nobody can deliver, delete or free it, so whoever
//! settles a dead sender's entry can still find out whether the message was linked (by walking
//! its group) and make the entry `DONE` (linked: the retry is a duplicate) or `FREE` (not
//! linked: the retry is sent). Recovery settles a dead producer's slot the same way, entry
//! first.

use super::segments::segment_of;
use super::settle::settle_entry;
use super::Owner;
use super::{gstate, node, Arena, Env, Fault, PResult};
use crate::layout::{segment_slots, DedupEntry, DEDUP_KIND};
use crate::sync::{fence, AtomicU64, Ordering};

/// Reusable entry (its incarnation is kept).
pub const FREE: u64 = 0;
/// Reserved, key being written by the owner.
pub const WRITING: u64 = 1;
/// Key written; the owner's message is being sent.
pub const PENDING: u64 = 2;
/// Message accepted; deduplicates until `expires`.
pub const DONE: u64 = 3;

/// Spin rounds before a wait for a live participant is given up.
/// Longest wait (ms) for a live participant sending the same key (a send holds its entry
/// `PENDING` for the time of a copy and an append: microseconds, unless it is descheduled or
/// stopped).
pub const MAX_WAIT_MS: u64 = 1_000;
/// With eviction on (`Header::dedup_overflow` 0), the entries a key may occupy: at most this many
/// from its home, so a lookup reads no more (a home's `probe` is capped here). Since stop 56
/// keys are placed nearer ([`PLACE_WINDOW`], [`EVICT_SCAN`]); lookups still honour this for
/// keys placed by earlier builds of the layout.
pub const EVICT_WINDOW: usize = 256;
/// While the table may still grow, how far from its home a new key may be placed (or anywhere
/// within its home's probe length, which lengthens nothing): a key that finds no reusable entry
/// that near in any table makes the table grow instead (at the size limit it looks
/// [`evict_scan`] far, or through the whole table with eviction off). Linear probing's runs
/// lengthen steeply with the load: a table filled until a key's 256-entry window was full
/// reached some 80% load, where every reservation walked long runs of entries (a cache line
/// each) in every table (3 million new ids took 1.37× the time they take now, `shmfifo-hotpath
/// dedup-batch 300000`). Within 16, a table grows at some 30–50% load, so a home's keys lie
/// within a line or two of it, for about twice the entries per key while the table grows (the
/// same at the size limit).
pub const PLACE_WINDOW: usize = 16;
/// At the size limit (eviction on), how far from its home a new key may be placed in each table,
/// and how far a reservation looks there for the oldest key to evict: [`EVICT_WINDOW`] entries
/// in all, shared by the tables, at least `EVICT_SCAN` a table ([`evict_scan`]). A table that
/// never grew scans its whole window as before (fewer entries would evict young keys of a
/// dense run while the table still had room); a full index of 8 million keys (10 tables) reads
/// 25 entries a table, not 256 (at which 46 thousand reservations a second went through; some
/// 190 thousand now). An index at the limit still fills: every entry is within reach of the
/// homes before it, in each of its tables.
pub const EVICT_SCAN: usize = 16;

/// How far from its home a key may be placed in each of `tables` tables at the size limit
/// (eviction on): see [`EVICT_SCAN`].
fn evict_scan(tables: u32) -> usize {
    (EVICT_WINDOW / tables.max(1) as usize).max(EVICT_SCAN)
}

/// A dedup key: the dedup id, and the group id with messageGroup scope (empty otherwise).
#[derive(Debug, Clone, Copy)]
pub struct Key<'x> {
    /// Keyed hash of the whole key (the API layer hashes `group` and `dedup` together): its
    /// low 64 bits, which place it in the table.
    pub hash: u64,
    /// The high 64 bits of the key's 128-bit keyed hash (layout 15): with `hash` and the two
    /// lengths, what stands for the key in its entry; the id itself is not kept. Two keys
    /// are the same when all four are (a false match needs a 128-bit collision of a hash
    /// keyed with the arena's secret key).
    pub check: u64,
    /// Dedup id bytes (1–128).
    pub dedup: &'x [u8],
    /// Group id bytes (0–128).
    pub group: &'x [u8],
}

impl Key<'_> {
    /// Whether `other` is the same key (its group and id; the hash compared first, the cheap
    /// test that tells almost every two keys apart): a batch's repeat of an earlier entry's
    /// key (D9).
    pub fn same(&self, other: &Key<'_>) -> bool {
        self.hash == other.hash && self.dedup == other.dedup && self.group == other.group
    }
}

/// The message a dedup key produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Original {
    /// Global slot index of the message (part of its message id).
    pub idx: u32,
    /// Slot incarnation (part of its message id).
    pub inc: u32,
    /// Its member in its slot's pack (part of its message id; 0: a slot of its own).
    pub member: u8,
    /// High 64 bits of its sequence number.
    pub seq_hi: u64,
    /// Low 64 bits of its sequence number.
    pub pos: u64,
}

/// Outcome of [`reserve`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reserved {
    /// Entry `index` is ours, in state word `word` (`PENDING`).
    New {
        /// Entry index.
        index: u32,
        /// Its `PENDING` state word (to commit or abort with).
        word: u64,
    },
    /// The key was accepted within the interval: the send is a duplicate of this message.
    Duplicate(Original),
}

/// The entry kind of a state word.
pub fn kind(w: u64) -> u64 {
    gstate::kind(w)
}

/// One table of the dedup index (layout 14): the base file's, or one the table added as it
/// grew (`dedup_slots × 2^(k-1)` entries for the `k`-th). Each is its own open-addressing
/// table (home `hash & (len - 1)`); a key's reservations all hold the home claim of its home
/// in the base table, which also serialises every writer of its homes in the added tables
/// (they are larger powers of two, so the same low bits pick the base home).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Table<'a> {
    /// Global index of its first entry.
    base: usize,
    entries: &'a [DedupEntry],
    keys: &'a [AtomicU64],
}

/// Table `k` of the dedup index (0: the base file's).
pub(crate) fn table<'a>(a: &Arena<'a>, k: u32) -> PResult<Table<'a>> {
    if k == 0 {
        return Ok(Table {
            base: 0,
            entries: a.dedup,
            keys: a.dedup_keys,
        });
    }
    let (entries, keys) = a.dedup_segment(k)?;
    Ok(Table {
        base: segment_slots(a.dedup.len() as u32, k) as usize,
        entries,
        keys,
    })
}

/// Where global entry `i` lives: its table and its index there.
fn locate<'a>(a: &Arena<'a>, i: usize) -> PResult<(Table<'a>, usize)> {
    let n = a.dedup.len() as u32;
    if n == 0 {
        return Err(Fault::Corrupted("dedup index out of range"));
    }
    let (k, j) = segment_of(n, i as u64);
    Ok((table(a, k)?, j as usize))
}

pub(crate) fn entry<'a>(a: &Arena<'a>, i: usize) -> PResult<&'a DedupEntry> {
    let (t, j) = locate(a, i)?;
    t.entries
        .get(j)
        .ok_or(Fault::Corrupted("dedup index out of range"))
}

/// Entry `i`'s key word: the high 64 bits of its key's 128-bit hash ([`Key::check`]).
fn check_word<'a>(a: &Arena<'a>, i: usize) -> PResult<&'a AtomicU64> {
    let k = a.dedup_key_words;
    let (t, j) = locate(a, i)?;
    t.keys
        .get(j * k)
        .filter(|_| k >= 1)
        .ok_or(Fault::Corrupted("dedup key index out of range"))
}

/// Every entry of every table (base and published segments; one that cannot be mapped is
/// skipped).
fn all_entries<'a>(a: &'a Arena<'a>) -> impl Iterator<Item = &'a DedupEntry> + 'a {
    (0..=a.published(DEDUP_KIND))
        .filter_map(move |k| table(a, k).ok())
        .flat_map(|t| t.entries.iter())
}

use super::words::dedup_meta::{
    expires as meta_expires, lens as meta_lens, member as meta_member, pack as pack_meta,
    with_member as meta_with_member,
};

/// Whether entry `i` (read in state `st`) holds `key`. Relaxed loads: the caller loaded `st`
/// with Acquire and validates it afterwards ([`still`]), so a torn read of a reused entry is
/// discarded.
fn matches(a: &Arena<'_>, i: usize, key: &Key<'_>) -> PResult<bool> {
    let e = entry(a, i)?;
    if e.hash.load(Ordering::Relaxed) != key.hash {
        return Ok(false);
    }
    let (dl, gl) = meta_lens(e.meta.load(Ordering::Relaxed));
    if dl != key.dedup.len() || gl != key.group.len() {
        return Ok(false);
    }
    Ok(check_word(a, i)?.load(Ordering::Relaxed) == key.check)
}

/// Seqlock validation: whether entry `e` is still in state `st` after the Relaxed reads made
/// since `st` was loaded.
fn still(e: &DedupEntry, st: u64) -> bool {
    // SYNC POINT(dedup-seqlock): a writer changes `state` (CAS, then a Release fence) before
    // touching any field, so if we read a field it wrote, we see its state change.
    crate::sync::seqlock_still(&e.state, st)
}

fn original(e: &DedupEntry) -> Original {
    // Relaxed: validated by the caller with `still`.
    let m = e.msg.load(Ordering::Relaxed);
    Original {
        idx: node::index(m),
        inc: node::inc(m),
        member: meta_member(e.meta.load(Ordering::Relaxed)),
        seq_hi: e.seq_hi.load(Ordering::Relaxed),
        pos: e.pos.load(Ordering::Relaxed),
    }
}

/// Whether an entry in state `st` may be taken by a new key at time `now`.
fn reusable(a: &Arena<'_>, env: &dyn Env, e: &DedupEntry, st: u64, now: u64) -> bool {
    match kind(st) {
        FREE => true,
        // Relaxed: if the entry changed since `st`, the reserving CAS fails.
        DONE => meta_expires(e.meta.load(Ordering::Relaxed)) <= now,
        WRITING => a.owner_dead(env, gstate::owner(st)),
        _ => false, // PENDING: settled first (its message may be linked)
    }
}

/// An entry a pass may take: in table `t`, `d` entries from the key's home `home` there, in
/// state `st`; `probe` is that home's probe length as read.
#[derive(Debug, Clone, Copy)]
struct Spot<'a> {
    t: Table<'a>,
    home: usize,
    d: usize,
    st: u64,
    probe: usize,
}

impl Spot<'_> {
    /// The global index of the entry.
    fn index(&self) -> usize {
        self.t.base + ((self.home + self.d) & (self.t.entries.len() - 1))
    }
}

/// Keeps in `oldest` the `DONE` entry that expires first (was accepted first) among those seen.
fn note_oldest<'a>(e: &DedupEntry, spot: Spot<'a>, oldest: &mut Option<(Spot<'a>, u64)>) {
    if kind(spot.st) != DONE {
        return;
    }
    // Relaxed: a choice of victim; if the entry changed since `st`, the reserving CAS fails.
    let x = meta_expires(e.meta.load(Ordering::Relaxed));
    if oldest.is_none_or(|(_, y)| x < y) {
        *oldest = Some((spot, x));
    }
}

/// What one pass under the home claim found.
enum Pass {
    Done(Reserved),
    /// A live participant is sending the same key: wait for it.
    Wait,
    /// Something changed under us: look again.
    Again,
}

/// Reserves `key`: either a new `PENDING` entry, or the original message of a duplicate.
pub fn reserve(a: &Arena<'_>, env: &dyn Env, me: Owner, key: &Key<'_>) -> PResult<Reserved> {
    let n = a.dedup.len();
    if n == 0 || !n.is_power_of_two() {
        return Err(Fault::Corrupted("no dedup table"));
    }
    let home = key.hash as usize & (n - 1);
    let he = entry(a, home)?;
    prefetch_homes(a, key.hash);
    // A live sender of the same key (it may be stopped) makes us wait, bounded by time.
    let mut p = super::group::Patience::within(MAX_WAIT_MS);
    loop {
        let stolen = super::group::home_claim_taken(a, env, &he.home_claim, me)?;
        crash_point!();
        let r = pass(a, env, me, key, stolen);
        crash_point!();
        super::group::release_home_claim(&he.home_claim);
        match r? {
            Pass::Done(r) => return Ok(r),
            // Something changed (another participant made progress): look again, within the
            // same time bound (a hostile word could make every pass look "changed").
            Pass::Again | Pass::Wait => {
                if p.wait(env, "dedup").is_err() {
                    return Err(Fault::DedupBusy);
                }
            }
        }
    }
}

/// Asks the CPU to start loading the home entry of keyed hash `hash` in every table of the
/// index, so that a reservation's search, which reads each of them in turn (a random line per
/// table, a cache miss and on a large table a TLB miss; a grown index has up to 25 tables),
/// waits for them together: 22% less time a send in `shmfifo-hotpath dedup 2000000` (paired
/// runs), where the index grows to 9 tables. Only a hint: nothing is read into the program; a
/// table that cannot be mapped is skipped here (the search reports it).
fn prefetch_homes(a: &Arena<'_>, hash: u64) {
    for k in 0..=a.published(DEDUP_KIND) {
        if let Ok(t) = table(a, k) {
            let n = t.entries.len();
            if n.is_power_of_two() {
                super::prefetch_line(&t.entries[hash as usize & (n - 1)], 0);
            }
        }
    }
}

/// One reservation attempt under the home claim of `key`'s home (`stolen`: taken over from a
/// dead holder).
fn pass(a: &Arena<'_>, env: &dyn Env, me: Owner, key: &Key<'_>, stolen: bool) -> PResult<Pass> {
    let (spot, evicted, now) = match choose(a, env, me, key)? {
        Choice::Decided(p) => return Ok(p),
        Choice::Entry { spot, evicted, now } => (spot, evicted, now),
    };
    let i = spot.index();
    let e = entry(a, i)?;
    let he = entry(a, spot.t.base + spot.home)?;
    let (d, st, probe) = (spot.d, spot.st, spot.probe);
    let inc = gstate::ginc(st).wrapping_add(1);
    // AcqRel: Acquire orders our field writes after the previous incarnation's readers' view
    // of the state (SYNC POINT(dedup-seqlock)); Release publishes our registration.
    if e.state
        .compare_exchange(
            st,
            gstate::pack(inc, WRITING, me),
            Ordering::AcqRel,
            Ordering::Relaxed,
        )
        .is_err()
    {
        return Ok(Pass::Again);
    }
    // SYNC POINT(dedup-seqlock): Release fence after the state change, before the field
    // writes: a reader that sees any of them sees the state change after its Acquire fence.
    fence(Ordering::Release);
    if let Some(expires) = evicted {
        note_eviction(a, now, expires);
    }
    crash_point!();
    write_key(a, i, key)?;
    // Release: pairs with the Acquire load of `probe` by later passes (which hold the home
    // claim, also Release/Acquire) and by lock-free readers. Only holders of this key's home
    // claim write its homes' `probe` (every table's home of the key has the same low bits, so
    // the same base home), so under a claim handed to us by its release we saw the last value
    // (`probe`, below `d + 1` here) and a store raises it (one locked instruction less a
    // reservation that raises it: the first key of every home). Under a claim taken over from
    // a dead holder, whose last write we may not have seen, `fetch_max` keeps it growing.
    if d + 1 > probe {
        if stolen {
            he.probe.fetch_max(d as u64 + 1, Ordering::Release);
        } else {
            he.probe.store(d as u64 + 1, Ordering::Release);
        }
    }
    crash_point!();
    let word = gstate::pack(inc, PENDING, me);
    // SYNC POINT(dedup-publish): Release publishes the key and fields.
    e.state.store(word, Ordering::Release);
    Ok(Pass::Done(Reserved::New {
        index: i as u32,
        word,
    }))
}

/// What a pass's search decided.
enum Choice<'a> {
    /// No entry to write: a duplicate, a wait, or a look again.
    Decided(Pass),
    /// `spot` takes the key, evicting a key that would have expired at `evicted`'s time where
    /// it is `Some`; `now` is the time of the search.
    Entry {
        spot: Spot<'a>,
        evicted: Option<u64>,
        now: u64,
    },
}

/// Under the home claim: looks for `key` in every table within its home's probe length (a
/// duplicate, a live sender of it, or a dead sender's entry to settle) and for an entry to
/// take: a reusable one within [`PLACE_WINDOW`] of its home (the newest table first); else a
/// new table (the dedup table grows, layout 14); else, at the size limit, a reusable one
/// within [`evict_scan`] of its home (eviction on; with eviction off, anywhere); else
/// (eviction on) the oldest key of those.
fn choose<'a>(a: &Arena<'a>, env: &dyn Env, me: Owner, key: &Key<'_>) -> PResult<Choice<'a>> {
    // Relaxed: fixed at creation (SYNC POINT(arena-ready)).
    let evict = a.hdr.dedup_overflow.load(Ordering::Relaxed) == 0;
    let mut now = env.now_ms();
    // The limit before the count: a process's flag is set (Release) by a grower that read the
    // final count, so a count read after the flag (Acquire) is that one, and a reservation
    // that looks only as far as the limit allows never misses the last table.
    let at_limit = a.segs.at_limit(DEDUP_KIND);
    let newest = a.published(DEDUP_KIND);
    // How far ids go at the size limit: EVICT_WINDOW entries shared by the tables with
    // eviction on, the whole table with it off (a division: only where it is needed).
    let far = || {
        if evict {
            evict_scan(newest.wrapping_add(1))
        } else {
            usize::MAX
        }
    };
    let reach = if at_limit { far() } else { PLACE_WINDOW };
    let mut found = Found::default();
    if let Some(p) = look(a, env, me, key, now, evict, newest, reach, &mut found)? {
        return Ok(Choice::Decided(p));
    }
    if !at_limit && found.cand.is_none() {
        // Every entry near the key's homes is taken (sends in progress included: waiting for
        // them would not learn the limit): the table grows, and the next pass finds room in
        // the new table.
        match super::grow::grow(a, env, me, DEDUP_KIND, newest) {
            Ok(super::grow::Grew::Added | super::grow::Grew::Found) => {
                return Ok(Choice::Decided(Pass::Again))
            }
            Err(f) if super::stopped(f) => return Err(f),
            // At the size limit, or a growth that cannot happen now (the file system full,
            // the grow claim held by a stopped process, a damaged directory: the size limit
            // for this send): farther from the homes.
            Ok(super::grow::Grew::AtLimit) | Err(_) => {}
        }
        // The clock again: the growth may have waited for the grow claim.
        now = env.now_ms();
        found = Found::default();
        if let Some(p) = look(a, env, me, key, now, evict, newest, far(), &mut found)? {
            return Ok(Choice::Decided(p));
        }
    }
    if let Some(spot) = found.cand {
        return Ok(Choice::Entry {
            spot,
            evicted: None,
            now,
        });
    }
    // A table published since our count (by another process; ours knew the limit only after
    // it): look again there before anything is evicted or refused.
    if a.published(DEDUP_KIND) > newest {
        return Ok(Choice::Decided(Pass::Again));
    }
    // Evict the oldest key (its interval ends now instead of later: counted and reported as
    // the effective window) rather than refuse a send SQS accepts.
    match found.oldest {
        Some((spot, expires)) if evict => Ok(Choice::Entry {
            spot,
            evicted: Some(expires),
            now,
        }),
        // Only sends in progress among the entries scanned (eviction on): wait for one to
        // finish.
        _ if evict => Ok(Choice::Decided(Pass::Wait)),
        _ => Err(Fault::DedupFull),
    }
}

/// What [`look`] found for a key to take: the first reusable entry (`cand`, the newest
/// table's first) and, while none is known, the `DONE` entry that expires first (`oldest`,
/// the victim at the size limit) and when.
#[derive(Default)]
struct Found<'a> {
    cand: Option<Spot<'a>>,
    oldest: Option<(Spot<'a>, u64)>,
}

/// [`search`]es every table, the newest first, taking entries up to `reach` from the key's
/// homes ([`PLACE_WINDOW`] while the table may grow; at the size limit [`evict_scan`] with
/// eviction on, `usize::MAX`, the whole table, with it off), into `found`; `Some`: decided.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn look<'a>(
    a: &Arena<'a>,
    env: &dyn Env,
    me: Owner,
    key: &Key<'_>,
    now: u64,
    evict: bool,
    newest: u32,
    reach: usize,
    found: &mut Found<'a>,
) -> PResult<Option<Pass>> {
    for k in (0..=newest).rev() {
        let t = table(a, k)?;
        if let Some(p) = search(a, env, me, key, t, now, evict, reach, found)? {
            return Ok(Some(p));
        }
    }
    Ok(None)
}

/// One table of [`look`]: the key within its home's probe length (a decision if found), then
/// (while [`Found`] has none) the first reusable entry within `reach` of the home (and up to
/// it, the oldest key).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn search<'a>(
    a: &Arena<'a>,
    env: &dyn Env,
    me: Owner,
    key: &Key<'_>,
    t: Table<'a>,
    now: u64,
    evict: bool,
    reach: usize,
    found: &mut Found<'a>,
) -> PResult<Option<Pass>> {
    let n = t.entries.len();
    if n == 0 || !n.is_power_of_two() {
        return Err(Fault::Corrupted("dedup table size"));
    }
    let mask = n - 1;
    let home = key.hash as usize & mask;
    let he = &t.entries[home];
    // Where keys may lie (what lookups read): EVICT_WINDOW from the home with eviction on
    // (placed within it by every version of this layout), the whole table with it off.
    let window = if evict { EVICT_WINDOW.min(n) } else { n };
    // Acquire: pairs with the Release `fetch_max` of earlier reservations of this home (also
    // carried by the home claim).
    let probe = (he.probe.load(Ordering::Acquire) as usize).min(window);
    let spot = |d: usize, st: u64| Spot {
        t,
        home,
        d,
        st,
        probe,
    };
    for d in 0..probe {
        let i = t.base + ((home + d) & mask);
        let e = &t.entries[(home + d) & mask];
        // Acquire: SYNC POINT(dedup-publish), the key and fields of a PENDING/DONE entry.
        let st = e.state.load(Ordering::Acquire);
        let k = kind(st);
        if (k == PENDING || k == DONE) && matches(a, i, key)? {
            // Relaxed: validated by `still` below.
            let expires = meta_expires(e.meta.load(Ordering::Relaxed));
            let orig = original(e);
            if !still(e, st) {
                return Ok(Some(Pass::Again));
            }
            if k == DONE {
                if expires > now {
                    return Ok(Some(Pass::Done(Reserved::Duplicate(orig))));
                }
                // Expired (D1): the key may be accepted again; reuse this very entry.
                if found.cand.is_none() {
                    found.cand = Some(spot(d, st));
                }
                continue;
            }
            let holder = gstate::owner(st);
            if holder == me || !a.owner_dead(env, holder) {
                return Ok(Some(Pass::Wait));
            }
            settle_entry(a, env, me, i, st)?;
            return Ok(Some(Pass::Again));
        }
        // Within the probe length, taking an entry lengthens no lookup.
        if found.cand.is_none() && reusable(a, env, e, st, now) {
            found.cand = Some(spot(d, st));
        }
        // A victim matters only while no reusable entry is known.
        if evict && found.cand.is_none() {
            note_oldest(e, spot(d, st), &mut found.oldest);
        }
    }
    if found.cand.is_none() {
        for d in probe..reach.min(window) {
            let e = &t.entries[(home + d) & mask];
            // Acquire: as above.
            let st = e.state.load(Ordering::Acquire);
            if reusable(a, env, e, st, now) {
                found.cand = Some(spot(d, st));
                break;
            }
            if evict {
                note_oldest(e, spot(d, st), &mut found.oldest);
            }
        }
    }
    Ok(None)
}

/// Counts an eviction of a key that would have expired at `expires` (statistics).
fn note_eviction(a: &Arena<'_>, now: u64, expires: u64) {
    // Relaxed: statistics (a racing eviction may overwrite the age: either is recent).
    let interval = a.hdr.dedup_interval_ms.load(Ordering::Relaxed);
    let ev = &a.hdr.dedup_evict.0;
    ev.count.fetch_add(1, Ordering::Relaxed);
    ev.last_ms.store(now, Ordering::Relaxed);
    ev.last_age_ms.store(
        now.saturating_sub(expires.saturating_sub(interval)),
        Ordering::Relaxed,
    );
}

/// Writes `key` into entry `i` (WRITING by us): hash, meta, no message yet, key word.
fn write_key(a: &Arena<'_>, i: usize, key: &Key<'_>) -> PResult<()> {
    let e = entry(a, i)?;
    // Relaxed: published by the Release store of PENDING after this.
    e.hash.store(key.hash, Ordering::Relaxed);
    e.meta.store(
        pack_meta(key.dedup.len(), key.group.len(), 0),
        Ordering::Relaxed,
    );
    e.msg.store(node::pack(0, node::NIL), Ordering::Relaxed);
    e.seq_hi.store(0, Ordering::Relaxed);
    e.pos.store(0, Ordering::Relaxed);
    // Relaxed: as above.
    check_word(a, i)?.store(key.check, Ordering::Relaxed);
    Ok(())
}

/// Records the sender's message slot in its `PENDING` entry (before the message is linked).
pub fn set_msg(a: &Arena<'_>, index: u32, idx: u32, inc: u32) -> PResult<()> {
    // SYNC POINT(dedup-msg): Release: a settler that reads it (Acquire) also sees the slot's `recv_ms` back-pointer.
    entry(a, index as usize)?
        .msg
        .store(node::pack(inc, idx), Ordering::Release);
    Ok(())
}

/// Writes the outcome into a `PENDING` entry (in state `word`) and makes it `DONE`: the
/// message's sequence number `(seq_hi, pos)` and its `member` in its slot's pack (0: a slot of
/// its own). Does nothing if the entry is no longer in state `word` (settled by someone who
/// proved its owner dead: to the same outcome); while its live owner runs, nobody else
/// writes it.
pub fn commit(
    a: &Arena<'_>,
    env: &dyn Env,
    index: u32,
    word: u64,
    seq_hi: u64,
    pos: u64,
    member: u8,
) -> PResult<()> {
    let e = entry(a, index as usize)?;
    if e.state.load(Ordering::Relaxed) != word {
        return Ok(());
    }
    let interval = a.hdr.dedup_interval_ms.load(Ordering::Relaxed);
    // Relaxed: published by the Release CAS below.
    e.seq_hi.store(seq_hi, Ordering::Relaxed);
    e.pos.store(pos, Ordering::Relaxed);
    let (dl, gl) = meta_lens(e.meta.load(Ordering::Relaxed));
    e.meta.store(
        meta_with_member(dl, gl, member, env.now_ms().saturating_add(interval)),
        Ordering::Relaxed,
    );
    // SYNC POINT(dedup-publish): Release publishes the outcome to readers' Acquire loads. A
    // store, not a CAS (one locked instruction less a send with a dedup id): the entry is
    // `PENDING` with our owner code (checked above), and the only others who write such an
    // entry are settlers, who first prove its owner dead (a stopped one is alive), never while
    // we run; purges clear only `DONE` entries, reservations take only free, expired or a
    // dead writer's. Damaged shared memory that breaks this is overwritten with our outcome,
    // which cannot make anyone read or write out of bounds.
    e.state.store(
        gstate::pack(gstate::ginc(word), DONE, Owner::NOBODY),
        Ordering::Release,
    );
    Ok(())
}

/// Gives a `PENDING` entry (in state `word`) up: the send did not happen.
pub fn abort(a: &Arena<'_>, index: u32, word: u64) -> PResult<()> {
    let e = entry(a, index as usize)?;
    // Release: orders the abort before the slot's free (invariant D).
    let _ = e.state.compare_exchange(
        word,
        gstate::pack(gstate::ginc(word), FREE, Owner::NOBODY),
        Ordering::Release,
        Ordering::Relaxed,
    );
    Ok(())
}

/// Purge (D7): every accepted key may be accepted again. Sends in progress keep their entries.
pub fn clear(a: &Arena<'_>) -> u64 {
    let mut n = 0;
    for e in all_entries(a) {
        // Acquire: the entry's current state.
        let st = e.state.load(Ordering::Acquire);
        // Release: as any state change (readers validate with `still`).
        if kind(st) == DONE
            && e.state
                .compare_exchange(
                    st,
                    gstate::pack(gstate::ginc(st), FREE, Owner::NOBODY),
                    Ordering::Release,
                    Ordering::Relaxed,
                )
                .is_ok()
        {
            n += 1;
        }
    }
    n
}

/// Number of entries that deduplicate at time `now` (`DONE`, not expired) and of sends in
/// progress (`WRITING`, `PENDING`).
pub fn count(a: &Arena<'_>, now: u64) -> (u64, u64) {
    let (mut live, mut pending) = (0, 0);
    for e in all_entries(a) {
        // Relaxed: a statistic.
        let st = e.state.load(Ordering::Relaxed);
        match kind(st) {
            DONE if meta_expires(e.meta.load(Ordering::Relaxed)) > now => live += 1,
            WRITING | PENDING => pending += 1,
            _ => {}
        }
    }
    (live, pending)
}

#[cfg(all(test, not(shmfifo_loom)))]
mod tests {
    use super::*;
    use crate::layout::Geometry;
    use crate::protocol::heap::{HeapArena, MockEnv};
    use crate::protocol::owner;

    /// A key of well-spread hash (splitmix64 of `i`), as the API's keyed hash spreads them.
    fn key(i: u64, id: &[u8; 8]) -> Key<'_> {
        let mix = |mut z: u64| {
            z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        };
        Key {
            hash: mix(i),
            check: mix(!i),
            dedup: id,
            group: &[],
        }
    }

    /// Reserves and commits keys `0..n` (each new); returns the greatest probe length of any
    /// home in any table.
    fn accept(a: &Arena<'_>, env: &MockEnv, n: u64) -> u64 {
        let me = owner::code(1, 1);
        for i in 0..n {
            let id = i.to_le_bytes();
            match reserve(a, env, me, &key(i, &id)).unwrap() {
                Reserved::New { index, word } => commit(a, env, index, word, 0, i, 0).unwrap(),
                Reserved::Duplicate(o) => panic!("key {i} is new, found {o:?}"),
            }
        }
        for i in 0..n {
            let id = i.to_le_bytes();
            assert!(
                matches!(reserve(a, env, me, &key(i, &id)), Ok(Reserved::Duplicate(o)) if o.pos == i),
                "key {i} is remembered"
            );
        }
        assert_eq!(count(a, env.now_ms()), (n, 0));
        assert_eq!(a.hdr.dedup_evict.0.count.load(Ordering::Relaxed), 0);
        all_entries(a)
            .map(|e| e.probe.load(Ordering::Relaxed))
            .max()
            .unwrap_or(0)
    }

    /// The protocol's test geometry with `dedup_slots` entries, growing `dedup_growth` times.
    fn geometry(dedup_slots: u32, dedup_growth: u32) -> Geometry {
        Geometry {
            dedup_slots,
            size_limit: if dedup_growth > 0 { 1 << 30 } else { 0 },
            dedup_growth,
            ..crate::protocol::heap::test_geometry()
        }
    }

    /// D1 with growth (layout 14): while the table may grow, a new key is placed within
    /// `PLACE_WINDOW` of its home and the table grows rather than place it farther, so a
    /// lookup walks a line or two a table however many keys there are. (Placed anywhere in
    /// their windows, as before, these 3,000 keys lengthened a home's probe to 239 entries.)
    #[test]
    fn a_growing_table_keeps_every_key_near_its_home() {
        let h = HeapArena::new(&geometry(64, 8));
        let env = MockEnv::default();
        env.advance(1);
        let a = h.arena();
        let longest = accept(&a, &env, 3_000);
        assert!(longest <= PLACE_WINDOW as u64, "a probe of {longest}");
        assert!(a.published(DEDUP_KIND) >= 5, "the table grew");
    }

    /// D1 with `DedupOverflow::Refuse` at the size limit: every entry of the table takes a key
    /// before a send is refused (`DedupTableFull`), wherever the entries lie from the homes.
    #[test]
    fn a_refusing_table_fills_every_entry_before_it_refuses() {
        let h = HeapArena::new(&geometry(256, 0));
        let env = MockEnv::default();
        env.advance(1);
        let a = h.arena();
        a.hdr.dedup_overflow.store(1, Ordering::Relaxed);
        accept(&a, &env, 256);
        let id = 256u64.to_le_bytes();
        assert!(matches!(
            reserve(&a, &env, owner::code(1, 1), &key(256, &id)),
            Err(Fault::DedupFull)
        ));
    }

    /// D1 at the size limit: a table that may not grow places keys past `PLACE_WINDOW` (up to
    /// its whole window, as a table that never grew may) before it evicts one: 250 keys in 256
    /// entries, none forgotten (with 32 entries a table, as the first version of stop 56
    /// scanned, keys were evicted well before).
    #[test]
    fn a_table_at_its_limit_places_keys_farther_before_it_evicts() {
        let h = HeapArena::new(&geometry(256, 0));
        let env = MockEnv::default();
        env.advance(1);
        let a = h.arena();
        let longest = accept(&a, &env, 250);
        assert!(longest > PLACE_WINDOW as u64, "a probe of {longest}");
    }
}
