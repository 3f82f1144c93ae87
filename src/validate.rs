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
    if v.is_empty() {
        return Err(Error::invalid(
            "MessageBody",
            "The message body must be at least 1 character long.",
        ));
    }
    // Only control characters other than tab, LF, CR are invalid below U+0080: found eight
    // bytes at a time (see `first_control`); characters past ASCII are checked below.
    let bytes = v.as_bytes();
    if let Some(pos) = first_control(bytes) {
        return Err(Error::InvalidMessageContents {
            reason: format!(
                "character U+{:04X} at byte {pos} is not allowed",
                bytes[pos]
            ),
        });
    }
    if !v.is_ascii() {
        for (pos, c) in v.char_indices() {
            let ok = matches!(c as u32, 0x9 | 0xA | 0xD | 0x20..=0xD7FF | 0xE000..=0xFFFD | 0x10000..=0x10FFFF);
            if !ok {
                return Err(Error::InvalidMessageContents {
                    reason: format!("character U+{:04X} at byte {pos} is not allowed", c as u32),
                });
            }
        }
    }
    Ok(())
}

/// The position of the first byte below 0x20 other than tab, LF and CR. Eight bytes at a time:
/// a word whose bytes are all at least 0x20 or have their top bit set (ASCII text, UTF-8
/// continuation and lead bytes) is passed over in a few instructions; only a word holding a
/// byte below 0x20 is looked at byte by byte (text with line breaks meets one per line).
fn first_control(bytes: &[u8]) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let bad = |b: u8| b < 0x20 && b != 0x9 && b != 0xA && b != 0xD;
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
    }
    Ok(())
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
pub(crate) fn batch_ids<'a>(ids: impl ExactSizeIterator<Item = &'a str> + Clone) -> Result<()> {
    let n = ids.len();
    if n == 0 {
        return Err(Error::EmptyBatchRequest);
    }
    if n > 10 {
        return Err(Error::TooManyEntriesInBatchRequest { entries: n });
    }
    for id in ids.clone() {
        batch_entry_id(id)?;
    }
    for (i, a) in ids.clone().enumerate() {
        if ids.clone().skip(i + 1).any(|b| b == a) {
            return Err(Error::BatchEntryIdsNotDistinct { id: a.to_owned() });
        }
    }
    Ok(())
}

#[cfg(all(test, not(shmfifo_loom)))]
mod tests {
    use super::*;

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

    /// S8: `Number` attributes as SQS takes them (issue 20): 38 significant digits, magnitudes
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
