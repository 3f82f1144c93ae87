#!/usr/bin/env bash
# The hot path's deterministic figures per message: instructions, locked
# instructions (atomic read-modify-writes: `lock`-prefixed, and `xchg` with memory, which is
# locked without the prefix) and clock reads, from callgrind.
#
# Each mode of `shmfifo-hotpath` runs under callgrind twice, with N and 2N rounds; the
# difference divided by the messages in between is the figure per message, so setup (creating
# the queue, the first touch of its pages) cancels out. Nothing here depends on time.
#
# Usage: bash benches/callgrind.sh [MODE...] [-n N]     modes: single kept batch batch-typed
#        batch-slots (batch-typed one slot a message: packs off) batch-lent (loan_batch: the
#        zero-copy batch) batch-loans (send_loans, not in the default set) batch-lent-zc (the
#        zero-copy batch both ways: receive_borrowed_into; not in the default set) newgroup
#        dedup dedup-batch (batch-typed with a new dedup id a message) empty grown presized (grown: on a queue that grew to 4x its small slots;
#        presized: one created with them; both over one lap of the 32,768 slots whatever N)
#        c-single (single through the C library: benches/c/hotpath.c, needs a C compiler)
#        large large-zc (64 KiB bodies; not in the default set: slow under valgrind)
# (default: all; N = 2000 rounds). Needs valgrind and objdump.
set -euo pipefail
cd "$(dirname "$0")/.."
n=2000
modes=()
while [ $# -gt 0 ]; do
    case "$1" in
        -n) n="$2"; shift 2 ;;
        *) modes+=("$1"); shift ;;
    esac
done
[ ${#modes[@]} -gt 0 ] || modes=(single kept batch batch-typed batch-slots batch-lent newgroup dedup dedup-batch empty grown presized c-single)
cargo build --release -q -p shmfifo-benches --bin shmfifo-hotpath
bin="$(bash ci/target-dir.sh)/release/shmfifo-hotpath"
out="$(mktemp -d)"
tag=$$
# The C runs' queues too, should a run be killed before it unlinks its own.
trap 'rm -rf "$out"; rm -f /dev/shm/shmfifo-callgrind-c-$tag-*' EXIT
if [[ " ${modes[*]} " == *" c-single "* ]]; then
    # The C library as a C program links it: under its SONAME (read from the library, as
    # ffi/install.sh reads it), found through the program's run path.
    cargo build --release -q -p shmfifo-ffi
    lib="$(bash ci/target-dir.sh)/release/libshmfifo.so"
    soname="$(readelf -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')"
    [ -n "$soname" ] || { echo "c-single: $lib has no SONAME" >&2; exit 1; }
    mkdir -p "$out/lib"
    cp "$lib" "$out/lib/$soname"
    cc -O2 -I ffi/include benches/c/hotpath.c -L "$out/lib" -l:"$soname" \
        -Wl,-rpath,"$out/lib" -o "$out/c-hotpath"
fi
# The runs under valgrind, a pool of one a CPU (each run's counts are its own: running them
# side by side changes no figure, and takes half the time on 2 CPUs).
rounds_of() {
    # grown/presized: the producer's cursor starts at a random slot and moves one slot a
    # message; a whole lap of the class's 32,768 slots between the two runs makes the figure
    # the same wherever it starts (three quarters of the slots in added segments when grown).
    case "$1" in grown | presized) echo 32768 ;; *) echo "$n" ;; esac
}
run_mode() {
    local mode="$1" k="$2" rounds run
    rounds="$(rounds_of "$mode")"
    if [ "$mode" = c-single ]; then
        run=("$out/c-hotpath" $((rounds * k)) "shmfifo-callgrind-c-$tag-$k")
    else
        run=("$bin" "$mode" $((rounds * k)))
    fi
    valgrind --tool=callgrind --callgrind-out-file="$out/$mode.$k" --dump-instr=yes \
        --dump-line=no --compress-pos=no --compress-strings=no \
        "${run[@]}" > "$out/$mode.$k.log" 2>&1 || {
        echo "$mode: the run failed:" >&2
        tail -20 "$out/$mode.$k.log" >&2
        return 1
    }
}
export -f rounds_of run_mode
export n bin out tag
for mode in "${modes[@]}"; do printf '%s 1\n%s 2\n' "$mode" "$mode"; done \
    | xargs -P "$(nproc)" -L 1 bash -c 'run_mode "$1" "$2"' _
printf '%-9s %14s %16s %12s\n' mode instructions locked-atomics clock-reads
for mode in "${modes[@]}"; do
    rounds="$(rounds_of "$mode")"
    per=$rounds
    case "$mode" in batch | batch-typed | batch-slots | batch-lent | batch-loans | batch-lent-zc | dedup-batch) per=$((n * 10)) ;; esac
    python3 - "$out/$mode.1" "$out/$mode.2" "$per" <<'EOF'
import re, subprocess, sys

def locked_addresses(obj, cache={}):
    """Addresses of the locked instructions of an object file (file virtual addresses, as
    callgrind reports them)."""
    if obj not in cache:
        text = subprocess.run(["objdump", "-d", "--no-show-raw-insn", obj],
                              capture_output=True, text=True).stdout
        addrs = set()
        for line in text.splitlines():
            m = re.match(r"\s*([0-9a-f]+):\s+(.*)", line)
            if not m:
                continue
            ins = m.group(2)
            if ins.startswith("lock ") or (ins.startswith("xchg") and "(" in ins):
                addrs.add(int(m.group(1), 16))
        cache[obj] = addrs
    return cache[obj]

def figures(path):
    """(instructions, locked instructions executed, clock_gettime calls) of one run."""
    ob, total, locked, clock = None, 0, 0, 0
    cfn, skip = "", False
    for line in open(path):
        if line.startswith("ob="):
            ob = line[3:].strip()
        elif line.startswith("cfn="):
            cfn = line[4:].strip()
        elif line.startswith("calls="):
            if cfn.startswith("clock_gettime"):
                clock += int(line.split()[0][6:])
            skip = True  # the next cost line is the call's inclusive cost
        elif line.startswith("0x"):
            if skip:
                skip = False
                continue
            a, ir = line.split()[:2]
            ir = int(ir)
            total += ir
            if ob and int(a, 16) in locked_addresses(ob):
                locked += ir
        elif line.startswith("totals:"):
            assert int(line.split()[1]) == total, (path, total)
    return total, locked, clock

f1, f2, per = figures(sys.argv[1]), figures(sys.argv[2]), int(sys.argv[3])
d = [(b - a) / per for a, b in zip(f1, f2)]
mode = sys.argv[1].rsplit("/", 1)[1].split(".")[0]
print(f"{mode:<9} {d[0]:14,.0f} {d[1]:16.1f} {d[2]:12.2f}")
EOF
done
echo "(per message; batch: per message of batches of 10; empty: per poll)"
