//! Encodings of the shared words: owner codes, claim words, `vis`, `recv_ms`, node references,
//! group and participant states, the packed message header words (`lens`, `group_epoch0`),
//! attempt records' state and meta words, dedup entries' meta word, ready-ring entries, the
//! clock word and a participant's `waiting` word. Every bit layout of the arena's atomics is
//! defined here and nowhere else; the protocols pack and unpack through these functions.

/// Mask of a group incarnation (24 bits), in claim words, group and dedup state words and
/// attempt records.
pub const GINC_MASK: u32 = (1 << 24) - 1;

/// The incarnation after `ginc` (mod 2^24).
pub fn next_ginc(ginc: u32) -> u32 {
    ginc.wrapping_add(1) & GINC_MASK
}

/// The word that stores up to 8 bytes of a text kept in words (a group id, a dead-letter
/// path, an attempt id): the bytes little-endian, zero-padded. A short piece is gathered byte
/// by byte (a copy into a zeroed array of 8 called `memcpy`: 15 instructions a group lookup).
#[inline]
pub fn text_word(chunk: &[u8]) -> u64 {
    match <[u8; 8]>::try_from(chunk) {
        Ok(b) => u64::from_le_bytes(b),
        Err(_) => chunk
            .iter()
            .take(8)
            .rev()
            .fold(0, |w, &b| (w << 8) | u64::from(b)),
    }
}

/// Mask of a 24-bit length field of `MsgWords::lens` (the largest body or attribute length
/// a `lens` word holds).
pub const LEN_MASK: u64 = (1 << 24) - 1;

/// Owner codes: `((participant + 1) << 22) | (generation & 0x3F_FFFF)`, always non-zero, < 2^38.
pub mod owner {
    /// Bits of generation kept in an owner code.
    pub const GEN_BITS: u32 = 22;
    /// Mask of an owner code inside a claim word.
    pub const MASK: u64 = (1 << 38) - 1;
    /// Bit asking a claim holder to clean up again.
    pub const DIRTY: u64 = 1 << 63;
    /// Bit of a group's claim word set while a ready hint for the group is (believed) queued
    /// (layout 24; a word of its own before): a producer sets it by an RMW and pushes a hint
    /// only if it was clear; the receiver that pops the hint clears it with the CAS that
    /// takes the claim (one locked instruction a receive less). Set or clear whoever holds
    /// the claim, and kept by every other change of the word.
    pub const HINT: u64 = 1 << 62;
    /// Bit of a group's claim word set, with `HINT`, while the group's queued hint is a
    /// *placeholder* (layout 27): a receive served the ring's only hint in place, leaving it
    /// queued, and so consumed the place it stood for. The next ready-check of the group
    /// makes it fresh where it is still the ring's only hint, or else takes it out and pushes
    /// a fresh one behind the others; a pop that meets it drops it (`protocol::ready`).
    pub const STALE: u64 = 1 << 61;
    /// The bits of a claim word that say what hint is queued, kept by every change of the
    /// word but a hint's own.
    pub const HINT_BITS: u64 = HINT | STALE;
    /// Mask of the incarnation bits a claim word holds (layout 27: 23, bits 38 to 60; the
    /// word's bit 61 is `STALE`). A claim of an incarnation 2^23 back reads as current: it is
    /// taken over only from a dead owner, as a current one is.
    pub const CLAIM_GINC_MASK: u32 = (1 << 23) - 1;

    /// Who holds something in the arena: a participant's registry slot and the low bits of its
    /// registration generation, as claim words, group and dedup states and `vis` store it.
    /// (A code read from shared memory may name nobody: [`Owner::index`] is then out of
    /// range, and liveness checks treat it as dead.)
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct Owner(u64);

    impl Owner {
        /// No owner (a state word's owner field when nobody holds it).
        pub const NOBODY: Owner = Owner(0);
        /// The owner code of participant `index` at generation `gen`.
        pub fn new(index: u32, gen: u32) -> Owner {
            Owner(((u64::from(index) + 1) << GEN_BITS) | (u64::from(gen) & ((1 << GEN_BITS) - 1)))
        }
        /// The owner code in the low bits of a claim or state word.
        pub fn of_word(w: u64) -> Owner {
            Owner(w & MASK)
        }
        /// The code as stored in a word's low bits.
        pub fn bits(self) -> u64 {
            self.0
        }
        /// The participant's registry slot.
        pub fn index(self) -> u32 {
            ((self.0 >> GEN_BITS) as u32).wrapping_sub(1)
        }
        /// The low [`GEN_BITS`] bits of its registration generation.
        pub fn generation(self) -> u32 {
            (self.0 & ((1 << GEN_BITS) - 1)) as u32
        }
    }

    /// The owner code of participant `index` at generation `gen`.
    pub fn code(index: u32, gen: u32) -> Owner {
        Owner::new(index, gen)
    }
    /// A group claim word: the low 23 bits of the group incarnation (bits 38..61) and the
    /// owner code.
    pub fn claim(ginc: u32, me: Owner) -> u64 {
        (u64::from(ginc & CLAIM_GINC_MASK) << 38) | me.bits()
    }
    /// The incarnation bits of a group claim word.
    pub fn claim_ginc(w: u64) -> u32 {
        ((w >> 38) as u32) & CLAIM_GINC_MASK
    }
    /// Whether claim word `w` is a claim of incarnation `ginc` (its low 23 bits).
    pub fn claims_ginc(w: u64, ginc: u32) -> bool {
        claim_ginc(w) == ginc & CLAIM_GINC_MASK
    }
    /// A claim word without its DIRTY, HINT and STALE bits: the holder's claim (0: free).
    pub fn clean(w: u64) -> u64 {
        w & !(DIRTY | HINT_BITS)
    }

    /// `(participant index, generation bits)` of a code.
    pub fn decode(code: Owner) -> (u32, u32) {
        (code.index(), code.generation())
    }
}

pub use owner::Owner;

/// The `vis` word of a message slot: `[epoch:24][field:40]`.
///
/// | field                      | state                                               |
/// |----------------------------|-----------------------------------------------------|
/// | `FREE` (0)                 | in the pool; epoch is the slot's last epoch          |
/// | `DELETED` (1)              | deleted or purged, still a node until `head` passes  |
/// | `DELETED_UNCOUNTED` (`DEADLINE - 1`) | deleted by a handle holder without the group's claim, not yet counted (layout 25) |
/// | `CLAIMED + owner`          | being written by a producer (owner code)             |
/// | `PACKED` (2)               | a pack's unit word: published, its members' own words say the rest |
/// | `DEADLINE + d`             | published; visible if `d <= now`, else in flight     |
///
/// `d = 0` means never received. The epoch grows on allocation, on every receive, on purge
/// and on free: a receipt handle names `(slot, incarnation, epoch)`.
pub mod vis {
    /// Width of the field.
    pub const FIELD_BITS: u32 = 40;
    /// Mask of the field.
    pub const FIELD_MASK: u64 = (1 << FIELD_BITS) - 1;
    /// Mask of the epoch (24 bits).
    pub const EPOCH_MASK: u32 = (1 << 24) - 1;
    /// Free slot.
    pub const FREE: u64 = 0;
    /// Deleted message.
    pub const DELETED: u64 = 1;
    /// Deleted message whose delete is not yet in the lifetime `DELETED` counter (layout 25):
    /// a handle holder's CAS marks a message so when its group's claim was busy; the claim
    /// holder whose cleanup finds it stores `DELETED` and counts it
    /// (`protocol::handle`). Decodes as [`State::Deleted`]. Never an owner's field: owner codes
    /// are below `1 << 38`.
    pub const DELETED_UNCOUNTED: u64 = DEADLINE - 1;
    const _: () = assert!(CLAIMED + super::owner::MASK < DELETED_UNCOUNTED);
    /// Base of claimed states.
    pub const CLAIMED: u64 = 2;
    /// A published pack's unit word (layout 22, `protocol::pack`): `CLAIMED` with no owner (an
    /// owner code is never 0: its participant index is stored plus one). Each member's state
    /// is its own word in the pack's directory; the unit's says only that the slot holds a
    /// published pack (until every member is deleted and the cleanup frees it).
    pub const PACKED: u64 = CLAIMED;
    /// Base of published states.
    pub const DEADLINE: u64 = 1 << 39;
    /// Largest representable deadline (ms since the arena time base; about 17 years).
    pub const MAX_DEADLINE: u64 = (1 << 39) - 1;

    /// Decoded field.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum State {
        /// In the pool.
        Free,
        /// Deleted.
        Deleted,
        /// Claimed by a producer.
        Claimed(super::Owner),
        /// Published with this visibility deadline.
        Published(u64),
        /// A published pack: its members' own words hold their states.
        Packed,
    }

    /// Packs a word.
    pub fn pack(epoch: u32, field: u64) -> u64 {
        (u64::from(epoch & EPOCH_MASK) << FIELD_BITS) | (field & FIELD_MASK)
    }
    /// The epoch of a word.
    pub fn epoch(w: u64) -> u32 {
        (w >> FIELD_BITS) as u32
    }
    /// The decoded field of a word.
    #[inline]
    pub fn state(w: u64) -> State {
        let f = w & FIELD_MASK;
        // Published first: what the hot paths look for (a handle's, a walk's), one compare.
        if f >= DEADLINE {
            return State::Published(f - DEADLINE);
        }
        match f {
            FREE => State::Free,
            DELETED | DELETED_UNCOUNTED => State::Deleted,
            PACKED => State::Packed,
            f => State::Claimed(super::Owner::of_word(f - CLAIMED)),
        }
    }
    /// Whether `w` is a deletion not yet counted ([`DELETED_UNCOUNTED`]).
    pub fn uncounted(w: u64) -> bool {
        w & FIELD_MASK == DELETED_UNCOUNTED
    }
    /// A published field with deadline `d`.
    pub fn published(d: u64) -> u64 {
        DEADLINE + d.min(MAX_DEADLINE)
    }
    /// A claimed field for an owner code.
    pub fn claimed(owner: super::Owner) -> u64 {
        CLAIMED + owner.bits()
    }
    /// The next epoch.
    pub fn next(epoch: u32) -> u32 {
        epoch.wrapping_add(1) & EPOCH_MASK
    }
}

/// The `recv_ms` word of a published message: `[holder:16][gen:8][ms:40]`, who received it
/// last and when. `holder` is the receiving participant's index + 1 (0: nobody) and `gen` the
/// low 8 bits of its registration generation; `ms` is the arena time of the receive (H6 caps a
/// visibility change 12 hours after it). A dead holder's messages are released at once
/// ([`super::recovery::release_held`]). While a producer holds the slot (`vis` claimed) the word is its
/// dedup back-pointer instead (see `dedup`).
pub mod recv {
    use super::owner;

    /// Mask of the time field.
    pub const MS_MASK: u64 = (1 << 40) - 1;

    /// The word for a receive by owner code `me` at arena time `now`.
    pub fn pack(me: owner::Owner, now: u64) -> u64 {
        let (index, gen) = owner::decode(me);
        (u64::from(index.wrapping_add(1) & 0xFFFF) << 48)
            | (u64::from(gen & 0xFF) << 40)
            | (now & MS_MASK)
    }
    /// The arena time of the receive.
    pub fn ms(w: u64) -> u64 {
        w & MS_MASK
    }
    /// `(participant index, low 8 bits of its generation)` of the holder, if any.
    pub fn holder(w: u64) -> Option<(u32, u32)> {
        let h = (w >> 48) as u32;
        (h != 0).then(|| (h - 1, ((w >> 40) & 0xFF) as u32))
    }
}

/// Node references and link words: `[inc:32][index:32]`.
pub mod node {
    /// No next node.
    pub const NIL: u32 = u32::MAX;
    /// The list is closed: the group is being retired.
    pub const CLOSED: u32 = u32::MAX - 1;
    /// Packs a reference or link word.
    pub fn pack(inc: u32, index: u32) -> u64 {
        (u64::from(inc) << 32) | u64::from(index)
    }
    /// The incarnation part.
    pub fn inc(w: u64) -> u32 {
        (w >> 32) as u32
    }
    /// The index part.
    pub fn index(w: u64) -> u32 {
        w as u32
    }
}

/// Group state words: `[ginc:24][kind:2][owner:38]`.
pub mod gstate {
    /// Never used.
    pub const FREE: u64 = 0;
    /// Being initialised.
    pub const INSERTING: u64 = 1;
    /// Live group.
    pub const ACTIVE: u64 = 2;
    /// Retired, reusable. Owner `NOBODY`: a plain tombstone, out of the count; another owner:
    /// being quarantined by it.
    pub const TOMBSTONE: u64 = 3;
    /// Packs a state word.
    pub fn pack(ginc: u32, kind: u64, owner: super::Owner) -> u64 {
        (u64::from(ginc & super::GINC_MASK) << 40) | (kind << 38) | owner.bits()
    }
    /// Incarnation.
    pub fn ginc(w: u64) -> u32 {
        (w >> 40) as u32
    }
    /// Kind.
    pub fn kind(w: u64) -> u64 {
        (w >> 38) & 3
    }
    /// Owner (for `INSERTING`).
    pub fn owner(w: u64) -> super::Owner {
        super::Owner::of_word(w)
    }
}

/// Participant state words: `[gen:32][status:32]`.
pub mod pstate {
    /// Slot unused.
    pub const FREE: u32 = 0;
    /// Slot held by a live (or not yet proven dead) process.
    pub const ALIVE: u32 = 1;
    /// Packs.
    pub fn pack(gen: u32, status: u32) -> u64 {
        (u64::from(gen) << 32) | u64::from(status)
    }
    /// Generation.
    pub fn gen(w: u64) -> u32 {
        (w >> 32) as u32
    }
    /// Status.
    pub fn status(w: u64) -> u32 {
        w as u32
    }
}

/// Flag of `MsgWords::lens`: the message id is the dedup id (a dead-lettered message, D8).
pub const LENS_MOVED: u8 = 1;

/// Flag of `MsgWords::lens` (layout 22): the slot holds a pack (`protocol::pack`), and the
/// rest of the word is [`unit_lens`]'s, not [`pack_lens`]'s.
pub const LENS_PACKED: u8 = 2;

/// A pack's `MsgWords::lens`: `[flags:8 = PACKED][members:8][_:16][used:32]`.
pub fn unit_lens(members: usize, used: usize) -> u64 {
    debug_assert!(members <= 0xFF && used <= 0xFFFF_FFFF, "a pack's words");
    (u64::from(LENS_PACKED) << 56) | (((members as u64) & 0xFF) << 48) | (used as u64 & 0xFFFF_FFFF)
}

/// `(members, used)` of a pack's lens word (its flag checked by the caller).
pub fn unpack_unit_lens(w: u64) -> (usize, usize) {
    (((w >> 48) & 0xFF) as usize, (w & 0xFFFF_FFFF) as usize)
}

/// The positions a node whose slot header's `lens` word is `w` takes in its group: a pack's
/// member count, one for a message of its own. Bounded (1 to `MAX_PACK`) whatever the word
/// says: a damaged count can move a position test by at most a pack's length.
pub fn unit_span(w: u64) -> u64 {
    if w >> 56 == u64::from(LENS_PACKED) {
        (unpack_unit_lens(w).0 as u64).clamp(1, crate::layout::MAX_PACK as u64)
    } else {
        1
    }
}

/// Packed `MsgWords::lens`: `[flags:8][body:24][attrs:24][dedup:8]`.
pub fn pack_lens(body: usize, attrs: usize, dedup: usize, flags: u8) -> u64 {
    (u64::from(flags) << 56)
        | (((body as u64) & LEN_MASK) << 32)
        | (((attrs as u64) & LEN_MASK) << 8)
        | (dedup as u64 & 0xFF)
}

/// `(body, attrs, dedup, flags)` of a packed lens word.
pub fn unpack_lens(w: u64) -> (usize, usize, usize, u8) {
    (
        ((w >> 32) & LEN_MASK) as usize,
        ((w >> 8) & LEN_MASK) as usize,
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

/// The group index of a packed `group_epoch0` word.
pub fn group_of(w: u64) -> u32 {
    unpack_group_epoch0(w).2
}

/// Bytes of payload: dead-letter source, dedup id, attributes, body. (A pack's lens word
/// sizes no message: the slice is still bounded by the class, and `message::split` refuses
/// it.)
pub(crate) fn payload_len(lens: u64, ge: u64) -> usize {
    let (b, at, d, _) = unpack_lens(lens);
    b + at + d + unpack_group_epoch0(ge).0
}

/// ReceiveRequestAttemptId records (`protocol::attempt`): the state word
/// `[inc:24][kind:2][owner:38]` and the meta word `[count:8][id_len:8][vt_ms:48]`.
pub mod attempt {
    use super::super::Owner;
    use super::GINC_MASK;

    /// An empty record.
    pub const FREE: u64 = 0;
    /// A record being written by its owner.
    pub const WRITING: u64 = 1;
    /// A complete record.
    pub const DONE: u64 = 2;
    const VT_MASK: u64 = (1 << 48) - 1;

    /// The state word.
    pub fn pack(inc: u32, kind: u64, owner_code: Owner) -> u64 {
        (u64::from(inc & GINC_MASK) << 40) | (kind << 38) | owner_code.bits()
    }
    /// The incarnation of a state word.
    pub fn inc(w: u64) -> u32 {
        (w >> 40) as u32
    }
    /// The kind of a state word (`FREE`, `WRITING`, `DONE`).
    pub fn kind(w: u64) -> u64 {
        (w >> 38) & 3
    }
    /// The meta word: how many messages, the id's length, the visibility timeout (ms).
    pub fn pack_meta(count: usize, id_len: usize, vt_ms: u64) -> u64 {
        ((count as u64 & 0xFF) << 56) | ((id_len as u64 & 0xFF) << 48) | (vt_ms & VT_MASK)
    }
    /// `(count, id_len, vt_ms)` of a meta word.
    pub fn unpack_meta(m: u64) -> (usize, usize, u64) {
        ((m >> 56) as usize, ((m >> 48) & 0xFF) as usize, m & VT_MASK)
    }
}

/// A dedup entry's meta word (`protocol::dedup`): `[dedup_len:8][group_len:8][expires:48]`.
pub mod dedup_meta {
    /// Largest expiry time an entry can hold (44 bits of ms: over 500 years).
    pub const MAX_EXPIRES: u64 = (1 << 44) - 1;

    /// The meta word: `[dedup_len:8][group_len:8][member:4][expires:44]` (layout 22: the
    /// member of the message's pack, part of its id; 0 for a message in a slot of its own).
    pub fn pack(dedup_len: usize, group_len: usize, expires: u64) -> u64 {
        with_member(dedup_len, group_len, 0, expires)
    }
    /// The meta word of a message that is member `member` of its pack.
    pub fn with_member(dedup_len: usize, group_len: usize, member: u8, expires: u64) -> u64 {
        ((dedup_len as u64 & 0xFF) << 56)
            | ((group_len as u64 & 0xFF) << 48)
            | (u64::from(member & 0xF) << 44)
            | expires.min(MAX_EXPIRES)
    }
    /// `(dedup_len, group_len)` of a meta word.
    pub fn lens(m: u64) -> (usize, usize) {
        ((m >> 56) as usize, ((m >> 48) & 0xFF) as usize)
    }
    /// The member of a meta word.
    pub fn member(m: u64) -> u8 {
        ((m >> 44) & 0xF) as u8
    }
    /// The expiry time (arena ms) of a meta word.
    pub fn expires(m: u64) -> u64 {
        m & MAX_EXPIRES
    }
}

/// A ready-ring entry (`protocol::ring`): `[seq:40][value:24]`.
pub mod ring {
    /// Mask of an entry's sequence (positions wrap at 2^40).
    pub const SEQ_MASK: u64 = (1 << 40) - 1;
    /// Mask of an entry's value (a group index).
    pub const VALUE_MASK: u64 = (1 << 24) - 1;

    /// The entry word.
    pub fn pack(seq: u64, value: u32) -> u64 {
        ((seq & SEQ_MASK) << 24) | (u64::from(value) & VALUE_MASK)
    }
    /// The sequence of an entry word.
    pub fn seq(w: u64) -> u64 {
        w >> 24
    }
    /// The value (a group index) of an entry word.
    pub fn value(w: u64) -> u32 {
        (w & VALUE_MASK) as u32
    }
}

/// The arena clock word (`protocol::clock`): `[boot_tag:24][base_ms:40]`.
pub mod clock {
    /// Mask of the clock's base (ms) and of arena times derived from it.
    pub const CLOCK_MASK: u64 = (1 << 40) - 1;

    /// The 24-bit tag of a boot id kept in the clock word.
    pub fn boot_tag(b: [u64; 2]) -> u64 {
        let x = b[0] ^ b[1];
        (x ^ (x >> 24) ^ (x >> 48)) & ((1 << 24) - 1)
    }
    /// The clock word.
    pub fn pack(tag: u64, base_ms: u64) -> u64 {
        (tag << 40) | (base_ms & CLOCK_MASK)
    }
    /// The boot tag of a clock word.
    pub fn tag(w: u64) -> u64 {
        w >> 40
    }
}

/// A participant's `waiting` word (`protocol::doorbell`): receivers asleep on the doorbell in
/// the low 32 bits, producers asleep on the space doorbell in the high 32.
pub mod waiting {
    /// One receiver.
    pub const RECEIVER: u64 = 1;
    /// One producer waiting for space.
    pub const PRODUCER: u64 = 1 << 32;

    /// `(receivers, producers)` of a `waiting` word.
    pub fn unpack(w: u64) -> (u32, u32) {
        (w as u32, (w >> 32) as u32)
    }
}

/// `QuarantineLine::last_ref`: the last message quarantined, `[idx:32][inc:32]`.
pub fn quarantined_ref(idx: u32, inc: u32) -> u64 {
    (u64::from(idx) << 32) | u64::from(inc)
}

#[cfg(test)]
mod tests {
    use super::text_word;

    /// `text_word` is the zero-padded little-endian word of up to 8 bytes, whatever the
    /// length and the bytes (the words a group id is stored and compared in).
    #[test]
    fn a_text_word_is_the_padded_little_endian_bytes() {
        let bytes: Vec<u8> = (0u8..8).map(|k| 0x81u8.wrapping_mul(k + 3)).collect();
        for len in 0..=8 {
            let chunk = &bytes[..len];
            let mut b = [0u8; 8];
            b[..len].copy_from_slice(chunk);
            assert_eq!(text_word(chunk), u64::from_le_bytes(b), "{len} bytes");
        }
        assert_eq!(text_word(b"g"), u64::from(b'g'));
        assert_eq!(text_word(&[0xff; 7]), (1u64 << 56) - 1);
    }
}
