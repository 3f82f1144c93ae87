//! `shmfifo send`: one message (body from an argument, a file or stdin) or a batch of JSON
//! lines, sent 10 at a time with `send_batch`.

use std::io::Read;
use std::path::PathBuf;

use clap::{ArgGroup, Args};
use serde_json::{json, Value};
use shmfifo::{BatchEntry, Queue, SendMessage, SendResult};

use super::{open, print_json, Ctx};
use crate::batch_input::{parse_lines, Outgoing};
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
StringValue or base64 BinaryValue. Every entry is parsed and checked as a send checks it \
before the first batch is sent; entries go 10 (and at most 1 MiB) per send_batch, in order, up \
to the first one refused (which fails alone: a later message of its group would overtake it), \
and a batch with a failure is the last one sent. --json answers as aws does: {\"Successful\": [{\"Id\", \"MessageId\", \
\"MD5OfMessageBody\", \"SequenceNumber\", ...}], \"Failed\": [{\"Id\", \"SenderFault\", \"Code\", \
\"Message\"}]}, each Id the entry's own (its line or entry number where it has none), plus \
\"Unsent\" (entries after a failed one) and, per entry, \"Duplicate\" or \"Kind\" and \"ExitCode\"."
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
    /// Send the messages of a JSON-lines file (`-`: stdin), 10 per send_batch. An empty input
    /// (a `receive --json` that found nothing, piped on) sends nothing and succeeds.
    #[arg(long, value_name = "FILE|-")]
    pub batch: Option<String>,
    /// When the message's size class is full, wait up to DURATION (`30s`, `5m`, or plain
    /// seconds) for a consumer to free a slot instead of failing at once (backpressure). With
    /// --batch, messages are then sent one at a time, in order, each waiting as long.
    #[arg(long, value_name = "DURATION", value_parser = parse::duration)]
    pub wait: Option<std::time::Duration>,
}

/// The most bytes a single message's body read from a file or stdin may have: the largest
/// message any queue takes (1 MiB). A longer input is refused once one byte more is read, not
/// read to its end (`--file /dev/zero` ran until memory ran out, and Ctrl-C could not stop it).
const MAX_BODY_READ: u64 = shmfifo::MAX_MESSAGE_SIZE_LIMIT as u64;

/// The most bytes of a `--batch` input (JSON lines, held in memory while they are sent).
const MAX_BATCH_READ: u64 = 256 << 20;

fn read_all(source: &str, r: &mut dyn Read) -> Result<String, Failure> {
    String::from_utf8(read_raw(source, r, MAX_BATCH_READ)?).map_err(|e| {
        Failure::input(
            source,
            format!(
                "not UTF-8 text (a message body is text) at byte {}",
                e.utf8_error().valid_up_to()
            ),
        )
    })
}

/// At most `max` bytes of `r`: more is an input error.
fn read_raw(source: &str, r: &mut dyn Read, max: u64) -> Result<Vec<u8>, Failure> {
    let mut v = Vec::new();
    r.take(max + 1)
        .read_to_end(&mut v)
        .map_err(|e| Failure::input(source, e))?;
    if v.len() as u64 > max {
        return Err(Failure::input(
            source,
            format!(
                "longer than {max} bytes, the most {} (not read further)",
                if max == MAX_BODY_READ {
                    "a message may have (MaximumMessageSize is at most 1 MiB)"
                } else {
                    "a --batch input may have (send it in parts)"
                }
            ),
        ));
    }
    Ok(v)
}

/// A single send's body from a file or stdin: text, or (for a binary queue) any bytes.
fn read_body(path: &str) -> Result<(String, Option<Vec<u8>>), Failure> {
    let raw = if path == "-" {
        read_raw("stdin", &mut std::io::stdin().lock(), MAX_BODY_READ)?
    } else {
        let mut f = std::fs::File::open(path).map_err(|e| Failure::input(path, e))?;
        read_raw(path, &mut f, MAX_BODY_READ)?
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

/// [`Queue::send_timeout`] that Ctrl-C or SIGTERM ends within 100 ms (once the caller has
/// called [`crate::catch_interrupts`]): `None` if they did (the message not sent), else the
/// send's result.
fn send_waiting(
    q: &Queue,
    msg: &SendMessage<'_>,
    t: std::time::Duration,
) -> Option<shmfifo::Result<shmfifo::SendResult>> {
    let slice = std::time::Duration::from_millis(100);
    // A wait too long for the clock (`--wait` takes any duration): a century is as long.
    let until = std::time::Instant::now()
        .checked_add(t)
        .or_else(|| {
            std::time::Instant::now()
                .checked_add(std::time::Duration::from_secs(100 * 365 * 86_400))
        })
        .unwrap_or_else(std::time::Instant::now);
    loop {
        if crate::interrupted() {
            return None;
        }
        let left = until.saturating_duration_since(std::time::Instant::now());
        // What `send_timeout` waits out: a full class, and a growth the file system refused.
        match q.send_timeout(msg, left.min(slice)) {
            Err(shmfifo::Error::SizeClassFull { .. } | shmfifo::Error::NoSpace { .. })
                if left > slice =>
            {
                continue
            }
            r => return Some(r),
        }
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
        let msgs = parse_lines(&name, &text).map_err(|e| Failure::input(e.source, e.what))?;
        if a.wait.is_some() {
            // Before the open: from here Ctrl-C ends the wait and closes the handle cleanly.
            crate::catch_interrupts();
        }
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
    if a.wait.is_some() {
        // Before the open (and after the body is read: a Ctrl-C while it is read ends the
        // command at once, nothing sent).
        crate::catch_interrupts();
    }
    let q = open(&a.queue)?;
    if let (Some(b), shmfifo::BodyMode::Text) = (&m.bytes, q.body_mode()) {
        return Err(not_text(&source, b));
    }
    let msg = m.message(&attrs);
    let r = match a.wait {
        Some(t) => send_waiting(&q, &msg, t).ok_or(Failure::Interrupted {
            what: format!("{}: interrupted while waiting for room; not sent", a.queue),
        })?,
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
    /// Ctrl-C or SIGTERM ended a `--wait` (the messages from there not sent).
    interrupted: bool,
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
            match send_waiting(q, &m.message(&m.attribute_views()), t) {
                Some(Ok(r)) => o.ok.push((m, r)),
                Some(Err(e)) => {
                    o.failed.push((m, e));
                    break;
                }
                None => {
                    o.interrupted = true;
                    break;
                }
            }
        }
    } else {
        // Every entry is checked before any is sent: a batch's entries fail one by one
        // (S13), and an entry after a refused one, of its group, would still be enqueued,
        // ahead of the refused one's retry. So the messages go up to the first one refused,
        // which then fails alone. (An entry without a group is left to the batch request,
        // which refuses its whole batch as SQS does, S12.)
        let refused_at = msgs.iter().enumerate().find_map(|(i, m)| {
            let attrs = m.attribute_views();
            let msg = m.message(&attrs);
            msg.group_id?;
            q.check_send(&msg).err().map(|e| (i, e))
        });
        let upto = refused_at.as_ref().map_or(msgs.len(), |(i, _)| *i);
        for batch in batches(&msgs[..upto]) {
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
        if o.failed.is_empty() && o.refused.is_none() {
            if let Some((i, e)) = refused_at {
                o.failed.push((&msgs[i], e));
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
    if o.interrupted {
        return Err(Failure::Interrupted {
            what: format!(
                "{queue}: interrupted while waiting for room; {} of {} messages sent, {} not sent",
                o.ok.len(),
                msgs.len(),
                msgs.len() - o.ok.len()
            ),
        });
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
