//! Message attribute framing in a slot's payload: per attribute a frame of
//! `[name_len:u16][type_len:u16][value_len:u32]` (little-endian), then the name, the type and
//! the value. Encoded by `send`, decoded by `receive` (copying out) and by the dead-letter
//! mover (measuring a moved message as `send` measured it), all through this module; and the
//! pieces a send writes a message's payload from, in slot order ([`Framed`], [`Pieces`]).

use super::hashing::content_dedup_id;
use super::types::{MessageAttribute, SendMessage};
use crate::config::{Deduplication, ATTRIBUTE_FRAMING, MAX_ATTRIBUTES};

/// Pieces of a message with every attribute: body, dead-letter source, dedup id, and 4 per
/// attribute (frame, name, type, value).
pub(super) const ALL_PIECES: usize = 3 + 4 * MAX_ATTRIBUTES;

/// The frame of one attribute with these lengths (checked by `send`: names and types are at
/// most 256 bytes, values at most the message size).
pub(super) fn frame(name: usize, data_type: usize, value: usize) -> [u8; ATTRIBUTE_FRAMING] {
    let mut f = [0u8; ATTRIBUTE_FRAMING];
    f[0..2].copy_from_slice(&(name as u16).to_le_bytes());
    f[2..4].copy_from_slice(&(data_type as u16).to_le_bytes());
    f[4..8].copy_from_slice(&(value as u32).to_le_bytes());
    f
}

/// One decoded attribute: name, data type and value bytes (copy them before trusting them:
/// the arena is shared).
pub(super) type Decoded<'a> = (&'a [u8], &'a [u8], &'a [u8]);

/// The attributes framed in `attrs`, in order; an `Err` (then nothing more) where the framing
/// does not parse, which only corruption makes.
pub(super) fn decode(attrs: &[u8]) -> impl Iterator<Item = Result<Decoded<'_>, &'static str>> {
    let mut rest = Some(attrs);
    core::iter::from_fn(move || {
        let a = rest.take()?;
        if a.is_empty() {
            return None;
        }
        let Some((f, body)) = a.split_at_checked(ATTRIBUTE_FRAMING) else {
            return Some(Err("attribute framing"));
        };
        let nl = usize::from(u16::from_le_bytes([f[0], f[1]]));
        let tl = usize::from(u16::from_le_bytes([f[2], f[3]]));
        let vl = u32::from_le_bytes([f[4], f[5], f[6], f[7]]) as usize;
        let Some(end) = nl.checked_add(tl).and_then(|x| x.checked_add(vl)) else {
            return Some(Err("attribute framing"));
        };
        if end > body.len() {
            return Some(Err("attribute framing"));
        }
        rest = Some(&body[end..]);
        Some(Ok((&body[..nl], &body[nl..nl + tl], &body[nl + tl..end])))
    })
}

/// The size SQS counts for stored attributes (names, types and values; not our per-attribute
/// framing). Framing that does not parse (corruption) counts whole.
pub(super) fn attr_size(attrs: &[u8]) -> usize {
    let mut size = 0;
    for d in decode(attrs) {
        match d {
            Ok((n, t, v)) => size += n.len() + t.len() + v.len(),
            Err(_) => return attrs.len(),
        }
    }
    size
}

/// Bytes of `attributes` as SQS counts them against the size limits: names, types, values.
pub(super) fn attributes_len(attributes: &[MessageAttribute<'_>]) -> usize {
    attributes
        .iter()
        .map(|a| a.name.len() + a.data_type.len() + a.value.len())
        .sum()
}

/// Every piece of a message in slot order (layout 10: the body first, so it starts 64-byte
/// aligned and a loan can be filled before its options are known): body, dead-letter source,
/// dedup id, attribute pieces; and how many.
pub(super) fn all_parts<'p>(
    source: &'p [u8],
    dedup: &'p [u8],
    attr_pieces: &[&'p [u8]],
    body: &'p [u8],
) -> ([&'p [u8]; ALL_PIECES], usize) {
    let mut parts: [&[u8]; ALL_PIECES] = [&[]; ALL_PIECES];
    parts[0] = body;
    parts[1] = source;
    parts[2] = dedup;
    let mut n = 3;
    for p in attr_pieces {
        parts[n] = p;
        n += 1;
    }
    (parts, n)
}

/// What a message adds to its own bytes in the slot: the framing of each attribute (see
/// `framing`) and, with content-based dedup and no explicit id, its generated dedup id (D5).
/// Both on the heap, where a message has them: a message with neither (most) makes a framing of
/// two words, which a batch builds, moves and drops ten times.
pub(super) struct Framed {
    frames: Option<Box<[[u8; ATTRIBUTE_FRAMING]; MAX_ATTRIBUTES]>>,
    generated: Option<Box<[u8; 64]>>,
}

/// A message's pieces in slot order (its body, no dead-letter source, its dedup id, then its
/// attributes' pieces) in `pieces`, and its attributes' framed length; `slot` keeps what the
/// pieces point into where the message needs it (attribute framing, a generated dedup id). A
/// message without attributes whose dedup id is given or not needed (most) takes its three
/// pieces here, inline, into whichever form `pieces` has (three calls, some 50 instructions
/// a message, before); any other is framed out of line, its framing kept in `slot`
/// ([`Framed::fill`]).
#[inline(always)]
pub(super) fn pieces<'p, 's>(
    dedup: Deduplication,
    msg: &'p SendMessage<'p>,
    slot: &'p mut Option<Framed>,
    pieces: &'s mut Pieces<'p>,
) -> (&'s mut [&'p [u8]], usize) {
    if msg.attributes.is_empty() && (msg.dedup_id.is_some() || dedup == Deduplication::Off) {
        let dedup_id = msg.dedup_id.map_or(&[][..], str::as_bytes);
        let head = [msg.body_bytes(), &[][..], dedup_id];
        return match pieces {
            Pieces::Plain(p) => {
                *p = head;
                (&mut p[..], 0)
            }
            Pieces::All(p) => {
                p[..3].copy_from_slice(&head);
                (&mut p[..3], 0)
            }
        };
    }
    framed_pieces(dedup, msg, slot, pieces)
}

/// [`pieces`] of a message with attributes or a generated dedup id.
#[inline(never)]
fn framed_pieces<'p, 's>(
    dedup: Deduplication,
    msg: &'p SendMessage<'p>,
    slot: &'p mut Option<Framed>,
    pieces: &'s mut Pieces<'p>,
) -> (&'s mut [&'p [u8]], usize) {
    *pieces = Pieces::for_message(msg);
    slot.insert(Framed::new(dedup, msg)).fill(msg, pieces)
}

impl Framed {
    /// The framing of `msg`: its attributes' frames, and its generated dedup id where the
    /// queue deduplicates by content and `msg` names none.
    fn new(dedup: Deduplication, msg: &SendMessage<'_>) -> Framed {
        let frames = (!msg.attributes.is_empty()).then(|| {
            let mut frames = Box::new([[0u8; ATTRIBUTE_FRAMING]; MAX_ATTRIBUTES]);
            for (f, a) in frames.iter_mut().zip(msg.attributes) {
                *f = frame(a.name.len(), a.data_type.len(), a.value.len());
            }
            frames
        });
        // D5: SHA-256 of the body only (attributes excluded), stored as the message's dedup id.
        let generated = (msg.dedup_id.is_none() && dedup != Deduplication::Off)
            .then(|| Box::new(content_dedup_id(msg.body_bytes())));
        Framed { frames, generated }
    }

    /// Fills `pieces` (made for `msg`: [`Pieces::for_message`]) with every piece of the
    /// message in slot order (body, no dead-letter source, dedup id, attribute pieces); returns
    /// those written and the attributes' bytes.
    pub(super) fn fill<'p, 's>(
        &'p self,
        msg: &'p SendMessage<'p>,
        pieces: &'s mut Pieces<'p>,
    ) -> (&'s mut [&'p [u8]], usize) {
        let dedup: &[u8] = match (msg.dedup_id, &self.generated) {
            (Some(d), _) => d.as_bytes(),
            (None, Some(g)) => &g[..],
            (None, None) => &[],
        };
        let head = [msg.body_bytes(), &[][..], dedup];
        let all = match pieces {
            Pieces::Plain(p) => {
                debug_assert!(msg.attributes.is_empty());
                *p = head;
                return (p, 0);
            }
            Pieces::All(p) => p,
        };
        let (first, rest) = all.split_at_mut(3);
        first.copy_from_slice(&head);
        let mut n = 3;
        let mut attr_len = 0;
        // Room for every attribute's 4 pieces (`check` caps them at 10).
        let frames = self.frames.as_deref().map_or(&[][..], |f| &f[..]);
        let attributes = frames.iter().zip(msg.attributes);
        for ((f, a), four) in attributes.zip(rest.chunks_exact_mut(4)) {
            four.copy_from_slice(&[&f[..], a.name.as_bytes(), a.data_type.as_bytes(), a.value]);
            attr_len += four.iter().map(|p| p.len()).sum::<usize>();
            n += 4;
        }
        (&mut all[..n], attr_len)
    }
}

/// Room for a message's pieces in slot order: 3 for a message without attributes, which need
/// not initialise the 43 of one with every attribute (688 bytes a send, and ten times that in a
/// batch's array); a message with attributes, whose framing and copies cost far more, takes
/// them from the heap.
pub(super) enum Pieces<'p> {
    /// Body, dead-letter source, dedup id.
    Plain([&'p [u8]; 3]),
    /// With room for every attribute's 4 pieces.
    All(Box<[&'p [u8]; ALL_PIECES]>),
}

impl<'p> Pieces<'p> {
    /// Room enough for `msg`'s pieces.
    pub(super) fn for_message(msg: &SendMessage<'_>) -> Self {
        if msg.attributes.is_empty() {
            Pieces::Plain([&[]; 3])
        } else {
            Pieces::All(Box::new([&[]; ALL_PIECES]))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_corruption_is_reported() {
        let mut buf = Vec::new();
        for (n, t, v) in [("a", "String", "x"), ("bb", "Binary", "")] {
            buf.extend_from_slice(&frame(n.len(), t.len(), v.len()));
            buf.extend_from_slice(n.as_bytes());
            buf.extend_from_slice(t.as_bytes());
            buf.extend_from_slice(v.as_bytes());
        }
        let got: Vec<_> = decode(&buf).collect::<Result<_, _>>().unwrap();
        assert_eq!(
            got,
            [
                (&b"a"[..], &b"String"[..], &b"x"[..]),
                (&b"bb"[..], &b"Binary"[..], &b""[..])
            ]
        );
        assert_eq!(attr_size(&buf), 1 + 6 + 1 + 2 + 6);
        // A length past the end: an error, and the whole counts.
        buf[4] = 200;
        assert!(decode(&buf).any(|d| d.is_err()));
        assert_eq!(attr_size(&buf), buf.len());
        assert_eq!(decode(&[1, 2, 3]).next(), Some(Err("attribute framing")));
    }
}
