//! Fuzz target: a request, raw or signed here, through `sigv4::KeyPair::check`.
//! The body is `serve::serve_sigv4` in `fuzz/common/serve.rs`, shared with the replay test
//! `serve/tests/fuzz_regressions.rs`.
#![no_main]

#[allow(dead_code)]
#[path = "../common/serve.rs"]
mod serve;

libfuzzer_sys::fuzz_target!(|data: &[u8]| serve::serve_sigv4(data));
