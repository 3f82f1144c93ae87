//! `shmfifo serve` against hostile and unlucky clients: requests that crashed it, connections
//! that held it, users who reached queues they could not open, a queue replaced under it, and
//! answers SDKs retried. Each test reproduces a defect the server had (the trial).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

use shmfifo::{Queue, QueueConfig, ReceiveOptions, SendMessage};
use shmfifo_serve::Config;

#[path = "support/server.rs"]
mod server;
use server::{config, exchange, post_form, post_json, Dir, Server};

/// Whether the server closes `s` (EOF or reset) within `within`.
fn closed_within(s: &mut TcpStream, within: Duration) -> bool {
    s.set_read_timeout(Some(within)).unwrap();
    let mut b = [0u8; 4096];
    loop {
        match s.read(&mut b) {
            Ok(0) => return true,
            Ok(_) => continue, // an answer (408) before the close
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return false
            }
            Err(_) => return true,
        }
    }
}

/// The trial's one request that killed the server: a query-protocol name of 3,000 segments
/// (stack overflow in the key parser, exit 134), in a body or a GET's query string. Now a 400,
/// and the server answers the next request.
#[test]
fn a_deep_query_name_is_a_400_not_a_crash() {
    let dir = Dir::new("deep");
    let srv = Server::start(config(&dir.0));
    let deep = format!("Action=SendMessage&{}=1", "a.".repeat(3000));
    let (status, out) = post_form(srv.addr, &deep);
    assert_eq!(status, 400, "{out}");
    assert!(out.contains("<Code>MalformedQueryString</Code>"), "{out}");
    let (status, out) = exchange(
        srv.addr,
        format!("GET /?{deep} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes(),
    );
    assert_eq!(status, 400, "{out}");
    let (status, out) = post_form(srv.addr, "Action=ListQueues");
    assert_eq!(status, 200, "{out}");
}

/// Connections that send half a request line, half a body, or nothing after a request were
/// held forever. Now each is closed after its timeout, while a long poll (a request in
/// progress) is never cut.
#[test]
fn slow_and_idle_connections_are_closed() {
    let dir = Dir::new("slow");
    let srv = Server::start(Config {
        header_timeout: Duration::from_millis(400),
        body_timeout: Duration::from_millis(400),
        idle_timeout: Duration::from_millis(800),
        ..config(&dir.0)
    });
    // Half a request head.
    let mut half_head = TcpStream::connect(srv.addr).unwrap();
    half_head
        .write_all(b"POST / HTTP/1.1\r\nHost: x\r\n")
        .unwrap();
    // A head sent a byte at a time, forever (slowloris): the head's timer does not restart.
    let mut drip = TcpStream::connect(srv.addr).unwrap();
    let dripper = {
        let mut d = drip.try_clone().unwrap();
        std::thread::spawn(move || {
            // Longer than the 5 s the test waits: closed only if its timer does not restart.
            for _ in 0..140 {
                if d.write_all(b"X").is_err() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        })
    };
    // Half a body.
    let mut half_body = TcpStream::connect(srv.addr).unwrap();
    half_body
        .write_all(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 100\r\n\r\nAction=List")
        .unwrap();
    // Nothing at all.
    let mut silent = TcpStream::connect(srv.addr).unwrap();
    let t0 = Instant::now();
    assert!(
        closed_within(&mut half_head, Duration::from_secs(5)),
        "half head held"
    );
    assert!(
        closed_within(&mut drip, Duration::from_secs(5)),
        "dripping head held"
    );
    assert!(
        t0.elapsed() < Duration::from_millis(1900),
        "{:?}",
        t0.elapsed()
    );
    let mut answer = Vec::new();
    half_body
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let _ = half_body.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(
        closed_within(&mut silent, Duration::from_secs(5)),
        "idle held"
    );
    dripper.join().unwrap();

    // A keep-alive connection: served, then closed once idle.
    let mut ka = TcpStream::connect(srv.addr).unwrap();
    let form = "Action=ListQueues";
    write!(ka, "POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n{form}", form.len()).unwrap();
    let mut b = [0u8; 1024];
    ka.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let n = ka.read(&mut b).unwrap();
    assert!(b[..n].starts_with(b"HTTP/1.1 200"));
    assert!(
        closed_within(&mut ka, Duration::from_secs(5)),
        "idle keep-alive held"
    );

    // A long poll of 2 s, longer than every timeout: answered, not cut.
    let q = Queue::create_at(dir.0.join("poll.fifo"), &QueueConfig::new()).unwrap();
    let t0 = Instant::now();
    let (status, out) = post_json(
        srv.addr,
        "ReceiveMessage",
        &format!(
            r#"{{"QueueUrl":"{}","WaitTimeSeconds":2}}"#,
            srv.url("poll.fifo")
        ),
    );
    assert_eq!(status, 200, "{out}");
    assert!(t0.elapsed() >= Duration::from_millis(1900));
    drop(q);
}

/// The 1,012th connection under `ulimit -n 1024` ended the server (accept's error ended its
/// loop). Now connections beyond the limit are closed at once and the server serves on.
#[test]
fn connections_beyond_the_limit_are_closed_and_the_server_serves_on() {
    let dir = Dir::new("limit");
    let srv = Server::start(Config {
        max_connections: 3,
        ..config(&dir.0)
    });
    let held: Vec<TcpStream> = (0..3)
        .map(|_| TcpStream::connect(srv.addr).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    for _ in 0..5 {
        let mut extra = TcpStream::connect(srv.addr).unwrap();
        assert!(
            closed_within(&mut extra, Duration::from_secs(5)),
            "over the limit, kept"
        );
    }
    drop(held);
    std::thread::sleep(Duration::from_millis(300));
    let (status, out) = post_form(srv.addr, "Action=ListQueues");
    assert_eq!(status, 200, "{out}");
}

/// Whether this process is root, which the cross-user tests need (another uid to ask as, a
/// file of another user); says what is skipped where it is not.
fn root_or_skip(what: &str) -> bool {
    // SAFETY: geteuid cannot fail and touches no memory of ours.
    let root = unsafe { libc::geteuid() } == 0;
    if !root {
        eprintln!("not root: {what}; skipped");
    }
    root
}

/// A SendMessage request in JSON to the queue at `url`: body `m`, group `g`, dedup id `1`.
fn send_json(url: &str) -> String {
    format!(
        r#"{{"QueueUrl":"{url}","MessageBody":"m","MessageGroupId":"g","MessageDeduplicationId":"1"}}"#
    )
}

/// The error a server refuses to start with (it must not listen).
fn refused_start(cfg: Config) -> std::io::Error {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(shmfifo_serve::serve(
        cfg,
        |a| panic!("listening on {a}"),
        async {},
    ))
    .unwrap_err()
}

/// Runs curl as `uid` (root only): the request then comes from a socket that user owns.
fn curl_as(uid: u32, addr: SocketAddr, action: &str, body: &str) -> (u16, String) {
    curl::curl_as(
        uid,
        &[
            "-H",
            "Content-Type: application/x-amz-json-1.0",
            "-H",
            &format!("X-Amz-Target: AmazonSQS.{action}"),
            "--data-binary",
            body,
            &format!("http://{addr}/"),
        ],
    )
}

#[path = "support/curl.rs"]
mod curl;

/// Through serve, user `nobody` received, purged and deleted root's 0600 queue. Now a request
/// acts as the user owning the client's socket, with that user's permissions on the file:
/// nothing of a 0600 queue for another user (not even its name in ListQueues), a 0666 queue
/// for everyone, and the directory's sticky bit for DeleteQueue. Names that are not FIFO queue
/// names are not served, nor symlinks, nor dead-letter targets outside the directory.
#[test]
fn access_through_serve_is_the_files_own() {
    // SAFETY: geteuid cannot fail and touches no memory of ours.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("not root: the cross-user half needs another uid; checking the rest");
    }
    let root = unsafe { libc::geteuid() } == 0;
    let dir = Dir::new("access");
    std::fs::set_permissions(&dir.0, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let outside = Dir::new("outside");
    let srv = Server::start(config(&dir.0));
    let private = Queue::create_at(dir.0.join("private.fifo"), &QueueConfig::new()).unwrap();
    private
        .send(&SendMessage::new("g", "secret").dedup_id("1"))
        .unwrap();
    let shared =
        Queue::create_at(dir.0.join("shared.fifo"), &QueueConfig::new().mode(0o666)).unwrap();
    // A queue under a name that is not a FIFO queue name, and a symlink to a queue outside.
    let hidden = Queue::create_at(dir.0.join("hidden"), &QueueConfig::new()).unwrap();
    hidden
        .send(&SendMessage::new("g", "h").dedup_id("1"))
        .unwrap();
    let far = Queue::create_at(outside.0.join("far.fifo"), &QueueConfig::new()).unwrap();
    far.send(&SendMessage::new("g", "far").dedup_id("1"))
        .unwrap();
    std::os::unix::fs::symlink(outside.0.join("far.fifo"), dir.0.join("link.fifo")).unwrap();

    let me = |action: &str, body: String| post_json(srv.addr, action, &body);
    let receive = |name: &str| {
        format!(
            r#"{{"QueueUrl":"{}","MaxNumberOfMessages":10}}"#,
            srv.url(name)
        )
    };
    for name in ["hidden", "link.fifo"] {
        let (status, out) = me("ReceiveMessage", receive(name));
        assert_eq!(status, 400, "{name}: {out}");
        assert!(out.contains("NonExistentQueue"), "{name}: {out}");
    }
    assert_eq!(hidden.attributes().approximate_number_of_messages, 1);
    assert_eq!(far.attributes().approximate_number_of_messages, 1);
    // A dead-letter target outside the directory: refused; the queue outside gets nothing.
    let policy = serde_json::json!({
        "deadLetterTargetArn": outside.0.join("far.fifo").display().to_string(),
        "maxReceiveCount": 1
    })
    .to_string();
    let (status, out) = me(
        "SetQueueAttributes",
        serde_json::json!({"QueueUrl": srv.url("shared.fifo"), "Attributes": {"RedrivePolicy": policy}})
            .to_string(),
    );
    assert_eq!(status, 400, "{out}");
    assert!(shared.redrive_policy().unwrap().is_none());
    let policy = serde_json::json!({"deadLetterTargetArn": "arn:aws:sqs:us-east-1:000000000000:../outside/far.fifo", "maxReceiveCount": 1}).to_string();
    let (status, _) = me(
        "SetQueueAttributes",
        serde_json::json!({"QueueUrl": srv.url("shared.fifo"), "Attributes": {"RedrivePolicy": policy}})
            .to_string(),
    );
    assert_eq!(status, 400);
    // The server's own user reaches its own queue.
    let (status, out) = me("ReceiveMessage", receive("private.fifo"));
    assert_eq!(status, 200, "{out}");
    assert!(out.contains("secret"), "{out}");

    if !root {
        return;
    }
    let nobody = 65534;
    let (status, out) = curl_as(nobody, srv.addr, "ListQueues", "{}");
    assert_eq!(status, 200, "{out}");
    assert!(
        out.contains("shared.fifo") && !out.contains("private.fifo"),
        "{out}"
    );
    for action in ["ReceiveMessage", "PurgeQueue", "GetQueueAttributes"] {
        let (status, out) = curl_as(nobody, srv.addr, action, &receive("private.fifo"));
        assert_eq!(status, 403, "{action}: {out}");
        assert!(out.contains("AccessDenied"), "{action}: {out}");
    }
    let send = |name: &str| {
        format!(
            r#"{{"QueueUrl":"{}","MessageBody":"from nobody","MessageGroupId":"n","MessageDeduplicationId":"n1"}}"#,
            srv.url(name)
        )
    };
    assert_eq!(
        curl_as(nobody, srv.addr, "SendMessage", &send("private.fifo")).0,
        403
    );
    let (status, out) = curl_as(
        nobody,
        srv.addr,
        "GetQueueUrl",
        r#"{"QueueName":"private.fifo"}"#,
    );
    assert_eq!(status, 403, "{out}");
    // Deleting root's queue from a sticky directory: refused, and the file is still there.
    let del = format!(r#"{{"QueueUrl":"{}"}}"#, srv.url("private.fifo"));
    assert_eq!(curl_as(nobody, srv.addr, "DeleteQueue", &del).0, 403);
    assert!(dir.0.join("private.fifo").exists());
    // Creating a queue the server would own, mode 0600: refused for another user.
    let (status, out) = curl_as(
        nobody,
        srv.addr,
        "CreateQueue",
        r#"{"QueueName":"mine.fifo","Attributes":{"FifoQueue":"true"}}"#,
    );
    assert_eq!(status, 403, "{out}");
    assert!(!dir.0.join("mine.fifo").exists());
    // A world-writable queue is everyone's.
    let (status, out) = curl_as(nobody, srv.addr, "SendMessage", &send("shared.fifo"));
    assert_eq!(status, 200, "{out}");
    let got = shared.receive(&ReceiveOptions::max(10)).unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].body, "from nobody");
    // Made private again, it is no longer reachable (checked on every request).
    std::fs::set_permissions(
        dir.0.join("shared.fifo"),
        std::fs::Permissions::from_mode(0o600),
    )
    .unwrap();
    assert_eq!(
        curl_as(nobody, srv.addr, "SendMessage", &send("shared.fifo")).0,
        403
    );
    // The private queue still holds its message, in flight from the receive above.
    let a = private.attributes();
    assert_eq!(
        a.approximate_number_of_messages + a.approximate_number_of_messages_not_visible,
        1
    );
}

/// A RedrivePolicy that serde_json refuses was handed to the library unread, whose own parser
/// takes a form feed before the object or a raw control byte in a string: its dead-letter
/// target, never checked, could then be any queue file the server's user can open (messages
/// moved into a queue the caller could not open), and CreateQueue's answer told whether a path
/// existed anywhere. Now such a value is refused, and only serde_json's own text of an
/// accepted one goes on to the library.
#[test]
fn a_redrive_policy_json_parsers_disagree_on_is_refused() {
    let dir = Dir::new("policy");
    let outside = Dir::new("policy-outside");
    let srv = Server::start(config(&dir.0));
    let shared =
        Queue::create_at(dir.0.join("shared.fifo"), &QueueConfig::new().mode(0o666)).unwrap();
    let far = Queue::create_at(outside.0.join("far.fifo"), &QueueConfig::new()).unwrap();
    let target = outside.0.join("far.fifo").display().to_string();
    let policy = |pre: &str, post: &str| {
        format!(r#"{pre}{{"deadLetterTargetArn":"{target}{post}","maxReceiveCount":1}}"#)
    };
    let policies = [
        // A form feed before the object: JSON's whitespace is space, tab, CR and LF only.
        policy("\u{c}", ""),
        // A raw control byte inside a string.
        policy("", "\u{1}"),
        // Not an object at all.
        "[1]".to_owned(),
    ];
    for policy in &policies {
        let body = serde_json::json!({"QueueUrl": srv.url("shared.fifo"), "Attributes": {"RedrivePolicy": policy}}).to_string();
        let (status, out) = post_json(srv.addr, "SetQueueAttributes", &body);
        assert_eq!(status, 400, "{policy:?}: {out}");
        assert!(out.contains("InvalidParameterValue"), "{policy:?}: {out}");
        assert!(shared.redrive_policy().unwrap().is_none(), "{policy:?}");
        // CreateQueue with it: refused before any file is looked at or made.
        let body = serde_json::json!({"QueueName": "new.fifo", "Attributes": {"FifoQueue": "true", "RedrivePolicy": policy}}).to_string();
        let (status, out) = post_json(srv.addr, "CreateQueue", &body);
        assert_eq!(status, 400, "{policy:?}: {out}");
        assert!(!out.contains(&outside.0.display().to_string()), "{out}");
        assert!(!dir.0.join("new.fifo").exists());
    }
    // Longer than any real policy: refused unread.
    let long = format!(
        r#"{{"deadLetterTargetArn":"shared.fifo","maxReceiveCount":1,"x":"{}"}}"#,
        "y".repeat(5000)
    );
    let body = serde_json::json!({"QueueUrl": srv.url("shared.fifo"), "Attributes": {"RedrivePolicy": long}}).to_string();
    assert_eq!(post_json(srv.addr, "SetQueueAttributes", &body).0, 400);
    // A well-formed policy naming a queue of the directory is still taken.
    Queue::create_at(dir.0.join("dlq.fifo"), &QueueConfig::new().mode(0o666)).unwrap();
    let policy = serde_json::json!({"deadLetterTargetArn": "arn:aws:sqs:us-east-1:000000000000:dlq.fifo", "maxReceiveCount": 2}).to_string();
    let body = serde_json::json!({"QueueUrl": srv.url("shared.fifo"), "Attributes": {"RedrivePolicy": policy}}).to_string();
    let (status, out) = post_json(srv.addr, "SetQueueAttributes", &body);
    assert_eq!(status, 200, "{out}");
    assert!(shared.redrive_policy().unwrap().is_some());
    assert_eq!(far.attributes().approximate_number_of_messages, 0);
    // A blank policy removes it, as it did.
    let body = serde_json::json!({"QueueUrl": srv.url("shared.fifo"), "Attributes": {"RedrivePolicy": " "}}).to_string();
    let (status, out) = post_json(srv.addr, "SetQueueAttributes", &body);
    assert_eq!(status, 200, "{out}");
    assert!(shared.redrive_policy().unwrap().is_none());
}

/// The library's errors name files by path (an untrusted file, a damaged arena, a refused
/// dead-letter queue, an I/O error), and serve passed them on: a client learned where the
/// server keeps its queues. Now the directory is taken out of every error's text.
#[test]
fn errors_name_queues_not_the_servers_paths() {
    if !root_or_skip("needs a file of another user") {
        return;
    }
    let dir = Dir::new("paths");
    let srv = Server::start(config(&dir.0));
    // A queue file of another user, readable and writable by all: the library refuses to open
    // a file it does not own (UntrustedFile), naming its path.
    let path = dir.0.join("theirs.fifo");
    drop(Queue::create_at(&path, &QueueConfig::new().mode(0o666)).unwrap());
    std::os::unix::fs::chown(&path, Some(65534), Some(65534)).unwrap();
    let (status, out) = post_json(srv.addr, "GetQueueUrl", r#"{"QueueName":"theirs.fifo"}"#);
    assert_eq!(status, 403, "{out}");
    assert!(out.contains("theirs.fifo"), "{out}");
    assert!(!out.contains(&dir.0.display().to_string()), "{out}");
}

/// Hard links to one queue file, each asked for by name, each opened its own handle: two
/// descriptors and one of the queue's participant slots a name, so a user with write access
/// to a shared queue could fill its 64 slots (its other users refused) and run the server out
/// of descriptors. Now names of one file share its handle, and the table of open names is
/// bounded.
#[test]
fn names_of_one_queue_file_share_one_handle() {
    let dir = Dir::new("links");
    let srv = Server::start(config(&dir.0));
    let q = Queue::create_at(dir.0.join("shared.fifo"), &QueueConfig::new().mode(0o666)).unwrap();
    let alive = |q: &Queue| {
        q.inspect(0)
            .unwrap()
            .participants
            .iter()
            .filter(|p| p.alive)
            .count()
    };
    assert_eq!(alive(&q), 1, "this test's own handle");
    // More names than serve keeps open (64): the ones used least recently are dropped and
    // opened again when used.
    for k in 0..80 {
        let name = format!("l{k}.fifo");
        std::fs::hard_link(dir.0.join("shared.fifo"), dir.0.join(&name)).unwrap();
        let (status, out) = post_json(
            srv.addr,
            "GetQueueUrl",
            &format!(r#"{{"QueueName":"{name}"}}"#),
        );
        assert_eq!(status, 200, "{name}: {out}");
    }
    // Ours and the server's one handle (a dropped name's handle is released when its last
    // request ends: none runs now).
    assert_eq!(alive(&q), 2);
    // Every name still serves the queue.
    let send = |name: &str| {
        format!(
            r#"{{"QueueUrl":"{}","MessageBody":"m","MessageGroupId":"g","MessageDeduplicationId":"{name}"}}"#,
            srv.url(name)
        )
    };
    for name in ["l0.fifo", "l79.fifo", "shared.fifo"] {
        let (status, out) = post_json(srv.addr, "SendMessage", &send(name));
        assert_eq!(status, 200, "{name}: {out}");
    }
    assert_eq!(q.attributes().approximate_number_of_messages, 3);
}

/// A queue of mode 0666 in a directory of mode 0700 is its owner's alone (nobody else can look
/// a name up there), but serve checked only the file's own mode: through it anyone reached it.
/// Now a request needs search permission on the directory and every one above it.
#[test]
fn a_directory_the_caller_cannot_search_keeps_its_queues_from_them() {
    if !root_or_skip("needs another uid to ask as") {
        return;
    }
    let dir = Dir::new("searchless");
    std::fs::set_permissions(&dir.0, std::fs::Permissions::from_mode(0o700)).unwrap();
    let srv = Server::start(config(&dir.0));
    let q = Queue::create_at(dir.0.join("open.fifo"), &QueueConfig::new().mode(0o666)).unwrap();
    let nobody = 65534;
    let send = send_json(&srv.url("open.fifo"));
    let (status, out) = curl_as(nobody, srv.addr, "SendMessage", &send);
    assert_eq!(status, 403, "{out}");
    assert!(out.contains("AccessDenied"), "{out}");
    let (status, out) = curl_as(
        nobody,
        srv.addr,
        "GetQueueUrl",
        r#"{"QueueName":"open.fifo"}"#,
    );
    assert_eq!(status, 403, "{out}");
    let (status, _) = curl_as(nobody, srv.addr, "ListQueues", "{}");
    assert_eq!(status, 403);
    // Nor does a dead-letter target tell them which names exist: the same answer for a queue
    // that is there and one that is not.
    for target in ["open.fifo", "none.fifo"] {
        let policy =
            serde_json::json!({"deadLetterTargetArn": target, "maxReceiveCount": 1}).to_string();
        let body = serde_json::json!({"QueueName": "probe.fifo", "Attributes": {"FifoQueue": "true", "RedrivePolicy": policy}}).to_string();
        let (status, out) = curl_as(nobody, srv.addr, "CreateQueue", &body);
        assert_eq!(status, 403, "{target}: {out}");
        assert!(out.contains("AccessDenied"), "{target}: {out}");
    }
    assert_eq!(q.attributes().approximate_number_of_messages, 0);
    // Its owner reaches it; and once the directory is searchable, so does everyone.
    assert_eq!(post_json(srv.addr, "SendMessage", &send).0, 200);
    std::fs::set_permissions(&dir.0, std::fs::Permissions::from_mode(0o711)).unwrap();
    let send2 = send.replace(r#""1""#, r#""2""#);
    let (status, out) = curl_as(nobody, srv.addr, "SendMessage", &send2);
    assert_eq!(status, 200, "{out}");
    assert_eq!(q.attributes().approximate_number_of_messages, 2);
}

/// Serve resolved its directory once, then checked a request's search permission on that
/// path's directories by name and opened the queue by name: a directory on the path swapped
/// for a symlink (by a user who may write the one above it) made a check of directories the
/// caller may search and an open through one it may not. User `nobody` sent to, and deleted,
/// a 0666 queue whose directory sits in root's 0700 one. Now each request walks the path
/// from `/` by descriptors (no symlink followed), checks the directories it walked, and does
/// what it does through the last one: the swapped path leads nowhere.
#[test]
fn a_directory_swapped_for_a_symlink_after_start_leads_nowhere() {
    if !root_or_skip("needs another uid to ask as") {
        return;
    }
    let base = Dir::new("swap-base");
    let served = base.0.join("served");
    std::fs::create_dir(&served).unwrap();
    // root's 0700 directory, with a directory anyone may search and a queue anyone may use.
    let locked = Dir::new("swap-locked");
    std::fs::set_permissions(&locked.0, std::fs::Permissions::from_mode(0o700)).unwrap();
    let inner = locked.0.join("inner");
    std::fs::create_dir(&inner).unwrap();
    std::fs::set_permissions(&inner, std::fs::Permissions::from_mode(0o777)).unwrap();
    let q = Queue::create_at(inner.join("open.fifo"), &QueueConfig::new().mode(0o666)).unwrap();
    let srv = Server::start(config(&served));
    let nobody = 65534;
    let send = send_json(&srv.url("open.fifo"));
    let (status, out) = curl_as(nobody, srv.addr, "SendMessage", &send);
    assert_eq!(status, 400, "not in the served directory: {out}");
    // The served directory swapped for a symlink into root's 0700 one.
    std::fs::rename(&served, base.0.join("served.old")).unwrap();
    std::os::unix::fs::symlink(&inner, &served).unwrap();
    let (status, out) = curl_as(nobody, srv.addr, "SendMessage", &send);
    assert_ne!(status, 200, "{out}");
    assert!(out.contains("changed since the server started"), "{out}");
    assert!(
        !out.contains(&*base.0.to_string_lossy()),
        "the server's path: {out}"
    );
    let delete = format!(r#"{{"QueueUrl":"{}"}}"#, srv.url("open.fifo"));
    let (status, out) = curl_as(nobody, srv.addr, "DeleteQueue", &delete);
    assert_ne!(status, 200, "{out}");
    let (status, out) = curl_as(nobody, srv.addr, "ListQueues", "{}");
    assert!(status != 200 || !out.contains("open.fifo"), "{out}");
    assert!(
        inner.join("open.fifo").exists(),
        "deleted through the symlink"
    );
    assert_eq!(q.attributes().approximate_number_of_messages, 0);
    // The directory back in its place: served again.
    std::fs::remove_file(&served).unwrap();
    std::fs::rename(base.0.join("served.old"), &served).unwrap();
    let _here =
        Queue::create_at(served.join("open.fifo"), &QueueConfig::new().mode(0o666)).unwrap();
    let (status, out) = curl_as(nobody, srv.addr, "SendMessage", &send);
    assert_eq!(status, 200, "{out}");
    assert_eq!(q.attributes().approximate_number_of_messages, 0);
}

/// A path another user could change would take serve's requests, and the paths it hands the
/// library for later (a dead-letter queue, a move's destination), wherever that user likes:
/// serve refuses to start on one (a directory above the served one writable by others
/// without the sticky bit, or owned by another user), and a path that becomes one after the
/// start serves nothing (a 500 naming no path) until it is mended.
#[test]
fn a_path_another_user_could_change_is_not_served() {
    let base = Dir::new("exposed");
    let served = base.0.join("served");
    std::fs::create_dir(&served).unwrap();
    std::fs::set_permissions(&base.0, std::fs::Permissions::from_mode(0o777)).unwrap();
    let e = refused_start(config(&served));
    assert_eq!(e.kind(), std::io::ErrorKind::PermissionDenied, "{e}");
    assert!(e.to_string().contains("no sticky bit"), "{e}");
    // SAFETY: geteuid cannot fail and touches no memory of ours.
    if unsafe { libc::geteuid() } == 0 {
        // Owned by another user: refused too, sticky or not.
        std::fs::set_permissions(&base.0, std::fs::Permissions::from_mode(0o755)).unwrap();
        match std::os::unix::fs::chown(&base.0, Some(65534), None) {
            Ok(()) => {
                let e = refused_start(config(&served));
                assert!(e.to_string().contains("owned by uid 65534"), "{e}");
                std::os::unix::fs::chown(&base.0, Some(0), None).unwrap();
            }
            // A user namespace without uid 65534: that half is not checked here.
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                eprintln!("uid 65534 not mapped: the other owner's half skipped")
            }
            Err(e) => panic!("chown: {e}"),
        }
    }
    // The served directory itself writable by others without the sticky bit: another user
    // could rename one queue onto a dead-letter queue's name.
    std::fs::set_permissions(&base.0, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&served, std::fs::Permissions::from_mode(0o777)).unwrap();
    let e = refused_start(config(&served));
    assert!(e.to_string().contains("rename one queue onto"), "{e}");
    std::fs::set_permissions(&served, std::fs::Permissions::from_mode(0o1777)).unwrap();
    std::fs::set_permissions(&base.0, std::fs::Permissions::from_mode(0o755)).unwrap();
    let srv = Server::start(config(&served));
    let q = Queue::create_at(served.join("q.fifo"), &QueueConfig::new()).unwrap();
    let send = send_json(&srv.url("q.fifo"));
    assert_eq!(post_json(srv.addr, "SendMessage", &send).0, 200);
    // Made writable by others after the start: nothing served, no path told.
    std::fs::set_permissions(&base.0, std::fs::Permissions::from_mode(0o777)).unwrap();
    let send2 = send.replace(r#""1""#, r#""2""#);
    let (status, out) = post_json(srv.addr, "SendMessage", &send2);
    assert_eq!(status, 500, "{out}");
    assert!(out.contains("not served until it is mended"), "{out}");
    assert!(
        !out.contains(&*base.0.to_string_lossy()),
        "the server's path: {out}"
    );
    let (status, _) = post_json(srv.addr, "ListQueues", "{}");
    assert_eq!(status, 500);
    // With the sticky bit (as /tmp), and the served directory ours: served again.
    std::fs::set_permissions(&base.0, std::fs::Permissions::from_mode(0o1777)).unwrap();
    assert_eq!(post_json(srv.addr, "SendMessage", &send2).0, 200);
    assert_eq!(q.attributes().approximate_number_of_messages, 2);
}

/// After `unlink` and `create` under the same name, serve sent into (and received from) the
/// deleted queue it still had open. Now it notices the file replaced and opens the new one.
#[test]
fn a_queue_replaced_under_serve_is_reopened() {
    let dir = Dir::new("stale");
    let srv = Server::start(config(&dir.0));
    let path = dir.0.join("q.fifo");
    let old = Queue::create_at(&path, &QueueConfig::new()).unwrap();
    let send = |id: &str| {
        post_json(
            srv.addr,
            "SendMessage",
            &format!(
                r#"{{"QueueUrl":"{}","MessageBody":"m{id}","MessageGroupId":"g","MessageDeduplicationId":"{id}"}}"#,
                srv.url("q.fifo")
            ),
        )
    };
    assert_eq!(send("1").0, 200);
    assert_eq!(old.attributes().approximate_number_of_messages, 1);
    drop(old);
    Queue::unlink_at(&path).unwrap();
    let new = Queue::create_at(&path, &QueueConfig::new()).unwrap();
    let (status, out) = send("2");
    assert_eq!(status, 200, "{out}");
    let got = new.receive(&ReceiveOptions::max(10)).unwrap();
    assert_eq!(got.len(), 1, "the send went to the deleted queue");
    assert_eq!(got[0].body, "m2");
    // Deleted and not created again: the queue does not exist.
    drop(new);
    Queue::unlink_at(&path).unwrap();
    let (status, out) = send("3");
    assert_eq!(
        (status, out.contains("NonExistentQueue")),
        (400, true),
        "{out}"
    );
}

/// A queue's file truncated under `serve` (by any user who may write it: a queue of mode 0666
/// is anyone's) killed the server with SIGBUS at its next touch of the queue, ending every
/// user's service. Now the truncation guard (`shmfifo`'s `sys::guard`) makes it an error of
/// that queue's requests (`shmfifo.Truncated`), and the server serves every other queue on.
/// (Seen failing without the guard, `SHMFIFO_SIGBUS_GUARD=0`: the test process, which runs the
/// server, died of SIGBUS.)
#[test]
fn a_queue_truncated_under_serve_is_an_error_not_a_crash() {
    let dir = Dir::new("cut");
    let srv = Server::start(config(&dir.0));
    let path = dir.0.join("q.fifo");
    let _q = Queue::create_at(&path, &QueueConfig::new()).unwrap();
    let _other = Queue::create_at(dir.0.join("other.fifo"), &QueueConfig::new()).unwrap();
    let send = |queue: &str, id: &str| {
        post_json(
            srv.addr,
            "SendMessage",
            &format!(
                r#"{{"QueueUrl":"{}","MessageBody":"m{id}","MessageGroupId":"g","MessageDeduplicationId":"{id}"}}"#,
                srv.url(queue)
            ),
        )
    };
    let receive = |queue: &str| {
        post_json(
            srv.addr,
            "ReceiveMessage",
            &format!(
                r#"{{"QueueUrl":"{}","MaxNumberOfMessages":10,"WaitTimeSeconds":0}}"#,
                srv.url(queue)
            ),
        )
    };
    assert_eq!(send("q.fifo", "1").0, 200);
    assert_eq!(receive("q.fifo").0, 200);
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(4096)
        .unwrap();
    for (status, out) in [send("q.fifo", "2"), receive("q.fifo")] {
        assert_eq!(status, 500, "{out}");
        assert!(out.contains("shmfifo.Truncated"), "{out}");
    }
    let (status, out) = send("other.fifo", "3");
    assert_eq!(status, 200, "the server serves other queues on: {out}");
    let (status, out) = receive("other.fifo");
    assert_eq!(status, 200, "{out}");
    assert!(out.contains("m3"), "{out}");
}

/// A full queue was an HTTP 500, which every SDK retries (the aws CLI four times); invalid
/// UTF-8 in a form body was stored with U+FFFD; `DelaySeconds=-1` was accepted. Now a full
/// queue is SQS's `OverLimit` (403, the sender's), and both inputs are 400s that store nothing.
#[test]
fn client_errors_are_4xx_with_sqs_codes() {
    let dir = Dir::new("codes");
    let srv = Server::start(config(&dir.0));
    let q = Queue::create_at(
        dir.0.join("small.fifo"),
        &QueueConfig::new().max_messages(4).size_limit(0),
    )
    .unwrap();
    let send = |id: usize, extra: &str| {
        post_json(
            srv.addr,
            "SendMessage",
            &format!(
                r#"{{"QueueUrl":"{}","MessageBody":"m","MessageGroupId":"g","MessageDeduplicationId":"{id}"{extra}}}"#,
                srv.url("small.fifo")
            ),
        )
    };
    let mut full = None;
    for i in 0..64 {
        let (status, out) = send(i, "");
        if status != 200 {
            full = Some((status, out));
            break;
        }
    }
    let (status, out) = full.expect("the queue never filled");
    assert_eq!(status, 403, "{out}");
    assert!(
        out.contains("x-amzn-query-error: OverLimit;Sender"),
        "{out}"
    );
    let before = q.attributes().approximate_number_of_messages;
    let (status, out) = send(100, r#","DelaySeconds":-1"#);
    assert_eq!(status, 400, "{out}");
    let form = format!(
        "Action=SendMessage&QueueUrl={}&MessageBody=%FF%FE&MessageGroupId=g&MessageDeduplicationId=u",
        srv.url("small.fifo")
    );
    let (status, out) = post_form(srv.addr, &form);
    assert_eq!(status, 400, "{out}");
    assert!(out.contains("InvalidMessageContents"), "{out}");
    assert_eq!(q.attributes().approximate_number_of_messages, before);
}

/// An embedder may run the server inside a `LocalSet` (actix-rt runs each worker's tasks in
/// one) on a multi-threaded runtime, where `block_in_place` panics: each connection is a task
/// of the runtime's own (`tokio::spawn`), on its workers, so an action's blocking call moves
/// the worker's other tasks away as on a plain runtime, and nothing panics.
#[test]
fn a_server_inside_a_local_set_serves() {
    let dir = Dir::new("localset");
    let q = Queue::create_at(dir.0.join("q.fifo"), &QueueConfig::new()).unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let cfg = config(&dir.0);
    let thread = std::thread::spawn(move || {
        let local = tokio::task::LocalSet::new();
        rt.block_on(local.run_until(async move {
            // Polled by the LocalSet itself, as an actix-rt worker polls its futures.
            tokio::task::spawn_local(shmfifo_serve::serve(
                cfg,
                move |addr| tx.send(addr).unwrap(),
                async {
                    let _ = stopped.await;
                },
            ))
            .await
            .unwrap()
        }))
    });
    let addr = rx.recv_timeout(Duration::from_secs(30)).unwrap();
    let url = format!("http://{addr}/000000000000/q.fifo");
    for (action, body) in [
        (
            "SendMessage",
            format!(
                r#"{{"QueueUrl":"{url}","MessageBody":"m","MessageGroupId":"g","MessageDeduplicationId":"1"}}"#
            ),
        ),
        (
            "GetQueueAttributes",
            format!(r#"{{"QueueUrl":"{url}","AttributeNames":["All"]}}"#),
        ),
        ("ListQueues", "{}".to_owned()),
        (
            "ReceiveMessage",
            format!(r#"{{"QueueUrl":"{url}","WaitTimeSeconds":1}}"#),
        ),
    ] {
        let (status, out) = post_json(addr, action, &body);
        assert_eq!(status, 200, "{action}: {out}");
    }
    assert_eq!(q.attributes().approximate_number_of_messages_not_visible, 1);
    stop.send(()).unwrap();
    thread.join().unwrap().unwrap();
}

/// Listening off loopback without signatures is refused: there would be no user to check.
#[test]
fn listening_off_loopback_needs_signatures() {
    let dir = Dir::new("bind");
    let e = refused_start(Config {
        addr: "0.0.0.0:0".parse().unwrap(),
        ..config(&dir.0)
    });
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
    assert!(e.to_string().contains("--check-signature"), "{e}");
}

/// A client that went away during a long poll with a `ReceiveRequestAttemptId` took a message
/// sent after it had gone: the receive waited on a blocking thread that nothing cancelled
/// (and enough such requests held every thread of the pool). Now it waits as a future, which
/// the disconnect drops: the message stays for the next receiver.
#[test]
fn an_attempt_id_long_poll_of_a_client_gone_takes_nothing() {
    let dir = Dir::new("attempt-gone");
    let srv = Server::start(config(&dir.0));
    let q = Queue::create_at(
        dir.0.join("q.fifo"),
        &QueueConfig::new().deduplication(shmfifo::Deduplication::Off),
    )
    .unwrap();
    let body = format!(
        r#"{{"QueueUrl":"{}","WaitTimeSeconds":5,"ReceiveRequestAttemptId":"a1"}}"#,
        srv.url("q.fifo")
    );
    let mut s = TcpStream::connect(srv.addr).unwrap();
    s.write_all(
        format!(
            "POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-amz-json-1.0\r\nX-Amz-Target: AmazonSQS.ReceiveMessage\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .as_bytes(),
    )
    .unwrap();
    // Waiting by now; then gone.
    std::thread::sleep(Duration::from_millis(300));
    drop(s);
    std::thread::sleep(Duration::from_millis(500));
    q.send(&SendMessage::new("g", "for whoever is still here"))
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let got = q.receive(&ReceiveOptions::max(1)).unwrap();
    assert_eq!(got.len(), 1, "the gone client's receive took the message");
    // And with the client present, the attempt id still replays.
    let send_wait = |id: &str| {
        post_json(
            srv.addr,
            "ReceiveMessage",
            &format!(
                r#"{{"QueueUrl":"{}","WaitTimeSeconds":2,"ReceiveRequestAttemptId":"{id}","VisibilityTimeout":30}}"#,
                srv.url("q.fifo")
            ),
        )
    };
    q.delete(&got[0].receipt_handle).unwrap();
    q.send(&SendMessage::new("g", "replayed")).unwrap();
    let (status, first) = send_wait("a2");
    assert_eq!(status, 200, "{first}");
    let (status, again) = send_wait("a2");
    assert_eq!(status, 200, "{again}");
    assert_eq!(
        json_str(&first, "ReceiptHandle"),
        json_str(&again, "ReceiptHandle")
    );
}

/// Move tasks were kept forever with their ARNs as sent (4 MiB each, until the server ran out
/// of memory) and told apart by those strings (two spellings of one queue ran two redrives at
/// once). Now an ARN is at most 256 bytes, a task's source is its queue, and old finished
/// tasks are forgotten.
#[test]
fn move_tasks_are_bounded_and_keyed_by_their_queue() {
    let dir = Dir::new("moves");
    let srv = Server::start(config(&dir.0));
    let _dlq = dead_letter_queue_and_destination(&dir.0);
    let long = format!("arn:aws:sqs:us-east-1:{}:dlq.fifo", "1".repeat(300));
    let (status, out) = post_json(
        srv.addr,
        "StartMessageMoveTask",
        &format!(r#"{{"SourceArn":"{long}"}}"#),
    );
    assert_eq!(status, 400, "{out}");
    assert!(out.contains("InvalidParameterValue"), "{out}");
    // One message a second: still running when the second start comes.
    let (status, out) = post_json(
        srv.addr,
        "StartMessageMoveTask",
        r#"{"SourceArn":"arn:aws:sqs:us-east-1:000000000000:dlq.fifo","DestinationArn":"arn:aws:sqs:us-east-1:000000000000:dst.fifo","MaxNumberOfMessagesPerSecond":1}"#,
    );
    assert_eq!(status, 200, "{out}");
    let task = json_str(&out, "TaskHandle");
    let (status, out) = post_json(
        srv.addr,
        "StartMessageMoveTask",
        r#"{"SourceArn":"arn:aws:sqs:eu-west-1:999999999999:dlq.fifo","DestinationArn":"arn:aws:sqs:us-east-1:000000000000:dst.fifo"}"#,
    );
    assert_eq!(status, 400, "another spelling of the same source: {out}");
    assert!(out.contains("UnsupportedOperation"), "{out}");
    let (status, out) = post_json(
        srv.addr,
        "CancelMessageMoveTask",
        &format!(r#"{{"TaskHandle":"{task}"}}"#),
    );
    assert_eq!(status, 200, "{out}");
    // Listed under either spelling.
    let (status, out) = post_json(
        srv.addr,
        "ListMessageMoveTasks",
        r#"{"SourceArn":"arn:aws:sqs:eu-west-1:999999999999:dlq.fifo","MaxResults":10}"#,
    );
    assert_eq!(status, 200, "{out}");
    // Cancelled: CANCELLING until its redrive ends, then CANCELLED; as SQS, a task's handle is
    // listed only while it runs.
    assert!(
        out.contains(r#""Status":"CANCELLING""#) || out.contains(r#""Status":"CANCELLED""#),
        "{out}"
    );
    assert!(
        out.contains(r#""ApproximateNumberOfMessagesToMove":20"#),
        "{out}"
    );
    assert!(!out.contains(&task), "{out}");
}

/// With signatures checked, a client without the key had its whole body read (4 MiB a request,
/// on every connection) before its refusal, and kept the connection. Now a request whose
/// header names no valid key, date and scope is refused before its body is read, and its
/// connection closed.
#[test]
fn an_unsigned_request_is_refused_before_its_body() {
    let dir = Dir::new("unsigned");
    let srv = Server::start(Config {
        check_signature: Some(shmfifo_serve::sigv4::KeyPair::new("AKID", "secret")),
        body_timeout: Duration::from_secs(20),
        ..config(&dir.0)
    });
    let mut s = TcpStream::connect(srv.addr).unwrap();
    // A large body announced, a few bytes of it sent.
    s.write_all(
        b"POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 4000000\r\n\r\nAction=ListQueues",
    )
    .unwrap();
    let start = Instant::now();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let out = String::from_utf8_lossy(&out);
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "answered only after {:?} (the body's timeout)",
        start.elapsed()
    );
    assert_eq!(out.get(9..12), Some("403"), "{out}");
    assert!(out.contains("MissingAuthenticationToken"), "{out}");
    assert!(
        out.to_ascii_lowercase().contains("connection: close"),
        "{out}"
    );
}

/// Concurrent starts of a move task on one source: the check and the start were two steps
/// under two locks, so two could both pass. Now exactly one starts.
#[test]
fn concurrent_move_task_starts_on_one_source_start_one() {
    let dir = Dir::new("moves-race");
    let srv = Server::start(config(&dir.0));
    let _dlq = dead_letter_queue_and_destination(&dir.0);
    let addr = srv.addr;
    let starts: Vec<_> = (0..8)
        .map(|i| {
            std::thread::spawn(move || {
                post_json(
                    addr,
                    "StartMessageMoveTask",
                    &format!(
                        r#"{{"SourceArn":"arn:aws:sqs:r{i}:000000000000:dlq.fifo","DestinationArn":"arn:aws:sqs:us-east-1:000000000000:dst.fifo","MaxNumberOfMessagesPerSecond":1}}"#
                    ),
                )
            })
        })
        .collect();
    let results: Vec<(u16, String)> = starts.into_iter().map(|t| t.join().unwrap()).collect();
    let started: Vec<&String> = results
        .iter()
        .filter(|(s, _)| *s == 200)
        .map(|(_, o)| o)
        .collect();
    assert_eq!(started.len(), 1, "{results:?}");
    let task = json_str(started[0], "TaskHandle");
    let (status, out) = post_json(
        srv.addr,
        "CancelMessageMoveTask",
        &format!(r#"{{"TaskHandle":"{task}"}}"#),
    );
    assert_eq!(status, 200, "{out}");
}

/// `dlq.fifo` holding 20 messages, the dead-letter queue of `src.fifo` (a move task's source
/// must be one), and an empty `dst.fifo` in `dir`, content-based deduplication: a move task's
/// source and destination (a move of one message a second still runs when the next request
/// comes).
fn dead_letter_queue_and_destination(dir: &Path) -> Queue {
    let cfg = QueueConfig::new().content_based_deduplication(true);
    let dlq = Queue::create_at(dir.join("dlq.fifo"), &cfg).unwrap();
    Queue::create_at(dir.join("dst.fifo"), &cfg).unwrap();
    let policy = shmfifo::RedrivePolicy::new(dir.join("dlq.fifo").display().to_string(), 3);
    Queue::create_at(dir.join("src.fifo"), &cfg.clone().redrive_policy(policy)).unwrap();
    for i in 0..20 {
        dlq.send(&SendMessage::new("g", &format!("m{i}"))).unwrap();
    }
    dlq
}

/// The string value of member `key` in a JSON answer (its first occurrence).
fn json_str(out: &str, key: &str) -> String {
    let tag = format!("\"{key}\":\"");
    let at = out
        .find(&tag)
        .unwrap_or_else(|| panic!("no {key} in {out}"))
        + tag.len();
    out[at..at + out[at..].find('"').unwrap()].to_owned()
}
