import os
import shutil
import tempfile

import pytest


@pytest.fixture
def qdir():
    """A directory of queues on tmpfs, removed afterwards."""
    d = tempfile.mkdtemp(prefix="shmfifo-py-", dir="/dev/shm")
    yield d
    shutil.rmtree(d, ignore_errors=True)
