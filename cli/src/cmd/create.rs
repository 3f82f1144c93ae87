//! `shmfifo create`: every `QueueConfig` setting, with SQS's names and units.

use std::time::Duration;

use clap::{Args, ValueEnum};
use serde_json::json;
use shmfifo::{DedupOverflow, Deduplication, Queue, QueueConfig, RedrivePolicy};

use super::{is_path, print_json, settings_json, settings_text, Ctx};
use crate::errors::Failure;
use crate::output::{out, size};
use crate::parse;

/// `DeduplicationScope`, or no deduplication at all.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// A dedup id is deduplicated across the queue (SQS's default).
    #[value(name = "queue")]
    Queue,
    /// A dedup id is deduplicated within its message group.
    #[value(name = "messageGroup")]
    MessageGroup,
    /// No dedup table: sends need no dedup id and may not give one (shmfifo extension).
    #[value(name = "off")]
    Off,
}

/// What a send does when the dedup table has no room for a new id.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overflow {
    /// Forget the oldest id of its window early and accept the send (counted, reported).
    #[value(name = "shorten-window")]
    ShortenWindow,
    /// Refuse the send with DedupTableFull.
    #[value(name = "refuse")]
    Refuse,
}

/// What message bodies may hold.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyModeArg {
    /// SQS's rule: text in the XML character set.
    #[value(name = "text")]
    Text,
    /// Any bytes (shmfifo extension; `receive --json` shows them in base64).
    #[value(name = "binary")]
    Binary,
}

/// Arguments of `create`. Unset settings take the library's defaults.
#[derive(Args, Debug)]
#[command(
    after_help = "Durations: 30 (seconds), 30s, 500ms, 5m, 12h, 4d. Sizes: 262144, 256KiB, 1MiB."
)]
pub struct CreateArgs {
    /// Queue NAME (/dev/shm/NAME) or path (anything containing '/').
    pub queue: String,

    /// VisibilityTimeout: how long a received message stays hidden [default: 30s; 0-12h].
    #[arg(long, value_name = "DURATION", value_parser = parse::duration, help_heading = "SQS attributes")]
    pub visibility_timeout: Option<Duration>,
    /// DelaySeconds: the queue delay before a sent message becomes visible [default: 0; up
    /// to 15m].
    #[arg(long, value_name = "DURATION", value_parser = parse::duration, help_heading = "SQS attributes")]
    pub delay_seconds: Option<Duration>,
    /// MessageRetentionPeriod: how long a message is kept [default: 4d; 1ms-14d].
    #[arg(long, value_name = "DURATION", value_parser = parse::duration, help_heading = "SQS attributes")]
    pub message_retention_period: Option<Duration>,
    /// ReceiveMessageWaitTimeSeconds: the default long-poll wait of a receive [default: 0;
    /// up to 20s].
    #[arg(long, alias = "receive-message-wait-time-seconds", value_name = "DURATION",
          value_parser = parse::duration, help_heading = "SQS attributes")]
    pub receive_message_wait_time: Option<Duration>,
    /// MaximumMessageSize: the largest body plus attributes, 1KiB-1MiB [default: 1MiB, as SQS;
    /// 256KiB with --size-limit 0; with --size-classes, what the largest holds].
    #[arg(long, value_name = "BYTES", value_parser = parse::bytes, help_heading = "SQS attributes")]
    pub maximum_message_size: Option<u32>,
    /// ContentBasedDeduplication: a send without a dedup id uses the SHA-256 of its body.
    #[arg(long, help_heading = "SQS attributes")]
    pub content_based_deduplication: bool,
    /// DeduplicationScope [default: queue].
    #[arg(
        long,
        value_name = "SCOPE",
        value_enum,
        help_heading = "SQS attributes"
    )]
    pub deduplication_scope: Option<Scope>,
    /// RedrivePolicy as SQS's JSON: '{"deadLetterTargetArn":"DLQ","maxReceiveCount":5}'
    /// (the target is a queue name or path, and must exist).
    #[arg(long, value_name = "JSON", value_parser = parse_policy, help_heading = "SQS attributes",
          conflicts_with_all = ["dead_letter_queue", "max_receive_count"])]
    pub redrive_policy: Option<RedrivePolicy>,
    /// The dead-letter queue of the redrive policy (with --max-receive-count).
    #[arg(
        long,
        value_name = "QUEUE",
        requires = "max_receive_count",
        help_heading = "SQS attributes"
    )]
    pub dead_letter_queue: Option<String>,
    /// maxReceiveCount of the redrive policy, 1-1000 (with --dead-letter-queue).
    #[arg(
        long,
        value_name = "N",
        requires = "dead_letter_queue",
        help_heading = "SQS attributes"
    )]
    pub max_receive_count: Option<u32>,

    /// How long an accepted dedup id makes later sends with it duplicates [default: 5m].
    #[arg(long, value_name = "DURATION", value_parser = parse::duration, help_heading = "shmfifo settings")]
    pub deduplication_interval: Option<Duration>,
    /// Entries of the dedup table's base (ids remembered at once before it grows), rounded up
    /// to a power of two; the table grows past it up to --size-limit [default: 16384].
    #[arg(long, value_name = "N", help_heading = "shmfifo settings")]
    pub dedup_entries: Option<u32>,
    /// When all of a new dedup id's entries hold ids of the interval: shorten-window (forget
    /// the oldest, as SQS would accept the send) or refuse [default: shorten-window].
    #[arg(
        long,
        value_name = "WHAT",
        value_enum,
        help_heading = "shmfifo settings"
    )]
    pub dedup_overflow: Option<Overflow>,
    /// Slots of the smallest size class (192 B payloads) in the base file; each larger class
    /// (x4) gets a quarter as many, at least 4; classes grow past them up to --size-limit
    /// [default: 8192].
    #[arg(
        long,
        value_name = "N",
        help_heading = "shmfifo settings",
        conflicts_with = "size_classes"
    )]
    // No range here: 0 is the library's InvalidConfig (exit code 19, naming the setting), as
    // every other setting out of range (it was a usage error, 2).
    pub max_messages: Option<u32>,
    /// Most bytes the queue's file may grow to as its size classes fill (e.g. 4GiB; 0: never
    /// grow) [default: 1GiB, at most the base file plus a quarter of the free space beside it].
    #[arg(long, value_name = "SIZE", value_parser = parse::large_bytes, help_heading = "shmfifo settings")]
    pub size_limit: Option<u64>,
    /// Explicit size classes PAYLOAD:SLOTS,... ascending, at most 8; the last must hold a
    /// message of --maximum-message-size plus 464 bytes (without --maximum-message-size, the
    /// largest class sets it).
    #[arg(long, value_name = "LIST", value_parser = parse::size_classes, help_heading = "shmfifo settings")]
    pub size_classes: Option<parse::SizeClasses>,
    /// Groups with messages the base group table holds; the table grows past them up to
    /// --size-limit [default: 4096].
    #[arg(long, value_name = "N", help_heading = "shmfifo settings")]
    pub max_groups: Option<u32>,
    /// Most processes with the queue open at once [default: 64].
    #[arg(long, value_name = "N", help_heading = "shmfifo settings")]
    pub max_participants: Option<u32>,
    /// Most messages received and not yet deleted [default: 120000].
    #[arg(long, value_name = "N", help_heading = "shmfifo settings")]
    pub max_in_flight: Option<u32>,
    /// ReceiveRequestAttemptId records kept [default: 1024; 0 keeps none].
    #[arg(long, value_name = "N", help_heading = "shmfifo settings")]
    pub attempt_entries: Option<u32>,
    /// Whether a dead receiver's in-flight messages are made visible at once [default: true].
    #[arg(long, value_name = "BOOL", help_heading = "shmfifo settings")]
    pub release_on_death: Option<bool>,
    /// What bodies may hold: text (SQS's rule) or binary (any bytes) [default: text].
    #[arg(
        long,
        value_name = "MODE",
        value_enum,
        help_heading = "shmfifo settings"
    )]
    pub body_mode: Option<BodyModeArg>,
    /// Permission bits of the queue file, octal [default: 0600].
    #[arg(long, value_name = "OCTAL", value_parser = parse::mode, help_heading = "shmfifo settings")]
    pub mode: Option<u32>,
}

fn parse_policy(s: &str) -> Result<RedrivePolicy, String> {
    shmfifo::parse_redrive_policy(s)
}

impl CreateArgs {
    /// The configuration these arguments ask for.
    pub fn config(&self) -> QueueConfig {
        let mut c = QueueConfig::new();
        if let Some(d) = self.visibility_timeout {
            c = c.visibility_timeout(d);
        }
        if let Some(d) = self.delay_seconds {
            c = c.delay(d);
        }
        if let Some(d) = self.message_retention_period {
            c = c.message_retention_period(d);
        }
        if let Some(d) = self.receive_message_wait_time {
            c = c.receive_message_wait_time(d);
        }
        if let Some(n) = self.maximum_message_size {
            c = c.maximum_message_size(n);
        }
        c = c.content_based_deduplication(self.content_based_deduplication);
        if let Some(s) = self.deduplication_scope {
            c = c.deduplication(match s {
                Scope::Queue => Deduplication::Queue,
                Scope::MessageGroup => Deduplication::MessageGroup,
                Scope::Off => Deduplication::Off,
            });
        }
        if let Some(p) = &self.redrive_policy {
            c = c.redrive_policy(p.clone());
        }
        if let (Some(q), Some(n)) = (&self.dead_letter_queue, self.max_receive_count) {
            c = c.redrive_policy(RedrivePolicy::new(q.clone(), n));
        }
        if let Some(d) = self.deduplication_interval {
            c = c.deduplication_interval(d);
        }
        if let Some(n) = self.dedup_entries {
            c = c.dedup_entries(n);
        }
        if let Some(o) = self.dedup_overflow {
            c = c.dedup_overflow(match o {
                Overflow::ShortenWindow => DedupOverflow::ShortenWindow,
                Overflow::Refuse => DedupOverflow::Refuse,
            });
        }
        if let Some(n) = self.max_messages {
            c = c.max_messages(n);
        }
        if let Some(n) = self.size_limit {
            c = c.size_limit(n);
        }
        if let Some(v) = &self.size_classes {
            c = c.size_classes(v.0.clone());
        }
        if let Some(n) = self.max_groups {
            c = c.max_groups(n);
        }
        if let Some(n) = self.max_participants {
            c = c.max_participants(n);
        }
        if let Some(n) = self.max_in_flight {
            c = c.max_in_flight(n);
        }
        if let Some(n) = self.attempt_entries {
            c = c.attempt_entries(n);
        }
        if let Some(m) = self.body_mode {
            c = c.body_mode(match m {
                BodyModeArg::Text => shmfifo::BodyMode::Text,
                BodyModeArg::Binary => shmfifo::BodyMode::Binary,
            });
        }
        if let Some(b) = self.release_on_death {
            c = c.release_on_death(b);
        }
        if let Some(m) = self.mode {
            c = c.mode(m);
        }
        c
    }
}

/// The settings of `a` (a queue's attributes) that must match for a create of an existing
/// queue to succeed, as SQS's CreateQueue compares them: every setting, not the creation time
/// nor how far the queue has grown.
fn comparable(a: &shmfifo::QueueAttributes) -> serde_json::Map<String, serde_json::Value> {
    let mut m = settings_json(a).as_object().cloned().unwrap_or_default();
    // The setting is the base file's table; what it holds now counts the tables it added.
    m.insert("dedup_entries".into(), json!(a.dedup_base_entries));
    // Not settings but how far the queue has grown (layouts 13–16).
    for k in [
        "created_timestamp",
        "arena_bytes",
        "grows",
        "group_capacity",
    ] {
        m.remove(k);
    }
    m
}

/// The options a setting that no option names directly is derived from: a difference in it
/// quoted a number the caller never gave (`group_base_entries is 16 (asked 32)` for
/// `--max-groups 16`).
fn derived_from(key: &str) -> Option<&'static str> {
    Some(match key {
        "group_base_entries" => "twice --max-groups, rounded up to a power of two",
        "dedup_entries" => "--dedup-entries rounded up to a power of two (0 without deduplication)",
        "size_classes" => "from --max-messages, --size-classes and --maximum-message-size",
        "size_limit_bytes" => "--size-limit",
        _ => return None,
    })
}

/// Creates the queue and prints its settings. As SQS's CreateQueue: a queue that exists with
/// exactly these settings is success (and says so); with others, `QueueAlreadyExists` (exit
/// code 11) naming each difference.
pub fn run(a: &CreateArgs, ctx: Ctx) -> Result<(), Failure> {
    let cfg = a.config();
    let created = if is_path(&a.queue) {
        Queue::create_at(&a.queue, &cfg)
    } else {
        Queue::create(&a.queue, &cfg)
    };
    let (q, existed) = match created {
        Ok(q) => (q, false),
        Err(e @ shmfifo::Error::QueueNameExists { .. }) => {
            // Not openable (not a queue, another layout version, ...): the create's own error.
            let Ok(q) = super::open(&a.queue) else {
                return Err(Failure::queue(&a.queue, e));
            };
            // What these arguments would make, made where it costs nothing: an anonymous arena.
            // Without --size-limit, with the queue's own: the default is a share of the space
            // free at creation, which the queue itself has since taken some of (a default
            // queue created twice in a 64 MiB /dev/shm compared 28.5 MiB with 24.4).
            let cfg = match a.size_limit {
                Some(_) => cfg,
                None => cfg.size_limit(q.attributes().size_limit_bytes),
            };
            let asked = Queue::create_anonymous(&cfg).map_err(|e| Failure::queue(&a.queue, e))?;
            let (mut have, mut want) =
                (comparable(&q.attributes()), comparable(&asked.attributes()));
            drop(asked);
            // The file's permissions, which an anonymous arena has none of to compare.
            use std::os::unix::fs::MetadataExt;
            let mode = q
                .file_metadata()
                .map_err(|e| Failure::queue(&a.queue, e))?
                .mode();
            have.insert("mode".into(), json!(format!("{:04o}", mode & 0o7777)));
            want.insert(
                "mode".into(),
                json!(format!("{:04o}", a.mode.unwrap_or(0o600))),
            );
            if have != want {
                let diffs: Vec<String> = want
                    .iter()
                    .filter(|(k, v)| have.get(*k) != Some(*v))
                    .map(|(k, v)| {
                        let have = have.get(k).unwrap_or(&json!(null));
                        match derived_from(k) {
                            Some(from) => format!("{k} is {have} (asked {v}: {from})"),
                            None => format!("{k} is {have} (asked {v})"),
                        }
                    })
                    .collect();
                let code = crate::errors::code(&e);
                let hint = format!(
                    "use it as it is, change its live settings with `shmfifo set`, or remove it \
                     first with `shmfifo unlink {}`",
                    a.queue
                );
                if ctx.json {
                    eprintln!(
                        "{}",
                        json!({"Error": {
                            "Code": e.sqs_code(),
                            "Message": format!("{}: exists with other settings", a.queue),
                            "Differences": diffs,
                            "Hint": hint,
                        }})
                    );
                } else {
                    eprintln!(
                        "shmfifo: {}: exists with other settings: {}\nhint: {hint}",
                        a.queue,
                        diffs.join(", ")
                    );
                }
                return Err(Failure::Reported(code));
            }
            (q, true)
        }
        Err(e) => return Err(Failure::queue(&a.queue, e)),
    };
    let attrs = q.attributes();
    let path = q
        .path()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    drop(q);
    if ctx.json {
        print_json(&json!({
            "queue": a.queue,
            "path": path,
            "existed": existed,
            "settings": settings_json(&attrs),
        }));
    } else {
        out(&format!(
            "{} {} ({path}, {})\n{}",
            if existed {
                "exists with these settings:"
            } else {
                "created"
            },
            a.queue,
            size(attrs.arena_bytes),
            settings_text(&attrs, 2)
        ));
    }
    Ok(())
}
