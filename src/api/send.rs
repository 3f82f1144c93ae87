//! `send` and `send_batch`: validation (S1–S8), dedup ids (D5) and keys, and the hand-off to
//! [`crate::protocol::send`].

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::framing::{self, all_parts, Pieces};
use super::hashing::{group_key, hash_dedup, remember_group, GroupKey};
use super::queue::{fault, ms, Op, Queue};
use super::types::*;
use crate::config::{Deduplication, MAX_ATTRIBUTES};
use crate::error::{Error, Result};
use crate::protocol::accounting::counter;
use crate::protocol::message;
use crate::protocol::send::{self, Outgoing};
use crate::protocol::{accounting, dedup, doorbell, recovery, sweep, words, Fault, PResult};
use crate::{sys, validate};

mod batch;
pub(in crate::api) use batch::unsent;

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
        // No wait: no timeout to convert (`Duration`'s milliseconds are a `u128`: some 20
        // instructions a send).
        self.send_waiting(msg, 0)
    }

    /// Sends like [`send`](Self::send), but when the message's size class is full waits up to
    /// `timeout` for a slot of that class to free, as a bounded channel applies backpressure.
    /// The producer sleeps (no spinning) and is woken by whichever process frees a slot (a
    /// delete, a purge, a dead-letter move, retention, recovery); it looks again by itself at
    /// least every 100 ms, so a slot freed by a process that died before ringing, or by a
    /// retention expiry nobody has swept yet, is found too.
    ///
    /// A delete frees a slot when its group's list lets go of it: the list keeps its last
    /// deleted message as its anchor (the dummy node) until the group's next delete, or at
    /// once when the group empties (its list starts again at the group's own anchor).
    ///
    /// Only a full size class is waited for, or one whose growth the file system refused:
    /// every other error (invalid input, a full group table, a refusing dedup table) returns
    /// at once, as from [`send`](Self::send). When the timeout passes with the class still
    /// full the error is [`Error::SizeClassFull`], or [`Error::NoSpace`] where the file system
    /// still refuses the growth; a zero timeout is [`send`](Self::send). The wait is real time, also on a test clock.
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
        // A timeout under a millisecond still waits (for one): it asked to wait.
        let wait_ms = match ms(timeout) {
            0 if !timeout.is_zero() => 1,
            w => w,
        };
        self.send_waiting(msg, wait_ms)
    }

    /// [`send_timeout`](Self::send_timeout) with its timeout in milliseconds (0: no wait).
    fn send_waiting(&self, msg: &SendMessage<'_>, wait_ms: u64) -> Result<SendResult> {
        let Some(group_id) = msg.group_id else {
            return Err(Error::MissingParameter {
                parameter: "MessageGroupId",
            });
        };
        self.send_checked(group_id, msg, wait_ms)
    }

    /// Checks a message as [`send`](Self::send) checks it before anything is enqueued (the
    /// group and dedup ids, the body, the attributes, the size against the live
    /// `MaximumMessageSize`, S2–S8), without sending it: the error `send` would return for
    /// the message's own content. What depends on the queue's state then (a full arena, a
    /// dedup window that refuses) is not checked, nor a setting changed in between.
    ///
    /// For a sender that must not send part of a group's messages: a batch's entries fail
    /// one by one (S13), and a later entry of the same group is still enqueued after a
    /// refused one; checked first, a run of messages can stop before the first refused one.
    ///
    /// ```
    /// use shmfifo::{Error, Queue, QueueConfig, SendMessage};
    ///
    /// let q = Queue::create_anonymous(&QueueConfig::new().maximum_message_size(1024))?;
    /// assert!(q.check_send(&SendMessage::new("g", "fits").dedup_id("1")).is_ok());
    /// let big = "x".repeat(2000);
    /// assert!(matches!(
    ///     q.check_send(&SendMessage::new("g", &big).dedup_id("2")),
    ///     Err(Error::InvalidParameterValue { parameter: "MessageBody", .. })
    /// ));
    /// assert_eq!(q.attributes().approximate_number_of_messages, 0); // nothing was sent
    /// # Ok::<(), shmfifo::Error>(())
    /// ```
    pub fn check_send(&self, msg: &SendMessage<'_>) -> Result<()> {
        let Some(group_id) = msg.group_id else {
            return Err(Error::MissingParameter {
                parameter: "MessageGroupId",
            });
        };
        self.check(group_id, msg)
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
    pub(super) fn check_with(
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
        let mut pieces = Pieces::Plain([&[]; 3]);
        let (parts, attr_len) = framing::pieces(self.inner.dedup, msg, &mut slot, &mut pieces);
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
        inner.live()?;
        self.remember(&out, &sent);
        Ok(self.sent(&sent))
    }

    /// Keeps where `out`'s send found its group for this thread's next send of the id
    /// ([`remember_group`]), where that changed and the id is one the thread sends again (it
    /// came with a hint): once a group, not once a message.
    #[inline(always)]
    pub(super) fn remember(&self, out: &Outgoing<'_>, sent: &send::Sent) {
        let Some(hint) = out.group_hint else { return };
        if let Some(found) = sent.group.filter(|&f| hint != f) {
            remember_group(self.inner.keys, out.hash, found);
        }
    }

    /// [`remember`](Self::remember) for a chain or a pack to one group, `out` one of its
    /// messages' descriptions: the place its first linked message found.
    pub(super) fn remember_chain(&self, out: &Outgoing<'_>, results: &[PResult<send::Sent>]) {
        if let Some(Ok(s)) = results
            .iter()
            .find(|r| matches!(r, Ok(s) if s.group.is_some()))
        {
            self.remember(out, s);
        }
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
    /// the attributes), in size class `class` ([`class_for`](Self::class_for)); `key` is the
    /// group id's keyed hash and last place ([`group_key`]) if the caller has them already.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub(super) fn outgoing<'x>(
        &self,
        class: usize,
        group_id: &'x [u8],
        parts: &'x [&'x [u8]],
        attr_len: usize,
        body_len: usize,
        flags: u8,
        prior_receives: u32,
        key: Option<GroupKey>,
    ) -> Outgoing<'x> {
        let inner = &*self.inner;
        let (source, dedup) = (parts[1], parts[2]);
        let key = key.unwrap_or_else(|| group_key(inner.keys, group_id));
        Outgoing {
            class,
            cursor: next_cursor(&inner.cursor),
            hash: key.hash,
            group_id,
            group_hint: key.found,
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
        let mut pieces = Pieces::Plain([&[]; 3]);
        let (parts, attr_len) = framing::pieces(inner.dedup, msg, &mut slot, &mut pieces);
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
        inner.live()?;
        self.remember(&out, &sent);
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
    pub(super) fn result_of(&self, sent: &send::Sent) -> SendResult {
        SendResult {
            message_id: self.message_id(sent.idx, sent.inc, sent.member),
            sequence_number: (u128::from(sent.seq_hi) << 64) | u128::from(sent.pos),
            duplicate: sent.duplicate,
        }
    }

    pub(super) fn message_id(&self, idx: u32, inc: u32, member: u8) -> MessageId {
        MessageId(message::id(self.inner.nonce, idx, inc, member))
    }
}
