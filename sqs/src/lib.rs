//! shmfifo beyond one host: [`shmfifo::FifoQueue`] over Amazon SQS (with `aws-sdk-sqs`), and
//! [`bridge`], which forwards a local queue to SQS exactly once.
//!
//! The same program runs on a local queue and on SQS: open either through [`open_url`] (a
//! path or `shm:NAME` is a local queue; `https://…/NAME.fifo` or `sqs://NAME.fifo` an SQS
//! queue, with the endpoint from `AWS_ENDPOINT_URL` as the `aws` CLI takes it) and use the
//! trait. [`AsyncSqsQueue`] is the async API underneath; [`SqsQueue`] runs it on its own small
//! runtime for blocking callers (do not call it from inside a tokio runtime: use
//! [`AsyncSqsQueue`] there).

#![warn(missing_docs)]

mod answers;
pub mod bridge;
mod errors;
pub mod shape;

use std::sync::Arc;
use std::time::Duration;

use answers::{invalid_answer, BodyCap};
pub use answers::{
    MAX_RECEIVE_SHAPE, MAX_RESPONSE_BYTES, MAX_SMALL_RESPONSE_BYTES, MAX_SMALL_SHAPE,
};
use aws_sdk_sqs::primitives::Blob;
use aws_sdk_sqs::types::{
    ChangeMessageVisibilityBatchRequestEntry, DeleteMessageBatchRequestEntry,
    MessageAttributeValue, MessageSystemAttributeName, QueueAttributeName,
    SendMessageBatchRequestEntry,
};
use errors::{entry_error, entry_failed, error, handle_results};
use shmfifo::{
    BatchEntry, BatchResult, Error, FifoQueue, Queue, ReceiveOptions, Received, ReceivedAttribute,
    RemoteKind, Result, SendMessage, Sent,
};

/// The body of `m` as SQS takes it, text: a body given as bytes (a binary queue's) that is not
/// UTF-8 is refused here, never sent empty or mangled.
fn text_body<'a>(m: &SendMessage<'a>) -> Result<&'a str> {
    match m.bytes {
        None => Ok(m.body),
        Some(b) => std::str::from_utf8(b).map_err(|e| Error::InvalidMessageContents {
            reason: format!(
                "{NOT_TEXT}; this one is not UTF-8 (at byte {})",
                e.valid_up_to()
            ),
        }),
    }
}

/// How [`text_body`]'s refusal begins: a refusal here, before anything is sent, which the
/// bridge tells apart from the remote's.
pub(crate) const NOT_TEXT: &str = "SQS takes text bodies only";

/// Whether `e` is [`text_body`]'s refusal: this side's, not the remote's.
pub(crate) fn refused_here(e: &Error) -> bool {
    matches!(e, Error::InvalidMessageContents { reason } if reason.starts_with(NOT_TEXT))
}

/// How long the client waits for a connection to the endpoint.
pub const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// How long one attempt of a call may take, its answer read (a 20 s long poll included).
pub const ATTEMPT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// How long a call may take over all its attempts (the SDK retries throttling and 5xx).
pub const OPERATION_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(90);

fn attribute_value(a: &shmfifo::MessageAttribute<'_>) -> Result<MessageAttributeValue> {
    let b = MessageAttributeValue::builder().data_type(a.data_type);
    let b = if a.data_type.starts_with("Binary") {
        b.binary_value(Blob::new(a.value))
    } else {
        b.string_value(String::from_utf8_lossy(a.value))
    };
    b.build().map_err(|e| Error::InvalidParameterValue {
        parameter: "MessageAttributes",
        reason: e.to_string(),
    })
}

/// The region an SQS URL's host names: `sqs.REGION.amazonaws.com[.cn]` or
/// `REGION.queue.amazonaws.com` (the legacy form); `None` for any other host.
fn region_of_url(url: &str) -> Option<String> {
    let host = url.split_once("://")?.1.split(['/', ':', '?']).next()?;
    let parts: Vec<&str> = host.split('.').collect();
    let region = match parts.as_slice() {
        ["sqs", r, "amazonaws", "com"] | ["sqs", r, "amazonaws", "com", "cn"] => r,
        [r, "queue", "amazonaws", "com"] => r,
        _ => return None,
    };
    (!region.is_empty()
        && region.len() <= 32
        && region
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'))
    .then(|| (*region).to_owned())
}

/// A duration in SQS's whole seconds, rounded up: a visibility timeout of 900 ms is 1 s on
/// SQS, never 0 (which would make the message visible again at once, to another consumer,
/// while it is still being processed), and a wait of 500 ms a long poll of 1 s, never a short
/// poll. Durations of whole seconds are unchanged.
fn secs(d: Duration) -> i32 {
    let s = d.as_secs().saturating_add(u64::from(d.subsec_nanos() > 0));
    s.min(i32::MAX as u64) as i32
}

/// SQS names every FIFO queue `….fifo` (and no standard queue so): a URL or name that does not
/// end so is a standard queue, which refuses every message's group and deduplication ids (a
/// bridge would refuse, and dead-letter, every message). `InvalidQueueName` before any request.
fn fifo_only(url_or_name: &str) -> Result<()> {
    let name = url_or_name
        .split(['?', '#'])
        .next()
        .unwrap_or("")
        .trim_end_matches('/')
        .rsplit('/')
        .next()
        .unwrap_or("");
    if name.len() > ".fifo".len() && name.ends_with(".fifo") {
        Ok(())
    } else {
        Err(Error::InvalidQueueName {
            name: format!("{url_or_name} (not a FIFO queue: its name must end in .fifo)"),
        })
    }
}

/// An SQS FIFO queue, async (the API underneath [`SqsQueue`]).
#[derive(Debug, Clone)]
pub struct AsyncSqsQueue {
    client: aws_sdk_sqs::Client,
    url: String,
}

impl AsyncSqsQueue {
    /// The queue at `queue_url`, reached through `client`.
    pub fn new(client: aws_sdk_sqs::Client, queue_url: impl Into<String>) -> Self {
        AsyncSqsQueue {
            client,
            url: queue_url.into(),
        }
    }

    /// A client from the environment (credentials, region, `AWS_ENDPOINT_URL`) as the AWS
    /// SDKs and CLI load them, with `endpoint` overriding the endpoint. Every answer's body is
    /// read through a byte limit ([`MAX_RESPONSE_BYTES`] for ReceiveMessage,
    /// [`MAX_SMALL_RESPONSE_BYTES`] otherwise), and a successful one's through bounds on its
    /// shape ([`MAX_RECEIVE_SHAPE`], [`MAX_SMALL_SHAPE`]: [`shape`]).
    ///
    /// Without a region in the environment every call fails before it is sent (signing needs
    /// one); [`client_for`](Self::client_for) takes it from a queue's URL, or says so at once.
    pub async fn client(endpoint: Option<&str>) -> aws_sdk_sqs::Client {
        Self::build_client(endpoint, None).await.0
    }

    /// [`client`](Self::client) for the queue at `queue_url` (if known), in the region its
    /// host names (`sqs.REGION.amazonaws.com`, `REGION.queue.amazonaws.com`), which SQS checks
    /// a request's signature against, whatever the environment says; elsewhere (a local
    /// endpoint) the environment's; `InvalidConfig` naming the fix where neither gives one (a
    /// bridge would otherwise retry a call that never leaves the process, forever).
    pub async fn client_for(
        endpoint: Option<&str>,
        queue_url: Option<&str>,
    ) -> Result<aws_sdk_sqs::Client> {
        match Self::build_client(endpoint, queue_url.and_then(region_of_url)).await {
            (client, true) => Ok(client),
            (_, false) => Err(Error::InvalidConfig {
                setting: "region",
                reason: "no AWS region: set AWS_REGION (or a region in the AWS profile), or \
                         give the queue's https://sqs.REGION.amazonaws.com/ACCOUNT/NAME.fifo URL"
                    .into(),
            }),
        }
    }

    /// The client, and whether it has a region: `url_region` (the one an SQS URL's host names:
    /// SQS checks a request's signature against it), else the environment's.
    async fn build_client(
        endpoint: Option<&str>,
        url_region: Option<String>,
    ) -> (aws_sdk_sqs::Client, bool) {
        let mut loader = aws_config::defaults(aws_config::BehaviorVersion::latest())
            // The SDK's defaults bound only the connect: a remote that accepts and never
            // answers would hold a call (and a bridge worker) forever. A long poll of SQS's
            // 20 s fits in one attempt.
            .timeout_config(
                aws_config::timeout::TimeoutConfig::builder()
                    .connect_timeout(CONNECT_TIMEOUT)
                    .operation_attempt_timeout(ATTEMPT_TIMEOUT)
                    .operation_timeout(OPERATION_TIMEOUT)
                    .build(),
            );
        if let Some(e) = endpoint {
            loader = loader.endpoint_url(e);
        }
        let loaded = loader.load().await;
        let mut b = aws_sdk_sqs::config::Builder::from(&loaded).interceptor(BodyCap);
        let has_region = match (url_region, loaded.region()) {
            (Some(r), _) => {
                b = b.region(aws_sdk_sqs::config::Region::new(r));
                true
            }
            (None, region) => region.is_some(),
        };
        (aws_sdk_sqs::Client::from_conf(b.build()), has_region)
    }

    /// Opens the queue `name` (GetQueueUrl).
    pub async fn open(client: aws_sdk_sqs::Client, name: &str) -> Result<Self> {
        fifo_only(name)?;
        let r = client
            .get_queue_url()
            .queue_name(name)
            .send()
            .await
            .map_err(|e| error(e, name))?;
        let url = r
            .queue_url()
            .filter(|u| !u.is_empty())
            .ok_or_else(|| invalid_answer("GetQueueUrl answered without a QueueUrl"))?;
        Ok(Self::new(client, url))
    }

    /// The queue URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// `SendMessage`.
    pub async fn send(&self, msg: &SendMessage<'_>) -> Result<Sent> {
        let mut r = self
            .client
            .send_message()
            .queue_url(&self.url)
            .message_body(text_body(msg)?)
            .set_message_group_id(msg.group_id.map(str::to_owned))
            .set_message_deduplication_id(msg.dedup_id.map(str::to_owned))
            .set_delay_seconds(msg.delay_seconds.map(|d| d.min(i32::MAX as u32) as i32));
        for a in msg.attributes {
            r = r.message_attributes(a.name, attribute_value(a)?);
        }
        let out = r.send().await.map_err(|e| error(e, &self.url))?;
        Ok(Sent {
            message_id: out.message_id().unwrap_or_default().to_owned(),
            sequence_number: out.sequence_number().unwrap_or_default().to_owned(),
        })
    }

    /// `SendMessageBatch`.
    pub async fn send_batch(
        &self,
        entries: &[BatchEntry<'_, SendMessage<'_>>],
    ) -> Result<Vec<BatchResult<Sent>>> {
        let mut list = Vec::with_capacity(entries.len());
        for e in entries {
            let m = &e.entry;
            let mut b = SendMessageBatchRequestEntry::builder()
                .id(e.id)
                .message_body(text_body(m)?)
                .set_message_group_id(m.group_id.map(str::to_owned))
                .set_message_deduplication_id(m.dedup_id.map(str::to_owned))
                .set_delay_seconds(m.delay_seconds.map(|d| d.min(i32::MAX as u32) as i32));
            for a in m.attributes {
                b = b.message_attributes(a.name, attribute_value(a)?);
            }
            list.push(b.build().map_err(entry_error)?);
        }
        let out = self
            .client
            .send_message_batch()
            .queue_url(&self.url)
            .set_entries(Some(list))
            .send()
            .await
            .map_err(|e| error(e, &self.url))?;
        if out.successful().len() + out.failed().len() > entries.len() {
            return Err(invalid_answer(&format!(
                "SendMessageBatch answered {} entries for {} sent",
                out.successful().len() + out.failed().len(),
                entries.len()
            )));
        }
        // In request order, as the local queue answers.
        Ok(entries
            .iter()
            .map(|e| {
                let result = if let Some(s) = out.successful().iter().find(|s| s.id() == e.id) {
                    Ok(Sent {
                        message_id: s.message_id().to_owned(),
                        sequence_number: s.sequence_number().unwrap_or_default().to_owned(),
                    })
                } else if let Some(f) = out.failed().iter().find(|f| f.id() == e.id) {
                    Err(entry_failed(f))
                } else {
                    Err(Error::Remote {
                        kind: RemoteKind::Other,
                        code: "MissingEntry".into(),
                        message: format!("the answer has no entry {}", e.id),
                    })
                };
                BatchResult {
                    id: e.id.to_owned(),
                    result,
                }
            })
            .collect())
    }

    /// `ReceiveMessage` (every system attribute and message attribute).
    pub async fn receive(
        &self,
        opts: &ReceiveOptions,
        attempt_id: Option<&str>,
    ) -> Result<Vec<Received>> {
        opts.check()?;
        let out = self
            .client
            .receive_message()
            .queue_url(&self.url)
            .max_number_of_messages(opts.max_messages as i32)
            .set_visibility_timeout(opts.visibility_timeout.map(secs))
            .set_wait_time_seconds(opts.wait_time.map(secs))
            .set_receive_request_attempt_id(attempt_id.map(str::to_owned))
            .message_system_attribute_names(MessageSystemAttributeName::All)
            .message_attribute_names("All")
            .send()
            .await
            .map_err(|e| error(e, &self.url))?;
        if out.messages().len() > opts.max_messages as usize {
            return Err(invalid_answer(&format!(
                "ReceiveMessage answered {} messages for at most {}",
                out.messages().len(),
                opts.max_messages
            )));
        }
        out.messages()
            .iter()
            .map(|m| {
                let a =
                    |k: MessageSystemAttributeName| m.attributes().and_then(|a| a.get(&k)).cloned();
                let num = |k| -> u64 { a(k).and_then(|v| v.parse().ok()).unwrap_or(0) };
                let mut attributes: Vec<ReceivedAttribute> = m
                    .message_attributes()
                    .map(|ma| {
                        ma.iter()
                            .map(|(name, v)| ReceivedAttribute {
                                name: name.clone(),
                                data_type: v.data_type().to_owned(),
                                value: match (v.binary_value(), v.string_value()) {
                                    (Some(b), _) => b.as_ref().to_vec(),
                                    (None, Some(s)) => s.as_bytes().to_vec(),
                                    _ => Vec::new(),
                                },
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                attributes.sort_by(|x, y| x.name.cmp(&y.name));
                let required = |v: Option<&str>, what: &str| {
                    v.filter(|v| !v.is_empty())
                        .map(str::to_owned)
                        .ok_or_else(|| {
                            invalid_answer(&format!("a received message without {what}"))
                        })
                };
                Ok(Received {
                    message_id: required(m.message_id(), "a MessageId")?,
                    receipt_handle: required(m.receipt_handle(), "a ReceiptHandle")?,
                    body: m.body().unwrap_or_default().to_owned(),
                    // SQS bodies are text.
                    body_bytes: None,
                    group_id: a(MessageSystemAttributeName::MessageGroupId).unwrap_or_default(),
                    dedup_id: a(MessageSystemAttributeName::MessageDeduplicationId),
                    sequence_number: a(MessageSystemAttributeName::SequenceNumber)
                        .unwrap_or_default(),
                    sent_timestamp: num(MessageSystemAttributeName::SentTimestamp),
                    first_receive_timestamp: num(
                        MessageSystemAttributeName::ApproximateFirstReceiveTimestamp,
                    ),
                    receive_count: num(MessageSystemAttributeName::ApproximateReceiveCount)
                        .min(u64::from(u32::MAX)) as u32,
                    attributes,
                })
            })
            .collect()
    }

    /// `DeleteMessage`.
    pub async fn delete(&self, receipt_handle: &str) -> Result<()> {
        self.client
            .delete_message()
            .queue_url(&self.url)
            .receipt_handle(receipt_handle)
            .send()
            .await
            .map_err(|e| error(e, &self.url))?;
        Ok(())
    }

    /// `DeleteMessageBatch`.
    pub async fn delete_batch(
        &self,
        entries: &[BatchEntry<'_, &str>],
    ) -> Result<Vec<BatchResult<()>>> {
        let list = entries
            .iter()
            .map(|e| {
                DeleteMessageBatchRequestEntry::builder()
                    .id(e.id)
                    .receipt_handle(e.entry)
                    .build()
                    .map_err(entry_error)
            })
            .collect::<Result<Vec<_>>>()?;
        let out = self
            .client
            .delete_message_batch()
            .queue_url(&self.url)
            .set_entries(Some(list))
            .send()
            .await
            .map_err(|e| error(e, &self.url))?;
        Ok(handle_results(entries.iter().map(|e| e.id), out.failed()))
    }

    /// `ChangeMessageVisibility`.
    pub async fn change_visibility(&self, receipt_handle: &str, timeout: Duration) -> Result<()> {
        self.client
            .change_message_visibility()
            .queue_url(&self.url)
            .receipt_handle(receipt_handle)
            .visibility_timeout(secs(timeout))
            .send()
            .await
            .map_err(|e| error(e, &self.url))?;
        Ok(())
    }

    /// `ChangeMessageVisibilityBatch`.
    pub async fn change_visibility_batch(
        &self,
        entries: &[BatchEntry<'_, (&str, Duration)>],
    ) -> Result<Vec<BatchResult<()>>> {
        let list = entries
            .iter()
            .map(|e| {
                ChangeMessageVisibilityBatchRequestEntry::builder()
                    .id(e.id)
                    .receipt_handle(e.entry.0)
                    .visibility_timeout(secs(e.entry.1))
                    .build()
                    .map_err(entry_error)
            })
            .collect::<Result<Vec<_>>>()?;
        let out = self
            .client
            .change_message_visibility_batch()
            .queue_url(&self.url)
            .set_entries(Some(list))
            .send()
            .await
            .map_err(|e| error(e, &self.url))?;
        Ok(handle_results(entries.iter().map(|e| e.id), out.failed()))
    }

    /// `PurgeQueue`.
    pub async fn purge(&self) -> Result<()> {
        self.client
            .purge_queue()
            .queue_url(&self.url)
            .send()
            .await
            .map_err(|e| error(e, &self.url))?;
        Ok(())
    }

    /// `GetQueueAttributes` with `All`, sorted by name.
    pub async fn attributes(&self) -> Result<Vec<(String, String)>> {
        let out = self
            .client
            .get_queue_attributes()
            .queue_url(&self.url)
            .attribute_names(QueueAttributeName::All)
            .send()
            .await
            .map_err(|e| error(e, &self.url))?;
        let mut v: Vec<(String, String)> = out
            .attributes()
            .map(|m| {
                m.iter()
                    .map(|(k, v)| (k.as_str().to_owned(), v.clone()))
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        Ok(v)
    }

    /// `SetQueueAttributes` of one attribute.
    pub async fn set_attribute(&self, name: &str, value: &str) -> Result<()> {
        self.client
            .set_queue_attributes()
            .queue_url(&self.url)
            .attributes(QueueAttributeName::from(name), value)
            .send()
            .await
            .map_err(|e| error(e, &self.url))?;
        Ok(())
    }
}

/// An SQS FIFO queue for blocking callers: [`AsyncSqsQueue`] on a small runtime of its own.
#[derive(Debug, Clone)]
pub struct SqsQueue {
    inner: AsyncSqsQueue,
    rt: Arc<tokio::runtime::Runtime>,
}

impl SqsQueue {
    /// The queue at `queue_url`, with a client from the environment (`endpoint` overriding
    /// the endpoint).
    pub fn open_url(queue_url: &str, endpoint: Option<&str>) -> Result<Self> {
        fifo_only(queue_url)?;
        let rt = Arc::new(runtime()?);
        let client = rt.block_on(AsyncSqsQueue::client_for(endpoint, Some(queue_url)))?;
        Ok(SqsQueue {
            inner: AsyncSqsQueue::new(client, queue_url),
            rt,
        })
    }

    /// The queue `name` (GetQueueUrl), with a client from the environment.
    pub fn open_name(name: &str, endpoint: Option<&str>) -> Result<Self> {
        fifo_only(name)?;
        let rt = Arc::new(runtime()?);
        let inner = rt.block_on(async {
            let client = AsyncSqsQueue::client_for(endpoint, None).await?;
            AsyncSqsQueue::open(client, name).await
        })?;
        Ok(SqsQueue { inner, rt })
    }

    /// The async API (for use inside a runtime).
    pub fn as_async(&self) -> &AsyncSqsQueue {
        &self.inner
    }

    fn block<T>(&self, f: impl std::future::Future<Output = T>) -> T {
        self.rt.block_on(f)
    }
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .map_err(Error::Io)
}

impl FifoQueue for SqsQueue {
    fn send(&self, msg: &SendMessage<'_>) -> Result<Sent> {
        self.block(self.inner.send(msg))
    }
    fn send_batch(
        &self,
        entries: &[BatchEntry<'_, SendMessage<'_>>],
    ) -> Result<Vec<BatchResult<Sent>>> {
        self.block(self.inner.send_batch(entries))
    }
    fn receive(&self, opts: &ReceiveOptions, attempt_id: Option<&str>) -> Result<Vec<Received>> {
        self.block(self.inner.receive(opts, attempt_id))
    }
    fn delete(&self, receipt_handle: &str) -> Result<()> {
        self.block(self.inner.delete(receipt_handle))
    }
    fn delete_batch(&self, entries: &[BatchEntry<'_, &str>]) -> Result<Vec<BatchResult<()>>> {
        self.block(self.inner.delete_batch(entries))
    }
    fn change_visibility(&self, receipt_handle: &str, timeout: Duration) -> Result<()> {
        self.block(self.inner.change_visibility(receipt_handle, timeout))
    }
    fn change_visibility_batch(
        &self,
        entries: &[BatchEntry<'_, (&str, Duration)>],
    ) -> Result<Vec<BatchResult<()>>> {
        self.block(self.inner.change_visibility_batch(entries))
    }
    fn purge(&self) -> Result<()> {
        self.block(self.inner.purge())
    }
    fn attributes(&self) -> Result<Vec<(String, String)>> {
        self.block(self.inner.attributes())
    }
    fn set_attribute(&self, name: &str, value: &str) -> Result<()> {
        self.block(self.inner.set_attribute(name, value))
    }
}

/// Opens a queue by URL: `shm:NAME` or a path (containing `/`, not a URL) is a local queue;
/// `http(s)://…/ACCOUNT/NAME.fifo` an SQS queue at that URL (its endpoint from
/// `AWS_ENDPOINT_URL`, or the URL's own host); `sqs://NAME.fifo` the SQS queue of that name
/// (GetQueueUrl, on the endpoint of the environment).
pub fn open_url(url: &str) -> Result<Box<dyn FifoQueue>> {
    if let Some(name) = url.strip_prefix("shm:") {
        let name = name.trim_start_matches("//");
        return Ok(Box::new(if name.contains('/') {
            Queue::open_at(name)?
        } else {
            Queue::open(name)?
        }));
    }
    if let Some(name) = url.strip_prefix("sqs://") {
        return Ok(Box::new(SqsQueue::open_name(
            name.trim_end_matches('/'),
            None,
        )?));
    }
    if url.starts_with("https://") || url.starts_with("http://") {
        let endpoint = std::env::var("AWS_ENDPOINT_URL").ok().or_else(|| {
            let rest = url.split_once("://")?.1;
            let host = rest.split('/').next()?;
            Some(format!("{}://{host}", &url[..url.find("://")?]))
        });
        return Ok(Box::new(SqsQueue::open_url(url, endpoint.as_deref())?));
    }
    if url.contains('/') {
        return Ok(Box::new(Queue::open_at(url)?));
    }
    Ok(Box::new(Queue::open(url)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Durations go to SQS in whole seconds rounded up: a sub-second visibility timeout is
    /// never 0 (visible again at once, to another consumer), a sub-second wait never a short
    /// poll; whole seconds unchanged; the largest clamped.
    #[test]
    fn durations_round_up_to_whole_seconds() {
        let ms = Duration::from_millis;
        assert_eq!(secs(Duration::ZERO), 0);
        assert_eq!(secs(ms(1)), 1);
        assert_eq!(secs(ms(900)), 1);
        assert_eq!(secs(ms(1000)), 1);
        assert_eq!(secs(ms(1500)), 2);
        assert_eq!(secs(Duration::from_secs(43_200)), 43_200);
        assert_eq!(secs(Duration::MAX), i32::MAX);
    }

    /// Only a FIFO queue's name (`….fifo`) or URL is opened: a standard queue would refuse
    /// every message's group and deduplication ids.
    #[test]
    fn only_fifo_queues_are_opened() {
        for ok in [
            "orders.fifo",
            "https://sqs.us-east-1.amazonaws.com/123456789012/orders.fifo",
            "http://127.0.0.1:9324/000000000000/orders.fifo/",
            "http://localhost:4566/000000000000/a.fifo?x=1",
        ] {
            assert!(fifo_only(ok).is_ok(), "{ok}");
        }
        for bad in [
            "orders",
            ".fifo",
            "",
            "https://sqs.us-east-1.amazonaws.com/123456789012/orders",
            "https://sqs.us-east-1.amazonaws.com/123456789012/orders.fifo/x",
            "http://host/orders.fifox",
        ] {
            assert!(
                matches!(fifo_only(bad), Err(Error::InvalidQueueName { .. })),
                "{bad}"
            );
        }
        assert!(matches!(
            SqsQueue::open_url(
                "https://sqs.us-east-1.amazonaws.com/123456789012/orders",
                None
            ),
            Err(Error::InvalidQueueName { .. })
        ));
    }

    /// A body given as bytes that is not UTF-8 (a binary queue's) is refused before any
    /// request: it was sent as `body`, which is empty for such a message.
    #[test]
    fn a_binary_body_is_refused_not_sent_empty() {
        let mut m = SendMessage::new("g", "");
        m.bytes = Some(&[0xff, 0xfe, b'x']);
        assert!(matches!(
            text_body(&m),
            Err(Error::InvalidMessageContents { .. })
        ));
        m.bytes = Some(b"plain");
        assert_eq!(text_body(&m).unwrap(), "plain");
        assert_eq!(text_body(&SendMessage::new("g", "text")).unwrap(), "text");
    }

    /// A client for an SQS URL signs in the region the URL names, whatever AWS_REGION says
    /// (SQS refuses a request signed for another region); a local endpoint's, the
    /// environment's.
    #[test]
    fn a_client_for_a_queue_url_takes_its_region() {
        std::env::set_var("AWS_REGION", "us-east-1");
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let region = |url: &str| {
            let c = rt
                .block_on(AsyncSqsQueue::client_for(
                    Some("http://127.0.0.1:1"),
                    Some(url),
                ))
                .unwrap();
            c.config().region().map(ToString::to_string)
        };
        let eu = "https://sqs.eu-west-1.amazonaws.com/123456789012/o.fifo";
        assert_eq!(region(eu).as_deref(), Some("eu-west-1"));
        let local = "http://127.0.0.1:9324/000000000000/o.fifo";
        assert_eq!(region(local).as_deref(), Some("us-east-1"));
    }

    /// The region an SQS URL names, for a client whose environment has none.
    #[test]
    fn a_queue_url_names_its_region() {
        for (url, region) in [
            (
                "https://sqs.eu-west-1.amazonaws.com/123456789012/o.fifo",
                Some("eu-west-1"),
            ),
            (
                "https://sqs.cn-north-1.amazonaws.com.cn/1/o.fifo",
                Some("cn-north-1"),
            ),
            (
                "https://us-east-2.queue.amazonaws.com/1/o.fifo",
                Some("us-east-2"),
            ),
            ("http://127.0.0.1:9324/000000000000/o.fifo", None),
            ("https://sqs.EVIL!.amazonaws.com/1/o.fifo", None),
            ("https://sqs.amazonaws.com/1/o.fifo", None),
        ] {
            assert_eq!(region_of_url(url).as_deref(), region, "{url}");
        }
    }
}
