//! Fuzz target: one word of a group entry or a message header overwritten in a lived-in queue;
//! everything else must keep working. The body is `one_word::one_word` in
//! `fuzz/common/one_word.rs`, shared with the replay test `tests/fuzz_regressions.rs`.
#![no_main]

#[path = "../common/one_word.rs"]
mod one_word;

libfuzzer_sys::fuzz_target!(|data: &[u8]| one_word::one_word(data));
