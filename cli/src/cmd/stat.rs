//! `shmfifo stat`: everything about a queue, as text, JSON or Prometheus metrics.

use clap::Args;
use serde_json::{json, Value};
use shmfifo::{Inspection, ParticipantInfo};

use super::{observe, path_of, print_json, settings_json, settings_text, Ctx};
use crate::errors::Failure;
use crate::output::{kv, num, out, size, Table};

/// Arguments of `stat`.
#[derive(Args, Debug)]
pub struct StatArgs {
    /// Queue NAME (/dev/shm/NAME) or path (anything containing '/').
    pub queue: String,
    /// How many of the largest groups (by backlog) to show.
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub top: usize,
    /// Print the counters and gauges in the Prometheus text exposition format.
    #[arg(long, conflicts_with = "json")]
    pub prometheus: bool,
}

/// What `stat` shows of a bridge forwarding the queue (`shmfifo bridge`): its counters over
/// every run, and the groups it stopped.
#[derive(Debug)]
#[cfg_attr(not(feature = "sqs"), allow(dead_code))]
struct Bridge {
    forwarded: u64,
    retried: u64,
    failed: u64,
    dead_lettered: u64,
    stopped: Vec<String>,
}

/// The bridge's status file beside the queue's (`PATH.bridge.json`), if there is one of this
/// queue (created at `created_ms`; not one left by an earlier queue of the name).
#[cfg(feature = "sqs")]
fn bridge_status(queue: &str, created_ms: u64) -> Option<Bridge> {
    let p = shmfifo_sqs::bridge::status_path(std::path::Path::new(&path_of(queue)));
    shmfifo_sqs::bridge::read_status(&p, created_ms).map(|r| Bridge {
        forwarded: r.forwarded,
        retried: r.retried,
        failed: r.failed,
        dead_lettered: r.dead_lettered,
        stopped: r.stopped,
    })
}

/// Without the `sqs` feature, no bridge's status is read.
#[cfg(not(feature = "sqs"))]
fn bridge_status(_queue: &str, _created_ms: u64) -> Option<Bridge> {
    None
}

/// The participants other than this command's own handle.
fn others(i: &Inspection) -> Vec<ParticipantInfo> {
    i.participants
        .iter()
        .filter(|p| !p.is_self)
        .copied()
        .collect()
}

/// Prints the queue's state.
pub fn run(a: &StatArgs, ctx: Ctx) -> Result<(), Failure> {
    if super::remote::is_remote(&a.queue) {
        return super::remote::stat(&a.queue, ctx);
    }
    let q = observe(&a.queue)?;
    let i = q.inspect(a.top).map_err(|e| Failure::queue(&a.queue, e))?;
    drop(q);
    let bridge = bridge_status(&a.queue, i.attributes.created_timestamp);
    if a.prometheus {
        let mut s = prometheus(&a.queue, &i);
        if let Some(b) = &bridge {
            let q = label(&a.queue);
            for (name, v, help) in [
                (
                    "forwarded",
                    b.forwarded,
                    "Messages a bridge forwarded to SQS and deleted here.",
                ),
                (
                    "retried",
                    b.retried,
                    "Messages a bridge released for another try.",
                ),
                (
                    "failed",
                    b.failed,
                    "Refusals of a message by the remote queue (one refused three times counts three).",
                ),
                (
                    "dead_lettered",
                    b.dead_lettered,
                    "Messages a bridge moved to the local dead-letter queue after refusals.",
                ),
            ] {
                s.push_str(&format!(
                    "# HELP shmfifo_bridge_{name}_total {help}\n# TYPE shmfifo_bridge_{name}_total counter\nshmfifo_bridge_{name}_total{{queue=\"{q}\"}} {v}\n"
                ));
            }
            s.push_str(&format!(
                "# HELP shmfifo_bridge_stopped_groups Groups a bridge stopped at a message the remote queue refuses.\n# TYPE shmfifo_bridge_stopped_groups gauge\nshmfifo_bridge_stopped_groups{{queue=\"{q}\"}} {}\n",
                b.stopped.len()
            ));
        }
        out(&s);
    } else if ctx.json {
        let mut v = stat_json(&a.queue, &i);
        if let Some(b) = &bridge {
            v["bridge"] = json!({
                "forwarded": b.forwarded,
                "retried": b.retried,
                "failed": b.failed,
                "dead_lettered": b.dead_lettered,
                "stopped": b.stopped,
            });
        }
        print_json(&v);
    } else {
        let mut s = stat_text(&a.queue, &i);
        if let Some(b) = &bridge {
            s.push_str(&format!(
                "\nBridge (shmfifo bridge, all runs)\n  forwarded {}, retried {}, failed {}, dead-lettered {}\n",
                b.forwarded, b.retried, b.failed, b.dead_lettered
            ));
            if !b.stopped.is_empty() {
                s.push_str(&format!(
                    "  stopped groups (a message the remote refuses): {}\n",
                    b.stopped
                        .iter()
                        .map(|g| super::ls::printable(g))
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
        }
        out(&s);
    }
    Ok(())
}

fn stat_json(queue: &str, i: &Inspection) -> Value {
    let parts = others(i);
    let alive = parts.iter().filter(|p| p.alive).count();
    json!({
        "queue": queue,
        "path": path_of(queue),
        "layout_version": shmfifo::LAYOUT_VERSION,
        "settings": settings_json(&i.attributes),
        "messages": {
            "visible": i.messages.visible,
            "in_flight": i.messages.in_flight,
            "delayed": i.messages.delayed,
            "sending": i.messages.sending,
            "deleted": i.messages.deleted,
        },
        "in_flight_count": i.attributes.in_flight_count,
        "groups": {
            "active": i.active_groups,
            "locked": i.locked_groups,
            "kept": i.kept_groups,
            "capacity": i.attributes.group_capacity,
            "max": i.attributes.max_groups,
            "largest": i.largest_groups.iter().map(|g| json!({
                "group_id": g.group_id,
                "backlog": g.backlog(),
                "visible": g.visible,
                "in_flight": g.in_flight,
                "delayed": g.delayed,
                "sending": g.sending,
                "locked": g.locked,
            })).collect::<Vec<_>>(),
            "damaged": i.damaged_groups.iter().map(|d| json!({
                "index": d.index,
                "reason": d.reason,
            })).collect::<Vec<_>>(),
        },
        "participants": {
            "alive": alive,
            "dead": parts.len() - alive,
            "list": parts.iter().map(|p| json!({
                "slot": p.slot,
                "generation": p.generation,
                "pid": p.pid,
                "alive": p.alive,
            })).collect::<Vec<_>>(),
        },
        "dedup": {
            "entries": i.attributes.dedup_entries,
            "in_use": i.attributes.dedup_entries_in_use,
            "overflow": super::overflow_name(i.attributes.dedup_overflow),
            "evictions": i.attributes.dedup_evictions,
            "effective_interval_ms": i.attributes.effective_deduplication_interval.as_millis() as u64,
        },
        "quarantine": {
            "messages": i.attributes.quarantined_messages,
            "groups": i.attributes.quarantined_groups,
        },
        "size": {
            "bytes": i.size.bytes,
            "base_bytes": i.size.base_bytes,
            "limit_bytes": i.size.limit_bytes,
            "grows": i.size.grows,
            "refused_grows": i.size.refused_grows,
        },
        "size_classes": i.size_classes.iter().map(|c| json!({
            "payload_bytes": c.payload_bytes,
            "slot_bytes": c.slot_bytes,
            "slots": c.slots,
            "max_slots": c.max_slots,
            "used": c.used,
            "free": c.free,
            "sending": c.sending,
            "deleted": c.deleted,
            "bytes": c.slot_bytes * u64::from(c.slots),
        })).collect::<Vec<_>>(),
        "counters": counters_json(&i.counters),
    })
}

/// The counters as a JSON object.
pub fn counters_json(c: &shmfifo::Counters) -> Value {
    let mut m = serde_json::Map::new();
    for (name, v, _) in c.named() {
        m.insert(name.into(), json!(v));
    }
    Value::Object(m)
}

fn pct(part: u64, whole: u64) -> String {
    if whole == 0 {
        "-".into()
    } else {
        format!("{:.1}%", part as f64 * 100.0 / whole as f64)
    }
}

fn stat_text(queue: &str, i: &Inspection) -> String {
    let a = &i.attributes;
    let m = &i.messages;
    let mut s = format!(
        "{queue}  ({}, layout {})\n\nSettings\n{}\nMessages\n",
        path_of(queue),
        shmfifo::LAYOUT_VERSION,
        settings_text(a, 2)
    );
    s.push_str(&kv(
        &[
            ("visible", num(m.visible)),
            ("in flight", num(m.in_flight)),
            ("delayed", num(m.delayed)),
            ("being sent", num(m.sending)),
            ("deleted, not reclaimed", num(m.deleted)),
            (
                // The limit's counter (R8): a message that expires in flight (retention) leaves
                // it until the next receive's sweep counts the expiry, so it may read above the
                // census's "in flight" meanwhile.
                "counted for MaxInFlight",
                format!("{} of {}", num(a.in_flight_count), num(a.max_in_flight)),
            ),
        ],
        2,
    ));
    s.push_str(&format!(
        "\nGroups: {} active, {} locked, {} kept for their next send (room for {} now, {} at most)\n",
        num(i.active_groups),
        num(i.locked_groups),
        num(i.kept_groups),
        num(a.group_capacity),
        num(a.max_groups)
    ));
    if !i.largest_groups.is_empty() {
        let mut t = Table::new(&[
            "GROUP",
            "BACKLOG",
            "VISIBLE",
            "IN-FLIGHT",
            "DELAYED",
            "LOCKED",
        ]);
        for g in &i.largest_groups {
            t.row(vec![
                g.group_id.clone(),
                num(g.backlog()),
                num(g.visible),
                num(g.in_flight),
                num(g.delayed),
                if g.locked { "yes" } else { "no" }.into(),
            ]);
        }
        s.push_str(&t.render(2));
    }
    for d in &i.damaged_groups {
        s.push_str(&format!(
            "  damaged group (entry {}, left out of the counts): {}\n",
            d.index, d.reason
        ));
    }
    let parts = others(i);
    let alive = parts.iter().filter(|p| p.alive).count();
    s.push_str(&format!(
        "\nParticipants: {alive} alive, {} dead (of {} slots; this command not counted)\n",
        parts.len() - alive,
        a.max_participants
    ));
    if !parts.is_empty() {
        let mut t = Table::new(&["SLOT", "PID", "STATE"]);
        for p in &parts {
            t.row(vec![
                p.slot.to_string(),
                p.pid.to_string(),
                if p.alive {
                    "alive".into()
                } else {
                    "dead (shmfifo recover repairs)".into()
                },
            ]);
        }
        s.push_str(&t.render(2));
    }
    if a.dedup_entries > 0 {
        s.push_str(&format!(
            "\nDedup table: {} of {} entries in use ({})\n",
            num(a.dedup_entries_in_use),
            num(a.dedup_entries),
            pct(a.dedup_entries_in_use, a.dedup_entries)
        ));
        if a.dedup_evictions > 0 {
            s.push_str(&format!(
                "Dedup window: {} ids forgotten early so far; ids are remembered {:.1?} now (interval {:.1?})\n",
                num(a.dedup_evictions),
                a.effective_deduplication_interval,
                a.deduplication_interval
            ));
        }
    } else {
        s.push_str("\nDedup table: none (deduplication off)\n");
    }
    if a.quarantined_messages > 0 || a.quarantined_groups > 0 {
        s.push_str(&format!(
            "Quarantined (corrupted words): {} messages, {} groups\n",
            num(a.quarantined_messages),
            num(a.quarantined_groups)
        ));
    }
    let slot_bytes: u64 = i
        .size_classes
        .iter()
        .map(|c| c.slot_bytes * u64::from(c.slots))
        .sum();
    s.push_str(&format!(
        "\nMemory: {} arena: {} of message slots, {} of tables (groups, dedup, attempts, participants)\n",
        size(a.arena_bytes),
        size(slot_bytes),
        size(a.arena_bytes.saturating_sub(slot_bytes))
    ));
    s.push_str(&format!(
        "Growth: {} of {} size limit used, {} segments added since creation{}\n",
        size(i.size.bytes),
        size(i.size.limit_bytes),
        num(i.size.grows),
        if i.size.refused_grows > 0 {
            format!(
                ", {} refused by the file system (no space)",
                num(i.size.refused_grows)
            )
        } else {
            String::new()
        }
    ));
    let mut t = Table::new(&[
        "PAYLOAD", "SLOTS", "USED", "FREE", "SENDING", "DELETED", "FILL", "SIZE",
    ]);
    for c in &i.size_classes {
        t.row(vec![
            num(c.payload_bytes.into()),
            num(c.slots.into()),
            num(c.used.into()),
            num(c.free.into()),
            num(c.sending.into()),
            num(c.deleted.into()),
            pct(u64::from(c.slots - c.free), c.slots.into()),
            size(c.slot_bytes * u64::from(c.slots)),
        ]);
    }
    s.push_str(&t.render(2));
    // A pack (layout 23, the default for a batch's messages to one group) is one slot for
    // several messages: say so where the slots in use are fewer than the messages.
    let held = m.visible + m.in_flight + m.delayed;
    let used: u64 = i.size_classes.iter().map(|c| u64::from(c.used)).sum();
    if used < held {
        s.push_str(&format!(
            "  USED counts slots: {} messages in {} (a batch's messages to one group share one slot, a pack)\n",
            num(held),
            num(used)
        ));
    }
    s.push_str("\nCounters (since creation)\n");
    let rows: Vec<(&str, String)> = i
        .counters
        .named()
        .iter()
        .map(|&(n, v, _)| (n, num(v)))
        .collect();
    s.push_str(&kv(&rows, 2));
    s
}

/// A Prometheus label value, escaped.
fn label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// The Prometheus text exposition format: `# HELP` and `# TYPE` per metric, samples labelled
/// `queue="..."`; counters are `shmfifo_<name>_total`.
pub fn prometheus(queue: &str, i: &Inspection) -> String {
    let q = label(queue);
    let mut s = String::new();
    let mut metric = |name: &str, kind: &str, help: &str, samples: &[(String, u64)]| {
        s.push_str(&format!(
            "# HELP shmfifo_{name} {help}\n# TYPE shmfifo_{name} {kind}\n"
        ));
        for (labels, v) in samples {
            s.push_str(&format!("shmfifo_{name}{{queue=\"{q}\"{labels}}} {v}\n"));
        }
    };
    for (name, v, help) in i.counters.named() {
        metric(
            &format!("{name}_total"),
            "counter",
            help,
            &[(String::new(), v)],
        );
    }
    let a = &i.attributes;
    metric(
        "dedup_evictions_total",
        "counter",
        "Dedup ids forgotten before their interval ended (the table was full; DedupOverflow::ShortenWindow).",
        &[(String::new(), a.dedup_evictions)],
    );
    metric(
        "quarantined_messages_total",
        "counter",
        "Messages taken out of the queue because a corrupted word made them unreadable or their group's list unwalkable.",
        &[(String::new(), a.quarantined_messages)],
    );
    metric(
        "grows_total",
        "counter",
        "Segments the queue's size classes added (the arena grows by segments as its classes fill).",
        &[(String::new(), i.size.grows)],
    );
    metric(
        "refused_grows_total",
        "counter",
        "Growths the file system refused for want of space (each failed a send with NoSpace).",
        &[(String::new(), i.size.refused_grows)],
    );
    metric(
        "quarantined_groups_total",
        "counter",
        "Groups rebuilt empty because a corrupted word made their list unwalkable.",
        &[(String::new(), a.quarantined_groups)],
    );
    let parts = others(i);
    let alive = parts.iter().filter(|p| p.alive).count() as u64;
    let gauges: [(&str, &str, u64); 17] = [
        (
            "messages_visible",
            "Visible messages (ApproximateNumberOfMessages).",
            i.messages.visible,
        ),
        (
            "messages_in_flight",
            "In-flight messages (ApproximateNumberOfMessagesNotVisible).",
            i.messages.in_flight,
        ),
        (
            "messages_delayed",
            "Delayed messages (ApproximateNumberOfMessagesDelayed).",
            i.messages.delayed,
        ),
        (
            "in_flight_count",
            "Messages received and not yet deleted, as counted for the in-flight limit.",
            a.in_flight_count,
        ),
        ("max_in_flight", "The in-flight limit.", a.max_in_flight),
        ("groups_active", "Groups with messages.", i.active_groups),
        (
            "groups_locked",
            "Groups whose first message is in flight.",
            i.locked_groups,
        ),
        (
            "groups_kept",
            "Groups kept after their last message for their next send.",
            i.kept_groups,
        ),
        (
            "groups_max",
            "Most groups with messages at once (the group table grown to the size limit).",
            a.max_groups,
        ),
        (
            "groups_capacity",
            "Groups the group table holds now, before it adds a table.",
            a.group_capacity,
        ),
        (
            "participants_alive",
            "Live processes with the queue open (the scraper excluded).",
            alive,
        ),
        (
            "participants_dead",
            "Dead participants not yet repaired.",
            parts.len() as u64 - alive,
        ),
        (
            "dedup_entries_in_use",
            "Dedup table entries holding a live dedup id.",
            a.dedup_entries_in_use,
        ),
        ("dedup_entries", "Dedup table capacity.", a.dedup_entries),
        (
            "dedup_effective_interval_ms",
            "How long a dedup id is remembered now (shorter than the interval after evictions).",
            a.effective_deduplication_interval.as_millis() as u64,
        ),
        (
            "arena_bytes",
            "Bytes of the arena's file in use (the base file and its added segments).",
            a.arena_bytes,
        ),
        (
            "size_limit_bytes",
            "The most bytes the arena's file may grow to.",
            a.size_limit_bytes,
        ),
    ];
    for (name, help, v) in gauges {
        metric(name, "gauge", help, &[(String::new(), v)]);
    }
    let by_class = |f: &dyn Fn(&shmfifo::SizeClassUse) -> u64| -> Vec<(String, u64)> {
        i.size_classes
            .iter()
            .map(|c| (format!(",payload_bytes=\"{}\"", c.payload_bytes), f(c)))
            .collect()
    };
    metric(
        "slots",
        "gauge",
        "Message slots of a size class.",
        &by_class(&|c| c.slots.into()),
    );
    metric(
        "slots_used",
        "gauge",
        "Slots holding a message or a pack of a batch's messages (visible, in flight or delayed).",
        &by_class(&|c| c.used.into()),
    );
    metric(
        "slots_free",
        "gauge",
        "Free slots.",
        &by_class(&|c| c.free.into()),
    );
    s
}
