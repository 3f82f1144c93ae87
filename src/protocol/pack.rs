//! Packs (layout 22): the messages of one group that one batch sends, in one slot
//! (`docs/design/packed-batches.md`).
//!
//! A pack's slot header says `LENS_PACKED` in its `lens` word, with the member count `k`
//! (`2 ..= MAX_PACK`) and the bytes `used` of the payload it occupies
//! (`words::unit_lens`). The payload starts with the directory, one [`MsgWords`] entry of
//! 32 bytes a member, then the members' bytes in member order: each member's body at the
//! next 64-byte boundary (a borrowed body is aligned as a message's own slot's is), its dedup
//! id, its framed attributes. `used` ends at the last member's last byte.
//!
//! Everything here is arithmetic on words read from shared memory, so everything is checked
//! ([`place`]): a damaged directory is a damaged message, never an index out of bounds. The
//! writer's side is [`lay_out`]; `place` of what `lay_out` wrote gives back its places.
//!
//! [`MsgWords`]: crate::layout::MsgWords
//!
//! Layout 22 lands in steps (`docs/design/packed-batches.md`, "How it lands"): this first one
//! fixes the format and its checks, and every reader refuses a pack as a damaged message
//! (`message::split`); the send that makes packs and the readers that take them apart come
//! next, and use this module.
#![cfg_attr(
    not(any(test, feature = "loom")),
    expect(
        dead_code,
        reason = "the send and receive of packs, the next step, use it"
    )
)]

use super::words;
use crate::layout::{MAX_PACK, PACK_MEMBER_SIZE};

/// Where one member's bytes lie in its pack's payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Place {
    /// Offset of the body from the payload's start (a multiple of 64).
    pub at: usize,
    /// Body bytes.
    pub body: usize,
    /// Dedup id bytes (after the body).
    pub dedup: usize,
    /// Framed attribute bytes (after the dedup id).
    pub attrs: usize,
}

impl Place {
    /// The offset one past the member's last byte.
    pub fn end(&self) -> usize {
        self.at + self.body + self.dedup + self.attrs
    }
}

/// Every member's place in one pack, and the bytes the pack occupies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Places {
    /// The members, `k` of them.
    pub k: usize,
    /// Member `j`'s place, for `j < k`.
    pub members: [Place; MAX_PACK],
    /// Bytes from the payload's start to the last member's end.
    pub used: usize,
}

impl Places {
    /// The members' places.
    pub fn members(&self) -> &[Place] {
        &self.members[..self.k]
    }
}

/// The offset of member 0's body: after a directory of `k` entries, at a line's start.
pub fn first_body(k: usize) -> usize {
    (k * PACK_MEMBER_SIZE).next_multiple_of(64)
}

/// Lays out members of the given `(body, dedup, attrs)` lengths: their places, or `None` if
/// there are fewer than two or more than [`MAX_PACK`] of them, a length is beyond a lens
/// word's fields, or the pack would take more than `cap` bytes (the class's slot).
pub fn lay_out(sizes: &[(usize, usize, usize)], cap: usize) -> Option<Places> {
    if !(2..=MAX_PACK).contains(&sizes.len()) {
        return None;
    }
    let mut out = Places {
        k: sizes.len(),
        members: [Place::default(); MAX_PACK],
        used: 0,
    };
    let mut end = first_body(sizes.len());
    for (p, &(body, dedup, attrs)) in out.members.iter_mut().zip(sizes) {
        if body > words::LEN_MASK as usize || attrs > words::LEN_MASK as usize || dedup > 0xFF {
            return None;
        }
        let at = end.next_multiple_of(64);
        *p = Place {
            at,
            body,
            dedup,
            attrs,
        };
        end = p.end();
        if end > cap {
            return None;
        }
    }
    out.used = end;
    Some(out)
}

/// The members' places as a pack's words describe them: `unit` its slot's `lens` word (flag
/// `LENS_PACKED`), `lens` its directory's member `lens` words (the first `k` the unit word
/// names; more are ignored), `cap` its class's usable payload bytes. Refused, as corruption:
/// a word without the flag, fewer than two or more than [`MAX_PACK`] members (or fewer words
/// than that), a member with a flag, a `used` past `cap`, a member past `used`, or a last
/// member that does not end at `used` (every byte of a pack is accounted for, so a damaged
/// length shows).
pub fn place(unit: u64, lens: &[u64], cap: usize) -> Result<Places, &'static str> {
    if !words::is_pack(unit) {
        return Err("not a pack");
    }
    let (k, used) = words::unpack_unit_lens(unit);
    if !(2..=MAX_PACK).contains(&k) || lens.len() < k {
        return Err("pack member count");
    }
    if used > cap {
        return Err("pack exceeds its slot");
    }
    let mut out = Places {
        k,
        members: [Place::default(); MAX_PACK],
        used,
    };
    let mut end = first_body(k);
    for (p, &w) in out.members.iter_mut().zip(&lens[..k]) {
        let (body, attrs, dedup, flags) = words::unpack_lens(w);
        if flags != 0 {
            return Err("pack member flags");
        }
        // Each length is below 2^24 and `end` below 2^32 (it is at most `used`): no sum
        // overflows a usize.
        let at = end.next_multiple_of(64);
        *p = Place {
            at,
            body,
            dedup,
            attrs,
        };
        end = p.end();
        if end > used {
            return Err("pack member exceeds the pack");
        }
    }
    if end != used {
        return Err("pack length");
    }
    Ok(out)
}

#[cfg(all(test, not(shmfifo_loom)))]
mod tests {
    use super::*;

    fn unit_of(p: &Places) -> (u64, Vec<u64>) {
        let lens = p
            .members()
            .iter()
            .map(|m| words::pack_lens(m.body, m.attrs, m.dedup, 0))
            .collect();
        (words::unit_lens(p.k, p.used), lens)
    }

    /// What the writer lays out, the reader places back; bodies on lines, after the
    /// directory, members in order without overlap.
    #[test]
    fn place_reads_back_what_lay_out_wrote() {
        let sizes = [(64, 0, 0), (1, 8, 0), (200, 128, 77), (0, 0, 3)];
        let p = lay_out(&sizes, 4096).unwrap();
        assert_eq!(p.k, 4);
        assert_eq!(
            p.members[0].at, 128,
            "four 32-byte entries, rounded to a line"
        );
        let mut prev = first_body(4);
        for (m, &(b, d, a)) in p.members().iter().zip(&sizes) {
            assert_eq!((m.body, m.dedup, m.attrs), (b, d, a));
            assert_eq!(m.at % 64, 0);
            assert!(m.at >= prev);
            prev = m.end();
        }
        assert_eq!(p.used, prev);
        let (unit, lens) = unit_of(&p);
        assert_eq!(place(unit, &lens, 4096), Ok(p));
        // Ten 64-byte bodies: a 320-byte directory, then a line each.
        let ten = lay_out(&[(64, 0, 0); 10], 4096).unwrap();
        assert_eq!(ten.members[0].at, 320);
        assert_eq!(ten.used, 320 + 640);
    }

    #[test]
    fn lay_out_refuses_what_a_pack_cannot_hold() {
        assert_eq!(lay_out(&[(1, 0, 0)], 4096), None, "one member");
        assert_eq!(lay_out(&[(1, 0, 0); 11], 4096), None, "eleven");
        assert_eq!(
            lay_out(&[(64, 0, 0); 2], 64 + 64 + 63),
            None,
            "past the slot"
        );
        assert!(
            lay_out(&[(64, 0, 0); 2], 64 + 64 + 64).is_some(),
            "exactly the slot"
        );
        assert_eq!(
            lay_out(&[(1, 256, 0); 2], 4096),
            None,
            "a dedup length past 255"
        );
        assert_eq!(
            lay_out(&[(1 << 24, 0, 0); 2], 1 << 26),
            None,
            "a body past 2^24 - 1"
        );
    }

    /// Every damaged word is refused: the flag, the count, `used` against the slot and the
    /// members, a member's flag, one length one too long or too short.
    #[test]
    fn place_refuses_damaged_words() {
        let p = lay_out(&[(64, 0, 0), (64, 8, 16), (30, 0, 0)], 1024).unwrap();
        let (unit, lens) = unit_of(&p);
        assert!(place(unit, &lens, 1024).is_ok());
        assert!(
            place(words::pack_lens(64, 0, 0, 0), &lens, 1024).is_err(),
            "no flag"
        );
        for k in [0, 1, 11, 255] {
            let w = words::unit_lens(k, p.used);
            assert_eq!(
                place(w, &[0; 255], 1024),
                Err("pack member count"),
                "k = {k}"
            );
        }
        assert_eq!(place(unit, &lens[..2], 1024), Err("pack member count"));
        assert_eq!(place(unit, &lens, p.used - 1), Err("pack exceeds its slot"));
        for used in [p.used - 1, p.used + 1, 0] {
            assert!(
                place(words::unit_lens(3, used), &lens, 1024).is_err(),
                "used {used}"
            );
        }
        for j in 0..3 {
            let mut bad = lens.clone();
            bad[j] |= u64::from(words::LENS_MOVED) << 56;
            assert_eq!(place(unit, &bad, 1024), Err("pack member flags"));
            // A line more of body moves every later member past `used`.
            let mut longer = lens.clone();
            longer[j] += 64 << 32;
            assert!(place(unit, &longer, 1024).is_err(), "member {j}");
        }
        // A byte more in any field of the last member ends it past `used`. (A byte more in an
        // earlier member may fall in the padding before the next body: the pack stays
        // consistent, its reads in bounds, and that member one byte longer, as any length a
        // damaged peer writes within a slot.)
        for delta in [1u64, (1 << 8), (1 << 32)] {
            let mut longer = lens.clone();
            longer[2] += delta;
            assert!(place(unit, &longer, 1024).is_err(), "+ {delta:#x}");
        }
        // One byte less in the last member: `used` is no longer its end.
        let mut shorter = lens.clone();
        shorter[2] -= 1 << 32;
        assert_eq!(place(unit, &shorter, 1024), Err("pack length"));
    }

    /// Whatever the words say, an accepted pack's members lie after its directory, in order,
    /// inside `used`, and `used` inside the slot (the bounds every reader relies on): valid
    /// packs of random sizes, each word then damaged by a random bit flip.
    #[test]
    fn place_keeps_every_member_inside_whatever_the_words() {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let (mut accepted, mut refused) = (0, 0);
        for _ in 0..100_000 {
            let k = 2 + (next() % (MAX_PACK as u64 - 1)) as usize;
            let sizes: Vec<_> = (0..k)
                .map(|_| {
                    let r = next();
                    (
                        (r % 300) as usize,
                        (r >> 16) as usize % 40,
                        (r >> 32) as usize % 90,
                    )
                })
                .collect();
            let cap = 8192;
            let p = lay_out(&sizes, cap).unwrap();
            let (mut unit, mut lens) = unit_of(&p);
            assert_eq!(place(unit, &lens, cap), Ok(p));
            let r = next();
            let which = (r % (k as u64 + 1)) as usize;
            let bit = 1u64 << ((r >> 8) % 64);
            if which == k {
                unit ^= bit;
            } else {
                lens[which] ^= bit;
            }
            match place(unit, &lens, cap) {
                Ok(q) => {
                    accepted += 1;
                    let mut prev = first_body(q.k);
                    for m in q.members() {
                        assert!(m.at >= prev && m.at % 64 == 0 && m.end() <= q.used);
                        prev = m.end();
                    }
                    assert!(q.used <= cap && prev == q.used);
                }
                Err(_) => refused += 1,
            }
        }
        // A flip in a bit no field uses leaves the pack valid; most flips break it.
        assert!(
            accepted > 0 && refused > accepted,
            "{accepted} accepted, {refused} refused"
        );
    }
}
