//! Hostile memory, replayed without libFuzzer: every input kept under
//! `fuzz/regressions/<target>/` (crashes found by `cargo fuzz`, and seeds), then a few hundred
//! pseudo-random inputs from a fixed seed, through the fuzz targets' own bodies
//! (`fuzz/common/targets.rs`). A failure is a panic inside a target (a library call that
//! panicked, or returned `Error::Corrupted` although nothing had written into the arena), or an
//! input still running after [`HANG`] (libFuzzer's `-timeout`, here).

mod common;
#[path = "../fuzz/common/targets.rs"]
mod targets;

use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::Duration;

use common::Rng;

/// How long one input may run before it counts as a hang: libFuzzer's `-timeout` of the runs
/// in `fuzz/README.md`. (Inputs take milliseconds, also in a debug build.)
const HANG: Duration = Duration::from_secs(10);

/// The inputs kept for `target`, sorted by name; there must be some.
fn regressions(target: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/regressions")
        .join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no inputs under {}", dir.display());
    files
}

/// Runs `f(data)` on a thread of its own and waits at most [`HANG`] for it; a panic in `f`
/// is passed on. A hung thread is left spinning: the test fails, and the process ends after
/// the other tests.
fn guarded(what: &str, f: fn(&[u8]), data: Vec<u8>) {
    let (tx, rx) = mpsc::channel();
    let worker = std::thread::spawn(move || {
        f(&data);
        let _ = tx.send(());
    });
    match rx.recv_timeout(HANG) {
        Ok(()) => {}
        Err(RecvTimeoutError::Timeout) => panic!("{what}: still running after {HANG:?} (a hang)"),
        Err(RecvTimeoutError::Disconnected) => match worker.join() {
            Err(panic) => {
                eprintln!("{what}: panicked");
                std::panic::resume_unwind(panic)
            }
            Ok(()) => unreachable!("the worker sends before it ends"),
        },
    }
}

fn replay(target: &str, f: fn(&[u8])) {
    for p in regressions(target) {
        let data = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        let t = std::time::Instant::now();
        guarded(&p.display().to_string(), f, data);
        if t.elapsed() > Duration::from_secs(1) {
            eprintln!("{}: slow, {:?}", p.display(), t.elapsed());
        }
    }
}

#[test]
fn open_arena_regressions() {
    replay("open_arena", targets::open_arena);
}

#[test]
fn live_scribble_regressions() {
    replay("live_scribble", targets::live_scribble);
}

/// Random inputs: mostly patches over a valid arena (odd first byte), some raw files.
#[test]
fn open_arena_pseudo_random_inputs() {
    let mut rng = Rng(0x5EED_0FA1_2E4A);
    for i in 0..300 {
        let len = 1 + (rng.next() % 400) as usize;
        let mut data = rng.bytes(len);
        if i % 5 != 0 {
            data[0] |= 1;
        }
        guarded(
            &format!("open_arena pseudo-random input {i}"),
            targets::open_arena,
            data,
        );
    }
}

/// Random operation sequences with random writes into the arena.
#[test]
fn live_scribble_pseudo_random_inputs() {
    let mut rng = Rng(0x5C21_BB1E_0000_0001);
    for i in 0..300 {
        let len = 1 + (rng.next() % 600) as usize;
        let data = rng.bytes(len);
        let what = format!("live_scribble pseudo-random input {i}");
        guarded(&what, targets::live_scribble, data);
    }
}

/// `one_word` needs the layout, which the `loom` feature exposes:
/// `cargo test -p shmfifo --features loom --test fuzz_regressions` (ci/test-all.sh) runs these.
#[cfg(feature = "loom")]
#[path = "../fuzz/common/one_word.rs"]
mod one_word;

#[cfg(feature = "loom")]
#[test]
fn one_word_regressions() {
    replay("one_word", one_word::one_word);
}

/// Every word of every group entry with zero, all ones and a flipped bit, and every word of
/// every message header with all four kinds of value (see `one_word`'s input encoding).
#[cfg(feature = "loom")]
#[test]
fn one_word_every_word_of_every_entry() {
    for region in 0..2u8 {
        let (entries, words) = if region == 0 { (8u8, 32u8) } else { (8, 8) };
        for entry in 0..entries {
            for word in 0..words {
                for value in 0..4u8 {
                    let data = vec![region, entry, word, value, 37, 0x5A, 0xC3, 1, 2, 3, 4, 5];
                    let what =
                        format!("one_word region {region} entry {entry} word {word} value {value}");
                    guarded(&what, one_word::one_word, data);
                }
            }
        }
    }
}

/// `pack_directory` reads `protocol::pack`, which the `loom` feature exposes (run as
/// `one_word`'s tests are).
#[cfg(feature = "loom")]
#[path = "../fuzz/common/pack.rs"]
mod pack;

#[cfg(feature = "loom")]
#[test]
fn pack_directory_regressions() {
    replay("pack_directory", pack::pack_directory);
}

/// Random words and random lengths; then every kept valid input with each of its bits
/// flipped in turn (a damaged word of a pack that was whole).
#[cfg(feature = "loom")]
#[test]
fn pack_directory_pseudo_random_and_flipped_inputs() {
    let mut rng = Rng(0x9AC4_D1EC_7021_0022);
    for _ in 0..2000 {
        let len = 3 + (rng.next() % 110) as usize;
        pack::pack_directory(&rng.bytes(len));
    }
    for p in regressions("pack_directory") {
        let data = std::fs::read(&p).unwrap();
        for bit in 8 * 3..8 * data.len() {
            let mut d = data.clone();
            d[bit / 8] ^= 1 << (bit % 8);
            pack::pack_directory(&d);
        }
    }
}
