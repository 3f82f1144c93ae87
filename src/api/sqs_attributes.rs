//! SQS's queue attribute names, both ways: `CreateQueue`'s `Attributes` map into a
//! [`QueueConfig`], and [`QueueAttributes`] out as `GetQueueAttributes` reports them. One
//! mapping for every front end that speaks SQS's names (the Python client, the CLI, a server).

use std::time::Duration;

use super::types::QueueAttributes;
use crate::config::{parse_redrive_policy, Deduplication, QueueConfig};
use crate::error::{Error, Result};

/// The `CreateQueue` attribute names [`QueueConfig::from_sqs_attributes`] accepts.
pub const CREATE_ATTRIBUTES: [&str; 10] = [
    "VisibilityTimeout",
    "DelaySeconds",
    "MessageRetentionPeriod",
    "MaximumMessageSize",
    "ReceiveMessageWaitTimeSeconds",
    "ContentBasedDeduplication",
    "DeduplicationScope",
    "FifoQueue",
    "FifoThroughputLimit",
    "RedrivePolicy",
];

/// The account and region of local queue ARNs (`arn:aws:sqs:local:000000000000:NAME`).
pub const LOCAL_ARN_PREFIX: &str = "arn:aws:sqs:local:000000000000:";

impl QueueConfig {
    /// The configuration `CreateQueue` would make of SQS attribute `(name, value)` pairs, on
    /// top of `self` (so shmfifo's own sizes, set with the builder, are kept). Durations are
    /// SQS's whole seconds; `FifoQueue` must be `true` (every shmfifo queue is FIFO);
    /// `FifoThroughputLimit` (`perQueue`, `perMessageGroupId`) is kept and reported, and
    /// changes nothing else (there is no throughput quota locally); `RedrivePolicy` is SQS's JSON, its
    /// `deadLetterTargetArn` an ARN (its last field is the local queue's name) or a name or
    /// path. A name not in [`CREATE_ATTRIBUTES`] is `InvalidAttributeName`; a value that does
    /// not parse, or is out of SQS's range, is `InvalidAttributeValue` naming the attribute (as
    /// SQS); shmfifo's own sizes are checked by `create`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use shmfifo::{Queue, QueueConfig};
    ///
    /// let cfg = QueueConfig::new().from_sqs_attributes([
    ///     ("FifoQueue", "true"),
    ///     ("VisibilityTimeout", "45"),
    ///     ("ContentBasedDeduplication", "true"),
    /// ])?;
    /// let q = Queue::create_anonymous(&cfg)?;
    /// assert_eq!(q.attributes().visibility_timeout, Duration::from_secs(45));
    /// assert!(QueueConfig::new().from_sqs_attributes([("Colour", "blue")]).is_err());
    /// # Ok::<(), shmfifo::Error>(())
    /// ```
    pub fn from_sqs_attributes<'a>(
        self,
        attributes: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<QueueConfig> {
        let mut cfg = self;
        let mut per_group_throughput = false;
        for (name, value) in attributes {
            let setting = CREATE_ATTRIBUTES
                .iter()
                .copied()
                .find(|n| *n == name)
                .ok_or_else(|| Error::InvalidAttributeName {
                    name: name.to_owned(),
                })?;
            let bad = |reason: &str| Error::InvalidConfig {
                setting,
                reason: format!(
                    "Invalid value for the parameter {setting}: {value:?}. Reason: {reason}"
                ),
            };
            let value = value.trim();
            let seconds = || -> Result<Duration> {
                let d = crate::api::settings::whole_number(value)
                    .map(Duration::from_secs)
                    .ok_or_else(|| bad("must be a non-negative integer (seconds)"))?;
                match crate::config::sqs_out_of_range(setting, d, 0) {
                    Some(why) => Err(bad(why)),
                    None => Ok(d),
                }
            };
            let boolean = || match value {
                "true" => Ok(true),
                "false" => Ok(false),
                _ => Err(bad("must be true or false")),
            };
            cfg = match setting {
                "VisibilityTimeout" => cfg.visibility_timeout(seconds()?),
                "DelaySeconds" => cfg.delay(seconds()?),
                "MessageRetentionPeriod" => cfg.message_retention_period(seconds()?),
                "ReceiveMessageWaitTimeSeconds" => cfg.receive_message_wait_time(seconds()?),
                "MaximumMessageSize" => {
                    let v = crate::api::settings::whole_number(value)
                        .ok_or_else(|| bad("must be an integer number of bytes"))?;
                    if let Some(why) = crate::config::sqs_out_of_range(setting, Duration::ZERO, v) {
                        return Err(bad(why));
                    }
                    cfg.maximum_message_size(u32::try_from(v).unwrap_or(u32::MAX))
                }
                "ContentBasedDeduplication" => cfg.content_based_deduplication(boolean()?),
                "DeduplicationScope" => match value {
                    "queue" => cfg.deduplication(Deduplication::Queue),
                    "messageGroup" => cfg.deduplication(Deduplication::MessageGroup),
                    _ => return Err(bad("must be queue or messageGroup")),
                },
                "FifoQueue" => match boolean()? {
                    true => cfg,
                    false => return Err(bad("shmfifo queues are FIFO queues")),
                },
                "FifoThroughputLimit" => match value {
                    "perQueue" => cfg.per_message_group_throughput(false),
                    "perMessageGroupId" => {
                        per_group_throughput = true;
                        cfg.per_message_group_throughput(true)
                    }
                    _ => return Err(bad("must be perQueue or perMessageGroupId")),
                },
                _ /* RedrivePolicy */ => {
                    cfg.redrive_policy(parse_redrive_policy(value).map_err(|why| bad(&why))?)
                }
            };
        }
        // Q3: the per-group throughput limit goes with per-group deduplication.
        if per_group_throughput && cfg.deduplication != Deduplication::MessageGroup {
            return Err(Error::InvalidConfig {
                setting: "FifoThroughputLimit",
                reason: "Invalid value for the parameter FifoThroughputLimit. Reason: perMessageGroupId is allowed only when DeduplicationScope is messageGroup.".into(),
            });
        }
        Ok(cfg)
    }
}

impl QueueAttributes {
    /// The attributes as SQS's `GetQueueAttributes` names them, with its value formats:
    /// durations in whole seconds, `CreatedTimestamp` and `LastModifiedTimestamp` in seconds
    /// since the epoch, booleans as
    /// `true`/`false`, `RedrivePolicy` as its JSON with the dead-letter queue as a local ARN
    /// ([`LOCAL_ARN_PREFIX`]; a dead-letter queue given as a path keeps its path). A queue
    /// with deduplication off (a shmfifo extension) reports no `DeduplicationScope`. Names
    /// that only SQS has (`QueueArn`, `Policy`, KMS settings) are
    /// left to the caller, which knows the queue's name.
    ///
    /// # Examples
    ///
    /// ```
    /// use shmfifo::{Queue, QueueConfig};
    ///
    /// let q = Queue::create_anonymous(&QueueConfig::new())?;
    /// let a = q.attributes().sqs_attributes();
    /// let get = |n: &str| a.iter().find(|(k, _)| *k == n).map(|(_, v)| v.as_str());
    /// assert_eq!(get("FifoQueue"), Some("true"));
    /// assert_eq!(get("VisibilityTimeout"), Some("30"));
    /// assert_eq!(get("DeduplicationScope"), Some("queue"));
    /// # Ok::<(), shmfifo::Error>(())
    /// ```
    pub fn sqs_attributes(&self) -> Vec<(&'static str, String)> {
        let secs = |d: Duration| d.as_secs().to_string();
        let mut v = vec![
            (
                "ApproximateNumberOfMessages",
                self.approximate_number_of_messages.to_string(),
            ),
            (
                "ApproximateNumberOfMessagesNotVisible",
                self.approximate_number_of_messages_not_visible.to_string(),
            ),
            (
                "ApproximateNumberOfMessagesDelayed",
                self.approximate_number_of_messages_delayed.to_string(),
            ),
            ("VisibilityTimeout", secs(self.visibility_timeout)),
            ("DelaySeconds", secs(self.delay)),
            (
                "MessageRetentionPeriod",
                secs(self.message_retention_period),
            ),
            ("MaximumMessageSize", self.maximum_message_size.to_string()),
            (
                "ReceiveMessageWaitTimeSeconds",
                secs(self.receive_message_wait_time),
            ),
            (
                "CreatedTimestamp",
                (self.created_timestamp / 1000).to_string(),
            ),
            (
                "LastModifiedTimestamp",
                (self.last_modified_timestamp / 1000).to_string(),
            ),
            ("FifoQueue", "true".to_owned()),
            (
                "ContentBasedDeduplication",
                self.content_based_deduplication.to_string(),
            ),
            (
                "FifoThroughputLimit",
                if self.per_message_group_throughput {
                    "perMessageGroupId"
                } else {
                    "perQueue"
                }
                .to_owned(),
            ),
        ];
        match self.deduplication {
            Deduplication::Queue => v.push(("DeduplicationScope", "queue".to_owned())),
            Deduplication::MessageGroup => {
                v.push(("DeduplicationScope", "messageGroup".to_owned()))
            }
            Deduplication::Off => {}
        }
        if let Some(p) = &self.redrive_policy {
            let target = if p.dead_letter_queue.contains('/') {
                p.dead_letter_queue.clone()
            } else {
                format!("{LOCAL_ARN_PREFIX}{}", p.dead_letter_queue)
            };
            let mut json = String::from("{\"deadLetterTargetArn\":\"");
            for c in target.chars() {
                match c {
                    '"' => json.push_str("\\\""),
                    '\\' => json.push_str("\\\\"),
                    c if (c as u32) < 0x20 => json.push_str(&format!("\\u{:04x}", c as u32)),
                    c => json.push(c),
                }
            }
            json.push_str(&format!("\",\"maxReceiveCount\":{}}}", p.max_receive_count));
            v.push(("RedrivePolicy", json));
        }
        v
    }
}
