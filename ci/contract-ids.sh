#!/usr/bin/env bash
# Every SQS rule id the repository cites (S7, R11, D6, X1–X5, …) has an entry in
# docs/contract.md: a heading `### ID — title`. Looks at the tests (tests/, */tests/,
# python/tests), the sources (src/, */src/, python/shmfifo, ffi/include, fuzz/common,
# fuzz/fuzz_targets, examples/, benches/) and every Markdown file but the contract itself.
# Fails listing each undefined id with where it is cited.
set -euo pipefail
cd "$(dirname "$0")/.."
export LC_ALL=C

contract=docs/contract.md
[ -f "$contract" ] || { echo "contract-ids: $contract is missing" >&2; exit 1; }

# The prefixes the contract defines: Q queue, S send, D dedup, M identity, R receive,
# H receipt handles, V visibility, L delay, T retention, X dead-letter, P purge, C counters,
# TP throughput, F fair queues. An id is a prefix and a number of one or two digits (no
# leading zero), a whole word: not after a word character, `%` (percent-encoding: `%C3`) or
# `::` (Rust paths: `IpAddr::V4`), not followed by a word character (so `H100`, `SHA256`,
# `x86`, `U+FFFD`, `sha256` are not ids). A range `X1–X5` or `S2-S6` cites every id in it.
prefix='(?:TP|[QSDMRHVLTXPCF])'
num='[1-9][0-9]?'
id_rx="(?<![A-Za-z0-9_%])(?<!::)${prefix}${num}(?:(?:\xe2\x80\x93|-)(?:${prefix})?${num})?(?![A-Za-z0-9_])"
# Tokens of that shape that are not rule ids: C language standards, latency percentiles
# written in capitals, the architecture.
not_ids=' C89 C99 C11 C17 C23 P50 P90 P95 P99 X86 '

defined=$(grep -oP "^### \K${prefix}[0-9]+(?= )" "$contract" | sort -u)
[ -n "$defined" ] || { echo "contract-ids: no entries (### ID — title) in $contract" >&2; exit 1; }

# Tracked and new files (outside git: every file but build output).
list_files() {
    if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
        git ls-files --cached --others --exclude-standard
    else
        find . -type f -not -path './target/*' -not -path './.git/*' | sed 's|^\./||'
    fi
}
mapfile -t files < <(
    list_files \
        | grep -E '^(src|tests|examples|benches)/|^[^/]+/(src|tests|examples)/|^python/(tests|shmfifo)/|^ffi/include/|^fuzz/(common|fuzz_targets)/|\.md$' \
        | grep -vxF "$contract" \
        | while read -r f; do [ -f "$f" ] && printf '%s\n' "$f"; done
)

missing=0
cited=0
declare -A seen=()
# grep -o prints each match as FILE:LINE:MATCH.
while IFS= read -r hit; do
    where=${hit%:*}
    token=${hit##*:}
    # Expand a range: prefix, first number, last number.
    token=${token//$'\xe2\x80\x93'/-}
    first=${token%%-*}
    last=${token#*-}
    p=${first%%[0-9]*}
    a=${first#"$p"}
    if [ "$last" = "$token" ]; then
        b=$a
    else
        b=${last#"${last%%[0-9]*}"}
    fi
    if [ "$b" -lt "$a" ]; then b=$a; fi
    for ((n = a; n <= b; n++)); do
        rid="$p$n"
        case "$not_ids" in *" $rid "*) continue ;; esac
        if [ -z "${seen[$rid]+x}" ]; then
            seen[$rid]=1
            cited=$((cited + 1))
        fi
        if ! grep -qxF "$rid" <<<"$defined"; then
            echo "contract-ids: $rid cited at $where has no entry in $contract" >&2
            missing=$((missing + 1))
        fi
    done
done < <(grep -noP "$id_rx" "${files[@]}" || true)

echo "contract-ids: $cited distinct rule ids cited in ${#files[@]} files; $(wc -l <<<"$defined") defined in $contract"
if [ "$missing" -gt 0 ]; then
    echo "contract-ids: $missing citations of undefined rule ids" >&2
    exit 1
fi
