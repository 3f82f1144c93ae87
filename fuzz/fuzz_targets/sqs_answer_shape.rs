//! Fuzz target: an SQS answer's bytes through the SQS backend's shape bound
//! (`sqs/src/shape.rs`). The body is `answer_shape::answer_shape` in
//! `fuzz/common/answer_shape.rs`, shared with the replay test `sqs/tests/fuzz_regressions.rs`.
#![no_main]

#[path = "../../sqs/src/shape.rs"]
#[allow(dead_code)]
mod shape;

#[path = "../common/answer_shape.rs"]
mod answer_shape;

libfuzzer_sys::fuzz_target!(|data: &[u8]| answer_shape::answer_shape(data));
