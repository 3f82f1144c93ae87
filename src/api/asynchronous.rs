//! `AsyncQueue` (cargo feature `tokio`): a receive whose long poll is a future.
//!
//! The doorbell is a futex word in the arena, and a futex cannot be registered with epoll, so a
//! runtime cannot wait on it the way it waits on a socket. Each `AsyncQueue` handle therefore
//! has one *watcher* thread, started on the first wait, that sleeps on the doorbell for all of
//! that handle's waiting tasks and wakes them (a [`tokio::sync::Notify`]) when it rings or when
//! a visibility or delay expiry is due. The alternatives are worse: `spawn_blocking` per wait
//! holds a blocking-pool thread per waiting task (1,000 waiting tasks, 1,000 threads, and the
//! pool's cap turns waits into queueing), and polling with a timer costs latency or CPU. One
//! thread per handle costs one sleeping thread, whatever the number of tasks.
//!
//! A task takes messages only inside one `poll` (a plain non-blocking receive), so a receive
//! future that is dropped before it completes has taken nothing: every message stays visible.
//!
//! The protocol between a task and the watcher (no wake-up is lost):
//! 1. the task enables its `Notified` future, *then* announces itself on the doorbell
//!    (`doorbell::begin_wait`, which producers check before ringing) and reads the doorbell,
//!    *then* tries a receive;
//! 2. the watcher notifies every enabled task each time it sees the doorbell at a value other
//!    than the one it last notified for, and each time its sleep times out (an expiry may be
//!    due);
//! 3. so a message published after the task's try is either seen by a producer that rings
//!    (the task is announced) and the watcher, sleeping on the old value or about to load the
//!    new one, notifies after the task enabled; or it was published before the try, which
//!    sees it.
//!
//! A named queue's file may be truncated under a waiting task (anonymous ones are sealed), and a
//! truncation rings no bell. The watcher looks at the file's length after each sleep that ended
//! by its timeout or lasted a millisecond or more (`sys::needs_look`, as a blocking receiver
//! does); when it finds the file shorter than the mapping it records the cut, wakes every task
//! and ends, touching the arena no more (a cut may leave none of it, the doorbell included). A
//! task woken after a wait of a millisecond or more (or by its deadline) looks itself before
//! its withdrawal writes its participant record (past the first page) and before its next try,
//! as a blocking receiver does: the watcher's look may precede a cut by the runtime's delay in
//! polling the task. It records a cut it finds, and returns `Truncated` without withdrawing; a
//! task rung sooner reads the watcher's record; a receive dropped while it waits looks before it
//! withdraws. As in the blocking API, a cut while no task waits is met by the next operation,
//! which the kernel may kill with SIGBUS, as is one within a millisecond of a ring.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use tokio::sync::Notify;

use super::queue::Queue;
use super::types::{Message, ReceiveBuffer, ReceiveOptions};
use crate::error::{Error, Result};
use crate::protocol::accounting::{self, counter};
use crate::protocol::doorbell;
use crate::sys;

/// A [`Queue`] whose receives wait as futures on a tokio runtime (the cargo feature `tokio`),
/// never blocking a worker thread while they wait. `send`, `delete` and the other operations
/// never wait for messages: call them on [`AsyncQueue::queue`] (they return in microseconds; a
/// claim held by a stopped process can hold one up to a bounded wait, as in the blocking API,
/// and so can a receive's move to a dead-letter queue: docs/async.md).
///
/// Cheap to clone, `Send` and `Sync`; clones share one watcher thread, started at the first
/// wait, which ends when the last clone is dropped: make one `AsyncQueue` a queue a process
/// and clone it into tasks (each `AsyncQueue::new` has a watcher of its own).
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> shmfifo::Result<()> {
/// use std::time::Duration;
/// use shmfifo::{AsyncQueue, Queue, QueueConfig, ReceiveOptions, SendMessage};
///
/// let q = AsyncQueue::new(Queue::create_anonymous(&QueueConfig::new())?);
/// let producer = q.queue().clone();
/// tokio::spawn(async move {
///     tokio::time::sleep(Duration::from_millis(20)).await;
///     producer.send(&SendMessage::new("g", "hello").dedup_id("1")).unwrap();
/// });
/// // Waits (as a future) until the message arrives.
/// let got = q.receive(&ReceiveOptions::max(1).wait(Duration::from_secs(5))).await?;
/// assert_eq!(got[0].body, "hello");
/// q.queue().delete(&got[0].receipt_handle)?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct AsyncQueue {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    queue: Queue,
    watcher: OnceLock<Watcher>,
}

#[derive(Debug)]
struct Watcher {
    state: Arc<WatchState>,
    thread: Option<JoinHandle<()>>,
}

#[derive(Debug)]
struct WatchState {
    queue: Queue,
    notify: Notify,
    /// Tasks between registering and finishing a wait; the watcher sleeps on the doorbell
    /// only while there are some, and parks otherwise.
    waiting: AtomicU32,
    /// 1 once the handle is gone: the watcher ends.
    closed: AtomicU32,
    /// The watcher thread, to unpark (set before any task can register).
    thread: OnceLock<thread::Thread>,
    /// The file's length when the watcher found it cut below the mapping ([`NOT_CUT`] until
    /// then); set once, after which the watcher has ended.
    cut_at: AtomicU64,
}

/// [`WatchState::cut_at`] before any cut.
const NOT_CUT: u64 = u64::MAX;

impl AsyncQueue {
    /// Wraps a queue handle (see [`Queue::create`] and [`Queue::open`]).
    pub fn new(queue: Queue) -> Self {
        AsyncQueue {
            shared: Arc::new(Shared {
                queue,
                watcher: OnceLock::new(),
            }),
        }
    }

    /// The blocking handle, for every operation that does not wait for messages.
    ///
    /// # Examples
    ///
    /// ```
    /// use shmfifo::{AsyncQueue, Queue, QueueConfig, SendMessage};
    ///
    /// let q = AsyncQueue::new(Queue::create_anonymous(&QueueConfig::new())?);
    /// q.queue().send(&SendMessage::new("g", "m").dedup_id("1"))?;
    /// assert_eq!(q.queue().attributes().approximate_number_of_messages, 1);
    /// # Ok::<(), shmfifo::Error>(())
    /// ```
    pub fn queue(&self) -> &Queue {
        &self.shared.queue
    }

    /// [`Queue::receive`], with the wait as a future. Dropping the future before it completes
    /// takes nothing (every message stays visible).
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> shmfifo::Result<()> {
    /// use std::time::Duration;
    /// use shmfifo::{AsyncQueue, Queue, QueueConfig, ReceiveOptions, SendMessage};
    ///
    /// let q = AsyncQueue::new(Queue::create_anonymous(&QueueConfig::new())?);
    /// // An empty queue: the wait ends after 50 ms with nothing.
    /// let opts = ReceiveOptions::max(10).wait(Duration::from_millis(50));
    /// assert!(q.receive(&opts).await?.is_empty());
    /// q.queue().send(&SendMessage::new("g", "m").dedup_id("1"))?;
    /// assert_eq!(q.receive(&opts).await?.len(), 1);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn receive(&self, opts: &ReceiveOptions) -> Result<Vec<Message>> {
        let mut buf = ReceiveBuffer::new();
        self.receive_into(opts, &mut buf).await?;
        buf.msgs.truncate(buf.len);
        Ok(buf.msgs)
    }

    /// [`Queue::receive_into`], with the wait as a future (no allocation once `buf` is warm).
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> shmfifo::Result<()> {
    /// use shmfifo::{AsyncQueue, Queue, QueueConfig, ReceiveBuffer, ReceiveOptions, SendMessage};
    ///
    /// let q = AsyncQueue::new(Queue::create_anonymous(&QueueConfig::new())?);
    /// q.queue().send(&SendMessage::new("g", "m").dedup_id("1"))?;
    /// let mut buf = ReceiveBuffer::new();
    /// assert_eq!(q.receive_into(&ReceiveOptions::max(10), &mut buf).await?, 1);
    /// assert_eq!(buf.messages()[0].body, "m");
    /// # Ok(())
    /// # }
    /// ```
    pub async fn receive_into(
        &self,
        opts: &ReceiveOptions,
        buf: &mut ReceiveBuffer,
    ) -> Result<usize> {
        // Bodies copied, whatever the buffer's last receive was (`receive_borrowed_into`).
        buf.borrow = false;
        let n = self.receive_waiting(opts, buf, None).await?;
        if n == 0 {
            self.shared
                .queue
                .count_empty_receive(self.shared.queue.long_poll(opts));
        }
        Ok(n)
    }

    /// [`Queue::receive_with_attempt_id`] (R11), with the wait as a future: a retry with the
    /// same id within 5 minutes replays the recorded batch at once; otherwise it waits as
    /// [`AsyncQueue::receive`] does, and records what it takes under the id. A replay may wait
    /// up to a second behind a stopped process holding a recorded message's group claim (as
    /// in the blocking API), on the runtime's blocking pool (`spawn_blocking`): it holds no
    /// worker.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> shmfifo::Result<()> {
    /// use std::time::Duration;
    /// use shmfifo::{AsyncQueue, Queue, QueueConfig, ReceiveOptions, SendMessage};
    ///
    /// let q = AsyncQueue::new(Queue::create_anonymous(&QueueConfig::new())?);
    /// let opts = ReceiveOptions::max(10).wait(Duration::from_secs(5));
    /// let producer = q.queue().clone();
    /// tokio::spawn(async move {
    ///     tokio::time::sleep(Duration::from_millis(20)).await;
    ///     producer.send(&SendMessage::new("g", "job").dedup_id("1")).unwrap();
    /// });
    /// // Waits (as a future) for the message, and records it under the id.
    /// let first = q.receive_with_attempt_id(&opts, "attempt-1").await?;
    /// // Retried with the same id (say the first answer was lost): the same batch at once.
    /// let retry = q.receive_with_attempt_id(&opts, "attempt-1").await?;
    /// assert_eq!(retry[0].receipt_handle, first[0].receipt_handle);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn receive_with_attempt_id(
        &self,
        opts: &ReceiveOptions,
        attempt_id: &str,
    ) -> Result<Vec<Message>> {
        let mut buf = ReceiveBuffer::new();
        let n = self
            .receive_waiting(opts, &mut buf, Some(attempt_id))
            .await?;
        if n == 0 {
            self.shared
                .queue
                .count_empty_receive(self.shared.queue.long_poll(opts));
        }
        buf.msgs.truncate(buf.len);
        Ok(buf.msgs)
    }

    /// [`AsyncQueue::receive_into`] without counting an empty receive; each try a receive
    /// with attempt id `attempt` if there is one.
    async fn receive_waiting(
        &self,
        opts: &ReceiveOptions,
        buf: &mut ReceiveBuffer,
        attempt: Option<&str>,
    ) -> Result<usize> {
        let q = &self.shared.queue;
        buf.len = 0;
        // A unit of the task's cooperative budget (tokio's coop), before anything is taken:
        // a receive that finds messages completes at its first poll, so a consumer loop on a
        // busy queue never returned to the runtime, and on a current-thread runtime starved
        // every other task (a shutdown signal's included). Once the budget is spent this
        // yields, having taken nothing (a receive dropped here takes nothing).
        tokio::task::consume_budget().await;
        // A cut the watcher found ends every later receive too, before it touches the arena
        // (the live settings included).
        if let Some(e) = self.shared.watcher.get().and_then(|w| w.state.cut(q)) {
            return Err(e);
        }
        let (max, vt, wait) = q.receive_params(opts)?;
        let n = self.try_once(opts, attempt, max, vt, buf).await?;
        if n > 0 || wait == 0 {
            return Ok(n);
        }
        let deadline = tokio::time::Instant::now() + Duration::from_millis(wait);
        let state = self.watcher();
        let _registered = Registration::new(state);
        loop {
            let notified = state.notify.notified();
            tokio::pin!(notified);
            // Step 1 of the protocol (module doc): enabled before announcing and trying.
            notified.as_mut().enable();
            if let Some(e) = state.cut(q) {
                return Err(e);
            }
            let announced = Announced::new(q, state);
            let n = self.try_once(opts, attempt, max, vt, buf).await;
            if !matches!(n, Ok(0)) {
                announced.withdraw();
                return n;
            }
            // Counted as a blocking receiver's sleep is (`counters().waits`: it counted none of
            // these).
            accounting::count(q.arena(), q.inner.me, counter::WAITS, 1);
            let slept = sys::monotonic_ns();
            let timed_out = tokio::time::timeout_at(deadline, notified).await.is_err();
            // Before the withdrawal writes our participant record and the next try reads the
            // tables (module doc): after a wait that ended by our deadline or lasted a
            // millisecond or more we look ourselves, as a blocking receiver does (the
            // watcher's own look may precede a cut by the runtime's delay in polling us), and
            // record a cut for the watcher and the handle's later receives; after a quicker
            // ring, what the watcher recorded.
            let cut = if timed_out || sys::needs_look(sys::Woke::Rung, slept) {
                q.truncated().inspect(|c| {
                    if let Some(Error::Truncated { found, .. }) = c {
                        state.record_cut(*found);
                    }
                })
            } else {
                Ok(state.cut(q))
            };
            match cut {
                Ok(None) => announced.withdraw(),
                Ok(Some(e)) | Err(e) => {
                    // Keep the announcement: its record may lie past the cut (as a blocking
                    // receiver does; a dead process's count is given back by recovery).
                    announced.keep();
                    return Err(e);
                }
            }
            if timed_out {
                return Ok(0);
            }
        }
    }

    /// One non-blocking try of a receive (under the attempt id, if any: a replay or a fresh
    /// take). A replay, which may wait up to a second behind a stopped participant holding a
    /// recorded message's group claim, is made on the runtime's blocking pool
    /// (`spawn_blocking`), so that it holds no worker (whatever the runtime's flavor, in a
    /// `LocalSet` too); every other try runs in place, and returns in microseconds. (A record
    /// made by another receive between the look and the try is replayed in place.) A receive
    /// dropped while its replay runs leaves the replay to finish: the recorded messages'
    /// visibility restarted, as after a lost answer, and a retry replays them again.
    async fn try_once(
        &self,
        opts: &ReceiveOptions,
        attempt: Option<&str>,
        max: usize,
        vt: u64,
        buf: &mut ReceiveBuffer,
    ) -> Result<usize> {
        let q = &self.shared.queue;
        let Some(id) = attempt else {
            return q.try_receive(max, vt, buf);
        };
        if !q.replays(opts, id)? {
            return q.with_attempt(opts, id, buf, |q, buf| q.try_receive(max, vt, buf));
        }
        let (q, opts, id) = (q.clone(), *opts, id.to_owned());
        let made = tokio::task::spawn_blocking(move || {
            let mut b = ReceiveBuffer::new();
            let r = q.with_attempt(&opts, &id, &mut b, |q, b| q.try_receive(max, vt, b));
            (r, b.msgs, b.len, b.vis)
        })
        .await;
        let (r, msgs, len, vis) = match made {
            Ok(m) => m,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(_) => {
                return Err(Error::Io(std::io::Error::other(
                    "the runtime shut down during a receive's replay",
                )))
            }
        };
        (buf.msgs, buf.len, buf.vis) = (msgs, len, vis);
        r
    }

    /// A stream of messages received with `opts` (its wait time is the long poll of each
    /// receive, 20 s if it gives none or zero; a stream waits as long as it takes, receive
    /// after receive, and never polls an empty queue in a loop). Messages come in
    /// the order the receives return them; each is in flight until deleted through
    /// [`AsyncQueue::queue`]. The stream ends after yielding an error (any error, a retryable
    /// one too: make a new stream to go on). A stream dropped with messages received and not
    /// yet yielded (a receive returns up to `opts`'s maximum at once) makes them visible again
    /// at once (a visibility change to zero), instead of leaving them in flight, their groups
    /// locked, until their visibility timeout. They were received, though: their receive
    /// counts stay raised, and on a queue with a redrive policy a stream made and dropped
    /// again and again moves them to the dead-letter queue unseen (X1). A stream that may be
    /// dropped early receives one message at a time (`ReceiveOptions::max(1)`).
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> shmfifo::Result<()> {
    /// use std::future::poll_fn;
    /// use std::pin::Pin;
    /// use futures_core::Stream;
    /// use shmfifo::{AsyncQueue, Queue, QueueConfig, ReceiveOptions, SendMessage};
    ///
    /// let q = AsyncQueue::new(Queue::create_anonymous(&QueueConfig::new())?);
    /// for i in 0..3 {
    ///     q.queue().send(&SendMessage::new("g", &format!("m{i}")).dedup_id(&i.to_string()))?;
    /// }
    /// let mut stream = q.stream(ReceiveOptions::max(10));
    /// let mut bodies = Vec::new();
    /// while bodies.len() < 3 {
    ///     let m = poll_fn(|cx| Pin::new(&mut stream).poll_next(cx)).await.unwrap()?;
    ///     bodies.push(m.body.clone());
    ///     q.queue().delete(&m.receipt_handle)?;
    /// }
    /// assert_eq!(bodies, ["m0", "m1", "m2"]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn stream(&self, mut opts: ReceiveOptions) -> MessageStream {
        if opts.wait_time.is_none_or(|w| w.is_zero()) {
            opts.wait_time = Some(crate::config::MAX_WAIT_TIME);
        }
        MessageStream {
            queue: self.clone(),
            opts,
            ready: std::collections::VecDeque::new(),
            pending: None,
            done: false,
        }
    }

    /// The watcher, started on first use.
    fn watcher(&self) -> &WatchState {
        &self
            .shared
            .watcher
            .get_or_init(|| Watcher::start(self.shared.queue.clone()))
            .state
    }
}

impl Watcher {
    fn start(queue: Queue) -> Watcher {
        let state = Arc::new(WatchState {
            queue,
            notify: Notify::new(),
            waiting: AtomicU32::new(0),
            closed: AtomicU32::new(0),
            thread: OnceLock::new(),
            cut_at: AtomicU64::new(NOT_CUT),
        });
        let s = Arc::clone(&state);
        let thread = thread::Builder::new()
            .name("shmfifo-watch".into())
            .spawn(move || s.run())
            .expect("spawning the shmfifo watcher thread");
        let _ = state.thread.set(thread.thread().clone());
        Watcher {
            state,
            thread: Some(thread),
        }
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        // No task can be waiting: each holds a borrow of the `AsyncQueue` that owns us.
        self.state.closed.store(1, Ordering::Release);
        // In a child forked with the handle the thread does not exist (only the forking
        // thread is copied): not joined there (glibc marks the copied threads gone, so a join
        // returns; another C library's may wait for ever).
        if crate::sys::pid() != self.state.queue.inner.pid {
            if let Some(t) = self.thread.take() {
                std::mem::forget(t);
            }
            return;
        }
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}

impl WatchState {
    /// The watcher thread (module doc, step 2).
    fn run(&self) {
        let q = &self.queue;
        let a = q.arena();
        // The tasks we wake see what the ring announced (`doorbell::rung` is an Acquire load).
        let mut seen = doorbell::rung(a);
        // An `fstat` that failed: no arena read until one succeeds.
        let mut look = false;
        loop {
            // Acquire: pairs with the Release store in `Watcher::drop`.
            if self.closed.load(Ordering::Acquire) != 0 {
                return;
            }
            // A task found the file cut (at its deadline): touch the arena no more.
            if self.cut_at.load(Ordering::Relaxed) != NOT_CUT {
                return;
            }
            if look {
                match self.look(q) {
                    Look::Clean => {
                        look = false;
                        // As after a timeout: an expiry may be due.
                        self.notify.notify_waiters();
                    }
                    Look::Cut => return,
                    Look::Failed => {
                        thread::sleep(Duration::from_millis(1));
                        continue;
                    }
                }
            }
            // Acquire: pairs with `Registration::new`'s increment (then `unpark`).
            if self.waiting.load(Ordering::Acquire) == 0 {
                thread::park();
                continue;
            }
            // The load that must follow a ring the tasks wait for (module doc, step 3).
            let now_bell = doorbell::rung(a);
            if now_bell != seen {
                seen = now_bell;
                self.notify.notify_waiters();
                continue;
            }
            let now = q.inner.real_ms();
            let t = q.sleep_bound_ms(now, u64::MAX);
            let slept = sys::monotonic_ns();
            let woke = sys::futex_wait(doorbell::receivers(a), now_bell, t);
            // The file may have been cut while we slept (module doc): look before touching
            // the arena again.
            if sys::needs_look(woke, slept) {
                match self.look(q) {
                    Look::Clean => {}
                    Look::Cut => return,
                    Look::Failed => {
                        look = true;
                        continue;
                    }
                }
            }
            // An unchanged value means the sleep ended without a ring.
            if doorbell::rung(a) == now_bell {
                // Timed out (or a spurious wake-up): an expiry may be due; let them look.
                self.notify.notify_waiters();
            }
        }
    }

    /// Compares the queue's file with the mapping (an `fstat`); records a cut.
    fn look(&self, q: &Queue) -> Look {
        match q.truncated() {
            Ok(None) => Look::Clean,
            Ok(Some(Error::Truncated { found, .. })) => {
                self.record_cut(found);
                Look::Cut
            }
            Ok(Some(_)) | Err(_) => Look::Failed,
        }
    }

    /// Records that the file was found `found` bytes long, below the mapping (the first
    /// finder's length stays), and wakes every task to see it.
    fn record_cut(&self, found: u64) {
        // Relaxed: the length is all it publishes. A task cannot miss it: its `Notified`
        // exists before its check of `cut_at`, and `notify_waiters` (after this store, under
        // `Notify`'s lock) completes every `Notified` created before the call.
        let _ = self
            .cut_at
            .compare_exchange(NOT_CUT, found, Ordering::Relaxed, Ordering::Relaxed);
        self.notify.notify_waiters();
    }
}

/// What the watcher's look at the file found.
enum Look {
    /// As long as the mapping.
    Clean,
    /// Shorter: recorded in `cut_at`.
    Cut,
    /// The `fstat` failed (or said something else): looked at again before any arena read.
    Failed,
}

impl WatchState {
    /// `Truncated` once the watcher (or a task at its deadline) has found the queue's file
    /// cut below its mapping.
    fn cut(&self, q: &Queue) -> Option<Error> {
        // Relaxed: see `record_cut`.
        let found = self.cut_at.load(Ordering::Relaxed);
        (found != NOT_CUT).then(|| Error::Truncated {
            expected: q.mapped_len(),
            found,
        })
    }
}

/// A task that waits: counted, so the watcher sleeps on the doorbell while it waits.
struct Registration<'a>(&'a WatchState);

impl<'a> Registration<'a> {
    fn new(s: &'a WatchState) -> Self {
        // Release: pairs with the watcher's Acquire load; `unpark` wakes it if it was parked
        // (park/unpark keep a token, so an unpark before the park is not lost).
        if s.waiting.fetch_add(1, Ordering::Release) == 0 {
            if let Some(w) = s.thread.get() {
                w.unpark();
            }
        }
        Registration(s)
    }
}

impl Drop for Registration<'_> {
    fn drop(&mut self) {
        // Relaxed: the count only gates the watcher's sleeping; a stale read costs one sleep.
        self.0.waiting.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Announced on the doorbell (producers ring while someone is), for one try and the await.
/// Ended by [`Announced::withdraw`] after a check, by [`Announced::keep`] on a cut, or (a
/// receive future dropped while it waits) by `Drop`, which looks at the file first.
struct Announced<'a> {
    q: &'a Queue,
    state: &'a WatchState,
}

impl<'a> Announced<'a> {
    fn new(q: &'a Queue, state: &'a WatchState) -> Self {
        doorbell::begin_wait(q.arena(), q.inner.index as usize);
        Announced { q, state }
    }

    /// Withdraws (`end_wait`): the caller knows of no cut.
    fn withdraw(self) {
        doorbell::end_wait(self.q.arena(), self.q.inner.index as usize);
        std::mem::forget(self);
    }

    /// Stays announced: the file was cut, and the record may lie past the cut.
    fn keep(self) {
        std::mem::forget(self);
    }
}

impl Drop for Announced<'_> {
    fn drop(&mut self) {
        // A receive cancelled while it waited (its future dropped): the file may have been
        // cut meanwhile, with nobody looking yet. One `fstat` per cancelled wait.
        if self.state.cut(self.q).is_none() && matches!(self.q.truncated(), Ok(None)) {
            doorbell::end_wait(self.q.arena(), self.q.inner.index as usize);
        }
    }
}

/// A receive in progress of a [`MessageStream`].
type Pending = Pin<Box<dyn Future<Output = Result<Vec<Message>>> + Send>>;

/// The messages of [`AsyncQueue::stream`]: a [`futures_core::Stream`] of
/// `Result<Message>`.
pub struct MessageStream {
    queue: AsyncQueue,
    opts: ReceiveOptions,
    ready: std::collections::VecDeque<Message>,
    pending: Option<Pending>,
    done: bool,
}

impl std::fmt::Debug for MessageStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MessageStream")
            .field("opts", &self.opts)
            .field("ready", &self.ready.len())
            .field("done", &self.done)
            .finish()
    }
}

impl Drop for MessageStream {
    fn drop(&mut self) {
        if self.ready.is_empty() {
            return;
        }
        let shared = &self.queue.shared;
        let q = &shared.queue;
        // Not in a child forked with the handle (the messages are the parent's), and not on a
        // file found cut (the arena is touched no more: the module doc).
        let cut = q.inner.is_cut()
            || shared
                .watcher
                .get()
                .is_some_and(|w| w.state.cut(q).is_some());
        if cut || crate::sys::pid() != q.inner.pid {
            return;
        }
        // Received, never handed out: visible again at once. Groups in the order they were
        // received (R6), each group's messages last first, so that its earliest goes back
        // last and the group's run becomes ready in one piece (R3 keeps a later message
        // hidden behind an earlier one in flight whatever the order).
        let msgs: Vec<Message> = self.ready.drain(..).collect();
        let mut groups: Vec<&str> = Vec::new();
        for m in &msgs {
            if !groups.contains(&m.group_id.as_str()) {
                groups.push(&m.group_id);
            }
        }
        for g in groups {
            for m in msgs.iter().rev().filter(|m| m.group_id == g) {
                let _ = q.change_visibility(&m.receipt_handle, Duration::ZERO);
            }
        }
    }
}

impl futures_core::Stream for MessageStream {
    type Item = Result<Message>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        loop {
            if let Some(m) = this.ready.pop_front() {
                return Poll::Ready(Some(Ok(m)));
            }
            if this.done {
                return Poll::Ready(None);
            }
            let fut = this.pending.get_or_insert_with(|| {
                let q = this.queue.clone();
                let opts = this.opts;
                Box::pin(async move { q.receive(&opts).await })
            });
            match fut.as_mut().poll(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(r) => {
                    this.pending = None;
                    match r {
                        Ok(v) => this.ready.extend(v),
                        Err(e) => {
                            this.done = true;
                            return Poll::Ready(Some(Err(e)));
                        }
                    }
                }
            }
        }
    }
}
