//! Fuzz target: random operations on a live queue with random writes into its arena (through
//! a second mapping of its file) in between. The body is `targets::live_scribble` in
//! `fuzz/common/targets.rs`, shared with the replay test `tests/fuzz_regressions.rs`.
#![no_main]

#[allow(dead_code)]
#[path = "../common/targets.rs"]
mod targets;

libfuzzer_sys::fuzz_target!(|data: &[u8]| targets::live_scribble(data));
