//! `send_batch` and `send_messages` (S11–S13): each entry checked and described on its own,
//! then each group's entries sent as one chain (one pack where they fit), and the retries of
//! a full class that keep a group's order.

use super::super::framing::{self, attributes_len, Framed, Pieces};
use super::super::hashing::GroupKey;
use super::super::queue::{fault, Op, Queue};
use super::super::types::*;
use super::missing_dedup_id;
use crate::error::{Error, Result};
use crate::protocol::send::{self, Outgoing};
use crate::protocol::{Fault, PResult};
use crate::validate;

impl Queue {
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
    pub(in crate::api) fn send_batch_lent(
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
        // entries: `last` is the group and key of the last entry described.
        let max = self.maximum_message_size();
        let mut last: Option<(&str, GroupKey)> = None;
        for (k, (e, (f, p))) in entries.iter().zip(slots).enumerate() {
            // Read once (`results` is written between the uses, which the compiler cannot
            // prove apart from the entry).
            let group = group_of(e);
            let body_len = e.body_bytes().len();
            let run = last.filter(|&(g, _)| same_id(g, group)).map(|(_, h)| h);
            let group_checked = run.is_some();
            // A lent body was checked where it lies.
            let checked = self.check_with(group, e, lent_at(k).is_none(), group_checked, max);
            if let Err(err) = checked {
                results[k] = Err(err);
                continue;
            }
            let (parts, attr_len) = framing::pieces(inner.dedup, e, f, p);
            if let Some((_, class)) = lent_at(k) {
                in_place[k] = self.fits_in_place(parts, class);
            }
            let parts: &[&[u8]] = parts;
            // One keyed hash per group id of the batch (with where it was found last).
            let key = run.or_else(|| {
                (0..k)
                    .find(|&j| same_id(group_of(entries[j]), group))
                    .and_then(|j| outs[j].as_ref().map(GroupKey::of))
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
                key,
            ));
            if let (true, Some((l, lent_class))) = (in_place[k], lent_at(k)) {
                o.lend(l, lent_class, body_len);
            }
            last = Some((group, GroupKey::of(o)));
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
                        .is_some_and(|pk| pk.same(key))
                })
            });
            if repeats {
                self.send_chains(entries, &mut pending, &outs, results)?;
            }
            pending[k] = true;
        }
        self.send_chains(entries, &mut pending, &outs, results)?;
        // A file cut under the send (`sys::guard`): the queue is gone, whatever was written.
        inner.live()?;
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
                if let (true, Some(o)) = (pending[k] && same_id(group(k), group(first)), &outs[k]) {
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
            // Where the chain found its group, kept for the thread's next send of the id.
            self.remember_chain(fill, &got[..n]);
            // The cursor moves past the chain's last new slot, once (a pack's members share
            // theirs).
            if let Some(Ok(s)) = got[..n].iter().rev().find(|r| new(r)) {
                self.note_cursor(s.idx);
            }
            for (&k, r) in ks[..n].iter().zip(got) {
                let r = r.map(|s| self.result_of(&s)).map_err(|f| fault(f, inner));
                put(&mut results[k], r);
                pending[k] = false;
            }
        }
        Ok(())
    }
}

/// Writes a pending entry's result over the placeholder it held ([`unsent`]), which owns
/// nothing and is forgotten rather than dropped (dropping an `Error` of unknown variant is a
/// call of its destructor a message); any other value there is dropped as usual.
#[inline(always)]
fn put(slot: &mut Result<SendResult>, r: Result<SendResult>) {
    match std::mem::replace(slot, r) {
        Err(e @ Error::Corrupted { .. }) => std::mem::forget(e),
        old => drop(old),
    }
}

/// What a batch's entry answers until it is sent or refused: only an entry a batch leaves
/// without either (a bug, or a corrupted arena) keeps it.
pub(in crate::api) fn unsent() -> Result<SendResult> {
    Err(Error::Corrupted {
        what: "a batch entry was neither sent nor refused",
    })
}

/// Whether two ids are the same: the same bytes where they are (a batch's messages built from
/// one `&str` share it: no comparison of bytes, a call of `bcmp` a message), else equal bytes.
#[inline(always)]
fn same_id(a: &str, b: &str) -> bool {
    (a.as_ptr() == b.as_ptr() && a.len() == b.len()) || a == b
}

/// The group id of a batch's message (present: `send_batch_lent` checks that first).
fn group_of<'e>(e: &SendMessage<'e>) -> &'e str {
    e.group_id.unwrap_or("")
}
