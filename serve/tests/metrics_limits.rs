//! `shmfifo metrics` at its limits, in a process of its own (it lowers the descriptor limit):
//! an accept that fails (EMFILE) ended the endpoint; now it serves on.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use shmfifo_serve::metrics::{serve_metrics, MetricsConfig};

fn scrape(addr: std::net::SocketAddr) -> Option<u16> {
    let mut s = TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(
        s,
        "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    out.get(9..12)?.parse().ok()
}

#[test]
fn the_metrics_endpoint_survives_running_out_of_descriptors() {
    let dir = std::env::temp_dir().join(format!("shmfifo-metrics-lim-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let cfg = MetricsConfig {
        addr: "127.0.0.1:0".parse().unwrap(),
        dir: dir.clone(),
        queues: Vec::new(),
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let t = std::thread::spawn(move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(serve_metrics(cfg, move |a| tx.send(a).unwrap(), async {
                let _ = stopped.await;
            }))
    });
    let addr = rx.recv().unwrap();
    assert_eq!(scrape(addr), Some(200));
    // A low descriptor limit, then connections until this process has no descriptor left:
    // the endpoint's accepts of the pending ones fail with EMFILE.
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: plain system calls on this process's own limits.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim), 0);
        let low = libc::rlimit {
            rlim_cur: 256,
            rlim_max: lim.rlim_max,
        };
        assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &low), 0);
    }
    let mut held = Vec::new();
    while let Ok(s) = TcpStream::connect(addr) {
        held.push(s);
        assert!(held.len() < 10_000, "the descriptor limit never bit");
    }
    std::thread::sleep(Duration::from_millis(300));
    drop(held);
    // SAFETY: as above, restoring the limit.
    unsafe {
        assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &lim), 0);
    }
    std::thread::sleep(Duration::from_millis(300));
    assert!(!t.is_finished(), "the endpoint ended: {:?}", t.join());
    assert_eq!(scrape(addr), Some(200), "the endpoint serves on");
    let _ = stop.send(());
    t.join().unwrap().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}
