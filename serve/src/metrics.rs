//! `shmfifo metrics --listen ADDR`: every queue of a directory (or a list) at `/metrics`, in
//! Prometheus's text format (the prometheus-client crate's encoder), with CloudWatch's SQS
//! metric names beside shmfifo's own. Each scrape observes the queues (`Queue::observe`:
//! read-only, no participant registered), so scraping never changes a queue and works on a
//! queue whose participant slots are all taken.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
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
}

impl Default for MetricsConfig {
    fn default() -> Self {
        MetricsConfig {
            addr: SocketAddr::from(([127, 0, 0, 1], 9325)),
            dir: PathBuf::from("/dev/shm"),
            queues: Vec::new(),
        }
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

/// The most bytes of a bridge's status file read.
const MAX_STATUS_BYTES: u64 = 4 << 20;

/// The bytes of the bridge status file `status` of the queue at `queue`, if it is a regular
/// file (no symlink followed, no FIFO waited on) of at most [`MAX_STATUS_BYTES`], owned by
/// this process's user or the queue file's owner (not one another user planted beside it).
fn read_status_file(status: &std::path::Path, queue: &std::path::Path) -> Option<Vec<u8>> {
    use std::io::Read;
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(status)
        .ok()?;
    let m = f.metadata().ok()?;
    // SAFETY: geteuid cannot fail and touches no memory of ours.
    let me = unsafe { libc::geteuid() };
    let queue_owner = std::fs::symlink_metadata(queue).ok().map(|q| q.uid());
    if !m.is_file() || m.len() > MAX_STATUS_BYTES || (m.uid() != me && Some(m.uid()) != queue_owner)
    {
        return None;
    }
    let mut b = Vec::new();
    f.take(MAX_STATUS_BYTES).read_to_end(&mut b).ok()?;
    Some(b)
}

/// One scrape: the text exposition of every queue.
pub fn scrape(cfg: &MetricsConfig) -> String {
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
    let groups = gauge(
        &mut reg,
        "shmfifo_active_groups",
        "Message groups with messages",
    );
    let group_cap = gauge(
        &mut reg,
        "shmfifo_group_capacity",
        "Message groups the group table holds now, before it adds a table",
    );
    let participants = gauge(
        &mut reg,
        "shmfifo_participants",
        "Processes with the queue open",
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
        "Messages the remote queue refused",
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
    for (name, path) in queues(cfg) {
        let l = QueueLabel {
            queue: label_value(&name),
        };
        let o = match Queue::observe_at(&path) {
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
        // The bridge's counters (`shmfifo bridge` keeps them in PATH.bridge.json).
        let mut status = path.clone().into_os_string();
        status.push(".bridge.json");
        if let Some(v) = read_status_file(std::path::Path::new(&status), &path)
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        {
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

/// The queues to scrape: `(label, path)`.
fn queues(cfg: &MetricsConfig) -> Vec<(String, PathBuf)> {
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
                (q.clone(), p)
            })
            .collect();
    }
    let mut v: Vec<(String, PathBuf)> = std::fs::read_dir(&cfg.dir)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .map(|e| (e.file_name().to_string_lossy().into_owned(), e.path()))
        .collect();
    v.sort();
    v
}

/// Serves `/metrics` until `shutdown` completes; `ready` is told the address.
pub async fn serve_metrics(
    cfg: MetricsConfig,
    ready: impl FnOnce(SocketAddr),
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    let listener = tokio::net::TcpListener::bind(cfg.addr).await?;
    ready(listener.local_addr()?);
    let cfg = Arc::new(cfg);
    let conns = Arc::new(std::sync::Mutex::new(Conns::default()));
    tokio::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            r = listener.accept() => r,
            () = &mut shutdown => return Ok(()),
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(e) => {
                // EMFILE, ENFILE, ECONNABORTED …: the listener is still good. Pause so that a
                // descriptor limit is not a busy loop, then serve on.
                tracing::warn!(error = %e, "metrics: accept failed; serving on");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        // At the limit, the connection that has waited longest without a request in progress
        // (idle, or still sending its request head) is closed to make room: one local client
        // holding every connection open no longer shuts scrapers out. Past the limit with
        // every connection mid-request, the new one is closed at once.
        let busy = Arc::new(std::sync::atomic::AtomicBool::new(false));
        // Held until the new connection is listed: its task's `Gone` (which takes the lock)
        // then always finds it, however soon the task ends.
        let mut c = conns.lock().unwrap_or_else(|e| e.into_inner());
        if c.live.len() >= METRICS_CONNECTIONS && !c.evict_idle() {
            continue;
        }
        c.next += 1;
        let id = c.next;
        let cfg = Arc::clone(&cfg);
        let task_busy = Arc::clone(&busy);
        let task_conns = Arc::clone(&conns);
        let task = tokio::spawn(async move {
            // Forgets this connection however the task ends (done, timed out, aborted).
            let _gone = Gone(task_conns, id);
            let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
                let cfg = Arc::clone(&cfg);
                let busy = Arc::clone(&task_busy);
                async move {
                    // Relaxed: read by the accept loop under the registry's lock only to pick
                    // an idle connection to close; a stale value closes a connection early or
                    // late, never wrongly serves one.
                    busy.store(true, std::sync::atomic::Ordering::Relaxed);
                    let r = if req.uri().path() == "/metrics" {
                        // At most `SCRAPES` at once, each holding its turn until its blocking
                        // read ends (a connection's timeout does not stop it).
                        let body = match SCRAPE_TURNS.acquire().await {
                            Ok(turn) => tokio::task::spawn_blocking(move || {
                                let _turn = turn;
                                scrape(&cfg)
                            })
                            .await
                            .unwrap_or_default(),
                            Err(_) => String::new(),
                        };
                        Response::builder()
                            .header(
                                "content-type",
                                "application/openmetrics-text; version=1.0.0; charset=utf-8",
                            )
                            .body(Full::new(Bytes::from(body)))
                    } else {
                        Response::builder()
                            .status(404)
                            .body(Full::new(Bytes::from_static(b"see /metrics\n")))
                    };
                    // Relaxed: as above.
                    busy.store(false, std::sync::atomic::Ordering::Relaxed);
                    Ok::<_, Infallible>(r.expect("a valid response"))
                }
            });
            // A connection lives at most `METRICS_CONNECTION_LIFE` (a scraper reconnects):
            // one that sends nothing, or a byte at a time, holds its place no longer.
            let conn = hyper::server::conn::http1::Builder::new()
                .serve_connection(hyper_util::rt::TokioIo::new(stream), svc);
            let _ = tokio::time::timeout(METRICS_CONNECTION_LIFE, conn).await;
        });
        c.live.push_back(Conn {
            id,
            busy,
            abort: task.abort_handle(),
        });
    }
}

/// The metrics endpoint's open connections, oldest first.
#[derive(Default)]
struct Conns {
    live: std::collections::VecDeque<Conn>,
    next: u64,
}

struct Conn {
    id: u64,
    /// A request is being answered.
    busy: Arc<std::sync::atomic::AtomicBool>,
    abort: tokio::task::AbortHandle,
}

impl Conns {
    /// Closes the oldest connection with no request in progress; whether there was one.
    fn evict_idle(&mut self) -> bool {
        // Relaxed: see where `busy` is stored.
        let Some(k) = self
            .live
            .iter()
            .position(|c| !c.busy.load(std::sync::atomic::Ordering::Relaxed))
        else {
            return false;
        };
        if let Some(c) = self.live.remove(k) {
            c.abort.abort();
        }
        true
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

/// Scrapes running at once (each on a blocking thread, reading every queue's header).
const SCRAPES: usize = 4;

/// Bounds the scrapes running at once (see [`SCRAPES`]).
static SCRAPE_TURNS: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(SCRAPES);

/// Connections the metrics endpoint serves at once.
const METRICS_CONNECTIONS: usize = 64;

/// How long one connection to the metrics endpoint may last, its requests included.
const METRICS_CONNECTION_LIFE: std::time::Duration = std::time::Duration::from_secs(30);
