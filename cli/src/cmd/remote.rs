//! The commands that make sense for SQS (`send`, `receive`, `delete`, `purge`, `stat`, `set`)
//! on an SQS queue URL (`https://…/NAME.fifo`, `http://…` for a local endpoint, or
//! `sqs://NAME.fifo`), through `shmfifo_sqs` (aws-sdk-sqs; credentials, region and
//! `AWS_ENDPOINT_URL` from the environment, as the `aws` CLI takes them). That needs the
//! `sqs` feature (on by default); a CLI built without it says so for every queue URL.

use std::time::Duration;

use serde_json::{json, Map, Value};
use shmfifo::{FifoQueue, ReceiveOptions, SendMessage};

use super::{print_json, Ctx, Shown};
use crate::errors::Failure;
use crate::output::{kv, out};

/// Whether a queue argument names an SQS queue rather than a local one.
pub fn is_remote(queue: &str) -> bool {
    queue.starts_with("https://") || queue.starts_with("http://") || queue.starts_with("sqs://")
}

/// Opens the SQS queue a queue argument names.
#[cfg(feature = "sqs")]
pub fn open(queue: &str) -> Result<Box<dyn FifoQueue>, Failure> {
    shmfifo_sqs::open_url(queue).map_err(|e| Failure::queue(queue, e))
}

/// Without the `sqs` feature: no SQS queue can be opened.
#[cfg(not(feature = "sqs"))]
pub fn open(queue: &str) -> Result<Box<dyn FifoQueue>, Failure> {
    Err(without_sqs(queue))
}

/// The failure of a queue URL given to a CLI built without the `sqs` feature: what is off and
/// how to get it.
#[cfg_attr(feature = "sqs", allow(dead_code))]
pub fn without_sqs(queue: &str) -> Failure {
    Failure::Usage {
        source: queue.to_owned(),
        what: "an SQS queue URL, but this shmfifo was built without the `sqs` feature (SQS \
               queue URLs and the bridge's counters in stat): reinstall it with default \
               features (`cargo install --locked --path cli`), or name a local queue"
            .to_owned(),
    }
}

/// `send` of one message.
pub fn send(queue: &str, msg: &SendMessage<'_>, ctx: Ctx) -> Result<(), Failure> {
    let q = open(queue)?;
    let r = q.send(msg).map_err(|e| Failure::queue(queue, e))?;
    if ctx.json {
        let mut v = json!({
            "MessageId": r.message_id,
            "SequenceNumber": r.sequence_number,
        });
        super::add_send_digests(&mut v, msg);
        print_json(&v);
    } else {
        out(&kv(
            &[
                ("MessageId", r.message_id),
                ("SequenceNumber", r.sequence_number),
            ],
            0,
        ));
    }
    Ok(())
}

/// `receive` (with `--delete`, each message deleted once printed).
pub fn receive(
    queue: &str,
    opts: &ReceiveOptions,
    attempt_id: Option<&str>,
    delete: bool,
    ctx: Ctx,
) -> Result<(), Failure> {
    let q = open(queue)?;
    let got = q
        .receive(opts, attempt_id)
        .map_err(|e| Failure::queue(queue, e))?;
    let shown: Vec<Shown<'_>> = got
        .iter()
        .map(|m| Shown {
            message_id: m.message_id.clone(),
            receipt_handle: Some(m.receipt_handle.clone()),
            body: &m.body,
            body_bytes: None,
            group_id: &m.group_id,
            dedup_id: m.dedup_id.as_deref(),
            sequence_number: m.sequence_number.parse().unwrap_or(0),
            sent_timestamp: m.sent_timestamp,
            first_receive_timestamp: m.first_receive_timestamp,
            receive_count: m.receive_count,
            dead_letter_source: None,
            attributes: &m.attributes,
        })
        .collect();
    if !super::receive::print_messages(&shown, ctx) {
        for m in &got {
            let _ = q.change_visibility(&m.receipt_handle, std::time::Duration::ZERO);
        }
        return Err(super::receive::not_written(queue));
    }
    if delete {
        for m in &got {
            q.delete(&m.receipt_handle)
                .map_err(|e| Failure::queue(queue, e))?;
        }
    }
    Ok(())
}

/// `delete` of each receipt handle; the exit code is the first failure's.
pub fn delete(queue: &str, receipts: &[String], ctx: Ctx) -> Result<(), Failure> {
    let q = open(queue)?;
    let results: Vec<(&str, shmfifo::Result<()>)> =
        receipts.iter().map(|h| (h.as_str(), q.delete(h))).collect();
    if ctx.json {
        print_json(&json!({
            "Successful": results.iter().filter(|r| r.1.is_ok()).map(|r| json!({"Id": r.0})).collect::<Vec<_>>(),
            "Failed": results.iter().filter_map(|r| r.1.as_ref().err().map(|e| json!({"Id": r.0, "Code": e.sqs_code(), "Message": e.to_string(), "SenderFault": true}))).collect::<Vec<_>>(),
        }));
    } else {
        for (h, r) in &results {
            if r.is_ok() {
                out(&format!("deleted {h}\n"));
            }
        }
    }
    match results.into_iter().find_map(|r| r.1.err()) {
        Some(e) => Err(Failure::queue(queue, e)),
        None => Ok(()),
    }
}

/// `purge`.
pub fn purge(queue: &str, ctx: Ctx) -> Result<(), Failure> {
    open(queue)?.purge().map_err(|e| Failure::queue(queue, e))?;
    if ctx.json {
        print_json(&json!({"queue": queue, "purged": Value::Null}));
    } else {
        out(&format!("purged {queue} (SQS does not say how many)\n"));
    }
    Ok(())
}

/// `set` of one attribute: SQS takes whole seconds, so a duration with a unit is converted.
pub fn set(queue: &str, name: &str, value: &str, ctx: Ctx) -> Result<(), Failure> {
    let plain = value.trim().bytes().all(|b| b.is_ascii_digit());
    let v = if !plain
        && matches!(
            name,
            "VisibilityTimeout"
                | "DelaySeconds"
                | "MessageRetentionPeriod"
                | "ReceiveMessageWaitTimeSeconds"
        ) {
        let d: Duration = crate::parse::duration(value)
            .map_err(|why| Failure::input(format!("{name} value"), why))?;
        d.as_secs().to_string()
    } else {
        value.to_owned()
    };
    open(queue)?
        .set_attribute(name, &v)
        .map_err(|e| Failure::queue(queue, e))?;
    if ctx.json {
        print_json(&json!({"queue": queue, "attribute": name, "value": v}));
    } else {
        out(&format!("{queue}: {name} = {v}\n"));
    }
    Ok(())
}

/// `stat`: the queue's attributes as SQS reports them.
pub fn stat(queue: &str, ctx: Ctx) -> Result<(), Failure> {
    let attrs = open(queue)?
        .attributes()
        .map_err(|e| Failure::queue(queue, e))?;
    if ctx.json {
        let m: Map<String, Value> = attrs
            .into_iter()
            .map(|(k, v)| (k, Value::String(v)))
            .collect();
        print_json(&json!({"queue": queue, "Attributes": m}));
    } else {
        let rows: Vec<(&str, String)> =
            attrs.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
        out(&format!("{queue}\n{}", kv(&rows, 2)));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A queue URL is told apart from a path; the lean build's refusal is a usage error that
    /// names the feature and the way to get it.
    #[test]
    fn queue_urls_and_the_refusal_without_the_sqs_feature() {
        for url in [
            "https://sqs.us-east-1.amazonaws.com/1/q.fifo",
            "http://127.0.0.1:9324/000000000000/q.fifo",
            "sqs://q.fifo",
        ] {
            assert!(is_remote(url), "{url}");
        }
        assert!(!is_remote("/dev/shm/q") && !is_remote("q"));
        let f = without_sqs("sqs://q.fifo");
        assert_eq!(f.exit_code(), crate::errors::USAGE);
        let text = f.report().unwrap();
        assert!(
            text.starts_with("shmfifo: sqs://q.fifo: ")
                && text.contains("without the `sqs` feature")
                && text.contains("cargo install --locked --path cli"),
            "{text}"
        );
        #[cfg(not(feature = "sqs"))]
        assert!(matches!(open("sqs://q.fifo"), Err(Failure::Usage { .. })));
    }
}
