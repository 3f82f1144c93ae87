//! Queue configuration: SQS-style settings with documented defaults, validated into a geometry.

use std::time::Duration;

use crate::error::{Error, Result};
use crate::layout::{Geometry, MAX_CLASSES, MAX_ID_LEN};

mod redrive;
pub use redrive::parse_redrive_policy;

/// Largest `maximum_message_size` (S6: 1 MiB, like SQS since 2025).
pub const MAX_MESSAGE_SIZE_LIMIT: u32 = 1_048_576;
/// Smallest `maximum_message_size` (Q4).
pub const MIN_MESSAGE_SIZE_LIMIT: u32 = 1_024;
/// The largest message a queue that may grow lays its base file out for (SQS's default until
/// August 2025): a larger one, up to `MaximumMessageSize`, takes a slot of the class for the
/// largest messages, laid out empty and grown on demand (layout 15). A queue that may not grow
/// (`size_limit` 0) lays its base file out for its whole `MaximumMessageSize`.
pub const BASE_MESSAGE_SIZE: u32 = 262_144;

/// What a slot holds of a message beside its body and attributes: the dedup id, the
/// attributes' framing and the dead-letter source path (a moved message's): 464 bytes.
const STORED_OVERHEAD: u32 = MAX_ID_LEN as u32
    + (MAX_ATTRIBUTES * ATTRIBUTE_FRAMING) as u32
    + crate::layout::MAX_REDRIVE_PATH as u32;
/// Longest visibility timeout (V1: 12 hours).
pub const MAX_VISIBILITY_TIMEOUT: Duration = Duration::from_secs(43_200);
/// Longest receive wait (R1: 20 seconds).
pub const MAX_WAIT_TIME: Duration = Duration::from_secs(20);
/// Most message attributes per message (S8).
pub const MAX_ATTRIBUTES: usize = 10;
/// Bytes of framing per stored attribute (lengths).
pub const ATTRIBUTE_FRAMING: usize = 8;
/// Most participants an arena can have.
pub const MAX_PARTICIPANTS: u32 = 65_534;
/// Most active groups an arena can have.
pub const MAX_GROUPS: u32 = 1 << 23;
/// Most message slots an arena can have, over all classes.
pub const MAX_SLOTS: u64 = crate::layout::INDEX_SLOTS;

/// Longest dedup interval (14 days, SQS's longest retention).
pub const MAX_DEDUP_INTERVAL: Duration = Duration::from_secs(14 * 24 * 3600);
/// Most dedup table entries.
pub const MAX_DEDUP_ENTRIES: u32 = 1 << 26;
/// Longest queue delay (L1: 15 minutes).
pub const MAX_DELAY: Duration = Duration::from_secs(900);
/// Longest retention period (T1: 14 days).
pub const MAX_RETENTION: Duration = Duration::from_secs(14 * 24 * 3600);
/// Most ReceiveRequestAttemptId records (R11).
pub const MAX_ATTEMPT_ENTRIES: u32 = 1 << 20;
/// Most `maxReceiveCount` of a redrive policy (X1).
pub const MAX_RECEIVE_COUNT: u32 = 1000;
/// Default `max_messages`: slots of the smallest size class. With the other defaults a queue's
/// file is 16.7 MiB, so three queues fit in a container's default 64 MiB `/dev/shm`.
pub const DEFAULT_MAX_MESSAGES: u32 = 8_192;
/// Default `dedup_entries`: 1.1 MiB of table (72 B each: 64 B of entry and the high half of the
/// key's 128-bit hash, layout 15) in the base file, every id of the last
/// 5 minutes kept up to 54 new ids a second; beyond that the table grows (layout 14) up to the
/// size limit, and only there does the window shorten (`DedupOverflow::ShortenWindow`).
pub const DEFAULT_DEDUP_ENTRIES: u32 = 16_384;
/// Default `size_limit`: how far a queue's file may grow as its size classes fill (1 GiB),
/// lowered at creation to the base file plus a quarter of the file system's space left free
/// beside it ([`default_size_limit`]). With it a default queue holds about 2 million small
/// messages (2,097,152: the small class's eighth segment; a ninth would pass the limit) where
/// its base file holds 8,192; in a container's default 64 MiB `/dev/shm` the first default
/// queue may grow by 11.8 MiB (32,768 small slots in all, four times its base file's, and 1 MiB
/// messages).
pub const DEFAULT_SIZE_LIMIT: u64 = 1 << 30;

/// The size limit a queue gets when its config sets none: its base file of `base` bytes plus a
/// quarter of what a file system with `free` bytes free leaves beside it (`None`: unknown, no
/// lowering), at most [`DEFAULT_SIZE_LIMIT`]. A share of the space beside the base file, not of
/// all of it, so that a queue in a small `/dev/shm` (a container's 64 MiB) may still grow: a
/// quarter of 64 MiB is less than a default base file of 16.7 MiB. Growth takes its segments
/// only as classes fill, each allocated before it is published (`NoSpace` where the file system
/// is full by then), so the limit is a cap against one queue taking every byte, not a
/// reservation.
///
/// ```
/// use shmfifo::{default_size_limit, QueueConfig, DEFAULT_SIZE_LIMIT};
/// let base = QueueConfig::new().arena_size()?; // 16.7 MiB
/// // An empty 64 MiB /dev/shm (a container's default): 28.5 MiB.
/// assert_eq!(default_size_limit(base, Some(64 << 20)), base + ((64 << 20) - base) / 4);
/// // A full one: the base file, no growth.
/// assert_eq!(default_size_limit(base, Some(0)), base);
/// // Plenty of room, or none known: 1 GiB.
/// assert_eq!(default_size_limit(base, Some(1 << 40)), DEFAULT_SIZE_LIMIT);
/// assert_eq!(default_size_limit(base, None), DEFAULT_SIZE_LIMIT);
/// # Ok::<(), shmfifo::Error>(())
/// ```
pub fn default_size_limit(base: u64, free: Option<u64>) -> u64 {
    match free {
        None => DEFAULT_SIZE_LIMIT,
        Some(free) => base
            .saturating_add(free.saturating_sub(base) / 4)
            .min(DEFAULT_SIZE_LIMIT),
    }
}
/// Largest `size_limit` (1 TiB).
pub const MAX_SIZE_LIMIT: u64 = 1 << 40;
/// Default `max_groups`: groups with messages at once.
pub const DEFAULT_MAX_GROUPS: u32 = 4_096;
/// Default `max_participants`: processes with the queue open at once.
pub const DEFAULT_MAX_PARTICIPANTS: u32 = 64;

/// A redrive policy (X1): after `max_receive_count` receives, the receive that would deliver
/// a message again moves it to the dead-letter queue instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedrivePolicy {
    /// The dead-letter queue: a name under `/dev/shm`, or a path (containing `/`).
    pub dead_letter_queue: String,
    /// `maxReceiveCount`, 1 to 1,000.
    pub max_receive_count: u32,
}

impl RedrivePolicy {
    /// A policy naming `dead_letter_queue` (a name or a path) and `maxReceiveCount`.
    pub fn new(dead_letter_queue: impl Into<String>, max_receive_count: u32) -> Self {
        RedrivePolicy {
            dead_letter_queue: dead_letter_queue.into(),
            max_receive_count,
        }
    }
}

/// Settings that can be changed on a queue in use, from any process (SQS's mutable
/// attributes); see [`crate::Queue::set_attributes`]. Unset fields are left as they are.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueueSettings {
    pub(crate) visibility_timeout: Option<Duration>,
    pub(crate) delay: Option<Duration>,
    pub(crate) message_retention_period: Option<Duration>,
    pub(crate) content_based_deduplication: Option<bool>,
    pub(crate) redrive_policy: Option<Option<RedrivePolicy>>,
    pub(crate) maximum_message_size: Option<u32>,
    pub(crate) receive_message_wait_time: Option<Duration>,
}

impl QueueSettings {
    /// No change.
    pub fn new() -> Self {
        Self::default()
    }
    /// The default visibility timeout (V1), up to 12 hours.
    pub fn visibility_timeout(mut self, d: Duration) -> Self {
        self.visibility_timeout = Some(d);
        self
    }
    /// The queue delay (L1), up to 15 minutes; retroactive.
    pub fn delay(mut self, d: Duration) -> Self {
        self.delay = Some(d);
        self
    }
    /// The retention period (T1), 1 ms to 14 days; applies to messages already queued.
    pub fn message_retention_period(mut self, d: Duration) -> Self {
        self.message_retention_period = Some(d);
        self
    }
    /// Content-based deduplication (D5).
    pub fn content_based_deduplication(mut self, on: bool) -> Self {
        self.content_based_deduplication = Some(on);
        self
    }
    /// Sets (`Some`) or removes (`None`) the redrive policy (X1).
    pub fn redrive_policy(mut self, p: Option<RedrivePolicy>) -> Self {
        self.redrive_policy = Some(p);
        self
    }
    /// `MaximumMessageSize` (S6): 1,024 bytes up to what the arena's largest size class was
    /// made for ([`crate::Queue::maximum_message_size_limit`]); messages already queued stay.
    pub fn maximum_message_size(mut self, bytes: u32) -> Self {
        self.maximum_message_size = Some(bytes);
        self
    }
    /// `ReceiveMessageWaitTimeSeconds` (R5): the wait of receives that give none, up to 20 s.
    pub fn receive_message_wait_time(mut self, d: Duration) -> Self {
        self.receive_message_wait_time = Some(d);
        self
    }
}

/// Deduplication scope (D2), or no deduplication at all (a shmfifo extension).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Deduplication {
    /// A dedup id is deduplicated across the whole queue (SQS `DeduplicationScope=queue`).
    #[default]
    Queue,
    /// A dedup id is deduplicated within its message group (SQS
    /// `DeduplicationScope=messageGroup`).
    MessageGroup,
    /// No dedup table: sends need no dedup id, and a dedup id is rejected (as SQS rejects one
    /// on a queue type without deduplication, S9). For callers who want the last nanoseconds.
    Off,
}

/// What a message body may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub enum BodyMode {
    /// SQS's rule (S7): text in the XML character set (`#x9 | #xA | #xD | #x20–#xD7FF |
    /// #xE000–#xFFFD | #x10000–#x10FFFF`), checked on every send.
    #[default]
    Text,
    /// Any bytes (a shmfifo extension for IPC users moving binary frames): no character check;
    /// received bodies are bytes ([`crate::Message::body_bytes`]). Its dead-letter queue must
    /// be binary too.
    Binary,
}

/// What a send does when the dedup table has no room for its id: every entry the id may use
/// holds an id accepted within the dedup interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DedupOverflow {
    /// Forget the oldest id of those entries (its interval ends early) and accept the send, as
    /// SQS would. The effective window shortens; evictions are counted and the window is
    /// reported (`QueueAttributes::dedup_evictions` and
    /// `effective_deduplication_interval`, `shmfifo stat`, the Prometheus output), never
    /// silent. A duplicate within the effective window is still caught.
    #[default]
    ShortenWindow,
    /// Refuse the send with `DedupTableFull` rather than shorten the window (the strict
    /// behaviour before layout 6: size `dedup_entries` as sends per second × interval).
    Refuse,
}

/// Settings of a queue at its creation (those the table marks "changeable later" can be changed
/// live through [`crate::Queue::set_attributes`]). Names follow SQS's attributes.
///
/// | setting | default | range |
/// |---|---|---|
/// | `visibility_timeout` | 30 s | 0 – 12 h, ms precision; changeable later |
/// | `receive_message_wait_time` | 0 s | 0 – 20 s; changeable later |
/// | `maximum_message_size` | 1,048,576 B (SQS's default since August 2025; see [`QueueConfig::message_size`]) | 1,024 – 1,048,576 B; changeable later, up to the largest size class the file was laid out for (`Queue::maximum_message_size_limit`). A queue that may grow lays its base file out for messages up to 256 KiB ([`BASE_MESSAGE_SIZE`]) and takes larger ones in a class grown on demand; a queue with a `size_limit` of 0 defaults to 256 KiB (its base file holds the whole size: 23.7 MiB at 1 MiB, 16.7 MiB at 256 KiB), one with explicit `size_classes` to what the largest holds |
/// | `max_messages` | 8,192 | slots of the smallest size class (≤ 192 B payload); each larger class (4× the slot: payload and 64 B header) gets a quarter as many, at least 4 |
/// | `size_limit` | 1 GiB, at most the base file plus a quarter of the file system's space left free beside it at creation ([`default_size_limit`]: 28.5 MiB in an empty 64 MiB `/dev/shm`) | the file's most bytes, up to 1 TiB: a size class whose slots are all taken adds a segment as large as all its slots so far (doubling them) until the next would pass it (layout 13); a limit at or below the base file means no growth |
/// | `max_groups` | 4,096 | groups with messages at once that the base group table holds, 1 – 8,388,608; the table grows past them up to `size_limit` (`QueueAttributes::max_groups`: the ceiling, about a million by default) |
/// | `max_participants` | 64 | processes (handles) with the queue open at once, 1 – 65,534 |
/// | `mode` | `0o600` | file permissions (owner-only by default). The library opens only files its own user owns, or a uid listed in `SHMFIFO_TRUSTED_UIDS` owns (`Error::UntrustedFile` otherwise): wider bits matter to trusted uids and to `shmfifo serve`, which acts with each client's own access |
/// | `deduplication` | `Queue` | `Queue`, `MessageGroup` (D2) or `Off` (no table, no dedup ids) |
/// | `deduplication_interval` | 5 min | 1 ms – 14 days (D1) |
/// | `dedup_entries` | 16,384 | dedup ids the base file remembers at once, rounded up to a power of two, 1 – 2^26; 72 B each (64 B of entry, 8 B of the key's hash; either scope). A new id takes a free entry within 16 of its home in one of the tables; when none is free the table grows (a table as large as all before it) while `size_limit` allows; at the limit an id looks 256 entries from its home, shared by the tables, at least 16 a table (with `Refuse`, the whole table), then `dedup_overflow` decides |
/// | `dedup_overflow` | `ShortenWindow` | `ShortenWindow`: evict the oldest of those ids (counted; the effective window is reported); `Refuse`: fail the send with `DedupTableFull` |
/// | `content_based_deduplication` | `false` | dedup id = SHA-256 of the body when none is given (D5); changeable later |
/// | `per_message_group_throughput` | `false` | SQS's `FifoThroughputLimit=perMessageGroupId` (TP2), with `MessageGroup` deduplication only; kept and reported, no effect locally |
/// | `delay` | 0 | 0 – 15 min, ms precision (L1); changeable later, retroactively |
/// | `message_retention_period` | 4 days | 1 ms – 14 days (T1; SQS's minimum is 1 min); changeable later |
/// | `max_in_flight` | 120,000 | messages received and not yet deleted (R8); at the limit receives return fewer messages. Free when it is at least the slot count |
/// | `redrive_policy` | none | dead-letter queue and `maxReceiveCount` (X1); changeable later |
/// | `attempt_entries` | 1,024 | ReceiveRequestAttemptId records (R11), 384 B each, kept 5 min; a record that finds no room (8 entries searched) is not kept |
/// | `body_mode` | `Text` | `Text`: SQS's character rule (S7); `Binary`: any bytes (an extension) |
/// | `release_on_death` | `true` | a receiver process that dies (killed, crashed; not one that closes the queue) has its in-flight messages made visible at once, within about 100 ms once a receiver is idle, instead of at their visibility timeout. Turn it off if receipt handles outlive their receiving process (handed to another process that deletes them) |
///
/// A consumed message's slot stays in use as its group's list head until the group's next
/// message is consumed or the group empties: a class of N slots always holds N messages minus
/// one per group whose head was consumed (at most one per group with messages).
///
/// `visibility_timeout` can be changed later too (see [`crate::Queue::set_attributes`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueConfig {
    pub(crate) visibility_timeout: Duration,
    pub(crate) receive_message_wait_time: Duration,
    /// `None`: the default ([`QueueConfig::message_size`]).
    pub(crate) maximum_message_size: Option<u32>,
    pub(crate) max_messages: u32,
    pub(crate) size_classes: Option<Vec<(u32, u32)>>,
    pub(crate) size_limit: Option<u64>,
    pub(crate) max_groups: u32,
    pub(crate) max_participants: u32,
    pub(crate) mode: u32,
    pub(crate) deduplication: Deduplication,
    pub(crate) deduplication_interval: Duration,
    pub(crate) dedup_entries: u32,
    pub(crate) dedup_overflow: DedupOverflow,
    pub(crate) content_based_deduplication: bool,
    pub(crate) per_message_group_throughput: bool,
    pub(crate) delay: Duration,
    pub(crate) message_retention_period: Duration,
    pub(crate) max_in_flight: u32,
    pub(crate) redrive_policy: Option<RedrivePolicy>,
    pub(crate) attempt_entries: u32,
    pub(crate) release_on_death: bool,
    pub(crate) test_clock: bool,
    pub(crate) body_mode: BodyMode,
}

impl Default for QueueConfig {
    fn default() -> Self {
        QueueConfig {
            visibility_timeout: Duration::from_secs(30),
            receive_message_wait_time: Duration::ZERO,
            // SQS's 1 MiB since August 2025 where the queue may grow (Q4): `message_size`.
            maximum_message_size: None,
            max_messages: DEFAULT_MAX_MESSAGES,
            size_classes: None,
            size_limit: None,
            max_groups: DEFAULT_MAX_GROUPS,
            max_participants: DEFAULT_MAX_PARTICIPANTS,
            mode: 0o600,
            deduplication: Deduplication::Queue,
            deduplication_interval: Duration::from_secs(300),
            dedup_entries: DEFAULT_DEDUP_ENTRIES,
            dedup_overflow: DedupOverflow::ShortenWindow,
            content_based_deduplication: false,
            per_message_group_throughput: false,
            delay: Duration::ZERO,
            message_retention_period: Duration::from_secs(345_600),
            max_in_flight: 120_000,
            redrive_policy: None,
            attempt_entries: 1024,
            release_on_death: true,
            test_clock: false,
            body_mode: BodyMode::Text,
        }
    }
}

impl QueueConfig {
    /// The defaults (see the table above).
    pub fn new() -> Self {
        Self::default()
    }
    /// Default visibility timeout of received messages (SQS `VisibilityTimeout`).
    pub fn visibility_timeout(mut self, d: Duration) -> Self {
        self.visibility_timeout = d;
        self
    }
    /// Default long-poll wait of `receive` (SQS `ReceiveMessageWaitTimeSeconds`).
    pub fn receive_message_wait_time(mut self, d: Duration) -> Self {
        self.receive_message_wait_time = d;
        self
    }
    /// Largest message (body plus attributes) in bytes (SQS `MaximumMessageSize`).
    pub fn maximum_message_size(mut self, bytes: u32) -> Self {
        self.maximum_message_size = Some(bytes);
        self
    }
    /// Slots of the smallest size class; larger classes are derived (see the table).
    pub fn max_messages(mut self, n: u32) -> Self {
        self.max_messages = n;
        self
    }
    /// Explicit size classes: `(payload bytes, slots)`, ascending, at most 8; the last must
    /// hold a message of `maximum_message_size` (plus up to 464 B: a 128 B dedup id, 80 B of
    /// attribute framing and a 256 B dead-letter source path, see
    /// [`QueueConfig::stored_size_limit`]). A class of 0 slots starts empty and
    /// adds its first segment (1 slot, then 2, 4, …) when a message needs it: it costs nothing
    /// in the base file, and needs a size limit with room for it.
    pub fn size_classes(mut self, classes: Vec<(u32, u32)>) -> Self {
        self.size_classes = Some(classes);
        self
    }
    /// Most bytes the queue's file may grow to as its size classes fill (default: see the
    /// table). A class whose every slot is taken adds a segment as large as all its slots so far, reserved
    /// with `fallocate`, as long as the file stays within the limit; only then does a send
    /// answer [`crate::Error::SizeClassFull`]. A limit at or below the base file (the size
    /// [`QueueConfig::geometry`] lays out) keeps the queue at its base size.
    pub fn size_limit(mut self, bytes: u64) -> Self {
        self.size_limit = Some(bytes);
        self
    }
    /// Groups with messages the base group table holds (layout 16: the table grows past them,
    /// a table at a time, up to [`QueueConfig::size_limit`]; only where it may not grow does a
    /// send of a new group answer [`crate::Error::GroupLimitReached`]).
    pub fn max_groups(mut self, n: u32) -> Self {
        self.max_groups = n;
        self
    }
    /// Most processes (queue handles) at once.
    pub fn max_participants(mut self, n: u32) -> Self {
        self.max_participants = n;
        self
    }
    /// Permission bits of the arena file.
    pub fn mode(mut self, mode: u32) -> Self {
        self.mode = mode;
        self
    }

    /// Deduplication scope, or `Off` (see [`Deduplication`]).
    pub fn deduplication(mut self, d: Deduplication) -> Self {
        self.deduplication = d;
        self
    }
    /// How long an accepted dedup id makes later sends with the same id duplicates (D1).
    pub fn deduplication_interval(mut self, d: Duration) -> Self {
        self.deduplication_interval = d;
        self
    }
    /// How many dedup ids the table remembers at once (rounded up to a power of two).
    pub fn dedup_entries(mut self, n: u32) -> Self {
        self.dedup_entries = n;
        self
    }
    /// What a send does when the dedup table has no room for its id (see [`DedupOverflow`]).
    pub fn dedup_overflow(mut self, o: DedupOverflow) -> Self {
        self.dedup_overflow = o;
        self
    }
    /// A test clock (a shmfifo extension, off by default): the queue's time stands still
    /// until a process moves it with [`crate::Queue::advance_clock`], so visibility timeouts,
    /// delays, retention, the dedup interval and attempt-id windows run in microseconds in a
    /// test. Waits (a long poll's wait time, the wait for a busy claim) stay in real time.
    /// Fixed at creation: a queue with a real clock can never be switched to a test clock.
    pub fn test_clock(mut self, on: bool) -> Self {
        self.test_clock = on;
        self
    }
    /// What bodies may hold: SQS's text (the default) or any bytes ([`BodyMode`]). Fixed at
    /// creation.
    pub fn body_mode(mut self, mode: BodyMode) -> Self {
        self.body_mode = mode;
        self
    }
    /// Content-based deduplication (SQS `ContentBasedDeduplication`, D5): a send without a
    /// dedup id uses the lowercase hex SHA-256 of its body.
    pub fn content_based_deduplication(mut self, on: bool) -> Self {
        self.content_based_deduplication = on;
        self
    }
    /// SQS's `FifoThroughputLimit=perMessageGroupId` (TP2, high-throughput mode; with
    /// `Deduplication::MessageGroup` only), fixed at creation. It changes nothing locally
    /// (there is no throughput quota), and is kept so that the queue's attributes read back
    /// what was set (`CreateQueue` with the same attributes again is then the same queue, Q7).
    pub fn per_message_group_throughput(mut self, on: bool) -> Self {
        self.per_message_group_throughput = on;
        self
    }

    /// Bytes a message of `maximum_message_size` may need in a slot: body and attributes, the
    /// dedup id, the attribute framing and the dead-letter source path (a moved message's).
    pub fn stored_size_limit(&self) -> u32 {
        self.message_size() + STORED_OVERHEAD
    }

    /// The `MaximumMessageSize` the queue is created with: the one set, else SQS's default,
    /// 1 MiB, on a queue that may grow (its base file laid out for 256 KiB,
    /// [`BASE_MESSAGE_SIZE`]; larger messages take a class grown on demand). A queue whose base
    /// file is all it has (`size_limit` 0) defaults to 256 KiB, and one with explicit size
    /// classes to the largest message its largest class holds (at most 1 MiB): a default that
    /// lays out no more than they do.
    pub fn message_size(&self) -> u32 {
        if let Some(m) = self.maximum_message_size {
            return m;
        }
        match &self.size_classes {
            Some(c) => c
                .iter()
                .map(|&(cap, _)| cap)
                .max()
                .unwrap_or(0)
                .saturating_sub(STORED_OVERHEAD)
                .clamp(MIN_MESSAGE_SIZE_LIMIT, MAX_MESSAGE_SIZE_LIMIT),
            None if self.size_limit == Some(0) => BASE_MESSAGE_SIZE,
            None => MAX_MESSAGE_SIZE_LIMIT,
        }
    }
    /// Queue delay (SQS `DelaySeconds`, L1).
    pub fn delay(mut self, d: Duration) -> Self {
        self.delay = d;
        self
    }
    /// Retention period (SQS `MessageRetentionPeriod`, T1).
    pub fn message_retention_period(mut self, d: Duration) -> Self {
        self.message_retention_period = d;
        self
    }
    /// In-flight limit (R8).
    pub fn max_in_flight(mut self, n: u32) -> Self {
        self.max_in_flight = n;
        self
    }
    /// ReceiveRequestAttemptId records kept (R11), rounded up to a power of two; 0 keeps none
    /// (every retry is then a fresh receive).
    pub fn attempt_entries(mut self, n: u32) -> Self {
        self.attempt_entries = n;
        self
    }
    /// Whether a dead receiver's in-flight messages are made visible at once (default `true`)
    /// rather than at their visibility timeout. Only death counts: a process that drops its
    /// `Queue` leaves its messages in flight.
    pub fn release_on_death(mut self, on: bool) -> Self {
        self.release_on_death = on;
        self
    }
    /// Redrive policy (X1); the dead-letter queue must exist when the queue is created.
    pub fn redrive_policy(mut self, p: RedrivePolicy) -> Self {
        self.redrive_policy = Some(p);
        self
    }

    /// Bytes of the queue's base file, all of it allocated at creation (on a tmpfs such as
    /// `/dev/shm` that is memory, counted against the file system's size): 16.7 MiB with the
    /// defaults; it grows from there up to [`QueueConfig::size_limit`]. Fails as [`crate::Queue::create`] would on settings out of range.
    ///
    /// ```
    /// use shmfifo::QueueConfig;
    /// let bytes = QueueConfig::new().arena_size()?;
    /// assert!(3 * bytes <= 64 << 20); // three default queues fit in Docker's 64 MiB /dev/shm
    /// # Ok::<(), shmfifo::Error>(())
    /// ```
    pub fn arena_size(&self) -> Result<u64> {
        let g = self.geometry()?;
        g.offsets().map(|o| o.total).ok_or(Error::InvalidConfig {
            setting: "size_classes",
            reason: "the arena would be larger than 2^64 bytes".into(),
        })
    }

    /// Checks every setting as [`crate::Queue::create`] would, without creating anything: the
    /// error `create` would return for settings out of range or in conflict
    /// ([`Error::InvalidConfig`] or [`Error::InvalidParameterValue`], naming the setting).
    ///
    /// ```
    /// use shmfifo::{Deduplication, Error, QueueConfig};
    /// assert!(QueueConfig::new().validate().is_ok());
    /// let both = QueueConfig::new()
    ///     .deduplication(Deduplication::Off)
    ///     .content_based_deduplication(true);
    /// assert!(matches!(
    ///     both.validate(),
    ///     Err(Error::InvalidConfig { setting: "content_based_deduplication", .. })
    /// ));
    /// ```
    pub fn validate(&self) -> Result<()> {
        self.geometry().map(drop)
    }

    /// Validates the settings and derives the arena geometry.
    pub(crate) fn geometry(&self) -> Result<Geometry> {
        self.geometry_within(None)
    }

    /// [`QueueConfig::geometry`] for a file system with `free` bytes free (`None`: unknown).
    /// Where no size limit was set, the default is the base file plus a quarter of the space
    /// left free beside it, at most [`DEFAULT_SIZE_LIMIT`] ([`default_size_limit`]).
    pub(crate) fn geometry_within(&self, free: Option<u64>) -> Result<Geometry> {
        let bad = |setting, reason: String| Err(Error::InvalidConfig { setting, reason });
        check_live(
            Some(self.visibility_timeout),
            Some(self.delay),
            Some(self.message_retention_period),
        )?;
        if self.receive_message_wait_time > MAX_WAIT_TIME {
            return bad("receive_message_wait_time", "at most 20 seconds".into());
        }
        let message_size = self.message_size();
        if !(MIN_MESSAGE_SIZE_LIMIT..=MAX_MESSAGE_SIZE_LIMIT).contains(&message_size) {
            return bad("maximum_message_size", "1,024 to 1,048,576 bytes".into());
        }
        if self.max_groups == 0 || self.max_groups > MAX_GROUPS {
            return bad("max_groups", format!("1 to {MAX_GROUPS}"));
        }
        if self.max_participants == 0 || self.max_participants > MAX_PARTICIPANTS {
            return bad("max_participants", format!("1 to {MAX_PARTICIPANTS}"));
        }
        if self.attempt_entries > MAX_ATTEMPT_ENTRIES {
            return bad("attempt_entries", format!("at most {MAX_ATTEMPT_ENTRIES}"));
        }
        if self.max_in_flight == 0 {
            return bad("max_in_flight", "at least 1".into());
        }
        if self.mode & !0o777 != 0 {
            return bad("mode", "permission bits only (0o000 to 0o777)".into());
        }
        if self.deduplication != Deduplication::Off {
            if self.deduplication_interval < Duration::from_millis(1)
                || self.deduplication_interval > MAX_DEDUP_INTERVAL
            {
                return bad("deduplication_interval", "1 ms to 14 days".into());
            }
            if self.dedup_entries == 0 || self.dedup_entries > MAX_DEDUP_ENTRIES {
                return bad("dedup_entries", format!("1 to {MAX_DEDUP_ENTRIES}"));
            }
        } else if self.content_based_deduplication {
            return bad(
                "content_based_deduplication",
                "needs deduplication (it is Off)".into(),
            );
        }
        if self.per_message_group_throughput && self.deduplication != Deduplication::MessageGroup {
            return bad(
                "per_message_group_throughput",
                "Invalid value for the parameter FifoThroughputLimit. Reason: perMessageGroupId is allowed only when DeduplicationScope is messageGroup.".into(),
            );
        }
        let need = self.stored_size_limit();
        let classes = match &self.size_classes {
            Some(c) => c.clone(),
            None => {
                if self.max_messages == 0 {
                    return bad("max_messages", "at least 1".into());
                }
                // The base file's classes: up to `BASE_MESSAGE_SIZE` on a queue that may grow
                // (larger messages take the on-demand class below), up to `need` otherwise.
                let laid_out = if self.size_limit != Some(0) {
                    need.min(need - message_size + BASE_MESSAGE_SIZE)
                } else {
                    need
                };
                let mut v = Vec::new();
                let mut cap: u64 = 192;
                let mut k = 0;
                loop {
                    let slots = (self.max_messages >> (2 * k)).max(4);
                    if cap >= u64::from(laid_out) {
                        v.push((laid_out, slots));
                        break;
                    }
                    v.push((cap as u32, slots));
                    cap = (cap + 64) * 4 - 64;
                    k += 1;
                }
                // A queue that may grow can take any `MaximumMessageSize` SQS accepts later
                // (`set_attributes`): a class for the largest, empty until a message needs it
                // (layout 15), costing nothing in the base file.
                let largest = need - message_size + MAX_MESSAGE_SIZE_LIMIT;
                if self.size_limit != Some(0) && laid_out < largest && v.len() < MAX_CLASSES {
                    v.push((largest, 0));
                }
                v
            }
        };
        if classes.is_empty() || classes.len() > MAX_CLASSES {
            return bad("size_classes", format!("1 to {MAX_CLASSES} classes"));
        }
        for w in classes.windows(2) {
            if w[1].0 <= w[0].0 {
                return bad("size_classes", "payload sizes must ascend".into());
            }
        }
        if classes.iter().any(|&(cap, _)| cap == 0) {
            return bad("size_classes", "every class needs a size".into());
        }
        if self.size_classes.is_some()
            && self.size_limit == Some(0)
            && classes.iter().any(|&(_, n)| n == 0)
        {
            return bad(
                "size_classes",
                "a class of 0 slots starts empty and grows on demand, which a size_limit of 0 forbids"
                    .into(),
            );
        }
        if classes.last().map(|c| c.0) < Some(need) {
            return bad(
                "size_classes",
                format!("the largest class must hold {need} bytes for maximum_message_size"),
            );
        }
        let total: u64 = classes.iter().map(|&(_, n)| u64::from(n)).sum();
        if total > MAX_SLOTS {
            return bad("max_messages", format!("at most {MAX_SLOTS} slots in all"));
        }
        if self.size_limit.is_some_and(|l| l > MAX_SIZE_LIMIT) {
            return bad("size_limit", "at most 1 TiB".into());
        }
        let group_slots = (u64::from(self.max_groups) * 2).next_power_of_two() as u32;
        let mut g = Geometry {
            participants: self.max_participants,
            max_groups: self.max_groups,
            group_slots,
            ready_slots: group_slots,
            classes,
            dedup_slots: match self.deduplication {
                Deduplication::Off => 0,
                _ => self.dedup_entries.next_power_of_two(),
            },
            dedup_key_words: crate::layout::DEDUP_KEY_WORDS,
            attempt_slots: if self.attempt_entries == 0 {
                0
            } else {
                self.attempt_entries.next_power_of_two()
            },
            class_growth: Vec::new(),
            size_limit: 0,
            dedup_growth: 0,
            group_growth: 0,
        };
        let Some(base) = g.offsets().map(|o| o.total) else {
            return bad(
                "size_classes",
                "the arena would be larger than 2^64 bytes".into(),
            );
        };
        g.size_limit = self
            .size_limit
            .unwrap_or_else(|| default_size_limit(base, free))
            .min(MAX_SIZE_LIMIT)
            .max(base);
        g.derive_growth(base);
        if let Some(k) = (0..g.classes.len()).find(|&k| g.max_slots(k) == 0) {
            if self.size_classes.is_some() {
                return bad(
                    "size_classes",
                    format!(
                        "class {k} has 0 slots and the size limit ({} bytes) leaves no room for its first segment",
                        g.size_limit
                    ),
                );
            }
            // The default on-demand class, where the limit leaves no room for one of its
            // slots: left out (`MaximumMessageSize` then stays within the other classes).
            g.classes.truncate(k);
            g.derive_growth(base);
        }
        Ok(g)
    }
}

#[cfg(all(test, not(shmfifo_loom)))]
mod tests;

/// Why the value of SQS attribute `name` (a duration, or `MaximumMessageSize`'s bytes as
/// `bytes`) is out of its range, in SQS's units; `None` where it is in range or `name` has no
/// range. What the SQS-named paths check as they read each attribute, so that the error names
/// the attribute (the config's own checks, later, name its field: "invalid setting
/// visibility_timeout").
pub(crate) fn sqs_out_of_range(name: &str, value: Duration, bytes: u64) -> Option<&'static str> {
    match name {
        "VisibilityTimeout" | "VisibilityTimeoutMs" if value > MAX_VISIBILITY_TIMEOUT => {
            Some("at most 43,200 seconds (12 hours)")
        }
        "DelaySeconds" | "DelayMs" if value > MAX_DELAY => Some("at most 900 seconds (15 minutes)"),
        "MessageRetentionPeriod" | "MessageRetentionPeriodMs"
            if value < Duration::from_millis(1) || value > MAX_RETENTION =>
        {
            Some("at most 1,209,600 seconds (14 days), at least 1 ms")
        }
        "ReceiveMessageWaitTimeSeconds" if value > MAX_WAIT_TIME => {
            Some("Must be between 0 and 20 seconds.")
        }
        "MaximumMessageSize"
            if !(u64::from(MIN_MESSAGE_SIZE_LIMIT)..=u64::from(MAX_MESSAGE_SIZE_LIMIT))
                .contains(&bytes) =>
        {
            Some("1,024 to 1,048,576 bytes")
        }
        _ => None,
    }
}

/// The range checks of the settings that can change on a live queue (visibility timeout,
/// delay, retention), shared by creation ([`QueueConfig::geometry`]) and
/// `Queue::set_attributes`; `None` is "unchanged".
pub(crate) fn check_live(
    visibility_timeout: Option<Duration>,
    delay: Option<Duration>,
    retention: Option<Duration>,
) -> Result<()> {
    let bad = |setting, reason: &str| {
        Err(Error::InvalidConfig {
            setting,
            reason: reason.into(),
        })
    };
    if visibility_timeout.is_some_and(|d| d > MAX_VISIBILITY_TIMEOUT) {
        return bad("visibility_timeout", "at most 12 hours");
    }
    if delay.is_some_and(|d| d > MAX_DELAY) {
        return bad("delay", "at most 15 minutes");
    }
    if retention.is_some_and(|d| d < Duration::from_millis(1) || d > MAX_RETENTION) {
        return bad("message_retention_period", "1 ms to 14 days");
    }
    Ok(())
}
