//! Body of the `cli_input` fuzz target, shared with the replay test of the CLI
//! (`cli/src/fuzz_replay.rs`): the parsers of what a caller types or feeds `shmfifo`, which
//! are `cli/src/parse.rs` (durations, byte sizes, rates, modes, size classes, attributes,
//! base64) and `cli/src/batch_input.rs` (`send --batch`'s JSON). Both files are included by
//! path, as `crate::parse` and `crate::batch_input`, here and in the CLI alike.
//!
//! Input: the first byte picks the parser, the rest is its text (invalid UTF-8 replaced, as a
//! command line or file never reaches the parsers as bytes).
//!
//! The oracle: no parser panics, and what each accepts is what it says it takes:
//! * a duration given as digits alone is that many seconds; a wait time is at most 20 s;
//! * a byte count is its digits times its unit's scale, and fits a `u32` where asked;
//! * a rate is positive; a mode's bits are those of its octal digits;
//! * size classes come one a comma-separated item;
//! * an attribute's name is the text before its first `=`, its type String, Number or Binary
//!   (with a label or not), a Binary value base64 that encodes back to the same bytes;
//! * base64 decodes what it encodes, the rest of the input as bytes;
//! * a batch's messages are numbered from 1 in the order of their lines or entries, each with
//!   its place, an id (the caller's, not empty, or the number) and a body of text or bytes.

use std::time::Duration;

use crate::batch_input;
use crate::parse;

/// Runs one input (see the module's documentation).
pub fn cli_input(data: &[u8]) {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    let text = String::from_utf8_lossy(rest);
    let t = text.trim();
    let digits_only = !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
    match which % 10 {
        0 => {
            if let Ok(d) = parse::duration(&text) {
                if digits_only {
                    assert_eq!(Some(d), t.parse().ok().map(Duration::from_secs), "{text:?}");
                }
            }
        }
        1 => {
            if let Ok(d) = parse::wait_time(&text) {
                assert!(d <= Duration::from_secs(20), "{text:?}: {d:?}");
            }
        }
        2 | 3 => {
            let n = if which % 10 == 2 {
                parse::bytes(&text).map(u64::from)
            } else {
                parse::large_bytes(&text)
            };
            if let Ok(n) = n {
                let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
                let (num, unit) = t.split_at(split);
                let scale = match unit.trim() {
                    "" | "B" => 1,
                    "K" | "KiB" | "k" => 1 << 10,
                    "M" | "MiB" => 1 << 20,
                    "G" | "GiB" => 1 << 30,
                    "T" | "TiB" => 1 << 40,
                    u => panic!("{text:?}: accepted with the unit {u:?}"),
                };
                let num: u64 = num.parse().expect("digits before the unit");
                assert_eq!(Some(n), num.checked_mul(scale), "{text:?}");
            }
        }
        4 => {
            if let Ok(n) = parse::rate(&text) {
                assert!(n > 0, "{text:?}");
            }
        }
        5 => {
            if let Ok(m) = parse::mode(&text) {
                let octal = t.strip_prefix("0o").unwrap_or(t);
                assert_eq!(u32::from_str_radix(octal, 8), Ok(m), "{text:?}");
            }
        }
        6 => {
            if let Ok(parse::SizeClasses(c)) = parse::size_classes(&text) {
                assert_eq!(c.len(), text.split(',').count(), "{text:?}");
            }
        }
        7 => {
            if let Ok(a) = parse::attribute(&text) {
                assert_eq!(Some(a.name.as_str()), text.split('=').next(), "{text:?}");
                let base = a.data_type.split('.').next().unwrap_or("");
                assert!(
                    ["String", "Number", "Binary"].contains(&base),
                    "{text:?}: type {:?}",
                    a.data_type
                );
                if base == "Binary" {
                    let again = parse::base64_decode(&parse::base64_encode(&a.value));
                    assert_eq!(again.as_deref(), Some(&a.value[..]), "{text:?}");
                }
            }
        }
        8 => {
            let encoded = parse::base64_encode(rest);
            assert_eq!(encoded.len(), rest.len().div_ceil(3) * 4);
            assert_eq!(parse::base64_decode(&encoded).as_deref(), Some(rest));
            if let Some(b) = parse::base64_decode(&text) {
                assert_eq!(
                    b.len(),
                    text.trim_end_matches('=').len() * 6 / 8,
                    "{text:?}"
                );
            }
        }
        _ => {
            let Ok(msgs) = batch_input::parse_lines("input", &text) else {
                return;
            };
            let mut last = 0;
            for m in &msgs {
                assert!(m.line > last, "{text:?}: numbered {} after {last}", m.line);
                last = m.line;
                // A line of JSON lines, an entry of a list, a value of a stream of values over
                // several lines each (as `jq` prints them without `-c`).
                assert!(
                    ["line", "entry", "value"]
                        .iter()
                        .any(|k| m.at == format!("{k} {}", m.line)),
                    "{text:?}: placed at {:?}",
                    m.at
                );
                assert!(!m.id.is_empty(), "{text:?}: an empty id");
                assert!(m.own_id || m.id == m.line.to_string(), "{text:?}");
                assert!(
                    m.bytes.is_none() || m.body.is_empty(),
                    "{text:?}: two bodies"
                );
            }
        }
    }
}
