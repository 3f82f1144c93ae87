//! Results: the spread over repeats, the Markdown table, the targets as ratios, CSV, the SVG
//! chart.

use std::fmt::Write as _;
use std::path::Path;

use crate::scenarios::{MemoryFigures, TputRun};
use crate::transport::{Peer, Wait};

/// The table's sections, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Section {
    /// Ping-pong, receiver polling.
    LatSpin,
    /// Ping-pong, receiver asleep in the kernel.
    LatSleep,
    /// One producer process → one consumer process, one message per call.
    TputSingle,
    /// The same, ten messages per call.
    TputBatch,
    /// shmfifo 1 → 1 with deduplication.
    Dedup,
    /// shmfifo producers × consumers over many groups.
    Groups,
    /// shmfifo 1 → 1, single ops: one group, or a new group id per message.
    GroupIds,
    /// shmfifo ping-pong beside a backlog.
    Backlog,
    /// shmfifo: one consumer walking a visible backlog to its end.
    Drain,
}

impl Section {
    /// Title in the table.
    pub fn title(self) -> &'static str {
        match self {
            Section::LatSpin => "one-way latency, receiver spinning",
            Section::LatSleep => "one-way latency, receiver asleep",
            Section::TputSingle => "throughput 1 → 1 process, single ops",
            Section::TputBatch => "throughput 1 → 1 process, batches of 10",
            Section::Dedup => "shmfifo throughput 1 → 1 by deduplication",
            Section::Groups => "shmfifo throughput, producers × consumers, batches of 10",
            Section::GroupIds => "shmfifo throughput 1 → 1, single ops, by group id",
            Section::Backlog => "shmfifo one-way latency (spinning) of a group beside a backlog",
            Section::Drain => {
                "shmfifo draining a visible backlog (one process: receive 10 + delete_handles)"
            }
        }
    }

    /// How the peer waits in this section (names the raw peer).
    pub fn wait(self) -> Wait {
        match self {
            Section::LatSleep => Wait::Sleep,
            _ => Wait::Spin,
        }
    }

    /// Short name for the CSV.
    pub fn key(self) -> &'static str {
        match self {
            Section::LatSpin => "latency_spin",
            Section::LatSleep => "latency_sleep",
            Section::TputSingle => "throughput_single",
            Section::TputBatch => "throughput_batch10",
            Section::Dedup => "dedup_throughput",
            Section::Groups => "groups_throughput",
            Section::GroupIds => "group_ids_throughput",
            Section::Backlog => "backlog_latency",
            Section::Drain => "drain_throughput",
        }
    }
}

/// Identifies a case across repeats.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key {
    /// Section.
    pub section: Section,
    /// Peer.
    pub peer: Peer,
    /// Payload bytes.
    pub payload: usize,
    /// What else distinguishes the case (groups, dedup mode, backlog), or empty.
    pub variant: String,
}

impl Key {
    /// The peer's name in this section.
    pub fn peer_label(&self) -> &'static str {
        self.peer.label(self.section.wait())
    }
}

/// Latency figures of one run, one-way (half the round trip), ns.
#[derive(Debug, Clone, Copy)]
pub struct Lat {
    /// Median.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
    /// Mean.
    pub mean: f64,
    /// Round trips timed.
    pub samples: u64,
    /// Context switches per round trip, `(voluntary, involuntary)`, harness and echo.
    pub switches: Option<((f64, f64), (f64, f64))>,
}

/// What one run of a case gave.
#[derive(Debug, Clone)]
pub enum Outcome {
    /// A ping-pong.
    Lat(Lat),
    /// A throughput run.
    Tput(TputRun),
    /// It failed.
    Failed(String),
}

/// One run of one case.
#[derive(Debug, Clone)]
pub struct Record {
    /// The case.
    pub key: Key,
    /// Repeat number, from 1.
    pub run: usize,
    /// Its figures.
    pub outcome: Outcome,
}

/// A case's runs, summarised.
#[derive(Debug, Clone)]
pub struct Row {
    /// The case.
    pub key: Key,
    /// Latency p50 over runs (median, min, max), medians of p99 and p99.9.
    pub lat: Option<(Spread, f64, f64)>,
    /// Throughput over runs.
    pub tput: Option<Spread>,
    /// Why the case was not run, or its failures.
    pub note: String,
}

/// Median, minimum and maximum of a figure over runs.
#[derive(Debug, Clone, Copy)]
pub struct Spread {
    /// Median (of an even count: the mean of the middle two).
    pub median: f64,
    /// Smallest.
    pub min: f64,
    /// Largest.
    pub max: f64,
}

impl Spread {
    fn of(mut v: Vec<f64>) -> Option<Spread> {
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Some(Spread {
            median,
            min: v[0],
            max: v[n - 1],
        })
    }
}

/// Summarises `records` by case, in the order cases first appear; `skipped` are cases not
/// run, with the reason.
pub fn rows(records: &[Record], skipped: &[(Key, String)]) -> Vec<Row> {
    let mut keys: Vec<Key> = Vec::new();
    for k in records
        .iter()
        .map(|r| &r.key)
        .chain(skipped.iter().map(|s| &s.0))
    {
        if !keys.contains(k) {
            keys.push(k.clone());
        }
    }
    // By section, peer and payload; variants in the order they were planned.
    let order = |k: &Key| keys.iter().position(|x| x == k).unwrap_or(usize::MAX);
    let mut sorted = keys.clone();
    sorted.sort_by_key(|k| (k.section, k.peer, k.payload, order(k)));
    sorted
        .into_iter()
        .map(|key| {
            let runs: Vec<&Record> = records.iter().filter(|r| r.key == key).collect();
            let lats: Vec<Lat> = runs
                .iter()
                .filter_map(|r| match &r.outcome {
                    Outcome::Lat(l) => Some(*l),
                    _ => None,
                })
                .collect();
            let tputs: Vec<f64> = runs
                .iter()
                .filter_map(|r| match &r.outcome {
                    Outcome::Tput(t) => Some(t.rate),
                    _ => None,
                })
                .collect();
            let mut notes: Vec<String> = runs
                .iter()
                .filter_map(|r| match &r.outcome {
                    Outcome::Failed(e) => Some(format!("run {} failed: {e}", r.run)),
                    _ => None,
                })
                .collect();
            if let Some((_, why)) = skipped.iter().find(|s| s.0 == key) {
                notes.push(format!("not measured: {why}"));
            }
            let lat = Spread::of(lats.iter().map(|l| l.p50).collect()).map(|p50| {
                let med = |f: fn(&Lat) -> f64| {
                    Spread::of(lats.iter().map(f).collect()).map_or(f64::NAN, |s| s.median)
                };
                (p50, med(|l| l.p99), med(|l| l.p999))
            });
            Row {
                key,
                lat,
                tput: Spread::of(tputs),
                note: notes.join("; "),
            }
        })
        .collect()
}

/// Nanoseconds as µs with 2–3 significant digits.
pub fn us(ns: f64) -> String {
    let u = ns / 1000.0;
    if u < 1.0 {
        format!("{u:.3} µs")
    } else if u < 10.0 {
        format!("{u:.2} µs")
    } else if u < 100.0 {
        format!("{u:.1} µs")
    } else {
        format!("{u:.0} µs")
    }
}

/// Messages per second, short.
pub fn per_s(r: f64) -> String {
    if r >= 1e6 {
        format!("{:.2} M/s", r / 1e6)
    } else if r >= 1e3 {
        format!("{:.0} k/s", r / 1e3)
    } else {
        format!("{r:.0}/s")
    }
}

/// Payload bytes, short.
pub fn bytes(n: usize) -> String {
    if n >= 1024 && n & 1023 == 0 {
        format!("{} KiB", n / 1024)
    } else {
        format!("{n} B")
    }
}

fn spread_us(s: &Spread) -> String {
    if s.min == s.max {
        us(s.median)
    } else {
        format!("{} ({}–{})", us(s.median), num_us(s.min), num_us(s.max))
    }
}

fn num_us(ns: f64) -> String {
    us(ns).trim_end_matches(" µs").to_owned()
}

fn spread_rate(s: &Spread) -> String {
    if s.min == s.max {
        per_s(s.median)
    } else {
        format!(
            "{} ({}–{})",
            per_s(s.median),
            per_s(s.min).trim_end_matches("/s"),
            per_s(s.max).trim_end_matches("/s")
        )
    }
}

/// The results table.
pub fn table(rows: &[Row]) -> String {
    let mut s = String::new();
    s.push_str(
        "| scenario | payload | peer | p50 one-way | p99 | p99.9 | throughput | note |\n\
         |---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        let k = &r.key;
        let scen = if k.variant.is_empty() {
            k.section.title().to_owned()
        } else {
            format!("{}: {}", k.section.title(), k.variant)
        };
        let (p50, p99, p999) = match &r.lat {
            Some((p50, p99, p999)) => (spread_us(p50), us(*p99), us(*p999)),
            None => ("".into(), "".into(), "".into()),
        };
        let tput = r.tput.as_ref().map(spread_rate).unwrap_or_default();
        let _ = writeln!(
            s,
            "| {scen} | {} | {} | {p50} | {p99} | {p999} | {tput} | {} |",
            bytes(k.payload),
            k.peer_label(),
            r.note.replace('|', "/")
        );
    }
    s
}

// ---------------------------------------------------------------------------------------------
// Targets
// ---------------------------------------------------------------------------------------------

fn find<'a>(
    rows: &'a [Row],
    section: Section,
    peer: Peer,
    payload: usize,
    variant: &str,
) -> Option<&'a Row> {
    rows.iter().find(|r| {
        r.key.section == section
            && r.key.peer == peer
            && r.key.payload == payload
            && r.key.variant == variant
    })
}

fn p50(rows: &[Row], section: Section, peer: Peer, variant: &str) -> Result<f64, String> {
    median_at(rows, section, peer, 64, variant, true)
}

/// The median of a row: its latency p50 (`lat`) or its throughput.
fn median_at(
    rows: &[Row],
    section: Section,
    peer: Peer,
    size: usize,
    variant: &str,
    lat: bool,
) -> Result<f64, String> {
    let r = find(rows, section, peer, size, variant)
        .ok_or_else(|| format!("{} not measured in this run", peer.label(section.wait())))?;
    let m = if lat {
        r.lat.as_ref().map(|l| l.0.median)
    } else {
        r.tput.as_ref().map(|t| t.median)
    };
    m.ok_or_else(|| format!("{}: {}", peer.label(section.wait()), r.note))
}

/// The figure a target compares of one run: a latency p50 or a throughput.
fn figure(o: &Outcome, lat: bool) -> Option<f64> {
    match (o, lat) {
        (Outcome::Lat(l), true) => Some(l.p50),
        (Outcome::Tput(t), false) => Some(t.rate),
        _ => None,
    }
}

/// `a / b` paired by repeat: the median over repeats of `a`'s figure over `b`'s in the same
/// repeat (the host moves the two vCPUs, so the cache-line time changes by 4× within seconds:
/// only figures measured close together compare), with the medians of `a` and `b` for display.
/// Falls back to the ratio of medians when no repeat has both.
fn paired(
    records: &[Record],
    rows: &[Row],
    section: Section,
    a: (Peer, &str),
    b: (Peer, &str),
    lat: bool,
) -> Result<(f64, f64, f64), String> {
    paired_at(records, rows, section, 64, a, b, lat)
}

/// [`paired`] at payloads of `size` bytes.
fn paired_at(
    records: &[Record],
    rows: &[Row],
    section: Section,
    size: usize,
    a: (Peer, &str),
    b: (Peer, &str),
    lat: bool,
) -> Result<(f64, f64, f64), String> {
    let med = |(p, v): (Peer, &str)| median_at(rows, section, p, size, v, lat);
    let (ma, mb) = (med(a)?, med(b)?);
    let of = |(p, v): (Peer, &str), run: usize| {
        records
            .iter()
            .find(|r| {
                r.run == run
                    && r.key.section == section
                    && r.key.peer == p
                    && r.key.payload == size
                    && r.key.variant == v
            })
            .and_then(|r| figure(&r.outcome, lat))
    };
    let runs = records.iter().map(|r| r.run).max().unwrap_or(0);
    let ratios: Vec<f64> = (1..=runs)
        .filter_map(|run| Some(of(a, run)? / of(b, run)?))
        .collect();
    let r = Spread::of(ratios).map_or(ma / mb, |s| s.median);
    Ok((ma, mb, r))
}

/// The hardware limit (spinning cache-line ping-pong p50) in each repeat, for the report.
pub fn cache_line_per_repeat(records: &[Record]) -> Vec<f64> {
    let mut v: Vec<(usize, f64)> = records
        .iter()
        .filter(|r| {
            r.key.section == Section::LatSpin && r.key.peer == Peer::Raw && r.key.payload == 64
        })
        .filter_map(|r| Some((r.run, figure(&r.outcome, true)?)))
        .collect();
    v.sort_by_key(|x| x.0);
    v.into_iter().map(|x| x.1).collect()
}

/// One target's line.
#[derive(Debug, Clone)]
pub struct Verdict {
    /// What is compared.
    pub what: String,
    /// The measured ratio or figure, in words.
    pub measured: String,
    /// The goal.
    pub goal: String,
    /// `MET`, `MISSED by …`, or why it was not measured.
    pub verdict: String,
}

/// `ratio` against an upper bound `max`.
fn at_most(ratio: f64, max: f64) -> String {
    if ratio <= max {
        "MET".into()
    } else {
        format!("MISSED by {:.0}%", (ratio / max - 1.0) * 100.0)
    }
}

/// `ratio` against a lower bound `min`.
fn at_least(ratio: f64, min: f64) -> String {
    if ratio >= min {
        "MET".into()
    } else {
        format!("MISSED by {:.0}%", (1.0 - ratio / min) * 100.0)
    }
}

/// The targets: each ratio paired by repeat (see [`paired`]), shown beside the
/// medians it relates. `groups` names the two group counts
/// compared (the largest measured, and 1,000).
pub fn targets(
    records: &[Record],
    rows: &[Row],
    mem: Option<&MemoryFigures>,
    group_variants: (&str, &str),
) -> Vec<Verdict> {
    let mut v = Vec::new();
    let mut push = |what: &str, goal: &str, r: Result<(String, String), String>| {
        let (measured, verdict) =
            r.unwrap_or_else(|e| (String::new(), format!("not measured: {e}")));
        v.push(Verdict {
            what: what.into(),
            measured,
            goal: goal.into(),
            verdict,
        });
    };
    let ls = Section::LatSpin;
    push(
        "spinning one-way p50, 64 B: shmfifo / cache-line ping-pong",
        "≤ 3×",
        (|| {
            let (a, b, r) = paired(
                records,
                rows,
                ls,
                (Peer::Shmfifo, ""),
                (Peer::Raw, ""),
                true,
            )?;
            Ok((
                format!("{} / {}: {:.2}× paired", us(a), us(b), r),
                at_most(r, 3.0),
            ))
        })(),
    );
    push(
        "spinning one-way p50, 64 B: shmfifo / iceoryx2",
        "< 1×",
        (|| {
            let (a, b, r) = paired(
                records,
                rows,
                ls,
                (Peer::Shmfifo, ""),
                (Peer::Iceoryx2, ""),
                true,
            )?;
            let verdict = if r < 1.0 {
                "MET".to_owned()
            } else {
                format!("MISSED by {:.0}%", (r - 1.0) * 100.0)
            };
            Ok((format!("{} / {}: {:.2}× paired", us(a), us(b), r), verdict))
        })(),
    );
    let lz = Section::LatSleep;
    push(
        "sleeping one-way p50, 64 B: shmfifo / futex wake",
        "≤ 1.3×",
        (|| {
            let (a, b, r) = paired(
                records,
                rows,
                lz,
                (Peer::Shmfifo, ""),
                (Peer::Raw, ""),
                true,
            )?;
            Ok((
                format!("{} / {}: {:.2}× paired", us(a), us(b), r),
                at_most(r, 1.3),
            ))
        })(),
    );
    push(
        "sleeping one-way p50, 64 B: shmfifo async receive / blocking receive",
        "≤ 1.5×",
        (|| {
            let (a, b, r) = paired(
                records,
                rows,
                lz,
                (Peer::ShmfifoAsync, ""),
                (Peer::Shmfifo, ""),
                true,
            )?;
            Ok((
                format!("{} / {}: {:.2}× paired", us(a), us(b), r),
                at_most(r, 1.5),
            ))
        })(),
    );
    for peer in [Peer::Uds, Peer::Pipe, Peer::Mq] {
        push(
            &format!(
                "sleeping one-way p50, 64 B: shmfifo / {}",
                peer.label(Wait::Sleep)
            ),
            "< 1×",
            (|| {
                let (a, b, r) = paired(records, rows, lz, (Peer::Shmfifo, ""), (peer, ""), true)?;
                let verdict = if r < 1.0 {
                    "MET".to_owned()
                } else {
                    format!("MISSED by {:.0}%", (r - 1.0) * 100.0)
                };
                Ok((format!("{} / {}: {:.2}× paired", us(a), us(b), r), verdict))
            })(),
        );
    }
    let tb = Section::TputBatch;
    for (peer, goal, min) in [
        (Peer::Iceoryx2, "≥ 5×", 5.0),
        (Peer::Pipe, "≥ 5×", 5.0),
        (Peer::Crossbeam, "≥ 0.25×", 0.25),
    ] {
        push(
            &format!(
                "throughput 1 → 1, 64 B, batches of 10: shmfifo / {}",
                peer.label(Wait::Spin)
            ),
            goal,
            (|| {
                let (a, b, r) = paired(records, rows, tb, (Peer::Shmfifo, ""), (peer, ""), false)?;
                Ok((
                    format!("{} / {}: {:.2}× paired", per_s(a), per_s(b), r),
                    at_least(r, min),
                ))
            })(),
        );
    }
    // Large messages, each form beside its peer of the same kind.
    for (what, goal, section, size, a, b, lat, bound) in [
        (
            "spinning one-way p50, 64 KiB: shmfifo zero-copy (loan + borrowed receive, binary bodies) / iceoryx2 read in place",
            "≤ 1×",
            ls,
            65_536,
            Peer::ShmfifoZc,
            Peer::Iceoryx2Zc,
            true,
            1.0,
        ),
        (
            "spinning one-way p50, 64 KiB: shmfifo copying / pipe",
            "≤ 0.5×",
            ls,
            65_536,
            Peer::Shmfifo,
            Peer::Pipe,
            true,
            0.5,
        ),
        (
            "throughput 1 → 1, 1 MiB, single ops: shmfifo zero-copy (binary bodies) / iceoryx2 read in place",
            "≥ 1×",
            Section::TputSingle,
            1_048_576,
            Peer::ShmfifoZc,
            Peer::Iceoryx2Zc,
            false,
            1.0,
        ),
    ] {
        push(
            what,
            goal,
            (|| {
                let (x, y, r) = paired_at(records, rows, section, size, (a, ""), (b, ""), lat)?;
                Ok(if lat {
                    (format!("{} / {}: {:.2}× paired", us(x), us(y), r), at_most(r, bound))
                } else {
                    (
                        format!("{} / {}: {:.2}× paired", per_s(x), per_s(y), r),
                        at_least(r, bound),
                    )
                })
            })(),
        );
    }
    let (big, small) = group_variants;
    push(
        &format!("throughput over {big} / over {small}"),
        "≥ 0.8×",
        (|| {
            let (a, b, r) = paired(
                records,
                rows,
                Section::Groups,
                (Peer::Shmfifo, big),
                (Peer::Shmfifo, small),
                false,
            )?;
            Ok((
                format!("{} / {}: {:.2}× paired", per_s(a), per_s(b), r),
                at_least(r, 0.8),
            ))
        })(),
    );
    push(
        &format!("throughput 1 → 1, single ops: {NEW_GROUP_EACH} / {ONE_GROUP}"),
        "≥ 0.83× (≤ 1.2× slower)",
        (|| {
            let (a, b, r) = paired(
                records,
                rows,
                Section::GroupIds,
                (Peer::Shmfifo, NEW_GROUP_EACH),
                (Peer::Shmfifo, ONE_GROUP),
                false,
            )?;
            Ok((
                format!("{} / {}: {:.2}× paired", per_s(a), per_s(b), r),
                at_least(r, 1.0 / 1.2),
            ))
        })(),
    );
    push(
        "p50 of a group beside a backlog / without it",
        "change < 10%",
        (|| {
            let loaded = rows
                .iter()
                .find(|r| r.key.section == Section::Backlog && r.key.variant != NO_BACKLOG)
                .ok_or("backlog not measured in this run")?;
            let a = loaded
                .lat
                .as_ref()
                .map(|l| l.0.median)
                .ok_or_else(|| loaded.note.clone())?;
            let b = p50(rows, Section::Backlog, Peer::Shmfifo, NO_BACKLOG)?;
            let change = (a / b - 1.0).abs();
            let verdict = if change < 0.10 {
                "MET".to_owned()
            } else {
                format!("MISSED by {:.0} points", (change - 0.10) * 100.0)
            };
            Ok((
                format!(
                    "{} / {} = {:.2}× ({:+.1}%)",
                    us(a),
                    us(b),
                    a / b,
                    (a / b - 1.0) * 100.0
                ),
                verdict,
            ))
        })(),
    );
    push(
        "arena bytes per message beyond its size class (slot header)",
        "≤ 64 B + class rounding",
        mem.map(|m| {
            (
                format!(
                    "{:.0} B per 192 B slot: {:.0} B header; dedup on: + {:.0} B per table entry",
                    m.per_slot_192, m.header, m.per_dedup_entry
                ),
                at_most(m.header, 64.0),
            )
        })
        .ok_or_else(|| "memory not measured in this run".to_owned()),
    );
    v
}

/// Variant names of the group-id scenario.
pub const ONE_GROUP: &str = "one group";
/// See [`ONE_GROUP`].
pub const NEW_GROUP_EACH: &str = "a new group id per message";

/// Variant name of the backlog scenario's baseline.
pub const NO_BACKLOG: &str = "no backlog";

/// The targets as a Markdown table.
pub fn targets_table(v: &[Verdict]) -> String {
    let mut s =
        String::from("| target | measured (medians) | goal | verdict |\n|---|---|---|---|\n");
    for t in v {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} |",
            t.what, t.measured, t.goal, t.verdict
        );
    }
    s
}

// ---------------------------------------------------------------------------------------------
// CSV
// ---------------------------------------------------------------------------------------------

/// Every run, one line each.
pub fn csv(records: &[Record]) -> String {
    let mut s = String::from(
        "section,peer,payload_bytes,variant,run,p50_ns,p99_ns,p999_ns,mean_ns,samples,\
         msgs_per_s,sent_per_s,received_per_s,full_retries,ctxsw_vol_harness,\
         ctxsw_invol_harness,ctxsw_vol_peer,ctxsw_invol_peer,error\n",
    );
    for r in records {
        let k = &r.key;
        let _ = write!(
            s,
            "{},{},{},{},{},",
            k.section.key(),
            k.peer.key(),
            k.payload,
            k.variant.replace(',', ""),
            r.run
        );
        match &r.outcome {
            Outcome::Lat(l) => {
                let (a, b) = l
                    .switches
                    .unwrap_or(((f64::NAN, f64::NAN), (f64::NAN, f64::NAN)));
                let _ = writeln!(
                    s,
                    "{:.0},{:.0},{:.0},{:.1},{},,,,,{:.3},{:.3},{:.3},{:.3},",
                    l.p50, l.p99, l.p999, l.mean, l.samples, a.0, a.1, b.0, b.1
                );
            }
            Outcome::Tput(t) => {
                let _ = writeln!(
                    s,
                    ",,,,,{:.0},{:.0},{:.0},{},,,,,",
                    t.rate, t.sent, t.received, t.full_retries
                );
            }
            Outcome::Failed(e) => {
                let _ = writeln!(s, ",,,,,,,,,,,,,\"{}\"", e.replace('"', "'"));
            }
        }
    }
    s
}

// ---------------------------------------------------------------------------------------------
// Chart
// ---------------------------------------------------------------------------------------------

/// One bar of the chart.
struct Bar {
    label: String,
    spread: Spread,
    ours: bool,
}

/// Draws three panels (spinning latency, sleeping latency, batch throughput; 64-byte
/// payloads; median bars with min–max whiskers, log scale) into an SVG file.
pub fn svg(rows: &[Row], path: &Path, subtitle: &str) -> Result<(), String> {
    use plotters::prelude::*;

    // A panel's bars, and the peers of its section that were not measured (with why).
    let bars = |section: Section, lat: bool| -> (Vec<Bar>, Vec<String>) {
        let cases = || {
            rows.iter().filter(|r| {
                r.key.section == section && r.key.payload == 64 && r.key.variant.is_empty()
            })
        };
        // Bottom-up in the chart: reversed, so that the table's first row is on top.
        let bars = cases()
            .rev()
            .filter_map(|r| {
                let spread = if lat {
                    r.lat.as_ref().map(|l| l.0)
                } else {
                    r.tput
                };
                spread.map(|s| Bar {
                    label: r.key.peer_label().to_owned(),
                    spread: s,
                    ours: r.key.peer == Peer::Shmfifo,
                })
            })
            .collect();
        let missing = cases()
            .filter(|r| {
                if lat {
                    r.lat.is_none()
                } else {
                    r.tput.is_none()
                }
            })
            .map(|r| {
                let why = r.note.strip_prefix("not measured: ").unwrap_or(&r.note);
                format!("{}: {why}", r.key.peer_label())
            })
            .collect();
        (bars, missing)
    };
    let panel = |title: &str, section: Section, lat: bool, scale: f64, axis: &str| {
        let (b, missing) = bars(section, lat);
        (title.to_owned(), b, missing, scale, axis.to_owned())
    };
    let panels = [
        panel(
            "One-way latency p50, receiver spinning, 64 B (lower is better)",
            Section::LatSpin,
            true,
            1e-3,
            "µs, log scale",
        ),
        panel(
            "One-way latency p50, receiver asleep, 64 B (lower is better)",
            Section::LatSleep,
            true,
            1e-3,
            "µs, log scale",
        ),
        panel(
            "Throughput, 1 → 1 process, batches of 10, 64 B (higher is better)",
            Section::TputBatch,
            false,
            1e-6,
            "million messages per second, log scale",
        ),
    ];
    // Panels with nothing measured are left out.
    let panels: Vec<_> = panels.into_iter().filter(|p| !p.1.is_empty()).collect();
    // Bars, the axis and its description, a line per peer not measured.
    let heights: Vec<u32> = panels
        .iter()
        .map(|p| 88 + 26 * p.1.len() as u32 + 16 * p.2.len() as u32)
        .collect();
    let total: u32 = heights.iter().sum::<u32>() + 58;
    let root = SVGBackend::new(path, (960, total)).into_drawing_area();
    let e = |x: DrawingAreaErrorKind<_>| format!("chart: {x}");
    root.fill(&WHITE).map_err(e)?;
    let (head, mut rest) = root.split_vertically(58);
    head.draw(&Text::new(
        format!("shmfifo and its peers — {subtitle}"),
        (10, 12),
        ("sans-serif", 16).into_font(),
    ))
    .map_err(e)?;
    head.draw(&Text::new(
        "Bars: median of the runs; whiskers: fastest to slowest run. Horizontal axes are \
         logarithmic. Peers not measured in a panel are listed under it, with why."
            .to_owned(),
        (10, 30),
        ("sans-serif", 12).into_font(),
    ))
    .map_err(e)?;
    for ((title, bars, missing, scale, axis), h) in panels.iter().zip(&heights) {
        let (area, below) = rest.split_vertically(*h);
        rest = below;
        let (area, notes) = area.split_vertically(*h - 16 * missing.len() as u32);
        for (i, m) in missing.iter().enumerate() {
            notes
                .draw(&Text::new(
                    format!("not measured: {m}"),
                    (236, 2 + 16 * i as i32),
                    ("sans-serif", 11)
                        .into_font()
                        .color(&RGBColor(110, 110, 110)),
                ))
                .map_err(e)?;
        }
        let scale = *scale;
        let lo = bars
            .iter()
            .map(|b| b.spread.min * scale)
            .fold(f64::INFINITY, f64::min)
            / 2.0;
        let hi = bars
            .iter()
            .map(|b| b.spread.max * scale)
            .fold(0.0, f64::max)
            * 3.0;
        let n = bars.len();
        let names: Vec<String> = bars.iter().map(|b| b.label.clone()).collect();
        let mut chart = ChartBuilder::on(&area)
            .caption(title.as_str(), ("sans-serif", 14))
            .margin(6)
            .x_label_area_size(36)
            .y_label_area_size(230)
            .build_cartesian_2d((lo..hi).log_scale(), (0..n - 1).into_segmented())
            .map_err(e)?;
        chart
            .configure_mesh()
            .disable_y_mesh()
            .y_labels(n)
            .y_label_formatter(&|v| match v {
                SegmentValue::CenterOf(i) => names.get(*i).cloned().unwrap_or_default(),
                _ => String::new(),
            })
            .x_label_formatter(&|x| format!("{x}"))
            .x_desc(axis.as_str())
            .draw()
            .map_err(e)?;
        for (i, b) in bars.iter().enumerate() {
            let color = if b.ours {
                RGBColor(214, 96, 39)
            } else {
                RGBColor(90, 120, 170)
            };
            let m = b.spread.median * scale;
            chart
                .draw_series(std::iter::once(Rectangle::new(
                    [
                        (lo, SegmentValue::Exact(i)),
                        (m, SegmentValue::Exact(i + 1)),
                    ],
                    color.mix(0.85).filled(),
                )))
                .map_err(e)?;
            // A white edge keeps neighbouring bars apart.
            chart
                .draw_series(std::iter::once(Rectangle::new(
                    [
                        (lo, SegmentValue::Exact(i)),
                        (m, SegmentValue::Exact(i + 1)),
                    ],
                    WHITE.stroke_width(4),
                )))
                .map_err(e)?;
            chart
                .draw_series(std::iter::once(PathElement::new(
                    vec![
                        (b.spread.min * scale, SegmentValue::CenterOf(i)),
                        (b.spread.max * scale, SegmentValue::CenterOf(i)),
                    ],
                    BLACK.stroke_width(2),
                )))
                .map_err(e)?;
            let text = if scale == 1e-3 {
                us(b.spread.median)
            } else {
                per_s(b.spread.median)
            };
            chart
                .draw_series(std::iter::once(Text::new(
                    text,
                    (b.spread.max * scale * 1.08, SegmentValue::CenterOf(i)),
                    ("sans-serif", 11).into_font(),
                )))
                .map_err(e)?;
        }
    }
    root.present().map_err(e)?;
    Ok(())
}
