//! `shmfifo send`: one message (body from an argument, a file or stdin) or a batch of JSON
//! lines, sent 10 at a time with `send_batch`.

use std::io::Read;
use std::path::PathBuf;

use clap::{ArgGroup, Args};
use serde_json::{json, Value};
use shmfifo::{BatchEntry, Queue, SendMessage, SendResult};

use super::{open, print_json, Ctx};
use crate::errors::{self, Failure};
use crate::output::{kv, out, Table};
use crate::parse::{self, Attribute};

/// Arguments of `send`.
#[derive(Args, Debug)]
#[command(group(ArgGroup::new("source").required(true).args(["body", "file", "batch"])))]
// clap would list the required body source before the queue; the queue comes first.
#[command(override_usage = "shmfifo send [OPTIONS] <QUEUE> <BODY|-|--file FILE|--batch FILE|->")]
#[command(
    after_help = "Batch input: what `aws sqs send-message-batch --cli-input-json` takes \
({\"QueueUrl\": ..., \"Entries\": [{\"Id\": \"e1\", \"MessageBody\": \"text\", \"MessageGroupId\": \"g1\", \
\"MessageDeduplicationId\": \"d1\", \"DelaySeconds\": 0, \"MessageAttributes\": {\"kind\": \
{\"DataType\": \"String\", \"StringValue\": \"order\"}}}]}; QUEUE is where they go, QueueUrl is not \
read), a bare list of such entries, messages as receive --json prints them (an array or \
{\"Messages\": [...]}), or JSON lines, one entry per line, in any of those shapes or this \
command's own: {\"group\": \"g1\", \"body\": \"text\", \"dedup_id\": \"id-1\", \"attributes\": \
{\"kind\": \"order\", \"n\": 42, \"raw\": {\"DataType\": \"Binary\", \"BinaryValue\": \"aGk=\"}}}. \
Attribute values: a string (String), a number (Number), or an object with DataType and \
StringValue or base64 BinaryValue. Every entry is parsed before the first batch is sent; \
entries go 10 (and at most 1 MiB) per send_batch, in order, and a batch with a failure is the \
last one sent. --json answers as aws does: {\"Successful\": [{\"Id\", \"MessageId\", \
\"MD5OfMessageBody\", \"SequenceNumber\", ...}], \"Failed\": [{\"Id\", \"SenderFault\", \"Code\", \
\"Message\"}]}, each Id the entry's own (its line or entry number where it has none), plus \
\"Unsent\" (entries after a failed batch) and, per entry, \"Duplicate\" or \"Kind\" and \"ExitCode\"."
)]
pub struct SendArgs {
    /// Queue NAME (/dev/shm/NAME) or path (anything containing '/').
    pub queue: String,
    /// The body; `-` reads it from stdin (exactly, trailing newline included).
    #[arg(conflicts_with_all = ["file", "batch"])]
    pub body: Option<String>,
    /// Read the body from a file (exactly: text, or any bytes on a binary queue).
    #[arg(long, short = 'f', value_name = "FILE", conflicts_with = "batch")]
    pub file: Option<PathBuf>,
    /// MessageGroupId (required by the queue).
    #[arg(
        long,
        short = 'g',
        value_name = "GROUP",
        conflicts_with = "batch",
        visible_alias = "message-group-id"
    )]
    pub group: Option<String>,
    /// MessageDeduplicationId (required unless the queue has content-based deduplication, or
    /// deduplication off).
    #[arg(
        long,
        short = 'd',
        value_name = "ID",
        conflicts_with = "batch",
        visible_alias = "message-deduplication-id"
    )]
    pub dedup_id: Option<String>,
    /// A message attribute NAME=TYPE:VALUE (TYPE String, Number or Binary with a base64
    /// value, optionally with a .label); repeatable, at most 10.
    #[arg(long, short = 'a', value_name = "NAME=TYPE:VALUE", value_parser = parse::attribute,
          conflicts_with = "batch")]
    pub attribute: Vec<Attribute>,
    /// Send the messages of a JSON-lines file (`-`: stdin), 10 per send_batch.
    #[arg(long, value_name = "FILE|-")]
    pub batch: Option<String>,
    /// When the message's size class is full, wait up to DURATION (`30s`, `5m`, or plain
    /// seconds) for a consumer to free a slot instead of failing at once (backpressure). With
    /// --batch, messages are then sent one at a time, in order, each waiting as long.
    #[arg(long, value_name = "DURATION", value_parser = parse::duration)]
    pub wait: Option<std::time::Duration>,
}

/// One message to send, owned.
#[derive(Debug, Clone, Default)]
struct Outgoing {
    /// Line or entry number in the batch input (1-based; 0 for a single send).
    line: usize,
    /// Where it is in the input, for messages: `line 3`, `entry 2` (empty for a single send).
    at: String,
    /// Its batch entry id: the caller's `Id` (aws's entries), else the line or entry number.
    id: String,
    /// Whether `id` is the caller's.
    own_id: bool,
    group: Option<String>,
    dedup_id: Option<String>,
    body: String,
    /// A body of bytes (a binary queue's: a file that is not UTF-8, or a `receive --json`
    /// body in base64), sent instead of `body`.
    bytes: Option<Vec<u8>>,
    attributes: Vec<Attribute>,
    /// `DelaySeconds` of an aws entry (a FIFO queue takes only 0, as SQS: per queue).
    delay_seconds: Option<u32>,
}

impl Outgoing {
    /// The attributes as the library takes them (borrowing from `self`).
    fn attribute_views(&self) -> Vec<shmfifo::MessageAttribute<'_>> {
        self.attributes
            .iter()
            .map(Attribute::as_message_attribute)
            .collect()
    }

    fn message<'a>(&'a self, attrs: &'a [shmfifo::MessageAttribute<'a>]) -> SendMessage<'a> {
        SendMessage {
            group_id: self.group.as_deref(),
            dedup_id: self.dedup_id.as_deref(),
            body: &self.body,
            bytes: self.bytes.as_deref(),
            attributes: attrs,
            delay_seconds: self.delay_seconds,
        }
    }

    /// Where the entry is, with its own id if it has one: `entry 2 (Id e2)`, `line 3`.
    fn place(&self) -> String {
        if self.own_id {
            format!("{} (Id {})", self.at, self.id)
        } else {
            self.at.clone()
        }
    }

    /// Bytes as `send_batch` counts them against its 1 MiB limit.
    fn counted_bytes(&self) -> usize {
        self.bytes.as_ref().map_or(self.body.len(), Vec::len)
            + self
                .attributes
                .iter()
                .map(|a| a.name.len() + a.data_type.len() + a.value.len())
                .sum::<usize>()
    }
}

fn read_all(source: &str, r: &mut dyn Read) -> Result<String, Failure> {
    String::from_utf8(read_raw(source, r)?).map_err(|e| {
        Failure::input(
            source,
            format!(
                "not UTF-8 text (a message body is text) at byte {}",
                e.utf8_error().valid_up_to()
            ),
        )
    })
}

fn read_raw(source: &str, r: &mut dyn Read) -> Result<Vec<u8>, Failure> {
    let mut v = Vec::new();
    r.read_to_end(&mut v)
        .map_err(|e| Failure::input(source, e))?;
    Ok(v)
}

/// A single send's body from a file or stdin: text, or (for a binary queue) any bytes.
fn read_body(path: &str) -> Result<(String, Option<Vec<u8>>), Failure> {
    let raw = if path == "-" {
        read_raw("stdin", &mut std::io::stdin().lock())?
    } else {
        let mut f = std::fs::File::open(path).map_err(|e| Failure::input(path, e))?;
        read_raw(path, &mut f)?
    };
    Ok(match String::from_utf8(raw) {
        Ok(s) => (s, None),
        Err(e) => (String::new(), Some(e.into_bytes())),
    })
}

/// The input error for a body that is not text, sent to a queue that takes text.
fn not_text(source: &str, bytes: &[u8]) -> Failure {
    let at = std::str::from_utf8(bytes)
        .err()
        .map_or(0, |e| e.valid_up_to());
    Failure::input(
        source,
        format!("not UTF-8 text (a message body is text; a queue created with --body-mode binary takes any bytes) at byte {at}"),
    )
}

fn read_source(path: &str) -> Result<(String, String), Failure> {
    if path == "-" {
        Ok((
            "stdin".into(),
            read_all("stdin", &mut std::io::stdin().lock())?,
        ))
    } else {
        let mut f = std::fs::File::open(path).map_err(|e| Failure::input(path, e))?;
        Ok((path.to_owned(), read_all(path, &mut f)?))
    }
}

/// Sends the message or the batch.
pub fn run(a: &SendArgs, ctx: Ctx) -> Result<(), Failure> {
    if let Some(src) = &a.batch {
        if super::remote::is_remote(&a.queue) {
            return Err(Failure::input(
                &a.queue,
                "--batch sends to local queues only; on an SQS queue, send one message per call (or forward a local queue with `shmfifo bridge`)",
            ));
        }
        let (name, text) = read_source(src)?;
        let msgs = parse_lines(&name, &text)?;
        let q = open(&a.queue)?;
        return send_batches(&q, &a.queue, &msgs, a.wait, ctx);
    }
    let (source, (body, bytes)) = match (&a.body, &a.file) {
        (Some(b), _) if b == "-" => ("stdin".to_owned(), read_body("-")?),
        (Some(b), _) => (String::new(), (b.clone(), None)),
        (None, Some(f)) => {
            let p = f.display().to_string();
            (p.clone(), read_body(&p)?)
        }
        // clap requires one of the body, --file and --batch.
        (None, None) => unreachable!("clap requires a body source"),
    };
    let m = Outgoing {
        group: a.group.clone(),
        dedup_id: a.dedup_id.clone(),
        body,
        bytes,
        attributes: a.attribute.clone(),
        ..Outgoing::default()
    };
    let attrs = m.attribute_views();
    if super::remote::is_remote(&a.queue) {
        if a.wait.is_some() {
            return Err(Failure::input(
                &a.queue,
                "--wait applies to local queues only (an SQS queue is never full)",
            ));
        }
        if let Some(b) = &m.bytes {
            return Err(not_text(&source, b));
        }
        return super::remote::send(&a.queue, &m.message(&attrs), ctx);
    }
    let q = open(&a.queue)?;
    if let (Some(b), shmfifo::BodyMode::Text) = (&m.bytes, q.body_mode()) {
        return Err(not_text(&source, b));
    }
    let msg = m.message(&attrs);
    let r = match a.wait {
        Some(t) => q.send_timeout(&msg, t),
        None => q.send(&msg),
    }
    .map_err(|e| Failure::queue(&a.queue, e))?;
    drop(q);
    if ctx.json {
        let mut v = result_json(&r);
        super::add_send_digests(&mut v, &msg);
        print_json(&v);
    } else {
        out(&kv(
            &[
                ("MessageId", r.message_id.to_string()),
                ("SequenceNumber", r.sequence_number.to_string()),
                (
                    "Duplicate",
                    if r.duplicate {
                        "yes (nothing enqueued; the original's id and sequence number)"
                    } else {
                        "no"
                    }
                    .into(),
                ),
            ],
            0,
        ));
    }
    Ok(())
}

fn result_json(r: &SendResult) -> Value {
    json!({
        "MessageId": r.message_id.to_string(),
        "SequenceNumber": r.sequence_number.to_string(),
        "Duplicate": r.duplicate,
    })
}

/// Parses batch input: one JSON document, or JSON lines (blank lines skipped). A document is
/// `aws sqs send-message-batch`'s input (`{"QueueUrl", "Entries": [...]}`, `QueueUrl` not
/// read: the command's queue argument is where messages go), a bare list of entries, or
/// `receive --json`'s `{"Messages": [...]}`, so `shmfifo receive A --json | jq ... | shmfifo
/// send B --batch -` works. Each entry is in one of the shapes of [`parse_line`].
fn parse_lines(source: &str, text: &str) -> Result<Vec<Outgoing>, Failure> {
    let whole: Option<Value> = serde_json::from_str(text).ok();
    let items: Option<Vec<Value>> = match whole {
        Some(Value::Array(a)) => Some(a),
        Some(Value::Object(o)) if o.contains_key("Entries") => {
            if let Some(k) = o
                .keys()
                .find(|k| !["QueueUrl", "Entries"].contains(&k.as_str()))
            {
                return Err(Failure::input(
                    source,
                    format!("unknown key {k:?} beside \"Entries\" (keys: QueueUrl, Entries)"),
                ));
            }
            Some(
                o.get("Entries")
                    .and_then(Value::as_array)
                    .cloned()
                    .ok_or_else(|| Failure::input(source, "\"Entries\" must be a list"))?,
            )
        }
        Some(Value::Object(o)) if o.len() == 1 && o.contains_key("Messages") => {
            o.get("Messages").and_then(Value::as_array).cloned()
        }
        _ => None,
    };
    let mut out = Vec::new();
    let mut push = |v: &Value, kind: &str, n: usize| -> Result<(), Failure> {
        let at = format!("{kind} {n}");
        let mut m = parse_line(v).map_err(|e| Failure::input(format!("{source} {at}"), e))?;
        m.line = n;
        if m.id.is_empty() {
            m.id = n.to_string();
        } else {
            m.own_id = true;
        }
        m.at = at;
        out.push(m);
        Ok(())
    };
    if let Some(items) = items {
        for (i, v) in items.iter().enumerate() {
            push(v, "entry", i + 1)?;
        }
        return Ok(out);
    }
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let v: Value = serde_json::from_str(line)
            .map_err(|e| Failure::input(format!("{source} line {}", i + 1), e))?;
        push(&v, "line", i + 1)?;
    }
    Ok(out)
}

/// Message attributes from a JSON object: name to a string (String), a number (Number), or
/// `{"DataType", "StringValue" | "BinaryValue"}` (aws's shape, base64 for binary).
fn attributes_of(v: Option<&Value>) -> Result<Vec<Attribute>, String> {
    let mut attributes = Vec::new();
    match v {
        None | Some(Value::Null) => {}
        Some(Value::Object(attrs)) => {
            for (name, v) in attrs {
                attributes.push(match v {
                    Value::String(s) => Attribute::new(name, "String", s)?,
                    Value::Number(n) => Attribute::new(name, "Number", &n.to_string())?,
                    Value::Object(a) => {
                        let ty = a
                            .get("DataType")
                            .and_then(Value::as_str)
                            .ok_or(format!("attribute {name}: \"DataType\" is missing"))?;
                        // aws's skeleton has both keys, the unused one null (and list values
                        // SQS reserves, which are refused unless empty).
                        for k in ["StringListValues", "BinaryListValues"] {
                            if a.get(k).and_then(Value::as_array).is_some_and(|l| {
                                l.iter().any(|x| !x.is_null() && x.as_str() != Some(""))
                            }) {
                                return Err(format!(
                                    "attribute {name}: {k} is not supported (nor by SQS)"
                                ));
                            }
                        }
                        let val = a
                            .get("StringValue")
                            .and_then(Value::as_str)
                            .or_else(|| a.get("BinaryValue").and_then(Value::as_str))
                            .ok_or(format!(
                                "attribute {name}: \"StringValue\" or \"BinaryValue\" is missing"
                            ))?;
                        Attribute::new(name, ty, val)?
                    }
                    _ => {
                        return Err(format!(
                            "attribute {name}: a string, a number, or {{\"DataType\", \"StringValue\"|\"BinaryValue\"}}"
                        ))
                    }
                });
            }
        }
        Some(_) => return Err("attributes must be an object".into()),
    }
    Ok(attributes)
}

/// One entry, in one of three shapes: an `aws sqs send-message-batch` entry (`Id`,
/// `MessageBody`, `MessageGroupId`, `MessageDeduplicationId`, `DelaySeconds`,
/// `MessageAttributes`); a message as `receive --json` prints it (`Body`, `Attributes` with
/// `MessageGroupId` and `MessageDeduplicationId`, `MessageAttributes`: its id, receipt handle
/// and other system attributes are the old message's, not sent); or this command's own
/// (`group`, `body`, `dedup_id`, `attributes`). Only aws's entries carry an id.
fn parse_line(v: &Value) -> Result<Outgoing, String> {
    let o = v.as_object().ok_or("an entry must be a JSON object")?;
    let text_of = |o: &serde_json::Map<String, Value>, k: &str| -> Result<Option<String>, String> {
        match o.get(k) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(format!("{k:?} must be a string")),
        }
    };
    let allow = |keys: &[&str]| -> Result<(), String> {
        match o.keys().find(|k| !keys.contains(&k.as_str())) {
            Some(k) => Err(format!("unknown key {k:?} (keys: {})", keys.join(", "))),
            None => Ok(()),
        }
    };
    if o.contains_key("MessageBody") || o.contains_key("Id") {
        // aws sqs send-message-batch's entry.
        allow(&[
            "Id",
            "MessageBody",
            "MessageGroupId",
            "MessageDeduplicationId",
            "DelaySeconds",
            "MessageAttributes",
            "MessageSystemAttributes",
        ])?;
        // SQS's only system attribute is AWSTraceHeader (X-Ray), which a local queue does not
        // keep: refused rather than dropped, unless empty (as the skeleton leaves it).
        if let Some(Value::Object(sys)) = o.get("MessageSystemAttributes") {
            if let Some(k) = sys.keys().find(|k| k.as_str() != "KeyName") {
                return Err(format!(
                    "MessageSystemAttributes {k:?}: not kept by shmfifo"
                ));
            }
        }
        let delay_seconds = match o.get("DelaySeconds") {
            None | Some(Value::Null) => None,
            Some(v) => Some(
                v.as_u64()
                    .and_then(|d| u32::try_from(d).ok())
                    .ok_or("\"DelaySeconds\" must be a whole number of seconds")?,
            ),
        };
        let id = text_of(o, "Id")?.ok_or("\"Id\" is missing (aws's entries have one)")?;
        if id.is_empty() {
            return Err("\"Id\" is empty".into());
        }
        return Ok(Outgoing {
            id,
            group: text_of(o, "MessageGroupId")?,
            dedup_id: text_of(o, "MessageDeduplicationId")?,
            body: text_of(o, "MessageBody")?.ok_or("\"MessageBody\" is missing")?,
            attributes: attributes_of(o.get("MessageAttributes"))?,
            delay_seconds,
            ..Outgoing::default()
        });
    }
    if o.contains_key("Body") {
        // A message as `receive --json` prints it: its group and dedup id come along; its
        // id, receipt handle and other system attributes are the old message's, not sent.
        let sys = match o.get("Attributes") {
            None | Some(Value::Null) => serde_json::Map::new(),
            Some(Value::Object(a)) => a.clone(),
            Some(_) => return Err("\"Attributes\" must be an object".into()),
        };
        let body = text_of(o, "Body")?.ok_or("\"Body\" is missing")?;
        // A binary queue's body as `receive --json` prints it: base64 (shmfifo extension).
        let bytes = match text_of(o, "BodyEncoding")?.as_deref() {
            None => None,
            Some("base64") => {
                Some(crate::parse::base64_decode(&body).ok_or("\"Body\" is not base64")?)
            }
            Some(e) => return Err(format!("unknown \"BodyEncoding\" {e:?} (base64)")),
        };
        return Ok(Outgoing {
            group: text_of(&sys, "MessageGroupId")?,
            dedup_id: text_of(&sys, "MessageDeduplicationId")?,
            body: if bytes.is_some() { String::new() } else { body },
            bytes,
            attributes: attributes_of(o.get("MessageAttributes"))?,
            ..Outgoing::default()
        });
    }
    allow(&["group", "body", "dedup_id", "attributes"])?;
    Ok(Outgoing {
        group: text_of(o, "group")?,
        dedup_id: text_of(o, "dedup_id")?,
        body: text_of(o, "body")?.ok_or("\"body\" is missing")?,
        attributes: attributes_of(o.get("attributes"))?,
        ..Outgoing::default()
    })
}

/// Splits messages into batches of at most 10 entries and 1 MiB (counted as `send_batch`
/// counts).
fn batches(msgs: &[Outgoing]) -> Vec<&[Outgoing]> {
    let mut out = Vec::new();
    let (mut start, mut bytes) = (0, 0);
    for (i, m) in msgs.iter().enumerate() {
        let b = m.counted_bytes();
        if i > start && (i - start == 10 || bytes + b > 1_048_576) {
            out.push(&msgs[start..i]);
            start = i;
            bytes = 0;
        }
        bytes += b;
    }
    if start < msgs.len() {
        out.push(&msgs[start..]);
    }
    out
}

/// What became of the entries: sent, refused one by one, or refused with their whole batch.
#[derive(Debug, Default)]
struct Outcome<'m> {
    ok: Vec<(&'m Outgoing, SendResult)>,
    failed: Vec<(&'m Outgoing, shmfifo::Error)>,
    /// A batch refused as a request (its entries, the error).
    refused: Option<(&'m [Outgoing], shmfifo::Error)>,
}

/// Sends the batches in order. A batch with a failed entry is the last one sent: the
/// messages after it are not sent (a later message of the same group would overtake it).
fn send_batches(
    q: &Queue,
    queue: &str,
    msgs: &[Outgoing],
    wait: Option<std::time::Duration>,
    ctx: Ctx,
) -> Result<(), Failure> {
    let mut o = Outcome::default();
    if let Some(t) = wait {
        // Backpressure: one message at a time, each waiting for room, so that order holds
        // whatever fills up.
        for m in msgs {
            match q.send_timeout(&m.message(&m.attribute_views()), t) {
                Ok(r) => o.ok.push((m, r)),
                Err(e) => {
                    o.failed.push((m, e));
                    break;
                }
            }
        }
    } else {
        for batch in batches(msgs) {
            // A message without a group fails the whole request with the code SQS gives a
            // batch (S12: InvalidParameterValue, where a single send says MissingParameter),
            // as `aws sqs send-message-batch` against SQS shows it.
            let attrs: Vec<Vec<shmfifo::MessageAttribute<'_>>> =
                batch.iter().map(Outgoing::attribute_views).collect();
            let entries: Vec<BatchEntry<'_, SendMessage<'_>>> = batch
                .iter()
                .zip(&attrs)
                .map(|(m, a)| BatchEntry {
                    id: &m.id,
                    entry: m.message(a),
                })
                .collect();
            match q.send_batch(&entries) {
                Ok(results) => {
                    for (m, r) in batch.iter().zip(results) {
                        match r.result {
                            Ok(s) => o.ok.push((m, s)),
                            Err(e) => o.failed.push((m, e)),
                        }
                    }
                }
                Err(e) => o.refused = Some((batch, e)),
            }
            if !o.failed.is_empty() || o.refused.is_some() {
                break;
            }
        }
    }
    let refused_n = o.refused.as_ref().map_or(0, |(b, _)| b.len());
    let unsent = msgs.len() - o.ok.len() - o.failed.len() - refused_n;
    if ctx.json {
        print_json(&batch_json(&o, unsent));
    } else if !o.ok.is_empty() {
        let mut t = Table::new(&["ID", "MESSAGE-ID", "SEQUENCE-NUMBER", "DUPLICATE"]);
        for (m, r) in &o.ok {
            t.row(vec![
                m.id.clone(),
                r.message_id.to_string(),
                r.sequence_number.to_string(),
                if r.duplicate { "yes" } else { "no" }.into(),
            ]);
        }
        out(&t.render(0));
    }
    let mut first = None;
    for (m, e) in &o.failed {
        eprint!("{}", errors::message_at(queue, Some(&m.place()), e));
        first.get_or_insert(errors::code(e));
    }
    if let Some((batch, e)) = &o.refused {
        let at = match batch {
            [one] => one.place(),
            [a, .., b] if a.at.starts_with("line") => format!("lines {}-{}", a.line, b.line),
            [a, .., b] => format!("entries {}-{}", a.line, b.line),
            [] => String::new(),
        };
        eprint!("{}", errors::message_at(queue, Some(&at), e));
        first.get_or_insert(errors::code(e));
    }
    match first {
        None => Ok(()),
        Some(code) => {
            if unsent + refused_n > 0 {
                eprintln!(
                    "shmfifo: {queue}: {} of {} messages sent, {} not sent",
                    o.ok.len(),
                    msgs.len(),
                    msgs.len() - o.ok.len()
                );
            }
            Err(Failure::Reported(code))
        }
    }
}

/// `send --batch --json`: aws's `SendMessageBatch` answer, each entry under its own id
/// (`Successful`: `Id`, `MessageId`, `MD5OfMessageBody`, `MD5OfMessageAttributes` where it has
/// attributes, `SequenceNumber`; `Failed`: `Id`, `SenderFault`, `Code`, `Message`), with
/// shmfifo's additions: `Duplicate` for each sent entry, `Kind` and `ExitCode` for each failed
/// one, and `Unsent`, how many entries after a failed batch were not tried. Every entry of a
/// batch refused as a request is in `Failed` with the request's error.
fn batch_json(o: &Outcome<'_>, unsent: usize) -> Value {
    let failure = |m: &Outgoing, e: &shmfifo::Error| {
        json!({
            "Id": m.id,
            "SenderFault": true,
            "Code": e.sqs_code(),
            "Message": e.to_string(),
            "Kind": errors::kind(e),
            "ExitCode": errors::code(e),
        })
    };
    let mut failed: Vec<Value> = o.failed.iter().map(|(m, e)| failure(m, e)).collect();
    if let Some((batch, e)) = &o.refused {
        failed.extend(batch.iter().map(|m| failure(m, e)));
    }
    let ok: Vec<Value> =
        o.ok.iter()
            .map(|(m, r)| {
                let attrs = m.attribute_views();
                let mut v = json!({"Id": m.id});
                super::add_send_digests(&mut v, &m.message(&attrs));
                v["MessageId"] = json!(r.message_id.to_string());
                v["SequenceNumber"] = json!(r.sequence_number.to_string());
                v["Duplicate"] = json!(r.duplicate);
                v
            })
            .collect();
    json!({"Successful": ok, "Failed": failed, "Unsent": unsent})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_parse_with_every_attribute_form() {
        let text = "{\"group\":\"g\",\"body\":\"b\",\"dedup_id\":\"d\",\"attributes\":{\"s\":\"x\",\"n\":42,\"raw\":{\"DataType\":\"Binary\",\"BinaryValue\":\"aGk=\"}}}\n\n{\"body\":\"only\"}\n";
        let m = parse_lines("t", text).unwrap();
        assert_eq!(m.len(), 2);
        assert_eq!(m[0].line, 1);
        assert_eq!(m[1].line, 3);
        assert_eq!(m[0].group.as_deref(), Some("g"));
        assert_eq!(m[0].dedup_id.as_deref(), Some("d"));
        let a: Vec<_> = m[0]
            .attributes
            .iter()
            .map(|a| (a.name.as_str(), a.data_type.as_str(), a.value.clone()))
            .collect();
        assert!(a.contains(&("n", "Number", b"42".to_vec())));
        assert!(a.contains(&("raw", "Binary", b"hi".to_vec())));
        assert!(a.contains(&("s", "String", b"x".to_vec())));
        assert_eq!(m[1].group, None);
        for (bad, at) in [
            ("[1]", "t entry 1"),
            (
                "{\"Entries\": [{\"Id\": \"1\", \"MessageBody\": 5}]}",
                "t entry 1",
            ),
            (
                "{\"Messages\": [{\"Body\": \"b\", \"Attributes\": 1}]}",
                "t entry 1",
            ),
            ("{\"group\":\"g\"}", "t line 1"),
            ("{\"body\":1}", "t line 1"),
            ("{\"body\":\"b\",\"x\":1}", "t line 1"),
            ("{\"MessageBody\":\"b\",\"DelaySeconds\":1}", "t line 1"),
            (
                "{\"Id\":\"e\",\"MessageBody\":\"b\",\"DelaySeconds\":-1}",
                "t line 1",
            ),
            (
                "{\"Id\":\"e\",\"MessageBody\":\"b\",\"Nope\":1}",
                "t line 1",
            ),
            ("{\"QueueUrl\":\"q\",\"Entries\":[],\"Extra\":1}", "t"),
            ("{\"Entries\":{}}", "t"),
            ("{", "t line 1"),
        ] {
            match parse_lines("t", bad) {
                Err(Failure::Input { source, .. }) => assert_eq!(source, at, "{bad}"),
                other => panic!("{bad}: {other:?}"),
            }
        }
    }

    /// aws's input shapes: `send-message-batch --cli-input-json` (QueueUrl not read, the
    /// skeleton's null alternatives and empty placeholders taken), and a bare list; each entry
    /// keeps its caller's id and its DelaySeconds; entries without an id get their number.
    #[test]
    fn aws_send_message_batch_input_is_taken_with_its_ids() {
        let doc = r#"{"QueueUrl": "https://sqs.us-east-1.amazonaws.com/1/q.fifo", "Entries": [
            {"Id": "e1", "MessageBody": "one", "DelaySeconds": 0, "MessageGroupId": "g",
             "MessageDeduplicationId": "d1",
             "MessageAttributes": {"k": {"StringValue": "v", "BinaryValue": null,
                 "StringListValues": [""], "BinaryListValues": [null], "DataType": "String"},
                 "b": {"StringValue": null, "BinaryValue": "aGk=", "DataType": "Binary"}},
             "MessageSystemAttributes": {}},
            {"Id": "e-2", "MessageBody": "two", "MessageGroupId": "g", "DelaySeconds": 5}
        ]}"#;
        let m = parse_lines("t", doc).unwrap();
        assert_eq!(m.len(), 2);
        assert_eq!((m[0].id.as_str(), m[0].own_id), ("e1", true));
        assert_eq!(m[0].place(), "entry 1 (Id e1)");
        assert_eq!(m[1].id, "e-2");
        assert_eq!(m[0].delay_seconds, Some(0));
        assert_eq!(m[1].delay_seconds, Some(5));
        assert_eq!(m[1].dedup_id, None);
        let a: Vec<_> = m[0]
            .attributes
            .iter()
            .map(|a| (a.name.as_str(), a.data_type.as_str(), a.value.clone()))
            .collect();
        assert!(a.contains(&("k", "String", b"v".to_vec())), "{a:?}");
        assert!(a.contains(&("b", "Binary", b"hi".to_vec())), "{a:?}");
        let bare = r#"[{"Id": "x", "MessageBody": "b", "MessageGroupId": "g"}, {"body": "c"}]"#;
        let m = parse_lines("t", bare).unwrap();
        assert_eq!(
            m.iter()
                .map(|m| (m.id.as_str(), m.own_id))
                .collect::<Vec<_>>(),
            [("x", true), ("2", false)]
        );
        assert_eq!(m[1].place(), "entry 2");
        let lines = parse_lines(
            "t",
            "{\"body\": \"a\"}\n\n{\"Id\": \"z\", \"MessageBody\": \"b\"}\n",
        )
        .unwrap();
        assert_eq!(
            (lines[0].id.as_str(), lines[0].place()),
            ("1", "line 1".to_owned())
        );
        assert_eq!(lines[1].place(), "line 3 (Id z)");
        for bad in [
            r#"[{"Id": "x", "MessageBody": "b", "MessageSystemAttributes": {"AWSTraceHeader": {"DataType": "String", "StringValue": "t"}}}]"#,
            r#"[{"Id": "x", "MessageBody": "b", "MessageAttributes": {"l": {"DataType": "String", "StringListValues": ["a"]}}}]"#,
            r#"[{"MessageBody": "b"}]"#,
            r#"[{"Id": "", "MessageBody": "b"}]"#,
        ] {
            assert!(
                matches!(parse_lines("t", bad), Err(Failure::Input { .. })),
                "{bad}"
            );
        }
    }

    #[test]
    fn batches_hold_ten_entries_and_one_mib() {
        let small = Outgoing {
            bytes: None,
            body: "x".into(),
            ..Outgoing::default()
        };
        let v = vec![small.clone(); 25];
        let sizes: Vec<usize> = batches(&v).iter().map(|b| b.len()).collect();
        assert_eq!(sizes, [10, 10, 5]);
        let big = Outgoing {
            bytes: None,
            body: "x".repeat(400_000),
            ..Outgoing::default()
        };
        let v = vec![big; 5];
        let sizes: Vec<usize> = batches(&v).iter().map(|b| b.len()).collect();
        assert_eq!(sizes, [2, 2, 1]);
        assert!(batches(&[]).is_empty());
    }
}
