//! The one place that names `core::sync::atomic` or `loom`.
//!
//! Everything that lives in the arena is built from the atomics re-exported here. Under
//! `--cfg shmfifo_loom` (with the `loom` feature) they are loom's model-checked atomics, so the
//! same `protocol` code runs under the model checker on heap memory.

#[cfg(not(shmfifo_loom))]
pub use core::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};

#[cfg(shmfifo_loom)]
pub use loom::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};

/// Interior mutability for payload bytes of heap arenas (tests and loom models).
pub use core::cell::UnsafeCell;

/// A hint that the caller is busy-waiting for another participant.
///
/// Under loom this yields to the model's scheduler, which is what makes spin loops checkable.
#[inline]
pub fn spin_hint() {
    #[cfg(not(shmfifo_loom))]
    core::hint::spin_loop();
    #[cfg(shmfifo_loom)]
    loom::thread::yield_now();
}

/// A hint that the caller waits for another participant that may be descheduled.
#[inline]
pub fn yield_hint() {
    #[cfg(not(shmfifo_loom))]
    std::thread::yield_now();
    #[cfg(shmfifo_loom)]
    loom::thread::yield_now();
}
