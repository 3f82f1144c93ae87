#!/usr/bin/env bash
# The sync points, three ways, checked against each other both ways: the `SYNC POINT(name)` tags
# in the code (each name at both ends: at least two tags), the table in ARCHITECTURE.md
# ("## Sync points"), and the list in src/protocol/mod.rs's doc (with its count).
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
grep -rhoE 'SYNC POINT\([a-z0-9-]+\)' src --include='*.rs' \
    | sed -E 's/SYNC POINT\((.*)\)/\1/' | sort | uniq -c >"$tmp/counts"
awk '{print $2}' "$tmp/counts" >"$tmp/tags"
awk '/^## Sync points/{on=1; next} on && /^## /{on=0} on && /^\| [a-z0-9-]+ \|/ && $2 != "name" {print $2}' \
    ARCHITECTURE.md | sort -u >"$tmp/table"
# The doc list: the backticked names after "names:" up to the end of that doc paragraph.
awk '/^\/\/! The [0-9]+ names:/{on=1} on{print} on && /\.$/{exit}' src/protocol/mod.rs \
    | grep -oE '`[a-z0-9-]+`' | tr -d '`' | sort -u >"$tmp/doc"
count=$(grep -oE '^//! The [0-9]+ names:' src/protocol/mod.rs | grep -oE '[0-9]+' || echo 0)
fail=0
report() { echo "sync points: $1" >&2; fail=1; }
for pair in "tags:table" "table:tags" "tags:doc" "doc:tags"; do
    a=${pair%%:*} b=${pair#*:}
    missing=$(comm -23 "$tmp/$a" "$tmp/$b")
    [ -z "$missing" ] || report "in the $a, not in the $b: $(echo $missing)"
done
one_end=$(awk '$1 < 2 {print $2}' "$tmp/counts")
[ -z "$one_end" ] || report "tagged at one end only: $(echo $one_end)"
n=$(wc -l <"$tmp/doc")
[ "$count" = "$n" ] || report "src/protocol/mod.rs says $count names and lists $n"
[ "$(wc -l <"$tmp/tags")" -gt 0 ] || report "no tags found"
exit $fail
