//! The truncation guard: a queue's file cut under a process that maps it is an error for that
//! process's handles (`Truncated`), not a kill.
//!
//! A named queue's file can be truncated by anyone who may write it, and the kernel answers a
//! touch of a mapped page past the file's new end with SIGBUS, whose default action ends the
//! process. A process that serves other users (`shmfifo serve`, the metrics endpoint) would
//! die of any of them cutting a queue it opened. Here every mapping of a named queue's file
//! (the base and each added segment) is entered in a table that a SIGBUS handler reads: a
//! fault at an address inside one of them (`BUS_ADRERR`) whose file offset is past the file's
//! end now (`fstat` on the entry's descriptor: an I/O error of a file still whole is not a
//! cut, and goes on as any other SIGBUS) maps private zero pages over the mapping from the
//! file's end (each page once: a later, deeper cut fills only what lies before the last
//! fill), marks the queue cut in this process (one flag per file, shared by every handle of
//! it: [`cut_for`]), and returns, so the faulting instruction runs again on a zero page. The
//! operation in progress goes on over zeros, which shared memory already is to every reader
//! (untrusted: bounded, checked, at worst an error); every later operation of a handle of that
//! queue, and any error it meets, is `Truncated`. The pages past the cut are gone for every
//! process: the truncation destroyed them, not the guard.
//!
//! Every other SIGBUS goes to the handler that was there before (Rust's own stack-overflow
//! handler, a runtime's, a debugger's), or, if there was none, to the default action: the
//! handler puts the default back and the fault happens again (a SIGBUS sent by `kill` is
//! raised again; one sent by a process after which the previous handler gave the signal back
//! to its default, as Rust's own does for an address it does not know, is raised again too,
//! as that default). The handler is installed once, by the first named queue a process maps,
//! unless `SHMFIFO_SIGBUS_GUARD=0` is set then; a handler installed later in its place, one
//! that does not pass on what is not its own, disables it. At most [`RANGES`] mappings are
//! watched at once; one beyond them is mapped unwatched (its process dies of a truncation as
//! before). The handler is async-signal-safe: atomics and system calls (`fstat`, `mmap`, and
//! `sigaction`/`raise` on the way to the default action); it keeps `errno`.
#![allow(unsafe_code)]

use crate::sync::local::{
    fence, AtomicBool, AtomicI32, AtomicPtr, AtomicU64, AtomicUsize, Ordering,
};
use std::cell::UnsafeCell;
use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::sync::{Arc, Once};
use std::sync::{Mutex, Weak};

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
    /// The descriptor of the mapped file (open while the entry is) and the file offset of
    /// the mapping's first byte.
    fd: AtomicI32,
    offset: AtomicU64,
    /// The lowest address filled with zero pages so far (`usize::MAX`: none): a fill covers
    /// from the file's end up to here, and is claimed by moving it (a CAS) before its `mmap`.
    filled: AtomicUsize,
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
            fd: AtomicI32::new(-1),
            offset: AtomicU64::new(0),
            filled: AtomicUsize::new(usize::MAX),
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

/// A queue's cut flag, shared by every handle of its file in this process and the watches of
/// their mappings.
pub type Cut = Arc<AtomicBool>;

/// A file's `(dev, ino)` and its cut flag while some handle holds it.
type FileCut = ((u64, u64), Weak<AtomicBool>);

/// The cut flags of the files some handle of this process has open.
static CUTS: Mutex<Vec<FileCut>> = Mutex::new(Vec::new());

/// The cut flag of the file `(dev, ino)`: the one a handle of it already holds, or a new one.
/// (An inode is not reused while a handle holds its file open, and the flag lives only as long
/// as some handle does.)
pub fn cut_for(dev: u64, ino: u64) -> Cut {
    let mut cuts = CUTS.lock().unwrap_or_else(|e| e.into_inner());
    cuts.retain(|(_, w)| w.strong_count() > 0);
    if let Some(c) = cuts
        .iter()
        .find(|(k, _)| *k == (dev, ino))
        .and_then(|(_, w)| w.upgrade())
    {
        return c;
    }
    let c = Arc::new(AtomicBool::new(false));
    cuts.push(((dev, ino), Arc::downgrade(&c)));
    c
}

/// A cut flag of its own, not set (a queue that is never watched: a sealed memfd).
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

/// Enters the mapping of `len` bytes at `start` (`writable` as mapped) of the file `fd` from
/// its offset `offset` in the guard's table, installing the handler first if it is not yet; a
/// fault in it past the file's end sets `cut`. `fd` must stay open while the watch lives.
pub fn watch(
    start: *const u8,
    len: usize,
    writable: bool,
    fd: BorrowedFd<'_>,
    offset: u64,
    cut: &Cut,
) -> Watch {
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
        // Release fence: a handler that reads one of the stores below also sees the `gen`
        // raised by the entry's last `Watch` (its seqlock check then fails).
        fence(Ordering::Release);
        // Relaxed: published by the Release store of `start` below.
        r.len.store(len, Ordering::Relaxed);
        r.cut.store(Arc::as_ptr(cut).cast_mut(), Ordering::Relaxed);
        r.writable.store(writable, Ordering::Relaxed);
        r.fd.store(fd.as_raw_fd(), Ordering::Relaxed);
        r.offset.store(offset, Ordering::Relaxed);
        r.filled.store(usize::MAX, Ordering::Relaxed);
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
        sa.sa_sigaction = handler_address();
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
    // SAFETY: `errno` is this thread's; kept across the handler, which makes system calls.
    let errno = unsafe { *libc::__errno_location() };
    // SAFETY: an SA_SIGINFO handler is given a valid `siginfo_t`; `si_addr` is defined for
    // SIGBUS (whatever its code: for one sent by `kill` it is not used).
    let (code, addr) = unsafe { ((*info).si_code, (*info).si_addr() as usize) };
    if !(code == libc::BUS_ADRERR && zero_fill(addr)) {
        pass_on(sig, code, info, ctx);
    }
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = errno };
}

/// Maps zero pages over the watched mapping that holds `addr`, from the file's end (or where
/// the last fill began) on, and sets its queue's cut flag; false if no watched mapping holds
/// it, if `addr` is not past the file's end (an I/O error of a whole file, not a cut), or if
/// the `mmap` failed.
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
        let fd = r.fd.load(Ordering::Relaxed);
        let offset = r.offset.load(Ordering::Relaxed);
        // Acquire fence: the reads above come before the re-check below (a `Watch` dropped
        // meanwhile moved `gen` before it emptied `start`).
        fence(Ordering::Acquire);
        if r.gen.load(Ordering::Relaxed) != gen || r.start.load(Ordering::Relaxed) != start {
            continue;
        }
        if addr - start >= len || cut.is_null() {
            continue;
        }
        // Where the file ends now, as an address of this mapping (rounded up to a page: the
        // page that holds the end is still the file's).
        // SAFETY: a zeroed `stat` is a valid value; `fstat` writes it.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: the entry's descriptor stays open while the entry is in use (`watch`).
        if unsafe { libc::fstat(fd, &mut st) } != 0 {
            return false;
        }
        let size = (st.st_size.max(0) as u64).saturating_add(page as u64 - 1) & !(page as u64 - 1);
        let eof = start
            .saturating_add(usize::try_from(size.saturating_sub(offset)).unwrap_or(usize::MAX));
        if addr < eof {
            // The file reaches past the address: not a cut.
            return false;
        }
        let end = start.saturating_add(len).saturating_add(page - 1) & !(page - 1);
        let from = eof.max(start);
        // Claim `from..filled` (what an earlier fill did not cover); a fault at or past
        // `filled` meets a fill under way (or done), and its instruction runs again.
        // Relaxed: the CAS orders nothing but the claim; the pages come from `mmap`.
        let filled = r.filled.load(Ordering::Relaxed);
        let to = filled.min(end);
        if addr >= to {
            return true;
        }
        if r.filled
            .compare_exchange(filled, from, Ordering::Relaxed, Ordering::Relaxed)
            .is_err()
        {
            return true;
        }
        // SeqCst: before the `mmap` below (see `is_cut`). SAFETY: the flag is kept alive by the
        // entry's `Watch`, which is dropped only before its mapping is unmapped, so not while
        // a touch of the mapping faults (the re-check above saw the entry still in use).
        unsafe { (*cut).store(true, Ordering::SeqCst) };
        let prot = if writable {
            libc::PROT_READ | libc::PROT_WRITE
        } else {
            libc::PROT_READ
        };
        // SAFETY: replaces pages of a mapping this process made of a queue's file and still
        // holds (`from..to` lies inside it, page-aligned): pages past the file's end, which
        // raise SIGBUS, become private zero pages. Every access to the mapping is to shared
        // memory the code already treats as untrusted, so zeros are a value it handles.
        let p = unsafe {
            libc::mmap(
                from as *mut libc::c_void,
                to - from,
                prot,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            // Give the claim back (a fault there would wait on it forever), and let the fault
            // take its course.
            let _ = r
                .filled
                .compare_exchange(from, filled, Ordering::Relaxed, Ordering::Relaxed);
            return false;
        }
        return true;
    }
    false
}

/// Whether SIGBUS's action is still this module's handler.
fn ours_still() -> bool {
    // SAFETY: a zeroed `sigaction` is a valid value; `sigaction` with a null new action only
    // reads the current one (async-signal-safe).
    unsafe {
        let mut now: libc::sigaction = std::mem::zeroed();
        libc::sigaction(libc::SIGBUS, std::ptr::null(), &mut now) == 0
            && now.sa_sigaction == handler_address()
    }
}

/// This module's handler as a `sigaction` field holds it.
fn handler_address() -> libc::sighandler_t {
    on_sigbus as extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void)
        as libc::sighandler_t
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
            if code <= 0 && !ours_still() {
                // Sent by a process, and the handler before us gave the signal to another
                // action (Rust's own puts the default back for an address it does not know,
                // counting on the fault to come again: a sent signal does not): that action
                // takes it now, as it would have without us.
                // SAFETY: async-signal-safe; blocked while this handler runs, delivered after.
                unsafe { libc::raise(sig) };
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
    use std::os::fd::AsFd;

    /// A scratch file of `pages` pages of `byte` (removed on drop), open for reading and
    /// writing, and the page size.
    struct Scratch(std::path::PathBuf, std::fs::File);

    impl Scratch {
        fn new(tag: &str, pages: usize, byte: u8) -> (Scratch, usize) {
            let page = rustix::param::page_size();
            let path =
                std::env::temp_dir().join(format!("shmfifo-guard-{tag}-{}", std::process::id()));
            let mut f = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(true)
                .open(&path)
                .unwrap();
            f.write_all(&vec![byte; pages * page]).unwrap();
            (Scratch(path, f), page)
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    /// A mapped page past a file's cut reads as zero once the guard is on, the queue's flag
    /// says cut, and the pages before the cut still show the file.
    #[test]
    fn a_page_past_a_cut_reads_zero_and_sets_the_flag() {
        let (scratch, page) = Scratch::new("rw", 3, 7);
        let f = &scratch.1;
        let map = super::super::map(f, 3 * page as u64).unwrap();
        let cut = new_cut();
        let w = watch(map.as_ptr(), map.len(), true, f.as_fd(), 0, &cut);
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
    }

    /// A read-only mapping (an observer's) gets read-only zero pages.
    #[test]
    fn a_read_only_mapping_past_a_cut_reads_zero() {
        let (scratch, page) = Scratch::new("ro", 2, 3);
        let f = &scratch.1;
        let map = super::super::map_read_only(f, 2 * page as u64).unwrap();
        let cut = new_cut();
        let w = watch(map.as_ptr(), map.len(), false, f.as_fd(), 0, &cut);
        f.set_len(0).unwrap();
        // SAFETY: inside the mapping.
        let b = unsafe { std::ptr::read_volatile(map.as_ptr().add(page)) };
        assert_eq!(b, 0);
        assert!(is_cut(&cut));
        drop(w);
        drop(map);
    }

    /// A deeper cut after a first one fills only the pages the first fill left to the file:
    /// what the process wrote to the first fill's zero pages stays.
    #[test]
    fn a_deeper_cut_fills_only_what_the_last_fill_did_not() {
        let (scratch, page) = Scratch::new("deeper", 4, 5);
        let f = &scratch.1;
        let map = super::super::map(f, 4 * page as u64).unwrap();
        let cut = new_cut();
        let w = watch(map.as_ptr(), map.len(), true, f.as_fd(), 0, &cut);
        let p = map.as_mut_ptr();
        f.set_len(3 * page as u64).unwrap();
        // SAFETY: inside the mapping; volatile, so the accesses happen here, in this order.
        unsafe {
            assert_eq!(std::ptr::read_volatile(p.add(3 * page)), 0);
            std::ptr::write_volatile(p.add(3 * page), 9);
            assert_eq!(
                std::ptr::read_volatile(p.add(2 * page)),
                5,
                "still the file's"
            );
        }
        f.set_len(page as u64).unwrap();
        // SAFETY: as above.
        unsafe {
            assert_eq!(
                std::ptr::read_volatile(p.add(2 * page)),
                0,
                "past the new end"
            );
            assert_eq!(
                std::ptr::read_volatile(p.add(3 * page)),
                9,
                "the first fill kept"
            );
            assert_eq!(std::ptr::read_volatile(p), 5, "the page before the cut");
        }
        assert!(is_cut(&cut));
        drop(w);
        drop(map);
    }

    /// One flag per file: a second handle's watch of the same file shares the first's.
    #[test]
    fn handles_of_one_file_share_its_flag() {
        let a = cut_for(u64::MAX, 7);
        let b = cut_for(u64::MAX, 7);
        assert!(Arc::ptr_eq(&a, &b));
        assert!(!Arc::ptr_eq(&a, &cut_for(u64::MAX, 8)));
        drop((a, b));
        // No handle holds it any more: a new file of that inode gets a new flag.
        let c = cut_for(u64::MAX, 7);
        assert!(!is_cut(&c));
    }
}
