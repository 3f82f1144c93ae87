//! Operations on receipt handles (delete, change visibility, and their batches), purge and
//! recovery.

use std::time::Duration;

use super::queue::{fault, ms, Op, Queue};
use super::types::*;
use super::views::*;
use crate::config::MAX_VISIBILITY_TIMEOUT;
use crate::error::{Error, Result};
use crate::protocol::group::Patience;
use crate::protocol::handle::{self, Handle};
use crate::protocol::{quarantine, recovery, Fault};
use crate::validate;

impl Queue {
    // Always inlined: callgrind, 26 instructions less a delete (by `delete` or in a batch).
    #[inline(always)]
    pub(super) fn handle(&self, h: &ReceiptHandle) -> Result<Handle> {
        if !self.names_a_slot(h) {
            return Err(invalid_handle(h));
        }
        Ok(h.slot())
    }

    /// Whether `h` is this queue's (its nonce) and names one of its slots.
    #[inline]
    fn names_a_slot(&self, h: &ReceiptHandle) -> bool {
        h.nonce == self.inner.nonce && self.inner.view.is_slot(h.idx)
    }

    pub(super) fn handle_fault(&self, f: Fault, h: &ReceiptHandle) -> Error {
        match f {
            _ if self.inner.is_cut() => self.inner.cut_error(),
            Fault::Expired => Error::ReceiptHandleExpired {
                handle: h.to_string(),
            },
            f => fault(f, &self.inner),
        }
    }

    /// Deletes the message received with `handle` (H1–H5).
    ///
    /// # Examples
    ///
    /// ```
    /// use shmfifo::{Error, Queue, QueueConfig, ReceiveOptions, SendMessage};
    ///
    /// let q = Queue::create_anonymous(&QueueConfig::new())?;
    /// q.send(&SendMessage::new("g", "done soon").dedup_id("1"))?;
    /// let m = q.receive(&ReceiveOptions::default())?.remove(0);
    /// q.delete(&m.receipt_handle)?;
    /// // The handle is spent: a second delete fails (H2).
    /// assert!(matches!(q.delete(&m.receipt_handle), Err(Error::ReceiptHandleExpired { .. })));
    /// assert!(q.peek(10)?.is_empty());
    /// # Ok::<(), shmfifo::Error>(())
    /// ```
    pub fn delete(&self, handle: &ReceiptHandle) -> Result<()> {
        let h = self.handle(handle)?;
        let inner = &*self.inner;
        handle::delete(self.arena(), &Op::new(inner), inner.me, h)
            .map_err(|f| self.handle_fault(f, handle))?;
        inner.live()
    }

    /// Deletes by the text form of a receipt handle.
    ///
    /// # Examples
    ///
    /// ```
    /// use shmfifo::{Error, Queue, QueueConfig, ReceiveOptions, SendMessage};
    ///
    /// let q = Queue::create_anonymous(&QueueConfig::new())?;
    /// q.send(&SendMessage::new("g", "done soon").dedup_id("1"))?;
    /// let m = q.receive(&ReceiveOptions::default())?.remove(0);
    /// // The text form can travel to another process, which deletes with it.
    /// let text = m.receipt_handle.to_string();
    /// q.delete_str(&text)?;
    /// assert!(matches!(q.delete_str("not-a-handle"), Err(Error::ReceiptHandleIsInvalid { .. })));
    /// # Ok::<(), shmfifo::Error>(())
    /// ```
    pub fn delete_str(&self, handle: &str) -> Result<()> {
        self.delete(&handle.parse()?)
    }

    /// Deletes up to 10 messages by handle text (H8).
    ///
    /// # Examples
    ///
    /// ```
    /// use shmfifo::{BatchEntry, Error, Queue, QueueConfig, ReceiveOptions, SendMessage};
    ///
    /// let q = Queue::create_anonymous(&QueueConfig::new())?;
    /// q.send(&SendMessage::new("g", "a").dedup_id("1"))?;
    /// q.send(&SendMessage::new("g", "b").dedup_id("2"))?;
    /// let got = q.receive(&ReceiveOptions::max(10))?;
    /// let handles: Vec<String> = got.iter().map(|m| m.receipt_handle.to_string()).collect();
    /// let results = q.delete_batch(&[
    ///     BatchEntry { id: "a", entry: handles[0].as_str() },
    ///     BatchEntry { id: "b", entry: handles[1].as_str() },
    ///     BatchEntry { id: "bad", entry: "not-a-handle" },
    /// ])?;
    /// assert!(results[0].result.is_ok() && results[1].result.is_ok());
    /// assert!(matches!(results[2].result, Err(Error::ReceiptHandleIsInvalid { .. })));
    /// assert_eq!(q.attributes().approximate_number_of_messages_not_visible, 0);
    /// # Ok::<(), shmfifo::Error>(())
    /// ```
    pub fn delete_batch(&self, entries: &[BatchEntry<'_, &str>]) -> Result<Vec<BatchResult<()>>> {
        validate::batch_ids(entries.iter().map(|e| e.id))?;
        // Each handle parsed alone (a text that is no handle is refused by itself); the rest
        // deleted together, each group cleaned up once, on the stack (at most 10).
        let mut parsed: [Option<ReceiptHandle>; 10] = [None; 10];
        let mut refused: [Option<Error>; 10] = std::array::from_fn(|_| None);
        for (k, e) in entries.iter().enumerate() {
            match e.entry.parse::<ReceiptHandle>() {
                Ok(h) => parsed[k] = Some(h),
                Err(err) => refused[k] = Some(err),
            }
        }
        let refs: [Option<&ReceiptHandle>; 10] = std::array::from_fn(|k| parsed[k].as_ref());
        let mut results: [Option<Result<()>>; 10] = std::array::from_fn(|_| None);
        self.delete_checked(&refs[..entries.len()], |k, r| results[k] = Some(r))?;
        for (r, e) in results.iter_mut().zip(refused) {
            if let Some(e) = e {
                *r = Some(Err(e));
            }
        }
        Ok(batch_results(
            entries.iter().map(|e| e.id),
            results,
            "a batch entry was neither deleted nor refused",
        ))
    }

    /// Deletes the messages of several typed receipt handles at once (H1–H5 each): the form
    /// of [`delete_batch`](Queue::delete_batch) for a program that holds [`ReceiptHandle`]s
    /// (from [`ReceiveBuffer::messages`] or [`Message::receipt_handle`]), without batch entry
    /// ids, text handles or the limit of 10. Each handle is marked deleted on its own, then
    /// each group concerned is cleaned up once, not once per message. Returns one
    /// result per handle, in order; `Err` only for a fault of the queue itself.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// use shmfifo::{Error, Queue, QueueConfig, ReceiveBuffer, ReceiveOptions, SendMessage};
    ///
    /// let q = Queue::create_anonymous(&QueueConfig::new())?;
    /// for i in 0..3 {
    ///     q.send(&SendMessage::new("g", "m").dedup_id(&i.to_string()))?;
    /// }
    /// let mut buf = ReceiveBuffer::new();
    /// q.receive_into(&ReceiveOptions::max(10).wait(Duration::ZERO), &mut buf)?;
    /// let handles: Vec<_> = buf.messages().iter().map(|m| m.receipt_handle).collect();
    /// assert!(q.delete_handles(&handles)?.iter().all(|r| r.is_ok()));
    /// // Spent handles are refused one by one (H2).
    /// let again = q.delete_handles(&handles[..1])?;
    /// assert!(matches!(again[0], Err(Error::ReceiptHandleExpired { .. })));
    /// assert_eq!(q.attributes().approximate_number_of_messages_not_visible, 0);
    /// # Ok::<(), shmfifo::Error>(())
    /// ```
    pub fn delete_handles(&self, handles: &[ReceiptHandle]) -> Result<Vec<Result<()>>> {
        let mut results: Vec<Result<()>> = Vec::with_capacity(handles.len());
        for chunk in handles.chunks(10) {
            let refs: [Option<&ReceiptHandle>; 10] = std::array::from_fn(|k| chunk.get(k));
            // Every entry is `Some`: one result each, in order, straight into the vector.
            self.delete_checked(&refs[..chunk.len()], |_, r| results.push(r))?;
        }
        Ok(results)
    }

    /// Deletes up to 10 parsed handles together (`None`: an entry already refused, given no
    /// result here). Each is checked alone; the valid ones go to one
    /// [`handle::delete_many`], each group cleaned up once. `put(k, result)` is called for
    /// each `Some` entry, in order.
    fn delete_checked(
        &self,
        handles: &[Option<&ReceiptHandle>],
        mut put: impl FnMut(usize, Result<()>),
    ) -> Result<()> {
        let inner = &*self.inner;
        let mut checked = [Handle {
            idx: 0,
            inc: 0,
            member: 0,
            epoch: 0,
        }; 10];
        // The entry of each of `checked`.
        let mut which = [0usize; 10];
        let mut n = 0;
        // The slot of the last handle found valid: a pack's members are consecutive handles
        // of one slot, checked once.
        let mut valid = None;
        for (k, h) in handles.iter().enumerate().take(10) {
            if let Some(rh) = h {
                let ok =
                    (rh.nonce == inner.nonce && valid == Some(rh.idx)) || self.names_a_slot(rh);
                if ok {
                    valid = Some(rh.idx);
                    checked[n] = rh.slot();
                    which[n] = k;
                    n += 1;
                }
            }
        }
        let mut got: [crate::protocol::PResult<()>; 10] = [Ok(()); 10];
        handle::delete_many(
            self.arena(),
            &Op::new(inner),
            inner.me,
            &checked[..n],
            &mut got[..n],
        )
        .map_err(|f| fault(f, inner))?;
        inner.live()?;
        let mut j = 0;
        for (k, h) in handles.iter().enumerate().take(10) {
            let Some(rh) = h else { continue };
            if j < n && which[j] == k {
                // Two arms, not `map_err`: a deleted handle's result is then written as
                // `Ok(())` alone, not copied in the error's size (20 instructions a handle).
                match got[j] {
                    Ok(()) => put(k, Ok(())),
                    Err(f) => put(k, Err(self.handle_fault(f, rh))),
                }
                j += 1;
            } else {
                put(k, Err(invalid_handle(rh)));
            }
        }
        Ok(())
    }

    /// Changes the visibility timeout of the message received with `handle` to `timeout` from
    /// now (H6, V1); zero makes it visible at once.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// use shmfifo::{Error, Queue, QueueConfig, ReceiveOptions, SendMessage};
    ///
    /// let q = Queue::create_anonymous(&QueueConfig::new())?;
    /// q.send(&SendMessage::new("g", "retry me").dedup_id("1"))?;
    /// let first = q.receive(&ReceiveOptions::default())?.remove(0);
    /// // Give the message back at once...
    /// q.change_visibility(&first.receipt_handle, Duration::ZERO)?;
    /// let again = q.receive(&ReceiveOptions::default())?.remove(0);
    /// assert_eq!(again.message_id, first.message_id);
    /// assert_eq!(again.receive_count, 2);
    /// // ...which made the first handle stale; the new one extends the timeout.
    /// assert!(matches!(
    ///     q.change_visibility(&first.receipt_handle, Duration::from_secs(60)),
    ///     Err(Error::ReceiptHandleExpired { .. })
    /// ));
    /// q.change_visibility(&again.receipt_handle, Duration::from_secs(60))?;
    /// # Ok::<(), shmfifo::Error>(())
    /// ```
    pub fn change_visibility(&self, handle: &ReceiptHandle, timeout: Duration) -> Result<()> {
        if timeout > MAX_VISIBILITY_TIMEOUT {
            return Err(Error::invalid(
                "VisibilityTimeout",
                "Must be between 0 and 43200 seconds.",
            ));
        }
        let h = self.handle(handle)?;
        let inner = &*self.inner;
        handle::change_visibility(self.arena(), &Op::new(inner), inner.me, h, ms(timeout))
            .map_err(|f| self.handle_fault(f, handle))?;
        inner.live()
    }

    /// Changes visibility by the text form of a receipt handle.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// use shmfifo::{Queue, QueueConfig, ReceiveOptions, SendMessage};
    ///
    /// let q = Queue::create_anonymous(&QueueConfig::new())?;
    /// q.send(&SendMessage::new("g", "retry me").dedup_id("1"))?;
    /// let m = q.receive(&ReceiveOptions::default())?.remove(0);
    /// let text = m.receipt_handle.to_string(); // e.g. handed to another process
    /// q.change_visibility_str(&text, Duration::ZERO)?;
    /// assert_eq!(q.receive(&ReceiveOptions::default())?[0].body, "retry me");
    /// # Ok::<(), shmfifo::Error>(())
    /// ```
    pub fn change_visibility_str(&self, handle: &str, timeout: Duration) -> Result<()> {
        self.change_visibility(&handle.parse()?, timeout)
    }

    /// Changes the visibility of up to 10 messages (H8).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// use shmfifo::{BatchEntry, Queue, QueueConfig, ReceiveOptions, SendMessage};
    ///
    /// let q = Queue::create_anonymous(&QueueConfig::new())?;
    /// q.send(&SendMessage::new("g1", "a").dedup_id("1"))?;
    /// q.send(&SendMessage::new("g2", "b").dedup_id("2"))?;
    /// let got = q.receive(&ReceiveOptions::max(10))?;
    /// let h: Vec<String> = got.iter().map(|m| m.receipt_handle.to_string()).collect();
    /// let results = q.change_visibility_batch(&[
    ///     BatchEntry { id: "now", entry: (h[0].as_str(), Duration::ZERO) },
    ///     BatchEntry { id: "later", entry: (h[1].as_str(), Duration::from_secs(60)) },
    /// ])?;
    /// assert!(results.iter().all(|r| r.result.is_ok()));
    /// // Only the first message is visible again.
    /// let again = q.receive(&ReceiveOptions::max(10))?;
    /// assert_eq!(again.len(), 1);
    /// assert_eq!(again[0].message_id, got[0].message_id);
    /// # Ok::<(), shmfifo::Error>(())
    /// ```
    pub fn change_visibility_batch(
        &self,
        entries: &[BatchEntry<'_, (&str, Duration)>],
    ) -> Result<Vec<BatchResult<()>>> {
        validate::batch_ids(entries.iter().map(|e| e.id))?;
        Ok(entries
            .iter()
            .map(|e| BatchResult {
                id: e.id.to_owned(),
                result: self.change_visibility_str(e.entry.0, e.entry.1),
            })
            .collect())
    }

    /// Deletes every message, visible or in flight (P1). Returns how many.
    ///
    /// # Examples
    ///
    /// ```
    /// use shmfifo::{Error, Queue, QueueConfig, ReceiveOptions, SendMessage};
    ///
    /// let q = Queue::create_anonymous(&QueueConfig::new())?;
    /// for i in 0..3 {
    ///     q.send(&SendMessage::new("g", "m").dedup_id(&i.to_string()))?;
    /// }
    /// let in_flight = q.receive(&ReceiveOptions::default())?.remove(0);
    /// assert_eq!(q.purge()?, 3); // visible and in-flight messages alike
    /// assert!(q.receive(&ReceiveOptions::max(10))?.is_empty());
    /// assert!(matches!(
    ///     q.delete(&in_flight.receipt_handle),
    ///     Err(Error::ReceiptHandleExpired { .. })
    /// ));
    /// # Ok::<(), shmfifo::Error>(())
    /// ```
    pub fn purge(&self) -> Result<u64> {
        let inner = &*self.inner;
        let n = handle::purge(self.arena(), inner, inner.me).map_err(|f| fault(f, inner))?;
        inner.live()?;
        Ok(n)
    }

    /// Repairs what dead participants left behind (also done on open, and by idle receivers),
    /// then quarantines every group whose list a corrupted word made unwalkable: its messages
    /// go to the dead-letter queue if the queue has a redrive policy (else they are dropped),
    /// their ids are in the report, and the group starts afresh with its next send. The rest of
    /// the queue keeps serving throughout. A group whose sender is stopped mid-send is left
    /// for a later call, which then returns [`Error::ParticipantBusy`] after repairing all
    /// else.
    ///
    /// # Examples
    ///
    /// ```
    /// use shmfifo::{Queue, QueueConfig, Recovered};
    ///
    /// let q = Queue::create_anonymous(&QueueConfig::new())?;
    /// // No participant died and nothing is corrupted, so there is nothing to repair.
    /// assert_eq!(q.recover()?, Recovered::default());
    /// # Ok::<(), shmfifo::Error>(())
    /// ```
    pub fn recover(&self) -> Result<Recovered> {
        let mut out = self.repair()?;
        self.quarantine_damaged(&mut out)?;
        self.inner.live()?;
        Ok(out)
    }

    /// The repairs of [`Queue::recover`] without its quarantine pass (what `open` runs: it
    /// reads no group list).
    pub(super) fn repair(&self) -> Result<Recovered> {
        let inner = &*self.inner;
        let r = recovery::recover(self.arena(), inner, inner.me).map_err(|f| fault(f, inner))?;
        if r != recovery::Repaired::default() {
            tracing::warn!(
                queue = %self.display_name(),
                dead_participants = r.dead_participants,
                published = r.published,
                freed = r.freed,
                released = r.released,
                "repaired what dead participants left"
            );
        }
        Ok(Recovered {
            dead_participants: r.dead_participants,
            published: r.published,
            freed: r.freed,
            released: r.released,
            ..Recovered::default()
        })
    }

    /// Quarantines each group that cannot be walked (see [`quarantine::begin`]), moving its
    /// messages to the dead-letter queue where a policy names one.
    fn quarantine_damaged(&self, out: &mut Recovered) -> Result<()> {
        let inner = &*self.inner;
        let a = self.arena();
        let mut busy = None;
        let mut patience = Patience::new();
        let n = a.group_entries();
        let mut next = 0u64;
        while next < n {
            let g = next as u32;
            next += 1;
            if a.group(g).is_err() {
                // A table this process cannot map: none of its entries can be looked at.
                next = a.past_group_table(g);
                continue;
            }
            if !quarantine::suspect(a, inner, inner.me, g) {
                continue;
            }
            let q = match quarantine::begin(a, inner, inner.me, g, &mut patience) {
                Ok(Some(q)) => q,
                Ok(None) => continue,
                Err(f @ Fault::Busy(_)) => {
                    busy = Some(f);
                    continue;
                }
                Err(f) => return Err(fault(f, inner)),
            };
            let dl = self.dead_letter().ok().flatten();
            let dlq = dl.and_then(|(_, version)| self.dead_letter_queue(version).ok());
            for &(idx, inc, member, w) in &q.messages {
                let id = self.message_id(idx, inc, member);
                let moved = dlq.as_ref().is_some_and(|d| {
                    quarantine::taken(a, g, idx, inc, member, w)
                        .is_ok_and(|t| self.move_to(d, &t).is_ok())
                });
                if moved {
                    out.dead_lettered.push(id);
                } else {
                    out.dropped.push(id);
                }
            }
            quarantine::finish(a, inner, inner.me, &q).map_err(|f| fault(f, inner))?;
            out.quarantined_groups += 1;
            tracing::error!(
                queue = %self.display_name(),
                group_index = g,
                messages = q.messages.len(),
                dead_lettered = out.dead_lettered.len(),
                dropped = out.dropped.len(),
                "quarantined a group whose list a corrupted word made unwalkable"
            );
        }
        match busy {
            Some(f) => Err(fault(f, inner)),
            None => Ok(()),
        }
    }
}

/// `ReceiptHandleIsInvalid` for a handle that is not this queue's or names no slot of it.
fn invalid_handle(h: &ReceiptHandle) -> Error {
    Error::ReceiptHandleIsInvalid {
        handle: h.to_string(),
    }
}
