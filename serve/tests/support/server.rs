//! The test servers of serve's integration tests: a temporary directory, a server on its own
//! runtime, and requests in both wire protocols on a new connection each.
// Each test crate uses what it needs of these.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

use shmfifo_serve::Config;

/// A temporary directory, removed on drop.
pub struct Dir(pub PathBuf);

impl Dir {
    pub fn new(tag: &str) -> Dir {
        let p = std::env::temp_dir().join(format!(
            "shmfifo-serve-{tag}-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        Dir(p)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A server on its own runtime, stopped on drop.
pub struct Server {
    pub addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<std::io::Result<()>>>,
}

impl Server {
    pub fn start(cfg: Config) -> Server {
        let (tx, rx) = std::sync::mpsc::channel();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(shmfifo_serve::serve(
                cfg,
                move |addr| tx.send(addr).unwrap(),
                async {
                    let _ = stopped.await;
                },
            ))
        });
        let addr = rx.recv_timeout(Duration::from_secs(30)).unwrap();
        Server {
            addr,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    pub fn url(&self, name: &str) -> String {
        format!("http://{}/000000000000/{name}", self.addr)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

pub fn config(dir: &Path) -> Config {
    Config {
        addr: "127.0.0.1:0".parse().unwrap(),
        dir: dir.to_owned(),
        ..Default::default()
    }
}

/// One HTTP/1.1 exchange on a new connection: (status, headers and body as text).
pub fn exchange(addr: SocketAddr, raw: &[u8]) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s.write_all(raw).unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).unwrap();
    let out = String::from_utf8_lossy(&out).into_owned();
    let status = out.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, out)
}

pub fn post_form(addr: SocketAddr, form: &str) -> (u16, String) {
    exchange(
        addr,
        format!(
            "POST / HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n{form}",
            form.len()
        )
        .as_bytes(),
    )
}

pub fn post_json(addr: SocketAddr, action: &str, body: &str) -> (u16, String) {
    exchange(
        addr,
        format!(
            "POST / HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/x-amz-json-1.0\r\nX-Amz-Target: AmazonSQS.{action}\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .as_bytes(),
    )
}
