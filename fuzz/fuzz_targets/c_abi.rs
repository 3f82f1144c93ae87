//! Fuzz target: the C entry points called with arbitrary counts and lengths.
//! The C ABI's modules are compiled into this binary at its root, as in `ffi/src/lib.rs`
//! (they name the core crate `shmfifo_core`); the body is `fuzz/common/c_abi.rs`.
#![no_main]
#![allow(dead_code, unused_imports, non_camel_case_types, clippy::all)]

extern crate shmfifo as shmfifo_core;

#[path = "../../ffi/src/batch.rs"]
mod batch;
#[path = "../../ffi/src/boundary.rs"]
mod boundary;
#[path = "../../ffi/src/config.rs"]
mod config;
#[path = "../../ffi/src/error.rs"]
mod error;
#[path = "../../ffi/src/message.rs"]
mod message;
#[path = "../../ffi/src/queue.rs"]
mod queue;
#[path = "../../ffi/src/zero_copy.rs"]
mod zero_copy;

/// The C ABI as `ffi/src/lib.rs` exports it.
mod ffi {
    pub use crate::batch::*;
    pub use crate::boundary::shmfifo_str;
    pub use crate::config::*;
    pub use crate::error::*;
    pub use crate::message::*;
    pub use crate::queue::*;
    pub use crate::zero_copy::*;
}

#[path = "../common/c_abi.rs"]
mod c_abi;

libfuzzer_sys::fuzz_target!(|data: &[u8]| c_abi::c_abi(data));
