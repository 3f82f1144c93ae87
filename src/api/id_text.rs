//! The text forms of ids: a receipt handle's (`sf2` and 39 lowercase hex digits) and a
//! message id's (the UUID form, `8-4-4-4-12` lowercase hex digits), written and read eight hex
//! digits at a time by word arithmetic, not through the formatting machinery (the C ABI, the
//! Python package and `serve` write both for every received message; a batch delete parses
//! ten handles), and held in place ([`IdText`]).

use std::fmt;

use crate::validate::{HIGH, ONES};

const LOW_NIBBLES: u64 = 0x0F * ONES;

/// The eight hex digits of `x`, lowercase, most significant first: each nibble spread to its
/// own byte by three shifts and masks, then made a digit or a letter by one add per byte (a
/// few instructions where a loop over the digits takes some fifty).
#[inline]
fn hex8(x: u32) -> [u8; 8] {
    let mut v = u64::from(x);
    v = (v | (v << 16)) & 0x0000_FFFF_0000_FFFF;
    v = (v | (v << 8)) & 0x00FF_00FF_00FF_00FF;
    v = (v | (v << 4)) & LOW_NIBBLES;
    // Byte i holds nibble i, least significant first: swapped, the most significant first.
    let v = v.swap_bytes();
    // A nibble of 10 or more has bit 4 set once 6 is added: those become letters ('a' is 39
    // past '0' + 10). No byte carries into the next (every sum is below 0x80).
    let letters = ((v + 6 * ONES) >> 4) & ONES;
    (v + 0x30 * ONES + letters * 39).to_le_bytes()
}

/// The value of eight hex digits of either case, most significant first, or `None` if any
/// byte is not one: every byte's class found at once (word arithmetic on bytes kept below
/// 0x80, so that no sum carries into the next byte), then the nibbles gathered by three
/// shifts and masks ([`hex8`] backwards).
#[inline]
fn unhex8(b: [u8; 8]) -> Option<u32> {
    let x = u64::from_le_bytes(b);
    let ascii = !x & HIGH;
    let x7 = x & !HIGH;
    // Bit 7 of `y + (0x80 - lo)` is set where `y >= lo`, of `y + (0x7f - hi)` where `y > hi`.
    let digit = (x7 + (0x80 - 0x30) * ONES) & !(x7 + (0x7f - 0x39) * ONES);
    // Bit 5 set folds 'A'-'F' onto 'a'-'f' and nothing else onto them.
    let l = x7 | (0x20 * ONES);
    let letter = (l + (0x80 - 0x61) * ONES) & !(l + (0x7f - 0x66) * ONES) & HIGH;
    if (digit | letter) & ascii != HIGH {
        return None;
    }
    // A digit's low nibble is its value; a letter's ('a'-'f', 'A'-'F': 1-6) is 9 less.
    let n = (x & LOW_NIBBLES) + (letter >> 7) * 9;
    // Byte 0 holds the most significant nibble: swapped, nibble i is in byte i.
    let mut v = n.swap_bytes();
    v = (v | (v >> 4)) & 0x00FF_00FF_00FF_00FF;
    v = (v | (v >> 8)) & 0x0000_FFFF_0000_FFFF;
    v = (v | (v >> 16)) & 0xFFFF_FFFF;
    Some(v as u32)
}

/// Eight bytes of `b` from `at` (the caller's ranges are in bounds).
#[inline]
fn eight(b: &[u8], at: usize) -> [u8; 8] {
    let mut out = [0u8; 8];
    out.copy_from_slice(&b[at..at + 8]);
    out
}

/// The text of an id, held in place, with no allocation: a receipt handle's
/// ([`ReceiptHandleText`]: `sf2` and 39 lowercase hex digits) or a message id's
/// ([`MessageIdText`]: the UUID form), as `ReceiptHandle::text` and `MessageId::text` give
/// them. Always ASCII, always `N` bytes; reads as a `&str` ([`as_str`](Self::as_str),
/// `Deref`, `AsRef`), prints as one (`Display`).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct IdText<const N: usize>([u8; N]);

/// A receipt handle's text ([`crate::ReceiptHandle::text`]).
pub type ReceiptHandleText = IdText<42>;

/// A message id's text ([`crate::MessageId::text`]).
pub type MessageIdText = IdText<36>;

impl IdText<42> {
    /// `sf2`, then the nonce (16 digits), the slot index (8), the incarnation (8), the
    /// member of a pack (1: 0 for a message in a slot of its own; layout 22) and the epoch's
    /// 24 bits (6).
    #[inline]
    pub(super) fn receipt_handle(nonce: u64, idx: u32, inc: u32, member: u8, epoch: u32) -> Self {
        let mut out = [0u8; 42];
        out[..3].copy_from_slice(b"sf2");
        out[3..11].copy_from_slice(&hex8((nonce >> 32) as u32));
        out[11..19].copy_from_slice(&hex8(nonce as u32));
        out[19..27].copy_from_slice(&hex8(idx));
        out[27..35].copy_from_slice(&hex8(inc));
        // The member's 4 bits and the epoch's 24: the last seven of eight digits.
        let tail = (u32::from(member & 0xF) << 24) | (epoch & 0x00FF_FFFF);
        out[35..42].copy_from_slice(&hex8(tail)[1..]);
        IdText(out)
    }
}

impl IdText<36> {
    /// The UUID form of `v`: `8-4-4-4-12` digits.
    pub(super) fn message_id(v: u128) -> Self {
        let mut out = [b'-'; 36];
        let words = [
            (v >> 96) as u32,
            (v >> 64) as u32,
            (v >> 32) as u32,
            v as u32,
        ];
        let [a, b, c, d] = words.map(hex8);
        out[..8].copy_from_slice(&a);
        out[9..13].copy_from_slice(&b[..4]);
        out[14..18].copy_from_slice(&b[4..]);
        out[19..23].copy_from_slice(&c[..4]);
        out[24..28].copy_from_slice(&c[4..]);
        out[28..].copy_from_slice(&d);
        IdText(out)
    }
}

impl<const N: usize> IdText<N> {
    /// The text: ASCII, `N` bytes.
    pub fn as_str(&self) -> &str {
        debug_assert!(self.0.is_ascii());
        #[allow(unsafe_code)]
        // SAFETY: the field is private to this module, whose only constructors are
        // `receipt_handle` and `message_id` above; they write `sf2`, dashes and `hex8`'s
        // digits and letters only (every byte below 0x80, whatever its input): ASCII, which
        // is UTF-8.
        unsafe {
            std::str::from_utf8_unchecked(&self.0)
        }
    }
}

/// The fields of a receipt handle's 39 hex digits (after `sf2`): nonce, slot index,
/// incarnation, member, epoch; `None` if any byte is not a hex digit (of either case).
// Inline: its one caller each (a handle's parse) then keeps it in its frame whatever unit of
// code the compiler puts either in (out of line: some 20 instructions a parse more).
#[inline]
pub(super) fn parse_receipt_handle(hex: &[u8; 39]) -> Option<(u64, u32, u32, u8, u32)> {
    let (hi, lo) = (unhex8(eight(hex, 0))?, unhex8(eight(hex, 8))?);
    let (idx, inc) = (unhex8(eight(hex, 16))?, unhex8(eight(hex, 24))?);
    let mut e = [b'0'; 8];
    e[1..].copy_from_slice(&hex[32..39]);
    let tail = unhex8(e)?;
    Some((
        (u64::from(hi) << 32) | u64::from(lo),
        idx,
        inc,
        (tail >> 24) as u8,
        tail & 0x00FF_FFFF,
    ))
}

/// The value of a message id's UUID form (`8-4-4-4-12` hex digits of either case), or `None`.
pub(super) fn parse_message_id(s: &[u8]) -> Option<u128> {
    if s.len() != 36 || [8, 13, 18, 23].iter().any(|&i| s[i] != b'-') {
        return None;
    }
    let join = |a: &[u8], b: &[u8]| {
        let mut out = [0u8; 8];
        out[..4].copy_from_slice(a);
        out[4..].copy_from_slice(b);
        out
    };
    let words = [
        unhex8(eight(s, 0))?,
        unhex8(join(&s[9..13], &s[14..18]))?,
        unhex8(join(&s[19..23], &s[24..28]))?,
        unhex8(eight(s, 28))?,
    ];
    Some(words.iter().fold(0u128, |v, &w| (v << 32) | u128::from(w)))
}

impl<const N: usize> std::ops::Deref for IdText<N> {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl<const N: usize> AsRef<str> for IdText<N> {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl<const N: usize> fmt::Display for IdText<N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // `pad` counts characters for a width or precision; `to_string` and `{}` ask for
        // neither (a batch delete's caller formats ten handles a call).
        if f.width().is_none() && f.precision().is_none() {
            f.write_str(self.as_str())
        } else {
            f.pad(self.as_str())
        }
    }
}

impl<const N: usize> fmt::Debug for IdText<N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every nibble value in every place, against the formatting machinery's hex.
    #[test]
    fn hex8_writes_every_nibble_in_every_place() {
        for k in 0..8 {
            for n in 0..16u32 {
                let x = (n << (4 * k)) | (0x8765_4321 & !(0xf << (4 * k)));
                assert_eq!(&hex8(x), format!("{x:08x}").as_bytes());
            }
        }
    }

    /// Every byte value at every place among valid digits: exactly the hex digits of either
    /// case are taken, at their value; anything else (bytes past ASCII whose low seven bits
    /// are a digit or a letter among them) refuses the eight.
    #[test]
    fn unhex8_takes_exactly_the_hex_digits() {
        for at in 0..8 {
            for v in 0..=255u8 {
                let mut b = *b"9aF07bC3";
                b[at] = v;
                let want = std::str::from_utf8(&b)
                    .ok()
                    .filter(|s| s.bytes().all(|c| c.is_ascii_hexdigit()))
                    .and_then(|s| u32::from_str_radix(s, 16).ok());
                assert_eq!(unhex8(b), want, "byte {v:#04x} at {at}");
            }
        }
        assert_eq!(unhex8(*b"ffffffff"), Some(u32::MAX));
        assert_eq!(unhex8(*b"00000000"), Some(0));
        // 0xF0, 0xB0 and 0xC1 are '0', '0' and 'A' with the top bit set.
        assert_eq!(
            unhex8([0xF0, b'0', 0xB0, b'0', 0xC1, b'0', b'0', b'0']),
            None
        );
    }
}
