#!/usr/bin/env bash
# Every test: unit, integration, multi-process (SIGKILL included), doc tests, then the loom
# models. This is the README's test command.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --workspace --exclude shmfifo-loom-tests --exclude shmfifo-benches
bash ci/loom.sh
