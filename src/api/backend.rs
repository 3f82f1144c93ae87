//! One interface, two backends: [`FifoQueue`] is what a program written against SQS FIFO
//! needs, and both the shared-memory [`Queue`] and an Amazon SQS queue (the `shmfifo-sqs`
//! crate) implement it, so that moving beyond one host is a change of queue URL and never of
//! meaning. Shared-memory-only operations (`peek`, `inspect`, `counters`, `recover`) are not
//! part of it; neither are shmfifo's extensions, which [`FifoQueue::extensions`] names.

use std::time::Duration;

use super::queue::Queue;
use super::types::{BatchEntry, BatchResult, ReceiveOptions, ReceivedAttribute, SendMessage};
use crate::config::Deduplication;
use crate::error::Result;

/// What a send returns on either backend (SQS's `SendMessage` answer).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sent {
    /// `MessageId`.
    pub message_id: String,
    /// `SequenceNumber` (decimal; increasing within the group).
    pub sequence_number: String,
}

/// A received message on either backend: SQS's `Message` with its FIFO system attributes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Received {
    /// `MessageId`.
    pub message_id: String,
    /// `ReceiptHandle`, opaque.
    pub receipt_handle: String,
    /// `Body`.
    pub body: String,
    /// The body's bytes where they are not text: a local queue in binary body mode (an
    /// extension, see [`FifoQueue::extensions`]), whose `body` is then empty. `None` otherwise,
    /// and always from SQS, whose bodies are text.
    pub body_bytes: Option<Vec<u8>>,
    /// `MessageGroupId`.
    pub group_id: String,
    /// `MessageDeduplicationId`.
    pub dedup_id: Option<String>,
    /// `SequenceNumber`.
    pub sequence_number: String,
    /// `SentTimestamp`, ms since the Unix epoch.
    pub sent_timestamp: u64,
    /// `ApproximateFirstReceiveTimestamp`, ms since the Unix epoch.
    pub first_receive_timestamp: u64,
    /// `ApproximateReceiveCount`.
    pub receive_count: u32,
    /// Message attributes.
    pub attributes: Vec<ReceivedAttribute>,
}

/// An SQS FIFO queue, local or remote. Every method has SQS's meaning and SQS's errors (as
/// [`crate::Error`] variants); where shmfifo has extensions, [`FifoQueue::extensions`] lists
/// the ones a queue uses.
pub trait FifoQueue: Send + Sync {
    /// `SendMessage`.
    fn send(&self, msg: &SendMessage<'_>) -> Result<Sent>;
    /// `SendMessageBatch`: per-entry results in order; request-level errors as `Err`.
    fn send_batch(
        &self,
        entries: &[BatchEntry<'_, SendMessage<'_>>],
    ) -> Result<Vec<BatchResult<Sent>>>;
    /// `ReceiveMessage`, with a `ReceiveRequestAttemptId` if given.
    fn receive(&self, opts: &ReceiveOptions, attempt_id: Option<&str>) -> Result<Vec<Received>>;
    /// `DeleteMessage`.
    fn delete(&self, receipt_handle: &str) -> Result<()>;
    /// `DeleteMessageBatch`.
    fn delete_batch(&self, entries: &[BatchEntry<'_, &str>]) -> Result<Vec<BatchResult<()>>>;
    /// `ChangeMessageVisibility`.
    fn change_visibility(&self, receipt_handle: &str, timeout: Duration) -> Result<()>;
    /// `ChangeMessageVisibilityBatch`.
    fn change_visibility_batch(
        &self,
        entries: &[BatchEntry<'_, (&str, Duration)>],
    ) -> Result<Vec<BatchResult<()>>>;
    /// `PurgeQueue`.
    fn purge(&self) -> Result<()>;
    /// `GetQueueAttributes` with `All`: SQS's names and string values.
    fn attributes(&self) -> Result<Vec<(String, String)>>;
    /// `SetQueueAttributes` of one attribute.
    fn set_attribute(&self, name: &str, value: &str) -> Result<()>;
    /// The shmfifo extensions this queue uses, which SQS does not have (empty for an SQS
    /// queue, and for a local queue that a move to SQS would not change).
    fn extensions(&self) -> Vec<String> {
        Vec::new()
    }
}

fn received(m: super::types::Message) -> Received {
    Received {
        message_id: m.message_id.to_string(),
        receipt_handle: m.receipt_handle.to_string(),
        // Not text (binary body mode): the bytes, so that nothing is lost through the trait.
        body_bytes: (m.body.is_empty() && !m.body_bytes.is_empty()).then_some(m.body_bytes),
        body: m.body,
        group_id: m.group_id,
        dedup_id: m.dedup_id,
        sequence_number: m.sequence_number.to_string(),
        sent_timestamp: m.sent_timestamp,
        first_receive_timestamp: m.first_receive_timestamp,
        receive_count: m.receive_count,
        attributes: m.attributes,
    }
}

impl FifoQueue for Queue {
    fn send(&self, msg: &SendMessage<'_>) -> Result<Sent> {
        let r = Queue::send(self, msg)?;
        Ok(Sent {
            message_id: r.message_id.to_string(),
            sequence_number: r.sequence_number.to_string(),
        })
    }

    fn send_batch(
        &self,
        entries: &[BatchEntry<'_, SendMessage<'_>>],
    ) -> Result<Vec<BatchResult<Sent>>> {
        Ok(Queue::send_batch(self, entries)?
            .into_iter()
            .map(|r| BatchResult {
                id: r.id,
                result: r.result.map(|s| Sent {
                    message_id: s.message_id.to_string(),
                    sequence_number: s.sequence_number.to_string(),
                }),
            })
            .collect())
    }

    fn receive(&self, opts: &ReceiveOptions, attempt_id: Option<&str>) -> Result<Vec<Received>> {
        let got = match attempt_id {
            Some(id) => self.receive_with_attempt_id(opts, id)?,
            None => Queue::receive(self, opts)?,
        };
        Ok(got.into_iter().map(received).collect())
    }

    fn delete(&self, receipt_handle: &str) -> Result<()> {
        self.delete_str(receipt_handle)
    }

    fn delete_batch(&self, entries: &[BatchEntry<'_, &str>]) -> Result<Vec<BatchResult<()>>> {
        Queue::delete_batch(self, entries)
    }

    fn change_visibility(&self, receipt_handle: &str, timeout: Duration) -> Result<()> {
        self.change_visibility_str(receipt_handle, timeout)
    }

    fn change_visibility_batch(
        &self,
        entries: &[BatchEntry<'_, (&str, Duration)>],
    ) -> Result<Vec<BatchResult<()>>> {
        Queue::change_visibility_batch(self, entries)
    }

    fn purge(&self) -> Result<()> {
        Queue::purge(self).map(|_| ())
    }

    fn attributes(&self) -> Result<Vec<(String, String)>> {
        Ok(Queue::attributes(self)
            .sqs_attributes()
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect())
    }

    fn set_attribute(&self, name: &str, value: &str) -> Result<()> {
        Queue::set_attribute(self, name, value)
    }

    fn extensions(&self) -> Vec<String> {
        let a = Queue::attributes(self);
        let mut v = Vec::new();
        if a.deduplication == Deduplication::Off {
            v.push("deduplication off (SQS FIFO queues always deduplicate)".to_owned());
        } else if a.deduplication_interval != Duration::from_secs(300) {
            v.push(format!(
                "a deduplication interval of {:?} (SQS's is 5 minutes)",
                a.deduplication_interval
            ));
        }
        if a.test_clock_ms.is_some() {
            v.push("a test clock".to_owned());
        }
        if a.body_mode == crate::BodyMode::Binary {
            v.push("binary bodies (SQS message bodies are text)".to_owned());
        }
        for (name, d) in [
            ("VisibilityTimeout", a.visibility_timeout),
            ("DelaySeconds", a.delay),
            ("MessageRetentionPeriod", a.message_retention_period),
        ] {
            if d.subsec_nanos() != 0 {
                v.push(format!("{name} of {d:?} (SQS takes whole seconds)"));
            }
        }
        if a.message_retention_period < Duration::from_secs(60) {
            v.push("a retention period under SQS's 60 s minimum".to_owned());
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::QueueConfig;

    #[test]
    fn a_queue_through_the_trait() {
        let q = Queue::create_anonymous(&QueueConfig::new()).unwrap();
        let f: &dyn FifoQueue = &q;
        assert!(f.extensions().is_empty(), "{:?}", f.extensions());
        let s = f.send(&SendMessage::new("g", "x").dedup_id("1")).unwrap();
        let got = f.receive(&ReceiveOptions::max(10), None).unwrap();
        assert_eq!(got[0].message_id, s.message_id);
        assert_eq!(got[0].sequence_number, s.sequence_number);
        f.delete(&got[0].receipt_handle).unwrap();
        assert!(f
            .attributes()
            .unwrap()
            .iter()
            .any(|(k, v)| k == "FifoQueue" && v == "true"));
        let off = Queue::create_anonymous(
            &QueueConfig::new()
                .deduplication(Deduplication::Off)
                .visibility_timeout(Duration::from_millis(1500)),
        )
        .unwrap();
        let e = FifoQueue::extensions(&off);
        assert_eq!(e.len(), 2, "{e:?}");
    }

    /// A local queue in binary body mode through the trait: a body that is not text arrives
    /// as `body_bytes`, exactly (it arrived empty before), a text body as `body`; and the mode
    /// is named among the extensions.
    #[test]
    fn binary_bodies_through_the_trait_lose_nothing() {
        let q = Queue::create_anonymous(
            &QueueConfig::new()
                .body_mode(crate::BodyMode::Binary)
                .content_based_deduplication(true),
        )
        .unwrap();
        let f: &dyn FifoQueue = &q;
        assert!(
            f.extensions().iter().any(|x| x.contains("binary")),
            "{:?}",
            f.extensions()
        );
        let raw: &[u8] = &[0xff, 0x00, 0xfe, b'x'];
        q.send(&SendMessage::bytes("g", raw)).unwrap();
        q.send(&SendMessage::new("g", "text")).unwrap();
        let got = f.receive(&ReceiveOptions::max(10), None).unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].body, "");
        assert_eq!(got[0].body_bytes.as_deref(), Some(raw));
        assert_eq!(got[1].body, "text");
        assert_eq!(got[1].body_bytes, None);
    }
}
