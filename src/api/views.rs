//! What the operators' views return: lifetime counters, peeked messages, and the snapshot of
//! `inspect` (messages by state, groups, participants, size classes), and what `recover`
//! repaired.

use super::types::{Message, MessageId, QueueAttributes, ReceivedAttribute};

/// The queue's lifetime counters (summed over every participant record; each participant adds
/// only to its own record, so counting costs no shared cache line). They count from the
/// queue's creation, across every process that ever used it; a participant killed mid-step
/// may leave one event uncounted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// Messages enqueued by sends (duplicates excluded; dead-letter moves into this queue
    /// and redrives count).
    pub sent: u64,
    /// Sends dropped as duplicates of an earlier send (D1).
    pub duplicates: u64,
    /// Messages handed out by receives (replays of a receive attempt id excluded).
    pub received: u64,
    /// Successful deletes.
    pub deleted: u64,
    /// Messages received again after their visibility ended: timed out, changed to 0, or
    /// released at their holder's death.
    pub visibility_expiries: u64,
    /// Messages moved to the dead-letter queue (X1).
    pub moved_to_dead_letter: u64,
    /// Messages removed by retention (T1; counted when reclaimed).
    pub retention_expiries: u64,
    /// Receives cut short by the in-flight limit (R8).
    pub in_flight_limit_hits: u64,
    /// Times a receiver went to sleep on the futex.
    pub waits: u64,
    /// Times a producer woke sleeping receivers.
    pub wake_ups: u64,
    /// Retries caused by another participant: a group claimed by another receiver, a lost
    /// append race.
    pub contention_retries: u64,
    /// Dead participants (processes that died with the queue open) whose leftovers were
    /// repaired and whose registrations were freed, by any process's recovery (on open, from
    /// an idle receiver, or `recover`).
    pub participants_recovered: u64,
    /// Receives that returned no message (CloudWatch's `NumberOfEmptyReceives`): a long
    /// poll that ends empty counts once, at once; polls that do not wait are added by each
    /// handle 64 at a time (and when it closes), so another process's count may lag by up
    /// to 63 per handle.
    pub empty_receives: u64,
}

impl Counters {
    /// Every counter with its Prometheus-style name (`snake_case`, no prefix) and help text.
    pub fn named(&self) -> [(&'static str, u64, &'static str); 13] {
        [
            (
                "sent",
                self.sent,
                "Messages enqueued (duplicates excluded).",
            ),
            (
                "duplicates",
                self.duplicates,
                "Sends dropped as duplicates.",
            ),
            (
                "received",
                self.received,
                "Messages handed out by receives.",
            ),
            ("deleted", self.deleted, "Successful deletes."),
            (
                "visibility_expiries",
                self.visibility_expiries,
                "Messages received again after their visibility ended.",
            ),
            (
                "moved_to_dead_letter",
                self.moved_to_dead_letter,
                "Messages moved to the dead-letter queue.",
            ),
            (
                "retention_expiries",
                self.retention_expiries,
                "Messages removed by retention.",
            ),
            (
                "in_flight_limit_hits",
                self.in_flight_limit_hits,
                "Receives cut short by the in-flight limit.",
            ),
            ("waits", self.waits, "Times a receiver slept on the futex."),
            (
                "wake_ups",
                self.wake_ups,
                "Times a producer woke sleeping receivers.",
            ),
            (
                "contention_retries",
                self.contention_retries,
                "Retries caused by another participant.",
            ),
            (
                "participants_recovered",
                self.participants_recovered,
                "Dead participants repaired and freed by recovery.",
            ),
            (
                "empty_receives",
                self.empty_receives,
                "Receives that returned no message (CloudWatch's NumberOfEmptyReceives).",
            ),
        ]
    }

    pub(crate) fn from_array(c: &[u64; crate::protocol::accounting::counter::COUNT]) -> Counters {
        use crate::protocol::accounting::counter as k;
        Counters {
            sent: c[k::SENT],
            duplicates: c[k::DUPLICATES],
            received: c[k::RECEIVED],
            deleted: c[k::DELETED],
            visibility_expiries: c[k::VISIBILITY_EXPIRIES],
            moved_to_dead_letter: c[k::MOVED_TO_DEAD_LETTER],
            retention_expiries: c[k::RETENTION_EXPIRIES],
            in_flight_limit_hits: c[k::IN_FLIGHT_LIMIT_HITS],
            waits: c[k::WAITS],
            wake_ups: c[k::WAKE_UPS],
            contention_retries: c[k::CONTENTION_RETRIES],
            participants_recovered: c[k::PARTICIPANTS_RECOVERED],
            empty_receives: 0,
        }
    }
}

/// A message read by [`crate::Queue::peek`]: what a receive would return now, without a
/// receipt handle (nothing was received).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PeekedMessage {
    /// `MessageId`.
    pub message_id: MessageId,
    /// `Body`.
    pub body: String,
    /// On a queue in binary body mode: the body's bytes, exactly (as
    /// [`Message::body_bytes`]); empty on a text queue.
    pub body_bytes: Vec<u8>,
    /// `MessageGroupId`.
    pub group_id: String,
    /// `MessageDeduplicationId`, if one was sent.
    pub dedup_id: Option<String>,
    /// `SequenceNumber`.
    pub sequence_number: u128,
    /// `SentTimestamp`, ms since the Unix epoch.
    pub sent_timestamp: u64,
    /// `ApproximateFirstReceiveTimestamp`, ms since the Unix epoch (0: never received).
    pub first_receive_timestamp: u64,
    /// Receives so far (0: never received).
    pub receive_count: u32,
    /// Message attributes.
    pub attributes: Vec<ReceivedAttribute>,
    /// `DeadLetterQueueSourceArn` (see [`Message::dead_letter_source`]).
    pub dead_letter_source: Option<String>,
}

impl From<Message> for PeekedMessage {
    /// The message without its receipt handle (a peek fills a [`Message`] as a receive does,
    /// then drops the handle: nothing was received).
    fn from(m: Message) -> Self {
        PeekedMessage {
            message_id: m.message_id,
            body: m.body,
            body_bytes: m.body_bytes,
            group_id: m.group_id,
            dedup_id: m.dedup_id,
            sequence_number: m.sequence_number,
            sent_timestamp: m.sent_timestamp,
            first_receive_timestamp: m.first_receive_timestamp,
            receive_count: m.receive_count,
            attributes: m.attributes,
            dead_letter_source: m.dead_letter_source,
        }
    }
}

/// Messages by state, from a scan of every slot (approximate while the queue is in use).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MessageCounts {
    /// Visible (including those behind an in-flight message of their group).
    pub visible: u64,
    /// In flight.
    pub in_flight: u64,
    /// Delayed (L2).
    pub delayed: u64,
    /// Being written by a producer.
    pub sending: u64,
    /// Deleted, not yet reclaimed.
    pub deleted: u64,
}

/// One group of [`Inspection::largest_groups`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GroupInfo {
    /// `MessageGroupId`.
    pub group_id: String,
    /// Visible messages.
    pub visible: u64,
    /// In-flight messages.
    pub in_flight: u64,
    /// Delayed messages.
    pub delayed: u64,
    /// Messages being written.
    pub sending: u64,
    /// Whether the group's first message is in flight (R3).
    pub locked: bool,
}

impl GroupInfo {
    /// Messages in the group, whatever their state.
    pub fn backlog(&self) -> u64 {
        self.visible + self.in_flight + self.delayed + self.sending
    }
}

/// A registered participant (a process's open handle on the queue).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ParticipantInfo {
    /// Registry slot.
    pub slot: u32,
    /// Registration generation of the slot.
    pub generation: u32,
    /// Process id it registered with (for display: never used as identity).
    pub pid: u32,
    /// Whether it holds its liveness lock (a dead one is repaired by `recover`).
    pub alive: bool,
    /// Whether this is the inspecting handle itself.
    pub is_self: bool,
}

/// One size class's slots.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SizeClassUse {
    /// Largest payload a slot holds (body, attributes, dedup id and dead-letter source).
    pub payload_bytes: u32,
    /// Arena bytes per slot: its 64-byte header plus its payload stride.
    pub slot_bytes: u64,
    /// Slots now: the base file's and those of the segments the class has added.
    pub slots: u32,
    /// The most slots the class may hold, once grown to the queue's size limit.
    pub max_slots: u32,
    /// Free slots.
    pub free: u32,
    /// Slots being written by a producer.
    pub sending: u32,
    /// Slots holding a message, or a pack of several messages of one batch (layout 23: a
    /// batch's messages to one group share one slot), visible, in flight or delayed.
    pub used: u32,
    /// Slots holding a deleted message not yet reclaimed.
    pub deleted: u32,
}

/// How large a queue's file is and may grow ([`crate::Queue::size`]): a size class whose slots
/// are all taken adds a segment as large as all its slots so far (doubling them), reserved on
/// the file system, until the next would pass the size limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueSize {
    /// Bytes in use: the base file and every segment added.
    pub bytes: u64,
    /// Bytes of the base file (what the queue took at creation).
    pub base_bytes: u64,
    /// The size limit: the file never grows past it.
    pub limit_bytes: u64,
    /// Segments added over the queue's life.
    pub grows: u64,
    /// Growths the file system refused for want of space (each failed a send with
    /// [`crate::Error::NoSpace`]).
    pub refused_grows: u64,
}

/// Everything `shmfifo stat` shows: a read-only snapshot of a queue in use
/// ([`crate::Queue::inspect`]).
#[derive(Debug, Clone)]
pub struct Inspection {
    /// Settings and SQS attributes.
    pub attributes: QueueAttributes,
    /// Messages by state.
    pub messages: MessageCounts,
    /// Active groups.
    pub active_groups: u64,
    /// Groups whose first message is in flight.
    pub locked_groups: u64,
    /// Groups kept after their last message was deleted, for their next send (layout 19: the
    /// group stays, idle, its list reopened, so the next send appends without inserting it
    /// again). They hold no message; an insert that finds the table at its capacity retires
    /// them.
    pub kept_groups: u64,
    /// The group table's entries in use as its capacity counts them: groups with messages,
    /// kept groups, groups being inserted, plus one for each participant that died between
    /// counting an entry in and taking it (or out and letting it go) since the last recount.
    pub group_entries_in_use: u64,
    /// The largest groups by backlog, largest first.
    pub largest_groups: Vec<GroupInfo>,
    /// Registered participants, alive and dead.
    pub participants: Vec<ParticipantInfo>,
    /// Slot use by size class.
    pub size_classes: Vec<SizeClassUse>,
    /// How large the queue's file is and may grow.
    pub size: QueueSize,
    /// Lifetime counters.
    pub counters: Counters,
    /// Groups whose message list could not be read (a corrupted word in shared memory): left
    /// out of the counts above, each with what is wrong; every other group is counted.
    pub damaged_groups: Vec<DamagedGroup>,
}

/// A group that inspection could not walk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DamagedGroup {
    /// Its index in the group table.
    pub index: u32,
    /// What is wrong.
    pub reason: &'static str,
}

/// What [`Queue::recover`](crate::Queue::recover) repaired and quarantined.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recovered {
    /// Participants found dead while registered (liveness lock gone, never closed).
    pub dead_participants: u64,
    /// Messages of dead producers published (their link CAS had committed them).
    pub published: u64,
    /// Half-made messages of dead producers freed (never published).
    pub freed: u64,
    /// In-flight messages of dead receivers made visible at once (`release_on_death`).
    pub released: u64,
    /// Groups whose list could not be walked (a corrupted word), rebuilt empty: their
    /// messages were moved to the dead-letter queue or dropped (below), and the next send of
    /// their group id starts the group afresh.
    pub quarantined_groups: u64,
    /// Messages of quarantined groups moved to the dead-letter queue (the queue has a redrive
    /// policy), by id.
    pub dead_lettered: Vec<MessageId>,
    /// Messages of quarantined groups dropped (no redrive policy, or the move failed), by id.
    /// The id is the one the message was sent with, except for a message that was itself
    /// moved here from another queue (then it is the slot's own id, as `peek` cannot show).
    pub dropped: Vec<MessageId>,
}
