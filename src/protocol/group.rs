//! The group table; its two owner-tagged claims (insert claim, group claim) are in
//! [`super::claim`], re-exported here.
//!
//! Open addressing with linear probing from the home slot `hash & (G - 1)`. Entries go
//! `FREE → INSERTING → ACTIVE → TOMBSTONE → INSERTING → …`, never back to `FREE`, so a probe
//! chain only grows and a lookup may stop at the first `FREE`. All inserters of one key hold the
//! *insert claim* of the key's home slot, so a key is never inserted twice; a retiring group
//! closes its list first (no append can succeed after), so a lookup that finds a retiring group
//! and fails to append simply looks again.
//!
//! Kept groups (layout 19): the delete that empties a group reopens its list at a new
//! incarnation of its sentinel (`release`), and the group stays ACTIVE, idle, with its key and
//! its place in `active_groups`: its next send appends to it with no insert (no home claim,
//! state CAS or sequence base), so a group that empties after each message moves neither the
//! id's lines nor the count's between the producer and the consumer. An insert that finds the
//! count at the capacity first retires idle groups into plain tombstones, out of the count
//! (`kept::reclaim_kept`, under each group's claim). `active_groups` counts the entries
//! INSERTING or ACTIVE (plus the leaks of inserters that died between counting and inserting,
//! corrected by the recount).

use super::Owner;
use super::{gstate, node, words, Arena, Env, Fault, PResult};
use crate::layout::{GroupEntry, GROUP_KIND, MAX_ID_LEN};
use crate::sync::Ordering;

use super::kept::{count_in, tombstone, Counted};

pub use super::claim::*;

/// Whether entry `e`'s id is `id` (its words read with Relaxed loads: the caller validates the
/// entry around the read, by a seqlock re-check of its state or by holding its claim). An `id`
/// longer than an entry holds is no entry's, whatever a damaged length word says.
pub fn id_is(e: &GroupEntry, id: &[u8]) -> bool {
    id.len() <= e.id.len() * 8 && id_matches(e, id)
}

fn id_matches(e: &GroupEntry, id: &[u8]) -> bool {
    // Relaxed: the caller loaded `state` with Acquire (SYNC POINT(group-publish)) before, and
    // re-checks it after, so a torn read of a reused entry is discarded.
    if e.id_len.load(Ordering::Relaxed) != id.len() as u64 {
        return false;
    }
    for (k, chunk) in id.chunks(8).enumerate() {
        if e.id[k].load(Ordering::Relaxed) != words::text_word(chunk) {
            return false;
        }
    }
    true
}

/// Reads a group's id into `out` (up to 128 bytes); returns its length.
pub fn read_id(e: &GroupEntry, out: &mut [u8; MAX_ID_LEN]) -> usize {
    // Relaxed: callers validate the entry's state around the read.
    let len = (e.id_len.load(Ordering::Relaxed) as usize).min(MAX_ID_LEN);
    for k in 0..len.div_ceil(8) {
        let w = e.id[k].load(Ordering::Relaxed).to_le_bytes();
        let n = (len - 8 * k).min(8);
        out[8 * k..8 * k + n].copy_from_slice(&w[..n]);
    }
    len
}

/// Asks the CPU to start loading the lines a lookup of keyed hash `hash` reads first (its home
/// entry's state, hash and id, and probe length), so that a batch's lookups of several groups
/// wait for their cache misses together instead of one after the other (on a table
/// of 1,000,000 groups each is a miss). Only a hint: no load, no fault, nothing to check.
pub fn prefetch(a: &Arena<'_>, hash: u64) {
    let mask = a.groups.len() as u64 - 1;
    let e: &GroupEntry = &a.groups[(hash & mask) as usize];
    // Lines 0 and 1 (state; probe, hash and the id's start).
    for off in [0, 64] {
        super::prefetch_line(e, off);
    }
}

/// Finds the active group `id` (with keyed hash `hash`). Returns `(index, incarnation)`.
///
/// Looks in each table the group table added (layout 16) that this process knows of, newest
/// (largest, and where inserts go first) first, then in the base table. A table published
/// since only sends the caller to the insert path, which looks in every published table under
/// the home claim.
#[inline]
pub fn find(a: &Arena<'_>, hash: u64, id: &[u8]) -> PResult<Option<(u32, u32)>> {
    let known = a.known_segments(GROUP_KIND);
    for k in (1..=known).rev() {
        let (first, t) = a.group_table(k)?;
        if let Some(found) = find_in(t, first, hash, id, false)? {
            return Ok(Some(found));
        }
    }
    find_in(a.groups, 0, hash, id, known == 0)
}

/// [`find`] in one table, whose first entry has global index `first`. `for_write`: read the
/// home entry's state with an RMW (the only table this process knows of).
#[inline]
fn find_in(
    t: &[GroupEntry],
    first: u32,
    hash: u64,
    id: &[u8],
    for_write: bool,
) -> PResult<Option<(u32, u32)>> {
    let slots = t.len();
    if slots == 0 || !slots.is_power_of_two() {
        return Err(Fault::Corrupted("group table size"));
    }
    let mask = slots as u64 - 1;
    let mut i = hash & mask;
    let home = &t[i as usize];
    // SYNC POINT(group-publish): Acquire pairs with the inserter's Release store of ACTIVE.
    // In a table that never grew as far as this process knows (a choice of how the line
    // comes, not of where to look: a table published since sends a miss to the insert path),
    // the home entry (where a group usually lives) is read for writing: the send that looks it up writes its line next (the append's
    // `tail`, the hint, or an insert's home claim), so its line comes once
    // (`load_for_write_u64`). Entries further along are other groups': plain loads, as in the
    // tables of a grown group table, where the home is often another table's.
    let st0 = if for_write {
        crate::sync::load_for_write_u64(&home.state, Ordering::Acquire)
    } else {
        home.state.load(Ordering::Acquire)
    };
    // A FREE home was never used (entries never return to FREE): no key with this home is in
    // this table, and its probe length need not be read (a miss in an added table of a grown
    // group table costs one line).
    if gstate::kind(st0) == gstate::FREE {
        return Ok(None);
    }
    // Acquire: pairs with an inserter's Release store of the probe length (made before it
    // initialises the entry). A stale (shorter) value only sends the caller to the insert path,
    // which scans again under the home claim. Untrusted: clamped to the table.
    let limit = home.probe.load(Ordering::Acquire).min(mask);
    let mut st = st0;
    for d in 0..=limit {
        let e = &t[i as usize];
        if d > 0 {
            // Acquire: SYNC POINT(group-publish), as above.
            st = e.state.load(Ordering::Acquire);
        }
        match gstate::kind(st) {
            gstate::FREE => return Ok(None),
            // Relaxed loads in the guard: see `id_matches`. The seqlock re-check proves the
            // entry was not retired and reused while we compared (a reuser changes `state`
            // before it rewrites the id); if it was, this is not our key any more, and the
            // caller's insert path re-scans under the home claim.
            gstate::ACTIVE
                if e.hash.load(Ordering::Relaxed) == hash
                    && id_matches(e, id)
                    && crate::sync::seqlock_still(&e.state, st) =>
            {
                return Ok(Some((first + i as u32, gstate::ginc(st))));
            }
            _ => {}
        }
        i = (i + 1) & mask;
    }
    Ok(None)
}

/// Where a send found its group: the entry's global index and the incarnation it was found
/// at ([`Sent::group`](super::send::Sent::group)). A sender that keeps it beside the group id
/// (the API keeps the last one per thread) finds the group again by [`recall`], without a
/// lookup.
///
/// One word (`[1:1][_:7][ginc:24][g:32]`, never 0), so that an `Option` of it is one too: a
/// send's description carries it beside the group's hash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Found(core::num::NonZeroU64);

impl Found {
    /// Entry `g` at incarnation `ginc` (its low 24 bits, as the state word holds it).
    pub fn new(g: u32, ginc: u32) -> Found {
        let w = 1 << 63 | u64::from(ginc & words::GINC_MASK) << 32 | u64::from(g);
        Found(core::num::NonZeroU64::new(w).unwrap_or(core::num::NonZeroU64::MIN))
    }

    /// No entry (global index `u32::MAX`, past every table): what a sender passes to learn
    /// where a group is (its send's [`Sent::group`](super::send::Sent::group)) before it knows;
    /// [`recall`] finds nothing there.
    pub const UNPLACED: Found = Found(match core::num::NonZeroU64::new(1 << 63 | 0xFFFF_FFFF) {
        Some(w) => w,
        None => core::num::NonZeroU64::MIN,
    });

    /// The entry's global index.
    fn g(self) -> u32 {
        self.0.get() as u32
    }

    /// The entry's incarnation.
    fn ginc(self) -> u32 {
        (self.0.get() >> 32) as u32 & words::GINC_MASK
    }
}

/// Group `id` where an earlier send `found` it, if its entry is still ACTIVE at that
/// incarnation and holds `id`: `(index, incarnation)` as [`find`] gives them, else `None` (the
/// caller looks it up). One load of the entry's state and a comparison of its id, where a
/// lookup reads the probe length and the hash as well and walks the probe (callgrind: some 100
/// instructions a single send less). An entry's key changes only with its incarnation (a
/// retire, then an insert at the next one), so the same incarnation holding `id` is `id`'s
/// group; an entry reused after the state load is caught as [`find`]'s result is: the append
/// checks the incarnation again after reading `tail` (SYNC POINT(entry-reuse)). A `found` of
/// another queue, or damaged, names no such entry or another id: `None`, never a fault.
#[inline]
pub fn recall(a: &Arena<'_>, found: Found, id: &[u8]) -> Option<(u32, u32)> {
    let (g, ginc) = (found.g(), found.ginc());
    let e = a.group(g).ok()?;
    // Acquire: SYNC POINT(group-publish), as `find_in`'s (the inserter's Release store of
    // ACTIVE, after the id's words). Read for writing (`load_for_write_u64`), as `find_in`'s
    // home entry is: the send writes the line next, so it comes once, exclusively (the line
    // model: one transfer less a message than a shared fetch and the append's upgrade). Stop
    // 59 loaded it plainly after ordinary builds ran single messages 1.19× as fast so; built
    // with their code aligned (`benches/compare.sh`), the two ran alike (64 pairs, 36 at or
    // above 1, medians 0.97 and 1.03), and ordinary builds of one path had differed by 9%.
    let st = crate::sync::load_for_write_u64(&e.state, Ordering::Acquire);
    (gstate::kind(st) == gstate::ACTIVE && gstate::ginc(st) == ginc && id_is(e, id))
        .then_some((g, ginc))
}

/// Finds or inserts the group `id`. Returns `(index, incarnation)`.
pub fn find_or_insert(
    a: &Arena<'_>,
    env: &dyn Env,
    me: Owner,
    hash: u64,
    id: &[u8],
) -> PResult<(u32, u32)> {
    if let Some(found) = find(a, hash, id)? {
        return Ok(found);
    }
    let slots = a.groups.len();
    let mask = slots as u64 - 1;
    // Every inserter of a key holds the home claim of its home in the base table, whichever
    // table it inserts into: the added tables are larger powers of two, so the same low bits
    // pick the base home, and the claim also serialises every writer of the key's homes there
    // (their probe lengths).
    let home = &a.groups[(hash & mask) as usize];
    let stolen = home_claim_taken(a, env, &home.home_claim, me)?;
    crash_point!();
    let r = insert_locked(a, env, me, hash, id, stolen);
    release_home_claim(&home.home_claim);
    r
}

/// How far from its home an insert prefers to place a group (layout 16): the newest table
/// with room this close takes it, else an older one, else wherever there is room. Keeps every
/// table's probes short as old tables empty and the newest fills.
const NEAR: u64 = 8;

/// The groups the table may hold with `k` added tables: `max_groups` in the base table, half
/// the entries of each added one.
fn capacity(a: &Arena<'_>, k: u32) -> u64 {
    let n = a.groups.len() as u32;
    a.max_groups + (crate::layout::slots_with(n, k) - u64::from(n)) / 2
}

/// The groups the group table holds now (its published tables), before it must add a table.
pub fn capacity_now(a: &Arena<'_>) -> u64 {
    capacity(a, a.published(GROUP_KIND))
}

/// The most groups the queue may hold at once: the capacity of every table the group table
/// may add under the size limit (layout 16); `max_groups` for a queue that may not grow.
pub fn capacity_max(a: &Arena<'_>) -> u64 {
    capacity(a, a.growth(GROUP_KIND))
}

/// Under the home claim (`stolen`: taken over from a dead owner).
fn insert_locked(
    a: &Arena<'_>,
    env: &dyn Env,
    me: Owner,
    hash: u64,
    id: &[u8],
    stolen: bool,
) -> PResult<(u32, u32)> {
    let mut full_retries = 0;
    let mut no_room = 0;
    // Cleared when a growth finds no room under the size limit (which the size classes and
    // the dedup table share): the table is then at its cap, whatever its own growth allows.
    let mut can_grow = true;
    let mut p = Patience::new();
    let mut first = true;
    // Whether this insert turned the kept groups out of the count already (once an insert).
    let mut reclaimed = false;
    loop {
        // Each rescan follows a change by another participant (progress); bounded by time,
        // as a hostile word could make every scan look changed.
        if !core::mem::take(&mut first) {
            p.wait(env, "the group table kept changing under an insert")?;
        }
        // Every table published now: a table an earlier inserter of our key used is among
        // them (see `published_latest`).
        let newest = published_latest(a, stolen);
        let may_grow = can_grow && newest < a.growth(GROUP_KIND);
        let (t, first_index, target, st, live, home, ours) = match place(a, env, hash, id, newest)?
        {
            Placed::Found(g, ginc) => return Ok((g, ginc)),
            // Every entry of every table looked taken. The count keeps the tables at most half
            // full, so this is a view not yet updated (a retire's tombstone we have not seen:
            // nothing orders it before our loads) or a damaged table: a new table certainly has
            // room; at the limit, look again within the bound, then report the table full.
            Placed::NoRoom if may_grow => {
                can_grow = grow_more(a, env, me, newest)?;
                continue;
            }
            Placed::NoRoom => {
                no_room += 1;
                if no_room > 16 {
                    return Err(Fault::GroupsFull);
                }
                continue; // paced by the wait at the top of the loop
            }
            Placed::Room {
                table,
                first,
                target,
                st,
                live,
                home,
                ours,
            } => (table, first, target, st, live, home, ours),
        };
        let cap = capacity(a, newest);
        match count_in(a, env, me, cap, may_grow, &mut full_retries, &mut reclaimed)? {
            Counted::Yes => {}
            Counted::Again => continue,
            Counted::Full if may_grow => {
                // At the capacity of the tables published: add the next (layout 16), and look
                // again (another inserter may have added it meanwhile). At the size limit, the
                // waits and the recount of a table that cannot grow decide.
                can_grow = grow_more(a, env, me, newest)?;
                full_retries = 0;
                continue;
            }
            Counted::Full => return Err(Fault::GroupsFull),
        }
        let mask = t.len() as u64 - 1;
        let e = &t[target as usize];
        let ginc = super::words::next_ginc(gstate::ginc(st));
        // Acquire: orders our initialisation after the previous incarnation's last use.
        if e.state
            .compare_exchange(
                st,
                gstate::pack(ginc, gstate::INSERTING, me),
                Ordering::Acquire,
                Ordering::Relaxed,
            )
            .is_err()
        {
            // Relaxed: a capacity counter.
            a.hdr.active_groups.0.fetch_sub(1, Ordering::Relaxed);
            continue;
        }
        // The probe length covers the new entry before it can become ACTIVE, and shrinks to the
        // farthest live entry of our home (entries retired since the last insert no longer
        // count). Release: pairs with `find`'s Acquire load.
        let dist = target.wrapping_sub(home) & mask;
        // Written only when it changes (it shares the key's line, which the group's consumer
        // reads: an unchanged word is not taken from it), or when the claim was taken over
        // from a dead holder, whose last value we may not see. Relaxed load: only home-claim
        // holders write it, and we hold the claim.
        let probe = &t[home as usize].probe;
        let want = live.max(dist);
        if stolen || probe.load(Ordering::Relaxed) != want {
            probe.store(want, Ordering::Release);
        }
        // SYNC POINT(group-publish), seqlock half: a lookup that compares the id of the
        // previous incarnation and reads any word we write below sees our state change in its
        // `seqlock_still` re-check (its Acquire fence against this Release fence).
        crate::sync::fence(Ordering::Release);
        crash_point!();
        let g = first_index + target as u32;
        // The key is ours as the scan read it from the state word our CAS expected; checked
        // again now that the entry is INSERTING by us (a stopped scanner whose expected word
        // came round again in the 24-bit incarnation would otherwise keep another key).
        // Relaxed: nobody else writes an entry we hold INSERTING.
        let keep_key = ours && e.hash.load(Ordering::Relaxed) == hash && id_matches(e, id);
        publish_entry(a, e, g, ginc, (!keep_key).then_some((hash, id)));
        return Ok((g, ginc));
    }
}

/// Adds the group table's next table (layout 16) after `newest`, or finds it added by
/// another inserter: `true`. `false` at the size limit.
fn grow_more(a: &Arena<'_>, env: &dyn Env, me: Owner, newest: u32) -> PResult<bool> {
    Ok(match super::grow::grow(a, env, me, GROUP_KIND, newest)? {
        super::grow::Grew::Added | super::grow::Grew::Found => true,
        super::grow::Grew::AtLimit => false,
    })
}

/// The group table's published tables, read under the key's home claim (`stolen`: taken over
/// from a dead owner), noted as known to this process. Every earlier inserter of the key held
/// the claim, and the table it used was published before it used it: where we acquired the
/// claim from its release, an Acquire load sees that count (the claim's Release/Acquire orders
/// it before); where we took it over from a dead holder, whose release we never read, an RMW
/// reads the latest count in its modification order. So an insert never misses a table that
/// holds its key, and the common insert writes nothing to the growth line.
fn published_latest(a: &Arena<'_>, stolen: bool) -> u32 {
    if a.growth(GROUP_KIND) == 0 {
        return 0;
    }
    let n = if stolen {
        // AcqRel: SYNC POINT(segment-publish), as `Arena::published`, and the latest value in
        // the count's modification order (as `grow::grow_locked` reads it).
        let n =
            crate::sync::idempotent_rmw_u64(&a.hdr.grow.0.segments[GROUP_KIND], Ordering::AcqRel);
        n.min(u64::from(a.growth(GROUP_KIND))) as u32
    } else {
        a.published(GROUP_KIND)
    };
    if n > a.known_segments(GROUP_KIND) {
        a.refresh_segments(GROUP_KIND);
    }
    n
}

/// Where an insert goes: the id's entry if some table holds it, else the entry to take.
enum Placed<'a> {
    /// The id's entry: index and incarnation.
    Found(u32, u32),
    /// Take entry `target` of `table` (global index `first + target`), whose state is `st`;
    /// `home` is the key's home there and `live` the farthest live entry of it; `ours`: the
    /// entry holds the key already (its plain tombstone).
    Room {
        table: &'a [GroupEntry],
        first: u32,
        target: u64,
        st: u64,
        live: u64,
        home: u64,
        ours: bool,
    },
    /// No table has a free or reusable entry (as this participant sees them).
    NoRoom,
}

/// Under the home claim: looks for `id` in every table (`0..=newest`), and chooses where to
/// insert it: the key's own retired entry (taken without writing the key), else the newest
/// table with room within [`NEAR`] of the key's home there,
/// else the nearest room of any table (the newest on a tie).
fn place<'a>(
    a: &Arena<'a>,
    env: &dyn Env,
    hash: u64,
    id: &[u8],
    newest: u32,
) -> PResult<Placed<'a>> {
    let mut own: Option<Placed<'a>> = None;
    let mut near: Option<Placed<'a>> = None;
    let mut best: Option<(u64, Placed<'a>)> = None;
    for k in (0..=newest).rev() {
        let (first, t) = a.group_table(k)?;
        match scan_home(a, env, t, hash, id)? {
            Scan::Found(i, ginc) => return Ok(Placed::Found(first + i, ginc)),
            Scan::Room {
                target,
                st,
                live,
                ours,
            } => {
                let mask = t.len() as u64 - 1;
                let home = hash & mask;
                let dist = target.wrapping_sub(home) & mask;
                let room = Placed::Room {
                    table: t,
                    first,
                    target,
                    st,
                    live,
                    home,
                    ours,
                };
                if ours {
                    // The newest table's (an older table may still hold the key active: every
                    // table is scanned before this is taken).
                    if own.is_none() {
                        own = Some(room);
                    }
                } else if dist <= NEAR {
                    // The newest such table (tables are scanned newest first).
                    if near.is_none() {
                        near = Some(room);
                    }
                } else if best.as_ref().is_none_or(|(d, _)| dist < *d) {
                    best = Some((dist, room));
                }
            }
            Scan::NoRoom => {}
        }
    }
    // Every table was scanned for the id (it is active in none).
    Ok(own
        .or(near)
        .or(best.map(|(_, room)| room))
        .unwrap_or(Placed::NoRoom))
}

/// What a scan of a home's probe range found, under the home claim.
enum Scan {
    /// The id's entry: index in the table and incarnation.
    Found(u32, u32),
    /// Where to insert (the key's own retired entry, else a reusable entry, else the
    /// first free one; `st` its state word; `ours`: it holds the key already) and the
    /// distance of the farthest live entry of the home.
    Room {
        target: u64,
        st: u64,
        live: u64,
        ours: bool,
    },
    /// No free or reusable entry in the whole table.
    NoRoom,
}

/// Under the home claim of `hash`: looks for `id` in table `t` as far as the home's probe
/// length, and for a free or reusable entry as far as it takes (turning a dead inserter's
/// half-made entry into a tombstone on the way). Every live entry with our home lies within
/// the probe length (we hold the home claim, so none is added meanwhile).
fn scan_home(
    a: &Arena<'_>,
    env: &dyn Env,
    t: &[GroupEntry],
    hash: u64,
    id: &[u8],
) -> PResult<Scan> {
    let slots = t.len();
    if slots == 0 || !slots.is_power_of_two() {
        return Err(Fault::Corrupted("group table size"));
    }
    let mask = slots as u64 - 1;
    let home = hash & mask;
    let mut i = home;
    let mut reusable: Option<(u64, u64)> = None;
    let mut ours: Option<(u64, u64)> = None;
    let mut end = None;
    // Acquire: the last holder of the home claim wrote it (SYNC POINT(claim) orders it too).
    let limit = t[home as usize].probe.load(Ordering::Acquire).min(mask);
    let mut live = 0;
    for d in 0..slots as u64 {
        if d > limit && (reusable.is_some() || end.is_some()) {
            break;
        }
        let e = &t[i as usize];
        // Acquire: SYNC POINT(group-publish), as in `find`.
        let st = e.state.load(Ordering::Acquire);
        match gstate::kind(st) {
            gstate::FREE => {
                end = Some((i, st));
                break;
            }
            gstate::ACTIVE => {
                // Relaxed: see `id_matches`; nobody else may insert or retire-and-reuse this
                // key while we hold its home claim, but another key may reuse the entry,
                // hence the re-check.
                let h = e.hash.load(Ordering::Relaxed);
                if h == hash && id_matches(e, id) && e.state.load(Ordering::Acquire) == st {
                    return Ok(Scan::Found(i as u32, gstate::ginc(st)));
                }
                if h & mask == home {
                    live = d;
                }
            }
            gstate::INSERTING => {
                // Another key's inserter (ours all hold our home claim). If it died, its
                // half-made entry becomes a tombstone, reusable like any other.
                if a.owner_dead(env, gstate::owner(st)) && tombstone(a, e, st) && reusable.is_none()
                {
                    reusable = Some((i, e.state.load(Ordering::Acquire)));
                }
            }
            _ => {
                // A plain tombstone is reusable; a tombstone with an owner is being
                // quarantined: not yet.
                if gstate::owner(st) == Owner::NOBODY {
                    // Relaxed: see `id_matches`; a reuser of the entry changes `state`, which
                    // the CAS that takes it checks. One holding our key is taken first: its
                    // key need not be written again.
                    let h = e.hash.load(Ordering::Relaxed);
                    if ours.is_none() && h == hash && id_matches(e, id) {
                        ours = Some((i, st));
                    }
                    if reusable.is_none() {
                        reusable = Some((i, st));
                    }
                }
            }
        }
        i = (i + 1) & mask;
    }
    Ok(match (ours, reusable.or(end)) {
        (Some((target, st)), _) => Scan::Room {
            target,
            st,
            live,
            ours: true,
        },
        (None, Some((target, st))) => Scan::Room {
            target,
            st,
            live,
            ours: false,
        },
        (None, None) => Scan::NoRoom,
    })
}

/// Writes a new incarnation `ginc` of entry `e` (index `g`, state INSERTING by us) for
/// `key` (`hash`, `id`; `None`: the entry holds the key already), then publishes it ACTIVE
/// (SYNC POINT(group-publish)).
fn publish_entry(a: &Arena<'_>, e: &GroupEntry, g: u32, ginc: u32, key: Option<(u64, &[u8])>) {
    // Relaxed stores: all published by the Release store of ACTIVE below.
    if let Some((hash, id)) = key {
        e.hash.store(hash, Ordering::Relaxed);
        e.id_len.store(id.len() as u64, Ordering::Relaxed);
        for (k, chunk) in id.chunks(8).enumerate() {
            e.id[k].store(words::text_word(chunk), Ordering::Relaxed);
        }
    }
    // The sentinel's next incarnation (layout 19: its incarnations follow one another across
    // the entry's group incarnations and reopens, so that an appender stopped on an older one
    // never matches the new word).
    let sinc = node::inc(e.sentinel.load(Ordering::Relaxed)).wrapping_add(1);
    let sentinel = node::pack(sinc, a.sentinel_index(g));
    e.sentinel
        .store(node::pack(sinc, node::NIL), Ordering::Relaxed);
    e.head.store(sentinel, Ordering::Relaxed);
    // SYNC POINT(entry-reuse): Release, so that an appender of the entry's previous group
    // that reads this `tail` also sees our CAS that took the entry from its tombstone, and
    // its check of the incarnation after the load fails (`send::append`).
    e.tail.store(sentinel, Ordering::Release);
    // No hint queued for the new incarnation: a `HINT` bit left by the entry's last group (a
    // receiver that popped its hint found it gone, or died) is cleared, by an RMW only where
    // set (the word is the consumer's). But a placeholder (layout 27: `HINT | STALE`, the
    // last group served in place) is still queued, the ring's first entry, naming this
    // entry: its bits stay, so that a pop drops it and the new group's first ready-check
    // settles it (fresh where it is the ring's only hint, else taken out and pushed behind
    // the others); cleared, its pop would serve the new group from the old group's place.
    // Relaxed: as the stores above.
    if e.claim.load(Ordering::Relaxed) & words::owner::STALE == 0 {
        super::ready::clear_hint(e, Ordering::Relaxed);
    }
    // A tombstone may be a quarantined group's, which a dead claim holder can leave with a
    // dummy named, or a reopened one's (a sentinel past position 0). Relaxed: as the stores
    // above. Written only where not 0 (the line is the consumer's: an unchanged word is not
    // taken from it).
    if e.pending_free.load(Ordering::Relaxed) != 0 {
        e.pending_free.store(0, Ordering::Relaxed);
    }
    if e.sentinel_pos.load(Ordering::Relaxed) != 0 {
        e.sentinel_pos.store(0, Ordering::Relaxed);
    }
    // Relaxed: a unique-value counter; uniqueness needs no ordering.
    let base = a
        .hdr
        .group_seq
        .0
        .fetch_add(1, Ordering::Relaxed)
        .wrapping_add(1);
    e.seq_base.store(base, Ordering::Relaxed);
    // SYNC POINT(group-publish): Release makes the id and list words visible to lookups.
    e.state.store(
        gstate::pack(ginc, gstate::ACTIVE, Owner::NOBODY),
        Ordering::Release,
    );
}

/// Loads group `g`'s state and checks it is the active incarnation `ginc`.
pub fn is_active(e: &GroupEntry, ginc: u32) -> bool {
    // Acquire: pairs with the inserter's Release store (SYNC POINT(group-publish)).
    let st = e.state.load(Ordering::Acquire);
    gstate::kind(st) == gstate::ACTIVE && gstate::ginc(st) == ginc
}
