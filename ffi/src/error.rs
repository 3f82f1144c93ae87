//! Result codes: the `SHMFIFO_` constants (the core's `ErrorCode` numbers, plus the
//! boundary's own from 100), their names, and the calling thread's last error message.

use core::ffi::c_char;
use std::cell::RefCell;

use shmfifo_core::Error;

/// Result code of every fallible function: 0 is success. Codes are fixed and never renumbered.
pub type shmfifo_result = u32;

/// Success.
pub const SHMFIFO_OK: shmfifo_result = 0;

/// A parameter is out of range or malformed (SQS `InvalidParameterValue`).
pub const SHMFIFO_INVALID_PARAMETER_VALUE: shmfifo_result = 1;

/// A required parameter is absent (SQS `MissingParameter`).
pub const SHMFIFO_MISSING_PARAMETER: shmfifo_result = 2;

/// The body has characters SQS does not allow (SQS `InvalidMessageContents`).
pub const SHMFIFO_INVALID_MESSAGE_CONTENTS: shmfifo_result = 3;

/// Not a receipt handle of this queue (SQS `ReceiptHandleIsInvalid`).
pub const SHMFIFO_RECEIPT_HANDLE_IS_INVALID: shmfifo_result = 4;

/// The receipt handle is no longer current (expired, superseded, deleted, purged).
pub const SHMFIFO_RECEIPT_HANDLE_EXPIRED: shmfifo_result = 5;

/// A batch has no entries.
pub const SHMFIFO_EMPTY_BATCH_REQUEST: shmfifo_result = 6;

/// A batch has more than 10 entries.
pub const SHMFIFO_TOO_MANY_ENTRIES_IN_BATCH_REQUEST: shmfifo_result = 7;

/// A batch entry id is malformed.
pub const SHMFIFO_INVALID_BATCH_ENTRY_ID: shmfifo_result = 8;

/// Two batch entries share an id.
pub const SHMFIFO_BATCH_ENTRY_IDS_NOT_DISTINCT: shmfifo_result = 9;

/// A batch's total payload exceeds 1 MiB.
pub const SHMFIFO_BATCH_REQUEST_TOO_LONG: shmfifo_result = 10;

/// No queue at this location.
pub const SHMFIFO_QUEUE_DOES_NOT_EXIST: shmfifo_result = 11;

/// A file already exists at this location.
pub const SHMFIFO_QUEUE_NAME_EXISTS: shmfifo_result = 12;

/// The queue name is invalid.
pub const SHMFIFO_INVALID_QUEUE_NAME: shmfifo_result = 13;

/// A configuration value is out of range.
pub const SHMFIFO_INVALID_CONFIG: shmfifo_result = 14;

/// The file is not a shmfifo arena.
pub const SHMFIFO_NOT_AN_ARENA: shmfifo_result = 15;

/// The arena has another layout version.
pub const SHMFIFO_LAYOUT_VERSION_MISMATCH: shmfifo_result = 16;

/// The file is shorter than its arena.
pub const SHMFIFO_TRUNCATED: shmfifo_result = 17;

/// The arena's creator has not finished initialising it.
pub const SHMFIFO_NOT_READY: shmfifo_result = 18;

/// The shared memory holds inconsistent values.
pub const SHMFIFO_CORRUPTED: shmfifo_result = 19;

/// Not enough space for the arena.
pub const SHMFIFO_NO_SPACE: shmfifo_result = 20;

/// No free slot in the size class of the message.
pub const SHMFIFO_SIZE_CLASS_FULL: shmfifo_result = 21;

/// The group table is full: as many groups have messages as it holds grown to its size limit
/// (`shmfifo_queue_attributes.max_groups`; `shmfifo_config.max_groups` is only its first
/// table).
pub const SHMFIFO_GROUP_LIMIT_REACHED: shmfifo_result = 22;

/// `max_participants` handles already have the queue open (a handle is a participant; a
/// process needs one, shared by its threads).
pub const SHMFIFO_PARTICIPANT_LIMIT_REACHED: shmfifo_result = 23;

/// Every dedup entry holds an id accepted within the interval.
pub const SHMFIFO_DEDUP_TABLE_FULL: shmfifo_result = 24;

/// A send with the same dedup id is still in progress in a live process.
pub const SHMFIFO_DEDUP_IN_PROGRESS: shmfifo_result = 25;

/// An operating-system call failed.
pub const SHMFIFO_IO: shmfifo_result = 26;

/// `set_attribute` with a name that is not a queue attribute.
pub const SHMFIFO_INVALID_ATTRIBUTE_NAME: shmfifo_result = 27;

/// A setting fixed at creation cannot be changed on a queue in use.
pub const SHMFIFO_ATTRIBUTE_NOT_MUTABLE: shmfifo_result = 28;

/// The dead-letter queue of a redrive policy cannot be used (missing, incompatible, refused).
pub const SHMFIFO_DEAD_LETTER_QUEUE: shmfifo_result = 29;

/// A claim the operation needs is held by a process that is alive but not running (stopped);
/// nothing changed, retry later.
pub const SHMFIFO_PARTICIPANT_BUSY: shmfifo_result = 30;

/// The file at the queue's path is not one this process may use or remove as a queue (a
/// symlink, FIFO, device, another user's file, widened permissions).
pub const SHMFIFO_UNTRUSTED_FILE: shmfifo_result = 31;
/// A remote SQS endpoint failed (the Rust `shmfifo-sqs` backend's error kind; the C ABI opens
/// local queues only, so it never returns this code today).
pub const SHMFIFO_REMOTE: shmfifo_result = 32;

/// A required pointer argument was NULL.
pub const SHMFIFO_NULL_ARGUMENT: shmfifo_result = 100;

/// A string argument (a name, path, id or attribute) is not UTF-8. (A text queue's body that is
/// not UTF-8 breaks SQS's rule for its characters: `SHMFIFO_INVALID_MESSAGE_CONTENTS`.)
pub const SHMFIFO_INVALID_UTF8: shmfifo_result = 101;

/// The output array is too small for the request.
pub const SHMFIFO_BUFFER_TOO_SMALL: shmfifo_result = 102;

/// A panic inside the library (a bug); the call had no effect or an unknown one.
pub const SHMFIFO_PANIC: shmfifo_result = 103;

/// An error this version of the C ABI does not know (a newer Rust error).
pub const SHMFIFO_UNKNOWN_ERROR: shmfifo_result = 104;

pub(crate) const NAMES: &[(shmfifo_result, &str)] = &[
    (SHMFIFO_OK, "SHMFIFO_OK\0"),
    (
        SHMFIFO_INVALID_PARAMETER_VALUE,
        "SHMFIFO_INVALID_PARAMETER_VALUE\0",
    ),
    (SHMFIFO_MISSING_PARAMETER, "SHMFIFO_MISSING_PARAMETER\0"),
    (
        SHMFIFO_INVALID_MESSAGE_CONTENTS,
        "SHMFIFO_INVALID_MESSAGE_CONTENTS\0",
    ),
    (
        SHMFIFO_RECEIPT_HANDLE_IS_INVALID,
        "SHMFIFO_RECEIPT_HANDLE_IS_INVALID\0",
    ),
    (
        SHMFIFO_RECEIPT_HANDLE_EXPIRED,
        "SHMFIFO_RECEIPT_HANDLE_EXPIRED\0",
    ),
    (SHMFIFO_EMPTY_BATCH_REQUEST, "SHMFIFO_EMPTY_BATCH_REQUEST\0"),
    (
        SHMFIFO_TOO_MANY_ENTRIES_IN_BATCH_REQUEST,
        "SHMFIFO_TOO_MANY_ENTRIES_IN_BATCH_REQUEST\0",
    ),
    (
        SHMFIFO_INVALID_BATCH_ENTRY_ID,
        "SHMFIFO_INVALID_BATCH_ENTRY_ID\0",
    ),
    (
        SHMFIFO_BATCH_ENTRY_IDS_NOT_DISTINCT,
        "SHMFIFO_BATCH_ENTRY_IDS_NOT_DISTINCT\0",
    ),
    (
        SHMFIFO_BATCH_REQUEST_TOO_LONG,
        "SHMFIFO_BATCH_REQUEST_TOO_LONG\0",
    ),
    (
        SHMFIFO_QUEUE_DOES_NOT_EXIST,
        "SHMFIFO_QUEUE_DOES_NOT_EXIST\0",
    ),
    (SHMFIFO_QUEUE_NAME_EXISTS, "SHMFIFO_QUEUE_NAME_EXISTS\0"),
    (SHMFIFO_INVALID_QUEUE_NAME, "SHMFIFO_INVALID_QUEUE_NAME\0"),
    (SHMFIFO_INVALID_CONFIG, "SHMFIFO_INVALID_CONFIG\0"),
    (SHMFIFO_NOT_AN_ARENA, "SHMFIFO_NOT_AN_ARENA\0"),
    (
        SHMFIFO_LAYOUT_VERSION_MISMATCH,
        "SHMFIFO_LAYOUT_VERSION_MISMATCH\0",
    ),
    (SHMFIFO_TRUNCATED, "SHMFIFO_TRUNCATED\0"),
    (SHMFIFO_NOT_READY, "SHMFIFO_NOT_READY\0"),
    (SHMFIFO_CORRUPTED, "SHMFIFO_CORRUPTED\0"),
    (SHMFIFO_NO_SPACE, "SHMFIFO_NO_SPACE\0"),
    (SHMFIFO_SIZE_CLASS_FULL, "SHMFIFO_SIZE_CLASS_FULL\0"),
    (SHMFIFO_GROUP_LIMIT_REACHED, "SHMFIFO_GROUP_LIMIT_REACHED\0"),
    (
        SHMFIFO_PARTICIPANT_LIMIT_REACHED,
        "SHMFIFO_PARTICIPANT_LIMIT_REACHED\0",
    ),
    (SHMFIFO_DEDUP_TABLE_FULL, "SHMFIFO_DEDUP_TABLE_FULL\0"),
    (SHMFIFO_DEDUP_IN_PROGRESS, "SHMFIFO_DEDUP_IN_PROGRESS\0"),
    (SHMFIFO_IO, "SHMFIFO_IO\0"),
    (
        SHMFIFO_INVALID_ATTRIBUTE_NAME,
        "SHMFIFO_INVALID_ATTRIBUTE_NAME\0",
    ),
    (
        SHMFIFO_ATTRIBUTE_NOT_MUTABLE,
        "SHMFIFO_ATTRIBUTE_NOT_MUTABLE\0",
    ),
    (SHMFIFO_DEAD_LETTER_QUEUE, "SHMFIFO_DEAD_LETTER_QUEUE\0"),
    (SHMFIFO_PARTICIPANT_BUSY, "SHMFIFO_PARTICIPANT_BUSY\0"),
    (SHMFIFO_UNTRUSTED_FILE, "SHMFIFO_UNTRUSTED_FILE\0"),
    (SHMFIFO_REMOTE, "SHMFIFO_REMOTE\0"),
    (SHMFIFO_NULL_ARGUMENT, "SHMFIFO_NULL_ARGUMENT\0"),
    (SHMFIFO_INVALID_UTF8, "SHMFIFO_INVALID_UTF8\0"),
    (SHMFIFO_BUFFER_TOO_SMALL, "SHMFIFO_BUFFER_TOO_SMALL\0"),
    (SHMFIFO_PANIC, "SHMFIFO_PANIC\0"),
    (SHMFIFO_UNKNOWN_ERROR, "SHMFIFO_UNKNOWN_ERROR\0"),
];

pub(crate) fn code_of(e: &Error) -> shmfifo_result {
    // The C codes are `ErrorCode`'s numbers (checked by `codes_match_the_core` below); the
    // match on `ErrorCode` there is exhaustive, so a new kind fails to build until it has its
    // constant.
    e.code() as shmfifo_result
}

/// The `SHMFIFO_` constant of each core error kind (exhaustive: no wildcard).
#[cfg(test)]
pub(crate) fn constant_of(c: shmfifo_core::ErrorCode) -> shmfifo_result {
    use shmfifo_core::ErrorCode;
    match c {
        ErrorCode::InvalidParameterValue => SHMFIFO_INVALID_PARAMETER_VALUE,
        ErrorCode::MissingParameter => SHMFIFO_MISSING_PARAMETER,
        ErrorCode::InvalidMessageContents => SHMFIFO_INVALID_MESSAGE_CONTENTS,
        ErrorCode::ReceiptHandleIsInvalid => SHMFIFO_RECEIPT_HANDLE_IS_INVALID,
        ErrorCode::ReceiptHandleExpired => SHMFIFO_RECEIPT_HANDLE_EXPIRED,
        ErrorCode::EmptyBatchRequest => SHMFIFO_EMPTY_BATCH_REQUEST,
        ErrorCode::TooManyEntriesInBatchRequest => SHMFIFO_TOO_MANY_ENTRIES_IN_BATCH_REQUEST,
        ErrorCode::InvalidBatchEntryId => SHMFIFO_INVALID_BATCH_ENTRY_ID,
        ErrorCode::BatchEntryIdsNotDistinct => SHMFIFO_BATCH_ENTRY_IDS_NOT_DISTINCT,
        ErrorCode::BatchRequestTooLong => SHMFIFO_BATCH_REQUEST_TOO_LONG,
        ErrorCode::QueueDoesNotExist => SHMFIFO_QUEUE_DOES_NOT_EXIST,
        ErrorCode::QueueNameExists => SHMFIFO_QUEUE_NAME_EXISTS,
        ErrorCode::InvalidQueueName => SHMFIFO_INVALID_QUEUE_NAME,
        ErrorCode::InvalidConfig => SHMFIFO_INVALID_CONFIG,
        ErrorCode::NotAnArena => SHMFIFO_NOT_AN_ARENA,
        ErrorCode::LayoutVersionMismatch => SHMFIFO_LAYOUT_VERSION_MISMATCH,
        ErrorCode::Truncated => SHMFIFO_TRUNCATED,
        ErrorCode::NotReady => SHMFIFO_NOT_READY,
        ErrorCode::Corrupted => SHMFIFO_CORRUPTED,
        ErrorCode::NoSpace => SHMFIFO_NO_SPACE,
        ErrorCode::SizeClassFull => SHMFIFO_SIZE_CLASS_FULL,
        ErrorCode::GroupLimitReached => SHMFIFO_GROUP_LIMIT_REACHED,
        ErrorCode::ParticipantLimitReached => SHMFIFO_PARTICIPANT_LIMIT_REACHED,
        ErrorCode::DedupTableFull => SHMFIFO_DEDUP_TABLE_FULL,
        ErrorCode::DedupInProgress => SHMFIFO_DEDUP_IN_PROGRESS,
        ErrorCode::Io => SHMFIFO_IO,
        ErrorCode::InvalidAttributeName => SHMFIFO_INVALID_ATTRIBUTE_NAME,
        ErrorCode::AttributeNotMutable => SHMFIFO_ATTRIBUTE_NOT_MUTABLE,
        ErrorCode::DeadLetterQueue => SHMFIFO_DEAD_LETTER_QUEUE,
        ErrorCode::Remote => SHMFIFO_REMOTE,
        ErrorCode::ParticipantBusy => SHMFIFO_PARTICIPANT_BUSY,
        ErrorCode::UntrustedFile => SHMFIFO_UNTRUSTED_FILE,
    }
}

thread_local! {
    static LAST_ERROR: RefCell<String> = const { RefCell::new(String::new()) };
}

// The message is a `String`, so the thread's copy has a destructor, and once that has run
// (glibc runs a thread's local destructors before `atexit` handlers and C++ static
// destructors, a pthread key's after them) `LocalKey::with` panics: inside an `extern "C"`
// function, an abort. Every access is `try_with`: a call made then works, and its message
// reads as empty.

/// Keeps `msg` as the calling thread's last error message, its control characters escaped:
/// a message may quote the caller's bytes (an id with a NUL or an escape sequence in it),
/// and a C program reads it as a string (a NUL cut it short while the length returned
/// counted past it) and often prints it to a terminal (where an escape sequence acts).
pub(crate) fn set_error(msg: String) {
    let msg = if msg.chars().any(escaped) {
        let mut out = String::with_capacity(msg.len() + 8);
        for c in msg.chars() {
            if escaped(c) {
                use std::fmt::Write as _;
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            } else {
                out.push(c);
            }
        }
        out
    } else {
        msg
    };
    let _ = LAST_ERROR.try_with(|l| *l.borrow_mut() = msg);
}

/// Whether [`set_error`] escapes `c`: every control character (C0, DEL, C1) but a tab and a
/// line feed.
fn escaped(c: char) -> bool {
    c.is_control() && c != '\n' && c != '\t'
}

/// After a success: the last error message is empty (a small allocation kept for the next
/// error; one that quoted a long argument, such as a rejected id of a megabyte, given back).
pub(crate) fn clear_error() {
    let _ = LAST_ERROR.try_with(|l| {
        let mut l = l.borrow_mut();
        if l.capacity() > 1024 {
            *l = String::new();
        } else {
            l.clear();
        }
    });
}

/// The name of a result code (`"SHMFIFO_OK"` …), or `"SHMFIFO_UNKNOWN_RESULT"`. Static storage.
#[no_mangle]
pub extern "C" fn shmfifo_result_name(code: shmfifo_result) -> *const c_char {
    NAMES
        .iter()
        .find(|(c, _)| *c == code)
        .map_or("SHMFIFO_UNKNOWN_RESULT\0", |(_, n)| n)
        .as_ptr()
        .cast()
}

/// Copies the calling thread's last error message (empty after a success) into `buf` (at most
/// `len - 1` bytes and a NUL). Returns the message's full length in bytes, as `snprintf`
/// does; `buf` may be NULL when `len` is 0. Once the thread's locals are destroyed (a call
/// from an `atexit` handler or a C++ static destructor: the library's calls work there) the
/// message reads as empty.
///
/// # Safety
/// `buf` must point to `len` writable bytes (or `len` must be 0).
#[no_mangle]
pub unsafe extern "C" fn shmfifo_last_error_message(buf: *mut c_char, len: usize) -> usize {
    let copy = |msg: &str| {
        if !buf.is_null() && len > 0 {
            let n = msg.len().min(len - 1);
            // SAFETY: the caller guarantees `len` writable bytes; we write `n + 1 <= len`.
            unsafe {
                core::ptr::copy_nonoverlapping(msg.as_ptr(), buf.cast::<u8>(), n);
                *buf.add(n) = 0;
            }
        }
        msg.len()
    };
    // The thread's message already destroyed (a call from an `atexit` handler): empty.
    LAST_ERROR
        .try_with(|l| copy(&l.borrow()))
        .unwrap_or_else(|_| copy(""))
}
