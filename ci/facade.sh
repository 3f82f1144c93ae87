#!/usr/bin/env bash
# Two rules on where shared memory is touched.
#
# 1. Every atomic of the protocols is on the `shmfifo::sync` facade, so that loom models check
#    the same code: outside src/sync.rs, src/lines.rs (the `lines` feature's recording atomics)
#    and src/api (below), no file of the core library names
#    `core::sync::atomic`, `std::sync::atomic` or `loom::` directly.
# 2. `protocol` owns every shared word: src/api never names the layout, the arena header or
#    its regions, nor the facade's atomics, orderings or fences. It gets decoded values and
#    payload slices from protocol functions (which loom checks; api is compiled out under
#    loom). What api keeps in atomics is process-local (a cursor hint, a policy cache, the
#    async watcher's counts, the caller's cancel flag): std's atomics, never the facade's.
# (clippy's disallowed-types cannot express this: it resolves the facade's re-exports to the
# very types it would forbid.)
set -euo pipefail
cd "$(dirname "$0")/.."
bad=$(grep -rnE 'core::sync::atomic|std::sync::atomic|loom::' src --include='*.rs' \
    | grep -v '^src/sync.rs:' | grep -v '^src/lines.rs:' \
    | grep -v '^src/api/' || true)
if [ -n "$bad" ]; then
    echo "atomics or loom named outside src/sync.rs (use crate::sync):" >&2
    echo "$bad" >&2
    exit 1
fi
# Shared words in src/api: the layout, the header, the regions, the facade's atomics.
bad=$(grep -rnE 'crate::layout|\blayout::|\bhdr\b|crate::sync::(\{|Atomic|Ordering|fence|load_|fence_)|\b(view|arena\(\)|a)\.(parts|groups|timers|dedup|dedup_keys|attempts|classes|ready|headers)\b|loom::' \
    src/api --include='*.rs' | grep -vE '^[^:]+:[0-9]+:\s*//' || true)
if [ -n "$bad" ]; then
    echo "shared words touched in src/api (add a protocol function instead):" >&2
    echo "$bad" >&2
    exit 1
fi
