//! The text forms of ids: a receipt handle's (`sf2` and 39 lowercase hex digits) and a
//! message id's (the UUID form, `8-4-4-4-12` lowercase hex digits), written and read sixteen
//! hex digits at a time (one SSE2 vector on x86-64; eight at a time by word arithmetic
//! elsewhere), not through the formatting machinery (the C ABI, the
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

/// The sixteen hex digits of `x`, lowercase, most significant first: [`hex8`] of each half,
/// or on x86-64 one SSE2 vector (SSE2 is part of its baseline): the nibbles spread to bytes
/// by a shift, two masks and an interleave, made digits or letters by one compare and two
/// adds (some 15 instructions where the two halves take 30).
#[inline]
fn hex16(x: u64) -> [u8; 16] {
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::*;
        let mut out = [0u8; 16];
        #[allow(unsafe_code)]
        // SAFETY: SSE2, these intrinsics' one requirement, is part of the x86-64 baseline
        // (every x86-64 CPU has it; the target enables it); the store writes the 16 bytes of
        // `out`, unaligned.
        unsafe {
            // Byte 0 the most significant.
            let v = _mm_cvtsi64_si128(x.swap_bytes() as i64);
            let low = _mm_set1_epi8(0x0F);
            let lo = _mm_and_si128(v, low);
            let hi = _mm_and_si128(_mm_srli_epi16(v, 4), low);
            // Each byte's high nibble, then its low one.
            let n = _mm_unpacklo_epi8(hi, lo);
            let letters = _mm_and_si128(_mm_cmpgt_epi8(n, _mm_set1_epi8(9)), _mm_set1_epi8(39));
            let c = _mm_add_epi8(_mm_add_epi8(n, _mm_set1_epi8(b'0' as i8)), letters);
            _mm_storeu_si128(out.as_mut_ptr().cast(), c);
        }
        out
    }
    #[cfg(not(target_arch = "x86_64"))]
    hex16_by_words(x)
}

/// [`hex16`] a half at a time ([`hex8`]): elsewhere than on x86-64, and its tests' reference.
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
fn hex16_by_words(x: u64) -> [u8; 16] {
    let mut out = [0u8; 16];
    out[..8].copy_from_slice(&hex8((x >> 32) as u32));
    out[8..].copy_from_slice(&hex8(x as u32));
    out
}

/// The value of sixteen hex digits of either case, most significant first, or `None` if any
/// byte is not one: [`unhex8`] of each half, or on x86-64 one SSE2 vector: each byte's class
/// by two unsigned range checks (a minimum and a compare each), its nibble picked by mask,
/// the nibble pairs joined by two shifts in 16-bit lanes and packed (some 20 instructions
/// where the two halves take 90).
#[inline]
fn unhex16(b: [u8; 16]) -> Option<u64> {
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::*;
        #[allow(unsafe_code)]
        // SAFETY: SSE2, these intrinsics' one requirement, is part of the x86-64 baseline
        // (every x86-64 CPU has it; the target enables it); the load reads the 16 bytes of
        // `b`, unaligned.
        unsafe {
            let v = _mm_loadu_si128(b.as_ptr().cast());
            // `x <= k` bytewise unsigned, as `min(x, k) == x`.
            let at_most = |x: __m128i, k: i8| _mm_cmpeq_epi8(_mm_min_epu8(x, _mm_set1_epi8(k)), x);
            let d = _mm_sub_epi8(v, _mm_set1_epi8(b'0' as i8));
            let digit = at_most(d, 9);
            // Bit 5 set folds 'A'-'F' onto 'a'-'f' and nothing else onto them.
            let l = _mm_sub_epi8(
                _mm_or_si128(v, _mm_set1_epi8(0x20)),
                _mm_set1_epi8(b'a' as i8),
            );
            let letter = at_most(l, 5);
            if _mm_movemask_epi8(_mm_or_si128(digit, letter)) != 0xFFFF {
                return None;
            }
            let n = _mm_or_si128(
                _mm_and_si128(digit, d),
                _mm_andnot_si128(digit, _mm_add_epi8(l, _mm_set1_epi8(10))),
            );
            // A 16-bit lane holds the nibbles `a` (its low byte) and `b`: `a << 4 | b` in its
            // low byte.
            let pairs = _mm_or_si128(_mm_slli_epi16(n, 4), _mm_srli_epi16(n, 8));
            let bytes = _mm_and_si128(pairs, _mm_set1_epi16(0xFF));
            let packed = _mm_packus_epi16(bytes, bytes);
            // Byte 0 is the most significant: swapped, the value.
            Some((_mm_cvtsi128_si64(packed) as u64).swap_bytes())
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    unhex16_by_words(b)
}

/// [`unhex16`] a half at a time ([`unhex8`]): elsewhere than on x86-64, and its tests'
/// reference.
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
fn unhex16_by_words(b: [u8; 16]) -> Option<u64> {
    let (hi, lo) = (unhex8(eight(&b, 0))?, unhex8(eight(&b, 8))?);
    Some((u64::from(hi) << 32) | u64::from(lo))
}

/// Sixteen bytes of `b` from `at` (the caller's ranges are in bounds).
#[inline]
fn sixteen(b: &[u8], at: usize) -> [u8; 16] {
    let mut out = [0u8; 16];
    out.copy_from_slice(&b[at..at + 16]);
    out
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
        out[3..19].copy_from_slice(&hex16(nonce));
        out[19..35].copy_from_slice(&hex16((u64::from(idx) << 32) | u64::from(inc)));
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
        let (high, low) = (hex16((v >> 64) as u64), hex16(v as u64));
        out[..8].copy_from_slice(&high[..8]);
        out[9..13].copy_from_slice(&high[8..12]);
        out[14..18].copy_from_slice(&high[12..]);
        out[19..23].copy_from_slice(&low[..4]);
        out[24..28].copy_from_slice(&low[4..8]);
        out[28..].copy_from_slice(&low[8..]);
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
    let nonce = unhex16(sixteen(hex, 0))?;
    let slot = unhex16(sixteen(hex, 16))?;
    let mut e = [b'0'; 8];
    e[1..].copy_from_slice(&hex[32..39]);
    let tail = unhex8(e)?;
    Some((
        nonce,
        (slot >> 32) as u32,
        slot as u32,
        (tail >> 24) as u8,
        tail & 0x00FF_FFFF,
    ))
}

/// The value of a message id's UUID form (`8-4-4-4-12` hex digits of either case), or `None`.
pub(super) fn parse_message_id(s: &[u8]) -> Option<u128> {
    if s.len() != 36 || [8, 13, 18, 23].iter().any(|&i| s[i] != b'-') {
        return None;
    }
    let mut high = [0u8; 16];
    high[..8].copy_from_slice(&s[..8]);
    high[8..12].copy_from_slice(&s[9..13]);
    high[12..].copy_from_slice(&s[14..18]);
    let mut low = [0u8; 16];
    low[..4].copy_from_slice(&s[19..23]);
    low[4..8].copy_from_slice(&s[24..28]);
    low[8..].copy_from_slice(&s[28..]);
    Some((u128::from(unhex16(high)?) << 64) | u128::from(unhex16(low)?))
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

    /// Sixteen digits: every nibble value in every place, against the formatting machinery's
    /// hex, and back.
    #[test]
    fn hex16_writes_and_reads_every_nibble_in_every_place() {
        for k in 0..16 {
            for n in 0..16u64 {
                let x = (n << (4 * k)) | (0xFEDC_BA98_7654_3210 & !(0xf << (4 * k)));
                assert_eq!(&hex16(x), format!("{x:016x}").as_bytes());
                assert_eq!(hex16_by_words(x), hex16(x));
                assert_eq!(unhex16(hex16(x)), Some(x));
                let upper: [u8; 16] = hex16(x).map(|c| c.to_ascii_uppercase());
                assert_eq!(unhex16(upper), Some(x));
            }
        }
        assert_eq!(unhex16(*b"ffffffffffffffff"), Some(u64::MAX));
        assert_eq!(unhex16(*b"0000000000000000"), Some(0));
    }

    /// Every byte value at every place of sixteen valid digits: exactly the hex digits of
    /// either case are taken, at their value; anything else refuses the sixteen.
    #[test]
    fn unhex16_takes_exactly_the_hex_digits() {
        for at in 0..16 {
            for v in 0..=255u8 {
                let mut b = *b"9aF07bC3e1D2c4B5";
                b[at] = v;
                let want = std::str::from_utf8(&b)
                    .ok()
                    .filter(|s| s.bytes().all(|c| c.is_ascii_hexdigit()))
                    .and_then(|s| u64::from_str_radix(s, 16).ok());
                assert_eq!(unhex16(b), want, "byte {v:#04x} at {at}");
                assert_eq!(unhex16_by_words(b), want, "byte {v:#04x} at {at}, by words");
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
