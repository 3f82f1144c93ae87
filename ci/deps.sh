#!/usr/bin/env bash
# Installs the Debian packages the tests need that a fresh machine may lack: C and C++
# compilers, valgrind, pkg-config and binutils (the C ABI tests: the install splits debug info),
# python3 with venv (the C ABI's Python example and the Python package's tests), jq and curl
# (the CLI's recorded session). Installs nothing when every tool is there. Called by
# ci/test-all.sh (the README's test command) and .ci/run.
set -euo pipefail
missing=()
for tool in cc:gcc c++:g++ valgrind:valgrind pkg-config:pkg-config python3:python3 \
    objcopy:binutils readelf:binutils jq:jq curl:curl; do
    command -v "${tool%%:*}" >/dev/null || missing+=("${tool#*:}")
done
# The Python package's tests make a virtual environment (Debian splits venv/ensurepip out).
if ! command -v python3 >/dev/null || ! python3 -c 'import ensurepip, venv' 2>/dev/null; then
    missing+=(python3-venv)
fi
if [ ${#missing[@]} -gt 0 ]; then
    SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
    echo "ci/deps.sh: installing ${missing[*]}" >&2
    $SUDO apt-get update -qq && $SUDO apt-get install -y -qq "${missing[@]}"
fi
