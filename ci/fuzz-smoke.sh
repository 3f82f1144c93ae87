#!/usr/bin/env bash
# Fuzz smoke: each cargo-fuzz target for FUZZ_SECONDS (default 20) over its kept
# inputs: the arena's four, a pack's directory, then serve's request parsers, each with its libFuzzer
# dictionary where fuzz/dicts/ has one, then the library's RedrivePolicy parser against serde_json (9
# targets: 3 min of fuzzing at the default, plus the
# build; a longer run: FUZZ_SECONDS=600). cargo-fuzz passes nightly flags
# (-Zsanitizer=address); the stable toolchain takes them through RUSTC_BOOTSTRAP=1 and ships
# the ASan runtime. See fuzz/README.md.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked --version 0.13.2
export RUSTC_BOOTSTRAP=1
# A target killed by a timeout or a crash leaves its scratch directory under /dev/shm: clean
# them up whatever happens.
trap 'rm -rf /dev/shm/shmfifo-fuzz-* 2>/dev/null || true' EXIT
for t in open_arena live_scribble one_word pack_directory c_abi serve_query serve_json serve_sigv4 redrive_policy; do
    mkdir -p "corpus/$t" "artifacts/$t"
    dict=()
    if [ -f "dicts/$t.dict" ]; then dict=(-dict="dicts/$t.dict"); fi
    cargo fuzz run "$t" "corpus/$t" "regressions/$t" -- \
        -max_total_time="${FUZZ_SECONDS:-20}" -timeout=10 -artifact_prefix="artifacts/$t/" \
        ${dict[@]+"${dict[@]}"}
done
