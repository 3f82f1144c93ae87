//! Which remote errors another try may mend, and which end the bridge.

use shmfifo::{Error, RemoteKind};

/// Another try may succeed with no change: the remote was unreachable, throttled us, or
/// failed on its side (5xx), or a local remote queue was momentarily full or busy.
pub(super) fn transient(e: &Error) -> bool {
    match e {
        Error::Remote {
            kind: RemoteKind::Unreachable | RemoteKind::Throttled,
            ..
        } => true,
        Error::Remote {
            kind: RemoteKind::Other,
            code,
            ..
        } => {
            // "response": an answer the SDK could not read (a proxy's 502 page, say). KMS:
            // the queue's key is throttled, disabled or missing, for every message alike (an
            // operator's fix, not a refusal of this message: nothing is dead-lettered for it).
            code.starts_with("Internal")
                || code.starts_with("ServiceUnavailable")
                || code.starts_with("KMS.")
                || matches!(
                    code.as_str(),
                    "response" | "RequestTimeout" | "MissingEntry"
                )
        }
        e => e.code().is_retryable(),
    }
}

/// No message can get through: the remote queue is missing, our credentials are refused, or
/// the far end is not a queue any more.
pub(super) fn fatal(e: &Error) -> bool {
    matches!(
        e,
        Error::QueueDoesNotExist { .. }
            | Error::Remote {
                kind: RemoteKind::Credentials,
                ..
            }
            | Error::Io(_)
            | Error::Corrupted { .. }
            | Error::NotAnArena { .. }
            | Error::LayoutVersionMismatch { .. }
            | Error::Truncated { .. }
            | Error::UntrustedFile { .. }
    )
}
