//! `shmfifo metrics --listen ADDR`: every queue of a directory (or a list) at `/metrics`, in
//! Prometheus's text format (the prometheus-client crate's encoder), with CloudWatch's SQS
//! metric names beside shmfifo's own. Each scrape observes the queues (`Queue::observe`:
//! read-only, no participant registered), so scraping never changes a queue and works on a
//! queue whose participant slots are all taken.
//!
//! **Who sees what.** As `serve` acts with each client's own access, a scrape shows a loopback
//! client only the queues its own user (the owner of the client's socket) may open for reading
//! and writing, in a directory it may search and list: nothing of a 0600 queue, nor of a queue
//! in another user's 0700 directory, reaches another local user. A client whose user is not
//! found gets 403. Only loopback addresses are served, unless [`MetricsConfig::public`] says
//! that every client that can connect (any address, no authentication) sees every queue this
//! process's user may observe: the choice for a Prometheus running as another user, or
//! elsewhere.
//!
//! **What a scrape costs.** A directory walk and a look at every queue's header, on a
//! blocking thread, at most four at once; one viewer's (a local user's, or a public
//! endpoint's every client's) one at a time, in a task of its own (a client that leaves
//! mid-scrape does not waste it), its result served to it again for
//! [`MetricsConfig::reuse`] (1 s by default) after it ends, so a client asking in a loop
//! walks the directory at most once a second plus the walk's own time, not once a request.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response};
use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use shmfifo::Queue;

use crate::access::{Identity, Reach, Walked};

mod bridge_status;

/// What a metrics endpoint serves.
#[derive(Debug, Clone)]
pub struct MetricsConfig {
    /// Where to listen (default `127.0.0.1:9325`).
    pub addr: SocketAddr,
    /// The directory whose queue files are scraped (default `/dev/shm`), when `queues` is
    /// empty.
    pub dir: PathBuf,
    /// The queues to scrape (names under `dir`, or paths); empty: every queue in `dir`.
    pub queues: Vec<String>,
    /// Every client that can connect sees every queue this process's user may observe, and
    /// `addr` may be any address (nothing authenticates a client: whoever reaches the port
    /// reads the figures). Default `false`: `addr` must be a loopback address, and a client
    /// sees only the queues its own user may open (see the module doc).
    pub public: bool,
    /// How long after it ends a scrape's result is served again to the same viewer (the same
    /// local user, or every client of a public endpoint) instead of scraping anew; requests
    /// of one viewer that arrive while its scrape runs wait for it and get its result. Default
    /// [`SCRAPE_REUSE`] (1 s): a client asking in a loop costs one directory walk a second,
    /// not one a request. Zero scrapes for every request (requests of one viewer still one at
    /// a time).
    pub reuse: std::time::Duration,
}

/// [`MetricsConfig::reuse`]'s default.
pub const SCRAPE_REUSE: std::time::Duration = std::time::Duration::from_secs(1);

impl Default for MetricsConfig {
    fn default() -> Self {
        MetricsConfig {
            addr: SocketAddr::from(([127, 0, 0, 1], 9325)),
            dir: PathBuf::from("/dev/shm"),
            queues: Vec::new(),
            public: false,
            reuse: SCRAPE_REUSE,
        }
    }
}

/// A viewer's last scrape: when it ended and what it returned.
type LastScrape = Option<(std::time::Instant, Bytes)>;

/// Each viewer's last scrape (`None`: a public endpoint's one viewer), one at a time per
/// viewer (see [`MetricsConfig::reuse`]).
#[derive(Default)]
struct Scrapes(
    std::sync::Mutex<std::collections::HashMap<Option<u32>, Arc<tokio::sync::Mutex<LastScrape>>>>,
);

/// Viewers whose last scrape is kept, at most (beyond: those not in use are forgotten).
const VIEWERS: usize = 1024;

impl Scrapes {
    /// `viewer`'s slot.
    fn of(&self, viewer: Option<u32>) -> Arc<tokio::sync::Mutex<LastScrape>> {
        let mut m = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if m.len() >= VIEWERS && !m.contains_key(&viewer) {
            m.retain(|_, s| Arc::strong_count(s) > 1);
        }
        Arc::clone(m.entry(viewer).or_default())
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QueueLabel {
    queue: String,
}

/// A file name as a label value of the text exposition: backslash, double quote and line feed
/// escaped (prometheus-client writes label values as they are, and a name is anyone's in a
/// shared directory: one `"` would make the whole scrape unreadable).
fn label_value(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// A queue file as checked for a client: its metadata, the directory it was looked up in as
/// walked, and its name there.
struct Checked {
    meta: std::fs::Metadata,
    dir: std::rc::Rc<Walked>,
    name: String,
}

/// One scrape: the text exposition of every queue this process's user may observe (what a
/// [`MetricsConfig::public`] endpoint serves).
pub fn scrape(cfg: &MetricsConfig) -> String {
    scrape_for(cfg, None)
}

/// Directory entries a scrape looks at, at most (a directory anyone may fill with names).
pub const MAX_DIR_ENTRIES: usize = 100_000;

/// Queues a scrape reports, at most (the first by name; files that are not queues, or not
/// the client's to see, do not count).
pub const MAX_SCRAPED_QUEUES: usize = 1_000;

/// One scrape as `who` sees it: only the queues `who` may open for reading and writing, in a
/// directory `who` may search (every directory above it too) and, for a whole directory,
/// list; `None`: every queue this process's user may observe.
pub fn scrape_for(cfg: &MetricsConfig, who: Option<&Identity>) -> String {
    let mut reg = Registry::default();
    let gauge = |reg: &mut Registry, name: &str, help: &str| {
        let f = Family::<QueueLabel, Gauge>::default();
        reg.register(name, help, f.clone());
        f
    };
    let counter = |reg: &mut Registry, name: &str, help: &str| {
        let f = Family::<QueueLabel, Counter>::default();
        reg.register(name, help, f.clone());
        f
    };
    let visible = gauge(
        &mut reg,
        "ApproximateNumberOfMessagesVisible",
        "Messages available for retrieval (CloudWatch's SQS metric)",
    );
    let not_visible = gauge(
        &mut reg,
        "ApproximateNumberOfMessagesNotVisible",
        "Messages in flight (CloudWatch's SQS metric)",
    );
    let delayed = gauge(
        &mut reg,
        "ApproximateNumberOfMessagesDelayed",
        "Messages delayed (CloudWatch's SQS metric)",
    );
    let age = {
        let f = Family::<QueueLabel, Gauge<f64, AtomicU64>>::default();
        reg.register(
            "ApproximateAgeOfOldestMessage",
            "Age of the oldest message in the queue, seconds (CloudWatch's SQS metric)",
            f.clone(),
        );
        f
    };
    let sent = counter(
        &mut reg,
        "NumberOfMessagesSent",
        "Messages enqueued (duplicates excluded)",
    );
    let received = counter(
        &mut reg,
        "NumberOfMessagesReceived",
        "Messages returned by receives",
    );
    let deleted = counter(&mut reg, "NumberOfMessagesDeleted", "Messages deleted");
    let empty = counter(
        &mut reg,
        "NumberOfEmptyReceives",
        "Receives that returned no message (CloudWatch's SQS metric)",
    );
    // Every other lifetime counter `shmfifo stat` shows, under its own name.
    let cloudwatch = ["sent", "received", "deleted", "empty_receives"];
    let lifetime: Vec<(&'static str, Family<QueueLabel, Counter>)> = shmfifo::Counters::default()
        .named()
        .iter()
        .filter(|(n, _, _)| !cloudwatch.contains(n))
        .map(|&(n, _, help)| (n, counter(&mut reg, &format!("shmfifo_{n}"), help)))
        .collect();
    let dedup_evictions = counter(
        &mut reg,
        "shmfifo_dedup_evictions",
        "Dedup ids forgotten before their interval ended (the table was full)",
    );
    let quarantined_groups = counter(
        &mut reg,
        "shmfifo_quarantined_groups",
        "Groups rebuilt empty because a corrupted word made their list unwalkable",
    );
    let dedup = gauge(
        &mut reg,
        "shmfifo_dedup_entries_in_use",
        "Dedup ids remembered now",
    );
    let dedup_cap = gauge(&mut reg, "shmfifo_dedup_entries", "Dedup table capacity");
    // The gauges `shmfifo stat --prometheus` has, under its names (they were
    // `shmfifo_active_groups`, `shmfifo_group_capacity`, `shmfifo_participants` here).
    let groups = gauge(
        &mut reg,
        "shmfifo_groups_active",
        "Message groups with messages",
    );
    let group_cap = gauge(
        &mut reg,
        "shmfifo_groups_capacity",
        "Message groups the group table holds now, before it adds a table",
    );
    let participants = gauge(
        &mut reg,
        "shmfifo_participants_alive",
        "Live processes with the queue open",
    );
    let grows = counter(
        &mut reg,
        "shmfifo_grows",
        "Segments the queue's size classes added (the arena grows by segments as its classes fill)",
    );
    let refused_grows = counter(
        &mut reg,
        "shmfifo_refused_grows",
        "Growths the file system refused for want of space (each failed a send with NoSpace)",
    );
    let quarantined = counter(
        &mut reg,
        "shmfifo_quarantined_messages",
        "Messages quarantined (unreadable)",
    );
    let up = gauge(
        &mut reg,
        "shmfifo_queue_up",
        "1 if the queue could be observed, 0 if not",
    );
    let bridged = counter(
        &mut reg,
        "shmfifo_bridge_forwarded",
        "Messages a bridge forwarded to SQS and deleted here",
    );
    let bridge_retried = counter(
        &mut reg,
        "shmfifo_bridge_retried",
        "Messages a bridge released for another try",
    );
    let bridge_failed = counter(
        &mut reg,
        "shmfifo_bridge_failed",
        "Refusals of a message by the remote queue (one refused three times counts three)",
    );
    let bridge_dead_lettered = counter(
        &mut reg,
        "shmfifo_bridge_dead_lettered",
        "Messages a bridge moved to the local dead-letter queue after refusals",
    );
    let bridge_stopped = gauge(
        &mut reg,
        "shmfifo_bridge_stopped_groups",
        "Groups a bridge stopped at a message the remote queue refuses",
    );
    let mut reported = 0;
    for (name, path, checked) in queues(cfg, who) {
        if reported == MAX_SCRAPED_QUEUES {
            break;
        }
        let l = QueueLabel {
            queue: label_value(&name),
        };
        // A queue named on the command line that is not there, or not the client's to see:
        // down (it was left out, so an alert on `shmfifo_queue_up == 0` never fired for a
        // queue that is gone; the names are the operator's, the same for every client).
        let Some(checked) = checked else {
            up.get_or_create(&l).set(0);
            continue;
        };
        let o = match Queue::observe_at(&path) {
            // For a client: the file as opened is the one its access was checked on (the name
            // may have changed since it was looked at).
            Ok(o)
                if checked.as_ref().is_some_and(|c| {
                    o.file_metadata()
                        .map_or(true, |f| (f.dev(), f.ino()) != (c.meta.dev(), c.meta.ino()))
                }) =>
            {
                continue
            }
            Ok(o) => o,
            // Another kind of file in the directory (or another user's, or unreadable): not a
            // queue of ours, not reported.
            Err(
                shmfifo::Error::NotAnArena { .. }
                | shmfifo::Error::NotReady
                | shmfifo::Error::UntrustedFile { .. }
                | shmfifo::Error::Io(_),
            ) if cfg.queues.is_empty() => continue,
            Err(_) => {
                up.get_or_create(&l).set(0);
                continue;
            }
        };
        let i = match o.check().and_then(|()| o.inspect(0)) {
            Ok(i) => i,
            Err(_) => {
                up.get_or_create(&l).set(0);
                continue;
            }
        };
        up.get_or_create(&l).set(1);
        reported += 1;
        let a = &i.attributes;
        let c = &i.counters;
        visible
            .get_or_create(&l)
            .set(a.approximate_number_of_messages as i64);
        not_visible
            .get_or_create(&l)
            .set(a.approximate_number_of_messages_not_visible as i64);
        delayed
            .get_or_create(&l)
            .set(a.approximate_number_of_messages_delayed as i64);
        age.get_or_create(&l)
            .set(a.approximate_age_of_oldest_message.as_secs_f64());
        sent.get_or_create(&l).inc_by(c.sent);
        received.get_or_create(&l).inc_by(c.received);
        deleted.get_or_create(&l).inc_by(c.deleted);
        dedup.get_or_create(&l).set(a.dedup_entries_in_use as i64);
        dedup_cap.get_or_create(&l).set(a.dedup_entries as i64);
        groups.get_or_create(&l).set(a.active_groups as i64);
        group_cap.get_or_create(&l).set(a.group_capacity as i64);
        participants
            .get_or_create(&l)
            .set(i.participants.iter().filter(|p| p.alive).count() as i64);
        empty.get_or_create(&l).inc_by(c.empty_receives);
        for ((_, family), (_, v, _)) in lifetime
            .iter()
            .zip(c.named().iter().filter(|(n, _, _)| !cloudwatch.contains(n)))
        {
            family.get_or_create(&l).inc_by(*v);
        }
        dedup_evictions.get_or_create(&l).inc_by(a.dedup_evictions);
        quarantined_groups
            .get_or_create(&l)
            .inc_by(a.quarantined_groups);
        quarantined.get_or_create(&l).inc_by(a.quarantined_messages);
        grows.get_or_create(&l).inc_by(i.size.grows);
        refused_grows.get_or_create(&l).inc_by(i.size.refused_grows);
        // The bridge's counters (`shmfifo bridge` keeps them in PATH.bridge.json).
        // For a client, looked up in the directory as walked (beside the file checked).
        let (status, queue_owner) = match &checked {
            Some(c) => (
                c.dir.path(&format!("{}.bridge.json", c.name)),
                Some(c.meta.uid()),
            ),
            None => {
                let mut status = path.clone().into_os_string();
                status.push(".bridge.json");
                let owner = std::fs::symlink_metadata(&path).ok().map(|q| q.uid());
                (PathBuf::from(status), owner)
            }
        };
        if let Some(v) = bridge_status::read(&status, queue_owner, a.created_timestamp) {
            let n = |k: &str| v.get(k).and_then(serde_json::Value::as_u64).unwrap_or(0);
            bridged.get_or_create(&l).inc_by(n("forwarded"));
            bridge_retried.get_or_create(&l).inc_by(n("retried"));
            bridge_failed.get_or_create(&l).inc_by(n("failed"));
            bridge_dead_lettered
                .get_or_create(&l)
                .inc_by(n("dead_lettered"));
            let stopped = v
                .get("stopped")
                .and_then(serde_json::Value::as_array)
                .map_or(0, Vec::len);
            bridge_stopped.get_or_create(&l).set(stopped as i64);
        }
    }
    let mut out = String::new();
    let _ = encode(&mut out, &reg);
    out
}

/// `dir` resolved now and walked for `who` ([`crate::access::walk`]: search permission on
/// it and every directory above it, checked on the directories then used), or `None`. Its
/// owners and modes are not asked about (as `serve` asks them): a scrape hands no path on
/// for later, and checks each queue it observes by device and inode ([`queues`]).
fn walked(dir: &std::path::Path, who: &Identity) -> Option<Walked> {
    let d = std::fs::canonicalize(dir).ok()?;
    match crate::access::walk(who, &d, None) {
        Ok(Reach::Walked(w)) => Some(w),
        _ => None,
    }
}

/// The queues to scrape for `who` (`None`: this process's user): `(label, path, the file as
/// checked for who)`. A named queue `who` may not open is left out, as is every
/// name of a directory `who` may not list; names that are not UTF-8 are left out (two of them
/// could share one label).
///
/// For a client, a file is checked as the name in the directory as walked (a regular file,
/// no symlink followed, that it may open), and the scrape then observes it by its path only
/// if what it opens is that file (a component swapped in between is not followed).
/// A queue named on the command line that is missing, or not the client's, comes with `None`
/// (reported down, never opened); any other with `Some` of its check (`Some(None)`: no client).
#[allow(clippy::type_complexity)]
fn queues(
    cfg: &MetricsConfig,
    who: Option<&Identity>,
) -> Vec<(String, PathBuf, Option<Option<Checked>>)> {
    use std::rc::Rc;
    // For a client: a regular file of the walked directory that it may open; for us, anything.
    let admitted = |dir: Option<&Rc<Walked>>, name: &std::ffi::OsStr| -> Option<Option<Checked>> {
        let (Some(who), Some(dir)) = (who, dir) else {
            return who.is_none().then_some(None);
        };
        let name = name.to_str()?;
        let meta = dir.entry(name).ok()??;
        (meta.file_type().is_file() && who.may_open(&meta)).then(|| {
            Some(Checked {
                meta,
                dir: Rc::clone(dir),
                name: name.to_owned(),
            })
        })
    };
    if !cfg.queues.is_empty() {
        return cfg
            .queues
            .iter()
            .map(|q| {
                let p = if q.contains('/') {
                    PathBuf::from(q)
                } else {
                    cfg.dir.join(q)
                };
                let checked = || {
                    let dir = match who {
                        Some(who) => {
                            let parent = p.parent().filter(|d| !d.as_os_str().is_empty());
                            Some(Rc::new(walked(
                                parent.unwrap_or(std::path::Path::new(".")),
                                who,
                            )?))
                        }
                        None => None,
                    };
                    admitted(dir.as_ref(), p.file_name()?)
                };
                let checked = checked();
                (q.clone(), p, checked)
            })
            .collect();
    }
    let dir = match who {
        Some(who) => match walked(&cfg.dir, who) {
            Some(w) if who.may_list(w.meta()) => Some(Rc::new(w)),
            _ => return Vec::new(),
        },
        None => None,
    };
    // A client's listing is of the directory as walked (whatever the path names now).
    let listed = dir
        .as_ref()
        .map_or_else(|| cfg.dir.clone(), |w| w.dir_path());
    let mut v: Vec<String> = std::fs::read_dir(listed)
        .into_iter()
        .flatten()
        .take(MAX_DIR_ENTRIES)
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    v.sort();
    v.into_iter()
        .filter_map(|name| {
            let checked = admitted(dir.as_ref(), std::ffi::OsStr::new(&name))?;
            Some((name.clone(), cfg.dir.join(&name), Some(checked)))
        })
        .collect()
}

/// Serves `/metrics` until `shutdown` completes; `ready` is told the address.
pub async fn serve_metrics(
    cfg: MetricsConfig,
    ready: impl FnOnce(SocketAddr),
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    if !cfg.public && !cfg.addr.ip().is_loopback() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{} is not a loopback address: a client elsewhere has no local user to check \
                 its access by, and nothing authenticates it (--public serves every queue to \
                 whoever connects)",
                cfg.addr
            ),
        ));
    }
    let listener = tokio::net::TcpListener::bind(cfg.addr).await?;
    let local = listener.local_addr()?;
    ready(local);
    let cfg = Arc::new(cfg);
    let scrapes = Arc::new(Scrapes::default());
    let conns = Arc::new(std::sync::Mutex::new(Conns::default()));
    // Connections accepted and not yet admitted (their peer being looked up).
    let pending = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    tokio::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            r = listener.accept() => r,
            () = &mut shutdown => return Ok(()),
        };
        let (stream, peer) = match accepted {
            Ok(a) => a,
            Err(e) => {
                // EMFILE, ENFILE, ECONNABORTED …: the listener is still good. Pause so that a
                // descriptor limit is not a busy loop, then serve on.
                tracing::warn!(error = %e, "metrics: accept failed; serving on");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        // Relaxed: a count of this loop's and its tasks' own, bounding descriptors; it
        // orders nothing else.
        if pending.fetch_add(1, std::sync::atomic::Ordering::Relaxed) >= PENDING_CONNECTIONS {
            pending.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
            continue; // closed at once
        }
        let (cfg, conns, pending) = (Arc::clone(&cfg), Arc::clone(&conns), Arc::clone(&pending));
        let scrapes = Arc::clone(&scrapes);
        tokio::spawn(async move {
            let key = peer_key(peer, local).await;
            // Relaxed: as above.
            pending.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
            // Whose access its scrapes are made with (see the module doc): the user owning
            // the client's socket, looked up while our end stayed connected (no other socket
            // can have held the client's address pair meanwhile); `Err`: no user found, 403.
            let viewer: Result<Option<u32>, ()> = match key {
                _ if cfg.public => Ok(None),
                Peer::Uid(uid) if crate::conn::still_connected(&stream) => Ok(Some(uid)),
                _ => Err(()),
            };
            let busy = Arc::new(std::sync::atomic::AtomicBool::new(false));
            let cancel = Arc::new(tokio::sync::Notify::new());
            let id = {
                let mut c = conns.lock().unwrap_or_else(|e| e.into_inner());
                let Some(evicted) = c.admit(key) else {
                    return; // every connection of the peer's share, or all, mid-request
                };

                if let Some(old) = evicted {
                    // A permit if it is not waiting yet: never lost.
                    old.cancel.notify_one();
                }
                c.next += 1;
                let id = c.next;
                c.live.push_back(Conn {
                    id,
                    key,
                    busy: Arc::clone(&busy),
                    cancel: Arc::clone(&cancel),
                });
                id
            };
            // Forgets this connection however the task ends.
            let _gone = Gone(Arc::clone(&conns), id);
            let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
                let cfg = Arc::clone(&cfg);
                let busy = Arc::clone(&busy);
                let scrapes = Arc::clone(&scrapes);
                async move {
                    let r = if req.uri().path() == "/metrics" && viewer.is_err() {
                        Response::builder()
                            .status(403)
                            .body(Full::new(Bytes::from_static(
                                b"the user owning this connection was not found: nothing to show\n",
                            )))
                    } else if req.uri().path() == "/metrics" {
                        // One scrape at a time per viewer, its result served again for
                        // `cfg.reuse` after it ends (requests that waited for it get it too).
                        // The scrape runs in a task of its own, which a request only waits
                        // for: a client that leaves mid-scrape does not throw the result away
                        // (the next request gets it). At most `SCRAPES` at once, each holding
                        // its turn until its blocking read ends. Only a request whose scrape
                        // runs is busy (not to be closed for room): one waiting for its
                        // viewer's scrape or for a turn is not, so requests piled up by one
                        // client keep no other client out.
                        let uid = viewer.ok().flatten();
                        let slot = scrapes.of(uid);
                        let task = tokio::spawn(async move {
                            let mut last = slot.lock_owned().await;
                            if let Some((at, body)) = &*last {
                                if at.elapsed() < cfg.reuse {
                                    return Some(body.clone());
                                }
                            }
                            let turn = SCRAPE_TURNS.acquire().await.ok()?;
                            // Relaxed: read under the registry's lock only to choose a
                            // connection to close; a stale value closes one a little early
                            // or late.
                            busy.store(true, std::sync::atomic::Ordering::Relaxed);
                            let body = tokio::task::spawn_blocking(move || {
                                let _turn = turn;
                                let who = uid.map(Identity::of_uid);
                                scrape_for(&cfg, who.as_ref())
                            })
                            .await
                            .map(Bytes::from);
                            // Relaxed: as above.
                            busy.store(false, std::sync::atomic::Ordering::Relaxed);
                            let body = body.ok()?;
                            *last = Some((std::time::Instant::now(), body.clone()));
                            Some(body)
                        });
                        let body = task.await.ok().flatten().unwrap_or_default();
                        Response::builder()
                            .header(
                                "content-type",
                                "application/openmetrics-text; version=1.0.0; charset=utf-8",
                            )
                            .body(Full::new(body))
                    } else {
                        Response::builder()
                            .status(404)
                            .body(Full::new(Bytes::from_static(b"see /metrics\n")))
                    };
                    Ok::<_, Infallible>(r.expect("a valid response"))
                }
            });
            // A connection lives at most `METRICS_CONNECTION_LIFE` (a scraper reconnects):
            // one that sends nothing, or a byte at a time, holds its place no longer; and it
            // ends when it is closed to make room.
            // Heads bounded as serve's (a scrape's is a few hundred bytes).
            let conn = hyper::server::conn::http1::Builder::new()
                .max_buf_size(crate::conn::MAX_HEAD)
                .serve_connection(hyper_util::rt::TokioIo::new(stream), svc);
            tokio::select! {
                _ = tokio::time::timeout(METRICS_CONNECTION_LIFE, conn) => {}
                () = cancel.notified() => {}
            }
        });
    }
}

/// Who a connection is from, for its share of the endpoint's connections (at most
/// [`PER_PEER`] each): the local user owning a loopback peer's socket, else the peer's address
/// (an IPv6 /64 as one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Peer {
    Uid(u32),
    Addr(std::net::IpAddr),
    /// A loopback peer whose owner was not found in time (all such share one share).
    Unknown,
}

/// The [`Peer`] of a connection from `peer` to `local`: a loopback peer's owner is read from
/// the socket table (a blocking read, at most 2 s).
async fn peer_key(peer: SocketAddr, local: SocketAddr) -> Peer {
    if !crate::access::is_loopback(peer) {
        // As serve counts a remote peer's connections (an IPv6 /64 as one).
        return Peer::Addr(crate::conn::share_key(peer.ip()));
    }
    let within = std::time::Duration::from_secs(2);
    match crate::access::peer_uid_bounded(&LOOKUP_TURNS, within, peer, local, |uid| uid).await {
        Some(uid) => Peer::Uid(uid),
        None => Peer::Unknown,
    }
}

/// Peer lookups (reads of the socket table) running at once.
const LOOKUPS: usize = 8;

/// Bounds the peer lookups running at once (see [`LOOKUPS`]).
static LOOKUP_TURNS: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(LOOKUPS);

/// The metrics endpoint's admitted connections, oldest first.
#[derive(Default)]
struct Conns {
    live: std::collections::VecDeque<Conn>,
    next: u64,
}

struct Conn {
    id: u64,
    key: Peer,
    /// A scrape is being made for it.
    busy: Arc<std::sync::atomic::AtomicBool>,
    /// Told when it is closed to make room.
    cancel: Arc<tokio::sync::Notify>,
}

impl Conns {
    /// Whether a new connection of `key` is served: `None` if not; else the connection that
    /// gives it room (`Some(None)`: room without closing one). A peer with its whole share
    /// makes room from its own connections; at the endpoint's limit, the peer holding the
    /// most does; in each case its oldest connection without a scrape in progress is closed,
    /// and if all of them are mid-scrape the new one is not served.
    fn admit(&mut self, key: Peer) -> Option<Option<Conn>> {
        let count = |k: Peer| self.live.iter().filter(|c| c.key == k).count();
        if count(key) >= PER_PEER {
            return self.take_oldest_idle(|c| c.key == key).map(Some);
        }
        if self.live.len() < METRICS_CONNECTIONS {
            return Some(None);
        }
        // Relaxed: see where `busy` is stored.
        let idle = |c: &Conn| !c.busy.load(std::sync::atomic::Ordering::Relaxed);
        let heaviest = self
            .live
            .iter()
            .filter(|c| idle(c))
            .map(|c| (count(c.key), c.key))
            .fold(None, |best: Option<(usize, Peer)>, (n, k)| match best {
                Some((m, _)) if m >= n => best,
                _ => Some((n, k)),
            })?;
        self.take_oldest_idle(|c| c.key == heaviest.1).map(Some)
    }

    /// Removes and returns the oldest connection matching `pick` with no scrape in progress.
    fn take_oldest_idle(&mut self, pick: impl Fn(&Conn) -> bool) -> Option<Conn> {
        // Relaxed: see where `busy` is stored.
        let k = self
            .live
            .iter()
            .position(|c| pick(c) && !c.busy.load(std::sync::atomic::Ordering::Relaxed))?;
        self.live.remove(k)
    }
}

/// Removes connection `.1` from the registry when its task ends.
struct Gone(Arc<std::sync::Mutex<Conns>>, u64);

impl Drop for Gone {
    fn drop(&mut self) {
        let mut c = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(k) = c.live.iter().position(|x| x.id == self.1) {
            c.live.remove(k);
        }
    }
}

/// Connections one peer (a local user, or a remote address) holds at once.
const PER_PEER: usize = 16;

/// Connections accepted whose peer is being looked up (a read of the socket table each),
/// beyond those served: past it a new connection is closed at once.
const PENDING_CONNECTIONS: usize = 256;

/// Scrapes running at once (each on a blocking thread, reading every queue's header).
const SCRAPES: usize = 4;

/// Bounds the scrapes running at once (see [`SCRAPES`]).
static SCRAPE_TURNS: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(SCRAPES);

/// Connections the metrics endpoint serves at once.
const METRICS_CONNECTIONS: usize = 64;

/// How long one connection to the metrics endpoint may last, its requests included.
const METRICS_CONNECTION_LIFE: std::time::Duration = std::time::Duration::from_secs(30);

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};

    fn add(c: &mut Conns, key: Peer, busy: bool) -> u64 {
        c.next += 1;
        c.live.push_back(Conn {
            id: c.next,
            key,
            busy: Arc::new(AtomicBool::new(busy)),
            cancel: Arc::new(tokio::sync::Notify::new()),
        });
        c.next
    }

    fn evicted(r: Option<Option<Conn>>) -> Option<u64> {
        r.expect("admitted").map(|c| c.id)
    }

    /// A peer holds at most `PER_PEER` connections: its next one closes its own oldest idle
    /// one, or is refused while all of its are mid-scrape; others are not touched.
    #[test]
    fn a_peer_makes_room_from_its_own_share() {
        let mut c = Conns::default();
        let other = add(&mut c, Peer::Uid(7), false);
        let first = add(&mut c, Peer::Uid(1000), false);
        for _ in 1..PER_PEER {
            add(&mut c, Peer::Uid(1000), false);
        }
        assert_eq!(evicted(c.admit(Peer::Uid(1000))), Some(first));
        add(&mut c, Peer::Uid(1000), false);
        for x in c.live.iter().filter(|x| x.key == Peer::Uid(1000)) {
            x.busy.store(true, Ordering::Relaxed);
        }
        assert!(
            c.admit(Peer::Uid(1000)).is_none(),
            "all of its own are busy"
        );
        assert_eq!(evicted(c.admit(Peer::Uid(7))), None, "another peer: room");
        assert!(c.live.iter().any(|x| x.id == other));
    }

    /// At the endpoint's limit, the peer holding the most gives up its oldest idle one: a
    /// peer with one connection (a scraper) keeps it, and a new peer gets in.
    #[test]
    fn at_the_limit_the_heaviest_peer_makes_room() {
        let mut c = Conns::default();
        let scraper = add(
            &mut c,
            Peer::Addr(std::net::Ipv4Addr::new(192, 0, 2, 1).into()),
            false,
        );
        let mut keys = 0u32;
        while c.live.len() < METRICS_CONNECTIONS {
            add(&mut c, Peer::Uid(keys % 4), false);
            keys += 1;
        }
        let heavy_oldest = c
            .live
            .iter()
            .find(|x| x.key == Peer::Uid(0))
            .map(|x| x.id)
            .unwrap();
        assert_eq!(c.live.iter().filter(|x| x.key == Peer::Uid(3)).count(), 15);
        // Users 0, 1 and 2 hold 16 each, user 3 15, the scraper 1: the first of the heaviest
        // in the registry (user 0) gives up its oldest idle connection.
        assert_eq!(evicted(c.admit(Peer::Uid(99))), Some(heavy_oldest));
        assert!(
            c.live.iter().any(|x| x.id == scraper),
            "the scraper keeps its place"
        );
        // Everything mid-scrape: refused.
        for x in &c.live {
            x.busy.store(true, Ordering::Relaxed);
        }
        add(&mut c, Peer::Uid(99), true);
        assert!(c.admit(Peer::Uid(100)).is_none());
    }
}
