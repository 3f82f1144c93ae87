//! `Queue`: create, open, send, receive, delete, change visibility, purge, attributes.
#![allow(unsafe_code)]

use std::fs::File;
use std::hash::Hasher;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::types::*;
use crate::config::{
    Deduplication, QueueConfig, QueueSettings, RedrivePolicy, ATTRIBUTE_FRAMING, MAX_ATTRIBUTES,
    MAX_DEDUP_ENTRIES, MAX_DEDUP_INTERVAL, MAX_DELAY, MAX_RECEIVE_COUNT, MAX_RETENTION,
    MAX_VISIBILITY_TIMEOUT, MAX_WAIT_TIME,
};
use crate::error::{Error, Result};
use crate::layout::{
    counter, AttemptEntry, DedupEntry, GroupEntry, Header, MsgHeader, Participant, LAYOUT_VERSION,
    MAGIC, MAX_CLASSES, MAX_ID_LEN, MAX_REDRIVE_PATH, PAGE, STATE_INITIALISING, STATE_READY,
};
use crate::protocol::handle::{self, Handle};
use crate::protocol::receive::{self, Taken};
use crate::protocol::send::{self, Outgoing};
use crate::protocol::{
    accounting, attempt, dedup, doorbell, group, inspect, owner, pstate, ready, recovery, settings,
    words, Arena, Class, Env, Fault,
};
use crate::sync::{AtomicU32, AtomicU64, Ordering};
use crate::{sys, validate};

/// Id of the keyed hash used for group ids (SipHash-2-4).
const HASH_SIPHASH24: u64 = 1;
/// Spin rounds before a long-polling receiver goes to sleep.
const SPIN_ROUNDS: u32 = 200;

/// A handle on one shmfifo queue. `Send + Sync`, cheap to clone (an `Arc`); each
/// [`Queue::create`]/[`Queue::open`] registers one participant, released on the last drop.
///
/// After `fork`, a child must open the queue again rather than use the parent's handle. A child
/// forked without `exec` also inherits the handle's liveness lock, so while it lives the parent
/// is never seen as dead (its claims are not taken over); children that `exec` do not.
#[derive(Debug, Clone)]
pub struct Queue {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    file: File,
    /// Private open file description holding our liveness lock.
    lock_file: File,
    map: memmap2::MmapRaw,
    /// Points into `map`, which lives as long as `self`.
    view: Arena<'static>,
    index: u32,
    me: u64,
    keys: (u64, u64),
    nonce: u64,
    /// CLOCK_MONOTONIC ms of arena time 0 on this boot (see `Header::clock`).
    base_ms: u64,
    wait_ms: u64,
    max_message_size: u32,
    created_wall_ms: u64,
    caps: Vec<(u32, u32)>,
    cursor: AtomicU64,
    path: Option<PathBuf>,
    dedup: Deduplication,
    dedup_interval_ms: u64,
    /// This queue's canonical path, the dead-letter source of messages it moves (X3); empty
    /// for an anonymous queue or a path longer than `MAX_REDRIVE_PATH`.
    source: Vec<u8>,
    /// The last redrive-policy `current` word seen without a policy (a fast path).
    no_policy: AtomicU64,
    /// The dead-letter queue of the current policy, opened on first use.
    dlq: std::sync::Mutex<Option<(u64, Queue)>>,
}

// SAFETY: `view` only refers to the shared mapping owned by `map` (never freed before `Inner`)
// and to atomics; every access to payload bytes follows the protocol's ownership rules, which
// hold across threads exactly as across processes.
unsafe impl Send for Inner {}
// SAFETY: as above.
unsafe impl Sync for Inner {}

impl Env for Inner {
    /// Starts at 1 ms, not 0: a visibility deadline of 0 means "never received".
    fn now_ms(&self) -> u64 {
        arena_now(self.base_ms) + 1
    }
    fn wall_ms(&self) -> u64 {
        sys::realtime_ms()
    }
    fn participant_alive(&self, index: u32) -> bool {
        index == self.index || sys::participant_locked(&self.file, index)
    }
    fn wake(&self, word: &AtomicU32) {
        sys::futex_wake(word, 1);
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Some(p) = self.view.parts.get(self.index as usize) {
            // Acquire/Release: our last arena writes happen before a successor's registration.
            let st = p.state.load(Ordering::Acquire);
            let w = p.waiting.swap(0, Ordering::AcqRel);
            if w > 0 {
                self.view
                    .hdr
                    .wake
                    .0
                    .waiters
                    .fetch_sub(w as u32, Ordering::AcqRel);
            }
            p.state.store(
                pstate::pack(pstate::gen(st), pstate::FREE),
                Ordering::Release,
            );
        }
        sys::unlock_participant(&self.lock_file, self.index);
    }
}

fn fault(f: Fault, inner: &Inner) -> Error {
    match f {
        Fault::Corrupted(what) => Error::Corrupted { what },
        Fault::ClassFull(c) => Error::SizeClassFull {
            class_bytes: inner.caps.get(c).map_or(0, |c| c.0),
        },
        Fault::GroupsFull => Error::GroupLimitReached {
            max_groups: inner.view.max_groups,
        },
        Fault::Expired => Error::ReceiptHandleExpired {
            handle: String::new(),
        },
        Fault::VisibilityCap => Error::invalid(
            "VisibilityTimeout",
            "the visibility timeout would end more than 12 hours after the message was received",
        ),
        Fault::ClockRange => Error::Corrupted {
            what: "clock beyond the arena's time range",
        },
        Fault::DedupFull => Error::DedupTableFull {
            entries: inner.view.dedup.len() as u64,
            interval_ms: inner.dedup_interval_ms,
        },
        Fault::DedupBusy => Error::DedupInProgress,
    }
}

impl Inner {
    /// Whether a send must carry a dedup id (S4): the queue deduplicates and content-based
    /// dedup is off.
    fn needs_dedup_id(&self) -> bool {
        // Relaxed: a live setting; a send racing with its change may see either value.
        self.dedup != Deduplication::Off
            && self.view.hdr.content_based_dedup.load(Ordering::Relaxed) == 0
    }
}

/// S4's error for a send without a dedup id on a queue that needs one.
fn missing_dedup_id() -> Error {
    Error::invalid(
        "MessageDeduplicationId",
        "The queue should either have ContentBasedDeduplication enabled or MessageDeduplicationId provided explicitly",
    )
}

fn shm_path(name: &str) -> Result<PathBuf> {
    let ok = !name.is_empty()
        && name.len() <= 200
        && name != "."
        && name != ".."
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.' || b == b'-');
    if !ok {
        return Err(Error::InvalidQueueName {
            name: name.to_owned(),
        });
    }
    Ok(Path::new("/dev/shm").join(name))
}

fn ms(d: Duration) -> u64 {
    d.as_millis().min(u128::from(u64::MAX)) as u64
}

fn hash_id(keys: (u64, u64), id: &[u8]) -> u64 {
    let mut h = siphasher::sip::SipHasher24::new_with_keys(keys.0, keys.1);
    h.write(id);
    h.finish()
}

/// The keyed hash of a dedup key: SipHash-2-4 over `[b'D', group_len] ‖ group ‖ dedup` (the
/// group is empty with queue scope). Specified byte for byte, so every build agrees.
fn hash_dedup(keys: (u64, u64), group: &[u8], dedup: &[u8]) -> u64 {
    let mut buf = [0u8; 2 + 2 * MAX_ID_LEN];
    let (g, d) = (group.len().min(MAX_ID_LEN), dedup.len().min(MAX_ID_LEN));
    buf[0] = b'D';
    buf[1] = g as u8;
    buf[2..2 + g].copy_from_slice(&group[..g]);
    buf[2 + g..2 + g + d].copy_from_slice(&dedup[..d]);
    hash_id(keys, &buf[..2 + g + d])
}

/// Lowercase hex of the SHA-256 of `body` (the content-based dedup id, D5).
fn content_dedup_id(body: &[u8]) -> [u8; 64] {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(body);
    let mut out = [0u8; 64];
    for (i, b) in digest.iter().enumerate() {
        out[2 * i] = b"0123456789abcdef"[usize::from(b >> 4)];
        out[2 * i + 1] = b"0123456789abcdef"[usize::from(b & 15)];
    }
    out
}

/// The `n` elements of type `T` at byte offset `off` of the mapping at `base`.
///
/// # Safety
/// `off + n * size_of::<T>()` must lie inside a mapping that outlives the returned slice,
/// `base + off` must be aligned for `T`, and `T` must be valid for any bit pattern (atomics).
unsafe fn region<T>(base: *mut u8, off: u64, n: usize) -> &'static [T] {
    // SAFETY: guaranteed by the caller.
    unsafe { std::slice::from_raw_parts(base.add(off as usize) as *const T, n) }
}

/// A queue name (under `/dev/shm`) or a path (anything containing `/`).
fn queue_path(s: &str) -> Result<PathBuf> {
    if s.contains('/') {
        Ok(PathBuf::from(s))
    } else {
        shm_path(s)
    }
}

/// Checks a redrive policy's target (X1, X2): it exists, is a shmfifo queue other than this
/// one, deduplicates (for exactly-once moves, D8) and takes every message this queue can
/// hold. Returns its canonical path and the opened queue.
fn check_dead_letter(
    p: &RedrivePolicy,
    own_nonce: Option<u64>,
    own_max_message_size: u32,
) -> Result<(PathBuf, Queue)> {
    if !(1..=MAX_RECEIVE_COUNT).contains(&p.max_receive_count) {
        return Err(Error::invalid(
            "RedrivePolicy",
            format!(
                "Value {} for parameter RedrivePolicy is invalid. Reason: maxReceiveCount must be an integer from 1 to {MAX_RECEIVE_COUNT}.",
                p.max_receive_count
            ),
        ));
    }
    let given = queue_path(&p.dead_letter_queue)?;
    let dl = |path: &Path, reason: String| Error::DeadLetterQueue {
        path: path.to_owned(),
        reason,
    };
    let path = std::fs::canonicalize(&given)
        .map_err(|e| dl(&given, format!("does not exist ({e}); create it first")))?;
    if path.as_os_str().len() > MAX_REDRIVE_PATH {
        return Err(dl(
            &path,
            format!("its path is longer than {MAX_REDRIVE_PATH} bytes"),
        ));
    }
    let q = Queue::open_at(&path).map_err(|e| dl(&path, format!("cannot be opened: {e}")))?;
    if Some(q.inner.nonce) == own_nonce {
        return Err(dl(
            &path,
            "a queue cannot be its own dead-letter queue".into(),
        ));
    }
    if q.inner.dedup == Deduplication::Off {
        return Err(dl(
            &path,
            "its deduplication is off, so a move could not be made exactly once (D8); create it with deduplication on".into(),
        ));
    }
    if q.inner.max_message_size < own_max_message_size {
        return Err(dl(
            &path,
            format!(
                "its maximum_message_size {} is smaller than this queue's {own_max_message_size}",
                q.inner.max_message_size
            ),
        ));
    }
    Ok((path, q))
}

/// Writes a fresh header for `geometry` into the mapping at `base` and marks it ready.
///
/// # Safety
/// `base` must point to a zeroed, page-aligned mapping of at least `total` bytes that no other
/// process uses yet.
unsafe fn initialise(
    base: *mut u8,
    cfg: &QueueConfig,
    g: &crate::layout::Geometry,
    total: u64,
    redrive: Option<(u32, &[u8])>,
) -> io::Result<()> {
    // SAFETY: the caller guarantees a page-aligned mapping of at least PAGE bytes; `Header` is
    // made of atomics, valid for the all-zero bit pattern.
    let hdr = unsafe { &*(base as *const Header) };
    let r = Ordering::Relaxed; // all published by the Release store of `state` below
    hdr.magic.store(MAGIC, r);
    hdr.layout_version.store(LAYOUT_VERSION, r);
    hdr.total_size.store(total, r);
    hdr.hash_alg.store(HASH_SIPHASH24, r);
    hdr.hash_k0.store(sys::random_u64()?, r);
    hdr.hash_k1.store(sys::random_u64()?, r);
    hdr.nonce.store(sys::random_u64()?, r);
    let boot = sys::boot_id();
    hdr.boot_id[0].store(boot[0], r);
    hdr.boot_id[1].store(boot[1], r);
    hdr.created_wall_ms.store(sys::realtime_ms(), r);
    hdr.clock.store(
        clock_word(boot_tag(boot), sys::monotonic_ns() / 1_000_000),
        r,
    );
    hdr.release_on_death
        .store(u64::from(cfg.release_on_death), r);
    hdr.participants.store(u64::from(g.participants), r);
    hdr.max_groups.store(u64::from(g.max_groups), r);
    hdr.group_slots.store(u64::from(g.group_slots), r);
    hdr.ready_slots.store(u64::from(g.ready_slots), r);
    hdr.class_count.store(g.classes.len() as u64, r);
    for (k, &(cap, n)) in g.classes.iter().enumerate() {
        hdr.class_payload[k].store(u64::from(cap), r);
        hdr.class_slots[k].store(u64::from(n), r);
    }
    hdr.max_message_size
        .store(u64::from(cfg.maximum_message_size), r);
    hdr.visibility_timeout_ms
        .store(ms(cfg.visibility_timeout), r);
    hdr.delay_ms.store(ms(cfg.delay), r);
    hdr.retention_ms.store(ms(cfg.message_retention_period), r);
    hdr.max_in_flight.store(u64::from(cfg.max_in_flight), r);
    if let Some((max, path)) = redrive {
        // Buffer 0 is the current one (`current` is 0): published with the state word below.
        let b = &hdr.redrive.buffers[0];
        b.max_receive_count.store(u64::from(max), r);
        b.path_len.store(path.len() as u64, r);
        for (k, chunk) in path.chunks(8).enumerate() {
            let mut w = [0u8; 8];
            w[..chunk.len()].copy_from_slice(chunk);
            b.path[k].store(u64::from_le_bytes(w), r);
        }
    }
    hdr.receive_wait_ms
        .store(ms(cfg.receive_message_wait_time), r);
    hdr.dedup_mode.store(
        match cfg.deduplication {
            Deduplication::Off => 0,
            Deduplication::Queue => 1,
            Deduplication::MessageGroup => 2,
        },
        r,
    );
    hdr.dedup_interval_ms
        .store(ms(cfg.deduplication_interval), r);
    hdr.dedup_slots.store(u64::from(g.dedup_slots), r);
    hdr.content_based_dedup
        .store(u64::from(cfg.content_based_deduplication), r);
    hdr.next_expiry.0.store(u64::MAX, r);
    hdr.attempt_slots.store(u64::from(g.attempt_slots), r);
    // SYNC POINT(arena-ready): Release publishes every store above to `open`'s Acquire load.
    hdr.state.store(STATE_READY, Ordering::Release);
    Ok(())
}

/// The size SQS counts for stored attributes (names, types and values; not our per-attribute
/// framing). Framing that does not parse (corruption) counts whole.
fn attr_size(attrs: &[u8]) -> usize {
    let (mut at, mut frames) = (0usize, 0usize);
    while at < attrs.len() {
        let Some(f) = attrs.get(at..at + ATTRIBUTE_FRAMING) else {
            return attrs.len();
        };
        let name = usize::from(u16::from_le_bytes([f[0], f[1]]));
        let ty = usize::from(u16::from_le_bytes([f[2], f[3]]));
        let value = u32::from_le_bytes([f[4], f[5], f[6], f[7]]) as usize;
        at = at
            .saturating_add(ATTRIBUTE_FRAMING)
            .saturating_add(name)
            .saturating_add(ty)
            .saturating_add(value);
        frames += 1;
    }
    if at == attrs.len() {
        attrs.len() - frames * ATTRIBUTE_FRAMING
    } else {
        attrs.len()
    }
}

/// Mask of the arena clock's base (ms) and of arena times derived from it.
const CLOCK_MASK: u64 = (1 << 40) - 1;

/// The 24-bit tag of a boot id kept in the clock word.
fn boot_tag(b: [u64; 2]) -> u64 {
    let x = b[0] ^ b[1];
    (x ^ (x >> 24) ^ (x >> 48)) & 0xFF_FFFF
}

/// The clock word `[boot_tag:24][base_ms:40]`.
fn clock_word(tag: u64, base_ms: u64) -> u64 {
    (tag << 40) | (base_ms & CLOCK_MASK)
}

/// Arena time (ms, from 1) on this boot for a clock base.
fn arena_now(base_ms: u64) -> u64 {
    (sys::monotonic_ns() / 1_000_000).wrapping_sub(base_ms) & CLOCK_MASK
}

impl Queue {
    /// Creates the queue `name` under `/dev/shm` (exclusively, mode from the config).
    pub fn create(name: &str, cfg: &QueueConfig) -> Result<Queue> {
        Self::create_at(shm_path(name)?, cfg)
    }

    /// Opens the queue `name` under `/dev/shm`.
    pub fn open(name: &str) -> Result<Queue> {
        Self::open_at(shm_path(name)?)
    }

    /// Removes the queue `name` under `/dev/shm`. Processes that have it open keep using it.
    pub fn unlink(name: &str) -> Result<()> {
        Self::unlink_at(shm_path(name)?)
    }

    /// Creates a queue at `path` (any file system; `/dev/shm` for memory speed).
    pub fn create_at(path: impl AsRef<Path>, cfg: &QueueConfig) -> Result<Queue> {
        let path = path.as_ref();
        let g = cfg.geometry()?;
        let dlq = cfg
            .redrive_policy
            .as_ref()
            .map(|p| check_dead_letter(p, None, cfg.maximum_message_size))
            .transpose()?;
        let total = g.offsets().map(|o| o.total).ok_or(Error::InvalidConfig {
            setting: "size_classes",
            reason: "too large".into(),
        })?;
        let no_space = |e: io::Error, dir: &Path| match e.raw_os_error() {
            Some(libc::ENOSPC) | Some(libc::EFBIG) => Error::NoSpace { needed: total },
            Some(libc::ENOENT) => Error::QueueDoesNotExist {
                path: dir.to_owned(),
            },
            _ => Error::Io(e),
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

    /// Names the complete arena `file` (unnamed, or named `tmp`) `path`, replacing a stale
    /// arena found there (one its creator never finished), never a live one.
    fn place(file: &File, tmp: Option<&Path>, path: &Path) -> Result<()> {
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
                        Some(libc::ENOENT) => Error::QueueDoesNotExist {
                            path: path.to_owned(),
                        },
                        _ => Error::Io(e),
                    })
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
    fn remove_stale(path: &Path) -> Result<bool> {
        let f = match sys::open_file(path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(true),
            Err(e) => return Err(Error::Io(e)),
        };
        if !Self::is_stale(&f)? {
            return Ok(false);
        }
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

    /// Whether an arena file is stale: see [`Queue::remove_stale`].
    fn is_stale(f: &File) -> Result<bool> {
        use std::os::unix::fs::FileExt;
        let mut head = vec![0u8; 0x160];
        let n = f.read_at(&mut head, 0)?;
        let word = |at: usize| u64::from_le_bytes(head[at..at + 8].try_into().unwrap_or([0; 8]));
        Ok(head[..n].iter().all(|&b| b == 0)
            || (n == head.len()
                && word(0) == MAGIC
                && word(8) == LAYOUT_VERSION
                && word(0x158) == STATE_INITIALISING))
    }

    /// Creates an anonymous queue (a memfd). Children get it through [`Queue::inheritable_fd`]
    /// and [`Queue::open_fd`].
    pub fn create_anonymous(cfg: &QueueConfig) -> Result<Queue> {
        let g = cfg.geometry()?;
        let dlq = cfg
            .redrive_policy
            .as_ref()
            .map(|p| check_dead_letter(p, None, cfg.maximum_message_size))
            .transpose()?;
        let total = g.offsets().map(|o| o.total).ok_or(Error::InvalidConfig {
            setting: "size_classes",
            reason: "too large".into(),
        })?;
        let file = sys::memfd("shmfifo", total).map_err(|e| match e.raw_os_error() {
            Some(libc::ENOSPC) | Some(libc::EFBIG) => Error::NoSpace { needed: total },
            _ => Error::Io(e),
        })?;
        Self::init_and_attach(file, cfg, &g, total, None, dlq)
    }

    fn init_and_attach(
        file: File,
        cfg: &QueueConfig,
        g: &crate::layout::Geometry,
        total: u64,
        path: Option<PathBuf>,
        dlq: Option<(PathBuf, Queue)>,
    ) -> Result<Queue> {
        Self::initialise_file(&file, cfg, g, total, dlq.as_ref())?;
        drop(dlq);
        Self::attach(file, path)
    }

    /// Writes a new arena into the fresh, zero-filled `file` of `total` bytes.
    fn initialise_file(
        file: &File,
        cfg: &QueueConfig,
        g: &crate::layout::Geometry,
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
        // SAFETY: a fresh, zero-filled, page-aligned mapping of `total` bytes, not yet named to
        // anyone (an unnamed or hidden file, or a memfd not yet handed out).
        unsafe { initialise(map.as_mut_ptr(), cfg, g, total, redrive)? };
        Ok(())
    }

    /// Opens the queue at `path`, validating its header.
    pub fn open_at(path: impl AsRef<Path>) -> Result<Queue> {
        let path = path.as_ref();
        let file = sys::open_file(path).map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => Error::QueueDoesNotExist {
                path: path.to_owned(),
            },
            _ => Error::Io(e),
        })?;
        Self::attach(file, Some(path.to_owned()))
    }

    /// Opens an anonymous queue from a descriptor inherited from its creator (see
    /// [`Queue::inheritable_fd`]). The descriptor stays open and owned by the caller.
    pub fn open_fd(fd: i32) -> Result<Queue> {
        let file = sys::reopen_fd(fd)?;
        Self::attach(file, None)
    }

    /// A descriptor of this queue's file without close-on-exec, for a child process to pass
    /// to [`Queue::open_fd`]. The caller owns it (close it in the parent after spawning).
    pub fn inheritable_fd(&self) -> Result<i32> {
        use std::os::fd::IntoRawFd;
        let f = sys::dup(&self.inner.file)?;
        sys::set_inheritable(&f)?;
        Ok(f.into_raw_fd())
    }

    /// Removes the queue file at `path`.
    pub fn unlink_at(path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref();
        std::fs::remove_file(path).map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => Error::QueueDoesNotExist {
                path: path.to_owned(),
            },
            _ => Error::Io(e),
        })
    }

    fn attach(file: File, path: Option<PathBuf>) -> Result<Queue> {
        let shown = path.clone().unwrap_or_else(|| PathBuf::from("<anonymous>"));
        // Creators name an arena only once it is complete (see `create_at`): an empty or
        // all-zero beginning is a stale file, never a creator still at work.
        let len = {
            use std::os::unix::fs::FileExt;
            let len = file.metadata()?.len();
            let mut m = [0u8; 8];
            let n = file.read_at(&mut m, 0)?;
            let magic = u64::from_le_bytes(m);
            if m[..n].iter().all(|&b| b == 0) {
                return Err(Error::NotReady);
            }
            if n < 8 || magic != MAGIC {
                return Err(Error::NotAnArena { path: shown });
            }
            if len < PAGE {
                return Err(Error::Truncated {
                    expected: PAGE,
                    found: len,
                });
            }
            len
        };
        let map = sys::map(&file, len)?;
        let base = map.as_mut_ptr();
        // SAFETY: the mapping is page-aligned and at least PAGE bytes; `Header` fits in a page
        // and is made of atomics, valid for any bit pattern.
        let hdr: &Header = unsafe { &*(base as *const Header) };
        let r = Ordering::Relaxed; // after the Acquire load of `state` below
        if hdr.magic.load(r) != MAGIC {
            return Err(Error::NotAnArena { path: shown });
        }
        let found = hdr.layout_version.load(r);
        if found != LAYOUT_VERSION {
            return Err(Error::LayoutVersionMismatch {
                found,
                expected: LAYOUT_VERSION,
            });
        }
        // SYNC POINT(arena-ready): Acquire pairs with the creator's Release store.
        match hdr.state.load(Ordering::Acquire) {
            STATE_READY => {}
            STATE_INITIALISING => return Err(Error::NotReady),
            _ => {
                return Err(Error::Corrupted {
                    what: "unknown arena state word",
                })
            }
        }
        let corrupt = |what| Err(Error::Corrupted { what });
        if hdr.hash_alg.load(r) != HASH_SIPHASH24 {
            return corrupt("unknown hash algorithm");
        }
        let participants = hdr.participants.load(r);
        let max_groups = hdr.max_groups.load(r);
        let group_slots = hdr.group_slots.load(r);
        let ready_slots = hdr.ready_slots.load(r);
        let nclasses = hdr.class_count.load(r);
        if participants == 0 || participants > u64::from(crate::config::MAX_PARTICIPANTS) {
            return corrupt("participant count out of range");
        }
        if max_groups == 0 || max_groups > u64::from(crate::config::MAX_GROUPS) {
            return corrupt("max groups out of range");
        }
        if !group_slots.is_power_of_two() || group_slots < max_groups || group_slots > 1 << 24 {
            return corrupt("group table size out of range");
        }
        if ready_slots != group_slots {
            return corrupt("ready ring size out of range");
        }
        if nclasses == 0 || nclasses > MAX_CLASSES as u64 {
            return corrupt("size class count out of range");
        }
        let dedup_mode = hdr.dedup_mode.load(r);
        let dedup_slots = hdr.dedup_slots.load(r);
        let dedup_interval_ms = hdr.dedup_interval_ms.load(r);
        let (dedup_cfg, dedup_key_words) = match dedup_mode {
            0 => (Deduplication::Off, MAX_ID_LEN as u32 / 8),
            1 => (Deduplication::Queue, MAX_ID_LEN as u32 / 8),
            2 => (Deduplication::MessageGroup, 2 * MAX_ID_LEN as u32 / 8),
            _ => return corrupt("unknown dedup mode"),
        };
        let dedup_ok = if dedup_mode == 0 {
            dedup_slots == 0
        } else {
            dedup_slots.is_power_of_two()
                && dedup_slots <= u64::from(MAX_DEDUP_ENTRIES.next_power_of_two())
                && (1..=ms(MAX_DEDUP_INTERVAL)).contains(&dedup_interval_ms)
        };
        if !dedup_ok {
            return corrupt("dedup table settings out of range");
        }
        let attempt_slots = hdr.attempt_slots.load(r);
        if attempt_slots != 0
            && (!attempt_slots.is_power_of_two()
                || attempt_slots > u64::from(crate::config::MAX_ATTEMPT_ENTRIES))
        {
            return corrupt("attempt record count out of range");
        }
        let mut classes = Vec::new();
        for k in 0..nclasses as usize {
            let cap = hdr.class_payload[k].load(r);
            let n = hdr.class_slots[k].load(r);
            if cap == 0 || cap > u64::from(u32::MAX) || n == 0 || n > crate::config::MAX_SLOTS {
                return corrupt("size class out of range");
            }
            classes.push((cap as u32, n as u32));
        }
        let g = crate::layout::Geometry {
            participants: participants as u32,
            max_groups: max_groups as u32,
            group_slots: group_slots as u32,
            ready_slots: ready_slots as u32,
            classes: classes.clone(),
            dedup_slots: dedup_slots as u32,
            dedup_key_words,
            attempt_slots: attempt_slots as u32,
        };
        if g.total_slots() > crate::config::MAX_SLOTS {
            return corrupt("too many message slots");
        }
        let Some(o) = g.offsets() else {
            return corrupt("geometry overflows");
        };
        let declared = hdr.total_size.load(r);
        if declared != o.total {
            return corrupt("total size does not match the geometry");
        }
        if len < o.total {
            return Err(Error::Truncated {
                expected: o.total,
                found: len,
            });
        }
        let max_message_size = hdr.max_message_size.load(r);
        if !(1024..=1_048_576).contains(&max_message_size) {
            return corrupt("maximum message size out of range");
        }
        let wait_ms = hdr.receive_wait_ms.load(r);
        if wait_ms > ms(MAX_WAIT_TIME) {
            return corrupt("default timeouts out of range");
        }
        // Offsets come from `Geometry::offsets`, which lays regions out disjointly, aligned
        // (128 B for tables, 64 B for headers) and inside `o.total`, which we checked is at
        // most the mapped length; the element types are atomics, valid for any bit pattern;
        // the mapping lives as long as `Inner`, which owns it.
        // SAFETY: as just said, for each region below.
        let (parts, groups, ready, dedup_entries, dedup_keys, attempts) = unsafe {
            (
                region::<Participant>(base, o.participants, g.participants as usize),
                region::<GroupEntry>(base, o.groups, g.group_slots as usize),
                region::<AtomicU64>(base, o.ready, g.ready_slots as usize),
                region::<DedupEntry>(base, o.dedup, g.dedup_slots as usize),
                region::<AtomicU64>(
                    base,
                    o.dedup_keys,
                    g.dedup_slots as usize * dedup_key_words as usize,
                ),
                region::<AttemptEntry>(base, o.attempts, g.attempt_slots as usize),
            )
        };
        let mut cls = [None; MAX_CLASSES];
        let mut gbase = 0u32;
        for (k, &(cap, n)) in classes.iter().enumerate() {
            let (ho, po, stride) = o.classes[k];
            // SAFETY: as above.
            let headers = unsafe { region::<MsgHeader>(base, ho, n as usize) };
            cls[k] = Some(Class {
                headers,
                // SAFETY: inside the mapping, as above.
                payload: unsafe { base.add(po as usize) },
                stride: stride as usize,
                cap,
                base: gbase,
            });
            gbase += n;
        }
        // SAFETY: `Header` at offset 0, checked above; lives as long as the mapping.
        let hdr: &'static Header = unsafe { &*(base as *const Header) };
        let view = Arena {
            hdr,
            parts,
            groups,
            ready,
            classes: cls,
            nclasses: nclasses as usize,
            total: gbase,
            max_groups,
            dedup: dedup_entries,
            dedup_keys,
            dedup_key_words: dedup_key_words as usize,
            attempts,
        };
        // The arena clock counts CLOCK_MONOTONIC, which restarts with each boot: the first
        // opener on a new boot rebases it (see `Header::clock`).
        let boot = sys::boot_id();
        let tag = boot_tag(boot);
        let mut rebased = false;
        let base_ms = loop {
            // Acquire: pairs with a rebaser's AcqRel CAS (and the creator's publication).
            let c = hdr.clock.load(Ordering::Acquire);
            if c >> 40 == tag {
                break c & CLOCK_MASK;
            }
            // Made on another boot, so every process of that boot is gone. Arena time goes on
            // from the arena's wall-clock age, never below its last sweep or liveness check.
            let age = sys::realtime_ms().saturating_sub(hdr.created_wall_ms.load(r));
            let floor = hdr.last_sweep.0.load(r).max(hdr.liveness.0.load(r)) + 1;
            let t = age.max(floor).min(CLOCK_MASK / 2);
            let base = (sys::monotonic_ns() / 1_000_000).wrapping_sub(t) & CLOCK_MASK;
            // AcqRel: one rebaser per boot; a loser reloads the winner's word.
            if hdr
                .clock
                .compare_exchange(
                    c,
                    clock_word(tag, base),
                    Ordering::AcqRel,
                    Ordering::Acquire,
                )
                .is_ok()
            {
                hdr.boot_id[0].store(boot[0], r);
                hdr.boot_id[1].store(boot[1], r);
                rebased = true;
                break base;
            }
        };
        // Register: take a liveness lock first, then the registry slot (see ARCHITECTURE.md).
        // The liveness lock lives on a private open file description (CLOEXEC, never handed
        // out): a descriptor shared with a child (dup, fork) must not keep us "alive".
        let lock_file = {
            use std::os::fd::AsRawFd;
            sys::reopen_fd(file.as_raw_fd())?
        };
        let mut reg = None;
        let mut prev_dead = None;
        // First pass: slots closed cleanly or repaired (FREE). A slot still registered to a
        // dead process is left to recovery (below, or by anyone), which releases what that
        // process held before it frees the slot; only when every slot is such a one does the
        // second pass take it over, releasing the dead holder's messages itself.
        'passes: for pass in 0..2 {
            for i in 0..g.participants {
                if !sys::try_lock_participant(&lock_file, i)? {
                    continue;
                }
                let p = &parts[i as usize];
                // Acquire/Release: our registration happens after the previous holder's last
                // writes, and before any claim tagged with the new generation is seen.
                let st = p.state.load(Ordering::Acquire);
                if pstate::status(st) == pstate::ALIVE {
                    if pass == 0 {
                        sys::unlock_participant(&lock_file, i);
                        continue;
                    }
                    // Registered and unlocked: its holder died, unnoticed so far.
                    prev_dead = Some((i, pstate::gen(st)));
                }
                let gen = pstate::gen(st).wrapping_add(1).max(1);
                p.state
                    .store(pstate::pack(gen, pstate::ALIVE), Ordering::Release);
                p.pid.store(u64::from(sys::pid()), Ordering::Relaxed);
                let stale = p.waiting.swap(0, Ordering::AcqRel);
                if stale > 0 {
                    hdr.wake.0.waiters.fetch_sub(stale as u32, Ordering::AcqRel);
                }
                reg = Some((i, gen));
                break 'passes;
            }
        }
        let Some((index, gen)) = reg else {
            return Err(Error::ParticipantLimitReached {
                max_participants: g.participants,
            });
        };
        let inner = Inner {
            keys: (hdr.hash_k0.load(r), hdr.hash_k1.load(r)),
            nonce: hdr.nonce.load(r),
            base_ms,
            wait_ms,
            max_message_size: max_message_size as u32,
            created_wall_ms: hdr.created_wall_ms.load(r),
            caps: classes,
            cursor: AtomicU64::new(sys::random_u64().unwrap_or(0)),
            view,
            dedup: dedup_cfg,
            dedup_interval_ms,
            source: path
                .as_ref()
                .and_then(|p| std::fs::canonicalize(p).ok())
                .map(|p| p.into_os_string().into_encoded_bytes())
                .filter(|p| p.len() <= MAX_REDRIVE_PATH)
                .unwrap_or_default(),
            no_policy: AtomicU64::new(u64::MAX),
            dlq: std::sync::Mutex::new(None),
            index,
            me: owner::code(index, gen),
            file,
            lock_file,
            map,
            path,
        };
        let q = Queue {
            inner: Arc::new(inner),
        };
        let inner = &*q.inner;
        let a = q.arena();
        if rebased {
            // After a reboot no receiver of the old boot holds anything.
            recovery::release_where(&a, inner, inner.me, &|_| true).map_err(|f| fault(f, inner))?;
        } else if let (Some(dead), true) = (prev_dead, recovery::release_on_death(&a)) {
            recovery::release_held(&a, inner, inner.me, &[dead]).map_err(|f| fault(f, inner))?;
        }
        // Repair what dead participants left behind (half-made sends, held messages, claims,
        // lost hints).
        q.recover()?;
        Ok(q)
    }

    fn arena(&self) -> Arena<'_> {
        self.inner.view
    }

    /// The file path, if the queue has one.
    pub fn path(&self) -> Option<&Path> {
        self.inner.path.as_deref()
    }

    /// Sends one message (S1–S8, M1).
    pub fn send(&self, msg: &SendMessage<'_>) -> Result<SendResult> {
        let group_id = msg.group_id.ok_or(Error::MissingParameter {
            parameter: "MessageGroupId",
        })?;
        self.send_checked(group_id, msg)
    }

    fn send_checked(&self, group_id: &str, msg: &SendMessage<'_>) -> Result<SendResult> {
        let inner = &*self.inner;
        if let Some(d) = msg.delay_seconds.filter(|&d| d != 0) {
            return Err(Error::invalid(
                "DelaySeconds",
                format!("Value {d} for parameter DelaySeconds is invalid. Reason: The request include parameter that is not valid for this queue type."),
            ));
        }
        validate::id("MessageGroupId", group_id)?;
        if let Some(d) = msg.dedup_id {
            validate::id("MessageDeduplicationId", d)?;
        }
        match msg.dedup_id {
            Some(d) if inner.dedup == Deduplication::Off => {
                return Err(Error::invalid(
                    "MessageDeduplicationId",
                    format!("Value {d} for parameter MessageDeduplicationId is invalid. Reason: The request include parameter that is not valid for this queue type (its deduplication is off)."),
                ))
            }
            None if inner.needs_dedup_id() => return Err(missing_dedup_id()),
            _ => {}
        }
        validate::body(msg.body)?;
        if msg.attributes.len() > MAX_ATTRIBUTES {
            return Err(Error::invalid(
                "MessageAttributes",
                "Number of message attributes cannot exceed 10.",
            ));
        }
        let mut size = msg.body.len();
        for (i, a) in msg.attributes.iter().enumerate() {
            validate::attribute(a.name, a.data_type, a.value)?;
            if msg.attributes[..i].iter().any(|b| b.name == a.name) {
                return Err(Error::invalid(
                    "MessageAttributes",
                    format!("Message attribute name '{}' is repeated.", a.name),
                ));
            }
            size += a.name.len() + a.data_type.len() + a.value.len();
        }
        if size > inner.max_message_size as usize {
            return Err(Error::invalid(
                "MessageBody",
                format!(
                    "One or more parameters cannot be validated. Reason: Message must be shorter than {} bytes.",
                    inner.max_message_size
                ),
            ));
        }
        // Pieces copied back to back into the slot: dedup id, per attribute a frame of
        // [name_len:u16][type_len:u16][value_len:u32] then the three strings, then the body.
        let mut frames = [[0u8; ATTRIBUTE_FRAMING]; MAX_ATTRIBUTES];
        for (f, a) in frames.iter_mut().zip(msg.attributes) {
            f[0..2].copy_from_slice(&(a.name.len() as u16).to_le_bytes());
            f[2..4].copy_from_slice(&(a.data_type.len() as u16).to_le_bytes());
            f[4..8].copy_from_slice(&(a.value.len() as u32).to_le_bytes());
        }
        let generated;
        let dedup: &[u8] = match msg.dedup_id {
            Some(d) => d.as_bytes(),
            None if inner.dedup != Deduplication::Off => {
                // D5: SHA-256 of the body only (attributes excluded), stored as the message's
                // dedup id.
                generated = content_dedup_id(msg.body.as_bytes());
                &generated
            }
            None => &[],
        };
        let mut pieces: [&[u8]; 4 * MAX_ATTRIBUTES] = [&[]; 4 * MAX_ATTRIBUTES];
        let mut n = 0;
        let mut attr_len = 0;
        for (f, a) in frames.iter().zip(msg.attributes) {
            for p in [&f[..], a.name.as_bytes(), a.data_type.as_bytes(), a.value] {
                pieces[n] = p;
                attr_len += p.len();
                n += 1;
            }
        }
        self.send_parts(
            group_id.as_bytes(),
            &[],
            dedup,
            &pieces[..n],
            attr_len,
            msg.body.as_bytes(),
            0,
            0,
        )
    }

    /// Enqueues a validated message from its pieces: dead-letter source, dedup id (also the
    /// dedup key when the queue deduplicates), attribute pieces, body.
    #[allow(clippy::too_many_arguments)]
    fn send_parts(
        &self,
        group_id: &[u8],
        source: &[u8],
        dedup: &[u8],
        attr_pieces: &[&[u8]],
        attr_len: usize,
        body: &[u8],
        flags: u8,
        prior_receives: u32,
    ) -> Result<SendResult> {
        let inner = &*self.inner;
        let mut parts: [&[u8]; 3 + 4 * MAX_ATTRIBUTES] = [&[]; 3 + 4 * MAX_ATTRIBUTES];
        parts[0] = source;
        parts[1] = dedup;
        let mut n = 2;
        for p in attr_pieces {
            parts[n] = p;
            n += 1;
        }
        parts[n] = body;
        n += 1;
        let stored = source.len() + dedup.len() + attr_len + body.len();
        let class = inner
            .caps
            .iter()
            .position(|&(cap, _)| cap as usize >= stored)
            .ok_or(Error::Corrupted {
                what: "no size class fits a valid message",
            })?;
        let out = Outgoing {
            class,
            // Relaxed: a process-local spreading hint.
            cursor: inner.cursor.fetch_add(1, Ordering::Relaxed),
            hash: hash_id(inner.keys, group_id),
            group_id,
            lens: words::pack_lens(body.len(), attr_len, dedup.len(), flags),
            parts: &parts[..n],
            dedup: match inner.dedup {
                Deduplication::Off => None,
                Deduplication::Queue => Some(dedup::Key {
                    hash: hash_dedup(inner.keys, &[], dedup),
                    dedup,
                    group: &[],
                }),
                Deduplication::MessageGroup => Some(dedup::Key {
                    hash: hash_dedup(inner.keys, group_id, dedup),
                    dedup,
                    group: group_id,
                }),
            },
            source_len: source.len() as u8,
            prior_receives,
        };
        let sent = match send::send(&self.arena(), inner, inner.me, &out) {
            // Slots claimed by producers that died, and messages past their retention
            // period, are reclaimed by recovery (and its sweep): run it before reporting the
            // class full.
            Err(Fault::ClassFull(_)) if self.recover().is_ok() => {
                send::send(&self.arena(), inner, inner.me, &out)
            }
            r => r,
        }
        .map_err(|f| fault(f, inner))?;
        if !sent.duplicate {
            if let Ok((_, slot)) = self.arena().locate(sent.idx) {
                // Relaxed: process-local hint. Next time, start just past the slot that was
                // free.
                inner.cursor.store(slot as u64 + 1, Ordering::Relaxed);
            }
        }
        Ok(SendResult {
            message_id: self.message_id(sent.idx, sent.inc),
            sequence_number: (u128::from(sent.seq_hi) << 64) | u128::from(sent.pos),
            duplicate: sent.duplicate,
        })
    }

    fn message_id(&self, idx: u32, inc: u32) -> MessageId {
        MessageId((u128::from(self.inner.nonce) << 64) | (u128::from(idx) << 32) | u128::from(inc))
    }

    /// Sends up to 10 messages (S11–S13). Request-level errors reject the whole batch; other
    /// failures are reported per entry; entries of one group are enqueued in order.
    pub fn send_batch(
        &self,
        entries: &[BatchEntry<'_, SendMessage<'_>>],
    ) -> Result<Vec<BatchResult<SendResult>>> {
        validate::batch_ids(entries.iter().map(|e| e.id))?;
        let mut total = 0;
        for e in entries {
            if e.entry.group_id.is_none() {
                return Err(Error::invalid(
                    "MessageGroupId",
                    "The request must contain the parameter MessageGroupId.",
                ));
            }
            // S12: a missing dedup id rejects the whole batch.
            if e.entry.dedup_id.is_none() && self.inner.needs_dedup_id() {
                return Err(missing_dedup_id());
            }
            total += e.entry.body.len()
                + e.entry
                    .attributes
                    .iter()
                    .map(|a| a.name.len() + a.data_type.len() + a.value.len())
                    .sum::<usize>();
        }
        if total > 1_048_576 {
            return Err(Error::BatchRequestTooLong { bytes: total });
        }
        Ok(entries
            .iter()
            .map(|e| BatchResult {
                id: e.id.to_owned(),
                result: self.send(&e.entry),
            })
            .collect())
    }

    fn receive_params(&self, opts: &ReceiveOptions) -> Result<(usize, u64, u64)> {
        if !(1..=10).contains(&opts.max_messages) {
            return Err(Error::invalid(
                "MaxNumberOfMessages",
                format!("Value {} for parameter MaxNumberOfMessages is invalid. Reason: Must be between 1 and 10, if provided.", opts.max_messages),
            ));
        }
        let vt = match opts.visibility_timeout {
            Some(d) if d > MAX_VISIBILITY_TIMEOUT => {
                return Err(Error::invalid(
                    "VisibilityTimeout",
                    "Must be between 0 and 43200 seconds.",
                ))
            }
            Some(d) => ms(d),
            None => self.default_vt_ms(),
        };
        let wait = match opts.wait_time {
            Some(d) if d > MAX_WAIT_TIME => {
                return Err(Error::invalid(
                    "WaitTimeSeconds",
                    "Must be between 0 and 20 seconds.",
                ))
            }
            Some(d) => ms(d),
            None => self.inner.wait_ms,
        };
        Ok((opts.max_messages as usize, vt, wait))
    }

    /// Receives up to `max_messages` messages (R1–R10), waiting up to the wait time for the
    /// first one.
    pub fn receive(&self, opts: &ReceiveOptions) -> Result<Vec<Message>> {
        let mut buf = ReceiveBuffer::new();
        self.receive_into(opts, &mut buf)?;
        buf.msgs.truncate(buf.len);
        Ok(buf.msgs)
    }

    /// A receive with a `ReceiveRequestAttemptId` (R11): retried with the same id within
    /// 5 minutes, it returns the same messages with the same receipt handles and restarts
    /// their visibility timeout, if none of them was deleted, had its visibility changed or
    /// timed out since; otherwise it is a fresh receive (recorded under the id in turn). A
    /// consumer that crashed between receiving and recording its batch gets the batch back at
    /// once. The receive count does not grow on a replay. The id: 1–128 characters of
    /// alphanumerics and punctuation.
    pub fn receive_with_attempt_id(
        &self,
        opts: &ReceiveOptions,
        attempt_id: &str,
    ) -> Result<Vec<Message>> {
        let mut buf = ReceiveBuffer::new();
        self.receive_with_attempt_id_into(opts, attempt_id, &mut buf)?;
        buf.msgs.truncate(buf.len);
        Ok(buf.msgs)
    }

    /// Like [`Queue::receive_with_attempt_id`], into reusable storage.
    pub fn receive_with_attempt_id_into(
        &self,
        opts: &ReceiveOptions,
        attempt_id: &str,
        buf: &mut ReceiveBuffer,
    ) -> Result<usize> {
        let (_, vt, _) = self.receive_params(opts)?;
        validate::id("ReceiveRequestAttemptId", attempt_id)?;
        let inner = &*self.inner;
        let mut key = [0u8; 1 + MAX_ID_LEN];
        key[0] = b'A';
        key[1..1 + attempt_id.len()].copy_from_slice(attempt_id.as_bytes());
        let hash = hash_id(inner.keys, &key[..1 + attempt_id.len()]);
        let a = self.arena();
        if let Some(rec) = attempt::find(&a, inner.now_ms(), hash, attempt_id.as_bytes()) {
            buf.len = 0;
            let nonce = inner.nonce;
            let created = inner.created_wall_ms;
            let mut bad = None;
            let mut new = rec;
            let mut k = 0;
            let mut sink = |t: &Taken<'_>| {
                if let Err(e) = fill(buf.next_slot(), t, nonce, created) {
                    bad = Some(e);
                }
                if k < new.vis.len() {
                    new.vis[k] = t.vis;
                    k += 1;
                }
            };
            let replayed = receive::replay(&a, inner, inner.me, &rec, vt, &mut sink)
                .map_err(|f| fault(f, inner))?;
            if let Some(what) = bad {
                return Err(Error::Corrupted { what });
            }
            if replayed {
                // The deadlines moved: record them, so a further retry replays too.
                new.vt_ms = vt;
                attempt::record(&a, inner, inner.me, hash, attempt_id.as_bytes(), &new);
                return Ok(buf.len);
            }
        }
        let n = self.receive_into(opts, buf)?;
        if n > 0 {
            let mut rec = attempt::Record {
                vt_ms: vt,
                count: n.min(attempt::MAX_MESSAGES),
                refs: [0; attempt::MAX_MESSAGES],
                vis: [0; attempt::MAX_MESSAGES],
            };
            for (k, m) in buf
                .messages()
                .iter()
                .take(attempt::MAX_MESSAGES)
                .enumerate()
            {
                let h = &m.receipt_handle;
                rec.refs[k] = (u64::from(h.inc) << 32) | u64::from(h.idx);
                rec.vis[k] = buf.vis[k];
            }
            attempt::record(&a, inner, inner.me, hash, attempt_id.as_bytes(), &rec);
        }
        Ok(n)
    }

    /// Like [`Queue::receive`], into reusable storage (no allocation once warm).
    pub fn receive_into(&self, opts: &ReceiveOptions, buf: &mut ReceiveBuffer) -> Result<usize> {
        let (max, vt, wait) = self.receive_params(opts)?;
        buf.len = 0;
        let n = self.try_receive(max, vt, buf)?;
        if n > 0 || wait == 0 {
            return Ok(n);
        }
        let inner = &*self.inner;
        let hdr = inner.view.hdr;
        let deadline = inner.now_ms() + wait;
        let ring = ready::ring(&self.arena());
        loop {
            // Spin briefly: a message often arrives within microseconds.
            for _ in 0..SPIN_ROUNDS {
                if !ring.looks_empty() {
                    break;
                }
                crate::sync::spin_hint();
            }
            let n = self.try_receive(max, vt, buf)?;
            if n > 0 {
                return Ok(n);
            }
            let now = inner.now_ms();
            if now >= deadline {
                return Ok(0);
            }
            let bell = doorbell::begin_wait(&self.arena(), inner.index as usize);
            let n = self.try_receive(max, vt, buf);
            if matches!(n, Ok(0)) {
                // Relaxed: a sleep bound only.
                let ne = hdr.next_expiry.0.load(Ordering::Relaxed);
                let mut t = deadline - now;
                if ne > now {
                    t = t.min(ne - now);
                } else {
                    t = t.min(1);
                }
                // Wake for the liveness check too: a dead receiver's messages are due back.
                let cap = if recovery::release_on_death(&self.arena()) {
                    recovery::LIVENESS_PERIOD_MS
                } else {
                    ready::SWEEP_PERIOD_MS
                };
                t = t.clamp(1, cap);
                accounting::count(&self.arena(), inner.me, counter::WAITS, 1);
                sys::futex_wait(&hdr.wake.0.doorbell, bell, t);
            }
            doorbell::end_wait(&self.arena(), inner.index as usize);
            let n = n?;
            if n > 0 {
                return Ok(n);
            }
        }
    }

    /// The live default visibility timeout (clamped: the arena is untrusted).
    fn default_vt_ms(&self) -> u64 {
        // Relaxed: a live setting; a receive racing with its change may use either value.
        let v = self
            .inner
            .view
            .hdr
            .visibility_timeout_ms
            .load(Ordering::Relaxed);
        v.min(ms(MAX_VISIBILITY_TIMEOUT))
    }

    /// Room left under the in-flight limit (R8), correcting the count by a census (at most
    /// once a second) when it says there is none.
    fn fresh_budget(&self) -> usize {
        let a = self.arena();
        // Relaxed: a setting fixed at creation.
        let limit = a.hdr.max_in_flight.load(Ordering::Relaxed);
        if limit >= u64::from(a.total) {
            return usize::MAX; // never reached: cost nothing
        }
        let room = limit.saturating_sub(accounting::in_flight(&a));
        if room > 0 {
            return room as usize;
        }
        let now = self.inner.now_ms();
        let c = &a.hdr.census.0;
        // Relaxed load, AcqRel CAS: one census per second among all participants.
        let last = c.last_ms.load(Ordering::Relaxed);
        if now >= last.saturating_add(1000)
            && c.last_ms
                .compare_exchange(last, now, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
        {
            accounting::in_flight_census(&a);
            return limit.saturating_sub(accounting::in_flight(&a)) as usize;
        }
        0
    }

    /// The dead-letter queue and `maxReceiveCount` of the live redrive policy, if any.
    fn dead_letter(&self) -> Result<Option<(u32, u64)>> {
        let inner = &*self.inner;
        // Acquire: SYNC POINT(settings-publish) (the full read below validates).
        let c = inner.view.hdr.redrive.current.load(Ordering::Acquire);
        // Relaxed: a process-local cache of that word.
        if inner.no_policy.load(Ordering::Relaxed) == c {
            return Ok(None);
        }
        let p = settings::read(&self.arena()).map_err(|f| fault(f, inner))?;
        if p.max_receive_count == 0 {
            // Relaxed: as above.
            inner.no_policy.store(c, Ordering::Relaxed);
            return Ok(None);
        }
        Ok(Some((p.max_receive_count, p.version)))
    }

    /// The opened dead-letter queue of policy `version` (opened on first use, then cached).
    fn dead_letter_queue(&self, version: u64) -> Result<Queue> {
        let inner = &*self.inner;
        let mut cache = inner.dlq.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((v, q)) = cache.as_ref() {
            if *v == version {
                return Ok(q.clone());
            }
        }
        let p = settings::read(&self.arena()).map_err(|f| fault(f, inner))?;
        let path = PathBuf::from(std::ffi::OsStr::from_bytes(&p.path[..p.path_len]));
        let q = Queue::open_at(&path).map_err(|e| Error::DeadLetterQueue {
            path: path.clone(),
            reason: format!("cannot be opened: {e}"),
        })?;
        if q.inner.dedup == Deduplication::Off {
            return Err(Error::DeadLetterQueue {
                path,
                reason: "its deduplication is off".into(),
            });
        }
        *cache = Some((p.version, q.clone()));
        Ok(q)
    }

    /// Sends a taken message to the dead-letter queue (X1, X3, D8, M2, M4, T2).
    fn move_to(&self, dlq: &Queue, t: &Taken<'_>) -> Result<()> {
        let r = Ordering::Relaxed; // read under the group claim, after the Acquire of `vis`
        let h = t.header;
        let (body_len, attr_len, dedup_len, flags) = words::unpack_lens(h.lens.load(r));
        let (src_len, _, _) = words::unpack_group_epoch0(h.group_epoch0.load(r));
        let p = t.payload;
        let corrupt = || Error::Corrupted {
            what: "message lengths exceed the slot",
        };
        if src_len + dedup_len + attr_len + body_len != p.len() {
            return Err(corrupt());
        }
        let dedup = &p[src_len..src_len + dedup_len];
        // M2: the id stays; D8: it becomes the dedup id (a message moved before keeps the id
        // it had: its dedup id).
        let mut id_text = [0u8; 36];
        if flags & words::LENS_MOVED != 0 {
            if dedup.len() != 36 {
                return Err(corrupt());
            }
            id_text.copy_from_slice(dedup);
        } else {
            let id = self.message_id(t.idx, t.inc).to_string();
            id_text.copy_from_slice(id.as_bytes());
        }
        let attrs = &p[src_len + dedup_len..src_len + dedup_len + attr_len];
        let body = &p[src_len + dedup_len + attr_len..];
        // Measured as `send` measures it: names, types and values, without our framing.
        let size = attr_size(attrs) + body.len();
        if size > dlq.inner.max_message_size as usize {
            return Err(Error::DeadLetterQueue {
                path: dlq.path().map(Path::to_owned).unwrap_or_default(),
                reason: format!(
                    "a {size}-byte message does not fit its maximum_message_size {}",
                    dlq.inner.max_message_size
                ),
            });
        }
        let mut gid = [0u8; MAX_ID_LEN];
        let glen = group::read_id(t.group, &mut gid);
        dlq.send_parts(
            &gid[..glen],
            &self.inner.source,
            &id_text,
            &[attrs],
            attr_len,
            body,
            words::LENS_MOVED,
            t.receive_count,
        )
        .map(|_| ())
        .map_err(|e| Error::DeadLetterQueue {
            path: dlq.path().map(Path::to_owned).unwrap_or_default(),
            reason: format!("refused a moved message: {e}"),
        })
    }

    fn try_receive(&self, max: usize, vt: u64, buf: &mut ReceiveBuffer) -> Result<usize> {
        let inner = &*self.inner;
        let nonce = inner.nonce;
        let created = inner.created_wall_ms;
        let mut bad = None;
        let mut sink = |t: &Taken<'_>| {
            let k = buf.len;
            if let Err(e) = fill(buf.next_slot(), t, nonce, created) {
                bad = Some(e);
            }
            if let Some(v) = buf.vis.get_mut(k) {
                *v = t.vis;
            }
        };
        let budget = self.fresh_budget();
        let dl = self.dead_letter()?;
        let mut move_err = None;
        let mut dlq: Option<Queue> = None;
        let mut mover = |t: &Taken<'_>| -> bool {
            let Some((_, version)) = dl else { return false };
            if dlq.is_none() {
                match self.dead_letter_queue(version) {
                    Ok(q) => dlq = Some(q),
                    Err(e) => {
                        move_err = Some(e);
                        return false;
                    }
                }
            }
            let Some(q) = dlq.as_ref() else { return false };
            match self.move_to(q, t) {
                Ok(()) => true,
                Err(e) => {
                    move_err = Some(e);
                    false
                }
            }
        };
        let mut policy = receive::Policy {
            vt_ms: vt,
            fresh_budget: budget,
            dead_letter: dl.map(|(max, _)| (max, &mut mover as receive::Mover<'_>)),
        };
        let rep = receive::receive(&self.arena(), inner, inner.me, max, &mut policy, &mut sink)
            .map_err(|f| fault(f, inner))?;
        if rep.limited {
            accounting::count(&self.arena(), inner.me, counter::IN_FLIGHT_LIMIT_HITS, 1);
        }
        if let Some(what) = bad {
            return Err(Error::Corrupted { what });
        }
        if rep.taken == 0 {
            if let Some(e) = move_err {
                return Err(e);
            }
        }
        Ok(rep.taken)
    }

    fn handle(&self, h: &ReceiptHandle) -> Result<Handle> {
        if h.nonce != self.inner.nonce || h.idx >= self.inner.view.total {
            return Err(Error::ReceiptHandleIsInvalid {
                handle: h.to_string(),
            });
        }
        Ok(Handle {
            idx: h.idx,
            inc: h.inc,
            epoch: h.epoch,
        })
    }

    fn handle_fault(&self, f: Fault, h: &ReceiptHandle) -> Error {
        match f {
            Fault::Expired => Error::ReceiptHandleExpired {
                handle: h.to_string(),
            },
            f => fault(f, &self.inner),
        }
    }

    /// Deletes the message received with `handle` (H1–H5).
    pub fn delete(&self, handle: &ReceiptHandle) -> Result<()> {
        let h = self.handle(handle)?;
        let inner = &*self.inner;
        handle::delete(&self.arena(), inner, inner.me, h).map_err(|f| self.handle_fault(f, handle))
    }

    /// Deletes by the text form of a receipt handle.
    pub fn delete_str(&self, handle: &str) -> Result<()> {
        self.delete(&handle.parse()?)
    }

    /// Deletes up to 10 messages by handle text (H8).
    pub fn delete_batch(&self, entries: &[BatchEntry<'_, &str>]) -> Result<Vec<BatchResult<()>>> {
        validate::batch_ids(entries.iter().map(|e| e.id))?;
        Ok(entries
            .iter()
            .map(|e| BatchResult {
                id: e.id.to_owned(),
                result: self.delete_str(e.entry),
            })
            .collect())
    }

    /// Changes the visibility timeout of the message received with `handle` to `timeout` from
    /// now (H6, V1); zero makes it visible at once.
    pub fn change_visibility(&self, handle: &ReceiptHandle, timeout: Duration) -> Result<()> {
        if timeout > MAX_VISIBILITY_TIMEOUT {
            return Err(Error::invalid(
                "VisibilityTimeout",
                "Must be between 0 and 43200 seconds.",
            ));
        }
        let h = self.handle(handle)?;
        let inner = &*self.inner;
        handle::change_visibility(&self.arena(), inner, inner.me, h, ms(timeout))
            .map_err(|f| self.handle_fault(f, handle))
    }

    /// Changes visibility by the text form of a receipt handle.
    pub fn change_visibility_str(&self, handle: &str, timeout: Duration) -> Result<()> {
        self.change_visibility(&handle.parse()?, timeout)
    }

    /// Changes the visibility of up to 10 messages (H8).
    pub fn change_visibility_batch(
        &self,
        entries: &[BatchEntry<'_, (&str, Duration)>],
    ) -> Result<Vec<BatchResult<()>>> {
        validate::batch_ids(entries.iter().map(|e| e.id))?;
        Ok(entries
            .iter()
            .map(|e| BatchResult {
                id: e.id.to_owned(),
                result: self.change_visibility_str(e.entry.0, e.entry.1),
            })
            .collect())
    }

    /// Deletes every message, visible or in flight (P1). Returns how many.
    pub fn purge(&self) -> Result<u64> {
        let inner = &*self.inner;
        handle::purge(&self.arena(), inner, inner.me).map_err(|f| fault(f, inner))
    }

    /// Repairs what dead participants left behind (also done on open, and by idle receivers).
    pub fn recover(&self) -> Result<recovery::Recovered> {
        let inner = &*self.inner;
        recovery::recover(&self.arena(), inner, inner.me).map_err(|f| fault(f, inner))
    }

    /// Changes the settings SQS lets you change on a queue in use (visibility timeout,
    /// delay, retention, content-based dedup, redrive policy), for every process at once.
    /// Nothing is changed if any value is invalid. A delay change is retroactive (L1); a
    /// retention change applies to messages already queued (Q5, T1).
    pub fn set_attributes(&self, s: &QueueSettings) -> Result<()> {
        let inner = &*self.inner;
        let hdr = inner.view.hdr;
        if s.visibility_timeout
            .is_some_and(|d| d > MAX_VISIBILITY_TIMEOUT)
        {
            return Err(Error::InvalidConfig {
                setting: "visibility_timeout",
                reason: "at most 12 hours".into(),
            });
        }
        if s.delay.is_some_and(|d| d > MAX_DELAY) {
            return Err(Error::InvalidConfig {
                setting: "delay",
                reason: "at most 15 minutes".into(),
            });
        }
        if s.message_retention_period
            .is_some_and(|d| d < Duration::from_millis(1) || d > MAX_RETENTION)
        {
            return Err(Error::InvalidConfig {
                setting: "message_retention_period",
                reason: "1 ms to 14 days".into(),
            });
        }
        if s.content_based_deduplication == Some(true) && inner.dedup == Deduplication::Off {
            return Err(Error::AttributeNotMutable {
                name: "ContentBasedDeduplication (the queue was created with deduplication off)"
                    .into(),
            });
        }
        let redrive = match &s.redrive_policy {
            Some(Some(p)) => Some(Some(check_dead_letter(
                p,
                Some(inner.nonce),
                inner.max_message_size,
            )?)),
            Some(None) => Some(None),
            None => None,
        };
        // Relaxed stores: single-word live settings; each operation reads each once.
        if let Some(d) = s.visibility_timeout {
            hdr.visibility_timeout_ms.store(ms(d), Ordering::Relaxed);
        }
        if let Some(d) = s.delay {
            hdr.delay_ms.store(ms(d), Ordering::Relaxed);
        }
        if let Some(d) = s.message_retention_period {
            hdr.retention_ms.store(ms(d), Ordering::Relaxed);
        }
        if let Some(on) = s.content_based_deduplication {
            hdr.content_based_dedup
                .store(u64::from(on), Ordering::Relaxed);
        }
        if let Some(r) = redrive {
            let (max, path) = match &r {
                Some((path, _)) => (
                    s.redrive_policy
                        .as_ref()
                        .and_then(|p| p.as_ref())
                        .map_or(0, |p| p.max_receive_count),
                    path.as_os_str().as_encoded_bytes(),
                ),
                None => (0, &[][..]),
            };
            settings::write(&self.arena(), inner, inner.me, max, path)
                .map_err(|f| fault(f, inner))?;
        }
        if s.delay.is_some() || s.message_retention_period.is_some() {
            // Messages may be ready (or gone) at other times now: ask the next receiver for a
            // full sweep, and wake every sleeper to recompute its sleep.
            // Release: pairs with `maybe_sweep`'s Acquire load.
            hdr.next_expiry.0.store(0, Ordering::Release);
            // Release: a woken receiver's Acquire load of the doorbell sees the change.
            hdr.wake.0.doorbell.fetch_add(1, Ordering::Release);
            sys::futex_wake(&hdr.wake.0.doorbell, u32::MAX);
        }
        Ok(())
    }

    /// Changes one setting by its SQS attribute name, with SQS's units and text values
    /// (`VisibilityTimeout`, `DelaySeconds`, `MessageRetentionPeriod` in seconds; shmfifo's
    /// millisecond forms `VisibilityTimeoutMs`, `DelayMs`, `MessageRetentionPeriodMs`;
    /// `ContentBasedDeduplication` `true`/`false`; `RedrivePolicy` as SQS's JSON, with
    /// `deadLetterTargetArn` a queue name or path, or empty to remove it). Settings fixed at
    /// creation give [`Error::AttributeNotMutable`]; unknown names
    /// [`Error::InvalidAttributeName`].
    pub fn set_attribute(&self, name: &str, value: &str) -> Result<()> {
        let bad = |why: &str| {
            Error::invalid(
                "Attributes",
                format!("Invalid value for the parameter {name}. Reason: {why}"),
            )
        };
        let number = |scale: u64| -> Result<Duration> {
            let v: u64 = value
                .trim()
                .parse()
                .map_err(|_| bad("must be a non-negative integer"))?;
            Ok(Duration::from_millis(v.saturating_mul(scale)))
        };
        let s = QueueSettings::new();
        let s = match name {
            "VisibilityTimeout" => s.visibility_timeout(number(1000)?),
            "VisibilityTimeoutMs" => s.visibility_timeout(number(1)?),
            "DelaySeconds" => s.delay(number(1000)?),
            "DelayMs" => s.delay(number(1)?),
            "MessageRetentionPeriod" => s.message_retention_period(number(1000)?),
            "MessageRetentionPeriodMs" => s.message_retention_period(number(1)?),
            "ContentBasedDeduplication" => match value.trim() {
                "true" => s.content_based_deduplication(true),
                "false" => s.content_based_deduplication(false),
                _ => return Err(bad("must be true or false")),
            },
            "RedrivePolicy" if value.trim().is_empty() => s.redrive_policy(None),
            "RedrivePolicy" => {
                let p = crate::config::parse_redrive_policy(value).map_err(|why| bad(&why))?;
                s.redrive_policy(Some(p))
            }
            "MaximumMessageSize"
            | "ReceiveMessageWaitTimeSeconds"
            | "DeduplicationScope"
            | "FifoQueue"
            | "FifoThroughputLimit"
            | "MaxInFlight" => {
                return Err(Error::AttributeNotMutable {
                    name: name.to_owned(),
                })
            }
            _ => {
                return Err(Error::InvalidAttributeName {
                    name: name.to_owned(),
                })
            }
        };
        self.set_attributes(&s)
    }

    /// The live redrive policy (X1), if any.
    pub fn redrive_policy(&self) -> Result<Option<RedrivePolicy>> {
        let p = settings::read(&self.arena()).map_err(|f| fault(f, &self.inner))?;
        Ok((p.max_receive_count > 0).then(|| RedrivePolicy {
            dead_letter_queue: String::from_utf8_lossy(&p.path[..p.path_len]).into_owned(),
            max_receive_count: p.max_receive_count,
        }))
    }

    /// Moves messages from this (dead-letter) queue back to their source queues, or to
    /// `opts.destination` (X6): oldest first (each group in order, groups in ready order), as
    /// new messages (new message id, sequence number, receive count and retention, M2), at
    /// most `max_per_second`, until no message is visible here, `limit` is reached or
    /// `cancel` is set. Each message is sent before it is deleted here: a redrive killed in
    /// between leaves a copy here that becomes visible again after the visibility timeout;
    /// moving it again is a duplicate (dropped) in a destination that deduplicates and was
    /// sent it within its dedup interval, since the dedup id sent is this queue's message id.
    pub fn redrive(&self, opts: &RedriveOptions) -> Result<RedriveReport> {
        let mut rep = RedriveReport::default();
        let fixed = opts.destination.as_deref().map(queue_path).transpose()?;
        let mut dests: std::collections::HashMap<PathBuf, Queue> = Default::default();
        let started = Instant::now();
        let mut buf = ReceiveBuffer::new();
        loop {
            let want = opts
                .limit
                .map_or(10, |l| l.saturating_sub(rep.moved).min(10)) as u32;
            if want == 0 {
                return Ok(rep);
            }
            let ro = ReceiveOptions::max(want)
                .visibility_timeout(Duration::from_secs(30))
                .wait(Duration::ZERO);
            if self.receive_into(&ro, &mut buf)? == 0 {
                return Ok(rep);
            }
            for m in buf.messages() {
                if let Some(rate) = opts.max_per_second.filter(|&r| r > 0) {
                    let due = Duration::from_secs_f64(rep.moved as f64 / f64::from(rate));
                    if let Some(wait) = due.checked_sub(started.elapsed()) {
                        std::thread::sleep(wait);
                    }
                }
                // Checked after the rate wait: a cancel that came during it stops before this
                // message moves.
                if opts
                    .cancel
                    .as_ref()
                    .is_some_and(|c| c.load(std::sync::atomic::Ordering::Relaxed))
                {
                    // Put back what this batch has not moved.
                    let _ = self.change_visibility(&m.receipt_handle, Duration::ZERO);
                    rep.cancelled = true;
                    continue;
                }
                let Some(path) = fixed
                    .clone()
                    .or_else(|| m.dead_letter_source.as_deref().map(PathBuf::from))
                else {
                    rep.skipped += 1;
                    continue;
                };
                let dest = match dests.get(&path) {
                    Some(q) => q.clone(),
                    None => {
                        let q = Queue::open_at(&path)?;
                        dests.insert(path.clone(), q.clone());
                        q
                    }
                };
                let attrs: Vec<MessageAttribute<'_>> = m
                    .attributes
                    .iter()
                    .map(|a| MessageAttribute {
                        name: &a.name,
                        data_type: &a.data_type,
                        value: &a.value,
                    })
                    .collect();
                let id = m.message_id.to_string();
                let mut out = SendMessage::new(&m.group_id, &m.body).attributes(&attrs);
                if dest.inner.dedup != Deduplication::Off {
                    out = out.dedup_id(&id);
                }
                dest.send(&out)?;
                self.delete(&m.receipt_handle)?;
                rep.moved += 1;
            }
            if rep.cancelled {
                return Ok(rep);
            }
        }
    }

    /// The queue's lifetime counters, summed over every participant that ever used it. Cheap
    /// (one load per counter per participant slot) and safe while the queue is in use.
    pub fn counters(&self) -> Counters {
        Counters::from_array(&accounting::counters(&self.arena()))
    }

    /// Reads up to `max` messages that a receive could return now (each group's visible
    /// prefix, groups in table order), changing nothing: no receive count, no visibility,
    /// no receipt. A snapshot: another process may receive them at once.
    pub fn peek(&self, max: usize) -> Result<Vec<PeekedMessage>> {
        let inner = &*self.inner;
        let mut m = Message::default();
        let (out, bad) = inspect::peek(&self.arena(), inner, max, &mut |t| {
            fill(&mut m, t, inner.nonce, inner.created_wall_ms)?;
            Ok(PeekedMessage {
                message_id: m.message_id,
                body: std::mem::take(&mut m.body),
                group_id: std::mem::take(&mut m.group_id),
                dedup_id: m.dedup_id.take(),
                sequence_number: m.sequence_number,
                sent_timestamp: m.sent_timestamp,
                first_receive_timestamp: m.first_receive_timestamp,
                receive_count: m.receive_count,
                attributes: std::mem::take(&mut m.attributes),
                dead_letter_source: m.dead_letter_source.take(),
            })
        })
        .map_err(|f| fault(f, inner))?;
        match bad {
            // A copy that failed to parse although its message was unchanged: corruption.
            Some(what) if out.is_empty() => Err(Error::Corrupted { what }),
            _ => Ok(out),
        }
    }

    /// A read-only snapshot of everything about the queue (what `shmfifo stat` prints):
    /// messages by state, active and locked groups with the `top` largest by backlog,
    /// participants alive and dead, slot use by size class, lifetime counters. It scans every
    /// slot and walks every group's list: O(capacity + groups), for operators, not hot paths.
    pub fn inspect(&self, top: usize) -> Result<Inspection> {
        let inner = &*self.inner;
        let a = self.arena();
        // One scan of the slots: messages by state, per size class and in total.
        let mut size_classes = Vec::new();
        let c = accounting::counts_per_class(&a, inner, &mut |cl, u| {
            let slots = cl.headers.len() as u32;
            let used = u.published() as u32;
            let (sending, deleted) = (u.sending as u32, u.deleted as u32);
            size_classes.push(SizeClassUse {
                payload_bytes: cl.cap,
                slot_bytes: (std::mem::size_of::<MsgHeader>() + cl.stride) as u64,
                slots,
                free: slots.saturating_sub(used + sending + deleted),
                sending,
                used,
                deleted,
            });
        });
        let groups = inspect::groups(&a, inner, top).map_err(|f| fault(f, inner))?;
        let mut id = [0u8; MAX_ID_LEN];
        let largest_groups = groups
            .largest
            .iter()
            .map(|g| {
                let n = a.group(g.index).map_or(0, |e| group::read_id(e, &mut id));
                GroupInfo {
                    group_id: String::from_utf8_lossy(&id[..n]).into_owned(),
                    visible: g.visible,
                    in_flight: g.in_flight,
                    delayed: g.delayed,
                    sending: g.sending,
                    locked: g.locked,
                }
            })
            .collect();
        let dead = recovery::dead_participants(&a, inner, inner.me);
        let mut participants = Vec::new();
        for (i, p) in a.parts.iter().enumerate() {
            // Relaxed: a snapshot for display.
            let st = p.state.load(Ordering::Relaxed);
            if pstate::status(st) != pstate::ALIVE {
                continue;
            }
            let generation = pstate::gen(st);
            participants.push(ParticipantInfo {
                slot: i as u32,
                generation,
                // Relaxed: display only.
                pid: p.pid.load(Ordering::Relaxed) as u32,
                alive: !dead.contains(&(i as u32, generation)),
                is_self: owner::code(i as u32, generation) == inner.me,
            });
        }
        let counters = self.counters();
        Ok(Inspection {
            attributes: self.attributes_from(&c, &counters),
            messages: MessageCounts {
                visible: c.visible,
                in_flight: c.in_flight,
                delayed: c.delayed,
                sending: c.sending,
                deleted: c.deleted,
            },
            active_groups: groups.active,
            locked_groups: groups.locked,
            largest_groups,
            participants,
            size_classes,
            counters,
        })
    }

    /// Settings and approximate counters (C1). Counting scans every slot.
    pub fn attributes(&self) -> QueueAttributes {
        self.attributes_from(
            &accounting::counts(&self.arena(), &*self.inner),
            &self.counters(),
        )
    }

    /// The attributes, with the message counts and lifetime counters already read.
    fn attributes_from(&self, c: &accounting::Counts, counters: &Counters) -> QueueAttributes {
        let inner = &*self.inner;
        QueueAttributes {
            approximate_number_of_messages: c.visible,
            approximate_number_of_messages_not_visible: c.in_flight,
            approximate_number_of_messages_delayed: c.delayed,
            visibility_timeout: Duration::from_millis(self.default_vt_ms()),
            // Relaxed: live settings and statistics.
            delay: Duration::from_millis(inner.view.hdr.delay_ms.load(Ordering::Relaxed)),
            message_retention_period: Duration::from_millis(
                inner.view.hdr.retention_ms.load(Ordering::Relaxed),
            ),
            redrive_policy: self.redrive_policy().ok().flatten(),
            max_in_flight: inner.view.hdr.max_in_flight.load(Ordering::Relaxed),
            release_on_death: recovery::release_on_death(&self.arena()),
            in_flight_count: accounting::in_flight(&self.arena()),
            in_flight_limit_hits: counters.in_flight_limit_hits,
            moved_to_dead_letter: counters.moved_to_dead_letter,
            retention_expiries: counters.retention_expiries,
            receive_message_wait_time: Duration::from_millis(inner.wait_ms),
            maximum_message_size: inner.max_message_size,
            created_timestamp: inner.created_wall_ms,
            fifo_queue: true,
            // Relaxed: a gauge.
            active_groups: inner.view.hdr.active_groups.0.load(Ordering::Relaxed),
            max_groups: inner.view.max_groups,
            max_participants: inner.view.parts.len() as u32,
            size_classes: inner.caps.clone(),
            arena_bytes: inner.map.len() as u64,
            deduplication: inner.dedup,
            // Relaxed: a live setting.
            content_based_deduplication: inner.view.hdr.content_based_dedup.load(Ordering::Relaxed)
                != 0,
            deduplication_interval: Duration::from_millis(inner.dedup_interval_ms),
            dedup_entries: inner.view.dedup.len() as u64,
            dedup_entries_in_use: {
                let (live, pending) = dedup::count(&self.arena(), inner.now_ms());
                live + pending
            },
        }
    }
}

/// Copies a taken message into `m`, reusing its allocations. Errors name corrupted framing.
fn fill(
    m: &mut Message,
    t: &Taken<'_>,
    nonce: u64,
    created_wall_ms: u64,
) -> std::result::Result<(), &'static str> {
    let r = Ordering::Relaxed; // read under the group claim, after the Acquire of `vis`
    let h = t.header;
    let (body_len, attr_len, dedup_len, flags) = words::unpack_lens(h.lens.load(r));
    let (src_len, _, _) = words::unpack_group_epoch0(h.group_epoch0.load(r));
    let full = t.payload;
    if src_len + dedup_len + attr_len + body_len != full.len() {
        return Err("message lengths exceed the slot");
    }
    let (src, p) = full.split_at(src_len);
    m.message_id = if flags & words::LENS_MOVED != 0 {
        // D8, M2: a dead-lettered message keeps its id, which is its dedup id.
        std::str::from_utf8(&p[..dedup_len])
            .ok()
            .and_then(MessageId::parse)
            .ok_or("moved message id")?
    } else {
        MessageId((u128::from(nonce) << 64) | (u128::from(t.idx) << 32) | u128::from(t.inc))
    };
    m.receipt_handle = ReceiptHandle {
        nonce,
        idx: t.idx,
        inc: t.inc,
        epoch: t.epoch,
    };
    // Shared bytes are copied first and the copy is validated: another process could change
    // them between a check in place and a copy. The destination's allocation is reused.
    fn set_text(dst: &mut String, src: &[u8]) -> std::result::Result<(), &'static str> {
        let mut v = std::mem::take(dst).into_bytes();
        v.clear();
        v.extend_from_slice(src);
        match String::from_utf8(v) {
            Ok(t) => {
                *dst = t;
                Ok(())
            }
            Err(e) => {
                let mut v = e.into_bytes();
                v.clear();
                *dst = String::from_utf8(v).unwrap_or_default();
                Err("message text is not UTF-8")
            }
        }
    }
    set_text(&mut m.body, &p[dedup_len + attr_len..])?;
    let mut id = [0u8; MAX_ID_LEN];
    let n = group::read_id(t.group, &mut id);
    set_text(&mut m.group_id, &id[..n])?;
    if dedup_len == 0 {
        m.dedup_id = None;
    } else {
        set_text(m.dedup_id.get_or_insert_with(String::new), &p[..dedup_len])?;
    }
    if src.is_empty() {
        m.dead_letter_source = None;
    } else {
        set_text(m.dead_letter_source.get_or_insert_with(String::new), src)?;
    }
    let seq_hi = t.group.seq_base.load(r);
    m.sequence_number = (u128::from(seq_hi) << 64) | u128::from(h.pos.load(r));
    // The enqueue's arena time on the creation's wall clock: stable across receives (M3),
    // immune to wall-clock steps after creation, within 1 ms of the wall clock otherwise.
    // Arena time 1 is the creation instant (see `now_ms`).
    m.sent_timestamp = created_wall_ms.saturating_add(h.sent.load(r).saturating_sub(1));
    m.first_receive_timestamp = h.first_recv_ms.load(r);
    m.receive_count = t.receive_count;
    let mut a = &p[dedup_len..dedup_len + attr_len];
    let mut k = 0;
    while !a.is_empty() {
        if a.len() < ATTRIBUTE_FRAMING || k >= MAX_ATTRIBUTES {
            return Err("attribute framing");
        }
        let nl = u16::from_le_bytes([a[0], a[1]]) as usize;
        let tl = u16::from_le_bytes([a[2], a[3]]) as usize;
        let vl = u32::from_le_bytes([a[4], a[5], a[6], a[7]]) as usize;
        a = &a[ATTRIBUTE_FRAMING..];
        if nl + tl + vl > a.len() {
            return Err("attribute framing");
        }
        if m.attributes.len() == k {
            m.attributes.push(ReceivedAttribute::default());
        }
        let at = &mut m.attributes[k];
        set_text(&mut at.name, &a[..nl])?;
        set_text(&mut at.data_type, &a[nl..nl + tl])?;
        at.value.clear();
        at.value.extend_from_slice(&a[nl + tl..nl + tl + vl]);
        a = &a[nl + tl + vl..];
        k += 1;
    }
    m.attributes.truncate(k);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pinned SipHash-2-4 test vector (key 00..0f, message 00..0e) from the SipHash paper:
    /// every build and process must hash group ids identically.
    #[test]
    fn siphash_test_vector() {
        let k0 = u64::from_le_bytes([0, 1, 2, 3, 4, 5, 6, 7]);
        let k1 = u64::from_le_bytes([8, 9, 10, 11, 12, 13, 14, 15]);
        let msg: Vec<u8> = (0..15).collect();
        assert_eq!(hash_id((k0, k1), &msg), 0xa129_ca61_49be_45e5);
    }
}
