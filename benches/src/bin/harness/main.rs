//! # shmfifo-harness
//!
//! Runs shmfifo and its peers in one invocation, with the same payloads, copies and process
//! layout, and prints one Markdown table, the issue's targets as ratios against the peers
//! measured in the same run, and writes `harness.md`, `harness.csv` (every run) and
//! `harness.svg` (a chart) to `--out`.
//!
//! Peers: the hardware limit (a cache-line ping-pong over shared memory and a futex wake
//! round trip, both between two processes), crossbeam's `ArrayQueue` between two threads (the
//! in-process bound), a Unix domain socket, a pipe and a POSIX message queue between two
//! processes, iceoryx2 publish-subscribe between two processes (cargo feature `iceoryx2`, on
//! by default).
//!
//! Scenarios:
//! * one-way latency = half the round trip of a ping-pong between the harness and an echo
//!   process (p50, p99, p99.9 from an HdrHistogram), receivers spinning, and receivers asleep
//!   in the kernel (the harness idles 100 µs before each ping, so the echo is asleep when its
//!   message comes; shmfifo long-polls and sleeps on its futex);
//! * throughput from one producer process to one consumer process, one message per call and
//!   ten (shmfifo `send_messages` / receive 10, `writev` of ten for streams);
//! * shmfifo with deduplication off, by id and content-based;
//! * shmfifo N producer × M consumer processes over 1, 1,000 and 1,000,000 groups;
//! * shmfifo 1 → 1 single ops with one group against a new group id per message (the table
//!   cycled through many times over in each window);
//! * shmfifo ping-pong latency with a 1,000,000-message backlog in another group whose head
//!   is in flight, against the same queue geometry without it;
//! * shmfifo draining a visible backlog of 1,000,000 messages (none in flight: the consumer
//!   walks every one) in one group and over 1,000 groups, receive 10 + `delete_handles`, in
//!   one process (the backlog's sending is timed apart);
//! * arena bytes per message, measured from the arena sizes of two geometries.
//!
//! shmfifo's producers send a batch's messages to one group as one pack, the library's default;
//! with `SHMFIFO_HARNESS_PACKS=0` in the environment, one slot a message (to compare the two,
//! alternating runs).
//!
//! Every case runs `--repeats` times (3), interleaved with the others; the table gives the
//! median and, in brackets, the smallest and largest run. Nothing asserts on time: targets are
//! printed MET or MISSED. The exit status is 1 only when a shmfifo case failed to run.
//!
//! ```text
//! cargo run --release -p shmfifo-benches --bin shmfifo-harness -- --quick   # < 1 min
//! cargo run --release -p shmfifo-benches --bin shmfifo-harness             # full run
//! ```

mod ctl;
mod leftovers;
mod report;
mod scenarios;
mod sys;
mod transport;
mod workers;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::builder::TypedValueParser as _;
use clap::Parser;

use report::{Key, Lat, Outcome, Record, Section, NO_BACKLOG};
use scenarios::{Ctx, LatencyRun, PingPongSettings, TputSettings};
use transport::{Dedup, Peer, Wait};

/// Command line.
#[derive(Parser, Debug)]
#[command(
    name = "shmfifo-harness",
    about = "shmfifo against its peers and the hardware limit: one Markdown table, CSV, SVG"
)]
struct Args {
    /// Short run (under a minute on 2 cores): 1 repeat, 64-byte payloads, fewer round trips
    /// and shorter windows; the groups and backlog cases keep their sizes (1,000,000 groups:
    /// a 1.1 GB arena in /dev/shm).
    #[arg(long)]
    quick: bool,
    /// Runs of each case, interleaved, at least 1 [default: 3; quick: 1].
    #[arg(long, value_parser = at_least_one.map(|n| n as usize))]
    repeats: Option<usize>,
    /// Directory for harness.md, harness.csv and harness.svg.
    #[arg(long, default_value = "target/harness")]
    out: PathBuf,
    /// Scenarios, comma-separated: latency, sleep, throughput, dedup, groups, groupids,
    /// backlog, drain, memory
    /// [default: all].
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Peers besides shmfifo, comma-separated: raw (the hardware's limits: a cache-line
    /// ping-pong spinning, a futex wake asleep, a memcpy), shmfifo-zc, shmfifo-async,
    /// iceoryx2, iceoryx2-zc, crossbeam, uds, pipe, mq
    /// [default: all].
    #[arg(long, value_delimiter = ',')]
    peers: Vec<String>,
    /// Payload sizes in bytes, up to 1 MiB [default: 8,64,1024,65536,1048576; quick: 64].
    #[arg(long, value_delimiter = ',')]
    sizes: Vec<usize>,
    /// Group counts of the groups scenario, each at least 1 [default: 1,1000,1000000].
    #[arg(long, value_delimiter = ',', value_parser = clap::value_parser!(u32).range(1..))]
    groups: Vec<u32>,
    /// Producer processes of the groups scenario, 1 to 8.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u64).range(1..=8).map(|n| n as usize))]
    producers: usize,
    /// Consumer processes of the groups scenario, 1 to 8.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u64).range(1..=8).map(|n| n as usize))]
    consumers: usize,
    /// Messages in the backlog and drain scenarios' backlogs, at least 1 [default: 1000000].
    #[arg(long, value_parser = at_least_one)]
    backlog: Option<u64>,
    /// Spinning round trips timed per run, at least 1 [default: 100000; quick: 5000].
    #[arg(long, value_parser = at_least_one)]
    rounds: Option<u64>,
    /// Sleeping round trips timed per run, at least 1 [default: 10000; quick: 1000].
    #[arg(long, value_parser = at_least_one)]
    sleep_rounds: Option<u64>,
    /// Throughput window per run, ms, at least 1 [default: 1000; quick: 100].
    #[arg(long, value_parser = at_least_one)]
    window_ms: Option<u64>,
}

/// A count of at least 1 (a count of 0 ran nothing: `--rounds 0` hung at the chart of
/// zeros).
fn at_least_one(s: &str) -> Result<u64, String> {
    match s.parse::<u64>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(format!("{e}")),
    }
}

/// One case of the plan.
#[derive(Debug, Clone, Copy)]
enum Case {
    /// Ping-pong of `peer`.
    Lat { peer: Peer, size: usize, wait: Wait },
    /// 1 → 1 throughput of `peer`.
    Tput {
        peer: Peer,
        size: usize,
        batch: usize,
    },
    /// 1 → 1 shmfifo throughput, 64 B, with deduplication.
    Dedup { dedup: Dedup, batch: usize },
    /// shmfifo producers × consumers over `groups`.
    Groups { groups: u32 },
    /// shmfifo 1 → 1, single ops, one group or a new group id per message.
    GroupIds { unique: bool },
    /// shmfifo ping-pong beside a backlog (or not).
    Backlog { loaded: bool },
    /// shmfifo: one consumer drains a visible backlog spread over `groups`.
    Drain { groups: u32 },
}

/// Settings of the whole run.
#[derive(Debug)]
struct Plan {
    repeats: usize,
    spin: PingPongSettings,
    sleep: PingPongSettings,
    tput: TputSettings,
    producers: usize,
    consumers: usize,
    backlog: u64,
    memory: bool,
}

/// `1,000,000`.
// `is_multiple_of` is newer than the workspace's rust-version.
#[allow(clippy::manual_is_multiple_of)]
fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn groups_variant(p: usize, c: usize, g: u32) -> String {
    format!(
        "{p} × {c}, {} group{}",
        thousands(u64::from(g)),
        if g == 1 { "" } else { "s" }
    )
}

fn dedup_variant(d: Dedup, batch: usize) -> String {
    let d = match d {
        Dedup::Off => "dedup off",
        Dedup::ById => "dedup by id",
        Dedup::Content => "content-based dedup",
    };
    if batch == 1 {
        format!("{d}, single ops")
    } else {
        format!("{d}, batches of {batch}")
    }
}

fn backlog_variant(loaded: bool, n: u64) -> String {
    if loaded {
        format!(
            "{} messages in another group (its head in flight)",
            thousands(n)
        )
    } else {
        NO_BACKLOG.to_owned()
    }
}

impl Case {
    fn key(&self, plan: &Plan) -> Key {
        let (section, peer, payload, variant) = match *self {
            Case::Lat { peer, size, wait } => (
                if wait == Wait::Spin {
                    Section::LatSpin
                } else {
                    Section::LatSleep
                },
                peer,
                size,
                String::new(),
            ),
            Case::Tput { peer, size, batch } => (
                if batch == 1 {
                    Section::TputSingle
                } else {
                    Section::TputBatch
                },
                peer,
                size,
                String::new(),
            ),
            Case::Dedup { dedup, batch } => (
                Section::Dedup,
                Peer::Shmfifo,
                64,
                dedup_variant(dedup, batch),
            ),
            Case::Groups { groups } => (
                Section::Groups,
                Peer::Shmfifo,
                64,
                groups_variant(plan.producers, plan.consumers, groups),
            ),
            Case::GroupIds { unique } => (
                Section::GroupIds,
                Peer::Shmfifo,
                64,
                if unique {
                    report::NEW_GROUP_EACH
                } else {
                    report::ONE_GROUP
                }
                .to_owned(),
            ),
            Case::Backlog { loaded } => (
                Section::Backlog,
                Peer::Shmfifo,
                64,
                backlog_variant(loaded, plan.backlog),
            ),
            Case::Drain { groups } => (
                Section::Drain,
                Peer::Shmfifo,
                64,
                format!(
                    "{} messages in {} group{}, none in flight",
                    thousands(plan.backlog),
                    thousands(u64::from(groups)),
                    if groups == 1 { "" } else { "s" }
                ),
            ),
        };
        Key {
            section,
            peer,
            payload,
            variant,
        }
    }
}

fn lat(r: &LatencyRun) -> Lat {
    // One way: half the round trip.
    let q = |p: f64| r.rt.value_at_quantile(p) as f64 / 2.0;
    Lat {
        p50: q(0.50),
        p99: q(0.99),
        p999: q(0.999),
        mean: r.rt.mean() / 2.0,
        samples: r.rt.len(),
        switches: r.switches,
    }
}

/// The progress line of a throughput run.
fn tput_line(t: &scenarios::TputRun) -> String {
    format!(
        "{} (sent {}, received {}, {} full retries)",
        report::per_s(t.rate),
        report::per_s(t.sent),
        report::per_s(t.received),
        t.full_retries
    )
}

/// Runs one case once; a short line for the progress log.
fn run_case(ctx: &mut Ctx, case: &Case, plan: &Plan) -> (Outcome, String) {
    let r: Result<(Outcome, String), String> = (|| match *case {
        Case::Lat { peer, size, wait } => {
            let s = if wait == Wait::Spin {
                plan.spin
            } else {
                plan.sleep
            };
            let l = lat(&scenarios::pingpong(ctx, peer, size, wait, s, None)?);
            let sw = l.switches.map_or(String::new(), |(a, b)| {
                format!(
                    ", context switches per round trip {:.2}+{:.2} / {:.2}+{:.2}",
                    a.0, a.1, b.0, b.1
                )
            });
            let line = format!(
                "p50 {} p99 {} p99.9 {} ({} round trips{sw})",
                report::us(l.p50),
                report::us(l.p99),
                report::us(l.p999),
                l.samples
            );
            Ok((Outcome::Lat(l), line))
        }
        Case::Tput { peer, size, batch } => {
            let t = scenarios::one_to_one(ctx, peer, size, batch, Dedup::Off, plan.tput)?;
            let line = tput_line(&t);
            Ok((Outcome::Tput(t), line))
        }
        Case::Dedup { dedup, batch } => {
            let t = scenarios::one_to_one(ctx, Peer::Shmfifo, 64, batch, dedup, plan.tput)?;
            let line = format!(
                "{} ({} full retries)",
                report::per_s(t.rate),
                t.full_retries
            );
            Ok((Outcome::Tput(t), line))
        }
        Case::Groups { groups } => {
            let (t, setup) =
                scenarios::groups(ctx, groups, plan.producers, plan.consumers, plan.tput)?;
            let line = format!(
                "{} (sent {}, received {}; set up and prefilled in {setup:.1} s)",
                report::per_s(t.rate),
                report::per_s(t.sent),
                report::per_s(t.received)
            );
            Ok((Outcome::Tput(t), line))
        }
        Case::GroupIds { unique } => {
            let t = scenarios::group_ids(ctx, unique, plan.tput)?;
            let line = tput_line(&t);
            Ok((Outcome::Tput(t), line))
        }
        Case::Backlog { loaded } => {
            let (r, setup) = scenarios::backlog(ctx, loaded, plan.backlog, plan.spin)?;
            let l = lat(&r);
            let extra = if setup > 0.0 {
                format!(" (backlog queues made in {setup:.1} s)")
            } else {
                String::new()
            };
            let line = format!("p50 {} p99 {}{extra}", report::us(l.p50), report::us(l.p99));
            Ok((Outcome::Lat(l), line))
        }
        Case::Drain { groups } => {
            let (t, setup) = scenarios::drain(groups, plan.backlog)?;
            let line = format!("{} (backlog sent in {setup:.1} s)", report::per_s(t.rate));
            Ok((Outcome::Tput(t), line))
        }
    })();
    r.unwrap_or_else(|e| (Outcome::Failed(e.clone()), format!("FAILED: {e}")))
}

/// The machine, in words: CPU model, cores, kernel.
fn machine() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .and_then(|l| l.split(':').nth(1))
        .map_or("unknown CPU".to_owned(), |m| m.trim().to_owned());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let virt = if cpuinfo.contains(" hypervisor") {
        ", virtual machine"
    } else {
        ""
    };
    format!(
        "{model}, {cores} CPUs{virt}, Linux {}, {} build",
        kernel.trim(),
        if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        }
    )
}

fn main() {
    if let Ok(job) = std::env::var(workers::CHILD_ENV) {
        workers::child_main(&job);
    }
    let args = Args::parse();
    leftovers::remove_dead_runs();
    leftovers::remove_on_signal();
    match run(args) {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("shmfifo-harness: {e}");
            std::process::exit(2);
        }
    }
}

/// The 1-minute load average, from `/proc/loadavg`.
fn load_average() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

fn run(args: Args) -> Result<i32, String> {
    let started = Instant::now();
    let load_before = load_average();
    if load_before.is_some_and(|l| l > 0.5) {
        eprintln!(
            "shmfifo-harness: the machine is busy (load average {:.2}): figures will be noisy",
            load_before.unwrap_or(0.0)
        );
    }
    let quick = args.quick;
    let pick = |v: Option<u64>, full: u64, q: u64| v.unwrap_or(if quick { q } else { full });
    let repeats = args.repeats.unwrap_or(if quick { 1 } else { 3 }).max(1);
    let sizes = if !args.sizes.is_empty() {
        args.sizes.clone()
    } else if quick {
        vec![64]
    } else {
        vec![8, 64, 1024, 65_536, 1_048_576]
    };
    if let Some(s) = sizes.iter().find(|&&s| s == 0 || s > 1_048_576) {
        return Err(format!("payload size {s}: 1 to 1,048,576 bytes"));
    }
    let group_counts = if args.groups.is_empty() {
        vec![1, 1_000, 1_000_000]
    } else {
        args.groups.clone()
    };
    let scenarios_all = [
        "latency",
        "sleep",
        "throughput",
        "dedup",
        "groups",
        "groupids",
        "backlog",
        "drain",
        "memory",
    ];
    for s in &args.only {
        if !scenarios_all.contains(&s.as_str()) {
            return Err(format!("unknown scenario {s} (one of {scenarios_all:?})"));
        }
    }
    let want = |s: &str| args.only.is_empty() || args.only.iter().any(|o| o == s);
    let mut peers = vec![Peer::Shmfifo];
    if args.peers.is_empty() {
        peers.extend(Peer::ALL.into_iter().filter(|&p| p != Peer::Shmfifo));
    } else {
        for p in &args.peers {
            let peer = Peer::parse(p).ok_or_else(|| {
                let keys: Vec<&str> = Peer::ALL
                    .into_iter()
                    .filter(|&p| p != Peer::Shmfifo)
                    .map(Peer::key)
                    .collect();
                format!("unknown peer {p} (one of {keys:?})")
            })?;
            if !peers.contains(&peer) {
                peers.push(peer);
            }
        }
    }
    peers.sort();
    let spin_rounds = pick(args.rounds, 100_000, 5_000);
    let plan = Plan {
        repeats,
        spin: PingPongSettings {
            rounds: spin_rounds,
            warmup: (spin_rounds / 10).clamp(100, 5_000),
            cap: Duration::from_secs(if quick { 1 } else { 3 }),
            gap: None,
        },
        sleep: PingPongSettings {
            rounds: pick(args.sleep_rounds, 10_000, 1_000),
            warmup: 200,
            cap: Duration::from_secs(if quick { 1 } else { 5 }),
            gap: Some(Duration::from_micros(100)),
        },
        tput: TputSettings {
            warmup: Duration::from_millis(if quick { 30 } else { 100 }),
            window: Duration::from_millis(pick(args.window_ms, 1_000, 100)),
        },
        producers: args.producers.clamp(1, 8),
        consumers: args.consumers.clamp(1, 8),
        backlog: pick(args.backlog, 1_000_000, 1_000_000),
        memory: want("memory"),
    };

    // The plan: every case, and the cases a peer cannot run (with the reason).
    let mut cases = Vec::new();
    let mut skipped = Vec::new();
    let mut add = |case: Case, why: Option<String>, plan: &Plan| match why {
        Some(w) => skipped.push((case.key(plan), w)),
        None => cases.push(case),
    };
    for (scenario, wait) in [("latency", Wait::Spin), ("sleep", Wait::Sleep)] {
        if !want(scenario) {
            continue;
        }
        for &size in &sizes {
            if wait == Wait::Sleep && size != 64 && sizes.contains(&64) {
                continue;
            }
            for &peer in &peers {
                let why = peer.unsupported(size, wait, false);
                // The raw peer's spinning figure is the cache line, its sleeping one the futex.
                add(Case::Lat { peer, size, wait }, why, &plan);
            }
        }
    }
    if want("throughput") {
        for batch in [1, 10] {
            for &size in &sizes {
                // The raw mailbox holds one message: a latency figure only (said in the header).
                for &peer in peers.iter().filter(|&&p| p != Peer::Raw) {
                    let why = peer
                        .unsupported(size, transport_wait(peer), true)
                        .or_else(|| {
                            (matches!(peer, Peer::Shmfifo | Peer::ShmfifoAsync)
                                && size * batch > 1_048_576)
                                .then(|| {
                                    "a SendMessageBatch carries at most 1 MiB in all (S13)"
                                        .to_owned()
                                })
                        });
                    add(Case::Tput { peer, size, batch }, why, &plan);
                }
            }
        }
    }
    if want("dedup") {
        for batch in [1, 10] {
            for dedup in [Dedup::Off, Dedup::ById, Dedup::Content] {
                add(Case::Dedup { dedup, batch }, None, &plan);
            }
        }
    }
    if want("groups") {
        for &groups in &group_counts {
            add(Case::Groups { groups }, None, &plan);
        }
    }
    if want("groupids") {
        for unique in [false, true] {
            add(Case::GroupIds { unique }, None, &plan);
        }
    }
    if want("backlog") {
        for loaded in [false, true] {
            add(Case::Backlog { loaded }, None, &plan);
        }
    }
    if want("drain") {
        for groups in [1, 1_000] {
            add(Case::Drain { groups }, None, &plan);
        }
    }

    std::fs::create_dir_all(&args.out)
        .map_err(|e| format!("creating {}: {e}", args.out.display()))?;
    let mut ctx = Ctx::new()?;
    eprintln!(
        "shmfifo-harness: {} cases × {} runs, interleaved ({} mode); {} not measurable here",
        cases.len(),
        plan.repeats,
        if quick { "quick" } else { "full" },
        skipped.len()
    );
    let mut records = Vec::new();
    for run in 1..=plan.repeats {
        for (i, case) in cases.iter().enumerate() {
            let key = case.key(&plan);
            let t = Instant::now();
            let (outcome, line) = run_case(&mut ctx, case, &plan);
            eprintln!(
                "[run {run}/{}, case {}/{}] {} | {} | {}{}: {line} [{:.1} s]",
                plan.repeats,
                i + 1,
                cases.len(),
                key.section.title(),
                report::bytes(key.payload),
                key.peer_label(),
                if key.variant.is_empty() {
                    String::new()
                } else {
                    format!(" | {}", key.variant)
                },
                t.elapsed().as_secs_f64()
            );
            records.push(Record { key, run, outcome });
        }
    }
    scenarios::drop_fixtures(&mut ctx);
    let mem = if plan.memory {
        match scenarios::memory() {
            Ok(m) => Some(m),
            Err(e) => {
                eprintln!("memory figures: {e}");
                None
            }
        }
    } else {
        None
    };

    let rows = report::rows(&records, &skipped);
    let biggest = group_counts
        .iter()
        .copied()
        .filter(|&g| g > 1_000)
        .max()
        .unwrap_or(1_000_000);
    let big = groups_variant(plan.producers, plan.consumers, biggest);
    let small = groups_variant(plan.producers, plan.consumers, 1_000);
    let verdicts = report::targets(&records, &rows, mem.as_ref(), (&big, &small));
    let elapsed = started.elapsed().as_secs_f64();

    let mut md = String::new();
    let load = |l: Option<f64>| l.map_or("?".to_owned(), |l| format!("{l:.2}"));
    md.push_str(&format!(
        "Machine: {}. Mode: {} ({} run{} of each case, interleaved; medians, with the \
         smallest and largest run in brackets). Wall time {:.0} s; 1-minute load average {} \
         before, {} after (the harness itself adds up to 2).\n\n",
        machine(),
        if quick { "quick" } else { "full" },
        plan.repeats,
        if plan.repeats == 1 { "" } else { "s" },
        elapsed,
        load(load_before),
        load(load_average()),
    ));
    md.push_str(
        "One-way latency is half the round trip of a ping-pong with an echo process. The \
         hardware limit (a one-message mailbox in shared memory) is a latency figure only. \
         Throughput is the lower of the producers' and the consumers' rates in the window.\n\n",
    );
    md.push_str(&report::table(&rows));
    // Only beside large sizes measured (it was printed for `--only memory`, which copies
    // nothing).
    let big: Vec<usize> = sizes.iter().copied().filter(|&s| s >= 65_536).collect();
    if !big.is_empty() && (want("latency") || want("throughput")) {
        md.push_str(&format!(
            "\nmemcpy on this machine (one copy between two hot buffers in one process, the \
             median of many): {}. The copying form copies each body twice (into the slot, out \
             of it), the zero-copy form writes it into the slot once and reads it there.\n",
            big.iter()
                .map(|&s| {
                    let ns = memcpy_ns(s);
                    format!(
                        "{} in {} ({:.1} GB/s)",
                        report::bytes(s),
                        report::us(ns),
                        s as f64 / ns
                    )
                })
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if let Some(m) = &mem {
        md.push_str(&format!(
            "\nMemory: {:.0} arena bytes per slot of the 192-byte class ({:.0} B header + \
             192 B payload capacity; a body is stored in the smallest class that holds it with \
             its dedup id and attributes, classes growing ×4); with deduplication, {:.0} B per \
             dedup table entry (one per id within the interval).\n",
            m.per_slot_192, m.header, m.per_dedup_entry
        ));
    }
    md.push_str(&format!(
        "\nTargets (each ratio the median over repeats of the two figures measured in the same \
         repeat, beside the medians; the cache-line ping-pong per repeat: {}):\n\n",
        report::cache_line_per_repeat(&records)
            .iter()
            .map(|&ns| report::us(ns))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    md.push_str(&report::targets_table(&verdicts));
    println!("{md}");

    let csv_path = args.out.join("harness.csv");
    std::fs::write(&csv_path, report::csv(&records))
        .map_err(|e| format!("writing {}: {e}", csv_path.display()))?;
    let md_path = args.out.join("harness.md");
    std::fs::write(&md_path, &md).map_err(|e| format!("writing {}: {e}", md_path.display()))?;
    let svg_path = args.out.join("harness.svg");
    let subtitle = format!(
        "{}; {} mode, {} run{} per case",
        machine(),
        if quick { "quick" } else { "full" },
        plan.repeats,
        if plan.repeats == 1 { "" } else { "s" }
    );
    if let Err(e) = report::svg(&rows, &svg_path, &subtitle) {
        eprintln!("chart: {e}");
    }
    eprintln!(
        "shmfifo-harness: wrote {}, {}, {} in {elapsed:.0} s",
        md_path.display(),
        csv_path.display(),
        svg_path.display()
    );
    let failed_ours = records.iter().any(|r| {
        matches!(r.key.peer, Peer::Shmfifo | Peer::ShmfifoZc)
            && matches!(r.outcome, Outcome::Failed(_))
    });
    Ok(if failed_ours { 1 } else { 0 })
}

/// The median time of one `size`-byte memcpy between two hot buffers, ns: the limit of the
/// copying forms at large sizes.
fn memcpy_ns(size: usize) -> f64 {
    let src = vec![7u8; size];
    let mut dst = vec![0u8; size];
    let mut times = Vec::new();
    let end = Instant::now() + Duration::from_millis(200);
    while Instant::now() < end || times.len() < 11 {
        let t = Instant::now();
        dst.copy_from_slice(std::hint::black_box(&src));
        std::hint::black_box(&mut dst);
        times.push(t.elapsed().as_nanos() as f64);
    }
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

/// How throughput receivers of `peer` wait (for the "can it run" check).
fn transport_wait(peer: Peer) -> Wait {
    scenarios::receiver_wait(peer)
}
