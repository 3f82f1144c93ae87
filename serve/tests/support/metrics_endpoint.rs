//! A `shmfifo metrics` endpoint on a thread of its own for the tests, and one scrape of it.

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::path::Path;
use std::thread::JoinHandle;
use std::time::Duration;

use shmfifo_serve::metrics::{serve_metrics, MetricsConfig};

/// An endpoint serving every queue of a directory on a free loopback port.
pub struct Endpoint {
    pub addr: SocketAddr,
    stop: tokio::sync::oneshot::Sender<()>,
    thread: JoinHandle<std::io::Result<()>>,
}

impl Endpoint {
    /// Starts an endpoint for the queues of `dir` that scrapes anew for every request (the
    /// tests look at what changed between two scrapes).
    pub fn start(dir: &Path) -> Endpoint {
        Endpoint::start_reusing(dir, Duration::ZERO)
    }

    /// Starts an endpoint for the queues of `dir` that serves a viewer's scrape again for
    /// `reuse` ([`MetricsConfig::reuse`]).
    #[allow(dead_code)]
    pub fn start_reusing(dir: &Path, reuse: Duration) -> Endpoint {
        Endpoint::start_cfg(MetricsConfig {
            addr: "127.0.0.1:0".parse().unwrap(),
            dir: dir.to_owned(),
            queues: Vec::new(),
            public: false,
            reuse,
        })
    }

    /// Starts an endpoint for the queues `names` of `dir` only.
    #[allow(dead_code)]
    pub fn start_named(dir: &Path, names: &[&str]) -> Endpoint {
        Endpoint::start_cfg(MetricsConfig {
            addr: "127.0.0.1:0".parse().unwrap(),
            dir: dir.to_owned(),
            queues: names.iter().map(|n| (*n).to_owned()).collect(),
            public: false,
            reuse: Duration::ZERO,
        })
    }

    fn start_cfg(cfg: MetricsConfig) -> Endpoint {
        let (tx, rx) = std::sync::mpsc::channel();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap()
                .block_on(serve_metrics(cfg, move |a| tx.send(a).unwrap(), async {
                    let _ = stopped.await;
                }))
        });
        Endpoint {
            addr: rx.recv().unwrap(),
            stop,
            thread,
        }
    }

    /// Whether it still serves (its thread has not ended).
    #[allow(dead_code)]
    pub fn is_running(&self) -> bool {
        !self.thread.is_finished()
    }

    /// Stops it; what it ended with.
    pub fn stop(self) -> std::io::Result<()> {
        let _ = self.stop.send(());
        self.thread.join().unwrap()
    }
}

/// One GET of `path` on a connection of its own, answered within 10 s: the status and the
/// whole response.
pub fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).expect("an answer within 10 s");
    let status = out[9..12].parse().unwrap();
    (status, out)
}
