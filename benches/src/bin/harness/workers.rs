//! The peer processes: an echo (the far end of a ping-pong), a producer and a consumer. The
//! harness re-executes its own binary with [`CHILD_ENV`] set to a [`Job`]; crossbeam's
//! workers run the same functions as threads of the harness.

use std::io::Read;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_queue::ArrayQueue;

use crate::ctl::{Ctl, CtlMap, Window};
use crate::sys::{self, now_ns};
use crate::transport::{open_rx, open_tx, payload, stamp, ChanSpec, Dedup, Got, Peer, Res, Wait};

/// Set in the environment of a re-executed peer process: its [`Job`], encoded.
pub const CHILD_ENV: &str = "SHMFIFO_HARNESS_CHILD";

/// An in-process channel handed to a worker thread (crossbeam).
pub type InProc = Option<Arc<ArrayQueue<Vec<u8>>>>;

/// A worker's part.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Receives from `chan`, sends each payload back on `back`.
    Echo,
    /// Sends on `chan` until stopped.
    Producer,
    /// Receives from `chan`, counting, until its window closes.
    Consumer,
}

/// Everything a worker needs to know.
#[derive(Debug, Clone)]
pub struct Job {
    /// Its part.
    pub role: Role,
    /// The channel it reads (echo, consumer) or writes (producer).
    pub chan: ChanSpec,
    /// Echo: the name of the channel it answers on (otherwise as `chan`).
    pub back: String,
    /// How receivers wait.
    pub wait: Wait,
    /// Its slot in the control block.
    pub index: usize,
    /// Producers of the case (a producer's index is below this).
    pub producers: usize,
    /// The control block.
    pub ctl: PathBuf,
    /// The harness's pid.
    pub parent: u32,
}

impl Job {
    /// The environment-variable form: `key=value` pairs joined by `;` (no value holds one).
    pub fn encode(&self) -> String {
        let c = &self.chan;
        format!(
            "role={};peer={};name={};size={};batch={};dedup={};groups={};slots={};back={};\
             wait={};index={};producers={};ctl={};parent={}",
            match self.role {
                Role::Echo => "echo",
                Role::Producer => "producer",
                Role::Consumer => "consumer",
            },
            c.peer.key(),
            c.name,
            c.size,
            c.batch,
            c.dedup.key(),
            c.groups,
            c.slots,
            self.back,
            self.wait.key(),
            self.index,
            self.producers,
            self.ctl.display(),
            self.parent
        )
    }

    /// Parses [`Job::encode`].
    pub fn decode(s: &str) -> Res<Job> {
        let get = |k: &str| -> Res<&str> {
            s.split(';')
                .find_map(|kv| kv.strip_prefix(k).and_then(|r| r.strip_prefix('=')))
                .ok_or_else(|| format!("job: no {k}"))
        };
        let num =
            |k: &str| -> Res<u64> { get(k)?.parse::<u64>().map_err(|e| format!("job: {k}: {e}")) };
        Ok(Job {
            role: match get("role")? {
                "echo" => Role::Echo,
                "producer" => Role::Producer,
                "consumer" => Role::Consumer,
                r => return Err(format!("job: role {r}")),
            },
            chan: ChanSpec {
                peer: Peer::parse(get("peer")?).ok_or("job: peer")?,
                name: get("name")?.to_owned(),
                size: num("size")? as usize,
                batch: num("batch")? as usize,
                dedup: Dedup::parse(get("dedup")?).ok_or("job: dedup")?,
                groups: num("groups")? as u32,
                slots: num("slots")? as u32,
            },
            back: get("back")?.to_owned(),
            wait: match get("wait")? {
                "spin" => Wait::Spin,
                _ => Wait::Sleep,
            },
            index: num("index")? as usize,
            producers: num("producers")? as usize,
            ctl: PathBuf::from(get("ctl")?),
            parent: num("parent")? as u32,
        })
    }
}

/// Runs the job of a re-executed peer process and exits.
pub fn child_main(encoded: &str) -> ! {
    let job = match Job::decode(encoded) {
        Ok(j) => j,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2)
        }
    };
    if !sys::die_with_parent(job.parent) {
        std::process::exit(2);
    }
    let r = CtlMap::open(&job.ctl).and_then(|ctl| run(&job, ctl.get(), None, None));
    match r {
        Ok(()) => std::process::exit(0),
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1)
        }
    }
}

/// Runs `job` in this process or thread.
pub fn run(job: &Job, ctl: &Ctl, a: InProc, b: InProc) -> Res<()> {
    match job.role {
        Role::Echo => echo(job, ctl, a, b),
        Role::Producer => producer(job, ctl, a),
        Role::Consumer => consumer(job, ctl, a),
    }
}

/// Counts this worker as set up. Release: its endpoints exist before the harness, which
/// loads `ready` with Acquire, lets anyone send.
fn ready(ctl: &Ctl) {
    ctl.ready.0.fetch_add(1, Ordering::Release);
}

/// The far end of a ping-pong: each payload straight back, until a message arrives after
/// the harness raised `stop`.
fn echo(job: &Job, ctl: &Ctl, a: InProc, b: InProc) -> Res<()> {
    let mut rx = open_rx(&job.chan, a, job.wait)?;
    let back = ChanSpec {
        name: job.back.clone(),
        ..job.chan.clone()
    };
    let mut tx = open_tx(&back, b, 0, 1, job.wait)?;
    ready(ctl);
    let never = AtomicU32::new(0);
    let mut polls = 0u64;
    loop {
        let mut quit = false;
        let mut err = None;
        let got = rx.recv(1, &mut |p| {
            if ctl.stopping() {
                quit = true;
            } else if let Err(e) = tx.send(&[p], &never) {
                err = Some(e);
            }
        })?;
        if let Some(e) = err {
            return Err(e);
        }
        match got {
            Got::Msgs(_) if quit => return Ok(()),
            Got::Msgs(_) => {}
            Got::Closed => return Ok(()),
            Got::Empty => {
                polls += 1;
                if (job.wait == Wait::Sleep || polls & 0xfff == 0) && ctl.stopping() {
                    return Ok(());
                }
            }
        }
    }
}

/// How many messages pass between two looks at the clock: every message of 64 KiB, every
/// 32 of smaller ones (a look costs about 20 ns, a visible part of a small message's cost).
fn look_every(size: usize) -> u64 {
    if size > 1024 {
        1
    } else {
        32
    }
}

/// Sends stamped payloads, batches of `chan.batch`, until `stop`.
fn producer(job: &Job, ctl: &Ctl, a: InProc) -> Res<()> {
    let c = &job.chan;
    let mut tx = open_tx(c, a, job.index, job.producers, job.wait)?;
    ready(ctl);
    let mut w = Window::new(ctl.wait_go(Duration::from_secs(120))?);
    let batch = c.batch.clamp(1, 10);
    let mut bufs: Vec<Vec<u8>> = (0..batch).map(|_| payload(c.size)).collect();
    let tag = (job.index as u32 & 0xf) << 28;
    let mut seq = 0u32;
    let mut count = 0u64;
    let mut since = 0u64;
    let every = look_every(c.size);
    while !ctl.stopping() {
        for b in bufs.iter_mut() {
            stamp(b, tag | (seq & 0x0fff_ffff));
            seq = seq.wrapping_add(1);
        }
        let refs: [&[u8]; 10] = std::array::from_fn(|k| bufs.get(k).map_or(&[][..], |b| &b[..]));
        if !tx.send(&refs[..batch], &ctl.stop.0)? {
            break;
        }
        count += batch as u64;
        since += batch as u64;
        if since >= every {
            since = 0;
            w.observe(count);
        }
    }
    let slot = &ctl.workers[job.index].0;
    // Relaxed: published by the Release in `Window::report`.
    slot.full_retries
        .store(tx.full_retries(), Ordering::Relaxed);
    w.report(slot, count);
    // Closing a stream tells its reader that nothing more comes.
    drop(tx);
    // Release: see `Ctl::producers_done`.
    ctl.producers_done.0.fetch_add(1, Ordering::Release);
    Ok(())
}

/// Receives (up to `chan.batch` at a time) and counts; raises `stop` when its window closes,
/// then drains the channel if the senders could be blocked on it.
fn consumer(job: &Job, ctl: &Ctl, a: InProc) -> Res<()> {
    let c = &job.chan;
    let mut rx = open_rx(c, a, job.wait)?;
    ready(ctl);
    let mut w = Window::new(ctl.wait_go(Duration::from_secs(120))?);
    let size = c.size;
    let mut wrong = 0u64;
    let mut touched = 0u64;
    let mut count = 0u64;
    let mut since = 0u64;
    let every = look_every(size);
    let started = now_ns();
    loop {
        // Every consumer reads the payload's first and last bytes (a crossbeam `Vec` arrives
        // untouched otherwise) and checks its length.
        let got = rx.recv(c.batch.clamp(1, 10), &mut |p| {
            if p.len() != size {
                wrong += 1;
            } else {
                touched = touched.wrapping_add(u64::from(p[0]) + u64::from(p[size - 1]));
            }
        })?;
        let empty = match got {
            Got::Msgs(n) => {
                count += n as u64;
                since += n as u64;
                false
            }
            Got::Empty => true,
            Got::Closed => break,
        };
        if empty || since >= every {
            since = 0;
            if w.observe(count) {
                ctl.raise_stop();
            }
        }
        if w.closed() {
            if !rx.must_drain() {
                break;
            }
            // Acquire: see `Ctl::producers_done`.
            if empty && ctl.producers_done.0.load(Ordering::Acquire) as usize >= job.producers {
                break;
            }
        }
        if empty && now_ns() - started > 300_000_000_000 {
            return Err("consumer: no end after 300 s".into());
        }
    }
    w.report(&ctl.workers[job.index].0, count);
    std::hint::black_box(touched);
    if wrong > 0 {
        return Err(format!("consumer: {wrong} payloads of the wrong length"));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Launching
// ---------------------------------------------------------------------------------------------

/// A running worker: a peer process, or a thread for in-process channels.
#[derive(Debug)]
pub enum Worker {
    /// A re-executed harness process.
    Proc(Child),
    /// A thread of the harness.
    Thread(Option<JoinHandle<Res<()>>>),
}

impl Worker {
    /// Starts `job` as a peer process.
    pub fn spawn(job: &Job) -> Res<Worker> {
        let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
        let child = Command::new(exe)
            .env(CHILD_ENV, job.encode())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("spawning a peer process: {e}"))?;
        Ok(Worker::Proc(child))
    }

    /// Starts `job` as a thread (in-process channels).
    pub fn thread(job: Job, ctl: Arc<CtlMap>, a: InProc, b: InProc) -> Worker {
        Worker::Thread(Some(std::thread::spawn(move || run(&job, ctl.get(), a, b))))
    }

    /// The process id (threads: none).
    pub fn pid(&self) -> Option<u32> {
        match self {
            Worker::Proc(c) => Some(c.id()),
            Worker::Thread(_) => None,
        }
    }

    /// An error if the worker already ended (it should not have, yet).
    pub fn check(&mut self) -> Res<()> {
        let ended = match self {
            Worker::Proc(c) => matches!(c.try_wait(), Ok(Some(_))),
            Worker::Thread(h) => h.as_ref().is_none_or(|h| h.is_finished()),
        };
        if ended {
            return Err(match self.finish(Duration::ZERO) {
                Err(e) => e,
                Ok(()) => "a peer ended early".into(),
            });
        }
        Ok(())
    }

    /// Waits at most `limit` for the worker to end (then kills a process); its error, if any.
    pub fn finish(&mut self, limit: Duration) -> Res<()> {
        let deadline = now_ns() + limit.as_nanos() as u64;
        match self {
            Worker::Proc(c) => loop {
                match c.try_wait() {
                    Ok(Some(st)) => {
                        let mut err = String::new();
                        if let Some(mut e) = c.stderr.take() {
                            let _ = e.read_to_string(&mut err);
                        }
                        if st.success() {
                            return Ok(());
                        }
                        return Err(format!("peer process {st}: {}", err.trim()));
                    }
                    Ok(None) if now_ns() < deadline => std::thread::sleep(Duration::from_millis(1)),
                    _ => {
                        let _ = c.kill();
                        let _ = c.wait();
                        return Err(format!("peer process did not end within {limit:?}; killed"));
                    }
                }
            },
            Worker::Thread(h) => loop {
                match h.take() {
                    None => return Ok(()),
                    Some(j) if j.is_finished() || now_ns() >= deadline => {
                        if !j.is_finished() {
                            // A thread cannot be killed; its channel's stop flag is up, so
                            // it ends soon. Waiting is the only option.
                            eprintln!("waiting for a worker thread");
                        }
                        return j.join().map_err(|_| "worker thread panicked".to_string())?;
                    }
                    Some(j) => {
                        *h = Some(j);
                        std::thread::sleep(Duration::from_millis(1));
                    }
                }
            },
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        if let Worker::Proc(c) = self {
            if matches!(c.try_wait(), Ok(None)) {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
    }
}
