//! Loaned batches: the messages of a batch to one group written in place into one slot, cut
//! into members, and sent as one pack (layout 23, `protocol::pack`) without a copy: the zero-copy
//! form of a packed batch (`docs/design/packed-batches.md`, stage 3).
//!
//! [`Queue::loan_batch`] takes each member's body length and options (dedup id, attributes) up
//! front, lays the members out as a pack lays them (directory, then each member's body, dedup id
//! and framed attributes back to back), claims one slot of the smallest class that holds them
//! (as a [`Loan`](super::Loan) claims one) and writes the options in place. The caller writes
//! the bodies ([`LoanBatch::body_mut`]) and sends ([`LoanBatch::send`]): the bodies are checked
//! where they lie, the keys reserved, and what is left to send (duplicates and refused bodies
//! are answered and left out, the rest moved down over them within the slot) is linked as one
//! pack. A process killed while it holds the loan loses nothing: recovery frees the slot.
#![allow(unsafe_code)] // views of a lent slot's bytes in the mapping (each block says why)

use std::fmt;

use super::framing::{attributes_len, frame};
use super::hashing::{content_dedup_id, group_key};
use super::loan::LoanOptions;
use super::queue::{fault, Op, Queue};
use super::types::{SendMessage, SendResult};
use crate::config::{Deduplication, ATTRIBUTE_FRAMING};
use crate::error::{Error, Result};
use crate::protocol::accounting::{self, counter};
use crate::protocol::message::MAX_ID_LEN;
use crate::protocol::pack::{self, Places, MAX_PACK};
use crate::protocol::send::{self, Loaned, Outgoing};
use crate::protocol::{Fault, PResult};
use crate::validate;

/// One slot of the queue lent to this process for a batch of up to 10 messages to one group
/// ([`Queue::loan_batch`]), each member's body to be written in place
/// ([`body_mut`](LoanBatch::body_mut)); [`send`](LoanBatch::send) sends them as one unit,
/// dropping the loan gives the slot back.
///
/// Its bytes are what the slot held before, not zeros: write every body whole. A member's
/// body lies right after the one before it and its options, so no alignment is promised for
/// any but the first (the same holds for a copied batch's members, see
/// [`Queue::receive_borrowed`]).
pub struct LoanBatch<'q> {
    queue: &'q Queue,
    lent: Loaned,
    /// The slot's payload (`places` were checked against its class's capacity).
    ptr: *mut u8,
    /// Where each member's bytes lie: a pack's places, or (one member) a message's own.
    places: Places,
    /// Whether member `j`'s dedup id is generated from its body at the send (content-based
    /// deduplication, D5, and no id of its own): 64 bytes are kept for it.
    generated: [bool; MAX_PACK],
    group: [u8; MAX_ID_LEN],
    group_len: usize,
}

// SAFETY: as `Loan`'s: a claim of the process's participant (not of a thread) on a slot nobody
// else touches, plus a shared reference to a `Sync` queue: moving it to another thread moves
// the only access to those bytes.
unsafe impl Send for LoanBatch<'_> {}

impl fmt::Debug for LoanBatch<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LoanBatch")
            .field("slot", &self.lent.idx)
            .field("members", &self.places.k)
            .field("group_id", &self.group_id())
            .finish()
    }
}

impl Drop for LoanBatch<'_> {
    fn drop(&mut self) {
        self.queue.return_lent(self.lent);
    }
}

impl<'q> LoanBatch<'q> {
    /// The number of messages (members).
    pub fn len(&self) -> usize {
        self.places.k
    }

    /// Whether the batch has no member (never: a loaned batch has at least one).
    pub fn is_empty(&self) -> bool {
        self.places.k == 0
    }

    /// The group id the batch is for.
    pub fn group_id(&self) -> &str {
        // `Queue::loan_batch` copied a `&str` here.
        std::str::from_utf8(&self.group[..self.group_len]).unwrap_or_default()
    }

    /// Member `j`'s body, to fill in place: as long as [`Queue::loan_batch`] was asked for.
    ///
    /// # Panics
    /// If `j` is not below [`len`](LoanBatch::len), as a slice index out of bounds does.
    pub fn body_mut(&mut self, j: usize) -> &mut [u8] {
        let p = self.places.members()[j];
        // SAFETY: `p.at + p.body <= places.used <= cap` bytes of the slot's payload (checked
        // by `loan_batch`) inside the mapping `queue` keeps alive; the slot is claimed by this
        // process and linked nowhere, so no other participant accesses it (a hostile process
        // writing the arena aside: it can change bytes, never the mapping); members' bodies do
        // not overlap, and `&mut self` makes this the only view.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(p.at), p.body) }
    }

    /// Member `j`'s body as written so far.
    ///
    /// # Panics
    /// If `j` is not below [`len`](LoanBatch::len).
    pub fn body(&self, j: usize) -> &[u8] {
        let p = self.places.members()[j];
        // SAFETY: as in `body_mut`; `&self` excludes a mutable view.
        unsafe { std::slice::from_raw_parts(self.ptr.add(p.at), p.body) }
    }

    /// Sends the members as one batch to the loan's group, without copying a body (S11–S13
    /// as [`Queue::send_messages`] sends a batch, the members in order). Each body is checked
    /// where it lies, as [`Loan::send_with`](super::Loan::send_with) checks one (text in SQS's
    /// character set, S7, unless the queue takes any bytes); one that is not fails alone.
    /// A member whose dedup key an earlier member of the batch has is that one's duplicate
    /// (D9), one whose key a message sent before has is that message's (D1): each is
    /// answered and not enqueued again. The rest go as one unit, committed whole or not at
    /// all, moved down over the members left out (a copy within the slot, only then).
    ///
    /// One result per member, in order. The slot is used up whatever the results: linked, or
    /// given back. An `Err` of the whole call (a damaged arena) gives the slot back too.
    pub fn send(self) -> Result<Vec<Result<SendResult>>> {
        let r = self.try_send();
        // Linked, or given back by the protocol: a second give-back finds it not ours at the
        // loan's epoch and leaves it alone (its CAS fails), so dropping is always safe; it is
        // what gives the slot back when the send failed before it.
        drop(self);
        r
    }

    fn try_send(&self) -> Result<Vec<Result<SendResult>>> {
        let q = self.queue;
        let inner = &*q.inner;
        let k = self.places.k;
        let group = &self.group[..self.group_len];
        // The members' keys: explicit ids as written in place at the loan (read back from the
        // slot, ours; checked again), generated ones written now from the body.
        let mut early: [Option<Error>; MAX_PACK] = std::array::from_fn(|_| None);
        // Each member's id copied out of the slot (the protocol's moves may write over its
        // place there while the keys, which view these copies, are alive).
        let mut id_bytes = [[0u8; MAX_ID_LEN]; MAX_PACK];
        let mut id_lens = [0usize; MAX_PACK];
        for j in 0..k {
            let body = self.body(j);
            if !inner.binary {
                if let Err(e) = validate::text(body) {
                    early[j] = Some(e);
                    continue;
                }
            }
            if self.generated[j] {
                id_bytes[j][..64].copy_from_slice(&content_dedup_id(body));
                id_lens[j] = 64;
            }
        }
        for (j, p) in self.places.members().iter().enumerate() {
            let at = p.at + p.body;
            if self.generated[j] {
                // SAFETY: the 64 bytes kept after member `j`'s body (its place's `dedup`,
                // within `used <= cap`); the slot is ours (see `body_mut`), and no view of it
                // lives while this `&self` method runs (`body_mut` needs `&mut self`).
                unsafe {
                    std::ptr::copy_nonoverlapping(id_bytes[j].as_ptr(), self.ptr.add(at), 64)
                };
            } else if p.dedup > 0 && p.dedup <= MAX_ID_LEN {
                // SAFETY: as above: member `j`'s dedup id, written by `loan_batch`, copied out.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        self.ptr.add(at),
                        id_bytes[j].as_mut_ptr(),
                        p.dedup,
                    )
                };
                id_lens[j] = p.dedup;
                let id = &id_bytes[j][..p.dedup];
                if let Err(e) = std::str::from_utf8(id)
                    .map_err(|_| Error::invalid("MessageDeduplicationId", "not UTF-8"))
                    .and_then(|s| validate::id("MessageDeduplicationId", s))
                {
                    early[j] = early[j].take().or(Some(e));
                }
            }
        }
        let ids: [&[u8]; MAX_PACK] = std::array::from_fn(|j| &id_bytes[j][..id_lens[j]]);
        let key = group_key(inner.keys, group);
        let parts: [[&[u8]; 3]; MAX_PACK] = std::array::from_fn(|j| [&[][..], &[][..], ids[j]]);
        let mut outs: [Option<Outgoing<'_>>; MAX_PACK] = [None; MAX_PACK];
        for (j, (o, p)) in outs.iter_mut().zip(self.places.members()).enumerate() {
            if early[j].is_none() {
                *o = Some(q.outgoing(0, group, &parts[j], p.attrs, p.body, 0, 0, Some(key)));
            }
        }
        // D9: a member whose key an earlier one sent has is that one's duplicate, left out here.
        let mut repeats: [Option<usize>; MAX_PACK] = [None; MAX_PACK];
        let mut refs: [Option<&Outgoing<'_>>; MAX_PACK] = [None; MAX_PACK];
        for j in 0..k {
            let Some(o) = &outs[j] else { continue };
            let first = (0..j).find(|&i| {
                refs[i].is_some_and(|e| match (&e.dedup, &o.dedup) {
                    (Some(x), Some(y)) => x.same(y),
                    _ => false,
                })
            });
            match first {
                Some(i) => repeats[j] = Some(i),
                None => refs[j] = Some(o),
            }
        }
        let mut got: [PResult<send::Sent>; MAX_PACK] =
            [Err(Fault::Corrupted("not sent")); MAX_PACK];
        send::send_lent_pack(
            q.arena(),
            &Op::new(inner),
            inner.me,
            self.lent,
            &refs[..k],
            &self.places,
            &mut got[..k],
        )
        .map_err(|f| fault(f, inner))?;
        inner.live()?;
        // Where the pack found its group, kept for the thread's next send of the id.
        if let Some(o) = refs[..k].iter().flatten().next() {
            q.remember_chain(o, &got[..k]);
        }
        let mut repeated = 0;
        for j in 0..k {
            if let Some(i) = repeats[j] {
                got[j] = got[i].map(|s| send::Sent {
                    duplicate: true,
                    group: None,
                    ..s
                });
                repeated += u64::from(got[j].is_ok());
            }
        }
        if repeated > 0 {
            // Counted as the protocol counts the duplicates it answers (D9's never reach it).
            accounting::count(q.arena(), inner.me, counter::DUPLICATES, repeated);
        }
        Ok((0..k)
            .map(|j| match early[j].take() {
                Some(e) => Err(e),
                None => got[j].map(|s| q.result_of(&s)).map_err(|f| fault(f, inner)),
            })
            .collect())
    }
}

impl Queue {
    /// Lends one slot for a batch of 1 to 10 messages to `group_id`, member `j` a body of
    /// `members[j].0` bytes sent with the options `members[j].1`, to write each body in place
    /// ([`LoanBatch::body_mut`]) and [`send`](LoanBatch::send) them as one unit without a
    /// copy: the zero-copy form of [`send_messages`](Queue::send_messages) to one group,
    /// whose messages go as one pack. The options are given here, not at the send: each
    /// member's dedup id and attributes lie right after its body. The slot comes from the
    /// smallest size class that holds the members and their directory; dropping the loan
    /// gives it back. A process that dies holding it loses nothing: recovery frees the slot.
    ///
    /// Errors (nothing lent): no member ([`Error::EmptyBatchRequest`]) or more than 10
    /// ([`Error::TooManyEntriesInBatchRequest`]); the bodies and attributes over 1 MiB in all
    /// ([`Error::BatchRequestTooLong`]); a body of 0 bytes or over
    /// [`maximum_message_size`](Queue::maximum_message_size) with its attributes, an invalid
    /// group id, dedup id or attribute, a dedup id missing where the queue needs one (S4), or
    /// the batch larger than the largest size class: `InvalidParameterValue` (or
    /// `MissingParameter`); no free slot in the class: [`Error::SizeClassFull`].
    ///
    /// # Examples
    ///
    /// ```
    /// use shmfifo::{LoanOptions, Queue, QueueConfig, ReceiveOptions};
    ///
    /// let q = Queue::create_anonymous(&QueueConfig::new())?;
    /// let ids = ["1", "2", "3"];
    /// let members: Vec<_> = ids.iter().map(|id| (6, LoanOptions::new().dedup_id(id))).collect();
    /// let mut batch = q.loan_batch("frames", &members)?;
    /// for j in 0..batch.len() {
    ///     batch.body_mut(j).copy_from_slice(format!("frame{j}").as_bytes());
    /// }
    /// for r in batch.send()? {
    ///     assert!(!r?.duplicate);
    /// }
    /// let got = q.receive(&ReceiveOptions::max(10))?;
    /// let bodies: Vec<&str> = got.iter().map(|m| m.body.as_str()).collect();
    /// assert_eq!(bodies, ["frame0", "frame1", "frame2"]);
    ///
    /// // A loaned batch dropped unsent gives its slot back.
    /// drop(q.loan_batch("frames", &members)?);
    /// # Ok::<(), shmfifo::Error>(())
    /// ```
    pub fn loan_batch(
        &self,
        group_id: &str,
        members: &[(usize, LoanOptions<'_>)],
    ) -> Result<LoanBatch<'_>> {
        let n = members.len();
        match n {
            0 => return Err(Error::EmptyBatchRequest),
            n if n > MAX_PACK => return Err(Error::TooManyEntriesInBatchRequest { entries: n }),
            _ => {}
        }
        let inner = &*self.inner;
        let max = self.maximum_message_size();
        let mut sizes = [(0, 0, 0); MAX_PACK];
        let mut generated = [false; MAX_PACK];
        let mut total = 0;
        for (j, (len, opts)) in members.iter().enumerate() {
            // S2–S6, S8 on what is known now (the body is checked where it lies, at the send).
            let probe = SendMessage {
                group_id: Some(group_id),
                dedup_id: opts.dedup_id,
                body: "",
                bytes: None,
                attributes: opts.attributes,
                delay_seconds: None,
            };
            self.check_with(group_id, &probe, false, j > 0, max)?;
            let attrs = attributes_len(opts.attributes);
            if *len == 0 {
                return Err(validate::empty_body());
            }
            if len.saturating_add(attrs) > max as usize {
                return Err(Error::invalid(
                    "MessageBody",
                    format!(
                        "One or more parameters cannot be validated. Reason: Message must be shorter than {max} bytes."
                    ),
                ));
            }
            total += len + attrs;
            generated[j] = opts.dedup_id.is_none() && inner.dedup != Deduplication::Off;
            let dedup = match opts.dedup_id {
                Some(d) => d.len(),
                None if generated[j] => 64,
                None => 0,
            };
            let framed = attrs + opts.attributes.len() * ATTRIBUTE_FRAMING;
            sizes[j] = (*len, dedup, framed);
        }
        if total > 1_048_576 {
            return Err(Error::BatchRequestTooLong { bytes: total });
        }
        let places = if n == 1 {
            // One member: a message's own layout, its bytes from the payload's start.
            let (body, dedup, attrs) = sizes[0];
            pack::lay_out_one(body, dedup, attrs)
        } else {
            pack::lay_out(&sizes[..n], usize::MAX).ok_or_else(|| {
                Error::invalid("MessageBody", "a loaned batch's member is too long")
            })?
        };
        let too_large = || {
            Error::invalid(
                "MessageBody",
                format!(
                    "A loaned batch of {} bytes (its members, their options and directory) is larger than the largest size class: send it as separate loans or as a batch that copies.",
                    places.used
                ),
            )
        };
        let class = inner
            .caps
            .iter()
            .position(|&(cap, _)| cap as usize >= places.used)
            .ok_or_else(too_large)?;
        let (lent, ptr) = self.lend(class, places.used)?;
        // Each member's options in place after its body: its dedup id (a generated one is
        // written at the send), then its attributes, each framed.
        let put = |at: usize, bytes: &[u8]| -> usize {
            // SAFETY: every caller's `at .. at + bytes.len()` lies in a member's options, `p.at +
            // p.body .. p.end()`, within `places.used <= cap` bytes of the payload (checked
            // above); the slot is claimed by us and linked nowhere, so nobody else reads or
            // writes it.
            unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), ptr.add(at), bytes.len()) };
            at + bytes.len()
        };
        for ((_, opts), p) in members.iter().zip(places.members()) {
            if let Some(d) = opts.dedup_id {
                put(p.at + p.body, d.as_bytes());
            }
            let mut at = p.at + p.body + p.dedup;
            for attr in opts.attributes {
                let f = frame(attr.name.len(), attr.data_type.len(), attr.value.len());
                at = put(at, &f);
                at = put(at, attr.name.as_bytes());
                at = put(at, attr.data_type.as_bytes());
                at = put(at, attr.value);
            }
            debug_assert_eq!(at, p.end(), "a member's options fill its place");
        }
        let mut group = [0u8; MAX_ID_LEN];
        group[..group_id.len()].copy_from_slice(group_id.as_bytes());
        Ok(LoanBatch {
            queue: self,
            lent,
            ptr,
            places,
            generated,
            group,
            group_len: group_id.len(),
        })
    }
}
