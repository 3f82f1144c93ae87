//! The fuzz target `sqs_answer_shape` replayed without libFuzzer: every input kept under
//! `fuzz/regressions/sqs_answer_shape/` (seeds, and whatever `cargo fuzz` found), then answers
//! built from SQS's pieces with bytes changed, dropped and repeated, through the target's own
//! body (`fuzz/common/answer_shape.rs`). A failure is a panic inside it (an oracle that failed).

use shmfifo_sqs::shape;

#[path = "../../fuzz/common/answer_shape.rs"]
mod answer_shape;

use std::path::Path;

/// A small deterministic generator (SplitMix64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

#[test]
fn sqs_answer_shape_regressions_and_pseudo_random_answers() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/regressions/sqs_answer_shape");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .collect();
    files.sort();
    assert!(files.len() >= 6, "{} inputs", files.len());
    for p in &files {
        let data = std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        answer_shape::answer_shape(&data);
    }
    const PIECES: &[&str] = &[
        "{",
        "}",
        "[",
        "]",
        ",",
        ":",
        "\"",
        "\\",
        "\\\"",
        "\\\\",
        " ",
        "\"Messages\"",
        "\"Body\"",
        "\"a, b: {c}\"",
        "1",
        "true",
        "null",
        "{}",
        "[]",
        "\"\\u007b\"",
    ];
    let mut rng = Rng(0x5EED_0F5A_0E00);
    for _ in 0..2000 {
        let mut data = vec![rng.next() as u8];
        for _ in 0..rng.below(40) {
            data.extend_from_slice(PIECES[rng.below(PIECES.len())].as_bytes());
        }
        // A few bytes changed, as libFuzzer would.
        for _ in 0..rng.below(3) {
            if data.len() > 1 {
                let i = 1 + rng.below(data.len() - 1);
                data[i] = rng.next() as u8;
            }
        }
        answer_shape::answer_shape(&data);
    }
}
