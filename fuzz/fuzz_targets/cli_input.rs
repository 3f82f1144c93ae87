//! Fuzz target: the CLI's parsers of what a caller types or feeds it (durations, sizes, rates,
//! modes, size classes, attributes, base64, and `send --batch`'s JSON), `cli/src/parse.rs` and
//! `cli/src/batch_input.rs` included by path. The body is `cli::cli_input` in
//! `fuzz/common/cli.rs`, shared with the CLI's replay test (`cli/src/fuzz_replay.rs`).
#![no_main]

#[allow(dead_code)]
#[path = "../../cli/src/parse.rs"]
mod parse;

#[allow(dead_code)]
#[path = "../../cli/src/batch_input.rs"]
mod batch_input;

#[path = "../common/cli.rs"]
mod cli;

libfuzzer_sys::fuzz_target!(|data: &[u8]| cli::cli_input(data));
