//! `send` and `send_batch`: validation (S1–S8), dedup ids (D5) and keys, and the hand-off to
//! [`crate::protocol::send`].

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::framing::{all_parts, attributes_len, Framed, Pieces};
use super::hashing::{group_hash, hash_dedup};
use super::queue::{fault, Op, Queue};
use super::types::*;
use crate::config::{Deduplication, MAX_ATTRIBUTES};
use crate::error::{Error, Result};
use crate::protocol::accounting::counter;
use crate::protocol::message;
use crate::protocol::send::{self, Outgoing};
use crate::protocol::{accounting, dedup, doorbell, recovery, sweep, words, Fault, PResult};
use crate::{sys, validate};

/// The allocation cursor's next value: a process-local spreading hint, so a load and a store
/// (no locked read-modify-write per message); threads racing may start at the same slot, and
/// the allocation CAS sorts them out.
pub(super) fn next_cursor(c: &AtomicU64) -> u64 {
    // Relaxed: a hint, never a synchronisation.
    let v = c.load(Ordering::Relaxed);
    c.store(v.wrapping_add(1), Ordering::Relaxed);
    v
}

/// S4's error for a send without a dedup id on a queue that needs one.
pub(super) fn missing_dedup_id() -> Error {
    Error::invalid(
        "MessageDeduplicationId",
        "The queue should either have ContentBasedDeduplication enabled or MessageDeduplicationId provided explicitly",
    )
}

impl Queue {
    /// Sends one message (S1–S8, M1).
    ///
    /// # Examples
    ///
    /// ```
    /// use shmfifo::{Error, MessageAttribute, Queue, QueueConfig, ReceiveOptions, SendMessage};
    ///
    /// let q = Queue::create_anonymous(&QueueConfig::new())?;
    /// let attrs = [MessageAttribute::string("kind", "order")];
    /// let msg = SendMessage::new("customer-42", "order #1")
    ///     .dedup_id("order-1")
    ///     .attributes(&attrs);
    /// let sent = q.send(&msg)?;
    /// assert!(!sent.duplicate);
    /// // The same dedup id again within the dedup interval: accepted, not enqueued (D1).
    /// let again = q.send(&msg)?;
    /// assert!(again.duplicate);
    /// assert_eq!(again.message_id, sent.message_id);
    /// // With deduplication on and content-based dedup off, a dedup id is required (S4).
    /// assert!(matches!(
    ///     q.send(&SendMessage::new("customer-42", "order #2")),
    ///     Err(Error::InvalidParameterValue { .. })
    /// ));
    ///
    /// let got = q.receive(&ReceiveOptions::max(10))?;
    /// assert_eq!(got.len(), 1);
    /// assert_eq!(got[0].message_id, sent.message_id);
    /// assert_eq!(got[0].body, "order #1");
    /// assert_eq!(got[0].attributes[0].value, b"order");
    /// # Ok::<(), shmfifo::Error>(())
    /// ```
    pub fn send(&self, msg: &SendMessage<'_>) -> Result<SendResult> {
        self.send_timeout(msg, Duration::ZERO)
    }

    /// Sends like [`send`](Self::send), but when the message's size class is full waits up to
    /// `timeout` for a slot of that class to free, as a bounded channel applies backpressure.
    /// The producer sleeps (no spinning) and is woken by whichever process frees a slot (a
    /// delete, a purge, a dead-letter move, retention, recovery); it looks again by itself at
    /// least every 100 ms, so a slot freed by a process that died before ringing, or by a
    /// retention expiry nobody has swept yet, is found too.
    ///
    /// A delete frees a slot when its group's list lets go of it: the list keeps its last
    /// deleted message as its anchor (the dummy node) until the group's next delete, or until
    /// the group empties and is retired.
    ///
    /// Only a full size class is waited for: every other error (invalid input, a full group
    /// table, a refusing dedup table) returns at once, as from [`send`](Self::send). When the
    /// timeout passes with the class still full the error is [`Error::SizeClassFull`]; a zero
    /// timeout is [`send`](Self::send). The wait is real time, also on a test clock.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use shmfifo::{Error, Queue, QueueConfig, ReceiveOptions, SendMessage};
    ///
    /// // Room for four small messages, and no growth.
    /// let q = Queue::create_anonymous(&QueueConfig::new().max_messages(4).size_limit(0))?;
    /// for i in 0..4 {
    ///     let id = format!("m{i}");
    ///     q.send(&SendMessage::new(&id, "x").dedup_id(&id))?;
    /// }
    /// let fifth = SendMessage::new("m4", "x").dedup_id("m4");
    /// // Full: a plain send fails at once, a send with a timeout fails when it passes.
    /// assert!(matches!(q.send(&fifth), Err(Error::SizeClassFull { .. })));
    /// let r = q.send_timeout(&fifth, Duration::from_millis(20));
    /// assert!(matches!(r, Err(Error::SizeClassFull { .. })));
    ///
    /// // A consumer deletes in another thread (or process): the waiting send goes through.
    /// std::thread::scope(|s| {
    ///     s.spawn(|| {
    ///         std::thread::sleep(Duration::from_millis(50));
    ///         let got = q.receive(&ReceiveOptions::max(1)).unwrap();
    ///         q.delete(&got[0].receipt_handle).unwrap();
    ///     });
    ///     let sent = q.send_timeout(&fifth, Duration::from_secs(10)).unwrap();
    ///     assert!(!sent.duplicate);
    /// });
    /// # Ok::<(), shmfifo::Error>(())
    /// ```
    pub fn send_timeout(&self, msg: &SendMessage<'_>, timeout: Duration) -> Result<SendResult> {
        let Some(group_id) = msg.group_id else {
            return Err(Error::MissingParameter {
                parameter: "MessageGroupId",
            });
        };
        let ms = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
        // A timeout under a millisecond still waits (for one): it asked to wait.
        let ms = if ms == 0 && !timeout.is_zero() { 1 } else { ms };
        self.send_checked(group_id, msg, ms)
    }

    /// The checks of a message before it is sent (S2–S8, S4, L1, the size limit).
    fn check(&self, group_id: &str, msg: &SendMessage<'_>) -> Result<()> {
        self.check_with(group_id, msg, true, false, self.maximum_message_size())
    }

    /// [`check`](Self::check), the body's characters (S7) only if `body` (a loaned body was
    /// checked where it lies already: `validate::text`), the group id only if not
    /// `group_checked` (a batch checks each run of one group's id once), against the live
    /// size limit `max` (a batch reads it once).
    // Always inlined: each caller's checks then fold into its own frame (callgrind: 33
    // instructions less a single send, 17 a batched message).
    #[inline(always)]
    fn check_with(
        &self,
        group_id: &str,
        msg: &SendMessage<'_>,
        body: bool,
        group_checked: bool,
        max: u32,
    ) -> Result<()> {
        let inner = &*self.inner;
        if let Some(d) = msg.delay_seconds.filter(|&d| d != 0) {
            return Err(Error::invalid(
                "DelaySeconds",
                format!("Value {d} for parameter DelaySeconds is invalid. Reason: The request include parameter that is not valid for this queue type."),
            ));
        }
        if !group_checked {
            validate::id("MessageGroupId", group_id)?;
        }
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
        if body {
            match (inner.binary, msg.bytes) {
                // S6 holds for any bytes: a body is at least one byte.
                (true, _) if msg.body_bytes().is_empty() => return Err(validate::empty_body()),
                (true, _) => {} // any bytes (BodyMode::Binary)
                (false, Some(b)) => {
                    validate::text(b)?;
                }
                (false, None) => validate::body(msg.body)?,
            }
        }
        if msg.attributes.len() > MAX_ATTRIBUTES {
            return Err(Error::invalid(
                "MessageAttributes",
                "Number of message attributes cannot exceed 10.",
            ));
        }
        let mut size = msg.body_bytes().len();
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
        if size > max as usize {
            return Err(Error::invalid(
                "MessageBody",
                format!(
                    "One or more parameters cannot be validated. Reason: Message must be shorter than {} bytes.",
                    max
                ),
            ));
        }
        Ok(())
    }

    /// Checks and sends `msg` to `group_id`, waiting up to `wait_ms` for a slot if its class
    /// is full.
    fn send_checked(
        &self,
        group_id: &str,
        msg: &SendMessage<'_>,
        wait_ms: u64,
    ) -> Result<SendResult> {
        self.check(group_id, msg)?;
        let mut slot = None;
        let f = Framed::make(self.inner.dedup, msg, &mut slot);
        let mut pieces = Pieces::for_message(msg);
        let (parts, attr_len) = f.fill(msg, &mut pieces);
        self.send_all(
            group_id.as_bytes(),
            parts,
            attr_len,
            msg.body_bytes().len(),
            0,
            0,
            wait_ms,
        )
    }

    /// Enqueues a validated message from its pieces: dead-letter source, dedup id (also the
    /// dedup key when the queue deduplicates), attribute pieces, body.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn send_parts(
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
        let (parts, n) = all_parts(source, dedup, attr_pieces, body);
        self.send_all(
            group_id,
            &parts[..n],
            attr_len,
            body.len(),
            flags,
            prior_receives,
            0,
        )
    }

    /// Enqueues a validated message from all its parts in slot order (`parts[0]` the body,
    /// `parts[1]` the dead-letter source, `parts[2]` the dedup id, then the attributes), waiting up to `wait_ms`
    /// for a slot if its class is full.
    #[allow(clippy::too_many_arguments)]
    // Always inlined (a send's description, some 20 words, then stays in its frame):
    // callgrind, 28 instructions less a single send.
    #[inline(always)]
    fn send_all(
        &self,
        group_id: &[u8],
        parts: &[&[u8]],
        attr_len: usize,
        body_len: usize,
        flags: u8,
        prior_receives: u32,
        wait_ms: u64,
    ) -> Result<SendResult> {
        let inner = &*self.inner;
        let class = self.class_for(parts, attr_len, body_len)?;
        let out = self.outgoing(
            class,
            group_id,
            parts,
            attr_len,
            body_len,
            flags,
            prior_receives,
            None,
        );
        // A full class: reclaim what is due first (retention, dead producers), then send
        // again, growing the class if that freed nothing (layout 13).
        let sent = match send::send(self.arena(), &Op::new(inner), inner.me, &out) {
            Err(Fault::ClassFull(_)) => {
                self.make_room();
                send::send(self.arena(), &Op::growing(inner), inner.me, &out)
            }
            r => r,
        };
        let sent = match sent {
            Err(Fault::ClassFull(_) | Fault::NoSpace(_)) if wait_ms > 0 => {
                self.wait_for_space(&out, wait_ms)?
            }
            r => r,
        }
        .map_err(|f| fault(f, inner))?;
        Ok(self.sent(&sent))
    }

    /// Sends `out`, whose class was full, sleeping on the space doorbell until a slot frees or
    /// `wait_ms` (real time) passes (SYNC POINT(space-doorbell)). Announces itself, tries
    /// again, then sleeps on the doorbell value read before the retry: a slot freed after the
    /// retry rings a value it has not slept past. Looks again at least every liveness period
    /// (a dead participant's slots, retention expiries), running recovery or a sweep if due.
    fn wait_for_space(&self, out: &Outgoing<'_>, wait_ms: u64) -> Result<PResult<send::Sent>> {
        let inner = &*self.inner;
        let part = inner.index as usize;
        let deadline = inner.real_ms().saturating_add(wait_ms);
        loop {
            let bell = doorbell::space_begin_wait(self.arena(), part);
            // A kill point: a producer that dies announced (tests/failpoints.rs).
            #[cfg(feature = "failpoints")]
            crate::failpoint::hit();
            let r = send::send(self.arena(), &Op::growing(inner), inner.me, out);
            let now = inner.real_ms();
            if !matches!(r, Err(Fault::ClassFull(_) | Fault::NoSpace(_))) || now >= deadline {
                doorbell::space_end_wait(self.arena(), part);
                return Ok(r);
            }
            let t = (deadline - now).clamp(1, recovery::LIVENESS_PERIOD_MS);
            accounting::count(self.arena(), inner.me, counter::WAITS, 1);
            let slept = sys::monotonic_ns();
            let woke = sys::futex_wait(doorbell::producers(self.arena()), bell, t);
            // As a sleeping receiver does: a named queue's file may have been truncated
            // under us while we slept; report it rather than touch a page that is gone, the
            // registry's included (so before `space_end_wait`, whose record may lie past the
            // cut: a truncated file keeps its announcement, as a receiver's does).
            if sys::needs_look(woke, slept) {
                if let Some(e) = self.truncated()? {
                    return Err(e);
                }
            }
            doorbell::space_end_wait(self.arena(), part);
            self.make_room();
        }
    }

    /// Slots claimed by producers that died are reclaimed by recovery, and messages past their
    /// retention period by a sweep. Before a send reports its class full, each runs if it is
    /// due: recovery once per liveness period for the whole queue and only when a registered
    /// participant has died, a sweep at most every 10 ms (a full class then costs a producer a
    /// few loads, not a recovery with a lock check per participant on every send). Returns
    /// whether either did something (then the send is worth trying again).
    pub(super) fn make_room(&self) -> bool {
        let inner = &*self.inner;
        let a = self.arena();
        let recovered = recovery::maybe_check_liveness(a, inner, inner.me).unwrap_or(false);
        let swept = sweep::sweep_for_room(a, inner, inner.me).unwrap_or(false);
        recovered || swept
    }

    /// The smallest size class that holds a message of these parts (in slot order: `parts[0]`
    /// the body, `parts[1]` the dead-letter source, `parts[2]` the dedup id, then the
    /// attributes, whose bytes are `attr_len`).
    #[inline]
    fn class_for(&self, parts: &[&[u8]], attr_len: usize, body_len: usize) -> Result<usize> {
        let stored = parts[1].len() + parts[2].len() + attr_len + body_len;
        // A match, not `ok_or`: an error built eagerly is dropped on every send that fits (a
        // call of its destructor, 15 instructions a message).
        match self
            .inner
            .caps
            .iter()
            .position(|&(cap, _)| cap as usize >= stored)
        {
            Some(class) => Ok(class),
            None => Err(Error::Corrupted {
                what: "no size class fits a valid message",
            }),
        }
    }

    /// The protocol's description of a validated message from all its parts in slot order
    /// (`parts[0]` the body, `parts[1]` the dead-letter source, `parts[2]` the dedup id, then
    /// the attributes), in size class `class` ([`class_for`](Self::class_for)); `hash` is the
    /// group id's keyed hash if the caller has it already.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn outgoing<'x>(
        &self,
        class: usize,
        group_id: &'x [u8],
        parts: &'x [&'x [u8]],
        attr_len: usize,
        body_len: usize,
        flags: u8,
        prior_receives: u32,
        hash: Option<u64>,
    ) -> Outgoing<'x> {
        let inner = &*self.inner;
        let (source, dedup) = (parts[1], parts[2]);
        Outgoing {
            class,
            cursor: next_cursor(&inner.cursor),
            hash: hash.unwrap_or_else(|| group_hash(inner.keys, group_id)),
            group_id,
            lens: words::pack_lens(body_len, attr_len, dedup.len(), flags),
            parts,
            dedup: match inner.dedup {
                Deduplication::Off => None,
                Deduplication::Queue => {
                    let (hash, check) = hash_dedup(inner.keys, &[], dedup);
                    Some(dedup::Key {
                        hash,
                        check,
                        dedup,
                        group: &[],
                    })
                }
                Deduplication::MessageGroup => {
                    let (hash, check) = hash_dedup(inner.keys, group_id, dedup);
                    Some(dedup::Key {
                        hash,
                        check,
                        dedup,
                        group: group_id,
                    })
                }
            },
            source_len: source.len() as u8,
            prior_receives,
            loaned: None,
            in_place: 0,
        }
    }

    /// Sends the message in a lent slot (see [`super::loan::Loan`]): `msg.body` is the slot's
    /// first bytes, in place, checked as text by the caller (`validate::text`). Checked
    /// otherwise as `send` checks (S2–S6, S8, D5); the dedup id, attributes
    /// go after the body in the same slot. Where they do not fit its class, the body is copied
    /// into a slot of a class that holds them all (one copy; the loan is given back). On `Ok`
    /// the lent slot is linked, or given back (a duplicate, D1; a copy); on `Err` it is still
    /// lent to us, untouched, so the caller can send it again or drop it.
    pub(super) fn send_lent(
        &self,
        lent: send::Loaned,
        class: usize,
        msg: &SendMessage<'_>,
    ) -> Result<SendResult> {
        let Some(group_id) = msg.group_id else {
            return Err(Error::MissingParameter {
                parameter: "MessageGroupId",
            });
        };
        // The body was checked as text where it lies (`Loan::send_with`).
        self.check_with(group_id, msg, false, false, self.maximum_message_size())?;
        let inner = &*self.inner;
        let mut slot = None;
        let f = Framed::make(inner.dedup, msg, &mut slot);
        let mut pieces = Pieces::for_message(msg);
        let (parts, attr_len) = f.fill(msg, &mut pieces);
        if !self.fits_in_place(parts, class) {
            // The options outgrow the class the body was lent from: one copy.
            let r = self.send_all(
                group_id.as_bytes(),
                parts,
                attr_len,
                msg.body_bytes().len(),
                0,
                0,
                0,
            )?;
            self.return_lent(lent);
            return Ok(r);
        }
        let stored_class = self.class_for(parts, attr_len, msg.body_bytes().len())?;
        let mut out = self.outgoing(
            stored_class,
            group_id.as_bytes(),
            parts,
            attr_len,
            msg.body_bytes().len(),
            0,
            0,
            None,
        );
        out.lend(lent, class, msg.body_bytes().len());
        let sent = send::send(self.arena(), &Op::new(inner), inner.me, &out)
            .map_err(|f| fault(f, inner))?;
        if sent.duplicate {
            // D1: accepted, not enqueued: the slot goes back to the pool.
            self.return_lent(lent);
        }
        Ok(self.sent(&sent))
    }

    /// Whether a message's options (`parts[1..]`: source, dedup id, attributes) fit after its
    /// lent body (`parts[0]`) in a slot of class `class`; if they do, the body part is emptied:
    /// it is in place already.
    fn fits_in_place(&self, parts: &mut [&[u8]], class: usize) -> bool {
        let stored: usize = parts.iter().map(|p| p.len()).sum();
        let cap = self
            .inner
            .caps
            .get(class)
            .map_or(0, |&(cap, _)| cap as usize);
        let fits = stored <= cap;
        if fits {
            parts[0] = &[];
        }
        fits
    }

    /// Gives a lent slot back to the pool (a dropped loan, a duplicate, a copy).
    pub(super) fn return_lent(&self, lent: send::Loaned) {
        let inner = &*self.inner;
        // A slot that is no longer ours at the loan's epoch (only a hostile writer does that)
        // is left alone: the CAS fails.
        let _ = send::return_loan(self.arena(), &Op::new(inner), inner.me, lent);
    }

    /// The caller's view of a send, and the allocation cursor moved past its slot.
    fn sent(&self, sent: &send::Sent) -> SendResult {
        if !sent.duplicate {
            self.note_cursor(sent.idx);
        }
        self.result_of(sent)
    }

    /// Where this handle's next send starts looking for a free slot: just past `idx`, the slot
    /// a send just took.
    fn note_cursor(&self, idx: u32) {
        if let Ok((_, slot)) = self.arena().locate(idx) {
            self.inner.cursor_past(slot as u64);
        }
    }

    /// The answer to a send of `sent` (its id, sequence number and whether it was a
    /// duplicate).
    #[inline]
    fn result_of(&self, sent: &send::Sent) -> SendResult {
        SendResult {
            message_id: self.message_id(sent.idx, sent.inc, sent.member),
            sequence_number: (u128::from(sent.seq_hi) << 64) | u128::from(sent.pos),
            duplicate: sent.duplicate,
        }
    }

    pub(super) fn message_id(&self, idx: u32, inc: u32, member: u8) -> MessageId {
        MessageId(message::id(self.inner.nonce, idx, inc, member))
    }

    /// Sends up to 10 messages (S11–S13). Request-level errors reject the whole batch; other
    /// failures are reported per entry; entries of one group are enqueued in order.
    ///
    /// # Examples
    ///
    /// ```
    /// use shmfifo::{BatchEntry, Error, Queue, QueueConfig, ReceiveOptions, SendMessage};
    ///
    /// let q = Queue::create_anonymous(&QueueConfig::new())?;
    /// let results = q.send_batch(&[
    ///     BatchEntry { id: "a", entry: SendMessage::new("g", "first").dedup_id("1") },
    ///     BatchEntry { id: "b", entry: SendMessage::new("g", "").dedup_id("2") }, // empty body
    ///     BatchEntry { id: "c", entry: SendMessage::new("g", "second").dedup_id("3") },
    /// ])?;
    /// assert_eq!(results[1].id, "b");
    /// assert!(matches!(results[1].result, Err(Error::InvalidParameterValue { .. })));
    /// assert!(results[0].result.is_ok() && results[2].result.is_ok());
    ///
    /// let got = q.receive(&ReceiveOptions::max(10))?;
    /// let bodies: Vec<&str> = got.iter().map(|m| m.body.as_str()).collect();
    /// assert_eq!(bodies, ["first", "second"]);
    /// # Ok::<(), shmfifo::Error>(())
    /// ```
    pub fn send_batch(
        &self,
        entries: &[BatchEntry<'_, SendMessage<'_>>],
    ) -> Result<Vec<BatchResult<SendResult>>> {
        validate::batch_ids(entries.iter().map(|e| e.id))?;
        // 1 to 10 entries (checked just above); the array's tail repeats the first, unused.
        let msgs: [&SendMessage<'_>; 10] =
            std::array::from_fn(|k| &entries[k.min(entries.len() - 1)].entry);
        let mut results: [Result<SendResult>; 10] = std::array::from_fn(|_| unsent());
        self.send_batch_lent(&msgs[..entries.len()], &[None; 10], &mut results)?;
        Ok(batch_results(
            entries.iter().map(|e| e.id),
            results.into_iter().map(Some),
            "a batch entry was neither sent nor refused",
        ))
    }

    /// Sends up to 10 messages as one batch, as [`send_batch`](Self::send_batch) does (S11–S13:
    /// each group's messages go as one chain, in their order, committed whole or not at all,
    /// with one lookup, one hint and one doorbell per group), without batch entry ids: one
    /// result per message, in order, as [`delete_handles`](Self::delete_handles) reports
    /// deletes. A request-level error (no message, more than 10, over 1 MiB in all, a message
    /// without a group id, a missing dedup id where one is needed) rejects the whole batch;
    /// any other failure is that message's own.
    ///
    /// # Examples
    ///
    /// ```
    /// use shmfifo::{Error, Queue, QueueConfig, ReceiveOptions, SendMessage};
    ///
    /// let q = Queue::create_anonymous(&QueueConfig::new())?;
    /// let results = q.send_messages(&[
    ///     SendMessage::new("g", "first").dedup_id("1"),
    ///     SendMessage::new("g", "").dedup_id("2"), // empty body: refused alone
    ///     SendMessage::new("g", "second").dedup_id("3"),
    /// ])?;
    /// assert!(matches!(results[1], Err(Error::InvalidParameterValue { .. })));
    /// assert!(results[0].is_ok() && results[2].is_ok());
    ///
    /// let got = q.receive(&ReceiveOptions::max(10))?;
    /// let bodies: Vec<&str> = got.iter().map(|m| m.body.as_str()).collect();
    /// assert_eq!(bodies, ["first", "second"]);
    ///
    /// // Eleven messages are more than one request may carry.
    /// let many = vec![SendMessage::new("g", "x").dedup_id("4"); 11];
    /// assert!(matches!(
    ///     q.send_messages(&many),
    ///     Err(Error::TooManyEntriesInBatchRequest { entries: 11 })
    /// ));
    /// # Ok::<(), shmfifo::Error>(())
    /// ```
    pub fn send_messages(&self, messages: &[SendMessage<'_>]) -> Result<Vec<Result<SendResult>>> {
        match messages.len() {
            0 => return Err(Error::EmptyBatchRequest),
            n if n > 10 => return Err(Error::TooManyEntriesInBatchRequest { entries: n }),
            _ => {}
        }
        // The array's tail repeats the first message, unused.
        let msgs: [&SendMessage<'_>; 10] =
            std::array::from_fn(|k| &messages[k.min(messages.len() - 1)]);
        // The results written where they are returned (not into an array first, then moved
        // into a vector: 60 instructions a message).
        let mut results: Vec<Result<SendResult>> = (0..messages.len()).map(|_| unsent()).collect();
        self.send_batch_lent(&msgs[..messages.len()], &[None; 10], &mut results)?;
        Ok(results)
    }

    /// [`send_batch`](Self::send_batch) of 1 to 10 messages (`Some` each; their batch entry ids
    /// checked by the caller), where message `k` may be a lent slot (`lent[k]`: the
    /// loan and its class) whose first bytes hold `entries[k]`'s body already (checked as
    /// text by the caller): its options go after the body in place, or (where they do not fit
    /// the class) the body is copied into a slot of a larger class. Writes each entry's result
    /// into `results` (at least as many as `entries`, each [`unsent`] on entry: what an entry
    /// neither sent nor refused keeps) and returns whether each lent slot was linked in
    /// place (otherwise the caller gives a lent slot back on success: a duplicate or a copy;
    /// on an error it is still lent).
    pub(super) fn send_batch_lent(
        &self,
        entries: &[&SendMessage<'_>],
        lent: &[Option<(send::Loaned, usize)>],
        results: &mut [Result<SendResult>],
    ) -> Result<[bool; 10]> {
        let lent_at = |k: usize| lent.get(k).copied().flatten();
        let mut total = 0;
        for e in entries {
            if e.group_id.is_none() {
                return Err(Error::invalid(
                    "MessageGroupId",
                    "The request must contain the parameter MessageGroupId.",
                ));
            }
            // S12: a missing dedup id rejects the whole batch.
            if e.dedup_id.is_none() && self.inner.needs_dedup_id() {
                return Err(missing_dedup_id());
            }
            total += e.body_bytes().len() + attributes_len(e.attributes);
        }
        if total > 1_048_576 {
            return Err(Error::BatchRequestTooLong { bytes: total });
        }
        // Each entry checked, framed and described on its own (a bad entry fails alone), in
        // one pass, into arrays on the stack (a batch holds at most 10 entries).
        const B: usize = 10;
        let inner = &*self.inner;
        let mut framed: [Option<Framed>; B] = std::array::from_fn(|_| None);
        let mut pieces: [Pieces<'_>; B] = std::array::from_fn(|_| Pieces::Plain([&[]; 3]));
        let mut in_place = [false; B];
        let mut outs: [Option<Outgoing<'_>>; B] = std::array::from_fn(|_| None);
        let slots = framed.iter_mut().zip(pieces.iter_mut());
        // The size limit read once a batch; a group id checked, and hashed, once a run of its
        // entries: `last` is the group and hash of the last entry described.
        let max = self.maximum_message_size();
        let mut last: Option<(&str, u64)> = None;
        for (k, (e, (f, p))) in entries.iter().zip(slots).enumerate() {
            // Read once (`results` is written between the uses, which the compiler cannot
            // prove apart from the entry).
            let group = group_of(e);
            let body_len = e.body_bytes().len();
            let run = last.filter(|&(g, _)| g == group).map(|(_, h)| h);
            let group_checked = run.is_some();
            // A lent body was checked where it lies.
            let checked = self.check_with(group, e, lent_at(k).is_none(), group_checked, max);
            if let Err(err) = checked {
                results[k] = Err(err);
                continue;
            }
            let f: &Framed = Framed::make(inner.dedup, e, f);
            *p = Pieces::for_message(e);
            let (parts, attr_len) = f.fill(e, p);
            if let Some((_, class)) = lent_at(k) {
                in_place[k] = self.fits_in_place(parts, class);
            }
            let parts: &[&[u8]] = parts;
            // One keyed hash per group id of the batch.
            let hash = run.or_else(|| {
                (0..k)
                    .find(|&j| group_of(entries[j]) == group)
                    .and_then(|j| outs[j].as_ref().map(|o| o.hash))
            });
            let class = match self.class_for(parts, attr_len, body_len) {
                Ok(class) => class,
                Err(err) => {
                    results[k] = Err(err);
                    continue;
                }
            };
            // Built in its place in `outs` (a message's description is some 20 words).
            let o = outs[k].insert(self.outgoing(
                class,
                group.as_bytes(),
                parts,
                attr_len,
                body_len,
                0,
                0,
                hash,
            ));
            if let (true, Some((l, lent_class))) = (in_place[k], lent_at(k)) {
                o.lend(l, lent_class, body_len);
            }
            last = Some((group, o.hash));
        }
        // ... then the entries of each group sent as one chain, in their order (one
        // lookup, one link, one hint and one doorbell per group, committed whole or not at
        // all). An entry whose dedup key repeats an earlier pending entry's first lets
        // everything before it be sent (D9: the earlier entry is the original, the later the
        // duplicate).
        let mut pending = [false; B];
        for k in 0..entries.len() {
            let Some(o) = &outs[k] else { continue };
            let repeats = o.dedup.as_ref().is_some_and(|key| {
                (0..k).filter(|&j| pending[j]).any(|j| {
                    outs[j]
                        .as_ref()
                        .and_then(|p| p.dedup.as_ref())
                        .is_some_and(|pk| {
                            pk.hash == key.hash && pk.dedup == key.dedup && pk.group == key.group
                        })
                })
            });
            if repeats {
                self.send_chains(entries, &mut pending, &outs, results)?;
            }
            pending[k] = true;
        }
        self.send_chains(entries, &mut pending, &outs, results)?;
        Ok(in_place)
    }

    /// Sends each group's pending entries of a batch as one chain, groups in the order of
    /// their first pending entry (see `send_batch`), filling their results; clears `pending`.
    fn send_chains(
        &self,
        entries: &[&SendMessage<'_>],
        pending: &mut [bool],
        outs: &[Option<Outgoing<'_>>],
        results: &mut [Result<SendResult>],
    ) -> Result<()> {
        let inner = &*self.inner;
        let group = |k: usize| group_of(entries[k]);
        // Every group's table entry asked for at once: on a large table each lookup below is a
        // cache miss, and a batch over several groups then waits for them together.
        if entries.len() > 1 {
            let mut last = None;
            for o in outs.iter().flatten() {
                // Consecutive entries of one group: its lines are asked for once.
                if last != Some(o.hash) {
                    crate::protocol::group::prefetch(self.arena(), o.hash);
                    last = Some(o.hash);
                }
            }
        }
        for first in 0..entries.len() {
            if !pending[first] {
                continue;
            }
            // Pending entries always have their outgoing message; it also fills the unused
            // tail of the chain's array (only `chain[..n]` is sent).
            let Some(fill) = outs[first].as_ref() else {
                pending[first] = false;
                continue;
            };
            // This group's pending entries, in order (at most 10: arrays on the stack).
            let mut ks = [0usize; 10];
            let mut chain: [&Outgoing<'_>; 10] = [fill; 10];
            let mut n = 0;
            for k in first..entries.len() {
                if let (true, Some(o)) = (pending[k] && group(k) == group(first), &outs[k]) {
                    ks[n] = k;
                    chain[n] = o;
                    n += 1;
                }
            }
            let mut got: [PResult<send::Sent>; 10] = [Err(Fault::Corrupted("not sent")); 10];
            let packing = inner.packing();
            send::send_chain_as(
                self.arena(),
                &Op::new(inner),
                inner.me,
                &chain[..n],
                &mut got[..n],
                packing,
            )
            .map_err(|f| fault(f, inner))?;
            // A full class: the entries from the first that found it full after the last one
            // enqueued (so that a retry keeps the group's order) are sent again after making
            // room, but those answered as duplicates (a pack fails whole around one: its
            // answer stands, and resending it would count it twice). A pack still refused
            // (its class full and grown as far as it may) goes once more one slot a
            // message, each on its own and in order up to the first refused, whose answer
            // the rest keep: what slots can hold is taken, and the group's order kept.
            let full = |r: &PResult<send::Sent>| matches!(r, Err(Fault::ClassFull(_)));
            let new = |r: &PResult<send::Sent>| matches!(r, Ok(s) if !s.duplicate);
            let retries: &[send::Packing] = match packing {
                send::Packing::Where => &[send::Packing::Where, send::Packing::Never],
                send::Packing::Never => &[send::Packing::Never],
            };
            for (t, &how) in retries.iter().enumerate() {
                let from = got[..n].iter().rposition(new).map_or(0, |i| i + 1);
                let from = got[from..n].iter().position(full).map_or(n, |i| from + i);
                if from == n {
                    break;
                }
                let mut again: [&Outgoing<'_>; 10] = [fill; 10];
                let mut at = [0usize; 10];
                let mut m = 0;
                for i in from..n {
                    if !matches!(got[i], Ok(s) if s.duplicate) {
                        again[m] = chain[i];
                        at[m] = i;
                        m += 1;
                    }
                }
                if t == 0 {
                    // Reclaim what is due, then send them again, growing if need be.
                    self.make_room();
                }
                // The retry as one chain; the fallback after a refused pack one message a
                // chain, stopping at the first refused (a chain of slots leaves a refused
                // entry out and enqueues the later ones).
                let step = if t == 0 { m.max(1) } else { 1 };
                for (outs, at) in again[..m].chunks(step).zip(at[..m].chunks(step)) {
                    let mut retried: [PResult<send::Sent>; 10] =
                        [Err(Fault::Corrupted("not sent")); 10];
                    send::send_chain_as(
                        self.arena(),
                        &Op::growing(inner),
                        inner.me,
                        outs,
                        &mut retried[..outs.len()],
                        how,
                    )
                    .map_err(|f| fault(f, inner))?;
                    for (&i, r) in at.iter().zip(retried) {
                        got[i] = r;
                    }
                    if step == 1 && got[at[0]].is_err() {
                        break;
                    }
                }
            }
            // The cursor moves past the chain's last new slot, once (a pack's members share
            // theirs).
            if let Some(Ok(s)) = got[..n].iter().rev().find(|r| new(r)) {
                self.note_cursor(s.idx);
            }
            for (&k, r) in ks[..n].iter().zip(got) {
                results[k] = r.map(|s| self.result_of(&s)).map_err(|f| fault(f, inner));
                pending[k] = false;
            }
        }
        Ok(())
    }
}

/// What a batch's entry answers until it is sent or refused: only an entry a batch leaves
/// without either (a bug, or a corrupted arena) keeps it.
pub(super) fn unsent() -> Result<SendResult> {
    Err(Error::Corrupted {
        what: "a batch entry was neither sent nor refused",
    })
}

/// The group id of a batch's message (present: `send_batch_lent` checks that first).
fn group_of<'e>(e: &SendMessage<'e>) -> &'e str {
    e.group_id.unwrap_or("")
}
