//! The subcommands, and what they share: opening a queue by name or path, and the JSON and
//! table forms of messages and settings.

pub mod admin;
pub mod bridge;
pub mod create;
pub mod ls;
pub mod metrics;
pub mod receive;
pub mod redrive;
pub mod remote;
pub mod send;
pub mod serve;
pub mod stat;
pub mod watch;

use clap::Args;
use serde_json::{json, Value};
use shmfifo::{Deduplication, Observer, Queue, QueueAttributes, ReceivedAttribute};

use crate::errors::Failure;
use crate::output::{self, duration, kv, ms_and_time, size};
use crate::{Cli, Command};

/// Options every subcommand sees.
#[derive(Debug, Clone, Copy)]
pub struct Ctx {
    /// `--json`.
    pub json: bool,
}

/// A subcommand's only argument: the queue.
#[derive(Args, Debug)]
pub struct QueueArg {
    /// Queue NAME (/dev/shm/NAME) or path (anything containing '/').
    pub queue: String,
}

/// Runs the command. Every queue it opens is closed before it returns.
pub fn run(cli: Cli) -> Result<(), Failure> {
    let ctx = Ctx { json: cli.json };
    // `--json` is global on the command line, but the services print no document: refused,
    // not ignored.
    let service = match &cli.command {
        Command::Serve(_) => Some("serve"),
        Command::Bridge(_) => Some("bridge"),
        Command::Metrics(_) => Some("metrics"),
        _ => None,
    };
    if let Some(name) = service.filter(|_| cli.json) {
        return Err(Failure::Usage {
            source: "--json".to_owned(),
            what: format!(
                "`{name}` runs as a service and prints no JSON document; leave --json out"
            ),
        });
    }
    match cli.command {
        Command::Create(a) => create::run(&a, ctx),
        Command::Ls(a) => ls::run(&a, ctx),
        Command::Stat(a) => stat::run(&a, ctx),
        Command::Send(a) => send::run(&a, ctx),
        Command::Receive(a) => receive::receive(&a, ctx),
        Command::Delete(a) => receive::delete(&a, ctx),
        Command::ChangeVisibility(a) => receive::change_visibility(&a, ctx),
        Command::Peek(a) => receive::peek(&a, ctx),
        Command::Purge(a) => admin::purge(&a, ctx),
        Command::Redrive(a) => redrive::run(&a, ctx),
        Command::Recover(a) => admin::recover(&a, ctx),
        Command::Set(a) => admin::set(&a, ctx),
        Command::Unlink(a) => admin::unlink(&a, ctx),
        Command::Watch(a) => watch::run(&a, ctx),
        Command::Serve(a) => serve::run(&a, ctx),
        Command::Bridge(a) => bridge::run(&a, cli.verbose),
        Command::Metrics(a) => metrics::run(&a),
    }
}

/// A dedup overflow policy as `create --dedup-overflow` names it.
pub fn overflow_name(o: shmfifo::DedupOverflow) -> &'static str {
    match o {
        shmfifo::DedupOverflow::Refuse => "refuse",
        _ => "shorten-window",
    }
}

/// Whether a queue argument is a path rather than a name under `/dev/shm`.
pub fn is_path(queue: &str) -> bool {
    queue.contains('/')
}

/// The file a queue argument names.
pub fn path_of(queue: &str) -> String {
    if is_path(queue) {
        queue.to_owned()
    } else {
        format!("/dev/shm/{queue}")
    }
}

/// Opens the queue a queue argument names.
pub fn open(queue: &str) -> Result<Queue, Failure> {
    let r = if is_path(queue) {
        Queue::open_at(queue)
    } else {
        Queue::open(queue)
    };
    r.map_err(|e| Failure::queue(queue, e))
}

/// Observes the queue a queue argument names, without joining it (read-only, no participant
/// registered): what `ls`, `stat`, `peek` and `watch` use, so that looking changes nothing and
/// works on a queue whose participant slots are all taken.
pub fn observe(queue: &str) -> Result<Observer, Failure> {
    // `.` and `..` are no names (as `open` and `create` refuse them), not /dev/shm's entries.
    if queue == "." || queue == ".." {
        return Err(Failure::queue(
            queue,
            shmfifo::Error::InvalidQueueName {
                name: queue.to_owned(),
            },
        ));
    }
    Queue::observe_at(path_of(queue)).map_err(|e| Failure::queue(queue, e))
}

/// Adds SQS's digests to a send's JSON answer, as `aws sqs send-message` prints them (SDKs
/// check them): `MD5OfMessageBody`, and `MD5OfMessageAttributes` when there are attributes.
pub fn add_send_digests(v: &mut Value, msg: &shmfifo::SendMessage<'_>) {
    v["MD5OfMessageBody"] = json!(shmfifo_serve::digest::md5_hex(msg.body_bytes()));
    if !msg.attributes.is_empty() {
        v["MD5OfMessageAttributes"] = json!(shmfifo_serve::digest::md5_of_attributes(
            msg.attributes
                .iter()
                .map(|a| (a.name, a.data_type, a.value))
        ));
    }
}

/// Writes a whole-command JSON document.
pub fn print_json(v: &Value) {
    output::json(v, true);
}

/// The SQS name of a deduplication setting.
pub fn scope_name(d: Deduplication) -> &'static str {
    match d {
        Deduplication::Queue => "queue",
        Deduplication::MessageGroup => "messageGroup",
        Deduplication::Off => "off",
    }
}

fn ms(d: std::time::Duration) -> u64 {
    d.as_millis().min(u128::from(u64::MAX)) as u64
}

/// A queue's settings as JSON (snake_case, units in the names).
pub fn settings_json(a: &QueueAttributes) -> Value {
    json!({
        "visibility_timeout_ms": ms(a.visibility_timeout),
        "delay_ms": ms(a.delay),
        "message_retention_period_ms": ms(a.message_retention_period),
        "receive_message_wait_time_ms": ms(a.receive_message_wait_time),
        "maximum_message_size": a.maximum_message_size,
        "deduplication_scope": scope_name(a.deduplication),
        "content_based_deduplication": a.content_based_deduplication,
        "deduplication_interval_ms": ms(a.deduplication_interval),
        "dedup_entries": a.dedup_entries,
        "dedup_overflow": overflow_name(a.dedup_overflow),
        "redrive_policy": a.redrive_policy.as_ref().map(|p| json!({
            "dead_letter_queue": p.dead_letter_queue,
            "max_receive_count": p.max_receive_count,
        })),
        "max_in_flight": a.max_in_flight,
        "max_groups": a.max_groups,
        "group_capacity": a.group_capacity,
        "group_base_entries": a.group_base_entries,
        "attempt_entries": a.attempt_entries,
        "max_participants": a.max_participants,
        "release_on_death": a.release_on_death,
        "body_mode": body_mode(a.body_mode),
        "size_classes": a.size_classes.iter().map(|&(payload, slots)| json!({
            "payload_bytes": payload,
            "slots": slots,
        })).collect::<Vec<_>>(),
        "arena_bytes": a.arena_bytes,
        "size_limit_bytes": a.size_limit_bytes,
        "grows": a.grows,
        "created_timestamp": a.created_timestamp,
    })
}

/// A queue's settings as key/value lines, with SQS's names.
pub fn settings_text(a: &QueueAttributes, indent: usize) -> String {
    let on = |b: bool| if b { "true" } else { "false" }.to_owned();
    let mut rows = vec![
        ("VisibilityTimeout", duration(a.visibility_timeout)),
        ("DelaySeconds", duration(a.delay)),
        (
            "MessageRetentionPeriod",
            duration(a.message_retention_period),
        ),
        (
            "ReceiveMessageWaitTimeSeconds",
            duration(a.receive_message_wait_time),
        ),
        (
            "MaximumMessageSize",
            format!(
                "{} ({})",
                output::num(a.maximum_message_size.into()),
                size(a.maximum_message_size.into())
            ),
        ),
        ("DeduplicationScope", scope_name(a.deduplication).to_owned()),
        (
            "ContentBasedDeduplication",
            on(a.content_based_deduplication),
        ),
    ];
    if a.deduplication != Deduplication::Off {
        rows.push(("DeduplicationInterval", duration(a.deduplication_interval)));
    }
    rows.push((
        "RedrivePolicy",
        a.redrive_policy.as_ref().map_or("none".to_owned(), |p| {
            format!(
                "deadLetterTarget {}, maxReceiveCount {}",
                p.dead_letter_queue, p.max_receive_count
            )
        }),
    ));
    rows.extend([
        ("MaxInFlight", output::num(a.max_in_flight)),
        // The groups the table holds now (`--max-groups` at creation), and, where the size
        // limit lets it grow, how far.
        (
            "MaxGroups",
            if a.max_groups > a.group_capacity {
                format!(
                    "{} (grows to {})",
                    output::num(a.group_capacity),
                    output::num(a.max_groups)
                )
            } else {
                output::num(a.group_capacity)
            },
        ),
        ("MaxParticipants", output::num(a.max_participants.into())),
        ("ReleaseOnDeath", on(a.release_on_death)),
        ("BodyMode", body_mode(a.body_mode).to_owned()),
        ("ArenaSize", size(a.arena_bytes)),
        ("SizeLimit", size(a.size_limit_bytes)),
        ("CreatedTimestamp", ms_and_time(a.created_timestamp)),
    ]);
    kv(&rows, indent)
}

/// A body mode as the CLI names it (`create --body-mode`).
fn body_mode(m: shmfifo::BodyMode) -> &'static str {
    match m {
        shmfifo::BodyMode::Text => "text",
        shmfifo::BodyMode::Binary => "binary",
    }
}

/// A message as `receive` and `peek` print it: SQS's message shape.
#[derive(Debug)]
pub struct Shown<'a> {
    /// `MessageId`.
    pub message_id: String,
    /// `ReceiptHandle` (none for a peek).
    pub receipt_handle: Option<String>,
    /// `Body`.
    pub body: &'a str,
    /// A binary queue's body bytes (shown in base64), `None` on a text queue.
    pub body_bytes: Option<&'a [u8]>,
    /// `MessageGroupId`.
    pub group_id: &'a str,
    /// `MessageDeduplicationId`.
    pub dedup_id: Option<&'a str>,
    /// `SequenceNumber`.
    pub sequence_number: u128,
    /// `SentTimestamp`, ms.
    pub sent_timestamp: u64,
    /// `ApproximateFirstReceiveTimestamp`, ms (0: never received).
    pub first_receive_timestamp: u64,
    /// `ApproximateReceiveCount`.
    pub receive_count: u32,
    /// `DeadLetterQueueSourceArn`.
    pub dead_letter_source: Option<&'a str>,
    /// Message attributes.
    pub attributes: &'a [ReceivedAttribute],
}

impl<'a> From<&'a shmfifo::Message> for Shown<'a> {
    fn from(m: &'a shmfifo::Message) -> Self {
        Shown {
            message_id: m.message_id.to_string(),
            receipt_handle: Some(m.receipt_handle.to_string()),
            body: &m.body,
            body_bytes: (!m.body_bytes.is_empty()).then_some(m.body_bytes.as_slice()),
            group_id: &m.group_id,
            dedup_id: m.dedup_id.as_deref(),
            sequence_number: m.sequence_number,
            sent_timestamp: m.sent_timestamp,
            first_receive_timestamp: m.first_receive_timestamp,
            receive_count: m.receive_count,
            dead_letter_source: m.dead_letter_source.as_deref(),
            attributes: &m.attributes,
        }
    }
}

impl<'a> From<&'a shmfifo::PeekedMessage> for Shown<'a> {
    fn from(m: &'a shmfifo::PeekedMessage) -> Self {
        Shown {
            message_id: m.message_id.to_string(),
            receipt_handle: None,
            body: &m.body,
            body_bytes: (!m.body_bytes.is_empty()).then_some(m.body_bytes.as_slice()),
            group_id: &m.group_id,
            dedup_id: m.dedup_id.as_deref(),
            sequence_number: m.sequence_number,
            sent_timestamp: m.sent_timestamp,
            first_receive_timestamp: m.first_receive_timestamp,
            receive_count: m.receive_count,
            dead_letter_source: m.dead_letter_source.as_deref(),
            attributes: &m.attributes,
        }
    }
}

/// Whether an attribute's type is `Binary` (its value is shown in base64).
fn is_binary(a: &ReceivedAttribute) -> bool {
    a.data_type.split('.').next() == Some("Binary")
}

impl Shown<'_> {
    /// The JSON form: the shape of a message in `aws sqs receive-message` output (system
    /// attributes as strings, message attributes with `DataType` and `StringValue` or
    /// base64 `BinaryValue`).
    pub fn json(&self) -> Value {
        let mut sys = serde_json::Map::new();
        sys.insert("MessageGroupId".into(), json!(self.group_id));
        if let Some(d) = self.dedup_id {
            sys.insert("MessageDeduplicationId".into(), json!(d));
        }
        sys.insert(
            "SequenceNumber".into(),
            json!(self.sequence_number.to_string()),
        );
        sys.insert(
            "SentTimestamp".into(),
            json!(self.sent_timestamp.to_string()),
        );
        if self.first_receive_timestamp != 0 {
            sys.insert(
                "ApproximateFirstReceiveTimestamp".into(),
                json!(self.first_receive_timestamp.to_string()),
            );
        }
        sys.insert(
            "ApproximateReceiveCount".into(),
            json!(self.receive_count.to_string()),
        );
        if let Some(s) = self.dead_letter_source {
            sys.insert("DeadLetterQueueSourceArn".into(), json!(s));
        }
        let mut attrs = serde_json::Map::new();
        for a in self.attributes {
            let v = if is_binary(a) {
                json!({"DataType": a.data_type, "BinaryValue": crate::parse::base64_encode(&a.value)})
            } else {
                json!({"DataType": a.data_type, "StringValue": String::from_utf8_lossy(&a.value)})
            };
            attrs.insert(a.name.clone(), v);
        }
        let mut m = serde_json::Map::new();
        m.insert("MessageId".into(), json!(self.message_id));
        if let Some(h) = &self.receipt_handle {
            m.insert("ReceiptHandle".into(), json!(h));
        }
        match self.body_bytes {
            // A binary queue's body: base64, said by `BodyEncoding` (a shmfifo extension;
            // `send --batch` decodes it back).
            Some(b) => {
                m.insert("MD5OfBody".into(), json!(shmfifo_serve::digest::md5_hex(b)));
                m.insert("Body".into(), json!(crate::parse::base64_encode(b)));
                m.insert("BodyEncoding".into(), json!("base64"));
            }
            None => {
                m.insert(
                    "MD5OfBody".into(),
                    json!(shmfifo_serve::digest::md5_hex(self.body.as_bytes())),
                );
                m.insert("Body".into(), json!(self.body));
            }
        }
        m.insert("Attributes".into(), Value::Object(sys));
        if !attrs.is_empty() {
            m.insert(
                "MD5OfMessageAttributes".into(),
                json!(shmfifo_serve::digest::md5_of_attributes(
                    self.attributes.iter().map(|a| (
                        a.name.as_str(),
                        a.data_type.as_str(),
                        a.value.as_slice()
                    ))
                )),
            );
            m.insert("MessageAttributes".into(), Value::Object(attrs));
        }
        Value::Object(m)
    }

    /// The human form: one aligned line per attribute, the body last.
    pub fn text(&self) -> String {
        let mut rows: Vec<(&str, String)> = vec![("MessageId", self.message_id.clone())];
        if let Some(h) = &self.receipt_handle {
            rows.push(("ReceiptHandle", h.clone()));
        }
        rows.push(("MessageGroupId", self.group_id.to_owned()));
        if let Some(d) = self.dedup_id {
            rows.push(("MessageDeduplicationId", d.to_owned()));
        }
        rows.push(("SequenceNumber", self.sequence_number.to_string()));
        rows.push(("SentTimestamp", ms_and_time(self.sent_timestamp)));
        rows.push((
            "ApproximateFirstReceiveTimestamp",
            if self.first_receive_timestamp == 0 {
                "-".to_owned()
            } else {
                ms_and_time(self.first_receive_timestamp)
            },
        ));
        rows.push(("ApproximateReceiveCount", self.receive_count.to_string()));
        if let Some(s) = self.dead_letter_source {
            rows.push(("DeadLetterQueueSourceArn", s.to_owned()));
        }
        let attrs: Vec<String> = self
            .attributes
            .iter()
            .map(|a| {
                let v = if is_binary(a) {
                    crate::parse::base64_encode(&a.value)
                } else {
                    String::from_utf8_lossy(&a.value).into_owned()
                };
                format!("{}={}:{v}", a.name, a.data_type)
            })
            .collect();
        if !attrs.is_empty() {
            rows.push(("MessageAttributes", attrs.join("\n")));
        }
        match self.body_bytes {
            Some(b) => rows.push((
                "Body",
                format!("(base64) {}", crate::parse::base64_encode(b)),
            )),
            None => rows.push(("Body", self.body.to_owned())),
        }
        kv(&rows, 0)
    }
}
