#!/usr/bin/env bash
# Runs the loom models (loom-tests/) under --cfg shmfifo_loom, in release mode with debug
# assertions, bounded to LOOM_MAX_PREEMPTIONS (default 2). Its own target dir, loom/ inside
# cargo's (CARGO_TARGET_DIR honoured), keeps the cfg'd build apart from the normal one.
set -euo pipefail
cd "$(dirname "$0")/.."
loom_target="$(bash ci/target-dir.sh)/loom"
export RUSTFLAGS="--cfg shmfifo_loom -C debug-assertions=on"
export LOOM_MAX_PREEMPTIONS="${LOOM_MAX_PREEMPTIONS:-2}"
export CARGO_TARGET_DIR="$loom_target"
exec cargo test -p shmfifo-loom-tests --release "$@"
