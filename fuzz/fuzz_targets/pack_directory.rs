//! Fuzz target: a pack's directory words (layout 22) placed bounds-safely. The body is
//! `pack::pack_directory` in `fuzz/common/pack.rs`, shared with the replay test
//! `tests/fuzz_regressions.rs`.
#![no_main]

#[path = "../common/pack.rs"]
mod pack;

libfuzzer_sys::fuzz_target!(|data: &[u8]| pack::pack_directory(data));
