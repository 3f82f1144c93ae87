//! Settings structs and their defaults: queue creation, receive options, redrive options.

use std::time::Duration;

use shmfifo_core::{DedupOverflow, Deduplication, QueueConfig, RedrivePolicy};

use crate::{boundary::*, error::*};
// For the documentation's links only.
#[cfg(doc)]
use crate::queue::{shmfifo_queue_create, shmfifo_queue_redrive};

/// Queue settings for [`shmfifo_queue_create`]. Start from [`shmfifo_config_default`] and
/// change fields; every field is documented with its default there. A field of 0 or 1 takes
/// nothing else (`SHMFIFO_INVALID_CONFIG`), and an error names the field.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct shmfifo_config {
    /// Default visibility timeout, ms (default 30,000; 0–43,200,000).
    pub visibility_timeout_ms: u64,
    /// Default receive wait, ms (default 0; 0–20,000).
    pub receive_wait_ms: u64,
    /// Largest message (body + attributes), bytes (1,024–1,048,576; default 0: SQS's 1 MiB
    /// on a queue that may grow, whose base file is laid out for 256 KiB messages and takes
    /// larger ones in a class grown on demand; 256 KiB on one that may not, `size_limit` 0).
    pub maximum_message_size: u32,
    /// Slots of the smallest size class (default 8,192). A consumed message's slot is held as
    /// its group's list head until the group's next message is consumed or the group empties:
    /// a class that may not grow holds up to one message fewer per group with messages.
    pub max_messages: u32,
    /// Groups with messages the base group table holds (default 4,096); the table grows past
    /// them up to the size limit.
    pub max_groups: u32,
    /// Most handles with the queue open at once (default 64): a handle is a participant, one a
    /// process, shared by its threads.
    pub max_participants: u32,
    /// File permission bits (default 0600).
    pub mode: u32,
    /// 0: off (no dedup ids), 1: queue scope (default), 2: message-group scope.
    pub deduplication: u32,
    /// Dedup interval, ms (default 300,000; 1 ms – 14 days).
    pub deduplication_interval_ms: u64,
    /// Dedup table entries (default 16,384).
    pub dedup_entries: u32,
    /// Content-based dedup: 0 (default) or 1.
    pub content_based_deduplication: u32,
    /// Queue delay (`DelaySeconds`), ms (default 0; 0–900,000). Changeable later.
    pub delay_ms: u64,
    /// Retention period (`MessageRetentionPeriod`), ms (default 345,600,000: 4 days;
    /// 1 ms – 14 days). Changeable later.
    pub message_retention_period_ms: u64,
    /// Most messages received and not yet deleted (default 120,000; at least 1): at the limit
    /// receives return fewer messages.
    pub max_in_flight: u32,
    /// Redrive policy's `maxReceiveCount` (default 0: no redrive policy; 1–1,000, past it
    /// `SHMFIFO_INVALID_PARAMETER_VALUE`, SQS's code for a RedrivePolicy). Set together with
    /// `dead_letter_queue`.
    pub max_receive_count: u32,
    /// Redrive policy's dead-letter queue, a name or a path (default empty: none; `data` NULL
    /// or `len` 0; a path of at most 256 bytes, the redrive policy's room in the arena). It
    /// must exist, deduplicate and take messages as large as this queue's. Set together with
    /// `max_receive_count`. Changeable later.
    pub dead_letter_queue: shmfifo_str,
    /// 1 (default): a receiver process that dies has its in-flight messages made visible at
    /// once (about 100 ms later, once a receiver is idle) instead of at their visibility
    /// timeout; 0: they wait for it. A process that closes the queue keeps them in flight.
    pub release_on_death: u32,
    /// When the dedup table has no room for a new dedup id: 0 (default) forgets the oldest id
    /// of its window (the effective dedup window shortens, counted in
    /// `shmfifo_queue_attributes.dedup_evictions`); 1 refuses the send with
    /// `SHMFIFO_DEDUP_TABLE_FULL`.
    pub dedup_overflow: u32,
    /// 1: the queue runs on a test clock that only `shmfifo_queue_advance_clock` moves (a
    /// shmfifo extension for users' tests); 0 (default): the real clock. Fixed at creation.
    pub test_clock: u32,
    /// 0 (default): bodies are SQS text (S7, checked on send); 1: any bytes (a shmfifo
    /// extension for binary frames; its dead-letter queue must be binary too). Fixed at
    /// creation.
    pub body_mode: u32,
    /// Most bytes the queue's file may grow to as its size classes fill (default
    /// `UINT64_MAX`: 1 GiB, at most the base file plus a quarter of the file system's space
    /// left free beside it at creation; up to 1 TiB). A class whose slots are all taken adds a segment as large as all its
    /// slots so far (doubling them) until the next would pass the limit; only then does a send answer
    /// `SHMFIFO_SIZE_CLASS_FULL`. 0 (or any size at or below the base file): no growth.
    pub size_limit: u64,
}

/// The default settings (SQS's defaults where SQS has them).
#[no_mangle]
pub extern "C" fn shmfifo_config_default() -> shmfifo_config {
    shmfifo_config {
        visibility_timeout_ms: 30_000,
        receive_wait_ms: 0,
        maximum_message_size: 0,
        max_messages: shmfifo_core::DEFAULT_MAX_MESSAGES,
        max_groups: shmfifo_core::DEFAULT_MAX_GROUPS,
        max_participants: shmfifo_core::DEFAULT_MAX_PARTICIPANTS,
        mode: 0o600,
        deduplication: 1,
        deduplication_interval_ms: 300_000,
        dedup_entries: shmfifo_core::DEFAULT_DEDUP_ENTRIES,
        content_based_deduplication: 0,
        delay_ms: 0,
        message_retention_period_ms: 345_600_000,
        max_in_flight: 120_000,
        max_receive_count: 0,
        dead_letter_queue: shmfifo_str::ABSENT,
        release_on_death: 1,
        dedup_overflow: 0,
        test_clock: 0,
        body_mode: 0,
        size_limit: u64::MAX,
    }
}

/// Builds the Rust configuration of a C one.
///
/// # Safety
/// `c.dead_letter_queue` must be valid as documented on [`shmfifo_str`].
pub(crate) unsafe fn queue_config(c: &shmfifo_config) -> R<QueueConfig> {
    let dedup = match c.deduplication {
        0 => Deduplication::Off,
        1 => Deduplication::Queue,
        2 => Deduplication::MessageGroup,
        n => {
            return Err(Fail(
                SHMFIFO_INVALID_CONFIG,
                format!("invalid setting deduplication: {n} (0 off, 1 queue, 2 message group)"),
            ))
        }
    };
    let overflow = match c.dedup_overflow {
        0 => DedupOverflow::ShortenWindow,
        1 => DedupOverflow::Refuse,
        n => {
            return Err(Fail(
                SHMFIFO_INVALID_CONFIG,
                format!("invalid setting dedup_overflow: {n} (0 shorten the window, 1 refuse)"),
            ))
        }
    };
    let body_mode = match c.body_mode {
        0 => shmfifo_core::BodyMode::Text,
        1 => shmfifo_core::BodyMode::Binary,
        n => {
            return Err(Fail(
                SHMFIFO_INVALID_CONFIG,
                format!("invalid setting body_mode: {n} (0 text, 1 any bytes)"),
            ))
        }
    };
    // SAFETY: forwarded from the caller.
    let dlq = unsafe { c.dead_letter_queue.get("dead_letter_queue", MAX_PATH) }?
        .filter(|s| !s.is_empty());
    let mut cfg = QueueConfig::new()
        .visibility_timeout(Duration::from_millis(c.visibility_timeout_ms))
        .receive_message_wait_time(Duration::from_millis(c.receive_wait_ms))
        .max_messages(c.max_messages)
        .max_groups(c.max_groups)
        .max_participants(c.max_participants)
        .mode(c.mode)
        .deduplication(dedup)
        .deduplication_interval(Duration::from_millis(c.deduplication_interval_ms))
        .dedup_entries(c.dedup_entries)
        .dedup_overflow(overflow)
        .content_based_deduplication(flag(
            c.content_based_deduplication,
            "content_based_deduplication",
        )?)
        .delay(Duration::from_millis(c.delay_ms))
        .message_retention_period(Duration::from_millis(c.message_retention_period_ms))
        .max_in_flight(c.max_in_flight)
        .release_on_death(flag(c.release_on_death, "release_on_death")?)
        .test_clock(flag(c.test_clock, "test_clock")?)
        .body_mode(body_mode);
    if c.size_limit != u64::MAX {
        cfg = cfg.size_limit(c.size_limit);
    }
    if c.maximum_message_size != 0 {
        cfg = cfg.maximum_message_size(c.maximum_message_size);
    }
    match (dlq, c.max_receive_count) {
        (None, 0) => {}
        (Some(q), n) if n > 0 => cfg = cfg.redrive_policy(RedrivePolicy::new(q, n)),
        (None, _) => {
            return Err(Fail(
                SHMFIFO_INVALID_CONFIG,
                "invalid setting dead_letter_queue: empty, but max_receive_count is set \
                 (set both for a redrive policy, or neither)"
                    .into(),
            ))
        }
        (Some(_), _) => {
            return Err(Fail(
                SHMFIFO_INVALID_CONFIG,
                "invalid setting max_receive_count: 0, but dead_letter_queue is set \
                 (set both for a redrive policy, or neither)"
                    .into(),
            ))
        }
    }
    Ok(cfg)
}

/// A creation's error with the `shmfifo_config` field of a setting the core names by its Rust
/// builder method (`visibility_timeout` is `visibility_timeout_ms` here).
pub(crate) fn c_setting(e: shmfifo_core::Error) -> Fail {
    if let shmfifo_core::Error::InvalidConfig { setting, reason } = &e {
        let field = match *setting {
            "visibility_timeout" => "visibility_timeout_ms",
            "receive_message_wait_time" => "receive_wait_ms",
            "delay" => "delay_ms",
            "message_retention_period" => "message_retention_period_ms",
            "deduplication_interval" => "deduplication_interval_ms",
            _ => return e.into(),
        };
        return Fail(
            SHMFIFO_INVALID_CONFIG,
            format!("invalid setting {field}: {reason}"),
        );
    }
    e.into()
}

/// A 0-or-1 field of the config: anything else is refused, not read as "on".
fn flag(v: u32, field: &str) -> R<bool> {
    flag_or(v, SHMFIFO_INVALID_CONFIG, &format!("setting {field}"))
}

/// A 0-or-1 field (`what`: how the error names it); anything else is `code`, not read as
/// "on". The config's flags, and the receive options' `borrow`.
pub(crate) fn flag_or(v: u32, code: shmfifo_result, what: &str) -> R<bool> {
    match v {
        0 => Ok(false),
        1 => Ok(true),
        n => Err(Fail(code, format!("invalid {what}: {n} (0 or 1)"))),
    }
}

/// Receive options. Start from [`shmfifo_receive_options_default`].
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct shmfifo_receive_options {
    /// `MaxNumberOfMessages`, 1–10 (default 1).
    pub max_messages: u32,
    /// Visibility timeout of these messages, ms; negative (-1, the default): the queue's.
    pub visibility_timeout_ms: i64,
    /// Longest wait for a message, ms (0–20,000); negative (-1, the default): the queue's.
    /// This bounds the call: it never blocks longer.
    pub wait_time_ms: i64,
    /// `ReceiveRequestAttemptId` (`data` NULL: none), R11: a receive retried with the same id
    /// within 5 minutes returns the same messages and receipt handles and restarts their
    /// visibility, if none of them changed since; otherwise it is a fresh receive.
    pub attempt_id: shmfifo_str,
    /// 1: a borrowing receive: each message's `body` views the queue's memory
    /// instead of the buffer (no copy), readable while the queue is open and the message in
    /// flight for this receive; after reading, `shmfifo_verify` with its receipt handle says
    /// whether the bytes were still that message's. 0 (default): bodies are copied into the
    /// buffer. With `attempt_id`, a replay hands out the same bodies in place. Any other
    /// value is `SHMFIFO_INVALID_PARAMETER_VALUE`.
    pub borrow: u32,
}

/// The default receive options.
#[no_mangle]
pub extern "C" fn shmfifo_receive_options_default() -> shmfifo_receive_options {
    shmfifo_receive_options {
        max_messages: 1,
        visibility_timeout_ms: -1,
        wait_time_ms: -1,
        attempt_id: shmfifo_str::ABSENT,
        borrow: 0,
    }
}

/// Options of [`shmfifo_queue_redrive`]. Start from [`shmfifo_redrive_options_default`].
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct shmfifo_redrive_options {
    /// Where to move the messages: a queue name or path. Empty (default; `data` NULL or `len`
    /// 0): each message's source queue (its `dead_letter_source`).
    pub destination: shmfifo_str,
    /// Most messages moved per second; 0 (default): as fast as possible.
    pub max_per_second: u32,
    /// Most messages to move; 0 (default): until this queue has no visible message.
    pub limit: u64,
    /// Cancellation flag; NULL (default): none. While the redrive runs, the library polls
    /// `*cancel` (an atomic load, every millisecond) and, once it is nonzero, stops before the
    /// next message it takes up (a message it is already waiting to send under
    /// `max_per_second` is still moved), putting the rest of its batch back. Set it from
    /// another thread with an atomic store (C11 `atomic_store`, or
    /// `__atomic_store_n(&flag, 1, __ATOMIC_RELAXED)`). Already nonzero at the call: nothing is
    /// moved and the report says cancelled.
    pub cancel: *const i32,
}

/// The default redrive options: to each message's source, unlimited, not cancellable.
#[no_mangle]
pub extern "C" fn shmfifo_redrive_options_default() -> shmfifo_redrive_options {
    shmfifo_redrive_options {
        destination: shmfifo_str::ABSENT,
        max_per_second: 0,
        limit: 0,
        cancel: core::ptr::null(),
    }
}
