//! `shmfifo redrive`: messages of a dead-letter queue back to their sources, rate-limited,
//! with a progress bar on stderr.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use clap::Args;
use serde_json::json;
use shmfifo::{RedriveOptions, RedriveReport};

use super::{open, print_json, Ctx};
use crate::errors::Failure;
use crate::output::{messages, num, out};
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
    /// Most messages to move [default: as many as are visible as it starts].
    #[arg(long, value_name = "N")]
    pub limit: Option<u64>,
}

/// The progress bar: indicatif's, on stderr, drawn only when stderr is a terminal (a log
/// gets no control characters) and never with `--json`.
fn bar(total: u64, json: bool) -> ProgressBar {
    if json || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let b = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
    if let Ok(style) =
        ProgressStyle::with_template("redrive [{bar:30}] {pos}/{len} {per_sec} {elapsed}")
    {
        b.set_style(style.progress_chars("#>."));
    }
    b
}

/// Moves the messages in one redrive (its skipped messages are held until it returns, so a
/// run counts each once: chunks each put theirs back, and the next took them again), the
/// bar moved by a thread that watches the queue's count meanwhile.
pub fn run(a: &RedriveArgs, ctx: Ctx) -> Result<(), Failure> {
    // Ctrl-C / SIGTERM stop after the current message, the handle closed cleanly.
    crate::catch_interrupts();
    let q = open(&a.queue)?;
    let visible = q.attributes().approximate_number_of_messages;
    // At most the messages visible now, as the help says (it was only the bar's length: a
    // redrive went on with messages sent meanwhile).
    let total = a.limit.map_or(visible, |l| l.min(visible));
    let bar = bar(total, ctx.json);
    let started = Instant::now();
    let done = std::sync::atomic::AtomicBool::new(false);
    let r = std::thread::scope(|s| {
        if !bar.is_hidden() {
            let (q, bar, done) = (&q, &bar, &done);
            s.spawn(move || {
                // Relaxed: a stop flag; the bar's position is only shown.
                while !done.load(std::sync::atomic::Ordering::Relaxed) {
                    let left = q.attributes().approximate_number_of_messages;
                    bar.set_position(visible.saturating_sub(left).min(total));
                    std::thread::sleep(Duration::from_millis(250));
                }
            });
        }
        let r = q.redrive(&RedriveOptions {
            destination: a.to.clone(),
            max_per_second: a.rate,
            limit: Some(total),
            cancel: Some(crate::interrupt_flag()),
            sources: None,
            progress: None,
        });
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        r
    });
    let rep: RedriveReport = r.map_err(|e| {
        bar.abandon();
        Failure::queue(&a.queue, e)
    })?;
    bar.set_position(rep.moved);
    drop(q);
    bar.finish();
    let secs = started.elapsed().as_secs_f64();
    if ctx.json {
        print_json(&json!({
            "queue": a.queue,
            "destination": a.to,
            "moved": rep.moved,
            "skipped": rep.skipped,
            "unreachable": rep.unreachable,
            "interrupted": rep.cancelled,
            "seconds": (secs * 1000.0).round() / 1000.0,
        }));
    } else {
        let mut s = format!(
            "moved {} from {} to {} in {secs:.1}s{}\n",
            messages(rep.moved),
            a.queue,
            a.to.as_deref().unwrap_or("their source queues"),
            if rep.cancelled {
                " (interrupted: the rest stay)"
            } else {
                ""
            }
        );
        let nameless = rep.skipped - rep.unreachable;
        if nameless > 0 {
            s.push_str(&format!(
                "skipped {}: they name no source queue (use --to QUEUE); visible again now\n",
                num(nameless)
            ));
        }
        if rep.unreachable > 0 {
            s.push_str(&format!(
                "skipped {}: their source queue cannot be opened or is this queue (see the warning above; use --to QUEUE); visible again now\n",
                num(rep.unreachable)
            ));
        }
        out(&s);
    }
    Ok(())
}
