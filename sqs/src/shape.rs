//! Bounds on a JSON answer's shape, checked on its bytes as they arrive, before the SDK parses
//! them: how many objects and how many members and elements it holds.
//!
//! The SDK builds a value for every object and every known member it reads, and fills in the
//! required fields an object lacks, so a small answer can become a large structure: `{}`
//! (three bytes, with its comma) is a whole batch result entry, and a 64 MiB answer of them
//! some 22 million entries of 144 bytes or more, gigabytes. A byte limit alone bounds the
//! bytes, not what they become. [`Shape`] counts, outside strings, each `{` (an object) and
//! each `:` and `,` (a member, or an element after the first), and refuses an answer that
//! holds more than its bounds: what the SDK then builds is linear in the bounds and the
//! bytes. It reads one byte at a time with two flags of state (in a string, after a
//! backslash), so an answer split anywhere between reads counts the same, and nothing it
//! reads nests (no recursion, no stack).
//!
//! No other file of the crate is needed here: the fuzz target `sqs_answer_shape` includes this
//! one.

/// A JSON text's shape as counted so far (see the module doc).
#[derive(Debug, Clone)]
pub struct Shape {
    max_objects: u32,
    max_members: u32,
    objects: u32,
    members: u32,
    in_string: bool,
    escaped: bool,
}

/// Why an answer was refused: the bound it passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TooComplex {
    /// More objects than the bound.
    Objects(u32),
    /// More members and elements than the bound.
    Members(u32),
}

impl std::fmt::Display for TooComplex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TooComplex::Objects(n) => write!(f, "the answer holds more than {n} JSON objects"),
            TooComplex::Members(n) => {
                write!(
                    f,
                    "the answer holds more than {n} JSON members and elements"
                )
            }
        }
    }
}

impl std::error::Error for TooComplex {}

impl Shape {
    /// A count that refuses more than `max_objects` objects or `max_members` members and
    /// elements.
    pub fn new(max_objects: u32, max_members: u32) -> Shape {
        Shape {
            max_objects,
            max_members,
            objects: 0,
            members: 0,
            in_string: false,
            escaped: false,
        }
    }

    /// Counts the next bytes of the answer; an error once a bound is passed (and at every
    /// call after).
    pub fn feed(&mut self, bytes: &[u8]) -> Result<(), TooComplex> {
        for &b in bytes {
            if self.in_string {
                if self.escaped {
                    self.escaped = false;
                } else if b == b'\\' {
                    self.escaped = true;
                } else if b == b'"' {
                    self.in_string = false;
                }
                continue;
            }
            match b {
                b'"' => self.in_string = true,
                b'{' => self.objects = self.objects.saturating_add(1),
                b':' | b',' => self.members = self.members.saturating_add(1),
                _ => {}
            }
        }
        self.check()
    }

    /// The counts so far against the bounds.
    pub fn check(&self) -> Result<(), TooComplex> {
        if self.objects > self.max_objects {
            return Err(TooComplex::Objects(self.max_objects));
        }
        if self.members > self.max_members {
            return Err(TooComplex::Members(self.max_members));
        }
        Ok(())
    }

    /// `(objects, members and elements)` counted so far.
    pub fn counts(&self) -> (u32, u32) {
        (self.objects, self.members)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(text: &str) -> (u32, u32) {
        let mut s = Shape::new(u32::MAX, u32::MAX);
        s.feed(text.as_bytes()).unwrap();
        s.counts()
    }

    #[test]
    fn objects_members_and_elements_are_counted_outside_strings() {
        assert_eq!(counts("{}"), (1, 0));
        assert_eq!(counts(r#"{"a":1,"b":[1,2,3]}"#), (1, 5));
        assert_eq!(counts(r#"{"Successful":[{},{},{}]}"#), (4, 3));
        // Inside strings nothing counts, escaped quotes included.
        assert_eq!(counts(r#"{"a":"{,:}\"{,}\\"}"#), (1, 1));
        assert_eq!(counts(r#"["\\\"{"]"#), (0, 0));
    }

    #[test]
    fn an_answer_split_anywhere_counts_the_same() {
        let text =
            r#"{"Messages":[{"Body":"a \"quoted\" {brace}, colon: \\","MessageId":"x"},{}]}"#;
        let whole = counts(text);
        for cut in 0..text.len() {
            let mut s = Shape::new(u32::MAX, u32::MAX);
            s.feed(&text.as_bytes()[..cut]).unwrap();
            s.feed(&text.as_bytes()[cut..]).unwrap();
            assert_eq!(s.counts(), whole, "cut at {cut}");
        }
    }

    #[test]
    fn an_answer_past_a_bound_is_refused() {
        let mut s = Shape::new(3, 100);
        assert!(s.feed(b"{\"Successful\":[{},{}").is_ok());
        assert_eq!(s.feed(b",{}]}"), Err(TooComplex::Objects(3)));
        assert_eq!(s.feed(b""), Err(TooComplex::Objects(3)));
        let mut s = Shape::new(100, 2);
        assert_eq!(s.feed(b"[1,2,3,4]"), Err(TooComplex::Members(2)));
    }
}
