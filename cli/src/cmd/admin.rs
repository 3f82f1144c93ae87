//! `shmfifo purge`, `recover`, `set` and `unlink`.

use clap::Args;
use serde_json::json;
use shmfifo::Queue;

use super::{is_path, open, path_of, print_json, Ctx, QueueArg};
use crate::errors::Failure;
use crate::output::{kv, messages, num, out};

/// Deletes every message and prints how many.
pub fn purge(a: &QueueArg, ctx: Ctx) -> Result<(), Failure> {
    if super::remote::is_remote(&a.queue) {
        return super::remote::purge(&a.queue, ctx);
    }
    let q = open(&a.queue)?;
    let n = q.purge().map_err(|e| Failure::queue(&a.queue, e))?;
    drop(q);
    if ctx.json {
        print_json(&json!({"queue": a.queue, "purged": n}));
    } else {
        out(&format!("purged {} from {}\n", messages(n), a.queue));
    }
    Ok(())
}

/// Runs recovery and prints what it repaired.
pub fn recover(a: &QueueArg, ctx: Ctx) -> Result<(), Failure> {
    // Opening a queue repairs what dead participants left before `recover` runs: counted
    // from the queue's counter, read first by an observer (which repairs nothing), so that
    // the report does not say 0 right after `stat` said a participant was dead.
    let before = super::observe(&a.queue)
        .ok()
        .map(|o| o.counters().participants_recovered);
    let q = open(&a.queue)?;
    let mut r = q.recover().map_err(|e| Failure::queue(&a.queue, e))?;
    if let Some(b) = before {
        let by_open = q.counters().participants_recovered.saturating_sub(b);
        r.dead_participants = r.dead_participants.max(by_open);
    }
    drop(q);
    if ctx.json {
        print_json(&json!({
            "queue": a.queue,
            "dead_participants": r.dead_participants,
            "published": r.published,
            "freed": r.freed,
            "released": r.released,
            "quarantined_groups": r.quarantined_groups,
            "dead_lettered": r.dead_lettered.iter().map(|m| m.to_string()).collect::<Vec<_>>(),
            "dropped": r.dropped.iter().map(|m| m.to_string()).collect::<Vec<_>>(),
        }));
    } else {
        out(&format!(
            "recovered {}\n{}",
            a.queue,
            kv(
                &[
                    ("dead participants repaired", num(r.dead_participants)),
                    ("half-sent messages published", num(r.published)),
                    ("half-made messages freed", num(r.freed)),
                    ("in-flight messages released", num(r.released)),
                    ("damaged groups quarantined", num(r.quarantined_groups)),
                    (
                        "their messages dead-lettered",
                        num(r.dead_lettered.len() as u64)
                    ),
                    ("their messages dropped", num(r.dropped.len() as u64)),
                ],
                2
            )
        ));
        for m in &r.dropped {
            out(&format!("  dropped {m}\n"));
        }
    }
    Ok(())
}

/// Arguments of `set`.
#[derive(Args, Debug)]
#[command(
    after_help = "Attributes: VisibilityTimeout, DelaySeconds, MessageRetentionPeriod (seconds, \
                  or a duration with a unit as every command takes them: 30s, 500ms, 1h 30m; \
                  VisibilityTimeoutMs, DelayMs, MessageRetentionPeriodMs in ms), \
                  ReceiveMessageWaitTimeSeconds (0-20 seconds, or a duration of whole seconds: \
                  20s), MaximumMessageSize (bytes, 1024-1048576), ContentBasedDeduplication \
                  (true/false), RedrivePolicy (SQS's JSON, or '' to remove it)."
)]
pub struct SetArgs {
    /// Queue NAME (/dev/shm/NAME) or path (anything containing '/').
    pub queue: String,
    /// The SQS attribute name.
    pub attribute: String,
    /// The value, in SQS's units.
    pub value: String,
}

/// Changes one live setting.
pub fn set(a: &SetArgs, ctx: Ctx) -> Result<(), Failure> {
    if super::remote::is_remote(&a.queue) {
        return super::remote::set(&a.queue, &a.attribute, &a.value, ctx);
    }
    // A duration with a unit (`30s`, `500ms`, `1h 30m`) for a setting in SQS's seconds is set
    // through its millisecond name; a plain number stays SQS's seconds.
    let ms_name = match a.attribute.as_str() {
        "VisibilityTimeout" => Some("VisibilityTimeoutMs"),
        "DelaySeconds" => Some("DelayMs"),
        "MessageRetentionPeriod" => Some("MessageRetentionPeriodMs"),
        _ => None,
    };
    let plain = a.value.trim().bytes().all(|b| b.is_ascii_digit());
    // A malformed value on the command line is a usage error (exit code 2), as clap's own.
    let usage = |what: String| Failure::Usage {
        source: format!("{}: {} value", a.queue, a.attribute),
        what,
    };
    let (name, value) = match ms_name {
        Some(ms) if !plain => {
            let d = crate::parse::duration(&a.value).map_err(usage)?;
            (ms.to_owned(), d.as_millis().to_string())
        }
        // SQS's receive wait has no millisecond name: a duration of whole seconds.
        None if !plain && a.attribute == "ReceiveMessageWaitTimeSeconds" => {
            let d = crate::parse::duration(&a.value).map_err(usage)?;
            if d.subsec_nanos() != 0 {
                return Err(usage(
                    "the receive wait is whole seconds (0 to 20)".to_owned(),
                ));
            }
            (a.attribute.clone(), d.as_secs().to_string())
        }
        // A size with a unit (`256KiB`, `1MiB`), as every size the CLI takes.
        None if !plain && a.attribute == "MaximumMessageSize" => {
            let b = crate::parse::bytes(&a.value).map_err(usage)?;
            (a.attribute.clone(), b.to_string())
        }
        _ => (a.attribute.clone(), a.value.clone()),
    };
    let q = open(&a.queue)?;
    q.set_attribute(&name, &value).map_err(|e| {
        // A value given with a unit was set through the millisecond name: the error names
        // the attribute the user typed.
        let e = match e {
            shmfifo::Error::InvalidConfig { setting, reason } if name != a.attribute => {
                shmfifo::Error::InvalidConfig {
                    setting,
                    reason: reason.replace(&name, &a.attribute),
                }
            }
            e => e,
        };
        Failure::queue(&a.queue, e)
    })?;
    drop(q);
    if ctx.json {
        print_json(&json!({"queue": a.queue, "attribute": a.attribute, "value": a.value}));
    } else {
        out(&format!("{}: {} = {}\n", a.queue, a.attribute, a.value));
    }
    Ok(())
}

/// Removes the queue's file: one that is a shmfifo queue, whatever its state (another
/// layout version, corrupted, unfinished), never another kind of file.
pub fn unlink(a: &QueueArg, ctx: Ctx) -> Result<(), Failure> {
    // Open, or a queue that cannot be opened: remove it. Anything else: refuse.
    if let Err(Failure::Queue {
        error: e @ (shmfifo::Error::NotAnArena { .. } | shmfifo::Error::QueueDoesNotExist { .. }),
        ..
    }) = open(&a.queue)
    {
        return Err(Failure::queue(&a.queue, e));
    }
    use std::os::unix::fs::MetadataExt;
    let owner = std::fs::symlink_metadata(path_of(&a.queue)).map(|m| m.uid());
    if is_path(&a.queue) {
        Queue::unlink_at(&a.queue)
    } else {
        Queue::unlink(&a.queue)
    }
    .map_err(|e| Failure::queue(&a.queue, e))?;
    // The bridge's status file beside it (`QUEUE.bridge.json`), a regular file of the queue's
    // owner: it outlived the queue, and a new queue of the name showed the old counts.
    let status = format!("{}.bridge.json", path_of(&a.queue));
    if std::fs::symlink_metadata(&status)
        .is_ok_and(|m| m.is_file() && owner.as_ref().is_ok_and(|&o| o == m.uid()))
    {
        let _ = std::fs::remove_file(&status);
    }
    if ctx.json {
        print_json(&json!({"queue": a.queue, "unlinked": path_of(&a.queue)}));
    } else {
        out(&format!("unlinked {}\n", path_of(&a.queue)));
    }
    Ok(())
}
