//! The worker modes of the multi-process demo and tests (one line per event on stdout), shared
//! by `examples/shmfifo-demo.rs` and the test worker binary `shmfifo-test-worker`
//! (`tests/worker/bin.rs`):
//!
//! * `produce QUEUE ID GROUPS N [flush]`: sends N messages round-robin over GROUPS groups named
//!   `p{ID}-g{j}`, body `p{ID}:{j}:{k}`; prints `ACK group k seq` after each acknowledged send.
//! * `dedup-produce QUEUE SEED N GROUPS [ROUNDS]`: sends ids `0..N` in an order picked by SEED,
//!   each with dedup id and body `id-{k}` in group `g{k % GROUPS}`, ROUNDS times over (default
//!   once; the later rounds are duplicates); prints `ACK k dup` (dup 0 or 1).
//! * `consume QUEUE VT_MS [flush] [stall]`: receives (max 10, visibility VT_MS) and deletes until
//!   the file `/dev/shm/QUEUE.done` exists and the queue is empty; prints `RECV group k seq
//!   t_ns` for each message received (t_ns: CLOCK_MONOTONIC before the receive call) and
//!   `DEL group k t_ns` after each successful delete (t_ns: after it returned). `stall` makes it stop forever
//!   after its first batch (to be killed).
//! * `busy QUEUE`: sends (singly and in batches of three), receives and deletes without pause
//!   until an operation fails; prints `RUNNING` after 100 rounds and `ERR kind` at the end.
#![allow(dead_code)]

use std::collections::HashMap;
use std::io::{BufWriter, Write};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use shmfifo::{Queue, ReceiveBuffer, ReceiveOptions, SendMessage};

fn mono_ns() -> u64 {
    // CLOCK_MONOTONIC is shared by all processes of the host, so receive times of different
    // processes can be compared.
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn out(flush: bool) -> Box<dyn Write> {
    if flush {
        Box::new(std::io::stdout())
    } else {
        Box::new(BufWriter::with_capacity(1 << 16, std::io::stdout()))
    }
}

pub fn produce(args: &[String]) -> shmfifo::Result<()> {
    let q = Queue::open(&args[0])?;
    let id: u32 = args[1].parse().expect("id");
    let groups: u32 = args[2].parse().expect("groups");
    let n: u64 = args[3].parse().expect("n");
    let flush = args.iter().any(|a| a == "flush");
    let dedup = q.attributes().deduplication != shmfifo::Deduplication::Off;
    let mut w = out(flush);
    let mut k = vec![0u64; groups as usize];
    for i in 0..n {
        let j = (i % u64::from(groups)) as usize;
        let group = format!("p{id}-g{j}");
        let body = format!("p{id}:{j}:{}", k[j]);
        loop {
            // The body is unique: it doubles as the dedup id where the queue deduplicates.
            let msg = SendMessage::new(&group, &body);
            let msg = if dedup { msg.dedup_id(&body) } else { msg };
            match q.send(&msg) {
                Ok(r) => {
                    writeln!(w, "ACK {group} {} {}", k[j], r.sequence_number).unwrap();
                    break;
                }
                Err(shmfifo::Error::SizeClassFull { .. })
                | Err(shmfifo::Error::GroupLimitReached { .. }) => {
                    std::thread::sleep(Duration::from_micros(200)); // back-pressure: wait for consumers
                }
                Err(e) => return Err(e),
            }
        }
        k[j] += 1;
    }
    w.flush().unwrap();
    Ok(())
}

pub fn dedup_produce(args: &[String]) -> shmfifo::Result<()> {
    let q = Queue::open(&args[0])?;
    let seed: u64 = args[1].parse().expect("seed");
    let n: u64 = args[2].parse().expect("n");
    let groups: u64 = args[3].parse().expect("groups");
    let rounds: u64 = args.get(4).map_or(1, |r| r.parse().expect("rounds"));
    let mut w = out(true);
    // A stride coprime with n visits every id once, in an order that differs per seed.
    let stride = [7919u64, 104_729, 1_299_709, 15_485_863]
        .into_iter()
        .find(|s| n % s != 0)
        .unwrap_or(1);
    for i in 0..n * rounds {
        let k = (i % n * stride + seed * 977) % n;
        let id = format!("id-{k}");
        let group = format!("g{}", k % groups);
        loop {
            match q.send(&SendMessage::new(&group, &id).dedup_id(&id)) {
                Ok(r) => {
                    writeln!(w, "ACK {k} {}", u8::from(r.duplicate)).unwrap();
                    break;
                }
                Err(shmfifo::Error::SizeClassFull { .. })
                | Err(shmfifo::Error::GroupLimitReached { .. }) => {
                    std::thread::sleep(Duration::from_micros(200));
                }
                Err(e) => return Err(e),
            }
        }
    }
    w.flush().unwrap();
    Ok(())
}

pub fn consume(args: &[String]) -> shmfifo::Result<()> {
    let name = &args[0];
    let q = Queue::open(name)?;
    let vt: u64 = args[1].parse().expect("vt");
    let flush = args.iter().any(|a| a == "flush");
    let stall = args.iter().any(|a| a == "stall");
    // Never delete messages of groups named "poison…" (they go to the dead-letter queue).
    let hold_poison = args.iter().any(|a| a == "hold-poison");
    let done = format!("/dev/shm/{name}.done");
    let mut w = out(flush);
    let mut buf = ReceiveBuffer::new();
    let opts = ReceiveOptions::max(10)
        .visibility_timeout(Duration::from_millis(vt))
        .wait(Duration::from_millis(50));
    let mut idle = 0;
    loop {
        let t = mono_ns(); // before the receive: an earlier bound on when it took its messages
        let n = q.receive_into(&opts, &mut buf)?;
        if n == 0 {
            // Stop once producers are done and nothing is left, visible or in flight (a dead
            // consumer's messages come back after their visibility timeout).
            if std::path::Path::new(&done).exists() {
                let a = q.attributes();
                if a.approximate_number_of_messages + a.approximate_number_of_messages_not_visible
                    == 0
                {
                    idle += 1;
                    if idle >= 2 {
                        break;
                    }
                }
            }
            continue;
        }
        idle = 0;
        for m in buf.messages() {
            let k = m.body.rsplit(':').next().unwrap_or("?");
            writeln!(w, "RECV {} {k} {} {t}", m.group_id, m.sequence_number).unwrap();
        }
        if stall {
            w.flush().unwrap();
            loop {
                std::thread::sleep(Duration::from_secs(3600));
            }
        }
        for m in buf.messages() {
            if hold_poison && m.group_id.starts_with("poison") {
                continue;
            }
            match q.delete(&m.receipt_handle) {
                Ok(()) => {
                    let k = m.body.rsplit(':').next().unwrap_or("?");
                    // After the delete: a later bound on when it happened.
                    writeln!(w, "DEL {} {k} {}", m.group_id, mono_ns()).unwrap();
                }
                // Our visibility timeout passed and someone else has it now: not ours to delete.
                Err(shmfifo::Error::ReceiptHandleExpired { .. }) => {}
                Err(e) => return Err(e),
            }
        }
    }
    w.flush().unwrap();
    Ok(())
}

/// What the demo (or a test) learns from the workers' logs.
#[derive(Debug, Default)]
/// What the logs of a run say: acknowledged sends, deletes, and per-group receive and delete times.
pub struct Report {
    pub acked: HashMap<(String, u64), u128>,
    pub deleted: HashMap<(String, u64), u32>,
    pub receives: HashMap<String, Vec<(u64, u64, u128)>>,
    pub deletes: HashMap<String, Vec<(u64, u64)>>,
}

pub fn parse(report: &mut Report, text: &str) {
    // A worker killed mid-write leaves a partial last line: lines that do not parse are skipped.
    for line in text.lines() {
        let f: Vec<&str> = line.split(' ').collect();
        match f.as_slice() {
            ["ACK", g, k, seq] => {
                if let (Ok(k), Ok(seq)) = (k.parse(), seq.parse()) {
                    report.acked.insert((g.to_string(), k), seq);
                }
            }
            ["DEL", g, k, t] => {
                if let (Ok(k), Ok(t)) = (k.parse(), t.parse()) {
                    *report.deleted.entry((g.to_string(), k)).or_default() += 1;
                    report
                        .deletes
                        .entry(g.to_string())
                        .or_default()
                        .push((t, k));
                }
            }
            ["RECV", g, k, seq, t] => {
                if let (Ok(t), Ok(k), Ok(seq)) = (t.parse(), k.parse(), seq.parse()) {
                    report
                        .receives
                        .entry(g.to_string())
                        .or_default()
                        .push((t, k, seq));
                }
            }
            _ => {}
        }
    }
}

/// Starts a worker with its stdout in a log file (pipes could fill up and stall it).
pub fn spawn(args: &[String], log: &str) -> Child {
    Command::new(std::env::current_exe().expect("current exe"))
        .args(args)
        .stdout(Stdio::from(std::fs::File::create(log).expect("create log")))
        .spawn()
        .expect("spawn worker")
}

pub fn collect(mut child: Child, log: &str) -> String {
    let status = child.wait().expect("wait");
    let s = std::fs::read_to_string(log).expect("read log");
    let _ = std::fs::remove_file(log);
    if !status.success() {
        eprintln!("worker failed: {status}");
    }
    s
}

/// Checks the logs: every acknowledged message deleted exactly once, nothing else deleted, and
/// within each group no message received after a later one was deleted, and sequence numbers
/// increasing with k.
pub fn verify(r: &Report) -> Vec<String> {
    let mut problems = Vec::new();
    for (key, _) in r.acked.iter() {
        match r.deleted.get(key) {
            Some(1) => {}
            Some(n) => problems.push(format!("{key:?} deleted {n} times")),
            None => problems.push(format!("{key:?} acknowledged but never deleted")),
        }
    }
    for (key, n) in &r.deleted {
        if !r.acked.contains_key(key) && *n > 1 {
            problems.push(format!("{key:?} (unacknowledged) deleted {n} times"));
        }
    }
    for (g, ev) in &r.receives {
        // Order (R3): no message is received after a later message of its group was deleted.
        let dels = r.deletes.get(g).map(Vec::as_slice).unwrap_or(&[]);
        for &(t_recv, k, _) in ev {
            if let Some(&(_, kd)) = dels.iter().find(|&&(t_del, kd)| kd > k && t_del < t_recv) {
                problems.push(format!(
                    "group {g}: k {k} received after k {kd} was deleted"
                ));
            }
        }
        // M1: sequence numbers increase with k.
        let mut pairs: Vec<(u64, u128)> = ev.iter().map(|&(_, k, seq)| (k, seq)).collect();
        pairs.sort();
        pairs.dedup();
        if pairs
            .windows(2)
            .any(|w| w[0].0 == w[1].0 || w[1].1 <= w[0].1)
        {
            problems.push(format!(
                "group {g}: sequence numbers do not increase with k"
            ));
        }
        if problems.len() > 20 {
            break;
        }
    }
    problems
}

/// Worker: receives up to 10 messages with attempt id `ID` (30 s visibility), prints their
/// receipt handles, then hangs until killed (a consumer that dies before recording its batch).
fn attempt_receive(args: &[String]) -> shmfifo::Result<()> {
    let q = Queue::open(&args[0])?;
    let opts = ReceiveOptions::max(10)
        .visibility_timeout(Duration::from_secs(30))
        .wait(Duration::from_secs(5));
    let ms = q.receive_with_attempt_id(&opts, &args[1])?;
    let mut w = out(true);
    for m in &ms {
        writeln!(w, "HANDLE {}", m.receipt_handle).unwrap();
    }
    writeln!(w, "READY").unwrap();
    w.flush().unwrap();
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}

/// `wait-receive QUEUE`: prints `WAITING`, then long-polls (up to 20 s) for a message and prints
/// `GOT n` or `ERR kind` (the error's kind): a receiver asleep when its file is truncated.
fn wait_receive(args: &[String]) -> shmfifo::Result<()> {
    let q = Queue::open(&args[0])?;
    let mut w = out(true);
    writeln!(w, "WAITING").unwrap();
    w.flush().unwrap();
    let opts = ReceiveOptions::max(10).wait(Duration::from_secs(20));
    match q.receive(&opts) {
        Ok(ms) => writeln!(w, "GOT {}", ms.len()).unwrap(),
        Err(e) => writeln!(w, "ERR {}", e.code().name()).unwrap(),
    }
    w.flush().unwrap();
    // Exit without the handle's close: its participant record is past the cut.
    std::process::exit(0);
}

/// `busy QUEUE`: sends, receives and deletes without pause (single sends and batches of
/// three, in one group), printing `RUNNING` after the first 100 rounds, until an operation
/// fails; then prints `ERR kind` and exits normally, its handle dropped: a process in the
/// middle of its operations when its queue's file is truncated.
fn busy(args: &[String]) -> shmfifo::Result<()> {
    let q = Queue::open(&args[0])?;
    let mut w = out(true);
    let batch = [
        SendMessage::new("g", "a"),
        SendMessage::new("g", "b"),
        SendMessage::new("g", "c"),
    ];
    let opts = ReceiveOptions::max(10);
    let mut rounds = 0u64;
    let err = loop {
        let r = q
            .send(&SendMessage::new("g", "x"))
            .and_then(|_| q.send_messages(&batch))
            .and_then(|_| q.receive(&opts))
            .and_then(|got| {
                let hs: Vec<_> = got.into_iter().map(|m| m.receipt_handle).collect();
                q.delete_handles(&hs)
            });
        if let Err(e) = r {
            break e;
        }
        rounds += 1;
        if rounds == 100 {
            writeln!(w, "RUNNING").unwrap();
            w.flush().unwrap();
        }
    };
    writeln!(w, "ERR {}", err.code().name()).unwrap();
    w.flush().unwrap();
    drop(q);
    Ok(())
}

/// `wait-send QUEUE`: prints `WAITING`, then sends to group `g` with `send_timeout` (up to 20 s)
/// and prints `SENT` or `ERR kind`: a producer asleep for space (the queue is full and cannot
/// grow) when its file is truncated.
fn wait_send(args: &[String]) -> shmfifo::Result<()> {
    let q = Queue::open(&args[0])?;
    let mut w = out(true);
    writeln!(w, "WAITING").unwrap();
    w.flush().unwrap();
    match q.send_timeout(&SendMessage::new("g", "x"), Duration::from_secs(20)) {
        Ok(_) => writeln!(w, "SENT").unwrap(),
        Err(e) => writeln!(w, "ERR {}", e.code().name()).unwrap(),
    }
    w.flush().unwrap();
    // Exit without the handle's close: its participant record is past the cut.
    std::process::exit(0);
}

/// `fill-fsize QUEUE BYTES`: with the file size limit (`RLIMIT_FSIZE`) at `BYTES` (and
/// `SIGXFSZ` ignored, so a write past it fails instead of killing us), sends to group `g`
/// until a send fails; prints `SENT n ERR kind`.
fn fill_fsize(args: &[String]) -> shmfifo::Result<()> {
    let limit: u64 = args[1].parse().expect("BYTES");
    let lim = libc::rlimit {
        rlim_cur: limit,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: plain system calls on this process's own limits and signal disposition.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
        assert_eq!(libc::setrlimit(libc::RLIMIT_FSIZE, &lim), 0);
    }
    let q = Queue::open(&args[0])?;
    let mut n = 0;
    let e = loop {
        match q.send(&SendMessage::new("g", "x")) {
            Ok(_) => n += 1,
            Err(e) => break e,
        }
    };
    println!("SENT {n} ERR {}", e.code().name());
    Ok(())
}

/// Runs the worker mode named by `args[0]`; `None` if `args` names none.
pub fn dispatch(args: &[String]) -> Option<Result<(), String>> {
    Some(match args.first().map(String::as_str) {
        Some("produce") => produce(&args[1..]).map_err(|e| e.to_string()),
        Some("consume") => consume(&args[1..]).map_err(|e| e.to_string()),
        Some("dedup-produce") => dedup_produce(&args[1..]).map_err(|e| e.to_string()),
        Some("attempt-receive") => attempt_receive(&args[1..]).map_err(|e| e.to_string()),
        Some("wait-receive") => wait_receive(&args[1..]).map_err(|e| e.to_string()),
        Some("wait-send") => wait_send(&args[1..]).map_err(|e| e.to_string()),
        Some("busy") => busy(&args[1..]).map_err(|e| e.to_string()),
        Some("fill-fsize") => fill_fsize(&args[1..]).map_err(|e| e.to_string()),
        Some("verify") => {
            let mut report = Report::default();
            for f in &args[1..] {
                parse(&mut report, &std::fs::read_to_string(f).expect("read log"));
            }
            let p = verify(&report);
            if p.is_empty() {
                println!(
                    "OK {} acknowledged, {} deleted",
                    report.acked.len(),
                    report.deleted.len()
                );
                Ok(())
            } else {
                Err(p.join("\n"))
            }
        }
        _ => return None,
    })
}
