//! Borrowed receives: a message's body read in place in the arena instead of
//! copied out.
//!
//! A receive takes messages under their group's claim as always (the same protocol, the same
//! in-flight exclusion, dead-letter moves and counts); a borrowing receive copies the small
//! parts (ids, attributes) and keeps, for the body, its place in the mapping. A message's slot
//! stays put from send to delete, so the body stays readable there while the message is in
//! flight for this receive. What can free or reuse the slot meanwhile is what can end a
//! receipt handle: the visibility timeout passing and another receive taking the message (then
//! deleting it), a purge, retention, a dead-letter move. Each of them changes the slot's epoch
//! or incarnation, which [`BorrowedMessage::verify`] checks after a read
//! (`protocol::handle::still_taken`: a sequence lock with `pool::alloc`'s Release fence, SYNC
//! POINT(peek-seqlock)).
#![allow(unsafe_code)] // views of the mapping (each block says why)

use std::fmt;

use super::queue::fault;
use super::queue::Queue;
use super::receive::Cancel;
use super::types::{Message, ReceiptHandle, ReceiveBuffer, ReceiveOptions};
use crate::error::{Error, Result};
use crate::protocol::handle;
use crate::protocol::receive::Taken;

/// The most messages one receive takes (R1).
const MAX_MESSAGES: usize = 10;

/// Where a borrowed body lies in the mapping (addresses as integers: plain data in a
/// [`ReceiveBuffer`]).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct View {
    body: usize,
    len: usize,
}

impl View {
    /// The body of taken message `t` (first in its payload, layout 10), `len` bytes.
    pub(super) fn of(t: &Taken<'_>, len: usize) -> View {
        View {
            body: t.payload.as_ptr() as usize,
            len: len.min(t.payload.len()),
        }
    }
}

/// A received message whose body is read in place in the queue's memory
/// ([`Queue::receive_borrowed`]): no copy of the body is made.
///
/// The body stays this message's while the message is in flight for this receive. Read it,
/// then call [`verify`](BorrowedMessage::verify): `Ok` proves that nothing done through the
/// queue's protocol (a delete, a purge, retention, a dead-letter move, another receive after
/// the visibility timeout) freed or re-received the slot before the check, so the bytes read
/// were this message's. After an `Err`, what was read may belong to another message: discard
/// it.
///
/// **A hostile process** that can write the queue's file can change the body's bytes at any
/// time while they are read, and restore the words `verify` checks: a reader may then see any
/// bytes (torn, not text, another message's) and `verify` cannot tell. It can never make the
/// reader touch memory outside the queue's mapping (the view's bounds were checked when it was
/// taken), so the worst it causes is wrong bytes, not a crash. The copying
/// [`Queue::receive`] checks the copy it returns as text; a borrowed body is checked by
/// [`body_str`](BorrowedMessage::body_str) when it is read.
pub struct BorrowedMessage<'q> {
    queue: &'q Queue,
    meta: Message,
    view: View,
}

impl fmt::Debug for BorrowedMessage<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BorrowedMessage")
            .field("message_id", &self.meta.message_id)
            .field("group_id", &self.meta.group_id)
            .field("body_len", &self.view.len)
            .finish()
    }
}

impl<'q> BorrowedMessage<'q> {
    /// A view of this message as [`BorrowedBatch`] gives one.
    fn as_ref(&self) -> BorrowedRef<'_> {
        BorrowedRef {
            queue: self.queue,
            meta: &self.meta,
            view: self.view,
        }
    }

    /// The body's bytes, in place (see the type's documentation for what they are worth
    /// without [`verify`](BorrowedMessage::verify)).
    pub fn body(&self) -> &[u8] {
        self.as_ref().body()
    }

    /// The body as text (S7: SQS bodies are text), checked as UTF-8 where it lies, then
    /// verified (see [`verify`](BorrowedMessage::verify)).
    pub fn body_str(&self) -> Result<&str> {
        self.as_ref().body_str()
    }

    /// Everything but the body (copied: ids, attributes, counts, timestamps); its `body` field
    /// is empty.
    pub fn message(&self) -> &Message {
        &self.meta
    }

    /// The receipt handle of this receive.
    pub fn receipt_handle(&self) -> &ReceiptHandle {
        &self.meta.receipt_handle
    }

    /// Whether the slot still holds this message as this receive left it: its incarnation
    /// and epoch unchanged and the message neither deleted nor freed. Call it after reading
    /// [`body`](BorrowedMessage::body): `Ok` proves the bytes read were this message's (see
    /// the type's documentation for a hostile writer). `Err(ReceiptHandleExpired)` otherwise.
    pub fn verify(&self) -> Result<()> {
        self.as_ref().verify()
    }

    /// The message without its body, and where the body lies in the queue's mapping (for a
    /// foreign-function layer that hands the view on: it stays readable while the queue is
    /// open and the message in flight; check it with [`Queue::verify`]).
    pub fn into_raw_parts(self) -> (Message, *const u8, usize) {
        (self.meta, self.view.body as *const u8, self.view.len)
    }

    /// Copies the message out (verified after the copy, as [`Queue::receive`] would return
    /// it: on a binary queue its bytes in `body_bytes`, and `body` their text where they are
    /// UTF-8, empty otherwise).
    pub fn to_message(&self) -> Result<Message> {
        let mut m = self.meta.clone();
        if self.queue.body_mode() == crate::BodyMode::Binary {
            m.body_bytes = self.body().to_vec();
            self.verify()?;
            m.body = std::str::from_utf8(&m.body_bytes)
                .map(str::to_owned)
                .unwrap_or_default();
        } else {
            m.body = self.body_str()?.to_owned();
        }
        Ok(m)
    }

    /// Deletes the message (as [`Queue::delete`] with its receipt handle), ending the borrow.
    pub fn delete(self) -> Result<()> {
        self.queue.delete(&self.meta.receipt_handle)
    }
}

/// The messages of one borrowing receive into a reusable buffer
/// ([`Queue::receive_borrowed_into`]): each a [`BorrowedRef`], its body in place, its other
/// parts in the buffer. It borrows the buffer: the next receive into it ends the batch.
#[derive(Debug)]
pub struct BorrowedBatch<'q, 'b> {
    queue: &'q Queue,
    buf: &'b ReceiveBuffer,
}

impl<'q, 'b> BorrowedBatch<'q, 'b> {
    /// The number of messages received.
    pub fn len(&self) -> usize {
        self.buf.len
    }

    /// Whether nothing was received.
    pub fn is_empty(&self) -> bool {
        self.buf.len == 0
    }

    /// Message `k` (`None` past the last).
    pub fn get(&self, k: usize) -> Option<BorrowedRef<'_>> {
        Some(BorrowedRef {
            queue: self.queue,
            meta: self.buf.messages().get(k)?,
            view: *self.buf.views.get(k)?,
        })
    }

    /// The messages, in order.
    pub fn iter(&self) -> impl Iterator<Item = BorrowedRef<'_>> + '_ {
        (0..self.len()).filter_map(|k| self.get(k))
    }

    /// [`BorrowedRef::verify`] of every message of the batch at once: call it after reading
    /// their bodies. `Ok` proves every body read was its message's; otherwise
    /// `Err(ReceiptHandleExpired)` names the first message that is not as this receive left it
    /// (check the others one by one with [`BorrowedRef::verify`]). The members of one pack (a
    /// batch sent to one group) share their slot's checks: a batch of ten of them costs about
    /// what two single checks do.
    ///
    /// # Examples
    ///
    /// ```
    /// use shmfifo::{Queue, QueueConfig, ReceiveBuffer, ReceiveOptions, SendMessage};
    ///
    /// let q = Queue::create_anonymous(&QueueConfig::new())?;
    /// let msgs: Vec<_> = (0..3).map(|k| SendMessage::new("g", "frame").dedup_id(["a", "b", "c"][k])).collect();
    /// q.send_messages(&msgs)?;
    /// let mut buf = ReceiveBuffer::new();
    /// let got = q.receive_borrowed_into(&ReceiveOptions::max(10), &mut buf)?;
    /// let total: usize = got.iter().map(|m| m.body().len()).sum();
    /// got.verify()?; // every byte read was its message's
    /// assert_eq!(total, 15);
    /// # Ok::<(), shmfifo::Error>(())
    /// ```
    pub fn verify(&self) -> Result<()> {
        let messages = self.buf.messages();
        // A receive takes at most 10 messages (R1's `MaxNumberOfMessages`).
        debug_assert!(messages.len() <= MAX_MESSAGES);
        let mut slots = [crate::protocol::handle::Handle::default(); MAX_MESSAGES];
        let mut n = 0;
        for (s, m) in slots.iter_mut().zip(messages) {
            // Another queue's handle cannot come from this queue's receive; checked as
            // `Queue::verify` checks it all the same.
            self.queue.same_queue(&m.receipt_handle)?;
            *s = m.receipt_handle.slot();
            n += 1;
        }
        match handle::first_not_taken(self.queue.arena(), &slots[..n]) {
            // A file cut under the reads (`sys::guard`): they may have been zeros.
            Ok(None) => self.queue.inner.live(),
            Ok(Some(k)) => Err(Error::ReceiptHandleExpired {
                handle: messages[k].receipt_handle.to_string(),
            }),
            Err(f) => Err(fault(f, &self.queue.inner)),
        }
    }
}

/// One message of a [`BorrowedBatch`]: [`BorrowedMessage`]'s view, its parts in the buffer
/// the receive filled. What its body is worth, and what [`verify`](BorrowedRef::verify)
/// proves, is as [`BorrowedMessage`] says.
#[derive(Debug, Clone, Copy)]
pub struct BorrowedRef<'a> {
    queue: &'a Queue,
    meta: &'a Message,
    view: View,
}

impl<'a> BorrowedRef<'a> {
    /// The body's bytes, in place (see [`BorrowedMessage`] for what they are worth without
    /// [`verify`](BorrowedRef::verify)).
    pub fn body(&self) -> &'a [u8] {
        // SAFETY: `view.body .. + len` was the taken message's payload slice (bounds-checked
        // by the protocol against its size class) inside the mapping, which `self.queue`
        // keeps mapped for `'a`. Other processes may write these bytes (a reuse after the
        // message left our hands, or a hostile writer): `BorrowedMessage`'s documentation
        // says what a reader may then see.
        unsafe { std::slice::from_raw_parts(self.view.body as *const u8, self.view.len) }
    }

    /// The body as text (S7: SQS bodies are text), checked as UTF-8 where it lies, then
    /// verified (see [`verify`](BorrowedRef::verify)).
    pub fn body_str(&self) -> Result<&'a str> {
        let s = std::str::from_utf8(self.body()).map_err(|e| Error::InvalidMessageContents {
            reason: format!(
                "the borrowed body is not UTF-8 (invalid byte at offset {})",
                e.valid_up_to()
            ),
        });
        self.verify()?;
        s
    }

    /// Everything but the body (ids, attributes, counts, timestamps); its `body` field is
    /// empty.
    pub fn message(&self) -> &'a Message {
        self.meta
    }

    /// The receipt handle of this receive.
    pub fn receipt_handle(&self) -> &'a ReceiptHandle {
        &self.meta.receipt_handle
    }

    /// Whether the slot still holds this message as this receive left it (see
    /// [`BorrowedMessage::verify`]).
    pub fn verify(&self) -> Result<()> {
        self.queue.verify(&self.meta.receipt_handle)
    }
}

impl Queue {
    /// Whether the message `handle` names is still in its slot as that receive left it: not
    /// deleted, freed, purged, expired by retention, moved or received again since (its slot's
    /// incarnation and epoch unchanged). A reader of a borrowed body calls it after reading
    /// (see [`BorrowedMessage::verify`]); `Err(ReceiptHandleExpired)` otherwise,
    /// `ReceiptHandleIsInvalid` for a handle of another queue.
    ///
    /// # Examples
    ///
    /// ```
    /// use shmfifo::{Queue, QueueConfig, ReceiveOptions, SendMessage};
    ///
    /// let q = Queue::create_anonymous(&QueueConfig::new())?;
    /// q.send(&SendMessage::new("g", "x").dedup_id("1"))?;
    /// let got = q.receive(&ReceiveOptions::max(1))?;
    /// q.verify(&got[0].receipt_handle)?;
    /// q.delete(&got[0].receipt_handle)?;
    /// assert!(q.verify(&got[0].receipt_handle).is_err());
    /// # Ok::<(), shmfifo::Error>(())
    /// ```
    pub fn verify(&self, handle: &ReceiptHandle) -> Result<()> {
        self.same_queue(handle)?;
        let h = handle.slot();
        match handle::still_taken(self.arena(), h) {
            // A file cut under the reads (`sys::guard`): they may have been zeros.
            Ok(true) => self.inner.live(),
            Ok(false) => Err(Error::ReceiptHandleExpired {
                handle: handle.to_string(),
            }),
            Err(f) => Err(fault(f, &self.inner)),
        }
    }

    /// `ReceiptHandleIsInvalid` for a handle of another queue (another nonce).
    fn same_queue(&self, handle: &ReceiptHandle) -> Result<()> {
        if handle.nonce != self.inner.nonce {
            return Err(Error::ReceiptHandleIsInvalid {
                handle: handle.to_string(),
            });
        }
        Ok(())
    }
}

impl Queue {
    /// Receives like [`receive`](Queue::receive) (R1–R10: the same in-flight exclusion,
    /// counts, waits and dead-letter moves), but hands each body out in place instead of
    /// copying it: a large message costs one read of its bytes where the reader reads them.
    /// Read a body, then [`verify`](BorrowedMessage::verify) it; delete through
    /// the view.
    ///
    /// # Examples
    ///
    /// ```
    /// use shmfifo::{Queue, QueueConfig, ReceiveOptions, SendMessage};
    ///
    /// let q = Queue::create_anonymous(&QueueConfig::new())?;
    /// q.send(&SendMessage::new("g", "a large frame").dedup_id("1"))?;
    /// let got = q.receive_borrowed(&ReceiveOptions::max(10))?;
    /// assert_eq!(got[0].body(), b"a large frame");
    /// got[0].verify()?; // the bytes read were this message's
    /// assert_eq!(got[0].message().receive_count, 1);
    /// for m in got {
    ///     m.delete()?;
    /// }
    /// # Ok::<(), shmfifo::Error>(())
    /// ```
    pub fn receive_borrowed(&self, opts: &ReceiveOptions) -> Result<Vec<BorrowedMessage<'_>>> {
        self.borrowed(opts, None)
    }

    /// [`receive_borrowed`](Queue::receive_borrowed) with a `ReceiveRequestAttemptId` (R11),
    /// as [`receive_with_attempt_id`](Queue::receive_with_attempt_id): a retry with the same
    /// id within 5 minutes hands out the same messages (the same receipt handles, bodies in
    /// place) if none of them changed since.
    ///
    /// # Examples
    ///
    /// ```
    /// use shmfifo::{Queue, QueueConfig, ReceiveOptions, SendMessage};
    ///
    /// let q = Queue::create_anonymous(&QueueConfig::new())?;
    /// q.send(&SendMessage::new("g", "frame").dedup_id("1"))?;
    /// let opts = ReceiveOptions::max(10);
    /// let first = q.receive_borrowed_with_attempt_id(&opts, "attempt-1")?;
    /// // The answer was lost: the retry gets the same message, in place.
    /// let retry = q.receive_borrowed_with_attempt_id(&opts, "attempt-1")?;
    /// assert_eq!(retry[0].receipt_handle(), first[0].receipt_handle());
    /// assert_eq!(retry[0].body(), b"frame");
    /// retry[0].verify()?;
    /// # Ok::<(), shmfifo::Error>(())
    /// ```
    pub fn receive_borrowed_with_attempt_id(
        &self,
        opts: &ReceiveOptions,
        attempt_id: &str,
    ) -> Result<Vec<BorrowedMessage<'_>>> {
        self.borrowed(opts, Some(attempt_id))
    }

    /// [`receive_borrowed`](Queue::receive_borrowed) into a reusable buffer, as
    /// [`receive_into`](Queue::receive_into) is [`receive`](Queue::receive) into one: each
    /// body left in place, the rest in `buf`, whose allocations a steady stream of receives
    /// reuses (a fresh [`Vec`] of [`BorrowedMessage`]s a call costs some hundreds of
    /// instructions a message in allocations). The batch borrows `buf` until the next
    /// receive into it; read each body, [`verify`](BorrowedRef::verify) it, then delete the
    /// batch (one [`delete_handles`](Queue::delete_handles): each group cleaned up once).
    ///
    /// # Examples
    ///
    /// ```
    /// use shmfifo::{Queue, QueueConfig, ReceiveBuffer, ReceiveOptions, SendMessage};
    ///
    /// let q = Queue::create_anonymous(&QueueConfig::new())?;
    /// let mut buf = ReceiveBuffer::new();
    /// for round in 0..3 {
    ///     q.send(&SendMessage::new("g", &format!("frame {round}")).dedup_id(&round.to_string()))?;
    ///     let got = q.receive_borrowed_into(&ReceiveOptions::max(10), &mut buf)?;
    ///     assert_eq!(got.len(), 1);
    ///     let m = got.get(0).unwrap();
    ///     assert_eq!(m.body(), format!("frame {round}").as_bytes());
    ///     m.verify()?; // the bytes read were this message's
    ///     let handles: Vec<_> = got.iter().map(|m| *m.receipt_handle()).collect();
    ///     for r in q.delete_handles(&handles)? {
    ///         r?;
    ///     }
    /// }
    /// # Ok::<(), shmfifo::Error>(())
    /// ```
    pub fn receive_borrowed_into<'q, 'b>(
        &'q self,
        opts: &ReceiveOptions,
        buf: &'b mut ReceiveBuffer,
    ) -> Result<BorrowedBatch<'q, 'b>> {
        buf.borrow = true;
        self.receive_into_as(opts, buf)?;
        Ok(BorrowedBatch { queue: self, buf })
    }

    /// [`receive_borrowed_with_attempt_id`](Queue::receive_borrowed_with_attempt_id) into a
    /// reusable buffer, as [`receive_borrowed_into`](Queue::receive_borrowed_into) is
    /// [`receive_borrowed`](Queue::receive_borrowed) into one (R11: a retry with the same id
    /// within 5 minutes hands out the same messages, bodies in place, if none of them changed
    /// since).
    ///
    /// # Examples
    ///
    /// ```
    /// use shmfifo::{Queue, QueueConfig, ReceiveBuffer, ReceiveOptions, SendMessage};
    ///
    /// let q = Queue::create_anonymous(&QueueConfig::new())?;
    /// q.send(&SendMessage::new("g", "frame").dedup_id("1"))?;
    /// let opts = ReceiveOptions::max(10);
    /// let mut buf = ReceiveBuffer::new();
    /// let first = *q
    ///     .receive_borrowed_with_attempt_id_into(&opts, "attempt-1", &mut buf)?
    ///     .get(0)
    ///     .unwrap()
    ///     .receipt_handle();
    /// // The answer was lost: the retry gets the same message, in place.
    /// let retry = q.receive_borrowed_with_attempt_id_into(&opts, "attempt-1", &mut buf)?;
    /// let m = retry.get(0).unwrap();
    /// assert_eq!(*m.receipt_handle(), first);
    /// assert_eq!(m.body(), b"frame");
    /// m.verify()?;
    /// # Ok::<(), shmfifo::Error>(())
    /// ```
    pub fn receive_borrowed_with_attempt_id_into<'q, 'b>(
        &'q self,
        opts: &ReceiveOptions,
        attempt_id: &str,
        buf: &'b mut ReceiveBuffer,
    ) -> Result<BorrowedBatch<'q, 'b>> {
        buf.borrow = true;
        self.receive_with_attempt_as(opts, attempt_id, buf)?;
        Ok(BorrowedBatch { queue: self, buf })
    }

    /// [`receive_borrowed_into`](Queue::receive_borrowed_into) whose long poll another
    /// thread, or a signal handler, can end, as
    /// [`receive_cancellable_into`](Queue::receive_cancellable_into) is
    /// [`receive_into`](Queue::receive_into)'s (with `attempt_id`, a retry as
    /// [`receive_borrowed_with_attempt_id_into`](Queue::receive_borrowed_with_attempt_id_into)
    /// makes it): the wait ends, with nothing received, once `cancel` says so, looked at every
    /// [`CANCEL_LOOK`](crate::CANCEL_LOOK) at least.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::atomic::{AtomicBool, Ordering};
    /// use std::time::{Duration, Instant};
    /// use shmfifo::{Queue, QueueConfig, ReceiveBuffer, ReceiveOptions, SendMessage};
    ///
    /// let q = Queue::create_anonymous(&QueueConfig::new())?;
    /// let stop = AtomicBool::new(false);
    /// let mut buf = ReceiveBuffer::new();
    /// let opts = ReceiveOptions::max(10).wait(Duration::from_secs(20));
    /// q.send(&SendMessage::new("g", "frame").dedup_id("1"))?;
    /// let got = q.receive_borrowed_cancellable_into(&opts, None, &stop, &mut buf)?;
    /// assert_eq!(got.get(0).unwrap().body(), b"frame");
    /// // Nothing more: the 20-second long poll ends when the flag is set (say, on SIGTERM).
    /// let start = Instant::now();
    /// std::thread::scope(|s| {
    ///     s.spawn(|| {
    ///         std::thread::sleep(Duration::from_millis(50));
    ///         stop.store(true, Ordering::Relaxed);
    ///     });
    ///     let got = q.receive_borrowed_cancellable_into(&opts, None, &stop, &mut buf)?;
    ///     assert_eq!(got.len(), 0);
    ///     Ok::<(), shmfifo::Error>(())
    /// })?;
    /// assert!(start.elapsed() < Duration::from_secs(10));
    /// # Ok::<(), shmfifo::Error>(())
    /// ```
    pub fn receive_borrowed_cancellable_into<'q, 'b>(
        &'q self,
        opts: &ReceiveOptions,
        attempt_id: Option<&str>,
        cancel: &dyn Cancel,
        buf: &'b mut ReceiveBuffer,
    ) -> Result<BorrowedBatch<'q, 'b>> {
        buf.borrow = true;
        self.receive_cancellable_as(opts, attempt_id, cancel, buf)?;
        Ok(BorrowedBatch { queue: self, buf })
    }

    fn borrowed(
        &self,
        opts: &ReceiveOptions,
        attempt_id: Option<&str>,
    ) -> Result<Vec<BorrowedMessage<'_>>> {
        let mut buf = ReceiveBuffer::default();
        let n = match attempt_id {
            None => self.receive_borrowed_into(opts, &mut buf)?.len(),
            Some(id) => self
                .receive_borrowed_with_attempt_id_into(opts, id, &mut buf)?
                .len(),
        };
        buf.msgs.truncate(n);
        Ok(buf
            .msgs
            .into_iter()
            .zip(buf.views)
            .map(|(meta, view)| BorrowedMessage {
                queue: self,
                meta,
                view,
            })
            .collect())
    }
}
