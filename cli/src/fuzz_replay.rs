//! The `cli_input` fuzz target replayed without libFuzzer: every input kept under
//! `fuzz/regressions/cli_input/` (seeds, and whatever `cargo fuzz` found), then inputs built
//! from the parsers' own words, through the target's body (`fuzz/common/cli.rs`, included
//! below). A failure is a panic inside the body: a parser that panicked, or an oracle that
//! failed.

use std::path::Path;

#[path = "../../fuzz/common/cli.rs"]
mod cli;

#[allow(dead_code)]
#[path = "../../fuzz/common/rng.rs"]
mod rng;

#[test]
fn cli_input_regressions() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/regressions/cli_input");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    // The seeds: one a parser at least.
    assert!(
        files.len() >= 10,
        "{} inputs under {}",
        files.len(),
        dir.display()
    );
    for p in files {
        let data = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        eprintln!("{}", p.display());
        cli::cli_input(&data);
    }
}

/// Each parser's words strung together at random (units, separators, numbers at the edges
/// of their types, JSON of the batch input's three shapes cut and repeated).
#[test]
fn cli_input_pseudo_random_inputs() {
    const PIECES: &[&str] = &[
        "0",
        "7",
        "20",
        "21",
        "300",
        "4294967295",
        "4294967296",
        "18446744073709551615",
        "18446744073709551616",
        "999999999999999999999",
        "+",
        "-",
        ".",
        " ",
        "\t",
        "\n",
        ",",
        ":",
        "=",
        "/s",
        "0o",
        "ms",
        "s",
        "m",
        "h",
        "d",
        "1h 30m",
        "K",
        "KiB",
        "k",
        "M",
        "MiB",
        "G",
        "GiB",
        "T",
        "TiB",
        "B",
        "é",
        "\u{0}",
        "String",
        "Number",
        "Binary",
        ".label",
        "aGk=",
        "=",
        "==",
        "A",
        "+/",
        "{",
        "}",
        "[",
        "]",
        "\"",
        "\\",
        "null",
        "\"Id\":\"e\"",
        "\"MessageBody\":\"b\"",
        "\"Entries\":",
        "\"Messages\":",
        "\"Body\":\"aGk=\"",
        "\"BodyEncoding\":\"base64\"",
        "\"group\":\"g\"",
        "\"body\":\"b\"",
        "\"attributes\":{\"k\":{\"DataType\":\"Binary\",\"BinaryValue\":\"aGk\"}}",
        "\"MessageAttributes\":",
        "\"DelaySeconds\":",
        "\"StringListValues\":[\"a\"]",
        "\"MessageSystemAttributes\":{\"KeyName\":1}",
    ];
    let mut rng = rng::Rng(0xC11_1A9D_0000_0001);
    for _ in 0..20_000 {
        let mut data = vec![rng.next() as u8];
        for _ in 0..rng.below(16) {
            data.extend_from_slice(rng.pick(PIECES).as_bytes());
        }
        if rng.below(8) == 0 {
            let at = rng.below(data.len());
            data[at] = rng.next() as u8;
        }
        cli::cli_input(&data);
    }
}
