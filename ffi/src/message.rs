//! The message structs exchanged with C: send requests and results, batch entries,
//! received messages and their buffer, handle entries, attributes, counters, redrive reports.

use core::ffi::c_char;
use std::panic::{catch_unwind, AssertUnwindSafe};

use shmfifo_core as core_api;
use shmfifo_core::{MessageAttribute, ReceiveBuffer, SendMessage};

use crate::{boundary::*, error::*};

/// Reusable storage for received messages: the views of [`shmfifo_message`] point into it and
/// stay valid until the next receive into the same buffer or its free. Not thread-safe (one
/// buffer per receiving thread).
pub struct shmfifo_receive_buffer {
    pub(crate) rb: ReceiveBuffer,
    pub(crate) attrs: Vec<Vec<shmfifo_attribute>>,
    /// A borrowing receive's bodies: where each lies in the queue's mapping.
    pub(crate) views: [(*const u8, usize); 10],
}

/// A message attribute, to send or as received (views into the buffer).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct shmfifo_attribute {
    /// Name (S8).
    pub name: shmfifo_str,
    /// `String`, `Number` or `Binary`, optionally `.label`.
    pub data_type: shmfifo_str,
    /// Value bytes.
    pub value: *const u8,
    /// Number of value bytes.
    pub value_len: usize,
}

/// A message to send.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct shmfifo_send_message {
    /// `MessageGroupId` (required: `data` NULL is absent, `SHMFIFO_MISSING_PARAMETER`).
    pub group_id: shmfifo_str,
    /// `MessageBody` (required: `data` NULL is absent, `SHMFIFO_MISSING_PARAMETER`); on a text
    /// queue UTF-8 of SQS's characters (`SHMFIFO_INVALID_MESSAGE_CONTENTS` otherwise).
    pub body: shmfifo_str,
    /// `MessageDeduplicationId` (`data` NULL: none).
    pub dedup_id: shmfifo_str,
    /// Message attributes (may be NULL when `attribute_count` is 0).
    pub attributes: *const shmfifo_attribute,
    /// Number of attributes (at most 10).
    pub attribute_count: usize,
    /// Per-message `DelaySeconds` (S5): 0 (none) is the only value a FIFO queue accepts; any
    /// other is `SHMFIFO_INVALID_PARAMETER_VALUE`, as SQS answers. A zero-initialised message
    /// has none.
    pub delay_seconds: u32,
}

/// What a successful send returns.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct shmfifo_send_result {
    /// `MessageId`, NUL-terminated (36 characters, UUID form).
    pub message_id: [c_char; 40],
    /// `SequenceNumber`, decimal, NUL-terminated.
    pub sequence_number: [c_char; 40],
    /// High 64 bits of the sequence number.
    pub sequence_hi: u64,
    /// Low 64 bits of the sequence number.
    pub sequence_lo: u64,
    /// 1 when the send was a duplicate (D1): nothing was enqueued, the id and sequence number
    /// are the original's.
    pub duplicate: u32,
}

/// The (all-zero) result of a batch entry that failed.
pub(crate) const NO_SEND_RESULT: shmfifo_send_result = shmfifo_send_result {
    message_id: [0; 40],
    sequence_number: [0; 40],
    sequence_hi: 0,
    sequence_lo: 0,
    duplicate: 0,
};

pub(crate) fn send_result(r: &core_api::SendResult) -> shmfifo_send_result {
    let mut out = shmfifo_send_result {
        sequence_hi: (r.sequence_number >> 64) as u64,
        sequence_lo: r.sequence_number as u64,
        duplicate: u32::from(r.duplicate),
        ..NO_SEND_RESULT
    };
    put(&mut out.message_id, r.message_id.text().as_str());
    put_u128(&mut out.sequence_number, r.sequence_number);
    out
}

/// One batch entry's outcome as C sees it: `SHMFIFO_OK` and the send result, or the entry's
/// error code.
pub(crate) fn batch_result(r: &core_api::Result<core_api::SendResult>) -> shmfifo_batch_result {
    match r {
        Ok(s) => shmfifo_batch_result {
            code: SHMFIFO_OK,
            result: send_result(s),
        },
        Err(e) => shmfifo_batch_result {
            code: code_of(e),
            result: NO_SEND_RESULT,
        },
    }
}

/// Longest attribute name or data type (S8).
pub(crate) const MAX_ATTRIBUTE_NAME: usize = 256;
/// Longest dedup, group or attempt id (S2, S3, R11).
pub(crate) const MAX_ID_LEN: usize = 128;

/// Builds the Rust message of a C one (attributes go to `attrs`).
///
/// # Safety
/// Every pointer in `m` must be valid as documented on [`shmfifo_send_message`].
pub(crate) unsafe fn message<'a>(
    m: &shmfifo_send_message,
    attrs: &'a mut Vec<MessageAttribute<'a>>,
    max_body: usize,
    binary: bool,
) -> R<SendMessage<'a>> {
    // Every count and length is checked against its SQS limit before the memory is read.
    // SAFETY: forwarded from the caller (all views below).
    let group = unsafe { m.group_id.get("group_id", MAX_ID_LEN) }?;
    // An absent body (`data` NULL) is SQS's missing parameter, as an absent group is.
    // SAFETY: as above.
    let b = unsafe { m.body.get_bytes("body", max_body) }?.ok_or_else(|| missing("MessageBody"))?;
    let (body, bytes) = if binary {
        // A binary queue: any bytes (the core checks only that there is one).
        ("", Some(b))
    } else {
        // Text that is not UTF-8 breaks SQS's rule for a body's characters (S7): its code,
        // as a loaned body's is when the core checks it.
        (body_text(b)?, None)
    };
    // SAFETY: as above.
    let dedup = unsafe { m.dedup_id.get("dedup_id", MAX_ID_LEN) }?;
    // SAFETY: as above.
    unsafe { attributes(m.attributes, m.attribute_count, attrs, max_body) }?;
    Ok(SendMessage {
        group_id: group,
        body,
        bytes,
        dedup_id: dedup,
        attributes: attrs,
        delay_seconds: Some(m.delay_seconds),
    })
}

/// Reads `count` C attributes at `list_ptr` into `attrs`, each checked against its limits
/// (at most 10, names and types 256 bytes, values `max_value` bytes) before it is read.
///
/// # Safety
/// `list_ptr` must point to `count` attributes (when `count` is at most 10) whose views are
/// valid as documented on [`shmfifo_attribute`] and outlive `'a`.
pub(crate) unsafe fn attributes<'a>(
    list_ptr: *const shmfifo_attribute,
    count: usize,
    attrs: &mut Vec<MessageAttribute<'a>>,
    max_value: usize,
) -> R {
    if count > shmfifo_core::MAX_ATTRIBUTES {
        return Err(Fail(
            SHMFIFO_INVALID_PARAMETER_VALUE,
            format!(
                "Number of message attributes cannot exceed {} (attribute_count {}).",
                shmfifo_core::MAX_ATTRIBUTES,
                count
            ),
        ));
    }
    if count > 0 {
        if list_ptr.is_null() {
            return Err(null("attributes"));
        }
        // SAFETY: the caller guarantees `attribute_count` (at most 10) attributes there.
        let list = unsafe { std::slice::from_raw_parts(list_ptr, count) };
        for a in list {
            if a.value.is_null() && a.value_len > 0 {
                return Err(null("attribute value"));
            }
            if a.value_len > max_value {
                return Err(Fail(
                    SHMFIFO_INVALID_PARAMETER_VALUE,
                    format!(
                        "attribute value is {} bytes long; at most {max_value}",
                        a.value_len
                    ),
                ));
            }
            attrs.push(MessageAttribute {
                // SAFETY: as above.
                name: unsafe { a.name.required("attribute name", MAX_ATTRIBUTE_NAME) }?,
                // SAFETY: as above.
                data_type: unsafe {
                    a.data_type
                        .required("attribute data type", MAX_ATTRIBUTE_NAME)
                }?,
                value: if a.value_len == 0 {
                    &[]
                } else {
                    // SAFETY: `value_len` (checked) readable bytes at `value` (checked non-NULL).
                    unsafe { std::slice::from_raw_parts(a.value, a.value_len) }
                },
            });
        }
    }
    Ok(())
}

/// One entry of a send batch.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct shmfifo_batch_entry {
    /// Entry id: 1–80 of `[A-Za-z0-9_-]`, unique in the batch.
    pub id: shmfifo_str,
    /// The message.
    pub message: shmfifo_send_message,
}

/// The outcome of one batch entry.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct shmfifo_batch_result {
    /// `SHMFIFO_OK` or the entry's error.
    pub code: shmfifo_result,
    /// The send result when `code` is `SHMFIFO_OK`.
    pub result: shmfifo_send_result,
}

/// A received message. String views point into the receive buffer.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct shmfifo_message {
    /// `Body`.
    pub body: shmfifo_str,
    /// `MessageGroupId`.
    pub group_id: shmfifo_str,
    /// `MessageDeduplicationId` (`data` NULL: none).
    pub dedup_id: shmfifo_str,
    /// `MessageId`, NUL-terminated.
    pub message_id: [c_char; 40],
    /// The receipt handle of this receive, NUL-terminated (pass it to delete or
    /// change-visibility, from any process).
    pub receipt_handle: [c_char; 48],
    /// `SequenceNumber`, decimal, NUL-terminated.
    pub sequence_number: [c_char; 40],
    /// `SentTimestamp`, ms since the Unix epoch.
    pub sent_timestamp_ms: u64,
    /// `ApproximateFirstReceiveTimestamp`, ms since the Unix epoch.
    pub first_receive_timestamp_ms: u64,
    /// `ApproximateReceiveCount`.
    pub receive_count: u32,
    /// Number of attributes.
    pub attribute_count: u32,
    /// The attributes (views into the buffer).
    pub attributes: *const shmfifo_attribute,
    /// `DeadLetterQueueSourceArn`: for a message moved to this (dead-letter) queue by a
    /// redrive policy, the path of the queue it came from (a view into the buffer; `data` NULL
    /// and `len` 0 otherwise, or when that queue was anonymous).
    pub dead_letter_source: shmfifo_str,
}

/// A new receive buffer (free it with [`shmfifo_receive_buffer_free`]). NULL only if the
/// library failed inside (a panic, which nothing here raises); an allocation that fails aborts
/// the process, as every Rust allocation does, rather than return NULL.
#[no_mangle]
pub extern "C" fn shmfifo_receive_buffer_new() -> *mut shmfifo_receive_buffer {
    catch_unwind(|| {
        Box::into_raw(Box::new(shmfifo_receive_buffer {
            rb: ReceiveBuffer::new(),
            attrs: Vec::new(),
            views: [(core::ptr::null(), 0); 10],
        }))
    })
    .unwrap_or(core::ptr::null_mut())
}

/// Frees a receive buffer (NULL is ignored); views into it become invalid.
///
/// # Safety
/// `b` must be NULL or a buffer from [`shmfifo_receive_buffer_new`], not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn shmfifo_receive_buffer_free(b: *mut shmfifo_receive_buffer) {
    if !b.is_null() {
        // SAFETY: it came from Box::into_raw and is handed back.
        let _ = catch_unwind(AssertUnwindSafe(|| drop(unsafe { Box::from_raw(b) })));
    }
}

/// One entry of a delete or change-visibility batch.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct shmfifo_handle_entry {
    /// Entry id: 1–80 of `[A-Za-z0-9_-]`, unique in the batch.
    pub id: shmfifo_str,
    /// The receipt handle.
    pub receipt: shmfifo_str,
    /// New visibility timeout, ms (change-visibility batches only).
    pub timeout_ms: u64,
}

/// Settings and approximate counters of a queue.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct shmfifo_queue_attributes {
    /// Visible messages.
    pub approximate_number_of_messages: u64,
    /// In-flight messages.
    pub approximate_number_of_messages_not_visible: u64,
    /// Delayed messages.
    pub approximate_number_of_messages_delayed: u64,
    /// Default visibility timeout, ms.
    pub visibility_timeout_ms: u64,
    /// Default receive wait, ms.
    pub receive_wait_ms: u64,
    /// Largest message, bytes.
    pub maximum_message_size: u32,
    /// Most participants.
    pub max_participants: u32,
    /// Creation time, ms since the Unix epoch.
    pub created_timestamp_ms: u64,
    /// Groups with messages now.
    pub active_groups: u64,
    /// Most groups at once: the group table grown to the size limit.
    pub max_groups: u64,
    /// Bytes of the arena's file in use (the base file and its added segments).
    pub arena_bytes: u64,
    /// 0 off, 1 queue, 2 message group.
    pub deduplication: u32,
    /// Content-based dedup (0 or 1).
    pub content_based_deduplication: u32,
    /// Dedup interval, ms.
    pub deduplication_interval_ms: u64,
    /// Dedup table capacity.
    pub dedup_entries: u64,
    /// Dedup entries in use.
    pub dedup_entries_in_use: u64,
    /// Queue delay (`DelaySeconds`, live), ms.
    pub delay_ms: u64,
    /// Retention period (`MessageRetentionPeriod`, live), ms.
    pub message_retention_period_ms: u64,
    /// In-flight limit.
    pub max_in_flight: u64,
    /// Messages received and not yet deleted, as counted for the in-flight limit.
    pub in_flight_count: u64,
    /// Receives that returned fewer messages because of the in-flight limit.
    pub in_flight_limit_hits: u64,
    /// Messages moved to the dead-letter queue over the queue's life.
    pub moved_to_dead_letter: u64,
    /// Messages removed by retention over the queue's life (counted when reclaimed).
    pub retention_expiries: u64,
    /// Redrive policy's `maxReceiveCount` (live); 0: no redrive policy.
    pub max_receive_count: u32,
    /// Redrive policy's dead-letter queue (live): its canonical path, NUL-terminated (at most
    /// 256 bytes); empty when there is no redrive policy.
    pub dead_letter_queue: [c_char; 257],
    /// Whether a dead receiver's messages are released at once: 0 or 1.
    pub release_on_death: u32,
    /// What a send does when the dedup table has no room (0 shorten the window, 1 refuse).
    pub dedup_overflow: u32,
    /// Dedup ids forgotten before their interval ended (lifetime count).
    pub dedup_evictions: u64,
    /// How long a dedup id is remembered now, ms: the interval, or less after evictions.
    pub effective_deduplication_interval_ms: u64,
    /// Messages quarantined because a corrupted word made them unreadable or their group's
    /// list unwalkable (lifetime count).
    pub quarantined_messages: u64,
    /// Groups rebuilt empty because their list could not be walked (lifetime count).
    pub quarantined_groups: u64,
    /// The queue's time on a test clock (ms since creation, plus 1); 0 on the real clock.
    pub test_clock_ms: u64,
    /// What bodies may hold: 0 SQS text, 1 any bytes (fixed at creation).
    pub body_mode: u32,
    /// The most bytes the arena's file may grow to (`shmfifo_config.size_limit`).
    /// `arena_bytes` is what it uses now: the base file and the segments its size classes
    /// added.
    pub size_limit_bytes: u64,
    /// Segments the size classes added over the queue's life.
    pub grows: u64,
    /// Groups the group table holds now, before it adds a table: `max_groups` is
    /// what it holds once grown to the size limit.
    pub group_capacity: u64,
}

/// A queue's lifetime counters, summed over every process that ever used it (each process
/// adds only to its own participant record: no shared contended line).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct shmfifo_counters {
    /// Messages enqueued by sends (duplicates excluded).
    pub sent: u64,
    /// Sends dropped as duplicates.
    pub duplicates: u64,
    /// Messages handed out by receives (replays of a receive attempt id excluded).
    pub received: u64,
    /// Successful deletes.
    pub deleted: u64,
    /// Messages received again after their visibility ended.
    pub visibility_expiries: u64,
    /// Messages moved to the dead-letter queue.
    pub moved_to_dead_letter: u64,
    /// Messages removed by retention.
    pub retention_expiries: u64,
    /// Receives cut short by the in-flight limit.
    pub in_flight_limit_hits: u64,
    /// Times a receiver slept on the futex.
    pub waits: u64,
    /// Times a producer woke sleeping receivers.
    pub wake_ups: u64,
    /// Retries caused by another participant.
    pub contention_retries: u64,
    /// Dead participants repaired and freed by recovery.
    pub participants_recovered: u64,
    /// Receives that returned no message (CloudWatch's `NumberOfEmptyReceives`).
    pub empty_receives: u64,
}

/// What a redrive did.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct shmfifo_redrive_report {
    /// Messages moved (sent to their destination and deleted here).
    pub moved: u64,
    /// Messages left here because they name no source queue and no destination was given,
    /// or because their source queue could not be opened (gone); they are visible again
    /// when the redrive returns. The messages of other sources still move.
    pub skipped: u64,
    /// 1 when the redrive stopped because it was cancelled, else 0.
    pub cancelled: u32,
}
