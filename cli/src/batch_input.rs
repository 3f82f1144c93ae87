//! `send --batch`'s input: messages parsed from JSON, in the shapes `aws sqs
//! send-message-batch`, `receive --json` and this command's own lines print or take. What a
//! caller feeds it is untrusted: the parsers are bounded (serde_json's depth limit, no
//! recursion of their own) and fuzzed (the `cli_input` target, `fuzz/common/cli.rs`, which
//! includes this file and replays its kept inputs in this crate's tests).

use serde_json::Value;
use shmfifo::SendMessage;

use crate::parse::Attribute;

/// Where the input is wrong, and why (the CLI's input error, exit code 3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadInput {
    /// The file and the line or entry: `t line 3`, `batch.json entry 2`, or the file alone.
    pub source: String,
    /// What is wrong there.
    pub what: String,
}

impl BadInput {
    fn new(source: impl Into<String>, what: impl std::fmt::Display) -> BadInput {
        BadInput {
            source: source.into(),
            what: what.to_string(),
        }
    }
}

/// One message to send, owned.
#[derive(Debug, Clone, Default)]
pub struct Outgoing {
    /// Line or entry number in the batch input (1-based; 0 for a single send).
    pub line: usize,
    /// Where it is in the input, for messages: `line 3`, `entry 2` (empty for a single send).
    pub at: String,
    /// Its batch entry id: the caller's `Id` (aws's entries), else the line or entry number.
    pub id: String,
    /// Whether `id` is the caller's.
    pub own_id: bool,
    /// Its message group id.
    pub group: Option<String>,
    /// Its deduplication id.
    pub dedup_id: Option<String>,
    /// Its body as text.
    pub body: String,
    /// A body of bytes (a binary queue's: a file that is not UTF-8, or a `receive --json`
    /// body in base64), sent instead of `body`.
    pub bytes: Option<Vec<u8>>,
    /// Its message attributes.
    pub attributes: Vec<Attribute>,
    /// `DelaySeconds` of an aws entry (a FIFO queue takes only 0, as SQS: per queue).
    pub delay_seconds: Option<u32>,
}

impl Outgoing {
    /// The attributes as the library takes them (borrowing from `self`).
    pub fn attribute_views(&self) -> Vec<shmfifo::MessageAttribute<'_>> {
        self.attributes
            .iter()
            .map(Attribute::as_message_attribute)
            .collect()
    }

    /// The message as the library sends it, its attributes `attrs` (from
    /// [`Outgoing::attribute_views`]).
    pub fn message<'a>(&'a self, attrs: &'a [shmfifo::MessageAttribute<'a>]) -> SendMessage<'a> {
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
    pub fn place(&self) -> String {
        if self.own_id {
            format!("{} (Id {})", self.at, self.id)
        } else {
            self.at.clone()
        }
    }

    /// Bytes as `send_batch` counts them against its 1 MiB limit.
    pub fn counted_bytes(&self) -> usize {
        self.bytes.as_ref().map_or(self.body.len(), Vec::len)
            + self
                .attributes
                .iter()
                .map(|a| a.name.len() + a.data_type.len() + a.value.len())
                .sum::<usize>()
    }
}

/// Parses batch input: one JSON document, or JSON lines (blank lines skipped). A document is
/// `aws sqs send-message-batch`'s input (`{"QueueUrl", "Entries": [...]}`, `QueueUrl` not
/// read: the command's queue argument is where messages go), a bare list of entries, or
/// `receive --json`'s `{"Messages": [...]}`, so `shmfifo receive A --json | jq ... | shmfifo
/// send B --batch -` works. Each entry is in one of the shapes of [`parse_line`].
pub fn parse_lines(source: &str, text: &str) -> Result<Vec<Outgoing>, BadInput> {
    let whole: Option<Value> = serde_json::from_str(text).ok();
    let items: Option<Vec<Value>> = match whole {
        Some(Value::Array(a)) => Some(a),
        Some(Value::Object(o)) if o.contains_key("Entries") => {
            if let Some(k) = o
                .keys()
                .find(|k| !["QueueUrl", "Entries"].contains(&k.as_str()))
            {
                return Err(BadInput::new(
                    source,
                    format!("unknown key {k:?} beside \"Entries\" (keys: QueueUrl, Entries)"),
                ));
            }
            Some(
                o.get("Entries")
                    .and_then(Value::as_array)
                    .cloned()
                    .ok_or_else(|| BadInput::new(source, "\"Entries\" must be a list"))?,
            )
        }
        Some(Value::Object(o)) if o.len() == 1 && o.contains_key("Messages") => {
            o.get("Messages").and_then(Value::as_array).cloned()
        }
        _ => None,
    };
    let mut out = Vec::new();
    let mut push = |v: &Value, kind: &str, n: usize| -> Result<(), BadInput> {
        let at = format!("{kind} {n}");
        let mut m = parse_line(v).map_err(|e| BadInput::new(format!("{source} {at}"), e))?;
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
    let mut lines = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Value>(line) {
            Ok(v) => lines.push((v, i + 1)),
            // Not one value a line: a stream of values over several lines each, as `jq`
            // prints them without `-c` (`receive --json | jq '.Messages[]'`), numbered in
            // order; a stream that does not parse either is reported at the line.
            Err(e) => {
                return match values(text) {
                    Ok(vs) => {
                        for (n, v) in vs.iter().enumerate() {
                            push(v, "value", n + 1)?;
                        }
                        Ok(out)
                    }
                    // Where the stream stopped past this line on a malformed value (not at the
                    // end of the input: a last line cut short is that line's error), the
                    // input is a stream with an error further down: said where.
                    Err(se) if se.line() > i + 1 && !se.is_eof() => Err(BadInput::new(source, se)),
                    Err(_) => Err(BadInput::new(format!("{source} line {}", i + 1), e)),
                };
            }
        }
    }
    for (v, n) in &lines {
        push(v, "line", *n)?;
    }
    Ok(out)
}

/// `text` as a stream of JSON values separated by whitespace (any layout), or where it stops
/// being one.
fn values(text: &str) -> Result<Vec<Value>, serde_json::Error> {
    serde_json::Deserializer::from_str(text)
        .into_iter::<Value>()
        .collect()
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
        // Only its keys: a misspelled one (`MessageAtributes`) would drop what it holds.
        allow(&[
            "MessageId",
            "ReceiptHandle",
            "MD5OfBody",
            "Body",
            "BodyEncoding",
            "Attributes",
            "MD5OfMessageAttributes",
            "MessageAttributes",
        ])?;
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
                Err(BadInput { source, .. }) => assert_eq!(source, at, "{bad}"),
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
            assert!(parse_lines("t", bad).is_err(), "{bad}");
        }
    }

    /// A message in `receive --json`'s shape with a misspelled key was taken, the key's
    /// content dropped (attributes lost); now it is refused, as the other shapes' are.
    #[test]
    fn a_received_message_with_an_unknown_key_is_refused() {
        let bad = r#"{"Body": "y", "Attributes": {"MessageGroupId": "g"}, "MessageAtributes": {"k": "v"}}"#;
        let e = parse_lines("t", bad).unwrap_err();
        assert!(format!("{e:?}").contains("MessageAtributes"), "{e:?}");
        let ok = r#"{"MessageId": "m", "ReceiptHandle": "h", "MD5OfBody": "x", "Body": "y", "Attributes": {"MessageGroupId": "g"}, "MD5OfMessageAttributes": "z", "MessageAttributes": {"k": {"DataType": "String", "StringValue": "v"}}}"#;
        let m = parse_lines("t", ok).unwrap();
        assert_eq!(
            (m[0].group.as_deref(), m[0].attributes.len()),
            (Some("g"), 1)
        );
    }

    /// `receive --json | jq '.Messages[]' | send --batch -`: jq prints each value over several
    /// lines unless told `-c`; the stream of values is taken as a stream of entries (it was
    /// "EOF while parsing" at line 1, and with `receive --delete` upstream the messages gone).
    #[test]
    fn a_stream_of_pretty_printed_values_is_taken() {
        let pretty = "{\n  \"Body\": \"a\",\n  \"Attributes\": {\n    \"MessageGroupId\": \"g\"\n  }\n}\n{\n  \"Body\": \"b\",\n  \"Attributes\": {\"MessageGroupId\": \"g\"}\n}\n";
        let m = parse_lines("t", pretty).unwrap();
        let bodies: Vec<&str> = m.iter().map(|m| m.body.as_str()).collect();
        assert_eq!(bodies, ["a", "b"]);
        assert_eq!(m[1].place(), "value 2");
        // Neither lines nor a stream: the first line that does not parse is named...
        let e = parse_lines("t", "{\"body\": \"a\"}\n{oops\n").unwrap_err();
        assert!(format!("{e:?}").contains("t line 2"), "{e:?}");
        // ...and in a pretty-printed stream, where it stopped (it said line 1).
        let e = parse_lines("t", "{\n  \"body\": \"a\"\n}\n{\n  \"body\": oops\n}\n").unwrap_err();
        assert!(format!("{e:?}").contains("line 5"), "{e:?}");
    }
}
