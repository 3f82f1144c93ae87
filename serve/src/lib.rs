//! `shmfifo serve`: the Amazon SQS API over HTTP on local shmfifo queues.
//!
//! One HTTP/1.1 endpoint speaks both of SQS's wire protocols (JSON, what current SDKs use, and
//! query, what older SDKs and tools use; see [`protocol`]) on a directory of queue files, so
//! every AWS SDK and the `aws` CLI reach local queues with one setting (`--endpoint-url` /
//! `AWS_ENDPOINT_URL`), while processes on the host use the same queues through the library
//! at shared-memory speed. Queue URLs look like SQS's
//! (`http://127.0.0.1:9324/000000000000/orders.fifo`). Long polls wait as futures
//! ([`shmfifo::AsyncQueue`]): no thread per waiting request.
//!
//! Limits: FIFO queues only (a standard queue's CreateQueue is refused with
//! `InvalidParameterValue`); request bodies up to [`Config::max_body`]; signatures accepted
//! as they come unless [`Config::check_signature`] names a key pair.

#![warn(missing_docs)]

pub mod access;
mod actions;
mod conn;
pub mod digest;
pub mod metrics;
pub mod protocol;
pub mod sigv4;

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response};
use serde_json::{Map, Value};

pub use actions::ACCOUNT;
use protocol::{ApiError, Wire};

/// A server's settings.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where to listen (default `127.0.0.1:9324`, as ElasticMQ; port 0 picks a free one).
    /// An address other than a loopback one is refused unless signatures are checked: the
    /// owner of a remote client's socket cannot be known (see [`access`]).
    pub addr: SocketAddr,
    /// The directory of queue files (default `/dev/shm`): `NAME.fifo` there is the queue
    /// `NAME.fifo`, shared with every process that opens that path.
    pub dir: PathBuf,
    /// Check SigV4 signatures against this key pair (default: accept any signature, and act
    /// as the user that owns the client's socket; see [`access`]).
    pub check_signature: Option<sigv4::KeyPair>,
    /// Largest request body accepted, bytes (default 4 MiB: a 1 MiB message, base64-encoded
    /// binary attributes and the JSON around them). A larger one is refused with 413.
    pub max_body: usize,
    /// How long a client may take to send a request's head, from its first byte (default
    /// 10 s); a connection still sending one then is closed.
    pub header_timeout: Duration,
    /// How long a client may take to send a request's body once its head is in (default
    /// 30 s); a slower one is answered 408 and closed.
    pub body_timeout: Duration,
    /// How long a connection may sit with no request and no byte moving (default 30 s)
    /// before it is closed; a long poll in progress is a request, never idle.
    pub idle_timeout: Duration,
    /// Most connections open at once (default: the soft `RLIMIT_NOFILE` less 64 and two for
    /// each queue file the server keeps open, at most 1,024). A connection beyond it is closed at once, and
    /// counted in the log; the server goes on serving the others.
    pub max_connections: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            addr: SocketAddr::from(([127, 0, 0, 1], 9324)),
            dir: PathBuf::from("/dev/shm"),
            check_signature: None,
            max_body: 4 << 20,
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(30),
            max_connections: conn::default_max_connections(),
        }
    }
}

struct Server {
    queues: actions::Queues,
    keys: Option<sigv4::KeyPair>,
    max_body: usize,
    body_timeout: Duration,
    requests: AtomicU64,
    /// Requests being served now, on every connection.
    active: AtomicUsize,
    /// This process's user: whom a signed request acts as.
    own: Arc<access::Identity>,
}

/// Serves until `shutdown` completes; `ready` is told the address once listening.
///
/// Refuses (`InvalidInput`) to listen on an address other than a loopback one without
/// [`Config::check_signature`].
pub async fn serve(
    cfg: Config,
    ready: impl FnOnce(SocketAddr),
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    if cfg.check_signature.is_none() && !cfg.addr.ip().is_loopback() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "refusing to listen on {} without signature checks: a request from another host \
                 carries no user to check the queue files' permissions against, so anyone who \
                 can reach the port would act as this server's user; listen on a loopback \
                 address, or check signatures (--check-signature)",
                cfg.addr
            ),
        ));
    }
    if !cfg.dir.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("{} is not a directory", cfg.dir.display()),
        ));
    }
    // Resolved once (symlinks, `..`, a relative path): the directories whose search
    // permission a request needs are those of the path the kernel walks, which each request
    // walks again by descriptors, following no symlink (`access::walk`).
    let dir = cfg.dir.canonicalize()?;
    // A path another user could change (rename a directory on it, or put another in its
    // place) would take requests, and the paths handed to the library for later (a redrive
    // policy's dead-letter queue, a move task's destination), wherever that user likes.
    let own = access::Identity::of_this_process();
    match access::walk(&own, &dir, Some(&[0, own.uid]))? {
        access::Reach::Walked(_) => {}
        access::Reach::NoSearch => {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!("{}: this user may not search it", dir.display()),
            ))
        }
        access::Reach::Moved(why) => return Err(io::Error::new(io::ErrorKind::NotFound, why)),
        access::Reach::Exposed(why) => {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!(
                    "refusing to serve {}: {why}. The directory served and every one above it \
                     must be owned by root or this server's user, and one others may write \
                     must have the sticky bit (as /dev/shm and /tmp) and hold the path's next \
                     directory under root's or this user's ownership",
                    dir.display()
                ),
            ))
        }
    }
    let listener = tokio::net::TcpListener::bind(cfg.addr).await?;
    let addr = listener.local_addr()?;
    let server = Arc::new(Server {
        queues: actions::Queues::new(dir, addr, own.uid),
        keys: cfg.check_signature.clone(),
        max_body: cfg.max_body,
        body_timeout: cfg.body_timeout,
        requests: AtomicU64::new(0),
        active: AtomicUsize::new(0),
        own: Arc::new(own),
    });
    let trim = tokio::spawn(conn::trim_when_idle(Arc::clone(&server)));
    ready(addr);
    let r = conn::accept_loop(listener, server, &cfg, shutdown).await;
    trim.abort();
    r
}

/// Runs a server on its own runtime until Ctrl-C or SIGTERM, printing
/// `listening on http://ADDR` on stdout once it listens.
pub fn run(cfg: Config) -> io::Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(serve(cfg, announce, stop_signal()))
}

/// Runs a metrics endpoint (see [`metrics`]) until Ctrl-C or SIGTERM, printing
/// `listening on http://ADDR` on stdout once it listens.
pub fn run_metrics(cfg: metrics::MetricsConfig) -> io::Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    rt.block_on(metrics::serve_metrics(cfg, announce, stop_signal()))
}

fn announce(addr: SocketAddr) {
    println!("listening on http://{addr}");
    use std::io::Write as _;
    let _ = std::io::stdout().flush();
}

/// Completes on Ctrl-C or SIGTERM.
async fn stop_signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = async {
            match term.as_mut() {
                Some(t) => {
                    t.recv().await;
                }
                None => std::future::pending().await,
            }
        } => {}
    }
}

impl Server {
    fn request_id(&self) -> String {
        // Relaxed: a unique request number only; it orders nothing.
        let n = self.requests.fetch_add(1, Ordering::Relaxed);
        format!(
            "{:08x}-{:04x}-4000-8000-{:012x}",
            std::process::id(),
            (n >> 48) & 0xffff,
            n & 0xffff_ffff_ffff
        )
    }

    /// Answers one request from a client acting as `who` (`None`: the client's user could
    /// not be found, so only a signed request is served), and logs it at debug level (target
    /// `shmfifo_serve`): request id, method, action (`-` when none was read), status and
    /// duration in milliseconds.
    async fn handle(
        &self,
        req: Request<Incoming>,
        who: Option<Arc<access::Identity>>,
    ) -> Response<Full<Bytes>> {
        let start = std::time::Instant::now();
        let id = self.request_id();
        let method = req.method().clone();
        let mut action = None;
        let r = self.answer(req, who, &id, &mut action).await;
        tracing::debug!(
            request = %id,
            method = %method,
            action = %action.as_deref().unwrap_or("-"),
            status = r.status().as_u16(),
            ms = format_args!("{:.3}", start.elapsed().as_secs_f64() * 1e3),
            "request"
        );
        r
    }

    /// The answer to a body over [`Config::max_body`], declared or arrived.
    fn too_large(&self) -> ApiError {
        ApiError {
            code: "RequestEntityTooLarge".into(),
            message: format!("Request bodies are limited to {} bytes.", self.max_body),
            sender: true,
            status: 413,
        }
    }

    /// [`handle`](Self::handle)'s answer; `action` is set once the request names one.
    async fn answer(
        &self,
        req: Request<Incoming>,
        who: Option<Arc<access::Identity>>,
        id: &str,
        action: &mut Option<String>,
    ) -> Response<Full<Bytes>> {
        let id = id.to_owned();
        let target = req
            .headers()
            .get("x-amz-target")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        // The JSON protocol names its action in a header (`AmazonSQS.SendMessage`).
        *action = target
            .as_deref()
            .map(|t| t.rsplit('.').next().unwrap_or(t).to_owned());
        let wire = if target.is_some() {
            Wire::Json
        } else {
            Wire::Query
        };
        let (parts, body) = req.into_parts();
        // Unsigned from a connection whose owner was not found: refused before its body.
        if self.keys.is_none() && who.is_none() {
            return closing(respond_error(wire, &no_owner(), &id));
        }
        // Signed: refuse a request without a valid key, date and scope before reading its body
        // (its headers, collected once, are checked again with the body below).
        let mut signed = self.keys.as_ref().map(|_| signed_request(&parts, &[]));
        if let (Some(keys), Some(head)) = (&self.keys, &signed) {
            if let Err(e) = keys.check_head(head, std::time::SystemTime::now()) {
                tracing::info!(request = %id, code = e.code, "signature refused before the body");
                return closing(respond_error(wire, &e, &id));
            }
        }
        // A declared length over the limit is refused without holding the body: read and
        // thrown away (within the body timeout), so that a client that sends its whole body
        // before it reads an answer (urllib, botocore) reads the 413 rather than a broken
        // pipe; one declaring more than `DRAIN_FACTOR` times the limit is answered at once.
        // Before, the first `max_body` bytes were collected in memory first. `Limited` still
        // bounds a body whose length is not declared, or declared falsely.
        if let Some(declared) = declared_length(&parts.headers) {
            if declared > self.max_body as u64 {
                if declared <= (self.max_body as u64).saturating_mul(DRAIN_FACTOR) {
                    let mut body = body;
                    let _ = tokio::time::timeout(self.body_timeout, async {
                        while let Some(Ok(_)) = body.frame().await {}
                    })
                    .await;
                }
                return closing(respond_error(wire, &self.too_large(), &id));
            }
        }
        let collected = tokio::time::timeout(
            self.body_timeout,
            Limited::new(body, self.max_body).collect(),
        )
        .await;
        let body = match collected {
            Ok(Ok(b)) => b.to_bytes(),
            Ok(Err(e)) => {
                let err = if e
                    .downcast_ref::<http_body_util::LengthLimitError>()
                    .is_some()
                {
                    self.too_large()
                } else {
                    ApiError::sender(
                        "MalformedInput",
                        format!("The request body could not be read: {e}"),
                    )
                };
                return respond_error(wire, &err, &id);
            }
            Err(_) => {
                let err = ApiError {
                    code: "RequestTimeout".into(),
                    message: format!(
                        "The request body did not arrive within {} s.",
                        self.body_timeout.as_secs_f64()
                    ),
                    sender: true,
                    status: 408,
                };
                return closing(respond_error(wire, &err, &id));
            }
        };
        let who = if let (Some(keys), Some(mut signed)) = (&self.keys, signed.take()) {
            signed.body = &body;
            if let Err(e) = keys.check(&signed, std::time::SystemTime::now()) {
                tracing::info!(request = %id, code = e.code, "signature refused");
                return closing(respond_error(wire, &e, &id));
            }
            Arc::clone(&self.own)
        } else {
            match who {
                Some(w) => w,
                None => return closing(respond_error(wire, &no_owner(), &id)),
            }
        };
        let parsed = match (&target, wire) {
            (Some(t), _) => protocol::from_json(t, &body),
            (None, _) => {
                let form: &[u8] = if body.is_empty() {
                    parts.uri.query().unwrap_or("").as_bytes()
                } else {
                    &body
                };
                protocol::from_query(form).map(|(a, mut p)| {
                    // The query protocol may name the queue by the request path instead.
                    let path = parts.uri.path();
                    if !p.contains_key("QueueUrl") && path.len() > 1 {
                        p.insert("QueueUrl".into(), Value::String(path.to_owned()));
                    }
                    (a, p)
                })
            }
        };
        let (name, params) = match parsed {
            Ok(x) => x,
            Err(e) => {
                tracing::info!(request = %id, code = e.code, "request refused");
                return respond_error(wire, &e, &id);
            }
        };
        // The raw body is parsed: not held through the action (a long poll waits 20 s).
        drop(body);
        *action = Some(name.clone());
        let action = name;
        let host = parts
            .headers
            .get(hyper::header::HOST)
            .and_then(|h| h.to_str().ok());
        match self.queues.run(&action, &params, &who, host).await {
            Ok(result) => respond(wire, &action, &result, &id),
            Err(e) => {
                tracing::info!(request = %id, action, uid = who.uid, code = e.code, status = e.status, "request refused");
                respond_error(wire, &e, &id)
            }
        }
    }
}

/// How many times [`Config::max_body`] a declared body may be and still be read (and thrown
/// away) before its 413: more is answered at once and the connection closed.
const DRAIN_FACTOR: u64 = 4;

/// A request's declared `Content-Length`, where it has one that parses (hyper refuses a
/// request whose length headers disagree or do not parse before it reaches us).
fn declared_length(headers: &hyper::HeaderMap) -> Option<u64> {
    headers
        .get(hyper::header::CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()
}

fn response(status: u16, content_type: &str, id: &str, body: String) -> Response<Full<Bytes>> {
    Response::builder()
        .status(status)
        .header("content-type", content_type)
        .header("x-amzn-requestid", id)
        .body(Full::new(Bytes::from(body)))
        .expect("a valid response")
}

fn respond(
    wire: Wire,
    action: &str,
    result: &Map<String, Value>,
    id: &str,
) -> Response<Full<Bytes>> {
    match wire {
        Wire::Json => response(
            200,
            "application/x-amz-json-1.0",
            id,
            Value::Object(result.clone()).to_string(),
        ),
        Wire::Query => response(200, "text/xml", id, protocol::to_xml(action, result, id)),
    }
}

fn respond_error(wire: Wire, e: &ApiError, id: &str) -> Response<Full<Bytes>> {
    match wire {
        Wire::Json => {
            let mut r = response(
                e.status,
                "application/x-amz-json-1.0",
                id,
                protocol::error_json(e),
            );
            let q = format!(
                "{};{}",
                e.code,
                if e.sender { "Sender" } else { "Receiver" }
            );
            if let Ok(v) = hyper::header::HeaderValue::from_str(&q) {
                r.headers_mut().insert("x-amzn-query-error", v);
            }
            r
        }
        Wire::Query => response(e.status, "text/xml", id, protocol::error_xml(e, id)),
    }
}

/// `AccessDenied` for a connection whose owner was not found (unsigned mode).
fn no_owner() -> ApiError {
    ApiError {
        code: "AccessDenied".into(),
        message:
            "The user that owns this connection could not be found, so no queue is served to it."
                .into(),
        sender: true,
        status: 403,
    }
}

/// The parts of a request a signature covers, with `body`.
fn signed_request<'a>(parts: &'a hyper::http::request::Parts, body: &'a [u8]) -> sigv4::Signed<'a> {
    sigv4::Signed {
        method: parts.method.as_str(),
        path: parts.uri.path(),
        query: parts.uri.query().unwrap_or(""),
        headers: parts
            .headers
            .iter()
            .map(|(k, v)| {
                (
                    k.as_str().to_owned(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect(),
        body,
    }
}

/// `r` with `Connection: close`: a client refused its signature keeps no connection (a client
/// without the key cannot hold one of the server's connections by sending refused requests).
fn closing(mut r: Response<Full<Bytes>>) -> Response<Full<Bytes>> {
    r.headers_mut().insert(
        "connection",
        hyper::header::HeaderValue::from_static("close"),
    );
    r
}
