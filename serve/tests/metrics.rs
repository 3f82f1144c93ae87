//! `shmfifo metrics`: scraped over HTTP, CloudWatch's SQS metrics per queue, without joining
//! any queue (one at its participant limit included).

use std::time::Duration;

use shmfifo::{Queue, QueueConfig, ReceiveOptions, SendMessage};

#[path = "support/metrics_endpoint.rs"]
mod metrics_endpoint;
use metrics_endpoint::{get, Endpoint};

fn value(text: &str, metric: &str, queue: &str) -> f64 {
    let key = format!("{metric}{{queue=\"{queue}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&key))
        .unwrap_or_else(|| panic!("{key} missing in\n{text}"))
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn a_scrape_reports_every_queue_without_joining() {
    let dir = std::env::temp_dir().join(format!("shmfifo-metrics-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let a = Queue::create_at(
        dir.join("a.fifo"),
        &QueueConfig::new().test_clock(true).max_participants(1),
    )
    .unwrap();
    let b = Queue::create_at(dir.join("b.fifo"), &QueueConfig::new()).unwrap();
    std::fs::write(dir.join("notes.txt"), "not a queue").unwrap();
    for i in 0..3 {
        a.send(&SendMessage::new("g", &format!("m{i}")).dedup_id(&i.to_string()))
            .unwrap();
    }
    a.advance_clock(Duration::from_secs(90)).unwrap();
    let got = a.receive(&ReceiveOptions::max(1)).unwrap();
    a.delete(&got[0].receipt_handle).unwrap();
    let _ = a.receive(&ReceiveOptions::max(1)).unwrap(); // one in flight
    b.send(&SendMessage::new("g", "x").dedup_id("x")).unwrap();
    // Two empty receives on b (its one message is taken by the first), long polls of 1 ms:
    // counted in the queue at once (polls that do not wait are added 64 at a time).
    let zero = ReceiveOptions::max(10).wait(Duration::from_millis(1));
    let taken = b.receive(&zero).unwrap();
    b.change_visibility(&taken[0].receipt_handle, Duration::ZERO)
        .unwrap();
    let _hold = b.receive(&zero).unwrap();
    assert!(b.receive(&zero).unwrap().is_empty());
    assert!(b.receive(&zero).unwrap().is_empty());
    // A bridge's counters beside queue b (the file `shmfifo bridge` keeps), naming b's creation.
    let created = b.attributes().created_timestamp;
    std::fs::write(
        dir.join("b.fifo.bridge.json"),
        format!(
            r#"{{"remote":"sqs://x.fifo","queue_created_ms":{created},"forwarded":7,"retried":2,"failed":1,"dead_lettered":3,"stopped":["p","q"],"pid":1,"updated_ms":1}}"#
        ),
    )
    .unwrap();
    // One left beside a by the bridge of an earlier queue of the name (another creation): not
    // a's status.
    let earlier = a.attributes().created_timestamp - 1;
    std::fs::write(
        dir.join("a.fifo.bridge.json"),
        format!(r#"{{"remote":"sqs://x.fifo","queue_created_ms":{earlier},"forwarded":9}}"#),
    )
    .unwrap();

    let ep = Endpoint::start(&dir);
    let (status, text) = get(ep.addr, "/metrics");
    assert_eq!(status, 200, "{text}");
    // C1 counts, CloudWatch's names.
    assert_eq!(
        value(&text, "ApproximateNumberOfMessagesVisible", "a.fifo"),
        1.0
    );
    assert_eq!(
        value(&text, "ApproximateNumberOfMessagesNotVisible", "a.fifo"),
        1.0
    );
    assert_eq!(
        value(&text, "ApproximateNumberOfMessagesVisible", "b.fifo"),
        0.0
    );
    assert_eq!(
        value(&text, "ApproximateNumberOfMessagesNotVisible", "b.fifo"),
        1.0
    );
    // On a's test clock, the oldest message left was sent 90 s ago.
    assert_eq!(
        value(&text, "ApproximateAgeOfOldestMessage", "a.fifo"),
        90.0
    );
    assert_eq!(value(&text, "NumberOfMessagesSent_total", "a.fifo"), 3.0);
    assert_eq!(value(&text, "NumberOfMessagesDeleted_total", "a.fifo"), 1.0);
    assert_eq!(
        value(&text, "NumberOfMessagesReceived_total", "a.fifo"),
        2.0
    );
    // NumberOfEmptyReceives, and every counter `shmfifo stat` shows.
    assert_eq!(value(&text, "NumberOfEmptyReceives_total", "b.fifo"), 2.0);
    assert_eq!(value(&text, "NumberOfEmptyReceives_total", "a.fifo"), 0.0);
    assert_eq!(value(&text, "shmfifo_duplicates_total", "a.fifo"), 0.0);
    assert_eq!(
        value(&text, "shmfifo_visibility_expiries_total", "b.fifo"),
        1.0
    );
    for (name, _, _) in shmfifo::Counters::default().named() {
        let shown = match name {
            "sent" => "NumberOfMessagesSent".to_owned(),
            "received" => "NumberOfMessagesReceived".to_owned(),
            "deleted" => "NumberOfMessagesDeleted".to_owned(),
            "empty_receives" => "NumberOfEmptyReceives".to_owned(),
            n => format!("shmfifo_{n}"),
        };
        value(&text, &format!("{shown}_total"), "a.fifo");
    }
    for n in [
        "shmfifo_dedup_evictions_total",
        "shmfifo_quarantined_messages_total",
        "shmfifo_quarantined_groups_total",
    ] {
        assert_eq!(value(&text, n, "a.fifo"), 0.0);
    }
    // a's one participant slot is ours: the scrape observed it without joining.
    assert_eq!(value(&text, "shmfifo_participants_alive", "a.fifo"), 1.0);
    // Under `shmfifo stat --prometheus`'s names, with its growth counters (both were missing).
    assert_eq!(value(&text, "shmfifo_groups_active", "a.fifo"), 1.0);
    assert!(value(&text, "shmfifo_groups_capacity", "a.fifo") >= 1.0);
    assert_eq!(value(&text, "shmfifo_grows_total", "a.fifo"), 0.0);
    assert_eq!(value(&text, "shmfifo_refused_grows_total", "a.fifo"), 0.0);
    assert_eq!(value(&text, "shmfifo_queue_up", "a.fifo"), 1.0);
    assert!(
        !text.contains("notes.txt"),
        "a file that is not a queue is not reported"
    );
    assert_eq!(
        value(&text, "shmfifo_bridge_forwarded_total", "b.fifo"),
        7.0
    );
    assert_eq!(value(&text, "shmfifo_bridge_failed_total", "b.fifo"), 1.0);
    assert_eq!(
        value(&text, "shmfifo_bridge_dead_lettered_total", "b.fifo"),
        3.0
    );
    assert_eq!(value(&text, "shmfifo_bridge_stopped_groups", "b.fifo"), 2.0);
    assert!(
        !text.contains("shmfifo_bridge_forwarded_total{queue=\"a.fifo\"}"),
        "an earlier queue's bridge status is not a's"
    );
    assert!(
        !text.contains("bridge.json"),
        "the status file is not a queue"
    );
    assert_eq!(get(ep.addr, "/").0, 404);
    ep.stop().unwrap();
    drop((a, b));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Files another user may plant in a shared directory do not spoil a scrape: a queue whose
/// name holds a double quote, a backslash and a line feed is labelled with them escaped (one
/// raw `"` made the whole exposition unreadable), and a FIFO planted as a queue's bridge status
/// file is not waited on (it hung every scrape).
#[test]
fn planted_names_and_status_files_do_not_spoil_a_scrape() {
    let dir = std::env::temp_dir().join(format!("shmfifo-metrics-names-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let odd = dir.join("a\"b\\c\nd.fifo");
    shmfifo::Queue::create_at(&odd, &shmfifo::QueueConfig::new()).unwrap();
    let plain = dir.join("plain.fifo");
    shmfifo::Queue::create_at(&plain, &shmfifo::QueueConfig::new()).unwrap();
    let fifo =
        std::ffi::CString::new(dir.join("plain.fifo.bridge.json").to_str().unwrap()).unwrap();
    // SAFETY: mkfifo(3) on a path in our own directory.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o666) }, 0);
    let ep = Endpoint::start(&dir);
    let (status, out) = get(ep.addr, "/metrics");
    assert_eq!(status, 200, "{out}");
    assert!(
        out.contains(r#"shmfifo_queue_up{queue="a\"b\\c\nd.fifo"} 1"#),
        "{out}"
    );
    assert!(
        out.contains(r#"shmfifo_queue_up{queue="plain.fifo"} 1"#),
        "{out}"
    );
    // No line of the exposition begins inside a label (the raw line feed would have split one).
    assert!(out.lines().all(|l| !l.starts_with("d.fifo")), "{out}");
    ep.stop().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

/// One local client holding every connection the endpoint serves (64, each sending nothing)
/// no longer shuts scrapers out. Each local user holds at most 16 connections (its next one
/// closes its own oldest idle one), and at the endpoint's limit the user holding the most
/// makes room. Before, a connection past the limit was closed at once, for as long as the
/// holder kept its connections (up to 30 s each, then reconnecting). As root (CI), the holder
/// is another user (`nobody`, through bash's /dev/tcp); otherwise this test's own user, whose
/// scrape then takes the place of one of its own idle connections.
#[test]
fn a_client_holding_every_connection_does_not_shut_scrapers_out() {
    use std::os::unix::process::CommandExt as _;
    let dir = std::env::temp_dir().join(format!("shmfifo-metrics-hold-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ep = Endpoint::start(&dir);
    // SAFETY: geteuid cannot fail and touches no memory of ours.
    let root = unsafe { libc::geteuid() } == 0;
    let mut held = Vec::new();
    let mut child = None;
    if root {
        let script = format!(
            "for i in $(seq 10 73); do eval \"exec $i<>/dev/tcp/127.0.0.1/{}\" || exit 1; done; echo held; sleep 60",
            ep.addr.port()
        );
        let mut c = std::process::Command::new("bash")
            .args(["-c", &script])
            .uid(65534)
            .gid(65534)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(c.stdout.take().unwrap()),
            &mut line,
        )
        .unwrap();
        assert_eq!(line.trim(), "held", "the holder opened its 64 connections");
        child = Some(c);
    } else {
        held = (0..64)
            .map(|_| std::net::TcpStream::connect(ep.addr).unwrap())
            .collect();
    }
    // Every held connection is looked up and admitted (or made room for) before the scrapes.
    std::thread::sleep(Duration::from_millis(1000));
    for k in 0..3 {
        let (status, _) = get(ep.addr, "/metrics");
        assert_eq!(status, 200, "scrape {k} with 64 idle connections held");
    }
    if let Some(mut c) = child {
        let _ = c.kill();
        let _ = c.wait();
    }
    drop(held);
    ep.stop().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

#[path = "support/curl.rs"]
mod curl;

/// A GET of `/metrics` as `uid` (root only), from a socket that user owns.
fn scrape_as(uid: u32, addr: std::net::SocketAddr) -> (u16, String) {
    curl::curl_as(uid, &[&format!("http://{addr}/metrics")])
}

/// Through the metrics endpoint any local user read every queue of its user's: names, counts,
/// ages and counters of 0600 queues, and of queues in a 0700 directory. Now a scrape acts as
/// the user owning the client's socket, as `serve` does: user `nobody` sees a 0666 queue and
/// nothing of a 0600 one, and nothing at all of a directory it may not list; the endpoint's
/// own user sees both. (As root; elsewhere only the own-user half.)
#[test]
fn a_client_sees_only_the_queues_its_user_may_open() {
    use std::os::unix::fs::PermissionsExt;
    let dir = std::env::temp_dir().join(format!("shmfifo-metrics-who-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let private = Queue::create_at(dir.join("private.fifo"), &QueueConfig::new()).unwrap();
    private
        .send(&SendMessage::new("g", "secret").dedup_id("1"))
        .unwrap();
    let _shared =
        Queue::create_at(dir.join("shared.fifo"), &QueueConfig::new().mode(0o666)).unwrap();
    let ep = Endpoint::start(&dir);
    let (status, own) = get(ep.addr, "/metrics");
    assert_eq!(status, 200, "{own}");
    assert_eq!(
        value(&own, "ApproximateNumberOfMessagesVisible", "private.fifo"),
        1.0
    );
    assert!(own.contains("queue=\"shared.fifo\""), "{own}");
    // SAFETY: geteuid cannot fail and touches no memory of ours.
    if unsafe { libc::geteuid() } == 0 {
        let nobody = 65534;
        let (status, theirs) = scrape_as(nobody, ep.addr);
        assert_eq!(status, 200, "{theirs}");
        assert!(theirs.contains("queue=\"shared.fifo\""), "{theirs}");
        assert!(!theirs.contains("private"), "a 0600 queue's name: {theirs}");
        // A directory nobody may not list (or search): nothing of it at all.
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        let (status, theirs) = scrape_as(nobody, ep.addr);
        assert_eq!(status, 200, "{theirs}");
        assert!(
            !theirs.contains("fifo"),
            "a 0700 directory's queues: {theirs}"
        );
        let (_, own) = get(ep.addr, "/metrics");
        assert!(own.contains("queue=\"private.fifo\""), "{own}");
    }
    ep.stop().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A queue named on the command line that is not there is reported down: it was left out of
/// the scrape, so an alert on `shmfifo_queue_up == 0` never fired for a queue that was gone.
#[test]
fn a_named_queue_that_is_gone_is_reported_down() {
    let dir = std::env::temp_dir().join(format!("shmfifo-metrics-named-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let _a = Queue::create_at(dir.join("a.fifo"), &QueueConfig::new()).unwrap();
    let ep = Endpoint::start_named(&dir, &["a.fifo", "gone.fifo"]);
    let (status, text) = get(ep.addr, "/metrics");
    assert_eq!(status, 200, "{text}");
    assert_eq!(value(&text, "shmfifo_queue_up", "a.fifo"), 1.0);
    assert_eq!(value(&text, "shmfifo_queue_up", "gone.fifo"), 0.0);
    ep.stop().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A non-loopback address has no local user to check a client's access by, and nothing
/// authenticates a client: refused, unless `public` says every client sees every queue.
#[test]
fn a_non_loopback_address_needs_public() {
    let cfg = shmfifo_serve::metrics::MetricsConfig {
        addr: "0.0.0.0:0".parse().unwrap(),
        ..Default::default()
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let r = rt.block_on(shmfifo_serve::metrics::serve_metrics(
        cfg.clone(),
        |_| {},
        async {},
    ));
    let e = r.expect_err("refused");
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput, "{e}");
    let public = shmfifo_serve::metrics::MetricsConfig {
        public: true,
        ..cfg
    };
    rt.block_on(shmfifo_serve::metrics::serve_metrics(
        public,
        |_| {},
        async {},
    ))
    .expect("served (and stopped at once)");
}

/// A client asking again and again costs one scrape per `reuse` (a directory walk and a look
/// at every queue each), not one per request: within it, its user gets the scrape it got
/// before (a queue created since is not in it); an endpoint that reuses nothing shows it.
/// (Before: every request scraped anew, four at once, so one local user's loop kept every
/// scrape slot walking the directory.)
#[test]
fn a_viewer_asking_again_within_the_reuse_gets_the_same_scrape() {
    let dir = std::env::temp_dir().join(format!("shmfifo-metrics-reuse-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let _a = Queue::create_at(dir.join("a.fifo"), &QueueConfig::new()).unwrap();
    let reusing = Endpoint::start_reusing(&dir, Duration::from_secs(600));
    let fresh = Endpoint::start(&dir);
    let (status, first) = get(reusing.addr, "/metrics");
    assert_eq!(status, 200, "{first}");
    assert!(
        first.contains(r#"shmfifo_queue_up{queue="a.fifo"} 1"#),
        "{first}"
    );
    let _b = Queue::create_at(dir.join("b.fifo"), &QueueConfig::new()).unwrap();
    for _ in 0..20 {
        let (status, again) = get(reusing.addr, "/metrics");
        assert_eq!(status, 200, "{again}");
        // The same body: the response's own headers (a date) aside.
        let body = |r: &str| r.split("\r\n\r\n").nth(1).unwrap_or("").to_owned();
        assert_eq!(body(&again), body(&first));
    }
    let (status, now) = get(fresh.addr, "/metrics");
    assert_eq!(status, 200, "{now}");
    assert!(
        now.contains(r#"shmfifo_queue_up{queue="b.fifo"} 1"#),
        "{now}"
    );
    reusing.stop().unwrap();
    fresh.stop().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}
