//! Loaned sends: a producer writes a message's body straight into the slot it will
//! be delivered from, so a large message costs no copy on the sending side.
//!
//! A [`Loan`] is a slot claimed the way every send claims one (`CLAIMED(owner)` in its `vis`
//! word) and not linked anywhere: no other participant reads or writes it. Sending it runs the
//! usual send from "slot written" on (dedup reservation, the options written after the body,
//! the group lookup, the link CAS that commits it). Dropping it frees the slot. A process
//! killed while it holds a loan leaves a claimed slot that was never linked: recovery frees it,
//! as it frees a half-made send's.
#![allow(unsafe_code)] // views of a lent slot's bytes in the mapping (each block says why)

use std::fmt;

use super::queue::{fault, Op, Queue};
use super::send::next_cursor;
use super::types::{MessageAttribute, SendMessage, SendResult};
use crate::error::{Error, Result};
use crate::protocol::message::MAX_ID_LEN;
use crate::protocol::send::{self, Loaned};
use crate::protocol::Fault;
use crate::validate;

/// A slot of the queue lent to this process to write a message's body in place
/// ([`Queue::loan`]); [`Loan::send`] sends it, dropping it gives the slot back.
///
/// Its bytes are what the slot held before (the body of an earlier message of this queue),
/// not zeros: write all of them, or [`truncate`](Loan::truncate) to what was written.
pub struct Loan<'q> {
    queue: &'q Queue,
    lent: Loaned,
    class: usize,
    ptr: *mut u8,
    len: usize,
    group: [u8; MAX_ID_LEN],
    group_len: usize,
}

// SAFETY: a loan is a claim of the process's participant (not of a thread) on a slot nobody
// else touches, plus a shared reference to a `Sync` queue: moving it to another thread moves
// the only access to those bytes.
unsafe impl Send for Loan<'_> {}

impl fmt::Debug for Loan<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Loan")
            .field("slot", &self.lent.idx)
            .field("len", &self.len)
            .field("group_id", &self.group_id())
            .finish()
    }
}

/// What a [`Loan`] is sent with besides its body: the dedup id and the attributes (as
/// [`SendMessage`]'s).
#[derive(Debug, Clone, Copy, Default)]
pub struct LoanOptions<'a> {
    /// `MessageDeduplicationId` (S3); `None` with content-based deduplication or none.
    pub dedup_id: Option<&'a str>,
    /// Message attributes (S8), at most 10. They are stored after the body in the same slot;
    /// where they do not fit its size class, the send copies the body once into a larger one.
    pub attributes: &'a [MessageAttribute<'a>],
}

impl<'a> LoanOptions<'a> {
    /// No dedup id, no attributes.
    pub fn new() -> Self {
        Self::default()
    }
    /// Sets the deduplication id.
    pub fn dedup_id(mut self, id: &'a str) -> Self {
        self.dedup_id = Some(id);
        self
    }
    /// Sets the attributes.
    pub fn attributes(mut self, attributes: &'a [MessageAttribute<'a>]) -> Self {
        self.attributes = attributes;
        self
    }
}

/// A [`Loan::send`] that failed: the error, and the loan back, untouched (its bytes as
/// written), to send again or to drop. (Boxed in the `Result`: a loan carries its group id.)
pub struct LoanError<'q> {
    /// Why the send failed.
    pub error: Error,
    /// The loan, still holding its slot.
    pub loan: Loan<'q>,
}

impl fmt::Debug for LoanError<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LoanError")
            .field("error", &self.error)
            .field("loan", &self.loan)
            .finish()
    }
}

impl fmt::Display for LoanError<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.error, f)
    }
}

impl std::error::Error for LoanError<'_> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}

impl From<Box<LoanError<'_>>> for Error {
    /// The error alone (the loan is dropped, which gives its slot back).
    fn from(e: Box<LoanError<'_>>) -> Error {
        e.error
    }
}

impl<'q> Loan<'q> {
    /// The body's bytes, to fill in place.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: `ptr..ptr + len` lies in the slot's payload (checked against its class's
        // capacity by `Queue::loan`) inside the mapping `queue` keeps alive; the slot is
        // claimed by this process and linked nowhere, so no other participant accesses it
        // (a hostile process writing the arena aside: it can change bytes, never the
        // mapping); `&mut self` makes this the only view.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }

    /// The body's bytes as written so far.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: as in `as_mut_slice`; `&self` excludes a mutable view.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    /// The body's length.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the body is empty (never: a loan is at least one byte).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Shortens the body to `len` bytes (a frame shorter than the loan asked for); a longer
    /// `len` than the body's changes nothing. At least one byte stays (a body is never empty).
    pub fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len.max(1));
    }

    /// The group id the loan is for.
    pub fn group_id(&self) -> &str {
        // `Queue::loan` copied a `&str` here.
        std::str::from_utf8(&self.group[..self.group_len]).unwrap_or_default()
    }

    /// Sends the body in place, without a dedup id or attributes (the queue must use
    /// content-based deduplication or none, S4). See [`Loan::send_with`].
    pub fn send(self) -> std::result::Result<SendResult, Box<LoanError<'q>>> {
        self.send_with(&LoanOptions::new())
    }

    /// Sends the body in place with `opts`: checked as [`Queue::send`] checks a message (the
    /// body is text in SQS's character set, S7, unless the queue takes any bytes:
    /// [`crate::BodyMode::Binary`]), then enqueued without copying it. A
    /// duplicate (D1) is accepted and its slot given back. On an error nothing was enqueued
    /// and the loan comes back in the [`LoanError`], its bytes as written.
    pub fn send_with(
        self,
        opts: &LoanOptions<'_>,
    ) -> std::result::Result<SendResult, Box<LoanError<'q>>> {
        let r = self.try_send(opts);
        match r {
            Ok(sent) => {
                // The slot is linked, or was given back: nothing left to drop.
                std::mem::forget(self);
                Ok(sent)
            }
            Err(error) => Err(Box::new(LoanError { error, loan: self })),
        }
    }

    fn try_send(&self, opts: &LoanOptions<'_>) -> Result<SendResult> {
        let msg = self.message(opts)?;
        self.queue.send_lent(self.lent, self.class, &msg)
    }

    /// The message this loan sends with `opts`, its body viewing the slot. On a text queue
    /// the bytes are checked as text here, once, in one pass where they are plain ASCII (the
    /// receiving side checks what it copies again: the arena is shared); a binary queue takes
    /// any bytes.
    fn message<'s>(&'s self, opts: &LoanOptions<'s>) -> Result<SendMessage<'s>> {
        let bytes = self.as_slice();
        let (body, bytes) = if self.queue.inner.binary {
            ("", Some(bytes))
        } else {
            (validate::text(bytes)?, None)
        };
        Ok(SendMessage {
            group_id: Some(self.group_id()),
            dedup_id: opts.dedup_id,
            body,
            bytes,
            attributes: opts.attributes,
            delay_seconds: None,
        })
    }
}

impl Drop for Loan<'_> {
    fn drop(&mut self) {
        self.queue.return_lent(self.lent);
    }
}

impl Queue {
    /// Sends up to 10 loans as one batch, as [`send_batch`](Queue::send_batch) sends
    /// messages (S11–S13): each group's loans go as one chain, in their order, committed whole
    /// or not at all per group, with one lookup, one hint and one doorbell per group; every
    /// body stays in place. One result per loan, in order: `Ok`, or the error with the loan
    /// back untouched. A request-level error (more than 10 loans, over 1 MiB in all, a
    /// missing dedup id where one is needed) fails every loan alike, each given back.
    ///
    /// # Examples
    ///
    /// ```
    /// use shmfifo::{LoanOptions, Queue, QueueConfig, ReceiveOptions};
    ///
    /// let q = Queue::create_anonymous(&QueueConfig::new())?;
    /// let mut loans = Vec::new();
    /// for (i, id) in ["1", "2", "3"].iter().enumerate() {
    ///     let mut loan = q.loan("frames", 6)?;
    ///     loan.as_mut_slice().copy_from_slice(format!("frame{i}").as_bytes());
    ///     loans.push((loan, LoanOptions::new().dedup_id(id)));
    /// }
    /// for r in q.send_loans(loans) {
    ///     assert!(!r?.duplicate);
    /// }
    /// let got = q.receive(&ReceiveOptions::max(10))?;
    /// let bodies: Vec<&str> = got.iter().map(|m| m.body.as_str()).collect();
    /// assert_eq!(bodies, ["frame0", "frame1", "frame2"]);
    /// # Ok::<(), shmfifo::Error>(())
    /// ```
    pub fn send_loans<'q>(
        &'q self,
        loans: Vec<(Loan<'q>, LoanOptions<'_>)>,
    ) -> Vec<std::result::Result<SendResult, Box<LoanError<'q>>>> {
        let n = loans.len();
        let mut done: Vec<Option<Result<SendResult>>> = (0..n).map(|_| None).collect();
        let mut in_place = vec![false; n];
        // The request's own errors, for every loan alike (each gets its own copy).
        let total: usize = loans
            .iter()
            .map(|(l, o)| l.len() + super::framing::attributes_len(o.attributes))
            .sum();
        let needs_id = self.inner.needs_dedup_id();
        let request: Option<fn(usize, usize) -> Error> = if n > 10 {
            Some(|n, _| Error::TooManyEntriesInBatchRequest { entries: n })
        } else if total > 1_048_576 {
            Some(|_, bytes| Error::BatchRequestTooLong { bytes })
        } else if needs_id && loans.iter().any(|(_, o)| o.dedup_id.is_none()) {
            Some(|_, _| super::send::missing_dedup_id())
        } else {
            None
        };
        if let Some(e) = request {
            for d in done.iter_mut() {
                *d = Some(Err(e(n, total)));
            }
        } else {
            let mut entries = Vec::with_capacity(n);
            let mut lent = [None; 10];
            let mut at = Vec::with_capacity(n);
            for (k, (loan, opts)) in loans.iter().enumerate() {
                // The slot is claimed by the handle that lent it (its participant).
                if !std::sync::Arc::ptr_eq(&loan.queue.inner, &self.inner) {
                    done[k] = Some(Err(Error::invalid(
                        "Loan",
                        "the loan was made by another queue handle (lend and send through one)",
                    )));
                    continue;
                }
                match loan.message(opts) {
                    Ok(m) => {
                        lent[entries.len()] = Some((loan.lent, loan.class));
                        entries.push(m);
                        at.push(k);
                    }
                    Err(e) => done[k] = Some(Err(e)),
                }
            }
            if !entries.is_empty() {
                let mut results: [Result<SendResult>; 10] =
                    std::array::from_fn(|_| super::send::unsent());
                let refs: Vec<&SendMessage<'_>> = entries.iter().collect();
                match self.send_batch_lent(&refs, &lent, &mut results) {
                    Ok(placed) => {
                        for (j, &k) in at.iter().enumerate() {
                            done[k] =
                                Some(std::mem::replace(&mut results[j], super::send::unsent()));
                            in_place[k] = placed[j];
                        }
                    }
                    Err(e) => {
                        // Not one of the request errors checked above (a damaged arena): the
                        // first loan gets it, the others say so.
                        let mut e = Some(e);
                        for &k in &at {
                            done[k] = Some(Err(e.take().unwrap_or(Error::Corrupted {
                                what: "the batch failed: see its first entry's error",
                            })));
                        }
                    }
                }
            }
        }
        loans
            .into_iter()
            .zip(done)
            .zip(in_place)
            .map(|(((loan, _), r), placed)| {
                match r.unwrap_or(Err(Error::Corrupted {
                    what: "a batch entry was neither sent nor refused",
                })) {
                    Ok(sent) => {
                        if placed && !sent.duplicate {
                            // Linked in place: nothing left to give back.
                            std::mem::forget(loan);
                        }
                        // Otherwise (a duplicate, D1, or a body copied into a larger class)
                        // dropping the loan gives its slot back.
                        Ok(sent)
                    }
                    Err(error) => Err(Box::new(LoanError { error, loan })),
                }
            })
            .collect()
    }
}

impl Queue {
    /// Lends a slot of size class `class` for `need` bytes (a loan's, a loaned batch's):
    /// claimed as a send claims one, after reclaiming what is due and then growing the class if
    /// it is full; this handle's cursor moved past it. Returns the loan and the slot's payload
    /// (`cap >= need` bytes, mapped as long as the queue).
    pub(super) fn lend(&self, class: usize, need: usize) -> Result<(Loaned, *mut u8)> {
        let inner = &*self.inner;
        let a = self.arena();
        let cursor = next_cursor(&inner.cursor);
        let lent = match send::loan(a, &Op::new(inner), inner.me, class, cursor) {
            Err(Fault::ClassFull(_)) => {
                // Reclaim what is due first, then grow the class if that freed nothing.
                self.make_room();
                send::loan(a, &Op::growing(inner), inner.me, class, cursor)
            }
            r => r,
        }
        .map_err(|f| fault(f, inner))?;
        let (ptr, slot) = match (a.class_of(lent.idx), a.locate(lent.idx)) {
            (Ok((cl, _, ptr)), Ok((_, slot))) if cl.cap as usize >= need => (ptr, slot),
            (Ok(_), Ok(_)) => {
                self.return_lent(lent);
                return Err(Error::Corrupted {
                    what: "a lent slot is smaller than its class",
                });
            }
            (Err(f), _) | (_, Err(f)) => {
                self.return_lent(lent);
                return Err(fault(f, inner));
            }
        };
        inner.cursor_past(slot as u64);
        Ok((lent, ptr))
    }

    /// Lends a slot for a message of `len` bytes to `group_id`, to write its body in place
    /// and [`send`](Loan::send) it without a copy. The slot comes from the
    /// smallest size class that holds `len` bytes; dropping the loan gives it back. A process
    /// that dies holding a loan loses nothing: recovery frees the slot.
    ///
    /// Errors: `len` of 0 or over [`maximum_message_size`](Queue::maximum_message_size), an
    /// invalid group id (S2): `InvalidParameterValue`; no free slot in the class and no room to
    /// grow it (the size limit reached): [`Error::SizeClassFull`]; the file system refused the
    /// growth: [`Error::NoSpace`].
    ///
    /// # Examples
    ///
    /// ```
    /// use shmfifo::{LoanOptions, Queue, QueueConfig, ReceiveOptions};
    ///
    /// let q = Queue::create_anonymous(&QueueConfig::new())?;
    /// let mut loan = q.loan("prices", 5)?;
    /// loan.as_mut_slice().copy_from_slice(b"hello");
    /// let sent = loan.send_with(&LoanOptions::new().dedup_id("1"))?;
    ///
    /// let got = q.receive(&ReceiveOptions::max(1))?;
    /// assert_eq!(got[0].body, "hello");
    /// assert_eq!(got[0].message_id, sent.message_id);
    ///
    /// // A loan dropped unsent gives its slot back.
    /// drop(q.loan("prices", 100)?);
    /// # Ok::<(), shmfifo::Error>(())
    /// ```
    pub fn loan(&self, group_id: &str, len: usize) -> Result<Loan<'_>> {
        validate::id("MessageGroupId", group_id)?;
        // A queue found cut (`sys::guard`) lends nothing (a loan's send checks again).
        self.inner.live()?;
        if len == 0 {
            return Err(Error::invalid(
                "MessageBody",
                "The message body must be at least 1 character long.",
            ));
        }
        let max = self.maximum_message_size() as usize;
        let inner = &*self.inner;
        let class = inner
            .caps
            .iter()
            .position(|&(cap, _)| cap as usize >= len)
            .filter(|_| len <= max)
            .ok_or_else(|| {
                Error::invalid(
                    "MessageBody",
                    format!(
                        "One or more parameters cannot be validated. Reason: Message must be shorter than {max} bytes."
                    ),
                )
            })?;
        let (lent, ptr) = self.lend(class, len)?;
        let mut group = [0u8; MAX_ID_LEN];
        group[..group_id.len()].copy_from_slice(group_id.as_bytes());
        Ok(Loan {
            queue: self,
            lent,
            class,
            // `class_of` found the slot's payload (base file or a mapped segment), `cap >= len`
            // bytes that stay mapped as long as the queue.
            ptr,
            len,
            group,
            group_len: group_id.len(),
        })
    }
}
