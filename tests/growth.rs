//! An arena that grows (layout 13): a backlog beyond the base file's slots is held up to the
//! size limit, in order, across processes that map the new segments as they meet them; at the
//! limit a send answers `SizeClassFull`.

use std::time::Duration;

mod common;

use shmfifo::{BatchEntry, Deduplication, Error, Queue, QueueConfig, ReceiveOptions, SendMessage};

fn small(limit: u64) -> QueueConfig {
    QueueConfig::new()
        .deduplication(Deduplication::Off)
        .max_messages(64)
        .size_limit(limit)
}

fn drain(q: &Queue, group: &str, n: usize) -> Vec<String> {
    let mut got = Vec::new();
    while got.len() < n {
        let ms = q
            .receive(&ReceiveOptions::max(10).wait(Duration::ZERO))
            .unwrap();
        assert!(
            !ms.is_empty(),
            "{} of {n} received, then nothing",
            got.len()
        );
        for m in ms {
            assert_eq!(m.group_id, group);
            q.delete(&m.receipt_handle).unwrap();
            got.push(m.body);
        }
    }
    got
}

/// S-backlog (issue: a queue as large as SQS's): 100,000 small messages with no consumer
/// running are all accepted by a default queue, and come back in order.
#[test]
fn a_default_queue_holds_a_backlog_of_100_000() {
    let q = Queue::create_anonymous(&QueueConfig::new().deduplication(Deduplication::Off)).unwrap();
    let base = q.size().bytes;
    for i in 0..100_000 {
        q.send(&SendMessage::new("g", &format!("{i}"))).unwrap();
    }
    let s = q.size();
    assert!(s.bytes > base, "the file grew: {} > {base}", s.bytes);
    assert!(s.grows > 0);
    let got = drain(&q, "g", 100_000);
    for (i, b) in got.iter().enumerate() {
        assert_eq!(b, &format!("{i}"));
    }
}

/// Growth stops at the size limit: then, and only then, a send answers `SizeClassFull`.
#[test]
fn growth_stops_at_the_size_limit() {
    let cfg = small(0);
    let base = cfg.arena_size().unwrap();
    // Room for a few segments of the smallest class past the base file.
    let q = Queue::create_anonymous(&small(base + 256 * 1024)).unwrap();
    let mut sent = 0;
    let err = loop {
        match q.send(&SendMessage::new("g", "x")) {
            Ok(_) => sent += 1,
            Err(e) => break e,
        }
        assert!(sent < 10_000, "never reached the limit");
    };
    assert!(matches!(err, Error::SizeClassFull { .. }), "{err:?}");
    assert!(sent > 64, "grew past the base file's 64 slots: {sent}");
    let s = q.size();
    assert!(s.bytes <= s.limit_bytes);
    assert_eq!(drain(&q, "g", sent).len(), sent);
    // Freed slots of the segments are reused.
    q.send(&SendMessage::new("g", "again")).unwrap();
}

/// A queue whose limit is its base file never grows.
#[test]
fn a_limit_at_the_base_file_means_no_growth() {
    let q = Queue::create_anonymous(&small(0)).unwrap();
    let mut sent = 0;
    while q.send(&SendMessage::new("g", "x")).is_ok() {
        sent += 1;
    }
    assert_eq!(sent, 64);
    assert_eq!(q.size().grows, 0);
}

/// A process that opened the queue before it grew maps the new segments when it meets their
/// messages (here: another handle, which maps on its own).
#[test]
fn another_handle_maps_the_segments_it_meets() {
    let producer = common::queue("grow-map", &small(64 << 20));
    let consumer = Queue::open(&producer.name).unwrap();
    let ids = ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j"];
    let entries: Vec<_> = ids
        .iter()
        .map(|id| BatchEntry {
            id,
            entry: SendMessage::new("g", "y"),
        })
        .collect();
    for _ in 0..100 {
        for r in producer.send_batch(&entries).unwrap() {
            r.result.unwrap();
        }
    }
    assert_eq!(drain(&consumer, "g", 1000).len(), 1000);
    // And a handle opened after the growth sees the grown file.
    let late = Queue::open(&producer.name).unwrap();
    producer.send(&SendMessage::new("g", "late")).unwrap();
    assert_eq!(drain(&late, "g", 1), vec!["late".to_owned()]);
}

/// The file system refusing a segment fails the send with `NoSpace`, nothing else changed: a
/// worker process whose file size limit (`RLIMIT_FSIZE`) stops at the base file fills the
/// base slots, then its send answers `NoSpace`; the queue stays usable.
#[test]
fn a_refused_segment_answers_no_space() {
    let q = common::queue("grow-nospace", &small(1 << 30));
    let size = q.size().bytes;
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_shmfifo-test-worker"))
        .args(["fill-fsize", &q.name, &size.to_string()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(text.trim(), "SENT 64 ERR NoSpace");
    assert_eq!(drain(&q, "g", 64).len(), 64);
    // Without the worker's limit the queue grows.
    for _ in 0..100 {
        q.send(&SendMessage::new("g", "x")).unwrap();
    }
    assert_eq!(drain(&q, "g", 100).len(), 100);
}

/// D1 at any rate the size limit allows (layout 14): 200,000 new dedup ids sent, received and
/// deleted as fast as one thread goes (far above the 54 a second the base table holds for 5
/// minutes), then the first id again: a duplicate, as SQS answers. The table grew instead of
/// forgetting: nothing evicted, the effective window the whole interval.
#[test]
fn d1_the_dedup_window_holds_at_any_rate() {
    let q = Queue::create_anonymous(&QueueConfig::new().size_limit(512 << 20)).unwrap();
    let base = q.attributes().dedup_entries;
    let first = q
        .send(&SendMessage::new("g", "x").dedup_id("id-0"))
        .unwrap();
    let one = ReceiveOptions::max(10).wait(Duration::ZERO);
    for i in 1..200_000 {
        let id = format!("id-{i}");
        assert!(
            !q.send(&SendMessage::new("g", "x").dedup_id(&id))
                .unwrap()
                .duplicate
        );
        if i % 10 == 0 {
            for m in q.receive(&one).unwrap() {
                q.delete(&m.receipt_handle).unwrap();
            }
        }
    }
    let again = q
        .send(&SendMessage::new("g", "x").dedup_id("id-0"))
        .unwrap();
    assert!(again.duplicate, "the first id is still remembered");
    assert_eq!(again.message_id, first.message_id);
    let a = q.attributes();
    assert_eq!(a.dedup_evictions, 0);
    assert_eq!(a.effective_deduplication_interval, Duration::from_secs(300));
    assert!(a.dedup_entries >= 8 * base, "{} of {base}", a.dedup_entries);
    assert!(q.size().grows >= 2);
}

/// Q4, S6 (layout 15): a default queue takes SQS's default `MaximumMessageSize`, 1 MiB, with
/// a base file laid out for 256 KiB messages (as large as one created for 256 KiB): the class
/// for the largest messages is laid out empty (no byte of the base file) and takes its first
/// segment when such a message is sent. Another process's handle maps it when it meets the
/// message; lowered and raised again live; a queue that may not grow defaults to what its base
/// file holds, 256 KiB, and keeps the limit it was created for.
#[test]
fn q4_s6_a_default_queue_takes_1_mib_messages() {
    let cfg = QueueConfig::new().deduplication(Deduplication::Off);
    let q = common::queue("grow-size", &cfg.clone().size_limit(64 << 20));
    let consumer = Queue::open(&q.name).unwrap();
    let base = q.size().bytes;
    let former = Queue::create_anonymous(
        &cfg.clone()
            .size_limit(64 << 20)
            .maximum_message_size(262_144),
    )
    .unwrap();
    assert_eq!(base, former.size().bytes, "no byte more than 256 KiB's");
    assert_eq!(q.maximum_message_size(), 1 << 20);
    assert_eq!(q.maximum_message_size_limit(), 1 << 20);
    let big = "y".repeat(1 << 20);
    let e = q
        .send(&SendMessage::new("g", &format!("{big}y")))
        .unwrap_err();
    assert_eq!(e.sqs_code(), "InvalidParameterValue", "{e}");
    q.set_attribute("MaximumMessageSize", "262144").unwrap();
    let e = q.send(&SendMessage::new("g", &big)).unwrap_err();
    assert_eq!(e.sqs_code(), "InvalidParameterValue", "{e}");
    q.set_attribute("MaximumMessageSize", "1048576").unwrap();
    assert_eq!(consumer.attributes().maximum_message_size, 1 << 20);
    assert_eq!(q.size().bytes, base, "nothing grew before a large message");
    for i in 0..5 {
        let body = format!("{i}{}", &big[1..]);
        q.send(&SendMessage::new("g", &body)).unwrap();
    }
    let s = q.size();
    // 5 slots of 1 MiB: segments of 1, 2 and 4 slots.
    assert_eq!(s.grows, 3);
    assert!(s.bytes >= base + (7 << 20), "{} from {base}", s.bytes);
    let got = drain(&consumer, "g", 5);
    for (i, b) in got.iter().enumerate() {
        assert_eq!(b.len(), 1 << 20);
        assert!(b.starts_with(&i.to_string()) && b[1..] == big[1..]);
    }
    // The freed slots serve the next large messages: no further growth.
    for _ in 0..7 {
        q.send(&SendMessage::new("h", &big)).unwrap();
    }
    assert_eq!(q.size().grows, 3);
    assert_eq!(drain(&consumer, "h", 7).len(), 7);
    q.set_attribute("MaximumMessageSize", "1048577")
        .unwrap_err();
    // A queue that may not grow keeps what its arena was created for.
    let fixed = Queue::create_anonymous(&cfg.size_limit(0)).unwrap();
    assert_eq!(fixed.maximum_message_size(), 262_144);
    assert!(fixed.maximum_message_size_limit() < 1 << 20);
    let e = fixed
        .set_attribute("MaximumMessageSize", "1048576")
        .unwrap_err();
    assert_eq!(e.sqs_code(), "InvalidAttributeValue");
}

/// A size class of 0 slots (layout 15) starts empty and grows on demand; one with no room
/// under the size limit, or with growth off, is refused at creation.
#[test]
fn a_class_of_no_slots_grows_on_demand() {
    let classes = vec![(512, 16), (4096, 0)];
    let cfg = QueueConfig::new()
        .deduplication(Deduplication::Off)
        .maximum_message_size(1024)
        .size_classes(classes.clone());
    let q = Queue::create_anonymous(&cfg.clone().size_limit(8 << 20)).unwrap();
    let body = "z".repeat(1000);
    for _ in 0..40 {
        q.send(&SendMessage::new("g", &body)).unwrap();
    }
    assert_eq!(q.size().grows, 6, "1 + 2 + 4 + 8 + 16 + 32 slots ≥ 40");
    assert_eq!(drain(&q, "g", 40).len(), 40);
    for limit in [0, cfg.arena_size().unwrap()] {
        let e = Queue::create_anonymous(&cfg.clone().size_limit(limit)).unwrap_err();
        assert!(
            matches!(
                e,
                Error::InvalidConfig {
                    setting: "size_classes",
                    ..
                }
            ),
            "{e:?}"
        );
    }
}

/// Groups (layout 16): `max_groups` sizes the base table, and the table grows past it by added
/// tables of twice the entries, up to the size limit, as SQS holds any number of groups. A
/// second handle finds groups in tables it maps as it meets them (never a second entry for one
/// id), every group keeps its order, and more groups are ready at once than the base table's
/// ready ring holds (each added table hints its groups on a ring of its own).
#[test]
fn the_group_table_grows_past_max_groups() {
    let cfg = small(64 << 20).max_groups(4).max_messages(4096);
    let q = common::queue("groups-grow", &cfg);
    let name = q.name.clone();
    let a = q.attributes();
    assert_eq!(a.group_capacity, 4);
    assert!(a.max_groups >= 2_000, "{}", a.max_groups);
    let base = q.size().bytes;
    for g in 0..2_000 {
        q.send(&SendMessage::new(&format!("g{g}"), &format!("{g}-0")))
            .unwrap();
    }
    let a = q.attributes();
    assert_eq!(a.active_groups, 2_000);
    assert!(a.group_capacity >= 2_000, "{}", a.group_capacity);
    assert!(q.size().bytes > base && q.size().grows > 0);
    // Another handle: each group is found where the first put it (in tables this handle maps
    // as it meets them), never inserted again.
    let o = Queue::open(&name).unwrap();
    for g in 0..2_000 {
        o.send(&SendMessage::new(&format!("g{g}"), &format!("{g}-1")))
            .unwrap();
    }
    assert_eq!(o.attributes().active_groups, 2_000);
    // 4,000 messages, each group in order, every receive served at once (each table's groups
    // are hinted on that table's own ring, which the receives take in turn), by a handle that
    // only receives: it learns of the added tables from the receives alone.
    let r = Queue::open(&name).unwrap();
    let mut seen = vec![0u32; 2_000];
    let mut n = 0;
    while n < 4_000 {
        let ms = r
            .receive(&ReceiveOptions::max(10).wait(Duration::ZERO))
            .unwrap();
        assert!(!ms.is_empty(), "{n} of 4000 received, then nothing");
        for m in ms {
            let g: usize = m.group_id[1..].parse().unwrap();
            assert_eq!(m.body, format!("{g}-{}", seen[g]), "group {g} in order");
            seen[g] += 1;
            r.delete(&m.receipt_handle).unwrap();
            n += 1;
        }
    }
    assert!(seen.iter().all(|&k| k == 2), "every message once");
    assert_eq!(q.attributes().active_groups, 0);
}

/// At the size limit the group table stops growing, and only there does a new group answer
/// `GroupLimitReached`, naming the cap; existing groups go on.
#[test]
fn the_group_table_stops_at_the_size_limit() {
    let fixed = small(0).max_groups(4);
    let base = fixed.arena_size().unwrap();
    // Room for a few group tables (8, 16, 32 … entries of 256 B and their wheel bitmaps).
    let q = Queue::create_anonymous(&small(base + (64 << 10)).max_groups(4)).unwrap();
    let cap = q.attributes().max_groups;
    assert!(cap > 4 && cap < 1_000, "{cap}");
    for g in 0..cap {
        q.send(&SendMessage::new(&format!("g{g}"), "x")).unwrap();
    }
    assert_eq!(q.attributes().group_capacity, cap);
    let r = q.send(&SendMessage::new("one-too-many", "x"));
    assert!(
        matches!(r, Err(Error::GroupLimitReached { max_groups }) if max_groups == cap),
        "{r:?}"
    );
    q.send(&SendMessage::new("g0", "y")).unwrap();
    assert_eq!(q.attributes().active_groups, cap);
}

/// `sync` writes back the segments a grown queue added, not only its base file (the base
/// mapping's `msync` alone left them dirty): on a disk-backed file, no page of the file is
/// dirty after it, as `cachestat(2)` counts them.
#[test]
fn sync_writes_back_the_segments_a_queue_grew() {
    // Under the target directory (disk-backed where the build is): tmpfs pages are never
    // written back, so they would count as dirty whatever `sync` did.
    let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("shmfifo-sync-grown-{}", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let cfg = small(0);
    let base = cfg.arena_size().unwrap();
    let q = Queue::create_at(&path, &small(base + (1 << 20))).unwrap();
    let body = "x".repeat(200);
    for i in 0..300 {
        q.send(&SendMessage::new("g", &format!("{i} {body}")))
            .unwrap();
    }
    assert!(q.size().grows > 0, "the queue grew");
    q.sync().unwrap();
    let dirty = dirty_pages(&path);
    drop(q);
    Queue::unlink_at(&path).unwrap();
    if let Some(dirty) = dirty {
        assert_eq!(dirty, 0, "pages of the file still dirty after sync");
    }
}

/// The dirty pages of file `path` in the page cache (`cachestat(2)`, Linux 6.5; `None` on a
/// kernel without it).
fn dirty_pages(path: &std::path::Path) -> Option<u64> {
    use std::os::fd::AsRawFd;
    #[repr(C)]
    struct Range {
        off: u64,
        len: u64,
    }
    #[repr(C)]
    #[derive(Default)]
    struct Stat {
        nr_cache: u64,
        nr_dirty: u64,
        nr_writeback: u64,
        nr_evicted: u64,
        nr_recently_evicted: u64,
    }
    let f = std::fs::File::open(path).unwrap();
    // SAFETY: statfs(2) fills the struct it is given, which outlives the call.
    let mut fs: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: as above; the descriptor is open.
    assert_eq!(unsafe { libc::fstatfs(f.as_raw_fd(), &mut fs) }, 0);
    if fs.f_type == libc::TMPFS_MAGIC {
        eprintln!(
            "{} is on tmpfs, whose pages are never written back: not counted",
            path.display()
        );
        return None;
    }
    let range = Range { off: 0, len: 0 };
    let mut st = Stat::default();
    // SAFETY: cachestat(2) (syscall 451 on every architecture) reads `range` and writes `st`,
    // both live and laid out as the kernel's structs; the descriptor is open.
    let r = unsafe { libc::syscall(451, f.as_raw_fd(), &range, &mut st, 0) };
    if r != 0 {
        let e = std::io::Error::last_os_error();
        // ENOSYS: a kernel before 6.5; EPERM: a seccomp filter that does not know it.
        assert!(
            matches!(e.raw_os_error(), Some(libc::ENOSYS | libc::EPERM)),
            "cachestat: {e}"
        );
        eprintln!("cachestat(2) not available here ({e}): the dirty pages are not counted");
        return None;
    }
    assert!(st.nr_cache > 0, "the file is in the page cache");
    Some(st.nr_dirty + st.nr_writeback)
}
