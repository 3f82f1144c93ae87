//! What the backend reads of an answer: a byte limit for every body, bounds on a successful
//! one's shape ([`crate::shape`]), both set by the operation ([`BodyCap`], an SDK
//! interceptor), and the error for an answer that breaks SQS's contract.

use shmfifo::{Error, RemoteKind};

use crate::shape;

/// The most bytes of a ReceiveMessage answer's body the backend reads (64 MiB). SQS's
/// largest answer is a ReceiveMessage of ten 1 MiB messages (bodies and attributes) in JSON,
/// where a quote, a backslash, a tab, a line feed or a carriage return of a body takes two
/// bytes: at most some 21 MiB, so the limit leaves three times that. A longer body (a broken
/// or hostile endpoint, an intercepting proxy) fails the call as an unreadable answer, after
/// at most this much memory, rather than being read whole.
pub const MAX_RESPONSE_BYTES: usize = 64 << 20;

/// The most bytes of any other answer's body (1 MiB): a batch's ten results, a queue's URL or
/// attributes take a few KiB.
pub const MAX_SMALL_RESPONSE_BYTES: usize = 1 << 20;

/// The most JSON objects and members a successful ReceiveMessage answer may hold ([`shape`]):
/// ten messages, each an object with its system attributes, its message attributes and each
/// of those a value object, some 15 objects and 80 members a message at most.
pub const MAX_RECEIVE_SHAPE: (u32, u32) = (1024, 8192);

/// The same for any other successful answer: ten batch results of a few members each.
pub const MAX_SMALL_SHAPE: (u32, u32) = (256, 2048);

/// Reads every answer's body through a byte limit ([`MAX_RESPONSE_BYTES`] for ReceiveMessage,
/// [`MAX_SMALL_RESPONSE_BYTES`] otherwise) and a successful one's through bounds on its shape
/// ([`shape::Shape`]: [`MAX_RECEIVE_SHAPE`], [`MAX_SMALL_SHAPE`]) before the SDK parses it (the
/// SDK reads a body whole, bounded otherwise only by the attempt timeout, and builds a value
/// for every object it holds, a required field it lacks filled in).
#[derive(Debug)]
pub(crate) struct BodyCap;

impl aws_sdk_sqs::config::Intercept for BodyCap {
    fn name(&self) -> &'static str {
        "shmfifo-sqs-body-cap"
    }

    fn modify_before_deserialization(
        &self,
        context: &mut aws_sdk_sqs::config::interceptors::BeforeDeserializationInterceptorContextMut<
            '_,
        >,
        _runtime_components: &aws_sdk_sqs::config::RuntimeComponents,
        cfg: &mut aws_sdk_sqs::config::ConfigBag,
    ) -> std::result::Result<(), Box<dyn std::error::Error + Send + Sync>> {
        let receive = cfg
            .load::<aws_smithy_runtime_api::client::orchestrator::Metadata>()
            .is_some_and(|m| m.name() == "ReceiveMessage");
        let (bytes, (objects, members)) = if receive {
            (MAX_RESPONSE_BYTES, MAX_RECEIVE_SHAPE)
        } else {
            (MAX_SMALL_RESPONSE_BYTES, MAX_SMALL_SHAPE)
        };
        let response = context.response_mut();
        // An error's answer is read for its code and message only (and may be a proxy's
        // page, whose text has commas and colons): its bytes are bounded, not its shape.
        let success = response.status().is_success();
        let body = http_body_util::Limited::new(response.take_body(), bytes);
        *response.body_mut() = if success {
            aws_smithy_types::body::SdkBody::from_body_1_x(Shaped {
                inner: body,
                shape: shape::Shape::new(objects, members),
            })
        } else {
            aws_smithy_types::body::SdkBody::from_body_1_x(body)
        };
        Ok(())
    }
}

/// A body whose data is counted by a [`shape::Shape`] as it is read: past a bound, the read
/// fails (the call then fails as an unreadable answer).
struct Shaped<B> {
    inner: B,
    shape: shape::Shape,
}

impl<B> http_body::Body for Shaped<B>
where
    B: http_body::Body<Data = bytes::Bytes> + Unpin,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Data = bytes::Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<std::result::Result<http_body::Frame<bytes::Bytes>, Self::Error>>>
    {
        let this = self.get_mut();
        match std::pin::Pin::new(&mut this.inner).poll_frame(cx) {
            std::task::Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    if let Err(e) = this.shape.feed(data) {
                        return std::task::Poll::Ready(Some(Err(Box::new(e))));
                    }
                }
                std::task::Poll::Ready(Some(Ok(frame)))
            }
            std::task::Poll::Ready(Some(Err(e))) => std::task::Poll::Ready(Some(Err(e.into()))),
            std::task::Poll::Ready(None) => std::task::Poll::Ready(None),
            std::task::Poll::Pending => std::task::Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// An answer that breaks SQS's contract (a field it always gives missing, more entries than
/// asked for): the remote's fault, another try, never a refusal of what was sent.
pub(crate) fn invalid_answer(what: &str) -> Error {
    Error::Remote {
        kind: RemoteKind::Other,
        code: "response".into(),
        message: format!("an invalid answer: {what}"),
    }
}

#[cfg(test)]
mod tests {
    use shmfifo::{BatchEntry, Error, ReceiveOptions, RemoteKind, SendMessage};

    use crate::{errors, AsyncSqsQueue};

    /// An endpoint that answers every request with a proxy's 502 page (no SQS error code):
    /// a failure of the remote as a whole, never a refusal of what was sent (it was
    /// `Unknown`, which the bridge counted as a refusal and dead-lettered).
    #[test]
    fn an_answer_without_an_error_code_is_the_remote_failing() {
        let page = "<html><body>502 Bad Gateway</body></html>";
        let (rt, c) = answering(502, page.to_owned());
        let e = rt.block_on(AsyncSqsQueue::open(c, "q.fifo")).unwrap_err();
        // "response": what the bridge retries as the remote failing (an SDK that reads the
        // status first may say Unreachable).
        assert!(
            matches!(
                &e,
                Error::Remote {
                    kind: RemoteKind::Unreachable,
                    ..
                }
            ) || matches!(&e, Error::Remote { kind: RemoteKind::Other, code, .. } if code == "response"),
            "{e:?}"
        );
    }

    /// A local endpoint that answers every request with `status` and the JSON `body` (one
    /// connection at a time), and a client for it.
    fn answering(status: u16, body: String) -> (tokio::runtime::Runtime, aws_sdk_sqs::Client) {
        use std::io::{Read, Write};
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        std::thread::spawn(move || {
            for s in l.incoming() {
                let Ok(mut s) = s else { return };
                let mut b = [0u8; 65536];
                let _ = s.read(&mut b);
                let _ = write!(
                    s,
                    "HTTP/1.1 {status} X\r\nContent-Type: application/x-amz-json-1.0\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        std::env::set_var("AWS_ACCESS_KEY_ID", "test");
        std::env::set_var("AWS_SECRET_ACCESS_KEY", "test");
        std::env::set_var("AWS_REGION", "us-east-1");
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let c = rt.block_on(AsyncSqsQueue::client(Some(&format!("http://{addr}"))));
        (rt, c)
    }

    fn remote_other(e: &Error) -> bool {
        matches!(
            e,
            Error::Remote {
                kind: RemoteKind::Other | RemoteKind::Unreachable,
                ..
            }
        )
    }

    /// A batch's answer of empty entries (`{}`, three bytes each, which the SDK fills in as
    /// whole results): 64 MiB of them became gigabytes. Now an answer of more objects than
    /// ten results take is refused as it is read, and one of more results than were sent
    /// after it.
    #[test]
    fn an_answer_that_would_grow_past_its_bytes_is_refused() {
        let entry = SendMessage::new("g", "m").dedup_id("1");
        let batch = [BatchEntry { id: "a", entry }];
        let two = r#"{"Id":"a","MessageId":"m","MD5OfMessageBody":"x","SequenceNumber":"1"}"#;
        // One good result, and 300 objects under a name the SDK skips: refused by the shape
        // bound (256 objects), whatever the SDK would have made of them.
        let many = vec!["{}"; 300].join(",");
        let (rt, c) = answering(
            200,
            format!(r#"{{"Successful":[{two}],"Failed":[],"X":[{many}]}}"#),
        );
        let q = AsyncSqsQueue::new(c, "http://x/000000000000/q.fifo");
        let e = rt.block_on(q.send_batch(&batch)).unwrap_err();
        assert!(remote_other(&e), "{e:?}");
        assert!(e.to_string().contains("more than 256 JSON objects"), "{e}");
        // The same 300 objects in a receive's answer: within ReceiveMessage's bounds (1,024).
        let (rt, c) = answering(200, format!(r#"{{"Messages":[],"X":[{many}]}}"#));
        let q = AsyncSqsQueue::new(c, "http://x/000000000000/q.fifo");
        assert!(rt
            .block_on(q.receive(&ReceiveOptions::max(1), None))
            .unwrap()
            .is_empty());
        // Two results for one entry: within the shape's bounds, refused after.
        let (rt, c) = answering(
            200,
            format!(r#"{{"Successful":[{two},{two}],"Failed":[]}}"#),
        );
        let q = AsyncSqsQueue::new(c, "http://x/000000000000/q.fifo");
        let e = rt.block_on(q.send_batch(&batch)).unwrap_err();
        assert!(e.to_string().contains("2 entries for 1 sent"), "{e}");
        // One result for one entry: as before.
        let (rt, c) = answering(200, format!(r#"{{"Successful":[{two}],"Failed":[]}}"#));
        let q = AsyncSqsQueue::new(c, "http://x/000000000000/q.fifo");
        let r = rt.block_on(q.send_batch(&batch)).unwrap();
        assert_eq!(r[0].result.as_ref().unwrap().message_id, "m");
    }

    /// A receive answered with more messages than asked for, or a message without its
    /// receipt handle (which could never be deleted), or a GetQueueUrl without a URL: an
    /// invalid answer, not messages with empty ids or a queue at "".
    #[test]
    fn answers_that_break_sqs_s_contract_are_errors() {
        let m = |id: &str| {
            format!(r#"{{"MessageId":"{id}","ReceiptHandle":"h{id}","Body":"b","MD5OfBody":"x"}}"#)
        };
        let (rt, c) = answering(200, format!(r#"{{"Messages":[{},{}]}}"#, m("1"), m("2")));
        let q = AsyncSqsQueue::new(c, "http://x/000000000000/q.fifo");
        let e = rt
            .block_on(q.receive(&ReceiveOptions::max(1), None))
            .unwrap_err();
        assert!(e.to_string().contains("2 messages for at most 1"), "{e}");
        let (rt, c) = answering(200, r#"{"Messages":[{"MessageId":"1","Body":"b"}]}"#.into());
        let q = AsyncSqsQueue::new(c, "http://x/000000000000/q.fifo");
        let e = rt
            .block_on(q.receive(&ReceiveOptions::max(1), None))
            .unwrap_err();
        assert!(e.to_string().contains("without a ReceiptHandle"), "{e}");
        let (rt, c) = answering(200, "{}".into());
        let e = rt.block_on(AsyncSqsQueue::open(c, "q.fifo")).unwrap_err();
        assert!(e.to_string().contains("without a QueueUrl"), "{e}");
    }

    /// A remote's error text was kept whole (megabytes) and printed raw (a terminal's escape
    /// sequences). Now at most 1 KiB of it, control characters escaped.
    #[test]
    fn a_remote_s_error_text_is_bounded_and_escaped() {
        let long = "a".repeat(100_000);
        let (rt, c) = answering(
            400,
            format!(
                r#"{{"__type":"com.amazonaws.sqs#SomethingElse","message":"\u001b[31mred{long}"}}"#
            ),
        );
        let q = AsyncSqsQueue::new(c, "http://x/000000000000/q.fifo");
        let e = rt
            .block_on(q.send(&SendMessage::new("g", "m").dedup_id("1")))
            .unwrap_err();
        let text = e.to_string();
        assert!(
            text.len() < 2 * errors::MAX_REMOTE_TEXT,
            "{} bytes",
            text.len()
        );
        assert!(
            !text.contains('\u{1b}') && text.contains("\\u{1b}[31mred"),
            "{text}"
        );
        assert_eq!(errors::remote_text("tab\there"), "tab\\there");
    }
}
