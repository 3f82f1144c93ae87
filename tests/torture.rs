//! Kill -9 torture harness: many producer and consumer processes over many groups, SIGKILLed at
//! random moments and restarted, while an independent checker verifies the logs they keep.
//!
//! ```sh
//! cargo test --test torture                                          # CI: ≥ 500 kills
//! SHMFIFO_TORTURE_KILLS=20000 cargo test --release --test torture    # soak
//! ```
//!
//! Settings (environment): `SHMFIFO_TORTURE_KILLS` (default 500), `SHMFIFO_TORTURE_SEED`
//! (default: the clock; printed, so a run can be repeated), `SHMFIFO_TORTURE_INTERVAL_US` (mean
//! time between kills, default 8,000), `SHMFIFO_TORTURE_PAUSE_US` (producers' pause after each
//! burst of 16 sends, default 500; 0: full speed), `SHMFIFO_TORTURE_STOPS` (workers stopped
//! with SIGSTOP for 10–300 ms and continued, interleaved with the kills; default a fifth of the
//! kills), `SHMFIFO_TORTURE_KEEP=1` (keep the logs of a failed run).
//!
//! One binary (`harness = false`) plays every part. The orchestrator (no `SHMFIFO_TORTURE_ROLE`)
//! first runs the checker's self-tests on synthetic logs (a lost message, an order violation, a
//! double holder, a decreasing receive count … must each be reported), then creates a queue
//! under /dev/shm and re-executes itself as [`PRODUCERS`] producer and [`CONSUMERS`] consumer
//! processes. Every few ms (random) it SIGKILLs a random worker, writing the kill time (before
//! the `kill`) to its own log, reaps it and starts a new incarnation of the same lane. When the
//! kills are done it stops the producers (a file), waits for the queue to drain, stops the
//! consumers and checks every log.
//!
//! Every worker incarnation writes its own log, one `write(2)` per line or per batch of lines,
//! with CLOCK_MONOTONIC times (one clock for the whole host). A worker killed mid-write leaves
//! a torn last line, which the parser drops.
//!
//! * Producer lane `L` owns the groups `g` with `g % PRODUCERS == L`. Its log starts with a
//!   checkpoint (`C`: per group the next sequence and the sends that may be in doubt), written
//!   from the previous incarnations' logs. Each send is preceded by `S g s` and, once `send`
//!   returned Ok, followed by `K g s id dup`. Dedup ids are `"{g}-{s}"`, so a send in doubt (no
//!   `K`) is re-sent first by the next incarnation and deduplicated if it had been enqueued (D1:
//!   the original id comes back).
//! * Consumers receive up to 10 messages, log one `R` line per message (batch, group, seq, id,
//!   receive count, time before and after the receive) *before* acting, then delete (`D`, or `E`
//!   when the handle had expired). Now and then they give up on a group's run within a batch:
//!   from one message on, either `change_visibility(0)` (`A`) or leave it to expire (`L`).
//!
//! The checker ([`check`]) is a pure function of the parsed logs and kill times:
//! 1. loss and identity: every acknowledged `(g, s)` was received; each `(g, s)` has exactly one
//!    message id across acks and receives (dedup worked), each id one `(g, s)`; nothing received
//!    that was never sent; no message deleted twice; every send eventually acknowledged.
//! 2. order (R3, V3): within a batch each group's run is contiguous with consecutive sequences;
//!    a run starting at `s` was taken only after every `s' < s` of its group could have been
//!    deleted (a logged delete started, or it was held by a consumer killed later); nothing is
//!    received after its delete returned. (Sorting a group's receives by time and asking for
//!    non-decreasing sequences would be wrong: a redelivery after a visibility timeout or a
//!    consumer's death legitimately goes back to the oldest undeleted message.)
//! 3. receive counts: distinct per message and increasing in time order.
//! 4. exclusive holding: a message is received again only after the previous receive's
//!    visibility timeout, after the previous receiver was killed (the library may release a
//!    dead consumer's messages early) or after it released the message (`A`).
//! 5. no wedge: after producers stop the queue drains (visible + in flight + delayed = 0) within
//!    the visibility timeout plus [`DRAIN_BOUND`], and nothing is left for `recover()` to publish.

use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt::Write as _;
use std::fs::{self, File};
use std::io::Write as _;
use std::os::unix::process::ExitStatusExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use shmfifo::{Error, Queue, QueueConfig, ReceiveBuffer, ReceiveOptions, SendMessage};

/// Selects the worker part; absent in the orchestrator.
const ROLE_ENV: &str = "SHMFIFO_TORTURE_ROLE";
/// Producer lanes (processes alive at once).
const PRODUCERS: u32 = 3;
/// Consumer lanes.
const CONSUMERS: u32 = 3;
/// Message groups, spread over the producer lanes.
const GROUPS: u32 = 192;
/// Visibility timeout of every receive.
const VT: Duration = Duration::from_secs(2);
/// How long after the producers stop the queue may take to drain, beyond the visibility timeout.
const DRAIN_BOUND: Duration = Duration::from_secs(10);
/// Tolerance on visibility deadlines: the library keeps times in whole milliseconds.
const CLOCK_SLACK_NS: u64 = 2_000_000;
/// Per mille of received messages at which a consumer gives up on the rest of a group's run.
const GIVE_UP_PER_MILLE: u64 = 10;
/// Producers send bursts of this many messages at full speed, then pause for [`PAUSE`]: enough
/// contention, and a message volume the checker (and the dedup table) can hold in a soak run.
const BURST: u64 = 16;
/// See [`BURST`].
const PAUSE: Duration = Duration::from_micros(500);

// ---------------------------------------------------------------------------------------------
// Small tools: clock, random numbers, logs.

/// CLOCK_MONOTONIC in ns: one clock for every process of the host, so times in different logs
/// compare.
fn now_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// SplitMix64: enough randomness for choosing victims and moments, and reproducible from a seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// An append-only log: lines gather in `buf` and go out in one `write(2)` per [`Log::flush`].
struct Log {
    file: File,
    buf: String,
}

impl Log {
    fn create(path: &Path) -> Result<Log, String> {
        let file = File::create(path).map_err(|e| format!("create {}: {e}", path.display()))?;
        Ok(Log {
            file,
            buf: String::new(),
        })
    }
    fn flush(&mut self) -> Result<(), String> {
        if !self.buf.is_empty() {
            (&self.file)
                .write_all(self.buf.as_bytes())
                .map_err(|e| format!("write log: {e}"))?;
            self.buf.clear();
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Producer,
    Consumer,
}

impl Role {
    fn tag(self) -> char {
        match self {
            Role::Producer => 'p',
            Role::Consumer => 'c',
        }
    }
}

fn log_path(dir: &Path, role: Role, lane: u32, inc: u32) -> PathBuf {
    dir.join(format!("{}{lane}-{inc}.log", role.tag()))
}

fn body(g: u32, s: u64) -> String {
    // Padding of 0–399 bytes spreads messages over two size classes.
    let pad = ((u64::from(g) * 31 + s * 17) % 400) as usize;
    format!("g{g}:s{s}:{}", "x".repeat(pad))
}

fn parse_body(b: &str) -> Option<(u32, u64)> {
    let mut it = b.split(':');
    let g = it.next()?.strip_prefix('g')?.parse().ok()?;
    let s = it.next()?.strip_prefix('s')?.parse().ok()?;
    Some((g, s))
}

// ---------------------------------------------------------------------------------------------
// Log lines.

/// One line of a worker's log.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Event {
    /// `C n0,n1,… p0,p1,…|-`: a producer's starting state, per group of its lane (in order of
    /// group number) the next sequence, and the lane's groups whose next send may be in doubt.
    Checkpoint { next: Vec<u64>, pending: Vec<usize> },
    /// `S g s t`: about to send.
    Send { g: u32, s: u64 },
    /// `K g s id dup t`: `send` returned Ok.
    Ack { g: u32, s: u64, id: u128, dup: bool },
    /// `R batch g s id receive_count tb ta`: received (tb, ta: before and after `receive`).
    Recv {
        batch: u64,
        g: u32,
        s: u64,
        id: u128,
        rc: u32,
        tb: u64,
        ta: u64,
    },
    /// `D g s id tb ta`: deleted (tb, ta: before and after `delete`).
    Delete {
        g: u32,
        s: u64,
        id: u128,
        tb: u64,
        ta: u64,
    },
    /// `E g s id`: a delete or visibility change refused, the handle had expired.
    Expired { id: u128 },
    /// `A g s id t`: about to give it back with `change_visibility(0)` (logged before the
    /// call; `E` follows if the handle had expired).
    Abandon { id: u128, tb: u64 },
    /// `L g s id`: deliberately left to its visibility timeout.
    Left { id: u128 },
}

fn parse_line(line: &str) -> Option<Event> {
    let f: Vec<&str> = line.split(' ').collect();
    let n = |i: usize| -> Option<u64> { f.get(i)?.parse().ok() };
    let g = |i: usize| -> Option<u32> { f.get(i)?.parse().ok() };
    let id = |i: usize| -> Option<u128> { u128::from_str_radix(f.get(i)?, 16).ok() };
    let list = |i: usize| -> Option<Vec<u64>> {
        match *f.get(i)? {
            "-" => Some(Vec::new()),
            s => s.split(',').map(|x| x.parse().ok()).collect(),
        }
    };
    let ev = match (f[0], f.len()) {
        ("C", 3) => Event::Checkpoint {
            next: list(1)?,
            pending: list(2)?.into_iter().map(|k| k as usize).collect(),
        },
        ("S", 4) => Event::Send { g: g(1)?, s: n(2)? },
        ("K", 6) => Event::Ack {
            g: g(1)?,
            s: n(2)?,
            id: id(3)?,
            dup: match f[4] {
                "0" => false,
                "1" => true,
                _ => return None,
            },
        },
        ("R", 8) => Event::Recv {
            batch: n(1)?,
            g: g(2)?,
            s: n(3)?,
            id: id(4)?,
            rc: g(5)?,
            tb: n(6)?,
            ta: n(7)?,
        },
        ("D", 6) => Event::Delete {
            g: g(1)?,
            s: n(2)?,
            id: id(3)?,
            tb: n(4)?,
            ta: n(5)?,
        },
        ("E", 4) => Event::Expired { id: id(3)? },
        ("A", 5) => Event::Abandon {
            id: id(3)?,
            tb: n(4)?,
        },
        ("L", 4) => Event::Left { id: id(3)? },
        _ => return None,
    };
    Some(ev)
}

/// Parses a log. Only lines ended by `\n` count (a torn last line is dropped); returns the
/// events and the number of complete lines that did not parse.
fn parse_log(text: &str) -> (Vec<Event>, usize) {
    let complete = match text.rfind('\n') {
        Some(i) => &text[..i],
        None => return (Vec::new(), 0),
    };
    let mut bad = 0;
    let mut out = Vec::new();
    for line in complete.split('\n') {
        match parse_line(line) {
            Some(e) => out.push(e),
            None => bad += 1,
        }
    }
    (out, bad)
}

// ---------------------------------------------------------------------------------------------
// Workers.

/// What every worker is told on its command line.
struct WorkerArgs {
    queue: String,
    dir: PathBuf,
    lane: u32,
    inc: u32,
    seed: u64,
    parent: u32,
}

impl WorkerArgs {
    fn to_args(&self) -> Vec<String> {
        vec![
            self.queue.clone(),
            self.dir.display().to_string(),
            self.lane.to_string(),
            self.inc.to_string(),
            self.seed.to_string(),
            self.parent.to_string(),
        ]
    }
    fn from_args(a: &[String]) -> Option<WorkerArgs> {
        Some(WorkerArgs {
            queue: a.first()?.clone(),
            dir: PathBuf::from(a.get(1)?),
            lane: a.get(2)?.parse().ok()?,
            inc: a.get(3)?.parse().ok()?,
            seed: a.get(4)?.parse().ok()?,
            parent: a.get(5)?.parse().ok()?,
        })
    }
}

fn worker(role: &str) -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(w) = WorkerArgs::from_args(&args) else {
        eprintln!("torture worker: bad arguments {args:?}");
        return ExitCode::from(2);
    };
    // Die with the orchestrator, even if it is killed itself.
    let _ = rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL));
    if rustix::process::getppid().map(|p| p.as_raw_nonzero().get() as u32) != Some(w.parent) {
        return ExitCode::from(2);
    }
    let r = match role {
        "producer" => producer(&w),
        "consumer" => consumer(&w),
        _ => Err(format!("unknown role {role}")),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("torture {role} {}#{}: {e}", w.lane, w.inc);
            ExitCode::from(3)
        }
    }
}

/// A producer's state from its lane's earlier logs: per group of the lane (in group order) the
/// next sequence to send, and the groups whose next send may already be enqueued (`S` without
/// `K`). The latest incarnation with a complete checkpoint has it all: later ones died before
/// writing theirs, so before sending anything.
fn producer_state(w: &WorkerArgs, n: usize) -> (Vec<u64>, Vec<usize>) {
    for prev in (0..w.inc).rev() {
        let Ok(text) = fs::read_to_string(log_path(&w.dir, Role::Producer, w.lane, prev)) else {
            continue;
        };
        let events = parse_log(&text).0;
        let Some(Event::Checkpoint { next, pending }) = events.first() else {
            continue;
        };
        let mut next = next.clone();
        next.resize(n, 0);
        let mut in_doubt: HashSet<(usize, u64)> = pending
            .iter()
            .filter(|&&k| k < n)
            .map(|&k| (k, next[k]))
            .collect();
        for e in &events[1..] {
            match *e {
                Event::Send { g, s } => {
                    in_doubt.insert(((g / PRODUCERS) as usize, s));
                }
                Event::Ack { g, s, .. } => {
                    let k = (g / PRODUCERS) as usize;
                    if k < n {
                        next[k] = next[k].max(s + 1);
                    }
                }
                _ => {}
            }
        }
        let pending = (0..n)
            .filter(|&k| in_doubt.contains(&(k, next[k])))
            .collect();
        return (next, pending);
    }
    (vec![0; n], Vec::new())
}

fn producer(w: &WorkerArgs) -> Result<(), String> {
    let q = Queue::open(&w.queue).map_err(|e| format!("open: {e}"))?;
    let mine: Vec<u32> = (0..GROUPS).filter(|g| g % PRODUCERS == w.lane).collect();
    let (mut next, pending) = producer_state(w, mine.len());
    let mut log = Log::create(&log_path(&w.dir, Role::Producer, w.lane, w.inc))?;
    let csv = |v: &mut dyn Iterator<Item = u64>| {
        let s: Vec<String> = v.map(|x| x.to_string()).collect();
        if s.is_empty() {
            "-".to_string()
        } else {
            s.join(",")
        }
    };
    log.buf = format!(
        "C {} {}\n",
        csv(&mut next.iter().copied()),
        csv(&mut pending.iter().map(|&k| k as u64))
    );
    log.flush()?;
    let stop = w.dir.join("stop-producers");
    let mut rng = Rng(w.seed);
    // Sends in doubt first, even after the stop: then every send is acknowledged in the end.
    let mut todo: VecDeque<usize> = pending.into();
    let mut rr = rng.below(mine.len() as u64) as usize;
    let pause = env_u64("SHMFIFO_TORTURE_PAUSE_US").map_or(PAUSE, Duration::from_micros);
    for sent in 1u64.. {
        if sent % BURST == 0 && !pause.is_zero() {
            std::thread::sleep(pause);
        }
        let k = match todo.pop_front() {
            Some(k) => k,
            None => {
                if stop.exists() {
                    return Ok(());
                }
                rr = (rr + 1) % mine.len();
                rr
            }
        };
        // With packs (layout 22; the default since 23): lane 1 sends runs of 2 to 4 consecutive
        // messages of a group in one `send_messages`, as one pack, when nothing is in doubt.
        if w.lane == 1 && todo.is_empty() {
            let n = 2 + rng.below(3);
            send_pack(&q, &mut log, mine[k], next[k], n)?;
            next[k] += n;
            continue;
        }
        let (g, s) = (mine[k], next[k]);
        let _ = writeln!(log.buf, "S {g} {s} {}", now_ns());
        log.flush()?;
        let (group, dedup, text) = (format!("g{g}"), format!("{g}-{s}"), body(g, s));
        let msg = SendMessage::new(&group, &text).dedup_id(&dedup);
        let r = loop {
            match q.send(&msg) {
                Ok(r) => break r,
                // Back-pressure and transient states: wait for consumers (or for the
                // in-doubt send of a dead producer to be settled) and retry.
                Err(Error::SizeClassFull { .. })
                | Err(Error::GroupLimitReached { .. })
                | Err(Error::DedupInProgress)
                | Err(Error::ParticipantBusy { .. })
                | Err(Error::DedupTableFull { .. }) => {
                    std::thread::sleep(Duration::from_micros(200));
                }
                Err(e) => return Err(format!("send {g} {s}: {e}")),
            }
        };
        let _ = writeln!(
            log.buf,
            "K {g} {s} {:x} {} {}",
            r.message_id.0,
            u8::from(r.duplicate),
            now_ns()
        );
        log.flush()?;
        next[k] = s + 1;
    }
    Ok(())
}

/// Sends `(g, s) .. (g, s + n)` as one batch, which the queue keeps as one pack: every `S`
/// line first, then one `K` line per message once the batch returned. A pack is all or
/// nothing; where its class is full and may not grow, the queue sends the batch one slot a
/// message, which may enqueue a prefix of it: those are logged and the rest sent again, in
/// order. A message enqueued after one that was not breaks the order the checker holds the
/// queue to, and fails the worker.
fn send_pack(q: &Queue, log: &mut Log, g: u32, s: u64, n: u64) -> Result<(), String> {
    q.set_pack_batches(true);
    for j in 0..n {
        let _ = writeln!(log.buf, "S {g} {} {}", s + j, now_ns());
    }
    log.flush()?;
    let group = format!("g{g}");
    let texts: Vec<(String, String)> = (0..n)
        .map(|j| (format!("{g}-{}", s + j), body(g, s + j)))
        .collect();
    let msgs: Vec<SendMessage<'_>> = texts
        .iter()
        .map(|(d, t)| SendMessage::new(&group, t).dedup_id(d))
        .collect();
    let retryable = |r: &Result<shmfifo::SendResult, Error>| {
        matches!(
            r,
            Err(Error::SizeClassFull { .. })
                | Err(Error::GroupLimitReached { .. })
                | Err(Error::ParticipantBusy { .. })
                | Err(Error::DedupTableFull { .. })
        )
    };
    let mut from = 0;
    while from < msgs.len() {
        let rs = q
            .send_messages(&msgs[from..])
            .map_err(|e| format!("send_messages {g} {s}: {e}"))?;
        // The prefix enqueued, then nothing: every later entry must have failed too.
        let sent = rs.iter().take_while(|r| r.is_ok()).count();
        if let Some(r) = rs[sent..].iter().find(|r| !retryable(r)) {
            let j = from + sent;
            return Err(match r {
                Ok(_) => format!(
                    "a pack's message sent after one that was not: {g} {}",
                    s + j as u64
                ),
                Err(e) => format!("send_messages {g} {}: {e}", s + j as u64),
            });
        }
        for (j, r) in rs[..sent].iter().enumerate() {
            let r = r.as_ref().expect("the prefix is Ok");
            let _ = writeln!(
                log.buf,
                "K {g} {} {:x} {} {}",
                s + (from + j) as u64,
                r.message_id.0,
                u8::from(r.duplicate),
                now_ns()
            );
        }
        log.flush()?;
        from += sent;
        if from < msgs.len() {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
    Ok(())
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum GiveUp {
    /// `change_visibility(0)`: visible again at once.
    Release,
    /// Left alone until its visibility timeout.
    Leave,
}

fn consumer(w: &WorkerArgs) -> Result<(), String> {
    let q = Queue::open(&w.queue).map_err(|e| format!("open: {e}"))?;
    let mut log = Log::create(&log_path(&w.dir, Role::Consumer, w.lane, w.inc))?;
    let stop = w.dir.join("stop-consumers");
    let draining = w.dir.join("stop-producers");
    let mut rng = Rng(w.seed);
    let opts = ReceiveOptions::max(10)
        .visibility_timeout(VT)
        .wait(Duration::from_millis(20));
    let mut buf = ReceiveBuffer::new();
    let mut batch = 0u64;
    while !stop.exists() {
        let tb = now_ns();
        let n = match q.receive_into(&opts, &mut buf) {
            Ok(n) => n,
            // A peer stopped (SIGSTOP) holding what this receive needed: retryable.
            Err(Error::ParticipantBusy { .. }) => continue,
            Err(e) => return Err(format!("receive: {e}")),
        };
        let ta = now_ns();
        if n == 0 {
            continue;
        }
        batch += 1;
        let mut keys = Vec::with_capacity(n);
        for m in buf.messages() {
            let (g, s) = parse_body(&m.body)
                .filter(|&(g, _)| m.group_id == format!("g{g}"))
                .ok_or_else(|| format!("bad message: group {} body {:?}", m.group_id, m.body))?;
            let id = m.message_id.0;
            let rc = m.receive_count;
            let _ = writeln!(log.buf, "R {batch} {g} {s} {id:x} {rc} {tb} {ta}");
            keys.push((g, s, id));
        }
        // Logged before any delete: a delete without an `R` line cannot happen. The outcomes go
        // out in one write after the batch (a killed consumer may have deleted unlogged).
        log.flush()?;
        // Processing time, now and then: a kill then finds the batch still held.
        if rng.below(4) == 0 {
            std::thread::sleep(Duration::from_micros(rng.below(1000)));
        }
        // Giving up on a message gives up on the rest of its group's run in this batch, as a
        // FIFO consumer must (else a later message would be deleted before an earlier one).
        // Not once the producers stop: the drain is then bounded by one visibility timeout.
        let give_up = if draining.exists() {
            0
        } else {
            GIVE_UP_PER_MILLE
        };
        let mut gave_up: Vec<(u32, GiveUp)> = Vec::new();
        for (m, &(g, s, id)) in buf.messages().iter().zip(&keys) {
            let mode = match gave_up.iter().find(|x| x.0 == g) {
                Some(&(_, mode)) => Some(mode),
                None if rng.below(1000) < give_up => {
                    let mode = if rng.below(4) == 0 {
                        GiveUp::Leave
                    } else {
                        GiveUp::Release
                    };
                    gave_up.push((g, mode));
                    Some(mode)
                }
                None => None,
            };
            let r = match mode {
                Some(GiveUp::Leave) => {
                    let _ = writeln!(log.buf, "L {g} {s} {id:x}");
                    continue;
                }
                Some(GiveUp::Release) => {
                    // Logged (with the lines so far) before the call: if we are killed right
                    // after it, the checker still knows the message may have been released.
                    let _ = writeln!(log.buf, "A {g} {s} {id:x} {}", now_ns());
                    log.flush()?;
                    q.change_visibility(&m.receipt_handle, Duration::ZERO)
                }
                None => {
                    let t0 = now_ns();
                    let r = q.delete(&m.receipt_handle);
                    if r.is_ok() {
                        let _ = writeln!(log.buf, "D {g} {s} {id:x} {t0} {}", now_ns());
                    }
                    r
                }
            };
            match r {
                Ok(()) => {}
                // Held past the visibility timeout (a slow or descheduled consumer): no
                // longer ours.
                Err(Error::ReceiptHandleExpired { .. }) => {
                    let _ = writeln!(log.buf, "E {g} {s} {id:x}");
                }
                Err(e) => return Err(format!("{g} {s}: {e}")),
            }
        }
        log.flush()?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// The checker.

/// One worker incarnation's log, as the checker sees it.
#[derive(Debug, Clone)]
struct Incarnation {
    role: Role,
    lane: u32,
    inc: u32,
    /// CLOCK_MONOTONIC just before the orchestrator's SIGKILL, if it was killed.
    killed_at: Option<u64>,
    events: Vec<Event>,
    /// Complete lines that did not parse.
    malformed: usize,
}

impl Incarnation {
    fn label(&self) -> String {
        format!("{}{}#{}", self.role.tag(), self.lane, self.inc)
    }
}

#[derive(Debug)]
struct Violation {
    kind: &'static str,
    detail: String,
}

#[derive(Debug, Default)]
struct Stats {
    sent: usize,
    acked: usize,
    dup_acks: usize,
    recv_lines: usize,
    received: usize,
    deletes: usize,
    expired: usize,
    released: usize,
    left: usize,
    max_rc: u32,
    /// Killed producers whose last send was in doubt (`S` without `K`).
    killed_mid_send: usize,
    /// Killed consumers holding received messages they had not logged an outcome for.
    killed_holding: usize,
    /// Redeliveries (of a logged receive) allowed by: the visibility timeout, the holder's
    /// death before it (early release), a release by the holder.
    after_expiry: usize,
    after_death: usize,
    after_release: usize,
}

/// Details kept per run (every violation is counted).
const MAX_DETAILS: usize = 1000;

#[derive(Debug, Default)]
struct Report {
    /// The first [`MAX_DETAILS`] violations.
    violations: Vec<Violation>,
    /// Violations per kind, in order of first appearance.
    counts: Vec<(&'static str, usize)>,
    stats: Stats,
}

impl Report {
    fn add(&mut self, kind: &'static str, detail: String) {
        match self.counts.iter_mut().find(|x| x.0 == kind) {
            Some(x) => x.1 += 1,
            None => self.counts.push((kind, 1)),
        }
        if self.violations.len() < MAX_DETAILS {
            self.violations.push(Violation { kind, detail });
        }
    }
    fn total(&self) -> usize {
        self.counts.iter().map(|x| x.1).sum()
    }
    fn has(&self, kind: &str) -> bool {
        self.counts.iter().any(|x| x.0 == kind)
    }
}

/// One `R` line, with what its receiver did next.
struct Rcv {
    inc: u32,
    batch: u64,
    g: u32,
    s: u64,
    id: u128,
    rc: u32,
    tb: u64,
    ta: u64,
    /// `A` line: given back at this time (before the call).
    released: Option<u64>,
    /// Some outcome (`D`, `E`, `A`, `L`) was logged.
    settled: bool,
}

/// What the checker knows of one message `(g, s)`.
#[derive(Clone)]
struct Msg {
    id: u128,
    /// Where `id` was first seen: incarnation, and whether by an ack (else a receive).
    seen: Option<(u32, bool)>,
    sent: bool,
    acked: bool,
    received: bool,
    /// Earliest moment it may have been deleted: a logged delete's start, or the end of a
    /// receive by a consumer killed before logging what it did with it.
    maybe_del: u64,
    /// Earliest moment it surely was deleted: a logged delete's return.
    surely_del: u64,
    deletes: u32,
    /// The first logged delete: incarnation and start.
    first_del: (u32, u64),
    /// The latest `maybe_del` of the group's earlier messages (filled in by the order check).
    before: u64,
}

impl Default for Msg {
    fn default() -> Msg {
        Msg {
            id: 0,
            seen: None,
            sent: false,
            acked: false,
            received: false,
            maybe_del: u64::MAX,
            surely_del: u64::MAX,
            deletes: 0,
            first_del: (0, 0),
            before: 0,
        }
    }
}

/// Every message by group and sequence (dense: sequences start at 0).
#[derive(Default)]
struct Table {
    groups: Vec<Vec<Msg>>,
}

impl Table {
    /// The message `(g, s)`; `None` (and a violation) for numbers no producer here makes.
    fn at(&mut self, rep: &mut Report, g: u32, s: u64) -> Option<&mut Msg> {
        if g >= GROUPS.max(64) || s >= 1 << 28 {
            rep.add("log", format!("g{g} s{s} is out of range"));
            return None;
        }
        let (g, s) = (g as usize, s as usize);
        if self.groups.len() <= g {
            self.groups.resize_with(g + 1, Vec::new);
        }
        let v = &mut self.groups[g];
        if v.len() <= s {
            v.resize(s + 1, Msg::default());
        }
        Some(&mut v[s])
    }
    fn iter(&self) -> impl Iterator<Item = (u32, u64, &Msg)> {
        self.groups.iter().enumerate().flat_map(|(g, v)| {
            v.iter()
                .enumerate()
                .map(move |(s, m)| (g as u32, s as u64, m))
        })
    }
}

fn ms(t: u64) -> String {
    format!("{:.3}ms", t as f64 / 1e6)
}

/// Checks the logs of one run (see the module docs for the rules), one incarnation at a time:
/// only per-message facts and the receives are kept. `vt_ns`: the visibility timeout of every
/// receive.
fn check(incs: impl IntoIterator<Item = Incarnation>, vt_ns: u64) -> Report {
    let mut rep = Report::default();
    let mut rcvs: Vec<Rcv> = Vec::new();
    let mut table = Table::default();
    let mut labels: Vec<String> = Vec::new();
    let mut kill_times: Vec<Option<u64>> = Vec::new();
    let say = |labels: &[String], (i, ack): (u32, bool)| {
        let what = if ack { "ack" } else { "receive" };
        format!("{what} by {}", labels[i as usize])
    };
    // Records that (g, s) was seen with `id`: a second id is a dedup failure.
    let bind = |rep: &mut Report,
                table: &mut Table,
                labels: &[String],
                g: u32,
                s: u64,
                id: u128,
                at: (u32, bool)|
     -> Option<()> {
        let m = table.at(rep, g, s)?;
        match m.seen {
            None => {
                m.id = id;
                m.seen = Some(at);
            }
            Some(w) if m.id != id => {
                let first = m.id;
                rep.add(
                    "dedup",
                    format!(
                        "g{g} s{s} has two message ids: {first:x} ({}) and {id:x} ({})",
                        say(labels, w),
                        say(labels, at)
                    ),
                );
            }
            Some(_) => {}
        }
        Some(())
    };

    for (ii, inc) in incs.into_iter().enumerate() {
        let ii = ii as u32;
        let who = inc.label();
        labels.push(who.clone());
        kill_times.push(inc.killed_at);
        if inc.malformed > 0 {
            rep.add(
                "log",
                format!("{who}: {} complete lines did not parse", inc.malformed),
            );
        }
        if inc.killed_at.is_some() && matches!(inc.events.last(), Some(Event::Send { .. })) {
            rep.stats.killed_mid_send += 1;
        }
        // This incarnation's latest receive of each message.
        let mut last: HashMap<u128, usize> = HashMap::new();
        let first_rcv = rcvs.len();
        let settle = |rep: &mut Report,
                      rcvs: &mut [Rcv],
                      last: &HashMap<u128, usize>,
                      id: u128,
                      what: &str| match last.get(&id) {
            Some(&k) => {
                rcvs[k].settled = true;
                Some(k)
            }
            None => {
                rep.add(
                    "log",
                    format!("{who}: {what} of {id:x}, which it never received"),
                );
                None
            }
        };
        for e in &inc.events {
            match *e {
                Event::Checkpoint { .. } => {}
                Event::Send { g, s } => {
                    if let Some(m) = table.at(&mut rep, g, s) {
                        m.sent = true;
                    }
                }
                Event::Ack { g, s, id, dup } => {
                    if bind(&mut rep, &mut table, &labels, g, s, id, (ii, true)).is_some() {
                        if let Some(m) = table.at(&mut rep, g, s) {
                            m.acked = true;
                        }
                    }
                    rep.stats.dup_acks += usize::from(dup);
                }
                Event::Recv {
                    batch,
                    g,
                    s,
                    id,
                    rc,
                    tb,
                    ta,
                } => {
                    if bind(&mut rep, &mut table, &labels, g, s, id, (ii, false)).is_none() {
                        continue;
                    }
                    if let Some(m) = table.at(&mut rep, g, s) {
                        m.received = true;
                    }
                    rep.stats.max_rc = rep.stats.max_rc.max(rc);
                    last.insert(id, rcvs.len());
                    rcvs.push(Rcv {
                        inc: ii,
                        batch,
                        g,
                        s,
                        id,
                        rc,
                        tb,
                        ta,
                        released: None,
                        settled: false,
                    });
                }
                Event::Delete { g, s, id, tb, ta } => {
                    settle(&mut rep, &mut rcvs, &last, id, "delete");
                    if let Some(m) = table.at(&mut rep, g, s) {
                        if m.deletes == 0 {
                            m.first_del = (ii, tb);
                        }
                        m.deletes += 1;
                        m.maybe_del = m.maybe_del.min(tb);
                        m.surely_del = m.surely_del.min(ta);
                    }
                    rep.stats.deletes += 1;
                }
                Event::Expired { id } => {
                    settle(&mut rep, &mut rcvs, &last, id, "expired handle");
                    rep.stats.expired += 1;
                }
                Event::Abandon { id, tb } => {
                    if let Some(k) = settle(&mut rep, &mut rcvs, &last, id, "release") {
                        rcvs[k].released = Some(tb);
                    }
                    rep.stats.released += 1;
                }
                Event::Left { id } => {
                    settle(&mut rep, &mut rcvs, &last, id, "leave");
                    rep.stats.left += 1;
                }
            }
        }
        if inc.killed_at.is_some() {
            let mut holding = false;
            for r in rcvs[first_rcv..].iter().filter(|r| !r.settled) {
                // Its delete may have happened, unlogged, at any time after the receive.
                holding = true;
                if let Some(m) = table.at(&mut rep, r.g, r.s) {
                    m.maybe_del = m.maybe_del.min(r.ta);
                }
            }
            rep.stats.killed_holding += usize::from(holding);
        }
    }
    rep.stats.recv_lines = rcvs.len();
    let label = |r: &Rcv| labels[r.inc as usize].as_str();
    let killed = |r: &Rcv| kill_times[r.inc as usize];

    // 1. Loss, phantoms, sends never acknowledged, double deletes, one id for two messages.
    let mut by_id: Vec<(u128, u32, u64)> = Vec::new();
    for (g, s, m) in table.iter() {
        rep.stats.sent += usize::from(m.sent);
        rep.stats.acked += usize::from(m.acked);
        rep.stats.received += usize::from(m.received);
        if m.acked && !m.received {
            rep.add(
                "lost",
                format!(
                    "g{g} s{s} (id {:x}) was acknowledged but never received",
                    m.id
                ),
            );
        }
        if m.received && !m.sent {
            rep.add("phantom", format!("g{g} s{s} was received but never sent"));
        }
        if m.sent && !m.acked {
            rep.add(
                "unacknowledged",
                format!("g{g} s{s} was sent but no incarnation ever had it acknowledged"),
            );
        }
        if m.deletes > 1 {
            rep.add(
                "deleted twice",
                format!(
                    "g{g} s{s} deleted successfully {} times, first by {} at {}",
                    m.deletes,
                    labels[m.first_del.0 as usize],
                    ms(m.first_del.1)
                ),
            );
        }
        if m.seen.is_some() {
            by_id.push((m.id, g, s));
        }
    }
    by_id.sort_unstable();
    for w in by_id.windows(2) {
        if w[0].0 == w[1].0 {
            rep.add(
                "identity",
                format!(
                    "message id {:x} names g{} s{} and g{} s{}",
                    w[0].0, w[0].1, w[0].2, w[1].1, w[1].2
                ),
            );
        }
    }
    drop(by_id);

    // 3 and 4. Per message, its receives in order of receive count: counts distinct and
    // increasing in time, each redelivery allowed.
    let mut order: Vec<u32> = (0..rcvs.len() as u32).collect();
    order.sort_unstable_by_key(|&k| {
        let r = &rcvs[k as usize];
        (r.id, r.rc, r.tb)
    });
    for v in order.chunk_by(|&a, &b| rcvs[a as usize].id == rcvs[b as usize].id) {
        for (i, &a) in v.iter().enumerate() {
            for &b in &v[i + 1..] {
                let (x, y) = (&rcvs[a as usize], &rcvs[b as usize]);
                if x.rc == y.rc {
                    rep.add(
                        "receive count",
                        format!(
                            "g{} s{} received twice with count {}: by {} at {} and by {} at {}",
                            x.g,
                            x.s,
                            x.rc,
                            label(x),
                            ms(x.tb),
                            label(y),
                            ms(y.tb)
                        ),
                    );
                } else if y.ta < x.tb {
                    rep.add(
                        "receive count",
                        format!(
                            "g{} s{}: count {} by {} (receive ended {}) came before count {} by {} (receive began {})",
                            x.g, x.s, y.rc, label(y), ms(y.ta), x.rc, label(x), ms(x.tb)
                        ),
                    );
                }
            }
        }
        for w in v.windows(2) {
            let (x, y) = (&rcvs[w[0] as usize], &rcvs[w[1] as usize]);
            let expired = y.ta + CLOCK_SLACK_NS >= x.tb + vt_ns;
            let dead = killed(x).is_some_and(|k| k <= y.ta);
            let released = x.released.is_some_and(|t| t <= y.ta);
            if expired {
                rep.stats.after_expiry += 1;
            } else if released {
                rep.stats.after_release += 1;
            } else if dead {
                rep.stats.after_death += 1;
            }
            if !(expired || dead || released) {
                rep.add(
                    "double holder",
                    format!(
                        "g{} s{} (id {:x}) received by {} (count {}, receive began {}) and again by {} (count {}, receive ended {}, {} later) while the first holder was alive{} and had not released it",
                        x.g,
                        x.s,
                        x.id,
                        label(x),
                        x.rc,
                        ms(x.tb),
                        label(y),
                        y.rc,
                        ms(y.ta),
                        ms(y.ta.saturating_sub(x.tb)),
                        killed(x).map_or(String::new(), |k| format!(" (killed at {})", ms(k))),
                    ),
                );
            }
        }
    }
    drop(order);

    // 2. Order within each group.
    // 2a. Batch shape: each group's run contiguous, sequences consecutive; note each run's
    // first receive.
    let mut firsts: Vec<u32> = Vec::new();
    let mut start = 0;
    for batch in rcvs.chunk_by(|a, b| a.inc == b.inc && a.batch == b.batch) {
        let base = firsts.len();
        for (j, r) in batch.iter().enumerate() {
            if j > 0 && batch[j - 1].g == r.g {
                if r.s != batch[j - 1].s + 1 {
                    rep.add(
                        "batch order",
                        format!(
                            "{} batch {}: g{} s{} followed by s{}",
                            label(r),
                            r.batch,
                            r.g,
                            batch[j - 1].s,
                            r.s
                        ),
                    );
                }
                continue;
            }
            if firsts[base..].iter().any(|&f| rcvs[f as usize].g == r.g) {
                rep.add(
                    "batch order",
                    format!(
                        "{} batch {}: group g{} not contiguous",
                        label(r),
                        r.batch,
                        r.g
                    ),
                );
            }
            firsts.push((start + j) as u32);
        }
        start += batch.len();
    }
    // 2b. A run starting at s: every s' < s may have been deleted before that receive ended.
    for v in &mut table.groups {
        let mut m = 0;
        for x in v.iter_mut() {
            x.before = m;
            m = m.max(x.maybe_del);
        }
    }
    for &k in &firsts {
        let r = &rcvs[k as usize];
        let v = &table.groups[r.g as usize];
        if v[r.s as usize].before <= r.ta {
            continue;
        }
        let culprit = (0..r.s as usize)
            .find(|&s| v[s].maybe_del > r.ta)
            .unwrap_or(0);
        let when = match v[culprit].maybe_del {
            u64::MAX => "it was never deleted".to_string(),
            t => format!("its first possible delete began at {}", ms(t)),
        };
        rep.add(
            "order",
            format!(
                "{} batch {} took g{} s{} (receive ended {}) while g{} s{culprit} was still undeleted: {when}",
                label(r),
                r.batch,
                r.g,
                r.s,
                ms(r.ta),
                r.g,
            ),
        );
    }
    // 2c. Nothing received after its delete returned.
    for r in &rcvs {
        let t = table.groups[r.g as usize][r.s as usize].surely_del;
        if r.tb > t {
            rep.add(
                "received after delete",
                format!(
                    "g{} s{} received by {} (receive began {}) after a delete that returned at {}",
                    r.g,
                    r.s,
                    label(r),
                    ms(r.tb),
                    ms(t)
                ),
            );
        }
    }
    rep
}

// ---------------------------------------------------------------------------------------------
// Self-tests of the checker: each kind of violation must be found, clean logs must pass.

fn self_test() -> Result<(), String> {
    const M: u64 = 1_000_000;
    let vt = 2_000 * M;
    let inc = |role, lane, killed_at: Option<u64>, events: Vec<Event>| Incarnation {
        role,
        lane,
        inc: 0,
        killed_at,
        events,
        malformed: 0,
    };
    let send = |g, s, id| {
        vec![
            Event::Send { g, s },
            Event::Ack {
                g,
                s,
                id,
                dup: false,
            },
        ]
    };
    let r = |batch, g, s, id, rc, t_ms: u64| Event::Recv {
        batch,
        g,
        s,
        id,
        rc,
        tb: t_ms * M,
        ta: t_ms * M + M / 2,
    };
    let d = |g, s, id, t_ms: u64| Event::Delete {
        g,
        s,
        id,
        tb: t_ms * M,
        ta: t_ms * M + M / 2,
    };
    let prod = |n: u64| {
        let mut ev = Vec::new();
        for s in 0..n {
            ev.extend(send(0, s, 100 + u128::from(s)));
        }
        inc(Role::Producer, 0, None, ev)
    };
    let cases: Vec<(&str, Option<&str>, Vec<Incarnation>)> = vec![
        (
            "clean",
            None,
            vec![
                prod(2),
                inc(
                    Role::Consumer,
                    0,
                    None,
                    vec![
                        r(1, 0, 0, 100, 1, 10),
                        r(1, 0, 1, 101, 1, 10),
                        d(0, 0, 100, 11),
                        d(0, 1, 101, 12),
                    ],
                ),
            ],
        ),
        (
            "redelivered after the holder was killed",
            None,
            vec![
                prod(1),
                inc(
                    Role::Consumer,
                    0,
                    Some(20 * M),
                    vec![r(1, 0, 0, 100, 1, 10)],
                ),
                inc(
                    Role::Consumer,
                    1,
                    None,
                    vec![r(1, 0, 0, 100, 2, 21), d(0, 0, 100, 22)],
                ),
            ],
        ),
        (
            "redelivered after the visibility timeout",
            None,
            vec![
                prod(1),
                inc(
                    Role::Consumer,
                    0,
                    None,
                    vec![r(1, 0, 0, 100, 1, 10), Event::Left { id: 100 }],
                ),
                inc(
                    Role::Consumer,
                    1,
                    None,
                    vec![r(1, 0, 0, 100, 2, 2011), d(0, 0, 100, 2012)],
                ),
            ],
        ),
        (
            "redelivered after a release",
            None,
            vec![
                prod(1),
                inc(
                    Role::Consumer,
                    0,
                    None,
                    vec![
                        r(1, 0, 0, 100, 1, 10),
                        Event::Abandon {
                            id: 100,
                            tb: 11 * M,
                        },
                    ],
                ),
                inc(
                    Role::Consumer,
                    1,
                    None,
                    vec![r(1, 0, 0, 100, 2, 12), d(0, 0, 100, 13)],
                ),
            ],
        ),
        (
            "a killed consumer's unlogged delete",
            None,
            vec![
                prod(2),
                inc(
                    Role::Consumer,
                    0,
                    Some(30 * M),
                    vec![r(1, 0, 0, 100, 1, 10)],
                ),
                inc(
                    Role::Consumer,
                    1,
                    None,
                    vec![r(1, 0, 1, 101, 1, 20), d(0, 1, 101, 21)],
                ),
            ],
        ),
        (
            "lost message",
            Some("lost"),
            vec![
                prod(2),
                inc(
                    Role::Consumer,
                    0,
                    None,
                    vec![r(1, 0, 0, 100, 1, 10), d(0, 0, 100, 11)],
                ),
            ],
        ),
        (
            "order violation",
            Some("order"),
            vec![
                prod(2),
                inc(
                    Role::Consumer,
                    0,
                    None,
                    vec![
                        r(1, 0, 1, 101, 1, 10),
                        d(0, 1, 101, 11),
                        r(2, 0, 0, 100, 1, 20),
                        d(0, 0, 100, 21),
                    ],
                ),
            ],
        ),
        (
            "gap in a batch",
            Some("batch order"),
            vec![
                prod(3),
                inc(
                    Role::Consumer,
                    0,
                    None,
                    vec![
                        r(1, 0, 0, 100, 1, 10),
                        r(1, 0, 2, 102, 1, 10),
                        r(2, 0, 1, 101, 1, 20),
                    ],
                ),
            ],
        ),
        (
            "double holder",
            Some("double holder"),
            vec![
                prod(1),
                inc(Role::Consumer, 0, None, vec![r(1, 0, 0, 100, 1, 10)]),
                inc(
                    Role::Consumer,
                    1,
                    None,
                    vec![r(1, 0, 0, 100, 2, 110), d(0, 0, 100, 111)],
                ),
            ],
        ),
        (
            "double holder, killed only afterwards",
            Some("double holder"),
            vec![
                prod(1),
                inc(
                    Role::Consumer,
                    0,
                    Some(500 * M),
                    vec![r(1, 0, 0, 100, 1, 10)],
                ),
                inc(
                    Role::Consumer,
                    1,
                    None,
                    vec![r(1, 0, 0, 100, 2, 110), d(0, 0, 100, 111)],
                ),
            ],
        ),
        (
            "decreasing receive count",
            Some("receive count"),
            vec![
                prod(1),
                inc(
                    Role::Consumer,
                    0,
                    None,
                    vec![r(1, 0, 0, 100, 2, 10), Event::Left { id: 100 }],
                ),
                inc(
                    Role::Consumer,
                    1,
                    None,
                    vec![r(1, 0, 0, 100, 1, 2100), d(0, 0, 100, 2101)],
                ),
            ],
        ),
        (
            "received after delete",
            Some("received after delete"),
            vec![
                prod(1),
                inc(
                    Role::Consumer,
                    0,
                    None,
                    vec![r(1, 0, 0, 100, 1, 10), d(0, 0, 100, 11)],
                ),
                inc(Role::Consumer, 1, None, vec![r(1, 0, 0, 100, 2, 2100)]),
            ],
        ),
        (
            "deduplication failed",
            Some("dedup"),
            vec![
                prod(1),
                inc(
                    Role::Consumer,
                    0,
                    None,
                    vec![r(1, 0, 0, 999, 1, 10), d(0, 0, 999, 11)],
                ),
            ],
        ),
        (
            "deleted twice",
            Some("deleted twice"),
            vec![
                prod(1),
                inc(
                    Role::Consumer,
                    0,
                    None,
                    vec![r(1, 0, 0, 100, 1, 10), d(0, 0, 100, 11), d(0, 0, 100, 12)],
                ),
            ],
        ),
        (
            "received but never sent",
            Some("phantom"),
            vec![
                prod(1),
                inc(
                    Role::Consumer,
                    0,
                    None,
                    vec![r(1, 0, 0, 100, 1, 10), r(1, 0, 1, 101, 1, 10)],
                ),
            ],
        ),
        (
            "send never acknowledged",
            Some("unacknowledged"),
            vec![inc(
                Role::Producer,
                0,
                None,
                vec![Event::Send { g: 0, s: 0 }],
            )],
        ),
        (
            "one id for two messages",
            Some("identity"),
            vec![
                inc(
                    Role::Producer,
                    0,
                    None,
                    [send(0, 0, 100), send(0, 1, 100)].concat(),
                ),
                inc(
                    Role::Consumer,
                    0,
                    None,
                    vec![r(1, 0, 0, 100, 1, 10), r(1, 0, 1, 100, 1, 10)],
                ),
            ],
        ),
    ];
    let mut failures = Vec::new();
    for (name, want, incs) in cases {
        let rep = check(incs, vt);
        let ok = match want {
            None => rep.total() == 0,
            Some(kind) => rep.has(kind),
        };
        if !ok {
            failures.push(format!(
                "checker self-test {name:?}: expected {}, got {:?}",
                want.unwrap_or("no violation"),
                rep.violations
            ));
        }
    }
    // The parser drops a torn last line and reports malformed complete ones.
    let (ev, bad) = parse_log("S 0 0 5\nK 0 0 ab 0 6\nbogus\nR 1 0 0 ab 1 7");
    if ev.len() != 2 || bad != 1 {
        failures.push(format!("parser self-test: {ev:?}, {bad} malformed"));
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(failures.join("\n"))
    }
}

// ---------------------------------------------------------------------------------------------
// The orchestrator.

struct Slot {
    role: Role,
    lane: u32,
    inc: u32,
    child: Child,
    /// Index into `Run::incs`.
    rec: usize,
}

/// Everything a run owns; dropping it kills the workers, unlinks the queue and removes the logs.
struct Run {
    queue: String,
    dir: PathBuf,
    exe: PathBuf,
    seed: u64,
    slots: Vec<Slot>,
    /// (role, lane, inc, killed_at) of every incarnation started.
    incs: Vec<(Role, u32, u32, Option<u64>)>,
    log: Log,
    keep: bool,
}

impl Drop for Run {
    fn drop(&mut self) {
        for s in &mut self.slots {
            let _ = s.child.kill();
            let _ = s.child.wait();
        }
        let _ = Queue::unlink(&self.queue);
        if !self.keep {
            let _ = fs::remove_dir_all(&self.dir);
        }
    }
}

impl Run {
    fn spawn(&mut self, role: Role, lane: u32, inc: u32) -> Result<Slot, String> {
        let w = WorkerArgs {
            queue: self.queue.clone(),
            dir: self.dir.clone(),
            lane,
            inc,
            seed: self.seed ^ (u64::from(lane) << 48) ^ (u64::from(inc) << 8) ^ role.tag() as u64,
            parent: std::process::id(),
        };
        let err = self.dir.join(format!("{}{lane}-{inc}.err", role.tag()));
        let err = File::create(&err).map_err(|e| format!("create {}: {e}", err.display()))?;
        let child = Command::new(&self.exe)
            .env(
                ROLE_ENV,
                match role {
                    Role::Producer => "producer",
                    Role::Consumer => "consumer",
                },
            )
            .args(w.to_args())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(err)
            .spawn()
            .map_err(|e| format!("spawn: {e}"))?;
        let _ = writeln!(
            self.log.buf,
            "spawn {}{lane}#{inc} pid {} at {}",
            role.tag(),
            child.id(),
            now_ns()
        );
        self.log.flush()?;
        self.incs.push((role, lane, inc, None));
        Ok(Slot {
            role,
            lane,
            inc,
            child,
            rec: self.incs.len() - 1,
        })
    }

    fn failure(&self, s: &Slot, what: &str) -> String {
        let err = self
            .dir
            .join(format!("{}{}-{}.err", s.role.tag(), s.lane, s.inc));
        let text = fs::read_to_string(err).unwrap_or_default();
        format!(
            "worker {}{}#{} {what}; its stderr: {}",
            s.role.tag(),
            s.lane,
            s.inc,
            text.trim()
        )
    }

    /// Fails if a worker (of `role`, or any) exited on its own: only the orchestrator ends
    /// them during a run.
    fn check_alive(&mut self, role: Option<Role>) -> Result<(), String> {
        for k in 0..self.slots.len() {
            if role.is_some_and(|r| r != self.slots[k].role) {
                continue;
            }
            if let Ok(Some(st)) = self.slots[k].child.try_wait() {
                return Err(self.failure(&self.slots[k], &format!("exited on its own: {st}")));
            }
        }
        Ok(())
    }

    /// Waits for the workers of `role` to exit successfully.
    fn wait_exit(&mut self, role: Role, limit: Duration) -> Result<(), String> {
        let end = Instant::now() + limit;
        for k in 0..self.slots.len() {
            if self.slots[k].role != role {
                continue;
            }
            loop {
                match self.slots[k].child.try_wait() {
                    Ok(Some(st)) if st.success() => break,
                    Ok(Some(st)) => {
                        return Err(self.failure(&self.slots[k], &format!("failed: {st}")))
                    }
                    Ok(None) if Instant::now() < end => {
                        std::thread::sleep(Duration::from_millis(5))
                    }
                    _ => return Err(self.failure(&self.slots[k], "did not stop in time")),
                }
            }
        }
        Ok(())
    }
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

struct Figures {
    kills: [u64; 2],
    incarnations: usize,
    kill_phase: Duration,
    drain: Duration,
    wall: Duration,
    recovered: shmfifo::Recovered,
}

fn orchestrate() -> Result<(Report, Figures), String> {
    let start = Instant::now();
    let kills_wanted = env_u64("SHMFIFO_TORTURE_KILLS").unwrap_or(500);
    let seed = env_u64("SHMFIFO_TORTURE_SEED").unwrap_or_else(now_ns);
    let interval_us = env_u64("SHMFIFO_TORTURE_INTERVAL_US")
        .unwrap_or(8_000)
        .max(1);
    let keep = std::env::var("SHMFIFO_TORTURE_KEEP").is_ok_and(|v| v == "1");
    let tag = format!("{}-{}", std::process::id(), now_ns() % 1_000_000_000);
    let queue = format!("shmfifo-torture-{tag}");
    let dir = std::env::temp_dir().join(format!("shmfifo-torture-{tag}"));
    fs::create_dir_all(&dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
    println!(
        "torture: seed {seed}, {kills_wanted} kills (mean interval {interval_us} µs), {PRODUCERS} producers, {CONSUMERS} consumers, {GROUPS} groups, visibility timeout {VT:?}, queue /dev/shm/{queue}, logs {}",
        dir.display()
    );
    // The dedup interval covers any re-send (a new incarnation re-sends within ms); the table
    // holds every id sent within it at the rates reached here (a full table only slows sends).
    let cfg = QueueConfig::new()
        .visibility_timeout(VT)
        .max_messages(4096)
        .max_groups(GROUPS * 2)
        .maximum_message_size(1024)
        .deduplication_interval(Duration::from_secs(5))
        .dedup_entries(1 << 20);
    let log = Log::create(&dir.join("orchestrator.log"))?;
    let mut run = Run {
        queue: queue.clone(),
        dir: dir.clone(),
        exe: std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?,
        seed,
        slots: Vec::new(),
        incs: Vec::new(),
        log,
        keep,
    };
    let q = Queue::create(&queue, &cfg).map_err(|e| format!("create queue: {e}"))?;
    for lane in 0..CONSUMERS {
        let s = run.spawn(Role::Consumer, lane, 0)?;
        run.slots.push(s);
    }
    for lane in 0..PRODUCERS {
        let s = run.spawn(Role::Producer, lane, 0)?;
        run.slots.push(s);
    }
    let mut rng = Rng(seed);
    let mut kills = [0u64; 2];
    let stops_wanted = env_u64("SHMFIFO_TORTURE_STOPS").unwrap_or(kills_wanted / 5);
    let mut stops = 0u64;
    let kill_start = Instant::now();
    let mut next_report = kills_wanted / 10;
    while kills[0] + kills[1] < kills_wanted {
        std::thread::sleep(Duration::from_micros(rng.below(2 * interval_us)));
        run.check_alive(None)?;
        let k = rng.below(run.slots.len() as u64) as usize;
        // Now and then stop a worker instead (SIGSTOP: alive, holding whatever it holds) for
        // 10–300 ms, well within the visibility timeout, while the others go on; then
        // continue it. A stopped process is not corruption: the others must keep serving.
        let kills_left = kills_wanted - kills[0] - kills[1];
        if stops < stops_wanted
            && rng.below(kills_left + stops_wanted - stops) < stops_wanted - stops
        {
            let pid = run.slots[k].child.id() as i32;
            let ms = 10 + rng.below(290);
            // SAFETY: kill(2) on our own unreaped child (a zombie ignores the signals).
            unsafe {
                libc::kill(pid, libc::SIGSTOP);
            }
            std::thread::sleep(Duration::from_millis(ms));
            // SAFETY: as above.
            unsafe {
                libc::kill(pid, libc::SIGCONT);
            }
            let _ = writeln!(run.log.buf, "stop pid {pid} for {ms} ms");
            run.log.flush()?;
            stops += 1;
            continue;
        }
        let t = now_ns();
        let (role, lane, inc, pid) = {
            let s = &mut run.slots[k];
            s.child.kill().map_err(|e| format!("kill: {e}"))?;
            let st = s.child.wait().map_err(|e| format!("wait: {e}"))?;
            if st.signal() != Some(libc::SIGKILL) {
                // It had exited on its own just before the kill.
                let s = &run.slots[k];
                return Err(run.failure(s, &format!("exited on its own: {st}")));
            }
            (s.role, s.lane, s.inc, s.child.id())
        };
        let rec = run.slots[k].rec;
        run.incs[rec].3 = Some(t);
        let _ = writeln!(
            run.log.buf,
            "kill {}{lane}#{inc} pid {pid} at {t}",
            role.tag()
        );
        run.log.flush()?;
        kills[usize::from(role == Role::Consumer)] += 1;
        run.slots[k] = run.spawn(role, lane, inc + 1)?;
        let done = kills[0] + kills[1];
        if done >= next_report && kills_wanted >= 5000 {
            println!("  {done} kills, {:.1?}", kill_start.elapsed());
            next_report += kills_wanted / 10;
        }
    }
    let kill_phase = kill_start.elapsed();
    println!("torture: {stops} stops (SIGSTOP for 10–300 ms, then SIGCONT) among the kills");
    // Let the last incarnations settle their sends in doubt, then stop the producers.
    std::thread::sleep(Duration::from_millis(100));
    run.check_alive(None)?;
    File::create(dir.join("stop-producers")).map_err(|e| format!("stop file: {e}"))?;
    run.wait_exit(Role::Producer, Duration::from_secs(60))?;
    let drain_start = Instant::now();
    let mut wedged = None;
    let mut trace = Vec::new();
    loop {
        let a = q.attributes();
        let left = a.approximate_number_of_messages
            + a.approximate_number_of_messages_not_visible
            + a.approximate_number_of_messages_delayed;
        if trace.len() as u128 <= drain_start.elapsed().as_millis() / 500 {
            trace.push(format!(
                "{:.1?}: {}/{}/{}",
                drain_start.elapsed(),
                a.approximate_number_of_messages,
                a.approximate_number_of_messages_not_visible,
                a.approximate_number_of_messages_delayed
            ));
        }
        if left == 0 {
            break;
        }
        if drain_start.elapsed() > VT + DRAIN_BOUND {
            wedged = Some(format!(
                "{} visible, {} in flight, {} delayed, {} active groups after {:?}",
                a.approximate_number_of_messages,
                a.approximate_number_of_messages_not_visible,
                a.approximate_number_of_messages_delayed,
                a.active_groups,
                drain_start.elapsed()
            ));
            break;
        }
        run.check_alive(Some(Role::Consumer))?;
        std::thread::sleep(Duration::from_millis(20));
    }
    let drain = drain_start.elapsed();
    if drain > VT {
        println!(
            "torture: drain (visible/in flight/delayed): {}",
            trace.join(", ")
        );
    }
    File::create(dir.join("stop-consumers")).map_err(|e| format!("stop file: {e}"))?;
    run.wait_exit(Role::Consumer, Duration::from_secs(60))?;
    // Everything committed was published by the workers themselves (or by the recovery a new
    // incarnation runs): nothing may be left for an explicit recover() to publish.
    let recovered = q.recover().map_err(|e| format!("recover: {e}"))?;
    let a = q.attributes();
    let left = a.approximate_number_of_messages
        + a.approximate_number_of_messages_not_visible
        + a.approximate_number_of_messages_delayed;
    // Parse every incarnation's log (one at a time) and check.
    let incs = run.incs.iter().map(|&(role, lane, inc, killed_at)| {
        let text = fs::read_to_string(log_path(&dir, role, lane, inc)).unwrap_or_default();
        let (events, malformed) = parse_log(&text);
        Incarnation {
            role,
            lane,
            inc,
            killed_at,
            events,
            malformed,
        }
    });
    let mut rep = check(incs, VT.as_nanos() as u64);
    if let Some(w) = wedged {
        rep.add(
            "wedged",
            format!("the queue did not drain within {:?}: {w}", VT + DRAIN_BOUND),
        );
    }
    if recovered.published > 0 || left > 0 {
        rep.add(
            "wedged",
            format!(
                "after the drain recover() published {} messages and {left} remain",
                recovered.published
            ),
        );
    }
    // Kept (if asked) only for a failed run; an early error return keeps them as well.
    run.keep = keep && rep.total() > 0;
    let figures = Figures {
        kills,
        incarnations: run.incs.len(),
        kill_phase,
        drain,
        wall: start.elapsed(),
        recovered,
    };
    drop(q);
    drop(run);
    Ok((rep, figures))
}

fn main() -> ExitCode {
    if let Ok(role) = std::env::var(ROLE_ENV) {
        return worker(&role);
    }
    if let Err(e) = self_test() {
        eprintln!("torture: the checker is broken:\n{e}");
        return ExitCode::FAILURE;
    }
    println!("torture: checker self-tests passed");
    let (rep, f) = match orchestrate() {
        Ok(x) => x,
        Err(e) => {
            eprintln!("torture: FAILED: {e}");
            return ExitCode::FAILURE;
        }
    };
    let s = &rep.stats;
    println!(
        "torture: {} kills ({} producers, {} of them mid-send; {} consumers, {} of them holding messages) over {} incarnations in {:.2?}; {} messages sent, {} acknowledged ({} re-sends deduplicated); {} receives of {} messages ({} redeliveries: {} after the visibility timeout, {} released by their holder, {} after their holder was killed, sooner than its timeout; max receive count {}); {} deletes, {} expired handles, {} released, {} left to expire; drained in {:.2?} after the producers stopped; recover() at the end freed {} and published {}; wall time {:.2?}",
        f.kills[0] + f.kills[1],
        f.kills[0],
        s.killed_mid_send,
        f.kills[1],
        s.killed_holding,
        f.incarnations,
        f.kill_phase,
        s.sent,
        s.acked,
        s.dup_acks,
        s.recv_lines,
        s.received,
        s.recv_lines - s.received,
        s.after_expiry,
        s.after_release,
        s.after_death,
        s.max_rc,
        s.deletes,
        s.expired,
        s.released,
        s.left,
        f.drain,
        f.recovered.freed,
        f.recovered.published,
        f.wall,
    );
    if rep.total() == 0 {
        println!("torture: OK, no violation");
        return ExitCode::SUCCESS;
    }
    eprintln!("torture: FAILED, {} violations:", rep.total());
    for &(kind, n) in &rep.counts {
        eprintln!("  {kind}: {n}");
    }
    for v in rep.violations.iter().take(40) {
        eprintln!("  [{}] {}", v.kind, v.detail);
    }
    eprintln!("(SHMFIFO_TORTURE_KEEP=1 keeps the logs of a failed run)");
    ExitCode::FAILURE
}
