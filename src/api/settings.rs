//! Live settings: `set_attributes` and `set_attribute` (SQS names and units).

use std::time::Duration;

use super::dead_letter::check_dead_letter;
use super::queue::{fault, ms, Queue};
use crate::config::{Deduplication, QueueSettings};
use crate::error::{Error, Result};
use crate::protocol::{live, settings};

/// A setting's value as a whole number: ASCII digits, a `+` before them and blanks around
/// them allowed (as `u64`'s parser takes them); a number past `u64::MAX` reads as
/// `u64::MAX`, so that the setting's own range check refuses it naming the range (not as "not
/// a number"). `None`: not a whole number.
pub(super) fn whole_number(value: &str) -> Option<u64> {
    let t = value.trim();
    let t = t.strip_prefix('+').unwrap_or(t);
    if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(t.parse().unwrap_or(u64::MAX))
}

/// The names [`Queue::set_attribute`] changes.
const SETTABLE: [&str; 10] = [
    "MaximumMessageSize",
    "ReceiveMessageWaitTimeSeconds",
    "VisibilityTimeout",
    "VisibilityTimeoutMs",
    "DelaySeconds",
    "DelayMs",
    "MessageRetentionPeriod",
    "MessageRetentionPeriodMs",
    "ContentBasedDeduplication",
    "RedrivePolicy",
];

impl Queue {
    /// Changes the settings SQS lets you change on a queue in use (visibility timeout,
    /// delay, retention, maximum message size, receive wait time, content-based dedup, redrive
    /// policy), for every process at once.
    /// Nothing is changed if any value is invalid. A delay change is retroactive (L1); a
    /// retention change applies to messages already queued (Q5, T1).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// use shmfifo::{Error, Queue, QueueConfig, QueueSettings};
    ///
    /// let q = Queue::create_anonymous(&QueueConfig::new())?;
    /// let s = QueueSettings::new()
    ///     .visibility_timeout(Duration::from_secs(5))
    ///     .message_retention_period(Duration::from_secs(3600));
    /// q.set_attributes(&s)?;
    /// assert_eq!(q.attributes().visibility_timeout, Duration::from_secs(5));
    /// assert_eq!(q.attributes().message_retention_period, Duration::from_secs(3600));
    /// // One invalid value (a delay over 15 minutes) and nothing changes.
    /// let bad = QueueSettings::new()
    ///     .visibility_timeout(Duration::from_secs(9))
    ///     .delay(Duration::from_secs(901));
    /// assert!(matches!(q.set_attributes(&bad), Err(Error::InvalidConfig { .. })));
    /// assert_eq!(q.attributes().visibility_timeout, Duration::from_secs(5));
    /// # Ok::<(), shmfifo::Error>(())
    /// ```
    pub fn set_attributes(&self, s: &QueueSettings) -> Result<()> {
        let inner = &*self.inner;
        crate::config::check_live(s.visibility_timeout, s.delay, s.message_retention_period)?;
        if s.content_based_deduplication == Some(true) && inner.dedup == Deduplication::Off {
            return Err(Error::AttributeNotMutable {
                name: "ContentBasedDeduplication (the queue was created with deduplication off)"
                    .into(),
            });
        }
        // A policy set with a new MaximumMessageSize is checked against the new size: the
        // dead-letter queue must take the messages the queue will take.
        let redrive = match &s.redrive_policy {
            Some(Some(p)) => Some(Some(check_dead_letter(
                p,
                Some(inner.nonce),
                s.maximum_message_size
                    .unwrap_or_else(|| self.maximum_message_size()),
                inner.binary,
            )?)),
            Some(None) => Some(None),
            None => None,
        };
        // A larger MaximumMessageSize under the policy in force: its dead-letter queue must
        // take the larger messages too (X2), as when the policy was set.
        if let (Some(m), None) = (s.maximum_message_size, &s.redrive_policy) {
            if m > self.maximum_message_size() {
                // Opened only where the handle's dead-letter check lets the path be used (a
                // path in the shared file is anyone's who may write it).
                let usable = |p: &crate::config::RedrivePolicy| {
                    self.check_dead_letter_move(std::path::Path::new(&p.dead_letter_queue), None)
                        .is_ok()
                };
                if let Some(p) = self.redrive_policy()?.filter(usable) {
                    if let Ok(dl) = Queue::open_at(&p.dead_letter_queue) {
                        if dl.maximum_message_size() < m {
                            return Err(Error::InvalidConfig {
                                setting: "MaximumMessageSize",
                                reason: format!(
                                    "Invalid value for the parameter MaximumMessageSize. Reason: the dead-letter queue {} takes messages of at most {} bytes; raise its MaximumMessageSize first.",
                                    p.dead_letter_queue,
                                    dl.maximum_message_size()
                                ),
                            });
                        }
                    }
                }
            }
        }
        if let Some(m) = s.maximum_message_size {
            let limit = self.maximum_message_size_limit();
            if !(1024..=limit).contains(&m) {
                // A larger queue is advice only up to the largest any queue takes (1 MiB).
                let more = if limit < crate::config::MAX_MESSAGE_SIZE_LIMIT
                    && m > limit
                    && m <= crate::config::MAX_MESSAGE_SIZE_LIMIT
                {
                    " (create a queue with a larger maximum_message_size for more)"
                } else {
                    ""
                };
                return Err(Error::InvalidConfig {
                    setting: "MaximumMessageSize",
                    reason: format!("Invalid value for the parameter MaximumMessageSize. Reason: {m} is not between 1024 and {limit} bytes, what this queue's arena was created for{more}."),
                });
            }
        }
        if s.receive_message_wait_time
            .is_some_and(|d| d > crate::config::MAX_WAIT_TIME)
        {
            return Err(Error::InvalidConfig {
                setting: "ReceiveMessageWaitTimeSeconds",
                reason: "Invalid value for the parameter ReceiveMessageWaitTimeSeconds. Reason: Must be between 0 and 20 seconds.".into(),
            });
        }
        let change = live::Change {
            max_message_size: s.maximum_message_size.map(u64::from),
            receive_wait_ms: s.receive_message_wait_time.map(ms),
            visibility_timeout_ms: s.visibility_timeout.map(ms),
            delay_ms: s.delay.map(ms),
            retention_ms: s.message_retention_period.map(ms),
            content_based_dedup: s.content_based_deduplication,
        };
        // A request that changes nothing (only settings fixed at creation, at their values)
        // is no modification.
        let modified = redrive.is_some() || change != live::Change::default();
        if let Some(r) = redrive {
            let (max, path) = match &r {
                Some((path, _)) => (
                    s.redrive_policy
                        .as_ref()
                        .and_then(|p| p.as_ref())
                        .map_or(0, |p| p.max_receive_count),
                    path.as_os_str().as_encoded_bytes(),
                ),
                None => (0, &[][..]),
            };
            settings::write(self.arena(), inner, inner.me, max, path)
                .map_err(|f| fault(f, inner))?;
        }
        // The redrive policy first: a failure there leaves every setting as it was.
        let op = super::queue::Op::new(inner);
        if modified {
            // On the queue's clock (a test clock's wall time too), as SentTimestamp.
            live::note_modified(self.arena(), &op);
        }
        live::change(self.arena(), &op, &change);
        inner.live()
    }

    /// Moves the queue's test clock forward by `d`, for every process at once (see
    /// [`crate::QueueConfig::test_clock`]): visibility timeouts, delays, retention, dedup and
    /// attempt-id windows that end within `d` end now, and long-polling receivers wake to
    /// see it. A queue with a real clock refuses ([`Error::InvalidConfig`]); so does a move
    /// past 17 years of queue time (the arena's 40-bit times).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use shmfifo::{Queue, QueueConfig, ReceiveOptions, SendMessage};
    ///
    /// let q = Queue::create_anonymous(&QueueConfig::new().test_clock(true))?;
    /// q.send(&SendMessage::new("g", "job").dedup_id("1"))?;
    /// let twelve_hours = Duration::from_secs(12 * 3600);
    /// let first = q.receive(&ReceiveOptions::max(1).visibility_timeout(twelve_hours))?;
    /// assert!(q.receive(&ReceiveOptions::max(1))?.is_empty()); // in flight (R3)
    /// q.advance_clock(twelve_hours)?;                           // no 12-hour wait
    /// let again = q.receive(&ReceiveOptions::max(1))?;
    /// assert_eq!(again[0].message_id, first[0].message_id);
    /// assert_eq!(again[0].receive_count, 2);
    /// assert!(Queue::create_anonymous(&QueueConfig::new())?.advance_clock(twelve_hours).is_err());
    /// # Ok::<(), shmfifo::Error>(())
    /// ```
    pub fn advance_clock(&self, d: Duration) -> Result<()> {
        let inner = &*self.inner;
        if !inner.test_clock {
            return Err(Error::InvalidConfig {
                setting: "test_clock",
                reason: "this queue runs on the real clock; only a queue created with QueueConfig::test_clock(true) has a clock to advance".into(),
            });
        }
        // Half the 40-bit range of arena times: far beyond any test, and no time wraps.
        const LIMIT: u64 = crate::protocol::clock::CLOCK_MASK / 2;
        live::advance_test_clock(self.arena(), inner, ms(d), LIMIT).map_err(|limit| {
            Error::InvalidConfig {
                setting: "test_clock",
                reason: format!("the test clock cannot pass {limit} ms of queue time"),
            }
        })?;
        inner.live()
    }

    /// Changes one setting by its SQS attribute name, with SQS's units and text values
    /// (`VisibilityTimeout`, `DelaySeconds`, `MessageRetentionPeriod`,
    /// `ReceiveMessageWaitTimeSeconds` in seconds; shmfifo's millisecond forms
    /// `VisibilityTimeoutMs`, `DelayMs`, `MessageRetentionPeriodMs`; `MaximumMessageSize` in
    /// bytes, up to [`Queue::maximum_message_size_limit`]; `ContentBasedDeduplication`
    /// `true`/`false`; `FifoQueue` `true` (a no-op, Q2); `RedrivePolicy` as SQS's JSON, with
    /// `deadLetterTargetArn` a queue name, path or ARN, or empty to remove it). A value that
    /// does not parse or is out of range is [`Error::InvalidConfig`] (SQS's
    /// `InvalidAttributeValue`); settings fixed at creation (`DeduplicationScope`,
    /// `FifoThroughputLimit`, `MaxInFlight`) give [`Error::AttributeNotMutable`] unless the
    /// value is the one they have (then nothing changes: a configuration applied again
    /// succeeds); unknown names [`Error::InvalidAttributeName`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// use shmfifo::{Error, Queue, QueueConfig, SendMessage};
    ///
    /// let q = Queue::create_anonymous(&QueueConfig::new())?;
    /// q.set_attribute("VisibilityTimeout", "45")?;
    /// assert_eq!(q.attributes().visibility_timeout, Duration::from_secs(45));
    /// // Content-based dedup on: sends need no dedup id any more.
    /// q.set_attribute("ContentBasedDeduplication", "true")?;
    /// q.send(&SendMessage::new("g", "no dedup id"))?;
    ///
    /// q.set_attribute("MaximumMessageSize", "2048")?;
    /// assert_eq!(q.maximum_message_size(), 2048);
    /// assert!(matches!(
    ///     q.set_attribute("DeduplicationScope", "messageGroup"),
    ///     Err(Error::AttributeNotMutable { .. })
    /// ));
    /// q.set_attribute("DeduplicationScope", "queue")?; // what it is: nothing changes
    /// assert_eq!(
    ///     q.set_attribute("DelaySeconds", "soon").unwrap_err().sqs_code(),
    ///     "InvalidAttributeValue"
    /// );
    /// assert!(matches!(
    ///     q.set_attribute("Colour", "blue"),
    ///     Err(Error::InvalidAttributeName { .. })
    /// ));
    /// # Ok::<(), shmfifo::Error>(())
    /// ```
    pub fn set_attribute(&self, name: &str, value: &str) -> Result<()> {
        self.set_attributes_by_name([(name, value)])
    }

    /// Changes several settings by their SQS attribute names at once, as SQS's
    /// `SetQueueAttributes` does: each name and value as [`Queue::set_attribute`] takes them,
    /// all checked before any applies, so that one bad name or value changes nothing (the
    /// error names one of them). A name given twice takes its last value.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// use shmfifo::{Error, Queue, QueueConfig};
    ///
    /// let q = Queue::create_anonymous(&QueueConfig::new())?;
    /// q.set_attributes_by_name([("DelaySeconds", "7"), ("VisibilityTimeout", "45")])?;
    /// assert_eq!(q.attributes().delay, Duration::from_secs(7));
    /// assert_eq!(q.attributes().visibility_timeout, Duration::from_secs(45));
    /// // A visibility timeout of -5 is refused, and the delay beside it is not changed.
    /// let r = q.set_attributes_by_name([("DelaySeconds", "9"), ("VisibilityTimeout", "-5")]);
    /// assert_eq!(r.unwrap_err().sqs_code(), "InvalidAttributeValue");
    /// assert_eq!(q.attributes().delay, Duration::from_secs(7));
    /// # Ok::<(), shmfifo::Error>(())
    /// ```
    pub fn set_attributes_by_name<'a>(
        &self,
        attributes: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<()> {
        let mut s = QueueSettings::new();
        let mut current: Option<Vec<(&'static str, String)>> = None;
        for (name, value) in attributes {
            if FIXED.contains(&name) {
                let now = current.get_or_insert_with(|| {
                    let a = self.attributes();
                    let mut v = a.sqs_attributes();
                    v.push(("MaxInFlight", a.max_in_flight.to_string()));
                    v
                });
                if now.iter().any(|(n, v)| *n == name && v == value.trim()) {
                    continue; // the value it has: nothing to change
                }
            }
            s = with_attribute(s, name, value)?;
        }
        self.set_attributes(&s)
    }
}

/// The attributes fixed at creation ([`Queue::set_attribute`]).
const FIXED: [&str; 3] = ["DeduplicationScope", "FifoThroughputLimit", "MaxInFlight"];

/// `s` with the setting SQS's attribute `name` names set to `value` (see
/// [`Queue::set_attribute`]); `FifoQueue` `true` leaves it as it is.
fn with_attribute(s: QueueSettings, name: &str, value: &str) -> Result<QueueSettings> {
    // SQS's SetQueueAttributes answers a value that does not parse with
    // InvalidAttributeValue, naming the attribute.
    let setting = SETTABLE.iter().copied().find(|n| *n == name);
    let bad = |why: &str| Error::InvalidConfig {
        setting: setting.unwrap_or("Attributes"),
        reason: format!("Invalid value for the parameter {name}. Reason: {why}"),
    };
    let number = |scale: u64| -> Result<Duration> {
        let v = whole_number(value).ok_or_else(|| bad("must be a non-negative integer"))?;
        let d = Duration::from_millis(v.saturating_mul(scale));
        match crate::config::sqs_out_of_range(name, d, 0) {
            Some(why) => Err(bad(why)),
            None => Ok(d),
        }
    };
    Ok(match name {
        "VisibilityTimeout" => s.visibility_timeout(number(1000)?),
        "VisibilityTimeoutMs" => s.visibility_timeout(number(1)?),
        "DelaySeconds" => s.delay(number(1000)?),
        "DelayMs" => s.delay(number(1)?),
        "MessageRetentionPeriod" => s.message_retention_period(number(1000)?),
        "MessageRetentionPeriodMs" => s.message_retention_period(number(1)?),
        "ContentBasedDeduplication" => match value.trim() {
            "true" => s.content_based_deduplication(true),
            "false" => s.content_based_deduplication(false),
            _ => return Err(bad("must be true or false")),
        },
        "RedrivePolicy" if value.trim().is_empty() => s.redrive_policy(None),
        "RedrivePolicy" => {
            let p = crate::config::parse_redrive_policy(value).map_err(|why| bad(&why))?;
            s.redrive_policy(Some(p))
        }
        // Q2: on a FIFO queue, FifoQueue=true changes nothing; anything else would change
        // the queue's type.
        "FifoQueue" if value.trim() == "true" => s,
        "FifoQueue" => {
            return Err(Error::InvalidConfig {
                setting: "FifoQueue",
                reason: "Invalid value for the parameter FifoQueue. Reason: Modifying queue type is not supported.".into(),
            })
        }
        // Its range is this queue's (`set_attributes` names the limit the arena was created
        // for, which may be below SQS's).
        "MaximumMessageSize" => s.maximum_message_size(
            whole_number(value)
                .map(|v| u32::try_from(v).unwrap_or(u32::MAX))
                .ok_or_else(|| bad("must be an integer number of bytes"))?,
        ),
        "ReceiveMessageWaitTimeSeconds" => s.receive_message_wait_time(number(1000)?),
        "DeduplicationScope"
        | "FifoThroughputLimit"
        | "MaxInFlight" => {
            return Err(Error::AttributeNotMutable {
                name: name.to_owned(),
            })
        }
        _ => {
            return Err(Error::InvalidAttributeName {
                name: name.to_owned(),
            })
        }
    })
}
