//! Public message, handle and result types.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use super::id_text::{MessageIdText, ReceiptHandleText};
use crate::config::DedupOverflow;
use crate::error::Error;
use crate::protocol::handle::MAX_PACK;

/// A message attribute to send (S8). `value` is UTF-8 text for `String` and `Number` types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MessageAttribute<'a> {
    /// Name: 1–256 of `[A-Za-z0-9_.-]`, no `AWS.`/`Amazon.` prefix.
    pub name: &'a str,
    /// `String`, `Number` or `Binary`, optionally with a `.label` suffix.
    pub data_type: &'a str,
    /// The value's bytes.
    pub value: &'a [u8],
}

impl<'a> MessageAttribute<'a> {
    /// A `String` attribute.
    pub fn string(name: &'a str, value: &'a str) -> Self {
        MessageAttribute {
            name,
            data_type: "String",
            value: value.as_bytes(),
        }
    }
    /// A `Number` attribute (its text form).
    pub fn number(name: &'a str, value: &'a str) -> Self {
        MessageAttribute {
            name,
            data_type: "Number",
            value: value.as_bytes(),
        }
    }
    /// A `Binary` attribute.
    pub fn binary(name: &'a str, value: &'a [u8]) -> Self {
        MessageAttribute {
            name,
            data_type: "Binary",
            value,
        }
    }
}

/// An attribute of a received message.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReceivedAttribute {
    /// Name.
    pub name: String,
    /// Data type.
    pub data_type: String,
    /// Value bytes.
    pub value: Vec<u8>,
}

/// A message to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SendMessage<'a> {
    /// `MessageGroupId` (S1, S2): required; `None` is reported as `MissingParameter` by a
    /// single send, and fails a whole batch (`send_batch`, `send_messages`) with
    /// `InvalidParameterValue` (S12).
    pub group_id: Option<&'a str>,
    /// `MessageDeduplicationId` (S3), stored and returned as a system attribute.
    pub dedup_id: Option<&'a str>,
    /// `MessageBody` (S6, S7).
    pub body: &'a str,
    /// A body of bytes, sent instead of `body` (see [`SendMessage::bytes`]).
    pub bytes: Option<&'a [u8]>,
    /// Message attributes (S8), at most 10.
    pub attributes: &'a [MessageAttribute<'a>],
    /// Per-message `DelaySeconds`: only `None` or `Some(0)` are accepted on a FIFO queue (S5).
    pub delay_seconds: Option<u32>,
}

impl<'a> SendMessage<'a> {
    /// A message for `group_id` with `body`.
    pub fn new(group_id: &'a str, body: &'a str) -> Self {
        SendMessage {
            group_id: Some(group_id),
            dedup_id: None,
            body,
            bytes: None,
            attributes: &[],
            delay_seconds: None,
        }
    }
    /// A message for `group_id` whose body is `bytes`: any bytes on a queue in binary body
    /// mode ([`crate::BodyMode::Binary`]); on a text queue they must be text (S7), as a `&str`
    /// body must.
    pub fn bytes(group_id: &'a str, bytes: &'a [u8]) -> Self {
        SendMessage {
            bytes: Some(bytes),
            ..SendMessage::new(group_id, "")
        }
    }
    /// The body's bytes: `bytes` if set, else `body`'s.
    pub fn body_bytes(&self) -> &'a [u8] {
        self.bytes.unwrap_or(self.body.as_bytes())
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

/// A message id: 128 bits, shown in UUID form: the queue's nonce (its top 4 bits the
/// message's member in a pack), the slot and its incarnation. Unique within the queue as long
/// as no slot is reused 2^32 times while an earlier id matters (`docs/guarantees.md`, "Receipt
/// handles").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct MessageId(pub u128);

impl fmt::Display for MessageId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.text(), f)
    }
}

impl MessageId {
    /// The UUID form (`8-4-4-4-12` lowercase hex digits, what `to_string` gives) on the
    /// stack, with no allocation: for a caller that copies it somewhere (a C buffer, a reply
    /// being written) rather than keep a `String`.
    ///
    /// # Examples
    ///
    /// ```
    /// use shmfifo::{MessageId, Queue, QueueConfig, SendMessage};
    ///
    /// let q = Queue::create_anonymous(&QueueConfig::new())?;
    /// let sent = q.send(&SendMessage::new("g", "hello").dedup_id("1"))?;
    /// let text = sent.message_id.text();
    /// assert_eq!(text.as_str(), sent.message_id.to_string());
    /// assert_eq!(text.parse::<MessageId>()?, sent.message_id);
    /// # Ok::<(), shmfifo::Error>(())
    /// ```
    pub fn text(&self) -> MessageIdText {
        MessageIdText::message_id(self.0)
    }
}

/// Parses the UUID form written by `Display` (lowercase or uppercase hex); anything else is
/// [`Error::InvalidParameterValue`] for the parameter `MessageId`.
///
/// ```
/// use shmfifo::{Error, MessageId};
/// let id: MessageId = "0123abcd-0000-4000-8000-00000000002a".parse()?;
/// assert_eq!(id.to_string(), "0123abcd-0000-4000-8000-00000000002a");
/// assert!(matches!(
///     "not-an-id".parse::<MessageId>(),
///     Err(Error::InvalidParameterValue { parameter: "MessageId", .. })
/// ));
/// # Ok::<(), shmfifo::Error>(())
/// ```
impl FromStr for MessageId {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        super::id_text::parse_message_id(s.as_bytes())
            .map(MessageId)
            .ok_or_else(|| Error::InvalidParameterValue {
                parameter: "MessageId",
                reason: format!(
                    "{:?} is not a message id (8-4-4-4-12 hex digits)",
                    s.chars().take(200).collect::<String>()
                ),
            })
    }
}

/// What a successful send returns (S10).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SendResult {
    /// The message id.
    pub message_id: MessageId,
    /// The sequence number: increasing within the group (M1).
    pub sequence_number: u128,
    /// shmfifo extension: `true` when the send was a duplicate (D1): nothing was enqueued and
    /// the id and sequence number are the original message's (D6). SQS does not say.
    pub duplicate: bool,
}

/// One entry of a batch request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchEntry<'a, T> {
    /// Entry id, 1–80 of `[A-Za-z0-9_-]`, unique in the request (S11).
    pub id: &'a str,
    /// The entry.
    pub entry: T,
}

/// The outcome of one batch entry.
#[derive(Debug)]
pub struct BatchResult<T> {
    /// The entry id.
    pub id: String,
    /// The entry's result.
    pub result: Result<T, Error>,
}

/// Options of a receive (R1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReceiveOptions {
    /// `MaxNumberOfMessages`, 1–10 (default 1).
    pub max_messages: u32,
    /// `VisibilityTimeout` override, 0–12 h (default: the queue's).
    pub visibility_timeout: Option<Duration>,
    /// `WaitTimeSeconds` override, 0–20 s (default: the queue's).
    pub wait_time: Option<Duration>,
}

impl Default for ReceiveOptions {
    fn default() -> Self {
        ReceiveOptions {
            max_messages: 1,
            visibility_timeout: None,
            wait_time: None,
        }
    }
}

impl ReceiveOptions {
    /// Receive up to `n` messages.
    pub fn max(n: u32) -> Self {
        ReceiveOptions {
            max_messages: n,
            ..Self::default()
        }
    }
    /// Sets the visibility timeout.
    pub fn visibility_timeout(mut self, d: Duration) -> Self {
        self.visibility_timeout = Some(d);
        self
    }
    /// Sets the long-poll wait.
    pub fn wait(mut self, d: Duration) -> Self {
        self.wait_time = Some(d);
        self
    }
}

/// A receipt handle: names one receive of one message. Its text form
/// (`sf2` + 39 hex digits) can be handed to another process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ReceiptHandle {
    pub(crate) nonce: u64,
    pub(crate) idx: u32,
    pub(crate) inc: u32,
    pub(crate) epoch: u32,
    /// The member of a pack (layout 22): 0 for a message in a slot of its own.
    pub(crate) member: u8,
}

impl ReceiptHandle {
    /// The receive it names in its queue (the nonce checked by the caller).
    #[inline]
    pub(crate) fn slot(&self) -> crate::protocol::handle::Handle {
        crate::protocol::handle::Handle {
            idx: self.idx,
            inc: self.inc,
            epoch: self.epoch,
            member: self.member,
        }
    }

    /// The handle's text (what `to_string` gives, and [`str::parse`] takes back) on the stack,
    /// with no allocation: for a caller that copies it somewhere (a C buffer, a reply being
    /// written) rather than keep a `String`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// use shmfifo::{Queue, QueueConfig, ReceiptHandle, ReceiveOptions, SendMessage};
    ///
    /// let q = Queue::create_anonymous(&QueueConfig::new())?;
    /// q.send(&SendMessage::new("g", "hello").dedup_id("1"))?;
    /// let got = q.receive(&ReceiveOptions::max(1).wait(Duration::ZERO))?;
    /// let text = got[0].receipt_handle.text();
    /// assert_eq!(text.as_str(), got[0].receipt_handle.to_string());
    /// let back: ReceiptHandle = text.parse()?;
    /// q.delete(&back)?;
    /// # Ok::<(), shmfifo::Error>(())
    /// ```
    pub fn text(&self) -> ReceiptHandleText {
        ReceiptHandleText::receipt_handle(self.nonce, self.idx, self.inc, self.member, self.epoch)
    }
}

impl fmt::Display for ReceiptHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.text(), f)
    }
}

impl FromStr for ReceiptHandle {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        let invalid = || Error::ReceiptHandleIsInvalid {
            handle: s.chars().take(200).collect(),
        };
        let hex: &[u8; 39] = s
            .strip_prefix("sf2")
            .and_then(|h| h.as_bytes().try_into().ok())
            .ok_or_else(invalid)?;
        // Eight digits at a time (`id_text`), of either case.
        let (nonce, idx, inc, member, epoch) =
            super::id_text::parse_receipt_handle(hex).ok_or_else(invalid)?;
        if usize::from(member) >= MAX_PACK {
            return Err(invalid());
        }
        Ok(ReceiptHandle {
            nonce,
            idx,
            inc,
            member,
            epoch,
        })
    }
}

/// A received message with its system attributes (M3).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Message {
    /// `MessageId`.
    pub message_id: MessageId,
    /// The receipt handle of this receive.
    pub receipt_handle: ReceiptHandle,
    /// `Body`. On a queue in binary body mode: the bytes as text where they are UTF-8, else
    /// empty (read [`body_bytes`](Message::body_bytes) there).
    pub body: String,
    /// On a queue in binary body mode ([`crate::BodyMode::Binary`]): the body's bytes, exactly;
    /// empty on a text queue (see [`Message::bytes`]).
    pub body_bytes: Vec<u8>,
    /// `MessageGroupId`.
    pub group_id: String,
    /// `MessageDeduplicationId`, if one was sent.
    pub dedup_id: Option<String>,
    /// `SequenceNumber`.
    pub sequence_number: u128,
    /// `SentTimestamp`, ms since the Unix epoch.
    pub sent_timestamp: u64,
    /// `ApproximateFirstReceiveTimestamp`, ms since the Unix epoch.
    pub first_receive_timestamp: u64,
    /// `ApproximateReceiveCount`, 1 on the first receive.
    pub receive_count: u32,
    /// Message attributes.
    pub attributes: Vec<ReceivedAttribute>,
    /// `DeadLetterQueueSourceArn`: for a message moved here by a redrive policy (X3), the path
    /// of the queue it came from (`None` otherwise, or when that queue was anonymous).
    pub dead_letter_source: Option<String>,
}

impl Message {
    /// The body's bytes, whatever the queue's body mode: `body_bytes` on a binary queue,
    /// `body`'s bytes on a text queue.
    ///
    /// # Examples
    ///
    /// ```
    /// use shmfifo::{BodyMode, Queue, QueueConfig, ReceiveOptions, SendMessage};
    ///
    /// let q = Queue::create_anonymous(
    ///     &QueueConfig::new().body_mode(BodyMode::Binary).content_based_deduplication(true),
    /// )?;
    /// q.send(&SendMessage::bytes("frames", &[0, 159, 146, 150]))?;
    /// let got = q.receive(&ReceiveOptions::max(1))?;
    /// assert_eq!(got[0].bytes(), &[0, 159, 146, 150]);
    /// assert!(got[0].body.is_empty()); // not UTF-8
    /// # Ok::<(), shmfifo::Error>(())
    /// ```
    pub fn bytes(&self) -> &[u8] {
        if self.body_bytes.is_empty() {
            self.body.as_bytes()
        } else {
            &self.body_bytes
        }
    }
}

/// Reusable storage for [`crate::Queue::receive_into`]: keeps each message's allocations so a
/// steady stream of receives allocates nothing.
#[derive(Debug, Default)]
pub struct ReceiveBuffer {
    pub(crate) msgs: Vec<Message>,
    pub(crate) len: usize,
    /// Each message's `vis` word as the receive left it (for attempt-id records).
    pub(crate) vis: [u64; 10],
    /// Borrowing: bodies are not copied, their place in the mapping is kept in `views`
    /// (`Queue::receive_borrowed`).
    pub(crate) borrow: bool,
    /// Where each message's body lies in the mapping (borrowing only).
    pub(crate) views: [crate::api::borrow::View; 10],
    /// The group id the last receive into this buffer checked against its hash.
    pub(crate) checked: crate::api::copy_out::CheckedGroup,
}

impl ReceiveBuffer {
    /// An empty buffer.
    pub fn new() -> Self {
        Self::default()
    }
    /// The messages of the last receive.
    pub fn messages(&self) -> &[Message] {
        &self.msgs[..self.len]
    }
    /// The next message to fill, and the group id this buffer checked last.
    #[inline]
    pub(crate) fn next_slot(&mut self) -> (&mut Message, &mut crate::api::copy_out::CheckedGroup) {
        if self.len == self.msgs.len() {
            self.msgs.push(Message::default());
        }
        self.len += 1;
        (&mut self.msgs[self.len - 1], &mut self.checked)
    }
}

/// Queue attributes and counters (C1, Q6).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueAttributes {
    /// `ApproximateNumberOfMessages`: visible, including those behind an in-flight message of
    /// their group.
    pub approximate_number_of_messages: u64,
    /// `ApproximateNumberOfMessagesNotVisible`: in flight.
    pub approximate_number_of_messages_not_visible: u64,
    /// `ApproximateNumberOfMessagesDelayed` (L2).
    pub approximate_number_of_messages_delayed: u64,
    /// `VisibilityTimeout` (live).
    pub visibility_timeout: Duration,
    /// `DelaySeconds` (live, L1).
    pub delay: Duration,
    /// `MessageRetentionPeriod` (live, T1).
    pub message_retention_period: Duration,
    /// `RedrivePolicy` (live, X1).
    pub redrive_policy: Option<crate::RedrivePolicy>,
    /// The in-flight limit (R8).
    pub max_in_flight: u64,
    /// Messages received and not yet deleted, as counted for the in-flight limit.
    pub in_flight_count: u64,
    /// Receives that returned fewer messages because of the in-flight limit (R8).
    pub in_flight_limit_hits: u64,
    /// Messages moved to the dead-letter queue over the queue's life (X1).
    pub moved_to_dead_letter: u64,
    /// Messages removed by retention over the queue's life (T1; counted when reclaimed).
    pub retention_expiries: u64,
    /// Whether a dead receiver's in-flight messages are released at once (a creation setting).
    pub release_on_death: bool,
    /// What bodies may hold ([`crate::BodyMode`]; an extension, fixed at creation).
    pub body_mode: crate::BodyMode,
    /// `ReceiveMessageWaitTimeSeconds`.
    pub receive_message_wait_time: Duration,
    /// `MaximumMessageSize`.
    pub maximum_message_size: u32,
    /// `CreatedTimestamp`, ms since the Unix epoch.
    pub created_timestamp: u64,
    /// `LastModifiedTimestamp`, ms since the Unix epoch: the last
    /// [`Queue::set_attributes`](crate::Queue::set_attributes) (its settings or its redrive
    /// policy), or the creation if none since.
    pub last_modified_timestamp: u64,
    /// `FifoQueue`: always true.
    pub fifo_queue: bool,
    /// Groups with messages now (a census of the group table: a group emptied by its last
    /// delete is kept, idle, for its next send, but not counted here).
    pub active_groups: u64,
    /// Most groups at once: what the group table holds once it has added every table the size
    /// limit allows (layout 16); `max_groups` where it may not grow.
    pub max_groups: u64,
    /// Groups the group table holds now, before it adds a table (it starts at `max_groups`).
    pub group_capacity: u64,
    /// Entries of the group table in the base file: [`crate::QueueConfig::max_groups`] as the
    /// queue was created (rounded up as the table needs). Fixed at creation.
    pub group_base_entries: u64,
    /// ReceiveRequestAttemptId records the queue keeps ([`crate::QueueConfig::attempt_entries`],
    /// rounded up to a power of two; 0: none). Fixed at creation.
    pub attempt_entries: u64,
    /// Most participants at once.
    pub max_participants: u32,
    /// `(payload bytes, slots)` of each size class.
    pub size_classes: Vec<(u32, u32)>,
    /// Bytes of the arena's file in use: the base file and the segments its size classes
    /// added (layout 13).
    pub arena_bytes: u64,
    /// The most bytes the arena's file may grow to ([`crate::QueueConfig::size_limit`]).
    pub size_limit_bytes: u64,
    /// Segments the size classes added over the queue's life.
    pub grows: u64,
    /// `DeduplicationScope` (D2), or `Off`.
    pub deduplication: crate::Deduplication,
    /// `ContentBasedDeduplication` (D5).
    pub content_based_deduplication: bool,
    /// `FifoThroughputLimit` is `perMessageGroupId` (TP2;
    /// [`crate::QueueConfig::per_message_group_throughput`]), else `perQueue`.
    pub per_message_group_throughput: bool,
    /// The dedup interval (D1).
    pub deduplication_interval: Duration,
    /// Capacity of the dedup table (0 with deduplication off): its base file's entries and
    /// those of the tables it added (layout 14).
    pub dedup_entries: u64,
    /// Entries of the dedup table in the base file: [`crate::QueueConfig::dedup_entries`] as
    /// the queue was created (rounded up to a power of two; 0 with deduplication off). The
    /// table grows past it while the size limit allows ([`QueueAttributes::dedup_entries`]).
    pub dedup_base_entries: u64,
    /// Dedup ids accepted within the interval, and sends with a dedup id in progress (a
    /// scan of the table).
    pub dedup_entries_in_use: u64,
    /// What a send does when the dedup table has no room for its id.
    pub dedup_overflow: DedupOverflow,
    /// Dedup ids forgotten before their interval ended (lifetime count; `ShortenWindow`).
    pub dedup_evictions: u64,
    /// How long a dedup id is remembered now: `deduplication_interval`, or shorter if an id
    /// was evicted within the last interval (then the age of the last one evicted).
    pub effective_deduplication_interval: Duration,
    /// Messages taken out of the queue because a corrupted word made them unreadable, or
    /// their group's list unwalkable (lifetime count; see [`crate::Queue::recover`]).
    pub quarantined_messages: u64,
    /// Groups rebuilt empty because their list could not be walked (lifetime count).
    pub quarantined_groups: u64,
    /// CloudWatch's `ApproximateAgeOfOldestMessage`: how long ago the oldest message still in
    /// the queue (visible, in flight or delayed) was sent; zero for an empty queue.
    pub approximate_age_of_oldest_message: Duration,
    /// The queue runs on a test clock ([`crate::QueueConfig::test_clock`]), at this queue
    /// time (ms since its creation, plus 1); `None` on the real clock.
    pub test_clock_ms: Option<u64>,
}

/// Options of [`crate::Queue::redrive`] (X6).
#[derive(Debug, Clone, Default)]
pub struct RedriveOptions {
    /// Where to move messages: a queue name or path. `None`: each message's source queue.
    pub destination: Option<String>,
    /// Most messages moved per second (`None`: as fast as possible).
    pub max_per_second: Option<u32>,
    /// Most messages to move (`None`: until the dead-letter queue has no visible message).
    pub limit: Option<u64>,
    /// Set to `true` (from any thread) to stop after the current message.
    pub cancel: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
    /// Without a `destination`: the only source queues messages may go back to (paths as
    /// the messages record them, canonical); a message from any other source is left here
    /// and counted `skipped`. `None`: every source. A server that moves messages for a
    /// client uses it to keep the moves to the queues that client may use.
    pub sources: Option<Vec<std::path::PathBuf>>,
    /// A counter the redrive adds each message it moves to, as it moves it (after its delete
    /// here): another thread reads the progress of a redrive under way (a server's move
    /// task, ListMessageMoveTasks). `None`: only the report counts.
    pub progress: Option<std::sync::Arc<std::sync::atomic::AtomicU64>>,
}

/// What a redrive did (X6).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RedriveReport {
    /// Messages moved (sent to their destination and deleted here).
    pub moved: u64,
    /// Messages left here because they name no source queue (or one outside
    /// [`RedriveOptions::sources`]) and no destination was given, because their source queue
    /// could not be opened (counted in `unreachable` too), or because their destination
    /// refused them for their content (larger than it takes, say; with them the rest of their
    /// group, which stays behind them); they are visible again when the redrive returns (so
    /// that a redrive `--to` a queue can take them at once), each received once more.
    pub skipped: u64,
    /// Of the `skipped`: messages whose source queue could not be opened (gone, or not a
    /// queue this process may open). The messages of other sources still move.
    pub unreachable: u64,
    /// The redrive stopped because it was cancelled.
    pub cancelled: bool,
}

/// A batch's results by entry id, in order; an entry the batch left without a result (a bug,
/// or a corrupted arena) gets `Corrupted { what: missing }`.
pub(crate) fn batch_results<'e, T>(
    ids: impl Iterator<Item = &'e str>,
    results: impl IntoIterator<Item = Option<crate::error::Result<T>>>,
    missing: &'static str,
) -> Vec<BatchResult<T>> {
    ids.zip(results)
        .map(|(id, r)| BatchResult {
            id: id.to_owned(),
            // A match, not `unwrap_or`: the fallback is built (and dropped) only when used.
            result: match r {
                Some(r) => r,
                None => Err(crate::error::Error::Corrupted { what: missing }),
            },
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn receipt_handle_text_round_trips() {
        let h = ReceiptHandle {
            nonce: 0xdead_beef_0123_4567,
            idx: 7,
            inc: 0xffff_fffe,
            member: 9,
            epoch: 0xabcdef,
        };
        let s = h.to_string();
        assert_eq!(s, "sf2deadbeef0123456700000007fffffffe9abcdef");
        assert_eq!(s.len(), 42);
        assert_eq!(s.parse::<ReceiptHandle>().unwrap(), h);
        // Upper-case hex is the same handle.
        let upper = format!("sf2{}", s[3..].to_uppercase());
        assert_eq!(upper.parse::<ReceiptHandle>().unwrap(), h);
        assert_eq!(
            format!("{h:>43}"),
            format!(" {s}"),
            "padding as for any str"
        );
        for bad in [
            "garbage",
            "",
            "sf2",
            &s[..41],
            &format!("{s}0"),
            // Layout 21's form: no member digit.
            &format!("sf1{}{}", &s[3..35], &s[36..]),
            &s.replace("sf2", "sf1"),
            &format!("sf2+{}", &s[4..]),
            &format!("sf2{}g", &s[3..41]),
            &format!("sf2{}é", &s[3..40]),
            // Past ASCII, and '0' once the top bits are cleared (bytes 0xc3 0xb0).
            &format!("sf2{}ð", &s[3..40]),
            // A member past a pack's ten.
            &format!("{}a{}", &s[..35], &s[36..]),
            &format!("{}f{}", &s[..35], &s[36..]),
        ] {
            assert!(
                matches!(
                    bad.parse::<ReceiptHandle>(),
                    Err(Error::ReceiptHandleIsInvalid { .. })
                ),
                "{bad}"
            );
        }
    }

    /// Every byte value at every digit position: a hex digit of either case parses to its
    /// value in its field (the member's only below ten), anything else refuses the whole
    /// handle.
    #[test]
    fn receipt_handle_parse_checks_every_digit() {
        let base = "sf2".to_owned() + &"0".repeat(39);
        for at in 3..42 {
            for v in 0..=255u8 {
                let mut b = base.clone().into_bytes();
                b[at] = v;
                let Ok(text) = String::from_utf8(b) else {
                    continue; // not a str at all (a lone non-ASCII byte)
                };
                let digit = (v as char)
                    .to_digit(16)
                    .filter(|&d| v.is_ascii() && (at != 35 || d < MAX_PACK as u32));
                match (text.parse::<ReceiptHandle>(), digit) {
                    (Ok(h), Some(d)) => {
                        let (field, shift) = match at - 3 {
                            k @ 0..16 => (h.nonce, 4 * (15 - k)),
                            k @ 16..24 => (u64::from(h.idx), 4 * (23 - k)),
                            k @ 24..32 => (u64::from(h.inc), 4 * (31 - k)),
                            32 => (u64::from(h.member), 0),
                            k => (u64::from(h.epoch), 4 * (38 - k)),
                        };
                        assert_eq!(field, u64::from(d) << shift, "{text}");
                    }
                    (Err(Error::ReceiptHandleIsInvalid { .. }), None) => {}
                    (r, d) => panic!("{text}: {r:?} for digit {d:?}"),
                }
            }
        }
    }

    #[test]
    fn message_id_is_uuid_shaped() {
        let s = MessageId(0x0123_4567_89ab_cdef_0011_2233_4455_6677).to_string();
        assert_eq!(s, "01234567-89ab-cdef-0011-223344556677");
        // Every nibble value in every place, against the formatting machinery's hex, and back.
        for k in 0..32 {
            for n in 0..16u128 {
                let v = MessageId(
                    (n << (4 * k)) | 0x0fed_cba9_8765_4321_0fed_cba9_8765_4321 & !(0xf << (4 * k)),
                );
                let x = v.0;
                let want = format!(
                    "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
                    (x >> 96) as u32,
                    (x >> 80) as u16,
                    (x >> 64) as u16,
                    (x >> 48) as u16,
                    x & 0xFFFF_FFFF_FFFF
                );
                assert_eq!(v.to_string(), want);
                assert_eq!(want.parse::<MessageId>().ok(), Some(v));
            }
        }
        assert_eq!(
            format!("{:>38}", MessageId(1)),
            format!("  {}", MessageId(1))
        );
    }
}
