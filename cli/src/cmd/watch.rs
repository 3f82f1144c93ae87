//! `shmfifo watch`: a live view of a queue's counts, counters and per-second rates.

use std::io::IsTerminal;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clap::Args;
use serde_json::{json, Value};
use shmfifo::{Counters, QueueAttributes};

use super::{observe, Ctx};
use crate::errors::Failure;
use crate::output::{self, num, timestamp, Table};

/// Arguments of `watch`.
#[derive(Args, Debug)]
pub struct WatchArgs {
    /// Queue NAME (/dev/shm/NAME) or path (anything containing '/').
    pub queue: String,
    /// Time between refreshes.
    #[arg(long, short = 'i', value_name = "DURATION", value_parser = parse_interval, default_value = "1s")]
    pub interval: Duration,
    /// Stop after this many refreshes, 1 or more [default: never].
    #[arg(long, short = 'c', value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub count: Option<u64>,
}

fn parse_interval(s: &str) -> Result<Duration, String> {
    match crate::parse::duration(s)? {
        d if d.is_zero() => Err("the interval must be at least 1ms".into()),
        d => Ok(d),
    }
}

/// One look at the queue.
struct Snapshot {
    at: Instant,
    wall_ms: u64,
    attrs: QueueAttributes,
    counters: Counters,
}

/// Per-second rates of each counter since the previous snapshot.
fn rates(prev: &Snapshot, now: &Snapshot) -> Vec<(&'static str, f64)> {
    let secs = now.at.duration_since(prev.at).as_secs_f64().max(1e-9);
    prev.counters
        .named()
        .iter()
        .zip(now.counters.named())
        .map(|(&(name, before, _), (_, after, _))| {
            (name, after.saturating_sub(before) as f64 / secs)
        })
        .collect()
}

fn snapshot_json(queue: &str, s: &Snapshot, prev: Option<&Snapshot>) -> Value {
    let a = &s.attrs;
    let mut counters = serde_json::Map::new();
    for (name, v, _) in s.counters.named() {
        counters.insert(name.into(), json!(v));
    }
    let rates = prev.map(|p| {
        let mut m = serde_json::Map::new();
        for (name, r) in rates(p, s) {
            m.insert(name.into(), json!((r * 1000.0).round() / 1000.0));
        }
        Value::Object(m)
    });
    json!({
        "queue": queue,
        "timestamp": s.wall_ms,
        "messages": {
            "visible": a.approximate_number_of_messages,
            "in_flight": a.approximate_number_of_messages_not_visible,
            "delayed": a.approximate_number_of_messages_delayed,
        },
        "in_flight_count": a.in_flight_count,
        "active_groups": a.active_groups,
        "dedup_entries_in_use": a.dedup_entries_in_use,
        "counters": counters,
        "rates": rates,
    })
}

fn snapshot_text(queue: &str, interval: Duration, s: &Snapshot, prev: Option<&Snapshot>) -> String {
    let a = &s.attrs;
    let mut out = format!(
        "{queue}  {}  (every {})\n\n",
        timestamp(s.wall_ms),
        output::duration(interval)
    );
    out.push_str(&output::kv(
        &[
            ("visible", num(a.approximate_number_of_messages)),
            (
                "in flight",
                num(a.approximate_number_of_messages_not_visible),
            ),
            ("delayed", num(a.approximate_number_of_messages_delayed)),
            ("active groups", num(a.active_groups)),
            ("dedup entries in use", num(a.dedup_entries_in_use)),
        ],
        2,
    ));
    out.push('\n');
    let r = prev.map(|p| rates(p, s));
    let mut t = Table::new(&["COUNTER", "TOTAL", "PER SECOND"]);
    for (i, (name, v, _)) in s.counters.named().iter().enumerate() {
        t.row(vec![
            name.to_string(),
            num(*v),
            r.as_ref().map_or("-".into(), |r| format!("{:.1}", r[i].1)),
        ]);
    }
    out.push_str(&t.render(2));
    out
}

/// Refreshes until `--count` is reached (or forever), or stdout is closed.
pub fn run(a: &WatchArgs, ctx: Ctx) -> Result<(), Failure> {
    crate::catch_interrupts();
    let q = observe(&a.queue)?;
    let tty = !ctx.json && std::io::stdout().is_terminal();
    let mut prev: Option<Snapshot> = None;
    let mut n = 0u64;
    loop {
        // A file truncated under us: report it rather than fault on a vanished page.
        q.check().map_err(|e| Failure::queue(&a.queue, e))?;
        let s = Snapshot {
            at: Instant::now(),
            wall_ms: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64),
            attrs: q.attributes(),
            counters: q.counters(),
        };
        let written = if ctx.json {
            output::json(&snapshot_json(&a.queue, &s, prev.as_ref()), false)
        } else {
            let body = snapshot_text(&a.queue, a.interval, &s, prev.as_ref());
            // On a terminal, redraw in place; otherwise one block per refresh.
            output::out(&if tty {
                format!("\x1b[H\x1b[2J{body}")
            } else if n == 0 {
                body
            } else {
                format!("\n{body}")
            })
        };
        n += 1;
        if !written || a.count.is_some_and(|c| n >= c) {
            return Ok(());
        }
        let next = s.at + a.interval;
        prev = Some(s);
        // Ctrl-C ends the watch cleanly (the handle is dropped on return), within 50 ms.
        while let Some(w) = next.checked_duration_since(Instant::now()) {
            if crate::interrupted() {
                return Ok(());
            }
            std::thread::sleep(w.min(std::time::Duration::from_millis(50)));
        }
        if crate::interrupted() {
            return Ok(());
        }
    }
}
