//! Dead-letter queues: checking a redrive policy's target (X1, X2), the mover that a receive
//! calls under a group claim (X1, X3, D8), and redrive back to the sources (X6).

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::framing::attr_size;
use super::queue::queue_path;
use super::queue::{fault, Queue};
use super::types::*;
use crate::config::{Deduplication, RedrivePolicy, MAX_RECEIVE_COUNT};
use crate::error::{Error, ErrorCode, Result};
use std::sync::atomic::Ordering;

use crate::protocol::message::{self, MAX_ID_LEN};
use crate::protocol::receive::Taken;
use crate::protocol::view::MAX_REDRIVE_PATH;
use crate::protocol::{settings, words};

/// Checks a redrive policy's target (X1, X2): it exists, is a shmfifo queue other than this
/// one, deduplicates (for exactly-once moves, D8) and takes every message this queue can
/// hold. Returns its canonical path and the opened queue.
pub(super) fn check_dead_letter(
    p: &RedrivePolicy,
    own_nonce: Option<u64>,
    own_max_message_size: u32,
    own_binary: bool,
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
    if own_binary && !q.inner.binary {
        return Err(dl(
            &path,
            "it takes text bodies and this queue any bytes (BodyMode::Binary): a moved body might not be text; create it with BodyMode::Binary".into(),
        ));
    }
    if q.maximum_message_size() < own_max_message_size {
        return Err(dl(
            &path,
            format!(
                "its maximum_message_size {} is smaller than this queue's {own_max_message_size}",
                q.maximum_message_size()
            ),
        ));
    }
    Ok((path, q))
}

/// A check that every dead-letter move of a handle must pass ([`Queue::set_dead_letter_check`]):
/// given the queue moving the message, the dead-letter queue's path as the live redrive
/// policy names it, and that queue as opened (`None`: asked before the path is opened at
/// all, so that a path that may not be used is never opened), `Ok(())` lets the moves go on
/// and `Err(reason)` refuses them.
pub type DeadLetterCheck =
    dyn Fn(&Queue, &Path, Option<&Queue>) -> std::result::Result<(), String> + Send + Sync;

/// A handle's [`DeadLetterCheck`], shown by `Debug` as its presence only.
#[derive(Clone)]
pub(super) struct CheckFn(pub(super) std::sync::Arc<DeadLetterCheck>);

impl std::fmt::Debug for CheckFn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DeadLetterCheck")
    }
}

/// How long a redrive holds a message it skips (see `Queue::hold_skipped`).
const SKIPPED_HOLD: Duration = Duration::from_secs(3600);

impl Queue {
    /// Sets a check that every move of a message to the dead-letter queue through this handle
    /// (and its clones) must pass first: a receive past `maxReceiveCount` (X1), a quarantine's
    /// rescue. It runs once a receive that has messages to move, with the dead-letter queue's
    /// path as the live redrive policy names it: before the path is opened (the queue `None`;
    /// a path it refuses is never opened) and with the queue opened (then at each receive that
    /// moves, the queue kept open). Where it refuses, nothing moves: the receive answers
    /// [`Error::DeadLetterQueue`] with its reason (unless it took other messages), and the
    /// messages stay in this queue, received (their counts raised) as a failed move leaves
    /// them (a quarantine's rescue, which moves what it can, drops them as it drops those of a
    /// dead-letter queue that is not there).
    ///
    /// For a process that acts for others (`shmfifo serve`): a redrive policy is in the shared
    /// file, so any process that may write the queue may name any path as its dead-letter
    /// queue, and the move then opens that path with *this* process's rights. The check is
    /// where such a process confines the moves to what the users it serves may reach.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::time::Duration;
    ///
    /// use shmfifo::{Error, Queue, QueueConfig, ReceiveOptions, RedrivePolicy, SendMessage};
    ///
    /// let dir = std::env::temp_dir().join(format!("dl-check-{}", std::process::id()));
    /// std::fs::create_dir_all(&dir)?;
    /// let dlq = Queue::create_at(dir.join("dlq.fifo"), &QueueConfig::new())?;
    /// let q = Queue::create_at(
    ///     dir.join("work.fifo"),
    ///     &QueueConfig::new()
    ///         .redrive_policy(RedrivePolicy::new(dir.join("dlq.fifo").display().to_string(), 1)),
    /// )?;
    /// // Dead letters only into queues of `dir` itself.
    /// let allowed = dir.canonicalize()?;
    /// q.set_dead_letter_check(Arc::new(move |_, path, _opened| {
    ///     if path.parent() == Some(allowed.as_path()) {
    ///         Ok(())
    ///     } else {
    ///         Err(format!("{} is outside {}", path.display(), allowed.display()))
    ///     }
    /// }));
    /// q.send(&SendMessage::new("g", "poison").dedup_id("1"))?;
    /// let once = ReceiveOptions::default().visibility_timeout(Duration::ZERO);
    /// assert_eq!(q.receive(&once)?.len(), 1);
    /// assert!(q.receive(&once)?.is_empty()); // moved: the check let it go
    /// assert_eq!(dlq.receive(&ReceiveOptions::default())?[0].body, "poison");
    /// # Queue::unlink_at(dir.join("work.fifo"))?;
    /// # Queue::unlink_at(dir.join("dlq.fifo"))?;
    /// # std::fs::remove_dir(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn set_dead_letter_check(&self, check: std::sync::Arc<DeadLetterCheck>) {
        *self
            .inner
            .dl_check
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some(CheckFn(check));
    }

    /// Sets whether this handle's receives (and its clones') move a message whose receive
    /// count has reached the redrive policy's `maxReceiveCount` to the dead-letter queue (X1):
    /// on by default, as SQS does. Off, such a message is received as any other (its count
    /// still raised): for a consumer that moves messages to the dead-letter queue by a
    /// measure of its own, and whose own hand-backs must not count toward the policy's (the
    /// bridge: after the remote refused a message `max_tries` times, where each restart of the
    /// bridge hands back what it held and receives it again). Other handles of the queue
    /// still move such messages when they receive them.
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// use shmfifo::{Queue, QueueConfig, ReceiveOptions, RedrivePolicy, SendMessage};
    ///
    /// let dir = std::env::temp_dir().join(format!("dl-on-receive-{}", std::process::id()));
    /// std::fs::create_dir_all(&dir)?;
    /// let dlq = Queue::create_at(dir.join("dlq.fifo"), &QueueConfig::new())?;
    /// let q = Queue::create_at(
    ///     dir.join("out.fifo"),
    ///     &QueueConfig::new()
    ///         .redrive_policy(RedrivePolicy::new(dir.join("dlq.fifo").display().to_string(), 1)),
    /// )?;
    /// q.set_dead_letter_on_receive(false);
    /// q.send(&SendMessage::new("g", "handed back").dedup_id("1"))?;
    /// let again = ReceiveOptions::default().visibility_timeout(Duration::ZERO);
    /// assert_eq!(q.receive(&again)?.len(), 1);
    /// let second = q.receive(&again)?; // past maxReceiveCount 1, and still received
    /// assert_eq!(second[0].receive_count, 2);
    /// assert_eq!(dlq.attributes().approximate_number_of_messages, 0);
    /// # Queue::unlink_at(dir.join("out.fifo"))?;
    /// # Queue::unlink_at(dir.join("dlq.fifo"))?;
    /// # std::fs::remove_dir(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn set_dead_letter_on_receive(&self, on: bool) {
        // Relaxed: a setting of this process's handle; a receive reads it with its policy.
        self.inner.dl_on_receive.store(on, Ordering::Relaxed);
    }

    /// Whether this handle's receives move messages past `maxReceiveCount`
    /// ([`Queue::set_dead_letter_on_receive`]; on by default).
    ///
    /// ```
    /// use shmfifo::{Queue, QueueConfig};
    ///
    /// let q = Queue::create_anonymous(&QueueConfig::new())?;
    /// assert!(q.dead_letter_on_receive());
    /// q.set_dead_letter_on_receive(false);
    /// assert!(!q.clone().dead_letter_on_receive()); // its clones share the setting
    /// # Ok::<(), shmfifo::Error>(())
    /// ```
    pub fn dead_letter_on_receive(&self) -> bool {
        // Relaxed: as `set_dead_letter_on_receive`.
        self.inner.dl_on_receive.load(Ordering::Relaxed)
    }

    /// Runs the handle's [`DeadLetterCheck`], if any, on a move to `dlq` at `path`.
    pub(super) fn check_dead_letter_move(&self, path: &Path, dlq: Option<&Queue>) -> Result<()> {
        let check = self
            .inner
            .dl_check
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        match check {
            Some(CheckFn(f)) => f(self, path, dlq).map_err(|reason| Error::DeadLetterQueue {
                path: path.to_owned(),
                reason,
            }),
            None => Ok(()),
        }
    }

    /// The dead-letter queue and `maxReceiveCount` of the live redrive policy, if any.
    pub(super) fn dead_letter(&self) -> Result<Option<(u32, u64)>> {
        let inner = &*self.inner;
        let c = settings::current(self.arena());
        // Relaxed: a process-local cache of that word.
        if inner.no_policy.load(Ordering::Relaxed) == c {
            return Ok(None);
        }
        let p = settings::read(self.arena()).map_err(|f| fault(f, inner))?;
        if p.max_receive_count == 0 {
            // Relaxed: as above.
            inner.no_policy.store(c, Ordering::Relaxed);
            return Ok(None);
        }
        Ok(Some((p.max_receive_count, p.version)))
    }

    /// The opened dead-letter queue of policy `version` (opened on first use, then cached),
    /// which the handle's [`DeadLetterCheck`] lets moves go to (asked at each call: once a
    /// receive pass).
    pub(super) fn dead_letter_queue(&self, version: u64) -> Result<Queue> {
        let (path, q) = self.dead_letter_opened(version)?;
        self.check_dead_letter_move(&path, Some(&q))?;
        Ok(q)
    }

    /// [`Queue::dead_letter_queue`] before the check of the queue opened: the queue and its
    /// path (the path checked before it is opened).
    fn dead_letter_opened(&self, version: u64) -> Result<(PathBuf, Queue)> {
        let inner = &*self.inner;
        let mut cache = inner.dlq.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((v, path, q)) = cache.as_ref() {
            // Only while the path still names the file opened: a dead-letter queue deleted
            // (and maybe created again) since is not the policy's queue any more, and a move
            // into the removed file lost every message moved (X1: a queue gone leaves the
            // message here). One `stat` and one `fstat` a receive that moves.
            if *v == version && names_file(path, q) {
                return Ok((path.clone(), q.clone()));
            }
        }
        *cache = None;
        let p = settings::read(self.arena()).map_err(|f| fault(f, inner))?;
        let path = PathBuf::from(std::ffi::OsStr::from_bytes(&p.path[..p.path_len]));
        self.check_dead_letter_move(&path, None)?;
        let q = Queue::open_at(&path).map_err(|e| Error::DeadLetterQueue {
            path: path.clone(),
            reason: format!("cannot be opened: {e}"),
        })?;
        if inner.binary && !q.inner.binary {
            return Err(Error::DeadLetterQueue {
                path,
                reason: "it takes text bodies and this queue any bytes".into(),
            });
        }
        if q.inner.dedup == Deduplication::Off {
            return Err(Error::DeadLetterQueue {
                path,
                reason: "its deduplication is off".into(),
            });
        }
        // The policy's name may have come to name this queue's own file since the policy was
        // set (which refuses it then): moving into itself would drop every message moved.
        if self.is_same_file(&q) {
            return Err(Error::DeadLetterQueue {
                path,
                reason: "it is this queue itself".into(),
            });
        }
        *cache = Some((p.version, path.clone(), q.clone()));
        Ok((path, q))
    }

    /// Sends a taken message to the dead-letter queue (X1, X3, D8, M2, M4, T2).
    pub(super) fn move_to(&self, dlq: &Queue, t: &Taken<'_>) -> Result<()> {
        let corrupt = || Error::Corrupted {
            what: "message lengths exceed the slot",
        };
        let lengths = t.lengths();
        let p = message::split(t.payload, lengths).map_err(|_| corrupt())?;
        let dedup = p.dedup;
        // M2: the id stays; D8: it becomes the dedup id (a message moved before keeps the id
        // it had: its dedup id).
        let mut id_text = [0u8; 36];
        if lengths.moved {
            if dedup.len() != 36 {
                return Err(corrupt());
            }
            id_text.copy_from_slice(dedup);
        } else {
            let id = self.message_id(t.idx, t.inc, t.member).to_string();
            id_text.copy_from_slice(id.as_bytes());
        }
        let (attrs, body) = (p.attrs, p.body);
        // Measured as `send` measures it: names, types and values, without our framing. A
        // move is not a send (the message was taken already): what the dead-letter queue's
        // arena can hold, not its live MaximumMessageSize, which may have been lowered since
        // the policy was set (a message then stuck at the head of its group, every receive
        // answering the move's error).
        let size = attr_size(attrs) + body.len();
        if size > dlq.maximum_message_size_limit() as usize {
            return Err(Error::DeadLetterQueue {
                path: dlq.path().map(Path::to_owned).unwrap_or_default(),
                reason: format!(
                    "a {size}-byte message does not fit its arena (messages of at most {} bytes)",
                    dlq.maximum_message_size_limit()
                ),
            });
        }
        let mut gid = [0u8; MAX_ID_LEN];
        let glen = t.group_id(&mut gid);
        // The bytes copied out of this queue before anything reaches the dead-letter queue:
        // a file cut under the copy (`sys::guard`) read zeros, which must not be sent on as
        // the message (a move is rare: one copy costs nothing that matters).
        let bytes = [attrs, body].concat();
        if self.inner.is_cut() {
            return Err(self.inner.cut_error());
        }
        let (attrs, body) = bytes.split_at(attrs.len());
        dlq.send_parts(
            &gid[..glen],
            &self.inner.source,
            &id_text,
            &[attrs],
            lengths.attrs,
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

    /// The live redrive policy (X1), if any.
    ///
    /// # Examples
    ///
    /// ```
    /// use shmfifo::{Queue, QueueConfig, QueueSettings, RedrivePolicy};
    ///
    /// let dlq_name = format!("doc-redrive-policy-dlq-{}", std::process::id());
    /// let _dlq = Queue::create(&dlq_name, &QueueConfig::new())?;
    /// # struct Unlink(String);
    /// # impl Drop for Unlink {
    /// #     fn drop(&mut self) {
    /// #         let _ = shmfifo::Queue::unlink(&self.0);
    /// #     }
    /// # }
    /// # let _cleanup = Unlink(dlq_name.clone());
    /// let q = Queue::create_anonymous(&QueueConfig::new())?;
    /// assert_eq!(q.redrive_policy()?, None);
    ///
    /// let policy = RedrivePolicy::new(dlq_name.as_str(), 3);
    /// q.set_attributes(&QueueSettings::new().redrive_policy(Some(policy)))?;
    /// let live = q.redrive_policy()?.expect("a policy");
    /// assert_eq!(live.max_receive_count, 3);
    /// // The dead-letter queue is kept by its (canonical) path.
    /// assert!(live.dead_letter_queue.ends_with(&format!("/{dlq_name}")));
    /// Queue::unlink(&dlq_name)?;
    /// # Ok::<(), shmfifo::Error>(())
    /// ```
    pub fn redrive_policy(&self) -> Result<Option<RedrivePolicy>> {
        let p = settings::read(self.arena()).map_err(|f| fault(f, &self.inner))?;
        self.inner.live()?;
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
    ///
    /// A destination that is this queue itself is `InvalidParameterValue` (moving a message
    /// into the queue it is taken from would drop it as a duplicate of itself, or, without
    /// deduplication, move the same messages round for ever); a message whose source is this
    /// queue stays, skipped.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// use shmfifo::{
    ///     Queue, QueueConfig, ReceiveOptions, RedriveOptions, RedrivePolicy, SendMessage,
    /// };
    ///
    /// let pid = std::process::id();
    /// let src_name = format!("doc-redrive-src-{pid}");
    /// let dlq_name = format!("doc-redrive-dlq-{pid}");
    /// let dlq = Queue::create(&dlq_name, &QueueConfig::new())?;
    /// # struct Unlink(String);
    /// # impl Drop for Unlink {
    /// #     fn drop(&mut self) {
    /// #         let _ = shmfifo::Queue::unlink(&self.0);
    /// #     }
    /// # }
    /// # let _dlq_cleanup = Unlink(dlq_name.clone());
    /// // After one receive, the receive that would deliver a message again moves it to `dlq`.
    /// let policy = RedrivePolicy::new(dlq_name.as_str(), 1);
    /// let src = Queue::create(&src_name, &QueueConfig::new().redrive_policy(policy))?;
    /// # let _src_cleanup = Unlink(src_name.clone());
    /// src.send(&SendMessage::new("g", "poison").dedup_id("1"))?;
    /// let vt0 = ReceiveOptions::default().visibility_timeout(Duration::ZERO);
    /// assert_eq!(src.receive(&vt0)?.len(), 1); // received once, not deleted
    /// assert!(src.receive(&vt0)?.is_empty()); // moved instead
    /// assert_eq!(dlq.attributes().approximate_number_of_messages, 1);
    ///
    /// // Once the consumer is fixed, move it back to its source queue.
    /// let report = dlq.redrive(&RedriveOptions::default())?;
    /// assert_eq!(report.moved, 1);
    /// let back = src.receive(&ReceiveOptions::default())?;
    /// assert_eq!(back[0].body, "poison");
    /// assert_eq!(back[0].receive_count, 1); // a new message
    /// Queue::unlink(&src_name)?;
    /// Queue::unlink(&dlq_name)?;
    /// # Ok::<(), shmfifo::Error>(())
    /// ```
    pub fn redrive(&self, opts: &RedriveOptions) -> Result<RedriveReport> {
        let mut rep = RedriveReport::default();
        let fixed = opts.destination.as_deref().map(queue_path).transpose()?;
        let mut dests: std::collections::HashMap<PathBuf, Queue> = Default::default();
        // A destination named is opened first: one that is not there is the error whether or
        // not a message is here to move (it answered "nothing moved" on an empty queue).
        if let Some(p) = &fixed {
            let q = Queue::open_at(p)?;
            if self.is_same_file(&q) {
                return Err(Error::InvalidParameterValue {
                    parameter: "destination",
                    reason: format!(
                        "{} is the queue redriven: a message moved into the queue it is taken from would be a duplicate of itself, or move round for ever",
                        p.display()
                    ),
                });
            }
            dests.insert(p.clone(), q);
        }
        // The messages skipped, held (in flight) while the redrive runs so that it does not
        // take them again, and put back when it returns, whichever way.
        let mut skipped: Vec<ReceiptHandle> = Vec::new();
        let r = self.redrive_moving(opts, fixed, dests, &mut rep, &mut skipped);
        for h in &skipped {
            let _ = self.change_visibility(h, Duration::ZERO);
        }
        r.map(|()| rep)
    }

    /// Whether `q` is a handle of this queue's own file (the same inode: a copy of the file,
    /// which keeps the nonce, is another queue).
    fn is_same_file(&self, q: &Queue) -> bool {
        use std::os::unix::fs::MetadataExt;
        match (self.inner.file.metadata(), q.inner.file.metadata()) {
            (Ok(a), Ok(b)) => (a.dev(), a.ino()) == (b.dev(), b.ino()),
            _ => q.inner.nonce == self.inner.nonce,
        }
    }

    /// Holds a message the redrive leaves here until it returns: counted in `rep.skipped`, its
    /// handle goes to `skipped`, and its visibility is made long enough that a long redrive (a rate limit, a
    /// move task) does not take it again after the receive's 30 s and count it twice. Put back
    /// when the redrive returns; a redriver that dies first has them released at once
    /// (`release_on_death`), or visible again after the hour.
    fn hold_skipped(
        &self,
        h: &ReceiptHandle,
        rep: &mut RedriveReport,
        skipped: &mut Vec<ReceiptHandle>,
    ) {
        rep.skipped += 1;
        let _ = self.change_visibility(h, SKIPPED_HOLD);
        skipped.push(*h);
    }

    /// [`Queue::redrive`]'s moves, into `rep`; the handles of the messages it leaves here go
    /// to `skipped`.
    fn redrive_moving(
        &self,
        opts: &RedriveOptions,
        fixed: Option<PathBuf>,
        mut dests: std::collections::HashMap<PathBuf, Queue>,
        rep: &mut RedriveReport,
        skipped: &mut Vec<ReceiptHandle>,
    ) -> Result<()> {
        let started = Instant::now();
        let mut buf = ReceiveBuffer::new();
        // Sources found unreachable, not tried again in this redrive: a source made again
        // meanwhile would take a group's later message ahead of the one skipped.
        let mut unreachable: std::collections::HashSet<PathBuf> = Default::default();
        // Groups held at a message its destination refused for its content: their later
        // messages stay behind it (a group's order kept within its destination).
        let mut blocked: std::collections::HashSet<String> = Default::default();
        loop {
            let want = opts
                .limit
                .map_or(10, |l| l.saturating_sub(rep.moved).min(10)) as u32;
            if want == 0 {
                return Ok(());
            }
            let ro = ReceiveOptions::max(want)
                .visibility_timeout(Duration::from_secs(30))
                .wait(Duration::ZERO);
            if self.receive_into(&ro, &mut buf)? == 0 {
                return Ok(());
            }
            let msgs = buf.messages();
            for (k, m) in msgs.iter().enumerate() {
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
                    .is_some_and(|c| c.load(Ordering::Relaxed))
                {
                    // Put back what this batch has not moved.
                    let _ = self.change_visibility(&m.receipt_handle, Duration::ZERO);
                    rep.cancelled = true;
                    continue;
                }
                if blocked.contains(&m.group_id) {
                    self.hold_skipped(&m.receipt_handle, rep, skipped);
                    continue;
                }
                let Some(path) = fixed.clone().or_else(|| {
                    let source = PathBuf::from(m.dead_letter_source.as_deref()?);
                    match &opts.sources {
                        Some(allowed) if !allowed.contains(&source) => None,
                        _ => Some(source),
                    }
                }) else {
                    self.hold_skipped(&m.receipt_handle, rep, skipped);
                    continue;
                };
                if unreachable.contains(&path) {
                    rep.unreachable += 1;
                    self.hold_skipped(&m.receipt_handle, rep, skipped);
                    continue;
                }
                let dest = match dests.get(&path) {
                    Some(q) => q.clone(),
                    None => match Queue::open_at(&path) {
                        // A source that is this queue (its file moved here, or a policy naming
                        // itself): not moved into itself.
                        Ok(q) if self.is_same_file(&q) => {
                            tracing::warn!(
                                queue = %self.display_name(),
                                source = %path.display(),
                                "redrive: a message's source queue is this queue; the message stays"
                            );
                            rep.unreachable += 1;
                            self.hold_skipped(&m.receipt_handle, rep, skipped);
                            unreachable.insert(path);
                            continue;
                        }
                        Ok(q) => {
                            dests.insert(path.clone(), q.clone());
                            q
                        }
                        // A message's own source that cannot be opened (gone, say): it stays,
                        // and the others move. (A destination given was opened first.)
                        Err(e) => {
                            tracing::warn!(
                                queue = %self.display_name(),
                                source = %path.display(),
                                error = %e,
                                "redrive: a message's source queue cannot be opened; the message stays"
                            );
                            rep.unreachable += 1;
                            self.hold_skipped(&m.receipt_handle, rep, skipped);
                            unreachable.insert(path);
                            continue;
                        }
                    },
                };
                let moved = (|| -> Result<()> {
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
                    // As bytes: a binary dead-letter queue's body exactly (a text queue
                    // checks them as text, S7).
                    let mut out = SendMessage::bytes(&m.group_id, m.bytes()).attributes(&attrs);
                    if dest.inner.dedup != Deduplication::Off {
                        out = out.dedup_id(&id);
                    }
                    dest.send(&out)?;
                    Ok(())
                })();
                if let Err(e) = moved {
                    // Refused for its own content (larger than the destination takes, say):
                    // this message and the rest of its group stay; the others move.
                    if matches!(
                        e.code(),
                        ErrorCode::InvalidParameterValue | ErrorCode::InvalidMessageContents
                    ) {
                        tracing::warn!(
                            queue = %self.display_name(),
                            destination = %path.display(),
                            error = %e,
                            "redrive: the destination refused a message; it and the rest of its group stay"
                        );
                        self.hold_skipped(&m.receipt_handle, rep, skipped);
                        blocked.insert(m.group_id.clone());
                        continue;
                    }
                    // The destination is gone or full: put this message and the rest of the
                    // batch back at once (not after their 30 s), then report the failure.
                    for r in &msgs[k..] {
                        let _ = self.change_visibility(&r.receipt_handle, Duration::ZERO);
                    }
                    return Err(e);
                }
                self.delete(&m.receipt_handle)?;
                rep.moved += 1;
                if let Some(p) = &opts.progress {
                    // Relaxed: a count read for a report; it publishes nothing.
                    p.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
            }
            if rep.cancelled {
                return Ok(());
            }
        }
    }
}

/// Whether `path` names the file `q` has open (the same device and inode), looked at as an
/// open looks at it: a symlink at the name is not followed (`Queue::open_at` refuses one).
fn names_file(path: &Path, q: &Queue) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::symlink_metadata(path), q.inner.file.metadata()) {
        (Ok(a), Ok(b)) => (a.dev(), a.ino()) == (b.dev(), b.ino()),
        _ => false,
    }
}
