//! `shmfifo serve` as a process under load and abuse: parallel clients, slow clients that
//! hold connections, the server stopped (SIGSTOP) and killed (SIGKILL) and restarted while the
//! library uses the same queue, and a descriptor limit reached. Nothing acknowledged is lost,
//! nothing is delivered twice, each group stays in order (R1, D1), and the server never exits
//! on its own.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use shmfifo::{Queue, QueueConfig, ReceiveOptions};

const BIN: &str = env!("CARGO_BIN_EXE_shmfifo");

struct Dir(PathBuf);

impl Dir {
    fn new(tag: &str) -> Dir {
        let p = std::env::temp_dir().join(format!("shmfifo-soak-{tag}-{}", std::process::id()));
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

/// `shmfifo serve` on `port` (0: any) over `dir`, run by `sh -c` after `prefix` (a ulimit);
/// returns the process and its address.
fn start(dir: &Path, port: u16, prefix: &str, extra: &str) -> (Child, SocketAddr) {
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "{prefix} exec '{BIN}' serve --port {port} --dir '{}' {extra}",
            dir.display()
        ))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .trim()
        .trim_start_matches("listening on http://")
        .parse()
        .unwrap_or_else(|_| panic!("serve did not start: {line:?}"));
    (child, addr)
}

/// One JSON-protocol request: the HTTP status, or `None` if the connection failed.
fn call(addr: SocketAddr, action: &str, body: &str) -> Option<(u16, String)> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        s,
        "POST / HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/x-amz-json-1.0\r\nX-Amz-Target: AmazonSQS.{action}\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .ok()?;
    let mut out = Vec::new();
    s.read_to_end(&mut out).ok()?;
    let out = String::from_utf8_lossy(&out).into_owned();
    let status = out.get(9..12)?.parse().ok()?;
    Some((status, out))
}

fn kill(child: &Child, sig: i32) {
    // SAFETY: kill takes a pid and a signal number and touches no memory.
    unsafe { libc::kill(child.id() as i32, sig) };
}

#[test]
fn serve_loses_nothing_under_load_stops_and_kills() {
    let dir = Dir::new("load");
    let q = Queue::create_at(dir.0.join("soak.fifo"), &QueueConfig::new()).unwrap();
    let (first, addr) = start(&dir.0, 0, "", "");
    let server = Arc::new(Mutex::new(first));
    let url = format!("http://{addr}/000000000000/soak.fifo");
    const CLIENTS: usize = 6;
    const PER_CLIENT: usize = 150;
    // Slow clients: half heads that hold connections.
    let slow: Vec<TcpStream> = (0..20)
        .filter_map(|_| {
            let mut s = TcpStream::connect(addr).ok()?;
            s.write_all(b"POST / HTTP/1.1\r\nHost: x\r\n").ok()?;
            Some(s)
        })
        .collect();
    // Producers: each message retried with its dedup id until acknowledged (a send the server
    // died during may have landed; the retry is then a duplicate, dropped: D1).
    let producers: Vec<_> = (0..CLIENTS)
        .map(|c| {
            let url = url.clone();
            std::thread::spawn(move || {
                for k in 0..PER_CLIENT {
                    let body = format!(
                        r#"{{"QueueUrl":"{url}","MessageBody":"c{c}:{k}","MessageGroupId":"c{c}","MessageDeduplicationId":"c{c}-{k}"}}"#
                    );
                    let deadline = Instant::now() + Duration::from_secs(60);
                    loop {
                        match call(addr, "SendMessage", &body) {
                            Some((200, _)) => break,
                            other => {
                                assert!(Instant::now() < deadline, "c{c}:{k} never acknowledged: {other:?}");
                                std::thread::sleep(Duration::from_millis(20));
                            }
                        }
                    }
                }
            })
        })
        .collect();
    // The library consumes the same queue meanwhile.
    let consumer = std::thread::spawn(move || {
        let mut got: HashMap<String, Vec<usize>> = HashMap::new();
        let mut n = 0;
        let deadline = Instant::now() + Duration::from_secs(120);
        while n < CLIENTS * PER_CLIENT && Instant::now() < deadline {
            let ms = q
                .receive(&ReceiveOptions::max(10).wait(Duration::from_millis(200)))
                .unwrap();
            for m in &ms {
                let (g, k) = m.body.split_once(':').unwrap();
                got.entry(g.to_owned())
                    .or_default()
                    .push(k.parse().unwrap());
                q.delete(&m.receipt_handle).unwrap();
                n += 1;
            }
        }
        got
    });
    // Stop the server for a second, then kill it and start another on the same port.
    std::thread::sleep(Duration::from_millis(300));
    kill(&server.lock().unwrap(), libc::SIGSTOP);
    std::thread::sleep(Duration::from_secs(1));
    kill(&server.lock().unwrap(), libc::SIGCONT);
    std::thread::sleep(Duration::from_millis(300));
    {
        let mut s = server.lock().unwrap();
        kill(&s, libc::SIGKILL);
        let _ = s.wait();
        let mut again = None;
        for _ in 0..50 {
            // The port may linger a moment after the kill.
            let (c, a) = start(&dir.0, addr.port(), "", "");
            if a == addr {
                again = Some(c);
                break;
            }
        }
        *s = again.expect("restarted on the same port");
    }
    for p in producers {
        p.join().unwrap();
    }
    let got = consumer.join().unwrap();
    for c in 0..CLIENTS {
        let seq = got.get(&format!("c{c}")).cloned().unwrap_or_default();
        assert_eq!(
            seq,
            (0..PER_CLIENT).collect::<Vec<_>>(),
            "group c{c}: lost, duplicated or reordered"
        );
    }
    drop(slow);
    let mut s = server.lock().unwrap();
    assert!(s.try_wait().unwrap().is_none(), "serve exited on its own");
    kill(&s, libc::SIGTERM);
    let _ = s.wait();
}

/// Under `ulimit -n 1024` the 1,012th connection made `accept` fail and serve exited ("Too
/// many open files"). Now accept's errors are logged and survived: with a descriptor limit far
/// below the connections coming, the server serves again once they are gone.
#[test]
fn serve_survives_running_out_of_descriptors() {
    let dir = Dir::new("emfile");
    let (mut child, addr) = start(&dir.0, 0, "ulimit -n 48;", "--max-connections 1000");
    let conns: Vec<TcpStream> = (0..120)
        .filter_map(|_| TcpStream::connect(addr).ok())
        .collect();
    assert!(conns.len() > 60, "only {} connections made", conns.len());
    std::thread::sleep(Duration::from_millis(800));
    assert!(
        child.try_wait().unwrap().is_none(),
        "serve exited at its descriptor limit"
    );
    drop(conns);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match call(addr, "ListQueues", "{}") {
            Some((200, _)) => break,
            other => {
                assert!(Instant::now() < deadline, "not serving again: {other:?}");
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
    assert!(child.try_wait().unwrap().is_none());
    kill(&child, libc::SIGTERM);
    let _ = child.wait();
}
