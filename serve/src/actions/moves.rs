//! Dead-letter move tasks (StartMessageMoveTask, ListMessageMoveTasks,
//! CancelMessageMoveTask): a redrive on a blocking thread per task, within the queues the
//! caller may use.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{json, Map, Value};
use shmfifo::{AsyncQueue, RedriveOptions};

use super::{int_param, now_ms, obj, required, str_param, valid_name, Queues, Res};
use crate::access::Identity;
use crate::protocol::ApiError;

/// Move tasks kept for ListMessageMoveTasks: past this many, the oldest finished ones are
/// forgotten (SQS lists a source's ten most recent).
const TASKS_KEPT: usize = 64;

/// Move tasks running at once, over every source: each holds a blocking thread.
const TASKS_RUNNING: usize = 16;

/// The longest ARN a move task takes (an SQS ARN is far shorter: region, account and a name of
/// at most 80 characters): a task keeps its ARNs as given, for ListMessageMoveTasks.
const MAX_ARN: usize = 256;

/// A dead-letter move task (StartMessageMoveTask).
#[derive(Debug)]
pub(super) struct MoveTask {
    handle: String,
    /// The source queue's name in the directory: what identifies the source (two ARNs that
    /// differ before the name are the same queue).
    source: String,
    source_arn: String,
    destination_arn: Option<String>,
    max_per_second: Option<u32>,
    started_ms: u64,
    to_move: u64,
    cancel: Arc<AtomicBool>,
    /// Messages moved so far (the redrive's `progress`): what a running or failed task
    /// reports, and a cancel answers.
    moved: Arc<AtomicU64>,
    state: Arc<Mutex<TaskState>>,
}

#[derive(Debug, Clone)]
enum TaskState {
    Running,
    Done {
        moved: u64,
        cancelled: bool,
        /// Messages left in the source (the redrive's `skipped`).
        skipped: u64,
    },
    Failed(String),
}

impl Queues {
    /// The queue an ARN of a move task names, for `who`.
    fn move_queue(&self, arn: &str, who: &Identity) -> Result<(String, AsyncQueue), ApiError> {
        let not_found = || {
            ApiError::sender(
                "ResourceNotFoundException",
                format!("The resource {arn} does not exist."),
            )
        };
        let name = self.name_of_target(arn).map_err(|_| not_found())?;
        match self.queue_by_name(&name, who) {
            Ok(q) => Ok((name, q)),
            Err(e) if e.code == "AccessDenied" => Err(e),
            Err(_) => Err(not_found()),
        }
    }

    pub(super) fn start_move(&self, p: &Map<String, Value>, who: &Identity) -> Res {
        let source_arn =
            arn_param(p, "SourceArn")?.ok_or_else(|| ApiError::missing("SourceArn"))?;
        let (source, dlq) = self.move_queue(&source_arn, who)?;
        // As SQS: the source must be some queue's dead-letter queue (a task on any other
        // queue answered COMPLETED, "to move 7, moved 0", or moved a live queue's messages).
        if self.dead_letter_sources(&source, who).is_empty() {
            return Err(ApiError::invalid(
                "SourceArn",
                "Source queue must be configured as a Dead Letter Queue.",
            ));
        }
        let destination_arn = arn_param(p, "DestinationArn")?;
        let destination = match &destination_arn {
            Some(a) => {
                let (d, _) = self.move_queue(a, who)?;
                Some(self.path(&d).display().to_string())
            }
            None => None,
        };
        // Without a destination each message goes back to its source: only to the queues of
        // this directory that the caller may use (a message naming another source stays).
        let sources = destination.is_none().then(|| self.usable_paths(who));
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
        // The checks, the task's start and its record under one lock: two requests for one
        // source cannot both pass the check, nor a burst pass the running cap.
        let mut tasks = self.tasks.lock().expect("tasks");
        let running = |t: &&MoveTask| matches!(*t.state.lock().expect("task"), TaskState::Running);
        if tasks.iter().filter(running).any(|t| t.source == source) {
            return Err(ApiError::sender(
                "AWS.SimpleQueueService.UnsupportedOperation",
                "A message move task is already running on this source.",
            ));
        }
        if tasks.iter().filter(running).count() >= TASKS_RUNNING {
            return Err(ApiError::sender(
                "AWS.SimpleQueueService.UnsupportedOperation",
                format!("{TASKS_RUNNING} message move tasks are running on this server; start this one when one has ended."),
            ));
        }
        let handle = format!(
            "shmfifo-move-{}-{}",
            std::process::id(),
            // Relaxed: a unique number only; it orders nothing.
            self.next_task.fetch_add(1, Ordering::Relaxed)
        );
        let cancel = Arc::new(AtomicBool::new(false));
        let moved = Arc::new(AtomicU64::new(0));
        let state = Arc::new(Mutex::new(TaskState::Running));
        let to_move = dlq.queue().attributes().approximate_number_of_messages;
        let opts = RedriveOptions {
            destination,
            max_per_second,
            limit: None,
            cancel: Some(Arc::clone(&cancel)),
            sources,
            progress: Some(Arc::clone(&moved)),
        };
        tracing::info!(
            task = %handle,
            source = %source_arn,
            destination = opts.destination.as_deref().unwrap_or("each message's source"),
            max_per_second = max_per_second.unwrap_or(0),
            to_move,
            uid = who.uid,
            "message move task started"
        );
        let (q, st, task) = (dlq.queue().clone(), Arc::clone(&state), handle.clone());
        tokio::task::spawn_blocking(move || {
            let r = q.redrive(&opts);
            *st.lock().expect("task") = match r {
                Ok(r) => {
                    tracing::info!(
                        task = %task,
                        moved = r.moved,
                        cancelled = r.cancelled,
                        skipped = r.skipped,
                        "message move task ended"
                    );
                    TaskState::Done {
                        moved: r.moved,
                        cancelled: r.cancelled,
                        skipped: r.skipped,
                    }
                }
                Err(e) => {
                    tracing::warn!(task = %task, error = %e, "message move task failed");
                    TaskState::Failed(e.to_string())
                }
            };
        });
        // Forget the oldest finished tasks past `TASKS_KEPT` (running ones are at most
        // `TASKS_RUNNING`).
        while tasks.len() >= TASKS_KEPT {
            let Some(old) = tasks
                .iter()
                .position(|t| !matches!(*t.state.lock().expect("task"), TaskState::Running))
            else {
                break;
            };
            tasks.remove(old);
        }
        tasks.push(MoveTask {
            handle: handle.clone(),
            source,
            source_arn,
            destination_arn,
            max_per_second,
            started_ms: now_ms(),
            to_move,
            cancel,
            moved,
            state,
        });
        Ok(obj(json!({"TaskHandle": handle})))
    }

    /// The names of the queues of the directory, among those `who` may use, whose redrive
    /// policy names the queue `name` as its dead-letter queue (ListDeadLetterSourceQueues), in
    /// name order. Each is looked at as an observer (read-only, no participant).
    pub(super) fn dead_letter_sources(&self, name: &str, who: &Identity) -> Vec<String> {
        let target = self.path(name).display().to_string();
        let mut out: Vec<String> = self
            .usable_paths(who)
            .into_iter()
            .filter(|p| {
                shmfifo::Queue::observe_at(p).is_ok_and(|o| {
                    o.attributes()
                        .redrive_policy
                        .is_some_and(|r| r.dead_letter_queue == target)
                })
            })
            .filter_map(|p| Some(p.file_name()?.to_str()?.to_owned()))
            .collect();
        out.sort();
        out
    }

    /// ListDeadLetterSourceQueues: the URLs of the queues whose dead-letter queue is the
    /// request's (SQS's `queueUrls`, paged by `MaxResults` and `NextToken` as ListQueues).
    pub(super) fn list_dead_letter_sources(&self, p: &Map<String, Value>, who: &Identity) -> Res {
        let (name, _) = self.queue(p, who)?;
        let (max, after) = Self::page_params(p)?;
        let names: Vec<String> = self
            .dead_letter_sources(&name, who)
            .into_iter()
            .filter(|n| n.as_str() > after)
            .collect();
        // `queueUrls` even when empty, as SQS answers it.
        self.page(names, max, "queueUrls", true)
    }

    /// The paths of every queue of the directory `who` may use (as the library records a
    /// message's source: the directory's resolved path and the name), looked up in the
    /// directory as walked for `who`.
    fn usable_paths(&self, who: &Identity) -> Vec<PathBuf> {
        let Ok(dir) = self.reachable("the queue directory", who) else {
            return Vec::new();
        };
        let Ok(entries) = std::fs::read_dir(dir.dir_path()) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for e in entries.filter_map(|e| e.ok()) {
            let name = e.file_name().to_string_lossy().into_owned();
            if !valid_name(&name) {
                continue;
            }
            if dir
                .entry(&name)
                .is_ok_and(|m| m.is_some_and(|m| m.is_file() && who.may_open(&m)))
            {
                out.push(self.path(&name));
            }
        }
        out
    }

    pub(super) fn list_moves(&self, p: &Map<String, Value>, who: &Identity) -> Res {
        let source_arn =
            arn_param(p, "SourceArn")?.ok_or_else(|| ApiError::missing("SourceArn"))?;
        let (source, _) = self.move_queue(&source_arn, who)?;
        let max = int_param(p, "MaxResults")?.unwrap_or(1).clamp(1, 10) as usize;
        let tasks = self.tasks.lock().expect("tasks");
        let results: Vec<Value> = tasks
            .iter()
            .rev()
            .filter(|t| t.source == source)
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
                // Relaxed: a count for a report (the redrive adds to it as it moves).
                let so_far = t.moved.load(Ordering::Relaxed);
                let (status, moved) = match &*t.state.lock().expect("task") {
                    // Cancelled, its redrive finishing the message it is moving: SQS's
                    // CANCELLING, which takes no second cancel.
                    // Relaxed: the flag the cancel set under the tasks' lock, held here.
                    TaskState::Running if t.cancel.load(Ordering::Relaxed) => ("CANCELLING", so_far),
                    TaskState::Running => {
                        m.insert("TaskHandle".into(), t.handle.clone().into());
                        ("RUNNING", so_far)
                    }
                    TaskState::Done {
                        moved,
                        cancelled: true,
                        ..
                    } => ("CANCELLED", *moved),
                    TaskState::Done {
                        moved, skipped: 0, ..
                    } => ("COMPLETED", *moved),
                    // Messages left behind: not what the task was for (it answered COMPLETED,
                    // "moved 0", with the messages still there and no word why).
                    TaskState::Done { moved, skipped, .. } => {
                        let why = if t.destination_arn.is_some() {
                            format!(
                                "{skipped} messages stayed in the source: the destination refused \
                                 them, or a message before them in their group"
                            )
                        } else {
                            format!(
                                "{skipped} messages stayed in the source: they name no source queue \
                                 this caller may use here (sent to the dead-letter queue directly, or \
                                 their queue is gone), or their source refused them or a message \
                                 before them in their group; give a DestinationArn to move them"
                            )
                        };
                        m.insert("FailureReason".into(), why.into());
                        ("FAILED", *moved)
                    }
                    TaskState::Failed(why) => {
                        m.insert("FailureReason".into(), why.clone().into());
                        ("FAILED", so_far)
                    }
                };
                m.insert("Status".into(), status.into());
                m.insert("ApproximateNumberOfMessagesMoved".into(), moved.into());
                Value::Object(m)
            })
            .collect();
        Ok(obj(json!({ "Results": results })))
    }

    pub(super) fn cancel_move(&self, p: &Map<String, Value>, who: &Identity) -> Res {
        let handle = required(p, "TaskHandle")?;
        let source = {
            let tasks = self.tasks.lock().expect("tasks");
            tasks
                .iter()
                .find(|t| t.handle == handle)
                .map(|t| t.source.clone())
        };
        if let Some(source) = source {
            self.queue_by_name(&source, who)?;
        }
        let tasks = self.tasks.lock().expect("tasks");
        let t = tasks
            .iter()
            .find(|t| {
                // Relaxed: the flag is only written under the tasks' lock, held here.
                t.handle == handle
                    && matches!(*t.state.lock().expect("task"), TaskState::Running)
                    && !t.cancel.load(Ordering::Relaxed)
            })
            .ok_or_else(|| {
                ApiError::sender(
                    "ResourceNotFoundException",
                    format!("No running task {handle}."),
                )
            })?;
        // Relaxed: a stop request the redrive polls between messages; it publishes nothing.
        t.cancel.store(true, Ordering::Relaxed);
        // The messages moved so far: the redrive stops after the message it is moving.
        // Relaxed: a count for a report.
        let moved = t.moved.load(Ordering::Relaxed);
        tracing::info!(task = %handle, uid = who.uid, moved, "message move task cancelled");
        Ok(obj(json!({ "ApproximateNumberOfMessagesMoved": moved })))
    }
}

/// ARN parameter `name`, if given: at most [`MAX_ARN`] bytes.
fn arn_param(p: &Map<String, Value>, name: &'static str) -> Result<Option<String>, ApiError> {
    match str_param(p, name)? {
        Some(a) if a.len() > MAX_ARN => Err(ApiError::invalid(
            name,
            &format!("must be at most {MAX_ARN} characters"),
        )),
        a => Ok(a.map(str::to_owned)),
    }
}
