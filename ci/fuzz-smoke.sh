#!/usr/bin/env bash
# Fuzz smoke: each cargo-fuzz target for FUZZ_SECONDS (default 20) over its kept
# inputs: the arena's four, a pack's directory, then serve's request parsers, each with its libFuzzer
# dictionary where fuzz/dicts/ has one, the library's RedrivePolicy parser against serde_json, and
# the SQS backend's bound on an answer's shape, and the CLI's parsers of what a caller gives it
# (11 targets: 3 min 40 s of fuzzing at the default, plus the build; a longer run:
# FUZZ_SECONDS=600). cargo-fuzz passes nightly flags
# (-Zsanitizer=address); the stable toolchain takes them through RUSTC_BOOTSTRAP=1 and ships
# the ASan runtime. See fuzz/README.md.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked --version 0.13.2
export RUSTC_BOOTSTRAP=1
# A target killed by a timeout or a crash leaves its scratch directory under /dev/shm: they
# are cleaned up whatever happens (the trap below).
targets=(open_arena live_scribble one_word pack_directory c_abi serve_query serve_json serve_sigv4 redrive_policy sqs_answer_shape cli_input)
# Every target built first (one build: a build error ends the script here), then the targets
# run side by side, one a CPU: each is one process on one CPU for its seconds, as it was when
# they ran one after another (3 min of fuzzing at the default), in half the time on 2 CPUs. A
# target's output is shown when it fails, its last lines when it passes.
cargo fuzz build
log="$(mktemp -d)"
trap 'rm -rf /dev/shm/shmfifo-fuzz-* "$log" 2>/dev/null || true' EXIT
fuzz_one() {
    local t="$1" log="$2" dict=()
    mkdir -p "corpus/$t" "artifacts/$t"
    if [ -f "dicts/$t.dict" ]; then dict=(-dict="dicts/$t.dict"); fi
    if cargo fuzz run "$t" "corpus/$t" "regressions/$t" -- \
        -max_total_time="${FUZZ_SECONDS:-20}" -timeout=10 -artifact_prefix="artifacts/$t/" \
        ${dict[@]+"${dict[@]}"} > "$log/$t" 2>&1; then
        echo "fuzz: $t: $(grep -E '^Done [0-9]+ runs' "$log/$t" | tail -1)"
    else
        echo "fuzz: $t FAILED:" >&2
        cat "$log/$t" >&2
        return 1
    fi
}
export -f fuzz_one
printf '%s\n' "${targets[@]}" | xargs -P "$(nproc)" -I{} bash -c 'fuzz_one "$1" "$2"' _ {} "$log"
