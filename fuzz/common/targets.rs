//! Bodies of the two fuzz targets, shared by the cargo-fuzz binaries (`fuzz/fuzz_targets/`)
//! and by the replay test `tests/fuzz_regressions.rs` (both include this file with
//! `#[path = ...] mod targets;`).
//!
//! * [`open_arena`]: an input becomes an arena file, either raw (first byte even) or as patches
//!   over a valid, lived-in arena (first byte odd), which is then opened; if it opens, a fixed
//!   script of operations runs, then the rest of the input as operations (see [`Ctx::step`]).
//! * [`live_scribble`]: a small queue (and, for some inputs, its dead-letter queue) is created
//!   and the input is a sequence of operations, among them scribbles: bytes written anywhere in
//!   an arena through a second mapping of its file, as another process would.
//!
//! The oracle is the hostile-memory rule: every call returns `Ok` or a typed `Err`.
//! A panic, an out-of-bounds access (SIGSEGV, SIGBUS, or AddressSanitizer under cargo-fuzz) or
//! a hang (libFuzzer's `-timeout`) is a bug. Besides, while nothing has written into an arena
//! behind the library's back, `Error::Corrupted` is a bug too. Nothing here catches panics.
//!
//! Files live in a scratch directory under `/dev/shm` per call, removed afterwards.

use std::fs::{self, File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use shmfifo::{
    BatchEntry, Deduplication, Error, LoanOptions, MessageAttribute, Queue, QueueConfig,
    ReceiptHandle, ReceiveBuffer, ReceiveOptions, RedriveOptions, RedrivePolicy, SendMessage,
};

/// Most handles (participants) a context keeps open at once.
const MAX_HANDLES: usize = 3;
/// Most receipt handles remembered.
const MAX_RECEIPTS: usize = 64;
/// Most milliseconds of sleep per input (lets visibility timeouts and delays expire).
const SLEEP_BUDGET_MS: u64 = 20;
/// Most operations per input (bounds the run time of one input).
const MAX_STEPS: usize = 512;

/// Fuzzes opening arbitrary bytes as an arena, then using it.
pub fn open_arena(data: &[u8]) {
    let mut inp = Input::new(data);
    let mode = inp.byte();
    let scratch = Scratch::new("open");
    let path = scratch.file("arena");
    let bytes = if mode & 1 == 0 {
        // Raw: the rest of the input is the file, and no operations follow.
        let b = inp.rest().to_vec();
        inp = Input::new(&[]);
        b
    } else {
        patched_image(&mut inp)
    };
    fs::write(&path, &bytes).expect("write the arena file");
    if mode & 1 == 1 {
        // Optionally size the file to what its (patched) header declares, so that patched
        // geometries can open (sparse, at most 4 MiB).
        if let Some(declared) =
            declared_size(&bytes).filter(|&d| inp.byte() == 0xFD && d <= 4 << 20)
        {
            let f = OpenOptions::new().write(true).open(&path).expect("reopen");
            f.set_len(declared).expect("set_len");
        }
    }
    let q = match Queue::open_at(&path) {
        Ok(q) => q,
        Err(_) => return,
    };
    let mut ctx = Ctx::new(vec![q], path, None, false);
    ctx.run(&mut Input::new(SCRIPT));
    ctx.run(&mut inp);
}

/// Fuzzes random operations on a live queue with random writes into its arena in between.
pub fn live_scribble(data: &[u8]) {
    let mut inp = Input::new(data);
    let sel = inp.byte();
    let scratch = Scratch::new("live");
    let path = scratch.file("queue");
    let dlq_path = scratch.file("dlq");
    let mut cfg = config(sel);
    let dlq = if sel & 0x80 != 0 {
        // A dead-letter queue (it must deduplicate) and a policy that moves a message on its
        // second (or third) delivery.
        let d = Queue::create_at(&dlq_path, &config(1)).expect("create the dead-letter queue");
        let max = 1 + u32::from((sel >> 6) & 1);
        cfg = cfg.redrive_policy(RedrivePolicy::new(dlq_path.to_string_lossy(), max));
        Some(d)
    } else {
        None
    };
    let q = Queue::create_at(&path, &cfg).expect("create the queue");
    let mut ctx = Ctx::new(vec![q], path, dlq.map(|d| (d, dlq_path)), true);
    ctx.run(&mut inp);
}

/// Operations that fill a fresh queue: sends of every kind, a receive, a receive recorded
/// under an attempt id, a delete (see [`Ctx::step`] for the encoding).
const POPULATE: &[u8] = &[
    0, 0, 1, 5, 0, 97, // send g0, dedup id d1, 5 chars
    0, 1, 2, 3, 1, 98, // send g1, d2, 3 chars, 1 attribute
    0, 2, 0, 70, 3, 99, // send g2, no dedup id, 6 chars, 3 attributes
    0, 3, 3, 200, 0, 100, // send g3, d3, 136 chars (the second size class)
    1, 2, 4, 5, 6, 4, 5, 6, // send_batch of 3: g4, g5, g0 with d4, d5, d6
    2, 2, 3, // receive 3, visibility timeout 30 s
    3, 0, 1, 3, // receive_with_attempt_id a0, 2, 30 s
    4, 0, 0, 0, 0, 0, 0, 0, 0, 0, // delete receipt 0
];

/// The operations run first on every arena that opens: attributes, recover, sends, receives
/// (plain, with an attempt id and its replay, into a buffer), deletes, visibility changes,
/// batches, settings, a second handle, sleep, redrive, purge.
const SCRIPT: &[u8] = &[
    9, // attributes
    8, // recover
    0, 0, 1, 5, 0, 97, // send g0, dedup id d1, 5 chars
    0, 1, 2, 3, 1, 98, // send g1, d2, 3 chars, 1 attribute
    0, 2, 0, 70, 3, 99, // send g2, no dedup id, 6 chars, 3 attributes
    0, 3, 3, 200, 0, 100, // send g3, d3, 136 chars (the second size class)
    1, 2, 4, 5, 6, 4, 5, 6, // send_batch of 3: g4, g5, g0 with d4, d5, d6
    2, 9, 3, // receive 10, visibility timeout 30 s
    3, 1, 4, 0, // receive_with_attempt_id a1, 5, visibility timeout 0
    3, 1, 4, 0, // the same again (a replay if nothing changed)
    4, 0, 0, 0, 0, 0, 0, 0, 0, 0, // delete receipt 0
    5, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, // change_visibility receipt 1 to 0
    5, 2, 0, 0, 0, 0, 0, 0, 0, 0, 3, // change_visibility receipt 2 to 30 s
    6, 1, 3, 0, 0, 0, 0, 0, 0, 0, 0, 200, 1, 0, 0, 0, 0, 0, 0,
    0, // delete_batch: receipt 3, a nudged one
    7, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 1, // change_visibility_batch: receipt 4 to 1 ms
    15, 9, 1, // receive_into 10, visibility timeout 1 ms
    10, 0, 0, 30, // set_attribute VisibilityTimeout 30
    10, 7, 7,  // set_attribute RedrivePolicy to a dead-letter queue, maxReceiveCount 1
    11, // redrive_policy
    12, // open a second handle
    34, 9, 2, // receive 10 through the second handle, default visibility timeout
    4, 201, 5, 0, 0, 0, 1, 0, 0, 0, // delete a forged handle (slot 5, incarnation 1)
    17, 3, // sleep 4 ms
    8, // recover
    13, 1,  // redrive, at most 2
    16, // purge
    9,  // attributes
];

thread_local! {
    /// When this thread's current input started (for the trace).
    static START: std::time::Instant = std::time::Instant::now();
}

/// Reads an input front to back; past its end every read gives zeros.
struct Input<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Input<'a> {
    fn new(data: &'a [u8]) -> Self {
        Input { data, pos: 0 }
    }
    fn is_empty(&self) -> bool {
        self.pos >= self.data.len()
    }
    fn byte(&mut self) -> u8 {
        let b = self.data.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        b
    }
    fn bytes(&mut self, n: usize) -> &'a [u8] {
        let start = self.pos.min(self.data.len());
        let end = (start + n).min(self.data.len());
        self.pos += n;
        &self.data[start..end]
    }
    fn rest(&mut self) -> &'a [u8] {
        let start = self.pos.min(self.data.len());
        self.pos = self.data.len();
        &self.data[start..]
    }
    fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.byte(), self.byte()])
    }
    fn u24(&mut self) -> u32 {
        u32::from_le_bytes([self.byte(), self.byte(), self.byte(), 0])
    }
    fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.byte(), self.byte(), self.byte(), self.byte()])
    }
    fn u64(&mut self) -> u64 {
        u64::from(self.u32()) | u64::from(self.u32()) << 32
    }
    /// Printable ASCII (valid in bodies and ids) made of the next `n` bytes.
    fn text(&mut self, n: usize) -> String {
        self.bytes(n)
            .iter()
            .map(|&b| char::from(0x21 + b % 94))
            .collect()
    }
}

/// A directory under `/dev/shm` for one call's files, removed (with them) on drop.
struct Scratch {
    dir: PathBuf,
}

impl Scratch {
    fn new(tag: &str) -> Self {
        static N: AtomicU64 = AtomicU64::new(0);
        let dir = PathBuf::from(format!(
            "/dev/shm/shmfifo-fuzz-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        fs::create_dir(&dir).expect("create a scratch directory under /dev/shm");
        Scratch { dir }
    }
    fn file(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// A small queue: few slots, groups and participants, short visibility timeout; `sel` picks
/// the deduplication (off, queue scope, message-group scope, content-based) and, for some, a
/// small in-flight limit.
fn config(sel: u8) -> QueueConfig {
    let c = QueueConfig::new()
        .max_messages(8)
        .max_groups(4)
        .max_participants(MAX_HANDLES as u32)
        .maximum_message_size(1024)
        .visibility_timeout(Duration::from_millis(20))
        .dedup_entries(16)
        .deduplication_interval(Duration::from_secs(60))
        .attempt_entries(4);
    let c = match sel % 4 {
        0 => c.deduplication(Deduplication::Off),
        1 => c,
        2 => c.deduplication(Deduplication::MessageGroup),
        _ => c.content_based_deduplication(true),
    };
    if sel & 0x10 != 0 {
        c.max_in_flight(3)
    } else {
        c
    }
}

/// Base arenas for `open_arena`'s patch mode, made once per process: for each configuration,
/// a fresh one, and one with messages queued, in flight, deleted and recorded under an attempt
/// id, copied while its creator was still registered (so an opener finds a dead participant).
fn images() -> &'static [Vec<u8>] {
    static IMAGES: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    IMAGES.get_or_init(|| {
        let scratch = Scratch::new("images");
        let mut out = Vec::new();
        for sel in 0..4u8 {
            let path = scratch.file(&format!("image{sel}"));
            let q = Queue::create_at(&path, &config(sel)).expect("create a base arena");
            out.push(fs::read(&path).expect("read a base arena"));
            let mut ctx = Ctx::new(vec![q], path.clone(), None, true);
            ctx.trace = false;
            ctx.run(&mut Input::new(POPULATE));
            out.push(fs::read(&path).expect("read a base arena"));
            drop(ctx);
            let _ = fs::remove_file(&path);
        }
        out
    })
}

/// The total size the header declares (the third word), if the file has a header.
fn declared_size(bytes: &[u8]) -> Option<u64> {
    let w = bytes.get(16..24)?;
    Some(u64::from_le_bytes(w.try_into().ok()?))
}

/// Patch mode of `open_arena`: a base image, an optional resize, then patches until a zero
/// byte (the rest of the input is operations). Patch kinds: bytes at any offset; a word at an
/// aligned offset; a special word (0, all ones, small); a word into the header's first 512 B.
fn patched_image(inp: &mut Input<'_>) -> Vec<u8> {
    let imgs = images();
    let mut img = imgs[usize::from(inp.byte()) % imgs.len()].clone();
    match inp.byte() {
        0xFF => img.truncate(img.len() / 2),
        0xFE => img.resize(img.len() + 4096, 0),
        0xFC => img.truncate(4096),
        _ => {}
    }
    let len = img.len();
    for _ in 0..256 {
        let kind = inp.byte();
        if kind == 0 || len < 8 {
            break;
        }
        match kind % 4 {
            0 => {
                let off = inp.u24() as usize % len;
                let n = usize::from(inp.byte() % 16) + 1;
                for (k, &b) in inp.bytes(n).iter().enumerate() {
                    if let Some(d) = img.get_mut(off + k) {
                        *d = b;
                    }
                }
            }
            1 => {
                let off = (inp.u24() as usize % len) & !7;
                let w = inp.u64();
                write_word(&mut img, off, w);
            }
            2 => {
                let off = (inp.u24() as usize % len) & !7;
                let w = special_word(inp);
                write_word(&mut img, off, w);
            }
            _ => {
                let off = usize::from(inp.byte() % 64) * 8;
                let w = if inp.byte() & 1 == 0 {
                    special_word(inp)
                } else {
                    inp.u64()
                };
                write_word(&mut img, off, w);
            }
        }
    }
    img
}

fn write_word(img: &mut [u8], off: usize, w: u64) {
    if let Some(d) = img.get_mut(off..off + 8) {
        d.copy_from_slice(&w.to_le_bytes());
    }
}

/// Words that tend to hit edge cases.
fn special_word(inp: &mut Input<'_>) -> u64 {
    match inp.byte() % 8 {
        0 => 0,
        1 => u64::MAX,
        2 => u64::from(inp.byte()),
        3 => 1 << (inp.byte() % 64),
        4 => u64::from(u32::MAX),
        5 => u64::MAX - u64::from(inp.byte()),
        6 => u64::from(inp.u32()) << 32,
        _ => u64::from(inp.u16()),
    }
}

/// A queue being fuzzed: its handles, its file(s), what it has seen.
struct Ctx {
    handles: Vec<Queue>,
    path: PathBuf,
    /// The dead-letter queue, if any, and its path.
    dlq: Option<(Queue, PathBuf)>,
    /// Writable mappings of the queue's and the dead-letter queue's files (made on first use).
    maps: [Option<memmap2::MmapMut>; 2],
    receipts: Vec<ReceiptHandle>,
    /// The arena nonce, learnt from a message id (to forge well-formed receipt handles).
    nonce: Option<u64>,
    buf: ReceiveBuffer,
    slept_ms: u64,
    /// No write behind the library's back yet: `Corrupted` would be a bug.
    clean: bool,
    /// Print each operation and its result (see [`tracing`]).
    trace: bool,
}

impl Ctx {
    fn new(handles: Vec<Queue>, path: PathBuf, dlq: Option<(Queue, PathBuf)>, clean: bool) -> Self {
        Ctx {
            handles,
            path,
            dlq,
            maps: [None, None],
            receipts: Vec::new(),
            nonce: None,
            buf: ReceiveBuffer::new(),
            slept_ms: 0,
            clean,
            trace: tracing(),
        }
    }

    fn run(&mut self, inp: &mut Input<'_>) {
        for _ in 0..MAX_STEPS {
            if inp.is_empty() {
                break;
            }
            let op = inp.byte();
            self.step(op, inp);
        }
    }

    /// Checks a result: any `Ok` or `Err` is fine, except `Corrupted` in a clean arena.
    fn check<T>(&self, what: &str, r: Result<T, Error>) -> Option<T> {
        if self.trace {
            match &r {
                Ok(_) => eprintln!("  {what}: ok"),
                Err(e) => eprintln!("  {what}: {e:?}"),
            }
        }
        match r {
            Ok(v) => Some(v),
            Err(e @ Error::Corrupted { .. }) if self.clean => {
                panic!("{what}: {e} (Corrupted although nothing wrote into the arena)")
            }
            Err(_) => None,
        }
    }

    fn handle(&self, sel: u8) -> Option<&Queue> {
        if self.handles.is_empty() {
            None
        } else {
            Some(&self.handles[usize::from(sel) % self.handles.len()])
        }
    }

    fn remember(&mut self, h: ReceiptHandle) {
        if self.receipts.len() == MAX_RECEIPTS {
            self.receipts.remove(0);
        }
        self.receipts.push(h);
    }

    /// A receipt handle, from 9 input bytes: `sel`, then a parameter word `p`. One received
    /// (`sel` < 128, if any), else a forged one: well-formed, with this arena's nonce if known,
    /// and slot, incarnation and epoch near those of a received one, or from `p`.
    fn receipt(&self, inp: &mut Input<'_>) -> String {
        let sel = inp.byte();
        let p = inp.u64();
        if sel < 128 && !self.receipts.is_empty() {
            return self.receipts[usize::from(sel) % self.receipts.len()].to_string();
        }
        let nonce = self.nonce.unwrap_or(0);
        let (idx, inc, epoch) = match (sel % 4, self.receipts.last()) {
            (0, Some(h)) => {
                // Fields of a real handle, one of them nudged.
                let s = h.to_string();
                let field = |r: std::ops::Range<usize>| u32::from_str_radix(&s[r], 16).unwrap_or(0);
                let (i, n, e) = (field(19..27), field(27..35), field(36..42));
                let d = p as u32;
                match d % 3 {
                    0 => (i ^ (d >> 2), n, e),
                    1 => (i, n.wrapping_add((d >> 2) & 63).wrapping_sub(32), e),
                    _ => (i, n, e.wrapping_add((d >> 2) & 63).wrapping_sub(32)),
                }
            }
            (1, _) => (p as u32, (p >> 32) as u32, (p >> 40) as u32),
            _ => (
                (p & 0xff) as u32 % 48,
                ((p >> 8) & 3) as u32,
                ((p >> 16) & 7) as u32,
            ),
        };
        // The member of a pack (layout 22): mostly 0, the only one this build's slots hold;
        // sometimes another, or one past a pack's ten (no handle at all).
        let member = if p >> 60 == 0xF { (p >> 56) & 0xF } else { 0 };
        format!(
            "sf2{nonce:016x}{idx:08x}{inc:08x}{member:x}{:06x}",
            epoch & 0xff_ffff
        )
    }

    fn receive_opts(inp: &mut Input<'_>) -> ReceiveOptions {
        let max = u32::from(inp.byte() % 10) + 1;
        let o = ReceiveOptions::max(max).wait(Duration::ZERO);
        match inp.byte() % 4 {
            0 => o.visibility_timeout(Duration::ZERO),
            1 => o.visibility_timeout(Duration::from_millis(1)),
            2 => o,
            _ => o.visibility_timeout(Duration::from_secs(30)),
        }
    }

    fn timeout(b: u8) -> Duration {
        match b % 6 {
            0 => Duration::ZERO,
            1 => Duration::from_millis(1),
            2 => Duration::from_millis(5),
            3 => Duration::from_secs(30),
            4 => Duration::from_secs(43_200),
            _ => Duration::from_secs(43_201), // invalid
        }
    }

    /// One operation; `op` picks it, its parameters come from `inp`:
    ///
    /// | op | operation | parameters |
    /// |---|---|---|
    /// | 0 | send | group, dedup id, body length, attribute count, body's first character |
    /// | 1 | send_batch | entry count, groups, dedup ids |
    /// | 2 | receive | max, visibility timeout |
    /// | 3 | receive_with_attempt_id | attempt id, max, visibility timeout |
    /// | 4 | delete | receipt (9 bytes, see [`Ctx::receipt`]) |
    /// | 5 | change_visibility | receipt, timeout |
    /// | 6 | delete_batch | entry count, receipts |
    /// | 7 | change_visibility_batch | entry count, receipts, timeout |
    /// | 8 | recover | |
    /// | 9 | attributes | |
    /// | 10 | set_attribute | name, value |
    /// | 11 | redrive_policy | |
    /// | 12 | open another handle | |
    /// | 13 | redrive (from the dead-letter queue, or this one) | limit |
    /// | 14 | drop a handle | which |
    /// | 15 | receive_into | max, visibility timeout |
    /// | 16 | purge | |
    /// | 17 | sleep | ms (within a budget per input) |
    /// | 18+ | scribble | target file, kind, offset, bytes |
    ///
    /// The top 3 bits of `op` pick the handle used.
    fn step(&mut self, op: u8, inp: &mut Input<'_>) {
        let who = op >> 5;
        let op = op & 31;
        if self.trace {
            eprintln!(
                "op {op} (handle {who}) at input byte {}, {:?} into the input",
                inp.pos - 1,
                START.with(|s| s.elapsed())
            );
        }
        if op >= 20 {
            self.scribble(inp);
            return;
        }
        if op == 12 {
            if self.handles.len() < MAX_HANDLES {
                let r = Queue::open_at(&self.path);
                if let Some(q) = self.check("open_at", r) {
                    self.handles.push(q);
                }
            }
            return;
        }
        if op == 17 {
            let ms = u64::from(inp.byte() % 4) + 1;
            if self.slept_ms + ms <= SLEEP_BUDGET_MS {
                self.slept_ms += ms;
                std::thread::sleep(Duration::from_millis(ms));
            }
            return;
        }
        let Some(q) = self.handle(who).cloned() else {
            return;
        };
        match op {
            0 => {
                let group = group_id(inp);
                let dedup = dedup_id(inp);
                let n = inp.byte();
                let flags = inp.byte();
                let c = usize::from(inp.byte());
                let len = match n >> 6 {
                    3 => usize::from(n & 63) * 17, // up to 1,071: the larger classes
                    _ => usize::from(n & 63),
                };
                let body: String = (0..len)
                    .map(|k| char::from(0x21 + ((c + k) % 94) as u8))
                    .collect();
                let attrs = [
                    MessageAttribute::string("s", "v"),
                    MessageAttribute::number("n", "42"),
                    MessageAttribute::binary("b", &[0, 255, 7]),
                ];
                let mut m = SendMessage::new(&group, &body);
                if let Some(d) = &dedup {
                    m = m.dedup_id(d);
                }
                if flags & 3 != 0 {
                    m = m.attributes(&attrs[..usize::from(flags & 3)]);
                }
                let r = q.send(&m);
                if let Some(s) = self.check("send", r) {
                    self.nonce = Some((s.message_id.0 >> 64) as u64);
                }
            }
            1 => {
                let n = usize::from(inp.byte() % 4) + 1;
                let groups: Vec<String> = (0..n).map(|_| group_id(inp)).collect();
                let dedups: Vec<Option<String>> = (0..n).map(|_| dedup_id(inp)).collect();
                let ids = ["e0", "e1", "e2", "e1"];
                let entries: Vec<BatchEntry<'_, SendMessage<'_>>> = (0..n)
                    .map(|k| {
                        let mut m = SendMessage::new(&groups[k], "batch body");
                        if let Some(d) = &dedups[k] {
                            m = m.dedup_id(d);
                        }
                        BatchEntry {
                            id: ids[k],
                            entry: m,
                        }
                    })
                    .collect();
                let r = q.send_batch(&entries);
                if let Some(rs) = self.check("send_batch", r) {
                    for r in rs {
                        self.check("send_batch entry", r.result);
                    }
                }
            }
            2 | 3 | 15 => {
                let attempt = if op == 3 {
                    Some(format!("a{}", inp.byte() % 3))
                } else {
                    None
                };
                let opts = Self::receive_opts(inp);
                let got = match (&attempt, op) {
                    (Some(a), _) => {
                        let r = q.receive_with_attempt_id(&opts, a);
                        self.check("receive_with_attempt_id", r)
                    }
                    (None, 15) => {
                        let mut buf = std::mem::take(&mut self.buf);
                        let r = q.receive_into(&opts, &mut buf);
                        let got = self
                            .check("receive_into", r)
                            .map(|_| buf.messages().to_vec());
                        self.buf = buf;
                        got
                    }
                    _ => {
                        let r = q.receive(&opts);
                        self.check("receive", r)
                    }
                };
                for m in got.unwrap_or_default() {
                    self.remember(m.receipt_handle);
                }
            }
            4 => {
                let h = self.receipt(inp);
                self.check("delete", q.delete_str(&h));
            }
            5 => {
                let h = self.receipt(inp);
                let t = Self::timeout(inp.byte());
                self.check("change_visibility", q.change_visibility_str(&h, t));
            }
            6 | 7 => {
                let n = usize::from(inp.byte() % 4) + 1;
                let hs: Vec<String> = (0..n).map(|_| self.receipt(inp)).collect();
                let ids = ["e0", "e1", "e2", "e1"];
                let rs = if op == 6 {
                    let entries: Vec<BatchEntry<'_, &str>> = (0..n)
                        .map(|k| BatchEntry {
                            id: ids[k],
                            entry: hs[k].as_str(),
                        })
                        .collect();
                    q.delete_batch(&entries)
                } else {
                    let t = Self::timeout(inp.byte());
                    let entries: Vec<BatchEntry<'_, (&str, Duration)>> = (0..n)
                        .map(|k| BatchEntry {
                            id: ids[k],
                            entry: (hs[k].as_str(), t),
                        })
                        .collect();
                    q.change_visibility_batch(&entries)
                };
                if let Some(rs) = self.check("batch", rs) {
                    for r in rs {
                        self.check("batch entry", r.result);
                    }
                }
            }
            8 => {
                self.check("recover", q.recover());
            }
            9 => {
                let a = q.attributes();
                // Touch every field (a panic in Debug would count too).
                let _ = format!("{a:?}");
            }
            10 => self.set_attribute(&q, inp),
            11 => {
                self.check("redrive_policy", q.redrive_policy());
            }
            13 => {
                let limit = u64::from(inp.byte() % 4) + 1;
                let opts = RedriveOptions {
                    limit: Some(limit),
                    ..RedriveOptions::default()
                };
                let r = match &self.dlq {
                    Some((d, _)) => d.redrive(&opts),
                    None => q.redrive(&opts),
                };
                self.check("redrive", r);
            }
            14 => {
                if !self.handles.is_empty() {
                    let k = usize::from(inp.byte()) % self.handles.len();
                    self.handles.remove(k);
                }
            }
            16 => {
                if self.check("purge", q.purge()).is_some() {
                    self.receipts.clear();
                }
            }
            18 => {
                // A loaned send: the body written in place, then sent or dropped.
                let group = group_id(inp);
                let dedup = dedup_id(inp);
                let n = usize::from(inp.byte()) * 5 + 1;
                let send = inp.byte() & 1 == 0;
                let c = usize::from(inp.byte());
                if let Some(mut loan) = self.check("loan", q.loan(&group, n)) {
                    for (k, b) in loan.as_mut_slice().iter_mut().enumerate() {
                        *b = 0x21 + ((c + k) % 94) as u8;
                    }
                    if send {
                        let mut opts = LoanOptions::new();
                        if let Some(d) = &dedup {
                            opts = opts.dedup_id(d);
                        }
                        let r = loan.send_with(&opts).map_err(|e| e.error);
                        if let Some(s) = self.check("loan send", r) {
                            self.nonce = Some((s.message_id.0 >> 64) as u64);
                        }
                    }
                }
            }
            19 => {
                // A borrowed receive read while the arena is scribbled over (another process
                // writing the slot): any bytes may be read, `verify` says Ok or expired, and
                // nothing crashes.
                let opts = Self::receive_opts(inp);
                let got = self
                    .check("receive_borrowed", q.receive_borrowed(&opts))
                    .unwrap_or_default();
                for m in &got {
                    let sum: u64 = m.body().iter().map(|&b| u64::from(b)).sum();
                    std::hint::black_box(sum);
                    if inp.byte() & 1 == 1 {
                        self.scribble(inp);
                    }
                    let _ = m.verify();
                    let _ = m.body_str();
                    let _ = m.to_message();
                    self.remember(*m.receipt_handle());
                }
            }
            _ => unreachable!("op {op} is handled above"),
        }
    }

    fn set_attribute(&self, q: &Queue, inp: &mut Input<'_>) {
        const NAMES: [&str; 10] = [
            "VisibilityTimeout",
            "VisibilityTimeoutMs",
            "DelaySeconds",
            "DelayMs",
            "MessageRetentionPeriod",
            "MessageRetentionPeriodMs",
            "ContentBasedDeduplication",
            "RedrivePolicy",
            "MaximumMessageSize",
            "NoSuchAttribute",
        ];
        let name = NAMES[usize::from(inp.byte()) % NAMES.len()];
        let v = inp.byte();
        let value = match name {
            "ContentBasedDeduplication" => ["true", "false", "maybe"][usize::from(v % 3)].into(),
            "RedrivePolicy" => {
                // Only the dead-letter queue in this call's scratch directory, or a missing
                // file next to it: never a name that could be another process's queue.
                let dir = self.path.parent().unwrap_or(Path::new("/nonexistent"));
                match v % 4 {
                    0 => String::new(),
                    1 => "{\"maxReceiveCount\":".into(),
                    2 => format!(
                        "{{\"deadLetterTargetArn\":\"{}\",\"maxReceiveCount\":{}}}",
                        dir.join("missing").display(),
                        v >> 2
                    ),
                    _ => format!(
                        "{{\"deadLetterTargetArn\":\"{}\",\"maxReceiveCount\":{}}}",
                        dir.join("dlq").display(),
                        v >> 2
                    ),
                }
            }
            _ => match v % 4 {
                0 => u64::from(inp.byte()).to_string(),
                1 => u64::from(inp.u16()).to_string(),
                2 => inp.u64().to_string(),
                _ => inp.text(4),
            },
        };
        self.check("set_attribute", q.set_attribute(name, &value));
    }

    /// Writes into the queue's (or the dead-letter queue's) arena through a second mapping of
    /// its file, as another process could.
    fn scribble(&mut self, inp: &mut Input<'_>) {
        let which = usize::from(inp.byte() & 1 == 1 && self.dlq.is_some());
        if self.maps[which].is_none() {
            let path = match &self.dlq {
                Some((_, p)) if which == 1 => p,
                _ => &self.path,
            };
            let Ok(f) = OpenOptions::new().read(true).write(true).open(path) else {
                return;
            };
            self.maps[which] = map(&f);
        }
        let Some(m) = self.maps[which].as_mut() else {
            return;
        };
        let len = m.len();
        if len < 8 {
            return;
        }
        let kind = inp.byte();
        let off = inp.u24() as usize % len;
        let (at, bytes) = match kind % 4 {
            0 => {
                let n = usize::from(inp.byte() % 16) + 1;
                (off, inp.bytes(n).to_vec())
            }
            1 => (off & !7, inp.u64().to_le_bytes().to_vec()),
            2 => (off & !7, special_word(inp).to_le_bytes().to_vec()),
            // The static header and the hot lines after it (the first 1 KiB).
            _ => ((off % 1024) & !7, special_word(inp).to_le_bytes().to_vec()),
        };
        let at = at.min(len);
        let end = (at + bytes.len()).min(len);
        m[at..end].copy_from_slice(&bytes[..end - at]);
        if self.trace {
            eprintln!("  scribble: arena {which}, {} bytes at {at}", end - at);
        }
        self.clean = false;
    }
}

/// Whether to print each operation and its result to stderr (`SHMFIFO_FUZZ_TRACE=1`), to
/// read what a kept input does.
fn tracing() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("SHMFIFO_FUZZ_TRACE").is_some_and(|v| v != "0"))
}

/// A writable shared mapping of an arena file.
fn map(f: &File) -> Option<memmap2::MmapMut> {
    // SAFETY: the file is an arena that this process maps again (the queue's own mapping);
    // the fuzzer writes through this mapping only between calls into the library, on this
    // thread, and the file is never truncated while mapped (the scratch directory outlives
    // the context).
    unsafe { memmap2::MmapMut::map_mut(f) }.ok()
}

/// A group id: mostly one of six (more than the queue's four groups), sometimes arbitrary
/// text (also invalid ids).
fn group_id(inp: &mut Input<'_>) -> String {
    let b = inp.byte();
    if b < 240 {
        format!("g{}", b % 6)
    } else {
        let n = usize::from(inp.byte() % 130);
        inp.text(n)
    }
}

/// A dedup id: none, or one of eight (repeats make duplicates).
fn dedup_id(inp: &mut Input<'_>) -> Option<String> {
    match inp.byte() {
        0 => None,
        b => Some(format!("d{}", b % 8)),
    }
}
