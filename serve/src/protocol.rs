//! SQS's two wire protocols, both into and out of one shape: a request becomes the action's
//! name and its parameters as the JSON protocol spells them; an answer is the JSON protocol's
//! document, written as JSON or as the query protocol's XML.
//!
//! * JSON (current SDKs): `POST /`, `X-Amz-Target: AmazonSQS.<Action>`,
//!   `Content-Type: application/x-amz-json-1.0`; errors are `{"__type", "message"}` with
//!   `x-amzn-query-error: <query code>;Sender|Receiver` (SQS is `awsQueryCompatible`, so SDKs
//!   report the query protocol's codes).
//! * Query (older SDKs and tools): form-encoded `Action=…&QueueUrl=…` in the body (or the URL's
//!   query string), lists flattened as `Attribute.1.Name`; answers are XML, errors
//!   `<ErrorResponse><Error><Type><Code><Message>`.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

/// An error as SQS sends it.
#[derive(Debug, Clone)]
pub struct ApiError {
    /// The query protocol's code (`AWS.SimpleQueueService.NonExistentQueue`,
    /// `InvalidParameterValue` …), which SDKs report on both protocols.
    pub code: String,
    /// The message.
    pub message: String,
    /// The sender's fault (`Sender`), or the server's (`Receiver`).
    pub sender: bool,
    /// The HTTP status.
    pub status: u16,
}

impl ApiError {
    /// A sender's error with HTTP 400.
    pub fn sender(code: &str, message: impl Into<String>) -> Self {
        ApiError {
            code: code.to_owned(),
            message: message.into(),
            sender: true,
            status: 400,
        }
    }

    /// `MissingParameter` for `name`.
    pub fn missing(name: &str) -> Self {
        Self::sender(
            "MissingParameter",
            format!("The request must contain the parameter {name}."),
        )
    }

    /// `InvalidParameterValue` for `name`.
    pub fn invalid(name: &str, why: &str) -> Self {
        Self::sender(
            "InvalidParameterValue",
            format!("Value for parameter {name} is invalid. Reason: {why}"),
        )
    }

    /// The JSON protocol's `__type`: the modelled shape where SQS has one, else the code.
    pub fn json_type(&self) -> String {
        let shape = match self.code.as_str() {
            "AWS.SimpleQueueService.NonExistentQueue" => "QueueDoesNotExist",
            "QueueAlreadyExists" => "QueueNameExists",
            "AWS.SimpleQueueService.EmptyBatchRequest" => "EmptyBatchRequest",
            "AWS.SimpleQueueService.TooManyEntriesInBatchRequest" => "TooManyEntriesInBatchRequest",
            "AWS.SimpleQueueService.BatchEntryIdsNotDistinct" => "BatchEntryIdsNotDistinct",
            "AWS.SimpleQueueService.InvalidBatchEntryId" => "InvalidBatchEntryId",
            "AWS.SimpleQueueService.BatchRequestTooLong" => "BatchRequestTooLong",
            "AWS.SimpleQueueService.UnsupportedOperation" => "UnsupportedOperation",
            "ResourceNotFoundException" => "ResourceNotFoundException",
            other => return format!("com.amazonaws.sqs#{other}"),
        };
        format!("com.amazonaws.sqs#{shape}")
    }
}

impl From<shmfifo::Error> for ApiError {
    fn from(e: shmfifo::Error) -> Self {
        use shmfifo::Error as E;
        // What a client can fix (or wait out) is theirs, in SQS's words, and not a status
        // SDKs retry at once: a full queue is SQS's `OverLimit` (403). Only faults of the
        // server or its files are 5xx.
        let (code, sender, status) = match &e {
            E::SizeClassFull { .. }
            | E::NoSpace { .. }
            | E::GroupLimitReached { .. }
            | E::DedupTableFull { .. }
            | E::ParticipantLimitReached { .. } => ("OverLimit", true, 403),
            E::UntrustedFile { .. } => ("AccessDenied", true, 403),
            // SQS's status for it (DeleteMessage, ChangeMessageVisibility: H4).
            E::ReceiptHandleIsInvalid { .. } => ("ReceiptHandleIsInvalid", true, 404),
            E::DeadLetterQueue { .. } => ("InvalidParameterValue", true, 400),
            E::NotReady | E::DedupInProgress => ("ServiceUnavailable", false, 503),
            _ => match e.sqs_code() {
                "ServiceUnavailable" => ("ServiceUnavailable", false, 503),
                c if c.starts_with("shmfifo.") => (c, false, 500),
                c => (c, true, 400),
            },
        };
        let message = match e {
            // SQS's text: a remote client has no use for the server's file paths.
            shmfifo::Error::QueueDoesNotExist { .. } => {
                "The specified queue does not exist.".to_owned()
            }
            // A dead-letter queue by its name: its path may lie outside the served directory
            // (a policy written into the file, not through serve), which scrubbing the served
            // directory's path would leave whole.
            shmfifo::Error::DeadLetterQueue { path, reason } => {
                let name = path
                    .file_name()
                    .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
                let reason = reason.replace(&path.display().to_string(), &name);
                format!("dead-letter queue {name}: {reason}")
            }
            // SQS's words where they are recorded (S1, S12, H2, H4).
            e => e.sqs_message(),
        };
        ApiError {
            code: code.to_owned(),
            message,
            sender,
            status,
        }
    }
}

/// Which protocol a request came in, and so its answer goes out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wire {
    /// `application/x-amz-json-1.0`.
    Json,
    /// Form-encoded request, XML answer.
    Query,
}

/// Fields whose query-protocol text is a number in the JSON protocol.
const NUMERIC: [&str; 7] = [
    "MaxNumberOfMessages",
    "VisibilityTimeout",
    "WaitTimeSeconds",
    "DelaySeconds",
    "MaxResults",
    "MaxNumberOfMessagesPerSecond",
    "MaxResults",
];

/// The most parameters one query-protocol request may carry. A `SendMessageBatch` of ten
/// entries with ten message attributes each and every optional field carries about 400.
pub const MAX_QUERY_PARAMS: usize = 1_000;
/// The longest parameter name, bytes (`SendMessageBatchRequestEntry.10.MessageAttribute.10.Value.StringValue`
/// is 68).
pub const MAX_QUERY_KEY: usize = 256;
/// The most dot-separated segments of a parameter name (the deepest SQS name has 6).
pub const MAX_QUERY_DEPTH: usize = 8;

/// A flattened query parameter tree: `A.1.B` is `A → 1 → B`. Its depth is at most
/// [`MAX_QUERY_DEPTH`] (checked before anything is inserted), so the walks over it
/// ([`members`], and the tree's drop) recurse at most that deep whatever the input.
#[derive(Debug)]
enum Node {
    Leaf(String),
    Branch(BTreeMap<String, Node>),
}

/// Inserts `value` at `path` (iteratively: no recursion on input). A name that is both a
/// leaf and a prefix of a longer name keeps the longer one's branch.
fn insert(tree: &mut BTreeMap<String, Node>, path: &[&str], value: String) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut cur = tree;
    for seg in parents {
        let child = cur
            .entry((*seg).to_owned())
            .or_insert_with(|| Node::Branch(BTreeMap::new()));
        if let Node::Leaf(_) = child {
            *child = Node::Branch(BTreeMap::new());
        }
        cur = match child {
            Node::Branch(m) => m,
            Node::Leaf(_) => return,
        };
    }
    match cur.get(*last) {
        // `A.1=x` after `A.1.B=y`: the structure wins (SQS has no name that is both).
        Some(Node::Branch(_)) => {}
        _ => {
            cur.insert((*last).to_owned(), Node::Leaf(value));
        }
    }
}

/// The members of a numbered list (`X.1`, `X.2` …), in order of their numbers.
fn numbered(m: BTreeMap<String, Node>) -> Vec<Node> {
    let mut v: Vec<(u64, Node)> = m
        .into_iter()
        .filter_map(|(k, n)| k.parse::<u64>().ok().map(|i| (i, n)))
        .collect();
    v.sort_by_key(|(i, _)| *i);
    v.into_iter().map(|(_, n)| n).collect()
}

fn leaf(n: Node) -> Value {
    match n {
        Node::Leaf(s) => Value::String(s),
        Node::Branch(m) => Value::Object(members(m)),
    }
}

fn text(n: Option<Node>) -> Option<String> {
    match n {
        Some(Node::Leaf(s)) => Some(s),
        _ => None,
    }
}

/// `Name`/`Value` pairs (`Attribute.N`, `Tag.N` with `Key`) into a map.
fn pairs(list: Node, key: &str) -> Value {
    let mut out = Map::new();
    if let Node::Branch(m) = list {
        for e in numbered(m) {
            if let Node::Branch(mut f) = e {
                if let (Some(k), v) = (text(f.remove(key)), text(f.remove("Value"))) {
                    out.insert(k, Value::String(v.unwrap_or_default()));
                }
            }
        }
    }
    Value::Object(out)
}

/// `MessageAttribute.N.{Name, Value.{StringValue, BinaryValue, DataType}}` into a map.
fn message_attributes(list: Node) -> Value {
    let mut out = Map::new();
    if let Node::Branch(m) = list {
        for e in numbered(m) {
            if let Node::Branch(mut f) = e {
                if let Some(name) = text(f.remove("Name")) {
                    let v = f.remove("Value").map(leaf).unwrap_or(Value::Null);
                    out.insert(name, v);
                }
            }
        }
    }
    Value::Object(out)
}

fn list_of_text(n: Node) -> Value {
    match n {
        Node::Branch(m) => Value::Array(numbered(m).into_iter().map(leaf).collect()),
        Node::Leaf(s) => Value::Array(vec![Value::String(s)]),
    }
}

/// The members of one structure, with the query protocol's flattened lists and maps turned
/// into the JSON protocol's.
fn members(m: BTreeMap<String, Node>) -> Map<String, Value> {
    let mut out = Map::new();
    for (k, n) in m {
        let (key, v) = match k.as_str() {
            "Attribute" => ("Attributes".to_owned(), pairs(n, "Name")),
            "Tag" => ("tags".to_owned(), pairs(n, "Key")),
            "AttributeName" => ("AttributeNames".to_owned(), list_of_text(n)),
            "MessageAttributeName" => ("MessageAttributeNames".to_owned(), list_of_text(n)),
            "MessageSystemAttributeName" => {
                ("MessageSystemAttributeNames".to_owned(), list_of_text(n))
            }
            "MessageAttribute" => ("MessageAttributes".to_owned(), message_attributes(n)),
            "SendMessageBatchRequestEntry"
            | "DeleteMessageBatchRequestEntry"
            | "ChangeMessageVisibilityBatchRequestEntry" => (
                "Entries".to_owned(),
                match n {
                    Node::Branch(m) => Value::Array(
                        numbered(m)
                            .into_iter()
                            .map(|e| match e {
                                Node::Branch(f) => Value::Object(members(f)),
                                Node::Leaf(s) => Value::String(s),
                            })
                            .collect(),
                    ),
                    Node::Leaf(s) => Value::String(s),
                },
            ),
            _ => {
                let v = match n {
                    Node::Leaf(s) if NUMERIC.contains(&k.as_str()) => s
                        .trim()
                        .parse::<i64>()
                        .map(Value::from)
                        .unwrap_or(Value::String(s)),
                    other => leaf(other),
                };
                (k, v)
            }
        };
        out.insert(key, v);
    }
    out
}

fn malformed(why: impl Into<String>) -> ApiError {
    ApiError::sender("MalformedQueryString", why)
}

/// The value of a hex digit.
fn hex_digit(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// `application/x-www-form-urlencoded` decoding of one name or value into bytes: `+` is a
/// space, `%XX` a byte, and a `%` not followed by two hex digits stands for itself (as
/// browsers and the `form_urlencoded` crate read it).
fn percent_decode(s: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        match s[i] {
            b'+' => out.push(b' '),
            b'%' => match (
                s.get(i + 1).copied().and_then(hex_digit),
                s.get(i + 2).copied().and_then(hex_digit),
            ) {
                (Some(h), Some(l)) => {
                    out.push(h << 4 | l);
                    i += 2;
                }
                _ => out.push(b'%'),
            },
            b => out.push(b),
        }
        i += 1;
    }
    out
}

/// The form pairs of a query-protocol request, decoded and checked: names within
/// [`MAX_QUERY_KEY`] bytes and [`MAX_QUERY_DEPTH`] segments, at most [`MAX_QUERY_PARAMS`]
/// pairs, names and values valid UTF-8 (a body that is not is refused, never stored with
/// replacement characters).
pub fn form_pairs(form: &[u8]) -> Result<Vec<(String, String)>, ApiError> {
    let mut out = Vec::new();
    for pair in form.split(|&b| b == b'&') {
        if pair.is_empty() {
            continue;
        }
        if out.len() == MAX_QUERY_PARAMS {
            return Err(malformed(format!(
                "A request may carry at most {MAX_QUERY_PARAMS} parameters."
            )));
        }
        let (k, v) = match pair.iter().position(|&b| b == b'=') {
            Some(at) => (&pair[..at], &pair[at + 1..]),
            None => (pair, &pair[..0]),
        };
        let k = percent_decode(k);
        if k.len() > MAX_QUERY_KEY {
            return Err(malformed(format!(
                "A parameter name is {} bytes long; at most {MAX_QUERY_KEY} are accepted.",
                k.len()
            )));
        }
        let k =
            String::from_utf8(k).map_err(|_| malformed("A parameter name is not valid UTF-8."))?;
        if k.split('.').count() > MAX_QUERY_DEPTH {
            return Err(malformed(format!(
                "The parameter name {k} has more than {MAX_QUERY_DEPTH} parts."
            )));
        }
        let v = String::from_utf8(percent_decode(v)).map_err(|_| {
            if k.ends_with("MessageBody") || k.ends_with("StringValue") {
                ApiError::sender(
                    "InvalidMessageContents",
                    format!("The value of {k} is not valid UTF-8."),
                )
            } else {
                malformed(format!("The value of {k} is not valid UTF-8."))
            }
        })?;
        out.push((k, v));
    }
    Ok(out)
}

/// A query-protocol request (form pairs) as `(action, parameters)`; see [`form_pairs`] for
/// the bounds it checks.
pub fn from_query(form: &[u8]) -> Result<(String, Map<String, Value>), ApiError> {
    let mut tree = BTreeMap::new();
    let mut action = None;
    for (k, v) in form_pairs(form)? {
        if k == "Action" {
            action = Some(v);
            continue;
        }
        if matches!(k.as_str(), "Version" | "Expires" | "Timestamp")
            || k.starts_with("X-Amz-")
            || k.starts_with("AWSAccessKeyId")
            || k.starts_with("Signature")
        {
            continue;
        }
        let path: Vec<&str> = k.split('.').collect();
        insert(&mut tree, &path, v);
    }
    let action = action.ok_or_else(|| ApiError::missing("Action"))?;
    Ok((action, members(tree)))
}

/// The most structural tokens (`{`, `[`, `:`, `,` outside strings) a JSON request body may
/// hold: a batch of ten messages with ten attributes each has under a thousand. Without a
/// bound, a 4 MiB body of `[0,0,…]` parses into some 64 MiB of values, held while the request
/// runs (a long poll: 20 s).
pub const MAX_JSON_TOKENS: usize = 10_000;

/// The structural tokens of JSON text `body` outside its strings (a bound on its values and
/// members; one pass, no recursion).
fn json_tokens(body: &[u8]) -> usize {
    let (mut n, mut in_string, mut escaped) = (0, false, false);
    for &b in body {
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'{' | b'[' | b':' | b',' => n += 1,
            _ => {}
        }
    }
    n
}

/// A JSON-protocol request (`X-Amz-Target: AmazonSQS.<Action>` and its body) as
/// `(action, parameters)`. serde_json bounds the nesting (128 levels), so no body recurses
/// deeper; [`MAX_JSON_TOKENS`] bounds its values.
pub fn from_json(target: &str, body: &[u8]) -> Result<(String, Map<String, Value>), ApiError> {
    let action = target
        .strip_prefix("AmazonSQS.")
        .ok_or_else(|| {
            ApiError::sender(
                "InvalidAction",
                format!("The target {target} is not valid for this endpoint."),
            )
        })?
        .to_owned();
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok((action, Map::new()));
    }
    if json_tokens(body) > MAX_JSON_TOKENS {
        return Err(ApiError::sender(
            "SerializationException",
            format!("The request body holds more than {MAX_JSON_TOKENS} JSON values and members."),
        ));
    }
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(m)) => Ok((action, m)),
        Ok(_) => Err(ApiError::sender(
            "SerializationException",
            "The request body must be a JSON object.",
        )),
        Err(e) => Err(ApiError::sender(
            "SerializationException",
            format!("The request body is not JSON: {e}"),
        )),
    }
}

/// Escapes text for XML.
fn esc(s: &str, out: &mut String) {
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\r' => out.push_str("&#xD;"),
            // Characters XML 1.0 cannot carry at all (an error message quoting a client's
            // control characters): the replacement character, so the answer still parses.
            '\t' | '\n' => out.push(c),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
}

fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// One member of an answer, as the query protocol's XML writes it.
fn xml_member(action: &str, key: &str, v: &Value, out: &mut String) {
    let el = |name: &str, text: &str, out: &mut String| {
        out.push('<');
        out.push_str(name);
        out.push('>');
        esc(text, out);
        out.push_str("</");
        out.push_str(name);
        out.push('>');
    };
    match (key, v) {
        ("Attributes", Value::Object(m)) => {
            for (k, v) in m {
                out.push_str("<Attribute>");
                el("Name", k, out);
                el("Value", &scalar(v), out);
                out.push_str("</Attribute>");
            }
        }
        ("MessageAttributes", Value::Object(m)) => {
            for (k, v) in m {
                out.push_str("<MessageAttribute>");
                el("Name", k, out);
                out.push_str("<Value>");
                if let Value::Object(f) = v {
                    for (fk, fv) in f {
                        el(fk, &scalar(fv), out);
                    }
                }
                out.push_str("</Value></MessageAttribute>");
            }
        }
        (_, Value::Array(items)) => {
            let item = match key {
                "QueueUrls" | "queueUrls" => "QueueUrl",
                "Messages" => "Message",
                "Successful" => match action {
                    "SendMessageBatch" => "SendMessageBatchResultEntry",
                    "DeleteMessageBatch" => "DeleteMessageBatchResultEntry",
                    _ => "ChangeMessageVisibilityBatchResultEntry",
                },
                "Failed" => "BatchResultErrorEntry",
                "Results" => "ListMessageMoveTasksResultEntry",
                other => other,
            };
            for i in items {
                match i {
                    Value::Object(m) => {
                        out.push('<');
                        out.push_str(item);
                        out.push('>');
                        for (k, v) in m {
                            xml_member(action, k, v, out);
                        }
                        out.push_str("</");
                        out.push_str(item);
                        out.push('>');
                    }
                    other => el(item, &scalar(other), out),
                }
            }
        }
        (_, Value::Object(m)) => {
            out.push('<');
            out.push_str(key);
            out.push('>');
            for (k, v) in m {
                xml_member(action, k, v, out);
            }
            out.push_str("</");
            out.push_str(key);
            out.push('>');
        }
        (_, v) => el(key, &scalar(v), out),
    }
}

const XMLNS: &str = "http://queue.amazonaws.com/doc/2012-11-05/";

/// An answer in the query protocol's XML.
pub fn to_xml(action: &str, result: &Map<String, Value>, request_id: &str) -> String {
    let mut out = String::from("<?xml version=\"1.0\"?>");
    out.push_str(&format!("<{action}Response xmlns=\"{XMLNS}\">"));
    if !result.is_empty() {
        out.push_str(&format!("<{action}Result>"));
        for (k, v) in result {
            xml_member(action, k, v, &mut out);
        }
        out.push_str(&format!("</{action}Result>"));
    }
    out.push_str("<ResponseMetadata><RequestId>");
    esc(request_id, &mut out);
    out.push_str(&format!(
        "</RequestId></ResponseMetadata></{action}Response>"
    ));
    out
}

/// An error in the query protocol's XML.
pub fn error_xml(e: &ApiError, request_id: &str) -> String {
    let mut out = format!("<?xml version=\"1.0\"?><ErrorResponse xmlns=\"{XMLNS}\"><Error><Type>");
    out.push_str(if e.sender { "Sender" } else { "Receiver" });
    out.push_str("</Type><Code>");
    esc(&e.code, &mut out);
    out.push_str("</Code><Message>");
    esc(&e.message, &mut out);
    out.push_str("</Message><Detail/></Error><RequestId>");
    esc(request_id, &mut out);
    out.push_str("</RequestId></ErrorResponse>");
    out
}

/// An error in the JSON protocol: the body (the `x-amzn-query-error` header is the caller's).
pub fn error_json(e: &ApiError) -> String {
    serde_json::json!({"__type": e.json_type(), "message": e.message}).to_string()
}

#[cfg(test)]
mod tests {
    /// A body of many small values is refused before it is parsed (a 4 MiB one parsed into
    /// some 64 MiB); brackets and commas inside strings are text, not tokens.
    #[test]
    fn a_json_body_of_too_many_values_is_refused_unparsed() {
        let many = format!(
            r#"{{"QueueUrl":"q.fifo","Pad":[{}0]}}"#,
            "0,".repeat(super::MAX_JSON_TOKENS)
        );
        let e = super::from_json("AmazonSQS.ReceiveMessage", many.as_bytes()).unwrap_err();
        assert_eq!(e.code, "SerializationException");
        assert!(e.message.contains("more than"), "{}", e.message);
        let text = format!(
            r#"{{"QueueUrl":"q.fifo","MessageBody":"{}"}}"#,
            "[,{:".repeat(super::MAX_JSON_TOKENS)
        );
        let (_, m) = super::from_json("AmazonSQS.SendMessage", text.as_bytes()).unwrap();
        assert_eq!(m.len(), 2);
        let escaped = r#"{"a":"x\\\",[","b":1}"#;
        assert_eq!(super::json_tokens(escaped.as_bytes()), 4);
    }

    use super::*;

    #[test]
    fn query_lists_and_maps_become_json_shapes() {
        let form = b"Action=SendMessageBatch&QueueUrl=http%3A%2F%2Fh%2F0%2Fq.fifo\
&SendMessageBatchRequestEntry.2.Id=b&SendMessageBatchRequestEntry.2.MessageBody=two\
&SendMessageBatchRequestEntry.1.Id=a&SendMessageBatchRequestEntry.1.MessageBody=one\
&SendMessageBatchRequestEntry.1.MessageAttribute.1.Name=k\
&SendMessageBatchRequestEntry.1.MessageAttribute.1.Value.StringValue=v\
&SendMessageBatchRequestEntry.1.MessageAttribute.1.Value.DataType=String\
&SendMessageBatchRequestEntry.1.DelaySeconds=0&Version=2012-11-05";
        let (action, p) = from_query(form).unwrap();
        assert_eq!(action, "SendMessageBatch");
        assert_eq!(p["QueueUrl"], "http://h/0/q.fifo");
        let e = p["Entries"].as_array().unwrap();
        assert_eq!(e[0]["Id"], "a");
        assert_eq!(e[1]["MessageBody"], "two");
        assert_eq!(e[0]["DelaySeconds"], 0);
        assert_eq!(
            e[0]["MessageAttributes"]["k"],
            serde_json::json!({"StringValue": "v", "DataType": "String"})
        );
        let (_, p) = from_query(
            b"Action=CreateQueue&QueueName=q.fifo&Attribute.1.Name=FifoQueue&Attribute.1.Value=true&AttributeName.1=All",
        )
        .unwrap();
        assert_eq!(p["Attributes"]["FifoQueue"], "true");
        assert_eq!(p["AttributeNames"][0], "All");
        assert!(from_query(b"QueueUrl=x").is_err());
    }

    #[test]
    fn answers_and_errors_in_xml() {
        let mut r = Map::new();
        r.insert("QueueUrls".into(), serde_json::json!(["a", "b<"]));
        let x = to_xml("ListQueues", &r, "id");
        assert!(x.contains("<ListQueuesResult><QueueUrl>a</QueueUrl><QueueUrl>b&lt;</QueueUrl></ListQueuesResult>"), "{x}");
        let e = ApiError::missing("QueueUrl");
        let x = error_xml(&e, "id");
        assert!(
            x.contains("<Type>Sender</Type><Code>MissingParameter</Code>"),
            "{x}"
        );
        let e = ApiError::sender("X", "a\u{1}b\tc");
        assert!(error_xml(&e, "id").contains("<Message>a\u{FFFD}b\tc</Message>"));
        let e = ApiError::sender("AWS.SimpleQueueService.NonExistentQueue", "gone");
        assert_eq!(e.json_type(), "com.amazonaws.sqs#QueueDoesNotExist");
    }

    /// The trial's request that overflowed the stack (one recursion per segment): a name of
    /// 3,000 dot-separated segments is refused with a 400, as are over-long names, too many
    /// parameters and text that is not UTF-8 (never stored with U+FFFD replacements).
    #[test]
    fn hostile_forms_are_refused_not_crashed_on() {
        let deep = format!("Action=SendMessage&{}=1", "a.".repeat(3000));
        let e = from_query(deep.as_bytes()).unwrap_err();
        assert_eq!((e.code.as_str(), e.status), ("MalformedQueryString", 400));
        let deep9 = format!("Action=SendMessage&{}b=1", "a.".repeat(MAX_QUERY_DEPTH));
        assert_eq!(
            from_query(deep9.as_bytes()).unwrap_err().code,
            "MalformedQueryString"
        );
        let deep8 = format!("Action=SendMessage&{}b=1", "a.".repeat(MAX_QUERY_DEPTH - 1));
        assert!(from_query(deep8.as_bytes()).is_ok());
        let long = format!("Action=SendMessage&{}=1", "k".repeat(MAX_QUERY_KEY + 1));
        assert_eq!(
            from_query(long.as_bytes()).unwrap_err().code,
            "MalformedQueryString"
        );
        let many: String = (0..MAX_QUERY_PARAMS).map(|i| format!("&P{i}=1")).collect();
        let many = format!("Action=ListQueues{many}");
        assert_eq!(
            from_query(many.as_bytes()).unwrap_err().code,
            "MalformedQueryString"
        );
        let bad = b"Action=SendMessage&QueueUrl=q&MessageBody=%FF%FEx";
        let e = from_query(bad).unwrap_err();
        assert_eq!(e.code, "InvalidMessageContents");
        assert_eq!(
            from_query(b"Action=ListQueues&Queue%FFName=x")
                .unwrap_err()
                .code,
            "MalformedQueryString"
        );
        // A leaf and a longer name under it: the structure is kept, in either order.
        for form in [
            &b"Action=X&A.1=x&A.1.B=y"[..],
            &b"Action=X&A.1.B=y&A.1=x"[..],
        ] {
            let (_, p) = from_query(form).unwrap();
            assert_eq!(p["A"]["1"]["B"], "y", "{}", String::from_utf8_lossy(form));
        }
        // Percent escapes, `+`, and a stray `%` as form decoding reads them.
        let (_, p) = from_query(b"Action=X&QueueUrl=a%2Fb+c%2&Empty").unwrap();
        assert_eq!(p["QueueUrl"], "a/b c%2");
        assert_eq!(p["Empty"], "");
    }
}
