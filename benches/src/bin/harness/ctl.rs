//! The control block: a small shared mapping through which the harness starts its peer
//! processes together, stops them, and collects their counts.
//!
//! One block per harness run (`/dev/shm/shmfifo-harness-<pid>-ctl`), reset before each case.
//! Every field is an atomic, so the all-zero bytes of a fresh file are a valid block.

use std::path::Path;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use crate::sys::{now_ns, SharedMap};

/// Most worker processes (or threads) of one case.
pub const MAX_WORKERS: usize = 32;

/// A value on its own 128-byte line, so that flags polled by one process do not share a line
/// with counters written by another.
#[repr(C, align(128))]
#[derive(Debug, Default)]
pub struct Line<T>(pub T);

/// What one worker reports: its message counts at the start and end of the measuring window,
/// with the times they were taken.
#[repr(C)]
#[derive(Debug, Default)]
pub struct WorkerStats {
    /// Messages handled when the window opened (first look at the clock at or after it).
    pub c0: AtomicU64,
    /// `CLOCK_MONOTONIC` ns of that look; 0 = the window never opened for this worker.
    pub t0: AtomicU64,
    /// Messages handled when the window closed.
    pub c1: AtomicU64,
    /// Time of that look; 0 = never closed.
    pub t1: AtomicU64,
    /// Sends that found the queue full (or the dedup table) and were retried.
    pub full_retries: AtomicU64,
    /// 1 once the worker has written the fields above.
    pub done: AtomicU32,
}

/// The control block.
#[repr(C)]
#[derive(Debug, Default)]
pub struct Ctl {
    /// Workers that finished setting up (opened their endpoints).
    pub ready: Line<AtomicU32>,
    /// 0 until the harness starts the case. SYNC POINT: stored with Release after the window
    /// bounds; workers load it with Acquire and then read the bounds.
    pub go: Line<AtomicU32>,
    /// Raised by the first consumer whose window closed (and by the harness to end a
    /// ping-pong): producers stop sending. A bare signal that orders no data: Relaxed.
    pub stop: Line<AtomicU32>,
    /// Producers that sent their last message. Release by each producer after its last send;
    /// a consumer that loads it with Acquire and then finds the transport empty has seen
    /// every message.
    pub producers_done: Line<AtomicU32>,
    /// Window start, `CLOCK_MONOTONIC` ns (written before `go`).
    pub window_start: Line<AtomicU64>,
    /// Window end.
    pub window_end: Line<AtomicU64>,
    /// Per-worker reports.
    pub workers: [Line<WorkerStats>; MAX_WORKERS],
}

/// The mapped control block.
#[derive(Debug)]
pub struct CtlMap {
    map: SharedMap,
}

impl CtlMap {
    /// Creates the block at `path`.
    pub fn create(path: &Path) -> Result<CtlMap, String> {
        let map = SharedMap::create(path, std::mem::size_of::<Ctl>())?;
        Ok(CtlMap { map })
    }

    /// Maps the block a parent created.
    pub fn open(path: &Path) -> Result<CtlMap, String> {
        let map = SharedMap::open(path)?;
        if map.len() < std::mem::size_of::<Ctl>() {
            return Err(format!("{}: too short for a control block", path.display()));
        }
        Ok(CtlMap { map })
    }

    /// The block.
    pub fn get(&self) -> &Ctl {
        // SAFETY: the mapping is page-aligned and at least size_of::<Ctl>() long (checked at
        // open, made so at create); Ctl is made only of atomics, valid for any bytes; every
        // process mutates it only through those atomics; the reference borrows `self`, which
        // keeps the mapping alive.
        unsafe { &*(self.map.ptr() as *const Ctl) }
    }
}

impl Ctl {
    /// Zeroes everything before a case (no worker is alive between cases).
    pub fn reset(&self) {
        // Relaxed: no worker runs; the next workers are spawned after this, and process
        // creation orders these stores before anything they do.
        for a in [
            &self.ready.0,
            &self.go.0,
            &self.stop.0,
            &self.producers_done.0,
        ] {
            a.store(0, Ordering::Relaxed);
        }
        self.window_start.0.store(0, Ordering::Relaxed);
        self.window_end.0.store(0, Ordering::Relaxed);
        for w in &self.workers {
            let w = &w.0;
            for a in [&w.c0, &w.t0, &w.c1, &w.t1, &w.full_retries] {
                a.store(0, Ordering::Relaxed);
            }
            w.done.store(0, Ordering::Relaxed);
        }
    }

    /// Starts the case: the window opens `warmup` from now and lasts `window`.
    pub fn start(&self, warmup: Duration, window: Duration) {
        let t = now_ns() + warmup.as_nanos() as u64;
        // Relaxed: published by the Release store of `go` below.
        self.window_start.0.store(t, Ordering::Relaxed);
        self.window_end
            .0
            .store(t + window.as_nanos() as u64, Ordering::Relaxed);
        self.go.0.store(1, Ordering::Release);
    }

    /// Waits (spinning, then yielding) until the harness starts the case; returns the window.
    /// Gives up after `limit`.
    pub fn wait_go(&self, limit: Duration) -> Result<(u64, u64), String> {
        let t = now_ns();
        let mut spins = 0u32;
        // Acquire: pairs with the Release in `start`, so the window bounds are visible.
        while self.go.0.load(Ordering::Acquire) == 0 {
            spins += 1;
            if spins < 1_000 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
                if now_ns() - t > limit.as_nanos() as u64 {
                    return Err("the harness never started the case".into());
                }
            }
        }
        // Relaxed: ordered by the Acquire load of `go`.
        Ok((
            self.window_start.0.load(Ordering::Relaxed),
            self.window_end.0.load(Ordering::Relaxed),
        ))
    }

    /// Whether the case is being stopped.
    pub fn stopping(&self) -> bool {
        // Relaxed: see the field.
        self.stop.0.load(Ordering::Relaxed) != 0
    }

    /// Raises the stop flag.
    pub fn raise_stop(&self) {
        // Relaxed: see the field.
        self.stop.0.store(1, Ordering::Relaxed);
    }
}

/// Where a worker is in its measuring window: counts and times taken at the first look at the
/// clock at or after each bound.
#[derive(Debug)]
pub struct Window {
    start: u64,
    end: u64,
    /// The previous look (the first is taken when the window is made).
    prev: (u64, u64),
    open: Option<(u64, u64)>,
    close: Option<(u64, u64)>,
}

impl Window {
    /// A window from `start` to `end` (ns); the worker has handled nothing yet.
    pub fn new((start, end): (u64, u64)) -> Window {
        Window {
            start,
            end,
            prev: (0, now_ns()),
            open: None,
            close: None,
        }
    }

    /// Looks at the clock with `count` messages handled so far; returns true when this look
    /// closed the window.
    pub fn observe(&mut self, count: u64) -> bool {
        let t = now_ns();
        if self.open.is_none() && t >= self.start {
            // A worker that did not look at the clock during the whole window (blocked, or
            // not scheduled) opens it at its previous look, so that the interval it reports
            // still spans the window.
            self.open = Some(if t >= self.end { self.prev } else { (count, t) });
        }
        self.prev = (count, t);
        if self.open.is_some() && self.close.is_none() && t >= self.end {
            self.close = Some((count, t));
            return true;
        }
        false
    }

    /// Whether the window has closed.
    pub fn closed(&self) -> bool {
        self.close.is_some()
    }

    /// Writes the counts into `w`. A window stopped early closes at `count`, now; a worker
    /// that never looked at the clock within its window (blocked all along, say, on a full
    /// queue) handled nothing in it.
    pub fn report(&mut self, w: &WorkerStats, count: u64) {
        if self.open.is_none() {
            self.open = Some((count, self.start));
            self.close = Some((count, self.end.max(self.start + 1)));
        }
        if self.close.is_none() {
            self.close = Some((count, now_ns()));
        }
        let (c0, t0) = self.open.unwrap_or((0, 0));
        let (c1, t1) = self.close.unwrap_or((0, 0));
        // Relaxed: published by the Release store of `done`.
        w.c0.store(c0, Ordering::Relaxed);
        w.t0.store(t0, Ordering::Relaxed);
        w.c1.store(c1, Ordering::Relaxed);
        w.t1.store(t1, Ordering::Relaxed);
        w.done.store(1, Ordering::Release);
    }
}

/// A worker's rate in messages per second from its report, if its window opened and closed.
pub fn rate(w: &WorkerStats) -> Option<f64> {
    // Acquire: pairs with the Release store of `done` in `Window::report`.
    if w.done.load(Ordering::Acquire) == 0 {
        return None;
    }
    // Relaxed: ordered by the Acquire load of `done`.
    let (c0, t0) = (w.c0.load(Ordering::Relaxed), w.t0.load(Ordering::Relaxed));
    let (c1, t1) = (w.c1.load(Ordering::Relaxed), w.t1.load(Ordering::Relaxed));
    if t0 == 0 || t1 <= t0 {
        return None;
    }
    Some((c1 - c0) as f64 * 1e9 / (t1 - t0) as f64)
}
