//! The SQS actions on a directory of queue files, each from the JSON protocol's parameters to
//! its answer.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use serde_json::{json, Map, Value};
use shmfifo::{BatchEntry, MessageAttribute, Queue, QueueConfig, SendMessage, LOCAL_ARN_PREFIX};

use crate::access::Identity;
use crate::digest::{md5_hex, md5_of_attributes};
use crate::protocol::ApiError;

type Res = Result<Map<String, Value>, ApiError>;

mod answers;
mod moves;
mod receive;
mod table;
mod urls;

use answers::{batch_out, message_out};
use moves::MoveTask;
use table::Opened;
pub(crate) use table::MAX_OPEN_QUEUES;

/// The queues a server serves: the files in one directory whose names are FIFO queue names
/// ([`valid_name`]: the one naming rule, for every action), opened once and kept while the
/// name names the same file.
#[derive(Debug)]
pub struct Queues {
    dir: PathBuf,
    /// `dir` as last walked, held between requests ([`crate::access::Held`]).
    held: crate::access::Held,
    /// `http://HOST:PORT/ACCOUNT/`: the prefix of every queue URL.
    url_prefix: String,
    /// Listening on every address (`0.0.0.0`, `::`), which no client can connect to: a queue
    /// URL then names the host the client's request named ([`Queues::run`]).
    any_host: bool,
    /// The server's own user: the owner of every file it creates.
    own_uid: u32,
    open: Mutex<HashMap<String, Opened>>,
    tasks: Mutex<Vec<MoveTask>>,
    next_task: AtomicU64,
    /// The open table's clock: each use of a name takes the next value ([`Opened::used`]).
    ticks: AtomicU64,
    /// Whether the log already says the directory's path cannot be served (a request that
    /// finds it whole again clears it): one line, not one a request.
    path_broken: AtomicBool,
}

/// The longest RedrivePolicy value read (a target's ARN, URL or name and a count: a few
/// hundred bytes; SQS's own limit on an attribute's value is far above any real one).
const MAX_POLICY_LEN: usize = 4096;

/// The most queue URLs a ListQueues without MaxResults returns, as SQS's (1,000).
const MAX_LISTED: usize = 1000;

/// `AWS.SimpleQueueService.NonExistentQueue`, as SQS words it.
fn no_such_queue() -> ApiError {
    ApiError::sender(
        "AWS.SimpleQueueService.NonExistentQueue",
        "The specified queue does not exist.",
    )
}

/// `AccessDenied`: the caller may not do this to the queue's file themselves.
fn access_denied(name: &str, what: &str) -> ApiError {
    ApiError {
        code: "AccessDenied".into(),
        message: format!("Access to the resource {name} is denied: the caller's user may not {what} (the file's permissions)."),
        sender: true,
        status: 403,
    }
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
    Ok(delay_param(p, name)?.map(|n| Duration::from_secs(u64::from(n))))
}

/// A count of seconds that must not be negative (the library checks each one's upper bound).
fn delay_param(p: &Map<String, Value>, name: &str) -> Result<Option<u32>, ApiError> {
    match int_param(p, name)? {
        None => Ok(None),
        Some(n) if n < 0 => Err(ApiError::sender(
            "InvalidParameterValue",
            format!("Value {n} for parameter {name} is invalid. Reason: must not be negative."),
        )),
        Some(n) => Ok(Some(n.min(i64::from(u32::MAX)) as u32)),
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
        // The field a type's value goes in, as SQS has it: a Binary type's in BinaryValue, a
        // String or Number type's in StringValue (the checksum's transport byte follows the
        // type, so a value in the other field read back with another checksum than it was sent
        // with).
        let binary_type = t.split('.').next() == Some("Binary");
        let field_ok = if binary_type {
            a.get("BinaryValue").is_some() || a.get("StringValue").is_none()
        } else {
            a.get("StringValue").is_some() || a.get("BinaryValue").is_none()
        };
        if !field_ok {
            let field = if binary_type { "Binary" } else { "String" };
            return Err(ApiError::invalid(
                "MessageAttributes",
                &format!(
                    "The message attribute '{name}' with type '{t}' must use field '{field}'."
                ),
            ));
        }
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
    /// Queues in `dir`, reached at `http://{addr}/{ACCOUNT}/NAME`, served by user `own_uid`.
    /// An unspecified `addr` (every address) answers URLs of the host each request names.
    pub fn new(dir: PathBuf, addr: std::net::SocketAddr, own_uid: u32) -> Self {
        Queues {
            held: crate::access::Held::new(dir.clone(), vec![0, own_uid]),
            dir,
            url_prefix: format!("http://{addr}/{ACCOUNT}/"),
            any_host: addr.ip().is_unspecified(),
            own_uid,
            open: Mutex::new(HashMap::new()),
            tasks: Mutex::new(Vec::new()),
            next_task: AtomicU64::new(1),
            ticks: AtomicU64::new(0),
            path_broken: AtomicBool::new(false),
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// The queue name of a queue URL (any host: clients say localhost or 127.0.0.1), or of the
    /// request path of a query-protocol request without a `QueueUrl`: its last segment, which
    /// must be a FIFO queue name ([`valid_name`]), else the queue does not exist.
    fn name_of(&self, url: &str) -> Result<String, ApiError> {
        let name = url.trim_end_matches('/').rsplit('/').next().unwrap_or("");
        if !valid_name(name) {
            return Err(no_such_queue());
        }
        Ok(name.to_owned())
    }

    /// The queue name of an ARN (`arn:aws:sqs:REGION:ACCOUNT:NAME`), a URL or a name: its
    /// last part, which must be a FIFO queue name.
    fn name_of_target(&self, t: &str) -> Result<String, ApiError> {
        let name = t.rsplit([':', '/']).next().unwrap_or("");
        if !valid_name(name) {
            return Err(no_such_queue());
        }
        Ok(name.to_owned())
    }

    /// A RedrivePolicy with its target (an ARN, a URL, a name) made the path of a queue in
    /// our directory (never one outside it), which `who` must be allowed to use.
    ///
    /// The value must be a JSON object serde_json reads, of at most [`MAX_POLICY_LEN`] bytes,
    /// and what goes on to the library is serde_json's own text of it: the library's parser
    /// takes some inputs serde_json refuses (a form feed before the object, raw control bytes
    /// in a string), and a value passed on unread would carry a dead-letter target nobody
    /// checked (any path the server's user can open).
    fn local_policy(&self, value: &str, who: &Identity) -> Result<String, ApiError> {
        if value.len() > MAX_POLICY_LEN {
            return Err(ApiError::invalid(
                "RedrivePolicy",
                &format!("Redrive policy is longer than {MAX_POLICY_LEN} bytes."),
            ));
        }
        let Ok(mut v @ Value::Object(_)) = serde_json::from_str::<Value>(value) else {
            return Err(ApiError::invalid(
                "RedrivePolicy",
                "Redrive policy is not a valid JSON map.",
            ));
        };
        if let Some(t) = v.get("deadLetterTargetArn").and_then(Value::as_str) {
            let name = self.name_of_target(t).map_err(|_| {
                ApiError::invalid(
                    "RedrivePolicy",
                    &format!("deadLetterTargetArn {t} does not name a FIFO queue of this endpoint"),
                )
            })?;
            // Searchable first: whether the name exists is not theirs to learn otherwise.
            let dir = self.reachable(&name, who)?;
            let meta = self.file_of(&dir, &name).map_err(|_| {
                ApiError::invalid(
                    "RedrivePolicy",
                    &format!("the dead-letter queue {name} does not exist"),
                )
            })?;
            if !who.may_open(&meta) {
                return Err(access_denied(&name, "open it for reading and writing"));
            }
            v["deadLetterTargetArn"] = Value::String(self.path(&name).display().to_string());
        }
        Ok(v.to_string())
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

    /// Runs one action for `who`: nothing a user could not do to the files themselves (see
    /// [`crate::access`]).
    ///
    /// A long poll awaits; every other action is a synchronous call of the library, which may
    /// wait (up to a second behind a stopped participant holding a group's claim, a directory
    /// scan for ListQueues), so on a multi-threaded runtime it runs as blocking
    /// (`block_in_place`): the worker's other tasks move to another worker, and a client that
    /// stops a process of its own on a shared queue does not stall every other connection.
    /// So do ReceiveMessage's open of its queue and a replay of a receive recorded under its
    /// attempt id (which waits behind a stopped holder of a recorded message's group claim).
    ///
    /// `host` is the request's `Host` header: where serve listens on every address, the queue
    /// URLs of the answer name it (the address the client reached), if it is a plain
    /// `host[:port]`; otherwise they name the listening address.
    pub async fn run(
        &self,
        action: &str,
        p: &Map<String, Value>,
        who: &Identity,
        host: Option<&str>,
    ) -> Res {
        let r = if action == "ReceiveMessage" {
            self.receive_message(p, who).await
        } else {
            blocking(|| self.run_now(action, p, who))
        };
        match r {
            Ok(mut answer) => {
                if let (true, Some(host)) = (self.any_host, host.filter(|h| urls::plain_host(h))) {
                    self.rehost(&mut answer, host);
                }
                Ok(answer)
            }
            Err(e) => Err(self.scrubbed(e)),
        }
    }

    /// [`run`](Self::run) of an action other than ReceiveMessage.
    fn run_now(&self, action: &str, p: &Map<String, Value>, who: &Identity) -> Res {
        match action {
            "CreateQueue" => self.create_queue(p, who),
            "GetQueueUrl" => {
                let name = required(p, "QueueName")?;
                self.queue_by_name(name, who)?;
                Ok(obj(json!({"QueueUrl": self.url(name)})))
            }
            "ListQueues" => self.list_queues(p, who),
            "DeleteQueue" => {
                let name = self.name_of(required(p, "QueueUrl")?)?;
                let dir = self.reachable(&name, who)?;
                let meta = self.file_of(&dir, &name)?;
                if !who.may_unlink(dir.meta(), &meta) {
                    return Err(access_denied(&name, "remove its name from the directory"));
                }
                self.open.lock().expect("queue table").remove(&name);
                // In the directory as walked and checked (whatever its path names now); the
                // library removes the name only if it still names the file it checked.
                Queue::unlink_at(dir.path(&name))?;
                tracing::info!(queue = name, uid = who.uid, "queue deleted");
                Ok(Map::new())
            }
            "GetQueueAttributes" => {
                let (name, q) = self.queue(p, who)?;
                let all = self.attributes_of(&name, q.queue());
                // A file cut (by any user who may write it): its figures would be zeros.
                q.queue().check_file()?;
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
                let (_, q) = self.queue(p, who)?;
                let Some(Value::Object(attrs)) = p.get("Attributes") else {
                    return Err(ApiError::missing("Attributes"));
                };
                // All or nothing, as SQS: one bad name or value changes none.
                let mut pairs = Vec::with_capacity(attrs.len());
                for (k, v) in attrs {
                    let v = v.as_str().map_or_else(|| v.to_string(), str::to_owned);
                    let v = if k == "RedrivePolicy" && !v.trim().is_empty() {
                        self.local_policy(&v, who)?
                    } else {
                        v
                    };
                    pairs.push((k.as_str(), v));
                }
                q.queue()
                    .set_attributes_by_name(pairs.iter().map(|(k, v)| (*k, v.as_str())))?;
                Ok(Map::new())
            }
            "PurgeQueue" => {
                let (_, q) = self.queue(p, who)?;
                q.queue().purge()?;
                Ok(Map::new())
            }
            "SendMessage" => self.send_message(p, who),
            "SendMessageBatch" => self.send_message_batch(p, who),
            "DeleteMessage" => {
                let (_, q) = self.queue(p, who)?;
                q.queue().delete_str(required(p, "ReceiptHandle")?)?;
                Ok(Map::new())
            }
            "DeleteMessageBatch" => {
                let (_, q) = self.queue(p, who)?;
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
                let (_, q) = self.queue(p, who)?;
                let vt = seconds(p, "VisibilityTimeout")?
                    .ok_or_else(|| ApiError::missing("VisibilityTimeout"))?;
                q.queue()
                    .change_visibility_str(required(p, "ReceiptHandle")?, vt)?;
                Ok(Map::new())
            }
            "ChangeMessageVisibilityBatch" => {
                let (_, q) = self.queue(p, who)?;
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
            "StartMessageMoveTask" => self.start_move(p, who),
            "ListMessageMoveTasks" => self.list_moves(p, who),
            "CancelMessageMoveTask" => self.cancel_move(p, who),
            "ListDeadLetterSourceQueues" => self.list_dead_letter_sources(p, who),
            "TagQueue" | "UntagQueue" | "ListQueueTags" | "AddPermission" | "RemovePermission" => {
                Err(ApiError::sender(
                    "AWS.SimpleQueueService.UnsupportedOperation",
                    format!("{action} is not supported by shmfifo serve."),
                ))
            }
            other => Err(ApiError::sender(
                "InvalidAction",
                format!("The action {other} is not valid for this endpoint."),
            )),
        }
    }

    fn create_queue(&self, p: &Map<String, Value>, who: &Identity) -> Res {
        let name = required(p, "QueueName")?;
        let fifo = match p.get("Attributes") {
            Some(Value::Object(m)) => m.get("FifoQueue").and_then(Value::as_str) == Some("true"),
            _ => false,
        };
        if !valid_name(name) || !fifo {
            return Err(ApiError::sender(
                "InvalidParameterValue",
                "The name of a FIFO queue can only include alphanumeric characters, hyphens, or underscores, must end with .fifo suffix and be 1 to 80 in length; FifoQueue must be true (shmfifo serves FIFO queues only).",
            ));
        }
        let mut attrs: Vec<(String, String)> = Vec::new();
        if let Some(Value::Object(m)) = p.get("Attributes") {
            for (k, v) in m {
                let v = v.as_str().map_or_else(|| v.to_string(), str::to_owned);
                let v = if k == "RedrivePolicy" && !v.trim().is_empty() {
                    self.local_policy(&v, who)?
                } else {
                    v
                };
                attrs.push((k.clone(), v));
            }
        }
        let cfg = QueueConfig::new()
            .from_sqs_attributes(attrs.iter().map(|(k, v)| (k.as_str(), v.as_str())))?;
        let dir = self.reachable(name, who)?;
        // The file is made by this server's user, mode 0600: only that user and root could
        // open it, so only they may make it (and they must be allowed to make a name in the
        // directory).
        let refused = if !who.may_create_in(dir.meta()) {
            Some(access_denied(name, "create a file in the directory"))
        } else if who.uid != self.own_uid && who.uid != 0 {
            Some(access_denied(
                name,
                "open a queue this server creates (it would be owned by the server's user, mode 0600); create it with `shmfifo create`",
            ))
        } else {
            None
        };
        // Made in the directory as walked and checked (whatever its path names now). The
        // handle is not kept: its path is the walked descriptor's, which the library's log
        // lines would show; the queue's first use opens it by its own path. A caller who may
        // not create asks only about the queue there (CreateQueue of an existing queue is
        // GetQueueUrl's answer): one removed meanwhile is not made for them.
        let made = match refused {
            None => Queue::create_at(dir.path(name), &cfg),
            Some(e) if self.file_of(&dir, name).is_err() => return Err(e),
            Some(_) => Err(shmfifo::Error::QueueNameExists {
                path: self.path(name),
            }),
        };
        match made {
            Ok(q) => {
                drop(q);
                tracing::info!(queue = name, uid = who.uid, "queue created");
            }
            Err(shmfifo::Error::QueueNameExists { .. }) => {
                // Q7: the same attributes again is success; others are QueueAlreadyExists.
                let q = self.queue_by_name(name, who)?;
                let have = self.attributes_of(name, q.queue());
                q.queue().check_file()?;
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

    fn send_message(&self, p: &Map<String, Value>, who: &Identity) -> Res {
        let (_, q) = self.queue(p, who)?;
        let body = required(p, "MessageBody")?;
        let attrs = attributes_in(p)?;
        let a = meta_attrs(&attrs);
        let delay = delay_param(p, "DelaySeconds")?;
        let msg = SendMessage {
            group_id: str_param(p, "MessageGroupId")?,
            dedup_id: str_param(p, "MessageDeduplicationId")?,
            body,
            bytes: None,
            attributes: &a,
            delay_seconds: delay,
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

    fn send_message_batch(&self, p: &Map<String, Value>, who: &Identity) -> Res {
        let (_, q) = self.queue(p, who)?;
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
                delay: delay_param(e, "DelaySeconds")?,
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
}

/// Runs `f`, a synchronous library call that may wait (up to a second behind a stopped
/// participant holding a group's claim; a directory scan), as blocking work on a
/// multi-threaded runtime (`block_in_place`: the worker's other tasks move to another worker,
/// so a client that stops a process of its own on a shared queue does not stall every other
/// connection); in place on a current-thread runtime (an embedder's), which has no other.
/// Never inside a `LocalSet`, where `block_in_place` panics: requests run in the connection
/// tasks `conn::accept_loop` spawns on the runtime (`tokio::spawn`), whatever polls the
/// server's own future (test `a_server_inside_a_local_set_serves`).
fn blocking<R>(f: impl FnOnce() -> R) -> R {
    match tokio::runtime::Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(tokio::runtime::RuntimeFlavor::MultiThread) => tokio::task::block_in_place(f),
        _ => f(),
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
