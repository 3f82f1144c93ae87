//! `shmfifo metrics` at its limits, in a process of its own (it lowers the descriptor limit):
//! an accept that fails (EMFILE) ended the endpoint; now it serves on.

use std::net::TcpStream;
use std::time::Duration;

#[path = "support/metrics_endpoint.rs"]
mod metrics_endpoint;
use metrics_endpoint::{get, Endpoint};

#[test]
fn the_metrics_endpoint_survives_running_out_of_descriptors() {
    let dir = std::env::temp_dir().join(format!("shmfifo-metrics-lim-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ep = Endpoint::start(&dir);
    let addr = ep.addr;
    assert_eq!(get(addr, "/metrics").0, 200);
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
    if !ep.is_running() {
        panic!("the endpoint ended: {:?}", ep.stop());
    }
    assert_eq!(get(addr, "/metrics").0, 200, "the endpoint serves on");
    ep.stop().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}
