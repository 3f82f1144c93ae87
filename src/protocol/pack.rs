//! Packs (layouts 22 and 23): the messages of one group that one batch sends, in one slot
//! (`docs/design/packed-batches.md`).
//!
//! A pack's slot header says `LENS_PACKED` in its `lens` word, with the member count `k`
//! (`2 ..= MAX_PACK`) and the bytes `used` of the payload it occupies
//! (`words::unit_lens`). The payload starts with the directory, one [`MsgWords`] entry of
//! 32 bytes a member, then the members' bytes in member order, each right after the one
//! before (layout 23; layout 22 started each body on a line): its body, its dedup id, its
//! framed attributes. `used` ends at the last member's last byte. Back to back, ten 64-byte
//! bodies with their dedup ids take 11 lines after the directory's 5, where a line each took
//! 20: the lines a batch moves are what it costs across processes (no alignment is promised
//! for a body that was copied in, a pack's or a message's own).
//!
//! Everything here is arithmetic on words read from shared memory, so everything is checked
//! ([`place`]): a damaged directory is a damaged message, never an index out of bounds. The
//! writer's side is [`lay_out`]; `place` of what `lay_out` wrote gives back its places.
//!
//! [`MsgWords`]: crate::layout::MsgWords
//!
//! Packs landed in steps (`docs/design/packed-batches.md`, "How it lands"): 1a fixed the
//! format and its checks; 1b sends packs ([`write_members`], `send`) and reads them member by
//! member ([`unit`]); layout 23 lays the members back to back, and a handle packs by default.

use super::{words, Arena, Fault, PResult};
use crate::layout::{MsgHeader, MsgWords, PACK_MEMBER_SIZE};

/// The most members a pack holds.
pub use crate::layout::MAX_PACK;
use crate::sync::Ordering;

// `place`'s sums stay below 2^34: no overflow on a 64-bit target, the only kind shmfifo builds
// for (its arena words are u64 offsets).
const _: () = assert!(usize::BITS >= 64);

/// Where one member's bytes lie in its pack's payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Place {
    /// Offset of the body from the payload's start.
    pub at: usize,
    /// Body bytes.
    pub body: usize,
    /// Dedup id bytes (after the body).
    pub dedup: usize,
    /// Framed attribute bytes (after the dedup id).
    pub attrs: usize,
}

impl Place {
    /// A member of these lengths placed after a member ending at `end`: its body right after
    /// it. (Lengths below 2^24 each and `end` below 2^32: no sum overflows, see below.)
    fn after(end: usize, body: usize, dedup: usize, attrs: usize) -> Self {
        Place {
            at: end,
            body,
            dedup,
            attrs,
        }
    }

    /// The offset one past the member's last byte.
    pub fn end(&self) -> usize {
        self.at + self.body + self.dedup + self.attrs
    }
}

/// Every member's place in one pack, and the bytes the pack occupies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Places {
    /// The members, `k` of them.
    pub k: usize,
    /// Member `j`'s place, for `j < k`.
    pub members: [Place; MAX_PACK],
    /// Bytes from the payload's start to the last member's end.
    pub used: usize,
}

impl Places {
    /// The members' places.
    pub fn members(&self) -> &[Place] {
        &self.members[..self.k]
    }
}

/// A pack in its slot: its directory's entries (each member's own words) and its members'
/// places, checked.
#[derive(Debug, Clone, Copy)]
pub struct Pack<'a> {
    /// The members' words, `places.k` of them.
    pub members: &'a [MsgWords],
    /// Where each member's bytes lie (private: [`Pack::bytes`] trusts them).
    places: Places,
    /// The slot's payload.
    payload: *const u8,
}

/// The pack in slot `idx`, whose header's `lens` word is `unit` (read by the caller after the
/// Acquire that published the slot): its directory found ([`Arena::members`]) and its words
/// checked ([`place`]) before any offset is used. A damaged pack is corruption.
///
/// # Safety
/// As [`Arena::members`]': while the pack lives, no participant of this process copies into
/// the slot's payload.
pub unsafe fn open<'a>(a: &Arena<'a>, idx: u32, unit: u64) -> PResult<Pack<'a>> {
    // SAFETY: the caller's contract is `open_with`'s.
    unsafe { open_with(a, idx, unit, false) }
}

/// [`open`] for the receive that goes on to take the pack's members: each line of the
/// directory is fetched for writing (`sync::load_for_write_u64` on its first entry's state
/// word) before its lengths are read, so that it comes to the consumer once, exclusively,
/// where a load and then the take's store would fetch it twice.
///
/// # Safety
/// As [`open`]'s.
#[inline]
pub unsafe fn open_to_take<'a>(a: &Arena<'a>, idx: u32, unit: u64) -> PResult<Pack<'a>> {
    // SAFETY: the caller's contract is `open_with`'s.
    unsafe { open_with(a, idx, unit, true) }
}

/// [`open`], the directory's lines read for writing if `take`.
///
/// # Safety
/// As [`open`]'s.
#[inline(always)]
unsafe fn open_with<'a>(a: &Arena<'a>, idx: u32, unit: u64, take: bool) -> PResult<Pack<'a>> {
    // The word is checked whole by `place` below; `members` refuses a count past `MAX_PACK`
    // first, so that only a directory's worth of words is ever loaded.
    let (k, _) = words::unpack_unit_lens(unit);
    let (cl, _, payload) = a.class_of(idx)?;
    // SAFETY: the caller's contract is `members`', and `(cl, payload)` are `class_of(idx)`'s.
    let members = unsafe { a.members_in(idx, k, Some((&cl, payload))) }?;
    let mut lens = [0u64; MAX_PACK];
    for (j, (l, m)) in lens.iter_mut().zip(members).enumerate() {
        if take && j % ENTRIES_A_LINE == 0 {
            // Acquire: the weakest ordering a read for writing takes. Its value is not used
            // (the walk loads the member's word where it looks at it); the caller's Acquire
            // of the slot's words is what orders the directory's loads.
            crate::sync::load_for_write_u64(&m.vis, Ordering::Acquire);
        }
        // Relaxed: a member's lengths are written before the pack is published and never
        // after; the caller's Acquire of the slot's words orders this load after them.
        *l = m.lens.load(Ordering::Relaxed);
    }
    let places = place(unit, &lens[..k], cl.cap as usize).map_err(Fault::Corrupted)?;
    Ok(Pack {
        members,
        places,
        payload,
    })
}

impl<'a> Pack<'a> {
    /// Where each member's bytes lie, as `open` checked them.
    #[cfg(any(test, feature = "loom"))]
    pub fn places(&self) -> &Places {
        &self.places
    }

    /// Where member `j`'s bytes start and how many there are (as [`Pack::bytes`], without a
    /// slice: for a copy that its caller validates afterwards, as `inspect::peek` does);
    /// `None` past the last member.
    pub fn span(&self, j: usize) -> Option<(*const u8, usize)> {
        let p = self.places.members().get(j)?;
        Some((self.payload.wrapping_add(p.at), p.end() - p.at))
    }

    /// Member `j`'s bytes: its body, its dedup id and its framed attributes, in that order
    /// ([`Place`] splits them); `None` past the last member.
    ///
    /// # Safety
    /// As [`Arena::payload`]'s: while the slice lives, no participant may free or rewrite the
    /// pack (the caller holds its group's claim, or the group is marked by its quarantine).
    pub unsafe fn bytes(&self, j: usize) -> Option<&'a [u8]> {
        let p = self.places.members().get(j)?;
        // Whoever takes the slice reads it (a copy out, or a borrowed body read in place).
        crate::sync::payload_touch(self.payload.wrapping_add(p.at), p.end() - p.at, false);
        // SAFETY: `open` checked with `place` that member `j` lies after the directory (its
        // body starts at or past `first_body(k)`, so no byte of it is a directory word) and
        // ends within `used <= cap <= stride` bytes of the payload's start, inside the slot's
        // payload, mapped as long as the arena; the caller keeps writers away while it lives.
        Some(unsafe { core::slice::from_raw_parts(self.payload.add(p.at), p.end() - p.at) })
    }
}

/// One member for [`write_members`]: its lengths, its bytes as pieces copied back to back
/// (their lengths sum to `body + dedup + attrs`: the body, the dedup id and the framed
/// attributes, cut wherever the caller's pieces are cut), and the word its `recv_ms` holds
/// while the pack is being written (its dedup entry's index + 1, for a settler of a producer
/// that dies, as a message's own slot's is; 0 without one).
#[derive(Debug, Clone, Copy)]
pub struct Member<'x> {
    /// Body bytes.
    pub body: usize,
    /// Dedup id bytes.
    pub dedup: usize,
    /// Framed attribute bytes.
    pub attrs: usize,
    /// The bytes, in order.
    pub parts: &'x [&'x [u8]],
    /// `recv_ms` while the slot is claimed: the dedup back-pointer.
    pub back: u64,
}

/// Writes a pack of `members` (each one's body, dedup id and framed attributes) into slot
/// `idx`: every member's bytes at its place (`places`, what [`lay_out`] made of their
/// lengths: each member's are checked against its place), then its directory entry: its
/// lengths, its dedup back-pointer, never received, and its state word published at `epoch0`
/// with no deadline (visible), as a message's is when its send publishes it (nobody reads it
/// before the unit's word says `PACKED`). Returns the slot's `lens` word for the pack
/// ([`words::unit_lens`]), which the caller stores with the slot's other words; `None` if the
/// places are not the members' count or do not fit the slot's class.
///
/// # Safety
/// The caller has slot `idx` claimed: no other participant reads or writes its payload until
/// the caller publishes it (the Release or SeqCst store that does orders these Relaxed
/// stores and byte copies before it, SYNC POINT(node-link)). `places` is what [`lay_out`]
/// gave for these members' lengths: every place past the directory and inside `used` (each
/// member's lengths and pieces are checked against its place here, the places themselves
/// only in debug builds; a lender's places, which `lay_out` did not make, are checked by
/// `send_lent_pack`).
pub unsafe fn write_members(
    a: &Arena<'_>,
    idx: u32,
    epoch0: u32,
    members: &[Member<'_>],
    places: &Places,
) -> PResult<Option<u64>> {
    let (cl, _, payload) = a.class_of(idx)?;
    if members.len() != places.k || places.used > cl.cap as usize {
        return Ok(None);
    }
    // One pass: each member's lengths against its place, then each piece bounded by the
    // place's end before it is copied, and the pieces filling the place exactly (a caller
    // whose pieces and lengths differ gets an error, never a byte outside its place; a
    // partly written slot is ours alone, freed by the caller).
    let mismatch = || {
        Err(Fault::Corrupted(
            "a pack member's pieces and lengths differ",
        ))
    };
    for (m, p) in members.iter().zip(places.members()) {
        if m.body != p.body || m.dedup != p.dedup || m.attrs != p.attrs {
            return mismatch();
        }
        let (mut at, end) = (p.at, p.end());
        debug_assert!(
            at >= first_body(places.k) && end <= places.used,
            "a place outside its pack: not `lay_out`'s"
        );
        for part in m.parts {
            let len = part.len();
            if len > end - at {
                return mismatch();
            }
            // Empty pieces passed over, as in a message's own send (a call of `memcpy` each).
            if len != 0 {
                // SAFETY: the member's place `[p.at, p.end())` lies past the directory (no
                // byte of it is a directory word) and within `used <= cap <= stride` bytes of
                // the payload's start (`places` is `lay_out`'s: this function's contract;
                // `used <= cap` checked above), and this piece ends at or before `p.end()`
                // (checked just above); the caller has the slot claimed, so nobody else
                // touches them.
                unsafe { core::ptr::copy_nonoverlapping(part.as_ptr(), payload.add(at), len) };
            }
            at += len;
        }
        if at != end {
            return mismatch();
        }
    }
    let mut backs = [0u64; MAX_PACK];
    for (b, m) in backs.iter_mut().zip(members) {
        *b = m.back;
    }
    // SAFETY: this function's contract; `(cl, payload)` are `class_of(idx)`'s.
    unsafe {
        directory_at(
            a,
            idx,
            (&cl, payload),
            epoch0,
            &backs[..members.len()],
            places,
        )
    }
}

/// The directory of a pack whose members' bytes lie in slot `idx` at `places` already
/// (copied there by [`write_members`], or written in place by a lender, `Queue::loan_batch`):
/// each member's entry (its lengths, its dedup back-pointer `backs[j]`, never received, its
/// state word published at `epoch0` with no deadline), as [`write_members`] describes. Returns
/// the slot's `lens` word for the pack; `None` if `backs` is not the members' count or the
/// places do not fit the slot's class.
///
/// # Safety
/// As [`write_members`]'.
pub unsafe fn write_directory(
    a: &Arena<'_>,
    idx: u32,
    epoch0: u32,
    backs: &[u64],
    places: &Places,
) -> PResult<Option<u64>> {
    let (cl, _, payload) = a.class_of(idx)?;
    // SAFETY: this function's contract; `(cl, payload)` are `class_of(idx)`'s.
    unsafe { directory_at(a, idx, (&cl, payload), epoch0, backs, places) }
}

/// [`write_directory`] with the slot's class and payload found already (`at`:
/// `class_of(idx)`'s).
///
/// # Safety
/// As [`write_members`]', and `at` is `class_of(idx)`'s class and payload.
#[inline(always)]
unsafe fn directory_at(
    a: &Arena<'_>,
    idx: u32,
    at: (&super::Class<'_>, *mut u8),
    epoch0: u32,
    backs: &[u64],
    places: &Places,
) -> PResult<Option<u64>> {
    let (cl, payload) = at;
    if backs.len() != places.k || places.used > cl.cap as usize {
        return Ok(None);
    }
    // SAFETY: the caller has the slot claimed (this function's contract), so no other
    // participant copies into its payload; `(cl, payload)` are `class_of(idx)`'s.
    let words = unsafe { a.members_in(idx, places.k, Some((cl, payload))) }?;
    for ((&back, p), w) in backs.iter().zip(places.members()).zip(words) {
        // Relaxed, the four: published by the caller's store of the slot's words, Release or
        // SeqCst, after them (see # Safety), and `recv_ms` to settlers by `dedup::set_msg`'s
        // Release store, after it; nobody reads them before.
        w.lens.store(
            words::pack_lens(p.body, p.attrs, p.dedup, 0),
            Ordering::Relaxed,
        );
        w.recv_ms.store(back, Ordering::Relaxed);
        w.first_recv_ms.store(0, Ordering::Relaxed);
        w.vis.store(
            words::vis::pack(epoch0, words::vis::published(0)),
            Ordering::Relaxed,
        );
    }
    crate::sync::payload_touch(payload, places.used, true);
    Ok(Some(words::unit_lens(places.k, places.used)))
}

/// [`write_members`] of members given as `[body, dedup id, framed attributes]`, without dedup
/// back-pointers.
///
/// # Safety
/// The caller has slot `idx` claimed, as for [`write_members`] (the places are this function's
/// own).
#[cfg(any(test, feature = "loom"))]
pub unsafe fn write(
    a: &Arena<'_>,
    idx: u32,
    epoch0: u32,
    members: &[[&[u8]; 3]],
) -> PResult<Option<u64>> {
    let mut ms = [Member {
        body: 0,
        dedup: 0,
        attrs: 0,
        parts: &[],
        back: 0,
    }; MAX_PACK];
    for (m, parts) in ms.iter_mut().zip(members) {
        *m = Member {
            body: parts[0].len(),
            dedup: parts[1].len(),
            attrs: parts[2].len(),
            parts,
            back: 0,
        };
    }
    if members.len() > MAX_PACK {
        return Ok(None);
    }
    let sizes: [(usize, usize, usize); MAX_PACK] =
        core::array::from_fn(|j| ms.get(j).map_or((0, 0, 0), |m| (m.body, m.dedup, m.attrs)));
    let cap = a.class_of(idx)?.0.cap as usize;
    let Some(places) = lay_out(&sizes[..members.len()], cap) else {
        return Ok(None);
    };
    // SAFETY: this function's contract is `write_members`' slot claim; `places` is
    // `lay_out`'s for these members' lengths (just above).
    unsafe { write_members(a, idx, epoch0, &ms[..members.len()], &places) }
}

/// A node of a group's list as its readers see it (layout 22): one message, whose own words
/// are its slot header's, or a pack, whose members' words are its directory's.
#[derive(Debug, Clone, Copy)]
#[expect(
    clippy::large_enum_variant,
    reason = "a walk's one unit at a time, on the stack: boxing a pack would allocate a step"
)]
pub enum Unit<'a> {
    /// A message in a slot of its own.
    One(&'a MsgWords),
    /// A pack.
    Pack(Pack<'a>),
}

impl<'a> Unit<'a> {
    /// The messages' own words, in order: one, or a pack's `k`.
    pub fn words(&self) -> &'a [MsgWords] {
        match self {
            Unit::One(w) => core::slice::from_ref(*w),
            Unit::Pack(p) => p.members,
        }
    }
}

/// The `DELETED` word a pack's unit (its state word `w`, `PACKED`) takes once every member is
/// deleted, before its slot is freed: at the largest of its members' epochs (`members`' words,
/// their offsets from the unit's epoch0, at which they started), so that the free (one past
/// it) and the next claim (one more) start the slot's words past every epoch a receipt handle
/// of this pack names (`handle::current`, invariant P).
pub fn deleted_word(w: u64, members: &[MsgWords]) -> u64 {
    let vis = words::vis::epoch;
    let top = members
        .iter()
        // Relaxed: the caller read each member deleted, with Acquire, under the claim (or the
        // quarantine's mark); a deleted member's word changes no more.
        .map(|m| vis(m.vis.load(Ordering::Relaxed)).wrapping_sub(vis(w)) & words::vis::EPOCH_MASK)
        .max()
        .unwrap_or(0);
    words::vis::pack(vis(w).wrapping_add(top), words::vis::DELETED)
}

/// The own words of the messages in slot `idx` (header `m`), whose state word the caller
/// loaded as `w` with Acquire (or stronger) after the link that made it reachable: a pack's
/// directory entries if `w` says `PACKED`, else the message's own words. Words only, no
/// member's bytes placed: what a handle's delete or visibility change, a cleanup, a recovery
/// or a ready check reads. [`Arena::members`] bounds the directory by [`MAX_PACK`] and the
/// slot; a count below two is a damaged pack.
///
/// # Safety
/// As [`Arena::members`]'.
#[inline]
pub unsafe fn words<'a>(
    a: &Arena<'a>,
    idx: u32,
    m: &'a MsgHeader,
    w: u64,
) -> PResult<&'a [MsgWords]> {
    if words::vis::state(w) != words::vis::State::Packed {
        return Ok(core::slice::from_ref(&m.own));
    }
    // Relaxed: written before the pack was published, which the caller's load of `w` read.
    let lens = m.own.lens.load(Ordering::Relaxed);
    let (k, _) = words::unpack_unit_lens(lens);
    if lens >> 56 != u64::from(words::LENS_PACKED) || k < 2 {
        return Err(Fault::Corrupted("not a pack"));
    }
    // SAFETY: the caller's contract.
    unsafe { a.members(idx, k) }
}

/// The unit in slot `idx` (header `m`) whose state word the caller loaded as `w` with Acquire
/// (or stronger) after the link that made it reachable: a pack if `w` says `PACKED` (its
/// directory opened and checked, [`open`]), else the message itself.
///
/// # Safety
/// As [`open`]'s.
pub unsafe fn unit<'a>(a: &Arena<'a>, idx: u32, m: &'a MsgHeader, w: u64) -> PResult<Unit<'a>> {
    if words::vis::state(w) != words::vis::State::Packed {
        return Ok(Unit::One(&m.own));
    }
    // Relaxed: written before the pack was published, which the caller's load of `w` read.
    let lens = m.own.lens.load(Ordering::Relaxed);
    // SAFETY: the caller's contract is `open`'s.
    Ok(Unit::Pack(unsafe { open(a, idx, lens) }?))
}

/// Directory entries a 64-byte line holds (the directory starts a payload, at a line).
const ENTRIES_A_LINE: usize = 64 / PACK_MEMBER_SIZE;

/// The offset of member 0's body: right after a directory of `k` entries.
pub fn first_body(k: usize) -> usize {
    k * PACK_MEMBER_SIZE
}

/// Lays out members of the given `(body, dedup, attrs)` lengths: their places, or `None` if
/// there are fewer than two or more than [`MAX_PACK`] of them, a length is beyond a lens
/// word's fields, or the pack would take more than `cap` bytes (the class's slot).
pub fn lay_out(sizes: &[(usize, usize, usize)], cap: usize) -> Option<Places> {
    if !(2..=MAX_PACK).contains(&sizes.len()) {
        return None;
    }
    let mut out = Places {
        k: sizes.len(),
        members: [Place::default(); MAX_PACK],
        used: 0,
    };
    let mut end = first_body(sizes.len());
    for (p, &(body, dedup, attrs)) in out.members.iter_mut().zip(sizes) {
        if body > words::LEN_MASK as usize || attrs > words::LEN_MASK as usize || dedup > 0xFF {
            return None;
        }
        *p = Place::after(end, body, dedup, attrs);
        end = p.end();
        if end > cap {
            return None;
        }
    }
    out.used = end;
    Some(out)
}

/// The place of one message's bytes of the given `(body, dedup, attrs)` lengths in a slot of
/// its own (a message's layout: its bytes from the payload's start, no directory), as
/// [`Places`] of one member: what a lent batch of one lays out (`Queue::loan_batch`).
pub fn lay_out_one(body: usize, dedup: usize, attrs: usize) -> Places {
    let mut members = [Place::default(); MAX_PACK];
    members[0] = Place::after(0, body, dedup, attrs);
    Places {
        k: 1,
        members,
        used: members[0].end(),
    }
}

/// The members' places as a pack's words describe them: `unit` its slot's `lens` word (flag
/// `LENS_PACKED`), `lens` its directory's member `lens` words (the first `k` the unit word
/// names; more are ignored), `cap` its class's usable payload bytes. Refused, as corruption:
/// a word without the flag, fewer than two or more than [`MAX_PACK`] members (or fewer words
/// than that), a member with a flag, a `used` past `cap`, a member past `used`, or a last
/// member that does not end at `used` (every byte of a pack is accounted for, so a damaged
/// length shows).
pub fn place(unit: u64, lens: &[u64], cap: usize) -> Result<Places, &'static str> {
    // The flag alone, and no bit between the count and `used`.
    if unit >> 56 != u64::from(words::LENS_PACKED) || (unit >> 32) & 0xFFFF != 0 {
        return Err("not a pack");
    }
    let (k, used) = words::unpack_unit_lens(unit);
    if !(2..=MAX_PACK).contains(&k) || lens.len() < k {
        return Err("pack member count");
    }
    if used > cap {
        return Err("pack exceeds its slot");
    }
    let mut out = Places {
        k,
        members: [Place::default(); MAX_PACK],
        used,
    };
    let mut end = first_body(k);
    for (p, &w) in out.members.iter_mut().zip(&lens[..k]) {
        let (body, attrs, dedup, flags) = words::unpack_lens(w);
        if flags != 0 {
            return Err("pack member flags");
        }
        // Each length is below 2^24 and `end` below 2^32 (it is at most `used`): no sum
        // overflows a usize (64 bits, asserted above).
        *p = Place::after(end, body, dedup, attrs);
        end = p.end();
        if end > used {
            return Err("pack member exceeds the pack");
        }
    }
    if end != used {
        return Err("pack length");
    }
    Ok(out)
}

#[cfg(all(test, not(shmfifo_loom)))]
mod tests {
    use super::*;

    /// Written into a slot, a pack reads back: every member's words and bytes, through the
    /// heap arena's table (a mapping's directory in the payload: `api::queue`'s tests).
    #[test]
    fn a_written_pack_opens_with_its_words_and_bytes() {
        use crate::protocol::heap::HeapArena;
        use crate::protocol::vis;
        let g = crate::layout::Geometry {
            participants: 1,
            max_groups: 2,
            group_slots: 4,
            ready_slots: 4,
            classes: vec![(64, 2), (1024, 3)],
            dedup_slots: 0,
            dedup_key_words: crate::layout::DEDUP_KEY_WORDS,
            attempt_slots: 0,
            class_growth: Vec::new(),
            size_limit: 0,
            dedup_growth: 0,
            group_growth: 0,
        };
        let heap = HeapArena::with_packs(&g);
        let a = heap.arena();
        let members: [[&[u8]; 3]; 3] = [
            [b"hello", b"d1", b""],
            [b"world!", b"", b"attrs"],
            [&[7u8; 100], b"dd", b"at"],
        ];
        // This test's thread alone uses the arena: no copy into a slot races a view of it.
        // SAFETY: as just said.
        let open_at = |idx, unit| unsafe { open(&a, idx, unit) };
        // SAFETY: as above.
        let members_of = |idx, k| unsafe { a.members(idx, k) };
        // SAFETY: as above.
        let unit = unsafe { write(&a, 3, 5, &members) }.unwrap().unwrap();
        let p = open_at(3, unit).unwrap();
        assert_eq!(p.places().k, 3);
        for (j, m) in members.iter().enumerate() {
            // SAFETY: as above.
            let bytes = unsafe { p.bytes(j) }.unwrap();
            assert_eq!(bytes, [m[0], m[1], m[2]].concat(), "member {j}");
            let w = &p.members[j];
            assert_eq!(
                w.vis.load(Ordering::Relaxed),
                vis::pack(5, vis::published(0))
            );
            assert_eq!(w.recv_ms.load(Ordering::Relaxed), 0);
            let (b, at, d, f) = words::unpack_lens(w.lens.load(Ordering::Relaxed));
            assert_eq!((b, d, at, f), (m[0].len(), m[1].len(), m[2].len(), 0));
        }
        // SAFETY: as above.
        assert_eq!(unsafe { p.bytes(3) }, None);
        // Another slot's table entries are untouched.
        assert_eq!(members_of(4, 3).unwrap()[0].lens.load(Ordering::Relaxed), 0);
        // What does not fit the 64-byte class (its directory alone) or is one message only is
        // no pack; a slot past the arena is corruption.
        // SAFETY: as above.
        assert_eq!(unsafe { write(&a, 0, 5, &members[..2]) }, Ok(None));
        // SAFETY: as above.
        assert_eq!(unsafe { write(&a, 3, 5, &members[..1]) }, Ok(None));
        // SAFETY: as above.
        assert!(unsafe { write(&a, 99, 5, &members) }.is_err());
        assert!(open_at(99, unit).is_err());
        assert!(members_of(3, MAX_PACK + 1).is_err());
        assert!(
            members_of(a.total, 0).is_err(),
            "past the arena, even for no entry"
        );
        // A member's length damaged: the pack no longer opens.
        p.members[1].lens.fetch_add(64 << 32, Ordering::Relaxed);
        assert!(matches!(open_at(3, unit), Err(Fault::Corrupted(_))));
        p.members[1].lens.fetch_sub(64 << 32, Ordering::Relaxed);
        assert!(open_at(3, unit).is_ok());
        // Nor does a unit word without the flag, or naming one member or eleven.
        let used = p.places().used;
        assert!(open_at(3, unit & !(0xFF << 56)).is_err());
        assert!(open_at(3, words::unit_lens(1, used)).is_err());
        assert!(open_at(3, words::unit_lens(11, used)).is_err());
        // A member whose pieces do not fill its place exactly (more bytes than its lengths
        // say, or fewer) is refused, and no byte lands past its place: the next member's
        // bytes, written before, stay as they were.
        let places = lay_out(&[(5, 0, 0), (6, 0, 0)], 1024).unwrap();
        let (long, short): (&[&[u8]], &[&[u8]]) = (&[b"hello", b"!!"], &[b"hel"]);
        let next: &[&[u8]] = &[b"world!"];
        for parts in [long, short] {
            let member = |body, parts| Member {
                body,
                dedup: 0,
                attrs: 0,
                parts,
                back: 0,
            };
            // Member 1 first (its own write), then the pair with member 0 damaged.
            // SAFETY: as above.
            let ok = unsafe {
                write_members(
                    &a,
                    4,
                    5,
                    &[member(5, &[b"hello"]), member(6, next)],
                    &places,
                )
            };
            assert!(ok.unwrap().is_some());
            // SAFETY: as above.
            let bad =
                unsafe { write_members(&a, 4, 5, &[member(5, parts), member(6, next)], &places) };
            assert_eq!(
                bad,
                Err(Fault::Corrupted(
                    "a pack member's pieces and lengths differ"
                ))
            );
            let payload = a.class_of(4).unwrap().2;
            let p1 = places.members()[1];
            // SAFETY: as above; `p1` lies inside the slot's payload (`lay_out`'s place).
            let after = unsafe { core::slice::from_raw_parts(payload.add(p1.at), 6) };
            assert_eq!(after, b"world!", "member 1's bytes untouched");
        }
        // A heap arena made without the table holds no pack.
        let plain = HeapArena::new(&g);
        // SAFETY: as above.
        assert!(unsafe { plain.arena().members(3, 2) }.is_err());
    }

    fn unit_of(p: &Places) -> (u64, Vec<u64>) {
        let lens = p
            .members()
            .iter()
            .map(|m| words::pack_lens(m.body, m.attrs, m.dedup, 0))
            .collect();
        (words::unit_lens(p.k, p.used), lens)
    }

    /// What the writer lays out, the reader places back: after the directory, members in
    /// order, back to back.
    #[test]
    fn place_reads_back_what_lay_out_wrote() {
        let sizes = [(64, 0, 0), (1, 8, 0), (200, 128, 77), (0, 0, 3)];
        let p = lay_out(&sizes, 4096).unwrap();
        assert_eq!(p.k, 4);
        assert_eq!(p.members[0].at, 128, "four 32-byte entries");
        let mut prev = first_body(4);
        for (m, &(b, d, a)) in p.members().iter().zip(&sizes) {
            assert_eq!((m.body, m.dedup, m.attrs), (b, d, a));
            assert_eq!(m.at, prev, "right after the member before");
            prev = m.end();
        }
        assert_eq!(p.used, prev);
        let (unit, lens) = unit_of(&p);
        assert_eq!(place(unit, &lens, 4096), Ok(p));
        // Ten 64-byte bodies: a 320-byte directory, then a line each; with 4-byte dedup ids,
        // 680 bytes (11 lines), not 20 lines.
        let ten = lay_out(&[(64, 0, 0); 10], 4096).unwrap();
        assert_eq!(ten.members[0].at, 320);
        assert_eq!(ten.used, 320 + 640);
        let ids = lay_out(&[(64, 4, 0); 10], 4096).unwrap();
        assert_eq!(ids.members[9].at, 320 + 9 * 68);
        assert_eq!(ids.used, 320 + 680);
        // Three members of 5 bytes: in the directory's line and the next.
        let small = lay_out(&[(5, 0, 0); 3], 4096).unwrap();
        assert_eq!(small.members[0].at, 96);
        assert_eq!(small.used, 96 + 15);
    }

    #[test]
    fn lay_out_refuses_what_a_pack_cannot_hold() {
        assert_eq!(lay_out(&[(1, 0, 0)], 4096), None, "one member");
        assert_eq!(lay_out(&[(1, 0, 0); 11], 4096), None, "eleven");
        assert_eq!(
            lay_out(&[(64, 0, 0); 2], 64 + 64 + 63),
            None,
            "past the slot"
        );
        assert!(
            lay_out(&[(64, 0, 0); 2], 64 + 64 + 64).is_some(),
            "exactly the slot"
        );
        assert_eq!(
            lay_out(&[(1, 256, 0); 2], 4096),
            None,
            "a dedup length past 255"
        );
        assert_eq!(
            lay_out(&[(1 << 24, 0, 0); 2], 1 << 26),
            None,
            "a body past 2^24 - 1"
        );
    }

    /// Every damaged word is refused: the flag, the count, `used` against the slot and the
    /// members, a member's flag, one length one too long or too short.
    #[test]
    fn place_refuses_damaged_words() {
        let p = lay_out(&[(64, 0, 0), (64, 8, 16), (30, 0, 0)], 1024).unwrap();
        let (unit, lens) = unit_of(&p);
        assert!(place(unit, &lens, 1024).is_ok());
        assert!(
            place(words::pack_lens(64, 0, 0, 0), &lens, 1024).is_err(),
            "no flag"
        );
        let moved = u64::from(words::LENS_MOVED) << 56;
        assert_eq!(
            place(unit | moved, &lens, 1024),
            Err("not a pack"),
            "another flag"
        );
        assert_eq!(
            place(unit | (1 << 40), &lens, 1024),
            Err("not a pack"),
            "a spare bit"
        );
        for k in [0, 1, 11, 255] {
            let w = words::unit_lens(k, p.used);
            assert_eq!(
                place(w, &[0; 255], 1024),
                Err("pack member count"),
                "k = {k}"
            );
        }
        assert_eq!(place(unit, &lens[..2], 1024), Err("pack member count"));
        assert_eq!(place(unit, &lens, p.used - 1), Err("pack exceeds its slot"));
        for used in [p.used - 1, p.used + 1, 0] {
            assert!(
                place(words::unit_lens(3, used), &lens, 1024).is_err(),
                "used {used}"
            );
        }
        for j in 0..3 {
            let mut bad = lens.clone();
            bad[j] |= u64::from(words::LENS_MOVED) << 56;
            assert_eq!(place(unit, &bad, 1024), Err("pack member flags"));
            // A line more of body moves every later member past `used`.
            let mut longer = lens.clone();
            longer[j] += 64 << 32;
            assert!(place(unit, &longer, 1024).is_err(), "member {j}");
        }
        // A byte more in any field of the last member ends it past `used`. (A byte more in an
        // earlier member may fall in the padding before the next body: the pack stays
        // consistent, its reads in bounds, and that member one byte longer, as any length a
        // damaged peer writes within a slot.)
        for delta in [1u64, (1 << 8), (1 << 32)] {
            let mut longer = lens.clone();
            longer[2] += delta;
            assert!(place(unit, &longer, 1024).is_err(), "+ {delta:#x}");
        }
        // One byte less in the last member: `used` is no longer its end.
        let mut shorter = lens.clone();
        shorter[2] -= 1 << 32;
        assert_eq!(place(unit, &shorter, 1024), Err("pack length"));
    }

    /// Whatever the words say, an accepted pack's members lie after its directory, in order,
    /// inside `used`, and `used` inside the slot (the bounds every reader relies on): valid
    /// packs of random sizes, each word then damaged by a random bit flip. With the members
    /// back to back (layout 23) every bit of every word counts, so every flip is refused.
    #[test]
    fn place_keeps_every_member_inside_whatever_the_words() {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let (mut accepted, mut refused) = (0, 0);
        for _ in 0..100_000 {
            let k = 2 + (next() % (MAX_PACK as u64 - 1)) as usize;
            let sizes: Vec<_> = (0..k)
                .map(|_| {
                    let r = next();
                    (
                        (r % 300) as usize,
                        (r >> 16) as usize % 40,
                        (r >> 32) as usize % 90,
                    )
                })
                .collect();
            let cap = 8192;
            let p = lay_out(&sizes, cap).unwrap();
            let (mut unit, mut lens) = unit_of(&p);
            assert_eq!(place(unit, &lens, cap), Ok(p));
            let r = next();
            let which = (r % (k as u64 + 1)) as usize;
            let bit = 1u64 << ((r >> 8) % 64);
            if which == k {
                unit ^= bit;
            } else {
                lens[which] ^= bit;
            }
            match place(unit, &lens, cap) {
                Ok(q) => {
                    accepted += 1;
                    let mut prev = first_body(q.k);
                    for m in q.members() {
                        assert!(m.at == prev && m.end() <= q.used);
                        prev = m.end();
                    }
                    assert!(q.used <= cap && prev == q.used);
                }
                Err(_) => refused += 1,
            }
        }
        // No bit of the words is slack: a flip anywhere changes a length, the count or `used`,
        // and the sums no longer meet.
        assert_eq!((accepted, refused), (0, 100_000));
    }
}
