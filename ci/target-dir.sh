#!/usr/bin/env bash
# Prints cargo's target directory for this workspace, as cargo reports it: $CARGO_TARGET_DIR
# (relative to the current directory), a config file's build.target-dir, or target/. The test
# scripts put what they build and look for there, never at a hard-coded target/.
set -euo pipefail
cargo metadata --format-version 1 --no-deps --manifest-path "$(dirname "$0")/../Cargo.toml" \
    | python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])'
