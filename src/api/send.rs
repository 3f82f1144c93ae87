//! `send` and `send_batch`: validation (S1–S8), dedup ids (D5) and keys, and the hand-off to
//! [`crate::protocol::send`].

use std::hash::Hasher;

use super::framing;
use super::queue::{fault, Op, Queue};
use super::types::*;
use crate::config::{Deduplication, ATTRIBUTE_FRAMING, MAX_ATTRIBUTES};
use crate::error::{Error, Result};
use crate::layout::MAX_ID_LEN;
use crate::protocol::send::{self, Outgoing};
use crate::protocol::{dedup, ready, recovery, words, Fault};
use crate::sync::Ordering;
use crate::validate;

/// S4's error for a send without a dedup id on a queue that needs one.
pub(super) fn missing_dedup_id() -> Error {
    Error::invalid(
        "MessageDeduplicationId",
        "The queue should either have ContentBasedDeduplication enabled or MessageDeduplicationId provided explicitly",
    )
}

pub(super) fn hash_id(keys: (u64, u64), id: &[u8]) -> u64 {
    let mut h = siphasher::sip::SipHasher24::new_with_keys(keys.0, keys.1);
    h.write(id);
    h.finish()
}

/// The keyed hash of a dedup key: SipHash-2-4 over `[b'D', group_len] ‖ group ‖ dedup` (the
/// group is empty with queue scope). Specified byte for byte, so every build agrees.
pub(super) fn hash_dedup(keys: (u64, u64), group: &[u8], dedup: &[u8]) -> u64 {
    let mut buf = [0u8; 2 + 2 * MAX_ID_LEN];
    let (g, d) = (group.len().min(MAX_ID_LEN), dedup.len().min(MAX_ID_LEN));
    buf[0] = b'D';
    buf[1] = g as u8;
    buf[2..2 + g].copy_from_slice(&group[..g]);
    buf[2 + g..2 + g + d].copy_from_slice(&dedup[..d]);
    hash_id(keys, &buf[..2 + g + d])
}

/// Lowercase hex of the SHA-256 of `body` (the content-based dedup id, D5).
pub(super) fn content_dedup_id(body: &[u8]) -> [u8; 64] {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(body);
    let mut out = [0u8; 64];
    for (i, b) in digest.iter().enumerate() {
        out[2 * i] = b"0123456789abcdef"[usize::from(b >> 4)];
        out[2 * i + 1] = b"0123456789abcdef"[usize::from(b & 15)];
    }
    out
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
        let group_id = msg.group_id.ok_or(Error::MissingParameter {
            parameter: "MessageGroupId",
        })?;
        self.send_checked(group_id, msg)
    }

    pub(super) fn send_checked(&self, group_id: &str, msg: &SendMessage<'_>) -> Result<SendResult> {
        let inner = &*self.inner;
        if let Some(d) = msg.delay_seconds.filter(|&d| d != 0) {
            return Err(Error::invalid(
                "DelaySeconds",
                format!("Value {d} for parameter DelaySeconds is invalid. Reason: The request include parameter that is not valid for this queue type."),
            ));
        }
        validate::id("MessageGroupId", group_id)?;
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
        validate::body(msg.body)?;
        if msg.attributes.len() > MAX_ATTRIBUTES {
            return Err(Error::invalid(
                "MessageAttributes",
                "Number of message attributes cannot exceed 10.",
            ));
        }
        let mut size = msg.body.len();
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
        if size > inner.max_message_size as usize {
            return Err(Error::invalid(
                "MessageBody",
                format!(
                    "One or more parameters cannot be validated. Reason: Message must be shorter than {} bytes.",
                    inner.max_message_size
                ),
            ));
        }
        // Pieces copied back to back into the slot: dedup id, the framed attributes (see
        // `framing`), then the body.
        let mut frames = [[0u8; ATTRIBUTE_FRAMING]; MAX_ATTRIBUTES];
        for (f, a) in frames.iter_mut().zip(msg.attributes) {
            *f = framing::frame(a.name.len(), a.data_type.len(), a.value.len());
        }
        let generated;
        let dedup: &[u8] = match msg.dedup_id {
            Some(d) => d.as_bytes(),
            None if inner.dedup != Deduplication::Off => {
                // D5: SHA-256 of the body only (attributes excluded), stored as the message's
                // dedup id.
                generated = content_dedup_id(msg.body.as_bytes());
                &generated
            }
            None => &[],
        };
        let mut pieces: [&[u8]; 4 * MAX_ATTRIBUTES] = [&[]; 4 * MAX_ATTRIBUTES];
        let mut n = 0;
        let mut attr_len = 0;
        for (f, a) in frames.iter().zip(msg.attributes) {
            for p in [&f[..], a.name.as_bytes(), a.data_type.as_bytes(), a.value] {
                pieces[n] = p;
                attr_len += p.len();
                n += 1;
            }
        }
        self.send_parts(
            group_id.as_bytes(),
            &[],
            dedup,
            &pieces[..n],
            attr_len,
            msg.body.as_bytes(),
            0,
            0,
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
        let inner = &*self.inner;
        let mut parts: [&[u8]; 3 + 4 * MAX_ATTRIBUTES] = [&[]; 3 + 4 * MAX_ATTRIBUTES];
        parts[0] = source;
        parts[1] = dedup;
        let mut n = 2;
        for p in attr_pieces {
            parts[n] = p;
            n += 1;
        }
        parts[n] = body;
        n += 1;
        let stored = source.len() + dedup.len() + attr_len + body.len();
        let class = inner
            .caps
            .iter()
            .position(|&(cap, _)| cap as usize >= stored)
            .ok_or(Error::Corrupted {
                what: "no size class fits a valid message",
            })?;
        let out = Outgoing {
            class,
            // Relaxed: a process-local spreading hint.
            cursor: inner.cursor.fetch_add(1, Ordering::Relaxed),
            hash: hash_id(inner.keys, group_id),
            group_id,
            lens: words::pack_lens(body.len(), attr_len, dedup.len(), flags),
            parts: &parts[..n],
            dedup: match inner.dedup {
                Deduplication::Off => None,
                Deduplication::Queue => Some(dedup::Key {
                    hash: hash_dedup(inner.keys, &[], dedup),
                    dedup,
                    group: &[],
                }),
                Deduplication::MessageGroup => Some(dedup::Key {
                    hash: hash_dedup(inner.keys, group_id, dedup),
                    dedup,
                    group: group_id,
                }),
            },
            source_len: source.len() as u8,
            prior_receives,
        };
        let sent = match send::send(&self.arena(), &Op::new(inner), inner.me, &out) {
            // Slots claimed by producers that died are reclaimed by recovery, and messages past
            // their retention period by a sweep. Before reporting the class full, run each if
            // it is due: recovery once per liveness period for the whole queue and only when a
            // registered participant has died, a sweep at most every 10 ms (a full class then
            // costs a producer a few loads, not a recovery with a lock check per participant
            // on every send).
            Err(Fault::ClassFull(c)) => {
                let a = self.arena();
                let recovered =
                    recovery::maybe_check_liveness(&a, inner, inner.me).unwrap_or(false);
                let swept = ready::sweep_for_room(&a, inner, inner.me).unwrap_or(false);
                if recovered || swept {
                    send::send(&a, inner, inner.me, &out)
                } else {
                    Err(Fault::ClassFull(c))
                }
            }
            r => r,
        }
        .map_err(|f| fault(f, inner))?;
        if !sent.duplicate {
            if let Ok((_, slot)) = self.arena().locate(sent.idx) {
                // Relaxed: process-local hint. Next time, start just past the slot that was
                // free.
                inner.cursor.store(slot as u64 + 1, Ordering::Relaxed);
            }
        }
        Ok(SendResult {
            message_id: self.message_id(sent.idx, sent.inc),
            sequence_number: (u128::from(sent.seq_hi) << 64) | u128::from(sent.pos),
            duplicate: sent.duplicate,
        })
    }

    pub(super) fn message_id(&self, idx: u32, inc: u32) -> MessageId {
        MessageId((u128::from(self.inner.nonce) << 64) | (u128::from(idx) << 32) | u128::from(inc))
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
        let mut total = 0;
        for e in entries {
            if e.entry.group_id.is_none() {
                return Err(Error::invalid(
                    "MessageGroupId",
                    "The request must contain the parameter MessageGroupId.",
                ));
            }
            // S12: a missing dedup id rejects the whole batch.
            if e.entry.dedup_id.is_none() && self.inner.needs_dedup_id() {
                return Err(missing_dedup_id());
            }
            total += e.entry.body.len()
                + e.entry
                    .attributes
                    .iter()
                    .map(|a| a.name.len() + a.data_type.len() + a.value.len())
                    .sum::<usize>();
        }
        if total > 1_048_576 {
            return Err(Error::BatchRequestTooLong { bytes: total });
        }
        Ok(entries
            .iter()
            .map(|e| BatchResult {
                id: e.id.to_owned(),
                result: self.send(&e.entry),
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pinned SipHash-2-4 test vector (key 00..0f, message 00..0e) from the SipHash paper:
    /// every build and process must hash group ids identically.
    #[test]
    fn siphash_test_vector() {
        let k0 = u64::from_le_bytes([0, 1, 2, 3, 4, 5, 6, 7]);
        let k1 = u64::from_le_bytes([8, 9, 10, 11, 12, 13, 14, 15]);
        let msg: Vec<u8> = (0..15).collect();
        assert_eq!(hash_id((k0, k1), &msg), 0xa129_ca61_49be_45e5);
    }
}
