//! The few operating-system calls the harness makes through `libc`: the monotonic clock, shared
//! mappings, futexes, FIFOs, `writev`, POSIX message queues and the parent-death signal.
//!
//! Every function here is safe to call; each `unsafe` block says why its call is sound.

use std::ffi::CString;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU32;
use std::time::Duration;

/// `CLOCK_MONOTONIC` in nanoseconds: one clock for every process of the host, so that times
/// taken in different processes compare (`std::time::Instant` cannot cross a process).
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec through a valid pointer to a local.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    debug_assert_eq!(rc, 0, "CLOCK_MONOTONIC is always available on Linux");
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// An absolute `CLOCK_REALTIME` deadline `after` from now, as the message-queue calls want it.
fn realtime_deadline(after: Duration) -> libc::timespec {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec through a valid pointer to a local.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    let ns = ts.tv_nsec as u64 + u64::from(after.subsec_nanos());
    ts.tv_sec += after.as_secs() as libc::time_t + (ns / 1_000_000_000) as libc::time_t;
    ts.tv_nsec = (ns % 1_000_000_000) as libc::c_long;
    ts
}

/// The last OS error as a `String` that names the call.
fn os_err(what: &str) -> String {
    format!("{what}: {}", io::Error::last_os_error())
}

/// A `CString` of a path or name (the harness makes them, so they hold no NUL).
fn cstr(s: &str) -> CString {
    CString::new(s).expect("harness-made names contain no NUL byte")
}

// ---------------------------------------------------------------------------------------------
// Shared mappings
// ---------------------------------------------------------------------------------------------

/// A file mapped `MAP_SHARED`, read and write: the same bytes in every process that maps it.
/// The creator's handle unlinks the file when dropped.
#[derive(Debug)]
pub struct SharedMap {
    ptr: *mut u8,
    len: usize,
    path: PathBuf,
    owner: bool,
}

// SAFETY: the mapping is process-wide memory; the harness touches it only through atomics or
// through the hand-off protocols documented where the bytes are used (one writer at a time,
// published by a Release store and read after an Acquire load).
unsafe impl Send for SharedMap {}
// SAFETY: as for `Send`.
unsafe impl Sync for SharedMap {}

impl SharedMap {
    /// Creates `path` (which must not exist) of `len` zero bytes and maps it.
    pub fn create(path: &Path, len: usize) -> Result<SharedMap, String> {
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
            .map_err(|e| format!("creating {}: {e}", path.display()))?;
        f.set_len(len as u64)
            .map_err(|e| format!("sizing {}: {e}", path.display()))?;
        Self::map(&f, path, len, true)
    }

    /// Maps the existing file `path`, all of it.
    pub fn open(path: &Path) -> Result<SharedMap, String> {
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|e| format!("opening {}: {e}", path.display()))?;
        let len = f
            .metadata()
            .map_err(|e| format!("stat {}: {e}", path.display()))?
            .len() as usize;
        Self::map(&f, path, len, false)
    }

    fn map(f: &File, path: &Path, len: usize, owner: bool) -> Result<SharedMap, String> {
        // SAFETY: a fresh shared mapping of a file we hold open, at an address the kernel
        // picks; nothing else in this process refers to that range yet.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                f.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(os_err(&format!("mmap {}", path.display())));
        }
        Ok(SharedMap {
            ptr: ptr.cast(),
            len,
            path: path.to_owned(),
            owner,
        })
    }

    /// The first byte of the mapping (page-aligned).
    pub fn ptr(&self) -> *mut u8 {
        self.ptr
    }

    /// Length of the mapping in bytes.
    pub fn len(&self) -> usize {
        self.len
    }
}

impl Drop for SharedMap {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the range mmap returned; the references handed out borrow
        // `self`, so none outlives this.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
        if self.owner {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Futex
// ---------------------------------------------------------------------------------------------

/// Sleeps while `*word == expected`, at most `timeout` (a shared futex: works across processes
/// on a `MAP_SHARED` word). Returns on a wake, a timeout, a changed word or a signal; callers
/// re-check the word.
pub fn futex_wait(word: &AtomicU32, expected: u32, timeout: Duration) {
    let ts = libc::timespec {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: FUTEX_WAIT reads the aligned u32 behind a live reference and a timespec on our
    // stack; the kernel compares the word atomically and touches nothing else.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT,
            expected,
            &ts as *const libc::timespec,
        )
    };
}

/// Wakes up to `n` sleepers on `word`.
pub fn futex_wake(word: &AtomicU32, n: i32) {
    // SAFETY: FUTEX_WAKE only uses the word's address as a key; it reads no memory.
    unsafe { libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAKE, n) };
}

// ---------------------------------------------------------------------------------------------
// File descriptors
// ---------------------------------------------------------------------------------------------

/// Creates a FIFO (named pipe) at `path`, mode 0600.
pub fn mkfifo(path: &Path) -> Result<(), String> {
    let p = cstr(&path.to_string_lossy());
    // SAFETY: mkfifo reads the NUL-terminated path we own.
    if unsafe { libc::mkfifo(p.as_ptr(), 0o600) } != 0 {
        return Err(os_err(&format!("mkfifo {}", path.display())));
    }
    Ok(())
}

/// Sets or clears `O_NONBLOCK` on `fd`.
pub fn set_nonblocking(fd: RawFd, on: bool) -> Result<(), String> {
    // SAFETY: F_GETFL/F_SETFL on a descriptor the caller owns; no memory is passed.
    unsafe {
        let fl = libc::fcntl(fd, libc::F_GETFL);
        if fl < 0 {
            return Err(os_err("fcntl(F_GETFL)"));
        }
        let fl = if on {
            fl | libc::O_NONBLOCK
        } else {
            fl & !libc::O_NONBLOCK
        };
        if libc::fcntl(fd, libc::F_SETFL, fl) < 0 {
            return Err(os_err("fcntl(F_SETFL)"));
        }
    }
    Ok(())
}

/// Writes all of `parts`, in order, with as few `writev` calls as the kernel allows (one when
/// they fit the pipe or socket buffer). Blocks for room.
pub fn writev_all(fd: RawFd, parts: &[&[u8]]) -> Result<(), String> {
    let mut iov: Vec<libc::iovec> = parts
        .iter()
        .map(|p| libc::iovec {
            iov_base: p.as_ptr() as *mut libc::c_void,
            iov_len: p.len(),
        })
        .collect();
    let mut first = 0;
    while first < iov.len() {
        let n = iov.len() - first;
        // SAFETY: every iovec points into a slice of `parts`, alive and unchanged during the
        // call; writev only reads them.
        let w = unsafe { libc::writev(fd, iov[first..].as_ptr(), n as libc::c_int) };
        if w < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(format!("writev: {e}"));
        }
        // Skip what was written: whole iovecs, then part of one.
        let mut w = w as usize;
        while first < iov.len() && w >= iov[first].iov_len {
            w -= iov[first].iov_len;
            first += 1;
        }
        if w > 0 {
            let v = &mut iov[first];
            // SAFETY: `w` < iov_len, so the advanced pointer stays inside the same slice.
            v.iov_base = unsafe { v.iov_base.cast::<u8>().add(w) }.cast();
            v.iov_len -= w;
        }
    }
    Ok(())
}

/// One `read` into `buf`: `Ok(Some(n))` (0 at end of file), `Ok(None)` when a non-blocking
/// descriptor has nothing.
pub fn read_some(fd: RawFd, buf: &mut [u8]) -> Result<Option<usize>, String> {
    loop {
        // SAFETY: read writes at most buf.len() bytes into the exclusively borrowed buffer.
        let r = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        if r >= 0 {
            return Ok(Some(r as usize));
        }
        let e = io::Error::last_os_error();
        match e.kind() {
            io::ErrorKind::Interrupted => continue,
            io::ErrorKind::WouldBlock => return Ok(None),
            _ => return Err(format!("read: {e}")),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// POSIX message queues
// ---------------------------------------------------------------------------------------------

/// A `/proc/sys/fs/mqueue` limit, if readable.
pub fn mq_limit(name: &str) -> Option<u64> {
    std::fs::read_to_string(format!("/proc/sys/fs/mqueue/{name}"))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// A POSIX message queue descriptor, closed on drop.
#[derive(Debug)]
pub struct Mq {
    mqd: libc::mqd_t,
    msgsize: usize,
}

impl Mq {
    /// Creates queue `name` (leading `/`, must not exist) holding `maxmsg` messages of up to
    /// `msgsize` bytes, and opens it read-write.
    pub fn create(name: &str, maxmsg: usize, msgsize: usize) -> Result<Mq, String> {
        let n = cstr(name);
        // SAFETY: mq_attr is plain old data; all-zero is a valid value to fill in.
        let mut attr: libc::mq_attr = unsafe { std::mem::zeroed() };
        attr.mq_maxmsg = maxmsg as libc::c_long;
        attr.mq_msgsize = msgsize as libc::c_long;
        // SAFETY: mq_open reads the NUL-terminated name and the attr struct we own; the
        // variadic mode and attr arguments are the types O_CREAT requires.
        let mqd = unsafe {
            libc::mq_open(
                n.as_ptr(),
                libc::O_CREAT | libc::O_EXCL | libc::O_RDWR,
                0o600 as libc::mode_t,
                &attr as *const libc::mq_attr,
            )
        };
        if mqd < 0 {
            return Err(os_err(&format!("mq_open({name}, O_CREAT)")));
        }
        Ok(Mq { mqd, msgsize })
    }

    /// Opens the existing queue `name` for sending or receiving, non-blocking if asked.
    pub fn open(name: &str, send: bool, nonblocking: bool) -> Result<Mq, String> {
        let n = cstr(name);
        let mut flags = if send { libc::O_WRONLY } else { libc::O_RDONLY };
        if nonblocking {
            flags |= libc::O_NONBLOCK;
        }
        // SAFETY: mq_open reads the NUL-terminated name; without O_CREAT it takes no more
        // arguments.
        let mqd = unsafe { libc::mq_open(n.as_ptr(), flags) };
        if mqd < 0 {
            return Err(os_err(&format!("mq_open({name})")));
        }
        // SAFETY: mq_attr is plain old data, filled in by mq_getattr on a descriptor we own.
        let mut attr: libc::mq_attr = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        if unsafe { libc::mq_getattr(mqd, &mut attr) } != 0 {
            return Err(os_err("mq_getattr"));
        }
        Ok(Mq {
            mqd,
            msgsize: attr.mq_msgsize as usize,
        })
    }

    /// Removes queue `name` (open descriptors keep working).
    pub fn unlink(name: &str) {
        let n = cstr(name);
        // SAFETY: mq_unlink reads the NUL-terminated name.
        unsafe { libc::mq_unlink(n.as_ptr()) };
    }

    /// The queue's message size limit (receive buffers must be at least this long).
    pub fn msgsize(&self) -> usize {
        self.msgsize
    }

    /// Sends `msg`, waiting at most `timeout` for room: `Ok(false)` on a timeout (or when a
    /// non-blocking queue is full).
    pub fn send(&self, msg: &[u8], timeout: Duration) -> Result<bool, String> {
        let deadline = realtime_deadline(timeout);
        loop {
            // SAFETY: mq_timedsend reads `msg` and the deadline, both alive for the call.
            let r = unsafe {
                libc::mq_timedsend(
                    self.mqd,
                    msg.as_ptr().cast(),
                    msg.len(),
                    0,
                    &deadline as *const libc::timespec,
                )
            };
            if r == 0 {
                return Ok(true);
            }
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::ETIMEDOUT) | Some(libc::EAGAIN) => return Ok(false),
                _ => return Err(format!("mq_timedsend: {e}")),
            }
        }
    }

    /// Receives one message into `buf` (at least [`Mq::msgsize`] long), waiting at most
    /// `timeout`: its length, or `None` on a timeout (or an empty non-blocking queue).
    pub fn receive(&self, buf: &mut [u8], timeout: Duration) -> Result<Option<usize>, String> {
        let deadline = realtime_deadline(timeout);
        loop {
            // SAFETY: mq_timedreceive writes at most buf.len() bytes into the exclusively
            // borrowed buffer and reads the deadline.
            let r = unsafe {
                libc::mq_timedreceive(
                    self.mqd,
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    std::ptr::null_mut(),
                    &deadline as *const libc::timespec,
                )
            };
            if r >= 0 {
                return Ok(Some(r as usize));
            }
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::ETIMEDOUT) | Some(libc::EAGAIN) => return Ok(None),
                _ => return Err(format!("mq_timedreceive: {e}")),
            }
        }
    }
}

impl Drop for Mq {
    fn drop(&mut self) {
        // SAFETY: closes the descriptor this value owns, once.
        unsafe { libc::mq_close(self.mqd) };
    }
}

// ---------------------------------------------------------------------------------------------
// Processes
// ---------------------------------------------------------------------------------------------

/// Asks the kernel to SIGKILL this process when its parent dies, so that a harness killed
/// mid-run leaves no spinning peer behind. Returns whether the parent is still `parent`.
pub fn die_with_parent(parent: u32) -> bool {
    // SAFETY: PR_SET_PDEATHSIG takes a signal number; no memory is passed.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) };
    std::os::unix::process::parent_id() == parent
}
