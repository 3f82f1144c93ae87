//! Fuzz target: the library's RedrivePolicy parser against serde_json (what `shmfifo serve`
//! checks a policy with). The body is `redrive::redrive_policy` in `fuzz/common/redrive.rs`,
//! shared with the replay test `serve/tests/fuzz_regressions.rs`.
#![no_main]

#[path = "../common/redrive.rs"]
mod redrive;

libfuzzer_sys::fuzz_target!(|data: &[u8]| redrive::redrive_policy(data));
