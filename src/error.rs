//! Errors. Each variant that corresponds to an SQS error says so in [`Error::sqs_code`].

use std::fmt;
use std::path::PathBuf;

/// Everything an operation can fail with.
///
/// Variants named after an SQS error carry the same meaning; `sqs_code` returns the SQS query
/// code. shmfifo-specific variants (arena format, capacity, OS) have no SQS equivalent.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// A parameter value is out of range or malformed (SQS `InvalidParameterValue`).
    InvalidParameterValue {
        /// The parameter.
        parameter: &'static str,
        /// Why, in SQS's words where SQS has them.
        reason: String,
    },
    /// A required parameter is absent (SQS `MissingParameter`).
    MissingParameter {
        /// The parameter.
        parameter: &'static str,
    },
    /// The body has characters SQS does not allow (S7; SQS `InvalidMessageContents`).
    InvalidMessageContents {
        /// The first offending character and its byte offset.
        reason: String,
    },
    /// The receipt handle is not a receipt handle of this queue (H4; SQS
    /// `ReceiptHandleIsInvalid`).
    ReceiptHandleIsInvalid {
        /// The handle as given.
        handle: String,
    },
    /// The receipt handle is no longer the current one of an in-flight message: its visibility
    /// timeout passed, the message was received again, deleted or purged (H2, H3). SQS reports
    /// this as `InvalidParameterValue` "The receipt handle has expired."
    ReceiptHandleExpired {
        /// The handle as given.
        handle: String,
    },
    /// A batch has no entries (SQS `EmptyBatchRequest`).
    EmptyBatchRequest,
    /// A batch has more than 10 entries (SQS `TooManyEntriesInBatchRequest`).
    TooManyEntriesInBatchRequest {
        /// Entries sent.
        entries: usize,
    },
    /// A batch entry id is not 1–80 of `[A-Za-z0-9_-]` (SQS `InvalidBatchEntryId`).
    InvalidBatchEntryId {
        /// The id.
        id: String,
    },
    /// Two batch entries share an id (SQS `BatchEntryIdsNotDistinct`).
    BatchEntryIdsNotDistinct {
        /// The repeated id.
        id: String,
    },
    /// The batch's total payload exceeds 1 MiB (SQS `BatchRequestTooLong`).
    BatchRequestTooLong {
        /// Bytes sent.
        bytes: usize,
    },
    /// No queue at this location (SQS `QueueDoesNotExist`), or, at creation, no directory to
    /// create it in.
    QueueDoesNotExist {
        /// Where we looked: the queue's path, or (ending in `/`) the directory a queue was to be
        /// created in, which does not exist.
        path: PathBuf,
    },
    /// A file already exists at this location (SQS `QueueNameExists`).
    QueueNameExists {
        /// The location.
        path: PathBuf,
    },
    /// The queue name is not 1–200 of `[A-Za-z0-9_.-]` (or not a valid path).
    InvalidQueueName {
        /// The name.
        name: String,
    },
    /// A configuration value is out of range.
    InvalidConfig {
        /// The setting.
        setting: &'static str,
        /// Why.
        reason: String,
    },
    /// The file is not a shmfifo arena (wrong magic).
    NotAnArena {
        /// The file.
        path: PathBuf,
    },
    /// The arena was made by a different layout version of shmfifo.
    LayoutVersionMismatch {
        /// Version in the file.
        found: u64,
        /// Version this library speaks.
        expected: u64,
    },
    /// The file is shorter than its header says (or than a header).
    Truncated {
        /// Bytes the arena needs.
        expected: u64,
        /// Bytes the file has.
        found: u64,
    },
    /// The arena file was never finished (a stale file: empty, all zeros, or a header never
    /// set ready). Creators name an arena only once it is complete, so this is not a creator
    /// at work; `create` at the same path replaces such a file.
    NotReady,
    /// A value in the arena is out of range or inconsistent: another process wrote garbage.
    /// (It owns nothing: a batch's placeholder result of this variant is forgotten, not
    /// dropped, `api::send::batch::put`; a field that owns memory would leak there.)
    Corrupted {
        /// What was wrong.
        what: &'static str,
    },
    /// Not enough space on the file system for the arena (`/dev/shm` too small), at creation
    /// or when a full size class grows below its size limit.
    NoSpace {
        /// Bytes the arena (or its new segment) needs.
        needed: u64,
    },
    /// Every slot of the size class that fits this message is in use, and the class has grown
    /// as far as the queue's size limit allows.
    SizeClassFull {
        /// Payload capacity of the class.
        class_bytes: u32,
    },
    /// The group table is full: `max_groups` groups have messages, and the table has grown as
    /// far as the queue's size limit allows (layout 16).
    GroupLimitReached {
        /// The groups the queue's tables hold: its cap where the size limit stopped the table
        /// growing (normally `max_groups` in the attributes; less where the size classes took
        /// the room first).
        max_groups: u64,
    },
    /// Every dedup table entry holds a dedup id accepted within the dedup interval (none can
    /// be reclaimed before its interval ends). Nothing was sent; retry later, or create the
    /// queue with more `dedup_entries` or a shorter `deduplication_interval`.
    DedupTableFull {
        /// The table's capacity.
        entries: u64,
        /// The dedup interval, ms.
        interval_ms: u64,
    },
    /// A send with the same dedup id is in progress in a live process that has not finished it
    /// for a long time (it may be stopped): whether that send will be delivered is not known
    /// yet. Nothing was sent; retry later.
    DedupInProgress,
    /// A claim this operation needs has been held by another live process for longer than the
    /// wait bound (1 s): that process is alive but not running (stopped by SIGSTOP or a
    /// debugger, a paused container, a swapped-out VM). Nothing was changed; retry later. Only
    /// the groups (or insert slots) it holds are affected; everything else keeps working.
    ParticipantBusy {
        /// What is held.
        what: &'static str,
    },
    /// The file at the queue's path is not one this process may use or remove as a queue: a
    /// symlink, a FIFO, a device node, a file owned by another user (unless trusted through
    /// `SHMFIFO_TRUSTED_UIDS`), or an arena whose permissions were widened beyond what its
    /// creator asked. Nothing was changed.
    UntrustedFile {
        /// The path.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// Every participant slot is held by a live process.
    ParticipantLimitReached {
        /// The configured maximum.
        max_participants: u32,
    },
    /// An operating-system call failed.
    Io(std::io::Error),
    /// `set_attribute` with a name that is not a queue attribute (C2).
    InvalidAttributeName {
        /// The name given.
        name: String,
    },
    /// A setting fixed at creation cannot be changed on a queue in use.
    AttributeNotMutable {
        /// The setting.
        name: String,
    },
    /// The dead-letter queue of a redrive policy cannot be used: it does not exist, is not
    /// compatible (X2), or refused a moved message.
    DeadLetterQueue {
        /// The dead-letter queue's path.
        path: PathBuf,
        /// What is wrong, and the fix where there is one.
        reason: String,
    },
    /// An error of a remote SQS endpoint (the `shmfifo-sqs` backend) that has no
    /// shared-memory counterpart: the endpoint unreachable or timing out, throttling,
    /// credentials refused or expired, or a code this library does not model.
    Remote {
        /// What kind of failure.
        kind: RemoteKind,
        /// SQS's error code, or the transport's (`dispatch`, `timeout`, `response`).
        code: String,
        /// The message.
        message: String,
    },
}

/// The kind of an [`Error`], as a stable number: the C ABI's result codes
/// (`SHMFIFO_<NAME>` has the same value) and the CLI's error kinds map it exhaustively, so an
/// error kind added here cannot be forgotten there (the match in [`Error::code`] and theirs
/// have no wildcard). Numbers are never reused or renumbered.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ErrorCode {
    /// [`Error::InvalidParameterValue`].
    InvalidParameterValue = 1,
    /// [`Error::MissingParameter`].
    MissingParameter = 2,
    /// [`Error::InvalidMessageContents`].
    InvalidMessageContents = 3,
    /// [`Error::ReceiptHandleIsInvalid`].
    ReceiptHandleIsInvalid = 4,
    /// [`Error::ReceiptHandleExpired`].
    ReceiptHandleExpired = 5,
    /// [`Error::EmptyBatchRequest`].
    EmptyBatchRequest = 6,
    /// [`Error::TooManyEntriesInBatchRequest`].
    TooManyEntriesInBatchRequest = 7,
    /// [`Error::InvalidBatchEntryId`].
    InvalidBatchEntryId = 8,
    /// [`Error::BatchEntryIdsNotDistinct`].
    BatchEntryIdsNotDistinct = 9,
    /// [`Error::BatchRequestTooLong`].
    BatchRequestTooLong = 10,
    /// [`Error::QueueDoesNotExist`].
    QueueDoesNotExist = 11,
    /// [`Error::QueueNameExists`].
    QueueNameExists = 12,
    /// [`Error::InvalidQueueName`].
    InvalidQueueName = 13,
    /// [`Error::InvalidConfig`].
    InvalidConfig = 14,
    /// [`Error::NotAnArena`].
    NotAnArena = 15,
    /// [`Error::LayoutVersionMismatch`].
    LayoutVersionMismatch = 16,
    /// [`Error::Truncated`].
    Truncated = 17,
    /// [`Error::NotReady`].
    NotReady = 18,
    /// [`Error::Corrupted`].
    Corrupted = 19,
    /// [`Error::NoSpace`].
    NoSpace = 20,
    /// [`Error::SizeClassFull`].
    SizeClassFull = 21,
    /// [`Error::GroupLimitReached`].
    GroupLimitReached = 22,
    /// [`Error::ParticipantLimitReached`].
    ParticipantLimitReached = 23,
    /// [`Error::DedupTableFull`].
    DedupTableFull = 24,
    /// [`Error::DedupInProgress`].
    DedupInProgress = 25,
    /// [`Error::Io`].
    Io = 26,
    /// [`Error::InvalidAttributeName`].
    InvalidAttributeName = 27,
    /// [`Error::AttributeNotMutable`].
    AttributeNotMutable = 28,
    /// [`Error::DeadLetterQueue`].
    DeadLetterQueue = 29,
    /// [`Error::ParticipantBusy`].
    ParticipantBusy = 30,
    /// [`Error::UntrustedFile`].
    UntrustedFile = 31,
    /// [`Error::Remote`].
    Remote = 32,
}

/// The kinds of [`Error::Remote`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RemoteKind {
    /// The endpoint could not be reached, or did not answer in time (retried by the client
    /// first, as SQS's own client does).
    Unreachable,
    /// SQS throttled the request (`RequestThrottled`, `ThrottlingException`; retried first).
    Throttled,
    /// The credentials were refused or have expired (`InvalidClientTokenId`,
    /// `SignatureDoesNotMatch`, `ExpiredToken`, `AccessDenied` …).
    Credentials,
    /// Another error code of the endpoint.
    Other,
}

impl ErrorCode {
    /// Every code, in numeric order.
    pub const ALL: &'static [ErrorCode] = &[
        ErrorCode::InvalidParameterValue,
        ErrorCode::MissingParameter,
        ErrorCode::InvalidMessageContents,
        ErrorCode::ReceiptHandleIsInvalid,
        ErrorCode::ReceiptHandleExpired,
        ErrorCode::EmptyBatchRequest,
        ErrorCode::TooManyEntriesInBatchRequest,
        ErrorCode::InvalidBatchEntryId,
        ErrorCode::BatchEntryIdsNotDistinct,
        ErrorCode::BatchRequestTooLong,
        ErrorCode::QueueDoesNotExist,
        ErrorCode::QueueNameExists,
        ErrorCode::InvalidQueueName,
        ErrorCode::InvalidConfig,
        ErrorCode::NotAnArena,
        ErrorCode::LayoutVersionMismatch,
        ErrorCode::Truncated,
        ErrorCode::NotReady,
        ErrorCode::Corrupted,
        ErrorCode::NoSpace,
        ErrorCode::SizeClassFull,
        ErrorCode::GroupLimitReached,
        ErrorCode::ParticipantLimitReached,
        ErrorCode::DedupTableFull,
        ErrorCode::DedupInProgress,
        ErrorCode::Io,
        ErrorCode::InvalidAttributeName,
        ErrorCode::AttributeNotMutable,
        ErrorCode::DeadLetterQueue,
        ErrorCode::ParticipantBusy,
        ErrorCode::UntrustedFile,
        ErrorCode::Remote,
    ];

    /// The kind's name (the [`Error`] variant's name).
    pub fn name(self) -> &'static str {
        match self {
            ErrorCode::InvalidParameterValue => "InvalidParameterValue",
            ErrorCode::MissingParameter => "MissingParameter",
            ErrorCode::InvalidMessageContents => "InvalidMessageContents",
            ErrorCode::ReceiptHandleIsInvalid => "ReceiptHandleIsInvalid",
            ErrorCode::ReceiptHandleExpired => "ReceiptHandleExpired",
            ErrorCode::EmptyBatchRequest => "EmptyBatchRequest",
            ErrorCode::TooManyEntriesInBatchRequest => "TooManyEntriesInBatchRequest",
            ErrorCode::InvalidBatchEntryId => "InvalidBatchEntryId",
            ErrorCode::BatchEntryIdsNotDistinct => "BatchEntryIdsNotDistinct",
            ErrorCode::BatchRequestTooLong => "BatchRequestTooLong",
            ErrorCode::QueueDoesNotExist => "QueueDoesNotExist",
            ErrorCode::QueueNameExists => "QueueNameExists",
            ErrorCode::InvalidQueueName => "InvalidQueueName",
            ErrorCode::InvalidConfig => "InvalidConfig",
            ErrorCode::NotAnArena => "NotAnArena",
            ErrorCode::LayoutVersionMismatch => "LayoutVersionMismatch",
            ErrorCode::Truncated => "Truncated",
            ErrorCode::NotReady => "NotReady",
            ErrorCode::Corrupted => "Corrupted",
            ErrorCode::NoSpace => "NoSpace",
            ErrorCode::SizeClassFull => "SizeClassFull",
            ErrorCode::GroupLimitReached => "GroupLimitReached",
            ErrorCode::ParticipantLimitReached => "ParticipantLimitReached",
            ErrorCode::DedupTableFull => "DedupTableFull",
            ErrorCode::DedupInProgress => "DedupInProgress",
            ErrorCode::Io => "Io",
            ErrorCode::InvalidAttributeName => "InvalidAttributeName",
            ErrorCode::AttributeNotMutable => "AttributeNotMutable",
            ErrorCode::DeadLetterQueue => "DeadLetterQueue",
            ErrorCode::ParticipantBusy => "ParticipantBusy",
            ErrorCode::UntrustedFile => "UntrustedFile",
            ErrorCode::Remote => "Remote",
        }
    }

    /// The code with this number, if any.
    pub fn from_u32(n: u32) -> Option<ErrorCode> {
        Self::ALL.iter().copied().find(|c| *c as u32 == n)
    }

    /// Whether the same request may succeed later without any change by the caller: the
    /// queue was full, a peer was busy or stopped, or a creator had not finished.
    pub fn is_retryable(self) -> bool {
        matches!(
            self,
            ErrorCode::NotReady
                | ErrorCode::SizeClassFull
                | ErrorCode::GroupLimitReached
                | ErrorCode::ParticipantLimitReached
                | ErrorCode::DedupTableFull
                | ErrorCode::DedupInProgress
                | ErrorCode::ParticipantBusy
        )
    }
}

impl Error {
    /// The kind of this error as a stable number (see [`ErrorCode`]).
    pub fn code(&self) -> ErrorCode {
        match self {
            Error::InvalidParameterValue { .. } => ErrorCode::InvalidParameterValue,
            Error::MissingParameter { .. } => ErrorCode::MissingParameter,
            Error::InvalidMessageContents { .. } => ErrorCode::InvalidMessageContents,
            Error::ReceiptHandleIsInvalid { .. } => ErrorCode::ReceiptHandleIsInvalid,
            Error::ReceiptHandleExpired { .. } => ErrorCode::ReceiptHandleExpired,
            Error::EmptyBatchRequest => ErrorCode::EmptyBatchRequest,
            Error::TooManyEntriesInBatchRequest { .. } => ErrorCode::TooManyEntriesInBatchRequest,
            Error::InvalidBatchEntryId { .. } => ErrorCode::InvalidBatchEntryId,
            Error::BatchEntryIdsNotDistinct { .. } => ErrorCode::BatchEntryIdsNotDistinct,
            Error::BatchRequestTooLong { .. } => ErrorCode::BatchRequestTooLong,
            Error::QueueDoesNotExist { .. } => ErrorCode::QueueDoesNotExist,
            Error::QueueNameExists { .. } => ErrorCode::QueueNameExists,
            Error::InvalidQueueName { .. } => ErrorCode::InvalidQueueName,
            Error::InvalidConfig { .. } => ErrorCode::InvalidConfig,
            Error::NotAnArena { .. } => ErrorCode::NotAnArena,
            Error::LayoutVersionMismatch { .. } => ErrorCode::LayoutVersionMismatch,
            Error::Truncated { .. } => ErrorCode::Truncated,
            Error::NotReady => ErrorCode::NotReady,
            Error::Corrupted { .. } => ErrorCode::Corrupted,
            Error::NoSpace { .. } => ErrorCode::NoSpace,
            Error::SizeClassFull { .. } => ErrorCode::SizeClassFull,
            Error::GroupLimitReached { .. } => ErrorCode::GroupLimitReached,
            Error::ParticipantLimitReached { .. } => ErrorCode::ParticipantLimitReached,
            Error::DedupTableFull { .. } => ErrorCode::DedupTableFull,
            Error::DedupInProgress => ErrorCode::DedupInProgress,
            Error::Io(_) => ErrorCode::Io,
            Error::InvalidAttributeName { .. } => ErrorCode::InvalidAttributeName,
            Error::AttributeNotMutable { .. } => ErrorCode::AttributeNotMutable,
            Error::DeadLetterQueue { .. } => ErrorCode::DeadLetterQueue,
            Error::ParticipantBusy { .. } => ErrorCode::ParticipantBusy,
            Error::UntrustedFile { .. } => ErrorCode::UntrustedFile,
            Error::Remote { .. } => ErrorCode::Remote,
        }
    }

    /// The SQS error code this corresponds to, or a shmfifo code for extensions.
    pub fn sqs_code(&self) -> &'static str {
        match self {
            Error::InvalidParameterValue { .. } | Error::ReceiptHandleExpired { .. } => {
                "InvalidParameterValue"
            }
            Error::MissingParameter { .. } => "MissingParameter",
            Error::InvalidMessageContents { .. } => "InvalidMessageContents",
            Error::ReceiptHandleIsInvalid { .. } => "ReceiptHandleIsInvalid",
            Error::EmptyBatchRequest => "AWS.SimpleQueueService.EmptyBatchRequest",
            Error::TooManyEntriesInBatchRequest { .. } => {
                "AWS.SimpleQueueService.TooManyEntriesInBatchRequest"
            }
            Error::InvalidBatchEntryId { .. } => "AWS.SimpleQueueService.InvalidBatchEntryId",
            Error::BatchEntryIdsNotDistinct { .. } => {
                "AWS.SimpleQueueService.BatchEntryIdsNotDistinct"
            }
            Error::BatchRequestTooLong { .. } => "AWS.SimpleQueueService.BatchRequestTooLong",
            Error::QueueDoesNotExist { .. } => "AWS.SimpleQueueService.NonExistentQueue",
            Error::QueueNameExists { .. } => "QueueAlreadyExists",
            Error::InvalidQueueName { .. } => "InvalidParameterValue",
            Error::InvalidConfig { .. } => "InvalidAttributeValue",
            Error::NotAnArena { .. } => "shmfifo.NotAnArena",
            Error::LayoutVersionMismatch { .. } => "shmfifo.LayoutVersionMismatch",
            Error::Truncated { .. } => "shmfifo.Truncated",
            Error::NotReady => "shmfifo.NotReady",
            Error::Corrupted { .. } => "shmfifo.Corrupted",
            Error::NoSpace { .. } => "shmfifo.NoSpace",
            Error::SizeClassFull { .. } => "shmfifo.SizeClassFull",
            Error::GroupLimitReached { .. } => "shmfifo.GroupLimitReached",
            Error::ParticipantLimitReached { .. } => "shmfifo.ParticipantLimitReached",
            Error::DedupTableFull { .. } => "shmfifo.DedupTableFull",
            Error::DedupInProgress => "shmfifo.DedupInProgress",
            Error::ParticipantBusy { .. } => "ServiceUnavailable",
            Error::UntrustedFile { .. } => "shmfifo.UntrustedFile",
            Error::Io(_) => "shmfifo.Io",
            Error::InvalidAttributeName { .. } => "InvalidAttributeName",
            Error::AttributeNotMutable { .. } => "InvalidAttributeValue",
            Error::DeadLetterQueue { .. } => "shmfifo.DeadLetterQueue",
            Error::Remote { kind, .. } => match kind {
                RemoteKind::Throttled => "RequestThrottled",
                RemoteKind::Credentials => "InvalidClientTokenId",
                RemoteKind::Unreachable => "shmfifo.Unreachable",
                RemoteKind::Other => "shmfifo.Remote",
            },
        }
    }

    /// The error's text in SQS's words where SQS's own are recorded (S1, S12, H2, H4: what
    /// `shmfifo serve` and the Python package answer, for a program that reads them);
    /// elsewhere the [`Display`](fmt::Display) text, which the CLI shows.
    ///
    /// ```
    /// use shmfifo::Error;
    ///
    /// let e = Error::MissingParameter { parameter: "MessageGroupId" };
    /// assert_eq!(e.sqs_message(), "The request must contain the parameter MessageGroupId.");
    /// assert_eq!(e.to_string(), "the request must contain the parameter MessageGroupId");
    /// ```
    pub fn sqs_message(&self) -> String {
        match self {
            Error::MissingParameter { parameter } => {
                format!("The request must contain the parameter {parameter}.")
            }
            Error::ReceiptHandleIsInvalid { handle } => {
                format!("The input receipt handle \"{handle}\" is not a valid receipt handle.")
            }
            Error::ReceiptHandleExpired { handle } => format!(
                "Value {handle} for parameter ReceiptHandle is invalid. Reason: The receipt handle has expired."
            ),
            Error::TooManyEntriesInBatchRequest { entries } => format!(
                "Maximum number of entries per request are 10. You have sent {entries}."
            ),
            Error::InvalidBatchEntryId { .. } => "A batch entry id can only contain alphanumeric characters, hyphens and underscores. It can be at most 80 letters long.".to_owned(),
            Error::BatchRequestTooLong { bytes } => format!(
                "Batch requests cannot be longer than 1048576 bytes. You have sent {bytes} bytes."
            ),
            // Most reasons are SQS's own sentences already; the others in the form SQS gives
            // an attribute's.
            Error::InvalidParameterValue { reason, .. }
                if reason.starts_with(|c: char| c.is_ascii_uppercase()) =>
            {
                reason.clone()
            }
            Error::InvalidParameterValue { parameter, reason } => {
                format!("Invalid value for the parameter {parameter}. Reason: {reason}.")
            }
            e => e.to_string(),
        }
    }

    pub(crate) fn invalid(parameter: &'static str, reason: impl Into<String>) -> Self {
        Error::InvalidParameterValue {
            parameter,
            reason: reason.into(),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            // SQS's own texts name the parameter already ("Value V for parameter P is invalid.
            // Reason: …"): said once.
            Error::InvalidParameterValue { parameter, reason }
                if reason.starts_with("Value ")
                    && reason.contains(&format!(" for parameter {parameter} is invalid")) =>
            {
                f.write_str(reason)
            }
            Error::InvalidParameterValue { parameter, reason } => {
                write!(f, "invalid value for parameter {parameter}: {reason}")
            }
            Error::MissingParameter { parameter } => {
                write!(f, "the request must contain the parameter {parameter}")
            }
            Error::InvalidMessageContents { reason } => write!(f, "invalid message contents: {reason}"),
            Error::ReceiptHandleIsInvalid { handle } => {
                write!(f, "the input receipt handle \"{handle}\" is not a valid receipt handle")
            }
            Error::ReceiptHandleExpired { handle } => write!(
                f,
                "value {handle} for parameter ReceiptHandle is invalid: the receipt handle has expired"
            ),
            Error::EmptyBatchRequest => write!(f, "there should be at least one entry in the request"),
            Error::TooManyEntriesInBatchRequest { entries } => write!(
                f,
                "maximum number of entries per request are 10; you have sent {entries}"
            ),
            Error::InvalidBatchEntryId { id } => write!(
                f,
                "batch entry id {id:?} is invalid: a batch entry id can only contain alphanumeric characters, hyphens and underscores, and can be at most 80 letters long"
            ),
            Error::BatchEntryIdsNotDistinct { id } => write!(f, "two or more batch entries have the id {id:?}"),
            Error::BatchRequestTooLong { bytes } => write!(
                f,
                "batch requests cannot be longer than 1048576 bytes; you have sent {bytes} bytes"
            ),
            Error::QueueDoesNotExist { path } if path.as_os_str().as_encoded_bytes().ends_with(b"/") => write!(
                f,
                "no directory {}: a queue is created in a directory that exists (make it first)",
                path.display()
            ),
            Error::QueueDoesNotExist { path } => write!(f, "no queue at {}", path.display()),
            Error::QueueNameExists { path } => write!(
                f,
                "a file already exists at {} (a queue's: open it, or unlink it first; any \
                 other file is never replaced)",
                path.display()
            ),
            Error::InvalidQueueName { name } => write!(
                f,
                "invalid queue name {name:?}: a name (a file in /dev/shm) is 1-200 of \
                 A-Z a-z 0-9 _ . -; a queue elsewhere goes by its path"
            ),
            // SQS's own text names the attribute already ("Invalid value for the parameter P.
            // Reason: …"): said once.
            Error::InvalidConfig { reason, .. }
                if reason.starts_with("Invalid value for the parameter ") =>
            {
                f.write_str(reason)
            }
            Error::InvalidConfig { setting, reason } => write!(f, "invalid setting {setting}: {reason}"),
            Error::NotAnArena { path } => write!(f, "{} is not a shmfifo queue", path.display()),
            Error::LayoutVersionMismatch { found, expected } => write!(
                f,
                "the queue has layout version {found}, this library speaks {expected}: use a shmfifo build of the same layout version, or drain and re-create the queue"
            ),
            Error::Truncated { expected, found } => write!(
                f,
                "the queue file is truncated: it needs {expected} bytes and has {found}"
            ),
            Error::NotReady => write!(
                f,
                "the queue file was never finished by its creator (it died while creating it): create the queue again at the same path, which replaces it"
            ),
            Error::Corrupted { what } => write!(f, "the queue's shared memory is corrupted: {what}"),
            Error::NoSpace { needed } => write!(
                f,
                "not enough space for {needed} bytes of the queue (its file at creation, or a segment it adds as it grows; is its file system large enough? `df -h` on its directory)"
            ),
            Error::SizeClassFull { class_bytes } => write!(
                f,
                "the queue has no free slot for messages of up to {class_bytes} bytes (raise its capacity or consume faster)"
            ),
            Error::GroupLimitReached { max_groups } => write!(
                f,
                "the queue already has {max_groups} message groups with messages (its max_groups)"
            ),
            Error::ParticipantLimitReached { max_participants } => write!(
                f,
                "{max_participants} {} already {} this queue open (its max_participants: a handle is a participant; open one a process and share it between its threads)",
                if *max_participants == 1 { "handle" } else { "handles" },
                if *max_participants == 1 { "has" } else { "have" },
            ),
            Error::DedupTableFull { entries, interval_ms } => write!(
                f,
                "all {entries} dedup table entries hold dedup ids accepted in the last {interval_ms} ms (raise dedup_entries, shorten deduplication_interval, or retry later)"
            ),
            Error::DedupInProgress => write!(
                f,
                "a send with this dedup id is still in progress in another live process (is it stopped?); retry later"
            ),
            Error::ParticipantBusy { what } => write!(
                f,
                "{what}: another process holds it and is not running (stopped or paused); retry later"
            ),
            Error::UntrustedFile { path, reason } => write!(
                f,
                "{} is not used as a queue: {reason}",
                path.display()
            ),
            Error::Io(e) => write!(f, "operating system error: {e}"),
            Error::InvalidAttributeName { name } => {
                write!(f, "Unknown Attribute {name}.")?;
                // SQS's own attributes a local queue has no use for: said so, where "Unknown"
                // alone read as a misspelling.
                match name.as_str() {
                    "KmsMasterKeyId" | "KmsDataKeyReusePeriodSeconds" | "SqsManagedSseEnabled" => {
                        write!(f, " (SQS's server-side encryption: not supported here, where nothing is stored at rest beyond the queue file; leave it out)")
                    }
                    "Policy" | "RedriveAllowPolicy" => write!(
                        f,
                        " (SQS's access policies: not supported here, where the queue file's permissions decide who may use it; leave it out)"
                    ),
                    _ => Ok(()),
                }
            }
            Error::AttributeNotMutable { name } => write!(
                f,
                "the attribute {name} is fixed when the queue is created; create a new queue to change it"
            ),
            Error::DeadLetterQueue { path, reason } => {
                write!(f, "dead-letter queue {}: {reason}", path.display())
            }
            Error::Remote { code, message, .. } => write!(f, "SQS endpoint: {code}: {message}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io(e) => Some(e),
            _ => None,
        }
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        Error::Io(e)
    }
}

/// Result with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(all(test, not(shmfifo_loom)))]
mod code_tests {
    use super::*;

    #[test]
    fn codes_are_distinct_stable_and_round_trip() {
        for (i, c) in ErrorCode::ALL.iter().enumerate() {
            assert_eq!(
                *c as u32,
                i as u32 + 1,
                "numbered 1.. in order, none reused"
            );
            assert_eq!(ErrorCode::from_u32(*c as u32), Some(*c));
            assert!(!c.name().is_empty());
        }
        assert_eq!(ErrorCode::from_u32(0), None);
        assert_eq!(Error::NotReady.code(), ErrorCode::NotReady);
        assert!(Error::ParticipantBusy { what: "x" }.code().is_retryable());
        assert!(!Error::Corrupted { what: "x" }.code().is_retryable());
    }

    /// An invalid parameter is named once: SQS's own text names it already, ours says which.
    #[test]
    fn an_invalid_parameter_is_named_once() {
        let sqs = Error::invalid(
            "MessageGroupId",
            "Value g h for parameter MessageGroupId is invalid. Reason: 1 to 128 in length.",
        );
        assert_eq!(
            sqs.to_string(),
            "Value g h for parameter MessageGroupId is invalid. Reason: 1 to 128 in length."
        );
        let ours = Error::invalid("MessageGroupId", "not UTF-8");
        assert_eq!(
            ours.to_string(),
            "invalid value for parameter MessageGroupId: not UTF-8"
        );
        // Another parameter's text is not taken for this one's.
        let other = Error::invalid(
            "MessageBody",
            "Value x for parameter DelaySeconds is invalid.",
        );
        assert!(other
            .to_string()
            .starts_with("invalid value for parameter MessageBody: "));
    }
}
