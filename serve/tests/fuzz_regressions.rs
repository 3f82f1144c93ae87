//! The request parsers' fuzz targets, replayed without libFuzzer: every input kept
//! under `fuzz/regressions/serve_*/` (seeds, and whatever `cargo fuzz` found), then a few
//! hundred pseudo-random inputs from fixed seeds, through the targets' own bodies
//! (`fuzz/common/serve.rs`). A failure is a panic inside a target (a parser that panicked, or
//! an oracle that failed), or an input still running after [`HANG`] (libFuzzer's `-timeout`).

#[path = "../../fuzz/common/serve.rs"]
mod serve;

#[path = "../../fuzz/common/redrive.rs"]
mod redrive;

use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::Duration;

/// How long one input may run before it counts as a hang: the fuzz smoke's `-timeout`.
/// (Inputs take microseconds to milliseconds, also in a debug build.)
const HANG: Duration = Duration::from_secs(10);

/// The inputs kept for `target`, sorted by name; there must be some.
fn regressions(target: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/regressions")
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
/// is passed on.
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

fn replay(target: &str, f: fn(&[u8])) -> usize {
    let files = regressions(target);
    for p in &files {
        let data = std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        guarded(&p.display().to_string(), f, data);
    }
    files.len()
}

#[allow(dead_code)]
#[path = "../../fuzz/common/rng.rs"]
mod rng;
use rng::Rng;

#[test]
fn serve_query_regressions() {
    let n = replay("serve_query", serve::serve_query);
    // The seeds: real requests, and the trial's crash input.
    assert!(n >= 4, "{n} inputs");
    let trial = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/regressions/serve_query/crash-trial-3000-segment-name");
    let data = std::fs::read(&trial).unwrap_or_else(|e| panic!("{}: {e}", trial.display()));
    assert!(data.starts_with(b"Action=SendMessage&a.a.a.") && data.len() == 6021);
}

#[test]
fn serve_json_regressions() {
    replay("serve_json", serve::serve_json);
}

#[test]
fn serve_sigv4_regressions() {
    replay("serve_sigv4", serve::serve_sigv4);
}

/// The library's RedrivePolicy parser against serde_json's reading: the kept inputs (seeds,
/// and the three texts the parser once read differently: a form feed before the object, a
/// raw control byte in a string, a number with a leading zero), then policies built from
/// their pieces with bytes changed, dropped and repeated.
#[test]
fn redrive_policy_regressions_and_pseudo_random_inputs() {
    let n = replay("redrive_policy", redrive::redrive_policy);
    assert!(n >= 5, "{n} inputs");
    const PIECES: &[&str] = &[
        "{",
        "}",
        "\"deadLetterTargetArn\"",
        "\"maxReceiveCount\"",
        ":",
        ",",
        " ",
        "\t",
        "\n",
        "\r",
        "\u{c}",
        "\u{b}",
        "\u{1}",
        "\"",
        "\\",
        "\\u00e9",
        "\\ud83d\\ude00",
        "\\ud83d",
        "0",
        "007",
        "5",
        "-1",
        "1e2",
        "4294967296",
        "\"7\"",
        "\"arn:aws:sqs:r:1:d.fifo\"",
        "\"d.fifo\"",
        "arn:",
        "null",
        "[",
        "]",
        "\u{a0}",
    ];
    let mut rng = Rng(0x5EDA_17E5_0000_0001);
    for _ in 0..3000 {
        let mut text = String::new();
        for _ in 0..rng.below(14) {
            text.push_str(rng.pick(PIECES));
        }
        guarded(
            &format!("{text:?}"),
            redrive::redrive_policy,
            text.into_bytes(),
        );
    }
    // Well-formed policies with one byte changed.
    let good = br#"{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:1:d.fifo","maxReceiveCount":12}"#;
    for at in 0..good.len() {
        for b in [0u8, 0x0c, b' ', b'0', b'"', b'\\', 0x80] {
            let mut d = good.to_vec();
            d[at] = b;
            guarded(&format!("byte {at} = {b}"), redrive::redrive_policy, d);
        }
    }
}

/// Forms built from SQS's own names (lists, maps, batch entries, message attributes), with
/// percent escapes, stray `%`, `+`, empty pairs and a few bytes that are no UTF-8; and some
/// raw bytes.
#[test]
fn serve_query_pseudo_random_inputs() {
    const NAMES: &[&str] = &[
        "Action",
        "QueueUrl",
        "QueueName",
        "MessageBody",
        "Attribute",
        "Name",
        "Value",
        "Tag",
        "Key",
        "AttributeName",
        "MessageAttributeName",
        "MessageAttribute",
        "StringValue",
        "BinaryValue",
        "DataType",
        "SendMessageBatchRequestEntry",
        "DeleteMessageBatchRequestEntry",
        "Id",
        "DelaySeconds",
        "MaxNumberOfMessages",
        "Version",
        "X-Amz-Date",
        "Signature",
        "1",
        "2",
        "10",
        "",
    ];
    const VALUES: &[&str] = &[
        "",
        "SendMessageBatch",
        "ReceiveMessage",
        "CreateQueue",
        "http%3A%2F%2Fh%2F0%2Fq.fifo",
        " 7 ",
        "-3",
        "99999999999999999999",
        "a+b%20c",
        "%",
        "%2",
        "%zz",
        "%FF%FE",
        "%C3%A9t%C3%A9",
        "%3C%26%3E%22%27%0D",
        "true",
        "%00%01",
    ];
    let mut rng = Rng(0x5E12_FE00_0001);
    for i in 0..600 {
        let data = if i % 10 == 9 {
            let n = rng.below(300);
            rng.bytes(n)
        } else {
            let mut form = String::new();
            if rng.below(8) != 0 {
                form.push_str("Action=");
                form.push_str(rng.pick(VALUES));
            }
            for _ in 0..rng.below(24) {
                form.push('&');
                let segments = 1 + rng.below(9);
                let name: Vec<&str> = (0..segments).map(|_| rng.pick(NAMES)).collect();
                form.push_str(&name.join("."));
                if rng.below(10) != 0 {
                    form.push('=');
                    form.push_str(rng.pick(VALUES));
                }
            }
            form.into_bytes()
        };
        let what = format!(
            "serve_query pseudo-random input {i}: {:?}",
            String::from_utf8_lossy(&data)
        );
        guarded(&what, serve::serve_query, data);
    }
}

/// Targets with and without `AmazonSQS.`, bodies of JSON pieces (objects, arrays, numbers,
/// strings with escapes, deep nesting, truncations), and raw bytes.
#[test]
fn serve_json_pseudo_random_inputs() {
    const TARGETS: &[&str] = &[
        "AmazonSQS.SendMessage",
        "AmazonSQS.",
        "AmazonSQS.ReceiveMessage",
        "SendMessage",
        "amazonsqs.ListQueues",
        "",
    ];
    const PIECES: &[&str] = &[
        "{",
        "}",
        "[",
        "]",
        ",",
        ":",
        "\"QueueUrl\"",
        "\"MessageBody\"",
        "\"\\u00e9\\ud83d\\ude00\"",
        "\"\\ud800\"",
        "1e400",
        "-0.5",
        "18446744073709551616",
        "null",
        "true",
        " ",
        "\n",
        "\"",
    ];
    let mut rng = Rng(0x5E12_7E50_0002);
    for i in 0..600 {
        let mut data = Vec::new();
        if rng.below(4) != 0 {
            data.extend_from_slice(rng.pick(TARGETS).as_bytes());
            data.push(b'\n');
        }
        match i % 4 {
            0 => {
                let n = rng.below(200);
                data.extend(rng.bytes(n));
            }
            1 => {
                let deep = 100 + rng.below(60);
                data.extend(std::iter::repeat_n(b'[', deep));
                data.extend(std::iter::repeat_n(b']', deep));
            }
            _ => {
                if rng.below(2) == 0 {
                    data.extend_from_slice(b"{\"QueueUrl\":\"q\",\"MessageBody\":");
                }
                for _ in 0..rng.below(30) {
                    data.extend_from_slice(rng.pick(PIECES).as_bytes());
                }
            }
        }
        let what = format!(
            "serve_json pseudo-random input {i}: {:?}",
            String::from_utf8_lossy(&data)
        );
        guarded(&what, serve::serve_json, data);
    }
}

/// Raw requests (first byte even) and requests signed by the target (odd), from random bytes:
/// short ones take the plausible choice for every missing byte.
#[test]
fn serve_sigv4_pseudo_random_inputs() {
    let mut rng = Rng(0x5E12_516E_0003);
    for i in 0..600 {
        let n = rng.below(if i % 3 == 0 { 24 } else { 400 });
        let mut data = rng.bytes(n + 1);
        data[0] = (data[0] & !1) | (i & 1) as u8;
        let what = format!("serve_sigv4 pseudo-random input {i}: {data:?}");
        guarded(&what, serve::serve_sigv4, data);
    }
}
