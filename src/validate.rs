//! Validation of ids, bodies and attributes (S2, S3, S6, S7, S8, S11).

use crate::error::{Error, Result};
use crate::layout::MAX_ID_LEN;

/// S2/S3: 1–128 characters of printable ASCII 0x21–0x7E.
pub(crate) fn id(parameter: &'static str, v: &str) -> Result<()> {
    if v.is_empty() || v.len() > MAX_ID_LEN || !v.bytes().all(|b| (0x21..=0x7e).contains(&b)) {
        return Err(Error::invalid(
            parameter,
            format!(
                "Value {v} for parameter {parameter} is invalid. Reason: {parameter} can only include alphanumeric and punctuation characters. 1 to 128 in length."
            ),
        ));
    }
    Ok(())
}

/// S7: `#x9 | #xA | #xD | #x20–#xD7FF | #xE000–#xFFFD | #x10000–#x10FFFF`, at least one.
pub(crate) fn body(v: &str) -> Result<()> {
    checked(v.as_bytes(), || Ok(v)).map(|_| ())
}

/// S7 on bytes that should be text (a loaned body, written in place as bytes): the text, or
/// why it is not.
pub(crate) fn text(bytes: &[u8]) -> Result<&str> {
    checked(bytes, || {
        std::str::from_utf8(bytes).map_err(|e| Error::InvalidMessageContents {
            reason: format!(
                "the body is not UTF-8 (invalid byte at offset {})",
                e.valid_up_to()
            ),
        })
    })
}

/// S6 and S7 on a body's bytes: plain ASCII (most bodies) is checked in one pass ([`scan`])
/// and needs no UTF-8 decoding; anything else is decoded (`decode`: nothing to do for a
/// `&str`) and checked character by character.
#[inline]
fn checked<'a>(bytes: &'a [u8], decode: impl FnOnce() -> Result<&'a str>) -> Result<&'a str> {
    if bytes.is_empty() {
        return Err(empty_body());
    }
    match scan(bytes) {
        Scan::Plain => {
            // SAFETY: `scan` found every byte below 0x80: ASCII, which is UTF-8.
            #[allow(unsafe_code)]
            Ok(unsafe { std::str::from_utf8_unchecked(bytes) })
        }
        Scan::Control(pos) => Err(not_allowed(u32::from(bytes[pos]), pos)),
        Scan::NotAscii => {
            let v = decode()?;
            body_beyond_ascii(v)?;
            Ok(v)
        }
    }
}

/// S6's error for an empty body.
pub(crate) fn empty_body() -> Error {
    Error::invalid(
        "MessageBody",
        "The message body must be at least 1 character long.",
    )
}

fn not_allowed(c: u32, pos: usize) -> Error {
    Error::InvalidMessageContents {
        reason: format!("character U+{c:04X} at byte {pos} is not allowed"),
    }
}

/// S7 for a body with characters past ASCII: control characters first (eight bytes at a
/// time, see `first_control`), then every character.
fn body_beyond_ascii(v: &str) -> Result<()> {
    let bytes = v.as_bytes();
    if let Some(pos) = first_control(bytes) {
        return Err(not_allowed(u32::from(bytes[pos]), pos));
    }
    for (pos, c) in v.char_indices() {
        if !s7_char(c) {
            return Err(not_allowed(c as u32, pos));
        }
    }
    Ok(())
}

/// A one in every byte of a word (word-at-a-time byte arithmetic, here and in
/// `api::id_text`).
pub(crate) const ONES: u64 = 0x0101_0101_0101_0101;
/// The top bit of every byte of a word.
pub(crate) const HIGH: u64 = 0x8080_8080_8080_8080;

/// A byte below 0x20 that S7 refuses (tab, LF and CR are allowed).
fn bad(b: u8) -> bool {
    b < 0x20 && b != 0x9 && b != 0xA && b != 0xD
}

/// What [`scan`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scan {
    /// Every byte is allowed ASCII.
    Plain,
    /// The first refused control character, before any byte past ASCII.
    Control(usize),
    /// A byte past ASCII (the text needs decoding).
    NotAscii,
}

/// One pass over `bytes` (a large body's check runs near memory speed): 256 bytes at
/// a time while they are plain ([`plain_256`]: AVX2 where the CPU has it), else 64 at a time
/// with no branch inside a block ([`block`]). Only a block holding a byte below 0x20 is
/// looked at byte by byte (tab, LF and CR are allowed: text with line breaks meets one per
/// line).
#[inline]
fn scan(bytes: &[u8]) -> Scan {
    if bytes.len() < 256 {
        // Short bodies (most): blocks only, never asking for the CPU's features.
        return scan_blocks(bytes, 0).unwrap_or(Scan::Plain);
    }
    scan_long(bytes)
}

/// [`scan`] of a body of 256 bytes or more: spans while they are plain, blocks where not.
#[inline(never)]
fn scan_long(bytes: &[u8]) -> Scan {
    let wide = wide();
    let mut spans = bytes.chunks_exact(256);
    let mut base = 0;
    for c in &mut spans {
        if !plain_256(c, wide) {
            if let Some(r) = scan_blocks(c, base) {
                return r;
            }
        }
        base += 256;
    }
    scan_blocks(spans.remainder(), base).unwrap_or(Scan::Plain)
}

/// [`scan`] over `bytes` (at offset `base` of the body) 64 at a time: the first refused
/// control character or byte past ASCII, or `None` if all are plain.
#[inline]
fn scan_blocks(bytes: &[u8], base: usize) -> Option<Scan> {
    let mut blocks = bytes.chunks_exact(64);
    let mut at = base;
    for c in &mut blocks {
        let (past_ascii, low) = block(c);
        if past_ascii {
            return Some(Scan::NotAscii);
        }
        if low {
            if let Some(k) = c.iter().position(|&b| bad(b)) {
                return Some(Scan::Control(at + k));
            }
        }
        at += 64;
    }
    for (k, &b) in blocks.remainder().iter().enumerate() {
        if b >= 0x80 {
            return Some(Scan::NotAscii);
        }
        if bad(b) {
            return Some(Scan::Control(at + k));
        }
    }
    None
}

/// Whether every byte of `bytes` is ASCII (a copied body that then needs no UTF-8 decoding):
/// fewer than 16 bytes (ids and names: a dedup id of a few bytes) as two overlapping words
/// ORed, inline (41 instructions for five bytes as a call of the block scan); longer ones
/// 256 bytes at a time as [`scan`] goes, then 64 ([`block`]), the tail a word at a time.
#[inline]
pub(crate) fn ascii(bytes: &[u8]) -> bool {
    let n = bytes.len();
    if n >= 16 {
        return ascii_long(bytes);
    }
    let high = match ends(bytes) {
        Some((first, last)) => first | last,
        None => bytes.iter().fold(0, |h, &b| h | u64::from(b)),
    };
    high & 0x8080_8080_8080_8080 == 0
}

/// 4 to 16 bytes as two overlapping little-endian words that together hold every byte: the
/// first and last eight (or, under eight bytes, four); `None` for fewer or more bytes.
#[inline]
pub(crate) fn ends(bytes: &[u8]) -> Option<(u64, u64)> {
    let n = bytes.len();
    let word = |at: usize, len: usize| {
        let mut w = [0u8; 8];
        w[..len].copy_from_slice(&bytes[at..at + len]);
        u64::from_le_bytes(w)
    };
    match n {
        17.. => None,
        8.. => Some((word(0, 8), word(n - 8, 8))),
        4.. => Some((word(0, 4), word(n - 4, 4))),
        _ => None,
    }
}

/// [`ascii`] of 16 bytes or more. Inlinable: left to itself the compiler inlined it into some
/// callers and not others from build to build (a body's copy-out: 15 instructions a message).
#[inline]
fn ascii_long(bytes: &[u8]) -> bool {
    if bytes.len() < 256 {
        // Short bodies (most): never asking for the CPU's features.
        return ascii_short(bytes);
    }
    let wide = wide();
    let mut chunks = bytes.chunks_exact(256);
    for c in &mut chunks {
        if !ascii_256(c, wide) {
            return false;
        }
    }
    ascii_short(chunks.remainder())
}

/// [`ascii`] of fewer than 256 bytes: 64 at a time ([`block`]), the tail a word at a time.
#[inline]
fn ascii_short(bytes: &[u8]) -> bool {
    let mut blocks = bytes.chunks_exact(64);
    blocks.all(|c| !block(c).0) && blocks.remainder().is_ascii()
}

/// Whether the CPU has AVX2 (checked once; `std` caches it).
#[cfg(target_arch = "x86_64")]
fn wide() -> bool {
    std::arch::is_x86_feature_detected!("avx2")
}

#[cfg(not(target_arch = "x86_64"))]
fn wide() -> bool {
    false
}

/// Whether 256 bytes are all ASCII from 0x20 up (no byte to look at): eight 32-byte AVX2
/// lanes with `wide`, else four [`block`]s.
fn plain_256(c: &[u8], wide: bool) -> bool {
    #[cfg(target_arch = "x86_64")]
    if wide {
        // SAFETY: `wide` says the CPU has AVX2; `c` is 256 bytes (the caller slices it).
        #[allow(unsafe_code)]
        return unsafe { avx2::flags_256(c) } == (false, false);
    }
    let _ = wide;
    c.chunks_exact(64).all(|b| block(b) == (false, false))
}

/// Whether 256 bytes are all ASCII.
fn ascii_256(c: &[u8], wide: bool) -> bool {
    #[cfg(target_arch = "x86_64")]
    if wide {
        // SAFETY: as in `plain_256`.
        #[allow(unsafe_code)]
        return !unsafe { avx2::flags_256(c) }.0;
    }
    let _ = wide;
    c.is_ascii()
}

#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
mod avx2 {
    use core::arch::x86_64::{
        __m256i, _mm256_cmpgt_epi8, _mm256_loadu_si256, _mm256_movemask_epi8, _mm256_or_si256,
        _mm256_set1_epi8,
    };

    /// Whether 256 bytes hold a byte past ASCII, and (if not) one below 0x20: eight 32-byte
    /// lanes, ORed, two masks.
    ///
    /// # Safety
    /// The CPU must have AVX2, and `c` must be at least 256 bytes long.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn flags_256(c: &[u8]) -> (bool, bool) {
        debug_assert!(c.len() >= 256);
        let p = c.as_ptr() as *const __m256i;
        let k = _mm256_set1_epi8(0x20);
        // SAFETY: eight unaligned 32-byte loads of `c[0..256]` (the caller's contract).
        let v: [__m256i; 8] = core::array::from_fn(|i| unsafe { _mm256_loadu_si256(p.add(i)) });
        let mut any = v[0];
        // Signed: bytes past ASCII compare below 0x20 too, but `any` catches them first.
        let mut low = _mm256_cmpgt_epi8(k, v[0]);
        for x in &v[1..] {
            any = _mm256_or_si256(any, *x);
            low = _mm256_or_si256(low, _mm256_cmpgt_epi8(k, *x));
        }
        (
            _mm256_movemask_epi8(any) != 0,
            _mm256_movemask_epi8(low) != 0,
        )
    }
}

/// Whether a 64-byte block holds a byte past ASCII, and (if not) one below 0x20: SSE2 (the
/// x86-64 baseline), four 16-byte lanes, two ORs and a mask each.
#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
fn block(c: &[u8]) -> (bool, bool) {
    use core::arch::x86_64::{
        __m128i, _mm_cmplt_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_or_si128, _mm_set1_epi8,
    };
    assert_eq!(c.len(), 64);
    // SAFETY: SSE2 is part of every x86-64 target; the four unaligned 16-byte loads read
    // `c[0..64]`, in bounds (asserted above).
    unsafe {
        let p = c.as_ptr() as *const __m128i;
        let (a, b, d, e) = (
            _mm_loadu_si128(p),
            _mm_loadu_si128(p.add(1)),
            _mm_loadu_si128(p.add(2)),
            _mm_loadu_si128(p.add(3)),
        );
        let any = _mm_or_si128(_mm_or_si128(a, b), _mm_or_si128(d, e));
        // Signed: bytes past ASCII compare below 0x20 too, but they were caught by `any`.
        let k = _mm_set1_epi8(0x20);
        let low = _mm_or_si128(
            _mm_or_si128(_mm_cmplt_epi8(a, k), _mm_cmplt_epi8(b, k)),
            _mm_or_si128(_mm_cmplt_epi8(d, k), _mm_cmplt_epi8(e, k)),
        );
        (_mm_movemask_epi8(any) != 0, _mm_movemask_epi8(low) != 0)
    }
}

/// [`block`] with word operations: the OR of the words says whether any byte is past ASCII,
/// the AND of `(w | 0x80..) - 0x20..` (a byte keeps its top bit exactly when it is at least
/// 0x20; the forced top bit keeps the subtraction inside its byte) whether any is below 0x20.
#[cfg(not(target_arch = "x86_64"))]
fn block(c: &[u8]) -> (bool, bool) {
    let mut any = 0u64;
    let mut all = u64::MAX;
    for w in c.chunks_exact(8) {
        let w = u64::from_le_bytes(w.try_into().expect("8 bytes"));
        any |= w;
        all &= (w | HIGH).wrapping_sub(0x20 * ONES);
    }
    (any & HIGH != 0, !all & HIGH != 0)
}

/// The position of the first byte below 0x20 other than tab, LF and CR. Eight bytes at a time:
/// a word whose bytes are all at least 0x20 or have their top bit set (ASCII text, UTF-8
/// continuation and lead bytes) is passed over in a few instructions; only a word holding a
/// byte below 0x20 is looked at byte by byte (text with line breaks meets one per line).
fn first_control(bytes: &[u8]) -> Option<usize> {
    let mut chunks = bytes.chunks_exact(8);
    let mut base = 0;
    for c in &mut chunks {
        let w = u64::from_le_bytes(c.try_into().expect("8 bytes"));
        // A byte b has its top bit set in `(b | 0x80) - 0x20` exactly when b >= 0x20 or
        // b >= 0x80 (the forced top bit keeps the subtraction inside its byte); the complement
        // marks the bytes below 0x20.
        let low = !((w | HIGH).wrapping_sub(0x20 * ONES)) & HIGH;
        if low != 0 {
            if let Some(k) = c.iter().position(|&b| bad(b)) {
                return Some(base + k);
            }
        }
        base += 8;
    }
    chunks
        .remainder()
        .iter()
        .position(|&b| bad(b))
        .map(|k| base + k)
}

/// S8: name ≤ 256 of `[A-Za-z0-9_.-]`, not starting with `AWS.`/`Amazon.` (any case), no
/// leading or trailing `.`, no `..`; type `String`, `Number` or `Binary`, optionally `.label`
/// (≤ 256 in all).
pub(crate) fn attribute(name: &str, data_type: &str, value: &[u8]) -> Result<()> {
    let bad = |r: String| Err(Error::invalid("MessageAttribute", r));
    if name.is_empty() || name.len() > 256 {
        return bad(format!(
            "Message attribute name '{name}' must be 1 to 256 characters."
        ));
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.')
    {
        return bad(format!(
            "Message attribute name '{name}' has characters outside A-Z a-z 0-9 _ - ."
        ));
    }
    let lower = name.to_ascii_lowercase();
    if lower.starts_with("aws.") || lower.starts_with("amazon.") {
        return bad(format!(
            "Message attribute name '{name}' uses a reserved prefix."
        ));
    }
    if name.starts_with('.') || name.ends_with('.') || name.contains("..") {
        return bad(format!(
            "Message attribute name '{name}' has a misplaced period."
        ));
    }
    let base = data_type.split_once('.').map_or(data_type, |(b, _)| b);
    if data_type.len() > 256 || !matches!(base, "String" | "Number" | "Binary") {
        return bad(format!(
            "Message attribute '{name}' has invalid data type '{data_type}'."
        ));
    }
    if value.is_empty() {
        return bad(format!(
            "Message attribute '{name}' must contain a non-empty value."
        ));
    }
    if base != "Binary" {
        let Ok(s) = std::str::from_utf8(value) else {
            return bad(format!(
                "Message attribute '{name}' of type {base} must be UTF-8 text."
            ));
        };
        if base == "Number" && !sqs_number(s) {
            return bad(format!(
                "Can't cast the value of message (user) attribute '{name}' to a number."
            ));
        }
        // Our choice where SQS's pages are silent: a text value takes the characters a body
        // takes (S7), so that every wire carries it unchanged (XML cannot carry U+0001: the
        // query protocol's answer replaced it, under the digest of the value sent).
        if let Some(c) = s.chars().find(|&c| !s7_char(c)) {
            return bad(format!(
                "Message attribute '{name}' has the character U+{:04X}, which a text value may not hold (as a message body may not).",
                u32::from(c)
            ));
        }
    }
    Ok(())
}

/// S7's characters: `#x9 | #xA | #xD | #x20–#xD7FF | #xE000–#xFFFD | #x10000–#x10FFFF`.
fn s7_char(c: char) -> bool {
    matches!(u32::from(c), 0x9 | 0xA | 0xD | 0x20..=0xD7FF | 0xE000..=0xFFFD | 0x10000..=0x10FFFF)
}

/// S8, a `Number` attribute as SQS takes it: an optionally signed decimal with an optional
/// fraction and exponent (no NaN, no infinity, no hex), at most 38 significant digits, and 0
/// or a magnitude from 10^-128 to 10^126.
pub(crate) fn sqs_number(s: &str) -> bool {
    let b = s.trim().as_bytes();
    let mut i = usize::from(matches!(b.first(), Some(b'+' | b'-')));
    // The digits, without the point; `point`: how many came before it.
    let mut digits = Vec::new();
    let mut point = None;
    while let Some(&c) = b.get(i) {
        match c {
            b'0'..=b'9' => digits.push(c - b'0'),
            b'.' if point.is_none() => point = Some(digits.len()),
            _ => break,
        }
        i += 1;
    }
    if digits.is_empty() {
        return false;
    }
    let mut exp: i64 = 0;
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        let neg = match b.get(i) {
            Some(b'-') => {
                i += 1;
                true
            }
            Some(b'+') => {
                i += 1;
                false
            }
            _ => false,
        };
        let start = i;
        while let Some(&c) = b.get(i).filter(|c| c.is_ascii_digit()) {
            // Saturating: anything this large is out of range anyway.
            exp = exp.saturating_mul(10).saturating_add(i64::from(c - b'0'));
            i += 1;
        }
        if i == start {
            return false;
        }
        if neg {
            exp = -exp;
        }
    }
    if i != b.len() {
        return false;
    }
    let int_digits = point.unwrap_or(digits.len()) as i64;
    let Some(first) = digits.iter().position(|&d| d != 0) else {
        return true; // zero
    };
    let last = digits.iter().rposition(|&d| d != 0).unwrap_or(first);
    if last - first + 1 > 38 {
        return false;
    }
    // The power of ten of the most significant digit.
    let msd = (int_digits - 1 - first as i64).saturating_add(exp);
    msd >= -128 && (msd < 126 || (msd == 126 && first == last && digits[first] == 1))
}

/// S11: batch entry id, 1–80 of `[A-Za-z0-9_-]`.
pub(crate) fn batch_entry_id(v: &str) -> Result<()> {
    if v.is_empty()
        || v.len() > 80
        || !v
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        return Err(Error::InvalidBatchEntryId { id: v.to_owned() });
    }
    Ok(())
}

/// Request-level batch checks shared by every batch call (S11, S12, H8).
pub(crate) fn batch_ids<'a>(ids: impl ExactSizeIterator<Item = &'a str>) -> Result<()> {
    let n = ids.len();
    if n == 0 {
        return Err(Error::EmptyBatchRequest);
    }
    if n > 10 {
        return Err(Error::TooManyEntriesInBatchRequest { entries: n });
    }
    // At most 10 ids: on the stack, compared pairwise (45 comparisons), not by re-walking the
    // caller's iterator.
    // Every id's characters are checked before any two are compared. Each id gets a key of
    // its first 8 bytes; only ids whose keys are equal are compared whole.
    let mut seen: [(&str, u64); 10] = [("", 0); 10];
    for (slot, id) in seen.iter_mut().zip(ids) {
        batch_entry_id(id)?;
        let mut head = [0u8; 8];
        let k = id.len().min(8);
        head[..k].copy_from_slice(&id.as_bytes()[..k]);
        *slot = (id, u64::from_le_bytes(head));
    }
    let seen = &seen[..n];
    for (i, &(a, ah)) in seen.iter().enumerate() {
        if seen[i + 1..].iter().any(|&(b, bh)| ah == bh && a == b) {
            return Err(Error::BatchEntryIdsNotDistinct { id: a.to_owned() });
        }
    }
    Ok(())
}

#[cfg(all(test, not(shmfifo_loom)))]
mod tests {
    use super::*;

    /// S12/H8: ids equal in their first 8 bytes or their length are still told apart; an id
    /// repeated anywhere, however long, is refused by name; characters are checked first.
    #[test]
    fn s12_batch_ids_are_compared_whole() {
        let ok = |ids: &[&str]| batch_ids(ids.iter().copied());
        assert!(ok(&["abcdefgh1", "abcdefgh2", "abcdefgh", "a", "b", "ab"]).is_ok());
        let long = "x".repeat(80);
        let long2 = "x".repeat(79) + "y";
        assert!(ok(&[&long, &long2]).is_ok());
        for ids in [
            &["abcdefgh1", "q", "abcdefgh1"][..],
            &["a", "b", "c", "d", "e", "f", "g", "h", "i", "a"],
            &[&long, "z", &long],
        ] {
            match ok(ids) {
                Err(Error::BatchEntryIdsNotDistinct { id }) => assert_eq!(id, ids[0]),
                r => panic!("{ids:?}: {r:?}"),
            }
        }
        assert!(matches!(
            ok(&["a", "a", "bad id"]),
            Err(Error::InvalidBatchEntryId { .. })
        ));
    }

    /// S7: the word-at-a-time scan finds the first invalid control byte exactly where a byte
    /// loop does, for every byte value at every position of every length up to 40 (so each
    /// word position and the tail), among valid ASCII, tab/LF/CR and UTF-8 bytes.
    #[test]
    fn s7_control_scan_matches_a_byte_loop() {
        let naive = |b: &[u8]| {
            b.iter()
                .position(|&x| x < 0x20 && !matches!(x, 9 | 10 | 13))
        };
        let fills: [&[u8]; 3] = [b"a", b"\t\n\r x", "é€😀".as_bytes()];
        for fill in fills {
            for len in 0..40 {
                let base: Vec<u8> = fill.iter().copied().cycle().take(len).collect();
                assert_eq!(first_control(&base), naive(&base));
                for at in 0..len {
                    for v in 0..=255u8 {
                        let mut b = base.clone();
                        b[at] = v;
                        assert_eq!(first_control(&b), naive(&b), "len {len} at {at} byte {v}");
                    }
                }
            }
        }
    }

    /// S7: `text` (the one-pass block scan, then decoding only past ASCII) accepts and
    /// refuses exactly what a reference does (decode, then check each character), reporting
    /// the same byte, for every byte value at positions around the 64-byte blocks and the
    /// 256-byte spans (lengths 0–140 and up to 600), among ASCII, tab/LF/CR and UTF-8 text;
    /// `body` agrees on everything that is UTF-8, and `ascii` with `is_ascii`.
    #[test]
    fn s7_block_scan_matches_a_reference() {
        let allowed = |c: u32| matches!(c, 0x9 | 0xA | 0xD | 0x20..=0xD7FF | 0xE000..=0xFFFD | 0x10000..=0x10FFFF);
        let reference = |b: &[u8]| -> std::result::Result<(), Option<usize>> {
            if b.is_empty() {
                return Err(None);
            }
            let v = std::str::from_utf8(b).map_err(|_| None)?;
            if let Some(p) = b
                .iter()
                .position(|&x| x < 0x20 && !matches!(x, 9 | 10 | 13))
            {
                return Err(Some(p));
            }
            match v.char_indices().find(|&(_, c)| !allowed(c as u32)) {
                Some((p, _)) => Err(Some(p)),
                None => Ok(()),
            }
        };
        let pos = |e: Error| match e {
            Error::InvalidMessageContents { reason } => reason
                .split("at byte ")
                .nth(1)
                .and_then(|r| r.split(' ').next())
                .and_then(|n| n.parse::<usize>().ok()),
            _ => None,
        };
        let fills: [&[u8]; 3] = [b"abc", b"\t\n\r x", "é€😀".as_bytes()];
        for fill in fills {
            let lens = (0..=140)
                .filter(|l| l % 7 == 0 || (60..70).contains(l) || l % 64 < 2)
                .chain([255, 256, 257, 300, 511, 512, 513, 600]);
            for len in lens {
                let base: Vec<u8> = fill.iter().copied().cycle().take(len).collect();
                // Every 64-byte block and 256-byte span boundary near the ends and the middle.
                let at_all = [0, len / 2, len.saturating_sub(1), 63, 64, 255, 256, 300];
                for &at in at_all.iter().filter(|&&a| a < len) {
                    for v in 0..=255u8 {
                        let mut b = base.clone();
                        b[at] = v;
                        let want = reference(&b);
                        let got = text(&b).map(|_| ()).map_err(pos);
                        assert_eq!(ascii(&b), b.is_ascii(), "ascii: len {len} at {at}");
                        if std::str::from_utf8(&b).is_err() {
                            // Not text at all: refused (which fault is named first may
                            // differ: a control byte or the broken sequence).
                            assert!(text(&b).is_err(), "len {len} at {at} byte {v}");
                            continue;
                        }
                        assert_eq!(got, want, "len {len} at {at} byte {v}");
                        if let Ok(s) = std::str::from_utf8(&b) {
                            assert_eq!(body(s).map_err(pos), want, "body: len {len} at {at}");
                        }
                    }
                }
            }
        }
    }

    /// The AVX2 span check and its fallback (four SSE2 or word blocks) agree, for every byte
    /// value at every position of a 256-byte span (where the CPU has AVX2; elsewhere both
    /// sides are the fallback).
    #[test]
    fn s7_wide_and_narrow_span_checks_agree() {
        let base: Vec<u8> = b"plain text ".iter().copied().cycle().take(256).collect();
        for at in 0..256 {
            for v in 0..=255u8 {
                let mut b = base.clone();
                b[at] = v;
                assert_eq!(
                    plain_256(&b, wide()),
                    plain_256(&b, false),
                    "at {at} byte {v}"
                );
                assert_eq!(
                    ascii_256(&b, wide()),
                    ascii_256(&b, false),
                    "at {at} byte {v}"
                );
                assert_eq!(plain_256(&b, false), (0x20..0x80).contains(&v));
            }
        }
    }

    /// The ASCII look a received copy takes (`ascii`: words under 16 bytes, blocks above)
    /// agrees with `is_ascii` at every length to 300 with one byte of each class at each
    /// position, and on none.
    #[test]
    fn the_ascii_look_matches_is_ascii_at_every_length() {
        for n in 0..300usize {
            let base = vec![b'a'; n];
            assert!(ascii(&base), "{n} ASCII bytes");
            for at in 0..n {
                for v in [0x7f, 0x80, 0xc3, 0xff] {
                    let mut b = base.clone();
                    b[at] = v;
                    assert_eq!(ascii(&b), b.is_ascii(), "length {n}, byte {v:#x} at {at}");
                }
            }
        }
    }

    #[test]
    fn s2_s3_ids() {
        assert!(id("MessageGroupId", &"a".repeat(128)).is_ok());
        assert!(id("MessageGroupId", "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~").is_ok());
        for bad in ["", "group 123", "é", "a\u{8}", &"a".repeat(129)] {
            let e = id("MessageGroupId", bad).unwrap_err();
            assert!(
                matches!(
                    e,
                    Error::InvalidParameterValue {
                        parameter: "MessageGroupId",
                        ..
                    }
                ),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn s7_body_characters() {
        assert!(body("hello\t\n\r \u{D7FF}\u{E000}\u{FFFD}\u{10000}").is_ok());
        assert!(matches!(
            body("a\u{0}b"),
            Err(Error::InvalidMessageContents { .. })
        ));
        assert!(matches!(
            body("\u{FFFE}"),
            Err(Error::InvalidMessageContents { .. })
        ));
        assert!(matches!(body(""), Err(Error::InvalidParameterValue { .. })));
    }

    #[test]
    fn s8_attributes() {
        assert!(attribute("trace.id", "String", b"x").is_ok());
        assert!(attribute("n", "Number.int", b"12.5").is_ok());
        assert!(attribute("b", "Binary", &[0, 255]).is_ok());
        for (n, t, v) in [
            ("AWS.x", "String", &b"x"[..]),
            ("amazon.x", "String", b"x"),
            (".x", "String", b"x"),
            ("x.", "String", b"x"),
            ("a..b", "String", b"x"),
            ("a b", "String", b"x"),
            ("x", "Text", b"x"),
            ("x", "Number", b"abc"),
            ("x", "String", b""),
        ] {
            assert!(attribute(n, t, v).is_err(), "{n} {t}");
        }
    }

    #[test]
    fn s11_s12_batch_ids() {
        assert!(batch_ids(["a", "b-1", "C_2"].into_iter()).is_ok());
        assert!(matches!(
            batch_ids(std::iter::empty()),
            Err(Error::EmptyBatchRequest)
        ));
        let many: Vec<String> = (0..11).map(|i| i.to_string()).collect();
        assert!(matches!(
            batch_ids(many.iter().map(|s| s.as_str())),
            Err(Error::TooManyEntriesInBatchRequest { entries: 11 })
        ));
        assert!(matches!(
            batch_ids(["a", "a"].into_iter()),
            Err(Error::BatchEntryIdsNotDistinct { .. })
        ));
        assert!(matches!(
            batch_ids(["a!"].into_iter()),
            Err(Error::InvalidBatchEntryId { .. })
        ));
        let long = "x".repeat(81);
        assert!(matches!(
            batch_ids([long.as_str()].into_iter()),
            Err(Error::InvalidBatchEntryId { .. })
        ));
    }

    /// S8: `Number` attributes as SQS takes them: 38 significant digits, magnitudes
    /// 10^-128 to 10^126, no NaN or infinity.
    #[test]
    fn s8_numbers_as_sqs_takes_them() {
        for ok in [
            "0",
            "-0",
            "+7",
            "42",
            "3.25",
            "-.5",
            "5.",
            "1e10",
            "1E-10",
            "0.000",
            "007",
            "12345678901234567890123456789012345678", // 38 digits
            "1234567890123456789012345678901234567800000", // trailing zeros do not count
            "1e126",
            "-1e126",
            "1e-128",
            "9.99e125",
            "0.0001e-124",
        ] {
            assert!(sqs_number(ok), "{ok} is a Number");
        }
        for bad in [
            "",
            "-",
            ".",
            "e5",
            "1e",
            "1e+",
            "NaN",
            "nan",
            "inf",
            "-inf",
            "infinity",
            "0x10",
            "1,5",
            "1.2.3",
            "--1",
            "1 2",
            "123456789012345678901234567890123456789", // 39 digits
            "1.1e126",
            "2e126",
            "1e127",
            "1e-129",
            "9e-129",
            "1e999999999999999999999",
        ] {
            assert!(!sqs_number(bad), "{bad} is not a Number");
        }
    }
}
