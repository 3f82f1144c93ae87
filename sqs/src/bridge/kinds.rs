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
                    "response" | "response-4xx" | "RequestTimeout" | "MissingEntry"
                )
        }
        e => e.code().is_retryable(),
    }
}

/// No message can get through: the remote queue is missing, our credentials are refused, the
/// far end is not a queue any more, or not one a FIFO message can be sent to (a malformed
/// URL, an operation the endpoint does not support, a standard queue refusing the group and
/// deduplication ids): each a refusal of every message alike, never to be dead-lettered
/// message by message.
pub(super) fn fatal(e: &Error) -> bool {
    if let Error::Remote {
        kind: RemoteKind::Other,
        code,
        ..
    } = e
    {
        return matches!(
            code.as_str(),
            "InvalidAddress"
                | "AWS.SimpleQueueService.UnsupportedOperation"
                | "UnsupportedOperation"
        );
    }
    if let Error::InvalidParameterValue { reason, .. } = e {
        // SQS's answer to a group or deduplication id sent to a standard queue: "The request
        // include parameter that is not valid for this queue type".
        return reason.contains("not valid for this queue type");
    }
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
