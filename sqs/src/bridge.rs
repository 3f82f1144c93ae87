//! The bridge: every message of a local queue forwarded to a FIFO queue elsewhere (an SQS
//! queue, usually), exactly once and in group order.
//!
//! Each message is received from the local queue (so it is in flight, and its group locked,
//! R3), sent with its group id, body and attributes and with **its local message id as the
//! deduplication id**, and deleted locally only once the remote queue acknowledged it. A
//! bridge killed at any point leaves its messages in flight locally; they come back after the
//! visibility timeout and are sent again with the same deduplication ids, which SQS drops as
//! duplicates within its 5-minute interval: each message arrives once. A group's messages go
//! in one batch, in order, and the group stays locked locally until they are acknowledged, so
//! no later message of the group can overtake them.
//!
//! A message the remote queue refuses for itself (too large for its `MaximumMessageSize`, say)
//! is made visible again and counted `failed`; it stays in the local queue (and moves to the
//! local dead-letter queue after `maxReceiveCount` receives, if the local queue has a redrive
//! policy), while the group's later messages go on. An unreachable endpoint or throttling
//! releases the group's messages at once and backs off (counted `retried`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use shmfifo::{
    BatchEntry, Error, FifoQueue, Message, MessageAttribute, Queue, ReceiveOptions, RemoteKind,
    Result, SendMessage,
};

/// How a bridge runs.
#[derive(Debug, Clone)]
pub struct BridgeOptions {
    /// Visibility timeout of the local receives (default 30 s): how long a killed bridge's
    /// messages stay hidden before a restarted one sends them again.
    pub visibility_timeout: Duration,
    /// Long poll of each local receive (default 1 s).
    pub wait: Duration,
    /// Most messages forwarded per second (`None`: as fast as the remote answers).
    pub max_per_second: Option<u32>,
    /// Return once the local queue has no visible message (default: run until cancelled).
    pub until_empty: bool,
    /// Set (from any thread) to stop after the current batch.
    pub cancel: Option<Arc<AtomicBool>>,
    /// Where to keep the bridge's counters, cumulative across restarts (see
    /// [`status_path`]; `None`: nowhere). `shmfifo stat` and `shmfifo metrics` show them.
    pub status_file: Option<std::path::PathBuf>,
    /// The remote queue's name or URL, recorded in the status file.
    pub remote_name: String,
}

impl Default for BridgeOptions {
    fn default() -> Self {
        BridgeOptions {
            visibility_timeout: Duration::from_secs(30),
            wait: Duration::from_secs(1),
            max_per_second: None,
            until_empty: false,
            cancel: None,
            status_file: None,
            remote_name: String::new(),
        }
    }
}

/// What a bridge did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BridgeReport {
    /// Messages acknowledged by the remote queue and deleted locally.
    pub forwarded: u64,
    /// Messages released for another try after a transport failure or throttling.
    pub retried: u64,
    /// Messages the remote queue refused for themselves (left in the local queue).
    pub failed: u64,
}

/// The status file of the bridge of the local queue at `queue_path`: `PATH.bridge.json`, a
/// JSON object `{"remote", "forwarded", "retried", "failed", "pid", "updated_ms"}` rewritten
/// (by rename) after each batch. The counters add up over every bridge run on that queue.
pub fn status_path(queue_path: &std::path::Path) -> std::path::PathBuf {
    let mut p = queue_path.as_os_str().to_owned();
    p.push(".bridge.json");
    std::path::PathBuf::from(p)
}

/// The counters a status file holds (zero if there is none, or it does not parse).
pub fn read_status(path: &std::path::Path) -> BridgeReport {
    let v: serde_json::Value = std::fs::read(path)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default();
    let n = |k: &str| v.get(k).and_then(serde_json::Value::as_u64).unwrap_or(0);
    BridgeReport {
        forwarded: n("forwarded"),
        retried: n("retried"),
        failed: n("failed"),
    }
}

fn write_status(path: &std::path::Path, remote: &str, r: &BridgeReport) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let text = serde_json::json!({
        "remote": remote,
        "forwarded": r.forwarded,
        "retried": r.retried,
        "failed": r.failed,
        "pid": std::process::id(),
        "updated_ms": now,
    });
    // Written beside, then renamed over: a reader sees the old file or the new one, whole.
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    if std::fs::write(&tmp, format!("{text}\n")).is_ok() {
        let _ = std::fs::rename(&tmp, path);
    }
}

fn transient(e: &Error) -> bool {
    matches!(
        e,
        Error::Remote {
            kind: RemoteKind::Unreachable | RemoteKind::Throttled,
            ..
        }
    ) || e.code().is_retryable()
}

/// Forwards `local`'s messages to `remote` (see the module doc), calling `progress` after
/// each batch. Returns when the local queue is empty (with `until_empty`), when cancelled, or
/// on an error that another try cannot mend (refused credentials, a missing remote queue).
pub fn bridge(
    local: &Queue,
    remote: &dyn FifoQueue,
    opts: &BridgeOptions,
    progress: &mut dyn FnMut(&BridgeReport),
) -> Result<BridgeReport> {
    let mut report = BridgeReport::default();
    let before = opts
        .status_file
        .as_deref()
        .map(read_status)
        .unwrap_or_default();
    let total = |r: &BridgeReport| BridgeReport {
        forwarded: before.forwarded + r.forwarded,
        retried: before.retried + r.retried,
        failed: before.failed + r.failed,
    };
    let started = Instant::now();
    let mut backoff = Duration::from_millis(50);
    let ropts = ReceiveOptions::max(10)
        .visibility_timeout(opts.visibility_timeout)
        .wait(opts.wait);
    loop {
        // Relaxed: a stop request polled once a batch; it publishes nothing.
        if opts
            .cancel
            .as_ref()
            .is_some_and(|c| c.load(Ordering::Relaxed))
        {
            return Ok(report);
        }
        let got = local.receive(&ropts)?;
        if got.is_empty() {
            if opts.until_empty
                && local
                    .attributes()
                    .approximate_number_of_messages_not_visible
                    == 0
            {
                return Ok(report);
            }
            continue;
        }
        // A receive returns each group's messages together, in order (R5).
        let mut start = 0;
        while start < got.len() {
            let g = &got[start].group_id;
            let end = start + got[start..].iter().take_while(|m| &m.group_id == g).count();
            match forward_group(local, remote, &got[start..end], &mut report) {
                Ok(()) => backoff = Duration::from_millis(50),
                Err(e) if transient(&e) => {
                    tracing::warn!(error = %e, "bridge: the remote queue failed; retrying");
                    std::thread::sleep(backoff);
                    backoff = (backoff * 2).min(Duration::from_secs(5));
                }
                Err(e) => return Err(e),
            }
            start = end;
        }
        progress(&report);
        if let Some(p) = &opts.status_file {
            write_status(p, &opts.remote_name, &total(&report));
        }
        if let Some(rate) = opts.max_per_second.filter(|r| *r > 0) {
            let due = Duration::from_secs_f64(report.forwarded as f64 / f64::from(rate));
            if let Some(wait) = due.checked_sub(started.elapsed()) {
                std::thread::sleep(wait);
            }
        }
    }
}

/// Sends one group's received messages as one batch; deletes those acknowledged; releases
/// the others.
fn forward_group(
    local: &Queue,
    remote: &dyn FifoQueue,
    msgs: &[Message],
    report: &mut BridgeReport,
) -> Result<()> {
    let ids: Vec<String> = msgs.iter().map(|m| m.message_id.to_string()).collect();
    let attrs: Vec<Vec<MessageAttribute<'_>>> = msgs
        .iter()
        .map(|m| {
            m.attributes
                .iter()
                .map(|a| MessageAttribute {
                    name: &a.name,
                    data_type: &a.data_type,
                    value: &a.value,
                })
                .collect()
        })
        .collect();
    let entry_ids: Vec<String> = (0..msgs.len()).map(|i| i.to_string()).collect();
    let batch: Vec<BatchEntry<'_, SendMessage<'_>>> = msgs
        .iter()
        .enumerate()
        .map(|(i, m)| BatchEntry {
            id: &entry_ids[i],
            entry: SendMessage {
                group_id: Some(&m.group_id),
                dedup_id: Some(&ids[i]),
                body: &m.body,
                bytes: None,
                attributes: &attrs[i],
                delay_seconds: None,
            },
        })
        .collect();
    let release = |which: &mut dyn Iterator<Item = &Message>| {
        for m in which {
            // Visible again at once: the next receive takes the group from here, in order.
            let _ = local.change_visibility(&m.receipt_handle, Duration::ZERO);
        }
    };
    let results = match remote.send_batch(&batch) {
        Ok(r) => r,
        Err(e) => {
            if transient(&e) {
                report.retried += msgs.len() as u64;
            }
            release(&mut msgs.iter());
            return Err(e);
        }
    };
    let handles: Vec<String> = msgs.iter().map(|m| m.receipt_handle.to_string()).collect();
    let mut done = Vec::new();
    for (i, r) in results.iter().enumerate() {
        match &r.result {
            Ok(_) => done.push(BatchEntry {
                id: entry_ids[i].as_str(),
                entry: handles[i].as_str(),
            }),
            Err(e) => {
                tracing::warn!(message_id = %ids[i], error = %e, "bridge: the remote queue refused a message");
                report.failed += 1;
                release(&mut std::iter::once(&msgs[i]));
            }
        }
    }
    if !done.is_empty() {
        for r in local.delete_batch(&done)? {
            match r.result {
                Ok(()) => report.forwarded += 1,
                // Our receive timed out and another bridge took the message: it will send it
                // with the same deduplication id, which the remote queue drops.
                Err(e) => {
                    tracing::debug!(error = %e, "bridge: a forwarded message was no longer ours")
                }
            }
        }
    }
    Ok(())
}
