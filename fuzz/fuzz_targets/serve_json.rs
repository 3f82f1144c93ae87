//! Fuzz target: `X-Amz-Target` and a JSON-protocol body, through
//! `protocol::from_json`. The body is `serve::serve_json` in `fuzz/common/serve.rs`, shared
//! with the replay test `serve/tests/fuzz_regressions.rs`.
#![no_main]

#[allow(dead_code)]
#[path = "../common/serve.rs"]
mod serve;

libfuzzer_sys::fuzz_target!(|data: &[u8]| serve::serve_json(data));
