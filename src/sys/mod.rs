//! OS glue: files, mappings, futexes, clocks, liveness locks, randomness. Linux only.
#![allow(unsafe_code)]

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd};
use std::path::Path;

use crate::sync::AtomicU32;

pub mod guard;

/// File offset of participant 0's liveness lock byte (far beyond any arena size).
const LOCK_BASE: i64 = 1 << 40;

/// Creates `path` exclusively with `mode`, reserving `size` bytes.
pub fn create_file(path: &Path, mode: u32, size: u64) -> io::Result<File> {
    use rustix::fs::{Mode, OFlags};
    let fd = rustix::fs::open(
        path,
        OFlags::RDWR | OFlags::CREATE | OFlags::EXCL | OFlags::CLOEXEC,
        Mode::from_raw_mode(mode),
    )?;
    // fchmod: the umask may have removed bits the caller asked for.
    rustix::fs::fchmod(&fd, Mode::from_raw_mode(mode))?;
    let file = File::from(fd);
    if let Err(e) = reserve(&file, size) {
        let _ = std::fs::remove_file(path);
        return Err(e);
    }
    Ok(file)
}

/// Creates an unnamed file (`O_TMPFILE`) in `dir` with `mode`, reserving `size` bytes, to be
/// named by [`link_unnamed`] once complete: a creator that dies first leaves nothing behind.
/// `Ok(None)` where the file system has no unnamed files.
pub fn create_unnamed(dir: &Path, mode: u32, size: u64) -> io::Result<Option<File>> {
    use rustix::fs::{Mode, OFlags};
    let fd = match rustix::fs::open(
        dir,
        OFlags::RDWR | OFlags::TMPFILE | OFlags::CLOEXEC,
        Mode::from_raw_mode(mode),
    ) {
        Ok(fd) => fd,
        Err(e)
            if e == rustix::io::Errno::OPNOTSUPP
                || e == rustix::io::Errno::ISDIR
                || e == rustix::io::Errno::INVAL =>
        {
            return Ok(None)
        }
        Err(e) => return Err(e.into()),
    };
    // fchmod: the umask may have removed bits the caller asked for.
    rustix::fs::fchmod(&fd, Mode::from_raw_mode(mode))?;
    let file = File::from(fd);
    reserve(&file, size)?;
    Ok(Some(file))
}

/// Names an unnamed file `path`; fails with `EEXIST` rather than replace anything.
pub fn link_unnamed(file: &File, path: &Path) -> io::Result<()> {
    let src = format!("/proc/self/fd/{}", file.as_raw_fd());
    rustix::fs::linkat(
        rustix::fs::CWD,
        src.as_str(),
        rustix::fs::CWD,
        path,
        rustix::fs::AtFlags::SYMLINK_FOLLOW,
    )?;
    Ok(())
}

/// Whether `path` names the same file as the open `file`.
pub fn same_file(file: &File, path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (file.metadata(), std::fs::metadata(path)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

/// Removes the name `path` if it still names the open `file` (`Ok(false)` and nothing removed if
/// it names another file; `NotFound` if it names nothing). The name is looked up once in its directory, opened
/// first: the comparison and the removal are on that one directory, so a parent replaced by a
/// symlink meanwhile cannot send the removal into another directory.
pub fn unlink_if_same(file: &File, path: &Path) -> io::Result<bool> {
    use rustix::fs::{AtFlags, Mode, OFlags};
    use std::os::unix::fs::MetadataExt;
    let (parent, name) = match (path.parent(), path.file_name()) {
        (Some(p), Some(n)) if !p.as_os_str().is_empty() => (p, n),
        (_, Some(n)) => (Path::new("."), n),
        _ => return Ok(false),
    };
    let dir = rustix::fs::open(
        parent,
        OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let meta = file.metadata()?;
    let st = rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW)?;
    if st.st_dev != meta.dev() || st.st_ino != meta.ino() {
        return Ok(false);
    }
    rustix::fs::unlinkat(&dir, name, AtFlags::empty())?;
    Ok(true)
}

/// Takes the lock that serialises replacing a stale arena file, without waiting.
pub fn try_lock_replace(file: &File) -> io::Result<bool> {
    try_lock_at(file, LOCK_BASE - 1)
}

/// Reserves `size` bytes so that a full file system is an error now, not SIGBUS later.
pub fn reserve(file: &File, size: u64) -> io::Result<()> {
    file.set_len(size)?;
    rustix::fs::fallocate(file, rustix::fs::FallocateFlags::empty(), 0, size)?;
    Ok(())
}

/// Bytes free for an unprivileged user on the file system holding `dir` (`statvfs`).
pub fn free_bytes(dir: &Path) -> io::Result<u64> {
    let s = rustix::fs::statvfs(dir)?;
    Ok(s.f_bavail.saturating_mul(s.f_frsize))
}

/// The current length of a file (`fstat`): a participant compares it with its mapping to find
/// a file truncated under it before it touches a page past the end.
pub fn file_len(file: &File) -> io::Result<u64> {
    Ok(file.metadata()?.len())
}

/// Opens an existing arena file read-write.
pub fn open_file(path: &Path) -> io::Result<File> {
    open_regular(path, true)
}

/// [`open_file`] for reading only (an observer: `Queue::observe`).
pub fn open_file_read_only(path: &Path) -> io::Result<File> {
    open_regular(path, false)
}

/// Opens the file at `path` for reading (and writing, if `write`), but only a regular file is
/// opened for I/O: the name is first opened as a bare reference (`O_PATH`, `O_NOFOLLOW`: a
/// symlink there is never followed: `ELOOP`), its type read from the reference, and only a
/// regular file is then opened for I/O through the reference itself (`/proc/self/fd`: the
/// same inode, whatever the name leads to meanwhile). Anything else is returned as the bare
/// reference, which [`untrusted`] names (a directory, a FIFO, a device node, a socket) and no
/// I/O can use. A path is input: a process that opens paths others wrote (a
/// redrive policy in a shared file, read by a root `shmfifo serve`) must not open a device
/// read-write (`/dev/watchdog`, say, which opening arms) nor block on a FIFO.
fn open_regular(path: &Path, write: bool) -> io::Result<File> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let reference = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)?;
    let m = reference.metadata()?;
    let t = m.file_type();
    if t.is_symlink() {
        return Err(io::Error::from_raw_os_error(libc::ELOOP));
    }
    if !t.is_file() {
        return Ok(reference);
    }
    let io_open = |p: &Path, flags: i32| {
        std::fs::OpenOptions::new()
            .read(true)
            .write(write)
            .custom_flags(flags | libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open(p)
    };
    // Through the /proc magic link (followed on purpose: it names the inode opened above;
    // the permission check is the file's, as an open by name).
    match io_open(
        Path::new(&format!("/proc/self/fd/{}", reference.as_raw_fd())),
        0,
    ) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            // No /proc: by name again, taken only if it is still the file looked at.
            let f = io_open(path, libc::O_NOFOLLOW)?;
            let n = f.metadata()?;
            if (n.dev(), n.ino()) != (m.dev(), m.ino()) {
                return Err(io::Error::other(
                    "the file changed while it was opened; open it again",
                ));
            }
            Ok(f)
        }
        r => r,
    }
}

/// Why an opened file is not one this process may use as (or remove as) a queue: not a
/// regular file, or owned by a user other than this process's effective user (unless that
/// user is listed in `SHMFIFO_TRUSTED_UIDS`, comma-separated uids).
pub fn untrusted(file: &File) -> io::Result<Option<String>> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let m = file.metadata()?;
    let t = m.file_type();
    if !t.is_file() {
        let what = if t.is_fifo() {
            "a FIFO"
        } else if t.is_char_device() || t.is_block_device() {
            "a device node"
        } else if t.is_socket() {
            "a socket"
        } else if t.is_dir() {
            "a directory"
        } else {
            "not a regular file"
        };
        return Ok(Some(format!("it is {what}, not a queue file")));
    }
    let me = rustix::process::geteuid().as_raw();
    let trusted = std::env::var("SHMFIFO_TRUSTED_UIDS").unwrap_or_default();
    let allowed = m.uid() == me
        || trusted
            .split(',')
            .filter_map(|u| u.trim().parse::<u32>().ok())
            .any(|u| u == m.uid());
    if !allowed {
        // Entries that are no uid (a user name, say) are said, not silently passed over.
        let ignored: Vec<&str> = trusted
            .split(',')
            .map(str::trim)
            .filter(|u| !u.is_empty() && u.parse::<u32>().is_err())
            .collect();
        let ignored = if ignored.is_empty() {
            String::new()
        } else {
            format!(
                "; SHMFIFO_TRUSTED_UIDS entries that are not numeric uids are ignored: {}",
                ignored.join(", ")
            )
        };
        return Ok(Some(format!(
            "it is owned by uid {}, not by this process's uid {me} (list trusted owners' numeric uids in SHMFIFO_TRUSTED_UIDS{ignored})",
            m.uid()
        )));
    }
    Ok(None)
}

/// The permission bits of an open file.
pub fn mode_of(file: &File) -> io::Result<u32> {
    use std::os::unix::fs::MetadataExt;
    Ok(file.metadata()?.mode() & 0o7777)
}

/// Creates an anonymous arena file (memfd) of `size` bytes, inheritable by children.
pub fn memfd(name: &str, size: u64) -> io::Result<File> {
    let fd = rustix::fs::memfd_create(name, rustix::fs::MemfdFlags::ALLOW_SEALING)?;
    let file = File::from(fd);
    reserve(&file, size)?;
    // Sealed against shrinking: no process holding the descriptor can truncate the arena
    // under its participants (which would kill them with SIGBUS). Not against growing: the
    // arena adds segments as its size classes fill (layout 13).
    rustix::fs::fcntl_add_seals(&file, rustix::fs::SealFlags::SHRINK)?;
    Ok(file)
}

/// Opens a new open file description of an inherited descriptor (so that liveness locks of
/// this process are distinct from its parent's).
pub fn reopen_fd(fd: i32) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    // Through the /proc magic link (followed on purpose: it names the open file itself).
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_CLOEXEC)
        .open(format!("/proc/self/fd/{fd}"))
}

/// Clears close-on-exec on a descriptor so children inherit it.
pub fn set_inheritable(file: &File) -> io::Result<()> {
    rustix::io::fcntl_setfd(file, rustix::io::FdFlags::empty())?;
    Ok(())
}

/// Maps the whole file shared, read-write.
pub fn map(file: &File, len: u64) -> io::Result<memmap2::MmapRaw> {
    let len = usize::try_from(len)
        .map_err(|_| io::Error::other("arena larger than the address space"))?;
    memmap2::MmapOptions::new().len(len).map_raw(file)
}

/// Maps `len` bytes of `file` shared and read-only (`PROT_READ`): a store through it faults.
pub fn map_read_only(file: &File, len: u64) -> io::Result<memmap2::MmapRaw> {
    let len = usize::try_from(len)
        .map_err(|_| io::Error::other("arena larger than the address space"))?;
    memmap2::MmapOptions::new().len(len).map_raw_read_only(file)
}

fn flock(kind: i32, index: u32) -> libc::flock {
    flock_at(kind, LOCK_BASE + i64::from(index))
}

fn flock_at(kind: i32, at: i64) -> libc::flock {
    // SAFETY: `flock` is plain old data; all-zero is a valid value.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = kind as libc::c_short;
    fl.l_whence = libc::SEEK_SET as libc::c_short;
    fl.l_start = at;
    fl.l_len = 1;
    fl
}

/// Takes participant `index`'s liveness lock (an OFD write lock on one byte) without waiting.
/// Returns `false` if another open file description holds it. The kernel releases it when the
/// last descriptor of this open file description closes, in particular when the process dies.
pub fn try_lock_participant(file: &File, index: u32) -> io::Result<bool> {
    try_lock_at(file, LOCK_BASE + i64::from(index))
}

fn try_lock_at(file: &File, at: i64) -> io::Result<bool> {
    let fl = flock_at(libc::F_WRLCK, at);
    // SAFETY: F_OFD_SETLK reads a valid `flock`; the descriptor is open for this call.
    let r = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_OFD_SETLK, &fl) };
    if r == 0 {
        return Ok(true);
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EAGAIN) | Some(libc::EACCES) => Ok(false),
        _ => Err(e),
    }
}

/// Releases participant `index`'s liveness lock.
pub fn unlock_participant(file: &File, index: u32) {
    let fl = flock(libc::F_UNLCK, index);
    // SAFETY: as in `try_lock_participant`.
    let _ = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_OFD_SETLK, &fl) };
}

/// Whether another open file description holds participant `index`'s lock. Errors count as
/// "held": only a definite answer may prove death.
pub fn participant_locked(file: &File, index: u32) -> bool {
    let mut fl = flock(libc::F_WRLCK, index);
    // SAFETY: F_OFD_GETLK writes into a valid `flock` we own.
    let r = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_OFD_GETLK, &mut fl) };
    r != 0 || i32::from(fl.l_type) != libc::F_UNLCK
}

/// How a [`futex_wait`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Woke {
    /// Woken by a `FUTEX_WAKE` (or it never slept: the word no longer held `expected`).
    Rung,
    /// The timeout passed, or a signal interrupted the sleep.
    Timeout,
}

/// Whether a participant whose sleep (begun at `slept`, `monotonic_ns`) ended as `woke` looks
/// at its file's length before it touches the arena again: after a timeout (how a sleeper meets
/// a truncation, which rings no bell), and after any sleep of a millisecond or more (a ring
/// may follow a truncation). A ring sooner is treated as an operation in progress is.
pub fn needs_look(woke: Woke, slept: u64) -> bool {
    woke == Woke::Timeout || monotonic_ns().saturating_sub(slept) >= 1_000_000
}

/// Sleeps on a futex in shared memory (never `FUTEX_PRIVATE`) while it holds `expected`, at most
/// `timeout_ms`.
pub fn futex_wait(word: &AtomicU32, expected: u32, timeout_ms: u64) -> Woke {
    let ts = rustix::time::Timespec {
        tv_sec: (timeout_ms / 1000) as i64,
        tv_nsec: ((timeout_ms % 1000) * 1_000_000) as i64,
    };
    match rustix::thread::futex::wait(
        crate::sync::futex_word(word),
        rustix::thread::futex::Flags::empty(),
        expected,
        Some(&ts),
    ) {
        Ok(()) | Err(rustix::io::Errno::AGAIN) => Woke::Rung,
        Err(_) => Woke::Timeout,
    }
}

/// Wakes up to `n` sleepers on a shared futex.
pub fn futex_wake(word: &AtomicU32, n: u32) {
    let _ = rustix::thread::futex::wake(
        crate::sync::futex_word(word),
        rustix::thread::futex::Flags::empty(),
        n,
    );
}

/// CLOCK_MONOTONIC in nanoseconds.
pub fn monotonic_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// CLOCK_REALTIME in milliseconds since the Unix epoch.
pub fn realtime_ms() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Realtime);
    t.tv_sec as u64 * 1000 + t.tv_nsec as u64 / 1_000_000
}

/// The kernel's boot id (128 bits), or zeros if unavailable.
pub fn boot_id() -> [u64; 2] {
    let Ok(s) = std::fs::read_to_string("/proc/sys/kernel/random/boot_id") else {
        return [0, 0];
    };
    let hex: String = s.trim().chars().filter(|c| c.is_ascii_hexdigit()).collect();
    if hex.len() != 32 {
        return [0, 0];
    }
    [
        u64::from_str_radix(&hex[..16], 16).unwrap_or(0),
        u64::from_str_radix(&hex[16..], 16).unwrap_or(0),
    ]
}

/// Random bytes from the kernel.
pub fn random_u64() -> io::Result<u64> {
    let mut b = [0u8; 8];
    let mut filled = 0;
    while filled < 8 {
        filled += rustix::rand::getrandom(&mut b[filled..], rustix::rand::GetRandomFlags::empty())?;
    }
    Ok(u64::from_le_bytes(b))
}

/// This process's id (display only).
pub fn pid() -> u32 {
    rustix::process::getpid().as_raw_nonzero().get() as u32
}

/// Duplicates a descriptor into an owned file.
pub fn dup(file: &File) -> io::Result<File> {
    Ok(File::from(file.as_fd().try_clone_to_owned()?))
}

/// The added segments of an arena file (layout 13): reserved with `fallocate`, each mapped
/// on its own (shared; read-only for an observer) the first time this process meets it, and
/// unmapped when the queue handle goes.
#[derive(Debug)]
pub struct FileSegments {
    file: File,
    read_only: bool,
    /// Each mapping made, `(address, length)`, and the furthest file offset mapped.
    maps: std::sync::Mutex<(Vec<(usize, usize)>, u64)>,
    /// The queue's cut flag where the truncation guard watches its mappings (a named queue's
    /// file), and the watches of the mappings made.
    cut: Option<guard::Cut>,
    watches: std::sync::Mutex<Vec<guard::Watch>>,
}

impl FileSegments {
    /// The segments of `file` (a descriptor of its own, kept open for mapping); with `cut`,
    /// each mapping is watched by the truncation guard (`guard`), which sets it.
    pub fn new(file: &File, read_only: bool, cut: Option<guard::Cut>) -> io::Result<Self> {
        Ok(FileSegments {
            file: file.try_clone()?,
            read_only,
            maps: std::sync::Mutex::new((Vec::new(), 0)),
            cut,
            watches: std::sync::Mutex::new(Vec::new()),
        })
    }
}

/// Whether `end` is past this process's file size limit (`RLIMIT_FSIZE`): growing the file
/// there would raise SIGXFSZ (which kills by default) instead of failing.
fn past_fsize_limit(end: u64) -> bool {
    rustix::process::getrlimit(rustix::process::Resource::Fsize)
        .current
        .is_some_and(|lim| end > lim)
}

impl crate::protocol::segments::SegmentFile for FileSegments {
    fn reserve(
        &self,
        offset: u64,
        len: u64,
        _layout: crate::protocol::segments::Layout,
    ) -> crate::protocol::PResult<()> {
        use crate::protocol::Fault;
        if past_fsize_limit(offset.saturating_add(len)) {
            return Err(Fault::NoSpace(len));
        }
        loop {
            return match rustix::fs::fallocate(
                &self.file,
                rustix::fs::FallocateFlags::empty(),
                offset,
                len,
            ) {
                Ok(()) => Ok(()),
                Err(rustix::io::Errno::INTR) => continue,
                Err(rustix::io::Errno::NOSPC)
                | Err(rustix::io::Errno::FBIG)
                | Err(rustix::io::Errno::DQUOT) => Err(Fault::NoSpace(len)),
                Err(e) => Err(Fault::Mapping(e.raw_os_error())),
            };
        }
    }

    fn map(
        &self,
        offset: u64,
        len: u64,
        layout: crate::protocol::segments::Layout,
    ) -> crate::protocol::PResult<crate::protocol::segments::Mapped> {
        use crate::protocol::Fault;
        use rustix::mm::{MapFlags, ProtFlags};
        // A segment is published only after its blocks are reserved, so the file reaches past
        // it; one that does not (a corrupted directory, or a file truncated under us) is never
        // mapped: touching it would be SIGBUS.
        let end = offset
            .checked_add(len)
            .ok_or(Fault::Corrupted("a segment's offset is out of range"))?;
        let file_len =
            file_len(&self.file).map_err(|e| Fault::Mapping(e.raw_os_error().unwrap_or(0)))?;
        if file_len < end {
            return Err(Fault::Corrupted(
                "a published segment lies past the file's end",
            ));
        }
        // The layout is 4 KiB-aligned; `mmap` wants offsets aligned to the system's page (16 or
        // 64 KiB on some kernels): map from the page below and step over the difference.
        let page = rustix::param::page_size() as u64;
        let from = offset & !(page - 1);
        let skip = (offset - from) as usize;
        let n = usize::try_from(end - from).map_err(|_| Fault::Corrupted("segment size"))?;
        let prot = if self.read_only {
            ProtFlags::READ
        } else {
            ProtFlags::READ | ProtFlags::WRITE
        };
        // SAFETY: a new mapping at an address of the kernel's choosing (nothing of ours is
        // replaced), of a range of our file that exists (checked above); it stays mapped until
        // `self` is dropped, which the arena view that hands out references into it
        // never outlives (both live in the queue's `Inner`).
        let p = unsafe {
            rustix::mm::mmap(
                core::ptr::null_mut(),
                n,
                prot,
                MapFlags::SHARED,
                &self.file,
                from,
            )
        }
        .map_err(|e| Fault::Mapping(e.raw_os_error()))?;
        if let Some(cut) = &self.cut {
            let w = guard::watch(
                p as *const u8,
                n,
                !self.read_only,
                self.file.as_fd(),
                from,
                cut,
            );
            self.watches
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(w);
        }
        {
            let mut m = self.maps.lock().unwrap_or_else(|e| e.into_inner());
            m.0.push((p as usize, n));
            m.1 = m.1.max(end);
        }
        // Every layout puts a record per entry first (a slot header, a dedup entry, a group
        // entry), then the rest (payloads, key words, wheel bitmaps).
        let table = (p as *const u8).wrapping_add(skip);
        let data = (p as *mut u8)
            .wrapping_add(skip)
            .wrapping_add(layout.table_bytes() as usize);
        Ok(crate::protocol::segments::Mapped { table, data })
    }

    fn mapped_end(&self) -> u64 {
        self.maps.lock().unwrap_or_else(|e| e.into_inner()).1
    }

    fn sync(&self) -> io::Result<()> {
        // The whole file: its segments are separate mappings (this process's or others'),
        // which the base mapping's msync does not reach.
        self.file.sync_data()
    }
}

impl Drop for FileSegments {
    fn drop(&mut self) {
        // Out of the guard's table before they are unmapped.
        self.watches
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
        for &(p, n) in self
            .maps
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .0
            .iter()
        {
            // SAFETY: a mapping made by `map` above, unmapped once, here, when nothing refers
            // into it any more (the view that did is dropped first).
            let _ = unsafe { rustix::mm::munmap(p as *mut core::ffi::c_void, n) };
        }
    }
}

#[cfg(all(test, not(shmfifo_loom)))]
mod tests {
    use super::*;

    /// The name is removed only while it names the open file: a file renamed over it stays
    /// (the check and the removal are on one directory), and a name gone is `NotFound`.
    #[test]
    fn unlink_if_same_removes_only_the_file_it_was_given() {
        let dir = std::env::temp_dir().join(format!("shmfifo-unlink-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (a, b) = (dir.join("a"), dir.join("b"));
        std::fs::write(&a, b"a").unwrap();
        std::fs::write(&b, b"b").unwrap();
        let fa = File::open(&a).unwrap();
        std::fs::rename(&b, &a).unwrap();
        assert!(
            !unlink_if_same(&fa, &a).unwrap(),
            "another file at the name"
        );
        assert_eq!(std::fs::read(&a).unwrap(), b"b");
        let fb = File::open(&a).unwrap();
        assert!(unlink_if_same(&fb, &a).unwrap());
        assert!(!a.exists());
        assert_eq!(
            unlink_if_same(&fb, &a).unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
        // A relative name resolves in the current directory's stead of failing.
        assert!(!unlink_if_same(&fb, Path::new("no-such-name-here")).is_ok_and(|x| x));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
