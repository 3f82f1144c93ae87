//! Shared memory is untrusted (ARCHITECTURE.md §6): another process writing garbage into the
//! arena makes calls return results or `Error::Corrupted`, never panic or hang this process.

mod common;

use std::os::unix::fs::FileExt;
use std::time::Duration;

use common::*;
use shmfifo::{Error, ReceiveOptions, SendMessage};

/// Writes random words at random offsets past the header's static part (the geometry is
/// validated once at open; the rest is live state), interleaved with every operation.
#[test]
fn random_writes_into_a_live_arena_never_crash_a_well_behaved_process() {
    // Without and with a dedup table (content-based ids: the sends below carry none).
    for (seed, cfg) in (1..=16u64).map(|s| {
        let c = if s % 2 == 0 {
            small()
        } else {
            small_dedup()
                .dedup_entries(64)
                .content_based_deduplication(true)
        };
        (s, c)
    }) {
        let q = queue("hostile", &cfg);
        let path = format!("/dev/shm/{}", q.name);
        let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        let len = file.metadata().unwrap().len();
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let opts = ReceiveOptions::max(10).visibility_timeout(Duration::from_millis(1));
        for round in 0..400 {
            for i in 0..3 {
                let body = format!("body {}", round % 50);
                let _ = q.send(&SendMessage::new(&format!("g{}", (round + i) % 7), &body));
            }
            let off = 0x180 + rng.next() % (len - 0x180 - 8);
            let word = match rng.next() % 4 {
                0 => 0,
                1 => u64::MAX,
                2 => rng.next() % 64,
                _ => rng.next(),
            };
            file.write_all_at(&word.to_le_bytes(), off & !7).unwrap();
            match q.receive(&opts) {
                Ok(ms) => {
                    for m in ms {
                        let _ = q.delete(&m.receipt_handle);
                    }
                }
                Err(Error::Corrupted { .. }) | Err(Error::ReceiptHandleExpired { .. }) => {}
                Err(e) => panic!("seed {seed} round {round}: unexpected {e}"),
            }
            let _ = q.attributes();
        }
        let _ = q.purge();
        let _ = q.recover();
    }
}
