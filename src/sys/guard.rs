//! The truncation guard: a queue's file cut under a process that maps it is an error for that
//! process's handles (`Truncated`), not a kill.
//!
//! A named queue's file can be truncated by anyone who may write it, and the kernel answers a
//! touch of a mapped page past the file's new end with SIGBUS, whose default action ends the
//! process. A process that serves other users (`shmfifo serve`, the metrics endpoint) would
//! die of any of them cutting a queue it opened. Here every mapping of a named queue's file
//! (the base and each added segment) is entered in a table that a SIGBUS handler reads: a
//! fault at an address inside one of them (`BUS_ADRERR`, a page with no file behind it) maps
//! private zero pages over the rest of that mapping, marks the queue's handles *cut*, and
//! returns, so the faulting instruction runs again on a zero page. The operation in progress
//! goes on over zeros, which shared memory already is to every reader (untrusted: bounded,
//! checked, at worst an error); every later operation of a handle of that queue, and any error
//! it meets, is `Truncated`. Nothing is lost that the truncation did not already destroy: the
//! pages past the cut are gone for every process.
//!
//! Every other SIGBUS goes to the handler that was there before (Rust's own stack-overflow
//! handler, a runtime's, a debugger's), or, if there was none, to the default action: the
//! handler puts the default back and the fault happens again (a SIGBUS sent by `kill` is
//! raised again). The handler is installed once, by the first named queue a process maps,
//! unless `SHMFIFO_SIGBUS_GUARD=0` is set then; a handler installed later in its place, one
//! that does not pass on what is not its own, disables it. At most [`RANGES`] mappings are
//! watched at once; one beyond them is mapped unwatched (its process dies of a truncation as
//! before). The handler is async-signal-safe: atomics and two system calls (`mmap`, and
//! `sigaction`/`raise` on the way to the default action).
#![allow(unsafe_code)]

use std::cell::UnsafeCell;
use std::mem::MaybeUninit;
use std::sync::atomic::{fence, AtomicBool, AtomicPtr, AtomicUsize, Ordering};
use std::sync::{Arc, Once};

/// How many mappings the guard watches at once (each queue handle's base mapping and each of
/// its added segments is one).
pub const RANGES: usize = 4096;

/// `start` of an entry being filled in.
const BUSY: usize = usize::MAX;

/// One watched mapping.
struct Range {
    /// The mapping's first address; 0: free; `BUSY`: being filled in.
    start: AtomicUsize,
    /// Its length in bytes.
    len: AtomicUsize,
    /// The queue's cut flag (kept alive by the entry's [`Watch`]).
    cut: AtomicPtr<AtomicBool>,
    /// Whether the mapping is writable (an observer's is read-only).
    writable: AtomicBool,
    /// Raised each time the entry is emptied: the handler reads it before and after the
    /// fields, and uses them only if it did not move.
    gen: AtomicUsize,
}

impl Range {
    const fn new() -> Self {
        Range {
            start: AtomicUsize::new(0),
            len: AtomicUsize::new(0),
            cut: AtomicPtr::new(std::ptr::null_mut()),
            writable: AtomicBool::new(false),
            gen: AtomicUsize::new(0),
        }
    }
}

static TABLE: [Range; RANGES] = [const { Range::new() }; RANGES];
/// One past the highest entry ever filled in (the handler looks no further).
static USED: AtomicUsize = AtomicUsize::new(0);
/// The system's page size, read at installation.
static PAGE: AtomicUsize = AtomicUsize::new(4096);
/// Whether the handler is installed (entries are made only then).
static ACTIVE: AtomicBool = AtomicBool::new(false);
static INSTALL: Once = Once::new();

/// The SIGBUS action that was there before ours, written once before ours is installed.
struct Previous(UnsafeCell<MaybeUninit<libc::sigaction>>);
// SAFETY: written once, inside `INSTALL`, before `PREVIOUS_SET` is stored (Release); read only
// after `PREVIOUS_SET` is seen (Acquire), never written again.
unsafe impl Sync for Previous {}
static PREVIOUS: Previous = Previous(UnsafeCell::new(MaybeUninit::uninit()));
static PREVIOUS_SET: AtomicBool = AtomicBool::new(false);

/// A queue's cut flag, shared by its handle and the watches of its mappings.
pub type Cut = Arc<AtomicBool>;

/// A new cut flag, not set.
pub fn new_cut() -> Cut {
    Arc::new(AtomicBool::new(false))
}

/// Whether the guard has found `cut`'s queue truncated under this process.
#[inline]
pub fn is_cut(cut: &AtomicBool) -> bool {
    // Relaxed: the handler's store was made on the faulting thread before its `mmap`; a
    // thread that reads the zero pages that `mmap` put in place reads them through page tables
    // the kernel wrote after the store (and with barriers of its own), and an operation that
    // started before the store and saw nothing is one that ran before the truncation.
    cut.load(Ordering::Relaxed)
}

/// A mapping entered in the guard's table; dropping it takes it out (before the mapping is
/// unmapped: a field declared before the mapping's, or dropped explicitly first).
#[derive(Debug)]
pub struct Watch {
    slot: usize,
    _cut: Option<Cut>,
}

impl Watch {
    /// A watch of nothing (an anonymous queue's sealed memfd cannot be truncated).
    pub fn none() -> Watch {
        Watch {
            slot: usize::MAX,
            _cut: None,
        }
    }

    /// Whether the mapping is watched (false: the guard is off or its table full).
    #[cfg_attr(not(test), allow(dead_code))]
    pub fn watched(&self) -> bool {
        self.slot != usize::MAX
    }
}

/// Enters the mapping of `len` bytes at `start` (`writable` as mapped) in the guard's table,
/// installing the handler first if it is not yet; a fault in it sets `cut`.
pub fn watch(start: *const u8, len: usize, writable: bool, cut: &Cut) -> Watch {
    install();
    // Acquire: pairs with the Release store of `install` (the handler is in place).
    if !ACTIVE.load(Ordering::Acquire) || start.is_null() || len == 0 {
        return Watch::none();
    }
    for (i, r) in TABLE.iter().enumerate() {
        // Acquire: pairs with the Release store that emptied the entry (its last user's
        // writes are done). Relaxed on failure: nothing read.
        if r.start
            .compare_exchange(0, BUSY, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            continue;
        }
        // Relaxed: published by the Release store of `start` below.
        r.len.store(len, Ordering::Relaxed);
        r.cut.store(Arc::as_ptr(cut).cast_mut(), Ordering::Relaxed);
        r.writable.store(writable, Ordering::Relaxed);
        // Release: pairs with the handler's Acquire load of `USED`; the entry's index is
        // counted before its `start` says it is in use.
        USED.fetch_max(i + 1, Ordering::Release);
        // Release: pairs with the handler's Acquire load of `start`: the fields above are
        // seen with it.
        r.start.store(start as usize, Ordering::Release);
        return Watch {
            slot: i,
            _cut: Some(Arc::clone(cut)),
        };
    }
    Watch::none()
}

impl Drop for Watch {
    fn drop(&mut self) {
        let Some(r) = TABLE.get(self.slot) else {
            return;
        };
        // Relaxed: the Release store of `start` orders it before the entry's reuse; a handler
        // that read the old fields sees `gen` moved after its fence and drops them.
        r.gen.fetch_add(1, Ordering::Relaxed);
        // Release: pairs with the Acquire CAS of the next `watch` that takes the entry, and
        // with the handler's Acquire load (it sees the entry free, or the old `gen` moved).
        r.start.store(0, Ordering::Release);
    }
}

/// Installs the handler once, unless `SHMFIFO_SIGBUS_GUARD=0` (or `off`).
fn install() {
    INSTALL.call_once(|| {
        if matches!(
            std::env::var("SHMFIFO_SIGBUS_GUARD").as_deref(),
            Ok("0") | Ok("off")
        ) {
            return;
        }
        PAGE.store(rustix::param::page_size(), Ordering::Relaxed);
        // SAFETY: a zeroed `sigaction` is a valid value (SIG_DFL, an empty mask).
        let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
        // SAFETY: `sigaction` with a null new action only reads the current one into `old`,
        // a valid, writable `sigaction`.
        if unsafe { libc::sigaction(libc::SIGBUS, std::ptr::null(), &mut old) } != 0 {
            return;
        }
        // SAFETY: written once, here, before `PREVIOUS_SET` says it is (see `Previous`).
        unsafe { (*PREVIOUS.0.get()).write(old) };
        // Release: pairs with the handler's Acquire load: the action above is seen whole.
        PREVIOUS_SET.store(true, Ordering::Release);
        // SAFETY: a zeroed `sigaction` is a valid value.
        let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
        // SAFETY: `sigemptyset` initialises the mask it is given, a field of `sa`.
        unsafe { libc::sigemptyset(&mut sa.sa_mask) };
        sa.sa_sigaction = on_sigbus
            as extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void)
            as libc::sighandler_t;
        sa.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK | libc::SA_RESTART;
        // SAFETY: installs a handler that is async-signal-safe (see `on_sigbus`).
        if unsafe { libc::sigaction(libc::SIGBUS, &sa, std::ptr::null_mut()) } == 0 {
            // Release: pairs with `watch`'s Acquire load.
            ACTIVE.store(true, Ordering::Release);
        }
    });
}

/// The SIGBUS handler: a fault inside a watched mapping is answered with zero pages; anything
/// else goes on to the previous action.
extern "C" fn on_sigbus(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: an SA_SIGINFO handler is given a valid `siginfo_t`; `si_addr` is defined for
    // SIGBUS (whatever its code: for one sent by `kill` it is not used).
    let (code, addr) = unsafe { ((*info).si_code, (*info).si_addr() as usize) };
    if code == libc::BUS_ADRERR && zero_fill(addr) {
        return;
    }
    pass_on(sig, code, info, ctx);
}

/// Maps zero pages from `addr`'s page to the end of the watched mapping that holds it and
/// sets its queue's cut flag; false if no watched mapping holds it (or the `mmap` failed).
fn zero_fill(addr: usize) -> bool {
    let page = PAGE.load(Ordering::Relaxed);
    // Acquire: pairs with `watch`'s Release `fetch_max`.
    let used = USED.load(Ordering::Acquire).min(RANGES);
    for r in &TABLE[..used] {
        // Relaxed, then the Acquire load of `start`: the seqlock's opening read.
        let gen = r.gen.load(Ordering::Relaxed);
        // Acquire: pairs with `watch`'s Release store of `start` (the fields are seen).
        let start = r.start.load(Ordering::Acquire);
        if start == 0 || start == BUSY || addr < start {
            continue;
        }
        let len = r.len.load(Ordering::Relaxed);
        let cut = r.cut.load(Ordering::Relaxed);
        let writable = r.writable.load(Ordering::Relaxed);
        // Acquire fence: the reads above come before the re-check below (a `Watch` dropped
        // meanwhile moved `gen` before it emptied `start`).
        fence(Ordering::Acquire);
        if r.gen.load(Ordering::Relaxed) != gen || r.start.load(Ordering::Relaxed) != start {
            continue;
        }
        if addr - start >= len || cut.is_null() {
            continue;
        }
        // SeqCst: before the `mmap` below (see `is_cut`). SAFETY: the flag is kept alive by the
        // entry's `Watch`, which is dropped only before its mapping is unmapped, so not while
        // a touch of the mapping faults (the re-check above saw the entry still in use).
        unsafe { (*cut).store(true, Ordering::SeqCst) };
        let from = addr & !(page - 1);
        let end = start.saturating_add(len).saturating_add(page - 1) & !(page - 1);
        let prot = if writable {
            libc::PROT_READ | libc::PROT_WRITE
        } else {
            libc::PROT_READ
        };
        // SAFETY: replaces pages of a mapping this process made of a queue's file and still
        // holds (`from..end` lies inside it, page-aligned): the pages past the file's end,
        // which raise SIGBUS, become private zero pages. Every access to the mapping is to
        // shared memory the code already treats as untrusted, so zeros are a value it handles.
        let p = unsafe {
            libc::mmap(
                from as *mut libc::c_void,
                end - from,
                prot,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                -1,
                0,
            )
        };
        return p != libc::MAP_FAILED;
    }
    false
}

/// Hands a SIGBUS that is not ours to the action that was there before, or to the default.
fn pass_on(
    sig: libc::c_int,
    code: libc::c_int,
    info: *mut libc::siginfo_t,
    ctx: *mut libc::c_void,
) {
    // Acquire: pairs with `install`'s Release store (the action is written whole).
    if PREVIOUS_SET.load(Ordering::Acquire) {
        // SAFETY: written once before the flag was set, never again.
        let prev = unsafe { (*PREVIOUS.0.get()).assume_init_ref() };
        let h = prev.sa_sigaction;
        if h == libc::SIG_IGN && code <= 0 {
            // Sent by a process and ignored before us: ignored still.
            return;
        }
        if h != libc::SIG_DFL && h != libc::SIG_IGN {
            if prev.sa_flags & libc::SA_SIGINFO != 0 {
                // SAFETY: the previous handler, installed with SA_SIGINFO, so of this type.
                let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                    unsafe { std::mem::transmute(h) };
                f(sig, info, ctx);
            } else {
                // SAFETY: the previous handler, installed without SA_SIGINFO.
                let f: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(h) };
                f(sig);
            }
            return;
        }
    }
    // The default action: put it back; a fault then happens again and ends the process as it
    // would have without us, and a signal sent by a process is raised again (blocked while
    // this handler runs, it is delivered when it returns).
    // SAFETY: a zeroed `sigaction` is SIG_DFL with an empty mask; `sigaction` and `raise` are
    // async-signal-safe.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = libc::SIG_DFL;
        libc::sigaction(libc::SIGBUS, &sa, std::ptr::null_mut());
        if code <= 0 {
            libc::raise(sig);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// A mapped page past a file's cut reads as zero once the guard is on, the queue's flag
    /// says cut, and the pages before the cut still show the file.
    #[test]
    fn a_page_past_a_cut_reads_zero_and_sets_the_flag() {
        let page = rustix::param::page_size();
        let path = std::env::temp_dir().join(format!("shmfifo-guard-{}", std::process::id()));
        let mut f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        f.write_all(&vec![7u8; 3 * page]).unwrap();
        let map = super::super::map(&f, 3 * page as u64).unwrap();
        let cut = new_cut();
        let w = watch(map.as_ptr(), map.len(), true, &cut);
        assert!(w.watched(), "the guard is on unless SHMFIFO_SIGBUS_GUARD=0");
        f.set_len(page as u64).unwrap();
        let p = map.as_mut_ptr();
        // SAFETY: inside the mapping; volatile, so the reads happen here.
        let (before, after) = unsafe {
            (
                std::ptr::read_volatile(p),
                std::ptr::read_volatile(p.add(2 * page + 5)),
            )
        };
        assert_eq!(before, 7, "the page before the cut is the file's");
        assert_eq!(after, 0, "a page past the cut reads as zero");
        assert!(is_cut(&cut));
        // SAFETY: as above; a write to the private zero page does not fault either.
        unsafe { std::ptr::write_volatile(p.add(page + 1), 9) };
        drop(w);
        drop(map);
        let _ = std::fs::remove_file(&path);
    }

    /// A read-only mapping (an observer's) gets read-only zero pages.
    #[test]
    fn a_read_only_mapping_past_a_cut_reads_zero() {
        let page = rustix::param::page_size();
        let path = std::env::temp_dir().join(format!("shmfifo-guard-ro-{}", std::process::id()));
        let mut f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        f.write_all(&vec![3u8; 2 * page]).unwrap();
        let map = super::super::map_read_only(&f, 2 * page as u64).unwrap();
        let cut = new_cut();
        let w = watch(map.as_ptr(), map.len(), false, &cut);
        f.set_len(0).unwrap();
        // SAFETY: inside the mapping.
        let b = unsafe { std::ptr::read_volatile(map.as_ptr().add(page)) };
        assert_eq!(b, 0);
        assert!(is_cut(&cut));
        drop(w);
        drop(map);
        let _ = std::fs::remove_file(&path);
    }
}
