//! The SQS actions on a directory of queue files, each from the JSON protocol's parameters to
//! its answer.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use serde_json::{json, Map, Value};
use shmfifo::{
    AsyncQueue, BatchEntry, Message, MessageAttribute, Queue, QueueConfig, ReceiveOptions,
    RedriveOptions, SendMessage, LOCAL_ARN_PREFIX,
};

use crate::digest::{md5_hex, md5_of_attributes};
use crate::protocol::ApiError;

type Res = Result<Map<String, Value>, ApiError>;

/// The queues a server serves: files in one directory, opened once and kept.
#[derive(Debug)]
pub struct Queues {
    dir: PathBuf,
    /// `http://HOST:PORT/ACCOUNT/`: the prefix of every queue URL.
    url_prefix: String,
    open: Mutex<HashMap<String, AsyncQueue>>,
    tasks: Mutex<Vec<MoveTask>>,
    next_task: AtomicU64,
}

/// A dead-letter move task (StartMessageMoveTask).
#[derive(Debug)]
struct MoveTask {
    handle: String,
    source_arn: String,
    destination_arn: Option<String>,
    max_per_second: Option<u32>,
    started_ms: u64,
    to_move: u64,
    cancel: Arc<AtomicBool>,
    state: Arc<Mutex<TaskState>>,
}

#[derive(Debug, Clone)]
enum TaskState {
    Running,
    Done { moved: u64, cancelled: bool },
    Failed(String),
}

/// The account id in queue URLs and ARNs.
pub const ACCOUNT: &str = "000000000000";

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

fn str_param<'a>(p: &'a Map<String, Value>, name: &str) -> Result<Option<&'a str>, ApiError> {
    match p.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(ApiError::invalid(name, "must be a string")),
    }
}

fn required<'a>(p: &'a Map<String, Value>, name: &str) -> Result<&'a str, ApiError> {
    str_param(p, name)?.ok_or_else(|| ApiError::missing(name))
}

fn int_param(p: &Map<String, Value>, name: &str) -> Result<Option<i64>, ApiError> {
    match p.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_i64()
            .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
            .map(Some)
            .ok_or_else(|| {
                ApiError::sender(
                    "InvalidParameterValue",
                    format!(
                        "Value {v} for parameter {name} is invalid. Reason: must be an integer."
                    ),
                )
            }),
    }
}

fn seconds(p: &Map<String, Value>, name: &str) -> Result<Option<Duration>, ApiError> {
    match int_param(p, name)? {
        None => Ok(None),
        Some(n) if n < 0 => Err(ApiError::sender(
            "InvalidParameterValue",
            format!("Value {n} for parameter {name} is invalid. Reason: must not be negative."),
        )),
        Some(n) => Ok(Some(Duration::from_secs(n as u64))),
    }
}

fn names(p: &Map<String, Value>, name: &str) -> Vec<String> {
    match p.get(name) {
        Some(Value::Array(v)) => v
            .iter()
            .filter_map(|x| x.as_str().map(str::to_owned))
            .collect(),
        Some(Value::String(s)) => vec![s.clone()],
        _ => Vec::new(),
    }
}

fn wanted(names: &[String], name: &str) -> bool {
    names.iter().any(|n| {
        n == "All"
            || n == ".*"
            || n == name
            || (n.ends_with(".*") && name.starts_with(&n[..n.len() - 1]))
    })
}

/// Message attributes of a request: `(name, data type, value bytes)`.
fn attributes_in(p: &Map<String, Value>) -> Result<Vec<(String, String, Vec<u8>)>, ApiError> {
    let mut out = Vec::new();
    let Some(Value::Object(m)) = p.get("MessageAttributes") else {
        return Ok(out);
    };
    for (name, a) in m {
        let t = a
            .get("DataType")
            .and_then(Value::as_str)
            .filter(|t| !t.is_empty())
            .ok_or_else(|| {
                ApiError::invalid(
                    "MessageAttributes",
                    &format!("The message attribute '{name}' must contain a non-empty message attribute type."),
                )
            })?;
        let v = if let Some(b) = a.get("BinaryValue").and_then(Value::as_str) {
            base64::engine::general_purpose::STANDARD
                .decode(b)
                .map_err(|_| {
                    ApiError::invalid(
                        "MessageAttributes",
                        &format!(
                            "The message attribute '{name}' has a BinaryValue that is not base64."
                        ),
                    )
                })?
        } else if let Some(s) = a.get("StringValue").and_then(Value::as_str) {
            s.as_bytes().to_vec()
        } else {
            return Err(ApiError::invalid(
                "MessageAttributes",
                &format!("The message attribute '{name}' must contain a non-empty message attribute value."),
            ));
        };
        out.push((name.clone(), t.to_owned(), v));
    }
    Ok(out)
}

/// Owned attributes as the digest takes them.
fn triples(a: &[(String, String, Vec<u8>)]) -> impl Iterator<Item = (&str, &str, &[u8])> {
    a.iter()
        .map(|(n, t, v)| (n.as_str(), t.as_str(), v.as_slice()))
}

fn meta_attrs(a: &[(String, String, Vec<u8>)]) -> Vec<MessageAttribute<'_>> {
    a.iter()
        .map(|(n, t, v)| MessageAttribute {
            name: n,
            data_type: t,
            value: v,
        })
        .collect()
}

/// Checks a FIFO queue name (Q1): 1–80 characters of `[A-Za-z0-9_-]` ending in `.fifo`.
fn valid_name(name: &str) -> bool {
    name.len() <= 80
        && name.len() > 5
        && name.ends_with(".fifo")
        && name[..name.len() - 5]
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

impl Queues {
    /// Queues in `dir`, reached at `http://{host}/{ACCOUNT}/NAME`.
    pub fn new(dir: PathBuf, host: &str) -> Self {
        Queues {
            dir,
            url_prefix: format!("http://{host}/{ACCOUNT}/"),
            open: Mutex::new(HashMap::new()),
            tasks: Mutex::new(Vec::new()),
            next_task: AtomicU64::new(1),
        }
    }

    fn url(&self, name: &str) -> String {
        format!("{}{name}", self.url_prefix)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// The queue name of a queue URL (any host: clients say localhost or 127.0.0.1), or of the
    /// request path of a query-protocol request without a `QueueUrl`.
    fn name_of(&self, url: &str) -> Result<String, ApiError> {
        let name = url.trim_end_matches('/').rsplit('/').next().unwrap_or("");
        if name.is_empty() || name == "." || name == ".." || name.contains('\\') {
            return Err(ApiError::sender(
                "InvalidAddress",
                format!("The address {url} is not valid for this endpoint."),
            ));
        }
        Ok(name.to_owned())
    }

    fn queue_by_name(&self, name: &str) -> Result<AsyncQueue, ApiError> {
        if let Some(q) = self.open.lock().expect("queue table").get(name) {
            return Ok(q.clone());
        }
        let q = AsyncQueue::new(Queue::open_at(self.path(name))?);
        Ok(self
            .open
            .lock()
            .expect("queue table")
            .entry(name.to_owned())
            .or_insert(q)
            .clone())
    }

    fn queue(&self, p: &Map<String, Value>) -> Result<(String, AsyncQueue), ApiError> {
        let name = self.name_of(required(p, "QueueUrl")?)?;
        let q = self.queue_by_name(&name)?;
        Ok((name, q))
    }

    /// A RedrivePolicy with its target (an ARN, a name) made a path in our directory.
    fn local_policy(&self, value: &str) -> String {
        let Ok(mut v) = serde_json::from_str::<Value>(value) else {
            return value.to_owned(); // the library reports what is wrong
        };
        if let Some(t) = v.get("deadLetterTargetArn").and_then(Value::as_str) {
            if !t.contains('/') {
                let name = t.rsplit(':').next().unwrap_or(t);
                let p = self.path(name).display().to_string();
                v["deadLetterTargetArn"] = Value::String(p);
            }
        }
        v.to_string()
    }

    /// A RedrivePolicy as SQS shows it: the target a local ARN.
    fn sqs_policy(&self, value: &str) -> String {
        let Ok(mut v) = serde_json::from_str::<Value>(value) else {
            return value.to_owned();
        };
        if let Some(t) = v.get("deadLetterTargetArn").and_then(Value::as_str) {
            let name = Path::new(t.rsplit(':').next().unwrap_or(t))
                .file_name()
                .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
            v["deadLetterTargetArn"] = Value::String(format!("{LOCAL_ARN_PREFIX}{name}"));
        }
        v.to_string()
    }

    fn attributes_of(&self, name: &str, q: &Queue) -> Map<String, Value> {
        let mut m = Map::new();
        for (k, v) in q.attributes().sqs_attributes() {
            let v = if k == "RedrivePolicy" {
                self.sqs_policy(&v)
            } else {
                v
            };
            m.insert(k.to_owned(), Value::String(v));
        }
        m.insert(
            "QueueArn".into(),
            Value::String(format!("{LOCAL_ARN_PREFIX}{name}")),
        );
        m
    }

    /// Runs one action.
    pub async fn run(&self, action: &str, p: &Map<String, Value>) -> Res {
        match action {
            "CreateQueue" => self.create_queue(p),
            "GetQueueUrl" => {
                let name = required(p, "QueueName")?;
                if !valid_name(name) {
                    return Err(ApiError::sender(
                        "AWS.SimpleQueueService.NonExistentQueue",
                        "The specified queue does not exist.",
                    ));
                }
                self.queue_by_name(name)?;
                Ok(obj(json!({"QueueUrl": self.url(name)})))
            }
            "ListQueues" => self.list_queues(p),
            "DeleteQueue" => {
                let name = self.name_of(required(p, "QueueUrl")?)?;
                self.open.lock().expect("queue table").remove(&name);
                Queue::unlink_at(self.path(&name))?;
                Ok(Map::new())
            }
            "GetQueueAttributes" => {
                let (name, q) = self.queue(p)?;
                let all = self.attributes_of(&name, q.queue());
                let wanted_names = names(p, "AttributeNames");
                for n in &wanted_names {
                    if !QUEUE_ATTRIBUTES.contains(&n.as_str()) {
                        return Err(ApiError::sender(
                            "InvalidAttributeName",
                            format!("Unknown Attribute {n}."),
                        ));
                    }
                }
                let attrs: Map<String, Value> = all
                    .into_iter()
                    .filter(|(k, _)| wanted_names.iter().any(|n| n == "All" || n == k))
                    .collect();
                let mut out = Map::new();
                if !attrs.is_empty() {
                    out.insert("Attributes".into(), Value::Object(attrs));
                }
                Ok(out)
            }
            "SetQueueAttributes" => {
                let (_, q) = self.queue(p)?;
                let Some(Value::Object(attrs)) = p.get("Attributes") else {
                    return Err(ApiError::missing("Attributes"));
                };
                for (k, v) in attrs {
                    let v = v.as_str().map_or_else(|| v.to_string(), str::to_owned);
                    let v = if k == "RedrivePolicy" && !v.is_empty() {
                        self.local_policy(&v)
                    } else {
                        v
                    };
                    q.queue().set_attribute(k, &v)?;
                }
                Ok(Map::new())
            }
            "PurgeQueue" => {
                let (_, q) = self.queue(p)?;
                q.queue().purge()?;
                Ok(Map::new())
            }
            "SendMessage" => self.send_message(p),
            "SendMessageBatch" => self.send_message_batch(p),
            "ReceiveMessage" => self.receive_message(p).await,
            "DeleteMessage" => {
                let (_, q) = self.queue(p)?;
                q.queue().delete_str(required(p, "ReceiptHandle")?)?;
                Ok(Map::new())
            }
            "DeleteMessageBatch" => {
                let (_, q) = self.queue(p)?;
                let entries = entries(p)?;
                let mut list = Vec::new();
                for e in &entries {
                    list.push((
                        str_param(e, "Id")?.unwrap_or(""),
                        str_param(e, "ReceiptHandle")?.unwrap_or(""),
                    ));
                }
                let batch: Vec<BatchEntry<'_, &str>> = list
                    .iter()
                    .map(|(id, h)| BatchEntry { id, entry: *h })
                    .collect();
                let r = q.queue().delete_batch(&batch)?;
                Ok(batch_out(
                    r.into_iter().map(|r| (r.id, r.result.map(|()| Map::new()))),
                ))
            }
            "ChangeMessageVisibility" => {
                let (_, q) = self.queue(p)?;
                let vt = seconds(p, "VisibilityTimeout")?
                    .ok_or_else(|| ApiError::missing("VisibilityTimeout"))?;
                q.queue()
                    .change_visibility_str(required(p, "ReceiptHandle")?, vt)?;
                Ok(Map::new())
            }
            "ChangeMessageVisibilityBatch" => {
                let (_, q) = self.queue(p)?;
                let entries = entries(p)?;
                let mut list = Vec::new();
                for e in &entries {
                    list.push((
                        str_param(e, "Id")?.unwrap_or(""),
                        str_param(e, "ReceiptHandle")?.unwrap_or(""),
                        seconds(e, "VisibilityTimeout")?.unwrap_or(Duration::ZERO),
                    ));
                }
                let batch: Vec<BatchEntry<'_, (&str, Duration)>> = list
                    .iter()
                    .map(|(id, h, t)| BatchEntry {
                        id,
                        entry: (*h, *t),
                    })
                    .collect();
                let r = q.queue().change_visibility_batch(&batch)?;
                Ok(batch_out(
                    r.into_iter().map(|r| (r.id, r.result.map(|()| Map::new()))),
                ))
            }
            "StartMessageMoveTask" => self.start_move(p),
            "ListMessageMoveTasks" => self.list_moves(p),
            "CancelMessageMoveTask" => self.cancel_move(p),
            "TagQueue"
            | "UntagQueue"
            | "ListQueueTags"
            | "AddPermission"
            | "RemovePermission"
            | "ListDeadLetterSourceQueues" => Err(ApiError::sender(
                "AWS.SimpleQueueService.UnsupportedOperation",
                format!("{action} is not supported by shmfifo serve."),
            )),
            other => Err(ApiError::sender(
                "InvalidAction",
                format!("The action {other} is not valid for this endpoint."),
            )),
        }
    }

    fn create_queue(&self, p: &Map<String, Value>) -> Res {
        let name = required(p, "QueueName")?;
        let mut attrs: Vec<(String, String)> = Vec::new();
        if let Some(Value::Object(m)) = p.get("Attributes") {
            for (k, v) in m {
                let v = v.as_str().map_or_else(|| v.to_string(), str::to_owned);
                let v = if k == "RedrivePolicy" {
                    self.local_policy(&v)
                } else {
                    v
                };
                attrs.push((k.clone(), v));
            }
        }
        let fifo = attrs.iter().any(|(k, v)| k == "FifoQueue" && v == "true");
        if !valid_name(name) || !fifo {
            return Err(ApiError::sender(
                "InvalidParameterValue",
                "The name of a FIFO queue can only include alphanumeric characters, hyphens, or underscores, must end with .fifo suffix and be 1 to 80 in length; FifoQueue must be true (shmfifo serves FIFO queues only).",
            ));
        }
        let cfg = QueueConfig::new()
            .from_sqs_attributes(attrs.iter().map(|(k, v)| (k.as_str(), v.as_str())))?;
        match Queue::create_at(self.path(name), &cfg) {
            Ok(q) => {
                self.open
                    .lock()
                    .expect("queue table")
                    .insert(name.to_owned(), AsyncQueue::new(q));
            }
            Err(shmfifo::Error::QueueNameExists { .. }) => {
                // Q7: the same attributes again is success; others are QueueAlreadyExists.
                let q = self.queue_by_name(name)?;
                let have = self.attributes_of(name, q.queue());
                let mut differ = Vec::new();
                for (k, v) in &attrs {
                    let same = match k.as_str() {
                        "RedrivePolicy" => have
                            .get(k)
                            .and_then(Value::as_str)
                            .is_some_and(|h| policy_key(h) == policy_key(&self.sqs_policy(v))),
                        _ => have.get(k).and_then(Value::as_str) == Some(v.as_str()),
                    };
                    if !same {
                        differ.push(k.as_str());
                    }
                }
                if !differ.is_empty() {
                    return Err(ApiError::sender(
                        "QueueAlreadyExists",
                        format!(
                            "A queue already exists with the same name and a different value for attribute(s) {}",
                            differ.join(", ")
                        ),
                    ));
                }
            }
            Err(e) => return Err(e.into()),
        }
        Ok(obj(json!({"QueueUrl": self.url(name)})))
    }

    fn list_queues(&self, p: &Map<String, Value>) -> Res {
        let prefix = str_param(p, "QueueNamePrefix")?.unwrap_or("");
        let max = int_param(p, "MaxResults")?;
        if max.is_some_and(|m| !(1..=1000).contains(&m)) {
            return Err(ApiError::invalid(
                "MaxResults",
                "must be between 1 and 1000",
            ));
        }
        let after = str_param(p, "NextToken")?.unwrap_or("");
        let mut names: Vec<String> = std::fs::read_dir(&self.dir)
            .map_err(|e| ApiError::from(shmfifo::Error::Io(e)))?
            .filter_map(|e| e.ok())
            .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| valid_name(n) && n.starts_with(prefix) && n.as_str() > after)
            .collect();
        names.sort();
        let mut out = Map::new();
        if let Some(m) = max {
            if names.len() > m as usize {
                names.truncate(m as usize);
                out.insert(
                    "NextToken".into(),
                    Value::String(names[names.len() - 1].clone()),
                );
            }
        }
        if !names.is_empty() {
            out.insert(
                "QueueUrls".into(),
                Value::Array(names.iter().map(|n| Value::String(self.url(n))).collect()),
            );
        }
        Ok(out)
    }

    fn send_message(&self, p: &Map<String, Value>) -> Res {
        let (_, q) = self.queue(p)?;
        let body = required(p, "MessageBody")?;
        let attrs = attributes_in(p)?;
        let a = meta_attrs(&attrs);
        let delay = int_param(p, "DelaySeconds")?;
        let msg = SendMessage {
            group_id: str_param(p, "MessageGroupId")?,
            dedup_id: str_param(p, "MessageDeduplicationId")?,
            body,
            bytes: None,
            attributes: &a,
            delay_seconds: delay.map(|d| d.clamp(0, i64::from(u32::MAX)) as u32),
        };
        let r = q.queue().send(&msg)?;
        let mut out = obj(json!({
            "MD5OfMessageBody": md5_hex(body.as_bytes()),
            "MessageId": r.message_id.to_string(),
            "SequenceNumber": r.sequence_number.to_string(),
        }));
        if !attrs.is_empty() {
            out.insert(
                "MD5OfMessageAttributes".into(),
                md5_of_attributes(triples(&attrs)).into(),
            );
        }
        Ok(out)
    }

    fn send_message_batch(&self, p: &Map<String, Value>) -> Res {
        let (_, q) = self.queue(p)?;
        let entries = entries(p)?;
        struct Entry<'a> {
            id: &'a str,
            group: Option<&'a str>,
            dedup: Option<&'a str>,
            body: &'a str,
            delay: Option<u32>,
            attrs: Vec<(String, String, Vec<u8>)>,
        }
        let mut list = Vec::new();
        for e in &entries {
            list.push(Entry {
                id: str_param(e, "Id")?.unwrap_or(""),
                group: str_param(e, "MessageGroupId")?,
                dedup: str_param(e, "MessageDeduplicationId")?,
                body: str_param(e, "MessageBody")?.unwrap_or(""),
                delay: int_param(e, "DelaySeconds")?
                    .map(|d| d.clamp(0, i64::from(u32::MAX)) as u32),
                attrs: attributes_in(e)?,
            });
        }
        let metas: Vec<Vec<MessageAttribute<'_>>> =
            list.iter().map(|e| meta_attrs(&e.attrs)).collect();
        let batch: Vec<BatchEntry<'_, SendMessage<'_>>> = list
            .iter()
            .zip(&metas)
            .map(|(e, a)| BatchEntry {
                id: e.id,
                entry: SendMessage {
                    group_id: e.group,
                    dedup_id: e.dedup,
                    body: e.body,
                    bytes: None,
                    attributes: a,
                    delay_seconds: e.delay,
                },
            })
            .collect();
        let results = q.queue().send_batch(&batch)?;
        let by_id: HashMap<&str, &Entry<'_>> = list.iter().map(|e| (e.id, e)).collect();
        Ok(batch_out(results.into_iter().map(|r| {
            let e = by_id.get(r.id.as_str()).copied();
            let ok = r.result.map(|s| {
                let mut m = obj(json!({
                    "MessageId": s.message_id.to_string(),
                    "MD5OfMessageBody": md5_hex(e.map_or("", |e| e.body).as_bytes()),
                    "SequenceNumber": s.sequence_number.to_string(),
                }));
                if let Some(e) = e.filter(|e| !e.attrs.is_empty()) {
                    m.insert(
                        "MD5OfMessageAttributes".into(),
                        md5_of_attributes(triples(&e.attrs)).into(),
                    );
                }
                m
            });
            (r.id, ok)
        })))
    }

    async fn receive_message(&self, p: &Map<String, Value>) -> Res {
        let (_, q) = self.queue(p)?;
        let max = int_param(p, "MaxNumberOfMessages")?.unwrap_or(1);
        if !(1..=10).contains(&max) {
            return Err(ApiError::sender(
                "InvalidParameterValue",
                format!("Value {max} for parameter MaxNumberOfMessages is invalid. Reason: Must be between 1 and 10, if provided."),
            ));
        }
        let mut opts = ReceiveOptions::max(max as u32);
        if let Some(v) = seconds(p, "VisibilityTimeout")? {
            opts = opts.visibility_timeout(v);
        }
        if let Some(w) = seconds(p, "WaitTimeSeconds")? {
            opts = opts.wait(w);
        }
        opts.check()?;
        let got = match str_param(p, "ReceiveRequestAttemptId")? {
            // A receive with an attempt id waits on a blocking thread (rare; the attempt
            // record is made by the same call that takes the messages).
            Some(id) => {
                let (q, id) = (q.queue().clone(), id.to_owned());
                tokio::task::spawn_blocking(move || q.receive_with_attempt_id(&opts, &id))
                    .await
                    .map_err(|e| ApiError {
                        code: "InternalError".into(),
                        message: e.to_string(),
                        sender: false,
                        status: 500,
                    })??
            }
            None => q.receive(&opts).await?,
        };
        let mut system = names(p, "AttributeNames");
        system.extend(names(p, "MessageSystemAttributeNames"));
        let wanted_attrs = names(p, "MessageAttributeNames");
        let msgs: Vec<Value> = got
            .iter()
            .map(|m| Value::Object(message_out(m, &system, &wanted_attrs)))
            .collect();
        let mut out = Map::new();
        if !msgs.is_empty() {
            out.insert("Messages".into(), Value::Array(msgs));
        }
        Ok(out)
    }

    fn start_move(&self, p: &Map<String, Value>) -> Res {
        let source_arn = required(p, "SourceArn")?.to_owned();
        let name = self.name_of(&source_arn.replace(':', "/"))?;
        let dlq = self.queue_by_name(&name).map_err(|_| {
            ApiError::sender(
                "ResourceNotFoundException",
                format!("The resource {source_arn} does not exist."),
            )
        })?;
        let destination_arn = str_param(p, "DestinationArn")?.map(str::to_owned);
        let destination = match &destination_arn {
            Some(a) => {
                let d = self.name_of(&a.replace(':', "/"))?;
                Some(self.path(&d).display().to_string())
            }
            None => None,
        };
        let max_per_second = int_param(p, "MaxNumberOfMessagesPerSecond")?
            .map(|n| {
                if (1..=500).contains(&n) {
                    Ok(n as u32)
                } else {
                    Err(ApiError::invalid(
                        "MaxNumberOfMessagesPerSecond",
                        "must be between 1 and 500",
                    ))
                }
            })
            .transpose()?;
        {
            let tasks = self.tasks.lock().expect("tasks");
            if tasks.iter().any(|t| {
                t.source_arn == source_arn
                    && matches!(*t.state.lock().expect("task"), TaskState::Running)
            }) {
                return Err(ApiError::sender(
                    "AWS.SimpleQueueService.UnsupportedOperation",
                    "A message move task is already running on this source.",
                ));
            }
        }
        let handle = format!(
            "shmfifo-move-{}-{}",
            std::process::id(),
            // Relaxed: a unique number only; it orders nothing.
            self.next_task.fetch_add(1, Ordering::Relaxed)
        );
        let cancel = Arc::new(AtomicBool::new(false));
        let state = Arc::new(Mutex::new(TaskState::Running));
        let to_move = dlq.queue().attributes().approximate_number_of_messages;
        let opts = RedriveOptions {
            destination,
            max_per_second,
            limit: None,
            cancel: Some(Arc::clone(&cancel)),
        };
        let (q, st) = (dlq.queue().clone(), Arc::clone(&state));
        tokio::task::spawn_blocking(move || {
            let r = q.redrive(&opts);
            *st.lock().expect("task") = match r {
                Ok(r) => TaskState::Done {
                    moved: r.moved,
                    cancelled: r.cancelled,
                },
                Err(e) => TaskState::Failed(e.to_string()),
            };
        });
        self.tasks.lock().expect("tasks").push(MoveTask {
            handle: handle.clone(),
            source_arn,
            destination_arn,
            max_per_second,
            started_ms: now_ms(),
            to_move,
            cancel,
            state,
        });
        Ok(obj(json!({"TaskHandle": handle})))
    }

    fn list_moves(&self, p: &Map<String, Value>) -> Res {
        let source_arn = required(p, "SourceArn")?;
        let max = int_param(p, "MaxResults")?.unwrap_or(1).clamp(1, 10) as usize;
        let tasks = self.tasks.lock().expect("tasks");
        let results: Vec<Value> = tasks
            .iter()
            .rev()
            .filter(|t| t.source_arn == source_arn)
            .take(max)
            .map(|t| {
                let mut m = obj(json!({
                    "SourceArn": t.source_arn,
                    "StartedTimestamp": t.started_ms,
                    "ApproximateNumberOfMessagesToMove": t.to_move,
                }));
                if let Some(d) = &t.destination_arn {
                    m.insert("DestinationArn".into(), d.clone().into());
                }
                if let Some(r) = t.max_per_second {
                    m.insert("MaxNumberOfMessagesPerSecond".into(), r.into());
                }
                let (status, moved) = match &*t.state.lock().expect("task") {
                    TaskState::Running => {
                        m.insert("TaskHandle".into(), t.handle.clone().into());
                        ("RUNNING", 0)
                    }
                    TaskState::Done {
                        moved,
                        cancelled: true,
                    } => ("CANCELLED", *moved),
                    TaskState::Done { moved, .. } => ("COMPLETED", *moved),
                    TaskState::Failed(why) => {
                        m.insert("FailureReason".into(), why.clone().into());
                        ("FAILED", 0)
                    }
                };
                m.insert("Status".into(), status.into());
                m.insert("ApproximateNumberOfMessagesMoved".into(), moved.into());
                Value::Object(m)
            })
            .collect();
        Ok(obj(json!({ "Results": results })))
    }

    fn cancel_move(&self, p: &Map<String, Value>) -> Res {
        let handle = required(p, "TaskHandle")?;
        let tasks = self.tasks.lock().expect("tasks");
        let t = tasks
            .iter()
            .find(|t| {
                t.handle == handle && matches!(*t.state.lock().expect("task"), TaskState::Running)
            })
            .ok_or_else(|| {
                ApiError::sender(
                    "ResourceNotFoundException",
                    format!("No running task {handle}."),
                )
            })?;
        // Relaxed: a stop request the redrive polls between messages; it publishes nothing.
        t.cancel.store(true, Ordering::Relaxed);
        Ok(obj(json!({"ApproximateNumberOfMessagesMoved": 0})))
    }
}

/// Every name GetQueueAttributes knows; those shmfifo has no value for are not returned.
const QUEUE_ATTRIBUTES: [&str; 22] = [
    "All",
    "Policy",
    "VisibilityTimeout",
    "MaximumMessageSize",
    "MessageRetentionPeriod",
    "ApproximateNumberOfMessages",
    "ApproximateNumberOfMessagesNotVisible",
    "CreatedTimestamp",
    "LastModifiedTimestamp",
    "QueueArn",
    "ApproximateNumberOfMessagesDelayed",
    "DelaySeconds",
    "ReceiveMessageWaitTimeSeconds",
    "RedrivePolicy",
    "FifoQueue",
    "ContentBasedDeduplication",
    "KmsMasterKeyId",
    "KmsDataKeyReusePeriodSeconds",
    "DeduplicationScope",
    "FifoThroughputLimit",
    "RedriveAllowPolicy",
    "SqsManagedSseEnabled",
];

fn policy_key(json: &str) -> Option<(String, u64)> {
    let v: Value = serde_json::from_str(json).ok()?;
    let t = v.get("deadLetterTargetArn")?.as_str()?.to_owned();
    let c = v.get("maxReceiveCount")?;
    let c = c
        .as_u64()
        .or_else(|| c.as_str().and_then(|s| s.parse().ok()))?;
    Some((t, c))
}

fn obj(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

/// A batch request's `Entries` (request-level errors as SQS gives them: S12).
fn entries(p: &Map<String, Value>) -> Result<Vec<Map<String, Value>>, ApiError> {
    let list = match p.get("Entries") {
        Some(Value::Array(v)) => v,
        None | Some(Value::Null) => {
            return Err(ApiError::sender(
                "AWS.SimpleQueueService.EmptyBatchRequest",
                "There should be at least one SendMessageBatchRequestEntry in the request.",
            ))
        }
        Some(_) => return Err(ApiError::invalid("Entries", "must be a list")),
    };
    list.iter()
        .map(|e| match e {
            Value::Object(m) => Ok(m.clone()),
            _ => Err(ApiError::invalid(
                "Entries",
                "each entry must be a structure",
            )),
        })
        .collect()
}

/// A batch answer: `Successful` and `Failed`.
fn batch_out(
    results: impl Iterator<Item = (String, Result<Map<String, Value>, shmfifo::Error>)>,
) -> Map<String, Value> {
    let (mut ok, mut failed) = (Vec::new(), Vec::new());
    for (id, r) in results {
        match r {
            Ok(mut m) => {
                m.insert("Id".into(), Value::String(id));
                ok.push(Value::Object(m));
            }
            Err(e) => {
                let a = ApiError::from(e);
                failed.push(json!({
                    "Id": id,
                    "SenderFault": a.sender,
                    "Code": a.code,
                    "Message": a.message,
                }));
            }
        }
    }
    obj(json!({"Successful": ok, "Failed": failed}))
}

fn message_out(m: &Message, system: &[String], wanted_attrs: &[String]) -> Map<String, Value> {
    let mut out = obj(json!({
        "MessageId": m.message_id.to_string(),
        "ReceiptHandle": m.receipt_handle.to_string(),
        "MD5OfBody": md5_hex(m.body.as_bytes()),
        "Body": m.body,
    }));
    let mut a = Map::new();
    let mut put = |k: &str, v: String| {
        if wanted(system, k) {
            a.insert(k.to_owned(), Value::String(v));
        }
    };
    put("SentTimestamp", m.sent_timestamp.to_string());
    put("ApproximateReceiveCount", m.receive_count.to_string());
    put(
        "ApproximateFirstReceiveTimestamp",
        m.first_receive_timestamp.to_string(),
    );
    put("SequenceNumber", m.sequence_number.to_string());
    put("MessageGroupId", m.group_id.clone());
    if let Some(d) = &m.dedup_id {
        put("MessageDeduplicationId", d.clone());
    }
    if let Some(src) = &m.dead_letter_source {
        let name = Path::new(src)
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        put(
            "DeadLetterQueueSourceArn",
            format!("{LOCAL_ARN_PREFIX}{name}"),
        );
    }
    if !a.is_empty() {
        out.insert("Attributes".into(), Value::Object(a));
    }
    let mut ma = Map::new();
    let mut md5_in = Vec::new();
    for at in &m.attributes {
        if !wanted(wanted_attrs, &at.name) {
            continue;
        }
        let v = if at.data_type.starts_with("Binary") {
            json!({"BinaryValue": base64::engine::general_purpose::STANDARD.encode(&at.value), "DataType": at.data_type})
        } else {
            json!({"StringValue": String::from_utf8_lossy(&at.value), "DataType": at.data_type})
        };
        ma.insert(at.name.clone(), v);
        md5_in.push((at.name.clone(), at.data_type.clone(), at.value.clone()));
    }
    if !ma.is_empty() {
        out.insert("MessageAttributes".into(), Value::Object(ma));
        out.insert(
            "MD5OfMessageAttributes".into(),
            md5_of_attributes(triples(&md5_in)).into(),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifo_names() {
        assert!(valid_name("orders.fifo") && valid_name("a-b_c.fifo"));
        assert!(!valid_name(".fifo") && !valid_name("orders") && !valid_name("a b.fifo"));
        assert!(!valid_name(&format!("{}.fifo", "x".repeat(76))));
    }
}
