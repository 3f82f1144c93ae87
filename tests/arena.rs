//! Integration tests of the arena: create, open, unlink, validation of foreign or damaged files,
//! permissions, anonymous queues, and the capacity limits (each its own clear error that leaves
//! the rest of the queue working).

mod common;
use common::*;

use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use shmfifo::{Deduplication, Error, Queue, QueueConfig, ReceiveOptions, SendMessage};

/// A file (or directory) under /dev/shm removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn file(tag: &str, bytes: &[u8]) -> Scratch {
        let name = unique(tag);
        let p = Path::new("/dev/shm").join(&name);
        std::fs::write(&p, bytes).unwrap();
        // As an arena's creator makes it (owner-only): an open refuses wider permissions.
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        Scratch(p)
    }
    fn name(&self) -> &str {
        self.0.file_name().unwrap().to_str().unwrap()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if self.0.is_dir() {
            let _ = std::fs::remove_dir_all(&self.0);
        } else {
            let _ = std::fs::remove_file(&self.0);
        }
    }
}

fn arena_bytes(q: &TestQueue) -> Vec<u8> {
    std::fs::read(Path::new("/dev/shm").join(&q.name)).unwrap()
}

fn mode_of(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

/// Q7 (`QueueNameExists`): create never overwrites an existing queue.
#[test]
fn create_twice_is_queue_name_exists() {
    let q = queue("exists", &small());
    let r = Queue::create(&q.name, &small());
    assert!(
        matches!(&r, Err(Error::QueueNameExists { path }) if path.ends_with(&q.name)),
        "{r:?}"
    );
    // The first queue is untouched.
    send(&q, "g", "still here");
    let other = Queue::open(&q.name).unwrap();
    assert_eq!(bodies(&recv(&other, 1)), ["still here"]);
}

/// Error catalogue (1.15) `QueueDoesNotExist`.
#[test]
fn open_or_unlink_missing_is_queue_does_not_exist() {
    let name = unique("missing");
    let r = Queue::open(&name);
    assert!(matches!(r, Err(Error::QueueDoesNotExist { .. })), "{r:?}");
    let r = Queue::unlink(&name);
    assert!(matches!(r, Err(Error::QueueDoesNotExist { .. })), "{r:?}");
    let r = Queue::open_at(Path::new("/dev/shm").join(&name));
    assert!(matches!(r, Err(Error::QueueDoesNotExist { .. })), "{r:?}");
    match &r {
        Err(e) => assert_eq!(e.to_string(), format!("no queue at /dev/shm/{name}")),
        Ok(_) => unreachable!(),
    }
    // A path with a trailing `/` is no directory that is missing: "no queue", not "no directory".
    let r = Queue::open_at(format!("/dev/shm/{name}/"));
    match &r {
        Err(e @ Error::QueueDoesNotExist { .. }) => {
            assert_eq!(e.to_string(), format!("no queue at /dev/shm/{name}"))
        }
        _ => panic!("{r:?}"),
    }
    // A directory is no queue file, said with its path, to an opener as to an observer.
    for r in [
        Queue::open_at("/dev/shm").map(drop),
        Queue::observe_at("/dev/shm").map(drop),
    ] {
        assert!(
            matches!(&r, Err(Error::UntrustedFile { path, reason })
                if path == Path::new("/dev/shm") && reason == "it is a directory, not a queue file"),
            "{r:?}"
        );
    }
    // Created in a directory that is not there: the same code, the directory named as one
    // (its path ends in `/`), and said so, not "no queue".
    let dir = Path::new("/dev/shm").join(unique("no-such-dir"));
    let r = Queue::create_at(dir.join("q.fifo"), &small());
    let Err(e @ Error::QueueDoesNotExist { path }) = &r else {
        panic!("{r:?}");
    };
    assert_eq!(path.as_os_str(), format!("{}/", dir.display()).as_str());
    assert_eq!(
        e.to_string(),
        format!(
            "no directory {}/: a queue is created in a directory that exists (make it first)",
            dir.display()
        )
    );
}

/// "Our choices": a queue is named by a name under /dev/shm, validated with clear errors.
#[test]
fn invalid_queue_names() {
    let long = "n".repeat(201);
    for bad in [
        "",
        "a/b",
        "/abs",
        "../up",
        ".",
        "..",
        "with space",
        "é",
        "tab\t",
        long.as_str(),
    ] {
        let r = Queue::create(bad, &small());
        assert!(
            matches!(r, Err(Error::InvalidQueueName { .. })),
            "create {bad:?}: {r:?}"
        );
        let r = Queue::open(bad);
        assert!(
            matches!(r, Err(Error::InvalidQueueName { .. })),
            "open {bad:?}: {r:?}"
        );
        let r = Queue::unlink(bad);
        assert!(
            matches!(r, Err(Error::InvalidQueueName { .. })),
            "unlink {bad:?}: {r:?}"
        );
    }
    // 200 characters of the allowed set are fine.
    let base = unique("n200");
    let name200 = format!(
        "{base}.{}",
        "x-_"
            .repeat(200)
            .chars()
            .take(199 - base.len())
            .collect::<String>()
    );
    assert_eq!(name200.len(), 200);
    let q = Queue::create(&name200, &small()).expect("200-char name");
    drop(q);
    Queue::unlink(&name200).unwrap();
}

/// Unlink removes the name only; open handles keep the queue (ARCHITECTURE §3).
#[test]
fn unlink_keeps_open_handles_working() {
    let name = unique("unlinked");
    let q = Queue::create(&name, &small()).unwrap();
    let other = Queue::open(&name).unwrap();
    Queue::unlink(&name).unwrap();
    assert!(matches!(
        Queue::open(&name),
        Err(Error::QueueDoesNotExist { .. })
    ));
    q.send(&SendMessage::new("g", "after unlink")).unwrap();
    assert_eq!(bodies(&recv(&other, 1)), ["after unlink"]);
    // The name can be used again for a new, empty queue.
    let fresh = Queue::create(&name, &small()).unwrap();
    assert!(recv(&fresh, 10).is_empty());
    Queue::unlink(&name).unwrap();
}

/// ARCHITECTURE §3/§6: opening validates the header (magic) and refuses foreign files.
#[test]
fn garbage_file_is_not_an_arena() {
    let big = Scratch::file("garbage", &vec![0xAB; 64 * 1024]);
    let r = Queue::open(big.name());
    assert!(
        matches!(&r, Err(Error::NotAnArena { path }) if path == &big.0),
        "{r:?}"
    );
    let short = Scratch::file("garbage-short", b"hello, world, not an arena");
    assert!(matches!(
        Queue::open(short.name()),
        Err(Error::NotAnArena { .. })
    ));
    let tiny = Scratch::file("garbage-tiny", b"abc");
    assert!(matches!(
        Queue::open(tiny.name()),
        Err(Error::NotAnArena { .. })
    ));
    // Empty or all-zero: no arena (creators name an arena only once it is complete).
    let empty = Scratch::file("garbage-empty", b"");
    assert!(matches!(
        Queue::open(empty.name()),
        Err(Error::NotAnArena { .. })
    ));
    let zeros = Scratch::file("garbage-zeros", &vec![0; 64 * 1024]);
    assert!(matches!(
        Queue::open(zeros.name()),
        Err(Error::NotAnArena { .. })
    ));
    // Create refuses to overwrite it.
    assert!(matches!(
        Queue::create(big.name(), &small()),
        Err(Error::QueueNameExists { .. })
    ));
}

#[test]
fn exact_copy_of_an_arena_opens() {
    // Control for the damaged-copy tests below: an undamaged copy is a valid queue.
    let q = queue("copysrc", &small());
    send(&q, "g", "copied");
    let copy = Scratch::file("copy", &arena_bytes(&q));
    let c = Queue::open(copy.name()).expect("an exact copy opens");
    assert_eq!(bodies(&recv(&c, 10)), ["copied"]);
}

/// ARCHITECTURE §3/§6: a file shorter than its geometry is refused (`Truncated`).
#[test]
fn truncated_copy_is_truncated() {
    let q = queue("truncsrc", &small());
    let bytes = arena_bytes(&q);
    let full = bytes.len() as u64;
    assert_eq!(full, q.attributes().arena_bytes);
    let half = Scratch::file("trunc", &bytes[..bytes.len() / 2]);
    let r = Queue::open(half.name());
    assert!(
        matches!(r, Err(Error::Truncated { expected, found }) if expected == full && found == full / 2),
        "{r:?}"
    );
    let one_short = Scratch::file("trunc1", &bytes[..bytes.len() - 4096]);
    assert!(matches!(
        Queue::open(one_short.name()),
        Err(Error::Truncated { .. })
    ));
    // Shorter than a header page but with the magic.
    let stub = Scratch::file("truncstub", &bytes[..100]);
    let r = Queue::open(stub.name());
    assert!(
        matches!(r, Err(Error::Truncated { found: 100, .. })),
        "{r:?}"
    );
}

/// ARCHITECTURE §3: layout version checked on open (`LayoutVersionMismatch`).
#[test]
fn other_layout_version_is_mismatch() {
    let q = queue("versrc", &small());
    let mut bytes = arena_bytes(&q);
    bytes[8..16].copy_from_slice(&999u64.to_le_bytes());
    let f = Scratch::file("ver", &bytes);
    let r = Queue::open(f.name());
    assert!(
        matches!(r, Err(Error::LayoutVersionMismatch { found: 999, expected }) if expected != 999),
        "{r:?}"
    );
}

/// ARCHITECTURE §3: the state word is stored last, and a creator names the arena only once it is
/// complete; a file whose state was never set ready is stale: `open` says `NotReady` at once, and
/// `create` at its path replaces it (stale arenas). A live arena is never replaced.
#[test]
fn uninitialised_arena_is_not_ready_and_create_replaces_it() {
    let q = queue("readysrc", &small());
    let mut bytes = arena_bytes(&q);
    bytes[0x158..0x160].copy_from_slice(&0u64.to_le_bytes());
    let f = Scratch::file("notready", &bytes);
    let t = Instant::now();
    let r = Queue::open(f.name());
    assert!(matches!(r, Err(Error::NotReady)), "{r:?}");
    assert!(
        t.elapsed() < Duration::from_secs(1),
        "no wait for a creator"
    );
    let fresh = Queue::create(f.name(), &small()).expect("create replaces a stale arena");
    send(&fresh, "g", "after");
    let again = Queue::open(f.name()).expect("the new arena opens");
    assert_eq!(bodies(&recv(&again, 10)), ["after"]);
    // Now live: create refuses it.
    assert!(matches!(
        Queue::create(f.name(), &small()),
        Err(Error::QueueNameExists { .. })
    ));
    // Empty and all-zero files carry no arena magic: not ours to replace. `open` says
    // NotAnArena (it said NotReady, advising a create that refuses), `create` that the name
    // exists, and the file stays as it was.
    for (tag, content) in [("stale-empty", vec![]), ("stale-zeros", vec![0u8; 8192])] {
        let s = Scratch::file(tag, &content);
        assert!(matches!(
            Queue::open(s.name()),
            Err(Error::NotAnArena { .. })
        ));
        assert!(matches!(
            Queue::create(s.name(), &small()),
            Err(Error::QueueNameExists { .. })
        ));
        assert_eq!(std::fs::read(&s.0).unwrap(), content, "{tag}: untouched");
    }
}

/// Tools touch only queues. `unlink` removes only a regular file of ours that carries
/// the arena magic; a FIFO, a device node, a zero-filled or foreign file and a symlink stay,
/// with an error that says why. `create` never replaces them either.
#[test]
fn unlink_and_create_touch_only_queues() {
    use std::os::unix::fs::symlink;
    let dir = std::env::temp_dir().join(unique("touch"));
    std::fs::create_dir_all(&dir).unwrap();
    let _cleanup = Scratch(dir.clone());
    let fifo = dir.join("fifo");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo(3) with a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let zeros = dir.join("zeros");
    std::fs::write(&zeros, vec![0u8; 4096]).unwrap();
    let text = dir.join("text");
    std::fs::write(&text, b"not a queue").unwrap();
    let target = Queue::create_at(dir.join("real"), &small()).unwrap();
    let link = dir.join("link");
    symlink(dir.join("real"), &link).unwrap();
    for (p, want) in [
        (&fifo, "UntrustedFile"),
        (&Path::new("/dev/null").to_path_buf(), "UntrustedFile"),
        (&zeros, "NotAnArena"),
        (&text, "NotAnArena"),
        (&link, "UntrustedFile"),
    ] {
        let r = Queue::unlink_at(p);
        let got = match &r {
            Err(Error::UntrustedFile { .. }) => "UntrustedFile",
            Err(Error::NotAnArena { .. }) => "NotAnArena",
            other => panic!("unlink {}: {other:?}", p.display()),
        };
        assert_eq!(got, want, "unlink {}", p.display());
        assert!(
            std::fs::symlink_metadata(p).is_ok(),
            "{} is still there",
            p.display()
        );
        assert!(
            Queue::create_at(p, &small()).is_err(),
            "create does not replace {}",
            p.display()
        );
    }
    assert!(std::fs::symlink_metadata(&fifo)
        .unwrap()
        .file_type()
        .is_fifo());
    drop(target);
    Queue::unlink_at(dir.join("real")).expect("a queue file is removed");
}

/// A path is input (a redrive policy's dead-letter queue is written into the shared file by
/// any process that may open it, and a root `shmfifo serve` opens it): opening anything but a
/// regular file for I/O can act on it (a device armed by its open, a FIFO's reader woken).
/// The open looks at what the name is first and opens only a regular file for I/O: a FIFO's
/// blocked reader sees no writer come and go.
#[test]
fn opening_a_path_opens_only_a_regular_file_for_io() {
    use std::os::unix::fs::OpenOptionsExt;
    let dir = std::env::temp_dir().join(unique("fifo-open"));
    std::fs::create_dir_all(&dir).unwrap();
    let _cleanup = Scratch(dir.clone());
    let fifo = dir.join("fifo");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo(3) with a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    // A reader that blocks in open until a writer opens the FIFO (the old open, O_RDWR, was
    // one), then reads until every writer has closed it.
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || {
            let f = std::fs::File::open(&fifo).unwrap();
            tx.send(()).unwrap();
            drop(f);
        })
    };
    // Let the reader reach its open (a writer that came and went before would be missed).
    std::thread::sleep(Duration::from_millis(200));
    for r in [
        Queue::open_at(&fifo).map(drop),
        Queue::observe_at(&fifo).map(drop),
        Queue::unlink_at(&fifo),
    ] {
        assert!(matches!(r, Err(Error::UntrustedFile { .. })), "{r:?}");
    }
    assert!(
        rx.recv_timeout(Duration::from_millis(300)).is_err(),
        "the FIFO was opened for I/O"
    );
    // Release the reader with a writer of our own.
    let w = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&fifo)
        .unwrap();
    rx.recv_timeout(Duration::from_secs(10)).unwrap();
    drop(w);
    reader.join().unwrap();
}

/// A queue name cannot be squatted. Open never follows a symlink, refuses a file
/// whose permissions are wider than its creator asked, and one owned by another user.
#[test]
fn open_refuses_symlinks_widened_modes_and_foreign_owners() {
    use std::os::unix::fs::symlink;
    let q = queue("squat", &small());
    let real = Path::new("/dev/shm").join(&q.name);
    let link = Scratch(Path::new("/dev/shm").join(unique("squatlink")));
    symlink(&real, &link.0).unwrap();
    let r = Queue::open(link.name());
    assert!(
        matches!(&r, Err(Error::UntrustedFile { reason, .. }) if reason.contains("symbolic link")),
        "{r:?}"
    );
    // Another user widened the permissions since creation (0600 asked).
    std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o666)).unwrap();
    let r = Queue::open(&q.name);
    assert!(
        matches!(&r, Err(Error::UntrustedFile { reason, .. }) if reason.contains("wider")),
        "{r:?}"
    );
    std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o600)).unwrap();
    Queue::open(&q.name).expect("as created: opens");
    // A foreign owner (where this test may change owners: as root).
    let c = std::ffi::CString::new(real.to_str().unwrap()).unwrap();
    // SAFETY: chown(2) with a valid NUL-terminated path; fails harmlessly when not root.
    if unsafe { libc::chown(c.as_ptr(), 65534, 65534) } == 0 {
        let r = Queue::open(&q.name);
        assert!(
            matches!(&r, Err(Error::UntrustedFile { reason, .. }) if reason.contains("owned by uid 65534")),
            "{r:?}"
        );
        assert!(matches!(
            Queue::unlink(&q.name),
            Err(Error::UntrustedFile { .. })
        ));
        // SAFETY: as above, back to us.
        let me = unsafe { libc::geteuid() };
        assert_eq!(unsafe { libc::chown(c.as_ptr(), me, me) }, 0);
    }
}

/// ARCHITECTURE §3/§6: owner-only permissions by default, configurable.
#[test]
fn permissions_default_to_owner_only_and_follow_mode() {
    let q = queue("mode", &small());
    assert_eq!(mode_of(&Path::new("/dev/shm").join(&q.name)), 0o600);
    assert_eq!(
        QueueConfig::new(),
        QueueConfig::new().mode(0o600),
        "0o600 is the default"
    );
    let q = queue("mode640", &small().mode(0o640));
    assert_eq!(mode_of(&Path::new("/dev/shm").join(&q.name)), 0o640);
    // Bits a typical umask (022) would clear are kept.
    let q = queue("mode666", &small().mode(0o666));
    assert_eq!(mode_of(&Path::new("/dev/shm").join(&q.name)), 0o666);
    let r = Queue::create(&unique("modebad"), &small().mode(0o4755));
    assert!(
        matches!(
            r,
            Err(Error::InvalidConfig {
                setting: "mode",
                ..
            })
        ),
        "{r:?}"
    );
}

/// "Our choices": a queue may be named by any path.
#[test]
fn create_at_open_at_unlink_at_with_a_path() {
    let dir = Scratch(Path::new("/dev/shm").join(unique("dir")));
    std::fs::create_dir(&dir.0).unwrap();
    let path = dir.0.join("my queue (with spaces)");
    let q = Queue::create_at(&path, &small()).unwrap();
    assert_eq!(q.path(), Some(path.as_path()));
    assert!(path.exists());
    assert_eq!(mode_of(&path), 0o600);
    assert!(matches!(
        Queue::create_at(&path, &small()),
        Err(Error::QueueNameExists { .. })
    ));
    let other = Queue::open_at(&path).unwrap();
    assert_eq!(other.path(), Some(path.as_path()));
    q.send(&SendMessage::new("g", "by path")).unwrap();
    assert_eq!(bodies(&recv(&other, 1)), ["by path"]);
    Queue::unlink_at(&path).unwrap();
    assert!(!path.exists());
    assert!(matches!(
        Queue::open_at(&path),
        Err(Error::QueueDoesNotExist { .. })
    ));
    assert!(matches!(
        Queue::unlink_at(&path),
        Err(Error::QueueDoesNotExist { .. })
    ));
}

/// Q4-style setting ranges (`InvalidConfig`); a failed create leaves nothing behind.
#[test]
fn failed_create_leaves_no_file() {
    let name = unique("badcfg");
    let r = Queue::create(&name, &QueueConfig::new().maximum_message_size(1000));
    assert!(
        matches!(
            r,
            Err(Error::InvalidConfig {
                setting: "maximum_message_size",
                ..
            })
        ),
        "{r:?}"
    );
    assert!(!Path::new("/dev/shm").join(&name).exists());
    assert!(matches!(
        Queue::open(&name),
        Err(Error::QueueDoesNotExist { .. })
    ));
}

/// ARCHITECTURE §1: an arena may be a memfd, shared through an inherited descriptor.
#[test]
fn anonymous_queue_shared_through_inheritable_fd() {
    use std::os::fd::AsFd;
    let q = Queue::create_anonymous(&small()).unwrap();
    assert_eq!(q.path(), None);
    q.send(&SendMessage::new("g", "from creator")).unwrap();
    let fd = q.inheritable_fd().unwrap();
    let other = Queue::open_fd(fd.as_fd()).unwrap();
    // open_fd leaves the descriptor to the caller: close it; the queue stays usable.
    drop(fd);
    let ms = recv(&other, 10);
    assert_eq!(bodies(&ms), ["from creator"]);
    other.send(&SendMessage::new("g", "from opener")).unwrap();
    // A handle received through one participant is deleted through the other.
    q.delete(&ms[0].receipt_handle).unwrap();
    let ms = recv(&q, 10);
    assert_eq!(bodies(&ms), ["from opener"]);
    other.delete(&ms[0].receipt_handle).unwrap();
    assert_eq!(q.attributes().arena_bytes, other.attributes().arena_bytes);
}

/// ARCHITECTURE §1: every participant sees one queue; receipt handles are queue-wide (H1).
#[test]
fn create_and_open_handles_share_messages() {
    let q = queue("share", &small());
    let b = Queue::open(&q.name).unwrap();
    send(&q, "g1", "a1");
    send(&b, "g1", "a2");
    send(&b, "g2", "b1");
    let ms = b.receive(&ReceiveOptions::max(10)).unwrap();
    assert_eq!(bodies(&ms), ["a1", "a2", "b1"]);
    // Handles are queue-wide: delete through the other handle, also by text.
    q.delete(&ms[0].receipt_handle).unwrap();
    q.delete_str(&ms[1].receipt_handle.to_string()).unwrap();
    b.delete(&ms[2].receipt_handle).unwrap();
    assert!(recv(&q, 10).is_empty());
    let (aq, ab) = (q.attributes(), b.attributes());
    assert_eq!(aq.created_timestamp, ab.created_timestamp);
    assert_eq!(aq.size_classes, ab.size_classes);
    assert_eq!(aq.maximum_message_size, 4096);
    assert_eq!(ab.maximum_message_size, 4096);
}

/// Q6/C1-style attributes: settings fixed at creation are read back from the arena by openers.
#[test]
fn settings_are_read_from_the_arena() {
    let cfg = small()
        .visibility_timeout(Duration::from_millis(1234))
        .receive_message_wait_time(Duration::from_millis(250))
        .max_groups(7)
        .max_participants(5);
    let q = queue("settings", &cfg);
    let o = Queue::open(&q.name).unwrap();
    let a = o.attributes();
    assert_eq!(a.visibility_timeout, Duration::from_millis(1234));
    assert_eq!(a.receive_message_wait_time, Duration::from_millis(250));
    assert_eq!(a.maximum_message_size, 4096);
    // The base table holds 7 groups; the table may grow past them (layout 16).
    assert_eq!(a.group_capacity, 7);
    assert!(a.max_groups >= 7, "{}", a.max_groups);
    assert_eq!(a.max_participants, 5);
    assert!(a.fifo_queue);
    assert_eq!(a.size_classes, q.attributes().size_classes);
    assert_eq!(a.size_classes[0], (192, 1024));
}

/// ARCHITECTURE §3 capacity: `SizeClassFull` is its own error; other classes keep working.
#[test]
fn size_class_full_leaves_other_classes_and_groups_working() {
    // Class 0: 4 slots of 192 B; class 1: 4 slots big enough for a 1024-byte message.
    let cfg = QueueConfig::new()
        .deduplication(Deduplication::Off)
        .maximum_message_size(1024)
        .size_classes(vec![(192, 4), (1488, 4)])
        .size_limit(0) // no growth: the classes fill
        .max_groups(16);
    let q = queue("classfull", &cfg);
    assert_eq!(q.attributes().size_classes, vec![(192, 4), (1488, 4)]);
    for i in 0..4 {
        send(&q, "g1", &format!("small-{i}"));
    }
    let r = q.send(&SendMessage::new("g1", "small-4"));
    assert!(
        matches!(r, Err(Error::SizeClassFull { class_bytes: 192 })),
        "{r:?}"
    );
    let r = q.send(&SendMessage::new("g2", "small-in-g2"));
    assert!(
        matches!(r, Err(Error::SizeClassFull { class_bytes: 192 })),
        "{r:?}"
    );
    // Messages of the other class still go through, in the same and in other groups.
    let big = "B".repeat(500);
    send(&q, "g1", &big);
    send(&q, "g2", &big);
    let ms = recv_vt(&q, 10, Duration::from_secs(30));
    let got: Vec<(&str, usize)> = ms
        .iter()
        .map(|m| (m.group_id.as_str(), m.body.len()))
        .collect();
    assert_eq!(
        got,
        [
            ("g1", 7),
            ("g1", 7),
            ("g1", 7),
            ("g1", 7),
            ("g1", 500),
            ("g2", 500)
        ]
    );
    // Draining frees the slots.
    for m in &ms {
        q.delete(&m.receipt_handle).unwrap();
    }
    for i in 0..4 {
        send(&q, "g3", &format!("again-{i}"));
    }
    assert!(matches!(
        q.send(&SendMessage::new("g3", "x")),
        Err(Error::SizeClassFull { .. })
    ));
}

/// ARCHITECTURE §3 capacity: `GroupLimitReached` affects no existing group; emptied groups free
/// entries. A queue that may not grow (`size_limit(0)`) is at its cap from the start.
#[test]
fn group_limit_reached_leaves_existing_groups_working() {
    let q = queue("groupfull", &small().max_groups(4).size_limit(0));
    assert_eq!(q.attributes().max_groups, 4);
    assert_eq!(q.attributes().group_capacity, 4);
    for g in 0..4 {
        send(&q, &format!("g{g}"), &format!("g{g}-1"));
    }
    assert_eq!(q.attributes().active_groups, 4);
    let r = q.send(&SendMessage::new("g4", "new group"));
    assert!(
        matches!(r, Err(Error::GroupLimitReached { max_groups: 4 })),
        "{r:?}"
    );
    // Existing groups still accept messages.
    for g in 0..4 {
        send(&q, &format!("g{g}"), &format!("g{g}-2"));
    }
    // Drain g1 completely; its place can then be taken by a new group.
    let ms = recv_vt(&q, 10, Duration::from_secs(30));
    assert_eq!(ms.len(), 8);
    for m in ms.iter().filter(|m| m.group_id == "g1") {
        q.delete(&m.receipt_handle).unwrap();
    }
    assert_eq!(q.attributes().active_groups, 3);
    send(&q, "g4", "g4-1");
    assert_eq!(q.attributes().active_groups, 4);
    let r = q.send(&SendMessage::new("g5", "one too many"));
    assert!(
        matches!(r, Err(Error::GroupLimitReached { max_groups: 4 })),
        "{r:?}"
    );
    assert_eq!(bodies(&recv(&q, 10)), ["g4-1"]);
}

/// ARCHITECTURE §4 participants: `ParticipantLimitReached`; the last drop frees the slot.
#[test]
fn participant_limit_reached_and_freed_on_drop() {
    let q = queue("parts", &small().max_participants(2));
    let second = Queue::open(&q.name).unwrap();
    let r = Queue::open(&q.name);
    assert!(
        matches!(
            r,
            Err(Error::ParticipantLimitReached {
                max_participants: 2
            })
        ),
        "{r:?}"
    );
    // Clones share their participant slot.
    let clone = second.clone();
    drop(second);
    assert!(matches!(
        Queue::open(&q.name),
        Err(Error::ParticipantLimitReached { .. })
    ));
    drop(clone);
    let third = Queue::open(&q.name).expect("slot freed by dropping the last handle");
    send(&third, "g", "works");
    assert_eq!(bodies(&recv(&q, 1)), ["works"]);
    assert!(matches!(
        Queue::open(&q.name),
        Err(Error::ParticipantLimitReached { .. })
    ));
}

/// Capacity (documented in `QueueConfig`): a consumed message's slot stays in use as its group's
/// list head until the group's next message is consumed or the group empties, so a class of N
/// slots holds at least N minus (groups with a consumed head) messages. The slot comes back at
/// the next delete in its group, and at once when the group empties.
#[test]
fn slot_of_deleted_head_returns_at_the_next_delete_of_its_group() {
    let cfg = QueueConfig::new()
        .deduplication(Deduplication::Off)
        .maximum_message_size(1024)
        .size_classes(vec![(192, 4), (1488, 4)])
        .size_limit(0) // no growth: the classes fill
        .max_groups(16);
    let q = queue("slotreuse", &cfg);
    for i in 0..4 {
        send(&q, "g1", &format!("s{i}"));
    }
    let ms = recv_vt(&q, 1, Duration::from_secs(30));
    q.delete(&ms[0].receipt_handle).unwrap();
    let r = q.send(&SendMessage::new("g1", "s4"));
    assert!(
        matches!(r, Err(Error::SizeClassFull { class_bytes: 192 })),
        "the consumed head still holds its slot: {r:?}"
    );
    let ms = recv_vt(&q, 1, Duration::from_secs(30));
    assert_eq!(bodies(&ms), ["s1"]);
    q.delete(&ms[0].receipt_handle).unwrap();
    q.send(&SendMessage::new("g1", "s4"))
        .expect("the old head's slot is free again");
    // Draining the group frees every slot, head included.
    loop {
        let ms = recv_vt(&q, 10, Duration::from_secs(30));
        if ms.is_empty() {
            break;
        }
        for m in &ms {
            q.delete(&m.receipt_handle).unwrap();
        }
    }
    for i in 0..4 {
        q.send(&SendMessage::new("g2", &format!("t{i}")))
            .expect("all four slots free after draining");
    }
}

/// Group entries of emptied groups are reused: many distinct groups pass through a queue with
/// room for 4 at a time, while 3 long-lived groups stay active.
#[test]
fn emptied_group_entries_are_reused() {
    let q = queue("groupreuse", &small().max_groups(4));
    for g in ["keep-a", "keep-b", "keep-c"] {
        send(&q, g, g);
    }
    let kept = recv_vt(&q, 10, Duration::from_secs(30));
    assert_eq!(kept.len(), 3);
    for i in 0..300 {
        let g = format!("transient-{i}");
        q.send(&SendMessage::new(&g, "m1"))
            .unwrap_or_else(|e| panic!("group {i}: {e}"));
        q.send(&SendMessage::new(&g, "m2")).unwrap();
        let ms = recv_vt(&q, 10, Duration::from_secs(30));
        assert_eq!(bodies(&ms), ["m1", "m2"], "group {i}");
        assert!(ms.iter().all(|m| m.group_id == g));
        for m in &ms {
            q.delete(&m.receipt_handle).unwrap();
        }
        assert_eq!(q.attributes().active_groups, 3, "group {i} retired");
    }
    for m in &kept {
        q.delete(&m.receipt_handle).unwrap();
    }
    assert_eq!(q.attributes().active_groups, 0);
}

/// `send_timeout`: a full size class makes the send wait and then fail with
/// `SizeClassFull`; other errors return at once; a zero timeout is a plain send; a slot freed
/// by a delete in another thread lets the waiting send through (woken, in order behind what
/// was there).
#[test]
fn send_timeout_waits_for_room_in_a_full_class() {
    let cfg = QueueConfig::new()
        .deduplication(Deduplication::Off)
        .size_classes(vec![(192, 4), (262_608, 4)])
        .size_limit(0) // no growth: the class fills
        .max_groups(16);
    let q = queue("sendwait", &cfg);
    for i in 0..4 {
        send(&q, &format!("g{i}"), "x");
    }
    let next = SendMessage::new("g0", "next");
    for t in [
        Duration::ZERO,
        Duration::from_micros(1),
        Duration::from_millis(30),
    ] {
        let r = q.send_timeout(&next, t);
        assert!(
            matches!(r, Err(Error::SizeClassFull { class_bytes: 192 })),
            "{t:?}: {r:?}"
        );
    }
    // Not a full class: at once, whatever the timeout.
    let start = std::time::Instant::now();
    let r = q.send_timeout(&SendMessage::new("g0", "\u{1}"), Duration::from_secs(60));
    assert!(
        matches!(r, Err(Error::InvalidMessageContents { .. })),
        "{r:?}"
    );
    assert!(
        start.elapsed() < Duration::from_secs(30),
        "returned without waiting"
    );
    std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(Duration::from_millis(50));
            let got = recv_vt(&q, 1, Duration::from_secs(30));
            assert_eq!(got[0].group_id, "g0");
            q.delete(&got[0].receipt_handle).unwrap();
        });
        q.send_timeout(&next, Duration::from_secs(30)).unwrap();
    });
    let got = recv_vt(&q, 10, Duration::from_secs(30));
    let mut bodies: Vec<(&str, &str)> = got
        .iter()
        .map(|m| (m.group_id.as_str(), m.body.as_str()))
        .collect();
    bodies.sort();
    assert_eq!(
        bodies,
        [("g0", "next"), ("g1", "x"), ("g2", "x"), ("g3", "x")]
    );
}

/// Resident pages of this process (`/proc/self/statm`, in pages).
fn resident_pages() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    statm.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// `prefault` maps the whole arena into the process at once (a writer's mapping and
/// an observer's read-only one), so its pages are resident before any message touches them.
#[test]
fn prefault_maps_the_whole_arena() {
    let cfg = QueueConfig::new().deduplication(Deduplication::Off);
    let bytes = cfg.arena_size().unwrap();
    let q = queue("prefault", &cfg);
    let before = resident_pages();
    q.prefault().unwrap();
    let grown = (resident_pages() - before) * 4096;
    assert!(
        grown >= bytes * 9 / 10,
        "resident grew by {grown} bytes for an arena of {bytes}"
    );
    let observer = Queue::observe(&q.name).unwrap();
    observer.prefault().unwrap();
    // Still a working queue.
    send(&q, "g", "after");
    assert_eq!(bodies(&recv(&q, 1)), ["after"]);
}
