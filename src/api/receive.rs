//! `receive` and its forms: parameters, the long-poll wait on the doorbell, the in-flight
//! budget (R8) and attempt-id replays (R11); copying taken messages out is `copy_out`'s.

use super::copy_out::Filler;
use super::hashing::hash_id;
use super::queue::{fault, ms, Op, Queue};
use super::types::*;
use crate::config::{MAX_VISIBILITY_TIMEOUT, MAX_WAIT_TIME};
use crate::error::{Error, Result};
use std::sync::atomic::Ordering;

use crate::protocol::accounting::{self, counter};
use crate::protocol::message::MAX_ID_LEN;
use crate::protocol::receive::{self, Taken};
use crate::protocol::{attempt, doorbell, live, ready, recovery, sweep, Env};
use crate::{sys, validate};

/// Empty polls (receives that did not wait) a handle tallies before adding them to the
/// queue's `NumberOfEmptyReceives`.
pub(super) const EMPTY_BATCH: u64 = 64;

/// Spin rounds before a long-polling receiver goes to sleep.
pub(super) const SPIN_ROUNDS: u32 = 200;

/// How often a cancellable long poll ([`Queue::receive_cancellable_into`]) looks at its flag
/// while it waits, at the least.
pub const CANCEL_LOOK: std::time::Duration = std::time::Duration::from_millis(100);

/// What ends a cancellable receive's wait ([`Queue::receive_cancellable_into`]): a flag another
/// thread or a signal handler sets (`AtomicBool`), or a check the waiting thread runs itself
/// at each look (a closure `Fn() -> bool`: say, one that runs an interpreter's signal
/// handlers, which only the waiting thread may, as the Python package does).
///
/// # Examples
///
/// ```
/// use std::sync::atomic::AtomicBool;
/// use std::time::{Duration, Instant};
/// use shmfifo::{Queue, QueueConfig, ReceiveBuffer, ReceiveOptions};
///
/// let q = Queue::create_anonymous(&QueueConfig::new())?;
/// let mut buf = ReceiveBuffer::new();
/// let opts = ReceiveOptions::max(10).wait(Duration::from_secs(20));
/// let until = Instant::now() + Duration::from_millis(50);
/// // A check the waiting thread runs at each look (every 100 ms at most).
/// assert_eq!(q.receive_cancellable_into(&opts, None, &|| Instant::now() >= until, &mut buf)?, 0);
/// let flag = AtomicBool::new(true); // or a flag, set by anyone
/// assert_eq!(q.receive_cancellable_into(&opts, None, &flag, &mut buf)?, 0);
/// # Ok::<(), shmfifo::Error>(())
/// ```
pub trait Cancel {
    /// Whether the wait is to end now.
    fn cancelled(&self) -> bool;
}

impl Cancel for std::sync::atomic::AtomicBool {
    fn cancelled(&self) -> bool {
        // Relaxed: a flag; what the canceller wrote before it is not read here.
        self.load(Ordering::Relaxed)
    }
}

/// A shared flag (or check), as a signal handler's `Arc<AtomicBool>` is.
impl<T: Cancel + ?Sized> Cancel for std::sync::Arc<T> {
    fn cancelled(&self) -> bool {
        (**self).cancelled()
    }
}

impl<F: Fn() -> bool> Cancel for F {
    fn cancelled(&self) -> bool {
        self()
    }
}

impl ReceiveOptions {
    /// The checks a receive makes of its options before anything else (R1, R2, R5):
    /// `max_messages` 1–10, a visibility timeout of at most 12 hours, a wait of at most 20 s;
    /// each violation is SQS's `InvalidParameterValue`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use shmfifo::ReceiveOptions;
    ///
    /// assert!(ReceiveOptions::max(10).wait(Duration::from_secs(20)).check().is_ok());
    /// let e = ReceiveOptions::max(11).check().unwrap_err();
    /// assert_eq!(e.sqs_code(), "InvalidParameterValue");
    /// ```
    pub fn check(&self) -> Result<()> {
        if !(1..=10).contains(&self.max_messages) {
            return Err(Error::invalid(
                "MaxNumberOfMessages",
                format!("Value {} for parameter MaxNumberOfMessages is invalid. Reason: Must be between 1 and 10, if provided.", self.max_messages),
            ));
        }
        if self
            .visibility_timeout
            .is_some_and(|d| d > MAX_VISIBILITY_TIMEOUT)
        {
            return Err(Error::invalid(
                "VisibilityTimeout",
                "Must be between 0 and 43200 seconds.",
            ));
        }
        if self.wait_time.is_some_and(|d| d > MAX_WAIT_TIME) {
            return Err(Error::invalid(
                "WaitTimeSeconds",
                "Must be between 0 and 20 seconds.",
            ));
        }
        Ok(())
    }
}

impl Queue {
    /// Whether a receive with `opts` is a long poll: its own wait time, or else the queue's
    /// `ReceiveMessageWaitTimeSeconds`, above zero (an empty one is counted at once).
    pub(super) fn long_poll(&self, opts: &ReceiveOptions) -> bool {
        opts.wait_time
            .map_or_else(|| self.default_wait_ms() > 0, |w| !w.is_zero())
    }

    pub(super) fn receive_params(&self, opts: &ReceiveOptions) -> Result<(usize, u64, u64)> {
        opts.check()?;
        let vt = opts
            .visibility_timeout
            .map_or_else(|| self.default_vt_ms(), ms);
        let wait = opts.wait_time.map_or_else(|| self.default_wait_ms(), ms);
        Ok((opts.max_messages as usize, vt, wait))
    }

    /// Receives up to `max_messages` messages (R1–R10), waiting up to the wait time for the
    /// first one.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// use shmfifo::{Queue, QueueConfig, ReceiveOptions, SendMessage};
    ///
    /// let q = Queue::create_anonymous(&QueueConfig::new())?;
    /// q.send(&SendMessage::new("g", "one").dedup_id("1"))?;
    /// q.send(&SendMessage::new("g", "two").dedup_id("2"))?;
    /// let opts = ReceiveOptions::max(1).wait(Duration::ZERO);
    /// let first = q.receive(&opts)?;
    /// assert_eq!(first[0].body, "one");
    /// assert_eq!(first[0].receive_count, 1);
    /// // While "one" is in flight, its group is locked: "two" waits behind it (R3).
    /// assert!(q.receive(&opts)?.is_empty());
    /// q.delete(&first[0].receipt_handle)?;
    /// assert_eq!(q.receive(&opts)?[0].body, "two");
    /// # Ok::<(), shmfifo::Error>(())
    /// ```
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
    ///
    /// # Examples
    ///
    /// ```
    /// use shmfifo::{Queue, QueueConfig, ReceiveOptions, SendMessage};
    ///
    /// let q = Queue::create_anonymous(&QueueConfig::new())?;
    /// q.send(&SendMessage::new("g", "job").dedup_id("1"))?;
    /// let opts = ReceiveOptions::max(10);
    /// let first = q.receive_with_attempt_id(&opts, "attempt-1")?;
    /// // Retried with the same id (say the first answer was lost): the same batch again.
    /// let retry = q.receive_with_attempt_id(&opts, "attempt-1")?;
    /// assert_eq!(retry.len(), 1);
    /// assert_eq!(retry[0].receipt_handle, first[0].receipt_handle);
    /// assert_eq!(retry[0].receive_count, 1);
    /// // Another id is a fresh receive: the message is in flight, so nothing.
    /// assert!(q.receive_with_attempt_id(&opts, "attempt-2")?.is_empty());
    /// # Ok::<(), shmfifo::Error>(())
    /// ```
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
    ///
    /// # Examples
    ///
    /// ```
    /// use shmfifo::{Queue, QueueConfig, ReceiveBuffer, ReceiveOptions, SendMessage};
    ///
    /// let q = Queue::create_anonymous(&QueueConfig::new())?;
    /// q.send(&SendMessage::new("g", "job").dedup_id("1"))?;
    /// let opts = ReceiveOptions::max(10);
    /// let mut buf = ReceiveBuffer::new();
    /// assert_eq!(q.receive_with_attempt_id_into(&opts, "attempt-1", &mut buf)?, 1);
    /// let handle = buf.messages()[0].receipt_handle;
    /// // A retry replays the batch...
    /// assert_eq!(q.receive_with_attempt_id_into(&opts, "attempt-1", &mut buf)?, 1);
    /// assert_eq!(buf.messages()[0].receipt_handle, handle);
    /// // ...until one of its messages is deleted: then it is a fresh receive.
    /// q.delete(&handle)?;
    /// assert_eq!(q.receive_with_attempt_id_into(&opts, "attempt-1", &mut buf)?, 0);
    /// # Ok::<(), shmfifo::Error>(())
    /// ```
    pub fn receive_with_attempt_id_into(
        &self,
        opts: &ReceiveOptions,
        attempt_id: &str,
        buf: &mut ReceiveBuffer,
    ) -> Result<usize> {
        buf.borrow = false;
        self.receive_with_attempt_as(opts, attempt_id, buf)
    }

    /// [`with_attempt`](Self::with_attempt) for the blocking API: the replay in place, the
    /// fresh receive a long poll into `buf` as its `borrow` flag says.
    pub(super) fn receive_with_attempt_as(
        &self,
        opts: &ReceiveOptions,
        attempt_id: &str,
        buf: &mut ReceiveBuffer,
    ) -> Result<usize> {
        self.with_attempt(opts, attempt_id, buf, |q, buf| q.receive_into_as(opts, buf))
    }

    /// The receive recorded under `attempt_id` that a retry with `opts` would replay, if any,
    /// and the id's key hash. A retry asking for fewer messages than the recorded receive
    /// returned is answered afresh: a response never holds more than its request's maximum
    /// (the recorded messages stay in flight until their visibility timeout).
    fn recorded(
        &self,
        opts: &ReceiveOptions,
        attempt_id: &str,
    ) -> Result<(Option<attempt::Record>, u64)> {
        let (max, _, _) = self.receive_params(opts)?;
        validate::id("ReceiveRequestAttemptId", attempt_id)?;
        let inner = &*self.inner;
        // A queue made to keep no records (`attempt_entries(0)`): a retry would be a fresh
        // receive, taking other messages while the first stay in flight. Said at once.
        if inner.view.attempt_entries() == 0 {
            return Err(Error::invalid(
                "ReceiveRequestAttemptId",
                "this queue keeps no receive attempt records (it was created with attempt_entries 0), so a retry with this id could not return the same messages; receive without one",
            ));
        }
        let mut key = [0u8; 1 + MAX_ID_LEN];
        key[0] = b'A';
        key[1..1 + attempt_id.len()].copy_from_slice(attempt_id.as_bytes());
        let hash = hash_id(inner.keys, &key[..1 + attempt_id.len()]);
        let found = attempt::find(self.arena(), inner.now_ms(), hash, attempt_id.as_bytes())
            .filter(|rec| rec.count.min(attempt::MAX_MESSAGES) <= max);
        Ok((found, hash))
    }

    /// Whether a receive with `opts` and `attempt_id` would replay a recorded one (which may
    /// wait up to a second behind a stopped participant holding a recorded message's group
    /// claim: the async API makes such a receive on the blocking pool).
    #[cfg(feature = "tokio")]
    pub(super) fn replays(&self, opts: &ReceiveOptions, attempt_id: &str) -> Result<bool> {
        Ok(self.recorded(opts, attempt_id)?.0.is_some())
    }

    /// A receive with attempt id `attempt_id` (R11) whose fresh receive is `fresh` (a
    /// blocking long poll, or one non-blocking try of an async one): a replay of the receive
    /// recorded under the id if it may be replayed, else `fresh`, recorded under the id when
    /// it took messages. A replay may wait up to `CLAIM_WAIT_MS` (a second) behind a stopped
    /// participant holding a recorded message's group claim.
    pub(super) fn with_attempt(
        &self,
        opts: &ReceiveOptions,
        attempt_id: &str,
        buf: &mut ReceiveBuffer,
        fresh: impl FnOnce(&Self, &mut ReceiveBuffer) -> Result<usize>,
    ) -> Result<usize> {
        let (_, vt, _) = self.receive_params(opts)?;
        let (found, hash) = self.recorded(opts, attempt_id)?;
        let inner = &*self.inner;
        let a = self.arena();
        if let Some(rec) = found {
            buf.len = 0;
            let mut filler = Filler::new(inner);
            let mut new = rec;
            let mut k = 0;
            let mut sink = |t: &Taken<'_>| {
                if filler.fill_next(buf, t).is_err() {
                    // Unreadable (a corrupted word): the protocol quarantines it, and a fresh
                    // receive answers this attempt.
                    return false;
                }
                if k < new.vis.len() {
                    new.vis[k] = t.vis;
                    k += 1;
                }
                true
            };
            let replayed = receive::replay(a, inner, inner.me, &rec, vt, &mut sink)
                .map_err(|f| fault(f, inner))?;
            if replayed {
                // The deadlines moved: record them, so a further retry replays too.
                new.vt_ms = vt;
                attempt::record(a, inner, inner.me, hash, attempt_id.as_bytes(), &new);
                // A file cut under the replay (`sys::guard`): what it copied may be zeros.
                inner.live()?;
                return Ok(buf.len);
            }
        }
        let n = fresh(self, buf)?;
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
                rec.refs[k] = attempt::message_ref(h.idx, h.inc, h.member);
                rec.vis[k] = buf.vis[k];
            }
            attempt::record(a, inner, inner.me, hash, attempt_id.as_bytes(), &rec);
        }
        Ok(n)
    }

    /// Like [`Queue::receive`], into reusable storage (no allocation once warm).
    ///
    /// # Examples
    ///
    /// ```
    /// use shmfifo::{Queue, QueueConfig, ReceiveBuffer, ReceiveOptions, SendMessage};
    ///
    /// let q = Queue::create_anonymous(&QueueConfig::new())?;
    /// for i in 0..3 {
    ///     q.send(&SendMessage::new("g", &format!("m{i}")).dedup_id(&i.to_string()))?;
    /// }
    /// let mut buf = ReceiveBuffer::new(); // reused by every receive
    /// let mut seen = Vec::new();
    /// while q.receive_into(&ReceiveOptions::max(2), &mut buf)? > 0 {
    ///     for m in buf.messages() {
    ///         seen.push(m.body.clone());
    ///         q.delete(&m.receipt_handle)?;
    ///     }
    /// }
    /// assert_eq!(seen, ["m0", "m1", "m2"]);
    /// # Ok::<(), shmfifo::Error>(())
    /// ```
    pub fn receive_into(&self, opts: &ReceiveOptions, buf: &mut ReceiveBuffer) -> Result<usize> {
        // Bodies copied, whatever the buffer's last receive was (`receive_borrowed_into`).
        buf.borrow = false;
        self.receive_into_as(opts, buf)
    }

    /// [`Queue::receive_into`] in the buffer's mode: bodies copied, or (`buf.borrow`, a
    /// borrowing receive) left in place.
    pub(super) fn receive_into_as(
        &self,
        opts: &ReceiveOptions,
        buf: &mut ReceiveBuffer,
    ) -> Result<usize> {
        self.receive_counted(opts, buf, None)
    }

    /// A receive whose long poll another thread, or a signal handler, can end: as
    /// [`Queue::receive_into`] (with `attempt_id`, [`Queue::receive_with_attempt_id_into`]),
    /// except that the wait also ends, with nothing received, once `cancel` says so (a flag,
    /// or a check the waiting thread runs: [`Cancel`]). While its long poll waits it looks at
    /// `cancel` at least every [`CANCEL_LOOK`] (100 ms); setting a flag needs no wake-up call.
    /// (A step that waits behind a stopped process, as a replay of an attempt id may, at most
    /// a second, does not look.) A cancelled or timed-out receive that took nothing counts
    /// once in `NumberOfEmptyReceives`, as one long poll does (short polls in a loop count one
    /// each),
    /// and records nothing under its attempt id. Nothing is taken after `cancel` is seen: a
    /// receive that returns messages returns them whole, whatever `cancel` says by then.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::atomic::{AtomicBool, Ordering};
    /// use std::time::{Duration, Instant};
    /// use shmfifo::{Queue, QueueConfig, ReceiveBuffer, ReceiveOptions};
    ///
    /// let q = Queue::create_anonymous(&QueueConfig::new())?;
    /// let stop = AtomicBool::new(false);
    /// let mut buf = ReceiveBuffer::new();
    /// let start = Instant::now();
    /// std::thread::scope(|s| {
    ///     s.spawn(|| {
    ///         std::thread::sleep(Duration::from_millis(50));
    ///         stop.store(true, Ordering::Relaxed); // say, on SIGTERM
    ///     });
    ///     // A 20-second long poll, ended by the flag after about 50 ms.
    ///     let opts = ReceiveOptions::max(10).wait(Duration::from_secs(20));
    ///     assert_eq!(q.receive_cancellable_into(&opts, None, &stop, &mut buf)?, 0);
    ///     Ok::<(), shmfifo::Error>(())
    /// })?;
    /// assert!(start.elapsed() < Duration::from_secs(10));
    /// assert_eq!(q.counters().empty_receives, 1); // one long poll, once
    /// # Ok::<(), shmfifo::Error>(())
    /// ```
    pub fn receive_cancellable_into(
        &self,
        opts: &ReceiveOptions,
        attempt_id: Option<&str>,
        cancel: &dyn Cancel,
        buf: &mut ReceiveBuffer,
    ) -> Result<usize> {
        buf.borrow = false;
        self.receive_cancellable_as(opts, attempt_id, cancel, buf)
    }

    /// [`Queue::receive_cancellable_into`] in the buffer's mode: bodies copied, or
    /// (`buf.borrow`, a borrowing receive) left in place.
    pub(super) fn receive_cancellable_as(
        &self,
        opts: &ReceiveOptions,
        attempt_id: Option<&str>,
        cancel: &dyn Cancel,
        buf: &mut ReceiveBuffer,
    ) -> Result<usize> {
        match attempt_id {
            Some(id) => self.with_attempt(opts, id, buf, |q, buf| {
                q.receive_counted(opts, buf, Some(cancel))
            }),
            None => self.receive_counted(opts, buf, Some(cancel)),
        }
    }

    /// A receive into `buf` as its `borrow` flag says, an empty one counted.
    fn receive_counted(
        &self,
        opts: &ReceiveOptions,
        buf: &mut ReceiveBuffer,
        cancel: Option<&dyn Cancel>,
    ) -> Result<usize> {
        let n = self.receive_waiting(opts, buf, cancel)?;
        if n == 0 {
            self.count_empty_receive(self.long_poll(opts));
        }
        Ok(n)
    }

    /// [`Queue::receive_into`] without counting an empty receive; with `cancel`, a wait that
    /// ends once it is true (looked at every [`CANCEL_LOOK`] at least).
    fn receive_waiting(
        &self,
        opts: &ReceiveOptions,
        buf: &mut ReceiveBuffer,
        cancel: Option<&dyn Cancel>,
    ) -> Result<usize> {
        let cancelled = || cancel.is_some_and(|c| c.cancelled());
        let (max, vt, wait) = self.receive_params(opts)?;
        buf.len = 0;
        let n = self.try_receive(max, vt, buf)?;
        if n > 0 || wait == 0 {
            return Ok(n);
        }
        let inner = &*self.inner;
        // The wait is real time (also on a test clock).
        let deadline = inner.real_ms() + wait;
        loop {
            // Spin briefly: a message often arrives within microseconds.
            for _ in 0..SPIN_ROUNDS {
                if !ready::looks_empty(self.arena()) {
                    break;
                }
                crate::sync::spin_hint();
            }
            let n = self.try_receive(max, vt, buf)?;
            if n > 0 {
                return Ok(n);
            }
            let now = inner.real_ms();
            if now >= deadline || cancelled() {
                return Ok(0);
            }
            let bell = doorbell::begin_wait(self.arena(), inner.index as usize);
            let n = self.try_receive(max, vt, buf);
            if matches!(n, Ok(0)) {
                let mut t = self.sleep_bound_ms(now, deadline);
                if cancel.is_some() {
                    t = t.min(CANCEL_LOOK.as_millis() as u64);
                }
                accounting::count(self.arena(), inner.me, counter::WAITS, 1);
                let slept = sys::monotonic_ns();
                let woke = sys::futex_wait(doorbell::receivers(self.arena()), bell, t);
                // A participant that slept may wake to a file truncated under it (a named
                // queue; anonymous ones are sealed): look before touching a page past the
                // header, and report it instead of dying of SIGBUS. A truncation rings no
                // bell: a receiver asleep through one wakes by its timeout and looks, as does
                // one rung after a sleep of a millisecond or more. One rung sooner goes on as
                // an operation in progress does, without the `fstat` (a system call, about
                // 1.2 µs here, on every quick wake-up).
                if sys::needs_look(woke, slept) {
                    if let Some(e) = self.truncated()? {
                        return Err(e);
                    }
                }
            }
            doorbell::end_wait(self.arena(), inner.index as usize);
            let n = n?;
            if n > 0 {
                return Ok(n);
            }
        }
    }

    /// Counts a receive that returned no message (`NumberOfEmptyReceives`). A long poll that
    /// ended empty (`waited`) is counted in the queue at once; polls that do not wait are
    /// counted in this handle first and added to the queue's count [`EMPTY_BATCH`] at a time
    /// (and when the handle closes), so that a consumer spinning on an empty queue pays no
    /// locked instruction on a shared line per poll.
    pub(super) fn count_empty_receive(&self, waited: bool) {
        // Relaxed load and store, not an RMW: a process-local tally; two threads of one
        // handle racing may lose a count of it (a statistic), never more.
        let c = &self.inner.empty_polls;
        let n = c.load(Ordering::Relaxed) + 1;
        if waited || n >= EMPTY_BATCH {
            c.store(0, Ordering::Relaxed);
            accounting::count_empty_receives(self.arena(), n);
        } else {
            c.store(n, Ordering::Relaxed);
        }
    }

    /// How long a receiver that found nothing at `now` may sleep on the doorbell before it
    /// must look again by itself, waiting until `deadline` at the latest: until the next
    /// visibility or delay expiry (1 ms if one is already due), and at most the period of the
    /// liveness check (a dead receiver's messages are due back) or of the hint sweep.
    pub(super) fn sleep_bound_ms(&self, now: u64, deadline: u64) -> u64 {
        let ne = live::next_expiry(self.arena());
        let mut t = deadline.saturating_sub(now);
        // `now` and `deadline` are real time; expiries are in the queue's time (the same on a
        // real clock; on a test clock, `advance_clock` rings the doorbell when it moves).
        let queue_now = self.inner.now_ms();
        if ne > queue_now {
            t = t.min(ne - queue_now);
        } else {
            t = t.min(1);
        }
        let cap = if recovery::release_on_death(self.arena()) {
            recovery::LIVENESS_PERIOD_MS
        } else {
            sweep::SWEEP_PERIOD_MS
        };
        t.clamp(1, cap)
    }

    /// The bytes of the queue's file this handle has mapped: the base file as mapped at open,
    /// and the segments mapped since (layout 13).
    pub(super) fn mapped_len(&self) -> u64 {
        (self.inner.map.len() as u64).max(self.inner.segs.file().mapped_end())
    }

    /// `Truncated` if the queue's file is now shorter than its mapping.
    pub(super) fn truncated(&self) -> Result<Option<Error>> {
        let mapped = self.mapped_len();
        let now = sys::file_len(&self.inner.file)?;
        Ok((now < mapped).then_some(Error::Truncated {
            expected: mapped,
            found: now,
        }))
    }

    /// The live default visibility timeout (clamped: the arena is untrusted).
    pub(super) fn default_vt_ms(&self) -> u64 {
        // A receive racing with a change of the setting may use either value.
        let v = live::visibility_timeout_ms(self.arena());
        v.min(ms(MAX_VISIBILITY_TIMEOUT))
    }

    /// Room left under the in-flight limit (R8), correcting the count by a census (at most
    /// once a second) when it says there is none.
    pub(super) fn fresh_budget(&self) -> usize {
        accounting::fresh_budget(self.arena(), &*self.inner)
    }

    /// One receive without waiting.
    ///
    /// The dead-letter mover runs under a group claim (X1: the move and the removal happen
    /// while nobody else can take the message). It uses the dead-letter queue cached for the
    /// policy version; only the first move after a policy change opens it, there, under that
    /// one group's claim: an open, a map and a registration, bounded, touching no other group
    /// of this queue (a receiver stopped there holds only that group, as any claim holder
    /// does). Opening it before the claim instead would open a missing or replaced
    /// dead-letter queue on receives that move nothing.
    pub(super) fn try_receive(
        &self,
        max: usize,
        vt: u64,
        buf: &mut ReceiveBuffer,
    ) -> Result<usize> {
        // Relaxed: a setting of this handle, read where a policy is set.
        let dl = self
            .dead_letter()?
            .filter(|_| self.inner.dl_on_receive.load(Ordering::Relaxed));
        // After a receive that found nothing (a receiver polling a queue it keeps up with), an
        // empty queue with nothing due answers at once: 295 instructions an empty poll where
        // the receive's setup took 754 (`benches/callgrind.sh empty`).
        if receive::idle_after_empty(self.arena(), &Op::new(&self.inner)) {
            self.inner.live()?;
            return Ok(0);
        }
        let pass = self.receive_pass(max, vt, buf, dl)?;
        // A file cut under the receive (`sys::guard`): what it copied may be zeros.
        self.inner.live()?;
        // An error of the dead-letter queue matters only when nothing else was taken.
        match pass.move_err {
            Some(e) if pass.taken == 0 => Err(e),
            _ => Ok(pass.taken),
        }
    }

    /// One call of [`receive::receive`] into `buf`, moving messages to `dlq` where one is due.
    fn receive_pass(
        &self,
        max: usize,
        vt: u64,
        buf: &mut ReceiveBuffer,
        dl: Option<(u32, u64)>,
    ) -> Result<Pass> {
        let inner = &*self.inner;
        let mut filler = Filler::new(inner);
        let mut sink = |t: &Taken<'_>| {
            let k = buf.len;
            if let Err(why) = filler.fill_next(buf, t) {
                // Unreadable (a corrupted word): not returned; the protocol quarantines it.
                tracing::error!(
                    queue = %self.display_name(),
                    message_id = %self.message_id(t.idx, t.inc, t.member),
                    reason = why,
                    "quarantined an unreadable message"
                );
                return false;
            }
            if let Some(v) = buf.vis.get_mut(k) {
                *v = t.vis;
            }
            true
        };
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
            fresh_budget: self.fresh_budget(),
            dead_letter: dl.map(|(max, _)| (max, &mut mover as receive::Mover<'_>)),
        };
        let rep = receive::receive(
            self.arena(),
            &Op::new(inner),
            inner.me,
            max,
            &mut policy,
            &mut sink,
        )
        .map_err(|f| fault(f, inner))?;
        if rep.limited {
            accounting::count(self.arena(), inner.me, counter::IN_FLIGHT_LIMIT_HITS, 1);
        }
        if rep.moved > 0 {
            tracing::info!(
                queue = %self.display_name(),
                moved = rep.moved,
                "moved messages past maxReceiveCount to the dead-letter queue"
            );
        }
        Ok(Pass {
            taken: rep.taken,
            move_err,
        })
    }
}

/// What one [`Queue::receive_pass`] did.
#[derive(Debug)]
struct Pass {
    /// Messages taken.
    taken: usize,
    /// Why a move failed, if one did.
    move_err: Option<Error>,
}

#[cfg(all(test, not(shmfifo_loom)))]
mod tests {
    use std::time::Duration;

    use super::super::queue::Op;
    use crate::protocol::sweep::{self, Swept, SWEEP_CHUNK};
    use crate::{Deduplication, Queue, QueueConfig, ReceiveOptions, SendMessage};

    /// A queue of 65,536 groups (a table of 131,072 entries) on the test clock, with a message
    /// received (in flight for 10 s) in each of `groups` groups.
    fn in_flight(groups: usize) -> Queue {
        let cfg = QueueConfig::new()
            .deduplication(Deduplication::Off)
            .max_groups(65_536)
            .test_clock(true);
        let q = Queue::create_anonymous(&cfg).unwrap();
        for g in 0..groups {
            q.send(&SendMessage::new(&format!("g{g}"), "m")).unwrap();
        }
        let o = ReceiveOptions::max(10)
            .wait(Duration::ZERO)
            .visibility_timeout(Duration::from_secs(10));
        let mut got = 0;
        while got < groups {
            let n = q.receive(&o).unwrap().len();
            assert!(n > 0, "every message is received once");
            got += n;
        }
        q
    }

    fn sweep_due(q: &Queue, periodic: bool) -> Swept {
        let inner = &*q.inner;
        sweep::sweep_due(q.arena(), &Op::new(inner), inner.me, periodic).unwrap()
    }

    fn redelivered(q: &Queue) -> usize {
        let o = ReceiveOptions::max(10).wait(Duration::ZERO);
        let mut n = 0;
        loop {
            let got = q.receive(&o).unwrap();
            if got.is_empty() {
                return n;
            }
            assert!(got.iter().all(|m| m.receive_count == 2), "{got:?}");
            n += got.len();
        }
    }

    /// V3: when visibility timeouts end, the sweep finds the groups concerned on the
    /// expiry wheel, looking at those groups only (the whole table is 131,072 entries), hints
    /// each, and every message is received again.
    #[test]
    fn v3_an_expiry_visits_the_expired_groups_not_the_table() {
        let q = in_flight(5);
        q.advance_clock(Duration::from_secs(11)).unwrap();
        let s = sweep_due(&q, false);
        assert_eq!(s.pushed, 5);
        assert!(s.visited >= 5 && s.visited <= 10, "{s:?}");
        assert_eq!(redelivered(&q), 5);
    }

    /// V3 with deadlines left off the wheel (a receiver stopped or killed between publishing
    /// its deadline and filing it; here the wheel is wiped): the periodic sweeps, a bounded
    /// chunk of the table each, find every locked group within one turn of the table and file
    /// it again, so that the expiry sweep finds them all when their timeouts end.
    #[test]
    fn v3_periodic_chunks_file_what_the_wheel_lost() {
        let q = in_flight(40);
        sweep::forget_the_wheel(q.arena());
        let table = q.arena().group_entries();
        for _ in 0..table.div_ceil(SWEEP_CHUNK) {
            let s = sweep_due(&q, true);
            assert!(s.visited as u64 <= SWEEP_CHUNK, "bounded: {s:?}");
            assert_eq!(s.pushed, 0, "still in flight");
        }
        q.advance_clock(Duration::from_secs(11)).unwrap();
        let s = sweep_due(&q, false);
        assert_eq!(s.pushed, 40, "every group filed again: {s:?}");
        assert!(s.visited <= 80, "{s:?}");
        assert_eq!(redelivered(&q), 40);
    }
}
