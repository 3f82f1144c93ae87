//! # shmfifo
//!
//! Amazon SQS FIFO queue semantics between processes on one Linux host — message groups with
//! strict per-group order, in-flight exclusion, visibility timeouts, receipt handles — through a
//! memory-mapped arena and lock-free atomics: no broker process, no locks.
//!
//! ```
//! use shmfifo::{Queue, QueueConfig, ReceiveOptions, SendMessage};
//!
//! # let orders = &format!("shmfifo-doc-orders-{}", std::process::id());
//! // A queue under /dev/shm; other processes open it by name with `Queue::open`.
//! let q = Queue::create(orders, &QueueConfig::new())?;
//! q.send(&SendMessage::new("customer-42", "order #1").dedup_id("o-1"))?;
//! for m in q.receive(&ReceiveOptions::max(10))? {
//!     println!("{} {}", m.group_id, m.body);
//!     q.delete(&m.receipt_handle)?;
//! }
//! Queue::unlink(orders)?;
//! # Ok::<(), shmfifo::Error>(())
//! ```
//!
//! The rules implemented are numbered in the repository's `docs/contract.md`; the arena format
//! and the protocols are described in `ARCHITECTURE.md`.
#![deny(unsafe_code, unsafe_op_in_unsafe_fn)]
#![cfg_attr(shmfifo_loom, allow(dead_code))]
#![warn(
    missing_docs,
    missing_debug_implementations,
    rust_2018_idioms,
    clippy::undocumented_unsafe_blocks,
    clippy::missing_safety_doc
)]

#[cfg(feature = "loom")]
#[doc(hidden)]
pub mod sync;
#[cfg(not(feature = "loom"))]
pub(crate) mod sync;

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

/// Deterministic cache-line transfer counts (feature `lines`; see the benches' `shmfifo-lines`).
#[cfg(all(feature = "lines", not(shmfifo_loom)))]
pub mod lines;

#[cfg(not(shmfifo_loom))]
mod api;
mod config;
mod error;
#[cfg(not(shmfifo_loom))]
mod sys;
mod validate;

#[cfg(all(feature = "failpoints", not(shmfifo_loom)))]
pub mod failpoint {
    //! Deterministic kill points for tests (the `failpoints` feature; never in a release build).
    //!
    //! Every step of every shared-memory protocol is a crash point (the same points the loom
    //! models stop a participant at). [`arm`]`(k)` makes the process SIGKILL itself at the
    //! `k`-th crash point it reaches from then on (0: the next one), so a test can stop a real
    //! process exactly between two steps and check that the others recover.
    use crate::sync::{AtomicU64, Ordering};

    static LEFT: AtomicU64 = AtomicU64::new(u64::MAX);
    static PASSED: AtomicU64 = AtomicU64::new(0);
    /// 1: the armed point stops the process (SIGSTOP) instead of killing it.
    static STOP: AtomicU64 = AtomicU64::new(0);

    /// Make the armed point stop this process with SIGSTOP (it stays alive, holding whatever
    /// it holds, until SIGCONT) instead of killing it: a stop point.
    pub fn stop_instead(on: bool) {
        // Relaxed: as in `arm`.
        STOP.store(u64::from(on), Ordering::Relaxed);
    }

    /// Kill this process at the `k`-th crash point from now on.
    pub fn arm(k: u64) {
        // Relaxed: a process-local countdown; tests arm it before the operation they stop.
        PASSED.store(0, Ordering::Relaxed);
        LEFT.store(k, Ordering::Relaxed);
    }

    /// Stop counting (no kill).
    pub fn disarm() {
        // Relaxed: as in `arm`.
        LEFT.store(u64::MAX, Ordering::Relaxed);
    }

    /// Crash points passed since [`arm`].
    pub fn passed() -> u64 {
        // Relaxed: as in `arm`.
        PASSED.load(Ordering::Relaxed)
    }

    /// A crash point: counts down, and at zero kills the process.
    pub(crate) fn hit() {
        // Relaxed: as in `arm`. `fetch_update` so that concurrent threads take distinct counts.
        let prev = LEFT.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| match v {
            u64::MAX => None,
            0 => Some(0),
            v => Some(v - 1),
        });
        if prev.is_ok() {
            PASSED.fetch_add(1, Ordering::Relaxed);
        }
        if prev == Ok(0) {
            // Relaxed: as in `arm`.
            if STOP.load(Ordering::Relaxed) == 1 {
                // Stop once, then go on from exactly here when continued.
                LEFT.store(u64::MAX, Ordering::Relaxed);
                // SAFETY: raise(3) has no preconditions; SIGSTOP stops the process until a
                // SIGCONT.
                #[allow(unsafe_code)]
                unsafe {
                    libc::raise(libc::SIGSTOP);
                }
                return;
            }
            // SAFETY: raise(3) has no preconditions; SIGKILL ends the process at once.
            #[allow(unsafe_code)]
            unsafe {
                libc::raise(libc::SIGKILL);
            }
        }
    }
}

#[cfg(not(shmfifo_loom))]
pub use api::*;
pub use config::*;
pub use error::{Error, ErrorCode, RemoteKind, Result};

/// The arena layout version this library reads and writes.
pub const LAYOUT_VERSION: u64 = layout::LAYOUT_VERSION;
