//! Answers built from the library's results: a batch's `Successful` and `Failed`, and a
//! received message with the attributes asked for.

use std::path::Path;

use base64::Engine as _;
use serde_json::{json, Map, Value};
use shmfifo::{Message, LOCAL_ARN_PREFIX};

use super::{obj, triples, wanted};
use crate::digest::{md5_hex, md5_of_attributes};
use crate::protocol::ApiError;

/// A batch answer: `Successful` and `Failed`.
pub(super) fn batch_out(
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

pub(super) fn message_out(
    m: &Message,
    system: &[String],
    wanted_attrs: &[String],
) -> Map<String, Value> {
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
