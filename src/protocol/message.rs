//! A message as stored, decoded for the API: its id, the words of its header, and its payload
//! split into pieces (layout 10: the body first, then the dead-letter source, the dedup id and
//! the framed attributes). The API reads a taken message only through [`Taken`]'s methods,
//! never the shared words themselves.
#![cfg_attr(feature = "loom", allow(unreachable_pub, missing_docs))]

use super::group;
use super::receive::Taken;
use super::words::{self, unpack_group_epoch0};
/// The longest group, dedup or batch entry id, bytes.
pub use crate::layout::MAX_ID_LEN;
use crate::sync::Ordering;

/// A message id (layout 22): the queue's nonce with its top 4 bits replaced by the
/// message's member in its slot's pack (0 for a message in a slot of its own), then the slot
/// index and incarnation of the message's first enqueue. Unique within the queue as long as no
/// slot is reused 2^32 times while an id of its earlier use still matters (an incarnation
/// changes each time the slot is reused; `docs/guarantees.md`); across queues, 60 random bits
/// of nonce tell them apart.
pub fn id(nonce: u64, idx: u32, inc: u32, member: u8) -> u128 {
    let high = (nonce & !(0xF << 60)) | (u64::from(member & 0xF) << 60);
    (u128::from(high) << 64) | (u128::from(idx) << 32) | u128::from(inc)
}

/// A stored message's pieces, in slot order (layout 10).
#[derive(Debug, Clone, Copy)]
pub struct Stored<'p> {
    /// The body.
    pub body: &'p [u8],
    /// The dead-letter source queue's path (empty unless the message was moved here).
    pub source: &'p [u8],
    /// The dedup id (empty without one).
    pub dedup: &'p [u8],
    /// The framed attributes.
    pub attrs: &'p [u8],
}

/// The words of a message's header, decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lengths {
    /// Body bytes.
    pub body: usize,
    /// Attribute framing bytes.
    pub attrs: usize,
    /// Dedup id bytes.
    pub dedup: usize,
    /// Dead-letter source bytes.
    pub source: usize,
    /// The message was moved here from another queue's dead-letter redrive: its dedup id is
    /// its original message id (D8, M2).
    pub moved: bool,
    /// The slot holds a pack (layout 22, `protocol::pack`), not one message: the other
    /// fields mean nothing.
    pub packed: bool,
}

/// Splits `payload` by `l`: an `Err` where the lengths do not add up to the payload
/// (corruption).
pub fn split(payload: &[u8], l: Lengths) -> Result<Stored<'_>, &'static str> {
    if l.packed {
        // Layout 22 defines packs, and no sender of this build makes one: found here, it was
        // written by a damaged or hostile peer.
        return Err("a pack where a message was expected");
    }
    if l.body + l.source + l.dedup + l.attrs != payload.len() {
        return Err("message lengths exceed the slot");
    }
    let (b, rest) = payload.split_at(l.body);
    let (s, rest) = rest.split_at(l.source);
    let (d, a) = rest.split_at(l.dedup);
    Ok(Stored {
        body: b,
        source: s,
        dedup: d,
        attrs: a,
    })
}

// Every read below happens while the taker holds the group claim (after its Acquire of `vis`),
// or on a peek's snapshot that the peek validates afterwards: Relaxed loads.
impl<'t> Taken<'t> {
    /// The handle of this receive.
    pub fn handle(&self) -> super::handle::Handle {
        super::handle::Handle {
            idx: self.idx,
            inc: self.inc,
            member: self.member,
            epoch: self.epoch,
        }
    }

    /// The message's lengths, decoded from its header words.
    pub fn lengths(&self) -> Lengths {
        let r = Ordering::Relaxed; // under the claim (see above)
        let (body, attrs, dedup, flags) = words::unpack_lens(self.own.lens.load(r));
        let (source, _, _) = unpack_group_epoch0(self.header.group_epoch0.load(r));
        Lengths {
            body,
            attrs,
            dedup,
            source,
            moved: flags & words::LENS_MOVED != 0,
            packed: flags & words::LENS_PACKED != 0,
        }
    }

    /// The message's sequence number (M1): its group incarnation's base, then its position.
    pub fn sequence_number(&self) -> u128 {
        let r = Ordering::Relaxed; // under the claim (see above)
                                   // A pack's members take consecutive positions from its first (layout 22).
        let pos = self.header.pos.load(r).wrapping_add(u64::from(self.member));
        (u128::from(self.group.seq_base.load(r)) << 64) | u128::from(pos)
    }

    /// Arena time of the enqueue, ms (1 is the creation instant).
    pub fn sent_ms(&self) -> u64 {
        // Relaxed: under the claim (see above).
        self.header.sent.load(Ordering::Relaxed)
    }

    /// Wall-clock time of the first receive, ms since the Unix epoch (0: never received).
    pub fn first_receive_ms(&self) -> u64 {
        // Relaxed: under the claim (see above).
        self.own.first_recv_ms.load(Ordering::Relaxed)
    }

    /// Copies the group id into `out`; returns its length.
    pub fn group_id(&self, out: &mut [u8; MAX_ID_LEN]) -> usize {
        group::read_id(self.group, out)
    }

    /// Whether the group id is `id` (compared word by word in place, nothing copied).
    pub fn group_id_is(&self, id: &[u8]) -> bool {
        group::id_is(self.group, id)
    }

    /// The keyed hash the group entry was inserted with.
    pub fn group_hash(&self) -> u64 {
        // Relaxed: under the claim (see above).
        self.group.hash.load(Ordering::Relaxed)
    }

    /// Identifies the group entry (its address): equal for messages of one entry.
    pub fn group_entry(&self) -> usize {
        self.group as *const _ as usize
    }
}

#[cfg(all(test, not(shmfifo_loom)))]
mod tests {
    use super::*;

    /// Members of one pack have distinct ids, every incarnation of a slot its own (all 32
    /// bits), and a message in a slot of its own keeps layout 21's id where the nonce's top 4
    /// bits are zero (elsewhere they are zero in the id).
    #[test]
    fn ids_name_the_member_and_every_bit_of_the_incarnation() {
        let n = 0x0123_4567_89ab_cdef;
        assert_eq!(id(n, 7, 5, 0), (u128::from(n) << 64) | (7 << 32) | 5);
        let members: std::collections::HashSet<_> = (0..crate::layout::MAX_PACK as u8)
            .map(|j| id(n, 7, 5, j))
            .collect();
        assert_eq!(members.len(), crate::layout::MAX_PACK);
        for inc in [0, 1, 1 << 28, u32::MAX] {
            assert_ne!(id(n, 7, inc, 1), id(n, 7, inc ^ 1, 1));
            assert_ne!(id(n, 7, inc, 0), id(n, 7, inc ^ (1 << 31), 0));
            assert_eq!(id(n, 7, inc, 3) as u32, inc);
        }
        assert_ne!(id(n, 8, 5, 0), id(n, 7, 5, 0));
        let top = 0xf123_4567_89ab_cdef;
        // The nonce's top 4 bits give way to the member.
        assert_eq!(id(top, 7, 5, 0), id(n, 7, 5, 0));
        assert_eq!(id(top, 7, 5, 2) >> 124, 2);
    }

    /// A pack is not split as a message, even where its words would add up as one's.
    #[test]
    fn split_refuses_a_pack() {
        let l = Lengths {
            body: 6,
            attrs: 0,
            dedup: 4,
            source: 0,
            moved: false,
            packed: false,
        };
        let stored = split(b"hello!dd01", l).unwrap();
        assert_eq!((stored.body, stored.dedup), (&b"hello!"[..], &b"dd01"[..]));
        let packed = Lengths { packed: true, ..l };
        assert!(split(b"hello!dd01", packed).is_err());
    }
}
