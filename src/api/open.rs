//! Creating, opening and unlinking queues: file placement, arena initialisation, and `attach`
//! (validate the header, view the regions, rebase the clock, register, recover).
#![allow(unsafe_code)]

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::dead_letter::check_dead_letter;
use super::queue::{fault, shm_path, Guarded, Inner, Queue};
use crate::config::QueueConfig;
use crate::error::{Error, Result};
use std::sync::atomic::AtomicU64;

use crate::protocol::segments::Segments;
use crate::protocol::view::{self, Refused, Shape, LAYOUT_VERSION, MAX_REDRIVE_PATH};
use crate::protocol::{clock, live, registry};
use crate::protocol::{owner, recovery, Arena};
use crate::sys;

impl Queue {
    /// Creates the queue `name` under `/dev/shm` (exclusively, mode from the config).
    ///
    /// # Examples
    ///
    /// ```
    /// use shmfifo::{Error, Queue, QueueConfig};
    ///
    /// let name = format!("doc-create-{}", std::process::id());
    /// let q = Queue::create(&name, &QueueConfig::new())?;
    /// # struct Unlink(String);
    /// # impl Drop for Unlink {
    /// #     fn drop(&mut self) {
    /// #         let _ = shmfifo::Queue::unlink(&self.0);
    /// #     }
    /// # }
    /// # let _cleanup = Unlink(name.clone());
    /// assert_eq!(q.path(), Some(std::path::Path::new("/dev/shm").join(&name).as_path()));
    /// // Creation is exclusive: the name is taken now.
    /// assert!(matches!(
    ///     Queue::create(&name, &QueueConfig::new()),
    ///     Err(Error::QueueNameExists { .. })
    /// ));
    /// Queue::unlink(&name)?;
    /// # Ok::<(), shmfifo::Error>(())
    /// ```
    pub fn create(name: &str, cfg: &QueueConfig) -> Result<Queue> {
        Self::create_at(shm_path(name)?, cfg)
    }

    /// Opens the queue `name` under `/dev/shm`.
    ///
    /// # Examples
    ///
    /// ```
    /// use shmfifo::{Error, Queue, QueueConfig, ReceiveOptions, SendMessage};
    ///
    /// let name = format!("doc-open-{}", std::process::id());
    /// let producer = Queue::create(&name, &QueueConfig::new())?;
    /// # struct Unlink(String);
    /// # impl Drop for Unlink {
    /// #     fn drop(&mut self) {
    /// #         let _ = shmfifo::Queue::unlink(&self.0);
    /// #     }
    /// # }
    /// # let _cleanup = Unlink(name.clone());
    /// // Usually in another process:
    /// let consumer = Queue::open(&name)?;
    /// producer.send(&SendMessage::new("g", "hello").dedup_id("1"))?;
    /// assert_eq!(consumer.receive(&ReceiveOptions::default())?[0].body, "hello");
    ///
    /// let missing = format!("doc-open-missing-{}", std::process::id());
    /// assert!(matches!(Queue::open(&missing), Err(Error::QueueDoesNotExist { .. })));
    /// Queue::unlink(&name)?;
    /// # Ok::<(), shmfifo::Error>(())
    /// ```
    pub fn open(name: &str) -> Result<Queue> {
        Self::open_at(shm_path(name)?)
    }

    /// Removes the queue `name` under `/dev/shm`. Processes that have it open keep using it.
    ///
    /// # Examples
    ///
    /// ```
    /// use shmfifo::{Error, Queue, QueueConfig, ReceiveOptions, SendMessage};
    ///
    /// let name = format!("doc-unlink-{}", std::process::id());
    /// let q = Queue::create(&name, &QueueConfig::new())?;
    /// # struct Unlink(String);
    /// # impl Drop for Unlink {
    /// #     fn drop(&mut self) {
    /// #         let _ = shmfifo::Queue::unlink(&self.0);
    /// #     }
    /// # }
    /// # let _cleanup = Unlink(name.clone());
    /// Queue::unlink(&name)?;
    /// // The name is gone: nobody can open the queue any more...
    /// assert!(matches!(Queue::open(&name), Err(Error::QueueDoesNotExist { .. })));
    /// // ...but handles already open keep working.
    /// q.send(&SendMessage::new("g", "still here").dedup_id("1"))?;
    /// assert_eq!(q.receive(&ReceiveOptions::default())?[0].body, "still here");
    /// # Ok::<(), shmfifo::Error>(())
    /// ```
    pub fn unlink(name: &str) -> Result<()> {
        Self::unlink_at(shm_path(name)?)
    }

    /// Creates a queue at `path` (any file system; `/dev/shm` for memory speed).
    ///
    /// # Examples
    ///
    /// ```
    /// use shmfifo::{Error, Queue, QueueConfig};
    ///
    /// let name = format!("shmfifo-doc-create-at-{}", std::process::id());
    /// let path = std::env::temp_dir().join(name);
    /// let q = Queue::create_at(&path, &QueueConfig::new())?;
    /// # struct UnlinkAt(std::path::PathBuf);
    /// # impl Drop for UnlinkAt {
    /// #     fn drop(&mut self) {
    /// #         let _ = shmfifo::Queue::unlink_at(&self.0);
    /// #     }
    /// # }
    /// # let _cleanup = UnlinkAt(path.clone());
    /// assert_eq!(q.path(), Some(path.as_path()));
    /// assert!(path.exists());
    /// // Creation is exclusive: the path is taken now.
    /// assert!(matches!(
    ///     Queue::create_at(&path, &QueueConfig::new()),
    ///     Err(Error::QueueNameExists { .. })
    /// ));
    /// Queue::unlink_at(&path)?;
    /// # Ok::<(), shmfifo::Error>(())
    /// ```
    pub fn create_at(path: impl AsRef<Path>, cfg: &QueueConfig) -> Result<Queue> {
        let path = path.as_ref();
        let dir = path
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let (g, dlq, total) = Self::plan(cfg, dir)?;
        let no_space = |e: io::Error, dir: &Path| match e.raw_os_error() {
            // A name a queue holds is that, full file system or not: a program that creates
            // its queues at each start (and opens them on `QueueNameExists`) must not read
            // `NoSpace` for a queue that exists, in a full 64 MiB /dev/shm.
            Some(libc::ENOSPC) | Some(libc::EFBIG)
                if matches!(Self::holder(path), Ok(Holder::Taken)) =>
            {
                Error::QueueNameExists {
                    path: path.to_owned(),
                }
            }
            Some(libc::ENOSPC) | Some(libc::EFBIG) => Error::NoSpace { needed: total },
            // The directory is not there: named as one (a trailing `/`, which the error's
            // text says as "no directory").
            Some(libc::ENOENT) if !dir.is_dir() => Error::QueueDoesNotExist { path: dir.join("") },
            // Anything else (a directory that takes no new file, as /proc; no permission)
            // names the path: the bare OS text did not say which.
            _ => Error::Io(io::Error::new(
                e.kind(),
                format!("cannot create a queue file at {}: {e}", path.display()),
            )),
        };
        // The arena is made complete in an unnamed file (or, where the file system has none, a
        // hidden temporary name) and only then named `path`: a creator that dies half-way
        // leaves nothing at `path`, and `open` never meets a half-made arena of ours.
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        let (file, tmp) = match sys::create_unnamed(dir, cfg.mode, total) {
            Ok(Some(f)) => (f, None),
            Ok(None) => {
                let name = path.file_name().unwrap_or_default().to_string_lossy();
                let tmp = dir.join(format!(
                    ".{name}.{}.{:x}.shmfifo-tmp",
                    sys::pid(),
                    sys::random_u64().unwrap_or(0)
                ));
                let f = sys::create_file(&tmp, cfg.mode, total).map_err(|e| no_space(e, dir))?;
                (f, Some(tmp))
            }
            Err(e) => return Err(no_space(e, dir)),
        };
        let made = Self::initialise_file(&file, cfg, &g, total, dlq.as_ref())
            .and_then(|()| Self::place(&file, tmp.as_deref(), path));
        if let Some(t) = &tmp {
            let _ = std::fs::remove_file(t);
        }
        made?;
        drop(dlq);
        let r = Self::attach(file, Some(path.to_owned()));
        if r.is_err() {
            let _ = std::fs::remove_file(path);
        }
        r
    }

    /// What a creation in directory `dir` needs before any file exists: the validated
    /// geometry (its default size limit the base file plus a quarter of the file system's
    /// space left free beside it: `config::default_size_limit`), the checked dead-letter queue
    /// of the redrive policy (if any), and the arena's size.
    #[allow(clippy::type_complexity)]
    fn plan(cfg: &QueueConfig, dir: &Path) -> Result<(Shape, Option<(PathBuf, Queue)>, u64)> {
        let g = cfg.geometry_within(sys::free_bytes(dir).ok())?;
        let dlq = cfg
            .redrive_policy
            .as_ref()
            .map(|p| {
                check_dead_letter(
                    p,
                    None,
                    cfg.message_size(),
                    cfg.body_mode == crate::config::BodyMode::Binary,
                )
            })
            .transpose()?;
        let total = g.offsets().map(|o| o.total).ok_or(Error::InvalidConfig {
            setting: "size_classes",
            reason: "too large".into(),
        })?;
        Ok((g, dlq, total))
    }

    /// Names the complete arena `file` (unnamed, or named `tmp`) `path`, replacing a stale
    /// arena found there (one its creator never finished), never a live one.
    pub(super) fn place(file: &File, tmp: Option<&Path>, path: &Path) -> Result<()> {
        for _ in 0..64 {
            let linked = match tmp {
                None => sys::link_unnamed(file, path),
                Some(t) => std::fs::hard_link(t, path),
            };
            match linked {
                Ok(()) => return Ok(()),
                Err(e) if e.raw_os_error() == Some(libc::EEXIST) => {
                    if !Self::remove_stale(path)? {
                        return Err(Error::QueueNameExists {
                            path: path.to_owned(),
                        });
                    }
                }
                Err(e) => {
                    return Err(match e.raw_os_error() {
                        // The directory went away while we created (the name is linked in it).
                        Some(libc::ENOENT) => Error::QueueDoesNotExist {
                            path: path
                                .parent()
                                .filter(|d| !d.as_os_str().is_empty())
                                .unwrap_or(Path::new("."))
                                .join(""),
                        },
                        _ => Error::Io(e),
                    });
                }
            }
        }
        Err(Error::QueueNameExists {
            path: path.to_owned(),
        })
    }

    /// If `path` names a stale arena (empty, all zeros where a header should be, or a header of
    /// this layout whose state was never set ready), removes it and returns `true` (also when
    /// it is gone already, or another creator is replacing it: try again); `false` if it is
    /// anything else.
    pub(super) fn remove_stale(path: &Path) -> Result<bool> {
        let f = match Self::holder(path)? {
            Holder::Nothing => return Ok(true),
            Holder::Taken => return Ok(false),
            Holder::Stale(f) => f,
        };
        // One replacer at a time, and only of this very file: another may have put a fresh
        // arena at `path` since we opened it.
        if !sys::try_lock_replace(&f)? {
            std::thread::sleep(Duration::from_millis(1));
            return Ok(true);
        }
        if sys::same_file(&f, path) && Self::is_stale(&f)? {
            match std::fs::remove_file(path) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(Error::Io(e)),
            }
        }
        Ok(true)
    }

    /// What holds the name `path`, as a create sees it: nothing, a stale arena it may
    /// replace ([`Queue::remove_stale`]), or anything else (a queue, a symlink, a file not
    /// ours), which it answers `QueueNameExists` for.
    fn holder(path: &Path) -> Result<Holder> {
        let f = match sys::open_file(path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Holder::Nothing),
            // A symlink (or anything else we cannot open) is never replaced.
            Err(e) if e.raw_os_error() == Some(libc::ELOOP) => return Ok(Holder::Taken),
            Err(e) => return Err(Error::Io(e)),
        };
        // Only a regular file of ours that carries an unfinished arena is replaced.
        if sys::untrusted(&f)?.is_some() || !Self::is_stale(&f)? {
            return Ok(Holder::Taken);
        }
        Ok(Holder::Stale(f))
    }

    /// Whether an arena file is stale: see [`Queue::remove_stale`].
    pub(super) fn is_stale(f: &File) -> Result<bool> {
        use std::os::unix::fs::FileExt;
        let mut head = [0u8; view::HEAD_LEN];
        let n = f.read_at(&mut head, 0)?;
        // An arena whose creator never finished it (an older build created in place). An empty
        // or zero-filled file is not ours to judge: it stays (`create` says the name exists).
        Ok(view::is_unfinished(&head[..n]))
    }

    /// Creates an anonymous queue (a memfd). Children get it through [`Queue::inheritable_fd`]
    /// and [`Queue::open_fd`].
    ///
    /// # Examples
    ///
    /// ```
    /// use shmfifo::{Deduplication, Queue, QueueConfig, ReceiveOptions, SendMessage};
    ///
    /// // Without deduplication, sends need no dedup id.
    /// let q = Queue::create_anonymous(&QueueConfig::new().deduplication(Deduplication::Off))?;
    /// assert_eq!(q.path(), None); // nothing on disk
    /// q.send(&SendMessage::new("g", "hello"))?;
    /// assert_eq!(q.receive(&ReceiveOptions::default())?[0].body, "hello");
    /// # Ok::<(), shmfifo::Error>(())
    /// ```
    pub fn create_anonymous(cfg: &QueueConfig) -> Result<Queue> {
        // A memfd's pages come from the kernel's shared-memory file system, as /dev/shm's.
        let (g, dlq, total) = Self::plan(cfg, Path::new("/dev/shm"))?;
        let file = sys::memfd("shmfifo", total).map_err(|e| match e.raw_os_error() {
            Some(libc::ENOSPC) | Some(libc::EFBIG) => Error::NoSpace { needed: total },
            _ => Error::Io(e),
        })?;
        Self::init_and_attach(file, cfg, &g, total, None, dlq)
    }

    pub(super) fn init_and_attach(
        file: File,
        cfg: &QueueConfig,
        g: &Shape,
        total: u64,
        path: Option<PathBuf>,
        dlq: Option<(PathBuf, Queue)>,
    ) -> Result<Queue> {
        Self::initialise_file(&file, cfg, g, total, dlq.as_ref())?;
        drop(dlq);
        Self::attach(file, path)
    }

    /// Writes a new arena into the fresh, zero-filled `file` of `total` bytes.
    pub(super) fn initialise_file(
        file: &File,
        cfg: &QueueConfig,
        g: &Shape,
        total: u64,
        dlq: Option<&(PathBuf, Queue)>,
    ) -> Result<()> {
        let map = sys::map(file, total)?;
        let redrive = match (&cfg.redrive_policy, dlq) {
            (Some(p), Some((path, _))) => {
                Some((p.max_receive_count, path.as_os_str().as_encoded_bytes()))
            }
            _ => None,
        };
        let boot = sys::boot_id();
        let fresh = view::Fresh {
            hash_keys: (sys::random_u64()?, sys::random_u64()?),
            nonce: sys::random_u64()?,
            boot,
            wall_ms: sys::realtime_ms(),
            mono_ms: sys::monotonic_ns() / 1_000_000,
        };
        // SAFETY: a fresh, zero-filled, page-aligned, writable mapping of `total` bytes, not
        // yet named to anyone (an unnamed or hidden file, or a memfd not yet handed out).
        unsafe { view::initialise_at(map.as_mut_ptr(), cfg, g, total, redrive, &fresh) };
        Ok(())
    }

    /// Opens the queue at `path`, validating its header.
    ///
    /// # Examples
    ///
    /// ```
    /// use shmfifo::{Error, Queue, QueueConfig, ReceiveOptions, SendMessage};
    ///
    /// let dir = std::env::temp_dir();
    /// let path = dir.join(format!("shmfifo-doc-open-at-{}", std::process::id()));
    /// let producer = Queue::create_at(&path, &QueueConfig::new())?;
    /// # struct UnlinkAt(std::path::PathBuf);
    /// # impl Drop for UnlinkAt {
    /// #     fn drop(&mut self) {
    /// #         let _ = shmfifo::Queue::unlink_at(&self.0);
    /// #     }
    /// # }
    /// # let _cleanup = UnlinkAt(path.clone());
    /// // Usually in another process:
    /// let consumer = Queue::open_at(&path)?;
    /// producer.send(&SendMessage::new("g", "hello").dedup_id("1"))?;
    /// assert_eq!(consumer.receive(&ReceiveOptions::default())?[0].body, "hello");
    ///
    /// let missing = dir.join(format!("shmfifo-doc-open-at-missing-{}", std::process::id()));
    /// assert!(matches!(Queue::open_at(&missing), Err(Error::QueueDoesNotExist { .. })));
    /// Queue::unlink_at(&path)?;
    /// # Ok::<(), shmfifo::Error>(())
    /// ```
    pub fn open_at(path: impl AsRef<Path>) -> Result<Queue> {
        let path = path.as_ref();
        let file = Self::open_trusted(path)?;
        Self::attach(file, Some(path.to_owned()))
    }

    /// Opens the file at `path` if this process may use it as a queue: never through a
    /// symlink, only a regular file of this process's user (or a trusted one).
    fn open_trusted(path: &Path) -> Result<File> {
        let untrusted = |reason: String| Error::UntrustedFile {
            path: path.to_owned(),
            reason,
        };
        let file = sys::open_file(path).map_err(|e| match e.raw_os_error() {
            Some(libc::ENOENT) => Error::QueueDoesNotExist { path: named(path) },
            Some(libc::ELOOP) => untrusted("it is a symbolic link".into()),
            // A directory is no queue file, as `sys::untrusted` says of one opened for reading
            // (an observer's): said with its path ("Is a directory" named none).
            Some(libc::EISDIR) => untrusted("it is a directory, not a queue file".into()),
            _ => Error::Io(e),
        })?;
        if let Some(reason) = sys::untrusted(&file)? {
            return Err(untrusted(reason));
        }
        Ok(file)
    }

    /// [`Queue::open_trusted`] for reading only (an observer).
    pub(super) fn open_trusted_read_only(path: &Path) -> Result<File> {
        let file = sys::open_file_read_only(path).map_err(|e| match e.raw_os_error() {
            Some(libc::ENOENT) => Error::QueueDoesNotExist { path: named(path) },
            Some(libc::ELOOP) => Error::UntrustedFile {
                path: path.to_owned(),
                reason: "it is a symbolic link".into(),
            },
            _ => Error::Io(e),
        })?;
        if let Some(reason) = sys::untrusted(&file)? {
            return Err(Error::UntrustedFile {
                path: path.to_owned(),
                reason,
            });
        }
        Ok(file)
    }

    /// Opens an anonymous queue from a descriptor inherited from its creator (see
    /// [`Queue::inheritable_fd`]). The descriptor stays open and the caller's: the queue
    /// opens its own (through `/proc/self/fd`), so the caller may close it at once.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::os::fd::AsFd;
    ///
    /// use shmfifo::{Queue, QueueConfig, ReceiveOptions, SendMessage};
    ///
    /// let q = Queue::create_anonymous(&QueueConfig::new())?;
    /// // The creator hands a descriptor to a child (here: to itself)...
    /// let fd = q.inheritable_fd()?;
    /// // ...which opens the same queue from it.
    /// let other = Queue::open_fd(fd.as_fd())?;
    /// // `other` does not need the descriptor once open.
    /// drop(fd);
    ///
    /// q.send(&SendMessage::new("g", "hello").dedup_id("1"))?;
    /// assert_eq!(other.receive(&ReceiveOptions::default())?[0].body, "hello");
    /// # Ok::<(), shmfifo::Error>(())
    /// ```
    pub fn open_fd(fd: BorrowedFd<'_>) -> Result<Queue> {
        let file = sys::reopen_fd(fd.as_raw_fd())?;
        Self::attach(file, None)
    }

    /// A descriptor of this queue's file without close-on-exec, for a child process to pass
    /// to [`Queue::open_fd`]. Dropping it closes it (in the parent, once the child is
    /// spawned).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::os::fd::{AsRawFd, BorrowedFd};
    ///
    /// use shmfifo::{Queue, QueueConfig, ReceiveOptions, SendMessage};
    ///
    /// let q = Queue::create_anonymous(&QueueConfig::new())?;
    /// let fd = q.inheritable_fd()?;
    /// // A child spawned now inherits the descriptor across exec; tell it the number (an
    /// // argument, an environment variable)...
    /// let number = fd.as_raw_fd();
    /// // ...and it borrows it and opens the queue. Here the same process does:
    /// // SAFETY: `number` is open (`fd` lives) for as long as the borrow is used.
    /// let child = Queue::open_fd(unsafe { BorrowedFd::borrow_raw(number) })?;
    /// // The parent closes its descriptor once the child is spawned.
    /// drop(fd);
    ///
    /// child.send(&SendMessage::new("g", "from the child").dedup_id("1"))?;
    /// assert_eq!(q.receive(&ReceiveOptions::default())?[0].body, "from the child");
    /// # Ok::<(), shmfifo::Error>(())
    /// ```
    pub fn inheritable_fd(&self) -> Result<OwnedFd> {
        let f = sys::dup(&self.inner.file)?;
        sys::set_inheritable(&f)?;
        Ok(f.into())
    }

    /// The metadata of the queue's file as it is open (`fstat`): owner, mode, device and
    /// inode. A long-lived process compares it with the name's (`std::fs::symlink_metadata`)
    /// to notice a queue deleted and created again under the same name, and so reopen it.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::os::unix::fs::MetadataExt;
    ///
    /// use shmfifo::{Queue, QueueConfig};
    ///
    /// let path = std::env::temp_dir().join(format!("shmfifo-doc-meta-{}", std::process::id()));
    /// let q = Queue::create_at(&path, &QueueConfig::new())?;
    /// # struct UnlinkAt(std::path::PathBuf);
    /// # impl Drop for UnlinkAt {
    /// #     fn drop(&mut self) {
    /// #         let _ = shmfifo::Queue::unlink_at(&self.0);
    /// #     }
    /// # }
    /// # let _cleanup = UnlinkAt(path.clone());
    /// let same = |q: &Queue| {
    ///     let (a, b) = (q.file_metadata().unwrap(), std::fs::metadata(&path).unwrap());
    ///     (a.dev(), a.ino()) == (b.dev(), b.ino())
    /// };
    /// assert!(same(&q));
    /// Queue::unlink_at(&path)?;
    /// let _again = Queue::create_at(&path, &QueueConfig::new())?;
    /// assert!(!same(&q)); // `q` still has the deleted queue open
    /// Queue::unlink_at(&path)?;
    /// # Ok::<(), shmfifo::Error>(())
    /// ```
    pub fn file_metadata(&self) -> Result<std::fs::Metadata> {
        Ok(self.inner.file.metadata()?)
    }

    /// Removes the queue file at `path`.
    ///
    /// # Examples
    ///
    /// ```
    /// use shmfifo::{Error, Queue, QueueConfig, ReceiveOptions, SendMessage};
    ///
    /// let name = format!("shmfifo-doc-unlink-at-{}", std::process::id());
    /// let path = std::env::temp_dir().join(name);
    /// let q = Queue::create_at(&path, &QueueConfig::new())?;
    /// # struct UnlinkAt(std::path::PathBuf);
    /// # impl Drop for UnlinkAt {
    /// #     fn drop(&mut self) {
    /// #         let _ = shmfifo::Queue::unlink_at(&self.0);
    /// #     }
    /// # }
    /// # let _cleanup = UnlinkAt(path.clone());
    /// Queue::unlink_at(&path)?;
    /// assert!(!path.exists());
    /// assert!(matches!(Queue::unlink_at(&path), Err(Error::QueueDoesNotExist { .. })));
    /// // Handles already open keep working.
    /// q.send(&SendMessage::new("g", "still here").dedup_id("1"))?;
    /// assert_eq!(q.receive(&ReceiveOptions::default())?[0].body, "still here");
    /// # Ok::<(), shmfifo::Error>(())
    /// ```
    pub fn unlink_at(path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref();
        // Only a queue file is removed: a regular file of ours that carries the arena magic.
        // A FIFO, a device node, a symlink, another user's file or any other file stays
        // where it is, with an error that says why.
        let file = Self::open_trusted(path)?;
        let mut magic = [0u8; 8];
        let n = {
            use std::os::unix::fs::FileExt;
            file.read_at(&mut magic, 0)?
        };
        if n < 8 || !view::has_magic(magic) {
            return Err(Error::NotAnArena {
                path: path.to_owned(),
            });
        }
        // Removed only if the name, looked up in its directory once, still names the file we
        // checked (replaced since we looked, or its directory swapped for a symlink: not ours
        // to remove).
        match sys::unlink_if_same(&file, path) {
            Ok(true) => Ok(()),
            Ok(false) => Err(Error::QueueNameExists {
                path: path.to_owned(),
            }),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                Err(Error::QueueDoesNotExist { path: named(path) })
            }
            Err(e) => Err(Error::Io(e)),
        }
    }

    /// Opens an arena file: [`Queue::probe`] its beginning, map it, check its header and view
    /// its regions, rebase its clock if it was made on another boot, register a participant,
    /// then release what dead participants held and recover what they left half-done.
    /// Probes, maps (read-only for an observer), checks the header and the file's mode, and
    /// views the regions of an arena file.
    fn map_checked(
        file: &File,
        path: Option<&Path>,
        read_only: bool,
    ) -> Result<(
        memmap2::MmapRaw,
        view::Checked,
        Arena<'static>,
        Box<Segments>,
        Guarded,
    )> {
        let shown = path.map_or_else(|| PathBuf::from("<anonymous>"), Path::to_owned);
        let len = Self::probe(file, &shown)?;
        let map = if read_only {
            sys::map_read_only(file, len)?
        } else {
            sys::map(file, len)?
        };
        // A named queue's file can be cut under us: its mappings are watched (`sys::guard`);
        // an anonymous queue's memfd is sealed against shrinking.
        let guarded = match path {
            Some(_) => {
                use std::os::fd::AsFd;
                use std::os::unix::fs::MetadataExt;
                let m = file.metadata()?;
                let cut = sys::guard::cut_for(m.dev(), m.ino());
                Guarded {
                    _watch: sys::guard::watch(
                        map.as_ptr(),
                        map.len(),
                        !read_only,
                        file.as_fd(),
                        0,
                        &cut,
                    ),
                    cut,
                }
            }
            None => Guarded {
                _watch: sys::guard::Watch::none(),
                cut: sys::guard::new_cut(),
            },
        };
        let base = map.as_mut_ptr();
        // SAFETY: the mapping is page-aligned and at least `view::MIN_LEN` bytes (`probe`),
        // owned by `map` for the call.
        let checked = unsafe { view::check_at(base, len) }.map_err(|r| match r {
            // A file cut under the look (`sys::guard`): what it read may be zeros.
            _ if sys::guard::is_cut(&guarded.cut) => Error::Truncated {
                expected: len,
                found: sys::file_len(file).unwrap_or(0),
            },
            Refused::NotAnArena => Error::NotAnArena {
                path: shown.clone(),
            },
            Refused::Version(found) => Error::LayoutVersionMismatch {
                found,
                expected: LAYOUT_VERSION,
            },
            Refused::NotReady => Error::NotReady,
            Refused::Truncated { expected, found } => Error::Truncated { expected, found },
            Refused::Corrupted(what) => Error::Corrupted { what },
        })?;
        let segs = Box::new(Segments::new(Box::new(sys::FileSegments::new(
            file,
            read_only,
            path.map(|_| guarded.cut.clone()),
        )?)));
        // SAFETY: the segment map is boxed (its address stays put when the box moves) and
        // returned with the view, owned by the `Inner` that holds both, which outlives every
        // use of the view.
        let segs_ref: &'static Segments = unsafe { &*(&*segs as *const Segments) };
        // SAFETY: `base` maps `len` bytes whose header `check` accepted; the mapping is
        // returned with the view and owned by the `Inner` that holds both, which outlives
        // every use of the view.
        let view: Arena<'static> = unsafe { view::view(base, &checked, segs_ref) };
        if path.is_some() {
            let asked = live::identity(&view).mode & 0o777;
            let now = sys::mode_of(file)? & 0o777;
            if now & !asked != 0 {
                return Err(Error::UntrustedFile {
                    path: shown,
                    reason: format!(
                        "its permissions {now:04o} are wider than the {asked:04o} its creator asked for"
                    ),
                });
            }
        }
        Ok((map, checked, view, segs, guarded))
    }

    /// An observer's handle (see [`Queue::observe`]): the arena mapped read-only, its clock
    /// read (never rebased: an observer writes nothing), no participant registered, nothing
    /// released or repaired.
    pub(super) fn attach_observer(file: File, path: PathBuf) -> Result<Queue> {
        let (map, checked, view, segs, guarded) = Self::map_checked(&file, Some(&path), true)?;
        let id = live::identity(&view);
        let lock_file = file.try_clone()?;
        let inner = Inner {
            keys: id.keys,
            nonce: id.nonce,
            base_ms: clock::base_ms(&view),
            created_wall_ms: id.created_wall_ms,
            caps: checked.geometry.classes.clone(),
            max_message_limit: super::queue::max_message_limit(&checked.geometry.classes),
            cursor: AtomicU64::new(0),
            view,
            segs,
            dedup: checked.dedup,
            per_group_throughput: checked.per_group_throughput,
            dedup_interval_ms: checked.dedup_interval_ms,
            source: Vec::new(),
            no_policy: AtomicU64::new(u64::MAX),
            empty_polls: AtomicU64::new(0),
            dlq: std::sync::Mutex::new(None),
            dl_check: std::sync::Mutex::new(None),
            dl_on_receive: std::sync::atomic::AtomicBool::new(true),
            index: u32::MAX,
            me: crate::protocol::Owner::NOBODY,
            observer: true,
            pid: sys::pid(),
            gen: 0,
            test_clock: checked.test_clock,
            binary: checked.binary,
            packing: std::sync::atomic::AtomicBool::new(true),
            file,
            lock_file,
            guarded,
            map,
            path: Some(path),
        };
        let q = Queue {
            inner: Arc::new(inner),
        };
        // A file cut under the open's reads (`sys::guard`).
        q.inner.live()?;
        Ok(q)
    }

    pub(super) fn attach(file: File, path: Option<PathBuf>) -> Result<Queue> {
        let (map, checked, view, segs, guarded) = Self::map_checked(&file, path.as_deref(), false)?;
        // The arena clock counts CLOCK_MONOTONIC, which restarts with each boot: the first
        // opener on a new boot rebases it (see `Header::clock`).
        let based = clock::rebase(
            &view,
            sys::boot_id(),
            sys::monotonic_ns() / 1_000_000,
            sys::realtime_ms(),
        );
        // The liveness lock lives on a private open file description (CLOEXEC, never handed
        // out): a descriptor shared with a child (dup, fork) must not keep us "alive".
        let lock_file = {
            use std::os::fd::AsRawFd;
            sys::reopen_fd(file.as_raw_fd())?
        };
        let pid = sys::pid();
        let reg = registry::register(
            &view,
            u64::from(pid),
            &mut |i| sys::try_lock_participant(&lock_file, i),
            &mut |i| sys::unlock_participant(&lock_file, i),
        )?
        .ok_or(Error::ParticipantLimitReached {
            max_participants: checked.geometry.participants,
        })?;
        let id = live::identity(&view);
        let inner = Inner {
            keys: id.keys,
            nonce: id.nonce,
            base_ms: based.base_ms,
            created_wall_ms: id.created_wall_ms,
            caps: checked.geometry.classes.clone(),
            max_message_limit: super::queue::max_message_limit(&checked.geometry.classes),
            cursor: AtomicU64::new(sys::random_u64().unwrap_or(0)),
            view,
            segs,
            dedup: checked.dedup,
            per_group_throughput: checked.per_group_throughput,
            dedup_interval_ms: checked.dedup_interval_ms,
            source: path
                .as_ref()
                .and_then(|p| std::fs::canonicalize(p).ok())
                .map(|p| p.into_os_string().into_encoded_bytes())
                .filter(|p| p.len() <= MAX_REDRIVE_PATH)
                .unwrap_or_default(),
            no_policy: AtomicU64::new(u64::MAX),
            empty_polls: AtomicU64::new(0),
            dlq: std::sync::Mutex::new(None),
            dl_check: std::sync::Mutex::new(None),
            dl_on_receive: std::sync::atomic::AtomicBool::new(true),
            observer: false,
            pid,
            gen: reg.gen,
            test_clock: checked.test_clock,
            binary: checked.binary,
            packing: std::sync::atomic::AtomicBool::new(true),
            index: reg.index,
            me: owner::code(reg.index, reg.gen),
            file,
            lock_file,
            guarded,
            map,
            path,
        };
        let q = Queue {
            inner: Arc::new(inner),
        };
        q.release_held_on_open(based.rebased, reg.took_over)?;
        // Repair what dead participants left behind (half-made sends, held messages, claims,
        // lost hints), if any registered participant is dead: with none, there is nothing to
        // repair, and an open does O(participants) work, not a sweep of every slot and group.
        // The quarantine of damaged groups is left to `recover` (it walks lists).
        let inner = &*q.inner;
        if !recovery::dead_participants(q.arena(), inner, inner.me).is_empty() {
            q.repair()?;
        }
        // A file cut under the open's reads and writes (`sys::guard`).
        inner.live()?;
        Ok(q)
    }

    /// Checks the beginning of an arena file before mapping it, returning its length. Creators
    /// name an arena only once it is complete (see `create_at`): an empty or all-zero
    /// beginning is never a creator still at work, and carries no arena: not a queue, as
    /// `create` (which does not replace it) and `unlink` (which does not remove it) say too.
    /// (It was `NotReady`, whose advice, create the queue again there, `create` refused.)
    fn probe(file: &File, shown: &Path) -> Result<u64> {
        use std::os::unix::fs::FileExt;
        let len = file.metadata()?.len();
        let mut m = [0u8; 8];
        let n = file.read_at(&mut m, 0)?;
        if n < 8 || !view::has_magic(m) {
            return Err(Error::NotAnArena {
                path: shown.to_owned(),
            });
        }
        if len < view::MIN_LEN {
            return Err(Error::Truncated {
                expected: view::MIN_LEN,
                found: len,
            });
        }
        Ok(len)
    }

    /// After a reboot (`rebased`) no receiver of the old boot holds anything: release every
    /// in-flight message. A registration that took over a dead participant's slot releases
    /// what that one held (with `release_on_death`).
    fn release_held_on_open(&self, rebased: bool, took_over: Option<(u32, u32)>) -> Result<()> {
        let inner = &*self.inner;
        let a = self.arena();
        if rebased {
            recovery::release_where(a, inner, inner.me, &|_| true).map_err(|f| fault(f, inner))?;
        } else if let (Some(dead), true) = (took_over, recovery::release_on_death(a)) {
            recovery::release_held(a, inner, inner.me, &[dead]).map_err(|f| fault(f, inner))?;
        }
        Ok(())
    }
}

/// What holds a name a create would place its arena at ([`Queue::holder`]).
enum Holder {
    /// Nothing: the name is free.
    Nothing,
    /// A stale arena of ours (its creator never finished it), open: it may be replaced.
    Stale(File),
    /// A queue, a symlink, anything not ours: the name is taken.
    Taken,
}

/// A queue's path as an error names it: without a trailing `/` (nor a repeated one), which
/// `QueueDoesNotExist` keeps for a missing directory at creation (its text "no directory").
fn named(path: &Path) -> PathBuf {
    path.components().collect()
}
