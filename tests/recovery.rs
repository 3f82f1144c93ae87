//! Deterministic recovery cases: a dead receiver's in-flight messages come back at once
//! (not at their visibility timeout), a closed one's do not, an arena whose processes are all
//! dead reopens with nothing lost, and an arena carried across a reboot (boot id) makes every
//! in-flight message visible while its clock goes on forward.

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::*;
use shmfifo::{Deduplication, Error, Queue, QueueConfig, ReceiveOptions, SendMessage};

const BIN: &str = env!("CARGO_BIN_EXE_shmfifo-test-worker");

fn receive_and_die(name: &str) -> Vec<String> {
    common::receive_and_die(BIN, name, "victim")
}

fn config() -> QueueConfig {
    QueueConfig::new()
        .deduplication(Deduplication::Off)
        .max_messages(1024)
        .visibility_timeout(Duration::from_secs(600))
}

/// A dead receiver's messages are released at once (`release_on_death`, on by
/// default): with every other participant closed when it dies, the next `open` releases them;
/// they come back in group order with their receive count going on (R1, R2), and the dead
/// receiver's receipts are expired by the new receive (H3).
#[test]
fn dead_receivers_messages_come_back_at_once() {
    let name = unique("release");
    let q = Queue::create(&name, &config()).expect("create");
    for i in 0..5 {
        send(&q, "g", &format!("m{i}"));
    }
    drop(q); // closed: the victim will be the only participant
    let handles = receive_and_die(&name);
    assert_eq!(handles.len(), 5);
    let q = Queue::open(&name).expect("reopen an arena whose participants are all dead");
    let got = q
        .receive(&ReceiveOptions::max(10).visibility_timeout(Duration::from_secs(60)))
        .unwrap();
    let bodies: Vec<&str> = got.iter().map(|m| m.body.as_str()).collect();
    assert_eq!(
        bodies,
        ["m0", "m1", "m2", "m3", "m4"],
        "released in group order"
    );
    assert!(got.iter().all(|m| m.receive_count == 2));
    for h in &handles {
        assert!(matches!(
            q.delete_str(h),
            Err(Error::ReceiptHandleExpired { .. })
        ));
    }
    for m in &got {
        q.delete(&m.receipt_handle).unwrap();
    }
    let _ = Queue::unlink(&name);
}

/// The same with a live participant: an idle receiver's liveness check releases the dead
/// receiver's messages long before their 30 s visibility timeout, and `recover` reports it.
#[test]
fn idle_receiver_releases_a_dead_receivers_messages() {
    let q = queue("release-live", &config());
    for i in 0..3 {
        send(&q, &format!("g{i}"), "x");
    }
    let handles = receive_and_die(&q.name);
    assert_eq!(handles.len(), 3);
    let t = Instant::now();
    let mut got = Vec::new();
    while got.len() < 3 && t.elapsed() < Duration::from_secs(20) {
        got.extend(
            q.receive(&ReceiveOptions::max(10).wait(Duration::from_secs(1)))
                .unwrap(),
        );
    }
    assert_eq!(
        got.len(),
        3,
        "released within the wait, well before the 30 s timeout"
    );
    assert!(got.iter().all(|m| m.receive_count == 2));
}

/// `release_on_death(false)`: a dead receiver's messages wait for their visibility timeout,
/// and `recover` releases nothing (it still frees the dead registration).
#[test]
fn without_release_on_death_messages_wait_for_their_timeout() {
    let q = queue("norelease", &config().release_on_death(false));
    send(&q, "g", "x");
    assert_eq!(receive_and_die(&q.name).len(), 1);
    let r = q.recover().unwrap();
    assert_eq!(r.released, 0);
    assert_eq!(r.dead_participants, 1);
    let got = q
        .receive(&ReceiveOptions::max(10).wait(Duration::from_millis(500)))
        .unwrap();
    assert!(got.is_empty(), "still in flight");
    assert_eq!(q.attributes().approximate_number_of_messages_not_visible, 1);
}

/// Only death releases: a receiver that closes its queue leaves its messages in flight (its
/// receipts stay valid for another process, as in SQS).
#[test]
fn closed_receiver_keeps_its_messages_in_flight() {
    let q = queue("closed", &config());
    send(&q, "g", "x");
    let other = Queue::open(&q.name).unwrap();
    let got = other.receive(&ReceiveOptions::max(1)).unwrap();
    let handle = got[0].receipt_handle.to_string();
    drop(other);
    let r = q.recover().unwrap();
    assert_eq!((r.released, r.dead_participants), (0, 0));
    assert!(q
        .receive(&ReceiveOptions::max(10).wait(Duration::from_millis(300)))
        .unwrap()
        .is_empty());
    q.delete_str(&handle).expect("the handle is still valid");
}

/// A scratch directory on a persistent-style path (not /dev/shm), removed on drop.
struct Dir(PathBuf);
impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn word(path: &Path, at: u64) -> u64 {
    use std::os::unix::fs::FileExt;
    let mut b = [0u8; 8];
    std::fs::File::open(path)
        .unwrap()
        .read_exact_at(&mut b, at)
        .unwrap();
    u64::from_le_bytes(b)
}

fn set_word(path: &Path, at: u64, v: u64) {
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.write_all_at(&v.to_le_bytes(), at).unwrap();
}

/// Header offsets (ARCHITECTURE.md, layout 5): `created_wall_ms` and `clock`.
const CREATED_WALL: u64 = 72;
const CLOCK: u64 = 80;

/// Boot id: an arena on a persistent path carried across a reboot. The reboot is
/// simulated by changing the boot tag of the arena's clock word and moving its creation an
/// hour back (an hour of downtime). On open, every in-flight message is visible (no process of
/// the old boot holds anything), nothing is lost, order holds, and the arena clock goes on from
/// the arena's age: a new message's SentTimestamp is now, after the old ones.
#[test]
fn arena_survives_a_reboot() {
    let dir = Dir(std::env::temp_dir().join(unique("reboot")));
    std::fs::create_dir_all(&dir.0).unwrap();
    let path = dir.0.join("q");
    let q = Queue::create_at(
        &path,
        &config().visibility_timeout(Duration::from_secs(3600)),
    )
    .expect("create on a persistent path");
    for i in 0..3 {
        q.send(&SendMessage::new("g", &format!("m{i}"))).unwrap();
    }
    let old_sent = q.receive(&ReceiveOptions::max(2)).unwrap();
    assert_eq!(old_sent.len(), 2);
    drop(q);
    // A reboot takes time. Without this pause the whole test can fit in one millisecond, and
    // the old timestamps (creation wall time plus monotonic milliseconds) and the new one (wall
    // time) are truncated to milliseconds from different clocks, so "after" could read as equal
    // or one below.
    std::thread::sleep(Duration::from_millis(20));
    let clock = word(&path, CLOCK);
    let tag = clock >> 40;
    let hour = 3_600_000u64;
    set_word(
        &path,
        CLOCK,
        ((tag ^ 0x5A5A5A) << 40) | (clock & ((1 << 40) - 1)),
    );
    set_word(&path, CREATED_WALL, word(&path, CREATED_WALL) - hour);

    let q = Queue::open_at(&path).expect("open after the reboot");
    assert_eq!(word(&path, CLOCK) >> 40, tag, "rebased on this boot");
    let got = q.receive(&ReceiveOptions::max(10)).unwrap();
    let bodies: Vec<&str> = got.iter().map(|m| m.body.as_str()).collect();
    assert_eq!(
        bodies,
        ["m0", "m1", "m2"],
        "in-flight messages visible, in order"
    );
    let counts: Vec<u32> = got.iter().map(|m| m.receive_count).collect();
    assert_eq!(counts, [2, 2, 1]);
    for m in &got {
        q.delete(&m.receipt_handle).unwrap();
    }
    let r = q.send(&SendMessage::new("g", "new")).unwrap();
    let new = q.receive(&ReceiveOptions::max(1)).unwrap();
    assert_eq!(new[0].message_id, r.message_id);
    let wall = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    assert!(
        new[0].sent_timestamp.abs_diff(wall) < 5_000,
        "the clock went on from the arena's age"
    );
    assert!(old_sent
        .iter()
        .all(|m| new[0].sent_timestamp > m.sent_timestamp));
}

/// Runs worker `role` on queue `name` until it prints `WAITING`, lets it fall asleep, cuts
/// the queue's file to one page under it, and returns the line it prints next (after
/// asserting that it exited normally, not killed by SIGBUS).
fn cut_under_sleeper(role: &str, name: &str) -> String {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    let mut child = Command::new(BIN)
        .args([role, name])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    assert_eq!(lines.next().unwrap().unwrap(), "WAITING");
    // Asleep on its futex: the kernel says its (only) thread sleeps ('S' in its stat, and
    // where it waits in `wchan` where that is readable). A fixed pause was not enough on a
    // loaded machine: the worker, descheduled before its sleep, touched a page past the cut and
    // died of SIGBUS, which is what a cut under a running process does.
    let pid = child.id();
    let since = std::time::Instant::now();
    loop {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let sleeping = stat
            .rsplit(')')
            .next()
            .is_some_and(|r| r.trim_start().starts_with('S'));
        let wchan = std::fs::read_to_string(format!("/proc/{pid}/wchan")).unwrap_or_default();
        if sleeping && (wchan.contains("futex") || wchan.trim() == "0" || wchan.is_empty()) {
            break;
        }
        assert!(
            since.elapsed() < Duration::from_secs(20),
            "the {role} worker never fell asleep"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    cut_to_one_page(name);
    let st = child.wait().unwrap();
    assert!(st.success(), "the {role} worker survived: {st:?}");
    lines.next().unwrap().unwrap()
}

/// Truncating a named queue's file under a receiver asleep in a long poll does not
/// kill it with SIGBUS: it wakes, sees the file shorter than its mapping before touching a page
/// past the end, and returns `Truncated`.
#[test]
fn a_receiver_asleep_when_its_file_is_truncated_gets_an_error() {
    let name = common::unique("trunc");
    let q = Queue::create(&name, &QueueConfig::new().max_messages(64)).unwrap();
    assert_eq!(cut_under_sleeper("wait-receive", &name), "ERR Truncated");
    drop(q);
    let _ = std::fs::remove_file(format!("/dev/shm/{name}"));
}

/// The same for a producer asleep in `send_timeout` for space (a full queue that cannot grow):
/// it wakes by its timeout, sees the file shorter than its mapping before it touches its
/// participant record (past the cut) or any table, and returns `Truncated`.
#[test]
fn a_producer_asleep_for_space_when_its_file_is_truncated_gets_an_error() {
    let name = common::unique("trunc-send");
    let cfg = QueueConfig::new()
        .max_messages(64)
        .size_limit(0)
        .deduplication(shmfifo::Deduplication::Off);
    let q = Queue::create(&name, &cfg).unwrap();
    let mut sent = 0;
    while q.send(&shmfifo::SendMessage::new("g", "x")).is_ok() {
        sent += 1;
        assert!(
            sent <= 1_000,
            "a queue of 64 small slots that cannot grow fills"
        );
    }
    assert!(sent >= 64);
    assert_eq!(cut_under_sleeper("wait-send", &name), "ERR Truncated");
    drop(q);
    let _ = std::fs::remove_file(format!("/dev/shm/{name}"));
}

/// Cuts the file of queue `name` (under /dev/shm) to one page, as any user who may write it can.
fn cut_to_one_page(name: &str) {
    std::fs::OpenOptions::new()
        .write(true)
        .open(format!("/dev/shm/{name}"))
        .unwrap()
        .set_len(4096)
        .unwrap();
}

/// A new named queue without deduplication (the `busy` worker sends without dedup ids).
fn queue_without_dedup(tag: &str) -> (String, Queue) {
    let name = common::unique(tag);
    let cfg = QueueConfig::new().deduplication(shmfifo::Deduplication::Off);
    let q = Queue::create(&name, &cfg).unwrap();
    (name, q)
}

/// Starts the `busy` worker on queue `name` (`guard` false: with `SHMFIFO_SIGBUS_GUARD=0`)
/// and waits for its `RUNNING`; its stdout's later lines.
fn start_busy(
    name: &str,
    guard: bool,
) -> (
    std::process::Child,
    std::io::Lines<std::io::BufReader<std::process::ChildStdout>>,
) {
    use std::io::{BufRead, BufReader};
    let mut cmd = std::process::Command::new(BIN);
    cmd.args(["busy", name])
        .stdout(std::process::Stdio::piped());
    if !guard {
        cmd.env("SHMFIFO_SIGBUS_GUARD", "0");
    }
    let mut child = cmd.spawn().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    assert_eq!(lines.next().unwrap().unwrap(), "RUNNING");
    (child, lines)
}

/// Truncating a named queue's file under a process in the middle of its operations (sending,
/// receiving and deleting without pause, not asleep) does not kill it with SIGBUS: the
/// truncation guard answers the fault with zero pages and marks the queue cut, and the
/// operation, and every later one, returns `Truncated`; the process drops its handle and
/// exits normally. (Without the guard, `SHMFIFO_SIGBUS_GUARD=0`, it dies of SIGBUS: the second
/// half.)
#[test]
fn a_busy_process_whose_file_is_truncated_gets_an_error() {
    for guard in [true, false] {
        let (name, q) = queue_without_dedup("trunc-busy");
        let (mut child, mut lines) = start_busy(&name, guard);
        cut_to_one_page(&name);
        let st = child.wait().unwrap();
        if guard {
            assert!(st.success(), "the busy worker survived: {st:?}");
            assert_eq!(lines.next().unwrap().unwrap(), "ERR Truncated");
        } else {
            use std::os::unix::process::ExitStatusExt;
            assert_eq!(st.signal(), Some(libc::SIGBUS), "without the guard: {st:?}");
        }
        drop(q);
        let _ = std::fs::remove_file(format!("/dev/shm/{name}"));
    }
}

/// Every handle of a cut file in a process says so, not only the one whose operation faulted
/// first: each handle maps the file itself, so its own touch past the cut faults too, and the
/// guard's flag is the file's (`sys::guard::cut_for`, pinned by its unit test
/// `handles_of_one_file_share_its_flag`), so the first fault marks them all.
#[test]
fn every_handle_of_a_cut_file_says_truncated() {
    let (name, a) = queue_without_dedup("trunc-two");
    let b = Queue::open(&name).unwrap();
    a.send(&shmfifo::SendMessage::new("g", "x")).unwrap();
    cut_to_one_page(&name);
    let r = a.send(&shmfifo::SendMessage::new("g", "y"));
    assert!(matches!(r, Err(shmfifo::Error::Truncated { .. })), "{r:?}");
    let r = b.receive(&shmfifo::ReceiveOptions::max(10));
    assert!(matches!(r, Err(shmfifo::Error::Truncated { .. })), "{r:?}");
    assert!(matches!(
        b.check_file(),
        Err(shmfifo::Error::Truncated { .. })
    ));
    drop((a, b));
    let _ = std::fs::remove_file(format!("/dev/shm/{name}"));
}

/// A SIGBUS sent by a process (`kill -BUS`) still ends a process that has the guard, as the
/// signal's default does: Rust's own handler, which the guard passes it to, gives the signal
/// back to its default and counts on a fault coming again, which a sent signal does not; the
/// guard raises it again then. (Before: the process lived on, its guard undone by Rust's
/// handler, and the next truncation killed it.)
#[test]
fn a_sigbus_sent_to_a_guarded_process_still_ends_it() {
    use std::os::unix::process::ExitStatusExt;
    let (name, q) = queue_without_dedup("trunc-kill");
    let (mut child, _lines) = start_busy(&name, true);
    // SAFETY: kill(2) of our own child.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGBUS) }, 0);
    let since = std::time::Instant::now();
    let st = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if since.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the worker lived on after a SIGBUS sent to it");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    assert_eq!(st.signal(), Some(libc::SIGBUS), "{st:?}");
    drop(q);
    let _ = std::fs::remove_file(format!("/dev/shm/{name}"));
}

/// An anonymous queue's memfd is sealed: nobody holding its descriptor can shrink or
/// grow it under the participants.
#[test]
fn an_anonymous_queue_cannot_be_truncated() {
    let q = Queue::create_anonymous(&QueueConfig::new().max_messages(64)).unwrap();
    let fd = q.inheritable_fd().unwrap();
    // SAFETY: ftruncate(2) on a descriptor we own.
    let r = unsafe { libc::ftruncate(std::os::fd::AsRawFd::as_raw_fd(&fd), 4096) };
    assert_eq!(r, -1, "sealed against shrinking");
    assert_eq!(
        std::io::Error::last_os_error().raw_os_error(),
        Some(libc::EPERM)
    );
    // Not sealed against growing: the arena adds segments as its classes fill (layout 13).
    drop(fd);
    q.send(&shmfifo::SendMessage::new("g", "still works").dedup_id("1"))
        .unwrap();
    for i in 0..200 {
        let id = format!("grow-{i}");
        q.send(&shmfifo::SendMessage::new("g", "grows").dedup_id(&id))
            .unwrap();
    }
    assert!(q.size().grows > 0);
}
