//! Body of the `pack_directory` fuzz target, shared with the replay test
//! `tests/fuzz_regressions.rs`: a pack's words (layout 23), as a damaged or hostile peer may
//! leave them in a slot, placed by `protocol::pack::place`.
//!
//! Input: byte 0 picks the mode; bytes 1–2 the class's usable payload bytes (× 4, up to
//! 256 KiB). Mode even: the rest is the slot's `lens` word, then up to 12 member `lens`
//! words, little-endian. Mode odd: the rest is up to 12 members' `(body, dedup, attrs)`
//! lengths (2, 1 and 2 bytes), laid out by the writer and placed back.
//!
//! The oracle: `place` never panics; what it accepts lies in bounds (every member after the
//! directory, each right after the one before, the last ending at `used`, `used` within
//! the slot) and is what the writer lays out for the same lengths; what the writer lays out,
//! `place` accepts unchanged.

use shmfifo::layout::MAX_PACK;
use shmfifo::protocol::{pack, words};

/// Runs one input (see the module's documentation).
pub fn pack_directory(data: &[u8]) {
    let [mode, c0, c1, rest @ ..] = data else {
        return;
    };
    let cap = usize::from(u16::from_le_bytes([*c0, *c1])) * 4;
    if mode % 2 == 0 {
        let mut ws = rest
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().expect("eight bytes")));
        let Some(unit) = ws.next() else {
            return;
        };
        let lens: Vec<u64> = ws.take(12).collect();
        if let Ok(p) = pack::place(unit, &lens, cap) {
            check(&p, cap);
            let sizes: Vec<_> = p
                .members()
                .iter()
                .map(|m| (m.body, m.dedup, m.attrs))
                .collect();
            assert_eq!(pack::lay_out(&sizes, cap), Some(p), "the writer's places");
        }
    } else {
        let sizes: Vec<(usize, usize, usize)> = rest
            .chunks_exact(5)
            .take(12)
            .map(|c| {
                (
                    usize::from(u16::from_le_bytes([c[0], c[1]])),
                    usize::from(c[2]),
                    usize::from(u16::from_le_bytes([c[3], c[4]])),
                )
            })
            .collect();
        // The bytes the members take, back to back after the directory.
        let k = sizes.len();
        let need = sizes
            .iter()
            .fold(pack::first_body(k), |end, &(b, d, a)| end + b + d + a);
        let Some(p) = pack::lay_out(&sizes, cap) else {
            // Refused: too few or too many members, or more than the slot holds.
            assert!(
                !(2..=MAX_PACK).contains(&k) || need > cap,
                "refused {sizes:?} in {cap}"
            );
            return;
        };
        check(&p, cap);
        assert_eq!(p.k, k, "every member laid out");
        for (m, &(b, d, a)) in p.members().iter().zip(&sizes) {
            assert_eq!(
                (m.body, m.dedup, m.attrs),
                (b, d, a),
                "each member's lengths kept"
            );
        }
        assert_eq!(
            p.used, need,
            "a pack takes its directory and its members' bytes only"
        );
        let unit = words::unit_lens(p.k, p.used);
        let lens: Vec<u64> = p
            .members()
            .iter()
            .map(|m| words::pack_lens(m.body, m.attrs, m.dedup, 0))
            .collect();
        assert_eq!(pack::place(unit, &lens, cap), Ok(p), "placed back");
    }
}

/// The bounds every reader of a pack relies on.
fn check(p: &pack::Places, cap: usize) {
    assert!((2..=MAX_PACK).contains(&p.k));
    assert!(p.used <= cap);
    let mut end = pack::first_body(p.k);
    for m in p.members() {
        assert_eq!(m.at, end, "{p:?}");
        end = m.end();
    }
    assert_eq!(end, p.used, "{p:?}");
}
