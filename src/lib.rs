//! # shmfifo
//!
//! Amazon SQS FIFO queue semantics between processes on one Linux host — message groups with
//! strict per-group order, in-flight exclusion, visibility timeouts, receipt handles — through a
//! memory-mapped arena and lock-free atomics: no broker process, no locks.
//!
//! ```no_run
//! use shmfifo::{Queue, QueueConfig, ReceiveOptions, SendMessage};
//!
//! let q = Queue::create("orders", &QueueConfig::new())?;
//! q.send(&SendMessage::new("customer-42", "order #1"))?;
//! for m in q.receive(&ReceiveOptions::max(10))? {
//!     println!("{} {}", m.group_id, m.body);
//!     q.delete(&m.receipt_handle)?;
//! }
//! Queue::unlink("orders")?;
//! # Ok::<(), shmfifo::Error>(())
//! ```
//!
//! The rules implemented are numbered in the project's `SQS-FIFO.md`; the arena format and the
//! protocols are described in `ARCHITECTURE.md`.
#![deny(unsafe_code, unsafe_op_in_unsafe_fn)]
#![cfg_attr(shmfifo_loom, allow(dead_code))]
#![warn(
    missing_docs,
    missing_debug_implementations,
    rust_2018_idioms,
    clippy::undocumented_unsafe_blocks,
    clippy::missing_safety_doc
)]

pub mod sync;

#[cfg(feature = "loom")]
#[doc(hidden)]
pub mod layout;
#[cfg(not(feature = "loom"))]
pub(crate) mod layout;

#[cfg(feature = "loom")]
#[doc(hidden)]
#[allow(unsafe_code)]
pub mod protocol;
#[cfg(not(feature = "loom"))]
#[allow(unsafe_code)]
pub(crate) mod protocol;

#[cfg(not(shmfifo_loom))]
mod api;
mod config;
mod error;
#[cfg(not(shmfifo_loom))]
mod sys;
mod validate;

#[cfg(not(shmfifo_loom))]
pub use api::*;
pub use config::*;
pub use error::{Error, Result};
#[cfg(not(shmfifo_loom))]
pub use protocol::ops::Recovered;

/// The arena layout version this library reads and writes.
pub const LAYOUT_VERSION: u64 = layout::LAYOUT_VERSION;
