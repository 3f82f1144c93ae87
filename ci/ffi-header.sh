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
# The C ABI fuzz target compiles ffi/src's modules into itself by path: each module of
# ffi/src/lib.rs must be there too, or the fuzz build (late in CI) fails.
for m in $(sed -n 's/^mod \([a-z_]*\);$/\1/p' ffi/src/lib.rs); do
    if ! grep -q "^#\[path = \"../../ffi/src/$m.rs\"\]" fuzz/fuzz_targets/c_abi.rs; then
        echo "fuzz/fuzz_targets/c_abi.rs does not include ffi/src/$m.rs (a module of ffi/src/lib.rs)" >&2
        exit 1
    fi
done
