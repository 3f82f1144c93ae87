//! Fuzz target: arbitrary bytes (raw, or patches over a valid arena) opened as an arena, then
//! used. The body is `targets::open_arena` in `fuzz/common/targets.rs`, shared with the replay
//! test `tests/fuzz_regressions.rs`.
#![no_main]

#[allow(dead_code)]
#[path = "../common/targets.rs"]
mod targets;

libfuzzer_sys::fuzz_target!(|data: &[u8]| targets::open_arena(data));
