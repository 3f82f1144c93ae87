//! ReceiveMessage: its parameters, then a long poll that follows its queue's name (a queue
//! deleted and created again during the wait is polled on the new file), and the refusal of a
//! binary queue before anything is taken.

use std::os::unix::fs::MetadataExt;
use std::time::Duration;

use serde_json::{Map, Value};
use shmfifo::{AsyncQueue, Queue, ReceiveOptions};

use super::{blocking, int_param, message_out, names, seconds, str_param, Queues, Res};
use crate::access::Identity;
use crate::protocol::ApiError;

impl Queues {
    pub(super) async fn receive_message(&self, p: &Map<String, Value>, who: &Identity) -> Res {
        // The open of a queue not open yet may wait (a stopped participant mid-repair).
        let (name, q) = blocking(|| self.queue(p, who))?;
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
        let attempt = str_param(p, "ReceiveRequestAttemptId")?;
        // After the request's own errors (R1: they come before anything else).
        refuse_binary(q.queue())?;
        let got = match attempt {
            // A receive with an attempt id does not follow the name: a replay of a recorded
            // receive runs as blocking work that completes even when its future is dropped
            // (it restarts its messages' visibility), so it is not raced against the look.
            Some(id) => q.receive_with_attempt_id(&opts, id).await?,
            None => self.receive_watching_name(p, who, &name, q, opts).await?,
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

    /// ReceiveMessage's receive on `q`, the queue `name` named when the request came, as a
    /// long poll that follows the name: a handle keeps its file open after the name is
    /// removed (the library's rule), so a poll of a queue deleted (by DeleteQueue, by `rm`)
    /// and created again waited out its whole wait on the removed file while messages were
    /// sent to the new one. Every [`NAME_LOOK`] the wait looks whether the name still names
    /// the file it waits on; when it names another, the poll goes on there for what is left
    /// of its wait, with every check of a new request (the new file's owner and mode may
    /// differ); when it names none, the request answers as one made now would
    /// (QueueDoesNotExist). The receive is dropped only between two of its tries, having taken
    /// nothing (the library's receive takes and returns in one poll; a receive with an attempt
    /// id, whose replay may not be dropped midway, does not come here).
    ///
    /// The receive waits as a future (a client that goes away drops it, which then has taken
    /// nothing); it holds no thread while it waits.
    async fn receive_watching_name(
        &self,
        p: &Map<String, Value>,
        who: &Identity,
        name: &str,
        mut q: AsyncQueue,
        mut opts: ReceiveOptions,
    ) -> Result<Vec<shmfifo::Message>, ApiError> {
        let started = tokio::time::Instant::now();
        let path = self.path(name);
        // At most one move a name look: a name that changes faster than that is followed by
        // later looks, each bounded by the wait's deadline.
        loop {
            let receive = q.receive(&opts);
            if opts.wait_time == Some(Duration::ZERO) {
                return Ok(receive.await?); // no wait: nothing to follow
            }
            let file = q.queue().file_metadata().map(|m| (m.dev(), m.ino()))?;
            let moved = async {
                loop {
                    tokio::time::sleep(NAME_LOOK).await;
                    // A look, not a check: the checks are the new request's below.
                    let now = std::fs::symlink_metadata(&path)
                        .ok()
                        .map(|m| (m.dev(), m.ino()));
                    if now != Some(file) {
                        return;
                    }
                }
            };
            tokio::select! {
                // The receive first: one that finishes at the same poll as a look answers.
                biased;
                got = receive => return Ok(got?),
                () = moved => {}
            }
            // The wait the poll had (the old queue's default where the request named none),
            // less what it waited.
            let wait = opts
                .wait_time
                .unwrap_or_else(|| q.queue().attributes().receive_message_wait_time);
            let left = wait.saturating_sub(started.elapsed());
            tracing::info!(
                queue = name,
                left_ms = left.as_millis() as u64,
                "the queue's name was removed or given to another file during a long poll; following it"
            );
            // As a new request: QueueDoesNotExist where the name is gone, AccessDenied where
            // the new file is not the caller's to open.
            let (_, next) = blocking(|| self.queue(p, who))?;
            refuse_binary(next.queue())?;
            // The old handle let go off the worker: its last clone's drop joins the library's
            // watcher thread, up to a second on a queue made with release_on_death off.
            let old = std::mem::replace(&mut q, next);
            drop(tokio::task::spawn_blocking(move || drop(old)));
            opts = opts.wait(left);
        }
    }
}

/// ReceiveMessage of a binary queue (`BodyMode::Binary`, an extension of the library) is
/// refused before anything is taken, as the Python package's client refuses it: SQS bodies
/// are text, and a body of any bytes has no JSON or XML string to be answered as (it was
/// answered empty, and the message taken).
fn refuse_binary(q: &Queue) -> Result<(), ApiError> {
    if q.body_mode() == shmfifo::BodyMode::Binary {
        return Err(ApiError::sender(
            "AWS.SimpleQueueService.UnsupportedOperation",
            "The queue's bodies are bytes (created with body mode binary); SQS bodies are text: receive from it with the library.",
        ));
    }
    Ok(())
}

/// How often a long poll looks whether its queue's name still names the file it waits on
/// ([`Queues::receive_watching_name`]): a queue deleted and created again under the name
/// is polled within this much of the change.
const NAME_LOOK: Duration = Duration::from_secs(1);
