//! `receive` and its forms: parameters, the long-poll wait on the doorbell, the in-flight
//! budget (R8), attempt-id replays (R11), and copying taken messages out.

use super::framing;
use super::hashing::hash_id;
use super::queue::{fault, ms, Op, Queue};
use super::types::*;
use crate::config::{MAX_ATTRIBUTES, MAX_VISIBILITY_TIMEOUT, MAX_WAIT_TIME};
use crate::error::{Error, Result};
use std::sync::atomic::Ordering;

use crate::protocol::accounting::{self, counter};
use crate::protocol::message::{self, MAX_ID_LEN};
use crate::protocol::receive::{self, Taken};
use crate::protocol::{attempt, doorbell, live, ready, recovery, sweep, Env};
use crate::{sys, validate};

/// Empty polls (receives that did not wait) a handle tallies before adding them to the
/// queue's `NumberOfEmptyReceives`.
pub(super) const EMPTY_BATCH: u64 = 64;

/// Spin rounds before a long-polling receiver goes to sleep.
pub(super) const SPIN_ROUNDS: u32 = 200;

/// Copies taken messages into [`Message`]s ([`fill`]) and checks each group id against the
/// keyed hash its entry was inserted with, once per group entry in a row: a corrupted id word
/// would otherwise hand one group's messages out under another group's id (two groups of one
/// id, each with its own in-flight exclusion). A mismatch makes the message unreadable, so it
/// is quarantined: the damage stays in the group whose entry it is.
pub(super) struct Filler {
    /// The queue's bodies are any bytes (`BodyMode::Binary`).
    binary: bool,
    nonce: u64,
    created_wall_ms: u64,
    keys: (u64, u64),
    /// The group entry whose id was checked last (its address), 0 for none.
    checked: usize,
}

impl Filler {
    pub(super) fn new(inner: &super::queue::Inner) -> Self {
        Filler {
            binary: inner.binary,
            nonce: inner.nonce,
            created_wall_ms: inner.created_wall_ms,
            keys: inner.keys,
            checked: 0,
        }
    }

    /// [`fill`], then the group id check.
    pub(super) fn fill(
        &mut self,
        m: &mut Message,
        t: &Taken<'_>,
    ) -> std::result::Result<(), &'static str> {
        self.fill_with(m, t, true, &mut CheckedGroup::default())
            .map(|_| ())
    }

    /// [`fill`] (the body copied or not), then the group id check (`seen`: the id last
    /// checked where the message lands, a buffer's); returns the body's length. Always
    /// inlined (into the receive's sink, a replay's and a peek's): its call cost some 12
    /// instructions a message.
    #[inline(always)]
    fn fill_with(
        &mut self,
        m: &mut Message,
        t: &Taken<'_>,
        copy_body: bool,
        seen: &mut CheckedGroup,
    ) -> std::result::Result<usize, &'static str> {
        let body = match (copy_body, self.binary) {
            (false, _) => Body::InPlace,
            (true, false) => Body::Text,
            (true, true) => Body::Binary,
        };
        let body_len = fill(m, t, self.nonce, self.created_wall_ms, body)?;
        let at = t.group_entry();
        if at != self.checked {
            let (id, hash) = (m.group_id.as_bytes(), t.group_hash());
            if !seen.holds(self.keys, hash, id) {
                if super::hashing::group_hash(self.keys, id) != hash {
                    return Err("group id does not match its hash");
                }
                seen.set(self.keys, hash, id);
            }
            self.checked = at;
        }
        Ok(body_len)
    }

    /// [`Filler::fill`] into the next message of `buf`; an unreadable message (the protocol
    /// quarantines it) leaves `buf` as it was. Always inlined into the receive's sink, its
    /// only caller (left to the compiler it was sometimes not: 8 instructions a message).
    #[inline(always)]
    fn fill_next(
        &mut self,
        buf: &mut ReceiveBuffer,
        t: &Taken<'_>,
    ) -> std::result::Result<(), &'static str> {
        let k = buf.len;
        let borrow = buf.borrow;
        let (m, seen) = buf.next_slot();
        let r = self.fill_with(m, t, !borrow, seen);
        match r {
            Err(_) => buf.len = k,
            Ok(body_len) if borrow => {
                if let Some(v) = buf.views.get_mut(k) {
                    *v = super::borrow::View::of(t, body_len);
                }
            }
            Ok(_) => {}
        }
        r.map(|_| ())
    }
}

/// The group id a buffer's receives last checked against its group entry's hash (with the
/// arena's keys and that hash): a receive of the same group again into the same buffer (a
/// consumer of one group, a message at a time: each receive checks its first group anew)
/// compares the id, a few instructions, instead of hashing it (SipHash, or the thread's
/// memo: some 70). The bytes compared are the message's own, copied out of the arena.
#[derive(Clone)]
pub(crate) struct CheckedGroup {
    keys: (u64, u64),
    hash: u64,
    /// `usize::MAX`: none.
    len: usize,
    id: [u8; MAX_ID_LEN],
}

impl Default for CheckedGroup {
    fn default() -> Self {
        CheckedGroup {
            keys: (0, 0),
            hash: 0,
            len: usize::MAX,
            id: [0; MAX_ID_LEN],
        }
    }
}

impl std::fmt::Debug for CheckedGroup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CheckedGroup")
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}

impl CheckedGroup {
    /// Whether `id` was checked last, under `keys`, against `hash`.
    #[inline(always)]
    fn holds(&self, keys: (u64, u64), hash: u64, id: &[u8]) -> bool {
        self.len == id.len()
            && self.hash == hash
            && self.keys == keys
            && self
                .id
                .get(..id.len())
                .is_some_and(|mine| same_bytes(mine, id))
    }

    /// Remembers `id` as checked under `keys` against `hash` (an id too long for the record
    /// is not remembered).
    fn set(&mut self, keys: (u64, u64), hash: u64, id: &[u8]) {
        match self.id.get_mut(..id.len()) {
            Some(mine) => {
                mine.copy_from_slice(id);
                (self.keys, self.hash, self.len) = (keys, hash, id.len());
            }
            None => self.len = usize::MAX,
        }
    }
}

/// Whether `a` and `b` hold the same bytes: up to 16 as two overlapping words each (group
/// ids are mostly short: no call of `bcmp`), longer ones as slices.
#[inline(always)]
fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    let word = |s: &[u8], at: usize, len: usize| {
        let mut w = [0u8; 8];
        w[..len].copy_from_slice(&s[at..at + len]);
        u64::from_le_bytes(w)
    };
    let two = |s: &[u8], len: usize| (word(s, 0, len), word(s, n - len, len));
    match n {
        17.. => a == b,
        8.. => two(a, 8) == two(b, 8),
        4.. => two(a, 4) == two(b, 4),
        _ => a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0,
    }
}

/// How [`fill`] treats a body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Body {
    /// Copied into `body`, checked as UTF-8 (a text queue).
    Text,
    /// Copied into `body_bytes` (and into `body` where it is UTF-8): a binary queue.
    Binary,
    /// Not copied (a borrowing receive reads it in place).
    InPlace,
}

/// Copies a taken message into `m`, reusing its allocations (the body as `body` says).
/// Returns the body's length. Errors name corrupted framing.
pub(super) fn fill(
    m: &mut Message,
    t: &Taken<'_>,
    nonce: u64,
    created_wall_ms: u64,
    body: Body,
) -> std::result::Result<usize, &'static str> {
    let lengths = t.lengths();
    let p = message::split(t.payload, lengths)?;
    let h = t.handle();
    m.message_id = if lengths.moved {
        // D8, M2: a dead-lettered message keeps its id, which is its dedup id.
        std::str::from_utf8(p.dedup)
            .ok()
            .and_then(MessageId::parse)
            .ok_or("moved message id")?
    } else {
        MessageId(message::id(nonce, h.idx, h.inc, h.member))
    };
    m.receipt_handle = ReceiptHandle {
        nonce,
        idx: h.idx,
        inc: h.inc,
        member: h.member,
        epoch: h.epoch,
    };
    // Shared bytes are copied first and the copy is validated: another process could change
    // them between a check in place and a copy. The destination's allocation is reused.
    fn set_text(dst: &mut String, src: &[u8]) -> std::result::Result<(), &'static str> {
        #[allow(unsafe_code)]
        // SAFETY: the string's bytes are UTF-8 again before it is used or this returns: it is
        // emptied, the copy is checked right after it is made (on the copy, not on the shared
        // bytes) and emptied again if it is not UTF-8. The copy's only way to fail is its
        // reservation, before any byte is copied (the string is empty then). Written in place,
        // the string is neither taken nor rebuilt (14 instructions a message).
        let v = unsafe { dst.as_mut_vec() };
        v.clear();
        v.extend_from_slice(src);
        // ASCII (the usual text) is checked a word or a vector at a time, and is UTF-8: short
        // text too (a dedup id of a few bytes: 59 instructions of UTF-8 decoding a message
        // before, where the ASCII look takes a few).
        if crate::validate::ascii(v) || std::str::from_utf8(v).is_ok() {
            return Ok(());
        }
        v.clear();
        Err("message text is not UTF-8")
    }
    m.body_bytes.clear();
    match body {
        Body::Text => set_text(&mut m.body, p.body)?,
        Body::Binary => {
            m.body_bytes.extend_from_slice(p.body);
            if set_text(&mut m.body, &m.body_bytes).is_err() {
                m.body.clear(); // not UTF-8: `body_bytes` only
            }
        }
        Body::InPlace => m.body.clear(),
    }
    // A reused buffer mostly holds this group's id already: equal bytes are that valid text,
    // and neither copy nor check is needed (compared in place, word by word).
    if !t.group_id_is(m.group_id.as_bytes()) {
        let mut id = [0u8; MAX_ID_LEN];
        let n = t.group_id(&mut id);
        set_text(&mut m.group_id, &id[..n])?;
    }
    if p.dedup.is_empty() {
        m.dedup_id = None;
    } else {
        set_text(m.dedup_id.get_or_insert_with(String::new), p.dedup)?;
    }
    if p.source.is_empty() {
        m.dead_letter_source = None;
    } else {
        set_text(
            m.dead_letter_source.get_or_insert_with(String::new),
            p.source,
        )?;
    }
    m.sequence_number = t.sequence_number();
    // The enqueue's arena time on the creation's wall clock: stable across receives (M3),
    // immune to wall-clock steps after creation, within 1 ms of the wall clock otherwise.
    // Arena time 1 is the creation instant (see `now_ms`).
    m.sent_timestamp = created_wall_ms.saturating_add(t.sent_ms().saturating_sub(1));
    m.first_receive_timestamp = t.first_receive_ms();
    m.receive_count = t.receive_count;
    let mut k = 0;
    for d in framing::decode(p.attrs) {
        let (name, data_type, value) = d?;
        if k >= MAX_ATTRIBUTES {
            return Err("attribute framing");
        }
        if m.attributes.len() == k {
            m.attributes.push(ReceivedAttribute::default());
        }
        let at = &mut m.attributes[k];
        set_text(&mut at.name, name)?;
        set_text(&mut at.data_type, data_type)?;
        at.value.clear();
        at.value.extend_from_slice(value);
        k += 1;
    }
    m.attributes.truncate(k);
    Ok(p.body.len())
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
        self.with_attempt(opts, attempt_id, buf, |q, buf| q.receive_into_as(opts, buf))
    }

    /// A receive with attempt id `attempt_id` (R11) whose fresh receive is `fresh` (a
    /// blocking long poll, or one non-blocking try of an async one): a replay of the receive
    /// recorded under the id if it may be replayed, else `fresh`, recorded under the id when
    /// it took messages.
    pub(super) fn with_attempt(
        &self,
        opts: &ReceiveOptions,
        attempt_id: &str,
        buf: &mut ReceiveBuffer,
        fresh: impl FnOnce(&Self, &mut ReceiveBuffer) -> Result<usize>,
    ) -> Result<usize> {
        let (max, vt, _) = self.receive_params(opts)?;
        validate::id("ReceiveRequestAttemptId", attempt_id)?;
        let inner = &*self.inner;
        let mut key = [0u8; 1 + MAX_ID_LEN];
        key[0] = b'A';
        key[1..1 + attempt_id.len()].copy_from_slice(attempt_id.as_bytes());
        let hash = hash_id(inner.keys, &key[..1 + attempt_id.len()]);
        let a = self.arena();
        // A retry asking for fewer messages than the recorded receive returned is answered
        // afresh: a response never holds more than its request's maximum (the recorded
        // messages stay in flight until their visibility timeout).
        let found = attempt::find(a, inner.now_ms(), hash, attempt_id.as_bytes())
            .filter(|rec| rec.count.min(attempt::MAX_MESSAGES) <= max);
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
        let n = self.receive_waiting(opts, buf)?;
        if n == 0 {
            self.count_empty_receive(opts.wait_time.is_some_and(|w| !w.is_zero()));
        }
        Ok(n)
    }

    /// [`Queue::receive_into`] without counting an empty receive.
    fn receive_waiting(&self, opts: &ReceiveOptions, buf: &mut ReceiveBuffer) -> Result<usize> {
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
            if now >= deadline {
                return Ok(0);
            }
            let bell = doorbell::begin_wait(self.arena(), inner.index as usize);
            let n = self.try_receive(max, vt, buf);
            if matches!(n, Ok(0)) {
                let t = self.sleep_bound_ms(now, deadline);
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
        let dl = self.dead_letter()?;
        // After a receive that found nothing (a receiver polling a queue it keeps up with), an
        // empty queue with nothing due answers at once: 295 instructions an empty poll where
        // the receive's setup took 754 (`benches/callgrind.sh empty`).
        if receive::idle_after_empty(self.arena(), &Op::new(&self.inner)) {
            return Ok(0);
        }
        let pass = self.receive_pass(max, vt, buf, dl)?;
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
    use super::{same_bytes, CheckedGroup, MAX_ID_LEN};
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

    /// The short comparison finds a difference at every byte of every length it handles (and
    /// past them); a remembered id holds only for its own bytes, keys and hash, and an id too
    /// long for the record is never remembered.
    #[test]
    fn a_checked_group_holds_for_its_own_id_keys_and_hash_only() {
        for n in 0..=20usize {
            let a: Vec<u8> = (0..n as u8).map(|b| b.wrapping_mul(37) ^ 0x5a).collect();
            assert!(same_bytes(&a, &a.clone()), "{n} bytes, equal");
            for at in 0..n {
                let mut b = a.clone();
                b[at] ^= 1 << (at % 8);
                assert!(!same_bytes(&a, &b), "{n} bytes, differing at {at}");
            }
            if n > 0 {
                assert!(!same_bytes(&a, &a[..n - 1]), "{n} bytes against {}", n - 1);
            }
        }
        let mut c = CheckedGroup::default();
        assert!(!c.holds((0, 0), 0, b""), "nothing remembered yet");
        c.set((1, 2), 7, b"group-a");
        assert!(c.holds((1, 2), 7, b"group-a"));
        assert!(!c.holds((1, 2), 8, b"group-a"), "another hash");
        assert!(!c.holds((1, 3), 7, b"group-a"), "other keys");
        assert!(!c.holds((1, 2), 7, b"group-b"), "another id");
        assert!(!c.holds((1, 2), 7, b"group-"), "a prefix");
        c.set((1, 2), 7, &[b'x'; MAX_ID_LEN + 1]);
        assert!(
            !c.holds((1, 2), 7, &[b'x'; MAX_ID_LEN + 1]),
            "too long to remember"
        );
        assert!(!c.holds((1, 2), 7, b"group-a"), "forgotten");
    }
}
