#!/usr/bin/env bash
# The Python package as a user gets it: `pip install ./python` into a virtual environment (maturin
# builds the native module with cargo; pip fetches maturin and pytest from PyPI), then its tests.
# boto3 and moto's server mode (a local SQS stand-in on 127.0.0.1, started by the tests) run the
# same boto3 program against SQS's API and against shmfifo's client; boto3 and the aws CLI also
# run against `shmfifo serve`.
# Everything goes under cargo's target directory (CARGO_TARGET_DIR honoured): the virtual
# environment and the `shmfifo` the tests run ($SHMFIFO_BIN, unless it is set already).
set -euo pipefail
cd "$(dirname "$0")/.."
target="$(bash ci/target-dir.sh)"
venv="$target/pyvenv"
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
"$venv/bin/pip" install -q --disable-pip-version-check ./python pytest boto3 "moto[server]" awscli
# `shmfifo serve` (tests/test_serve.py and the serve variants of the client tests).
cargo build -q -p shmfifo-cli
export SHMFIFO_BIN="${SHMFIFO_BIN:-$target/debug/shmfifo}"
"$venv/bin/python" -m pytest -q python/tests
