//! The measurements, as the harness process runs them: ping-pong latency, producer →
//! consumer throughput, groups, backlog, and the arena's memory per message.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hdrhistogram::Histogram;
use shmfifo::{Deduplication, Queue, QueueConfig, ReceiveOptions, SendMessage};

use crate::ctl::{rate, CtlMap};
use crate::sys::now_ns;
use crate::transport::{
    self, crossbeam_queue, open_rx, open_tx, payload, stamp, Chan, ChanSpec, Dedup, Got, Peer, Res,
    Wait,
};
use crate::workers::{Job, Role, Worker};
use shmfifo_benches::ctx_switches;

/// The harness's state shared by all cases: the control block and a counter for unique names.
#[derive(Debug)]
pub struct Ctx {
    /// The control block (an `Arc`: worker threads hold it too).
    pub ctl: Arc<CtlMap>,
    /// Its path, for peer processes.
    pub ctl_path: PathBuf,
    next: u64,
    /// The backlog scenario's two queues, made on first use and kept for the run.
    backlog: Option<BacklogFixture>,
    /// The control block's file, locked for the run's life: the mark by which another run
    /// knows this one's files are in use ([`crate::leftovers`]).
    _alive: std::fs::File,
}

impl Ctx {
    /// Creates the control block.
    pub fn new() -> Res<Ctx> {
        let ctl_path = PathBuf::from(format!(
            "/dev/shm/shmfifo-harness-{}-ctl",
            std::process::id()
        ));
        let _ = std::fs::remove_file(&ctl_path);
        let ctl = Arc::new(CtlMap::create(&ctl_path)?);
        let alive = crate::leftovers::hold(&ctl_path)?;
        Ok(Ctx {
            ctl,
            ctl_path,
            next: 0,
            backlog: None,
            _alive: alive,
        })
    }

    /// A name unique in this run, in the form `peer` wants it.
    fn name(&mut self, peer: Peer, tag: &str) -> String {
        self.next += 1;
        let n = format!("shmfifo-harness-{}-{}-{tag}", std::process::id(), self.next);
        match peer {
            Peer::Mq => format!("/{n}"),
            _ => n,
        }
    }

    fn job(&self, role: Role, chan: &ChanSpec, wait: Wait, index: usize, producers: usize) -> Job {
        Job {
            role,
            chan: chan.clone(),
            back: chan.name.clone(),
            wait,
            index,
            producers,
            ctl: self.ctl_path.clone(),
            parent: std::process::id(),
        }
    }

    /// Starts `job` as a process, or as a thread for crossbeam (whose queues are `a`, `b`).
    fn start(&self, job: Job, a: Option<&Chan>, b: Option<&Chan>) -> Res<Worker> {
        if job.chan.peer == Peer::Crossbeam {
            Ok(Worker::thread(
                job,
                self.ctl.clone(),
                a.and_then(crossbeam_queue),
                b.and_then(crossbeam_queue),
            ))
        } else {
            Worker::spawn(&job)
        }
    }

    /// Waits until `n` workers are set up.
    fn wait_ready(&self, n: u32, workers: &mut [Worker]) -> Res<()> {
        let t = now_ns();
        // Acquire: see `workers::ready`.
        while self.ctl.get().ready.0.load(Ordering::Acquire) < n {
            for w in workers.iter_mut() {
                w.check()?;
            }
            if now_ns() - t > 60_000_000_000 {
                return Err("peers not set up within 60 s".into());
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        Ok(())
    }
}

/// A busy wait of `d` (a sleep would itself be a context switch).
fn idle(d: Duration) {
    let end = now_ns() + d.as_nanos() as u64;
    while now_ns() < end {
        std::hint::spin_loop();
    }
}

// ---------------------------------------------------------------------------------------------
// Ping-pong latency
// ---------------------------------------------------------------------------------------------

/// Settings of one ping-pong run.
#[derive(Debug, Clone, Copy)]
pub struct PingPongSettings {
    /// Round trips timed.
    pub rounds: u64,
    /// Round trips before, not timed.
    pub warmup: u64,
    /// Stop timing after this long, however many round trips were made.
    pub cap: Duration,
    /// Idle time before each ping (sleeping mode: the echo is asleep when its message comes).
    pub gap: Option<Duration>,
}

/// One ping-pong run.
#[derive(Debug)]
pub struct LatencyRun {
    /// Round-trip times, ns.
    pub rt: Histogram<u64>,
    /// Context switches per round trip `(voluntary, involuntary)`: the harness, the echo.
    pub switches: Option<((f64, f64), (f64, f64))>,
}

/// A ping-pong between the harness and an echo peer over two channels of `peer`: send a
/// payload, wait for it to come back, in a loop; each round trip timed into a histogram.
/// `ping` replaces the outgoing channel (an already-made shmfifo queue).
pub fn pingpong(
    ctx: &mut Ctx,
    peer: Peer,
    size: usize,
    wait: Wait,
    s: PingPongSettings,
    ping: Option<&ChanSpec>,
) -> Res<LatencyRun> {
    let spec = |ctx: &mut Ctx, tag: &str| ChanSpec {
        peer,
        name: ctx.name(peer, tag),
        size,
        batch: 1,
        dedup: Dedup::Off,
        groups: 1,
        slots: 0,
    };
    let ping_spec = match ping {
        Some(p) => p.clone(),
        None => spec(ctx, "ping"),
    };
    let ping_chan = match ping {
        Some(_) => None,
        None => Some(transport::create(&ping_spec)?),
    };
    let pong_spec = spec(ctx, "pong");
    let pong_chan = transport::create(&pong_spec)?;
    ctx.ctl.get().reset();
    let mut rx = open_rx(&pong_spec, crossbeam_queue(&pong_chan), wait)?;
    let mut job = ctx.job(Role::Echo, &ping_spec, wait, 0, 1);
    job.back = pong_spec.name.clone();
    let mut workers = vec![ctx.start(job, ping_chan.as_ref(), Some(&pong_chan))?];
    let mut tx = open_tx(
        &ping_spec,
        ping_chan.as_ref().and_then(crossbeam_queue),
        0,
        1,
        wait,
    )?;
    ctx.wait_ready(1, &mut workers)?;
    ctx.ctl.get().start(Duration::ZERO, Duration::ZERO);

    let mut p = payload(size);
    let never = AtomicU32::new(0);
    let mut h = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3)
        .map_err(|e| format!("histogram: {e}"))?;
    let me = std::process::id();
    let peer_pid = workers[0].pid();
    let mut before = None;
    let mut t_first = 0;
    let mut timed = 0u64;
    let result = (|| -> Res<()> {
        for i in 0..s.warmup + s.rounds {
            if i == s.warmup {
                before = peer_pid.and_then(|c| ctx_switches(me).zip(ctx_switches(c)));
                t_first = now_ns();
            }
            if i > s.warmup && i & 63 == 0 && now_ns() - t_first > s.cap.as_nanos() as u64 {
                break;
            }
            stamp(&mut p, i as u32);
            if let Some(g) = s.gap {
                idle(g);
            }
            let t0 = now_ns();
            tx.send(&[&p], &never)?;
            let mut same = false;
            let mut polls = 0u64;
            loop {
                let got = rx.recv(1, &mut |q| {
                    same = q.len() == p.len() && q[..8.min(q.len())] == p[..8.min(p.len())]
                })?;
                match got {
                    Got::Msgs(_) => break,
                    Got::Closed => return Err("the echo peer closed its channel".into()),
                    Got::Empty => {
                        polls += 1;
                        if wait == Wait::Sleep || polls & 0x3ff == 0 {
                            workers[0].check()?;
                            if now_ns() - t0 > 10_000_000_000 {
                                return Err("no answer from the echo peer within 10 s".into());
                            }
                        }
                    }
                }
            }
            let rt = now_ns() - t0;
            if !same {
                return Err("the echo peer answered with another payload".into());
            }
            if i >= s.warmup {
                h.saturating_record(rt);
                timed += 1;
            }
        }
        Ok(())
    })();
    let after = peer_pid.and_then(|c| ctx_switches(me).zip(ctx_switches(c)));
    // End the echo: stop, then one more message to wake it.
    ctx.ctl.get().raise_stop();
    let _ = tx.send(&[&p], &never);
    drop(tx);
    let ended = workers[0].finish(Duration::from_secs(10));
    result?;
    ended?;
    drop(rx);
    drop(pong_chan);
    drop(ping_chan);
    let per = |a: u64, b: u64| (b - a) as f64 / timed.max(1) as f64;
    let switches = before.zip(after).map(|((b0, b1), (a0, a1))| {
        (
            (per(b0.0, a0.0), per(b0.1, a0.1)),
            (per(b1.0, a1.0), per(b1.1, a1.1)),
        )
    });
    Ok(LatencyRun { rt: h, switches })
}

// ---------------------------------------------------------------------------------------------
// Throughput
// ---------------------------------------------------------------------------------------------

/// Settings of one throughput run.
#[derive(Debug, Clone, Copy)]
pub struct TputSettings {
    /// Time from the start to the window.
    pub warmup: Duration,
    /// The measuring window.
    pub window: Duration,
}

/// One throughput run.
#[derive(Debug, Clone, Copy)]
pub struct TputRun {
    /// Messages per second through the channel: the lower of the producers' and the
    /// consumers' rates in the window (a consumer draining a prefilled backlog receives faster
    /// than the producers send for a while).
    pub rate: f64,
    /// The producers' rate.
    pub sent: f64,
    /// The consumers' rate.
    pub received: f64,
    /// Sends retried for want of room.
    pub full_retries: u64,
}

/// `producers` producer processes → `consumers` consumer processes over the channel `chan`
/// (threads for crossbeam), for the window.
pub fn throughput(
    ctx: &mut Ctx,
    chan: &Chan,
    producers: usize,
    consumers: usize,
    wait: Wait,
    s: TputSettings,
) -> Res<TputRun> {
    ctx.ctl.get().reset();
    let mut workers = Vec::new();
    for c in 0..consumers {
        let job = ctx.job(Role::Consumer, &chan.spec, wait, producers + c, producers);
        workers.push(ctx.start(job, Some(chan), None)?);
    }
    for p in 0..producers {
        let job = ctx.job(Role::Producer, &chan.spec, wait, p, producers);
        workers.push(ctx.start(job, Some(chan), None)?);
    }
    ctx.wait_ready((producers + consumers) as u32, &mut workers)?;
    ctx.ctl.get().start(s.warmup, s.window);
    let limit = s.warmup + s.window + Duration::from_secs(30);
    let mut first_err = None;
    for w in &mut workers {
        if let Err(e) = w.finish(limit) {
            // Stop the others too.
            ctx.ctl.get().raise_stop();
            first_err.get_or_insert(e);
        }
    }
    if let Some(e) = first_err {
        return Err(e);
    }
    let ctl = ctx.ctl.get();
    let sum = |r: std::ops::Range<usize>| -> Res<f64> {
        r.map(|i| rate(&ctl.workers[i].0).ok_or("a worker's window never closed"))
            .sum::<Result<f64, _>>()
            .map_err(String::from)
    };
    let sent = sum(0..producers)?;
    let received = sum(producers..producers + consumers)?;
    let full_retries = (0..producers)
        // Relaxed: the workers have ended.
        .map(|i| ctl.workers[i].0.full_retries.load(Ordering::Relaxed))
        .sum();
    Ok(TputRun {
        rate: sent.min(received),
        sent,
        received,
        full_retries,
    })
}

/// A one-producer → one-consumer run of `peer` with `size`-byte payloads, `batch` per send
/// and per receive. Receivers block where the peer can (spin otherwise).
pub fn one_to_one(
    ctx: &mut Ctx,
    peer: Peer,
    size: usize,
    batch: usize,
    dedup: Dedup,
    s: TputSettings,
) -> Res<TputRun> {
    let spec = ChanSpec {
        peer,
        name: ctx.name(peer, "tput"),
        size,
        batch,
        dedup,
        groups: 1,
        slots: 0,
    };
    let chan = transport::create(&spec)?;
    let wait = receiver_wait(peer);
    throughput(ctx, &chan, 1, 1, wait, s)
}

/// shmfifo 1 → 1, single ops, 64 B, dedup off: every message to one group, or each to a new
/// group id (SQS's advice for deduplication without ordering: every group is inserted, served
/// once and retired, so the group table is cycled through many times over in a window).
pub fn group_ids(ctx: &mut Ctx, unique: bool, s: TputSettings) -> Res<TputRun> {
    let spec = ChanSpec {
        peer: Peer::Shmfifo,
        name: ctx.name(Peer::Shmfifo, if unique { "newgroups" } else { "onegroup" }),
        size: 64,
        batch: 1,
        dedup: Dedup::Off,
        // 0: a new group id per message (see `transport::ChanSpec::groups`).
        groups: if unique { 0 } else { 1 },
        slots: 0,
    };
    let chan = transport::create(&spec)?;
    throughput(ctx, &chan, 1, 1, Wait::Sleep, s)
}

/// How throughput receivers of `peer` wait: asleep where the peer has a blocking receive.
pub fn receiver_wait(peer: Peer) -> Wait {
    match peer {
        Peer::Crossbeam | Peer::Iceoryx2 | Peer::Iceoryx2Zc | Peer::Raw => Wait::Spin,
        _ => Wait::Sleep,
    }
}

/// shmfifo, `producers` × `consumers` processes, batches of 10, 64-byte payloads spread round
/// robin over `groups` groups, each group holding one message before the start (so that all
/// of them are active).
pub fn groups(
    ctx: &mut Ctx,
    groups: u32,
    producers: usize,
    consumers: usize,
    s: TputSettings,
) -> Res<(TputRun, f64)> {
    let spec = ChanSpec {
        peer: Peer::Shmfifo,
        name: ctx.name(Peer::Shmfifo, &format!("groups{groups}")),
        size: 64,
        batch: 10,
        dedup: Dedup::Off,
        groups,
        // A consumed message's slot stays its group's list head until the group's next
        // message is consumed: up to one slot per active group on top of the messages.
        slots: 2 * groups + 65_536,
    };
    let t = now_ns();
    let chan = transport::create(&spec)?;
    {
        let q = Queue::open(&spec.name).map_err(|e| format!("open: {e}"))?;
        let mut p = payload(64);
        for g in 0..groups {
            stamp(&mut p, g);
            let name = transport::group_name(g as usize);
            q.send(&SendMessage::new(
                &name,
                std::str::from_utf8(&p).unwrap_or("x"),
            ))
            .map_err(|e| format!("prefill: {e}"))?;
        }
    }
    let setup = (now_ns() - t) as f64 / 1e9;
    let r = throughput(ctx, &chan, producers, consumers, Wait::Sleep, s)?;
    Ok((r, setup))
}

// ---------------------------------------------------------------------------------------------
// Backlog
// ---------------------------------------------------------------------------------------------

/// Two queues of the same geometry: one empty, one holding a backlog in group `backlog`
/// whose first message is received and never deleted (the group is locked, as behind a slow
/// consumer).
#[derive(Debug)]
struct BacklogFixture {
    base: Chan,
    loaded: Chan,
    /// Keeps the loaded queue's receiver (and so the held message's receipt) alive.
    _holder: Queue,
}

/// Group of the backlog.
const BACKLOG_GROUP: &str = "backlog";

/// Makes the backlog fixture (`messages` in one group); returns the seconds it took.
fn backlog_fixture(ctx: &mut Ctx, messages: u64) -> Res<f64> {
    if ctx.backlog.is_some() {
        return Ok(0.0);
    }
    let t = now_ns();
    let spec = |ctx: &mut Ctx, tag: &str| ChanSpec {
        peer: Peer::Shmfifo,
        name: ctx.name(Peer::Shmfifo, tag),
        size: 64,
        batch: 1,
        dedup: Dedup::Off,
        groups: 1,
        slots: (messages + 4_096) as u32,
    };
    let base_spec = spec(ctx, "backlog-base");
    let loaded_spec = spec(ctx, "backlog-loaded");
    let base = transport::create(&base_spec)?;
    let loaded = transport::create(&loaded_spec)?;
    let q = Queue::open(&loaded_spec.name).map_err(|e| format!("open: {e}"))?;
    let mut p = payload(64);
    for i in 0..messages {
        stamp(&mut p, i as u32);
        q.send(&SendMessage::new(
            BACKLOG_GROUP,
            std::str::from_utf8(&p).unwrap_or("x"),
        ))
        .map_err(|e| format!("backlog send {i}: {e}"))?;
    }
    let held = q
        .receive(
            &ReceiveOptions::max(1)
                .wait(Duration::ZERO)
                .visibility_timeout(Duration::from_secs(43_200)),
        )
        .map_err(|e| format!("backlog receive: {e}"))?;
    if held.len() != 1 || held[0].group_id != BACKLOG_GROUP {
        return Err("the backlog's first message did not come back".into());
    }
    ctx.backlog = Some(BacklogFixture {
        base,
        loaded,
        _holder: q,
    });
    Ok((now_ns() - t) as f64 / 1e9)
}

/// The spinning 64-byte ping-pong of shmfifo with its ping queue holding the backlog
/// (`loaded`) or not.
pub fn backlog(
    ctx: &mut Ctx,
    loaded: bool,
    messages: u64,
    s: PingPongSettings,
) -> Res<(LatencyRun, f64)> {
    let setup = backlog_fixture(ctx, messages)?;
    let f = ctx.backlog.as_ref().ok_or("no backlog fixture")?;
    let ping = if loaded {
        f.loaded.spec.clone()
    } else {
        f.base.spec.clone()
    };
    // The fixture's queues serve every repeat: a ping-pong ends its echo with one more message
    // to wake it, which the echo may stop before taking. Left there, the next repeat's echo
    // answered it first ("the echo peer answered with another payload", seen in a full run).
    // Take what is left: the loaded queue's backlog group is locked by its held head, so only
    // such leftovers come back.
    let q = Queue::open(&ping.name).map_err(|e| format!("open: {e}"))?;
    let opts = ReceiveOptions::max(10).wait(Duration::ZERO);
    loop {
        let got = q
            .receive(&opts)
            .map_err(|e| format!("drain receive: {e}"))?;
        if got.is_empty() {
            break;
        }
        for m in &got {
            if m.group_id == BACKLOG_GROUP {
                return Err("the backlog's group was not locked".into());
            }
            q.delete(&m.receipt_handle)
                .map_err(|e| format!("drain delete: {e}"))?;
        }
    }
    drop(q);
    let r = pingpong(ctx, Peer::Shmfifo, 64, Wait::Spin, s, Some(&ping))?;
    Ok((r, setup))
}

/// A visible backlog of `messages` 64-byte messages, sent round robin over `groups`, drained
/// by one consumer (this process): receive 10, then `delete_handles`, until the queue is
/// empty. Returns the drain's rate (in `rate` and `received`) and the seconds the backlog
/// took to send.
pub fn drain(groups: u32, messages: u64) -> Res<(TputRun, f64)> {
    let groups = groups.max(1);
    let limit = QueueConfig::new().stored_size_limit();
    let slots = u32::try_from(messages + u64::from(groups) + 4_096)
        .map_err(|_| "backlog too large for one size class")?;
    let cfg = QueueConfig::new()
        .deduplication(Deduplication::Off)
        .size_classes(vec![(192, slots), (limit, 4)]);
    let q = Queue::create_anonymous(&cfg).map_err(|e| format!("create: {e}"))?;
    let names: Vec<String> = (0..groups as usize).map(transport::group_name).collect();
    let t = now_ns();
    let mut p = payload(64);
    for i in 0..messages {
        stamp(&mut p, i as u32);
        let g = &names[(i % u64::from(groups)) as usize];
        q.send(&SendMessage::new(g, std::str::from_utf8(&p).unwrap_or("x")))
            .map_err(|e| format!("backlog send {i}: {e}"))?;
    }
    let setup = (now_ns() - t) as f64 / 1e9;
    let opts = ReceiveOptions::max(10).wait(Duration::ZERO);
    let mut buf = shmfifo::ReceiveBuffer::new();
    let mut handles = [shmfifo::ReceiptHandle::default(); 10];
    let mut got = 0u64;
    let t = now_ns();
    loop {
        let n = q
            .receive_into(&opts, &mut buf)
            .map_err(|e| format!("receive: {e}"))?;
        if n == 0 {
            break;
        }
        for (h, m) in handles.iter_mut().zip(buf.messages()) {
            *h = m.receipt_handle;
        }
        for r in q
            .delete_handles(&handles[..n])
            .map_err(|e| format!("delete_handles: {e}"))?
        {
            r.map_err(|e| format!("delete: {e}"))?;
        }
        got += n as u64;
    }
    let secs = (now_ns() - t) as f64 / 1e9;
    if got != messages {
        return Err(format!("drained {got} of {messages} messages"));
    }
    let rate = got as f64 / secs.max(1e-9);
    Ok((
        TputRun {
            rate,
            sent: 0.0,
            received: rate,
            full_retries: 0,
        },
        setup,
    ))
}

/// Drops the backlog fixture (unlinks its queues).
pub fn drop_fixtures(ctx: &mut Ctx) {
    ctx.backlog = None;
}

// ---------------------------------------------------------------------------------------------
// Memory per message
// ---------------------------------------------------------------------------------------------

/// Arena bytes per message, measured from `attributes().arena_bytes` of anonymous arenas
/// that differ only in slot count or dedup table size.
#[derive(Debug, Clone, Copy)]
pub struct MemoryFigures {
    /// Arena bytes per slot of the 192-byte class.
    pub per_slot_192: f64,
    /// The part of that beyond the payload capacity: the per-message overhead.
    pub header: f64,
    /// Arena bytes per dedup table entry (queue scope).
    pub per_dedup_entry: f64,
}

fn arena_bytes(cfg: &QueueConfig) -> Res<u64> {
    let q = Queue::create_anonymous(cfg).map_err(|e| format!("create_anonymous: {e}"))?;
    Ok(q.attributes().arena_bytes)
}

/// Measures [`MemoryFigures`].
pub fn memory() -> Res<MemoryFigures> {
    let base = QueueConfig::new().deduplication(Deduplication::Off);
    let limit = base.stored_size_limit();
    let with = |n: u32| base.clone().size_classes(vec![(192, n), (limit, 4)]);
    let (n0, n1) = (16_384u32, 32_768u32);
    let per_slot =
        (arena_bytes(&with(n1))? as f64 - arena_bytes(&with(n0))? as f64) / f64::from(n1 - n0);
    let dd = |n: u32| {
        QueueConfig::new()
            .deduplication(Deduplication::Queue)
            .dedup_entries(n)
    };
    let per_entry = (arena_bytes(&dd(1 << 16))? as f64 - arena_bytes(&dd(1 << 15))? as f64)
        / f64::from(1u32 << 15);
    Ok(MemoryFigures {
        per_slot_192: per_slot,
        header: per_slot - 192.0,
        per_dedup_entry: per_entry,
    })
}
