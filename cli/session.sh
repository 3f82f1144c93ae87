#!/usr/bin/env bash
# The operator's path, run for real: create a queue and its dead-letter queue, send, watch,
# receive, scrape the metrics endpoint, redrive from the dead-letter queue, clean up. Each
# command's exit status is checked; the output is a console session in Markdown.
#
# It runs in a container's conditions: its own mount namespace (`unshare -rm`) with a fresh
# 64 MiB tmpfs on /dev/shm, Docker's default size, so it touches no queue of the host.
#
# Usage: cli/session.sh [SHMFIFO_BINARY]          prints the session
#        cli/session.sh --write [SHMFIFO_BINARY]  also replaces the session in cli/README.md
# Without a binary it uses debug/shmfifo in $CARGO_TARGET_DIR, else target/ (build it with
# `cargo build -p shmfifo-cli`).
# Exit status: 0 when every command exited as expected; 77 when this machine cannot make a
# mount namespace (unprivileged user namespaces are off); 1 otherwise.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
write=0
if [ "${1:-}" = "--write" ]; then write=1; shift; fi
bin="$(realpath "${1:-${CARGO_TARGET_DIR:-$here/../target}/debug/shmfifo}")"
[ -x "$bin" ] || { echo "session.sh: no shmfifo binary at $bin" >&2; exit 1; }

if [ -z "${SHMFIFO_SESSION_INSIDE:-}" ]; then
    if ! unshare -rm true 2>/dev/null; then
        echo "session.sh: cannot create a mount namespace here (unshare -rm); skipped" >&2
        exit 77
    fi
    out="$(mktemp)"
    trap 'rm -f "$out"' EXIT
    SHMFIFO_SESSION_INSIDE=1 unshare -rm bash -c \
        'mount -t tmpfs -o size=64m tmpfs /dev/shm && exec bash "$0" "$1"' "$0" "$bin" > "$out"
    cat "$out"
    if [ "$write" = 1 ]; then
        python3 - "$here/README.md" "$out" <<'EOF'
import sys
path, session = sys.argv[1], open(sys.argv[2]).read()
text = open(path).read()
start = text.index("<!-- session:start -->")
end = text.index("<!-- session:end -->")
open(path, "w").write(text[:start] + "<!-- session:start -->\n" + session + text[end:])
EOF
        echo "session.sh: wrote the session into $here/README.md" >&2
    fi
    exit 0
fi

# Inside the namespace: /dev/shm is a fresh 64 MiB tmpfs.
work="$(mktemp -d)"
cd "$work"
shmfifo() { "$bin" "$@"; }
export -f shmfifo
export bin
failed=0
# run EXPECTED_STATUS COMMAND: prints `$ COMMAND`, its output, and `[exit N]` when non-zero.
run() {
    local want="$1" cmd="$2" status=0
    echo "\$ $cmd"
    bash -c "$cmd" 2>&1 || status=$?
    if [ "$status" != 0 ]; then echo "[exit $status]"; fi
    if [ "$status" != "$want" ]; then
        echo "session.sh: \`$cmd\` exited $status, expected $want" >&2
        failed=1
    fi
}

echo '```console'
run 0 "df -h /dev/shm | tail -1"
run 0 "shmfifo create orders-dlq > /dev/null"
run 0 "shmfifo create orders --visibility-timeout 30s --dead-letter-queue orders-dlq --max-receive-count 2 | head -3"
run 0 "shmfifo send orders --group customer-42 --dedup-id o-1 --attribute kind=String:order 'order #1'"
run 0 "printf '%s\n' '{\"group\":\"customer-42\",\"body\":\"order #2\",\"dedup_id\":\"o-2\"}' '{\"group\":\"customer-7\",\"body\":\"order #3\",\"dedup_id\":\"o-3\"}' | shmfifo send orders --batch -"
run 0 "shmfifo watch orders --count 1"
# A consumer that fails twice (visibility timeout 0: visible again at once); the receive after
# the second moves the messages to the dead-letter queue (maxReceiveCount 2).
run 0 "shmfifo receive orders --max 10 --visibility-timeout 0 --json | jq -r '.Messages[].Body'"
run 0 "shmfifo receive orders --max 10 --visibility-timeout 0 --json | jq -r '.Messages[].Body'"
run 0 "shmfifo receive orders --max 10 --delete --json | jq -r '.Messages[].Body'"
run 0 "shmfifo ls"
run 0 "shmfifo metrics --listen 127.0.0.1:0 > addr & sleep 1; cat addr"
run 0 "curl -s \"\$(sed 's/listening on //' addr)/metrics\" | grep -E '^(ApproximateNumberOfMessagesVisible|ApproximateAgeOfOldestMessage|NumberOfMessagesSent_total)'"
run 0 "shmfifo redrive orders-dlq"
run 0 "shmfifo receive orders --max 10 --delete --json | jq -r '.Messages[] | [.Body, .Attributes.ApproximateReceiveCount] | @tsv'"
run 10 "shmfifo stat order"
run 0 "shmfifo send orders --group customer-9 --dedup-id o-9 --wait 5s 'order #9' | head -1"
run 0 "shmfifo unlink orders && shmfifo unlink orders-dlq"
echo '```'
pkill -f "$bin metrics --listen 127.0.0.1:0" 2>/dev/null || true
rm -rf "$work"
exit "$failed"
