//! What the bridge checks before its first message: a remote that does not answer, a local
//! far end that would let a resend through, a queue bridged into itself. Each was a run that
//! went on (retrying for ever, or forwarding onto its own tail) or a duplicate over a kill.

mod common;

use std::process::Command;

use common::{aws_env, Dir};
use shmfifo::{Deduplication, Queue, QueueConfig, SendMessage};

const BIN: &str = env!("CARGO_BIN_EXE_shmfifo-bridge");

fn outbox(dir: &Dir) -> (std::path::PathBuf, Queue) {
    let path = dir.0.join("outbox");
    let q = Queue::create_at(&path, &QueueConfig::new()).unwrap();
    q.send(&SendMessage::new("g", "m").dedup_id("1")).unwrap();
    (path, q)
}

/// A URL whose endpoint refuses connections was retried for ever (`sqs://` of the same
/// failed at once, at its GetQueueUrl). Now the remote is asked once before the local queue
/// is joined: exit 41, the reason in words (not the SDK's debug dump), and the local queue
/// untouched (its message visible, no participant left for the next opener to repair).
#[test]
fn a_remote_that_does_not_answer_at_start_ends_the_bridge_before_the_local_queue_is_joined() {
    aws_env();
    let dir = Dir::new("bridge-start-unreachable");
    let (path, q) = outbox(&dir);
    // A port nothing listens on: bound, then closed.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}/000000000000/inbox.fifo");
    let out = within_a_minute(Command::new(BIN).arg(&path).arg(&url).arg("--until-empty"));
    assert_eq!(out.status.code(), Some(41), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("did not answer") && err.contains("Connection refused"),
        "{err}"
    );
    assert!(!err.contains("DispatchFailure {"), "{err}");
    let a = q.attributes();
    assert_eq!(a.approximate_number_of_messages, 1, "left visible");
    assert_eq!(a.approximate_number_of_messages_not_visible, 0);
    let dead = q
        .inspect(0)
        .unwrap()
        .participants
        .iter()
        .filter(|p| !p.alive)
        .count();
    assert_eq!(dead, 0, "none left dead");
    // Asked before the local queue is opened: a local queue that is not there is not reached.
    let out = within_a_minute(Command::new(BIN).arg(dir.0.join("missing")).arg(&url));
    assert_eq!(out.status.code(), Some(41), "{out:?}");
}

/// `cmd`'s output, failing the test if it runs past a minute (a bridge retrying for ever).
fn within_a_minute(cmd: &mut Command) -> std::process::Output {
    let mut child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > std::time::Duration::from_secs(60) {
            let _ = child.kill();
            panic!("still running after a minute");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// Exactly-once over a kill rests on the far end dropping the resend: a local far end that
/// kept dedup ids 1 s (or none) got duplicates. Refused as usage (2), the local queue untouched;
/// a far end keeping them longer than the visibility timeout is taken.
#[test]
fn a_local_far_end_that_forgets_ids_before_a_resend_is_refused() {
    let dir = Dir::new("bridge-start-dedup");
    let (path, q) = outbox(&dir);
    let short = dir.0.join("short");
    Queue::create_at(
        &short,
        &QueueConfig::new().deduplication_interval(std::time::Duration::from_secs(1)),
    )
    .unwrap();
    let off = dir.0.join("off");
    Queue::create_at(&off, &QueueConfig::new().deduplication(Deduplication::Off)).unwrap();
    let run = |far: &std::path::Path, vt: &str| {
        Command::new(BIN)
            .arg(&path)
            .arg(format!("shm:{}", far.display()))
            .args(["--until-empty", "--visibility-timeout", vt])
            .output()
            .unwrap()
    };
    let out = run(&short, "30");
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("keeps deduplication ids 1 s"));
    let out = run(&off, "30");
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("deduplication is off"));
    assert_eq!(q.attributes().approximate_number_of_messages, 1);
    let long = dir.0.join("long");
    let far = Queue::create_at(
        &long,
        &QueueConfig::new().deduplication_interval(std::time::Duration::from_secs(60)),
    )
    .unwrap();
    // 60 s against 30 s and the margin: taken.
    let out = run(&long, "30");
    assert!(out.status.success(), "{out:?}");
    assert_eq!(far.attributes().approximate_number_of_messages, 1);
    // 60 s against 55 s and the margin: refused.
    q.send(&SendMessage::new("g", "n").dedup_id("2")).unwrap();
    let out = run(&long, "55");
    assert_eq!(out.status.code(), Some(2), "{out:?}");
}

/// A queue bridged into itself (`shm:` naming the local queue's own file) forwarded each
/// message onto its own tail, for ever without `--until-empty`. Usage (2).
#[test]
fn a_queue_bridged_into_itself_is_refused() {
    let dir = Dir::new("bridge-start-self");
    let (path, q) = outbox(&dir);
    let out = Command::new(BIN)
        .arg(&path)
        .arg(format!("shm:{}", path.display()))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("itself"));
    assert_eq!(q.attributes().approximate_number_of_messages, 1);
}

/// A least-privilege role may send and not read attributes: the start's `GetQueueAttributes`
/// answered `AccessDenied` must not end a bridge that would have worked. A stand-in endpoint
/// denies that one action and records the actions asked; the bridge goes on to send.
#[test]
fn a_role_that_may_not_read_attributes_still_bridges() {
    aws_env();
    let dir = Dir::new("bridge-start-denied");
    let (path, _q) = outbox(&dir);
    let (port, asked) = stand_in(|target| {
        if target == "getqueueattributes" {
            (
                400,
                r#"{"__type":"com.amazon.coral.service#AccessDeniedException","message":"not allowed"}"#,
            )
        } else {
            (500, r#"{"__type":"InternalError","message":"try again"}"#)
        }
    });
    let mut child = Command::new(BIN)
        .arg(&path)
        .arg(format!("http://127.0.0.1:{port}/000000000000/inbox.fifo"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    let sent = loop {
        if asked
            .lock()
            .unwrap()
            .iter()
            .any(|a| a == "sendmessagebatch")
        {
            break true;
        }
        if child.try_wait().unwrap().is_some() || start.elapsed().as_secs() > 60 {
            break false;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let exited = child.try_wait().unwrap();
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        sent,
        "no send after the denied GetQueueAttributes: exited {exited:?}, asked {:?}",
        asked.lock().unwrap()
    );
    assert_eq!(asked.lock().unwrap()[0], "getqueueattributes");
}

/// A stand-in SQS endpoint (JSON protocol) on a free port: each request answered
/// `answer(action)` (the action's name in lower case, `getqueueattributes`), the actions asked
/// recorded in order.
#[allow(clippy::type_complexity)]
fn stand_in(
    answer: impl Fn(&str) -> (u16, &'static str) + Send + Sync + 'static,
) -> (u16, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    use std::io::{BufRead, BufReader, Read, Write};
    use std::sync::{Arc, Mutex};
    let answer = Arc::new(answer);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let asked = Arc::new(Mutex::new(Vec::<String>::new()));
    {
        let asked = Arc::clone(&asked);
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { return };
                let (asked, answer) = (Arc::clone(&asked), Arc::clone(&answer));
                std::thread::spawn(move || loop {
                    // One request: its head, then its body by Content-Length.
                    let mut r = BufReader::new(conn.try_clone().unwrap());
                    let (mut target, mut len) = (String::new(), 0usize);
                    loop {
                        let mut line = String::new();
                        if r.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        let l = line.trim_end().to_ascii_lowercase();
                        if l.is_empty() {
                            break;
                        }
                        if let Some(v) = l.strip_prefix("x-amz-target:") {
                            target = v.trim().rsplit('.').next().unwrap_or("").to_owned();
                        }
                        if let Some(v) = l.strip_prefix("content-length:") {
                            len = v.trim().parse().unwrap_or(0);
                        }
                    }
                    let mut body = vec![0; len];
                    if r.read_exact(&mut body).is_err() {
                        return;
                    }
                    asked.lock().unwrap().push(target.clone());
                    let (status, text) = answer(&target);
                    let reply = format!(
                        "HTTP/1.1 {status} X\r\nContent-Type: application/x-amz-json-1.0\r\nContent-Length: {}\r\n\r\n{text}",
                        text.len()
                    );
                    if conn.write_all(reply.as_bytes()).is_err() {
                        return;
                    }
                });
            }
        });
    }
    (port, asked)
}

/// A remote whose attributes do not say `FifoQueue=true` is a standard queue (SQS names the
/// attribute for FIFO queues only): it was bridged (moto lets a standard queue have a `.fifo`
/// name), its order lost. Now the start ends with 41, nothing sent.
#[test]
fn a_remote_that_is_not_a_fifo_queue_is_refused_before_any_send() {
    aws_env();
    let dir = Dir::new("bridge-start-standard");
    let (path, q) = outbox(&dir);
    let (port, asked) = stand_in(|target| match target {
        "getqueueattributes" => (200, r#"{"Attributes":{"VisibilityTimeout":"30"}}"#),
        _ => (500, r#"{"__type":"InternalError","message":"try again"}"#),
    });
    let url = format!("http://127.0.0.1:{port}/000000000000/inbox.fifo");
    let out = within_a_minute(Command::new(BIN).arg(&path).arg(&url));
    assert_eq!(out.status.code(), Some(41), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("not a FIFO queue"), "{err}");
    assert_eq!(*asked.lock().unwrap(), ["getqueueattributes"]);
    assert_eq!(q.attributes().approximate_number_of_messages, 1);
}

/// Usage errors, before anything is asked: a URL that cannot name an SQS FIFO queue (an
/// `ftp://` one was "unreachable", 41; one without `.fifo` was refused as a local queue
/// name, 1) and no region (1, "a local error").
#[test]
fn a_remote_url_that_cannot_be_sqs_fifo_or_no_region_is_a_usage_error() {
    aws_env();
    let dir = Dir::new("bridge-start-usage");
    let (path, _q) = outbox(&dir);
    for url in [
        "ftp://127.0.0.1:9/000000000000/inbox.fifo",
        "http://127.0.0.1:9/000000000000/inbox",
        "http://127.0.0.1:9/000000000000/.fifo",
        "http:///000000000000/inbox.fifo",
    ] {
        let out = within_a_minute(Command::new(BIN).arg(&path).arg(url));
        assert_eq!(out.status.code(), Some(2), "{url}: {out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("not an SQS FIFO queue URL"), "{err}");
    }
    let out = within_a_minute(
        Command::new(BIN)
            .arg(&path)
            .arg("http://127.0.0.1:9/000000000000/inbox.fifo")
            .env_remove("AWS_REGION")
            .env_remove("AWS_DEFAULT_REGION")
            // The region chain ends at the instance-metadata service (a region on EC2).
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .env("AWS_CONFIG_FILE", dir.0.join("none"))
            .env("AWS_SHARED_CREDENTIALS_FILE", dir.0.join("none")),
    );
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("AWS_REGION"),
        "{out:?}"
    );
}
