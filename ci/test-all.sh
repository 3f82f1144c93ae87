#!/usr/bin/env bash
# Every test: unit, integration, multi-process (SIGKILL included), doc tests, then the loom
# models. This is the README's test command. CARGO_TARGET_DIR is honoured: every script asks
# cargo where its target directory is (ci/target-dir.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
# What a fresh machine lacks for these tests (compilers, valgrind, python3 and its venv, jq,
# curl): first, since ci/target-dir.sh itself needs python3, which a stock container lacks.
bash ci/deps.sh
target="$(bash ci/target-dir.sh)"
# The C ABI tests link the built libshmfifo.{so,a}; `cargo test` alone builds only the rlibs.
cargo build -p shmfifo-ffi
cargo test --workspace --exclude shmfifo-loom-tests --exclude shmfifo-benches --exclude shmfifo-python --exclude shmfifo-sqs
# Async receives (feature `tokio`): the tests and the examples on `AsyncQueue`, and the async
# example program (it asserts what it shows: every message once, each group in order; it ends
# by itself in about a second).
cargo test -p shmfifo --features tokio --test async_receive --test fork
cargo test -p shmfifo --features tokio --doc asynchronous
cargo run -q --example async-consumer --features tokio
# The one-bad-word checks and the pack directory's need the layout, which the `loom` feature
# exposes (no behaviour change): every replay of the fuzz targets' kept inputs, with them.
cargo test -p shmfifo --features loom --test fuzz_regressions
# The cache-line model (feature `lines`) against toys whose counts are known: a ping-pong of
# one line, private and shared lines, an SPSC ring with cached indices.
cargo test -p shmfifo --features lines --lib lines
# Kill points at every protocol step in real processes (test-only feature).
cargo test -p shmfifo --features failpoints,tokio --test failpoints
# The Python package: pip-installed into a virtual environment, then pytest.
bash ci/python.sh
# The SQS backend: the shared FIFO suite on a local queue, on `shmfifo serve` and on moto's
# server (from the virtual environment above), and the bridge's SIGKILL test.
MOTO_SERVER="$target/pyvenv/bin/moto_server" cargo test -p shmfifo-sqs -- --nocapture
bash ci/loom.sh
