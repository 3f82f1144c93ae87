//! The bridge: every message of a local queue forwarded to a FIFO queue elsewhere (an SQS
//! queue, usually), exactly once and in group order, whatever the remote queue answers.
//!
//! Each message is received from the local queue (so it is in flight, and its group locked,
//! R3), sent with its group id, body and attributes and with **its local message id as the
//! deduplication id**, and deleted locally only once the remote queue acknowledged it. A
//! bridge killed at any point leaves its messages in flight locally; they come back after the
//! visibility timeout and are sent again with the same deduplication ids, which SQS drops as
//! duplicates within its 5-minute interval (D1): each message arrives once. (Beyond that
//! interval SQS no longer knows the id: a bridge restarted, or an endpoint unreachable, for
//! more than 5 minutes after SQS took a message whose answer was lost sends it again, and
//! SQS keeps both.)
//!
//! **Order.** SQS enqueues the later entries of a batch even when an earlier entry of the same
//! group was refused (S13), so a request never carries more than one message of a group, and
//! a group's next message is sent only once the one before it was acknowledged and deleted
//! locally: each group is one chain, in order, whatever the remote refuses. Batching comes
//! from the heads of up to 10 different groups in one `SendMessageBatch`, and from
//! [`BridgeOptions::concurrency`] requests in flight at once (on worker threads). The price:
//! one busy group moves one message per round trip to the remote queue.
//!
//! **Holding.** The calling thread does every local operation: receives (a long poll only
//! when nothing is in flight to the remote), local deletes (batched), and the *heartbeat*:
//! every message it holds gets its visibility timeout renewed once half of it has passed,
//! whether or not a send of it is outstanding, so a remote slower than the visibility
//! timeout causes neither a duplicate nor a reorder. A renewal that fails (the hold lapsed,
//! after a SIGSTOP, say) drops that group's held messages: they come back in order on a later
//! receive, and any resend is a duplicate the remote queue drops. A killed bridge's groups
//! stay locked for the visibility timeout. A message received again counts one more receive,
//! but the bridge's receives never move a message to the dead-letter queue for its count
//! (`Queue::set_dead_letter_on_receive`): restarts hand back what a bridge held, and a
//! message the remote never refused went to the dead-letter queue after a few restarts, a
//! gap in its group on the remote.
//!
//! **Refusals.** A message the remote queue refuses for itself (too large for its
//! `MaximumMessageSize`, say) stops its group (its later messages stay in the local queue)
//! and is tried again after an exponential backoff with jitter ([`BridgeOptions::backoff`]
//! doubling up to [`BridgeOptions::max_backoff`]); the other groups flow on. After
//! [`BridgeOptions::max_tries`] refusals it moves to the local queue's dead-letter queue if
//! the local queue has a redrive policy (sent there with its local message id as the dedup
//! id, then deleted locally; counted `dead_lettered`), and its group goes on. Without one the
//! group stays stopped at that message, tried again every `max_backoff`, and is reported
//! ([`BridgeReport::stopped`], the status file, a warning). A remote that refuses a whole
//! batch for one entry (moto's server does) gets the entries again one per request, so the
//! culprit is found and refused alone. A remote that refuses every message alike (one error
//! code for [`BridgeOptions::max_refused_in_a_row`] distinct messages in a row, 10 by
//! default, with nothing acknowledged between: a policy that denies every send, a code the
//! bridge does not know as fatal) ends the bridge with that code, the messages left in the
//! local queue, rather than moving the whole queue to the dead-letter queue message by
//! message (at most `max_refused_in_a_row - 1` are moved before it ends; with ten groups or
//! more, whose heads are refused in one request, none).
//!
//! **Remote failures.** An unreachable endpoint, throttling or a 5xx answer backs the whole
//! remote off (exponential with jitter, counted `retried`) while the messages stay held; so
//! does an answer without an SQS error code (a proxy's page), and one that is a 4xx sends a
//! batch's entries one by one next. A message sent alone and answered with a 4xx page backs
//! off its own group instead (1 s doubling to `max_backoff`), and after `max_tries` such
//! answers its group is reported stopped, tried every `max_backoff`, its messages kept: never
//! refused or dead-lettered for an answer that is not SQS's. A missing remote queue, refused credentials, or a remote
//! no FIFO message can be sent to (a malformed URL, an unsupported operation, a standard
//! queue: `SqsQueue` refuses a queue name not ending in `.fifo` before any request) end the
//! bridge with the error, whole, rather than refusing (and dead-lettering) message after
//! message.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

mod kinds;
mod options;
mod pace;
mod run;
mod status;
mod worker;

use kinds::{fatal, transient};
pub use options::{BridgeOptions, BridgeReport, MAX_VISIBILITY_TIMEOUT};
use status::write_status;
pub use status::{read_status, status_path, MAX_STATUS_BYTES};
use worker::{attributes, body_bytes, work, Entry, Reply};

use shmfifo::{
    Error, FifoQueue, Message, Queue, ReceiptHandle, ReceiveOptions, RemoteKind, Result,
    SendMessage,
};

/// Forwards `local`'s messages to `remote` (see the module doc), calling `progress` whenever
/// the counters change. Returns with `until_empty` once the local queue has nothing left but
/// the messages of stopped groups, when cancelled (once the requests in flight are
/// answered), or on an error that another try cannot mend (refused credentials, a missing
/// remote queue). The messages it still holds are made visible again before it returns.
///
/// While it runs, `local`'s receives (its clones' too) do not move messages past the redrive
/// policy's `maxReceiveCount` ([`Queue::set_dead_letter_on_receive`]`(false)`, as it was
/// again when it returns): the bridge moves a message to the dead-letter queue only after the
/// remote refused it `max_tries` times, and each restart hands back what it held, which the
/// next receive counts again.
pub fn bridge(
    local: &Queue,
    remote: &dyn FifoQueue,
    opts: &BridgeOptions,
    progress: &mut dyn FnMut(&BridgeReport),
) -> Result<BridgeReport> {
    /// Puts the handle's setting back however the bridge returns.
    struct Restore<'q>(&'q Queue, bool);
    impl Drop for Restore<'_> {
        fn drop(&mut self) {
            self.0.set_dead_letter_on_receive(self.1);
        }
    }
    let _restore = Restore(local, local.dead_letter_on_receive());
    local.set_dead_letter_on_receive(false);
    let concurrency = opts.concurrency.max(1);
    let (job_tx, job_rx) = mpsc::channel::<Vec<Entry>>();
    let job_rx = Mutex::new(job_rx);
    let (reply_tx, reply_rx) = mpsc::channel::<Reply>();
    std::thread::scope(|s| {
        for _ in 0..concurrency {
            let (jobs, replies) = (&job_rx, reply_tx.clone());
            s.spawn(move || work(remote, jobs, &replies));
        }
        drop(reply_tx);
        let mut b = Bridge::new(local, opts, concurrency);
        let r = b.run(&job_tx, &reply_rx, progress);
        // The workers end once their request is answered; what they acknowledged is deleted.
        drop(job_tx);
        while let Ok(reply) = reply_rx.recv() {
            let _ = b.on_reply(reply, Instant::now(), false);
        }
        b.flush_deletes();
        b.release_all();
        b.publish(progress);
        r.map(|()| b.report())
    })
}

/// A message the bridge holds (received, in flight locally).
struct Held {
    msg: Arc<Message>,
    /// Its message id: the deduplication id it is sent with.
    id: String,
    /// When its visibility timeout was last set.
    renewed: Instant,
}

/// A group's held messages and where its chain stands.
#[derive(Default)]
struct Group {
    held: VecDeque<Held>,
    /// A request carrying one of this group's messages is with a worker.
    outstanding: bool,
    /// Refusals of message `tried` (the head, while it is held).
    tries: u32,
    tried: String,
    /// Not sent before this instant (after a refusal).
    not_before: Option<Instant>,
    /// Sent alone: the head was refused, or a batch it was in was refused as a whole.
    solo: bool,
    /// Stopped at a message refused `max_tries` times, with no dead-letter queue.
    stopped: bool,
    /// Ready since (a tick; the longest waiting groups are sent first).
    since: u64,
    /// Transient failures of this group's head in a row (the remote failed the entry, not
    /// the request): each waits twice as long as the one before, up to 5 s.
    retries: u32,
    /// Answers without an SQS error code, status 4xx, to message `paged` (the head) sent
    /// alone: the same message would get the same page again (a proxy's 413 for its size).
    pages: u32,
    paged: String,
}

/// What a local delete is for.
#[derive(Clone, Copy)]
enum Done {
    Forwarded,
    DeadLettered,
}

/// Messages held by groups stopped or waiting at a refused message, in units of `max_held`:
/// past that the bridge receives no more until some go (to the remote or the dead-letter
/// queue).
const MAX_REFUSED_HELD: usize = 10;

/// A short pause while requests are in flight: how often new local messages are looked for.
const TICK: Duration = Duration::from_millis(10);

struct Bridge<'a> {
    local: &'a Queue,
    opts: &'a BridgeOptions,
    vt: Duration,
    concurrency: usize,
    /// Most messages held at once by the groups not held at a refused message (each group
    /// holds at most one receive's worth: a receive returns no group already held).
    max_held: usize,
    groups: HashMap<String, Group>,
    held: usize,
    /// Requests with the workers.
    outstanding: usize,
    deletes: Vec<(ReceiptHandle, Done)>,
    report: BridgeReport,
    before: BridgeReport,
    /// The local queue's creation time, which its status file names ([`status_path`]).
    created_ms: u64,
    changed: bool,
    /// When the status was last published (it is rewritten at most once a second).
    published: Option<Instant>,
    /// The whole remote backs off until then (after a transport failure or throttling).
    remote_not_before: Option<Instant>,
    remote_backoff: Duration,
    dlq: Option<(String, Queue)>,
    /// The rate ([`BridgeOptions::max_per_second`]).
    pace: pace::Pace,
    tick: u64,
    rng: u64,
    /// The refusals since the last acknowledgement: their error code, the distinct messages
    /// and the groups refused with it (see [`BridgeOptions::max_refused_in_a_row`]).
    refused_run: run::RefusedRun,
    /// The error the bridge ends with, once a run of refusals reached the limit.
    tripped: Option<Error>,
}

impl<'a> Bridge<'a> {
    fn new(local: &'a Queue, opts: &'a BridgeOptions, concurrency: usize) -> Self {
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
            ^ (u64::from(std::process::id()) << 32);
        let created_ms = local.attributes().created_timestamp;
        Bridge {
            local,
            opts,
            vt: opts
                .visibility_timeout
                .clamp(Duration::from_secs(1), MAX_VISIBILITY_TIMEOUT),
            concurrency,
            max_held: concurrency.saturating_mul(100),
            groups: HashMap::new(),
            held: 0,
            outstanding: 0,
            deletes: Vec::new(),
            report: BridgeReport::default(),
            before: opts
                .status_file
                .as_deref()
                .and_then(|p| read_status(p, created_ms))
                .unwrap_or_default(),
            created_ms,
            changed: false,
            published: None,
            remote_not_before: None,
            remote_backoff: Duration::from_millis(50),
            dlq: None,
            pace: pace::Pace::new(opts.max_per_second, Instant::now()),
            tick: 0,
            rng: seed | 1,
            refused_run: run::RefusedRun::default(),
            tripped: None,
        }
    }

    fn cancelled(&self) -> bool {
        // Relaxed: a stop request, polled; it publishes nothing.
        self.opts
            .cancel
            .as_ref()
            .is_some_and(|c| c.load(Ordering::Relaxed))
    }

    fn run(
        &mut self,
        jobs: &mpsc::Sender<Vec<Entry>>,
        replies: &mpsc::Receiver<Reply>,
        progress: &mut dyn FnMut(&BridgeReport),
    ) -> Result<()> {
        loop {
            if self.cancelled() {
                return Ok(());
            }
            let mut now = Instant::now();
            while let Ok(r) = replies.try_recv() {
                self.on_reply(r, now, true)?;
            }
            self.flush_deletes();
            self.heartbeat(now);
            self.dispatch(jobs, now);
            if self.changed
                && self
                    .published
                    .is_none_or(|t| now.saturating_duration_since(t) >= Duration::from_secs(1))
            {
                self.published = Some(now);
                self.publish(progress);
            }
            // Receive while there is room; a long poll only when nothing else is to be done.
            let idle = self.outstanding == 0 && !self.any_ready(now);
            let deadline = self.next_deadline(now);
            let poll = if idle {
                deadline.map_or(self.opts.wait, |d| {
                    self.opts.wait.min(d.saturating_duration_since(now))
                })
            } else {
                Duration::ZERO
            };
            // Groups held at a refused message do not count: their messages wait anyway. But
            // they are bounded too (`MAX_REFUSED_HELD` of `max_held`): a local queue whose
            // every group starts with a message the remote refuses would be held whole.
            let (busy, refused): (usize, usize) = self.groups.values().fold((0, 0), |(b, r), g| {
                if g.tries == 0 && !g.stopped {
                    (b + g.held.len(), r)
                } else {
                    (b, r + g.held.len())
                }
            });
            let mut polled = false;
            if busy < self.max_held && refused < self.max_held.saturating_mul(MAX_REFUSED_HELD) {
                let room = (self.max_held - busy).min(10) as u32;
                polled = poll > Duration::ZERO;
                let got = self.local.receive(
                    &ReceiveOptions::max(room)
                        .visibility_timeout(self.vt)
                        .wait(poll),
                )?;
                if !got.is_empty() {
                    self.take(got, Instant::now());
                    continue;
                }
                if self.opts.until_empty && self.drained() {
                    return Ok(());
                }
            }
            now = Instant::now();
            let pause = self
                .next_deadline(now)
                .map_or(TICK, |d| d.saturating_duration_since(now).min(TICK));
            if self.outstanding > 0 {
                match replies.recv_timeout(pause) {
                    Ok(r) => self.on_reply(r, Instant::now(), true)?,
                    Err(mpsc::RecvTimeoutError::Timeout) => {}
                    Err(mpsc::RecvTimeoutError::Disconnected) => {
                        return Err(Error::Remote {
                            kind: RemoteKind::Other,
                            code: "worker".into(),
                            message: "the bridge's sending threads ended".into(),
                        })
                    }
                }
            } else if !polled {
                std::thread::sleep(pause);
            }
        }
    }

    /// Nothing left to do: no request in flight, every held message is in a stopped group,
    /// and every message in flight locally is one of those (the last receive found none).
    fn drained(&self) -> bool {
        if self.outstanding != 0 || !self.groups.values().all(|g| g.held.is_empty() || g.stopped) {
            return false;
        }
        // Delayed messages are still to come (they were left behind: "empty" with one due in
        // a few seconds).
        let a = self.local.attributes();
        a.approximate_number_of_messages_not_visible == self.held as u64
            && a.approximate_number_of_messages_delayed == 0
    }

    fn report(&self) -> BridgeReport {
        let mut stopped: Vec<String> = self
            .groups
            .iter()
            .filter(|(_, g)| g.stopped)
            .map(|(k, _)| k.clone())
            .collect();
        stopped.sort();
        BridgeReport {
            stopped,
            ..self.report.clone()
        }
    }

    /// Calls `progress` and rewrites the status file (the counters of every run).
    fn publish(&mut self, progress: &mut dyn FnMut(&BridgeReport)) {
        self.changed = false;
        let r = self.report();
        progress(&r);
        if let Some(p) = &self.opts.status_file {
            let b = &self.before;
            // Saturating: the earlier runs' counts come from a file another user may forge.
            let total = BridgeReport {
                forwarded: b.forwarded.saturating_add(r.forwarded),
                retried: b.retried.saturating_add(r.retried),
                failed: b.failed.saturating_add(r.failed),
                dead_lettered: b.dead_lettered.saturating_add(r.dead_lettered),
                stopped: r.stopped,
            };
            write_status(p, &self.opts.remote_name, self.created_ms, &total);
        }
    }

    fn random(&mut self) -> u64 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.rng
    }

    /// Between half of `d` and all of it, so that groups refused together do not retry in
    /// step.
    fn jitter(&mut self, d: Duration) -> Duration {
        let half = d / 2;
        let ms = half.as_millis() as u64;
        half + Duration::from_millis(if ms == 0 { 0 } else { self.random() % (ms + 1) })
    }

    /// The backoff after refusal number `tries` (1 the first).
    fn backoff(&mut self, tries: u32) -> Duration {
        let d = self
            .opts
            .backoff
            .saturating_mul(1 << tries.saturating_sub(1).min(20))
            .min(self.opts.max_backoff);
        self.jitter(d)
    }

    fn ready(g: &Group, now: Instant) -> bool {
        !g.held.is_empty() && !g.outstanding && g.not_before.is_none_or(|t| t <= now)
    }

    fn any_ready(&self, now: Instant) -> bool {
        self.remote_not_before.is_none_or(|t| t <= now)
            && self.groups.values().any(|g| Self::ready(g, now))
    }

    /// The next moment something is due: a renewal, a retry, the end of a remote backoff.
    fn next_deadline(&self, now: Instant) -> Option<Instant> {
        let half = self.vt / 2;
        let mut next: Option<Instant> = self.remote_not_before.filter(|t| *t > now);
        let mut at = |t: Instant| next = Some(next.map_or(t, |n| n.min(t)));
        for g in self.groups.values() {
            if let Some(h) = g.held.iter().map(|h| h.renewed).min() {
                at(h + half);
            }
            if let Some(t) = g
                .not_before
                .filter(|_| !g.held.is_empty() && !g.outstanding)
            {
                at(t);
            }
        }
        // The rate's next allowance is a deadline only for messages it holds back: a bridge
        // with nothing to send long-polls (with a rate set, the past allowance of an idle start
        // made every poll a zero wait: 430,000 empty receives in 3 s).
        if let Some(t) = self.pace.next(now) {
            if self.groups.values().any(|g| Self::ready(g, now)) {
                at(t);
            }
        }
        next
    }

    /// Received messages into their groups' chains. A group that is still held here means
    /// our hold on its head lapsed: the new receive replaces what it returned again.
    fn take(&mut self, got: Vec<Message>, now: Instant) {
        let mut by_group: Vec<(String, Vec<Message>)> = Vec::new();
        for m in got {
            match by_group.iter_mut().find(|(g, _)| *g == m.group_id) {
                Some((_, v)) => v.push(m),
                None => by_group.push((m.group_id.clone(), vec![m])),
            }
        }
        for (name, msgs) in by_group {
            self.tick += 1;
            let tick = self.tick;
            let g = self.groups.entry(name).or_default();
            let last = msgs.last().map_or(0, |m| m.sequence_number);
            let old: Vec<Held> = g.held.drain(..).collect();
            if !old.is_empty() {
                tracing::debug!(group = %msgs[0].group_id, "bridge: a hold lapsed; the group was received again");
            }
            self.held -= old.len();
            for m in msgs {
                g.held.push_back(Held {
                    id: m.message_id.to_string(),
                    msg: Arc::new(m),
                    renewed: now,
                });
            }
            // Those after the ones received again are still ours.
            g.held
                .extend(old.into_iter().filter(|h| h.msg.sequence_number > last));
            self.held += g.held.len();
            if !g.outstanding {
                g.since = tick;
            }
        }
    }

    /// Renews the visibility of every held message past half its timeout; a group whose hold
    /// is lost is dropped (its messages come back in order).
    fn heartbeat(&mut self, now: Instant) {
        let half = self.vt / 2;
        let (local, vt) = (self.local, self.vt);
        let mut dropped = 0;
        for (name, g) in &mut self.groups {
            let mut lost = None;
            for h in g.held.iter_mut() {
                if now.duration_since(h.renewed) < half {
                    continue;
                }
                match local.change_visibility(&h.msg.receipt_handle, vt) {
                    Ok(()) => h.renewed = now,
                    Err(e) => {
                        lost = Some(e);
                        break;
                    }
                }
            }
            if let Some(e) = lost {
                tracing::warn!(group = %name, error = %e, "bridge: a held message was no longer ours; the group will be received again");
                for h in g.held.drain(..) {
                    // Made visible at once where still ours, so the group comes back sooner.
                    let _ = local.change_visibility(&h.msg.receipt_handle, Duration::ZERO);
                    dropped += 1;
                }
            }
        }
        self.held -= dropped;
        if dropped > 0 {
            self.forget_idle();
        }
    }

    /// Forgets groups with nothing held, nothing outstanding and no refusal to remember.
    fn forget_idle(&mut self) {
        self.groups
            .retain(|_, g| !g.held.is_empty() || g.outstanding || g.tries > 0);
    }

    /// Hands requests to the workers: the heads of up to 10 ready groups each (a group in
    /// `solo` goes alone), longest waiting first.
    fn dispatch(&mut self, jobs: &mpsc::Sender<Vec<Entry>>, now: Instant) {
        if self.remote_not_before.is_some_and(|t| t > now) {
            return;
        }
        self.remote_not_before = None;
        while self.outstanding < self.concurrency {
            let allowed = self.pace.allowed(10, now);
            if allowed == 0 {
                return;
            }
            let mut ready: Vec<(u64, bool, &String)> = self
                .groups
                .iter()
                .filter(|(_, g)| Self::ready(g, now))
                .map(|(k, g)| (g.since, g.solo, k))
                .collect();
            if ready.is_empty() {
                return;
            }
            ready.sort_unstable();
            let names: Vec<String> = if ready[0].1 {
                vec![ready[0].2.clone()]
            } else {
                ready
                    .iter()
                    .filter(|r| !r.1)
                    .take(allowed)
                    .map(|r| r.2.clone())
                    .collect()
            };
            let mut entries = Vec::with_capacity(names.len());
            for name in names {
                let Some(g) = self.groups.get_mut(&name) else {
                    continue;
                };
                let Some(h) = g.held.front() else { continue };
                g.outstanding = true;
                g.not_before = None;
                entries.push(Entry {
                    group: name,
                    id: h.id.clone(),
                    msg: Arc::clone(&h.msg),
                });
            }
            self.pace.sent(entries.len() as u64);
            self.outstanding += 1;
            if jobs.send(entries).is_err() {
                // The workers are gone; `run` finds out when it waits for them.
                self.outstanding -= 1;
                return;
            }
        }
    }

    /// A worker's answer. `live`: the bridge goes on (refused messages may move to the
    /// dead-letter queue); a fatal error is returned.
    fn on_reply(&mut self, r: Reply, now: Instant, live: bool) -> Result<()> {
        self.outstanding -= 1;
        self.changed = true;
        let results = match r.outcome {
            Ok(results) => {
                // Halved, not reset: with requests in flight side by side, one that succeeds
                // must not undo at once the backoff another's throttling earned.
                self.remote_backoff = (self.remote_backoff / 2).max(Duration::from_millis(50));
                results
            }
            Err(_) if !live => {
                for e in &r.entries {
                    if let Some(g) = self.groups.get_mut(&e.group) {
                        g.outstanding = false;
                    }
                }
                return Ok(());
            }
            Err(e) if transient(&e) => {
                tracing::warn!(error = %e, "bridge: the remote queue failed; retrying");
                // An answer that is not SQS's, a 4xx (a proxy's 413 for a large batch, say):
                // the same batch would get it again, so its entries go one by one next.
                let split = r.entries.len() > 1
                    && matches!(&e, Error::Remote { code, .. } if code == "response-4xx");
                self.report.retried += r.entries.len() as u64;
                // One message sent alone and answered so (a proxy's 413 for it, say): the same
                // message would get it again, and the answer is about it, not the remote. Its
                // group backs off on its own (1 s doubling to `max_backoff`, as after a
                // refusal), and after `max_tries` such answers to that message the group is
                // reported stopped, its messages kept here (never refused or dead-lettered for
                // an answer that is not SQS's), tried every `max_backoff`: `until_empty` then
                // ends. Other groups flow on.
                let alone = r.entries.len() == 1
                    && matches!(&e, Error::Remote { code, .. } if code == "response-4xx");
                if !alone {
                    let wait = self.jitter(self.remote_backoff);
                    self.remote_not_before = Some(now + wait);
                    self.remote_backoff = (self.remote_backoff * 2)
                        .min(Duration::from_secs(5))
                        .min(self.opts.max_backoff.max(Duration::from_millis(50)));
                }
                for en in &r.entries {
                    let Some(g) = self.groups.get_mut(&en.group) else {
                        continue;
                    };
                    g.outstanding = false;
                    g.solo |= split;
                    if !alone || g.held.front().is_none_or(|h| h.id != en.id) {
                        continue;
                    }
                    if g.paged != en.id {
                        (g.paged, g.pages) = (en.id.clone(), 0);
                    }
                    g.pages = g.pages.saturating_add(1);
                    let pages = g.pages;
                    let stop = pages >= self.opts.max_tries.max(1);
                    if stop && !g.stopped {
                        tracing::warn!(group = %en.group, message_id = %en.id, error = %e, "bridge: the group is stopped at a message the remote keeps answering with an error that is not SQS's; its messages stay here");
                    }
                    g.stopped |= stop;
                    let wait = if stop {
                        self.jitter(self.opts.max_backoff)
                    } else {
                        self.backoff(pages)
                    };
                    if let Some(g) = self.groups.get_mut(&en.group) {
                        g.not_before = Some(now + wait);
                    }
                }
                return Ok(());
            }
            Err(e) if fatal(&e) => {
                for e in &r.entries {
                    if let Some(g) = self.groups.get_mut(&e.group) {
                        g.outstanding = false;
                    }
                }
                return Err(e);
            }
            Err(e) if r.entries.len() > 1 => {
                // Refused as a whole, for one entry or more: each goes again on its own, so
                // the culprit is refused alone and the others flow on.
                tracing::warn!(error = %e, entries = r.entries.len(), "bridge: the remote queue refused a batch; sending its entries one by one");
                for e in &r.entries {
                    if let Some(g) = self.groups.get_mut(&e.group) {
                        g.outstanding = false;
                        g.solo = true;
                    }
                }
                return Ok(());
            }
            Err(e) => vec![Err(e)],
        };
        // An entry refused for what the remote queue is, not for itself (a standard queue's
        // answer to a group id): the bridge ends, as for a request-level fatal error, rather
        // than dead-letter every message in turn.
        let mut ended = None;
        for (e, result) in r.entries.into_iter().zip(results) {
            match result {
                Err(err) if fatal(&err) => {
                    if let Some(g) = self.groups.get_mut(&e.group) {
                        g.outstanding = false;
                    }
                    ended.get_or_insert(err);
                }
                result => self.on_result(e, result, now),
            }
        }
        self.forget_idle();
        ended.or_else(|| self.tripped.take()).map_or(Ok(()), Err)
    }

    /// One entry's result.
    fn on_result(&mut self, e: Entry, result: Result<()>, now: Instant) {
        self.tick += 1;
        let tick = self.tick;
        if result.is_ok() {
            // The remote takes messages (this one's hold may have lapsed: it took it anyway).
            self.refused_run = run::RefusedRun::default();
        }
        let Some(g) = self.groups.get_mut(&e.group) else {
            return;
        };
        g.outstanding = false;
        g.since = tick;
        // Our hold on it lapsed and it was dropped: it comes back, and a resend is a
        // duplicate the remote queue drops.
        let is_head = g.held.front().is_some_and(|h| h.id == e.id);
        match result {
            Ok(()) => {
                if !is_head {
                    return;
                }
                if g.stopped {
                    tracing::info!(group = %e.group, "bridge: a stopped group goes on");
                }
                let h = g.held.pop_front().expect("the head");
                self.held -= 1;
                self.deletes.push((h.msg.receipt_handle, Done::Forwarded));
                (g.tries, g.solo, g.stopped, g.not_before) = (0, false, false, None);
                (g.retries, g.pages) = (0, 0);
            }
            Err(err) if transient(&err) => {
                tracing::debug!(group = %e.group, error = %err, "bridge: the remote queue failed an entry; retrying");
                self.report.retried += 1;
                // Its own backoff: a request that succeeded resets the remote's, and an entry
                // the remote keeps failing would otherwise go again every 25-50 ms forever.
                g.retries = g.retries.saturating_add(1);
                let base = Duration::from_millis(50)
                    .saturating_mul(1 << g.retries.saturating_sub(1).min(7))
                    .min(Duration::from_secs(5));
                let wait = self.jitter(base);
                if let Some(g) = self.groups.get_mut(&e.group) {
                    g.not_before = Some(now + wait);
                }
            }
            Err(err) => {
                self.report.failed += 1;
                if !is_head {
                    return;
                }
                if g.tried != e.id {
                    (g.tried, g.tries) = (e.id.clone(), 0);
                }
                g.tries += 1;
                g.solo = true;
                let tries = g.tries;
                if crate::refused_here(&err) {
                    tracing::warn!(group = %e.group, message_id = %e.id, tries, error = %err, "bridge: a message SQS cannot carry (refused here, never sent)");
                } else {
                    tracing::warn!(group = %e.group, message_id = %e.id, tries, error = %err, "bridge: the remote queue refused a message");
                }
                if let Some(end) =
                    self.refused_run
                        .refused(self.opts.max_refused_in_a_row, &e.group, &e.id, &err)
                {
                    // Held as it is (no backoff, no dead-letter move): the bridge ends.
                    self.tripped.get_or_insert(end);
                    return;
                }
                if tries < self.opts.max_tries.max(1) {
                    let wait = self.backoff(tries);
                    if let Some(g) = self.groups.get_mut(&e.group) {
                        g.not_before = Some(now + wait);
                    }
                    return;
                }
                match self.dead_letter(&e) {
                    Ok(true) => {
                        tracing::warn!(group = %e.group, message_id = %e.id, "bridge: moved to the local dead-letter queue");
                        let g = self.groups.get_mut(&e.group).expect("the group");
                        let h = g.held.pop_front().expect("the head");
                        self.held -= 1;
                        self.deletes
                            .push((h.msg.receipt_handle, Done::DeadLettered));
                        (g.tries, g.solo, g.stopped, g.not_before) = (0, false, false, None);
                        (g.retries, g.pages) = (0, 0);
                    }
                    moved => {
                        if let Err(err) = moved {
                            tracing::warn!(group = %e.group, message_id = %e.id, error = %err, "bridge: the local dead-letter queue refused the message");
                        }
                        let wait = self.jitter(self.opts.max_backoff);
                        let g = self.groups.get_mut(&e.group).expect("the group");
                        if !g.stopped {
                            tracing::warn!(group = %e.group, message_id = %e.id, "bridge: the group is stopped at a message the remote queue refuses; its messages stay here");
                        }
                        g.stopped = true;
                        g.not_before = Some(now + wait);
                    }
                }
            }
        }
    }

    /// Sends a refused message to the local queue's dead-letter queue, with its message id as
    /// the deduplication id (so a move repeated after a kill is a duplicate there). `false`:
    /// the local queue has no redrive policy.
    fn dead_letter(&mut self, e: &Entry) -> Result<bool> {
        let Some(p) = self.local.redrive_policy()? else {
            return Ok(false);
        };
        if self
            .dlq
            .as_ref()
            .is_none_or(|(path, _)| *path != p.dead_letter_queue)
        {
            let q = Queue::open_at(&p.dead_letter_queue)?;
            self.dlq = Some((p.dead_letter_queue.clone(), q));
        }
        let (_, dlq) = self.dlq.as_ref().expect("opened above");
        let m = &e.msg;
        let attrs = attributes(m);
        dlq.send(&SendMessage {
            group_id: Some(&m.group_id),
            dedup_id: Some(&e.id),
            body: &m.body,
            bytes: body_bytes(m),
            attributes: &attrs,
            delay_seconds: None,
        })?;
        Ok(true)
    }

    /// Deletes locally what the remote acknowledged (or the dead-letter queue took).
    fn flush_deletes(&mut self) {
        if self.deletes.is_empty() {
            return;
        }
        let deletes = std::mem::take(&mut self.deletes);
        let handles: Vec<ReceiptHandle> = deletes.iter().map(|(h, _)| *h).collect();
        let results = match self.local.delete_handles(&handles) {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(error = %e, "bridge: the local deletes failed; those messages will be sent again (duplicates)");
                return;
            }
        };
        for ((_, done), r) in deletes.iter().zip(results) {
            match r {
                Ok(()) => match done {
                    Done::Forwarded => self.report.forwarded += 1,
                    Done::DeadLettered => self.report.dead_lettered += 1,
                },
                // Our hold lapsed and the message was received again: whoever holds it sends
                // it with the same deduplication id, which the far end drops.
                Err(e) => {
                    tracing::debug!(error = %e, "bridge: a forwarded message was no longer ours")
                }
            }
        }
        self.changed = true;
    }

    /// Makes every held message visible again (the bridge is ending).
    fn release_all(&mut self) {
        for g in self.groups.values_mut() {
            for h in g.held.drain(..) {
                let _ = self
                    .local
                    .change_visibility(&h.msg.receipt_handle, Duration::ZERO);
            }
        }
        self.held = 0;
    }
}
