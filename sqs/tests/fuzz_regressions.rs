//! The fuzz target `sqs_answer_shape` replayed without libFuzzer: every input kept under
//! `fuzz/regressions/sqs_answer_shape/` (seeds, and whatever `cargo fuzz` found), then answers
//! built from SQS's pieces with bytes changed, dropped and repeated, through the target's own
//! body (`fuzz/common/answer_shape.rs`). A failure is a panic inside it (an oracle that failed).

use shmfifo_sqs::shape;

#[path = "../../fuzz/common/answer_shape.rs"]
mod answer_shape;

use std::path::Path;

#[allow(dead_code)]
#[path = "../../fuzz/common/rng.rs"]
mod rng;
use rng::Rng;

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
