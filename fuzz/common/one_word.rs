//! Body of the `one_word` fuzz target (one bad word breaks one entry, not the
//! queue), shared by the cargo-fuzz binary and the replay test `tests/fuzz_regressions.rs`.
//!
//! A small queue gets messages in three groups (one in flight, one deleted), then exactly one
//! aligned word of one group entry or one message slot header is overwritten, through a second
//! mapping of the file, as another process could. The input picks the region, the entry, the
//! word and the value (zero, all ones, a bit flipped, arbitrary). Then:
//!
//! * `inspect`, `peek` and `recover` succeed (`recover` quarantines what it cannot repair);
//! * at most one of the three groups loses messages, and the others deliver theirs whole and
//!   in order (R1, R3);
//! * a new group is served: its message is sent and received.
//!
//! The geometry comes from the header through `shmfifo::protocol::view::check` (the `loom`
//! feature exposes the layout; it changes no behaviour).

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::time::Duration;

use shmfifo::{Error, Queue, QueueConfig, ReceiveOptions, SendMessage};

/// A directory under `/dev/shm` for one input's queue, removed (with it) on drop.
struct Scratch(std::path::PathBuf);

impl Scratch {
    fn new() -> Self {
        static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let dir = std::path::PathBuf::from(format!(
            "/dev/shm/shmfifo-fuzz-word-{}-{}",
            std::process::id(),
            N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        std::fs::create_dir(&dir).expect("create a scratch directory under /dev/shm");
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Group entries and message headers of the arena at `path`, as `(offset, bytes)`.
fn regions(path: &std::path::Path) -> (Vec<u64>, Vec<u64>) {
    let f = std::fs::File::open(path).expect("open the arena");
    // SAFETY: a read-only private view of a file this process created and does not truncate.
    let m = unsafe { memmap2::Mmap::map(&f) }.expect("map the arena");
    // SAFETY: the map is at least a page long (an arena) and page-aligned; `Header` is a
    // `repr(C)` struct of atomics, valid for any bytes.
    let hdr = unsafe { &*(m.as_ptr() as *const shmfifo::layout::Header) };
    let c = shmfifo::protocol::view::check(hdr, m.len() as u64).expect("a valid arena");
    let o = c.geometry.offsets().expect("offsets");
    let groups = (0..u64::from(c.geometry.group_slots))
        .map(|i| o.groups + i * shmfifo::layout::GROUP_ENTRY_SIZE as u64)
        .collect();
    let mut slots = Vec::new();
    for (k, &(h, _, _)) in o.classes.iter().enumerate() {
        for i in 0..u64::from(c.geometry.classes[k].1) {
            slots.push(h + i * shmfifo::layout::MSG_HEADER_SIZE as u64);
        }
    }
    (groups, slots)
}

/// Runs one input (see the module docs).
pub fn one_word(data: &[u8]) {
    let b = |i: usize| data.get(i).copied().unwrap_or(0);
    let scratch = Scratch::new();
    let path = scratch.0.join("queue");
    let cfg = QueueConfig::new()
        .max_messages(8)
        .max_groups(4)
        .maximum_message_size(1024)
        .dedup_entries(16);
    let q = Queue::create_at(&path, &cfg).expect("create the queue");
    for i in 0..6 {
        let g = format!("g{}", i % 3);
        q.send(&SendMessage::new(&g, &format!("m{i}")).dedup_id(&format!("d{i}")))
            .expect("send");
    }
    // One message in flight for 1 ms (it comes back), one received and deleted.
    let short = ReceiveOptions::max(1).visibility_timeout(Duration::from_millis(1));
    let held = q.receive(&short).expect("receive");
    let done = q
        .receive(&ReceiveOptions::max(1).visibility_timeout(Duration::from_secs(30)))
        .expect("receive");
    for m in &done {
        q.delete(&m.receipt_handle).expect("delete");
    }
    let (groups, slots) = regions(&path);
    let region = if b(0) & 1 == 0 { &groups } else { &slots };
    let size = if b(0) & 1 == 0 { 256 } else { 64 };
    let at = region[usize::from(b(1)) % region.len()] + u64::from(b(2)) % (size / 8) * 8;
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .expect("open");
    let mut old = [0u8; 8];
    f.read_exact_at(&mut old, at).expect("read");
    let old = u64::from_le_bytes(old);
    let arbitrary = u64::from_le_bytes(std::array::from_fn(|k| b(4 + k)));
    let new = match b(3) % 4 {
        0 => 0,
        1 => u64::MAX,
        2 => old ^ (1 << (b(4) % 64)),
        _ => arbitrary,
    };
    f.write_all_at(&new.to_le_bytes(), at).expect("write");
    let ok = |what: &str, r: Result<(), Error>| {
        if let Err(e) = r {
            // A stopped participant is not one of them: no other process runs here.
            panic!("{what} after one bad word at {at:#x} ({old:#x} -> {new:#x}): {e}");
        }
    };
    ok("inspect", q.inspect(10).map(|_| ()));
    ok("peek", q.peek(10).map(|_| ()));
    let _ = format!("{:?}", q.attributes());
    ok("recover", q.recover().map(|_| ()));
    std::thread::sleep(Duration::from_millis(2)); // the 1 ms visibility timeout ends
    ok(
        "send to a new group",
        q.send(&SendMessage::new("fresh", "fresh").dedup_id("fresh"))
            .map(|_| ()),
    );
    let mut seen: Vec<(String, String)> = Vec::new();
    let mut empty = 0;
    while empty < 2 && seen.len() < 64 {
        let got = q.receive(&ReceiveOptions::max(10).visibility_timeout(Duration::from_secs(30)));
        let got = match got {
            Ok(g) => g,
            Err(e) => panic!("receive after one bad word at {at:#x} ({old:#x} -> {new:#x}): {e}"),
        };
        if got.is_empty() {
            empty += 1;
        }
        for m in got {
            let _ = q.delete(&m.receipt_handle);
            seen.push((m.group_id, m.body));
        }
    }
    assert!(
        seen.iter().any(|(g, b)| g == "fresh" && b == "fresh"),
        "a new group is served after one bad word at {at:#x} ({old:#x} -> {new:#x}): {seen:?}"
    );
    let deleted: Vec<&str> = done.iter().map(|m| m.body.as_str()).collect();
    let _ = held;
    let mut broken = 0;
    for g in 0..3 {
        let want: Vec<String> = (0..6)
            .filter(|i| i % 3 == g)
            .map(|i| format!("m{i}"))
            .filter(|m| !deleted.contains(&m.as_str()))
            .collect();
        let got: Vec<String> = seen
            .iter()
            .filter(|(gg, _)| *gg == format!("g{g}"))
            .map(|(_, b)| b.clone())
            .collect();
        if got != want {
            broken += 1;
        }
    }
    assert!(
        broken <= 1,
        "one bad word at {at:#x} ({old:#x} -> {new:#x}) broke {broken} groups: {seen:?}"
    );
}
