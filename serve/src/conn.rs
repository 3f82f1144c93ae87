//! Connections: accepting them within a limit, finding whose they are, and closing those that
//! hold the server without using it (a head or body sent too slowly, an idle keep-alive, a
//! response nobody reads).
//!
//! Every connection runs in its own task beside a watchdog that looks at it every
//! [`tick`]: with no request being served, a connection whose request head started more
//! than [`Config::header_timeout`] ago, or that moved no byte for [`Config::idle_timeout`],
//! is closed. A request's body has [`Config::body_timeout`] (in `Server::handle`). Errors of
//! `accept` (a descriptor limit reached, a connection reset before it was accepted) are
//! logged and survived: the loop pauses briefly and goes on.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

use crate::access::{self, Identity};
use crate::{Config, Server};

/// The default connection limit: the soft `RLIMIT_NOFILE` less 64 (the listener, logs,
/// directories) and two for each queue the server keeps open (`MAX_OPEN_QUEUES`), at least 16
/// and at most 1,024.
pub(crate) fn default_max_connections() -> usize {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `r` is a valid `rlimit` for getrlimit to write.
    let soft = if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } == 0 {
        r.rlim_cur
    } else {
        1024
    };
    let queues = 2 * crate::actions::MAX_OPEN_QUEUES as u64;
    (soft.saturating_sub(64 + queues) as usize).clamp(16, 1024)
}

/// What the watchdog of a connection reads, and its I/O and service write.
struct Watch {
    /// When the watch began: the times below are milliseconds since, plus one (0: never).
    epoch: Instant,
    /// Requests being served on this connection.
    in_flight: AtomicUsize,
    /// When a byte last moved either way.
    last_io: AtomicU64,
    /// When the first byte of a request head arrived while no request was being served.
    head_started: AtomicU64,
}

impl Watch {
    fn now(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64 + 1
    }

    fn moved(&self, reading: bool) {
        let now = self.now();
        // Relaxed (all of Watch): one connection's task and its watchdog share these words
        // as clocks and counts; nothing else is published through them.
        self.last_io.store(now, Ordering::Relaxed);
        if reading
            && self.in_flight.load(Ordering::Relaxed) == 0
            && self.head_started.load(Ordering::Relaxed) == 0
        {
            self.head_started.store(now, Ordering::Relaxed);
        }
    }

    /// Why the connection should close now, if it should.
    fn expired(&self, cfg: &Limits) -> Option<&'static str> {
        // Relaxed: see `moved`.
        if self.in_flight.load(Ordering::Relaxed) > 0 {
            return None;
        }
        let now = self.now();
        let head = self.head_started.load(Ordering::Relaxed);
        if head != 0 && now.saturating_sub(head) > cfg.header_ms {
            return Some("request head not sent in time");
        }
        let last = self.last_io.load(Ordering::Relaxed);
        if now.saturating_sub(last) > cfg.idle_ms {
            return Some("idle");
        }
        None
    }
}

#[derive(Clone, Copy)]
struct Limits {
    header_ms: u64,
    idle_ms: u64,
}

/// The watchdog's period: a quarter of the shortest timeout, within 10 ms and 1 s.
fn tick(cfg: &Config) -> Duration {
    (cfg.header_timeout.min(cfg.idle_timeout) / 4)
        .clamp(Duration::from_millis(10), Duration::from_secs(1))
}

/// A stream that tells its [`Watch`] when bytes move.
struct Watched {
    inner: TcpStream,
    watch: Arc<Watch>,
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(r, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.watch.moved(true);
        }
        r
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, buf);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            self.watch.moved(false);
        }
        r
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// Counts a request in flight on its connection and in the server while it lives, and
/// restarts the connection's head timer when it ends.
struct InFlight {
    watch: Arc<Watch>,
    server: Arc<Server>,
}

impl InFlight {
    fn new(watch: Arc<Watch>, server: Arc<Server>) -> Self {
        // Relaxed: counts read by the watchdog and the trimmer, which publish nothing.
        watch.in_flight.fetch_add(1, Ordering::Relaxed);
        watch.head_started.store(0, Ordering::Relaxed);
        server.active.fetch_add(1, Ordering::Relaxed);
        InFlight { watch, server }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        // Relaxed: as in `new`.
        self.server.active.fetch_sub(1, Ordering::Relaxed);
        self.watch.head_started.store(0, Ordering::Relaxed);
        self.watch.in_flight.fetch_sub(1, Ordering::Relaxed);
        self.watch.moved(false);
    }
}

/// Accepts connections until `shutdown` completes.
pub(crate) async fn accept_loop(
    listener: TcpListener,
    server: Arc<Server>,
    cfg: &Config,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    let local = listener.local_addr()?;
    let permits = Arc::new(Semaphore::new(cfg.max_connections.max(1)));
    let limits = Limits {
        header_ms: cfg.header_timeout.as_millis() as u64,
        idle_ms: cfg.idle_timeout.as_millis() as u64,
    };
    let period = tick(cfg);
    let signed = cfg.check_signature.is_some();
    let mut refused: u64 = 0;
    let per_peer: PerPeer = Arc::default();
    let mut last_refusal_log: Option<Instant> = None;
    tokio::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            r = listener.accept() => r,
            () = &mut shutdown => return Ok(()),
        };
        let (stream, peer) = match accepted {
            Ok(x) => x,
            Err(e) => {
                // EMFILE, ENFILE, ENOBUFS, ECONNABORTED …: the listener is still good. Pause
                // so that a descriptor limit is not a busy loop, then go on.
                tracing::warn!(error = %e, "accept failed; serving on");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        // A remote peer (signed mode) holds at most a quarter of the connections: one host
        // cannot take them all. Loopback peers are every local user at once: each user's
        // share is taken once the connection's owner is known (`serve_connection`).
        let share = (!access::is_loopback(peer)).then(|| {
            PeerShare::take(
                &per_peer,
                ShareKey::Addr(share_key(peer.ip())),
                cfg.max_connections,
            )
        });
        let share = match share {
            Some(None) => {
                refused += 1;
                drop(stream);
                continue;
            }
            Some(Some(s)) => Some(s),
            None => None,
        };
        let Ok(permit) = Arc::clone(&permits).try_acquire_owned() else {
            refused += 1;
            if last_refusal_log.is_none_or(|t| t.elapsed() > Duration::from_secs(5)) {
                tracing::warn!(
                    peer = %peer,
                    limit = cfg.max_connections,
                    refused_so_far = refused,
                    "connection limit reached; closing new connections"
                );
                last_refusal_log = Some(Instant::now());
            }
            drop(stream);
            continue;
        };
        let _ = stream.set_nodelay(true);
        let server = Arc::clone(&server);
        let users =
            (share.is_none() && !signed).then(|| (Arc::clone(&per_peer), cfg.max_connections));
        tokio::spawn(async move {
            let _permit = permit;
            let _share = share;
            serve_connection(stream, peer, local, server, limits, period, signed, users).await;
        });
    }
}

/// Whether TCP socket `s` is established or half-closed by its peer (`TCP_INFO`'s state).
pub(crate) fn still_connected(s: &TcpStream) -> bool {
    use std::os::fd::AsRawFd;
    // SAFETY: `tcp_info` is a plain C struct of integers, valid all zeros.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: `getsockopt` writes at most `len` bytes into `info`, which has that many, on a
    // descriptor `s` owns for the call.
    let rc = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        )
    };
    // 1: TCP_ESTABLISHED, 8: TCP_CLOSE_WAIT.
    rc == 0 && matches!(info.tcpi_state, 1 | 8)
}

/// The address a remote peer's connections are counted under: an IPv6 address's /64 (one
/// host commonly holds a whole /64), an IPv4 address itself (IPv4-mapped ones as IPv4).
pub(crate) fn share_key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(std::net::Ipv6Addr::from(
                u128::from(v6) & !u128::from(u64::MAX),
            )),
        },
    }
}

/// Whom a connection is counted under: a remote address ([`share_key`]), or the local user
/// that owns a loopback client's socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum ShareKey {
    Addr(IpAddr),
    Uid(u32),
    /// Loopback connections whose owner was not found (gone before the lookup, or the lookup
    /// timed out): one share for them all.
    Unknown,
}

/// Connections open per remote address and per local user.
type PerPeer = Arc<std::sync::Mutex<std::collections::HashMap<ShareKey, usize>>>;

/// One connection of a remote address or a local user, counted while it lives.
struct PeerShare {
    per_peer: PerPeer,
    key: ShareKey,
}

impl PeerShare {
    /// Counts a connection of `key` if it holds fewer than a quarter of `max` (at least 1).
    fn take(per_peer: &PerPeer, key: ShareKey, max: usize) -> Option<PeerShare> {
        let mut m = per_peer.lock().expect("per-peer counts");
        let n = m.entry(key).or_insert(0);
        if *n >= (max / 4).max(1) {
            return None;
        }
        *n += 1;
        Some(PeerShare {
            per_peer: Arc::clone(per_peer),
            key,
        })
    }
}

impl Drop for PeerShare {
    fn drop(&mut self) {
        let mut m = self.per_peer.lock().expect("per-peer counts");
        if let Some(n) = m.get_mut(&self.key) {
            *n -= 1;
            if *n == 0 {
                m.remove(&self.key);
            }
        }
    }
}

/// How many connections' owners are looked up at once: each lookup reads the kernel's socket
/// tables on a blocking thread, so a burst of new connections (50 clients connecting at once)
/// takes at most this many blocking threads, not one each; the others wait their turn (a
/// lookup takes well under a millisecond).
const OWNER_LOOKUPS: usize = 4;

/// The longest an owner lookup may take, its turn included (one takes well under a
/// millisecond).
const OWNER_LOOKUP_TIMEOUT: Duration = Duration::from_secs(5);

/// Bounds the owner lookups running at once (see [`OWNER_LOOKUPS`]).
static LOOKUPS: Semaphore = Semaphore::const_new(OWNER_LOOKUPS);

/// The user a connection's requests act as, when signatures are not checked.
async fn whose(peer: SocketAddr, local: SocketAddr) -> Option<Arc<Identity>> {
    if !access::is_loopback(peer) {
        return None;
    }
    // Bounded: a lookup that cannot get its turn or a blocking thread in time (the pool busy)
    // refuses the connection rather than holding its slot.
    let found = access::peer_uid_bounded(
        &LOOKUPS,
        OWNER_LOOKUP_TIMEOUT,
        peer,
        local,
        Identity::of_uid,
    )
    .await;
    if found.is_none() {
        tracing::warn!(peer = %peer, "the owner of a connection was not found; it is refused");
    }
    found.map(Arc::new)
}

// The connection's parts, its limits and its share (one argument each, as the accept loop
// hands them over).
#[allow(clippy::too_many_arguments)]
async fn serve_connection(
    stream: TcpStream,
    peer: SocketAddr,
    local: SocketAddr,
    server: Arc<Server>,
    limits: Limits,
    period: Duration,
    signed: bool,
    users: Option<(PerPeer, usize)>,
) {
    let who = if signed {
        None
    } else {
        // Our end still connected after the lookup: no other socket can have held the client's
        // address pair meanwhile (a client that reset its connection leaves the pair free).
        whose(peer, local).await.filter(|_| {
            let live = still_connected(&stream);
            if !live {
                tracing::warn!(peer = %peer, "the connection ended during its owner lookup; refused");
            }
            live
        })
    };
    // A local user holds at most a quarter of the connections, as a remote address does: one
    // user holding connections open cannot shut the others out. Not root nor the server's own
    // user (the operator's: a server of one user serves all its clients).
    // Connections whose owner is unknown (answered AccessDenied only) share one quarter.
    let key = match &who {
        Some(id) if id.uid == 0 || id.uid == server.own.uid => None,
        Some(id) => Some(ShareKey::Uid(id.uid)),
        None => Some(ShareKey::Unknown),
    };
    let _share = match (&users, key) {
        (Some((per_peer, max)), Some(key)) => match PeerShare::take(per_peer, key, *max) {
            Some(s) => Some(s),
            None => {
                tracing::debug!(peer = %peer, ?key, "this user holds a quarter of the connections; closing its new one");
                return;
            }
        },
        _ => None,
    };
    let watch = Arc::new(Watch {
        epoch: Instant::now(),
        in_flight: AtomicUsize::new(0),
        last_io: AtomicU64::new(1),
        head_started: AtomicU64::new(0),
    });
    let io = Watched {
        inner: stream,
        watch: Arc::clone(&watch),
    };
    let svc = {
        let watch = Arc::clone(&watch);
        hyper::service::service_fn(move |req| {
            let (server, who) = (Arc::clone(&server), who.clone());
            let guard = InFlight::new(Arc::clone(&watch), Arc::clone(&server));
            async move {
                let r = server.handle(req, who).await;
                drop(guard);
                Ok::<_, Infallible>(r)
            }
        })
    };
    // A client that goes away mid-request drops its request's future: a long poll then has
    // taken nothing; messages already taken stay in flight until their visibility timeout,
    // as on SQS.
    let conn = hyper::server::conn::http1::Builder::new()
        .max_buf_size(MAX_HEAD)
        .serve_connection(hyper_util::rt::TokioIo::new(io), svc);
    tokio::pin!(conn);
    let mut ticks = tokio::time::interval(period);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = conn.as_mut() => return,
            _ = ticks.tick() => {
                if let Some(why) = watch.expired(&limits) {
                    tracing::debug!(peer = %peer, why, "closing connection");
                    return;
                }
            }
        }
    }
}

/// The largest request head read, bytes: hyper's read buffer (a longer head is answered 431
/// and the connection closed). hyper's own bound on a request line's URI is 64 KiB (414), so
/// a query-protocol GET loses nothing by it; hyper's default buffer took heads of 400 KiB.
/// A body is read through the same buffer in pieces, and bounded by `max_body` alone.
pub(crate) const MAX_HEAD: usize = 72 << 10;

/// Hands memory freed after a burst back to the system: glibc's allocator keeps a thread's
/// freed blocks for that thread (a burst of 10,000 requests left ~290 MiB resident). Once a
/// second, if requests were served since the last look and none is being served now,
/// `malloc_trim(0)` returns the free pages of every arena.
pub(crate) async fn trim_when_idle(server: Arc<Server>) {
    let mut seen = 0u64;
    let mut ticks = tokio::time::interval(Duration::from_secs(1));
    loop {
        ticks.tick().await;
        // Relaxed: counters; a trim at a slightly wrong moment costs a little time only.
        let n = server.requests.load(Ordering::Relaxed);
        if n == seen || server.active.load(Ordering::Relaxed) > 0 {
            continue;
        }
        seen = n;
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        let _ = tokio::task::spawn_blocking(|| {
            // SAFETY: malloc_trim only walks the allocator's own free lists; any thread may
            // call it at any time.
            unsafe { libc::malloc_trim(0) };
        })
        .await;
    }
}

#[cfg(test)]
mod peer_share_tests {
    use super::*;

    /// A remote address holds at most a quarter of the connections; a closed one frees its
    /// share; another address has its own.
    #[test]
    fn a_remote_address_holds_at_most_a_quarter_of_the_connections() {
        let per_peer: PerPeer = Arc::default();
        let key = |ip: &str| ShareKey::Addr(share_key(ip.parse().unwrap()));
        let (a, b) = (key("192.0.2.1"), key("192.0.2.2"));
        let held: Vec<PeerShare> = (0..4)
            .map(|_| PeerShare::take(&per_peer, a, 16).expect("under the share"))
            .collect();
        assert!(PeerShare::take(&per_peer, a, 16).is_none());
        let other = PeerShare::take(&per_peer, b, 16);
        assert!(other.is_some());
        drop(held);
        assert!(PeerShare::take(&per_peer, a, 16).is_some());
        drop(other);
        assert!(
            per_peer.lock().unwrap().get(&b).is_none(),
            "no count left behind"
        );
        // An IPv6 /64 is one peer; another /64 another.
        let (x, y, z) = (
            key("2001:db8::1"),
            key("2001:db8::ffff:2"),
            key("2001:db8:0:1::1"),
        );
        let held: Vec<PeerShare> = (0..4)
            .map(|i| PeerShare::take(&per_peer, if i % 2 == 0 { x } else { y }, 16).unwrap())
            .collect();
        assert!(PeerShare::take(&per_peer, y, 16).is_none());
        assert!(PeerShare::take(&per_peer, z, 16).is_some());
        drop(held);
    }

    /// A local user (the owner of a loopback client's socket) holds at most a quarter of the
    /// connections, as a remote address does: one user holding connections open could shut
    /// every other user out of a shared serve. Users are counted apart from addresses.
    #[test]
    fn a_local_user_holds_at_most_a_quarter_of_the_connections() {
        let per_peer: PerPeer = Arc::default();
        let held: Vec<PeerShare> = (0..2)
            .map(|_| PeerShare::take(&per_peer, ShareKey::Uid(65534), 8).unwrap())
            .collect();
        assert!(PeerShare::take(&per_peer, ShareKey::Uid(65534), 8).is_none());
        assert!(PeerShare::take(&per_peer, ShareKey::Uid(0), 8).is_some());
        drop(held);
        assert!(PeerShare::take(&per_peer, ShareKey::Uid(65534), 8).is_some());
    }
}
