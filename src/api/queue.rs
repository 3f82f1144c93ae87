//! `Queue`: the handle (its shared `Inner`: the mapping, the registration, cached settings),
//! the OS side of [`Env`], the mapping of protocol faults to errors, and the arena clock.
#![allow(unsafe_code)]

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::config::Deduplication;
use crate::error::Error;
use std::sync::atomic::AtomicU64;

use crate::protocol::segments::Segments;
use crate::protocol::{clock, live, registry, Arena, Env, Fault, Owner, WakeWord};
use crate::sys;

/// A handle on one shmfifo queue. `Send + Sync`, cheap to clone (an `Arc`); each
/// [`Queue::create`]/[`Queue::open`] registers one participant, released on the last drop.
///
/// After `fork`, a child must open the queue again rather than use the parent's handle. A child
/// forked without `exec` also inherits the handle's liveness lock, so while it keeps the
/// inherited handle the parent is never seen as dead (its claims are not taken over); children
/// that `exec` do not. A child
/// that drops the inherited handle (or exits through its destructors) releases nothing: the
/// participant stays the parent's.
#[derive(Debug, Clone)]
pub struct Queue {
    pub(super) inner: Arc<Inner>,
}

#[derive(Debug)]
pub(super) struct Inner {
    /// The truncation guard's watch of `map` and the queue's cut flag (first: the watch is
    /// dropped before `file` is closed and `map` unmapped).
    pub(super) guarded: Guarded,
    pub(super) file: File,
    /// Private open file description holding our liveness lock.
    pub(super) lock_file: File,
    pub(super) map: memmap2::MmapRaw,
    /// Points into `map` and `segs`, which live as long as `self`.
    pub(super) view: Arena<'static>,
    /// This process's mappings of the arena's added segments (layout 13).
    pub(super) segs: Box<Segments>,
    pub(super) index: u32,
    pub(super) me: Owner,
    pub(super) keys: (u64, u64),
    pub(super) nonce: u64,
    /// CLOCK_MONOTONIC ms of arena time 0 on this boot (see `Header::clock`).
    pub(super) base_ms: u64,
    pub(super) created_wall_ms: u64,
    pub(super) caps: Vec<(u32, u32)>,
    /// [`Queue::maximum_message_size_limit`], from `caps`.
    pub(super) max_message_limit: u32,
    pub(super) cursor: AtomicU64,
    pub(super) path: Option<PathBuf>,
    pub(super) dedup: Deduplication,
    /// `FifoThroughputLimit=perMessageGroupId`, fixed at creation (TP2).
    pub(super) per_group_throughput: bool,
    pub(super) dedup_interval_ms: u64,
    /// This queue's canonical path, the dead-letter source of messages it moves (X3); empty
    /// for an anonymous queue or a path longer than `MAX_REDRIVE_PATH`.
    pub(super) source: Vec<u8>,
    /// The last redrive-policy `current` word seen without a policy (a fast path).
    pub(super) no_policy: AtomicU64,
    /// Empty polls not yet added to the queue's count (see `Queue::count_empty_receive`).
    pub(super) empty_polls: AtomicU64,
    /// The dead-letter queue of the current policy, opened on first use.
    pub(super) dlq: std::sync::Mutex<Option<(u64, PathBuf, Queue)>>,
    /// Whether this handle's receives move messages past `maxReceiveCount` (X1; on unless
    /// [`Queue::set_dead_letter_on_receive`] turned it off).
    pub(super) dl_on_receive: std::sync::atomic::AtomicBool,
    /// What every dead-letter move of this handle must pass ([`Queue::set_dead_letter_check`]).
    pub(super) dl_check: std::sync::Mutex<Option<super::dead_letter::CheckFn>>,
    /// An observer's handle (`Queue::observe`): mapped read-only, no participant registered
    /// (`index` is `u32::MAX`, `me` is nobody), so nothing to deregister or unlock.
    pub(super) observer: bool,
    /// The process that registered the participant: only it releases it (see `Drop`).
    pub(super) pid: u32,
    /// The registration's generation: a release gives up that registration only, never a
    /// later one in the same slot (`registry::deregister`).
    pub(super) gen: u32,
    /// Arena time is the test clock (`Header::test_now`), fixed at creation.
    pub(super) test_clock: bool,
    /// Bodies are any bytes (`BodyMode::Binary`), fixed at creation.
    pub(super) binary: bool,
    /// This handle sends a batch's messages to one group as one pack (layout 22, stage 1b of
    /// `docs/design/packed-batches.md`): on from the start since layout 23
    /// (`Queue::set_pack_batches`).
    pub(super) packing: std::sync::atomic::AtomicBool,
}

// SAFETY: `view` only refers to the shared mapping owned by `map` (never freed before `Inner`)
// and to atomics; every access to payload bytes follows the protocol's ownership rules, which
// hold across threads exactly as across processes.
unsafe impl Send for Inner {}

// SAFETY: as above.
unsafe impl Sync for Inner {}

/// The [`Env`] of one protocol call: the clock is read at most once (the first time the
/// protocol asks) and that instant serves the whole call, as SQS stamps a request with one
/// time; the wall clock is derived from it (the creation's wall clock plus arena time, as
/// `SentTimestamp` is). Waits measure themselves with [`Env::elapsed_ms`], a fresh reading.
pub(super) struct Op<'a> {
    pub(super) inner: &'a Inner,
    now: std::cell::Cell<u64>,
    grow: bool,
}

impl<'a> Op<'a> {
    /// An operation that does not grow the arena (a full size class answers `ClassFull`).
    pub(super) fn new(inner: &'a Inner) -> Self {
        Op {
            inner,
            now: std::cell::Cell::new(0),
            grow: false,
        }
    }

    /// An operation that may grow a full size class: a send's attempt after `make_room`.
    pub(super) fn growing(inner: &'a Inner) -> Self {
        Op {
            grow: true,
            ..Self::new(inner)
        }
    }
}

impl Env for Op<'_> {
    fn refresh_now(&self) {
        self.now.set(0);
    }
    fn now_ms(&self) -> u64 {
        match self.now.get() {
            0 => {
                let t = self.inner.now_ms();
                self.now.set(t);
                t
            }
            t => t,
        }
    }
    fn wall_ms(&self) -> u64 {
        // Arena time 1 is the creation instant (see `Inner::now_ms`).
        self.inner
            .created_wall_ms
            .saturating_add(self.now_ms().saturating_sub(1))
    }
    fn participant_alive(&self, index: u32) -> bool {
        self.inner.participant_alive(index)
    }
    fn wake(&self, word: &WakeWord) {
        self.inner.wake(word)
    }
    fn wake_all(&self, word: &WakeWord) {
        self.inner.wake_all(word)
    }
    fn elapsed_ms(&self) -> u64 {
        // Waits are real time, also on a test clock.
        self.inner.real_ms()
    }
    fn may_grow(&self) -> bool {
        self.grow
    }
}

/// The largest `MaximumMessageSize` size classes `caps` can hold (see
/// [`Queue::maximum_message_size_limit`]).
pub(super) fn max_message_limit(caps: &[(u32, u32)]) -> u32 {
    let largest = caps.iter().map(|c| c.0).max().unwrap_or(0);
    let overhead = crate::config::QueueConfig::new()
        .maximum_message_size(0)
        .stored_size_limit();
    largest.saturating_sub(overhead).clamp(1024, 1 << 20)
}

impl Env for Inner {
    /// Starts at 1 ms, not 0: a visibility deadline of 0 means "never received".
    fn now_ms(&self) -> u64 {
        if self.test_clock {
            return live::test_now(&self.view);
        }
        self.real_ms()
    }
    fn elapsed_ms(&self) -> u64 {
        self.real_ms()
    }
    fn wall_ms(&self) -> u64 {
        sys::realtime_ms()
    }
    fn participant_alive(&self, index: u32) -> bool {
        index == self.index || sys::participant_locked(&self.file, index)
    }
    fn wake(&self, word: &WakeWord) {
        sys::futex_wake(word, 1);
    }
    fn wake_all(&self, word: &WakeWord) {
        sys::futex_wake(word, i32::MAX as u32);
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        if self.observer {
            return;
        }
        // A handle inherited through `fork` is the parent's: the child's descriptor shares the
        // liveness lock's open file description, and the registry slot is the parent's, so a
        // release here would end the parent's participant while it lives (the lock gone, the
        // slot free for the next opener, the parent's claims then taken over as a dead one's).
        // Only the process that registered releases; the child's mappings go with it.
        if sys::pid() != self.pid {
            return;
        }
        let polls = *self.empty_polls.get_mut();
        // Not if the file was truncated under us (below), or the guard found it cut (the
        // pages past the cut are private zeros now: nothing written there reaches the queue).
        let whole =
            !self.is_cut() && sys::file_len(&self.file).is_ok_and(|n| n >= self.map.len() as u64);
        if polls > 0 && whole {
            crate::protocol::accounting::count_empty_receives(&self.view, polls);
        }
        // `FREE` first, then the lock (see `registry`). Not if the file was truncated under us:
        // the registry's pages may be gone (touching them would be SIGBUS), and so is the queue.
        if whole {
            registry::deregister(&self.view, self.index, self.gen);
        }
        sys::unlock_participant(&self.lock_file, self.index);
    }
}

/// The truncation guard's hold on a named queue's base mapping (`sys::guard`).
#[derive(Debug)]
pub(super) struct Guarded {
    /// Held for its `Drop`: out of the guard's table before `map` is unmapped.
    pub(super) _watch: sys::guard::Watch,
    /// Set by the guard when a mapping of the queue's file faulted past its end (never for an
    /// anonymous queue: a sealed memfd, not watched).
    pub(super) cut: sys::guard::Cut,
}

pub(super) fn fault(f: Fault, inner: &Inner) -> Error {
    if inner.is_cut() {
        return inner.cut_error();
    }
    match f {
        Fault::Corrupted(what) => Error::Corrupted { what },
        Fault::ClassFull(c) => Error::SizeClassFull {
            class_bytes: inner.caps.get(c).map_or(0, |c| c.0),
        },
        Fault::NoSpace(needed) => Error::NoSpace { needed },
        Fault::Mapping(errno) => Error::Io(std::io::Error::from_raw_os_error(errno)),
        Fault::GroupsFull => Error::GroupLimitReached {
            max_groups: crate::protocol::group::capacity_now(&inner.view),
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
            entries: inner.view.dedup_entries(),
            interval_ms: inner.dedup_interval_ms,
        },
        Fault::DedupBusy => Error::DedupInProgress,
        Fault::Busy(what) => Error::ParticipantBusy { what },
    }
}

impl Inner {
    /// Whether the truncation guard found the queue's file cut under this process.
    #[inline]
    pub(super) fn is_cut(&self) -> bool {
        sys::guard::is_cut(&self.guarded.cut)
    }

    /// `Ok` while the queue's file is whole as far as this process has seen; `Truncated` once
    /// the guard has found it cut (every operation's last step: one process-local load).
    #[inline]
    pub(super) fn live(&self) -> crate::Result<()> {
        if self.is_cut() {
            return Err(self.cut_error());
        }
        Ok(())
    }

    /// The `Truncated` error of a queue whose file the guard found cut.
    #[cold]
    #[inline(never)]
    pub(super) fn cut_error(&self) -> Error {
        Error::Truncated {
            expected: (self.map.len() as u64).max(self.segs.file().mapped_end()),
            found: sys::file_len(&self.file).unwrap_or(0),
        }
    }

    /// Whether this handle sends a batch's messages to one group as a pack (see `packing`).
    #[inline]
    pub(super) fn packing(&self) -> crate::protocol::send::Packing {
        // Relaxed: a process-local setting, read once a chain.
        if self.packing.load(std::sync::atomic::Ordering::Relaxed) {
            crate::protocol::send::Packing::Where
        } else {
            crate::protocol::send::Packing::Never
        }
    }

    /// Moves this handle's allocation cursor just past `slot` (a slot's position in its class,
    /// which a send just took): the next allocation starts there.
    pub(super) fn cursor_past(&self, slot: u64) {
        // Relaxed: a process-local hint, never a synchronisation.
        self.cursor
            .store(slot + 1, std::sync::atomic::Ordering::Relaxed);
    }

    /// Real arena time (ms, from 1): `CLOCK_MONOTONIC` since the arena's base, whatever the
    /// queue's clock. Waits measure themselves with it.
    pub(super) fn real_ms(&self) -> u64 {
        arena_now(self.base_ms) + 1
    }

    /// Whether a send must carry a dedup id (S4): the queue deduplicates and content-based
    /// dedup is off.
    pub(super) fn needs_dedup_id(&self) -> bool {
        // A send racing with a change of the setting may see either value.
        self.dedup != Deduplication::Off && !live::content_based_dedup(&self.view)
    }
}

/// Whole milliseconds of `d`, `u64::MAX` past it.
pub(super) fn ms(d: Duration) -> u64 {
    // `as_millis` capped at `u64::MAX`, in `u64` arithmetic (its `u128` cost some 10
    // instructions a receive).
    d.as_secs()
        .saturating_mul(1000)
        .saturating_add(u64::from(d.subsec_millis()))
}

/// Arena time (ms, from 1) on this boot for a clock base.
pub(super) fn arena_now(base_ms: u64) -> u64 {
    (sys::monotonic_ns() / 1_000_000).wrapping_sub(base_ms) & clock::CLOCK_MASK
}

pub(super) fn shm_path(name: &str) -> crate::Result<PathBuf> {
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

/// A queue name (under `/dev/shm`) or a path (anything containing `/`).
pub(super) fn queue_path(s: &str) -> crate::Result<PathBuf> {
    if s.contains('/') {
        Ok(PathBuf::from(s))
    } else {
        shm_path(s)
    }
}

impl Queue {
    pub(super) fn arena(&self) -> &Arena<'_> {
        // A reference: the view is some 600 bytes (a copy per call showed in profiles).
        &self.inner.view
    }

    /// Sets whether this handle sends the messages a batch has for one group as one *pack*
    /// (on by default since layout 23; `docs/design/packed-batches.md`): one slot, one node of
    /// the group's list, one claim, one publication and one free for up to ten messages, each
    /// still its own message (its id, sequence number, receipt handle, visibility and receive
    /// count). Off, each message of a batch takes a slot of its own. Every handle reads packs,
    /// whoever sent them; the setting is this handle's and its clones', in this process.
    ///
    /// A pack takes one slot of the smallest size class that holds its messages and their
    /// 32-byte directory entries; where that class is full and may not grow, the batch goes
    /// one slot a message, so that packing never refuses what slots would take. Off is for
    /// comparisons (`shmfifo-hotpath batch-slots`, `shmfifo-lines batch-slots`) and for tests
    /// of the one-slot-a-message path; packs cost fewer instructions, locked atomics and cache
    /// lines a message (`docs/performance.md`).
    ///
    /// # Examples
    ///
    /// ```
    /// use shmfifo::{Queue, QueueConfig, ReceiveOptions, SendMessage};
    ///
    /// let q = Queue::create_anonymous(&QueueConfig::new())?;
    /// let batch = [
    ///     SendMessage::new("g", "first").dedup_id("1"),
    ///     SendMessage::new("g", "second").dedup_id("2"),
    /// ];
    /// let sent = q.send_messages(&batch)?; // one pack: one slot for both
    /// q.set_pack_batches(false);
    /// let again = q.send_messages(&[SendMessage::new("g", "third").dedup_id("3")])?;
    /// let got = q.receive(&ReceiveOptions::max(10))?;
    /// let bodies: Vec<&str> = got.iter().map(|m| m.body.as_str()).collect();
    /// assert_eq!(bodies, ["first", "second", "third"]);
    /// assert_eq!(got[1].message_id, sent[1].as_ref().unwrap().message_id);
    /// assert_eq!(got[2].message_id, again[0].as_ref().unwrap().message_id);
    /// # Ok::<(), shmfifo::Error>(())
    /// ```
    pub fn set_pack_batches(&self, on: bool) {
        // Relaxed: a process-local setting (see `Inner::packing`).
        self.inner
            .packing
            .store(on, std::sync::atomic::Ordering::Relaxed);
    }

    /// The queue's path for logs, or `(anonymous)`.
    pub(super) fn display_name(&self) -> String {
        self.inner
            .path
            .as_deref()
            .map_or_else(|| "(anonymous)".to_owned(), |p| p.display().to_string())
    }

    /// `Truncated` if the queue's file is now shorter than this handle's mapping, or was
    /// found cut under an operation of this process (the truncation guard, see
    /// `docs/guarantees.md`, "Truncation"); `Ok` otherwise. Operations that return a
    /// `Result` check by themselves; this is for a caller of the ones that cannot fail
    /// ([`attributes`](Queue::attributes), [`counters`](Queue::counters)), whose figures
    /// from a cut file would be zeros. One `fstat`.
    ///
    /// # Examples
    ///
    /// ```
    /// use shmfifo::{Error, Queue, QueueConfig};
    ///
    /// let path = std::env::temp_dir().join(format!("shmfifo-doc-check-{}", std::process::id()));
    /// let q = Queue::create_at(&path, &QueueConfig::new())?;
    /// q.check_file()?;
    /// // Another process (any user who may write the file) cuts it.
    /// std::fs::OpenOptions::new().write(true).open(&path)?.set_len(4096)?;
    /// assert!(matches!(q.check_file(), Err(Error::Truncated { found: 4096, .. })));
    /// drop(q);
    /// std::fs::remove_file(&path)?;
    /// # Ok::<(), shmfifo::Error>(())
    /// ```
    pub fn check_file(&self) -> crate::Result<()> {
        self.inner.live()?;
        match self.truncated()? {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// The file path, if the queue has one.
    ///
    /// # Examples
    ///
    /// ```
    /// use shmfifo::{Queue, QueueConfig};
    ///
    /// let anonymous = Queue::create_anonymous(&QueueConfig::new())?;
    /// assert_eq!(anonymous.path(), None);
    ///
    /// let path = std::env::temp_dir().join(format!("shmfifo-doc-path-{}", std::process::id()));
    /// let q = Queue::create_at(&path, &QueueConfig::new())?;
    /// # struct UnlinkAt(std::path::PathBuf);
    /// # impl Drop for UnlinkAt {
    /// #     fn drop(&mut self) {
    /// #         let _ = shmfifo::Queue::unlink_at(&self.0);
    /// #     }
    /// # }
    /// # let _cleanup = UnlinkAt(path.clone());
    /// assert_eq!(q.path(), Some(path.as_path()));
    /// Queue::unlink_at(&path)?;
    /// # Ok::<(), shmfifo::Error>(())
    /// ```
    pub fn path(&self) -> Option<&Path> {
        self.inner.path.as_deref()
    }

    /// The largest message this queue takes, in bytes (body and attributes, as SQS counts
    /// them: SQS `MaximumMessageSize`): the current setting, changeable live up to
    /// [`maximum_message_size_limit`](Self::maximum_message_size_limit). Cheap (no scan).
    ///
    /// # Examples
    ///
    /// ```
    /// use shmfifo::{Queue, QueueConfig};
    ///
    /// let q = Queue::create_anonymous(&QueueConfig::new().maximum_message_size(4096))?;
    /// assert_eq!(q.maximum_message_size(), 4096);
    /// # Ok::<(), shmfifo::Error>(())
    /// ```
    pub fn maximum_message_size(&self) -> u32 {
        // Clamped: the arena is untrusted.
        let v = live::max_message_size(self.arena());
        (v.min(u64::from(u32::MAX)) as u32).clamp(1024, self.maximum_message_size_limit())
    }

    /// What this queue's bodies may hold: SQS's text (the default) or any bytes
    /// ([`crate::BodyMode`]). Fixed at creation.
    ///
    /// # Examples
    ///
    /// ```
    /// use shmfifo::{BodyMode, Queue, QueueConfig};
    ///
    /// let q = Queue::create_anonymous(&QueueConfig::new())?;
    /// assert_eq!(q.body_mode(), BodyMode::Text);
    /// let raw = Queue::create_anonymous(&QueueConfig::new().body_mode(BodyMode::Binary))?;
    /// assert_eq!(raw.body_mode(), BodyMode::Binary);
    /// # Ok::<(), shmfifo::Error>(())
    /// ```
    pub fn body_mode(&self) -> crate::BodyMode {
        if self.inner.binary {
            crate::BodyMode::Binary
        } else {
            crate::BodyMode::Text
        }
    }

    /// The largest `MaximumMessageSize` this queue can be set to: what its largest size class
    /// holds beside a message's dedup id, attribute framing and dead-letter source (at most
    /// 1 MiB, SQS's limit). Fixed at creation (it is the arena's shape).
    ///
    /// # Examples
    ///
    /// ```
    /// use shmfifo::{Queue, QueueConfig};
    ///
    /// let q = Queue::create_anonymous(&QueueConfig::new().maximum_message_size(4096))?;
    /// assert!(q.maximum_message_size_limit() >= 4096);
    /// q.set_attribute("MaximumMessageSize", "2048")?; // lowered (and raised again) live
    /// assert_eq!(q.maximum_message_size(), 2048);
    /// let too_big = q.maximum_message_size_limit() + 1;
    /// assert!(q.set_attribute("MaximumMessageSize", &too_big.to_string()).is_err());
    /// # Ok::<(), shmfifo::Error>(())
    /// ```
    pub fn maximum_message_size_limit(&self) -> u32 {
        self.inner.max_message_limit
    }

    /// The live `ReceiveMessageWaitTimeSeconds`, in ms (clamped: the arena is untrusted).
    pub(super) fn default_wait_ms(&self) -> u64 {
        let v = live::receive_wait_ms(self.arena());
        v.min(crate::config::MAX_WAIT_TIME.as_millis() as u64)
    }

    /// Writes the queue's pages back to its file and waits for the write (`msync` of the base
    /// file's mapping, then `fdatasync` of the file: the segments a grown queue added are
    /// separate mappings, written back by the second): what
    /// survives a reboot or a power loss of a queue on a disk-backed path is what was synced
    /// last (the kernel also writes pages back on its own, at times of its choosing). Queues
    /// under `/dev/shm` (tmpfs) and anonymous ones live in memory only and never survive a
    /// reboot; for them this does nothing useful and costs little. A queue is consistent at
    /// any instant (the protocols are crash-safe), so a synced image opens and recovers like
    /// a queue whose every process was killed.
    ///
    /// # Examples
    ///
    /// ```
    /// use shmfifo::{Queue, QueueConfig, SendMessage};
    ///
    /// let path = std::env::temp_dir().join(format!("shmfifo-doc-sync-{}", std::process::id()));
    /// let q = Queue::create_at(&path, &QueueConfig::new())?;
    /// q.send(&SendMessage::new("g", "kept").dedup_id("1"))?;
    /// q.sync()?; // on disk now
    /// Queue::unlink_at(&path)?;
    /// # Ok::<(), shmfifo::Error>(())
    /// ```
    pub fn sync(&self) -> crate::Result<()> {
        self.inner.map.flush().map_err(Error::Io)?;
        self.inner.segs.file().sync().map_err(Error::Io)
    }

    /// Maps every page of the queue into this process now (`madvise(MADV_POPULATE_WRITE)`;
    /// read-only for an observer), instead of one page fault at the first touch of each page
    /// later. A latency-sensitive process calls it once after `create` or `open`; a large
    /// queue's first messages then do not pay for faults (a 1,000,000-group queue is some
    /// 0.5 GiB). It costs about the faults it saves, up front, and the memory is allocated
    /// (tmpfs pages, counted against `/dev/shm`) if it was not yet.
    ///
    /// Linux 5.14 or later; on an older kernel (`EINVAL`) it does nothing and returns `Ok`:
    /// the pages fault in at first touch, as without it.
    ///
    /// # Examples
    ///
    /// ```
    /// use shmfifo::{Queue, QueueConfig};
    ///
    /// let q = Queue::create_anonymous(&QueueConfig::new())?;
    /// q.prefault()?; // every page mapped: no first-touch faults from here on
    /// # Ok::<(), shmfifo::Error>(())
    /// ```
    pub fn prefault(&self) -> crate::Result<()> {
        let advice = if self.inner.observer {
            memmap2::Advice::PopulateRead
        } else {
            memmap2::Advice::PopulateWrite
        };
        match self.inner.map.advise(advice) {
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => Ok(()),
            r => r.map_err(Error::Io),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `ms` is `as_millis` capped at `u64::MAX`, at every boundary it meets.
    #[test]
    fn milliseconds_are_as_millis_capped() {
        let cases = [
            Duration::ZERO,
            Duration::from_nanos(999_999),
            Duration::from_nanos(1_000_000),
            Duration::from_millis(1),
            Duration::new(43_200, 999_999_999),
            Duration::new(u64::MAX / 1000, 999_999_999),
            Duration::new(u64::MAX / 1000 + 1, 0),
            Duration::MAX,
        ];
        for d in cases {
            let want = d.as_millis().min(u128::from(u64::MAX)) as u64;
            assert_eq!(ms(d), want, "{d:?}");
        }
    }
    use crate::protocol::pack;

    /// A pack written into a slot of a mapped queue (its directory in the slot's payload, not
    /// a heap arena's table) opens with its members' bytes (layout 22; the protocol's own test
    /// covers the words).
    #[test]
    fn a_pack_in_a_mapped_slot_opens() {
        let q = Queue::create_anonymous(
            &crate::QueueConfig::new().size_classes(vec![(1024, 4), (262_656, 1)]),
        )
        .unwrap();
        let a = q.arena();
        let members: [[&[u8]; 3]; 2] = [[b"first", b"", b""], [b"second", b"id", b"at"]];
        // SAFETY: slot 2 is free and this test alone uses the queue: nothing copies into it
        // while the pack is viewed.
        let unit = unsafe { pack::write(a, 2, 1, &members) }.unwrap().unwrap();
        // SAFETY: as above.
        let p = unsafe { pack::open(a, 2, unit) }.unwrap();
        assert_eq!(
            p.places().members()[0].at,
            64,
            "a directory of two, on its own line"
        );
        // SAFETY: as above.
        assert_eq!(unsafe { p.bytes(0) }, Some(&b"first"[..]));
        // SAFETY: as above.
        assert_eq!(unsafe { p.bytes(1) }, Some(&b"secondidat"[..]));
        // The directory is the payload's first line: member `j`'s words at byte `32 × j`.
        let payload = a.class_of(2).unwrap().2 as usize;
        assert_eq!(p.members.as_ptr() as usize, payload);
        assert_eq!(&p.members[1] as *const _ as usize, payload + 32);
    }
}
