//! The peers as one-way channels with the same two operations: send a few payloads, receive a
//! few payloads.
//!
//! Every channel copies a payload twice, as a pipe does: once from the sender's buffer into
//! the channel, once out of it into memory the receiver owns (shmfifo's `Message` body, a read
//! buffer, a `Vec` made by the sender's copy for crossbeam; iceoryx2 and the raw shared memory
//! copy out of the shared sample). A channel is created by the harness (the parent process),
//! which removes it afterwards; its ends are opened by name in any process (crossbeam: threads
//! of the parent only). Each process opens its receiving ends before its sending ends: a pipe
//! or socket end then never waits for a peer that waits for it.

use std::fmt::Write as _;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crossbeam_queue::ArrayQueue;
use shmfifo::{
    Deduplication, Error as QError, LoanOptions, Queue, QueueConfig, ReceiveBuffer, ReceiveOptions,
    SendMessage,
};

use crate::ctl::Line;
use crate::sys::{self, Mq, SharedMap};

/// Results of the harness's own steps: a message for the table.
pub type Res<T> = Result<T, String>;

/// A transport measured by the harness.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Peer {
    /// shmfifo queues.
    Shmfifo,
    /// shmfifo queues, zero-copy forms: `Queue::loan` (the payload written into the
    /// slot) and `Queue::receive_borrowed` (read in place, then verified).
    ShmfifoZc,
    /// The hardware limit: a mailbox in shared memory, polled (cache-line ping-pong) or
    /// slept on with a futex.
    Raw,
    /// crossbeam's `ArrayQueue` between two threads of one process.
    Crossbeam,
    /// A Unix domain stream socket.
    Uds,
    /// A pipe (a FIFO in the file system, the same kernel object).
    Pipe,
    /// A POSIX message queue.
    Mq,
    /// iceoryx2 publish-subscribe, each sample copied out by the subscriber (the copies the
    /// other copying peers make).
    Iceoryx2,
    /// iceoryx2 publish-subscribe, each sample read in place (its zero-copy form).
    Iceoryx2Zc,
    /// shmfifo queues received through `AsyncQueue` on a tokio runtime (sleeping mode only).
    ShmfifoAsync,
}

/// How a receiver waits for a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Wait {
    /// Polls without sleeping.
    Spin,
    /// Blocks in the kernel (a futex, a read, a long poll).
    Sleep,
}

/// Deduplication of a shmfifo channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Dedup {
    /// `Deduplication::Off`.
    Off,
    /// An explicit dedup id on every message.
    ById,
    /// Content-based (SHA-256 of the body).
    Content,
}

impl Peer {
    /// Every peer, in table order.
    pub const ALL: [Peer; 10] = [
        Peer::Raw,
        Peer::Shmfifo,
        Peer::ShmfifoZc,
        Peer::ShmfifoAsync,
        Peer::Iceoryx2,
        Peer::Iceoryx2Zc,
        Peer::Crossbeam,
        Peer::Uds,
        Peer::Pipe,
        Peer::Mq,
    ];

    /// Short name, as the command line and the CSV spell it.
    pub fn key(self) -> &'static str {
        match self {
            Peer::Shmfifo => "shmfifo",
            Peer::ShmfifoZc => "shmfifo-zc",
            Peer::Iceoryx2Zc => "iceoryx2-zc",
            Peer::Raw => "raw",
            Peer::Crossbeam => "crossbeam",
            Peer::Uds => "uds",
            Peer::Pipe => "pipe",
            Peer::Mq => "mq",
            Peer::Iceoryx2 => "iceoryx2",
            Peer::ShmfifoAsync => "shmfifo-async",
        }
    }

    /// Parses [`Peer::key`].
    pub fn parse(s: &str) -> Option<Peer> {
        Peer::ALL.into_iter().find(|p| p.key() == s)
    }

    /// Name in the table, which for the raw mailbox depends on how it waits.
    pub fn label(self, wait: Wait) -> &'static str {
        match (self, wait) {
            (Peer::Raw, Wait::Spin) => "hardware: cache-line ping-pong",
            (Peer::Raw, Wait::Sleep) => "hardware: futex wake",
            (Peer::Shmfifo, _) => "shmfifo",
            (Peer::ShmfifoZc, _) => "shmfifo, loaned send + borrowed receive, binary bodies",
            (Peer::Iceoryx2Zc, _) => "iceoryx2, read in place",
            (Peer::ShmfifoAsync, _) => "shmfifo, async receive (tokio)",
            (Peer::Crossbeam, _) => "crossbeam ArrayQueue (2 threads)",
            (Peer::Uds, _) => "Unix domain socket",
            (Peer::Pipe, _) => "pipe",
            (Peer::Mq, _) => "POSIX message queue",
            (Peer::Iceoryx2, _) => "iceoryx2 publish-subscribe",
        }
    }

    /// Why this peer cannot run a case, if it cannot: `size` bytes, `wait`, `stream` (more
    /// than one message in flight).
    pub fn unsupported(self, size: usize, wait: Wait, stream: bool) -> Option<String> {
        match self {
            Peer::Raw if stream => {
                Some("a one-message mailbox: the hardware limit is a latency figure".into())
            }
            Peer::Crossbeam if wait == Wait::Sleep => {
                Some("ArrayQueue has no blocking pop (threads spin)".into())
            }
            Peer::ShmfifoAsync if wait == Wait::Spin || stream => Some(
                "an async receive differs from the blocking one only in how it waits: \
                 measured for sleeping latency"
                    .into(),
            ),
            Peer::Iceoryx2 | Peer::Iceoryx2Zc if wait == Wait::Sleep => Some(
                "publish-subscribe has no blocking receive (waking takes a separate event \
                 service); measured spinning"
                    .into(),
            ),
            Peer::Iceoryx2 | Peer::Iceoryx2Zc if !cfg!(feature = "iceoryx2") => {
                Some("not built (build with --features iceoryx2)".into())
            }
            Peer::Mq => {
                let max = sys::mq_limit("msgsize_max").unwrap_or(8192) as usize;
                (size > max).then(|| {
                    format!(
                        "{size} B is above /proc/sys/fs/mqueue/msgsize_max ({max} B; raising it \
                         needs root)"
                    )
                })
            }
            _ => None,
        }
    }
}

impl Wait {
    /// Short name.
    pub fn key(self) -> &'static str {
        match self {
            Wait::Spin => "spin",
            Wait::Sleep => "sleep",
        }
    }
}

impl Dedup {
    /// Short name.
    pub fn key(self) -> &'static str {
        match self {
            Dedup::Off => "off",
            Dedup::ById => "by-id",
            Dedup::Content => "content",
        }
    }

    /// Parses [`Dedup::key`].
    pub fn parse(s: &str) -> Option<Dedup> {
        [Dedup::Off, Dedup::ById, Dedup::Content]
            .into_iter()
            .find(|d| d.key() == s)
    }
}

/// What both ends of a channel agree on.
#[derive(Debug, Clone)]
pub struct ChanSpec {
    /// The transport.
    pub peer: Peer,
    /// Name (queue, path or service name), unique in the run.
    pub name: String,
    /// Payload bytes of every message.
    pub size: usize,
    /// Most messages per send and per receive.
    pub batch: usize,
    /// shmfifo only: deduplication.
    pub dedup: Dedup,
    /// shmfifo only: message groups the senders spread over (round robin); 0: a new group id
    /// per message (the table keeps the default size, so it is cycled through).
    pub groups: u32,
    /// shmfifo only: slots of the class the payloads go to (0: a default by payload size).
    pub slots: u32,
}

/// How long a blocking receive waits before it reports "nothing" (so that loops can look at
/// their stop flags).
const SLEEP_POLL: Duration = Duration::from_millis(100);

/// Receive outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Got {
    /// This many messages went to the sink.
    Msgs(usize),
    /// Nothing now (spinning) or within the wait (sleeping).
    Empty,
    /// The sender closed the channel.
    Closed,
}

/// The sending end of a channel.
pub trait Tx {
    /// Sends `msgs` in order, as one batch where the transport has a batch operation. Waits for
    /// room while `stop` is down; `Ok(false)` when it gave up because `stop` was raised.
    fn send(&mut self, msgs: &[&[u8]], stop: &AtomicU32) -> Res<bool>;

    /// Sends that found no room and were retried so far.
    fn full_retries(&self) -> u64 {
        0
    }
}

/// The receiving end of a channel.
pub trait Rx {
    /// Receives up to `max` messages (at most the channel's batch), handing each payload to
    /// `sink`.
    fn recv(&mut self, max: usize, sink: &mut dyn FnMut(&[u8])) -> Res<Got>;

    /// Whether senders may block until this end reads (so a consumer must drain the channel
    /// before it leaves): true for every peer but shmfifo, whose senders get "full" instead.
    fn must_drain(&self) -> bool {
        true
    }
}

/// A payload as the `&str` body shmfifo takes.
fn ascii(p: &[u8]) -> &str {
    debug_assert!(p.is_ascii(), "harness payloads are ASCII");
    // SAFETY: every payload of the harness is ASCII (made by `payload`, or received from a
    // channel that carried such payloads unchanged), and ASCII is UTF-8.
    unsafe { std::str::from_utf8_unchecked(p) }
}

/// A fresh ASCII payload of `size` bytes.
pub fn payload(size: usize) -> Vec<u8> {
    (0..size).map(|i| b'a' + (i % 26) as u8).collect()
}

/// Writes `v` as 8 lowercase hex digits into the first bytes of `p` (all of them if `p` is
/// shorter): the stamp that makes every payload distinct (content-based dedup needs it).
pub fn stamp(p: &mut [u8], v: u32) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for (i, b) in p.iter_mut().take(8).enumerate() {
        *b = HEX[((v >> (28 - 4 * i)) & 0xf) as usize];
    }
}

// ---------------------------------------------------------------------------------------------
// Channel creation
// ---------------------------------------------------------------------------------------------

/// A created channel; dropping it removes it (unlinks the queue, file, FIFO, socket path or
/// message queue, closes the iceoryx2 service).
pub struct Chan {
    /// What it is.
    pub spec: ChanSpec,
    /// The created resource (held for its `Drop`).
    held: Held,
}

/// What a channel's creator keeps.
enum Held {
    /// The creator's handle of a shmfifo queue.
    Shmfifo(#[allow(dead_code)] Queue),
    /// The raw mailbox's mapping (its owner unlinks the file).
    Raw(#[allow(dead_code)] SharedMap),
    /// The in-process queue.
    Crossbeam(Arc<ArrayQueue<Vec<u8>>>),
    /// A FIFO or socket path, removed on drop.
    Path(PathBuf),
    /// The message queue (unlinked on drop).
    Mq(#[allow(dead_code)] Mq),
    /// The iceoryx2 service and its node.
    #[cfg(feature = "iceoryx2")]
    Iceoryx2(#[allow(dead_code)] iox::Service),
}

impl std::fmt::Debug for Chan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Chan").field("spec", &self.spec).finish()
    }
}

impl Drop for Chan {
    fn drop(&mut self) {
        match (&self.held, self.spec.peer) {
            (Held::Shmfifo(_), _) => {
                let _ = Queue::unlink(&self.spec.name);
            }
            (Held::Path(p), _) => {
                let _ = std::fs::remove_file(p);
            }
            (Held::Mq(_), _) => Mq::unlink(&self.spec.name),
            _ => {}
        }
    }
}

/// Path of a file-system channel (FIFO, socket, raw mailbox).
fn chan_path(spec: &ChanSpec) -> PathBuf {
    match spec.peer {
        Peer::Raw => PathBuf::from(format!("/dev/shm/{}", spec.name)),
        _ => std::env::temp_dir().join(&spec.name),
    }
}

/// Slots of the class shmfifo payloads of `size` bytes go to, when not set: a class of at
/// most about 64 MiB, 64 to 16,384 slots.
fn default_slots(size: usize) -> u32 {
    ((64 << 20) / (size + 128)).clamp(64, 16_384) as u32
}

/// The shmfifo queue configuration of a channel.
pub fn shmfifo_config(spec: &ChanSpec) -> QueueConfig {
    let mut cfg = QueueConfig::new()
        .maximum_message_size(spec.size.max(1024) as u32)
        .max_groups(spec.groups.max(4_096))
        .max_participants(64);
    cfg = match spec.dedup {
        Dedup::Off => cfg.deduplication(Deduplication::Off),
        // The settings users get: SQS's 5-minute interval and the default table. At millions
        // of new ids per second the table holds the last fraction of a second of them, and
        // the effective window shortens (counted, reported; no send is refused).
        Dedup::ById => cfg,
        Dedup::Content => cfg.content_based_deduplication(true),
    };
    if spec.peer == Peer::ShmfifoZc {
        // The zero-copy peer moves raw frames, as iceoryx2 does: bodies of any bytes, no
        // character check (an extension, said in its label).
        cfg = cfg.body_mode(shmfifo::BodyMode::Binary);
    }
    let limit = cfg.stored_size_limit();
    // The payload, and a dedup id (64 hex digits for content-based dedup).
    let first = ((spec.size + 64).div_ceil(64) * 64).max(192) as u32;
    let slots = if spec.slots == 0 {
        default_slots(spec.size)
    } else {
        spec.slots
    };
    let classes = if first >= limit {
        vec![(limit, slots)]
    } else {
        vec![(first, slots), (limit, 4)]
    };
    cfg.size_classes(classes)
}

/// Raw mailbox bytes for payloads of `size`.
fn mailbox_len(size: usize) -> usize {
    (MAILBOX_DATA + size).div_ceil(4096) * 4096
}

/// Creates the channel.
pub fn create(spec: &ChanSpec) -> Res<Chan> {
    let held = match spec.peer {
        Peer::Shmfifo | Peer::ShmfifoZc | Peer::ShmfifoAsync => {
            let _ = Queue::unlink(&spec.name);
            let q = Queue::create(&spec.name, &shmfifo_config(spec))
                .map_err(|e| format!("creating queue {}: {e}", spec.name))?;
            Held::Shmfifo(q)
        }
        Peer::Raw => Held::Raw(SharedMap::create(&chan_path(spec), mailbox_len(spec.size))?),
        Peer::Crossbeam => Held::Crossbeam(Arc::new(ArrayQueue::new(1024))),
        Peer::Uds => Held::Path(chan_path(spec)),
        Peer::Pipe => {
            let p = chan_path(spec);
            let _ = std::fs::remove_file(&p);
            sys::mkfifo(&p)?;
            Held::Path(p)
        }
        Peer::Mq => {
            Mq::unlink(&spec.name);
            let maxmsg = sys::mq_limit("msg_max").unwrap_or(10).min(10) as usize;
            Held::Mq(Mq::create(&spec.name, maxmsg, spec.size.max(1))?)
        }
        Peer::Iceoryx2 | Peer::Iceoryx2Zc => {
            #[cfg(feature = "iceoryx2")]
            {
                Held::Iceoryx2(iox::Service::create(spec)?)
            }
            #[cfg(not(feature = "iceoryx2"))]
            {
                return Err(Peer::Iceoryx2
                    .unsupported(spec.size, Wait::Spin, false)
                    .unwrap_or_default());
            }
        }
    };
    Ok(Chan {
        spec: spec.clone(),
        held,
    })
}

/// The in-process queue of a crossbeam channel (`None` for other peers).
pub fn crossbeam_queue(chan: &Chan) -> Option<Arc<ArrayQueue<Vec<u8>>>> {
    match &chan.held {
        Held::Crossbeam(q) => Some(q.clone()),
        _ => None,
    }
}

/// Opens the sending end; `index` numbers the senders of one channel (it picks a shmfifo
/// sender's first group and dedup-id prefix), `senders` is how many there are, `wait` how
/// the receiver waits (a raw sender wakes a sleeping one).
pub fn open_tx(
    spec: &ChanSpec,
    inproc: Option<Arc<ArrayQueue<Vec<u8>>>>,
    index: usize,
    senders: usize,
    wait: Wait,
) -> Res<Box<dyn Tx>> {
    Ok(match spec.peer {
        Peer::Shmfifo | Peer::ShmfifoZc | Peer::ShmfifoAsync => {
            Box::new(ShmfifoTx::open(spec, index, senders)?)
        }
        Peer::Raw => Box::new(RawTx::open(spec, wait)?),
        Peer::Crossbeam => Box::new(CrossbeamTx {
            q: inproc.ok_or("crossbeam channels are in-process only")?,
            retries: 0,
        }),
        Peer::Uds => Box::new(StreamTx::uds(spec)?),
        Peer::Pipe => Box::new(StreamTx::fifo(spec)?),
        Peer::Mq => Box::new(MqTx {
            mq: Mq::open(&spec.name, true, false)?,
            retries: 0,
        }),
        #[cfg(feature = "iceoryx2")]
        Peer::Iceoryx2 | Peer::Iceoryx2Zc => Box::new(iox::IoxTx::open(spec)?),
        #[cfg(not(feature = "iceoryx2"))]
        Peer::Iceoryx2 | Peer::Iceoryx2Zc => return Err("iceoryx2: not built".into()),
    })
}

/// Opens the receiving end.
pub fn open_rx(
    spec: &ChanSpec,
    inproc: Option<Arc<ArrayQueue<Vec<u8>>>>,
    wait: Wait,
) -> Res<Box<dyn Rx>> {
    if let Some(why) = spec.peer.unsupported(spec.size, wait, false) {
        return Err(why);
    }
    Ok(match spec.peer {
        Peer::Shmfifo | Peer::ShmfifoZc => Box::new(ShmfifoRx::open(spec, wait)?),
        Peer::ShmfifoAsync => Box::new(ShmfifoRx::open_async(spec)?),
        Peer::Raw => Box::new(RawRx::open(spec, wait)?),
        Peer::Crossbeam => Box::new(CrossbeamRx {
            q: inproc.ok_or("crossbeam channels are in-process only")?,
        }),
        Peer::Uds => Box::new(StreamRx::uds(spec, wait)?),
        Peer::Pipe => Box::new(StreamRx::fifo(spec, wait)?),
        Peer::Mq => Box::new(MqRx::open(spec, wait)?),
        #[cfg(feature = "iceoryx2")]
        Peer::Iceoryx2 | Peer::Iceoryx2Zc => Box::new(iox::IoxRx::open(spec)?),
        #[cfg(not(feature = "iceoryx2"))]
        Peer::Iceoryx2 | Peer::Iceoryx2Zc => return Err("iceoryx2: not built".into()),
    })
}

// ---------------------------------------------------------------------------------------------
// shmfifo
// ---------------------------------------------------------------------------------------------

/// A shmfifo sender: round robin over the channel's groups from its own starting point.
struct ShmfifoTx {
    q: Queue,
    /// Group count.
    groups: usize,
    /// A new group id per message instead of the round robin.
    unique: bool,
    /// Group names of the current batch (reused buffers, written as [`group_name`] does).
    names: Vec<String>,
    cursor: usize,
    dedup: Dedup,
    /// Dedup ids of the current batch (reused buffers).
    ids: Vec<String>,
    prefix: usize,
    counter: u64,
    retries: u64,
    /// Peer `shmfifo-zc`: each message written into a loaned slot (`Queue::loan`).
    zero_copy: bool,
}

impl ShmfifoTx {
    fn open(spec: &ChanSpec, index: usize, senders: usize) -> Res<ShmfifoTx> {
        let q = open_prefaulted(spec)?;
        // `SHMFIFO_HARNESS_PACKS=0` (inherited by the worker processes): a batch one slot a
        // message, for a comparison with the default, packs, run against run.
        if std::env::var_os("SHMFIFO_HARNESS_PACKS").is_some_and(|v| v == "0") {
            q.set_pack_batches(false);
        }
        let g = spec.groups.max(1) as usize;
        Ok(ShmfifoTx {
            q,
            groups: g,
            unique: spec.groups == 0,
            names: vec![String::new(); 10],
            cursor: index * g / senders.max(1),
            dedup: spec.dedup,
            ids: vec![String::new(); 10],
            prefix: index,
            counter: 0,
            retries: 0,
            zero_copy: spec.peer == Peer::ShmfifoZc,
        })
    }

    fn next_group(&mut self) -> usize {
        let g = self.cursor;
        self.cursor += 1;
        if self.cursor == self.groups {
            self.cursor = 0;
        }
        g
    }

    /// Whether a send error means "no room now, retry" (a full group table too: with a new
    /// group id per message, every queued message holds a group).
    fn is_full(e: &QError) -> bool {
        matches!(
            e,
            QError::SizeClassFull { .. }
                | QError::DedupTableFull { .. }
                | QError::GroupLimitReached { .. }
        )
    }

    /// Sends message `k` of the batch (`body`) through a loan: the payload is written into
    /// the slot it is delivered from. Returns `false` if stopped while waiting for room.
    fn send_loaned(&mut self, body: &[u8], k: usize, stop: &AtomicU32) -> Res<bool> {
        loop {
            let r = match self.q.loan(&self.names[k], body.len()) {
                Ok(mut loan) => {
                    loan.as_mut_slice().copy_from_slice(body);
                    let opts = match self.dedup {
                        Dedup::ById => LoanOptions::new().dedup_id(&self.ids[k]),
                        _ => LoanOptions::new(),
                    };
                    loan.send_with(&opts).map(|_| ()).map_err(|e| e.error)
                }
                Err(e) => Err(e),
            };
            match r {
                Ok(()) => return Ok(true),
                Err(e) if Self::is_full(&e) => {
                    if !self.backoff(stop) {
                        return Ok(false);
                    }
                }
                Err(e) => return Err(format!("loaned send: {e}")),
            }
        }
    }

    /// Sends `msgs`, all to group `names[0]`, as one loaned batch: each body written into the
    /// slot it is delivered from. Returns `false` if stopped while waiting for room.
    fn send_loaned_batch(&mut self, msgs: &[&[u8]], stop: &AtomicU32) -> Res<bool> {
        loop {
            let r = {
                let members: Vec<(usize, LoanOptions<'_>)> = msgs
                    .iter()
                    .enumerate()
                    .map(|(k, m)| {
                        let opts = match self.dedup {
                            Dedup::ById => LoanOptions::new().dedup_id(&self.ids[k]),
                            _ => LoanOptions::new(),
                        };
                        (m.len(), opts)
                    })
                    .collect();
                self.q
                    .loan_batch(&self.names[0], &members)
                    .and_then(|mut batch| {
                        for (k, m) in msgs.iter().enumerate() {
                            batch.body_mut(k).copy_from_slice(m);
                        }
                        batch.send()?.into_iter().try_for_each(|r| r.map(|_| ()))
                    })
            };
            match r {
                Ok(()) => return Ok(true),
                Err(e) if Self::is_full(&e) => {
                    if !self.backoff(stop) {
                        return Ok(false);
                    }
                }
                Err(e) => return Err(format!("loaned batch: {e}")),
            }
        }
    }

    fn backoff(&mut self, stop: &AtomicU32) -> bool {
        self.retries += 1;
        std::thread::yield_now();
        // Relaxed: a stop signal (see `Ctl::stop`).
        stop.load(Ordering::Relaxed) == 0
    }
}

/// Opens a shmfifo channel's queue with every page mapped: opened outside the window, so the
/// window measures the queue, not the first touch of a fresh arena's pages (0.5 GiB with
/// 1,000,000 groups).
fn open_prefaulted(spec: &ChanSpec) -> Res<Queue> {
    let q = Queue::open(&spec.name).map_err(|e| format!("opening queue {}: {e}", spec.name))?;
    q.prefault().map_err(|e| format!("prefault: {e}"))?;
    Ok(q)
}

/// The name of group `g`.
pub fn group_name(g: usize) -> String {
    format!("g{g}")
}

impl Tx for ShmfifoTx {
    fn send(&mut self, msgs: &[&[u8]], stop: &AtomicU32) -> Res<bool> {
        if self.dedup == Dedup::ById {
            for id in self.ids.iter_mut().take(msgs.len()) {
                self.counter += 1;
                id.clear();
                let _ = write!(id, "{:x}-{:x}", self.prefix, self.counter);
            }
        }
        for k in 0..msgs.len() {
            if self.unique {
                self.counter += 1;
                let name = &mut self.names[k];
                name.clear();
                let _ = write!(name, "n{:x}-{:x}", self.prefix, self.counter);
                continue;
            }
            let g = self.next_group();
            let name = &mut self.names[k];
            name.clear();
            let _ = write!(name, "g{g}");
        }
        fn message<'a>(t: &'a ShmfifoTx, body: &'a [u8], k: usize) -> SendMessage<'a> {
            let m = SendMessage::new(&t.names[k], ascii(body));
            if t.dedup == Dedup::ById {
                m.dedup_id(&t.ids[k])
            } else {
                m
            }
        }
        if self.zero_copy {
            // A batch to one group: one loaned batch (`Queue::loan_batch`: one slot, one
            // pack, every body written in place).
            if msgs.len() > 1
                && self.names[1..msgs.len()]
                    .iter()
                    .all(|n| *n == self.names[0])
            {
                return self.send_loaned_batch(msgs, stop);
            }
            // Otherwise one loan per message, each sent on its own.
            for (k, m) in msgs.iter().enumerate() {
                if !self.send_loaned(m, k, stop)? {
                    return Ok(false);
                }
            }
            return Ok(true);
        }
        if msgs.len() == 1 {
            loop {
                match self.q.send(&message(self, msgs[0], 0)) {
                    Ok(_) => return Ok(true),
                    Err(e) if Self::is_full(&e) => {
                        if !self.backoff(stop) {
                            return Ok(false);
                        }
                    }
                    Err(e) => return Err(format!("send: {e}")),
                }
            }
        }
        // A batch: entries that found no room are sent again, in order (later entries of the
        // same batch may have found room meanwhile; throughput runs do not check order).
        let mut left: Vec<usize> = (0..msgs.len()).collect();
        loop {
            // `send_messages`: the batch without entry ids (the consumer deletes with typed
            // handles, `delete_handles`, likewise).
            let batch: Vec<SendMessage<'_>> =
                left.iter().map(|&k| message(self, msgs[k], k)).collect();
            let results = self
                .q
                .send_messages(&batch)
                .map_err(|e| format!("send_messages: {e}"))?;
            let mut again = Vec::new();
            for (r, &k) in results.iter().zip(&left) {
                match r {
                    Ok(_) => {}
                    Err(e) if Self::is_full(e) => again.push(k),
                    Err(e) => return Err(format!("send_messages entry {k}: {e}")),
                }
            }
            if again.is_empty() {
                return Ok(true);
            }
            drop(batch);
            if !self.backoff(stop) {
                return Ok(false);
            }
            left = again;
        }
    }

    fn full_retries(&self) -> u64 {
        self.retries
    }
}

/// A shmfifo receiver: receive, hand each body to the sink, delete each.
struct ShmfifoRx {
    q: Queue,
    buf: ReceiveBuffer,
    /// Receive options by `max` (index `max - 1`).
    opts: Vec<ReceiveOptions>,
    /// Peer `shmfifo-async`: the long poll is `AsyncQueue::receive_into` on a current-thread
    /// tokio runtime (the watcher thread sleeps on the doorbell and wakes the runtime).
    asynchronous: Option<(shmfifo::AsyncQueue, tokio::runtime::Runtime)>,
    /// Peer `shmfifo-zc`: bodies read in place (`Queue::receive_borrowed_into`), then verified.
    zero_copy: bool,
}

impl ShmfifoRx {
    fn open(spec: &ChanSpec, wait: Wait) -> Res<ShmfifoRx> {
        let q = open_prefaulted(spec)?;
        let w = match wait {
            Wait::Spin => Duration::ZERO,
            Wait::Sleep => SLEEP_POLL,
        };
        Ok(ShmfifoRx {
            q,
            buf: ReceiveBuffer::new(),
            opts: (1..=10).map(|n| ReceiveOptions::max(n).wait(w)).collect(),
            asynchronous: None,
            zero_copy: spec.peer == Peer::ShmfifoZc,
        })
    }

    /// The receiver of peer `shmfifo-async` (sleeping mode only).
    fn open_async(spec: &ChanSpec) -> Res<ShmfifoRx> {
        let mut rx = Self::open(spec, Wait::Sleep)?;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .map_err(|e| format!("tokio runtime: {e}"))?;
        rx.asynchronous = Some((shmfifo::AsyncQueue::new(rx.q.clone()), rt));
        Ok(rx)
    }
}

impl Rx for ShmfifoRx {
    fn recv(&mut self, max: usize, sink: &mut dyn FnMut(&[u8])) -> Res<Got> {
        let opts = &self.opts[max.clamp(1, 10) - 1];
        if self.zero_copy {
            // Into the receiver's buffer, reused (`receive_borrowed_into`): each body read in
            // place, then verified; a batch deleted together, as the copying receiver deletes
            // one (`delete_handles`: each group cleaned up once, not once a message).
            let got = self
                .q
                .receive_borrowed_into(opts, &mut self.buf)
                .map_err(|e| format!("receive_borrowed_into: {e}"))?;
            if got.is_empty() {
                return Ok(Got::Empty);
            }
            let n = got.len();
            let mut hs = [shmfifo::ReceiptHandle::default(); 10];
            for (h, m) in hs.iter_mut().zip(got.iter()) {
                sink(m.body());
                m.verify()
                    .map_err(|e| format!("a borrowed body changed: {e}"))?;
                *h = *m.receipt_handle();
            }
            if n == 1 {
                self.q.delete(&hs[0]).map_err(|e| format!("delete: {e}"))?;
                return Ok(Got::Msgs(n));
            }
            for r in self
                .q
                .delete_handles(&hs[..n.min(10)])
                .map_err(|e| format!("delete_handles: {e}"))?
            {
                r.map_err(|e| format!("delete: {e}"))?;
            }
            return Ok(Got::Msgs(n));
        }
        let n = match &self.asynchronous {
            Some((q, rt)) => rt.block_on(q.receive_into(opts, &mut self.buf)),
            None => self.q.receive_into(opts, &mut self.buf),
        }
        .map_err(|e| format!("receive: {e}"))?;
        if n == 0 {
            return Ok(Got::Empty);
        }
        for m in self.buf.messages() {
            sink(m.body.as_bytes());
        }
        if n == 1 {
            let h = &self.buf.messages()[0].receipt_handle;
            self.q.delete(h).map_err(|e| format!("delete: {e}"))?;
        } else {
            // A batch is deleted as one (each group cleaned up once), as a batch was received.
            let mut hs = [shmfifo::ReceiptHandle::default(); 10];
            for (h, m) in hs.iter_mut().zip(self.buf.messages()) {
                *h = m.receipt_handle;
            }
            for r in self
                .q
                .delete_handles(&hs[..n.min(10)])
                .map_err(|e| format!("delete_handles: {e}"))?
            {
                r.map_err(|e| format!("delete: {e}"))?;
            }
        }
        Ok(Got::Msgs(n))
    }

    fn must_drain(&self) -> bool {
        false
    }
}

// ---------------------------------------------------------------------------------------------
// Raw shared memory: the hardware limit
// ---------------------------------------------------------------------------------------------

/// Offset of the payload in a mailbox mapping (after the sequence line).
const MAILBOX_DATA: usize = 128;

/// The head of a mailbox: a sequence number bumped once per message, alone on its line,
/// followed by the payload bytes at [`MAILBOX_DATA`].
#[repr(C)]
struct MailboxHead {
    /// Messages published. SYNC POINT: the writer copies the payload in, then stores the
    /// next value with Release; the reader loads it with Acquire and then copies the payload
    /// out. It is also the futex word of the sleeping mode.
    seq: Line<AtomicU32>,
}

/// A one-message mailbox in shared memory. The ping-pong protocol gives it one writer and
/// one reader, and the writer writes again only after the reader answered, so a payload is
/// never written while it is read.
struct Mailbox {
    map: SharedMap,
    size: usize,
}

impl Mailbox {
    fn open(spec: &ChanSpec) -> Res<Mailbox> {
        let map = SharedMap::open(&chan_path(spec))?;
        if map.len() < mailbox_len(spec.size) {
            return Err("mailbox file too short".into());
        }
        Ok(Mailbox {
            map,
            size: spec.size,
        })
    }

    fn head(&self) -> &MailboxHead {
        // SAFETY: the mapping is page-aligned and longer than MailboxHead, which is made of
        // atomics only (valid for any bytes, shared mutation through atomics only).
        unsafe { &*(self.map.ptr() as *const MailboxHead) }
    }

    fn data(&self) -> *mut u8 {
        // SAFETY: MAILBOX_DATA + size is within the mapping (checked at open).
        unsafe { self.map.ptr().add(MAILBOX_DATA) }
    }
}

/// The raw mailbox's sending end.
struct RawTx {
    mb: Mailbox,
    seq: u32,
    wake: bool,
}

impl RawTx {
    fn open(spec: &ChanSpec, wait: Wait) -> Res<RawTx> {
        let mb = Mailbox::open(spec)?;
        // Relaxed: the channel is fresh and the reader has not started.
        let seq = mb.head().seq.0.load(Ordering::Relaxed);
        Ok(RawTx {
            mb,
            seq,
            wake: wait == Wait::Sleep,
        })
    }
}

impl Tx for RawTx {
    fn send(&mut self, msgs: &[&[u8]], _stop: &AtomicU32) -> Res<bool> {
        for m in msgs {
            if m.len() != self.mb.size {
                return Err("raw mailbox: wrong payload size".into());
            }
            // SAFETY: the data area holds `size` bytes (checked at open); by the ping-pong
            // protocol (see `Mailbox`) the reader is not reading it now; `m` is a separate
            // buffer of this process.
            unsafe { std::ptr::copy_nonoverlapping(m.as_ptr(), self.mb.data(), m.len()) };
            self.seq = self.seq.wrapping_add(1);
            // Release: publishes the payload written above (see `MailboxHead::seq`).
            let w = &self.mb.head().seq.0;
            w.store(self.seq, Ordering::Release);
            // In the sleeping mode the reader is asleep on the word: always a wake (the raw
            // figure keeps no count of sleepers). Spinning readers need none.
            if self.wake {
                sys::futex_wake(w, 1);
            }
        }
        Ok(true)
    }
}

/// The raw mailbox's receiving end.
struct RawRx {
    mb: Mailbox,
    seen: u32,
    wait: Wait,
    buf: Vec<u8>,
}

impl RawRx {
    fn open(spec: &ChanSpec, wait: Wait) -> Res<RawRx> {
        let mb = Mailbox::open(spec)?;
        // Relaxed: the channel is fresh and the writer has not started.
        let seen = mb.head().seq.0.load(Ordering::Relaxed);
        Ok(RawRx {
            buf: vec![0; mb.size],
            mb,
            seen,
            wait,
        })
    }
}

impl Rx for RawRx {
    fn recv(&mut self, _max: usize, sink: &mut dyn FnMut(&[u8])) -> Res<Got> {
        let w = &self.mb.head().seq.0;
        // Acquire: see `MailboxHead::seq`.
        let mut now = w.load(Ordering::Acquire);
        if now == self.seen && self.wait == Wait::Sleep {
            sys::futex_wait(w, self.seen, SLEEP_POLL);
            // Acquire: as above.
            now = w.load(Ordering::Acquire);
        }
        if now == self.seen {
            return Ok(Got::Empty);
        }
        self.seen = now;
        // SAFETY: the Acquire load above saw the writer's Release after it wrote the
        // payload, and the writer does not write again before we answer (see `Mailbox`).
        unsafe {
            std::ptr::copy_nonoverlapping(self.mb.data(), self.buf.as_mut_ptr(), self.buf.len())
        };
        sink(&self.buf);
        Ok(Got::Msgs(1))
    }
}

// ---------------------------------------------------------------------------------------------
// crossbeam
// ---------------------------------------------------------------------------------------------

/// crossbeam sender: the payload copied into a `Vec` (the first copy), pushed.
struct CrossbeamTx {
    q: Arc<ArrayQueue<Vec<u8>>>,
    retries: u64,
}

impl Tx for CrossbeamTx {
    fn send(&mut self, msgs: &[&[u8]], stop: &AtomicU32) -> Res<bool> {
        for m in msgs {
            let mut v = m.to_vec();
            loop {
                match self.q.push(v) {
                    Ok(()) => break,
                    Err(back) => {
                        v = back;
                        self.retries += 1;
                        std::hint::spin_loop();
                        // Relaxed: a stop signal.
                        if stop.load(Ordering::Relaxed) != 0 {
                            return Ok(false);
                        }
                    }
                }
            }
        }
        Ok(true)
    }

    fn full_retries(&self) -> u64 {
        self.retries
    }
}

/// crossbeam receiver: pops the sender's `Vec` (the receiver owns it).
struct CrossbeamRx {
    q: Arc<ArrayQueue<Vec<u8>>>,
}

impl Rx for CrossbeamRx {
    fn recv(&mut self, max: usize, sink: &mut dyn FnMut(&[u8])) -> Res<Got> {
        let mut n = 0;
        while n < max {
            match self.q.pop() {
                Some(v) => {
                    sink(&v);
                    n += 1;
                }
                None => break,
            }
        }
        Ok(if n == 0 { Got::Empty } else { Got::Msgs(n) })
    }
}

// ---------------------------------------------------------------------------------------------
// Byte streams: Unix socket, pipe
// ---------------------------------------------------------------------------------------------

/// A stream sender: `writev` of the batch's payloads, one call when they fit.
struct StreamTx {
    fd: OwnedFd,
}

impl StreamTx {
    fn uds(spec: &ChanSpec) -> Res<StreamTx> {
        let path = chan_path(spec);
        // The receiver binds when it opens its end, maybe later than we get here.
        let t = sys::now_ns();
        loop {
            match UnixStream::connect(&path) {
                Ok(s) => return Ok(StreamTx { fd: s.into() }),
                Err(e) if sys::now_ns() - t < 10_000_000_000 => {
                    let _ = e;
                    std::thread::sleep(Duration::from_millis(1));
                }
                Err(e) => return Err(format!("connect {}: {e}", path.display())),
            }
        }
    }

    fn fifo(spec: &ChanSpec) -> Res<StreamTx> {
        let path = chan_path(spec);
        // Blocks until the reader has opened its end (readers open first, without waiting).
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .map_err(|e| format!("opening {} for writing: {e}", path.display()))?;
        Ok(StreamTx { fd: f.into() })
    }
}

impl Tx for StreamTx {
    fn send(&mut self, msgs: &[&[u8]], _stop: &AtomicU32) -> Res<bool> {
        sys::writev_all(self.fd.as_raw_fd(), msgs)?;
        Ok(true)
    }
}

/// A stream receiver: reads into its buffer (the second copy) and hands out whole payloads.
struct StreamRx {
    fd: Option<OwnedFd>,
    listener: Option<UnixListener>,
    wait: Wait,
    size: usize,
    buf: Vec<u8>,
    filled: usize,
    /// Some byte arrived (before that, a FIFO's end of file only means "no writer yet").
    connected: bool,
}

impl StreamRx {
    fn new(spec: &ChanSpec, wait: Wait) -> StreamRx {
        StreamRx {
            fd: None,
            listener: None,
            wait,
            size: spec.size,
            buf: vec![0; spec.size * spec.batch.max(1)],
            filled: 0,
            connected: false,
        }
    }

    fn uds(spec: &ChanSpec, wait: Wait) -> Res<StreamRx> {
        let path = chan_path(spec);
        let _ = std::fs::remove_file(&path);
        let l = UnixListener::bind(&path).map_err(|e| format!("bind {}: {e}", path.display()))?;
        let mut rx = StreamRx::new(spec, wait);
        rx.listener = Some(l);
        Ok(rx)
    }

    fn fifo(spec: &ChanSpec, wait: Wait) -> Res<StreamRx> {
        use std::os::unix::fs::OpenOptionsExt;
        let path = chan_path(spec);
        // Non-blocking open: does not wait for a writer.
        let f = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&path)
            .map_err(|e| format!("opening {} for reading: {e}", path.display()))?;
        if wait == Wait::Sleep {
            sys::set_nonblocking(f.as_raw_fd(), false)?;
        }
        let mut rx = StreamRx::new(spec, wait);
        rx.fd = Some(f.into());
        Ok(rx)
    }

    fn raw_fd(&mut self) -> Res<RawFd> {
        if self.fd.is_none() {
            let l = self.listener.take().ok_or("no socket")?;
            let (s, _) = l.accept().map_err(|e| format!("accept: {e}"))?;
            if self.wait == Wait::Spin {
                s.set_nonblocking(true)
                    .map_err(|e| format!("set_nonblocking: {e}"))?;
            }
            // SAFETY: into_raw_fd gives up the stream's ownership of a valid descriptor,
            // which the OwnedFd takes over.
            self.fd = Some(unsafe { OwnedFd::from_raw_fd(std::os::fd::IntoRawFd::into_raw_fd(s)) });
            // The listener is dropped here; the socket path is removed by the channel.
        }
        Ok(self.fd.as_ref().map(|f| f.as_raw_fd()).unwrap_or(-1))
    }
}

impl Rx for StreamRx {
    fn recv(&mut self, max: usize, sink: &mut dyn FnMut(&[u8])) -> Res<Got> {
        let fd = self.raw_fd()?;
        let want = self.size * max.clamp(1, self.buf.len() / self.size);
        loop {
            if self.filled >= self.size {
                let n = (self.filled / self.size).min(max);
                for k in 0..n {
                    sink(&self.buf[k * self.size..(k + 1) * self.size]);
                }
                let used = n * self.size;
                self.buf.copy_within(used..self.filled, 0);
                self.filled -= used;
                return Ok(Got::Msgs(n));
            }
            let end = want.max(self.filled + 1).min(self.buf.len());
            match sys::read_some(fd, &mut self.buf[self.filled..end])? {
                Some(0) if self.connected => return Ok(Got::Closed),
                Some(0) => {
                    // A FIFO with no writer yet.
                    if self.wait == Wait::Sleep {
                        std::thread::sleep(Duration::from_micros(200));
                    }
                    return Ok(Got::Empty);
                }
                Some(n) => {
                    self.connected = true;
                    self.filled += n;
                }
                None => return Ok(Got::Empty),
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// POSIX message queue
// ---------------------------------------------------------------------------------------------

/// Message-queue sender: one `mq_send` per message (there is no batch call).
struct MqTx {
    mq: Mq,
    retries: u64,
}

impl Tx for MqTx {
    fn send(&mut self, msgs: &[&[u8]], stop: &AtomicU32) -> Res<bool> {
        for m in msgs {
            while !self.mq.send(m, SLEEP_POLL)? {
                self.retries += 1;
                // Relaxed: a stop signal.
                if stop.load(Ordering::Relaxed) != 0 {
                    return Ok(false);
                }
            }
        }
        Ok(true)
    }

    fn full_retries(&self) -> u64 {
        self.retries
    }
}

/// Message-queue receiver: the first message waits (spinning: not at all), the rest of a
/// batch are taken if already there.
struct MqRx {
    mq: Mq,
    wait: Wait,
    buf: Vec<u8>,
}

impl MqRx {
    fn open(spec: &ChanSpec, wait: Wait) -> Res<MqRx> {
        let mq = Mq::open(&spec.name, false, wait == Wait::Spin)?;
        Ok(MqRx {
            buf: vec![0; mq.msgsize()],
            mq,
            wait,
        })
    }
}

impl Rx for MqRx {
    fn recv(&mut self, max: usize, sink: &mut dyn FnMut(&[u8])) -> Res<Got> {
        let mut n = 0;
        while n < max {
            let t = if n == 0 && self.wait == Wait::Sleep {
                SLEEP_POLL
            } else {
                Duration::ZERO
            };
            match self.mq.receive(&mut self.buf, t)? {
                Some(len) => {
                    sink(&self.buf[..len]);
                    n += 1;
                }
                None => break,
            }
        }
        Ok(if n == 0 { Got::Empty } else { Got::Msgs(n) })
    }
}

// ---------------------------------------------------------------------------------------------
// iceoryx2
// ---------------------------------------------------------------------------------------------

#[cfg(feature = "iceoryx2")]
mod iox {
    //! iceoryx2 publish-subscribe of `[u8]` slices: one service per channel, made by the
    //! harness with no overflow (a full subscriber buffer makes the publisher retry, as a
    //! full queue does elsewhere) and no history.

    use super::{ChanSpec, Got, Res, Rx, Tx};
    use iceoryx2::port::publisher::Publisher;
    use iceoryx2::port::subscriber::Subscriber;
    use iceoryx2::prelude::*;
    use iceoryx2::service::port_factory::publish_subscribe::PortFactory;
    use std::sync::atomic::AtomicU32;

    /// Samples a subscriber buffers: about 16 MiB of payloads, 16 to 1,024.
    fn depth(size: usize) -> usize {
        ((16 << 20) / size.max(1)).clamp(16, 1024)
    }

    fn node() -> Res<Node<ipc::Service>> {
        set_log_level(LogLevel::Error);
        NodeBuilder::new()
            .signal_handling_mode(SignalHandlingMode::Disabled)
            .create::<ipc::Service>()
            .map_err(|e| format!("iceoryx2 node: {e:?}"))
    }

    fn service_name(spec: &ChanSpec) -> Res<ServiceName> {
        ServiceName::new(&spec.name).map_err(|e| format!("iceoryx2 service name: {e:?}"))
    }

    /// A node and the channel's service, opened.
    type Opened = (Node<ipc::Service>, PortFactory<ipc::Service, [u8], ()>);

    fn open_service(spec: &ChanSpec) -> Res<Opened> {
        let node = node()?;
        let svc = node
            .service_builder(&service_name(spec)?)
            .publish_subscribe::<[u8]>()
            .open()
            .map_err(|e| format!("iceoryx2 open service: {e:?}"))?;
        Ok((node, svc))
    }

    /// The service, kept by the harness while the case runs.
    pub struct Service {
        _svc: PortFactory<ipc::Service, [u8], ()>,
        _node: Node<ipc::Service>,
    }

    impl Service {
        /// Creates the channel's service (the harness, before the peers open it).
        pub fn create(spec: &ChanSpec) -> Res<Service> {
            let node = node()?;
            let svc = node
                .service_builder(&service_name(spec)?)
                .publish_subscribe::<[u8]>()
                .max_publishers(1)
                .max_subscribers(1)
                .history_size(0)
                .subscriber_max_buffer_size(depth(spec.size))
                .enable_safe_overflow(false)
                .create()
                .map_err(|e| format!("iceoryx2 create service: {e:?}"))?;
            Ok(Service {
                _svc: svc,
                _node: node,
            })
        }
    }

    /// Publisher: loan a slice, copy the payload in (the first copy), send. A batch is one
    /// sample of the batch's payloads back to back (as the pipe sends one `writev`), so that
    /// a batch costs iceoryx2 one loan and one send, as it would in a program that batches.
    pub struct IoxTx {
        publisher: Publisher<ipc::Service, [u8], ()>,
        _svc: PortFactory<ipc::Service, [u8], ()>,
        _node: Node<ipc::Service>,
    }

    impl IoxTx {
        /// Opens the service and makes its publisher.
        pub fn open(spec: &ChanSpec) -> Res<IoxTx> {
            let (node, svc) = open_service(spec)?;
            let publisher = svc
                .publisher_builder()
                .initial_max_slice_len(spec.size * spec.batch.max(1))
                .backpressure_strategy(BackpressureStrategy::RetryUntilDelivered)
                .create()
                .map_err(|e| format!("iceoryx2 publisher: {e:?}"))?;
            Ok(IoxTx {
                publisher,
                _svc: svc,
                _node: node,
            })
        }
    }

    impl Tx for IoxTx {
        fn send(&mut self, msgs: &[&[u8]], _stop: &AtomicU32) -> Res<bool> {
            if let [m] = msgs {
                let s = self
                    .publisher
                    .loan_slice_uninit(m.len())
                    .map_err(|e| format!("iceoryx2 loan: {e:?}"))?;
                s.write_from_slice(m)
                    .send()
                    .map_err(|e| format!("iceoryx2 send: {e:?}"))?;
                return Ok(true);
            }
            let total = msgs.iter().map(|m| m.len()).sum();
            let mut s = self
                .publisher
                .loan_slice_uninit(total)
                .map_err(|e| format!("iceoryx2 loan: {e:?}"))?;
            let mut at = 0;
            for m in msgs {
                for (d, &b) in s.payload_mut()[at..at + m.len()].iter_mut().zip(m.iter()) {
                    d.write(b);
                }
                at += m.len();
            }
            // SAFETY: every byte of the `total`-byte slice was written just above.
            let s = unsafe { s.assume_init() };
            s.send().map_err(|e| format!("iceoryx2 send: {e:?}"))?;
            Ok(true)
        }
    }

    /// Subscriber: copies each sample out (the second copy) and releases it, or (peer
    /// `iceoryx2-zc`) hands it to the sink in place; a sample of a batch is handed over as its
    /// `size`-byte payloads.
    pub struct IoxRx {
        subscriber: Subscriber<ipc::Service, [u8], ()>,
        buf: Vec<u8>,
        size: usize,
        /// Peer `iceoryx2-zc`: the sample's payload handed to the sink in place.
        in_place: bool,
        _svc: PortFactory<ipc::Service, [u8], ()>,
        _node: Node<ipc::Service>,
    }

    impl IoxRx {
        /// Opens the service and makes its subscriber.
        pub fn open(spec: &ChanSpec) -> Res<IoxRx> {
            let (node, svc) = open_service(spec)?;
            let subscriber = svc
                .subscriber_builder()
                .buffer_size(depth(spec.size))
                .create()
                .map_err(|e| format!("iceoryx2 subscriber: {e:?}"))?;
            Ok(IoxRx {
                subscriber,
                buf: Vec::with_capacity(spec.size * spec.batch.max(1)),
                size: spec.size.max(1),
                in_place: spec.peer == super::Peer::Iceoryx2Zc,
                _svc: svc,
                _node: node,
            })
        }
    }

    impl Rx for IoxRx {
        fn recv(&mut self, max: usize, sink: &mut dyn FnMut(&[u8])) -> Res<Got> {
            let mut n = 0;
            while n < max {
                match self
                    .subscriber
                    .receive()
                    .map_err(|e| format!("iceoryx2 receive: {e:?}"))?
                {
                    Some(s) if self.in_place => {
                        for m in s.payload().chunks(self.size) {
                            sink(m);
                            n += 1;
                        }
                    }
                    Some(s) => {
                        self.buf.clear();
                        self.buf.extend_from_slice(s.payload());
                        drop(s);
                        for m in self.buf.chunks(self.size) {
                            sink(m);
                            n += 1;
                        }
                    }
                    None => break,
                }
            }
            Ok(if n == 0 { Got::Empty } else { Got::Msgs(n) })
        }
    }
}
