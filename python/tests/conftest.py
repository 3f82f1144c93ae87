import contextlib
import json
import os
import re
import shutil
import subprocess
import tempfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def qdir():
    """A directory of queues on tmpfs, removed afterwards."""
    d = tempfile.mkdtemp(prefix="shmfifo-py-", dir="/dev/shm")
    yield d
    shutil.rmtree(d, ignore_errors=True)


def target_dir():
    """Cargo's target directory, as cargo reports it (CARGO_TARGET_DIR, relative to the current
    directory, or a config's build.target-dir); ROOT/target when cargo cannot be asked."""
    try:
        out = subprocess.run(
            ["cargo", "metadata", "--format-version", "1", "--no-deps",
             "--manifest-path", os.path.join(ROOT, "Cargo.toml")],
            capture_output=True, check=True, text=True,
        ).stdout
        return json.loads(out)["target_directory"]
    except (OSError, subprocess.CalledProcessError, ValueError, KeyError):
        return os.path.join(ROOT, "target")


def shmfifo_bin():
    """The `shmfifo` command: $SHMFIFO_BIN (ci/python.sh sets it), else the workspace's debug
    build in cargo's target directory."""
    return os.environ.get("SHMFIFO_BIN") or os.path.join(target_dir(), "debug", "shmfifo")


@contextlib.contextmanager
def serve(directory, *extra):
    """`shmfifo serve` on a free loopback port over `directory`; yields its endpoint URL."""
    p = subprocess.Popen(
        [shmfifo_bin(), "serve", "--port", "0", "--dir", directory, *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = p.stdout.readline()
        m = re.search(r"http://[0-9.]+:[0-9]+", line)
        assert m, f"shmfifo serve did not start: {line!r} {p.stderr.read() if p.poll() is not None else ''}"
        yield m.group(0)
    finally:
        p.terminate()
        p.wait(timeout=10)


def boto3_client(endpoint, **kw):
    import boto3

    args = dict(region_name="us-east-1", aws_access_key_id="test", aws_secret_access_key="test")
    args.update(kw)
    return boto3.client("sqs", endpoint_url=endpoint, **args)
