//! The one place that names `core::sync::atomic` or `loom`.
//!
//! Everything that lives in the arena is built from the atomics re-exported here. Under
//! `--cfg shmfifo_loom` (with the `loom` feature) they are loom's model-checked atomics, so the
//! same `protocol` code runs under the model checker on heap memory.

#[cfg(not(shmfifo_loom))]
pub use core::sync::atomic::{fence, Ordering};

#[cfg(all(not(shmfifo_loom), not(feature = "lines")))]
pub use core::sync::atomic::{AtomicU32, AtomicU64};

/// With the `lines` feature, the arena's atomics record every access (see `crate::lines`).
#[cfg(all(not(shmfifo_loom), feature = "lines"))]
pub use crate::lines::{AtomicU32, AtomicU64};

/// The core atomic under a facade futex word, for the futex system calls.
#[cfg(not(shmfifo_loom))]
#[inline]
pub fn futex_word(a: &AtomicU32) -> &core::sync::atomic::AtomicU32 {
    #[cfg(not(feature = "lines"))]
    {
        a
    }
    #[cfg(feature = "lines")]
    {
        a.as_core()
    }
}

/// Records a copy of `len` payload bytes at `p` (feature `lines`; nothing otherwise).
#[inline]
#[allow(unused_variables)]
pub fn payload_touch(p: *const u8, len: usize, write: bool) {
    #[cfg(all(not(shmfifo_loom), feature = "lines"))]
    crate::lines::touch(
        p as usize,
        len,
        if write {
            crate::lines::Access::Write
        } else {
            crate::lines::Access::Read
        },
    );
}

#[cfg(shmfifo_loom)]
pub use loom::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};

/// Thread-locals of loom models (the crash-point countdown of `protocol::crash`).
#[cfg(shmfifo_loom)]
pub use loom::thread_local;

/// Process-local atomics: never in shared memory, so never the arena's (and never loom's:
/// they hold this process's own caches, such as where it mapped a segment, whose every value
/// is equally right). Shared words use the atomics above.
pub mod local {
    pub use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering};

    /// The truncation guard's table and its seqlock (`sys::guard`): process-local words a
    /// signal handler reads.
    #[cfg(not(shmfifo_loom))]
    pub use std::sync::atomic::{fence, AtomicI32, AtomicUsize};
}

/// Interior mutability for payload bytes of heap arenas (tests and loom models).
#[cfg(any(test, feature = "loom"))]
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

/// Loads `a` after the caller's own SeqCst read-modify-write of another location: the reader
/// half of a store-buffering (Dekker) pair whose other half is a SeqCst RMW (or store) followed
/// by a SeqCst fence, without a fence of its own: a SeqCst load after a
/// SeqCst RMW is already ordered in the single total order (on x86 the RMW is a locked
/// instruction and this a plain load, so the pair costs no barrier beyond the RMW itself).
///
/// loom models SeqCst loads as Acquire only, so under loom this is an RMW (`fetch_add(0)`),
/// which reads the latest value in modification order and gives the same guarantee.
#[inline]
pub fn load_after_seqcst_rmw_u32(a: &AtomicU32) -> u32 {
    #[cfg(not(shmfifo_loom))]
    {
        a.load(Ordering::SeqCst)
    }
    #[cfg(shmfifo_loom)]
    {
        a.fetch_add(0, Ordering::SeqCst)
    }
}

/// Loads `a` after the caller's own SeqCst fence: the reader half of a store-buffering
/// (Dekker) pair whose writes before the fence were plain (Release) stores, a batch of them
/// ordered by the one fence (on x86 a locked `or` on the stack) instead of a locked RMW each.
///
/// A plain SeqCst load in every build, loom's too: loom models SeqCst fences, so a model with
/// the caller's fence left out finds the pair broken (unlike [`load_after_seqcst_rmw_u64`],
/// whose RMW under loom would hide a missing fence).
#[inline]
pub fn load_after_seqcst_fence_u64(a: &AtomicU64) -> u64 {
    // SeqCst: the caller's fence is what orders it; the ordering names the pair.
    a.load(Ordering::SeqCst)
}

/// [`load_after_seqcst_rmw_u32`] for a 64-bit word.
#[inline]
pub fn load_after_seqcst_rmw_u64(a: &AtomicU64) -> u64 {
    #[cfg(not(shmfifo_loom))]
    {
        a.load(Ordering::SeqCst)
    }
    #[cfg(shmfifo_loom)]
    {
        a.fetch_add(0, Ordering::SeqCst)
    }
}

/// An RMW that writes nothing (`fetch_add(0)`), for what such an RMW guarantees over a
/// load: it reads the latest value in the word's modification order, and with `AcqRel` it
/// orders as a store too. LLVM lowers it on x86 to a fence and a plain load (equivalent under
/// x86's total store order), which fetch the line shared: the `lines` model records a read,
/// as the hardware does (an RMW would take the line exclusively).
#[inline]
pub fn idempotent_rmw_u64(a: &AtomicU64, o: Ordering) -> u64 {
    #[cfg(all(not(shmfifo_loom), feature = "lines"))]
    {
        // `o`: the caller's, as for `fetch_add(0, o)`.
        a.idempotent_rmw(o)
    }
    #[cfg(not(all(not(shmfifo_loom), feature = "lines")))]
    {
        // `o`: the caller's (it names what it pairs with).
        a.fetch_add(0, o)
    }
}

/// A load (`o`: `Acquire` or `SeqCst`) of a word whose line the caller writes next, fetching
/// the line once, exclusively, where a plain load then a write would fetch it twice from the
/// core that wrote it last; the value is what a load reads.
///
/// On x86-64, `prefetchw` on the word (a request for the line in the exclusive state, with no
/// write and no lock; a CPU without the instruction runs its encoding as a NOP), then the load
/// itself. Elsewhere an RMW that writes back what it read (`fetch_add` of an addend hidden from
/// the optimiser, which otherwise lowers an RMW it can prove writes nothing to a fence and a
/// plain load: a shared fetch, the very thing this function is for). Before this (layout 19's
/// last change) x86-64 used that RMW too: a `lock xadd`, three locked instructions a single
/// message (the send's home entry, the ring pop's entry, the take's `vis`), 1.2 a batched one.
///
/// The protocol needs only the load: under loom this is a plain load, and every model checks
/// the protocol with it (an RMW there would be credited by loom with values no execution can
/// leave, as it orders a plain store by another thread loosely against an RMW). With the
/// `lines` feature the call is recorded as an RMW, as the exclusive fetch it stands for.
#[inline]
pub fn load_for_write_u64(a: &AtomicU64, o: Ordering) -> u64 {
    #[cfg(all(not(shmfifo_loom), not(feature = "lines"), target_arch = "x86_64"))]
    {
        #[allow(unsafe_code)]
        // SAFETY: `prefetchw` only hints the cache: it faults on no address, writes no memory
        // and touches neither the flags nor the stack (the options say so); the pointer is a
        // live reference's.
        unsafe {
            core::arch::asm!(
                "prefetchw [{0}]",
                in(reg) a.as_ptr(),
                options(nostack, preserves_flags, readonly)
            );
        }
        // `o`: as the caller names it (what it pairs with).
        a.load(o)
    }
    #[cfg(all(not(shmfifo_loom), any(feature = "lines", not(target_arch = "x86_64"))))]
    {
        // `o`: as the load it stands for (the caller names what it pairs with).
        a.fetch_add(core::hint::black_box(0), o)
    }
    #[cfg(shmfifo_loom)]
    {
        // `o`: as above.
        a.load(o)
    }
}

/// A store to a word that other threads may change at the same time by a read-modify-write
/// (a CAS that expects what the caller read before it): in every build but loom's a plain
/// store, with ordering `o`.
///
/// C11 orders all writes to one word in one total modification order, and an RMW reads the
/// write just before it there: a store and a concurrent CAS are ordered either way, and the
/// CAS fails if the store came first. loom orders writes only partially (vector clocks), so
/// it lets a plain store and another thread's successful CAS both be last, and a later load,
/// even the storer's own, read the CAS's value (loom-tests `loom_orders_a_store_loosely`):
/// outcomes no C11 execution, and no CPU, has. Under loom the store is therefore a `swap`
/// with the same ordering, which loom orders totally against the RMWs, as C11 orders the
/// store. The swap reads what it replaces, which the caller ignores; it also continues a
/// release sequence the store would end (under loom an acquirer of its value synchronises
/// with the writer it replaced as well, which no CPU promises), so a caller must not rely on
/// its readers being ordered after that writer: loom would not catch it.
#[inline]
pub fn store_racing_rmw_u64(a: &AtomicU64, v: u64, o: Ordering) {
    #[cfg(not(shmfifo_loom))]
    {
        // `o`: as the caller names it (what it pairs with).
        a.store(v, o);
    }
    #[cfg(shmfifo_loom)]
    {
        // `o`: as above.
        a.swap(v, o);
    }
}

/// Seqlock validation: whether `word` still holds `seen` after the Relaxed reads the caller
/// made since it loaded `seen` with Acquire.
///
/// The Acquire fence orders those earlier reads before this load. Writers of a seqlocked
/// record change `word` first and then issue a Release fence before they touch any field, so
/// a reader that read a field written after its own load of `seen` sees `word` changed here.
/// Every seqlock of the arena (`attempt-seqlock`, `dedup-seqlock`, the group id check of
/// `group-publish`, `peek-seqlock`) validates through this one function.
#[inline]
pub fn seqlock_still(word: &AtomicU64, seen: u64) -> bool {
    fence(Ordering::Acquire);
    word.load(Ordering::Relaxed) == seen
}
