#!/usr/bin/env bash
# Two builds of the harness against each other, paired: which is faster, and how sure.
#
# Usage: bash benches/compare.sh [-n ROUNDS] [--only SECTIONS] REV_A [REV_B]
#   REV_A, REV_B  git revisions (REV_B defaults to the working tree, `.`)
#   -n ROUNDS     rounds of four runs each, A B B A (default 10: 20 pairs)
#   --only S      harness sections (default `throughput`; `latency` for the spinning p50)
#
# Each revision's harness is built with every function and every block that is not fallen
# into aligned (`-C llvm-args=-align-all-functions=6 -align-all-nofallthru-blocks=5`). On this
# project's 2-vCPU virtual machine, two ordinary builds whose batch path was the same byte for
# byte ran batches 0.91x apart over 20 pairs (19 of them below 1): the code's placement alone
# moved the figure by as much as most changes do. Built aligned, the same pair measured 1.00x
# (10 of 20), and one source built twice (HEAD against the working tree) 0.99x for batches
# and 1.00x one at a time (9 and 10 of 20 pairs at or above 1, each ratio within 0.87-1.20).
# Within a round the order A B B A cancels the machine's drift and its bias for
# the first run of a pair. Each pair gives B's rate over A's (for latency, A's p50 over B's:
# above 1 means B is faster either way); the median, the pairs at or above 1, and every
# ratio are printed per section. A change is worth believing when most pairs agree, not when
# the median alone moves: the spread of single-message throughput here is 0.75-1.3.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=10
only=throughput
revs=()
while [ $# -gt 0 ]; do
    case "$1" in
        -n) rounds="$2"; shift 2 ;;
        --only) only="$2"; shift 2 ;;
        -h | --help) sed -n '2,8p' "$0"; exit 0 ;;
        *) revs+=("$1"); shift ;;
    esac
done
[ ${#revs[@]} -ge 1 ] && [ ${#revs[@]} -le 2 ] || { sed -n '2,8p' "$0" >&2; exit 2; }
[ ${#revs[@]} -eq 2 ] || revs+=(.)
root="$(pwd)"
work="$(mktemp -d)"
trap 'cd "$root"; for w in "$work"/tree-*; do [ -d "$w" ] && git worktree remove --force "$w"; done; rm -rf "$work"' EXIT
# One target directory for both builds (their dependencies are built once), kept apart from
# the ordinary builds, whose flags differ.
export CARGO_TARGET_DIR="$root/target/compare"
export RUSTFLAGS="-C llvm-args=-align-all-functions=6 -C llvm-args=-align-all-nofallthru-blocks=5"
names=(A B)
for k in 0 1; do
    rev="${revs[$k]}"
    if [ "$rev" = . ]; then
        src="$root"
    else
        src="$work/tree-$k"
        git worktree add --detach -q "$src" "$rev"
    fi
    echo "building ${names[$k]} ($rev) ..." >&2
    (cd "$src" && cargo build --release -q -p shmfifo-benches --bin shmfifo-harness --no-default-features)
    cp "$CARGO_TARGET_DIR/release/shmfifo-harness" "$work/harness-${names[$k]}"
done
n=0
for _ in $(seq 1 "$rounds"); do
    for v in A B B A; do
        n=$((n + 1))
        "$work/harness-$v" --only "$only" --peers raw --sizes 64 --repeats 1 \
            --out "$work/run-$v-$n" > /dev/null 2>&1 || { echo "run $n ($v) failed" >&2; exit 1; }
    done
done
python3 - "$work" "${revs[0]}" "${revs[1]}" <<'EOF'
import csv, glob, re, statistics, sys

work, rev_a, rev_b = sys.argv[1:4]
runs = {}
for path in glob.glob(work + "/run-*/harness.csv"):
    v, n = re.search(r"/run-([AB])-(\d+)/harness", path).groups()
    for r in csv.DictReader(open(path)):
        # A row that failed (its error column set, no figure) pairs with nothing.
        if r["peer"] != "shmfifo" or r.get("error") or not (r["msgs_per_s"] or r["p50_ns"]):
            continue
        # A rate either way: messages a second, or the inverse of the p50.
        rate = float(r["msgs_per_s"]) if r["msgs_per_s"] else 1e9 / float(r["p50_ns"])
        # A section's variants (dedup by id, 1,000 groups ...) each their own series: keyed
        # by section alone, each run kept only its last variant.
        key = r["section"] + (f" ({r['variant']})" if r.get("variant") else "")
        runs.setdefault(key, {})[int(n)] = (v, rate)
print(f"A = {rev_a}, B = {rev_b}: B's rate over A's, pairs in run order")
for section, by_run in sorted(runs.items()):
    # Runs go A B B A: runs 2k+1 and 2k+2 are a pair, whichever of them is missing.
    pairs = {}
    for n, (v, rate) in by_run.items():
        pairs.setdefault((n - 1) // 2, {})[v] = rate
    ratios = [p["B"] / p["A"] for _, p in sorted(pairs.items()) if set(p) == {"A", "B"}]
    if not ratios:
        continue
    up = sum(r >= 1 for r in ratios)
    print(f"{section}: median {statistics.median(ratios):.3f}, {up} of {len(ratios)} pairs >= 1,"
          f" range {min(ratios):.2f}-{max(ratios):.2f}")
    print("  " + " ".join(f"{r:.2f}" for r in ratios))
EOF
