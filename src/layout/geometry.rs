//! The arena's geometry: the sizes derived from a configuration, the offsets of every region
//! in the file, and the arithmetic of added segments (split from `layout`, whose types it
//! places).

use super::*;

/// Sizes of one arena, derived from the configuration and echoed in the header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Geometry {
    /// Participant slots.
    pub participants: u32,
    /// Maximum active groups.
    pub max_groups: u32,
    /// Group table slots (power of two, ≥ 2 × max_groups).
    pub group_slots: u32,
    /// Ready ring entries.
    pub ready_slots: u32,
    /// `(payload capacity, slot count)` of each size class, ascending.
    pub classes: Vec<(u32, u32)>,
    /// Dedup table entries (power of two, or 0: no table).
    pub dedup_slots: u32,
    /// Key words per dedup entry (16 for queue scope, 32 for messageGroup scope).
    pub dedup_key_words: u32,
    /// Attempt-id records (power of two, or 0).
    pub attempt_slots: u32,
    /// Per size class (as `classes`; missing entries are 0), the most segments it may add as
    /// the arena grows.
    pub class_growth: Vec<u32>,
    /// The size limit in bytes (the file never grows past it); 0: the base size.
    pub size_limit: u64,
    /// The most segments the dedup table may add (layout 14).
    pub dedup_growth: u32,
    /// The most segments the group table may add (layout 16).
    pub group_growth: u32,
}

/// Byte offsets of each region, computed from a [`Geometry`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Offsets {
    /// Segment directory: per kind (each class, the dedup table, the group table),
    /// [`MAX_SEGMENTS`] file offsets of its added segments.
    pub segments: u64,
    /// Participant array.
    pub participants: u64,
    /// Group table.
    pub groups: u64,
    /// Ready ring.
    pub ready: u64,
    /// Expiry wheel: [`WHEEL_BUCKETS`] bucket minima, then the buckets' bitmaps.
    pub timers: u64,
    /// Dedup table.
    pub dedup: u64,
    /// Dedup key words.
    pub dedup_keys: u64,
    /// Attempt-id records.
    pub attempts: u64,
    /// Per class: (headers offset, payload offset, payload stride).
    pub classes: Vec<(u64, u64, u64)>,
    /// Total arena size.
    pub total: u64,
}

fn round_up(x: u64, to: u64) -> u64 {
    x.div_ceil(to) * to
}

impl Geometry {
    /// Computes the offsets of every region. Returns `None` on arithmetic overflow.
    pub fn offsets(&self) -> Option<Offsets> {
        let segments = PAGE;
        let mut off = segments + (MAX_KINDS * MAX_SEGMENTS * 8) as u64;
        off = round_up(off, 128);
        let participants = off;
        off = off.checked_add(u64::from(self.participants) * PARTICIPANT_SIZE as u64)?;
        off = round_up(off, 128);
        let groups = off;
        off = off.checked_add(u64::from(self.group_slots) * GROUP_ENTRY_SIZE as u64)?;
        let ready = off;
        off = off.checked_add(u64::from(self.ready_slots) * 8)?;
        off = round_up(off, 128);
        let timers = off;
        off = off.checked_add(
            (WHEEL_BUCKETS as u64 * (1 + wheel_words(self.group_slots) as u64)).checked_mul(8)?,
        )?;
        off = round_up(off, 128);
        let dedup = off;
        off = off.checked_add(u64::from(self.dedup_slots) * DEDUP_ENTRY_SIZE as u64)?;
        let dedup_keys = off;
        off = off.checked_add(
            u64::from(self.dedup_slots).checked_mul(u64::from(self.dedup_key_words) * 8)?,
        )?;
        off = round_up(off, 128);
        let attempts = off;
        off = off.checked_add(u64::from(self.attempt_slots) * ATTEMPT_ENTRY_SIZE as u64)?;
        let mut classes = Vec::with_capacity(self.classes.len());
        for &(payload, count) in &self.classes {
            off = round_up(off, 128);
            let headers = off;
            off = off.checked_add(u64::from(count) * MSG_HEADER_SIZE as u64)?;
            let stride = stride_of(payload);
            let pay = off;
            off = off.checked_add(u64::from(count).checked_mul(stride)?)?;
            classes.push((headers, pay, stride));
        }
        Some(Offsets {
            segments,
            participants,
            groups,
            ready,
            timers,
            dedup,
            dedup_keys,
            attempts,
            classes,
            total: round_up(off, PAGE),
        })
    }

    /// Total number of message slots over all classes in the base file.
    pub fn total_slots(&self) -> u64 {
        self.classes.iter().map(|&(_, n)| u64::from(n)).sum()
    }

    /// The most segments class `k` may add.
    pub fn growth(&self, k: usize) -> u32 {
        self.class_growth.get(k).copied().unwrap_or(0)
    }

    /// The most slots class `k` may hold once grown to its limit: the size of its index range.
    pub fn max_slots(&self, k: usize) -> u64 {
        self.classes
            .get(k)
            .map_or(0, |&(_, n)| slots_with(n, self.growth(k)))
    }

    /// The size of the whole index range of message slots (every class at its limit).
    pub fn index_slots(&self) -> u64 {
        (0..self.classes.len()).map(|k| self.max_slots(k)).sum()
    }

    /// The size of the group index range: the base table's entries and those of every table
    /// it may add (layout 16; the arena's own figure is `Arena::group_range`).
    #[cfg(test)]
    pub fn group_range(&self) -> u64 {
        slots_with(self.group_slots, self.group_growth)
    }
}

/// Most message slots (every class at its limit), as [`crate::config::MAX_SLOTS`].
pub const INDEX_SLOTS: u64 = (1 << 31) - 1;

impl Geometry {
    /// Sets `class_growth`, `dedup_growth` and `group_growth` from `size_limit` for a base file of `base`
    /// bytes (layout 13): each kind may add as many segments as fit, that kind alone, between
    /// the base file's end and the limit, within [`MAX_SEGMENTS`] and an index range of at most
    /// 2^31 - 1 (slots of every class at its limit; dedup entries), or [`MAX_GROUP_RANGE`]
    /// (group entries). A header's values are
    /// checked against this at every open: two processes never disagree on an index range.
    pub fn derive_growth(&mut self, base: u64) {
        let budget = self.size_limit.saturating_sub(base);
        let fit = |bytes: &dyn Fn(u32) -> u64, count: u64| -> u32 {
            let (mut k, mut used) = (0u32, 0u64);
            while (k as usize) < MAX_SEGMENTS && count.max(1) << (k + 1) <= INDEX_SLOTS {
                let b = bytes(k + 1);
                if used.saturating_add(b) > budget {
                    break;
                }
                used += b;
                k += 1;
            }
            k
        };
        let mut growth: Vec<u32> = self
            .classes
            .iter()
            .map(|&(cap, n)| fit(&|k| segment_bytes(n, stride_of(cap), k), u64::from(n)))
            .collect();
        let range = |g: &[u32]| -> u64 {
            self.classes
                .iter()
                .zip(g)
                .map(|(&(_, n), &k)| slots_with(n, k))
                .sum()
        };
        while range(&growth) > INDEX_SLOTS {
            let widest = (0..self.classes.len())
                .filter(|&c| growth[c] > 0)
                .max_by_key(|&c| slots_with(self.classes[c].1, growth[c]));
            match widest {
                Some(c) => growth[c] -= 1,
                None => break,
            }
        }
        self.class_growth = growth;
        self.dedup_growth = if self.dedup_slots == 0 {
            0
        } else {
            let (d, kw) = (self.dedup_slots, self.dedup_key_words);
            fit(&|k| dedup_segment_bytes(d, kw, k), u64::from(d))
        };
        let gs = self.group_slots;
        let mut k = fit(&|k| group_segment_bytes(gs, k), u64::from(gs));
        while k > 0 && slots_with(gs, k) > MAX_GROUP_RANGE {
            k -= 1;
        }
        self.group_growth = k;
    }
}

/// Slots of segment `k` (from 1) of a class whose base file holds `base` slots. A class that
/// starts empty (`base` 0, layout 15: taken on demand) grows from one slot: its segments hold
/// 1, 2, 4, … slots.
pub fn segment_slots(base: u32, k: u32) -> u64 {
    u64::from(base.max(1)) << (k - 1)
}

/// The slots a class whose base file holds `base` holds once it has added `k` segments: `base
/// × 2^k`, or `2^k - 1` for a class that starts empty (layout 15).
#[inline]
pub fn slots_with(base: u32, k: u32) -> u64 {
    (u64::from(base.max(1)) << k) - u64::from(base == 0)
}

/// Where the first slot of segment `k` (from 1) of a class of `base` base slots lies among the
/// class's slots (its slots before it: [`slots_with`]`(base, k - 1)`).
pub fn segment_start(base: u32, k: u32) -> u64 {
    slots_with(base, k - 1)
}

/// Bytes of segment `k` (from 1) of a class of `base` slots in the base file and payloads of
/// `stride` bytes: its headers, then its payloads, rounded up to a page.
pub fn segment_bytes(base: u32, stride: u64, k: u32) -> u64 {
    round_up(
        segment_slots(base, k) * (MSG_HEADER_SIZE as u64 + stride),
        PAGE,
    )
}

/// Bytes of segment `k` (from 1) of a dedup table of `base` entries in the base file with
/// `key_words` key words each: its entries, then their key words, rounded up to a page.
pub fn dedup_segment_bytes(base: u32, key_words: u32, k: u32) -> u64 {
    round_up(
        segment_slots(base, k) * (DEDUP_ENTRY_SIZE as u64 + 8 * u64::from(key_words)),
        PAGE,
    )
}

/// Words of a group segment's tail (layout 16), after its entries: the table's expiry-wheel
/// bitmaps ([`WHEEL_BUCKETS`] of [`wheel_words_of`]`(m)` words), its ready ring's head and
/// tail words (each alone in 128 bytes) and its ready ring's `m` entries.
pub fn group_segment_words(m: u64) -> u64 {
    WHEEL_BUCKETS as u64 * m.div_ceil(64) + GROUP_RING_OFFSET_WORDS + m
}

/// Where a group segment's ready-ring words start in its tail, after the bitmaps (words): the
/// head at 0, the tail at 16 (128 bytes on), the entries at [`GROUP_RING_OFFSET_WORDS`].
pub const GROUP_RING_OFFSET_WORDS: u64 = 32;

/// Bytes of segment `k` (from 1) of a group table of `base` entries in the base file: its
/// entries, then its tail ([`group_segment_words`]), rounded up to a page.
pub fn group_segment_bytes(base: u32, k: u32) -> u64 {
    let m = segment_slots(base, k);
    round_up(
        m * GROUP_ENTRY_SIZE as u64 + group_segment_words(m) * 8,
        PAGE,
    )
}

/// Payload stride of a class whose slots hold `payload` bytes.
pub fn stride_of(payload: u32) -> u64 {
    round_up(u64::from(payload), 64)
}

#[cfg(all(test, not(shmfifo_loom)))]
mod tests {
    use super::*;

    #[test]
    fn offsets_are_aligned_and_disjoint() {
        let g = Geometry {
            participants: 3,
            max_groups: 5,
            group_slots: 16,
            ready_slots: 16,
            classes: vec![(192, 7), (960, 3)],
            dedup_slots: 4,
            dedup_key_words: DEDUP_KEY_WORDS,
            attempt_slots: 2,
            class_growth: Vec::new(),
            size_limit: 0,
            dedup_growth: 0,
            group_growth: 0,
        };
        let o = g.offsets().unwrap();
        assert_eq!(o.segments, PAGE);
        assert_eq!(
            o.participants,
            PAGE + round_up((MAX_KINDS * MAX_SEGMENTS * 8) as u64, 128)
        );
        assert_eq!(o.groups % 128, 0);
        assert!(o.groups >= o.participants + 3 * 64);
        assert_eq!(o.ready, o.groups + 16 * 256);
        assert_eq!(o.timers % 128, 0);
        assert!(o.timers >= o.ready + 16 * 8);
        // 64 minima and 64 one-word bitmaps (16 entries fit in one word).
        assert_eq!(wheel_words(16), 1);
        assert_eq!(wheel_words(65), 2);
        assert_eq!(o.dedup % 128, 0);
        assert!(o.dedup >= o.timers + 64 * 2 * 8);
        assert_eq!(o.dedup_keys, o.dedup + 4 * 64);
        assert_eq!(o.attempts % 128, 0);
        assert!(o.attempts >= o.dedup_keys + 4 * 8);
        assert!(o.classes[0].0 >= o.attempts + 2 * 384);
        assert_eq!(o.classes[0].0 % 128, 0);
        assert_eq!(o.classes[0].1, o.classes[0].0 + 7 * 64);
        assert_eq!(o.classes[0].2, 192);
        assert!(o.classes[1].0 >= o.classes[0].1 + 7 * 192);
        assert_eq!(o.total % PAGE, 0);
        assert!(o.total >= o.classes[1].1 + 3 * 960);
    }

    #[test]
    fn overflow_is_detected() {
        let g = Geometry {
            participants: 1,
            max_groups: 1,
            group_slots: 2,
            ready_slots: 2,
            classes: vec![(u32::MAX, u32::MAX); 8],
            dedup_slots: 0,
            dedup_key_words: DEDUP_KEY_WORDS,
            attempt_slots: 0,
            class_growth: Vec::new(),
            size_limit: 0,
            dedup_growth: 0,
            group_growth: 0,
        };
        // 8 × 4 GiB × 4 GiB overflows u64.
        assert!(g.offsets().is_none());
    }
}
