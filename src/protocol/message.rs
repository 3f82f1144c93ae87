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

/// A message id: the queue's nonce, then the slot index and incarnation of the message's first
/// enqueue (unique for the queue's life: an incarnation changes each time the slot is reused).
pub fn id(nonce: u64, idx: u32, inc: u32) -> u128 {
    (u128::from(nonce) << 64) | (u128::from(idx) << 32) | u128::from(inc)
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
}

/// Splits `payload` by `l`: an `Err` where the lengths do not add up to the payload
/// (corruption).
pub fn split(payload: &[u8], l: Lengths) -> Result<Stored<'_>, &'static str> {
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
    /// The message's lengths, decoded from its header words.
    pub fn lengths(&self) -> Lengths {
        let r = Ordering::Relaxed; // under the claim (see above)
        let (body, attrs, dedup, flags) = words::unpack_lens(self.header.lens.load(r));
        let (source, _, _) = unpack_group_epoch0(self.header.group_epoch0.load(r));
        Lengths {
            body,
            attrs,
            dedup,
            source,
            moved: flags & words::LENS_MOVED != 0,
        }
    }

    /// The message's sequence number (M1): its group incarnation's base, then its position.
    pub fn sequence_number(&self) -> u128 {
        let r = Ordering::Relaxed; // under the claim (see above)
        (u128::from(self.group.seq_base.load(r)) << 64) | u128::from(self.header.pos.load(r))
    }

    /// Arena time of the enqueue, ms (1 is the creation instant).
    pub fn sent_ms(&self) -> u64 {
        // Relaxed: under the claim (see above).
        self.header.sent.load(Ordering::Relaxed)
    }

    /// Wall-clock time of the first receive, ms since the Unix epoch (0: never received).
    pub fn first_receive_ms(&self) -> u64 {
        // Relaxed: under the claim (see above).
        self.header.first_recv_ms.load(Ordering::Relaxed)
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
