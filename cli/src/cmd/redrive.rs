//! `shmfifo redrive`: messages of a dead-letter queue back to their sources, rate-limited,
//! with a progress bar on stderr.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

use clap::Args;
use serde_json::json;
use shmfifo::{RedriveOptions, RedriveReport};

use super::{open, print_json, Ctx};
use crate::errors::Failure;
use crate::output::{num, out};
use crate::parse;

/// Arguments of `redrive`.
#[derive(Args, Debug)]
pub struct RedriveArgs {
    /// The dead-letter queue: NAME (/dev/shm/NAME) or path (anything containing '/').
    pub queue: String,
    /// Move every message to this queue instead of each message's source queue.
    #[arg(long, value_name = "QUEUE")]
    pub to: Option<String>,
    /// Most messages moved per second (`100` or `100/s`) [default: as fast as possible].
    #[arg(long, value_name = "N/s", value_parser = parse::rate)]
    pub rate: Option<u32>,
    /// Most messages to move [default: all the visible ones].
    #[arg(long, value_name = "N")]
    pub limit: Option<u64>,
}

/// A progress bar drawn on stderr with `\r`.
struct Bar {
    total: u64,
    started: Instant,
}

impl Bar {
    fn draw(&self, done: u64) {
        const WIDTH: u64 = 30;
        let fill = (done.min(self.total) * WIDTH)
            .checked_div(self.total)
            .unwrap_or(WIDTH);
        let secs = self.started.elapsed().as_secs_f64();
        let rate = if secs > 0.0 { done as f64 / secs } else { 0.0 };
        let mut e = std::io::stderr().lock();
        let _ = write!(
            e,
            "\rredrive [{}{}] {}/{} {rate:.1}/s ",
            "#".repeat(fill as usize),
            ".".repeat((WIDTH - fill) as usize),
            num(done),
            num(self.total)
        );
        let _ = e.flush();
    }

    fn finish(&self, done: u64) {
        self.draw(done);
        eprintln!();
    }
}

/// Moves the messages, in chunks so that the bar moves between them.
pub fn run(a: &RedriveArgs, ctx: Ctx) -> Result<(), Failure> {
    let q = open(&a.queue)?;
    let visible = q.attributes().approximate_number_of_messages;
    let total = a.limit.map_or(visible, |l| l.min(visible));
    let bar = (!ctx.json && std::io::stderr().is_terminal()).then(|| Bar {
        total,
        started: Instant::now(),
    });
    if let Some(b) = &bar {
        b.draw(0);
    }
    // About four redraws a second at the rate limit; 100 messages a chunk without one.
    let chunk = a.rate.map_or(100, |r| u64::from(r / 4).max(1));
    let started = Instant::now();
    let mut rep = RedriveReport::default();
    loop {
        let want = a.limit.map_or(chunk, |l| (l - rep.moved).min(chunk));
        if want == 0 {
            break;
        }
        // Each call paces its own messages from its start: wait until this chunk's first
        // message is due on the whole run's schedule.
        if let Some(r) = a.rate {
            let due = Duration::from_secs_f64(rep.moved as f64 / f64::from(r));
            if let Some(w) = due.checked_sub(started.elapsed()) {
                std::thread::sleep(w);
            }
        }
        let r = q
            .redrive(&RedriveOptions {
                destination: a.to.clone(),
                max_per_second: a.rate,
                limit: Some(want),
                cancel: None,
            })
            .map_err(|e| {
                if let Some(b) = &bar {
                    b.finish(rep.moved);
                }
                Failure::queue(&a.queue, e)
            })?;
        rep.moved += r.moved;
        rep.skipped += r.skipped;
        if let Some(b) = &bar {
            b.draw(rep.moved);
        }
        // Fewer than asked: the queue has no visible message left.
        if r.moved < want || r.cancelled {
            break;
        }
    }
    drop(q);
    if let Some(b) = &bar {
        b.finish(rep.moved);
    }
    let secs = started.elapsed().as_secs_f64();
    if ctx.json {
        print_json(&json!({
            "queue": a.queue,
            "destination": a.to,
            "moved": rep.moved,
            "skipped": rep.skipped,
            "seconds": (secs * 1000.0).round() / 1000.0,
        }));
    } else {
        let mut s = format!(
            "moved {} messages from {} to {} in {secs:.1}s\n",
            num(rep.moved),
            a.queue,
            a.to.as_deref().unwrap_or("their source queues")
        );
        if rep.skipped > 0 {
            s.push_str(&format!(
                "skipped {}: they name no source queue (use --to QUEUE); visible again after 30s\n",
                num(rep.skipped)
            ));
        }
        out(&s);
    }
    Ok(())
}
