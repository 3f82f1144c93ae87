//! SQS's answers as the library's errors: an SDK error as the [`shmfifo::Error`] variant the
//! local queue gives for the same rule (`error`, `from_code`), a batch entry's failure
//! (`entry_failed`), and refused credentials told apart from an unreachable endpoint.

use std::path::PathBuf;

use aws_sdk_sqs::error::{ProvideErrorMetadata, SdkError};
use shmfifo::{BatchResult, Error, RemoteKind};

/// Known parameter names, so that an SQS `MissingParameter` names the same one the local
/// queue would.
const PARAMETERS: [&str; 8] = [
    "MessageGroupId",
    "MessageDeduplicationId",
    "MessageBody",
    "QueueUrl",
    "ReceiptHandle",
    "VisibilityTimeout",
    "MaxNumberOfMessages",
    "Entries",
];

fn parameter_in(message: &str) -> &'static str {
    PARAMETERS
        .iter()
        .copied()
        .find(|p| message.contains(p))
        .unwrap_or("request")
}

/// The most bytes of a remote's text (an error's code or message, a failure's description)
/// kept in an error: a remote may answer with megabytes of it.
pub(crate) const MAX_REMOTE_TEXT: usize = 1024;

/// A remote's text as an error carries it: at most [`MAX_REMOTE_TEXT`] bytes (cut at a
/// character, "…" after), every control character escaped (`\n`, `\u{1b}`): what a terminal
/// or a log then shows is text, never an escape sequence the remote chose.
pub(crate) fn remote_text(s: &str) -> String {
    let mut out = String::with_capacity(s.len().min(MAX_REMOTE_TEXT) + 4);
    for c in s.chars() {
        if out.len() >= MAX_REMOTE_TEXT {
            out.push('…');
            break;
        }
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// SQS's answer as the [`shmfifo::Error`] variant the local queue gives for the same rule; a
/// transport failure, throttling and refused credentials as [`Error::Remote`]. Every text from
/// the remote goes through [`remote_text`].
pub(crate) fn error<E>(
    e: SdkError<E, aws_sdk_sqs::config::http::HttpResponse>,
    queue_url: &str,
) -> Error
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    let transport = |kind, code: &str, e: &dyn std::fmt::Display| Error::Remote {
        kind,
        code: code.to_owned(),
        message: remote_text(&e.to_string()),
    };
    match e {
        // Credentials that could not be loaded (none configured, an expired SSO session) fail
        // before anything is sent, as a dispatch failure whose source is the provider's
        // error: refused credentials, which no retry mends.
        SdkError::DispatchFailure(d)
            if d.as_connector_error()
                .is_some_and(|c| credentials_failed(c)) =>
        {
            let why = d
                .as_connector_error()
                .map_or_else(|| format!("{d:?}"), |c| causes(c));
            transport(RemoteKind::Credentials, "credentials", &why)
        }
        SdkError::DispatchFailure(d) => {
            let why = d
                .as_connector_error()
                .map_or_else(|| format!("{d:?}"), |c| causes(c));
            transport(RemoteKind::Unreachable, "dispatch", &why)
        }
        SdkError::TimeoutError(t) => {
            transport(RemoteKind::Unreachable, "timeout", &format!("{t:?}"))
        }
        SdkError::ConstructionFailure(c) => Error::InvalidParameterValue {
            parameter: "request",
            reason: remote_text(&format!("{c:?}")),
        },
        SdkError::ServiceError(s) => {
            let status = s.raw().status().as_u16();
            let se = s.into_err();
            let Some(code) = se.code() else {
                // An answer without an error code (a proxy's 502 page, a garbled body): the
                // remote failed as a whole, never a refusal of what was sent. A 4xx other than
                // a timeout or throttling (a proxy's 413 for a large batch, say) is
                // `response-4xx`: the same request would get the same answer, so a bridge
                // sends a batch's entries one by one next (still never refusing a message
                // for an answer that is not SQS's).
                // Only a 4xx: a 2xx whose body would not parse (a proxy's page with status
                // 200, garbled JSON) or a 3xx says nothing about the request's size or
                // content.
                let kind = if (400..500).contains(&status) && status != 408 && status != 429 {
                    "response-4xx"
                } else {
                    "response"
                };
                return transport(
                    RemoteKind::Other,
                    kind,
                    &format!("HTTP {status} without an error code: {se}"),
                );
            };
            let code = remote_text(code);
            let code = code.as_str();
            let message = remote_text(se.message().unwrap_or(""));
            // The remote failed on its side (5xx) or throttled us (429): another try, whatever
            // the code says, never a refusal of the message.
            if status >= 500 || status == 429 {
                return Error::Remote {
                    kind: if status == 429 {
                        RemoteKind::Throttled
                    } else {
                        RemoteKind::Unreachable
                    },
                    code: code.to_owned(),
                    message: format!("HTTP {status}: {message}"),
                };
            }
            from_code(code, message, queue_url)
        }
        // An answer that could not be read (past a byte limit or a shape bound, cut short,
        // not JSON): what went wrong in words, not the response's debug dump.
        other => {
            let why = std::error::Error::source(&other)
                .map_or_else(|| format!("{other:?}"), ToString::to_string);
            transport(
                RemoteKind::Other,
                "response",
                &format!("an unreadable answer: {why}"),
            )
        }
    }
}

/// An SQS error code and message as the [`shmfifo::Error`] variant the local queue gives for
/// the same rule (request-level errors and batch entries alike).
fn from_code(code: &str, message: String, queue_url: &str) -> Error {
    // Without a trailing `/`, which `QueueDoesNotExist` keeps for a missing directory.
    let path = || PathBuf::from(queue_url.trim_end_matches('/'));
    let code = code.to_owned();
    match code.as_str() {
        "InvalidParameterValue" if message.contains("receipt handle has expired") => {
            Error::ReceiptHandleExpired { handle: message }
        }
        "InvalidParameterValue" => Error::InvalidParameterValue {
            parameter: parameter_in(&message),
            reason: message,
        },
        "MissingParameter" => Error::MissingParameter {
            parameter: parameter_in(&message),
        },
        "InvalidMessageContents" => Error::InvalidMessageContents { reason: message },
        "ReceiptHandleIsInvalid" => Error::ReceiptHandleIsInvalid { handle: message },
        "AWS.SimpleQueueService.NonExistentQueue" | "QueueDoesNotExist" => {
            Error::QueueDoesNotExist { path: path() }
        }
        "QueueAlreadyExists" | "QueueNameExists" => Error::QueueNameExists { path: path() },
        "AWS.SimpleQueueService.EmptyBatchRequest" | "EmptyBatchRequest" => {
            Error::EmptyBatchRequest
        }
        "AWS.SimpleQueueService.TooManyEntriesInBatchRequest" | "TooManyEntriesInBatchRequest" => {
            Error::TooManyEntriesInBatchRequest { entries: 11 }
        }
        "AWS.SimpleQueueService.InvalidBatchEntryId" | "InvalidBatchEntryId" => {
            Error::InvalidBatchEntryId { id: message }
        }
        "AWS.SimpleQueueService.BatchEntryIdsNotDistinct" | "BatchEntryIdsNotDistinct" => {
            Error::BatchEntryIdsNotDistinct { id: message }
        }
        "AWS.SimpleQueueService.BatchRequestTooLong" | "BatchRequestTooLong" => {
            Error::BatchRequestTooLong { bytes: 0 }
        }
        "InvalidAttributeName" => Error::InvalidAttributeName { name: message },
        "InvalidAttributeValue" => Error::InvalidConfig {
            setting: "Attributes",
            reason: message,
        },
        "RequestThrottled" | "ThrottlingException" | "OverLimit" => Error::Remote {
            kind: RemoteKind::Throttled,
            code,
            message,
        },
        "InvalidClientTokenId"
        | "SignatureDoesNotMatch"
        | "ExpiredToken"
        | "ExpiredTokenException"
        | "AccessDenied"
        | "AccessDeniedException"
        | "UnrecognizedClientException"
        | "InvalidSecurity"
        | "MissingAuthenticationToken"
        | "IncompleteSignature" => Error::Remote {
            kind: RemoteKind::Credentials,
            code,
            message,
        },
        _ => Error::Remote {
            kind: RemoteKind::Other,
            code,
            message,
        },
    }
}

/// A failed batch entry (send, delete and change-visibility batches alike): the entry's own
/// error where SQS says the sender is at fault; otherwise the remote's fault, not the
/// entry's (SenderFault false, an `InternalError`, say): `Unreachable`, another try, never a
/// refusal.
pub(crate) fn entry_failed(f: &aws_sdk_sqs::types::BatchResultErrorEntry) -> Error {
    if f.sender_fault() {
        batch_error(f.code(), f.message())
    } else {
        Error::Remote {
            kind: RemoteKind::Unreachable,
            code: remote_text(f.code()),
            message: remote_text(f.message().unwrap_or("")),
        }
    }
}

fn batch_error(code: &str, message: Option<&str>) -> Error {
    from_code(&remote_text(code), remote_text(message.unwrap_or("")), "")
}

/// A batch entry the SDK could not build (a required field missing).
pub(crate) fn entry_error(x: aws_sdk_sqs::error::BuildError) -> Error {
    Error::InvalidParameterValue {
        parameter: "Entries",
        reason: x.to_string(),
    }
}

/// An error and its sources in words, each once (`tcp connect error: Connection refused (os
/// error 111)`), where the SDK's debug dump of a dispatch failure was a page of structs. At
/// most 8 links: a chain is the SDK's, but nothing here trusts its length.
fn causes(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut cur = Some(e);
    while let (Some(c), true) = (cur, parts.len() < 8) {
        let text = c.to_string();
        // A wrapper that repeats its source's text (or says nothing) adds nothing.
        if !text.is_empty() && !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        cur = c.source();
    }
    parts.join(": ")
}

/// Whether a dispatch failure's chain of sources holds the SDK's credentials error of a kind
/// no retry mends: none could be loaded (no keys, no profile, an expired SSO session) or the
/// configuration is invalid. A provider's timeout or failure (a 503 from STS while a role's
/// credentials are refreshed, say) is the remote failing, as an unreachable endpoint. At most
/// 16 links looked at: a chain is the SDK's, but nothing here trusts its length.
fn credentials_failed(d: &(dyn std::error::Error + 'static)) -> bool {
    use aws_credential_types::provider::error::CredentialsError;
    let mut e: Option<&(dyn std::error::Error + 'static)> = Some(d);
    for _ in 0..16 {
        let Some(cur) = e else {
            return false;
        };
        if let Some(c) = cur.downcast_ref::<CredentialsError>() {
            return matches!(
                c,
                CredentialsError::CredentialsNotLoaded(_)
                    | CredentialsError::InvalidConfiguration(_)
            );
        }
        e = cur.source();
    }
    false
}

pub(crate) fn handle_results<'a>(
    ids: impl Iterator<Item = &'a str>,
    failed: &[aws_sdk_sqs::types::BatchResultErrorEntry],
) -> Vec<BatchResult<()>> {
    ids.map(|id| BatchResult {
        id: id.to_owned(),
        result: match failed.iter().find(|f| f.id() == id) {
            Some(f) => Err(entry_failed(f)),
            None => Ok(()),
        },
    })
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An SQS error code comes back as the variant whose `sqs_code` is that code, so a
    /// program matching on either sees the same thing on both backends.
    #[test]
    fn sqs_codes_map_onto_the_local_variants() {
        for code in [
            "InvalidParameterValue",
            "MissingParameter",
            "InvalidMessageContents",
            "ReceiptHandleIsInvalid",
            "AWS.SimpleQueueService.NonExistentQueue",
            "QueueAlreadyExists",
            "AWS.SimpleQueueService.EmptyBatchRequest",
            "AWS.SimpleQueueService.TooManyEntriesInBatchRequest",
            "AWS.SimpleQueueService.InvalidBatchEntryId",
            "AWS.SimpleQueueService.BatchEntryIdsNotDistinct",
            "AWS.SimpleQueueService.BatchRequestTooLong",
            "InvalidAttributeName",
            "InvalidAttributeValue",
            "RequestThrottled",
        ] {
            assert_eq!(from_code(code, "m".into(), "u").sqs_code(), code, "{code}");
        }
        let e = from_code("InvalidParameterValue", "Value x for parameter ReceiptHandle is invalid. Reason: The receipt handle has expired.".into(), "u");
        assert!(matches!(e, Error::ReceiptHandleExpired { .. }), "{e:?}");
        let e = from_code(
            "MissingParameter",
            "The request must contain the parameter MessageGroupId.".into(),
            "u",
        );
        assert!(matches!(
            e,
            Error::MissingParameter {
                parameter: "MessageGroupId"
            }
        ));
        for code in ["ExpiredToken", "SignatureDoesNotMatch", "AccessDenied"] {
            assert!(matches!(
                from_code(code, String::new(), "u"),
                Error::Remote {
                    kind: RemoteKind::Credentials,
                    ..
                }
            ));
        }
        assert!(matches!(
            from_code("SomethingNew", String::new(), "u"),
            Error::Remote {
                kind: RemoteKind::Other,
                ..
            }
        ));
    }
}
