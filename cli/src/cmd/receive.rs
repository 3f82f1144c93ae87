//! `shmfifo receive`, `delete`, `change-visibility` and `peek`.

use std::time::Duration;

use clap::Args;
use serde_json::{json, Value};
use shmfifo::ReceiveOptions;

use super::{observe, open, print_json, Ctx, Shown};
use crate::errors::{self, Failure};
use crate::output::{duration, out};
use crate::parse;

/// Arguments of `receive`.
#[derive(Args, Debug)]
pub struct ReceiveArgs {
    /// Queue NAME (/dev/shm/NAME) or path (anything containing '/').
    pub queue: String,
    /// MaxNumberOfMessages, 1-10.
    #[arg(
        long,
        short = 'n',
        value_name = "N",
        default_value_t = 1,
        visible_alias = "max-number-of-messages"
    )]
    pub max: u32,
    /// WaitTimeSeconds: wait up to this long for a first message (at most 20s; a longer one
    /// is refused) [default: the queue's ReceiveMessageWaitTimeSeconds].
    #[arg(long, short = 'w', value_name = "DURATION", value_parser = parse::wait_time,
          visible_alias = "wait-time-seconds")]
    pub wait: Option<Duration>,
    /// VisibilityTimeout of the received messages [default: the queue's].
    #[arg(long, value_name = "DURATION", value_parser = parse::duration)]
    pub visibility_timeout: Option<Duration>,
    /// ReceiveRequestAttemptId: a retry with the same id within 5 minutes returns the same
    /// messages and receipt handles.
    #[arg(long, value_name = "ID", visible_alias = "receive-request-attempt-id")]
    pub attempt_id: Option<String>,
    /// Delete the messages once received and printed (a failed write deletes none: they are
    /// made visible again, exit code 35). A queue whose own visibility timeout is 0 is received
    /// from with 30 s (--visibility-timeout 0 is refused: the deletes would find the handles
    /// stale).
    #[arg(long)]
    pub delete: bool,
}

/// Receives and prints messages. As `aws sqs receive-message`: nothing printed and exit code 0
/// when there was none.
pub fn receive(a: &ReceiveArgs, ctx: Ctx) -> Result<(), Failure> {
    // With --delete the messages are deleted once printed, by their receipt handles, which a
    // visibility timeout of 0 makes stale at once (H2): every delete failed and the messages
    // came back. A zero asked for is refused; the queue's own zero is not used.
    let visibility_timeout = match a.visibility_timeout {
        Some(d) if a.delete && d.is_zero() => {
            return Err(Failure::Usage {
                source: "--visibility-timeout 0".into(),
                what: "with --delete the messages must stay received until they are printed \
                       and deleted: leave --visibility-timeout out, or give it a time"
                    .into(),
            })
        }
        v => v,
    };
    if super::remote::is_remote(&a.queue) {
        let mut opts = ReceiveOptions::max(a.max);
        opts.visibility_timeout = visibility_timeout;
        opts.wait_time = a.wait;
        return super::remote::receive(&a.queue, &opts, a.attempt_id.as_deref(), a.delete, ctx);
    }
    // Before the open: a Ctrl-C from here on ends the poll and closes the handle cleanly.
    crate::catch_interrupts();
    let q = open(&a.queue)?;
    let mut opts = ReceiveOptions::max(a.max);
    // The queue's own timeout, unless it is 0 (then 30 s, for --delete).
    opts.visibility_timeout = visibility_timeout.or_else(|| {
        (a.delete && q.attributes().visibility_timeout.is_zero()).then_some(DELETE_VISIBILITY)
    });
    // One long poll that Ctrl-C or SIGTERM ends within 100 ms (the handle then closes
    // cleanly); an empty one counts once in NumberOfEmptyReceives and records no attempt id.
    opts.wait_time = a.wait;
    let mut buf = shmfifo::ReceiveBuffer::new();
    let cancel = crate::interrupt_flag();
    let n = q
        .receive_cancellable_into(&opts, a.attempt_id.as_deref(), &cancel, &mut buf)
        .map_err(|e| Failure::queue(&a.queue, e))?;
    let msgs = &buf.messages()[..n];
    let shown: Vec<Shown<'_>> = msgs.iter().map(Shown::from).collect();
    // Printed first, deleted only once printed: a message deleted and then not written (a
    // full disk, a reader gone from the pipe) would be lost.
    if !print_messages(&shown, ctx) {
        // Visible again at once for the next receiver, not in flight for the timeout.
        for m in msgs {
            let _ = q.change_visibility(&m.receipt_handle, std::time::Duration::ZERO);
        }
        return Err(not_written(&a.queue));
    }
    if a.delete {
        let mut delete_error = None;
        for m in msgs {
            if let Err(e) = q.delete(&m.receipt_handle) {
                delete_error.get_or_insert(e);
            }
        }
        if let Some(e) = delete_error {
            return Err(Failure::queue(&a.queue, e));
        }
    }
    Ok(())
}

/// The visibility timeout of `receive --delete` without `--visibility-timeout` on a queue whose
/// own is 0 (which would make the deletes fail): long enough to print and delete.
const DELETE_VISIBILITY: std::time::Duration = std::time::Duration::from_secs(30);

/// The failure of a receive whose messages could not be written out: none deleted.
pub(super) fn not_written(queue: &str) -> Failure {
    Failure::queue(
        queue,
        shmfifo::Error::Io(std::io::Error::other(
            "the messages received could not be written to standard output (a full disk, a \
             reader gone from the pipe); none was deleted, and they are visible again",
        )),
    )
}

/// Prints messages as `aws sqs receive-message` does with `--json`: `{"Messages": [...]}`, and
/// nothing at all when there are none. Returns whether what it printed was written.
pub(super) fn print_messages(msgs: &[Shown<'_>], ctx: Ctx) -> bool {
    if msgs.is_empty() {
        if !ctx.json {
            eprintln!("no messages");
        }
        true
    } else if ctx.json {
        crate::output::json(
            &json!({"Messages": Value::Array(msgs.iter().map(Shown::json).collect())}),
            true,
        )
    } else {
        let text: Vec<String> = msgs.iter().map(Shown::text).collect();
        out(&text.join("\n"))
    }
}

/// Arguments of `peek`.
#[derive(Args, Debug)]
pub struct PeekArgs {
    /// Queue NAME (/dev/shm/NAME) or path (anything containing '/').
    pub queue: String,
    /// Most messages to show (at least 1).
    #[arg(long, short = 'n', value_name = "N", default_value_t = 10,
          value_parser = crate::parse::at_least_one)]
    pub max: usize,
}

/// Prints what a receive would return now, changing nothing; exit code 1 when nothing is
/// visible.
pub fn peek(a: &PeekArgs, ctx: Ctx) -> Result<(), Failure> {
    let q = observe(&a.queue)?;
    let msgs = q.peek(a.max).map_err(|e| Failure::queue(&a.queue, e))?;
    drop(q);
    let shown: Vec<Shown<'_>> = msgs.iter().map(Shown::from).collect();
    print_messages(&shown, ctx);
    if msgs.is_empty() {
        return Err(Failure::Empty);
    }
    Ok(())
}

/// Arguments of `delete`.
#[derive(Args, Debug)]
pub struct DeleteArgs {
    /// Queue NAME (/dev/shm/NAME) or path (anything containing '/').
    pub queue: String,
    /// Receipt handles, as `receive` prints them.
    #[arg(required = true, value_name = "RECEIPT")]
    pub receipts: Vec<String>,
}

/// Deletes each message; the exit code is the first failure's.
pub fn delete(a: &DeleteArgs, ctx: Ctx) -> Result<(), Failure> {
    if super::remote::is_remote(&a.queue) {
        return super::remote::delete(&a.queue, &a.receipts, ctx);
    }
    let q = open(&a.queue)?;
    let results: Vec<(&str, Result<(), shmfifo::Error>)> = a
        .receipts
        .iter()
        .map(|h| (h.as_str(), q.delete_str(h)))
        .collect();
    drop(q);
    if ctx.json {
        print_json(&json!({
            "Successful": results.iter().filter(|r| r.1.is_ok())
                .map(|(h, _)| json!({"ReceiptHandle": h})).collect::<Vec<_>>(),
            "Failed": results.iter().filter_map(|(h, r)| r.as_ref().err().map(|e| json!({
                "ReceiptHandle": h,
                "Code": e.sqs_code(),
                "Kind": errors::kind(e),
                "ExitCode": errors::code(e),
                "Message": e.to_string(),
                "SenderFault": true,
            }))).collect::<Vec<_>>(),
        }));
    } else {
        let mut s = String::new();
        for (h, r) in &results {
            if r.is_ok() {
                s.push_str(&format!("deleted {h}\n"));
            }
        }
        out(&s);
    }
    let mut first = None;
    for (_, r) in &results {
        if let Err(e) = r {
            eprint!("{}", errors::message(&a.queue, e));
            first.get_or_insert(errors::code(e));
        }
    }
    match first {
        None => Ok(()),
        Some(c) => Err(Failure::Reported(c)),
    }
}

/// Arguments of `change-visibility`.
#[derive(Args, Debug)]
pub struct ChangeVisibilityArgs {
    /// Queue NAME (/dev/shm/NAME) or path (anything containing '/').
    pub queue: String,
    /// The receipt handle, as `receive` prints it.
    #[arg(value_name = "RECEIPT")]
    pub receipt: String,
    /// The new visibility timeout from now (0: visible at once; up to 12h from the receive).
    #[arg(value_name = "TIMEOUT", value_parser = parse::duration)]
    pub timeout: Duration,
}

/// Changes one message's visibility timeout.
pub fn change_visibility(a: &ChangeVisibilityArgs, ctx: Ctx) -> Result<(), Failure> {
    let q = open(&a.queue)?;
    q.change_visibility_str(&a.receipt, a.timeout)
        .map_err(|e| Failure::queue(&a.queue, e))?;
    drop(q);
    if ctx.json {
        print_json(&json!({
            "ReceiptHandle": a.receipt,
            "VisibilityTimeoutMs": a.timeout.as_millis() as u64,
        }));
    } else {
        out(&format!(
            "{} visible again in {}\n",
            a.receipt,
            duration(a.timeout)
        ));
    }
    Ok(())
}
