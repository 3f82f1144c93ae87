//! Fuzz target: arbitrary bytes as a query-protocol form body, through
//! `protocol::from_query` and `protocol::form_pairs`, and the answer and error writers over
//! what was parsed. The body is `serve::serve_query` in `fuzz/common/serve.rs`, shared with
//! the replay test `serve/tests/fuzz_regressions.rs`.
#![no_main]

#[allow(dead_code)]
#[path = "../common/serve.rs"]
mod serve;

libfuzzer_sys::fuzz_target!(|data: &[u8]| serve::serve_query(data));
