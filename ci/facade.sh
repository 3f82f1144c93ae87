#!/usr/bin/env bash
# Keeps every atomic of the library on the `shmfifo::sync` facade, so that loom models check the
# same code: outside src/sync.rs, no file of the core library names `core::sync::atomic`,
# `std::sync::atomic` or `loom::` directly. The one exception is the public API's
# `AtomicBool` cancel flag (process-local, supplied by the caller), in src/api/types.rs.
# (clippy's disallowed-types cannot express this: it resolves the facade's re-exports to the
# very types it would forbid.)
set -euo pipefail
cd "$(dirname "$0")/.."
bad=$(grep -rnE 'core::sync::atomic|std::sync::atomic|loom::' src --include='*.rs' \
    | grep -v '^src/sync.rs:' \
    | grep -v '^src/api/types.rs:.*std::sync::atomic::AtomicBool' || true)
if [ -n "$bad" ]; then
    echo "atomics or loom named outside src/sync.rs (use crate::sync):" >&2
    echo "$bad" >&2
    exit 1
fi
