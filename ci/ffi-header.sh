#!/usr/bin/env bash
# Regenerates the C header ffi/include/shmfifo.h with the pinned cbindgen and checks that the
# committed one matches (CI), or writes it (`--write`). Installs cbindgen if it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
CBINDGEN_VERSION=0.29.0
if ! command -v cbindgen >/dev/null || [ "$(cbindgen --version)" != "cbindgen $CBINDGEN_VERSION" ]; then
    cargo install cbindgen --version "$CBINDGEN_VERSION" --locked
fi
out=$(mktemp)
trap 'rm -f "$out"' EXIT
cbindgen --quiet --config ffi/cbindgen.toml --crate shmfifo-ffi --output "$out" ffi
if [ "${1:-}" = "--write" ]; then
    cp "$out" ffi/include/shmfifo.h
    echo "wrote ffi/include/shmfifo.h"
elif ! diff -u ffi/include/shmfifo.h "$out"; then
    echo "ffi/include/shmfifo.h is out of date: run bash ci/ffi-header.sh --write" >&2
    exit 1
fi
