#!/usr/bin/env bash
# Runs the loom models (loom-tests/) under --cfg shmfifo_loom, in release mode with debug
# assertions, bounded to LOOM_MAX_PREEMPTIONS (default 2). Its own target dir, loom/ inside
# cargo's (CARGO_TARGET_DIR honoured), keeps the cfg'd build apart from the normal one.
#
# With arguments it is `cargo test -p shmfifo-loom-tests --release ARGS` (one file, a filter:
# `bash ci/loom.sh --test queue doorbell`). Without, every model runs in a pool of LOOM_JOBS
# processes (default: the CPUs), one model a process, the slowest known ones first: cargo runs
# test files one after another, each with a thread per CPU, so a file's one long model left
# the other CPU idle until it ended (on 2 CPUs the models took 11 min one file at a time, about
# 8 in the pool).
set -euo pipefail
cd "$(dirname "$0")/.."
loom_target="$(bash ci/target-dir.sh)/loom"
export RUSTFLAGS="--cfg shmfifo_loom -C debug-assertions=on"
export LOOM_MAX_PREEMPTIONS="${LOOM_MAX_PREEMPTIONS:-2}"
export CARGO_TARGET_DIR="$loom_target"
if [ $# -gt 0 ]; then
    exec cargo test -p shmfifo-loom-tests --release "$@"
fi

# The models that take a minute or more on a 2-CPU machine: started first, so that none of
# them is what the pool waits for at the end. A name no longer there is skipped.
slow=(
    two_growers_race_and_nothing_overlaps
    a_run_freed_by_a_cleaner_that_stops_at_each_step_leaks_nothing
    a_quarantine_racing_a_sender_and_dying_at_each_step_loses_nothing_silently
    a_quarantine_stopped_forever_blocks_nothing_else
    dead_send_repair_races_a_live_send_and_another_repair
    a_group_grower_stopped_forever_holds_only_its_claims
    eviction_races_a_retry_of_the_evicted_id
    a_grower_that_dies_at_each_step_leaves_the_growth_to_the_next
)

# Build every test file once (a build error ends the script here); a second, fresh call names
# each executable in its JSON messages.
cargo test -p shmfifo-loom-tests --release --no-run
out="$(mktemp -d)"
jobs="$out/jobs"
trap 'rm -rf "$out"' EXIT
cargo test -p shmfifo-loom-tests --release --no-run --message-format=json > "$out/build.json"
mapfile -t bins < <(grep -o '"executable":"[^"]*"' "$out/build.json" | sed 's/^"executable":"//; s/"$//')
[ ${#bins[@]} -gt 0 ] || { echo "loom: no test executable built" >&2; exit 1; }

# One job a model: "executable<TAB>name", the slow ones first. A file that cannot list its
# models ends the script (none may be left out unseen).
for b in "${bins[@]}"; do
    "$b" --list --format terse > "$out/list" || { echo "loom: $b cannot list its models" >&2; exit 1; }
    sed -n "s/: test\$//p" "$out/list" | sed "s|^|$b\t|" >> "$out/all"
done
[ -s "$out/all" ] || { echo "loom: no model listed" >&2; exit 1; }
all="$(cat "$out/all")"
for s in "${slow[@]}"; do
    printf '%s\n' "$all" | awk -F'\t' -v s="$s" '$2 == s' >> "$jobs"
done
printf '%s\n' "$all" | grep -vxF -f "$jobs" >> "$jobs" || true
total="$(wc -l < "$jobs")"

# Each model in its own process; its output kept and shown only when it fails.
run_one() {
    local bin="$1" name="$2" log
    log="$3/$(basename "$bin")-$name.log"
    local start=$SECONDS
    if "$bin" --exact "$name" --test-threads 1 > "$log" 2>&1; then
        echo "loom: ok $(basename "$bin" | sed 's/-[0-9a-f]*$//')::$name ($((SECONDS - start)) s)"
    else
        echo "loom: FAILED $(basename "$bin" | sed 's/-[0-9a-f]*$//')::$name" >&2
        cat "$log" >&2
        return 1
    fi
}
export -f run_one
start=$SECONDS
if tr '\t' '\n' < "$jobs" | xargs -d '\n' -n 2 -P "${LOOM_JOBS:-$(nproc)}" \
    bash -c 'run_one "$1" "$2" "$0"' "$out"; then
    echo "loom: $total models passed in $((SECONDS - start)) s (LOOM_MAX_PREEMPTIONS=$LOOM_MAX_PREEMPTIONS)"
else
    echo "loom: a model failed (above)" >&2
    exit 1
fi
