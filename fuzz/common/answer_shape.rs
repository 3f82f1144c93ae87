//! The body of the fuzz target `sqs_answer_shape`, shared with its replay test
//! (`sqs/tests/fuzz_regressions.rs`): an SQS answer's bytes through `shape::Shape` (the crate
//! root must have the module `shape`: the target includes `sqs/src/shape.rs`, the test uses
//! `shmfifo_sqs::shape`).
//!
//! The input's first byte picks where the answer is cut between reads (every cut must count
//! the same as one read: the state carries across); the rest is the answer. Oracles: the
//! counts do not depend on the cuts; a bound is refused exactly when the counts pass it; and
//! where serde_json reads the answer as JSON, the objects counted are its objects and the
//! members and elements counted are its members plus, for each object and array, its
//! entries less one (the separators).

use crate::shape::{Shape, TooComplex};

/// One input (see the module doc).
pub fn answer_shape(data: &[u8]) {
    let Some((&step, answer)) = data.split_first() else {
        return;
    };
    let mut whole = Shape::new(u32::MAX, u32::MAX);
    whole.feed(answer).expect("no bound");
    let (objects, members) = whole.counts();
    // Cut every `step + 1` bytes.
    let mut cut = Shape::new(u32::MAX, u32::MAX);
    for chunk in answer.chunks(usize::from(step) + 1) {
        cut.feed(chunk).expect("no bound");
    }
    assert_eq!(
        cut.counts(),
        (objects, members),
        "the cuts changed the counts"
    );
    // Bounds just below and at the counts.
    let mut tight = Shape::new(objects, members);
    assert_eq!(tight.feed(answer), Ok(()));
    if objects > 0 {
        let mut under = Shape::new(objects - 1, u32::MAX);
        assert_eq!(under.feed(answer), Err(TooComplex::Objects(objects - 1)));
    }
    if members > 0 {
        let mut under = Shape::new(u32::MAX, members - 1);
        assert_eq!(under.feed(answer), Err(TooComplex::Members(members - 1)));
    }
    // serde_json's reading, where it has one (every member counted, a repeated key too).
    let Ok(Count(want_objects, want_members)) = serde_json::from_slice::<Count>(answer) else {
        return;
    };
    assert_eq!(
        (objects, members),
        (want_objects, want_members),
        "counted otherwise than serde_json reads it"
    );
}

/// The objects, and the members and separators, of a JSON value as serde_json reads it: each
/// object's members (a key given twice counted twice: serde_json's `Value` would keep one),
/// and for each object and array its entries less one (the commas). Depth is serde_json's
/// bound (128), so the visitor's recursion is bounded.
struct Count(u32, u32);

impl<'de> serde::Deserialize<'de> for Count {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(CountVisitor)
    }
}

struct CountVisitor;

impl<'de> serde::de::Visitor<'de> for CountVisitor {
    type Value = Count;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<Count, E> {
        Ok(Count(0, 0))
    }
    fn visit_i64<E>(self, _: i64) -> Result<Count, E> {
        Ok(Count(0, 0))
    }
    fn visit_u64<E>(self, _: u64) -> Result<Count, E> {
        Ok(Count(0, 0))
    }
    fn visit_f64<E>(self, _: f64) -> Result<Count, E> {
        Ok(Count(0, 0))
    }
    fn visit_str<E>(self, _: &str) -> Result<Count, E> {
        Ok(Count(0, 0))
    }
    fn visit_unit<E>(self) -> Result<Count, E> {
        Ok(Count(0, 0))
    }
    fn visit_none<E>(self) -> Result<Count, E> {
        Ok(Count(0, 0))
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Count, A::Error> {
        let (mut objects, mut members, mut n) = (0u32, 0u32, 0u32);
        while let Some(Count(o, m)) = seq.next_element::<Count>()? {
            (objects, members, n) = (objects + o, members + m, n + 1);
        }
        Ok(Count(objects, members + n.saturating_sub(1)))
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Count, A::Error> {
        let (mut objects, mut members, mut n) = (1u32, 0u32, 0u32);
        while map.next_key::<serde::de::IgnoredAny>()?.is_some() {
            let Count(o, m) = map.next_value::<Count>()?;
            (objects, members, n) = (objects + o, members + m, n + 1);
        }
        Ok(Count(objects, members + n + n.saturating_sub(1)))
    }
}
