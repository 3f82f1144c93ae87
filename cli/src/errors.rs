//! Failures of a command, their exit codes (stable: a code is never renumbered, new kinds get
//! new codes) and the hints printed with them.

use std::fmt;
use std::io;

use shmfifo::{Error, ErrorCode};

/// Exit code: success.
pub const OK: u8 = 0;
/// Exit code: `receive` or `peek` got no message.
pub const EMPTY: u8 = 1;
/// Exit code: a usage error (clap's own).
pub const USAGE: u8 = 2;
/// Exit code: an input file or stdin could not be read, or held malformed input (a JSON line,
/// a body that is not UTF-8).
pub const INPUT: u8 = 3;
/// Exit code: a shmfifo error of a kind newer than this table.
pub const OTHER: u8 = 9;
/// Exit code: Ctrl-C or SIGTERM ended a `send --wait` before it sent everything (128 + SIGINT,
/// as a shell reports a command Ctrl-C ended).
pub const INTERRUPTED: u8 = 130;

/// Every exit code: `(code, kind, meaning)`. The help text and `cli/README.md` show this
/// table; tests check that they agree.
pub const EXIT_CODES: &[(u8, &str, &str)] = &[
    (OK, "success", "the command did what it was asked"),
    (
        EMPTY,
        "empty",
        "peek found no message (an empty receive exits 0, as aws sqs does)",
    ),
    (
        USAGE,
        "usage",
        "bad command line (unknown option, malformed value)",
    ),
    (
        INPUT,
        "input",
        "an input file, stdin or JSON line could not be read or parsed",
    ),
    (
        OTHER,
        "other",
        "a shmfifo error this table does not know yet",
    ),
    (
        10,
        "QueueDoesNotExist",
        "no queue at that name or path (or, for create, no directory to make it in)",
    ),
    (11, "QueueNameExists", "create: a file already exists there"),
    (
        12,
        "LayoutVersionMismatch",
        "the queue was made by another shmfifo layout version",
    ),
    (13, "NotAnArena", "the file is not a shmfifo queue"),
    (
        14,
        "Truncated",
        "the queue file is shorter than its header says",
    ),
    (
        15,
        "NotReady",
        "the queue file was never finished by its creator",
    ),
    (
        16,
        "Corrupted",
        "the queue's shared memory holds inconsistent values",
    ),
    (
        17,
        "NoSpace",
        "not enough space for the queue (/dev/shm too small)",
    ),
    (
        18,
        "InvalidQueueName",
        "the queue name is not 1-200 of A-Z a-z 0-9 _ . -",
    ),
    (
        19,
        "InvalidConfig",
        "create or set: a setting is out of range or malformed",
    ),
    (
        20,
        "InvalidParameterValue",
        "a parameter value is out of range or malformed",
    ),
    (
        21,
        "MissingParameter",
        "a required parameter is absent (e.g. --group)",
    ),
    (
        22,
        "InvalidMessageContents",
        "the body has characters SQS does not allow",
    ),
    (
        23,
        "ReceiptHandleIsInvalid",
        "not a receipt handle of this queue",
    ),
    (
        24,
        "ReceiptHandleExpired",
        "the receipt handle is no longer current",
    ),
    (25, "EmptyBatchRequest", "a batch has no entries"),
    (
        26,
        "TooManyEntriesInBatchRequest",
        "a batch has more than 10 entries",
    ),
    (27, "InvalidBatchEntryId", "a batch entry id is malformed"),
    (
        28,
        "BatchEntryIdsNotDistinct",
        "two batch entries share an id",
    ),
    (29, "BatchRequestTooLong", "a batch is larger than 1 MiB"),
    (
        30,
        "SizeClassFull",
        "no free slot for a message of this size",
    ),
    (
        31,
        "GroupLimitReached",
        "the group table is full and may not grow (its size limit)",
    ),
    (
        32,
        "DedupTableFull",
        "every dedup entry holds a live dedup id",
    ),
    (
        33,
        "DedupInProgress",
        "a send with this dedup id is in progress in another process",
    ),
    (
        34,
        "ParticipantLimitReached",
        "max-participants processes have the queue open",
    ),
    (35, "Io", "an operating-system call on the queue failed"),
    (36, "InvalidAttributeName", "set: not a queue attribute"),
    (
        37,
        "AttributeNotMutable",
        "set: the attribute is fixed at creation",
    ),
    (
        38,
        "DeadLetterQueue",
        "the dead-letter queue is missing, incompatible or full",
    ),
    (
        39,
        "ParticipantBusy",
        "a stopped process holds what the command needs; retry",
    ),
    (
        40,
        "UntrustedFile",
        "the path is not a queue file of this user (symlink, FIFO, device, other owner)",
    ),
    (
        41,
        "Remote",
        "an SQS endpoint failed: unreachable, throttling, credentials, or another remote error",
    ),
    (
        INTERRUPTED,
        "interrupted",
        "Ctrl-C or SIGTERM ended send --wait before it sent everything",
    ),
];

/// The exit code of a library error: exhaustive over [`ErrorCode`] (no wildcard), so a new
/// kind of error fails to build until it has its exit code.
pub fn code(e: &Error) -> u8 {
    match e.code() {
        ErrorCode::QueueDoesNotExist => 10,
        ErrorCode::QueueNameExists => 11,
        ErrorCode::LayoutVersionMismatch => 12,
        ErrorCode::NotAnArena => 13,
        ErrorCode::Truncated => 14,
        ErrorCode::NotReady => 15,
        ErrorCode::Corrupted => 16,
        ErrorCode::NoSpace => 17,
        ErrorCode::InvalidQueueName => 18,
        ErrorCode::InvalidConfig => 19,
        ErrorCode::InvalidParameterValue => 20,
        ErrorCode::MissingParameter => 21,
        ErrorCode::InvalidMessageContents => 22,
        ErrorCode::ReceiptHandleIsInvalid => 23,
        ErrorCode::ReceiptHandleExpired => 24,
        ErrorCode::EmptyBatchRequest => 25,
        ErrorCode::TooManyEntriesInBatchRequest => 26,
        ErrorCode::InvalidBatchEntryId => 27,
        ErrorCode::BatchEntryIdsNotDistinct => 28,
        ErrorCode::BatchRequestTooLong => 29,
        ErrorCode::SizeClassFull => 30,
        ErrorCode::GroupLimitReached => 31,
        ErrorCode::DedupTableFull => 32,
        ErrorCode::DedupInProgress => 33,
        ErrorCode::ParticipantLimitReached => 34,
        // ENOSPC from an operation other than create (the arena's pages are reserved there).
        ErrorCode::Io => 35,
        ErrorCode::InvalidAttributeName => 36,
        ErrorCode::AttributeNotMutable => 37,
        ErrorCode::DeadLetterQueue => 38,
        ErrorCode::ParticipantBusy => 39,
        ErrorCode::UntrustedFile => 40,
        ErrorCode::Remote => 41,
    }
}

/// The kind name of a library error (the variant's name; `other` for a kind newer than this
/// table).
pub fn kind(e: &Error) -> &'static str {
    let c = code(e);
    EXIT_CODES
        .iter()
        .find(|&&(k, _, _)| k == c)
        .map_or("other", |&(_, name, _)| name)
}

/// The exit-code table as the help text shows it.
pub fn exit_code_help() -> String {
    let mut s = String::from("Exit codes (stable; see cli/README.md):\n");
    for &(code, kind, meaning) in EXIT_CODES {
        s.push_str(&format!("  {code:>3}  {kind:<29} {meaning}\n"));
    }
    s
}

/// Why a command failed.
#[derive(Debug)]
pub enum Failure {
    /// A library error on a queue (named as the user named it).
    Queue {
        /// The queue as given on the command line.
        queue: String,
        /// The error.
        error: Error,
    },
    /// Unreadable or malformed input: a file, stdin, a JSON line.
    Input {
        /// Where (a file name, `stdin`, `stdin line 3`).
        source: String,
        /// What was wrong.
        what: String,
    },
    /// An argument this build cannot act on (an SQS queue URL without the `sqs` feature):
    /// exit code 2, as a usage error.
    Usage {
        /// The argument.
        source: String,
        /// Why, and what to do.
        what: String,
    },
    /// Nothing to return (receive, peek): exit code 1, no message printed.
    Empty,
    /// Ctrl-C or SIGTERM ended a wait before its work was done (`send --wait`): exit code
    /// 130.
    Interrupted {
        /// What was done and what was not.
        what: String,
    },
    /// Failures already reported (per entry of a batch, per receipt of a delete): the exit
    /// code of the first.
    Reported(u8),
}

impl Failure {
    /// A queue error.
    pub fn queue(queue: &str, error: Error) -> Failure {
        Failure::Queue {
            queue: queue.to_owned(),
            error,
        }
    }

    /// A server that could not start (`serve`, `metrics`): a refusal of its arguments (an
    /// address off loopback without signatures or `--public`) is a usage error (2); anything
    /// else (the port in use, the directory missing or unsafe) the system's, `Io` (35). They
    /// were all exit code 3, which says an input file or line was malformed.
    pub fn start(what: String, e: std::io::Error) -> Failure {
        if e.kind() == std::io::ErrorKind::InvalidInput {
            Failure::Usage {
                source: what,
                what: e.to_string(),
            }
        } else {
            Failure::queue(&what, Error::Io(e))
        }
    }

    /// An input error.
    pub fn input(source: impl Into<String>, what: impl fmt::Display) -> Failure {
        Failure::Input {
            source: source.into(),
            what: what.to_string(),
        }
    }

    /// The exit code.
    pub fn exit_code(&self) -> u8 {
        match self {
            Failure::Queue { error, .. } => code(error),
            Failure::Input { .. } => INPUT,
            Failure::Usage { .. } => USAGE,
            Failure::Empty => EMPTY,
            Failure::Interrupted { .. } => INTERRUPTED,
            Failure::Reported(c) => *c,
        }
    }

    /// With `--json`: the error as `aws sqs` prints it, `{"Error": {"Code", "Message"}}` with
    /// SQS's code (and the hint, where there is one); nothing for [`Failure::Empty`] and
    /// [`Failure::Reported`].
    pub fn report_json(&self) -> Option<String> {
        let (code, message, hint) = match self {
            Failure::Queue { queue, error } => (
                error.sqs_code(),
                format!("{queue}: {error}"),
                hint(queue, error),
            ),
            Failure::Input { source, what } => {
                ("InvalidParameterValue", format!("{source}: {what}"), None)
            }
            Failure::Usage { source, what } => (
                "AWS.SimpleQueueService.UnsupportedOperation",
                format!("{source}: {what}"),
                None,
            ),
            Failure::Interrupted { what } => ("Interrupted", what.clone(), None),
            Failure::Empty | Failure::Reported(_) => return None,
        };
        let mut e = serde_json::json!({"Error": {"Code": code, "Message": message}});
        if let Some(h) = hint {
            e["Error"]["Hint"] = serde_json::Value::String(h);
        }
        Some(format!("{e}\n"))
    }

    /// What to print on stderr (nothing for [`Failure::Empty`] and [`Failure::Reported`]).
    pub fn report(&self) -> Option<String> {
        match self {
            Failure::Queue { queue, error } => Some(message(queue, error)),
            Failure::Input { source, what } | Failure::Usage { source, what } => {
                Some(format!("shmfifo: {source}: {what}\n"))
            }
            Failure::Interrupted { what } => Some(format!("shmfifo: {what}\n")),
            Failure::Empty | Failure::Reported(_) => None,
        }
    }
}

/// `shmfifo: QUEUE: what was wrong` and, where there is one, a `hint:` line.
pub fn message(queue: &str, e: &Error) -> String {
    message_at(queue, None, e)
}

/// [`message`] naming a part of the request too: `shmfifo: QUEUE: line 3: what was wrong`.
pub fn message_at(queue: &str, at: Option<&str>, e: &Error) -> String {
    let mut s = match at {
        Some(at) => format!("shmfifo: {queue}: {at}: {e}\n"),
        None => format!("shmfifo: {queue}: {e}\n"),
    };
    if let Some(h) = hint(queue, e) {
        s.push_str(&format!("hint: {h}\n"));
    }
    s
}

/// `ls` or `ls --dir DIR` for the directory a queue argument lives in.
fn ls_for(queue: &str) -> String {
    match queue.rsplit_once('/') {
        Some(("", _)) => "shmfifo ls --dir /".into(),
        Some((dir, _)) => format!("shmfifo ls --dir {dir}"),
        None => "shmfifo ls".into(),
    }
}

/// The fix for an error, where there is one.
pub fn hint(queue: &str, e: &Error) -> Option<String> {
    let q = queue;
    let dir = match shown_path(q).rsplit_once('/') {
        Some(("", _)) | None => "/".to_owned(),
        Some((d, _)) => d.to_owned(),
    };
    Some(match e {
        // The error's own path where it is not the command's queue: a directory that is
        // not there, or another queue (a redrive's or a dead-letter queue's).
        Error::QueueDoesNotExist { path } if path.as_os_str() != shown_path(q).as_str() => {
            let p = path.display().to_string();
            // A path with a trailing `/` names a directory (the library's "no directory").
            let is_dir = p.ends_with('/');
            let p = p.strip_suffix('/').filter(|d| !d.is_empty()).unwrap_or(&p);
            if is_dir || shown_path(q).starts_with(&format!("{p}/")) {
                format!("there is no directory {p}: make it first (`mkdir -p {p}`)")
            } else {
                let name = p.strip_prefix("/dev/shm/").unwrap_or(p);
                format!(
                    "create it with `shmfifo create {name}`, or list the queues with `{}`",
                    ls_for(name)
                )
            }
        }
        Error::QueueDoesNotExist { .. } => format!(
            "create it with `shmfifo create {q}`, or list the queues with `{}`",
            ls_for(q)
        ),
        Error::QueueNameExists { .. } if std::path::Path::new(&shown_path(q)).is_dir() => format!(
            "{} is a directory: a queue is a file, name one in it (`shmfifo create {}/NAME`)",
            shown_path(q),
            shown_path(q).trim_end_matches('/')
        ),
        // A file there that is not a queue: `unlink` refuses it (it removes queues only).
        Error::QueueNameExists { .. }
            if matches!(
                crate::cmd::observe(q),
                Err(Failure::Queue {
                    error: Error::NotAnArena { .. },
                    ..
                })
            ) =>
        {
            format!(
                "{} is not a shmfifo queue: choose another name (it is not shmfifo's to remove: `rm` it if it is no program's)",
                shown_path(q)
            )
        }
        Error::QueueNameExists { .. } => format!(
            "choose another name, or remove the old queue first with `shmfifo unlink {q}` (its messages are lost)"
        ),
        Error::LayoutVersionMismatch { found, expected } => format!(
            "the queue was made by another shmfifo version (layout {found}; this shmfifo speaks layout {expected}): drain it with a shmfifo of layout {found}, or `shmfifo unlink {q}` and create it again"
        ),
        Error::NotAnArena { .. } => format!(
            "check the name: `{}` lists the shmfifo queues (a file there that is not a queue, an empty one say, is not shmfifo's to remove: `rm` it if it is no program's)",
            ls_for(q)
        ),
        Error::Truncated { .. } => format!(
            "the file was cut short (copied or truncated?): `shmfifo unlink {q}` and create it again"
        ),
        Error::NotReady => format!(
            "`shmfifo create {q}` replaces the unfinished file"
        ),
        Error::Corrupted { .. } => format!(
            "`shmfifo recover {q}` repairs what dead processes left; if the error persists, `shmfifo unlink {q}` and create it again"
        ),
        Error::NoSpace { needed } => format!(
            "the queue needs {} more and {dir} is too small: check `df -h {dir}`, remount it larger (`sudo mount -o remount,size=SIZE {dir}` for a tmpfs{}); a queue that grows stops at its --size-limit (create it with a lower one, then it refuses sends when full instead); or create a smaller queue (--max-messages, --maximum-message-size, --dedup-entries, --max-groups)",
            crate::output::size(*needed),
            if dir == "/dev/shm" { "; in a container, `docker run --shm-size=SIZE`" } else { "" }
        ),
        Error::InvalidQueueName { .. } if q.starts_with("sqs://") || q.starts_with("http") => {
            "an SQS FIFO queue's name ends in .fifo: sqs://NAME.fifo, or the queue's URL".to_owned()
        }
        Error::InvalidQueueName { .. } => {
            "a name is 1-200 of A-Z a-z 0-9 _ . - (not `.` or `..`); anything containing '/' is taken as a path".to_owned()
        }
        // The reason says what to do (a dead-letter queue's size to raise first, the region
        // to name); `create --help` is no help there.
        Error::InvalidConfig { setting, reason }
            if reason.contains("dead-letter queue") || *setting == "region" =>
        {
            return None
        }
        Error::InvalidConfig { .. } => "see `shmfifo create --help` for each setting's range".to_owned(),
        Error::MissingParameter { parameter } if *parameter == "MessageGroupId" => {
            "pass the message group with --group GROUP".to_owned()
        }
        // The reasons' own words (src/api/send.rs): "deduplication is off" first, its text
        // holds the id given.
        Error::InvalidParameterValue { parameter, reason }
            if *parameter == "MessageDeduplicationId" && reason.ends_with("(its deduplication is off).") =>
        {
            "this queue keeps no deduplication ids (created with --deduplication-scope off): send without --dedup-id".to_owned()
        }
        Error::InvalidParameterValue { parameter, reason }
            if *parameter == "MessageDeduplicationId" && reason.starts_with("The queue should") =>
        {
            "pass --dedup-id ID (with --batch: a \"dedup_id\" in each entry), or create the queue with --content-based-deduplication".to_owned()
        }
        Error::InvalidParameterValue { parameter, reason }
            if *parameter == "MessageGroupId" && reason.contains("must contain") =>
        {
            "every message needs a group: --group GROUP, or one in each --batch entry (\"group\", \"MessageGroupId\", or \"Attributes\": {\"MessageGroupId\"} as receive --json prints it)".to_owned()
        }
        Error::InvalidParameterValue { parameter, .. }
            if *parameter == "MessageDeduplicationId" || *parameter == "MessageGroupId" =>
        {
            "an id is 1 to 128 characters, each a letter, a digit or one of !\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~ (no spaces)".to_owned()
        }
        Error::InvalidParameterValue { parameter, reason }
            if *parameter == "MessageBody" && reason.contains("must be shorter than") =>
        {
            format!(
                "a body and its attributes together may be as long as the queue's MaximumMessageSize, that size included (`shmfifo stat {q}` shows it; `shmfifo set {q} MaximumMessageSize BYTES` raises it, up to 1048576)"
            )
        }
        Error::ReceiptHandleIsInvalid { .. } => format!(
            "use a ReceiptHandle printed by `shmfifo receive {q}` (sf2 and 39 hex digits), on the queue it came from"
        ),
        Error::ReceiptHandleExpired { .. } => format!(
            "the message was received again, deleted, purged, or its visibility timeout passed: `shmfifo receive {q}` for a current handle"
        ),
        Error::SizeClassFull { .. } => format!(
            "consume faster, send with `--wait DURATION` (or a longer one) to wait for room, or create the queue with a larger --size-limit (the classes grow up to it; --size-limit 0 never grows); `shmfifo stat {q}` shows slot use by size class"
        ),
        Error::GroupLimitReached { .. } => {
            "consume some groups' messages, or create the queue with a larger --size-limit (the group table grows up to it)".to_owned()
        }
        Error::DedupTableFull { .. } => "retry later, or create the queue with a larger --size-limit (the dedup table grows up to it) or a shorter --deduplication-interval".to_owned(),
        Error::DedupInProgress | Error::ParticipantBusy { .. } => format!(
            "retry later; `shmfifo stat {q}` lists the processes using the queue (is one stopped? `kill -CONT PID` resumes it)"
        ),
        Error::UntrustedFile { reason, .. } if reason.contains("wider than") => format!(
            "a queue's permissions widened after its creation (chmod) are refused: set them back (`chmod 600 {}` for the default), or create it with the mode wanted (--mode)",
            shown_path(q)
        ),
        Error::UntrustedFile { .. } => format!(
            "only queue files of this user are opened or removed: check `ls -l {}`; a queue of another user is trusted through SHMFIFO_TRUSTED_UIDS=UID",
            shown_path(q)
        ),
        Error::ParticipantLimitReached { .. } => format!(
            "every slot is held by a live process (dead ones are taken over when a process opens the queue, and `shmfifo recover {q}` repairs what they left): close some (`fuser -v {}` lists them), or create the queue with a larger --max-participants",
            shown_path(q)
        ),
        Error::Io(io) => return io_hint(q, io),
        Error::InvalidAttributeName { .. } | Error::AttributeNotMutable { .. } => {
            "mutable attributes: VisibilityTimeout, DelaySeconds, MessageRetentionPeriod, ReceiveMessageWaitTimeSeconds (seconds; or ...Ms in ms for the first three), MaximumMessageSize, ContentBasedDeduplication, RedrivePolicy".to_owned()
        }
        Error::DeadLetterQueue { path, .. } => format!(
            "the dead-letter queue must exist, deduplicate and take messages as large as this queue's: `shmfifo stat {}`, or `shmfifo create {}`",
            path.display(),
            path.display()
        ),
        _ => return None,
    })
}

/// The file of a queue argument.
fn shown_path(queue: &str) -> String {
    if queue.contains('/') {
        queue.to_owned()
    } else {
        format!("/dev/shm/{queue}")
    }
}

fn io_hint(q: &str, e: &io::Error) -> Option<String> {
    // By the OS's code, or by the kind where the library named the path around it.
    let code = e.raw_os_error().or(match e.kind() {
        io::ErrorKind::PermissionDenied => Some(13),
        io::ErrorKind::StorageFull => Some(28),
        _ => None,
    });
    match code {
        Some(c) if c == 13 || c == 1 => Some(format!(
            "permission denied: queues are created owner-only (mode 0600) unless created with --mode; check `ls -l {}`; another user's queue also needs SHMFIFO_TRUSTED_UIDS=OWNER_UID in the opener's environment",
            shown_path(q)
        )),
        Some(28) => Some(format!(
            "the file system is full: check `df -h {}`",
            shown_path(q)
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    /// One value of every variant this table knows.
    fn every_kind() -> Vec<Error> {
        let p = || PathBuf::from("/dev/shm/q");
        vec![
            Error::QueueDoesNotExist { path: p() },
            Error::QueueNameExists { path: p() },
            Error::LayoutVersionMismatch {
                found: 4,
                expected: 5,
            },
            Error::NotAnArena { path: p() },
            Error::Truncated {
                expected: 2,
                found: 1,
            },
            Error::NotReady,
            Error::Corrupted { what: "x" },
            Error::NoSpace { needed: 1 },
            Error::InvalidQueueName { name: "x".into() },
            Error::InvalidConfig {
                setting: "x",
                reason: "y".into(),
            },
            Error::InvalidParameterValue {
                parameter: "x",
                reason: "y".into(),
            },
            Error::MissingParameter {
                parameter: "MessageGroupId",
            },
            Error::InvalidMessageContents { reason: "x".into() },
            Error::ReceiptHandleIsInvalid { handle: "x".into() },
            Error::ReceiptHandleExpired { handle: "x".into() },
            Error::EmptyBatchRequest,
            Error::TooManyEntriesInBatchRequest { entries: 11 },
            Error::InvalidBatchEntryId { id: "x".into() },
            Error::BatchEntryIdsNotDistinct { id: "x".into() },
            Error::BatchRequestTooLong { bytes: 1 },
            Error::SizeClassFull { class_bytes: 192 },
            Error::GroupLimitReached { max_groups: 1 },
            Error::DedupTableFull {
                entries: 1,
                interval_ms: 1,
            },
            Error::DedupInProgress,
            Error::ParticipantLimitReached {
                max_participants: 1,
            },
            Error::Io(io::Error::from_raw_os_error(13)),
            Error::InvalidAttributeName { name: "x".into() },
            Error::AttributeNotMutable { name: "x".into() },
            Error::DeadLetterQueue {
                path: p(),
                reason: "x".into(),
            },
            Error::ParticipantBusy { what: "x" },
            Error::UntrustedFile {
                path: p(),
                reason: "x".into(),
            },
            Error::Remote {
                kind: shmfifo::RemoteKind::Unreachable,
                code: "dispatch".into(),
                message: "x".into(),
            },
        ]
    }

    /// Every command a hint names is one the CLI takes, and every flag a hint names
    /// exists, so that no hint can drift from the commands (placeholders such as DURATION are
    /// filled in with a valid value first).
    #[test]
    fn every_hint_names_commands_and_flags_that_exist() {
        use clap::{CommandFactory, Parser};
        let cli = crate::Cli::command();
        let mut flags: std::collections::HashSet<String> = cli
            .get_arguments()
            .filter_map(|a| a.get_long().map(str::to_owned))
            .collect();
        flags.insert("help".to_owned()); // clap's own
        for sub in cli.get_subcommands() {
            flags.extend(
                sub.get_arguments()
                    .filter_map(|a| a.get_long().map(str::to_owned)),
            );
        }
        let mut kinds = every_kind();
        for parameter in ["MessageDeduplicationId", "MessageGroupId"] {
            kinds.push(Error::InvalidParameterValue {
                parameter,
                reason: "y".into(),
            });
        }
        let fill = |w: &str| match w {
            "DURATION" => "30s".to_owned(),
            "ID" | "GROUP" | "PID" | "SIZE" | "UID" => "1".to_owned(),
            "DIR" => "/tmp".to_owned(),
            w => w.to_owned(),
        };
        let (mut commands, mut named) = (0, 0);
        for q in ["orders", "/tmp/q/orders"] {
            for e in &kinds {
                let Some(h) = hint(q, e) else { continue };
                for (i, span) in h.split('`').enumerate() {
                    if i % 2 == 1 && span.starts_with("shmfifo ") {
                        let args: Vec<String> = span.split_whitespace().map(fill).collect();
                        match crate::Cli::try_parse_from(&args) {
                            Ok(_) => {}
                            Err(err) if err.kind() == clap::error::ErrorKind::DisplayHelp => {}
                            Err(err) => panic!("hint of {e:?} names `{span}`: {err}"),
                        }
                        commands += 1;
                    }
                }
                // Flags in the prose and in `shmfifo …` spans (not in other programs' commands,
                // such as `docker run --shm-size=SIZE`).
                let ours = h
                    .split('`')
                    .enumerate()
                    .filter(|(i, span)| i % 2 == 0 || span.starts_with("shmfifo "));
                for (_, text) in ours {
                    for (i, _) in text.match_indices("--") {
                        let name: String = text[i + 2..]
                            .chars()
                            .take_while(|c| c.is_ascii_lowercase() || *c == '-')
                            .collect();
                        assert!(
                            flags.contains(&name),
                            "hint of {e:?} names --{name}, which no command takes: {h}"
                        );
                        named += 1;
                    }
                }
            }
        }
        assert!(
            commands >= 20 && named >= 20,
            "{commands} commands, {named} flags"
        );
    }

    #[test]
    fn every_kind_has_its_own_code_named_after_it() {
        let all = every_kind();
        // One error of each kind: the library's kinds are exactly these.
        assert_eq!(all.len(), shmfifo::ErrorCode::ALL.len());
        let mut seen = std::collections::HashSet::new();
        for e in &all {
            let c = code(e);
            assert!(c >= 10, "{e:?}");
            assert!(seen.insert(c), "code {c} twice");
            let dbg = format!("{e:?}");
            assert!(dbg.starts_with(kind(e)), "{dbg} is listed as {}", kind(e));
        }
        // Every table row is distinct, and every library row is reachable.
        let codes: std::collections::HashSet<u8> = EXIT_CODES.iter().map(|r| r.0).collect();
        assert_eq!(codes.len(), EXIT_CODES.len());
        // (130, `interrupted`, is the shell's convention for Ctrl-C, not a library kind.)
        assert_eq!(
            EXIT_CODES
                .iter()
                .filter(|r| r.0 >= 10 && r.0 != INTERRUPTED)
                .count(),
            all.len(),
            "a table row without a kind"
        );
    }

    #[test]
    fn messages_name_the_queue_and_hint_the_fix() {
        let m = message(
            "orders",
            &Error::QueueDoesNotExist {
                path: "/dev/shm/orders".into(),
            },
        );
        assert!(
            m.starts_with("shmfifo: orders: no queue at /dev/shm/orders\n"),
            "{m}"
        );
        assert!(
            m.contains("hint: create it with `shmfifo create orders`"),
            "{m}"
        );
        let m = message(
            "/tmp/q/x",
            &Error::NotAnArena {
                path: "/tmp/q/x".into(),
            },
        );
        assert!(m.contains("`shmfifo ls --dir /tmp/q`"), "{m}");
        let m = message("q", &Error::NoSpace { needed: 3 << 30 });
        assert!(
            m.contains(
                "hint: the queue needs 3 GiB more and /dev/shm is too small: check `df -h /dev/shm`"
            ),
            "{m}"
        );
        assert!(m.contains("`docker run --shm-size=SIZE`"), "{m}");
        // A growth refused names the remedy for a queue that grows: its size limit.
        assert!(m.contains("--size-limit"), "{m}");
        let m = message("/mnt/small/q", &Error::NoSpace { needed: 1 });
        assert!(m.contains("`df -h /mnt/small`"), "{m}");
        assert!(!m.contains("docker"), "{m}");
    }
}
